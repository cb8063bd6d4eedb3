//! Tests of the repair policy: strongest action wins, most upstream rerun, invalidation, no-progress.

use charter_compiler::graph::{CompiledSpec, RepairArmIr};

use super::*;
use crate::testing::{LOOP_SPEC, compile_spec};

fn spec() -> CompiledSpec {
    compile_spec(LOOP_SPEC)
}

fn arm(codes: &[&str], action: ActionIr) -> RepairArmIr {
    RepairArmIr {
        pattern: if codes.is_empty() {
            RepairPatternIr::Wildcard
        } else {
            RepairPatternIr::Codes {
                codes: codes.iter().map(|code| code.to_string()).collect(),
            }
        },
        action,
    }
}

fn rerun(step: &str, with_feedback: bool) -> ActionIr {
    ActionIr::Rerun {
        step: step.into(),
        with_feedback,
    }
}

/// A table with one arm per kind of action, and a wildcard.
fn table() -> RepairIr {
    RepairIr {
        rounds: 3,
        no_progress: 2,
        arms: vec![
            arm(&["EXEC"], rerun("execute", false)),
            arm(&["EXEC_FB"], rerun("execute", true)),
            arm(&["PLAN"], rerun("plan", false)),
            arm(&["REPLAN", "ALSO_REPLAN"], ActionIr::Replan),
            arm(
                &["ASK"],
                ActionIr::Ask {
                    question: "ok?".into(),
                },
            ),
            arm(
                &["FAIL"],
                ActionIr::Fail {
                    reason: "bad".into(),
                },
            ),
            arm(
                &["BLOCK"],
                ActionIr::Block {
                    reason: "stop".into(),
                },
            ),
            arm(&["FINE", "ALSO_FINE"], ActionIr::Accept),
            arm(
                &[],
                ActionIr::Block {
                    reason: "unknown issue".into(),
                },
            ),
        ],
    }
}

/// Decides for `codes` and checks the action and the codes it answers.
fn check(codes: &[&str], expected: Option<(ActionIr, &[&str])>) {
    let spec = spec();
    let order = flow_order(&spec.flow);
    let codes: Vec<String> = codes.iter().map(|code| code.to_string()).collect();
    let decision = decide_repair(&table(), &codes, &order);
    let expected = match expected {
        Some((action, codes)) => RepairDecision::Act {
            action,
            codes: codes.iter().map(|code| code.to_string()).collect(),
        },
        None => RepairDecision::NoAction,
    };
    assert_eq!(decision, expected, "{codes:?}");
}

#[test]
fn the_strongest_action_wins() {
    check(&["EXEC"], Some((rerun("execute", false), &["EXEC"])));
    check(&["EXEC", "REPLAN"], Some((ActionIr::Replan, &["REPLAN"])));
    check(
        &["REPLAN", "ASK", "EXEC"],
        Some((
            ActionIr::Ask {
                question: "ok?".into(),
            },
            &["ASK"],
        )),
    );
    check(
        &["ASK", "FAIL"],
        Some((
            ActionIr::Fail {
                reason: "bad".into(),
            },
            &["FAIL"],
        )),
    );
    // Block and fail are equally strong: the first issue's action stands.
    check(
        &["BLOCK", "FAIL"],
        Some((
            ActionIr::Block {
                reason: "stop".into(),
            },
            &["BLOCK"],
        )),
    );
    check(
        &["FAIL", "BLOCK"],
        Some((
            ActionIr::Fail {
                reason: "bad".into(),
            },
            &["FAIL"],
        )),
    );
}

#[test]
fn reruns_merge_to_the_most_upstream_step_with_feedback_if_any_asked() {
    check(
        &["EXEC", "PLAN"],
        Some((rerun("plan", false), &["EXEC", "PLAN"])),
    );
    check(
        &["EXEC", "EXEC_FB"],
        Some((rerun("execute", true), &["EXEC", "EXEC_FB"])),
    );
    check(
        &["EXEC_FB", "PLAN"],
        Some((rerun("plan", true), &["EXEC_FB", "PLAN"])),
    );
}

#[test]
fn two_replans_are_one_replan_answering_both_issues() {
    check(
        &["REPLAN", "ALSO_REPLAN"],
        Some((ActionIr::Replan, &["REPLAN", "ALSO_REPLAN"])),
    );
}

