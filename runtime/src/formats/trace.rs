//! The run trace (DESIGN §4 "Trace"): versioned event types written as JSON lines, the append-only `TraceSink`, and the terminal outcome and reason types.
//!
//! Every event has the same header `{seq, t_ms, round, step?, item?, attempt?, kind}`
//! followed by its kind's fields, for example
//! `{"seq":7,"t_ms":1200,"round":1,"step":"execute","item":"T-002","attempt":2,"kind":"retry","retry":"provider","delay_ms":1000,"reason":"timeout"}`.
//! `t_ms` is milliseconds since the run started on the run's clock (virtual in replays),
//! so a replay's trace is byte-identical on every run. The kinds form a closed enum: a
//! trace never holds an event the harness does not know.
//!
//! These are file-format types: the scheduler converts its internal state into them by
//! hand, so internals can change without breaking golden traces.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Number, Value};

/// One trace record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// 0, 1, 2, ... in the order events were appended.
    pub seq: u64,
    /// Milliseconds since the run started, on the run's (possibly virtual) clock.
    pub t_ms: u64,
    /// The repair round, 1 for the first pass (0 before the first step runs).
    pub round: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<std::sync::Arc<str>>,
    /// The work item's id inside an `each` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// The n-th call of the role for this step, round and item, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u64>,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl TraceEvent {
    /// An event with no step, item or attempt; add them with the `with_*` methods.
    pub fn new(seq: u64, t_ms: u64, round: u64, kind: EventKind) -> Self {
        TraceEvent {
            seq,
            t_ms,
            round,
            step: None,
            item: None,
            attempt: None,
            kind,
        }
    }

    pub fn with_step(mut self, step: impl Into<std::sync::Arc<str>>) -> Self {
        self.step = Some(step.into());
        self
    }

    pub fn with_item(mut self, item: impl Into<String>) -> Self {
        self.item = Some(item.into());
        self
    }

    pub fn with_attempt(mut self, attempt: u64) -> Self {
        self.attempt = Some(attempt);
        self
    }

    /// The event as one line of JSON (no trailing newline).
    pub fn to_json_line(&self) -> Result<String, TraceError> {
        let mut out = Vec::with_capacity(192);
        self.write_json(&mut out)?;
        utf8(out)
    }

    /// Appends the event as one line of JSON (no trailing newline) to `out`: the text
    /// `serde_json` writes for it, without the map serializer its flattened `kind` needs,
    /// and with strings copied whole ([`text`]). The header fields are written first, then
    /// the kind as the object serde writes for it, whose opening brace becomes the comma.
    pub fn write_json(&self, out: &mut Vec<u8>) -> Result<(), TraceError> {
        fn number(out: &mut Vec<u8>, key: &[u8], value: u64) -> Result<(), TraceError> {
            out.extend_from_slice(key);
            serde_json::to_writer(&mut *out, &value).map_err(TraceError::from)
        }
        number(out, b"{\"seq\":", self.seq)?;
        number(out, b",\"t_ms\":", self.t_ms)?;
        number(out, b",\"round\":", self.round)?;
        if let Some(step) = &self.step {
            out.extend_from_slice(b",\"step\":");
            text::write_str(out, step);
        }
        if let Some(item) = &self.item {
            out.extend_from_slice(b",\"item\":");
            text::write_str(out, item);
        }
        if let Some(attempt) = self.attempt {
            number(out, b",\"attempt\":", attempt)?;
        }
        let kind = out.len();
        text::write(out, &self.kind)?;
        if let Some(brace) = out.get_mut(kind) {
            *brace = b',';
        }
        Ok(())
    }
}

