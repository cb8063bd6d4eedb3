//! Role calls: one attempt per spawned job, with the provider-retry policy (doubling backoff, per-call timeout, contract violations re-asked) decided by the scheduler.
//!
//! A job is a tokio task that makes exactly one provider call (or sleeps one backoff) and
//! sends the result back over the scheduler's channel; it never touches run state. The
//! scheduler decides, per reply, whether the call is done, retried or failed, and writes
//! every event (`model_call`, `model_result`, `timeout`, `provider_error`,
//! `contract_violation`, `tool_call`, `tool_denied`, `retry{provider}`) to the trace.

use std::sync::Arc;
use std::time::Duration;

use charter_compiler::check::templates::snake_case;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::budget::call_cost;
use super::contract::validate;
use super::outcome::RunError;
use super::ports::{CallKey, ModelOutput, ModelReply, ModelRequest, Provider, ProviderError};
use super::state::fields;
use super::{Halt, Scheduler};

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
    pub step: String,
    pub item: Option<String>,
    /// The role called.
    pub role: String,
    /// `Some(role)` for a per-item check's judge (the key carries `role`).
    pub key_role: Option<String>,
    /// The role's inputs, in the order of its input contracts.
    pub inputs: Vec<Value>,
    /// Issues that sent this call back (stage retry, repair with feedback).
    pub feedback: Option<Value>,
    /// Dependencies' outputs (context isolation: nothing else).
    pub context: Map<String, Value>,
    /// Provider retries used so far.
    pub retries_used: u64,
    /// The validation error of the previous attempt, given back to the model.
    pub validation_error: Option<String>,
    /// The attempt in flight.
    pub attempt: u64,
}

impl CallUnit {
    pub fn new(step: &str, item: Option<&str>, role: &str, inputs: Vec<Value>) -> CallUnit {
        CallUnit {
            step: step.to_string(),
            item: item.map(str::to_string),
            role: role.to_string(),
            key_role: None,
            inputs,
            feedback: None,
            context: Map::new(),
            retries_used: 0,
            validation_error: None,
            attempt: 0,
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

/// What a job sends back.
#[derive(Debug)]
pub enum JobBody {
    /// A backoff timer ran out: make the next attempt.
    Wake,
    /// A provider call finished.
    Reply(Result<ModelReply, CallFailure>),
}

/// A message from a job to the scheduler.
#[derive(Debug)]
pub struct JobMessage {
    pub job: u64,
    pub body: JobBody,
}

/// Spawns a job that makes one provider call, under the role's timeout.
pub fn spawn_call(
    provider: Arc<dyn Provider>,
    request: ModelRequest,
    timeout_ms: Option<u64>,
    job: u64,
    sender: UnboundedSender<JobMessage>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let call = provider.call(request);
        let result = match timeout_ms {
            Some(limit) => match tokio::time::timeout(Duration::from_millis(limit), call).await {
                Ok(result) => result.map_err(CallFailure::Provider),
                Err(_) => Err(CallFailure::TimedOut { after_ms: limit }),
            },
            None => call.await.map_err(CallFailure::Provider),
        };
        let _ = sender.send(JobMessage {
            job,
            body: JobBody::Reply(result),
        });
    })
}

/// Spawns a job that sleeps `delay_ms` and then wakes the scheduler.
pub fn spawn_timer(
    delay_ms: u64,
    job: u64,
    sender: UnboundedSender<JobMessage>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        let _ = sender.send(JobMessage {
            job,
            body: JobBody::Wake,
        });
    })
}

