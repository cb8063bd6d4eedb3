//! The `agency` seed spec: per-order review with stage retries, partial success, and a repair that asks a person.

mod support;

use support::{Replayed, replay, seed};

const INPUT: &str = r#"{"need": "a launch checklist"}"#;

const PLAN: &str = r#"calls:
  - step: plan
    response:
      need: checklist
      tasks:
        - { id: T-001, kind: research, goal: risks, output_format: bullets, acceptance: [five] }
        - { id: T-002, kind: writing, goal: checklist, output_format: list, acceptance: [covers], depends_on: [T-001] }
"#;

fn ok(item: &str, round: u64) -> String {
    format!(
        "  - {{ step: work, round: {round}, item: {item}, response: {{ task_id: {item}, status: completed, result: r, summary: s, process_notes: n }} }}\n  \
         - {{ step: work, round: {round}, item: {item}, role: reviewer, response: {{ task_id: {item}, quality: 8 }} }}\n"
    )
}

/// T-001's executor gives up after its four calls (`retry: 3`): T-002 is skipped.
fn t001_fails(round: u64) -> String {
    (1..=4)
        .map(|attempt| {
            format!("  - {{ step: work, round: {round}, item: T-001, attempt: {attempt}, error: {{ status: 503 }} }}\n")
        })
        .collect()
}

fn run(calls: &str) -> Replayed {
    replay(&seed("agency"), INPUT, calls)
}

#[test]
fn a_person_approves_another_round_and_it_succeeds() {
    let calls = format!(
        "{PLAN}{}{}{}  - {{ step: summarize, round: 2, response: {{ text: all }} }}\n  \
         - {{ step: proofread, round: 2, response: {{ unsupported: [] }} }}\n  \
         - {{ step: deliver, round: 2, response: {{ candidate_id: c2, summary: all }} }}\n\
         humans:\n  - {{ step: audit, round: 1, answer: {{ approved: true }} }}\n",
        t001_fails(1),
        ok("T-001", 2),
        ok("T-002", 2),
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let repair = &replayed.of_kind("repair")[0];
    assert_eq!(repair["action"]["kind"], "ask");
    assert_eq!(repair["codes"], serde_json::json!(["NOTHING_PASSED"]));
    assert_eq!(replayed.of_kind("human")[0]["answer"]["approved"], true);
    let retries: Vec<_> = replayed
        .of_kind("retry")
        .iter()
        .filter(|r| r["retry"] == "provider")
        .map(|r| r["delay_ms"].clone())
        .collect();
    assert_eq!(retries, [1000, 2000, 4000], "retry: 3 backoff 1s");
}

#[test]
fn a_person_declining_another_round_when_nothing_passed_blocks_the_run() {
    let calls = format!(
        "{PLAN}{}humans:\n  - {{ step: audit, answer: {{ approved: false }} }}\n",
        t001_fails(1),
    );
    let replayed = run(&calls);
    replayed.assert_ending("blocked{human_rejected}");
    let candidate = &replayed.of_kind("candidate")[0];
    assert_eq!(candidate["failed"], serde_json::json!(["T-001"]));
    assert_eq!(candidate["skipped"], serde_json::json!(["T-002"]));
    assert!(replayed.report().outcome.delivered.is_none());
}
