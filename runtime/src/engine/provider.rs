//! What crosses the side-effect boundary for a call: a model call's request and response, keyed by (step, round, item, attempt, role), a `tool` step's, an `ask`'s question, and their errors.
//!
//! The traits that answer them (`Provider`, `HumanChannel`) are in
//! [`crate::engine::effects`]. A provider only answers a request. Timeouts, retries with backoff, recording and
//! contract checks are wrappers around any provider or the scheduler's business
//! (DESIGN §4), so live providers (openai, anthropic) and the replay provider stay small
//! and interchangeable. Both traits return boxed futures so they can be used as
//! `Arc<dyn Provider>`, chosen at run time.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A boxed, sendable future (what the traits' methods return).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub use crate::formats::scenario::CallKey;

/// One model call.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRequest {
    pub key: CallKey,
    /// The role being called (always set; `key.role` only for per-item judges).
    pub role: String,
    /// `provider:model`, resolved from the role's alias.
    pub model: String,
    /// The rendered prompt; for a `messages: chat` role, the transcript of `chat`
    /// (what is recorded and hashed).
    pub prompt: String,
    /// A `messages: chat` role's system message and conversation, which providers send
    /// instead of `prompt` as one user message; `None` for every other role.
    pub chat: Option<Arc<crate::engine::chat::ChatMessages>>,
    /// The JSON Schema of the role's output contract (shared by every call of the role).
    pub output_schema: Arc<Value>,
    /// The role's whitelisted tools (a provider offers only these to the model).
    pub tools: Vec<String>,
    /// Tool calls allowed in this model call, if limited.
    pub max_tool_calls: Option<u64>,
    /// On a provider retry after a contract violation: the violations, given back to the
    /// model so it can correct its output.
    pub previous_error: Option<String>,
    /// The model entry's parameters and the role's `tool_choice` (shared by every call of
    /// the role in a run).
    pub settings: Arc<CallSettings>,
    /// Where the call leaves what it did as it goes (tool calls, notes), so that what a
    /// failed or timed-out attempt ran is still known to the scheduler.
    pub log: CallLog,
}

/// How one call is made: the model entry's sampling parameters and output mode, and the
/// role's `tool_choice`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallSettings {
    pub params: charter_compiler::graph::ModelParamsIr,
    pub tool_choice: charter_compiler::graph::ToolChoiceIr,
    /// The role's `permit` rules: a call whose arguments break one is refused unrun.
    pub permits: Vec<charter_compiler::graph::PermitIr>,
    /// The role file's own front-matter keys, as `meta` to the permits.
    pub meta: Value,
    /// This call's inputs as the permits see them
    /// ([`crate::engine::permit::permit_inputs`]); `Null` for a role without permits (the
    /// only field set per call, and only then).
    pub inputs: Value,
}

/// Told of a call's tool calls as they start and end (a live display); never part of the
/// trace, which only the scheduler writes.
pub trait CallObserver: Send + Sync {
    fn tool_started(&self, key: &CallKey, tool: &str);
    fn tool_finished(&self, key: &CallKey, tool: &str, ok: bool);
    /// The model's answer to a call (before the contract check).
    fn model_answered(&self, _key: &CallKey, _answer: &str) {}
}

/// What one call did so far: the tool calls it made (in order, each once it ended) and
/// notes (a structured-output fallback). Shared by the call and the job that spawned it,
/// so it survives an error or a timeout that drops the call. Two logs always compare
/// equal: a log is a channel, not part of what a request asks.
#[derive(Clone, Default)]
pub struct CallLog {
    entries: Arc<std::sync::Mutex<CallLogEntries>>,
    observer: Option<Arc<dyn CallObserver>>,
    key: Option<CallKey>,
}

/// The contents of a [`CallLog`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallLogEntries {
    pub tool_calls: Vec<ToolCall>,
    pub notes: Vec<String>,
}

impl CallLog {
    /// A log for the call `key`, telling `observer` (if any) of its tool calls (the key is
    /// made only for an observer).
    pub fn new(key: impl FnOnce() -> CallKey, observer: Option<Arc<dyn CallObserver>>) -> Self {
        CallLog {
            entries: Arc::default(),
            key: observer.as_ref().map(|_| key()),
            observer,
        }
    }

    pub fn tool_started(&self, tool: &str) {
        if let (Some(observer), Some(key)) = (&self.observer, &self.key) {
            observer.tool_started(key, tool);
        }
    }

