//! A linear flow end to end: call -> judge -> gate -> finalize -> done, with the events in order.

mod support;

use support::{fixture, replay};

const INPUT: &str = r#"{"goal": "rust"}"#;

const GOOD: &str = r#"
calls:
  - { step: write, response: { title: "Rust", body: "Rust is fast." }, latency: 2s,
      usage: { input_tokens: 100, output_tokens: 50 } }
  - { step: review, response: { relevance: 9, verdict: PASS }, latency: 1s }
  - { step: deliver, response: { candidate_id: c1, summary: "one post about Rust" } }
"#;

#[test]
fn a_passing_run_completes_and_delivers_the_evaluated_candidate() {
    let spec = fixture("review_loop");
    let replayed = replay(&spec, INPUT, GOOD);
    replayed.assert_ending("completed{gate_passed}");
    let report = replayed.report();
    assert!(report.unused_calls.is_empty(), "{:?}", report.unused_calls);
    assert_eq!(
        report
            .outcome
            .delivered
            .as_ref()
            .map(|d| d.candidate_id.as_str()),
        Some("c1")
    );
    assert_eq!(
        replayed.outline(),
        [
            "run_started",
            "plan_frozen",
            "phase write",
            "step_started write",
            "model_call write #1",
            "model_result write #1",
            "candidate write",
            "phase review",
            "step_started review",
            "model_call review #1",
            "model_result review #1",
            "step_started judge",
            "gate judge",
            "phase deliver",
            "step_started deliver",
            "model_call deliver #1",
            "model_result deliver #1",
            "delivery deliver",
            "run_finished",
        ]
    );
    let gate = &replayed.of_kind("gate")[0];
    assert_eq!(gate["score"], 9.0);
    assert_eq!(gate["passed"], true);
    let finished = &replayed.of_kind("run_finished")[0];
    assert_eq!(
        finished["t_ms"], 3000,
        "virtual time: 2 s + 1 s of recorded latency"
    );
}

#[test]
fn an_unrecorded_call_is_an_error_naming_its_key() {
    let spec = fixture("review_loop");
    let calls = r#"
calls:
  - { step: write, response: { title: "Rust", body: "Rust is fast." } }
"#;
    let replayed = replay(&spec, INPUT, calls);
    assert_eq!(
        replayed.ending(),
        "error: no recorded call for {step: review, round: 1, attempt: 1}"
    );
}
