//! How a run ends: terminal states, their reasons, the outcome value and run errors.

use std::path::PathBuf;

use super::delivery::Delivered;
use crate::engine::provider::CallKey;
pub use crate::formats::scenario::{Fault, Tamper};
pub use crate::formats::trace::{Outcome, Reason};

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    pub outcome: Outcome,
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
    /// The run's answer (DESIGN §9.3), for a run that ended `completed` or
    /// `below_target`: the output of the last role step that ran (the finalizer's
    /// `Delivery` in a flow that delivers; the summary after a budget ran out).
    pub answer: Option<serde_json::Value>,
    /// The role whose output is the answer (`run.answered_by`), when a role answered.
    pub answered_by: Option<String>,
    /// The conversation after this turn (DESIGN §9.4), for a run given a session whose
    /// turn answered; `None` otherwise (the session is left as it was).
    pub session: Option<crate::engine::session::Session>,
}

impl RunOutcome {
    /// `outcome{reason}`, as scenarios' `expect` and the harness compare it.
    pub fn termination(&self) -> crate::formats::trace::Termination {
        crate::formats::trace::Termination {
            outcome: self.outcome,
            reason: self.reason.clone(),
        }
    }

    /// The process exit code `charter replay` and `charter run` use: 0 for `completed`,
    /// 3 for any other terminal state.
    pub fn exit_code(&self) -> u8 {
        if self.outcome == Outcome::Completed {
            0
        } else {
            3
        }
    }
}

/// How a run is configured.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Where the delivery goes.
    pub delivery: super::delivery::DeliveryTarget,
    pub faults: Vec<Fault>,
    /// Set to `true` to cancel the run: in-flight calls are dropped and the run ends
    /// `cancelled{cancelled}` (Ctrl-C in a live run).
    pub cancel: Option<tokio::sync::watch::Receiver<bool>>,
    /// Told of tool calls as they start and end, and of each model answer (a live
    /// display); never part of the trace.
    pub observer: Option<std::sync::Arc<dyn crate::engine::provider::CallObserver>>,
    /// The conversation this run is one turn of (`charter run --session`, `charter
    /// chat`, a multi-turn scenario); `None` for a run outside a conversation.
    pub session: Option<crate::engine::session::Session>,
}

impl std::fmt::Debug for dyn crate::engine::provider::CallObserver {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("CallObserver")
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            delivery: super::delivery::DeliveryTarget::Memory,
            faults: Vec::new(),
            cancel: None,
            observer: None,
            session: None,
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
    #[error("no recorded call for {key}{}", crate::engine::provider::closest_text(closest.as_deref()))]
    Unrecorded {
        key: CallKey,
        /// The unused recording nearest to `key`, when one is close.
        closest: Option<Box<CallKey>>,
    },
    /// A replayed call's prompt does not meet its `expect_prompt`: one line per text.
    #[error("the prompt of call {key} {}", unmet.join("; "))]
    PromptExpectation { key: CallKey, unmet: Vec<String> },
    #[error("provider failed: {0}")]
    Provider(String),
    #[error("no usable answer for the human decision at step `{step}`: {message}")]
    Human { step: String, message: String },
    #[error("the run's input is invalid: {0}")]
    Input(String),
    /// The message says what about the delivery failed (`cannot write the delivery to …`).
    #[error("{0}")]
    Delivery(String),
    #[error("{0}")]
    Flow(String),
}

#[cfg(test)]
mod tests {
    use super::{RunError, RunOutcome};
    use crate::engine::candidate::DeliveryError;
    use crate::formats::trace::{Outcome, Reason};

    #[test]
    fn with_out_dir_delivers_into_the_directory() {
        let config = super::RunConfig::default().with_out_dir("out/run-1".into());
        assert!(matches!(
            config.delivery,
            crate::engine::run::delivery::DeliveryTarget::Directory(ref directory)
                if directory == std::path::Path::new("out/run-1")
        ));
    }

    #[test]
    fn only_a_completed_run_exits_0_every_other_end_exits_3() {
        for outcome in Outcome::ALL {
            let ended = RunOutcome {
                outcome,
                reason: Reason::Cancelled,
                message: None,
                best: None,
                delivered: None,
                rounds: 1,
                candidates: Vec::new(),
                answer: None,
                answered_by: None,
                session: None,
            };
            let expected = if outcome == Outcome::Completed { 0 } else { 3 };
            assert_eq!(ended.exit_code(), expected, "{outcome}");
        }
    }

    #[test]
    fn a_delivery_error_says_what_failed_once() {
        let io = DeliveryError::Io {
            path: "out/delivery.json".into(),
            source: std::io::Error::other("disk full"),
        };
        let shown = RunError::Delivery(io.to_string()).to_string();
        assert_eq!(
            shown,
            "cannot write the delivery to out/delivery.json: disk full"
        );
    }
}
