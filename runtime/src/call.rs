//! One role call with its provider retries (DESIGN §4 "Four kinds of retry"): prompt, per-call timeout, doubling backoff, tool whitelist, output parsing and contract validation.
//!
//! [`call_role`] is the mechanics of a step's model call, written once for `call`,
//! `each` items, per-item judges and `finalize`. It never touches run state: it reports
//! what happens to a [`CallObserver`] (the scheduler appends those events to the trace
//! and keeps the budget) and returns a [`CallOutcome`] value. Per attempt:
//!
//! 1. ask the observer to admit the call (a budget may have run out: no call is made);
//! 2. `model_call`, then the provider's answer within the role's `timeout`;
//! 3. a timeout, a transient error (429, 5xx) or an output that is not JSON or breaks the
//!    output contract is retried, up to `retry` times, after `backoff`, `2 * backoff`,
//!    `4 * backoff`, ... (tokio time, no jitter); the violations are given back to the
//!    model in the next request (`previous_error`);
//! 4. a permanent error (other 4xx) fails the call at once; a fatal one (a replay
//!    without that call) is returned as an error;
//! 5. tool calls outside the role's whitelist, or beyond `max_tool_calls`, are recorded
//!    as `tool_denied` (never executed); the others as `tool_call`, their results checked
//!    against the tool's output contract.
//!
//! Attempts are numbered from the key's `attempt`, so stage retries continue the count.

use std::time::Duration;

use charter_compiler::graph::{CompiledSpec, RoleIr};
use serde_json::Value;

use crate::canonical::sha256;
use crate::prompt::{PromptError, render_prompt};
use crate::provider::{
    CallKey, ModelOutput, ModelRequest, Provider, ProviderError, ToolCall, Usage,
};
use crate::trace::{BudgetKind, EventKind, RetryKind};
use crate::validate::{Validator, parse_output, violations_text};

/// Receives what happens during a call. Implemented by a scheduler (over a queue
/// to the single writer) and by tests.
pub trait CallObserver: Send + Sync {
    /// Something happened in attempt `attempt` (the key's other parts are the call's).
    fn event(&self, attempt: u64, kind: EventKind);
    /// Whether another model call may be made; `Err(which)` when a budget ran out.
    fn admit(&self) -> Result<(), BudgetKind>;
    /// A call used `usage` tokens of `role`'s model.
    fn charge(&self, role: &RoleIr, usage: Usage);
}

/// A call to make.
#[derive(Clone, Debug)]
pub struct RoleCall<'a> {
    pub spec: &'a CompiledSpec,
    pub role: &'a str,
    /// The key of the first attempt (`attempt` is the number to start from).
    pub key: CallKey,
    /// One value per input contract of the role.
    pub inputs: Vec<Value>,
    /// The issues that sent the role back, if any (the template's `feedback`).
    pub feedback: Option<Value>,
}

/// How a call ended.
#[derive(Clone, Debug, PartialEq)]
pub enum CallOutcome {
    /// A valid output (defaults filled in) and the tool calls that were allowed.
    Output {
        value: Value,
        tool_calls: Vec<ToolCall>,
        /// The attempt number the next call of this role for this key would have.
        next_attempt: u64,
    },
    /// Every attempt failed, or a permanent error ended the call.
    Failed { reason: String, next_attempt: u64 },
    /// A budget ran out before an attempt: no call was made.
    BudgetExhausted(BudgetKind),
}

/// The call could not be made at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// A fatal provider error (a replay without this call).
    #[error(transparent)]
    Provider(ProviderError),
}