impl Scheduler<'_> {
    /// Makes the next attempt of `unit`: checks the budget, numbers the attempt, writes
    /// `model_call` and spawns the call. Returns the job id.
    pub(super) fn issue_attempt(&mut self, unit: &mut CallUnit, owner: usize) -> Result<u64, Halt> {
        self.check_budget()?;
        let spec = self.spec;
        let Some(role) = spec.roles.get(&unit.role) else {
            return Err(Halt::Error(RunError::Flow(format!(
                "step `{}` calls unknown role `{}`",
                unit.step, unit.role
            ))));
        };
        unit.attempt = self.state.next_attempt(
            &unit.step,
            unit.item.as_deref(),
            unit.key_role.as_deref(),
        );
        let key = CallKey {
            step: unit.step.clone(),
            round: self.state.round,
            item: unit.item.clone(),
            attempt: unit.attempt,
            role: unit.key_role.clone(),
        };
        let feedback = match &unit.validation_error {
            Some(error) => Some(json!({ "issues": unit.feedback, "validation_error": error })),
            None => unit.feedback.clone(),
        };
        let prompt = self.render_prompt(&unit.role, &unit.inputs, feedback.as_ref());
        let output_schema = spec
            .contracts
            .get(&role.output)
            .map(|contract| contract.schema.clone())
            .unwrap_or(Value::Null);
        let mut data = fields([
            ("role", json!(unit.role)),
            ("model", json!(format!("{}:{}", role.model.provider, role.model.model))),
        ]);
        if feedback.is_some() {
            data.insert("feedback".into(), json!(true));
        }
        self.emit_call("model_call", unit, data);
        let request = ModelRequest {
            key,
            role: unit.role.clone(),
            model: role.model.clone(),
            prompt,
            output_schema,
            tools: role.tools.clone(),
            feedback,
            context: unit.context.clone(),
        };
        let job = self.next_job(owner);
        let handle = spawn_call(
            self.provider.clone(),
            request,
            role.timeout_ms,
            job,
            self.sender.clone(),
        );
        self.handles.insert(job, handle);
        Ok(job)
    }

    /// Applies a finished call to `unit`: usage and budgets, tool calls, the contract
    /// check, and the retry decision. `Retrying` means a backoff timer job now runs for
    /// `owner`.
    pub(super) fn on_reply(
        &mut self,
        unit: &mut CallUnit,
        owner: usize,
        result: Result<ModelReply, CallFailure>,
    ) -> Result<CallUpdate, Halt> {
        let spec = self.spec;
        let Some(role) = spec.roles.get(&unit.role) else {
            return Err(Halt::Error(RunError::Flow(format!("unknown role `{}`", unit.role))));
        };
        let problem = match result {
            Err(CallFailure::TimedOut { after_ms }) => {
                self.emit_call("timeout", unit, fields([("after_ms", json!(after_ms))]));
                format!("timed out after {after_ms} ms")
            }
            Err(CallFailure::Provider(ProviderError::Unrecorded { key })) => {
                return Err(Halt::Error(RunError::Unrecorded { key }));
            }
            Err(CallFailure::Provider(ProviderError::Fatal { message })) => {
                return Err(Halt::Error(RunError::Provider(message)));
            }
            Err(CallFailure::Provider(error @ ProviderError::Status { .. })) => {
                let (status, message) = match &error {
                    ProviderError::Status { status, message } => (*status, message.clone()),
                    _ => (0, String::new()),
                };
                self.emit_call(
                    "provider_error",
                    unit,
                    fields([("status", json!(status)), ("message", json!(message))]),
                );
                if !error.is_transient() {
                    let reason = format!("provider error {status}");
                    self.emit_call("call_failed", unit, fields([("error", json!(reason))]));
                    return Ok(CallUpdate::Failed(reason));
                }
                format!("provider error {status}")
            }
            Ok(reply) => {
                self.account(role, reply.usage);
                self.tool_calls(unit, role, &reply)?;
                let parsed = match reply.output {
                    ModelOutput::Json(value) => Ok(value),
                    ModelOutput::Raw(text) => serde_json::from_str::<Value>(&text)
                        .map_err(|error| format!("the output is not JSON: {error}")),
                };
                let checked = parsed.and_then(|value| validate(spec, &role.output, &value));
                match checked {
                    Ok(output) => {
                        self.emit_call(
                            "model_result",
                            unit,
                            fields([
                                ("input_tokens", json!(reply.usage.input_tokens)),
                                ("output_tokens", json!(reply.usage.output_tokens)),
                                ("output", output.clone()),
                            ]),
                        );
                        self.check_budget()?;
                        return Ok(CallUpdate::Output(output));
                    }
                    Err(error) => {
                        self.emit_call(
                            "contract_violation",
                            unit,
                            fields([
                                ("contract", json!(role.output)),
                                ("error", json!(error)),
                            ]),
                        );
                        self.check_budget()?;
                        unit.validation_error = Some(error.clone());
                        format!("contract violation: {error}")
                    }
                }
            }
        };
        if unit.retries_used >= role.retry {
            self.emit_call(
                "call_failed",
                unit,
                fields([
                    ("error", json!(problem)),
                    ("retries", json!(unit.retries_used)),
                ]),
            );
            return Ok(CallUpdate::Failed(problem));
        }
        unit.retries_used += 1;
        let policy = RetryPolicy {
            retries: role.retry,
            backoff_ms: role.backoff_ms,
        };
        let delay = policy.delay_ms(unit.retries_used);
        self.emit_call(
            "retry",
            unit,
            fields([
                ("retry_kind", json!("provider")),
                ("retry", json!(unit.retries_used)),
                ("of", json!(role.retry)),
                ("delay_ms", json!(delay)),
                ("because", json!(problem)),
            ]),
        );
        let job = self.next_job(owner);
        let handle = spawn_timer(delay, job, self.sender.clone());
        self.handles.insert(job, handle);
        Ok(CallUpdate::Retrying)
    }

    /// Adds a call's tokens and cost to the run's counters.
    fn account(&mut self, role: &charter_compiler::graph::RoleIr, usage: super::ports::Usage) {
        self.state.counters.tokens = self
            .state
            .counters
            .tokens
            .saturating_add(usage.input_tokens)
            .saturating_add(usage.output_tokens);
        self.state.counters.cost += call_cost(&role.model, usage);
    }

    /// Records the tool calls of a reply: a tool outside the role's whitelist (or past
    /// `max_tool_calls`) is `tool_denied` and not counted as executed; a permitted call's
    /// arguments and result are checked against the tool's contracts (tool outputs are
    /// untrusted data).
    fn tool_calls(
        &mut self,
        unit: &CallUnit,
        role: &charter_compiler::graph::RoleIr,
        reply: &ModelReply,
    ) -> Result<(), Halt> {
        let spec = self.spec;
        let mut executed = 0u64;
        for call in &reply.tool_calls {
            let whitelisted = role.tools.iter().any(|tool| tool == &call.tool);
            let Some(tool) = spec.tools.get(&call.tool).filter(|_| whitelisted) else {
                self.emit_call(
                    "tool_denied",
                    unit,
                    fields([
                        ("tool", json!(call.tool)),
                        ("reason", json!("not in the role's whitelist")),
                    ]),
                );
                continue;
            };
            if role.max_tool_calls.is_some_and(|max| executed >= max) {
                self.emit_call(
                    "tool_denied",
                    unit,
                    fields([
                        ("tool", json!(call.tool)),
                        ("reason", json!("max_tool_calls reached")),
                    ]),
                );
                continue;
            }
            executed += 1;
            let mut data = fields([("tool", json!(call.tool)), ("effect", json!(tool.effect))]);
            if let Err(error) = validate(spec, &tool.input, &call.args) {
                data.insert("args_error".into(), json!(error));
            }
            let result_error = validate(spec, &tool.output, &call.result).err();
            self.emit_call("tool_call", unit, data);
            if let Some(error) = result_error {
                self.emit_call(
                    "contract_violation",
                    unit,
                    fields([
                        ("tool", json!(call.tool)),
                        ("contract", json!(tool.output)),
                        ("error", json!(error)),
                    ]),
                );
            }
        }
        Ok(())
    }

    /// Renders the role's prompt: inputs under their snake_case contract names, and
    /// `feedback`, `rules`, `tools`, `output_schema`. A template error becomes the prompt
    /// text (replays key calls by step, not by prompt).
    pub(super) fn render_prompt(&self, role_name: &str, inputs: &[Value], feedback: Option<&Value>) -> String {
        let spec = self.spec;
        let Some(role) = spec.roles.get(role_name) else {
            return String::new();
        };
        let Some(prompt) = &role.prompt else {
            return String::new();
        };
        let mut context = Map::new();
        for (contract, value) in role.inputs.iter().zip(inputs) {
            context.insert(snake_case(contract), value.clone());
        }
        context.insert("feedback".into(), feedback.cloned().unwrap_or(Value::Null));
        let rules: Vec<&String> = role
            .rules
            .iter()
            .filter_map(|name| spec.rules.get(name))
            .flat_map(|rules| rules.lines.iter())
            .collect();
        context.insert("rules".into(), json!(rules));
        context.insert("tools".into(), json!(role.tools));
        context.insert(
            "output_schema".into(),
            spec.contracts
                .get(&role.output)
                .map(|contract| contract.schema.clone())
                .unwrap_or(Value::Null),
        );
        let environment = minijinja::Environment::new();
        environment
            .render_str(&prompt.template, Value::Object(context))
            .unwrap_or_else(|error| format!("(prompt could not be rendered: {error})"))
    }
}