#[test]
fn accepted_issues_are_not_repaired_and_unknown_codes_take_the_wildcard() {
    check(&["FINE", "ALSO_FINE"], None);
    check(&[], None);
    check(
        &["FINE", "EXEC"],
        Some((rerun("execute", false), &["EXEC"])),
    );
    check(
        &["SOMETHING_ELSE"],
        Some((
            ActionIr::Block {
                reason: "unknown issue".into(),
            },
            &["SOMETHING_ELSE"],
        )),
    );
    let no_wildcard = RepairIr {
        arms: table().arms.into_iter().take(8).collect(),
        ..table()
    };
    let decision = decide_repair(
        &no_wildcard,
        &["SOMETHING_ELSE".to_string()],
        &BTreeMap::new(),
    );
    assert_eq!(decision, RepairDecision::NoAction);
}

#[test]
fn the_design_table_is_applied() {
    let spec = spec();
    let Some(repair) = &spec.repair else {
        panic!("no repair")
    };
    let order = flow_order(&spec.flow);
    let codes = |codes: &[&str]| {
        codes
            .iter()
            .map(|code| code.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        decide_repair(repair, &codes(&["STAGE_FAILED", "LOW_RELEVANCE"]), &order),
        RepairDecision::Act {
            action: rerun("execute", true),
            codes: codes(&["STAGE_FAILED", "LOW_RELEVANCE"])
        }
    );
    assert_eq!(
        decide_repair(repair, &codes(&["LOW_RELEVANCE", "SECRET_LEAK"]), &order),
        RepairDecision::Act {
            action: ActionIr::Block {
                reason: "secret in candidate".into()
            },
            codes: codes(&["SECRET_LEAK"])
        }
    );
    assert_eq!(
        decide_repair(repair, &codes(&["NO_NOTES"]), &order),
        RepairDecision::NoAction
    );
    assert_eq!(
        action_event(&rerun("execute", true)),
        RepairAction::Rerun {
            step: "execute".into(),
            with_feedback: true
        }
    );
}

#[test]
fn flow_order_and_invalidation() {
    let spec = spec();
    let order = flow_order(&spec.flow);
    let ranked: Vec<(&str, usize)> = order.iter().map(|(name, rank)| (*name, *rank)).collect();
    assert_eq!(
        ranked,
        [
            ("deliver", 4),
            ("execute", 1),
            ("judge", 3),
            ("plan", 0),
            ("review", 2)
        ]
    );
    assert_eq!(
        downstream(&spec.flow, &order, "execute"),
        ["execute", "review", "judge", "deliver"]
    );
    assert_eq!(
        downstream(&spec.flow, &order, "plan"),
        ["plan", "execute", "review", "judge", "deliver"]
    );
    assert_eq!(
        downstream(&spec.flow, &order, "judge"),
        ["judge", "deliver"]
    );
    assert!(downstream(&spec.flow, &order, "nowhere").is_empty());
}

#[test]
fn progress_is_measured_on_outcomes() {
    let codes = |codes: &[&str]| {
        codes
            .iter()
            .map(|code| code.to_string())
            .collect::<Vec<_>>()
    };
    let mut tracker = ProgressTracker::new(2);
    assert!(tracker.record(&codes(&["LOW"]), Some(5.0), "h1"));
    // Same issues, score and hash: no progress.
    assert!(!tracker.record(&codes(&["LOW"]), Some(5.0), "h1"));
    assert_eq!(tracker.stalled(), 1);
    assert!(!tracker.exhausted());
    // A better score with a new candidate is progress, and resets the count.
    assert!(tracker.record(&codes(&["LOW"]), Some(6.0), "h2"));
    assert_eq!(tracker.stalled(), 0);
    // Going back to an earlier candidate is not progress, whatever the score.
    assert!(!tracker.record(&codes(&["LOW"]), Some(6.5), "h1"));
    assert!(!tracker.record(&codes(&["LOW"]), Some(6.5), "h1"));
    assert!(tracker.exhausted());
    assert_eq!(tracker.limit(), 2);
    // The order of codes does not matter.
    let mut tracker = ProgressTracker::new(1);
    tracker.record(&codes(&["A", "B"]), None, "x");
    assert!(!tracker.record(&codes(&["B", "A"]), None, "x"));
    assert!(tracker.exhausted());
}