/// Makes `call` through `provider`, reporting to `observer`.
pub async fn call_role(
    call: RoleCall<'_>,
    provider: &dyn Provider,
    observer: &dyn CallObserver,
) -> Result<CallOutcome, CallError> {
    let role = call
        .spec
        .roles
        .get(call.role)
        .ok_or_else(|| PromptError::UnknownRole {
            role: call.role.to_string(),
        })?;
    let prompt = render_prompt(call.spec, call.role, &call.inputs, call.feedback.as_ref())?;
    let prompt_hash = sha256(prompt.as_bytes());
    let validator = Validator::for_spec(call.spec);
    let output_schema = call
        .spec
        .contracts
        .get(&role.output)
        .map(|contract| contract.schema.clone())
        .unwrap_or(Value::Null);
    let model = format!("{}:{}", role.model.provider, role.model.model);

    let first = call.key.attempt;
    let attempts = role.retry.saturating_add(1);
    let mut previous_error: Option<String> = None;
    let mut reason = String::new();
    let mut retry_after: Option<Duration> = None;
    for index in 0..attempts {
        let attempt = first.saturating_add(index);
        if index > 0 {
            // A server that said when to come back (`Retry-After`) is not asked sooner.
            let delay = backoff(role.backoff_ms, index).max(retry_after.take().unwrap_or_default());
            observer.event(
                attempt - 1,
                EventKind::Retry {
                    retry: RetryKind::Provider,
                    next: attempt,
                    delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    reason: reason.clone(),
                },
            );
            tokio::time::sleep(delay).await;
        }
        if let Err(which) = observer.admit() {
            return Ok(CallOutcome::BudgetExhausted(which));
        }
        observer.event(
            attempt,
            EventKind::ModelCall {
                role: call.role.to_string(),
                model: model.clone(),
                prompt_hash: prompt_hash.clone(),
            },
        );
        let request = ModelRequest {
            key: CallKey {
                attempt,
                ..call.key.clone()
            },
            role: call.role.to_string(),
            model: model.clone(),
            prompt: prompt.clone(),
            output_schema: output_schema.clone(),
            tools: role.tools.clone(),
            max_tool_calls: role.max_tool_calls,
            previous_error: previous_error.clone(),
        };
        let answer = match role.timeout_ms {
            Some(limit) => {
                let limit = Duration::from_millis(limit);
                match tokio::time::timeout(limit, provider.complete(request)).await {
                    Ok(answer) => answer,
                    Err(_) => Err(ProviderError::TimedOut { after: limit }),
                }
            }
            None => provider.complete(request).await,
        };
        let response = match answer {
            Ok(response) => response,
            Err(error) if error.is_fatal() => return Err(CallError::Provider(error)),
            Err(ProviderError::TimedOut { after }) => {
                let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
                observer.event(attempt, EventKind::Timeout { after_ms });
                reason = format!("timed out after {after_ms}ms");
                continue;
            }
            Err(error) if error.is_transient() => {
                retry_after = error.retry_after();
                reason = error.to_string();
                continue;
            }
            Err(error) => {
                return Ok(CallOutcome::Failed {
                    reason: error.to_string(),
                    next_attempt: attempt.saturating_add(1),
                });
            }
        };
        observer.charge(role, response.usage);
        observer.event(
            attempt,
            EventKind::ModelResult {
                role: call.role.to_string(),
                input_tokens: response.usage.input_tokens,
                output_tokens: response.usage.output_tokens,
                latency_ms: u64::try_from(response.latency.as_millis()).unwrap_or(u64::MAX),
            },
        );
        let tool_calls = screen_tools(call.spec, role, response.tool_calls, attempt, observer);
        let parsed = match response.output {
            ModelOutput::Json(value) => Ok(value),
            ModelOutput::Text(text) => parse_output(&text).map_err(|violation| vec![violation]),
        };
        match parsed.and_then(|value| validator.validate(&role.output, &value)) {
            Ok(value) => {
                return Ok(CallOutcome::Output {
                    value,
                    tool_calls,
                    next_attempt: attempt.saturating_add(1),
                });
            }
            Err(violations) => {
                let text = violations_text(&violations);
                observer.event(
                    attempt,
                    EventKind::ContractViolation {
                        contract: role.output.clone(),
                        tool: None,
                        violations,
                    },
                );
                reason = format!("the output breaks `{}`", role.output);
                previous_error = Some(text);
            }
        }
    }
    Ok(CallOutcome::Failed {
        reason: format!("{} attempt(s) failed; the last: {reason}", attempts),
        next_attempt: first.saturating_add(attempts),
    })
}

/// The delay before retry `retry` (1 for the first retry): `backoff * 2^(retry - 1)`.
pub fn backoff(backoff_ms: u64, retry: u64) -> Duration {
    let factor = 1u64
        .checked_shl(u32::try_from(retry.saturating_sub(1)).unwrap_or(u32::MAX))
        .unwrap_or(u64::MAX);
    Duration::from_millis(backoff_ms.saturating_mul(factor))
}

/// Records the model's tool calls, refusing those outside the whitelist or beyond
/// `max_tool_calls`; returns the allowed ones.
fn screen_tools(
    spec: &CompiledSpec,
    role: &RoleIr,
    tool_calls: Vec<ToolCall>,
    attempt: u64,
    observer: &dyn CallObserver,
) -> Vec<ToolCall> {
    let validator = Validator::for_spec(spec);
    let mut allowed = Vec::new();
    for tool_call in tool_calls {
        let whitelisted = role.tools.contains(&tool_call.tool);
        let within_limit = role
            .max_tool_calls
            .is_none_or(|limit| (allowed.len() as u64) < limit);
        if !whitelisted || !within_limit {
            observer.event(
                attempt,
                EventKind::ToolDenied {
                    tool: tool_call.tool.clone(),
                    allowed: role.tools.clone(),
                },
            );
            continue;
        }
        observer.event(
            attempt,
            EventKind::ToolCall {
                tool: tool_call.tool.clone(),
                args: tool_call.args.clone(),
                result: tool_call.result.clone(),
            },
        );
        if let Some(tool) = spec.tools.get(&tool_call.tool)
            && let Err(violations) = validator.validate(&tool.output, &tool_call.result)
        {
            observer.event(
                attempt,
                EventKind::ContractViolation {
                    contract: tool.output.clone(),
                    tool: Some(tool_call.tool.clone()),
                    violations,
                },
            );
            continue;
        }
        allowed.push(tool_call);
    }
    allowed
}

#[cfg(test)]
mod tests;
