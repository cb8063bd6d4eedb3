//! `ReplayProvider`: answers model calls and `ask` steps from a cassette, by key, after the recorded latency on tokio's clock.
//!
//! A call is looked up by its [`CallKey`] (step, round, item, attempt, role), never by the
//! order calls arrive in, so a replay is the same at any concurrency. The recorded
//! latency is slept with `tokio::time::sleep`: the scheduler runs replays with the clock
//! paused, so a 20-minute latency against a 15-minute timeout times out, in the right
//! order, in microseconds of wall time. What a recorded call gives back:
//!
//! | recorded            | returned                                              |
//! | ------------------- | ----------------------------------------------------- |
//! | `response`          | `ModelOutput::Json`, with usage and tool calls        |
//! | `raw`               | `ModelOutput::Text` (the scheduler parses and checks it) |
//! | `error: {status}`   | `ProviderError::from_status` (429/5xx transient); with `retry_after`, `Throttled` |
//! | none of them        | `ProviderError::TimedOut` after the latency           |
//! | not in the cassette | `ProviderError::NotRecorded` naming the key (and the closest unused recording), at once |
//!
//! A call with `expect_prompt` is checked first, against every message the model would be
//! shown ([`ModelRequest::messages`]): a `contains` text missing from all of them, or a
//! `not_contains` text in one of them, is `ProviderError::PromptExpectation` naming the
//! key and the texts, at once, and the run stops (the scenario's story depends on it).
//!
//! A call with a `prompt_hash` whose rendered prompt hashes differently is played back
//! all the same and noted ([`ReplayProvider::stale_prompts`]): the harness reports it as
//! a stale recording naming the key.
//!
//! Every call looked up is counted as used (even if its future is then dropped by a
//! timeout), so [`ReplayProvider::unused`] lists the recorded calls a run never made.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use crate::engine::effects::{HumanChannel, Played, Provider, wait_out};
use crate::engine::provider::{
    BoxFuture, CallKey, CallLog, HumanKey, HumanRequest, ModelOutput, ModelRequest, ModelResponse,
    ProviderError, ToolCall, ToolRequest, ToolResponse, Usage,
};
use crate::engine::run::{DeliveryTarget, RunConfig, RunError, RunOutcome};
use crate::formats::scenario::{Cassette, Fault, Recorded, RecordedCall, RecordedToolCall};
use crate::formats::trace::TraceSink;
use charter_compiler::CompiledSpec;

/// A provider and human channel that plays back a cassette.
#[derive(Debug)]
pub struct ReplayProvider {
    /// The cassette, shared: a library or an exploration replays one many times.
    cassette: Arc<Cassette>,
    /// The places of the cassette's calls in key order, one per key (found by binary
    /// search, so a lookup copies no key).
    order: Vec<usize>,
    humans: BTreeMap<HumanKey, Value>,
    /// Which of `order` a request has asked for.
    used_calls: Mutex<Vec<bool>>,
    used_humans: Mutex<BTreeSet<HumanKey>>,
    stale_prompts: Mutex<Vec<StalePrompt>>,
}

/// A replayed call whose rendered prompt hashes differently from the prompt its recorded
/// answer was given to (DESIGN §10): the answer belongs to another prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StalePrompt {
    pub key: CallKey,
    /// The role called.
    pub role: String,
    /// The recorded `prompt_hash`.
    pub recorded: String,
    /// The hash of the prompt rendered now.
    pub now: String,
    /// The prompt rendered now.
    pub prompt: String,
}