    /// Keeps a finished tool call (and tells the observer).
    pub fn tool_finished(&self, call: ToolCall, ok: bool) {
        if let (Some(observer), Some(key)) = (&self.observer, &self.key) {
            observer.tool_finished(key, &call.tool, ok);
        }
        self.lock().tool_calls.push(call);
    }

    pub fn note(&self, note: impl Into<String>) {
        self.lock().notes.push(note.into());
    }

    /// What the call did so far.
    pub fn entries(&self) -> CallLogEntries {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CallLogEntries> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl fmt::Debug for CallLog {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("CallLog")
            .field("entries", &self.entries())
            .finish()
    }
}

impl PartialEq for CallLog {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl ModelRequest {
    /// The text of every message the model is shown for this call, in order: the
    /// rendered prompt, then on a provider retry after a contract violation the
    /// correction that lists the violations (as the live providers send them).
    pub fn messages(&self) -> Vec<String> {
        let mut messages = vec![self.prompt.clone()];
        if let Some(previous_error) = &self.previous_error {
            messages.push(correction(previous_error));
        }
        messages
    }
}

/// What a model answered: structured JSON or text still to be parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelOutput {
    Json(Value),
    Text(String),
}

/// Tokens used by one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn total(self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// A tool call the model made during the call, with the result it got (an error is
/// `{"error": "..."}`, what the model was told).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub tool: String,
    pub args: Value,
    pub result: Value,
    /// How long the tool ran (its last attempt), when known: a call whose latency reached
    /// its tool's `timeout` timed out (DESIGN §9.2).
    pub latency: Option<Duration>,
}

/// One call of a `tool` step (DESIGN §9.1), keyed like a model call: (step, round,
/// attempt). The scheduler bounds it by the tool's `timeout` and retries it per the
/// tool's `retry`, so a provider runs exactly one attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolRequest {
    pub key: CallKey,
    pub tool: String,
    /// The arguments, as the step evaluated them (checked against the tool's input
    /// contract by whoever runs the tool).
    pub args: Value,
}

/// What one attempt of a `tool` step gave: the tool's result, or why it has none (what
/// a model would be told), and how long it ran.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResponse {
    pub result: Result<Value, String>,
    pub latency: Duration,
}

/// A model's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelResponse {
    pub output: ModelOutput,
    pub usage: Usage,
    /// In the order they were made.
    pub tool_calls: Vec<ToolCall>,
    /// How long the call took (recorded, for a replay).
    pub latency: Duration,
}

/// Why a call gave no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Worth retrying: rate limits (429), server errors (5xx), dropped connections.
    #[error("transient provider error{}: {message}", status_text(*status))]
    Transient {
        status: Option<u16>,
        message: String,
    },
    /// Worth retrying, but not before `retry_after`: the server said so (a 429 or 503
    /// with a `Retry-After` header). A retry wrapper waits at least this long.
    #[error("transient provider error {status} (retry after {retry_after:?}): {message}")]
    Throttled {
        status: u16,
        retry_after: Duration,
        message: String,
    },
    /// Retrying cannot help: bad request, authentication, unknown model (4xx).
    #[error("provider error{}: {message}", status_text(*status))]
    Permanent {
        status: Option<u16>,
        message: String,
    },
    /// The call gave no response within `after` (recorded as a call with no response).
    #[error("no response after {after:?}")]
    TimedOut { after: Duration },
    /// A replay was asked for a call its cassette does not hold: the run cannot go on.
    #[error("the cassette has no call {key}{}", closest_text(closest.as_deref()))]
    NotRecorded {
        key: CallKey,
        /// The unused recording nearest to `key`, when one is close (a likely typo).
        closest: Option<Box<CallKey>>,
    },
    /// A replayed call's prompt does not meet the call's `expect_prompt`: the run cannot
    /// go on, since the scenario's story depends on what the model was shown.
    #[error("the prompt of call {key} {}", unmet.join("; "))]
    PromptExpectation { key: CallKey, unmet: Vec<String> },
    /// A replay was asked for a human answer its cassette does not hold.
    #[error("{}", no_human_answer(step, *round, *attempt))]
    NoHumanAnswer {
        step: String,
        round: u64,
        attempt: u64,
    },
    /// No one can answer an `ask` (a live eval whose line gives no answer left, a terminal
    /// whose input ended): the message says why and how to give one.
    #[error("{message}")]
    Unanswered { message: String },
    /// The run's journal could not be written (a full disk, an I/O error): the run stops
    /// at once, `failed{journal_unwritable}`, and makes no further call.
    #[error("cannot write the journal: {message}")]
    JournalUnwritable { message: String },
}

