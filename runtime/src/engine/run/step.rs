//! Role calls: one attempt per job, with the provider-retry policy (doubling backoff, per-call timeout, contract violations re-asked) decided by the scheduler.
//!
//! A job makes exactly one provider call (or waits one backoff) and gives its result back
//! to the scheduler; it never touches run state. A call to a live provider is a tokio task
//! that replies over the scheduler's channel; a backoff, and a call to a provider that
//! answers at once (a recording), is a job the scheduler times itself. The
//! scheduler decides, per reply, whether the call is done, retried or failed, and writes
//! every event (`model_call`, `model_result`, `timeout`, `provider_error`,
//! `contract_violation`, `tool_call`, `tool_denied`, `retry{provider}`) to the trace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use charter_compiler::graph::{CompiledSpec, EffectIr, MessagesIr, RoleIr, StepKind};
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::outcome::RunError;
use super::{Halt, Scheduler};
use crate::engine::chat::ChatMessages;
use crate::engine::effects::{Clock, Provider};
use crate::engine::provider::{
    CallKey, CallLog, CallLogEntries, CallSettings, ModelOutput, ModelRequest, ModelResponse,
    ProviderError, ToolCall, Usage,
};
use crate::engine::validate::{Validator, Violation, parse_output, violations_text};
use crate::formats::canonical::{canonical_json, sha256};
use crate::formats::trace::{BudgetKind, EventKind, RetryKind};

/// The provider-retry policy of one role: how many retries, and the first delay (doubling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub retries: u64,
    pub backoff_ms: u64,
}

impl RetryPolicy {
    /// The delay before retry number `retry` (1-based): `backoff * 2^(retry-1)`, no jitter.
    pub fn delay_ms(self, retry: u64) -> u64 {
        let shift = retry.saturating_sub(1).min(20) as u32;
        self.backoff_ms.saturating_mul(1u64 << shift)
    }
}

/// One role call in progress: its identity, its inputs, and its provider retries.
#[derive(Clone, Debug)]
pub struct CallUnit {
    /// The step (shared with each event about the call).
    pub step: Arc<str>,
    pub item: Option<String>,
    /// The role called.
    pub role: String,
    /// `Some(role)` for a per-item check's judge (the key carries `role`).
    pub key_role: Option<String>,
    /// The role's inputs, in the order of its input contracts (shared with each
    /// attempt's prompt).
    pub inputs: Vec<Arc<Value>>,
    /// Why this call runs again, if it does (DESIGN §8.2), as its prompt reads it
    /// ([`crate::engine::feedback::Feedback::into_value`]).
    pub feedback: Option<Arc<Value>>,
    /// Dependencies' outputs (context isolation: nothing else).
    pub context: Map<String, Value>,
    /// Provider retries used so far.
    pub retries_used: u64,
    /// The validation error of the previous attempt, given back to the model.
    pub validation_error: Option<String>,
    /// The attempt in flight.
    pub attempt: u64,
    /// Files the last reply's permitted `write` tools wrote: path -> content.
    pub artifacts: BTreeMap<String, String>,
}

impl CallUnit {
    pub fn new(step: &str, item: Option<&str>, role: &str, inputs: Vec<Arc<Value>>) -> CallUnit {
        CallUnit {
            step: Arc::from(step),
            item: item.map(str::to_string),
            role: role.to_string(),
            key_role: None,
            inputs,
            feedback: None,
            context: Map::new(),
            retries_used: 0,
            validation_error: None,
            attempt: 0,
            artifacts: BTreeMap::new(),
        }
    }
}

/// What one reply did to a call.
#[derive(Clone, Debug, PartialEq)]
pub enum CallUpdate {
    /// A retry was scheduled (a backoff timer job is running).
    Retrying,
    /// The call produced a valid output.
    Output(Value),
    /// The call failed for good (retries exhausted or a permanent error).
    Failed(String),
}

/// Why a job's call gave no reply.
#[derive(Clone, Debug, PartialEq)]
pub enum CallFailure {
    TimedOut { after_ms: u64 },
    Provider(ProviderError),
}

/// What a reply comes to before the retry decision ([`Scheduler::on_reply`]).
enum ReplyClass {
    /// A valid output: the call is done.
    Output(Value),
    /// A permanent provider error: the call fails without a retry.
    Failed(String),
    /// A contract violation or a transient failure: retried while the role's retries
    /// last.
    Retryable(RetryableReply),
}