impl ReplayProvider {
    /// A replay of `cassette` (loaded and checked by `Cassette::from_yaml`; should two
    /// calls share a key anyway, the last one wins). A shared cassette is not copied.
    pub fn new(cassette: impl Into<Arc<Cassette>>) -> Self {
        let cassette = cassette.into();
        let calls = &cassette.calls;
        let mut order: Vec<usize> = (0..calls.len()).collect();
        let key = |index: &usize| calls.get(*index).map(key_of);
        if !order.is_sorted_by(|a, b| key(a) < key(b)) {
            order.sort_by(|a, b| key(a).cmp(&key(b)));
            // Of calls that share a key, the last one is kept (the sort is stable).
            order.dedup_by(|later, kept| {
                let same = key(later) == key(kept);
                if same {
                    std::mem::swap(later, kept);
                }
                same
            });
        }
        let used_calls = Mutex::new(vec![false; order.len()]);
        let humans = cassette
            .humans
            .iter()
            .map(|human| {
                (
                    (human.step.clone(), human.round, human.attempt),
                    human.answer.clone(),
                )
            })
            .collect();
        ReplayProvider {
            cassette,
            order,
            humans,
            used_calls,
            used_humans: Mutex::new(BTreeSet::new()),
            stale_prompts: Mutex::new(Vec::new()),
        }
    }

    /// The hashes the cassette was recorded under (none for a hand-written cassette).
    pub fn recorded(&self) -> Option<&Recorded> {
        self.cassette.recorded.as_ref()
    }

    /// The faults to inject (the scheduler applies them).
    pub fn faults(&self) -> &[Fault] {
        &self.cassette.faults
    }

    /// The recorded calls, one per key, in key order.
    fn calls(&self) -> impl Iterator<Item = &RecordedCall> {
        self.order
            .iter()
            .filter_map(|index| self.cassette.calls.get(*index))
    }

    /// Whether the cassette holds a call (model or `tool` step) of `key`.
    pub fn holds(&self, key: &CallKey) -> bool {
        let sought = (
            key.step.as_str(),
            key.round,
            key.item.as_deref(),
            key.attempt,
            key.role.as_deref(),
        );
        let calls = &self.cassette.calls;
        self.order
            .binary_search_by(|index| calls.get(*index).map(key_of).cmp(&Some(sought)))
            .is_ok()
    }

    /// Whether the cassette holds a person's answer to `step` in `round`, `attempt`.
    pub fn holds_human(&self, step: &str, round: u64, attempt: u64) -> bool {
        self.humans
            .contains_key(&(step.to_string(), round, attempt))
    }

    /// Recorded calls no request has asked for yet, in key order.
    pub fn unused(&self) -> Vec<CallKey> {
        let used = lock(&self.used_calls);
        self.calls()
            .zip(used.iter())
            .filter(|(_, used)| !**used)
            .map(|(call, _)| call.key())
            .collect()
    }

    /// The call recorded under `key` that `wanted` accepts, marked used; not recorded:
    /// the error, naming the closest unused recording.
    fn use_call(
        &self,
        key: &CallKey,
        wanted: impl Fn(&RecordedCall) -> bool,
    ) -> Result<&RecordedCall, ProviderError> {
        let sought = (
            key.step.as_str(),
            key.round,
            key.item.as_deref(),
            key.attempt,
            key.role.as_deref(),
        );
        let calls = &self.cassette.calls;
        let found = self
            .order
            .binary_search_by(|index| calls.get(*index).map(key_of).cmp(&Some(sought)))
            .ok()
            .and_then(|place| {
                let index = self.order.get(place)?;
                calls.get(*index).map(|call| (place, call))
            })
            .filter(|(_, call)| wanted(call));
        let Some((place, call)) = found else {
            return Err(self.not_recorded(key));
        };
        if let Some(used) = lock(&self.used_calls).get_mut(place) {
            *used = true;
        }
        Ok(call)
    }

    /// `key` is not recorded: the error, naming the closest unused recording.
    fn not_recorded(&self, key: &CallKey) -> ProviderError {
        let unused = self.unused();
        ProviderError::NotRecorded {
            key: key.clone(),
            closest: crate::formats::scenario::closest_key(key, &unused).map(Box::new),
        }
    }

    /// The calls replayed so far whose prompt differs from the one they were recorded
    /// for, in key order.
    pub fn stale_prompts(&self) -> Vec<StalePrompt> {
        let mut stale = lock(&self.stale_prompts).clone();
        stale.sort_by(|a, b| a.key.cmp(&b.key));
        stale
    }

