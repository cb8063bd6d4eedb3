//! How a run ends: terminal states, their reasons, the outcome value and run errors.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::budget::BudgetKind;
use super::delivery::Delivered;
use super::ports::CallKey;

/// A terminal state (DESIGN §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Terminal {
    Completed,
    BelowTarget,
    Blocked,
    Failed,
    Cancelled,
}

impl fmt::Display for Terminal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Terminal::Completed => "completed",
            Terminal::BelowTarget => "below_target",
            Terminal::Blocked => "blocked",
            Terminal::Failed => "failed",
            Terminal::Cancelled => "cancelled",
        })
    }
}

/// Why a run reached its terminal state. Displayed as DESIGN §4 writes it:
/// `gate_passed`, `budget_exhausted{tokens}`, `hard_gate{SECRET_LEAK}`, ...
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    GatePassed,
    /// The flow reached `done` without a gate deciding (a flow with no gate on the way).
    Done,
    /// The flow reached a `blocked "..."` or `failed "..."` target of its own.
    FlowTarget,
    MaxRounds,
    NoProgress,
    BudgetExhausted(BudgetKind),
    HardGate(String),
    DeliveryMismatch,
    Invariant(String),
    StepFailed(String),
    HumanRejected,
    NoRepairAction,
    Cancelled,
}

impl Reason {
    /// The reason's kind without its argument: `budget_exhausted`, `hard_gate`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            Reason::GatePassed => "gate_passed",
            Reason::Done => "done",
            Reason::FlowTarget => "flow_target",
            Reason::MaxRounds => "max_rounds",
            Reason::NoProgress => "no_progress",
            Reason::BudgetExhausted(_) => "budget_exhausted",
            Reason::HardGate(_) => "hard_gate",
            Reason::DeliveryMismatch => "delivery_mismatch",
            Reason::Invariant(_) => "invariant",
            Reason::StepFailed(_) => "step_failed",
            Reason::HumanRejected => "human_rejected",
            Reason::NoRepairAction => "no_repair_action",
            Reason::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::BudgetExhausted(which) => write!(formatter, "budget_exhausted{{{which}}}"),
            Reason::HardGate(code) => write!(formatter, "hard_gate{{{code}}}"),
            Reason::Invariant(name) => write!(formatter, "invariant{{{name}}}"),
            Reason::StepFailed(step) => write!(formatter, "step_failed{{{step}}}"),
            other => formatter.write_str(other.kind()),
        }
    }
}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    pub terminal: Terminal,
    pub reason: Reason,
    /// A sentence for people (a `block` reason, the flow target's text, what failed).
    pub message: Option<String>,
    /// The best candidate's id at the end, if any (named even when not delivered).
    pub best: Option<String>,
    /// The verified delivery, when one was made.
    pub delivered: Option<Delivered>,
    /// The last round.
    pub rounds: u64,
    /// Every candidate: id, hash and score.
    pub candidates: Vec<(String, String, Option<f64>)>,
}

impl RunOutcome {
    /// The process exit code `charter replay` and `charter run` use: 0 for `completed`,
    /// 3 for any other terminal state.
    pub fn exit_code(&self) -> u8 {
        if self.terminal == Terminal::Completed {
            0
        } else {
            3
        }
    }
}

/// A fault injected into a replay (DESIGN §5 `faults`).
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// After step `after` completes, alter the stored output of `item` (or of the step a
    /// gate judges, for a single call), as a late overwrite would.
    Tamper { after: String, item: Option<String> },
}

/// How a run is configured.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Where the delivery goes.
    pub delivery: super::delivery::DeliveryTarget,
    pub faults: Vec<Fault>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            delivery: super::delivery::DeliveryTarget::Memory,
            faults: Vec::new(),
        }
    }
}

impl RunConfig {
    /// Delivers into `directory`.
    pub fn with_out_dir(mut self, directory: PathBuf) -> Self {
        self.delivery = super::delivery::DeliveryTarget::Directory(directory);
        self
    }
}

/// A run that could not go on: not a terminal state, an error (exit 1).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunError {
    #[error("no recorded call for {key}")]
    Unrecorded { key: CallKey },
    #[error("provider failed: {0}")]
    Provider(String),
    #[error("no answer for the human decision at step `{step}`: {message}")]
    Human { step: String, message: String },
    #[error("the run's input is invalid: {0}")]
    Input(String),
    #[error("cannot write the delivery: {0}")]
    Delivery(String),
    #[error("{0}")]
    Flow(String),
}

/// Compact JSON for a candidate list entry.
pub(crate) fn candidate_summary(id: &str, hash: &str, score: Option<f64>) -> Value {
    serde_json::json!({ "id": id, "hash": hash, "score": score })
}