/// A reply that may be retried: what went wrong, and what decides whether and when.
struct RetryableReply {
    /// What went wrong, as the `retry` event's reason and the failure's message say it.
    problem: String,
    /// The `write`/`external` tools the attempt ran, which a retry would run again.
    effects: Vec<String>,
    /// How long the server asked to wait (`Retry-After`), if it did.
    retry_after_ms: Option<u64>,
}

/// What a job sends back.
#[derive(Debug)]
pub enum JobBody {
    /// A backoff timer ran out: make the next attempt.
    Wake,
    /// A provider call finished, with what it did on the way (the tool calls a failed
    /// or timed-out attempt ran, the provider's notes).
    Reply(Result<ModelResponse, CallFailure>, CallLogEntries),
}

/// A message from a job to the scheduler.
#[derive(Debug)]
pub struct JobMessage {
    pub job: u64,
    pub body: JobBody,
}

/// Spawns a job that makes one provider call, under the role's timeout (a timer of the
/// run's clock).
pub fn spawn_call(
    provider: Arc<dyn Provider>,
    clock: Arc<dyn Clock>,
    request: ModelRequest,
    timeout_ms: Option<u64>,
    job: u64,
    sender: UnboundedSender<JobMessage>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let log = request.log.clone();
        let call = provider.complete(request);
        let result = match timeout_ms {
            Some(limit) => {
                let deadline = clock.now() + Duration::from_millis(limit);
                tokio::select! {
                    biased;
                    result = call => result.map_err(CallFailure::Provider),
                    () = clock.sleep_until(deadline) => Err(CallFailure::TimedOut { after_ms: limit }),
                }
            }
            None => call.await.map_err(CallFailure::Provider),
        };
        let _ = sender.send(JobMessage {
            job,
            body: JobBody::Reply(result, log.entries()),
        });
    })
}