    /// Recorded human answers no `ask` has asked for yet, as (step, round, attempt), in order.
    pub fn unused_humans(&self) -> Vec<HumanKey> {
        let used = lock(&self.used_humans);
        self.humans
            .keys()
            .filter(|key| !used.contains(*key))
            .cloned()
            .collect()
    }

    /// The recorded answer of `ask` step `step` in `round`, the `attempt`-th time it asks.
    pub fn human(&self, step: &str, round: u64, attempt: u64) -> Result<Value, ProviderError> {
        let key = (step.to_string(), round, attempt);
        let answer =
            self.humans
                .get(&key)
                .cloned()
                .ok_or_else(|| ProviderError::NoHumanAnswer {
                    step: step.to_string(),
                    round,
                    attempt,
                })?;
        lock(&self.used_humans).insert(key);
        if answer.is_null() {
            return Err(nobody_answered(step));
        }
        Ok(answer)
    }

    /// What the call `request` returns and after how long; `Err` when it is not recorded
    /// or its prompt does not meet the call's `expect_prompt`.
    fn play(&self, request: &ModelRequest) -> Result<(&RecordedCall, Played), ProviderError> {
        let key = &request.key;
        let call = self.use_call(key, |call| call.tool.is_none())?;
        if let Some(expect) = &call.expect_prompt {
            let unmet = expect.unmet(&request.messages().join("\n\n"));
            if !unmet.is_empty() {
                return Err(ProviderError::PromptExpectation {
                    key: key.clone(),
                    unmet,
                });
            }
        }
        if let Some(recorded) = &call.prompt_hash {
            let now = crate::formats::canonical::sha256(request.prompt.as_bytes());
            if *recorded != now {
                lock(&self.stale_prompts).push(StalePrompt {
                    key: key.clone(),
                    role: request.role.clone(),
                    recorded: recorded.clone(),
                    now,
                    prompt: request.prompt.clone(),
                });
            }
        }
        Ok((call, playback(call)))
    }
}

/// A recorded call's key as [`CallKey`] orders it, without copying it.
fn key_of(call: &RecordedCall) -> (&str, u64, Option<&str>, u64, Option<&str>) {
    (
        call.step.as_str(),
        call.round,
        call.item.as_deref(),
        call.attempt,
        call.role.as_deref(),
    )
}

/// What a recorded call gives back, and after how long (the table at the top of this
/// module). Also used to resume a run from its journal (`record`).
pub fn playback(call: &RecordedCall) -> (Duration, Result<ModelResponse, ProviderError>) {
    let latency = call.latency.unwrap_or(Duration::ZERO);
    let output = if let Some(response) = &call.response {
        ModelOutput::Json(response.clone())
    } else if let Some(raw) = &call.raw {
        ModelOutput::Text(raw.clone())
    } else if let Some(error) = &call.error {
        let message = error
            .message
            .clone()
            .unwrap_or_else(|| "recorded error".to_string());
        let played = match error.retry_after {
            Some(retry_after) => ProviderError::Throttled {
                status: error.status.unwrap_or(500),
                retry_after,
                message,
            },
            None => ProviderError::from_status(error.status.unwrap_or(500), message),
        };
        return (latency, Err(played));
    } else {
        return (latency, Err(ProviderError::TimedOut { after: latency }));
    };
    let usage = call
        .usage
        .map(|usage| Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        })
        .unwrap_or_default();
    let tool_calls = call.tool_calls.iter().map(played_tool_call).collect();
    (
        latency,
        Ok(ModelResponse {
            output,
            usage,
            tool_calls,
            latency,
        }),
    )
}

/// Gives a call's log what the recorded call did on the way: its notes, and, when it
/// failed or timed out, the tool calls it had made (a successful call returns them in its
/// response). Done before the recorded latency runs, so a replayed timeout keeps them.
pub fn playback_log(
    call: &RecordedCall,
    outcome: &Result<ModelResponse, ProviderError>,
    log: &CallLog,
) {
    for note in &call.notes {
        log.note(note.clone());
    }
    if outcome.is_err() {
        for tool_call in &call.tool_calls {
            log.tool_finished(played_tool_call(tool_call), true);
        }
    }
}

