//! `tool` steps (DESIGN §9.1): one tool call and no model, bounded by the tool's `timeout`, retried per its `retry`, recorded and replayed like a model call.
//!
//! Each attempt is keyed `(step, round, attempt)` and goes through the provider's
//! [`crate::engine::effects::Provider::run_tool`]: live, the tool box runs the tool (a command's
//! process group is killed when its timeout drops the call); in a replay, the cassette's
//! `{ step, tool, result }` entry answers after its recorded latency, so a 20-minute
//! latency against a 15-minute timeout times out at 15 minutes of virtual time. The
//! argument is checked against the tool's input contract first (one that breaks it fails
//! the step, with no call); the result is checked against the tool's output contract (tool outputs are untrusted
//! data); a failure, a timeout or a result that breaks the contract is retried after a
//! doubling backoff, and the last one fails the step (`step_failed`).

use std::time::Duration;

use charter_compiler::graph::ExprIr;
use serde_json::{Value, json};

use super::*;
use crate::engine::provider::{CallKey, ProviderError, ToolRequest, ToolResponse};

/// How one attempt of a tool step ended.
enum Attempt {
    Done(Value),
    Failed(String),
}

impl Scheduler<'_> {
    /// Runs `step = tool TOOL(args)` and returns the tool's (contract-checked) result.
    pub(super) async fn run_tool_step(
        &mut self,
        step: &str,
        tool: &str,
        args: &[ExprIr],
    ) -> Result<Value, Halt> {
        let spec = self.spec;
        let Some(tool_ir) = spec.tools.get(tool) else {
            return Err(flow_error(&format!("the spec declares no tool `{tool}`")));
        };
        let args = self.eval_args(args, &Bindings::default())?;
        let args = args
            .into_iter()
            .next()
            .map_or(Value::Null, Arc::unwrap_or_clone);
        // The argument the step built must fit the tool's input contract (defaults
        // filled): one that does not would fail the same way on every try, so the tool is
        // not called at all.
        let args = match Validator::for_spec(spec).validate(&tool_ir.input, &args) {
            Ok(filled) => filled,
            Err(violations) => {
                let message = format!(
                    "the arguments of tool `{tool}` break `{}`: {}",
                    tool_ir.input,
                    violations_text(&violations)
                );
                self.emit(EventKind::ContractViolation {
                    contract: tool_ir.input.clone(),
                    tool: Some(tool.to_string()),
                    violations,
                })?;
                return Err(self.step_failure(message));
            }
        };
        let policy = step::RetryPolicy {
            retries: tool_ir.retry,
            backoff_ms: tool_ir.backoff_ms,
        };
        // Tries of this run of the step (the retry count); the key's attempt counts every
        // call of the step in the round, as for a role (a loop may run the step again).
        let mut tries = 0u64;
        loop {
            tries += 1;
            let attempt = self.state.next_attempt(step, None, None);
            let key = CallKey {
                step: step.to_string(),
                round: self.state.round,
                item: None,
                attempt,
                role: None,
            };
            let backoff = format!("after tool {key}");
            let error = match self.tool_attempt(key, tool, &args).await? {
                Attempt::Done(value) => return Ok(value),
                Attempt::Failed(error) => error,
            };
            if tries > policy.retries {
                let after = if tries == 1 {
                    String::new()
                } else {
                    format!(" after {tries} attempts")
                };
                return Err(self.step_failure(format!("tool `{tool}` failed{after}: {error}")));
            }
            let delay_ms = policy.delay_ms(tries);
            self.append(
                Some(Arc::from(step)),
                None,
                Some(attempt),
                EventKind::Retry {
                    retry: RetryKind::Tool,
                    next: attempt + 1,
                    delay_ms,
                    reason: error,
                },
            )?;
            if delay_ms > 0 {
                self.wait(&backoff, Duration::from_millis(delay_ms)).await?;
            }
        }
    }

    /// One attempt: the call under the tool's timeout, the wall budget and cancellation;
    /// its outcome is traced (`tool_call`, `tool_timeout`, `contract_violation`).
    async fn tool_attempt(
        &mut self,
        key: CallKey,
        tool: &str,
        args: &Value,
    ) -> Result<Attempt, Halt> {
        let timeout_ms = self.spec.tools.get(tool).and_then(|tool| tool.timeout_ms);
        let request = ToolRequest {
            key: key.clone(),
            tool: tool.to_string(),
            args: args.clone(),
        };
        let timed = timed_tool_call(
            self.provider.clone(),
            self.clock.clone(),
            request,
            timeout_ms,
        );
        // A live view shows the tool running (a step may wait on it for minutes).
        let observer = self.config.observer.clone();
        if let Some(observer) = &observer {
            observer.tool_started(&key, tool);
        }
        let outcome = self.bounded(timed).await?;
        if let Some(observer) = &observer {
            let ok = matches!(&outcome, Some(Ok(response)) if response.result.is_ok());
            observer.tool_finished(&key, tool, ok);
        }
        match outcome {
            // Cut by the tool's timeout: the call was dropped (a command's process group
            // killed with it).
            None => self.tool_timed_out(&key, tool, args, timeout_ms.unwrap_or_default()),
            Some(Err(error @ ProviderError::JournalUnwritable { .. })) => {
                Err(self.journal_stop(error.to_string()))
            }
            Some(Err(error)) => Err(Halt::Error(match error {
                crate::engine::provider::ProviderError::NotRecorded { key, closest } => {
                    RunError::Unrecorded { key, closest }
                }
                other => RunError::Provider(other.to_string()),
            })),
            Some(Ok(response)) => self.tool_answered(&key, tool, args, response.result),
        }
    }

    /// An attempt its tool's timeout cut: `tool_timeout`, and the step may try again.
    fn tool_timed_out(
        &mut self,
        key: &CallKey,
        tool: &str,
        args: &Value,
        timeout_ms: u64,
    ) -> Result<Attempt, Halt> {
        self.append(
            Some(Arc::from(key.step.as_str())),
            None,
            Some(key.attempt),
            EventKind::ToolTimeout {
                tool: tool.to_string(),
                args: args.clone(),
                timeout_ms,
                sandbox: self.provider.tool_sandbox(tool),
            },
        )?;
        Ok(Attempt::Failed(format!(
            "timed out after {}",
            crate::formats::scenario::duration_text::format(Duration::from_millis(timeout_ms))
        )))
    }

    /// An attempt the tool answered: `tool_call` (an error as `{"error": ...}`), then the
    /// result checked against the tool's output contract (`contract_violation`).
    fn tool_answered(
        &mut self,
        key: &CallKey,
        tool: &str,
        args: &Value,
        answer: Result<Value, String>,
    ) -> Result<Attempt, Halt> {
        let spec = self.spec;
        let step = || Some(Arc::from(key.step.as_str()));
        let result = match answer {
            Ok(result) => result,
            Err(message) => {
                self.append(
                    step(),
                    None,
                    Some(key.attempt),
                    EventKind::ToolCall {
                        tool: tool.to_string(),
                        args: args.clone(),
                        result: json!({ "error": message }),
                        sandbox: self.provider.tool_sandbox(tool),
                    },
                )?;
                return Ok(Attempt::Failed(message));
            }
        };
        self.append(
            step(),
            None,
            Some(key.attempt),
            EventKind::ToolCall {
                tool: tool.to_string(),
                args: args.clone(),
                result: result.clone(),
                sandbox: self.provider.tool_sandbox(tool),
            },
        )?;
        let output = spec
            .tools
            .get(tool)
            .map(|tool| tool.output.clone())
            .unwrap_or_default();
        match Validator::for_spec(spec).validate(&output, &result) {
            Ok(filled) => Ok(Attempt::Done(filled)),
            Err(violations) => {
                let message = format!(
                    "its result breaks `{output}`: {}",
                    violations_text(&violations)
                );
                self.append(
                    step(),
                    None,
                    Some(key.attempt),
                    EventKind::ContractViolation {
                        contract: output,
                        tool: Some(tool.to_string()),
                        violations,
                    },
                )?;
                Ok(Attempt::Failed(message))
            }
        }
    }

    /// Awaits `future` unless the wall budget runs out or the run is cancelled first.
    async fn bounded<T>(
        &mut self,
        future: impl std::future::Future<Output = T>,
    ) -> Result<T, Halt> {
        let deadline = self.wall_deadline;
        let clock = self.clock.clone();
        let limited = async move {
            match deadline {
                Some(deadline) => tokio::select! {
                    biased;
                    value = future => Some(value),
                    () = clock.sleep_until(deadline) => None,
                },
                None => Some(future.await),
            }
        };
        let finished = match self.config.cancel.clone() {
            Some(mut cancel) => tokio::select! {
                biased;
                () = jobs::cancelled(&mut cancel) => {
                    self.clock_moved();
                    return Err(self.cancel_stop());
                }
                finished = limited => finished,
            },
            None => limited.await,
        };
        self.clock_moved();
        match finished {
            Some(value) => Ok(value),
            None => Err(self.budget_stop(BudgetKind::Wall)),
        }
    }

    /// Sleeps `delay` (the backoff named `key`) within the wall budget and cancellation.
    async fn wait(&mut self, key: &str, delay: Duration) -> Result<(), Halt> {
        let until = self.clock.keep_deadline(key, self.clock.now() + delay);
        let timer = self.clock.sleep_until(until);
        self.bounded(timer).await
    }
}

/// A `tool` step's call raced against its timeout on the run's clock: `None` when the
/// timeout came first (the call is dropped with it).
async fn timed_tool_call(
    provider: Arc<dyn Provider>,
    clock: Arc<dyn Clock>,
    request: ToolRequest,
    timeout_ms: Option<u64>,
) -> Option<Result<ToolResponse, ProviderError>> {
    let call = provider.run_tool(request);
    match timeout_ms {
        Some(timeout_ms) => {
            let deadline = clock.now() + Duration::from_millis(timeout_ms);
            tokio::select! {
                biased;
                result = call => Some(result),
                () = clock.sleep_until(deadline) => None,
            }
        }
        None => Some(call.await),
    }
}
