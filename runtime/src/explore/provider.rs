//! `ExploreProvider`: plays a variant's cassette by key, and answers the calls the recording lacks with the nearest recorded answer of the same step and item.
//!
//! A fault is transient: it is baked into its own entry only, so the call's next attempt
//! (a key the recording lacks) gets the nearest *unfaulted* recorded answer — the one the
//! fault replaced. A repair round the base never ran gets the answers of the nearest
//! round the base did run. Every answer served is kept with the key it was served for,
//! so a variant can be saved as a cassette that replays without this lookup.
//! `expect_prompt` is not checked: a variant tells another story than the recording's.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::engine::effects::{HumanChannel, Played, Provider, wait_out};
use crate::engine::provider::{
    BoxFuture, CallKey, HumanKey, HumanRequest, ModelRequest, ModelResponse, ProviderError,
    ToolRequest, ToolResponse,
};
use crate::formats::scenario::{Cassette, RecordedCall, RecordedHuman};
use crate::world::replay::{playback, playback_log, playback_tool};

/// What identifies "the same step and item" for the nearest-answer lookup.
type Family = (String, Option<String>, Option<String>, bool);

fn family(key: &CallKey, tool: bool) -> Family {
    (key.step.clone(), key.item.clone(), key.role.clone(), tool)
}

/// A provider and human channel for one variant.
#[derive(Debug)]
pub struct ExploreProvider {
    calls: BTreeMap<CallKey, RecordedCall>,
    base: BTreeMap<Family, Vec<RecordedCall>>,
    humans: BTreeMap<HumanKey, Value>,
    base_humans: BTreeMap<String, Vec<RecordedHuman>>,
    served: Mutex<BTreeMap<CallKey, RecordedCall>>,
    served_humans: Mutex<BTreeMap<HumanKey, RecordedHuman>>,
    model_calls: AtomicU64,
    call_limit: u64,
    /// Set when a call or an `ask` had no answer at all (nothing of its step and item).
    missing: AtomicBool,
}

impl ExploreProvider {
    /// Plays `variant` (the base with faults baked in); the calls it lacks come from
    /// `base`. After `call_limit` model calls every further call is refused (the run is
    /// then reported as not ending).
    pub fn new(variant: &Cassette, base: &Cassette, call_limit: u64) -> Self {
        let calls = variant
            .calls
            .iter()
            .map(|call| (call.key(), without_expectation(call)))
            .collect();
        let mut families: BTreeMap<Family, Vec<RecordedCall>> = BTreeMap::new();
        for call in &base.calls {
            families
                .entry(family(&call.key(), call.tool.is_some()))
                .or_default()
                .push(without_expectation(call));
        }
        let humans = variant
            .humans
            .iter()
            .map(|human| {
                (
                    (human.step.clone(), human.round, human.attempt),
                    human.answer.clone(),
                )
            })
            .collect();
        let mut base_humans: BTreeMap<String, Vec<RecordedHuman>> = BTreeMap::new();
        for human in &base.humans {
            base_humans
                .entry(human.step.clone())
                .or_default()
                .push(human.clone());
        }
        ExploreProvider {
            calls,
            base: families,
            humans,
            base_humans,
            served: Mutex::new(BTreeMap::new()),
            served_humans: Mutex::new(BTreeMap::new()),
            model_calls: AtomicU64::new(0),
            call_limit,
            missing: AtomicBool::new(false),
        }
    }

    /// Model calls made so far.
    pub fn model_calls(&self) -> u64 {
        self.model_calls.load(Ordering::Relaxed)
    }

    /// Whether a call or an `ask` found no answer of its step and item at all.
    pub fn missing(&self) -> bool {
        self.missing.load(Ordering::Relaxed)
    }

    /// Whether the call limit was reached.
    pub fn hit_limit(&self) -> bool {
        self.model_calls() > self.call_limit
    }

    /// Every answer served, as a cassette's calls and humans under the keys they were
    /// served for (a nearest answer moved to its new key), in key order.
    pub fn served(&self) -> (Vec<RecordedCall>, Vec<RecordedHuman>) {
        let calls = lock(&self.served).values().cloned().collect();
        let humans = lock(&self.served_humans).values().cloned().collect();
        (calls, humans)
    }

    /// The answer a call of `key` gets (a `tool` step's call with `tool`): its own entry,
    /// or the nearest of its step and item.
    pub fn answer_for(&self, key: &CallKey, tool: bool) -> Option<RecordedCall> {
        self.lookup(key, tool)
    }