impl Scheduler<'_> {
    /// Makes the next attempt of `unit`: checks the budget, numbers the attempt, writes
    /// `model_call` and spawns the call. Returns the job id.
    pub(super) fn issue_attempt(&mut self, unit: &mut CallUnit) -> Result<u64, Halt> {
        self.check_budget()?;
        let spec = self.spec;
        let Some(role) = spec.roles.get(&unit.role) else {
            return Err(Halt::Error(RunError::Flow(format!(
                "step `{}` calls unknown role `{}`",
                unit.step, unit.role
            ))));
        };
        unit.attempt =
            self.state
                .next_attempt(&unit.step, unit.item.as_deref(), unit.key_role.as_deref());
        let key = CallKey {
            step: unit.step.to_string(),
            round: self.state.round,
            item: unit.item.clone(),
            attempt: unit.attempt,
            role: unit.key_role.clone(),
        };
        let context = crate::engine::prompt::PromptContext {
            feedback: unit.feedback.clone(),
            history: self.history_for(&unit.role).map(Arc::new),
            // `run` changes with every call: built only for a template that reads it.
            run: self
                .prompts
                .reads_run(&unit.role)
                .then(|| self.state.run_shared()),
            session: self.state.session.clone(),
        };
        let mut prompt = self
            .prompts
            .render_shared(&unit.role, &unit.inputs, &context)
            .map_err(|error| Halt::Error(RunError::Flow(error.to_string())))?;
        // Context isolation: a work item sees its own order and the outputs of the items it
        // depends on, and nothing else of the run.
        if !unit.context.is_empty() {
            prompt.push_str("\n\n## Outputs of the work items this one depends on\n");
            for (id, output) in &unit.context {
                prompt.push_str(&format!("- {id}: {}\n", canonical_json(output)));
            }
        }
        // A `messages: chat` role: the rendered prompt is the system message, then the
        // session's turns and this request (DESIGN §9.4); the transcript is what is hashed.
        let chat = (role.messages == MessagesIr::Chat).then(|| {
            let chat = ChatMessages::build(
                spec,
                role,
                std::mem::take(&mut prompt),
                unit.inputs.first().map(|input| input.as_ref()),
                self.state.session.as_deref(),
            );
            prompt = chat.transcript();
            Arc::new(chat)
        });
        let output_schema = self
            .prompts
            .output_schema(&unit.role)
            .map_err(|error| Halt::Error(RunError::Flow(error.to_string())))?;
        let (model, mut settings) = self.role_settings(&unit.role, role);
        if !role.permits.is_empty() {
            // The permits read this call's inputs (its work item).
            Arc::make_mut(&mut settings).inputs =
                crate::engine::permit::permit_inputs(role, &unit.inputs);
        }
        self.emit_call(
            unit,
            EventKind::ModelCall {
                role: unit.role.clone(),
                model: model.clone(),
                prompt_hash: sha256(prompt.as_bytes()),
            },
        )?;
        let log = CallLog::new(|| key.clone(), self.config.observer.clone());
        let request = ModelRequest {
            key,
            role: unit.role.clone(),
            model,
            prompt,
            chat,
            output_schema,
            tools: role.tools.clone(),
            max_tool_calls: role.max_tool_calls,
            previous_error: unit.validation_error.clone(),
            settings,
            log,
        };
        // Started when the scheduler next waits, as the job of a task or its own.
        let job = self.next_job();
        self.calls.push((job, request, role.timeout_ms));
        Ok(job)
    }

    /// What every call of `role` (named `name`) sends besides its prompt: the model's
    /// `provider:model` and the call settings, made on the role's first call of the run.
    fn role_settings(&mut self, name: &str, role: &RoleIr) -> (String, Arc<CallSettings>) {
        if let Some((_, model, settings)) = self.role_settings.iter().find(|(n, ..)| n == name) {
            return (model.clone(), Arc::clone(settings));
        }
        let model = format!("{}:{}", role.model.provider, role.model.model);
        let settings = Arc::new(CallSettings {
            params: role.model.params.clone(),
            tool_choice: role.tool_choice.clone(),
            permits: role.permits.clone(),
            meta: meta_value(role),
            inputs: Value::Null,
        });
        self.role_settings
            .push((name.to_string(), model.clone(), Arc::clone(&settings)));
        (model, settings)
    }

    /// Applies a finished call to `unit`: usage and budgets, tool calls, the contract
    /// check, and the retry decision. `Retrying` means a backoff timer job now runs
    /// (its id is [`Scheduler::last_job`]).
    ///
    /// A pipeline: trace the provider's notes, classify the reply (a valid output, a
    /// contract violation, a transient failure, or a failure for good), then, for a reply
    /// that may be retried, decide whether and when to retry.
    pub(super) fn on_reply(
        &mut self,
        unit: &mut CallUnit,
        result: Result<ModelResponse, CallFailure>,
        log: CallLogEntries,
    ) -> Result<CallUpdate, Halt> {
        let spec = self.spec;
        let Some(role) = spec.roles.get(&unit.role) else {
            return Err(Halt::Error(RunError::Flow(format!(
                "unknown role `{}`",
                unit.role
            ))));
        };
        self.trace_provider_notes(unit, role, &log.notes)?;
        let class = match result {
            Ok(response) => self.classify_response(unit, role, response)?,
            Err(failure) => self.classify_failure(unit, role, failure, &log.tool_calls)?,
        };
        match class {
            ReplyClass::Output(output) => Ok(CallUpdate::Output(output)),
            ReplyClass::Failed(message) => Ok(CallUpdate::Failed(message)),
            ReplyClass::Retryable(reply) => self.retry_or_fail(unit, role, reply),
        }
    }

    /// Writes a `provider_note` for each note the provider made during the call.
    fn trace_provider_notes(
        &mut self,
        unit: &CallUnit,
        role: &RoleIr,
        notes: &[String],
    ) -> Result<(), Halt> {
        for message in notes {
            self.emit_call(
                unit,
                EventKind::ProviderNote {
                    model: format!("{}:{}", role.model.provider, role.model.model),
                    message: message.clone(),
                },
            )?;
        }
        Ok(())
    }

    /// Classifies a call that gave no reply: a timeout or a transient provider error may
    /// be retried, a permanent one fails the call, and a missing recording, an unmet
    /// prompt expectation or a fatal error stops the run. `tool_calls` are what the
    /// attempt ran before it failed.
    fn classify_failure(
        &mut self,
        unit: &mut CallUnit,
        role: &RoleIr,
        failure: CallFailure,
        tool_calls: &[ToolCall],
    ) -> Result<ReplyClass, Halt> {
        // What a failed attempt ran is recorded like what a successful one ran: a retry
        // must not hide (or silently repeat) its side effects.
        let mut effects = Vec::new();
        if !tool_calls.is_empty() {
            effects = self.tool_calls(unit, role, tool_calls)?;
        }
        // A server that said when to come back (`Retry-After`) is not asked sooner.
        let retry_after_ms = match &failure {
            CallFailure::Provider(error) => error
                .retry_after()
                .map(|wait| u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
            CallFailure::TimedOut { .. } => None,
        };
        let problem = match failure {
            CallFailure::TimedOut { after_ms } => {
                self.emit_call(unit, EventKind::Timeout { after_ms })?;
                format!("timed out after {after_ms} ms")
            }
            CallFailure::Provider(ProviderError::TimedOut { after }) => {
                let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
                self.emit_call(unit, EventKind::Timeout { after_ms })?;
                format!("no response after {after_ms} ms")
            }
            CallFailure::Provider(ProviderError::NotRecorded { key, closest }) => {
                return Err(Halt::Error(RunError::Unrecorded { key, closest }));
            }
            CallFailure::Provider(ProviderError::PromptExpectation { key, unmet }) => {
                return Err(Halt::Error(RunError::PromptExpectation { key, unmet }));
            }
            CallFailure::Provider(error @ ProviderError::JournalUnwritable { .. }) => {
                return Err(self.journal_stop(error.to_string()));
            }
            CallFailure::Provider(error) if error.is_fatal() => {
                return Err(Halt::Error(RunError::Provider(error.to_string())));
            }
            CallFailure::Provider(error) => {
                if !error.is_transient() {
                    return Ok(ReplyClass::Failed(error.to_string()));
                }
                error.to_string()
            }
        };
        Ok(ReplyClass::Retryable(RetryableReply {
            problem,
            effects,
            retry_after_ms,
        }))
    }

    /// Classifies a reply: traces it, then checks its output against the role's
    /// contract. A valid output ends the call; a contract violation is given back to the
    /// model as feedback and may be retried.
    fn classify_response(
        &mut self,
        unit: &mut CallUnit,
        role: &RoleIr,
        response: ModelResponse,
    ) -> Result<ReplyClass, Halt> {
        let effects = self.trace_response(unit, role, &response)?;
        match self.check_output(unit, role, response.output) {
            Ok(output) => {
                self.check_budget()?;
                unit.validation_error = None;
                Ok(ReplyClass::Output(output))
            }
            Err((violations, answered)) => {
                let problem = self.record_contract_violation(unit, role, violations, answered)?;
                Ok(ReplyClass::Retryable(RetryableReply {
                    problem,
                    effects,
                    retry_after_ms: None,
                }))
            }
        }
    }

    /// Charges the reply's usage, writes `model_result` and the tool calls the reply
    /// made, and tells the observer the answer. Returns the `write`/`external` tools
    /// the attempt ran (see [`Scheduler::tool_calls`]).
    fn trace_response(
        &mut self,
        unit: &mut CallUnit,
        role: &RoleIr,
        response: &ModelResponse,
    ) -> Result<Vec<String>, Halt> {
        self.account(role, response.usage);
        self.emit_call(
            unit,
            EventKind::ModelResult {
                role: unit.role.clone(),
                input_tokens: response.usage.input_tokens,
                output_tokens: response.usage.output_tokens,
                latency_ms: u64::try_from(response.latency.as_millis()).unwrap_or(u64::MAX),
            },
        )?;
        let effects = self.tool_calls(unit, role, &response.tool_calls)?;
        if let Some(observer) = &self.config.observer {
            let key = self.call_key(unit);
            let answer = match &response.output {
                ModelOutput::Json(value) => canonical_json(value),
                ModelOutput::Text(text) => text.clone(),
            };
            observer.model_answered(&key, &answer);
        }
        Ok(effects)
    }

    /// The reply's output, parsed and checked against the role's output contract (and,
    /// in a `finalize` step, against the candidates). The answer comes back with the
    /// violations, for their feedback (one that names no candidate comes back as
    /// checked, defaults filled in).
    fn check_output(
        &self,
        unit: &CallUnit,
        role: &RoleIr,
        output: ModelOutput,
    ) -> Result<Value, (Vec<Violation>, Option<Value>)> {
        let parsed = match output {
            ModelOutput::Json(value) => Ok(value),
            ModelOutput::Text(text) => parse_output(&text).map_err(|violation| vec![violation]),
        };
        let validator = Validator::for_spec(self.spec);
        match parsed {
            Ok(value) => match validator.validate_owned(&role.output, value) {
                Ok(output) => match self.names_a_candidate(unit, &output) {
                    Ok(()) => Ok(output),
                    Err(violations) => Err((violations, Some(output))),
                },
                Err((violations, value)) => Err((violations, Some(value))),
            },
            Err(violations) => Err((violations, None)),
        }
    }

    /// Records a contract violation: the feedback the next attempt's prompt shows, the
    /// `contract_violation` event, and the error given back to the model. Returns the
    /// problem as the retry's reason reads it.
    fn record_contract_violation(
        &mut self,
        unit: &mut CallUnit,
        role: &RoleIr,
        violations: Vec<Violation>,
        answered: Option<Value>,
    ) -> Result<String, Halt> {
        let text = violations_text(&violations);
        unit.feedback = Some(Arc::new(
            crate::engine::feedback::contract(
                unit.feedback
                    .take()
                    .and_then(|given| crate::engine::feedback::Feedback::from_value(&given)),
                self.state.round,
                &role.output,
                &violations,
                answered,
            )
            .into_value(),
        ));
        self.emit_call(
            unit,
            EventKind::ContractViolation {
                contract: role.output.clone(),
                tool: None,
                violations,
            },
        )?;
        self.check_budget()?;
        unit.validation_error = Some(text.clone());
        Ok(format!("contract violation: {}", text.replace('\n', "; ")))
    }

    /// Decides a reply that may be retried: it fails when the server's wait is past the
    /// role's timeout, when the attempt ran effects a retry would repeat, or when the
    /// role's retries are used up; otherwise the retry is scheduled after its backoff.
    fn retry_or_fail(
        &mut self,
        unit: &mut CallUnit,
        role: &RoleIr,
        reply: RetryableReply,
    ) -> Result<CallUpdate, Halt> {
        let RetryableReply {
            problem,
            effects,
            retry_after_ms,
        } = reply;
        // The `on_exhausted` summary is one call, whatever the role's `retry`.
        let retries_allowed = if self.summarizing { 0 } else { role.retry };
        if let Some(wait_ms) = retry_after_ms
            && let Some(failure) =
                self.check_server_wait(unit, role, &problem, wait_ms, retries_allowed)?
        {
            return Ok(CallUpdate::Failed(failure));
        }
        if unit.retries_used < retries_allowed && !effects.is_empty() && !role.retry_after_effects {
            return Ok(CallUpdate::Failed(format!(
                "{problem}; not retried: this attempt ran {} (a `write`/`external` effect a \
                 retry would repeat; `retry_after_effects: true` on role `{}` allows it)",
                effects
                    .iter()
                    .map(|tool| format!("`{tool}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                unit.role
            )));
        }
        if unit.retries_used >= retries_allowed {
            let retries = unit.retries_used;
            return Ok(CallUpdate::Failed(if retries == 0 {
                problem
            } else {
                format!("{problem} (after {retries} provider retries)")
            }));
        }
        self.schedule_retry(unit, role, problem, retry_after_ms, retries_allowed)
    }

    /// Checks the wait a server asked for (`Retry-After`, `wait_ms`) before a retry.
    /// The wait counts against the role's timeout and the wall budget: a wait past the
    /// timeout is not made (the call fails, with the returned message), nor one that
    /// would use up what is left of the wall budget, which would leave no time for the
    /// retry it waits for (the run stops). The provider has already cut the wait to its
    /// cap.
    fn check_server_wait(
        &mut self,
        unit: &CallUnit,
        role: &RoleIr,
        problem: &str,
        wait_ms: u64,
        retries_allowed: u64,
    ) -> Result<Option<String>, Halt> {
        if let Some(limit_ms) = role.timeout_ms
            && wait_ms > limit_ms
        {
            return Ok(Some(format!(
                "{problem} (the server asks to wait {wait_ms} ms, longer than the role's \
                 timeout of {limit_ms} ms)"
            )));
        }
        let elapsed = self.elapsed();
        self.state.meter.set_elapsed(elapsed);
        if unit.retries_used < retries_allowed
            && self
                .state
                .meter
                .wall_left()
                .is_some_and(|left| Duration::from_millis(wait_ms) >= left)
        {
            return Err(self.budget_stop(BudgetKind::Wall));
        }
        Ok(None)
    }

    /// Schedules the next attempt of `unit` after its backoff (doubling from the role's
    /// `backoff_ms`, never shorter than the server's wait): writes `retry{provider}` and
    /// starts the timer job.
    fn schedule_retry(
        &mut self,
        unit: &mut CallUnit,
        role: &RoleIr,
        problem: String,
        retry_after_ms: Option<u64>,
        retries_allowed: u64,
    ) -> Result<CallUpdate, Halt> {
        unit.retries_used += 1;
        let policy = RetryPolicy {
            retries: retries_allowed,
            backoff_ms: role.backoff_ms,
        };
        let delay_ms = policy
            .delay_ms(unit.retries_used)
            .max(retry_after_ms.unwrap_or(0));
        self.emit_call(
            unit,
            EventKind::Retry {
                retry: RetryKind::Provider,
                next: unit.attempt + 1,
                delay_ms,
                reason: problem,
            },
        )?;
        let job = self.next_job();
        let key = format!("after {}", self.call_key(unit));
        self.run_backoff(job, &key, Duration::from_millis(delay_ms));
        Ok(CallUpdate::Retrying)
    }

    /// Adds a call's tokens and cost to the run's counters.
    fn account(&mut self, role: &RoleIr, usage: Usage) {
        self.state.meter.charge(&role.model, usage);
    }

    /// A `finalize` step's `Delivery.candidate_id` must name an existing candidate: a
    /// malformed id (`415386`, `c1,`) is a contract violation, re-asked with the
    /// correction like any other; a well-formed id of another candidate than `best` is
    /// left for the finalize step to refuse (`delivery_mismatch`).
    fn names_a_candidate(&self, unit: &CallUnit, output: &Value) -> Result<(), Vec<Violation>> {
        let finalizing = self
            .spec
            .flow
            .step(&unit.step)
            .is_some_and(|(_, step)| matches!(step.kind, StepKind::Finalize { .. }));
        if !finalizing || self.state.candidates.is_empty() {
            return Ok(());
        }
        let proposed = output
            .get("candidate_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if self.state.candidates.iter().any(|c| c.id() == proposed) {
            return Ok(());
        }
        let ids: Vec<&str> = self.state.candidates.iter().map(|c| c.id()).collect();
        let best = self
            .state
            .best()
            .map(|best| format!("; the one to deliver is `{}`", best.id()))
            .unwrap_or_default();
        Err(vec![Violation {
            path: "candidate_id".to_string(),
            message: format!(
                "{} names no candidate: it must be exactly one of {}{best}",
                serde_json::to_string(proposed).unwrap_or_default(),
                ids.iter()
                    .map(|id| format!("`{id}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }])
    }

    /// The key of the attempt `unit` has in flight.
    fn call_key(&self, unit: &CallUnit) -> CallKey {
        CallKey {
            step: unit.step.to_string(),
            round: self.state.round,
            item: unit.item.clone(),
            attempt: unit.attempt,
            role: unit.key_role.clone(),
        }
    }

    /// Records the tool calls of an attempt: a tool outside the role's whitelist (or past
    /// `max_tool_calls`) is `tool_denied` and not executed; a permitted call's result is
    /// checked against the tool's output contract (tool outputs are untrusted data), unless
    /// the call was answered with an error (the tool did not run or failed). Returns the
    /// permitted tools whose effect is `write` or `external`, in order, each once.
    ///
    /// One piece: one pass over the calls, each through the same gates in the order its
    /// events are written (whitelist and limit, permit rules, effects, timeout, output
    /// contract); splitting would scatter that order.
    fn tool_calls(
        &mut self,
        unit: &mut CallUnit,
        role: &RoleIr,
        calls: &[ToolCall],
    ) -> Result<Vec<String>, Halt> {
        unit.artifacts.clear();
        let spec = self.spec;
        let validator = Validator::for_spec(spec);
        let mut executed = 0u64;
        let mut effects: Vec<String> = Vec::new();
        for call in calls {
            let whitelisted = role.tools.iter().any(|tool| tool == &call.tool);
            let within_limit = role.max_tool_calls.is_none_or(|max| executed < max);
            let tool = called_tool(spec, &call.tool).filter(|_| whitelisted && within_limit);
            let Some(tool) = tool else {
                self.emit_call(
                    unit,
                    EventKind::ToolDenied {
                        tool: call.tool.clone(),
                        allowed: role.tools.clone(),
                        rule: None,
                    },
                )?;
                continue;
            };
            // A call whose arguments break a `permit` rule was refused unrun, like one
            // outside the whitelist.
            if let Some(rule) = crate::engine::permit::refused_by(
                &role.permits,
                &call.tool,
                &call.args,
                &meta_value(role),
                &crate::engine::permit::permit_inputs(role, &unit.inputs),
            ) {
                self.emit_call(
                    unit,
                    EventKind::ToolDenied {
                        tool: call.tool.clone(),
                        allowed: role.tools.clone(),
                        rule: Some(rule.to_string()),
                    },
                )?;
                continue;
            }
            executed += 1;
            if tool.effect != EffectIr::Read && !effects.contains(&call.tool) {
                effects.push(call.tool.clone());
            }
            if tool.effect == EffectIr::Write
                && let (Some(Value::String(path)), Some(Value::String(content))) =
                    (call.args.get("path"), call.args.get("content"))
            {
                unit.artifacts.insert(path.clone(), content.clone());
            }
            // A call that ran as long as its tool's `timeout` was cut there: the model
            // was told so (DESIGN §9.2).
            if let (Some(timeout_ms), Some(latency)) = (tool.timeout_ms, call.latency)
                && latency >= std::time::Duration::from_millis(timeout_ms)
                && (is_error_answer(&call.result) || call.result.is_null())
            {
                self.emit_call(
                    unit,
                    EventKind::ToolTimeout {
                        tool: call.tool.clone(),
                        args: call.args.clone(),
                        timeout_ms,
                        sandbox: self.provider.tool_sandbox(&call.tool),
                    },
                )?;
                continue;
            }
            self.emit_call(
                unit,
                EventKind::ToolCall {
                    tool: call.tool.clone(),
                    args: call.args.clone(),
                    result: call.result.clone(),
                    sandbox: self.provider.tool_sandbox(&call.tool),
                },
            )?;
            if !is_error_answer(&call.result)
                && let Some(output) = tool.output
                && let Err(violations) = validator.validate(output, &call.result)
            {
                self.emit_call(
                    unit,
                    EventKind::ContractViolation {
                        contract: output.clone(),
                        tool: Some(call.tool.clone()),
                        violations,
                    },
                )?;
            }
        }
        Ok(effects)
    }
}

/// A tool call answered with an error (`{"error": "..."}`, what the tool loop tells the
/// model when the tool failed or did not run), not with the tool's output.
/// What the scheduler reads of a tool a role called: its effect, its timeout and the
/// contract its result is checked against.
struct CalledTool<'a> {
    effect: EffectIr,
    timeout_ms: Option<u64>,
    output: Option<&'a String>,
}

/// A declared tool, or a tool `SERVER.TOOL` of an MCP server whose allow-list holds it,
/// which is recorded and replayed like a declared tool. An MCP tool's effect is not known
/// offline yet (the server's annotations will say): it counts as `external`, so a provider
/// retry never repeats it; its result has no contract to be checked against yet.
fn called_tool<'a>(spec: &'a CompiledSpec, name: &str) -> Option<CalledTool<'a>> {
    if let Some(tool) = spec.tools.get(name) {
        return Some(CalledTool {
            effect: tool.effect,
            timeout_ms: tool.timeout_ms,
            output: Some(&tool.output),
        });
    }
    let (_, server) = spec.mcp_server_of(name)?;
    Some(CalledTool {
        effect: EffectIr::External,
        timeout_ms: server.timeout_ms,
        output: None,
    })
}

fn is_error_answer(result: &Value) -> bool {
    error_answer(result).is_some()
}

/// The message of a tool answer that is an error (`{"error": "..."}`).
pub(crate) fn error_answer(result: &Value) -> Option<&str> {
    let object = result.as_object()?;
    if object.len() != 1 {
        return None;
    }
    object.get("error").and_then(Value::as_str)
}

/// A role file's own front-matter keys as one record (`meta`), `null` when it has none.
fn meta_value(role: &RoleIr) -> Value {
    if role.meta.is_empty() {
        return Value::Null;
    }
    Value::Object(
        role.meta
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::RetryPolicy;

    #[test]
    fn backoff_doubles_without_jitter() {
        let policy = RetryPolicy {
            retries: 3,
            backoff_ms: 1000,
        };
        let delays: Vec<u64> = (1..=4).map(|retry| policy.delay_ms(retry)).collect();
        assert_eq!(delays, [1000, 2000, 4000, 8000]);
        let huge = RetryPolicy {
            retries: 100,
            backoff_ms: u64::MAX / 2,
        };
        assert_eq!(
            huge.delay_ms(90),
            u64::MAX,
            "saturates instead of overflowing"
        );
    }
}