/// A recorded tool call as the model was answered: its `result`, or its `error` as
/// `{"error": message}`; one with neither gave no result (it was cut by its timeout).
pub(crate) fn played_tool_call(recorded: &RecordedToolCall) -> ToolCall {
    let result = match (&recorded.error, &recorded.result) {
        (Some(error), _) => serde_json::json!({
            "error": error.message.clone().unwrap_or_else(|| "the tool failed".to_string())
        }),
        (None, Value::Null) => serde_json::json!({ "error": "the tool gave no result" }),
        (None, result) => result.clone(),
    };
    ToolCall {
        tool: recorded.tool.clone(),
        args: recorded.args.clone(),
        result,
        latency: recorded.latency,
    }
}

/// What a recorded human answer `null` plays: nobody answered the question of `step`
/// (`charter explore`'s `human_timeout`), as a human channel whose wait ended says it.
pub fn nobody_answered(step: &str) -> ProviderError {
    ProviderError::Unanswered {
        message: format!("nobody answered the question of step `{step}`"),
    }
}

/// What a recorded `tool` step call gives back, and after how long: its result, its
/// error, or (with neither) no result, as a call its timeout cut.
pub fn playback_tool(call: &RecordedCall) -> (Duration, ToolResponse) {
    let latency = call.latency.unwrap_or(Duration::ZERO);
    let result = match (&call.result, &call.error) {
        (Some(result), _) => Ok(result.clone()),
        (None, Some(error)) => Err(error
            .message
            .clone()
            .unwrap_or_else(|| "the tool failed".to_string())),
        (None, None) => Err(format!(
            "the tool gave no result within {}",
            crate::formats::scenario::duration_text::format(latency)
        )),
    };
    (latency, ToolResponse { result, latency })
}

impl ReplayProvider {
    /// The recorded `tool` step call `request` asks for, marked used: its latency and
    /// response; `Err` when the recording does not hold it.
    pub fn start_tool(
        &self,
        request: &ToolRequest,
    ) -> Result<(Duration, ToolResponse), ProviderError> {
        let call = self.use_call(&request.key, |call| {
            call.tool.as_deref() == Some(request.tool.as_str())
        })?;
        Ok(playback_tool(call))
    }
}

impl Provider for ReplayProvider {
    fn run_tool(&self, request: ToolRequest) -> BoxFuture<'_, Result<ToolResponse, ProviderError>> {
        Box::pin(async move {
            let (latency, response) = self.start_tool(&request)?;
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            Ok(response)
        })
    }

    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        Box::pin(wait_out(self.start(&request)))
    }

    fn answer_now(&self, request: &ModelRequest) -> Option<Played> {
        Some(self.start(request))
    }
}

impl ReplayProvider {
    /// Starts a recorded call: marks it used, checks its prompt, writes its log, and gives
    /// its latency and answer (a call the recording cannot answer fails at once). A
    /// provider that plays the recording without waiting (a fork's replayed part) gives
    /// the answer at once.
    pub fn start(&self, request: &ModelRequest) -> Played {
        match self.play(request) {
            Ok((call, (latency, outcome))) => {
                playback_log(call, &outcome, &request.log);
                (latency, outcome)
            }
            Err(error) => (Duration::ZERO, Err(error)),
        }
    }
}

impl HumanChannel for ReplayProvider {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        Box::pin(async move { self.human(&request.step, request.round, request.attempt) })
    }
}

