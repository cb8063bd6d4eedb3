//! End-to-end replays of the closed-loop spec through the scheduler: outcomes, repair, best candidate, delivery, budgets, determinism.

use serde_json::json;

use super::*;
use crate::replay::ReplayProvider;
use crate::scenario::Cassette;
use crate::testing::{LOOP_SPEC, compile_spec};
use crate::trace::{MemorySink, to_jsonl};

const PLAN: &str = "  - { step: plan, latency: 2s, response: { goal: g, tasks: [ { id: T-1, goal: a }, { id: T-2, goal: b, depends_on: [T-1] }, { id: T-3, goal: c } ] } }\n";

fn execute(round: u64, id: &str, status: &str, output: &str) -> String {
    format!(
        "  - {{ step: execute, round: {round}, item: {id}, latency: 3s, response: {{ task_id: {id}, status: {status}, output: {output} }} }}\n"
    )
}

fn review(round: u64, relevance: u64, completeness: u64) -> String {
    format!(
        "  - {{ step: review, round: {round}, response: {{ relevance: {relevance}, completeness: {completeness}, notes: n }} }}\n"
    )
}

fn deliver(round: u64, candidate: &str) -> String {
    format!(
        "  - {{ step: deliver, round: {round}, response: {{ candidate_id: {candidate}, summary: done }} }}\n"
    )
}

fn round_ok(round: u64, output: &str) -> String {
    ["T-1", "T-2", "T-3"]
        .iter()
        .map(|id| execute(round, id, "ok", output))
        .collect()
}

struct Replayed {
    outcome: RunOutcome,
    trace: String,
    unused: Vec<String>,
}

async fn replay_with(spec_text: &str, calls: &str, options: RunOptions) -> Replayed {
    replay_full(spec_text, calls, "", options).await
}

/// Replays `calls` (and `humans`, cassette entries) through `spec_text`.
async fn replay_full(spec_text: &str, calls: &str, humans: &str, options: RunOptions) -> Replayed {
    let spec = compile_spec(spec_text);
    let humans = if humans.is_empty() {
        String::new()
    } else {
        format!("humans:\n{humans}")
    };
    let text = format!("version: 1\nrecorded: {{ spec_hash: x }}\ncalls:\n{calls}{humans}");
    let provider = match Cassette::from_yaml("cassette.yaml", &text) {
        Ok(cassette) => ReplayProvider::new(cassette),
        Err(error) => panic!("{error}"),
    };
    let mut sink = MemorySink::new();
    let outcome = run(
        &spec,
        json!({"goal": "g"}),
        &provider,
        &provider,
        &mut sink,
        &options,
    )
    .await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => panic!("{error}\n{}", to_jsonl(sink.events()).unwrap_or_default()),
    };
    Replayed {
        outcome,
        trace: sink.to_jsonl().unwrap_or_default(),
        unused: provider.unused().iter().map(ToString::to_string).collect(),
    }
}

async fn replay(calls: &str) -> Replayed {
    replay_with(LOOP_SPEC, calls, RunOptions::default()).await
}