/// What happened. Serialized as `"kind": "<snake_case name>"` plus the variant's fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// The run began with this input.
    RunStarted {
        spec: String,
        version: String,
        input: Value,
        /// The turn of the conversation this run is (1 for the first), in a run given a
        /// session (DESIGN §9.4).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<u64>,
    },
    /// The content hashes the run is bound to (DESIGN §4 "Frozen plan").
    PlanFrozen {
        spec_hash: String,
        /// Rules block name -> hash.
        rules: BTreeMap<String, String>,
        /// Role name -> prompt template hash.
        prompts: BTreeMap<String, String>,
    },
    /// A step began (its name is in the header).
    StepStarted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        /// For an `each` step: how many work items this round calls (items kept from the
        /// previous round are not counted); each ends with `item_done` or `item_skipped`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        items: Option<u64>,
        /// For a `tool` step: the tool it calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
    },
    /// A model was called.
    ModelCall {
        role: String,
        model: String,
        /// `sha256:` of the rendered prompt.
        prompt_hash: String,
    },
    /// A model call returned an output (valid or not: a violation follows if not).
    ModelResult {
        role: String,
        input_tokens: u64,
        output_tokens: u64,
        latency_ms: u64,
    },
    /// Something the provider changed for the rest of the run, such as a server that
    /// refused an output mode (the weaker mode it falls back to).
    ProviderNote { model: String, message: String },
    /// A whitelisted tool was called during a model call.
    ToolCall {
        tool: String,
        args: Value,
        result: Value,
        /// The sandbox the tool ran in (DESIGN §20), in a live run; a replay runs no tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<String>,
    },
    /// A tool call cut by its tool's `timeout` (DESIGN §9.2): the model (or the `tool`
    /// step) got an error instead of a result, and the tool's process group was killed.
    ToolTimeout {
        tool: String,
        args: Value,
        timeout_ms: u64,
        /// The sandbox the tool ran in, in a live run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<String>,
    },
    /// A tool call outside the role's whitelist: refused, never executed.
    ToolDenied {
        tool: String,
        allowed: Vec<String>,
        /// The `permit` rule the call's arguments broke (none: outside the whitelist).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
    /// An output (or, with `tool`, a tool's output) broke its contract.
    ContractViolation {
        contract: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        violations: Vec<Violation>,
    },
    /// A model call hit its role's `timeout`.
    Timeout { after_ms: u64 },
    /// A retry of one of the four kinds (`retry` names the counter).
    Retry {
        retry: RetryKind,
        /// The attempt (provider, stage) or round (repair) that follows.
        next: u64,
        delay_ms: u64,
        reason: String,
    },
    /// A work item of an `each` step finished, successfully or not.
    ItemDone {
        status: ItemStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A work item was skipped because a dependency failed.
    ItemSkipped { because: String },
    /// A round's candidate was formed.
    Candidate {
        id: String,
        hash: String,
        /// The number of successful items.
        items: u64,
        failed: Vec<String>,
        skipped: Vec<String>,
    },
    /// A gate was evaluated.
    Gate {
        gate: String,
        candidate: String,
        hash: String,
        passed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        score: Option<f64>,
        rules: Vec<RuleResult>,
        scores: Vec<ScoreResult>,
        issues: Vec<Issue>,
    },
    /// A repair action was chosen for a failed gate.
    Repair {
        action: RepairAction,
        /// The error-level issue codes that led to it.
        codes: Vec<String>,
        /// Steps invalidated (rerun from here), in flow order.
        invalidated: Vec<String>,
        /// Items invalidated in an `each` step (empty: all).
        items: Vec<String>,
    },
    /// A round made no progress (`rounds` in a row of `limit`).
    NoProgress { rounds: u64, limit: u64 },
    /// A budget was used up.
    Budget {
        budget: BudgetKind,
        used: Number,
        limit: Number,
    },
    /// The delivery was written and read back.
    Delivery {
        candidate: String,
        path: String,
        expected_hash: String,
        actual_hash: String,
        matches: bool,
    },
    /// An invariant broke at run time.
    InvariantViolated { invariant: String, message: String },
    /// A person answered an `ask`.
    Human { question: String, answer: Value },
    /// The step (in the header) failed and its `on_error -> STEP` sent the run to `to`
    /// instead of ending it `step_failed`; `error` is what failed.
    StepError { error: String, to: String },
    /// A turn answered: what its `remember` assignments gave the session's fields (`none`
    /// clears an optional field), and how many turns the session keeps now.
    Session {
        turn: u64,
        remembered: BTreeMap<String, Value>,
        kept: u64,
    },
    /// The run ended.
    RunFinished {
        outcome: Outcome,
        reason: Reason,
        /// The best candidate so far, if any (named even when it is not delivered).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        best: Option<String>,
        delivered: bool,
        /// The text of a `block "..."`/`fail "..."` action or terminal, if one ended the run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The state machine moved (`received -> planning -> executing -> evaluating ->
    /// repairing -> finalizing`), written before the move takes effect.
    Phase { from: String, to: String },
    /// Repair stopped (`max_rounds`, `no_progress`, `no_repair_action`, `human_rejected`):
    /// `best`, if any, goes to the finalize step as `below_target`.
    RepairStopped {
        reason: Reason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        best: Option<String>,
    },
}

/// The four retry counters (a new run is never automatic, so it has no event).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryKind {
    /// A model call failed transiently, timed out or broke its contract.
    Provider,
    /// An `each` item failed its per-item check.
    Stage,
    /// A `tool` step's call failed or timed out and runs again (the tool's `retry`).
    Tool,
    /// A gate failed and a repair round begins.
    Repair,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    Ok,
    Failed,
}

/// One hard or warn rule of a gate evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleResult {
    pub name: String,
    pub severity: RuleSeverity,
    pub holds: bool,
    /// Why the rule could not be evaluated (it then does not hold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleSeverity {
    Hard,
    Warn,
}