/// The set behind a mutex; a poisoned lock (a panic elsewhere) still holds valid data.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a replay of a cassette produced: the outcome, and the recordings it never used.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayReport {
    pub outcome: RunOutcome,
    /// Recorded calls the run never made.
    pub unused_calls: Vec<crate::engine::provider::CallKey>,
    /// Recorded human answers never asked for: (step, round, attempt).
    pub unused_humans: Vec<crate::engine::provider::HumanKey>,
    /// Calls whose prompt differs from the one their recorded answer was given to.
    pub stale_prompts: Vec<StalePrompt>,
    /// Model calls per step (what `expect.calls` compares).
    pub calls_per_step: std::collections::BTreeMap<String, u64>,
    /// The events the trajectory checks of `expect` read (steps started, model and tool
    /// calls, gates), in order.
    pub trajectory: Vec<crate::formats::trace::TraceEvent>,
}

/// A sink that counts `model_call` events per step, and keeps the events trajectory
/// checks read, on the way to its inner sink.
struct CountingSink<'a> {
    inner: &'a mut dyn TraceSink,
    calls: std::collections::BTreeMap<String, u64>,
    trajectory: Vec<crate::formats::trace::TraceEvent>,
}

impl CountingSink<'_> {
    fn count(&mut self, event: &crate::formats::trace::TraceEvent) {
        use crate::formats::trace::EventKind;
        if matches!(
            event.kind,
            EventKind::StepStarted { .. }
                | EventKind::ModelCall { .. }
                | EventKind::ToolCall { .. }
                | EventKind::ToolTimeout { .. }
                | EventKind::Gate { .. }
        ) {
            self.trajectory.push(event.clone());
        }
        if let (crate::formats::trace::EventKind::ModelCall { .. }, Some(step)) =
            (&event.kind, &event.step)
        {
            match self.calls.get_mut(&**step) {
                Some(calls) => *calls += 1,
                None => {
                    self.calls.insert(step.to_string(), 1);
                }
            }
        }
    }
}

impl TraceSink for CountingSink<'_> {
    fn append(
        &mut self,
        event: &crate::formats::trace::TraceEvent,
    ) -> Result<(), crate::formats::trace::TraceError> {
        self.count(event);
        self.inner.append(event)
    }

    fn append_owned(
        &mut self,
        event: crate::formats::trace::TraceEvent,
    ) -> Result<(), crate::formats::trace::TraceError> {
        self.count(&event);
        self.inner.append_owned(event)
    }
}

/// Replays `cassette` for `spec` on `input` on a paused clock: calls and human answers
/// come from the cassette, its faults are injected, the delivery goes to `delivery`.
pub fn replay_cassette(
    spec: &CompiledSpec,
    input: Value,
    cassette: impl Into<Arc<crate::formats::scenario::Cassette>>,
    delivery: DeliveryTarget,
    sink: &mut dyn TraceSink,
) -> Result<ReplayReport, RunError> {
    replay_cassette_in(spec, input, cassette, delivery, None, sink)
}

/// [`replay_cassette`] as one turn of the conversation `session` (DESIGN §9.4): the
/// outcome's `session` is the one the next turn replays in.
pub fn replay_cassette_in(
    spec: &CompiledSpec,
    input: Value,
    cassette: impl Into<Arc<crate::formats::scenario::Cassette>>,
    delivery: DeliveryTarget,
    session: Option<crate::engine::session::Session>,
    sink: &mut dyn TraceSink,
) -> Result<ReplayReport, RunError> {
    let replay = Arc::new(ReplayProvider::new(cassette));
    let config = RunConfig {
        delivery,
        faults: replay.faults().to_vec(),
        cancel: None,
        observer: None,
        session,
    };
    let mut counting = CountingSink {
        inner: sink,
        calls: std::collections::BTreeMap::new(),
        trajectory: Vec::new(),
    };
    let outcome = crate::engine::run::replay_blocking(
        spec,
        input,
        crate::engine::effects::Effects::new(replay.clone(), replay.as_ref(), &mut counting)
            .with_files(&crate::world::files::LocalFiles),
        &config,
    )?;
    Ok(ReplayReport {
        outcome,
        unused_calls: replay.unused(),
        unused_humans: replay.unused_humans(),
        stale_prompts: replay.stale_prompts(),
        calls_per_step: counting.calls,
        trajectory: counting.trajectory,
    })
}

#[cfg(test)]
mod tests;
