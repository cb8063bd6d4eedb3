//! The repair policy: from a failed gate's issues to one whitelisted action (the decision, separate from the loop that carries it out).
//!
//! Each error-level issue maps to the first arm naming its code, else to the `_` arm;
//! `accept`ed issues ask for nothing. Of the actions asked for, the strongest wins:
//! `block`/`fail` > `ask` > `replan` > `rerun` (of the most upstream step). A rerun names
//! the items its issues name, unless one of its issues names none (then the whole step).
//! Progress is measured on outcomes: a round whose issue codes, score and candidate hash
//! equal the previous round's, or whose hash equals any earlier candidate's, made none.

use std::collections::BTreeSet;

use charter_compiler::graph::{ActionIr, FlowIr, RepairIr, RepairPatternIr};
use petgraph::algo::has_path_connecting;

use super::gate::{GateResult, IssueLevel};
use super::state::RoundSignature;

/// What the repair table decides for a failed gate.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// `block "reason"`: stop as `blocked`. `code` is the issue that asked for it.
    Block { reason: String, code: String },
    /// `fail "reason"`: stop as `failed`.
    Fail { reason: String, code: String },
    /// `ask "question"`: a person decides whether to go on repairing.
    Ask { question: String, codes: Vec<String> },
    /// `replan`: run the flow again from its entry step.
    Replan { codes: Vec<String> },
    /// `rerun STEP`: invalidate it and its downstream; only `items` of an `each` step
    /// (and their dependents) when not empty.
    Rerun {
        step: String,
        with_feedback: bool,
        items: Vec<String>,
        codes: Vec<String>,
    },
    /// No error-level issue maps to an action (every one `accept`ed, or the gate failed
    /// only on its pass rule).
    NoAction,
}

impl Decision {
    /// The action's name as the trace shows it.
    pub fn name(&self) -> &'static str {
        match self {
            Decision::Block { .. } => "block",
            Decision::Fail { .. } => "fail",
            Decision::Ask { .. } => "ask",
            Decision::Replan { .. } => "replan",
            Decision::Rerun { .. } => "rerun",
            Decision::NoAction => "none",
        }
    }
}

/// The repair table as a policy.
#[derive(Clone, Copy, Debug)]
pub struct RepairPolicy<'a> {
    pub table: &'a RepairIr,
    pub flow: &'a FlowIr,
}

impl<'a> RepairPolicy<'a> {
    /// The action of the arm that handles `code`, if any.
    pub fn action_for(&self, code: &str) -> Option<&'a ActionIr> {
        let named = self.table.arms.iter().find(|arm| match &arm.pattern {
            RepairPatternIr::Codes { codes } => codes.iter().any(|c| c == code),
            RepairPatternIr::Wildcard => false,
        });
        named
            .or_else(|| {
                self.table
                    .arms
                    .iter()
                    .find(|arm| arm.pattern == RepairPatternIr::Wildcard)
            })
            .map(|arm| &arm.action)
    }

    /// Decides what to do about a failed gate's evaluation.
    pub fn decide(&self, evaluation: &GateResult) -> Decision {
        let mut blocks = Vec::new();
        let mut asks = Vec::new();
        let mut replans = Vec::new();
        let mut reruns: Vec<(String, bool, &str, &[String])> = Vec::new();
        for issue in evaluation
            .issues
            .iter()
            .filter(|issue| issue.level == IssueLevel::Error)
        {
            match self.action_for(&issue.code) {
                Some(ActionIr::Block { reason }) => blocks.push(Decision::Block {
                    reason: reason.clone(),
                    code: issue.code.clone(),
                }),
                Some(ActionIr::Fail { reason }) => blocks.push(Decision::Fail {
                    reason: reason.clone(),
                    code: issue.code.clone(),
                }),
                Some(ActionIr::Ask { question }) => asks.push((question.clone(), issue.code.clone())),
                Some(ActionIr::Replan) => replans.push(issue.code.clone()),
                Some(ActionIr::Rerun {
                    step,
                    with_feedback,
                }) => reruns.push((step.clone(), *with_feedback, &issue.code, &issue.items)),
                Some(ActionIr::Accept) | None => {}
            }
        }
        if let Some(first) = blocks.into_iter().next() {
            return first;
        }
        if let Some((question, _)) = asks.first() {
            return Decision::Ask {
                question: question.clone(),
                codes: sorted(asks.iter().map(|(_, code)| code.clone())),
            };
        }
        if !replans.is_empty() {
            return Decision::Replan {
                codes: sorted(replans),
            };
        }
        let targets: BTreeSet<&str> = reruns.iter().map(|(step, ..)| step.as_str()).collect();
        let Some(step) = self.most_upstream(&targets) else {
            return Decision::NoAction;
        };
        let mine: Vec<_> = reruns.iter().filter(|(s, ..)| s == step).collect();
        let whole_step = mine.iter().any(|(.., items)| items.is_empty());
        let items = if whole_step {
            Vec::new()
        } else {
            sorted(mine.iter().flat_map(|(.., items)| items.iter().cloned()))
        };
        Decision::Rerun {
            step: step.to_string(),
            with_feedback: reruns.iter().any(|(_, feedback, ..)| *feedback),
            items,
            codes: sorted(reruns.iter().map(|(_, _, code, _)| code.to_string())),
        }
    }

    /// Of `targets`, the step every other is downstream of; failing that, the one
    /// written first.
    fn most_upstream<'t>(&self, targets: &BTreeSet<&'t str>) -> Option<&'t str> {
        let nodes: Vec<(&str, _)> = targets
            .iter()
            .filter_map(|step| self.flow.steps.get(*step).map(|node| (*step, *node)))
            .collect();
        let dominating = nodes.iter().find(|(_, node)| {
            nodes
                .iter()
                .all(|(_, other)| has_path_connecting(&self.flow.graph, *node, *other, None))
        });
        dominating
            .or_else(|| nodes.iter().min_by_key(|(_, node)| node.index()))
            .map(|(step, _)| *step)
    }
}

/// True when a round made no progress: the same codes, score and hash as the previous
/// round, or a hash any earlier candidate had.
pub fn is_no_progress(
    current: &RoundSignature,
    previous: Option<&RoundSignature>,
    earlier_hashes: &[&str],
) -> bool {
    let same_as_previous = previous.is_some_and(|previous| previous == current);
    same_as_previous || earlier_hashes.contains(&current.hash.as_str())
}

fn sorted(codes: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut codes: Vec<String> = codes.into_iter().collect();
    codes.sort();
    codes.dedup();
    codes
}
