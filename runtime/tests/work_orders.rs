//! Work orders over a task DAG (`work_orders` fixture): DAG order, context isolation, per-item checks with stage retries, partial success, named-item repair, tool whitelists, human decisions, and determinism at any concurrency.

mod support;

use support::{Replayed, fixture, replay};

const INPUT: &str = r#"{"need": "a report"}"#;

/// T1, T2 (after T1) and T3; the person approves.
const PLAN: &str = r#"calls:
  - { step: plan, response: { tasks: [
      { id: T1, goal: "collect" },
      { id: T2, goal: "summarise", depends_on: [T1] },
      { id: T3, goal: "illustrate" } ] } }
"#;

fn approve(approved: bool) -> String {
    format!("humans:\n  - {{ step: confirm, answer: {{ approved: {approved} }} }}\n")
}

/// An executor call for `item` that succeeds, and its passing review.
fn ok(item: &str, round: u64, attempt: u64) -> String {
    format!(
        "  - {{ step: work, round: {round}, item: {item}, attempt: {attempt}, response: {{ task_id: {item}, status: ok, text: \"{item} done\" }} }}\n  \
         - {{ step: work, round: {round}, item: {item}, role: reviewer, attempt: {attempt}, response: {{ task_id: {item}, quality: 8 }} }}\n"
    )
}

fn deliver(round: u64) -> String {
    format!(
        "  - {{ step: deliver, round: {round}, response: {{ candidate_id: c{round}, summary: \"all orders\" }} }}\n"
    )
}

fn run(calls: &str) -> Replayed {
    replay(&fixture("work_orders"), INPUT, calls)
}