/// One score rule of a gate evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreResult {
    pub name: String,
    pub weight: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An issue a gate raised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Issue {
    pub code: String,
    pub severity: IssueSeverity,
    /// The gate whose rule raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// The rule or score that raised it.
    pub rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The value of the rule's `detail` expression: the evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
    /// The work items the issue names (empty: none in particular).
    #[serde(default)]
    pub items: Vec<String>,
}

/// Error-level issues (hard rules, scores below their threshold) drive repair; warnings
/// are only reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueSeverity {
    Error,
    #[serde(rename = "warn")]
    Warning,
}

/// The repair action chosen, as written in the trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RepairAction {
    Rerun { step: String, with_feedback: bool },
    Replan,
    Accept,
    Block { reason: String },
    Fail { reason: String },
    Ask { question: String },
}

/// A budget dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    Tokens,
    Cost,
    Wall,
    Steps,
}

impl BudgetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::Tokens => "tokens",
            BudgetKind::Cost => "cost",
            BudgetKind::Wall => "wall",
            BudgetKind::Steps => "steps",
        }
    }
}

impl fmt::Display for BudgetKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// A terminal state of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    BelowTarget,
    Blocked,
    Failed,
    Cancelled,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Outcome::Completed,
        Outcome::BelowTarget,
        Outcome::Blocked,
        Outcome::Failed,
        Outcome::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::BelowTarget => "below_target",
            Outcome::Blocked => "blocked",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl FromStr for Outcome {
    type Err = ParseTerminalError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Outcome::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == text)
            .ok_or_else(|| ParseTerminalError {
                text: text.to_string(),
                expected: "completed, below_target, blocked, failed or cancelled",
            })
    }
}

/// Why a run ended. Written `gate_passed`, `budget_exhausted{tokens}`,
/// `hard_gate{SECRET_LEAK}`, `invariant{bounded_cost}`, `step_failed{execute}`, ...
/// (serialized as that string). `done` is a flow that reached `done` with no gate
/// deciding on the way (a flow without a gate).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    GatePassed,
    MaxRounds,
    NoProgress,
    BudgetExhausted(BudgetKind),
    HardGate {
        code: String,
    },
    DeliveryMismatch,
    Invariant {
        name: String,
    },
    StepFailed {
        step: String,
    },
    /// The flow chose a `blocked "..."` or `failed "..."` terminal after `step` (a
    /// transition led there; nothing failed): the terminal's text is the message.
    Routed {
        step: String,
    },
    HumanRejected,
    NoRepairAction,
    Cancelled,
    Done,
    /// A journal or trace write failed (a full disk): the run stopped at once, with no
    /// further call, rather than go on without the record a resume needs (DESIGN §15).
    JournalUnwritable,
}