/// `; the closest unused recording is {…}`, or nothing.
pub fn closest_text(closest: Option<&CallKey>) -> String {
    closest
        .map(|key| format!("; the closest unused recording is {key}"))
        .unwrap_or_default()
}

fn no_human_answer(step: &str, round: u64, attempt: u64) -> String {
    if attempt > 1 {
        format!(
            "the cassette has no human answer for step `{step}` in round {round}, attempt {attempt}"
        )
    } else {
        format!("the cassette has no human answer for step `{step}` in round {round}")
    }
}

fn status_text(status: Option<u16>) -> String {
    status
        .map(|status| format!(" {status}"))
        .unwrap_or_default()
}

impl ProviderError {
    /// The error for an HTTP status: 408, 429 and 5xx are transient, the rest permanent.
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        let message = message.into();
        if status == 408 || status == 429 || (500..=599).contains(&status) {
            ProviderError::Transient {
                status: Some(status),
                message,
            }
        } else {
            ProviderError::Permanent {
                status: Some(status),
                message,
            }
        }
    }

    /// A provider retry may help (transient errors and timeouts).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ProviderError::Transient { .. }
                | ProviderError::Throttled { .. }
                | ProviderError::TimedOut { .. }
        )
    }

    /// How long the server asked us to wait before the next call, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Throttled { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The HTTP status of the failed call, if there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::Transient { status, .. } | ProviderError::Permanent { status, .. } => {
                *status
            }
            ProviderError::Throttled { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The run must stop with an error (exit 1), not treat it as a failed call: the
    /// recording does not match the run.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            ProviderError::NotRecorded { .. }
                | ProviderError::NoHumanAnswer { .. }
                | ProviderError::Unanswered { .. }
                | ProviderError::PromptExpectation { .. }
        )
    }
}

/// An `ask` step's question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HumanRequest {
    pub step: String,
    pub round: u64,
    /// The n-th time this step asks in this round, from 1 (a loop may ask again).
    pub attempt: u64,
    pub question: String,
}

/// The key of a human answer: (step, round, attempt), like a call's.
pub type HumanKey = (String, u64, u64);

/// What a model is told when its previous answer broke the output contract.
pub fn correction(previous_error: &str) -> String {
    format!(
        "Your previous answer was rejected because it does not match the required output:\n\
         {previous_error}\nAnswer again, correcting these problems."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_keys_display_like_a_cassette_entry() {
        assert_eq!(
            CallKey::new("plan").to_string(),
            "{step: plan, round: 1, attempt: 1}"
        );
        assert_eq!(
            CallKey::new("execute")
                .round(2)
                .item("T-002")
                .attempt(3)
                .role("judge")
                .to_string(),
            "{step: execute, round: 2, item: T-002, attempt: 3, role: judge}"
        );
    }

    #[test]
    fn statuses_are_classified() {
        for (status, transient) in [
            (429, true),
            (500, true),
            (503, true),
            (408, true),
            (400, false),
            (401, false),
            (404, false),
        ] {
            let error = ProviderError::from_status(status, "x");
            assert_eq!(error.is_transient(), transient, "{status}");
            assert!(!error.is_fatal());
        }
        assert_eq!(
            ProviderError::from_status(429, "slow down").to_string(),
            "transient provider error 429: slow down"
        );
        assert_eq!(
            ProviderError::from_status(401, "bad key").to_string(),
            "provider error 401: bad key"
        );
        let missing = ProviderError::NotRecorded {
            key: CallKey::new("plan").round(2),
            closest: None,
        };
        assert!(missing.is_fatal() && !missing.is_transient());
        assert_eq!(
            missing.to_string(),
            "the cassette has no call {step: plan, round: 2, attempt: 1}"
        );
        assert!(
            ProviderError::TimedOut {
                after: Duration::from_secs(1)
            }
            .is_transient()
        );
    }

    #[test]
    fn usage_totals_saturate() {
        assert_eq!(
            Usage {
                input_tokens: 3,
                output_tokens: 4
            }
            .total(),
            7
        );
        assert_eq!(
            Usage {
                input_tokens: u64::MAX,
                output_tokens: 4
            }
            .total(),
            u64::MAX
        );
    }
}
