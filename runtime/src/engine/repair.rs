//! The repair policy (DESIGN §4 "Repair"), separate from the scheduler's mechanics: which action a failed gate's issues lead to, what a rerun invalidates, and when rounds stop making progress.
//!
//! - [`decide_repair`] maps each error-level issue code to the first arm that names it
//!   (else the `_` arm); `accept` drops the issue; the strongest remaining action wins:
//!   `block`/`fail` > `ask` > `replan` > `rerun` of the most upstream step. With no
//!   action left the gate is not repaired ([`RepairDecision::NoAction`]:
//!   `below_target{no_repair_action}`).
//! - [`downstream`] is what `rerun X` invalidates: X and every step reachable from it
//!   without taking a repair edge.
//! - [`ProgressTracker`] counts rounds without progress: a round whose issue codes, score
//!   and candidate hash equal the previous round's, or whose candidate hash equals any
//!   earlier candidate's. Progress is measured on outcomes, never on how often a call
//!   repeats, so a converging run is never stopped; a round with progress resets the count.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use charter_compiler::graph::{ActionIr, FlowIr, RepairIr, RepairPatternIr, TransitionIr};
use petgraph::visit::EdgeRef;

use crate::formats::trace::RepairAction;

/// What to do about a failed gate.
#[derive(Clone, Debug, PartialEq)]
pub enum RepairDecision {
    /// Take `action`, for the error-level issue codes `codes`.
    Act {
        action: ActionIr,
        codes: Vec<String>,
    },
    /// No error-level issue maps to an action (none raised, or every one accepted).
    NoAction,
}

/// The action the repair table gives issue `code`: the first arm naming it, else `_`.
pub fn action_for<'a>(repair: &'a RepairIr, code: &str) -> Option<&'a ActionIr> {
    repair
        .arms
        .iter()
        .find(|arm| matches!(&arm.pattern, RepairPatternIr::Codes { codes } if codes.iter().any(|c| c == code)))
        .or_else(|| {
            repair
                .arms
                .iter()
                .find(|arm| arm.pattern == RepairPatternIr::Wildcard)
        })
        .map(|arm| &arm.action)
}

/// Decides the repair of a gate that failed with the error-level issue codes
/// `error_codes` (in the gate's order). `order` ranks steps from upstream (low) to
/// downstream (high), as [`flow_order`] computes it.
pub fn decide_repair(
    repair: &RepairIr,
    error_codes: &[String],
    order: &BTreeMap<&str, usize>,
) -> RepairDecision {
    let mut best: Option<(ActionIr, Vec<String>)> = None;
    for code in error_codes {
        let Some(action) = action_for(repair, code) else {
            continue;
        };
        if matches!(action, ActionIr::Accept) {
            continue;
        }
        best = Some(match best {
            None => (action.clone(), vec![code.clone()]),
            Some((current, mut codes)) => match stronger(action, &current, order) {
                Choice::New => (action.clone(), vec![code.clone()]),
                Choice::Current => (current, codes),
                Choice::Merge(merged) => {
                    codes.push(code.clone());
                    (merged, codes)
                }
            },
        });
    }
    match best {
        Some((action, codes)) => RepairDecision::Act { action, codes },
        None => RepairDecision::NoAction,
    }
}

enum Choice {
    New,
    Current,
    /// The same kind of action: one that covers both (a rerun of the more upstream step,
    /// with feedback if either asked for it).
    Merge(ActionIr),
}

fn strength(action: &ActionIr) -> u8 {
    match action {
        ActionIr::Block { .. } | ActionIr::Fail { .. } => 4,
        ActionIr::Ask { .. } => 3,
        ActionIr::Replan => 2,
        ActionIr::Rerun { .. } => 1,
        ActionIr::Accept => 0,
    }
}

fn stronger(new: &ActionIr, current: &ActionIr, order: &BTreeMap<&str, usize>) -> Choice {
    match strength(new).cmp(&strength(current)) {
        std::cmp::Ordering::Greater => Choice::New,
        std::cmp::Ordering::Less => Choice::Current,
        std::cmp::Ordering::Equal => match (new, current) {
            (
                ActionIr::Rerun {
                    step: new_step,
                    with_feedback: new_feedback,
                },
                ActionIr::Rerun {
                    step: current_step,
                    with_feedback: current_feedback,
                },
            ) => {
                let rank = |step: &String| order.get(step.as_str()).copied().unwrap_or(usize::MAX);
                let step = if (rank(new_step), new_step) < (rank(current_step), current_step) {
                    new_step
                } else {
                    current_step
                };
                Choice::Merge(ActionIr::Rerun {
                    step: step.clone(),
                    with_feedback: *new_feedback || *current_feedback,
                })
            }
            (ActionIr::Replan, ActionIr::Replan) => Choice::Merge(ActionIr::Replan),
            // Two blocks, fails or asks: the first issue's action stands.
            _ => Choice::Current,
        },
    }
}