impl fmt::Display for Reason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::GatePassed => formatter.write_str("gate_passed"),
            Reason::MaxRounds => formatter.write_str("max_rounds"),
            Reason::NoProgress => formatter.write_str("no_progress"),
            Reason::BudgetExhausted(which) => write!(formatter, "budget_exhausted{{{which}}}"),
            Reason::HardGate { code } => write!(formatter, "hard_gate{{{code}}}"),
            Reason::DeliveryMismatch => formatter.write_str("delivery_mismatch"),
            Reason::Invariant { name } => write!(formatter, "invariant{{{name}}}"),
            Reason::StepFailed { step } => write!(formatter, "step_failed{{{step}}}"),
            Reason::Routed { step } => write!(formatter, "routed{{{step}}}"),
            Reason::HumanRejected => formatter.write_str("human_rejected"),
            Reason::NoRepairAction => formatter.write_str("no_repair_action"),
            Reason::Cancelled => formatter.write_str("cancelled"),
            Reason::Done => formatter.write_str("done"),
            Reason::JournalUnwritable => formatter.write_str("journal_unwritable"),
        }
    }
}

/// A reason or termination text that is not one of the known forms.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {text:?}: expected {expected}{}", quote_hint(text))]
pub struct ParseTerminalError {
    pub text: String,
    pub expected: &'static str,
}

/// For a reason that takes an argument but came without one (in YAML, an unquoted
/// `step_failed{review}` in a flow mapping loses its `{review}`): how to write it.
fn quote_hint(text: &str) -> String {
    let name = text.split('{').next().unwrap_or(text).trim();
    let example = match name {
        "step_failed" => "step_failed{review}",
        "routed" => "routed{execute}",
        "hard_gate" => "hard_gate{no_sources}",
        "invariant" => "invariant{plan_frozen}",
        "budget_exhausted" => "budget_exhausted{cost}",
        _ => return String::new(),
    };
    format!(
        "; `{name}` takes an argument in braces: quote it in YAML, e.g. `reason: \"{example}\"` (an unquoted `{{` starts a mapping)"
    )
}

const REASONS: &str = "gate_passed, max_rounds, no_progress, budget_exhausted{tokens|cost|wall|steps}, \
hard_gate{CODE}, delivery_mismatch, invariant{NAME}, step_failed{STEP}, routed{STEP}, human_rejected, \
no_repair_action, cancelled, done or journal_unwritable";

impl FromStr for Reason {
    type Err = ParseTerminalError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || ParseTerminalError {
            text: text.to_string(),
            expected: REASONS,
        };
        let (name, argument) = match text.split_once('{') {
            Some((name, rest)) => {
                let argument = rest.strip_suffix('}').ok_or_else(error)?;
                if argument.is_empty() || argument.contains(['{', '}']) {
                    return Err(error());
                }
                (name, Some(argument.to_string()))
            }
            None => (text, None),
        };
        let reason = match (name, argument) {
            ("gate_passed", None) => Reason::GatePassed,
            ("max_rounds", None) => Reason::MaxRounds,
            ("no_progress", None) => Reason::NoProgress,
            ("delivery_mismatch", None) => Reason::DeliveryMismatch,
            ("human_rejected", None) => Reason::HumanRejected,
            ("no_repair_action", None) => Reason::NoRepairAction,
            ("cancelled", None) => Reason::Cancelled,
            ("done", None) => Reason::Done,
            ("journal_unwritable", None) => Reason::JournalUnwritable,
            ("budget_exhausted", Some(which)) => Reason::BudgetExhausted(match which.as_str() {
                "tokens" => BudgetKind::Tokens,
                "cost" => BudgetKind::Cost,
                "wall" => BudgetKind::Wall,
                "steps" => BudgetKind::Steps,
                _ => return Err(error()),
            }),
            ("hard_gate", Some(code)) => Reason::HardGate { code },
            ("invariant", Some(name)) => Reason::Invariant { name },
            ("step_failed", Some(step)) => Reason::StepFailed { step },
            ("routed", Some(step)) => Reason::Routed { step },
            _ => return Err(error()),
        };
        Ok(reason)
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// How a run ended: `failed{delivery_mismatch}`, `completed{gate_passed}`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Termination {
    pub outcome: Outcome,
    pub reason: Reason,
}

