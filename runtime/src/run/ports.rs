//! The scheduler's ports: how a run reaches models, people and its trace (provider, human channel, trace sink).
//!
//! These are the smallest interfaces the scheduler needs. The provider is one async call
//! keyed by `(step, round, item, attempt, role)` (DESIGN §5); timeouts, retries and
//! recording are the scheduler's business, not the provider's.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use charter_compiler::graph::RoleModelIr;
use serde::Serialize;
use serde_json::{Map, Value};

/// The key of one model call: `(step, round, item, attempt)`, plus the role for the calls
/// of a per-item `check ... by ROLE` (the step's own role has `role: None`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct CallKey {
    pub step: String,
    pub round: u64,
    pub item: Option<String>,
    pub attempt: u64,
    pub role: Option<String>,
}

impl fmt::Display for CallKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "step `{}`, round {}", self.step, self.round)?;
        if let Some(item) = &self.item {
            write!(formatter, ", item `{item}`")?;
        }
        write!(formatter, ", attempt {}", self.attempt)?;
        if let Some(role) = &self.role {
            write!(formatter, ", role `{role}`")?;
        }
        Ok(())
    }
}

/// What the scheduler asks a model.
#[derive(Clone, Debug)]
pub struct ModelRequest {
    pub key: CallKey,
    /// The role making the call.
    pub role: String,
    pub model: RoleModelIr,
    /// The rendered prompt.
    pub prompt: String,
    /// The JSON schema the output must satisfy.
    pub output_schema: Value,
    /// The role's whitelisted tools.
    pub tools: Vec<String>,
    /// The issues that sent this call back (stage retry or repair with feedback), or the
    /// validation error of the previous attempt (provider retry).
    pub feedback: Option<Value>,
    /// The outputs of the item's dependencies, by item id (context isolation: nothing else).
    pub context: Map<String, Value>,
}

/// What a model answered.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelReply {
    pub output: ModelOutput,
    /// The tool calls the model made during the call, in order, with their results.
    pub tool_calls: Vec<ToolCallRecord>,
    pub usage: Usage,
}

/// The model's final output: parsed JSON, or text that may not be JSON at all.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelOutput {
    Json(Value),
    Raw(String),
}

/// One tool call made during a model call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallRecord {
    pub tool: String,
    pub args: Value,
    pub result: Value,
}

/// Tokens a call used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why a provider call gave no reply.
#[derive(Clone, Debug, PartialEq)]
pub enum ProviderError {
    /// The provider answered with an HTTP-like error status (429, 500, 401, ...).
    Status { status: u16, message: String },
    /// A replay has no recording for this call: the run cannot go on.
    Unrecorded { key: CallKey },
    /// Anything else that makes going on impossible (a bad cassette, a missing key).
    Fatal { message: String },
}

impl ProviderError {
    /// True when a retry may help: 408, 409, 425, 429 and every 5xx.
    pub fn is_transient(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => {
                matches!(status, 408 | 409 | 425 | 429) || (500..=599).contains(status)
            }
            ProviderError::Unrecorded { .. } | ProviderError::Fatal { .. } => false,
        }
    }
}

/// A boxed future the scheduler can spawn.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A model provider: one async call. Timeouts and retries are applied by the scheduler,
/// around any provider.
pub trait Provider: Send + Sync {
    fn call(&self, request: ModelRequest) -> BoxFuture<Result<ModelReply, ProviderError>>;
}

/// Where `ask` steps and `ask` repair actions get a person's answer (an `Answer` record).
pub trait Humans: Send + Sync {
    /// The answer to `question` asked at `step` in `round`, or a message saying why there is none.
    fn answer(&self, step: &str, round: u64, question: &str) -> Result<Value, String>;
}

/// Where a run's trace goes: one event at a time, in order, before the event takes effect.
pub trait TraceSink {
    fn append(&mut self, event: &TraceEvent);
}

/// A trace sink that keeps every event in memory (tests, and the CLI's `--events`).
#[derive(Debug, Default)]
pub struct MemorySink {
    pub events: Vec<TraceEvent>,
}

impl TraceSink for MemorySink {
    fn append(&mut self, event: &TraceEvent) {
        self.events.push(event.clone());
    }
}

impl MemorySink {
    /// The events as JSON lines (one object per line, each ending in `\n`).
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for event in &self.events {
            out.push_str(&event.to_json_line());
            out.push('\n');
        }
        out
    }
}

/// One trace record: `{seq, t_ms, round, step, item?, attempt?, kind, ...}` (DESIGN §4).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceEvent {
    pub seq: u64,
    /// Milliseconds since the run started, on the run's clock (virtual in replays).
    pub t_ms: u64,
    pub round: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u64>,
    pub kind: String,
    /// The kind's own fields.
    #[serde(flatten)]
    pub data: Map<String, Value>,
}

impl TraceEvent {
    /// The event as one line of JSON (keys in a fixed order: the common ones, then the
    /// kind's fields sorted).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|error| {
            format!("{{\"seq\":{},\"kind\":\"unserializable\",\"error\":{:?}}}", self.seq, error.to_string())
        })
    }
}