    /// The entry for `key`: its own, or the nearest of its family (same step, item,
    /// judge role and kind), by round then attempt, the later one on a tie.
    fn lookup(&self, key: &CallKey, tool: bool) -> Option<RecordedCall> {
        if let Some(call) = self
            .calls
            .get(key)
            .filter(|call| call.tool.is_some() == tool)
        {
            return Some(call.clone());
        }
        let candidates = self.base.get(&family(key, tool))?;
        let nearest = candidates.iter().min_by_key(|call| {
            (
                call.round.abs_diff(key.round),
                call.attempt.abs_diff(key.attempt),
                std::cmp::Reverse((call.round, call.attempt)),
            )
        })?;
        let mut moved = nearest.clone();
        moved.round = key.round;
        moved.attempt = key.attempt;
        Some(moved)
    }

    fn serve(&self, key: &CallKey, tool: bool) -> Result<RecordedCall, ProviderError> {
        let call = self.lookup(key, tool).ok_or_else(|| {
            self.missing.store(true, Ordering::Relaxed);
            ProviderError::NotRecorded {
                key: key.clone(),
                closest: None,
            }
        })?;
        lock(&self.served).insert(key.clone(), call.clone());
        Ok(call)
    }
}

impl ExploreProvider {
    /// Starts a call: counts it against the variant's limit, serves its answer and
    /// writes its log (a call past the limit, or one nothing answers, fails at once).
    fn start(&self, request: &ModelRequest) -> Played {
        let made = self.model_calls.fetch_add(1, Ordering::Relaxed) + 1;
        if made > self.call_limit {
            let error = ProviderError::NotRecorded {
                key: request.key.clone(),
                closest: None,
            };
            return (Duration::ZERO, Err(error));
        }
        let call = match self.serve(&request.key, false) {
            Ok(call) => call,
            Err(error) => return (Duration::ZERO, Err(error)),
        };
        let (latency, outcome) = playback(&call);
        playback_log(&call, &outcome, &request.log);
        (latency, outcome)
    }
}

/// A recorded answer served to a variant: its prompt is the variant's (a fault changes
/// what later roles are shown), so neither the base's prompt expectation nor its prompt
/// hash goes with it.
fn without_expectation(call: &RecordedCall) -> RecordedCall {
    RecordedCall {
        expect_prompt: None,
        prompt_hash: None,
        turn: 1,
        ..call.clone()
    }
}

impl Provider for ExploreProvider {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        Box::pin(wait_out(self.start(&request)))
    }

    fn answer_now(&self, request: &ModelRequest) -> Option<Played> {
        Some(self.start(request))
    }

    fn run_tool(&self, request: ToolRequest) -> BoxFuture<'_, Result<ToolResponse, ProviderError>> {
        Box::pin(async move {
            let call = self.serve(&request.key, true)?;
            let (latency, response) = playback_tool(&call);
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            Ok(response)
        })
    }
}

impl HumanChannel for ExploreProvider {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        Box::pin(async move {
            let key: HumanKey = (request.step.clone(), request.round, request.attempt);
            let answer = match self.humans.get(&key) {
                Some(answer) => Some(answer.clone()),
                None => self.base_humans.get(&request.step).and_then(|answers| {
                    answers
                        .iter()
                        .min_by_key(|human| {
                            (
                                human.round.abs_diff(request.round),
                                human.attempt.abs_diff(request.attempt),
                                std::cmp::Reverse((human.round, human.attempt)),
                            )
                        })
                        .map(|human| human.answer.clone())
                }),
            };
            let answer = answer.ok_or_else(|| {
                self.missing.store(true, Ordering::Relaxed);
                ProviderError::NoHumanAnswer {
                    step: request.step.clone(),
                    round: request.round,
                    attempt: request.attempt,
                }
            })?;
            lock(&self.served_humans).insert(
                key,
                RecordedHuman {
                    turn: 1,
                    step: request.step.clone(),
                    round: request.round,
                    attempt: request.attempt,
                    answer: answer.clone(),
                },
            );
            // A `null` answer is a question nobody answered (`human_timeout`): kept as
            // served, so a saved variant replays it the same way.
            if answer.is_null() {
                return Err(crate::world::replay::nobody_answered(&request.step));
            }
            Ok(answer)
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