impl fmt::Display for Termination {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}{{{}}}", self.outcome, self.reason)
    }
}

impl FromStr for Termination {
    type Err = ParseTerminalError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || ParseTerminalError {
            text: text.to_string(),
            expected: "OUTCOME{REASON}, e.g. failed{delivery_mismatch}",
        };
        let (outcome, rest) = text.split_once('{').ok_or_else(error)?;
        let reason = rest.strip_suffix('}').ok_or_else(error)?;
        Ok(Termination {
            outcome: outcome.parse()?,
            reason: reason.parse()?,
        })
    }
}

/// Writing the trace failed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot write the trace to {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot serialize a trace event: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// Where trace events go. Append-only: an event, once appended, is never changed or
/// removed. The scheduler appends each event before the change it records takes effect.
pub trait TraceSink: Send {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError>;

    /// [`TraceSink::append`] for an event the caller no longer needs: a sink that keeps
    /// events takes it without a copy.
    fn append_owned(&mut self, event: TraceEvent) -> Result<(), TraceError> {
        self.append(&event)
    }
}

impl<S: TraceSink + ?Sized> TraceSink for &mut S {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        (**self).append(event)
    }

    fn append_owned(&mut self, event: TraceEvent) -> Result<(), TraceError> {
        (**self).append_owned(event)
    }
}

impl<S: TraceSink + ?Sized> TraceSink for Box<S> {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        (**self).append(event)
    }

    fn append_owned(&mut self, event: TraceEvent) -> Result<(), TraceError> {
        (**self).append_owned(event)
    }
}

/// Keeps events in memory (tests, the golden harness).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemorySink {
    events: Vec<TraceEvent>,
}

impl MemorySink {
    /// An empty sink with room for a short run's events (a run of a few calls writes a
    /// few dozen), so they are not copied as the list grows.
    pub fn new() -> Self {
        MemorySink {
            events: Vec::with_capacity(64),
        }
    }

    pub fn events(&self) -> &[TraceEvent] {
        &self.events
    }

    pub fn into_events(self) -> Vec<TraceEvent> {
        self.events
    }

    /// The events as JSON lines, each ending in a newline.
    pub fn to_jsonl(&self) -> Result<String, TraceError> {
        to_jsonl(&self.events)
    }
}

impl TraceSink for MemorySink {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        self.events.push(event.clone());
        Ok(())
    }

    fn append_owned(&mut self, event: TraceEvent) -> Result<(), TraceError> {
        self.events.push(event);
        Ok(())
    }
}

/// Sends every event to two sinks (a file and the live display, say), the first first.
#[derive(Debug)]
pub struct Tee<A, B>(pub A, pub B);

impl<A: TraceSink, B: TraceSink> TraceSink for Tee<A, B> {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        self.0.append(event)?;
        self.1.append(event)
    }

    fn append_owned(&mut self, event: TraceEvent) -> Result<(), TraceError> {
        self.0.append(&event)?;
        self.1.append_owned(event)
    }
}

/// `events` as JSON lines, each ending in a newline.
pub fn to_jsonl(events: &[TraceEvent]) -> Result<String, TraceError> {
    let mut out = Vec::with_capacity(events.len() * 192);
    for event in events {
        event.write_json(&mut out)?;
        out.push(b'\n');
    }
    utf8(out)
}

/// Written JSON as text (serde_json and [`text`] write UTF-8 only).
fn utf8(out: Vec<u8>) -> Result<String, TraceError> {
    String::from_utf8(out)
        .map_err(|error| TraceError::Serialize(serde_json::Error::io(std::io::Error::other(error))))
}

/// Parses JSON lines written by [`to_jsonl`] or a JSON Lines trace file (blank lines are skipped).
pub fn from_jsonl(text: &str) -> Result<Vec<TraceEvent>, TraceError> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(TraceError::from))
        .collect()
}

pub mod text;

/// One way a value breaks its contract.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Where: `tasks[2].id`, or `$` for the value itself.
    pub path: String,
    /// What is wrong, in words a model can act on.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}: {}", self.path, self.message)
    }
}

#[cfg(test)]
mod tests;
