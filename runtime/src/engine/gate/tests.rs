//! Tests of gate evaluation on DESIGN's quality gate: hard rules a score cannot hide, weighted means, issues.

use charter_compiler::graph::CompiledSpec;
use serde_json::{Value, json};

use super::*;
use crate::engine::eval::Bindings;
use crate::testing::{LOOP_SPEC, compile_spec};

fn spec() -> CompiledSpec {
    compile_spec(LOOP_SPEC)
}

fn env(statuses: &[&str], text: &str, review: Option<Value>) -> Bindings {
    let items: Vec<Value> = statuses
        .iter()
        .enumerate()
        .map(|(index, status)| json!({"task_id": format!("T-{index}"), "status": status, "output": "o"}))
        .collect();
    let mut bindings = Bindings::default().with(
        NameIr::Candidate,
        json!({"id": "c1", "round": 1, "items": items, "text": text, "hash": "sha256:0", "failed": [], "skipped": []}),
    );
    if let Some(review) = review {
        bindings.set(NameIr::Step("review".into()), review);
    }
    bindings
}

/// Evaluates the quality gate and checks (passed, score, error codes, warning codes).
fn check(env: &Bindings, passed: bool, score: Option<f64>, errors: &[&str], warnings: &[&str]) {
    let spec = spec();
    let Some(gate) = spec.gates.get("quality") else {
        panic!("no gate")
    };
    let evaluation = evaluate_gate("quality", gate, env);
    assert_eq!(evaluation.passed, passed, "{evaluation:#?}");
    assert_eq!(evaluation.score, score, "{evaluation:#?}");
    assert_eq!(evaluation.error_codes(), errors, "{evaluation:#?}");
    let warned: Vec<&str> = evaluation
        .issues
        .iter()
        .filter(|issue| issue.severity == IssueSeverity::Warning)
        .map(|issue| issue.code.as_str())
        .collect();
    assert_eq!(warned, warnings, "{evaluation:#?}");
}

fn review(relevance: i64, completeness: i64, notes: Option<&str>) -> Option<Value> {
    Some(json!({"relevance": relevance, "completeness": completeness, "notes": notes}))
}

#[test]
fn a_clean_candidate_passes() {
    check(
        &env(&["ok", "ok"], "fine", review(10, 10, Some("n"))),
        true,
        Some(10.0),
        &[],
        &[],
    );
    check(
        &env(&["ok"], "fine", review(7, 7, Some("n"))),
        true,
        Some(7.0),
        &[],
        &[],
    );
}

#[test]
fn a_perfect_score_does_not_hide_a_hard_failure() {
    check(
        &env(&["ok", "failed"], "fine", review(10, 10, Some("n"))),
        false,
        Some(10.0),
        &["STAGE_FAILED"],
        &[],
    );
    check(
        &env(
            &["ok"],
            "key sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            review(10, 10, Some("n")),
        ),
        false,
        Some(10.0),
        &["SECRET_LEAK"],
        &[],
    );
}

#[test]
fn low_scores_raise_their_issues_and_warnings_do_not_fail() {
    let score = (2.0 * 5.0 + 10.0) / 3.0;
    check(
        &env(&["ok"], "fine", review(5, 10, None)),
        false,
        Some(score),
        &["LOW_RELEVANCE"],
        &["NO_NOTES"],
    );
    // A warning alone does not fail the gate.
    check(
        &env(&["ok"], "fine", review(9, 9, None)),
        true,
        Some(9.0),
        &[],
        &["NO_NOTES"],
    );
    // Above every threshold but below `pass when`: no issue, the gate fails.
    check(
        &env(&["ok"], "fine", review(6, 6, Some("n"))),
        false,
        Some(6.0),
        &[],
        &[],
    );
}

#[test]
fn missing_evidence_counts_as_zero_and_raises_issues() {
    check(
        &env(&["ok"], "fine", None),
        false,
        Some(0.0),
        &["LOW_RELEVANCE", "INCOMPLETE"],
        &["NO_NOTES"],
    );
    let spec = spec();
    let Some(gate) = spec.gates.get("quality") else {
        panic!("no gate")
    };
    let evaluation = evaluate_gate("quality", gate, &env(&["ok"], "fine", None));
    assert_eq!(
        evaluation
            .scores
            .first()
            .and_then(|score| score.error.clone()),
        Some("`review` has no value here".to_string())
    );
    assert_eq!(
        evaluation.issues.first().map(|issue| issue.message.clone()),
        Some("rule `has_notes` could not be evaluated: `review` has no value here".to_string())
    );
}

#[test]
fn evaluations_become_trace_events() {
    let spec = spec();
    let Some(gate) = spec.gates.get("quality") else {
        panic!("no gate")
    };
    let evaluation = evaluate_gate(
        "quality",
        gate,
        &env(&["failed"], "fine", review(4, 10, Some("n"))),
    );
    assert!(evaluation.hard_failure());
    let event = evaluation.to_event("c1", "sha256:0", None);
    let line = serde_json::to_value(&event).unwrap_or_default();
    assert_eq!(line["kind"], "gate");
    assert_eq!(line["passed"], false);
    assert_eq!(line["issues"][0]["code"], "STAGE_FAILED");
    assert_eq!(line["issues"][1]["code"], "LOW_RELEVANCE");
    assert_eq!(
        line["issues"][1]["message"],
        "score `relevance` is 4, below 6"
    );
    assert_eq!(line["rules"][0]["holds"], false);
    assert_eq!(line["scores"][0]["value"], 4.0);
}

/// The quality gate of `LOOP_SPEC` with its two score lines replaced by `scores` (and the
/// repair line of their codes by `repair`) and its `pass when` by `pass_when`, evaluated
/// on a clean candidate.
fn evaluate_variant(scores: &str, repair: &str, pass_when: &str) -> GateEvaluation {
    let text = LOOP_SPEC
        .replace(
            "  LOW_RELEVANCE, INCOMPLETE -> rerun execute with feedback\n",
            repair,
        )
        .replace(
            "  score relevance    weight 2: review.relevance     below 6 LOW_RELEVANCE\n  score completeness weight 1: review.completeness  below 6 INCOMPLETE\n",
            scores,
        )
        .replace("pass when score >= 7.0", pass_when);
    let spec = compile_spec(&text);
    let Some(gate) = spec.gates.get("quality") else {
        panic!("no gate")
    };
    evaluate_gate(
        "quality",
        gate,
        &env(&["ok"], "fine", review(9, 9, Some("n"))),
    )
}

#[test]
fn a_gate_without_scores_or_weights_has_no_score() {
    // Without scores there is no weighted mean (not 0/0).
    let unscored = evaluate_variant("", "", "pass when true");
    assert_eq!(unscored.score, None, "{unscored:#?}");
    assert!(unscored.passed, "{unscored:#?}");
    // Weights that are all zero (the compiler refuses them, E013, but `evaluate_gate`
    // takes any IR) give no weighted mean either, never 0/0.
    let spec = spec();
    let Some(gate) = spec.gates.get("quality") else {
        panic!("no gate")
    };
    let mut weightless = gate.clone();
    for score in &mut weightless.scores {
        score.weight = 0.0;
    }
    let evaluation = evaluate_gate(
        "quality",
        &weightless,
        &env(&["ok"], "fine", review(9, 9, Some("n"))),
    );
    assert_eq!(evaluation.score, None, "{evaluation:#?}");
}
