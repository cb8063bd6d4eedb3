//! The `closed_loop` seed spec: artifacts written by tools are part of the candidate and its delivery; a wall budget cuts a run in virtual time; a replan reruns the whole flow.

mod support;

use charter_runtime::engine::run::DeliveryTarget;
use support::{Replayed, replay, replay_to, seed};

const INPUT: &str = r#"{"goal": "a brief on heat pumps"}"#;

fn plan(round: u64) -> String {
    format!(
        "  - step: plan\n    round: {round}\n    response:\n      goal: brief\n      success_criteria: [short]\n      tasks:\n        \
         - {{ id: T-001, goal: write, expected_output: a file, acceptance: [exists] }}\n"
    )
}

fn execute(round: u64, content: &str) -> String {
    format!(
        "  - step: execute\n    round: {round}\n    item: T-001\n    response: {{ task_id: T-001, status: ok, output: wrote it, evidence: [brief.md],\n      \
         artifacts: [ {{ path: brief.md, sha256: x, bytes: 5 }} ] }}\n    tool_calls:\n      \
         - {{ tool: write_artifact, args: {{ path: brief.md, content: \"{content}\" }}, result: {{ path: brief.md, sha256: x, bytes: 5 }} }}\n"
    )
}

fn evaluate(round: u64, on_plan: bool) -> String {
    format!(
        "  - {{ step: evaluate, round: {round}, response: {{ relevance: 9, completeness: 9, clarity: 9, usability: 9, on_plan: {on_plan} }} }}\n"
    )
}

fn deliver(round: u64, candidate: &str) -> String {
    format!(
        "  - {{ step: deliver, round: {round}, response: {{ candidate_id: {candidate}, summary: a brief }} }}\n"
    )
}

fn run(calls: &str) -> Replayed {
    replay(&seed("closed_loop"), INPUT, calls)
}

#[test]
fn files_written_by_tools_are_part_of_the_candidate_and_its_delivery() {
    let directory =
        std::env::temp_dir().join(format!("charter-sched-artifacts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let calls = format!(
        "calls:\n{}{}{}{}",
        plan(1),
        execute(1, "hello"),
        evaluate(1, true),
        deliver(1, "c1")
    );
    let replayed = replay_to(
        &seed("closed_loop"),
        INPUT,
        &calls,
        DeliveryTarget::Directory(directory.clone()),
    );
    replayed.assert_ending("completed{gate_passed}");
    let text = std::fs::read_to_string(directory.join("delivery.json")).unwrap_or_default();
    let written: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!(written["candidate"]["artifacts"]["brief.md"], "hello");
    // Another file content, same outputs: another candidate hash.
    let other = run(&format!(
        "calls:\n{}{}{}{}",
        plan(1),
        execute(1, "HELLO"),
        evaluate(1, true),
        deliver(1, "c1")
    ));
    assert_ne!(
        replayed.of_kind("candidate")[0]["hash"],
        other.of_kind("candidate")[0]["hash"],
        "the artifact's content is hashed"
    );
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_tampered_artifact_is_refused_and_set_aside() {
    let directory =
        std::env::temp_dir().join(format!("charter-sched-tamper-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let calls = format!(
        "calls:\n{}{}{}{}faults:\n  - {{ tamper: {{ after: judge, item: T-001 }} }}\n",
        plan(1),
        execute(1, "hello"),
        evaluate(1, true),
        deliver(1, "c1")
    );
    let replayed = replay_to(
        &seed("closed_loop"),
        INPUT,
        &calls,
        DeliveryTarget::Directory(directory.clone()),
    );
    replayed.assert_ending("failed{delivery_mismatch}");
    assert!(
        !directory.join("delivery.json").exists(),
        "nothing is presented as delivered"
    );
    let rejected =
        std::fs::read_to_string(directory.join("delivery.rejected.json")).unwrap_or_default();
    assert!(
        rejected.contains("overwritten after evaluation"),
        "{rejected}"
    );
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn an_off_plan_candidate_is_replanned_from_the_entry_step() {
    let calls = format!(
        "calls:\n{}{}{}{}{}{}{}",
        plan(1),
        execute(1, "a"),
        evaluate(1, false),
        plan(2),
        execute(2, "b"),
        evaluate(2, true),
        deliver(2, "c2")
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let repair = &replayed.of_kind("repair")[0];
    assert_eq!(repair["action"]["kind"], "replan");
    assert_eq!(repair["codes"], serde_json::json!(["OFF_PLAN"]));
    assert_eq!(
        repair["invalidated"],
        serde_json::json!(["plan", "execute", "evaluate", "judge", "deliver"])
    );
    let phases: Vec<String> = replayed
        .of_kind("phase")
        .iter()
        .map(|p| p["to"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        phases.ends_with(&[
            "repairing".into(),
            "executing".into(),
            "planning".into(),
            "executing".into(),
            "evaluating".into(),
            "finalizing".into()
        ]),
        "{phases:?}"
    );
}

#[test]
fn a_rerun_of_execute_keeps_the_plan() {
    let failed = "  - { step: execute, item: T-001, response: { task_id: T-001, status: failed, output: \"\", error: no access } }\n";
    let calls = format!(
        "calls:\n{}{failed}{}{}{}{}",
        plan(1),
        evaluate(1, true),
        execute(2, "b"),
        evaluate(2, true),
        deliver(2, "c2")
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let repair = &replayed.of_kind("repair")[0];
    assert_eq!(repair["action"]["kind"], "rerun");
    assert_eq!(repair["action"]["step"], "execute");
    assert_eq!(
        repair["items"],
        serde_json::json!(["T-001"]),
        "STAGE_PARTIAL names the item"
    );
    assert_eq!(
        repair["invalidated"],
        serde_json::json!(["execute", "evaluate", "judge", "deliver"]),
        "the plan upstream is not invalidated (repair edges are not followed)"
    );
}

#[test]
fn a_wall_budget_cuts_a_run_in_virtual_time() {
    let spec_text = std::fs::read_to_string(format!(
        "{}/../specs/seeds/closed_loop.charter",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_default()
    .replace(
        "budget { tokens 500000  cost 4.00  steps 24 }",
        "budget { tokens 500000  cost 4.00  wall 5m  steps 24 }",
    );
    assert!(spec_text.contains("wall 5m"));
    let directory = format!("{}/../specs/seeds", env!("CARGO_MANIFEST_DIR"));
    let mut loader = charter_runtime::compiler::MemoryLoader::default();
    for role in ["planner", "executor", "evaluator", "finalizer"] {
        let path = format!("closed_loop/prompts/{role}.md.j2");
        loader.files.insert(
            path.clone(),
            std::fs::read_to_string(format!("{directory}/{path}")).unwrap_or_default(),
        );
    }
    let compilation =
        charter_runtime::compiler::compile("closed_loop.charter", &spec_text, &loader);
    let spec = compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
    let calls = format!(
        "calls:\n{}  - {{ step: execute, item: T-001, attempt: 1, latency: 230s, response: {{ task_id: T-001, status: ok, output: o }} }}\n  \
         - {{ step: evaluate, latency: 2m, response: {{ relevance: 9, completeness: 9, clarity: 9, usability: 9, on_plan: true }} }}\n",
        plan(1)
    );
    let replayed = replay(&spec, INPUT, &calls);
    replayed.assert_ending("failed{budget_exhausted{wall}}");
    let budget = &replayed.of_kind("budget")[0];
    assert_eq!(budget["used"], 300_000);
    assert_eq!(budget["limit"], 300_000);
    assert_eq!(
        budget["t_ms"], 300_000,
        "the in-flight evaluation is dropped at the deadline"
    );
}