#[test]
fn every_order_runs_in_dag_order_and_the_run_completes() {
    let calls = format!(
        "{PLAN}{}{}{}{}{}",
        ok("T1", 1, 1),
        ok("T2", 1, 1),
        ok("T3", 1, 1),
        deliver(1),
        approve(true)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let calls: Vec<String> = replayed
        .outline()
        .into_iter()
        .filter(|line| line.starts_with("model_call work"))
        .collect();
    // T1 and T3 start together (concurrency 2), in id order; T2 waits for T1.
    assert_eq!(
        calls,
        [
            "model_call work T1 #1",
            "model_call work T3 #1",
            "model_call work T1 #1",
            "model_call work T3 #1",
            "model_call work T2 #1",
            "model_call work T2 #1",
        ]
    );
    let candidate = &replayed.of_kind("candidate")[0];
    assert_eq!(candidate["items"], 3);
    assert!(
        replayed.report().unused_calls.is_empty(),
        "{:?}",
        replayed.report().unused_calls
    );
}

#[test]
fn partial_success_skips_dependents_and_a_repair_reruns_only_the_named_orders() {
    let calls = format!(
        "{PLAN}  - {{ step: work, item: T1, error: {{ status: 400, message: bad request }} }}\n{}{}{}{}{}",
        ok("T3", 1, 1),
        ok("T1", 2, 1),
        ok("T2", 2, 1),
        deliver(2),
        approve(true)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let skipped = &replayed.of_kind("item_skipped")[0];
    assert_eq!(skipped["item"], "T2");
    assert_eq!(skipped["because"], "T1");
    let first = &replayed.of_kind("candidate")[0];
    assert_eq!(
        first["items"], 1,
        "T3 completed independently: partial success"
    );
    assert_eq!(first["failed"], serde_json::json!(["T1"]));
    assert_eq!(first["skipped"], serde_json::json!(["T2"]));
    let repair = &replayed.of_kind("repair")[0];
    assert_eq!(
        repair["items"],
        serde_json::json!(["T1", "T2"]),
        "only the failed order and its dependent"
    );
    // T3 is kept from round 1: no round-2 call for it (the cassette has none, and none is unused).
    assert!(
        replayed.report().unused_calls.is_empty(),
        "{:?}",
        replayed.report().unused_calls
    );
    let second = &replayed.of_kind("candidate")[1];
    assert_eq!(second["id"], "c2");
    assert_eq!(second["items"], 3);
    // `step_started` says how many items each round calls, and as many settle: all
    // three in round 1, the two named ones in round 2 (T3 is kept, not called).
    let started: Vec<_> = replayed
        .of_kind("step_started")
        .into_iter()
        .filter(|event| event["step"] == "work")
        .map(|event| (event["round"].clone(), event["items"].clone()))
        .collect();
    assert_eq!(
        started,
        [
            (serde_json::json!(1), serde_json::json!(3)),
            (serde_json::json!(2), serde_json::json!(2)),
        ]
    );
    for (round, items) in [(1, 3), (2, 2)] {
        let settled = ["item_done", "item_skipped"]
            .iter()
            .flat_map(|kind| replayed.of_kind(kind))
            .filter(|event| event["step"] == "work" && event["round"] == round)
            .count();
        assert_eq!(settled, items, "round {round}");
    }
}

#[test]
fn partial_success_that_never_recovers_fails_without_a_candidate_to_deliver() {
    let failing = |round: u64| {
        format!("  - {{ step: work, round: {round}, item: T1, error: {{ status: 400 }} }}\n")
    };
    let calls = format!(
        "{PLAN}{}{}{}{}",
        failing(1),
        ok("T3", 1, 1),
        failing(2),
        approve(true)
    );
    let replayed = run(&calls);
    replayed.assert_ending("failed{no_progress}");
    let finished = &replayed.of_kind("run_finished")[0];
    assert_eq!(finished["message"], "no candidate passed the hard rules");
    assert_eq!(
        replayed.of_kind("item_skipped").len(),
        2,
        "T2 is skipped in both rounds"
    );
}

#[test]
fn a_failed_check_is_a_stage_retry_with_the_check_as_feedback() {
    let calls = format!(
        "{PLAN}{}{}  - {{ step: work, item: T3, attempt: 1, response: {{ task_id: T3, status: ok, text: thin }} }}\n  \
         - {{ step: work, item: T3, role: reviewer, attempt: 1, response: {{ task_id: T3, quality: 3 }} }}\n{}{}{}",
        ok("T1", 1, 1),
        ok("T2", 1, 1),
        ok("T3", 1, 2),
        deliver(1),
        approve(true)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let stage = replayed
        .of_kind("retry")
        .into_iter()
        .find(|retry| retry["retry"] == "stage")
        .unwrap_or_default();
    assert_eq!(stage["item"], "T3");
    assert_eq!(
        stage["next"], 2,
        "attempt counts every call of the role, whatever caused it"
    );
    assert!(
        stage["reason"]
            .as_str()
            .unwrap_or("")
            .contains("LOW_QUALITY"),
        "{stage}"
    );
    let checks: Vec<_> = replayed
        .of_kind("gate")
        .into_iter()
        .filter(|gate| gate["gate"] == "acceptance" && gate["item"] == "T3")
        .collect();
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0]["passed"], false);
    assert_eq!(checks[1]["passed"], true);
}

#[test]
fn a_check_that_keeps_failing_fails_the_item() {
    let bad = |attempt: u64| {
        format!(
            "  - {{ step: work, item: T3, attempt: {attempt}, response: {{ task_id: T3, status: ok, text: thin }} }}\n  \
             - {{ step: work, item: T3, role: reviewer, attempt: {attempt}, response: {{ task_id: T1, quality: 9 }} }}\n"
        )
    };
    let calls = format!(
        "{PLAN}{}{}{}{}{}{}{}",
        ok("T1", 1, 1),
        ok("T2", 1, 1),
        bad(1),
        bad(2),
        ok("T3", 2, 1),
        deliver(2),
        approve(true)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let failed = replayed
        .of_kind("item_done")
        .into_iter()
        .find(|item| item["status"] == "failed")
        .unwrap_or_default();
    assert_eq!(failed["item"], "T3");
    assert!(
        failed["error"]
            .as_str()
            .unwrap_or("")
            .contains("WRONG_ORDER"),
        "{failed}"
    );
    assert_eq!(
        replayed.of_kind("repair")[0]["items"],
        serde_json::json!(["T3"])
    );
}

#[test]
fn a_tool_outside_the_whitelist_is_denied_and_never_executed() {
    let calls = format!(
        "{PLAN}{}{}  - {{ step: work, item: T3, response: {{ task_id: T3, status: ok, text: posted }},\n      \
         tool_calls: [ {{ tool: search, args: {{ text: cats }}, result: {{ urls: [\"u\"] }} }},\n                    \
         {{ tool: publish, args: {{ body: cats }}, result: {{ url: \"x\" }} }} ] }}\n  \
         - {{ step: work, item: T3, role: reviewer, response: {{ task_id: T3, quality: 8 }} }}\n{}{}",
        ok("T1", 1, 1),
        ok("T2", 1, 1),
        deliver(1),
        approve(true)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let denied = replayed.of_kind("tool_denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["tool"], "publish");
    assert_eq!(denied[0]["allowed"], serde_json::json!(["search"]));
    let executed: Vec<_> = replayed
        .of_kind("tool_call")
        .iter()
        .map(|c| c["tool"].clone())
        .collect();
    assert_eq!(executed, ["search"]);
}

#[test]
fn a_tool_result_that_breaks_its_contract_is_reported() {
    let calls = format!(
        "{PLAN}{}{}  - {{ step: work, item: T3, response: {{ task_id: T3, status: ok, text: t }},\n      \
         tool_calls: [ {{ tool: search, args: {{ text: cats }}, result: {{ urls: 7 }} }} ] }}\n  \
         - {{ step: work, item: T3, role: reviewer, response: {{ task_id: T3, quality: 8 }} }}\n{}{}",
        ok("T1", 1, 1),
        ok("T2", 1, 1),
        deliver(1),
        approve(true)
    );
    let replayed = run(&calls);
    let violation = &replayed.of_kind("contract_violation")[0];
    assert_eq!(violation["tool"], "search");
    assert_eq!(violation["contract"], "Hits");
}

#[test]
fn a_person_rejecting_the_plan_blocks_the_run() {
    let calls = format!("{PLAN}{}", approve(false));
    let replayed = run(&calls);
    replayed.assert_ending("blocked{human_rejected}");
    let finished = &replayed.of_kind("run_finished")[0];
    assert_eq!(finished["message"], "the plan was not approved");
    assert_eq!(replayed.of_kind("human")[0]["answer"]["approved"], false);
}

#[test]
fn a_dependency_cycle_fails_the_step() {
    let calls = format!(
        "calls:\n  - {{ step: plan, response: {{ tasks: [ {{ id: A, goal: a, depends_on: [B] }}, {{ id: B, goal: b, depends_on: [A] }} ] }} }}\n{}",
        approve(true)
    );
    let replayed = run(&calls);
    replayed.assert_ending("failed{step_failed{work}}");
    let finished = &replayed.of_kind("run_finished")[0];
    assert!(
        finished["message"].as_str().unwrap_or("").contains("cycle"),
        "{finished}"
    );
}

#[test]
fn a_tampered_order_after_the_gate_is_not_delivered() {
    let calls = format!(
        "{PLAN}{}{}{}{}{}faults:\n  - {{ tamper: {{ after: audit, item: T1 }} }}\n",
        ok("T1", 1, 1),
        ok("T2", 1, 1),
        ok("T3", 1, 1),
        deliver(1),
        approve(true)
    );
    let replayed = run(&calls);
    replayed.assert_ending("failed{delivery_mismatch}");
}

/// Eight independent orders with tied and untied latencies.
fn wide(concurrency: u64) -> (charter_runtime::compiler::CompiledSpec, String) {
    let path = format!(
        "{}/tests/fixtures/work_orders.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap_or_default().replace(
        "executor(t) concurrency 2",
        &format!("executor(t) concurrency {concurrency}"),
    );
    let compilation = charter_runtime::compiler::compile(
        "work_orders.charter",
        &text,
        &charter_runtime::compiler::MemoryLoader::default(),
    );
    let spec = compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
    let ids: Vec<String> = (1..=8).map(|n| format!("W{n}")).collect();
    let tasks: Vec<String> = ids
        .iter()
        .map(|id| format!("{{ id: {id}, goal: g }}"))
        .collect();
    let mut calls = format!(
        "calls:\n  - {{ step: plan, response: {{ tasks: [ {} ] }} }}\n",
        tasks.join(", ")
    );
    for (index, id) in ids.iter().enumerate() {
        // Latencies 1s, 2s, 1s, 2s, ... tie pairs of items at the same virtual instant;
        // W3 times out once (20m against 15m) and recovers.
        let latency = if index % 2 == 0 { "1s" } else { "2s" };
        if id == "W3" {
            calls.push_str("  - { step: work, item: W3, attempt: 1, latency: 20m }\n");
            calls.push_str(&format!(
                "  - {{ step: work, item: W3, attempt: 2, latency: {latency}, response: {{ task_id: W3, status: ok, text: t }} }}\n  \
                 - {{ step: work, item: W3, role: reviewer, latency: 1s, response: {{ task_id: W3, quality: 7 }} }}\n"
            ));
        } else {
            calls.push_str(&format!(
                "  - {{ step: work, item: {id}, latency: {latency}, response: {{ task_id: {id}, status: ok, text: t }} }}\n  \
                 - {{ step: work, item: {id}, role: reviewer, latency: 1s, response: {{ task_id: {id}, quality: 7 }} }}\n"
            ));
        }
    }
    calls.push_str(&deliver(1));
    calls.push_str(&approve(true));
    (spec, calls)
}

#[test]
fn one_scenario_replayed_100_times_at_concurrency_8_gives_identical_traces() {
    let (spec, calls) = wide(8);
    let first = replay(&spec, INPUT, &calls);
    assert_eq!(first.ending(), "completed{gate_passed}", "{}", first.jsonl);
    for run in 1..100 {
        let again = replay(&spec, INPUT, &calls);
        assert_eq!(again.jsonl, first.jsonl, "replay {run} differs");
    }
    // The ties were broken by item id: W1 and W3's first call... the 1s finishers come back in id order.
    let done: Vec<String> = first
        .of_kind("item_done")
        .iter()
        .map(|item| item["item"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(done, ["W1", "W5", "W7", "W2", "W4", "W6", "W8", "W3"]);
}

#[test]
fn every_concurrency_gives_a_deterministic_trace_and_the_same_outcome() {
    for concurrency in [1, 3, 8] {
        let (spec, calls) = wide(concurrency);
        let first = replay(&spec, INPUT, &calls);
        let second = replay(&spec, INPUT, &calls);
        assert_eq!(first.ending(), "completed{gate_passed}", "{}", first.jsonl);
        assert_eq!(first.jsonl, second.jsonl, "concurrency {concurrency}");
    }
}

/// A provider that records every request before replaying it.
struct Recording {
    replay: charter_runtime::world::replay::ReplayProvider,
    requests: std::sync::Mutex<Vec<charter_runtime::engine::provider::ModelRequest>>,
}

impl charter_runtime::engine::effects::Provider for Recording {
    fn complete(
        &self,
        request: charter_runtime::engine::provider::ModelRequest,
    ) -> charter_runtime::engine::provider::BoxFuture<
        '_,
        Result<
            charter_runtime::engine::provider::ModelResponse,
            charter_runtime::engine::provider::ProviderError,
        >,
    > {
        if let Ok(mut requests) = self.requests.lock() {
            requests.push(request.clone());
        }
        self.replay.complete(request)
    }
}

#[test]
fn a_worker_sees_its_own_order_and_its_dependencies_outputs_only() {
    use std::sync::Arc;

    let calls = format!(
        "{}{PLAN}{}{}{}{}{}",
        support::HEADER,
        ok("T1", 1, 1),
        ok("T2", 1, 1),
        ok("T3", 1, 1),
        deliver(1),
        approve(true)
    );
    let cassette = charter_runtime::formats::scenario::Cassette::from_yaml("cassette.yaml", &calls)
        .unwrap_or_else(|error| panic!("{error}"));
    let recording = Arc::new(Recording {
        replay: charter_runtime::world::replay::ReplayProvider::new(cassette.clone()),
        requests: std::sync::Mutex::new(Vec::new()),
    });
    let humans = charter_runtime::world::replay::ReplayProvider::new(cassette);
    let mut sink = charter_runtime::formats::trace::MemorySink::new();
    let outcome = charter_runtime::engine::run::replay_blocking(
        &fixture("work_orders"),
        serde_json::json!({"need": "a report"}),
        charter_runtime::engine::effects::Effects::new(recording.clone(), &humans, &mut sink)
            .with_files(&charter_runtime::world::files::LocalFiles),
        &charter_runtime::engine::run::RunConfig::default(),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        outcome.outcome,
        charter_runtime::formats::trace::Outcome::Completed
    );
    let requests = recording
        .requests
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    let prompt_of = |item: &str| {
        requests
            .iter()
            .find(|r| r.key.item.as_deref() == Some(item) && r.key.role.is_none())
            .map(|r| r.prompt.clone())
            .unwrap_or_default()
    };
    let t2 = prompt_of("T2");
    assert!(t2.contains("summarise"), "its own order:\n{t2}");
    assert!(t2.contains("T1 done"), "its dependency's output:\n{t2}");
    assert!(!t2.contains("T3"), "nothing of an unrelated order:\n{t2}");
    let t3 = prompt_of("T3");
    assert!(
        !t3.contains("T1 done"),
        "no dependency, no other output:\n{t3}"
    );
}
