//! The `lead_agent` seed spec: a person confirms the plan, the rule engine and the checker judge the design, repair loops back to the creator, and a run that stops repairing still reports through its finalize step.

mod support;

use support::{Replayed, replay, seed};

const INPUT: &str = r#"{"message": "upload the nightly report"}"#;

/// The lead routes the message to the workflow pipeline, and the planner's plan.
const PLAN: &str = r#"calls:
  - { step: intent, response: { kind: workflow, why: "asks for an upload" } }
  - step: plan
    response:
      goal: upload
      nodes: [ { id: n1, kind: ftp_upload, purpose: upload } ]
"#;

/// The creator's draft in `round`, and the rule engine's clean report on it.
fn create(round: u64) -> String {
    format!(
        "  - {{ step: create, round: {round}, response: {{ workflow_id: W-1, version: 1, node_count: 1 }} }}\n  \
         - {{ step: validate, round: {round}, tool: validate_workflow, result: {{ issues: [] }} }}\n"
    )
}

fn check(round: u64, structure: u64) -> String {
    format!(
        "  - {{ step: check, round: {round}, response: {{ workflow_id: W-1, plan_feasible: true, structure: {structure}, parameters: 8, control_flow: 8 }} }}\n"
    )
}

const APPROVE: &str = "humans:\n  - { step: confirm, answer: { approved: true } }\n";

fn run(calls: &str) -> Replayed {
    replay(&seed("lead_agent"), INPUT, calls)
}

#[test]
fn a_weak_design_is_sent_back_to_the_creator_with_feedback() {
    let calls = format!(
        "{PLAN}{}{}{}{}  - {{ step: execute, round: 2, response: {{ workflow_id: W-1, kind: ok, detail: ran }} }}\n  \
         - {{ step: report, round: 2, response: {{ candidate_id: c2, summary: done }} }}\n{APPROVE}",
        create(1),
        check(1, 3),
        create(2),
        check(2, 9)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let repair = &replayed.of_kind("repair")[0];
    assert_eq!(repair["action"]["step"], "create");
    assert_eq!(repair["action"]["with_feedback"], true);
    assert_eq!(repair["codes"], serde_json::json!(["WEAK_STRUCTURE"]));
}

#[test]
fn repair_without_progress_still_reports_the_best_design_below_target() {
    let calls = format!(
        "{PLAN}{}{}{}{}{}{}  - {{ step: report, round: 3, response: {{ candidate_id: c1, summary: not good enough }} }}\n{APPROVE}",
        create(1),
        check(1, 3),
        create(2),
        check(2, 3),
        create(3),
        check(3, 3)
    );
    let replayed = run(&calls);
    replayed.assert_ending("below_target{no_progress}");
    assert_eq!(replayed.of_kind("no_progress").len(), 2);
    assert_eq!(
        replayed
            .report()
            .outcome
            .delivered
            .as_ref()
            .map(|d| d.candidate_id.as_str()),
        Some("c1"),
        "the workflow never ran: `execute` is none to the reporter"
    );
}

#[test]
fn a_rerun_of_the_judge_keeps_the_design_as_the_next_candidate() {
    let wrong_check = "  - { step: check, round: 1, response: { workflow_id: W-9, plan_feasible: true, structure: 9, parameters: 9, control_flow: 9 } }\n";
    let tail = "  - { step: execute, round: 2, response: { workflow_id: W-1, kind: ok, detail: ran } }\n  \
                - { step: report, round: 2, response: { candidate_id: c2, summary: done } }\n";
    let calls = format!(
        "{PLAN}{}{wrong_check}{}{tail}{APPROVE}",
        create(1),
        check(2, 9)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let repair = &replayed.of_kind("repair")[0];
    assert_eq!(repair["action"]["step"], "check");
    assert_eq!(
        repair["invalidated"],
        serde_json::json!(["check", "judge", "execute", "adjust", "report"])
    );
    let candidates = replayed.of_kind("candidate");
    assert_eq!(candidates.len(), 2);
    assert_eq!(candidates[1]["id"], "c2");
    assert_eq!(
        candidates[0]["hash"], candidates[1]["hash"],
        "the same design, carried over"
    );
}