fn kinds(trace: &str) -> Vec<String> {
    trace
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|event| event["kind"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_clean_run_completes_and_delivers_the_evaluated_candidate() {
    let calls = format!(
        "{PLAN}{}{}{}",
        round_ok(1, "x"),
        review(1, 9, 8),
        deliver(1, "c1")
    );
    let dir = std::env::temp_dir().join(format!("charter-scheduler-{}", std::process::id()));
    let replayed = replay_with(
        LOOP_SPEC,
        &calls,
        RunOptions {
            out_dir: Some(dir.clone()),
            faults: vec![],
        },
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "completed{gate_passed}",
        "{}",
        replayed.trace
    );
    assert_eq!(replayed.outcome.best.as_deref(), Some("c1"));
    assert_eq!(replayed.outcome.delivery, Some(dir.join("delivery.json")));
    assert!(replayed.unused.is_empty(), "{:?}", replayed.unused);
    let kinds = kinds(&replayed.trace);
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    assert_eq!(kinds.last().map(String::as_str), Some("run_finished"));
    // T-2 waits for T-1 (its dependency); T-1 and T-3 run together: 2s plan + 3s + 3s.
    let finished: Vec<Value> = replayed
        .trace
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["kind"] == "item_done")
        .collect();
    let done: Vec<(String, u64)> = finished
        .iter()
        .map(|event| {
            (
                event["item"].as_str().unwrap_or("").to_string(),
                event["t_ms"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        done,
        [
            ("T-1".to_string(), 5000),
            ("T-3".to_string(), 5000),
            ("T-2".to_string(), 8000)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_hard_failure_is_repaired_by_a_rerun() {
    let calls = format!(
        "{PLAN}{}{}{}{}{}{}{}",
        execute(1, "T-1", "ok", "x"),
        execute(1, "T-2", "failed", "x"),
        execute(1, "T-3", "ok", "x"),
        review(1, 10, 10),
        round_ok(2, "y"),
        review(2, 8, 8),
        deliver(2, "c2"),
    );
    let replayed = replay(&calls).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "completed{gate_passed}",
        "{}",
        replayed.trace
    );
    assert_eq!(replayed.outcome.best.as_deref(), Some("c2"));
    assert!(replayed.trace.contains(r#""kind":"repair","action":{"kind":"rerun","step":"execute","with_feedback":false},"codes":["STAGE_FAILED"]"#), "{}", replayed.trace);
    assert!(
        replayed
            .trace
            .contains(r#""kind":"retry","retry":"repair","next":2"#)
    );
}

#[tokio::test(start_paused = true)]
async fn repeated_outcomes_stop_as_no_progress_with_the_best_candidate() {
    let calls = format!(
        "{PLAN}{}{}{}{}{}{}{}",
        round_ok(1, "x"),
        review(1, 5, 9),
        round_ok(2, "x"),
        review(2, 5, 9),
        round_ok(3, "x"),
        review(3, 5, 9),
        deliver(3, "c1"),
    );
    let replayed = replay(&calls).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "below_target{no_progress}",
        "{}",
        replayed.trace
    );
    assert_eq!(replayed.outcome.best.as_deref(), Some("c1"));
    assert!(
        replayed
            .trace
            .contains(r#""kind":"no_progress","rounds":2,"limit":2"#),
        "{}",
        replayed.trace
    );
}

#[tokio::test(start_paused = true)]
async fn max_rounds_finalizes_the_best_not_the_last_candidate() {
    let calls = format!(
        "{PLAN}{}{}{}{}{}{}{}{}{}",
        round_ok(1, "a"),
        review(1, 5, 5),
        round_ok(2, "b"),
        review(2, 5, 9),
        round_ok(3, "c"),
        review(3, 4, 4),
        round_ok(4, "d"),
        review(4, 3, 3),
        deliver(4, "c2"),
    );
    let replayed = replay(&calls).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "below_target{max_rounds}",
        "{}",
        replayed.trace
    );
    assert_eq!(replayed.outcome.best.as_deref(), Some("c2"));
}

#[tokio::test(start_paused = true)]
async fn a_wrong_candidate_id_or_a_tampered_output_is_a_delivery_mismatch() {
    let calls = format!(
        "{PLAN}{}{}{}",
        round_ok(1, "x"),
        review(1, 9, 8),
        deliver(1, "c7")
    );
    let replayed = replay(&calls).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "failed{delivery_mismatch}",
        "{}",
        replayed.trace
    );
    assert_eq!(replayed.outcome.delivery, None);

    let calls = format!(
        "{PLAN}{}{}{}",
        round_ok(1, "x"),
        review(1, 9, 8),
        deliver(1, "c1")
    );
    let tamper = Fault::Tamper(crate::scenario::Tamper {
        after: "judge".into(),
        item: Some("T-1".into()),
    });
    let replayed = replay_with(
        LOOP_SPEC,
        &calls,
        RunOptions {
            out_dir: None,
            faults: vec![tamper],
        },
    )
    .await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "failed{delivery_mismatch}",
        "{}",
        replayed.trace
    );
    assert!(replayed.trace.contains(r#""matches":false"#));
}

#[tokio::test(start_paused = true)]
async fn partial_success_skips_dependents_and_goes_on() {
    let calls = format!(
        "{PLAN}  - {{ step: execute, item: T-1, error: {{ status: 401 }} }}\n{}{}{}",
        execute(1, "T-3", "ok", "x"),
        review(1, 9, 9),
        deliver(1, "c1"),
    );
    let replayed = replay(&calls).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "completed{gate_passed}",
        "{}",
        replayed.trace
    );
    assert!(
        replayed
            .trace
            .contains(r#""item":"T-2","kind":"item_skipped","because":"T-1""#),
        "{}",
        replayed.trace
    );
    assert!(replayed.trace.contains(r#""kind":"candidate","id":"c1","#));
    assert!(
        replayed
            .trace
            .contains(r#""items":1,"failed":["T-1"],"skipped":["T-2"]"#),
        "{}",
        replayed.trace
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_budget_ends_the_run() {
    let spec = format!("{LOOP_SPEC}budget {{ steps 2 }}\n");
    let calls = format!("{PLAN}{}", round_ok(1, "x"));
    let replayed = replay_with(&spec, &calls, RunOptions::default()).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "failed{budget_exhausted{steps}}",
        "{}",
        replayed.trace
    );
    assert!(
        replayed
            .trace
            .contains(r#""kind":"budget","budget":"steps","used":2,"limit":2"#)
    );
}

#[tokio::test(start_paused = true)]
async fn an_always_invariant_is_checked_after_each_step() {
    let spec = format!("{LOOP_SPEC}invariant few_tokens: always run.tokens <= 10\n");
    let calls = "  - { step: plan, usage: { input_tokens: 50, output_tokens: 5 }, response: { goal: g, tasks: [ { id: T-1, goal: a } ] } }\n";
    let replayed = replay_with(&spec, calls, RunOptions::default()).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "failed{invariant{few_tokens}}",
        "{}",
        replayed.trace
    );
}

#[tokio::test(start_paused = true)]
async fn replays_are_byte_identical() {
    let calls = format!(
        "{PLAN}{}{}{}{}{}{}{}",
        execute(1, "T-1", "ok", "x"),
        execute(1, "T-2", "failed", "x"),
        execute(1, "T-3", "ok", "x"),
        review(1, 10, 10),
        round_ok(2, "y"),
        review(2, 8, 8),
        deliver(2, "c2"),
    );
    let spec = LOOP_SPEC.replace("concurrency 4", "concurrency 8");
    let first = replay_with(&spec, &calls, RunOptions::default())
        .await
        .trace;
    for _ in 0..100 {
        assert_eq!(
            replay_with(&spec, &calls, RunOptions::default())
                .await
                .trace,
            first
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_wall_budget_drops_a_call_in_flight() {
    let spec = format!("{LOOP_SPEC}budget {{ wall 10s }}\n");
    let calls = "  - { step: plan, latency: 20m, response: { goal: g, tasks: [ { id: T-1, goal: a } ] } }\n";
    let replayed = replay_with(&spec, calls, RunOptions::default()).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "failed{budget_exhausted{wall}}",
        "{}",
        replayed.trace
    );
    assert!(replayed.trace.contains(r#"{"seq":4,"t_ms":10000,"round":1,"kind":"budget","budget":"wall","used":10000,"limit":10000}"#), "{}", replayed.trace);
}

#[tokio::test(start_paused = true)]
async fn a_gate_failing_into_a_terminal_names_its_hard_rule() {
    let Some(start) = LOOP_SPEC.find("repair {") else {
        panic!("no repair block")
    };
    let Some(length) = LOOP_SPEC[start..].find("}\n") else {
        panic!("no end of the repair block")
    };
    let mut spec = LOOP_SPEC.to_string();
    spec.replace_range(start..start + length + 2, "");
    let spec = spec.replace("fail -> repair", "fail -> failed \"not good enough\"");
    let calls = format!(
        "{PLAN}{}{}{}{}",
        execute(1, "T-1", "failed", "x"),
        execute(1, "T-2", "ok", "x"),
        execute(1, "T-3", "ok", "x"),
        review(1, 10, 10),
    );
    let replayed = replay_with(&spec, &calls, RunOptions::default()).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "failed{hard_gate{STAGE_FAILED}}",
        "{}",
        replayed.trace
    );
    assert_eq!(replayed.outcome.message.as_deref(), Some("not good enough"));
}

#[tokio::test(start_paused = true)]
async fn a_person_can_reject_the_plan() {
    let spec = LOOP_SPEC.replace(
        "plan    = planner(request)                                -> execute",
        "plan    = planner(request)                                -> confirm\n  confirm = ask \"Run this plan?\" when confirm.approved -> execute else -> blocked \"plan rejected\"",
    );
    let rejected = replay_full(
        &spec,
        PLAN,
        "  - { step: confirm, answer: { approved: false, note: too broad } }\n",
        RunOptions::default(),
    )
    .await;
    assert_eq!(
        rejected.outcome.termination.to_string(),
        "blocked{human_rejected}",
        "{}",
        rejected.trace
    );
    assert!(rejected.trace.contains(r#""kind":"human","question":"Run this plan?","answer":{"approved":false,"note":"too broad"}"#), "{}", rejected.trace);
    let calls = format!(
        "{PLAN}{}{}{}",
        round_ok(1, "x"),
        review(1, 9, 8),
        deliver(1, "c1")
    );
    let approved = replay_full(
        &spec,
        &calls,
        "  - { step: confirm, answer: { approved: true } }\n",
        RunOptions::default(),
    )
    .await;
    assert_eq!(
        approved.outcome.termination.to_string(),
        "completed{gate_passed}",
        "{}",
        approved.trace
    );
}

#[tokio::test(start_paused = true)]
async fn per_item_checks_retry_the_item_with_feedback() {
    let spec = LOOP_SPEC
        .replace(
            "gate quality on execute {",
            "contract Verdict { ok: bool }\nrole checker { model: \"openai:m\" prompt: \"\"\"{{ stage_result.output }}\"\"\" input: StageResult output: Verdict }\ngate item_ok on execute {\n  hard fine: checker.ok else NOT_OK\n  pass when true\n}\ngate quality on execute {",
        )
        .replace("executor(t) concurrency 4 ", "executor(t) concurrency 4 check item_ok by checker retries 1 ");
    let verdict = |id: &str, attempt: u64, ok: bool| {
        format!(
            "  - {{ step: execute, item: {id}, attempt: {attempt}, role: checker, response: {{ ok: {ok} }} }}\n"
        )
    };
    let calls = format!(
        "{PLAN}{}{}{}  - {{ step: execute, item: T-1, attempt: 2, response: {{ task_id: T-1, status: ok, output: better }} }}\n{}{}{}{}{}",
        round_ok(1, "x"),
        verdict("T-1", 1, false),
        verdict("T-1", 2, true),
        verdict("T-2", 1, true),
        verdict("T-3", 1, false),
        verdict("T-3", 2, false),
        review(1, 9, 9),
        deliver(1, "c1"),
    ).replace("  - { step: execute, round: 1, item: T-3, latency: 3s, response: { task_id: T-3, status: ok, output: x } }\n", "  - { step: execute, round: 1, item: T-3, latency: 3s, response: { task_id: T-3, status: ok, output: x } }\n  - { step: execute, item: T-3, attempt: 2, response: { task_id: T-3, status: ok, output: y } }\n");
    let replayed = replay_with(&spec, &calls, RunOptions::default()).await;
    assert_eq!(
        replayed.outcome.termination.to_string(),
        "completed{gate_passed}",
        "{}",
        replayed.trace
    );
    assert!(replayed.unused.is_empty(), "{:?}", replayed.unused);
    assert!(
        replayed
            .trace
            .contains(r#""item":"T-1","attempt":1,"kind":"retry","retry":"stage","next":2"#),
        "{}",
        replayed.trace
    );
    // T-3 fails its check twice: failed after its one stage retry; the candidate records it.
    assert!(replayed.trace.contains(r#""item":"T-3","kind":"item_done","status":"failed","error":"check `item_ok` failed: NOT_OK""#), "{}", replayed.trace);
    assert!(
        replayed.trace.contains(r#""failed":["T-3"]"#),
        "{}",
        replayed.trace
    );
}
