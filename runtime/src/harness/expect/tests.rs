//! Tests of `expect`: answers matched as subsets, calls counted per step.

use serde_json::json;

use super::*;
use crate::formats::scenario::Expectation;
use crate::formats::trace::{Outcome, Reason};

#[test]
fn answers_match_as_subsets_and_calls_are_counted_per_step() {
    let answer = json!({"candidate_id": "c2", "summary": "done", "items": [{"id": "T-1", "ok": true}, {"id": "T-2"}]});
    for (expected, difference) in [
        (json!({"candidate_id": "c2"}), None),
        (json!({"items": [{"id": "T-1"}, {}]}), None),
        (
            json!({"summary": "done", "items": [{}, {"id": "T-2"}]}),
            None,
        ),
        (
            json!({"candidate_id": "c1"}),
            Some("answer.candidate_id = \"c1\", got \"c2\""),
        ),
        (
            json!({"missing": 1}),
            Some("answer.missing = 1, got no `missing`"),
        ),
        (
            json!({"items": [{"id": "T-1"}]}),
            Some("answer.items with 1 item, got 2"),
        ),
        (
            json!({"items": [{"ok": false}, {}]}),
            Some("answer.items[0].ok = false, got true"),
        ),
    ] {
        assert_eq!(
            subset_difference(&expected, &answer, "answer").as_deref(),
            difference,
            "{expected}"
        );
    }
    assert_eq!(subset_difference(&json!(1), &json!(1.0), "answer"), None);

    let expect: Expectation = crate::formats::yaml::from_str(
        "expect.yaml",
        "{ delivered: c2, answer: { summary: done }, calls: { plan: 1, execute: 3 } }",
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let outcome = crate::engine::run::RunOutcome {
        outcome: Outcome::Completed,
        reason: Reason::GatePassed,
        message: None,
        best: Some("c1".into()),
        delivered: None,
        rounds: 1,
        candidates: Vec::new(),
        answer: Some(answer),
        answered_by: None,
        session: None,
    };
    let calls = [("plan".to_string(), 1), ("execute".to_string(), 4)]
        .into_iter()
        .collect();
    assert_eq!(
        unmet(&expect, &outcome, &calls),
        vec![
            "delivered c2, got no delivery (best c1)".to_string(),
            "3 model calls in step `execute`, got 4".to_string(),
        ]
    );
}