/// The trace form of an action.
pub fn action_event(action: &ActionIr) -> RepairAction {
    match action {
        ActionIr::Rerun {
            step,
            with_feedback,
        } => RepairAction::Rerun {
            step: step.clone(),
            with_feedback: *with_feedback,
        },
        ActionIr::Replan => RepairAction::Replan,
        ActionIr::Accept => RepairAction::Accept,
        ActionIr::Block { reason } => RepairAction::Block {
            reason: reason.clone(),
        },
        ActionIr::Fail { reason } => RepairAction::Fail {
            reason: reason.clone(),
        },
        ActionIr::Ask { question } => RepairAction::Ask {
            question: question.clone(),
        },
    }
}

/// Every step's distance from the entry step along non-repair edges (upstream steps have
/// lower ranks); steps reached only through repair edges are left out.
pub fn flow_order(flow: &FlowIr) -> BTreeMap<&str, usize> {
    let mut order = BTreeMap::new();
    let mut queue = VecDeque::from([(flow.entry, 0usize)]);
    let mut seen = BTreeSet::from([flow.entry]);
    while let Some((node, depth)) = queue.pop_front() {
        let Some(step) = flow.graph.node_weight(node) else {
            continue;
        };
        if !step.kind.is_terminal() {
            order.insert(step.name.as_str(), depth);
        }
        for edge in flow.graph.edges(node) {
            if matches!(edge.weight(), TransitionIr::Repair { .. }) {
                continue;
            }
            if seen.insert(edge.target()) {
                queue.push_back((edge.target(), depth + 1));
            }
        }
    }
    order
}

/// What `rerun step` invalidates: `step` and every step reachable from it without a
/// repair edge, ordered upstream first (then by name), by `order` ([`flow_order`]).
/// Empty for an unknown step.
pub fn downstream(flow: &FlowIr, order: &BTreeMap<&str, usize>, step: &str) -> Vec<String> {
    let Some(&start) = flow.steps.get(step) else {
        return Vec::new();
    };
    let mut seen = BTreeSet::from([start]);
    let mut stack = vec![start];
    while let Some(node) = stack.pop() {
        for edge in flow.graph.edges(node) {
            if !matches!(edge.weight(), TransitionIr::Repair { .. }) && seen.insert(edge.target()) {
                stack.push(edge.target());
            }
        }
    }
    let mut steps: Vec<String> = seen
        .into_iter()
        .filter_map(|node| flow.graph.node_weight(node))
        .filter(|node| !node.kind.is_terminal())
        .map(|node| node.name.clone())
        .collect();
    steps.sort_by(|a, b| {
        let rank = |name: &String| order.get(name.as_str()).copied().unwrap_or(usize::MAX);
        (rank(a), a).cmp(&(rank(b), b))
    });
    steps
}

/// Counts consecutive rounds without progress.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressTracker {
    limit: u64,
    previous: Option<(BTreeSet<String>, Option<u64>, String)>,
    hashes: BTreeSet<String>,
    stalled: u64,
}

impl ProgressTracker {
    /// A tracker that is exhausted after `limit` rounds in a row without progress.
    pub fn new(limit: u64) -> Self {
        ProgressTracker {
            limit,
            previous: None,
            hashes: BTreeSet::new(),
            stalled: 0,
        }
    }

    /// Records a round's evaluation and returns whether it made progress.
    pub fn record(&mut self, codes: &[String], score: Option<f64>, hash: &str) -> bool {
        let fingerprint = (
            codes.iter().cloned().collect::<BTreeSet<_>>(),
            score.map(f64::to_bits),
            hash.to_string(),
        );
        let repeated = self.previous.as_ref() == Some(&fingerprint) || self.hashes.contains(hash);
        self.hashes.insert(hash.to_string());
        self.previous = Some(fingerprint);
        if repeated {
            self.stalled += 1;
        } else {
            self.stalled = 0;
        }
        !repeated
    }

    /// Rounds in a row without progress so far.
    pub fn stalled(&self) -> u64 {
        self.stalled
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// `no_progress` is reached: repair stops.
    pub fn exhausted(&self) -> bool {
        self.stalled >= self.limit
    }
}

#[cfg(test)]
mod tests;
