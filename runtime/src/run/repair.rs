//! The repair decision for the scheduler: [`crate::repair::decide_repair`] (strongest action, most upstream rerun) plus the items a rerun is limited to.
//!
//! A rerun of step X is limited to the items its issues name (and their dependents) when
//! every issue that asks for that rerun names items; one issue naming none reruns the
//! whole step.

use charter_compiler::graph::{ActionIr, FlowIr, RepairIr};

use super::gate::Judged;
use crate::repair::{RepairDecision, action_for, decide_repair, flow_order};

/// What the repair table decides for a failed gate.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// `block "reason"`: stop as `blocked`; `code` is the issue that asked for it.
    Block { reason: String, code: String },
    /// `fail "reason"`: stop as `failed`.
    Fail { reason: String, code: String },
    /// `ask "question"`: a person decides whether to go on repairing.
    Ask {
        question: String,
        codes: Vec<String>,
    },
    /// `replan`: run the flow again from its entry step.
    Replan { codes: Vec<String> },
    /// `rerun STEP`, limited to `items` (and their dependents) when not empty.
    Rerun {
        step: String,
        with_feedback: bool,
        items: Vec<String>,
        codes: Vec<String>,
    },
    /// No error-level issue maps to an action.
    NoAction,
}

/// The repair table as a policy.
#[derive(Clone, Copy, Debug)]
pub struct RepairPolicy<'a> {
    pub table: &'a RepairIr,
    pub flow: &'a FlowIr,
}

impl RepairPolicy<'_> {
    /// Decides what to do about a failed gate's evaluation.
    pub fn decide(&self, judged: &Judged) -> Decision {
        let error_codes = judged.error_codes();
        let (action, codes) = match decide_repair(self.table, &error_codes, &flow_order(self.flow))
        {
            RepairDecision::NoAction => return Decision::NoAction,
            RepairDecision::Act { action, codes } => (action, codes),
        };
        let first = codes.first().cloned().unwrap_or_default();
        match action {
            ActionIr::Block { reason } => Decision::Block {
                reason,
                code: first,
            },
            ActionIr::Fail { reason } => Decision::Fail {
                reason,
                code: first,
            },
            ActionIr::Ask { question } => Decision::Ask { question, codes },
            ActionIr::Replan => Decision::Replan { codes },
            ActionIr::Accept => Decision::NoAction,
            ActionIr::Rerun {
                step,
                with_feedback,
            } => {
                let mine: Vec<&String> = codes
                    .iter()
                    .filter(|code| {
                        matches!(action_for(self.table, code), Some(ActionIr::Rerun { step: s, .. }) if *s == step)
                    })
                    .collect();
                let named: Vec<Option<&Vec<String>>> = mine
                    .iter()
                    .map(|code| judged.items.get(*code).filter(|items| !items.is_empty()))
                    .collect();
                let items = if named.is_empty() || named.iter().any(Option::is_none) {
                    Vec::new()
                } else {
                    let mut items: Vec<String> =
                        named.into_iter().flatten().flatten().cloned().collect();
                    items.sort();
                    items.dedup();
                    items
                };
                Decision::Rerun {
                    step,
                    with_feedback,
                    items,
                    codes,
                }
            }
        }
    }
}
