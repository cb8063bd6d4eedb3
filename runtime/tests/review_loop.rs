//! Provider retries, gates, repair, budgets, invariants and delivery on the linear `review_loop` fixture, each from a small inline cassette.

mod support;

use support::{Replayed, fixture, replay};

const INPUT: &str = r#"{"goal": "rust"}"#;

fn run(calls: &str) -> Replayed {
    replay(&fixture("review_loop"), INPUT, calls)
}

/// The `review_loop` fixture with `from` replaced by `to`, compiled.
fn review_loop_with(from: &str, to: &str) -> charter_runtime::compiler::CompiledSpec {
    let path = format!(
        "{}/tests/fixtures/review_loop.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    assert!(text.contains(from), "the fixture has no {from:?}");
    let text = text.replace(from, to);
    let compilation = charter_runtime::compiler::compile(
        "review_loop.charter",
        &text,
        &charter_runtime::compiler::MemoryLoader::default(),
    );
    assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
    compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics))
}

/// The review and delivery of a passing round `round` whose candidate is `c<round>`.
fn passing_tail(round: u64) -> String {
    format!(
        "  - {{ step: review, round: {round}, response: {{ relevance: 9, verdict: PASS }} }}\n  \
         - {{ step: deliver, round: {round}, response: {{ candidate_id: c{round}, summary: \"done\" }} }}\n"
    )
}

#[test]
fn a_timeout_then_recovery() {
    let calls = format!(
        "calls:\n  - {{ step: write, attempt: 1, latency: 20m }}\n  \
         - {{ step: write, attempt: 2, response: {{ title: T, body: B }}, latency: 3s }}\n{}",
        passing_tail(1)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let timeout = &replayed.of_kind("timeout")[0];
    assert_eq!(
        timeout["after_ms"], 120_000,
        "the role's 2m timeout, not the 20m latency"
    );
    assert_eq!(timeout["attempt"], 1);
    let retry = &replayed.of_kind("retry")[0];
    assert_eq!(retry["retry"], "provider");
    assert_eq!(retry["next"], 2);
    assert_eq!(retry["delay_ms"], 1000);
    let second_call = &replayed.of_kind("model_call")[1];
    assert_eq!(second_call["attempt"], 2);
    assert_eq!(
        second_call["t_ms"], 121_000,
        "timeout at 2m, then 1s of backoff"
    );
}

#[test]
fn timeouts_exhaust_the_provider_retries() {
    let calls = "calls:
  - { step: write, attempt: 1, latency: 20m }
  - { step: write, attempt: 2, latency: 20m }
  - { step: write, attempt: 3, latency: 20m }
";
    let replayed = run(calls);
    replayed.assert_ending("failed{step_failed{write}}");
    assert_eq!(
        replayed.of_kind("timeout").len(),
        3,
        "retry: 2 is three calls at most"
    );
    let delays: Vec<_> = replayed
        .of_kind("retry")
        .iter()
        .map(|r| r["delay_ms"].clone())
        .collect();
    assert_eq!(delays, [1000, 2000], "the backoff doubles, without jitter");
    let finished = &replayed.of_kind("run_finished")[0];
    assert_eq!(finished["t_ms"], 120_000 * 3 + 1000 + 2000);
    assert!(
        finished["message"]
            .as_str()
            .unwrap_or("")
            .contains("after 2 provider retries"),
        "{finished}"
    );
}

#[test]
fn rate_limit_and_server_error_then_success() {
    let calls = format!(
        "calls:\n  - {{ step: write, attempt: 1, error: {{ status: 429, message: slow down }} }}\n  \
         - {{ step: write, attempt: 2, error: {{ status: 500 }} }}\n  \
         - {{ step: write, attempt: 3, response: {{ title: T, body: B }} }}\n{}",
        passing_tail(1)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let reasons: Vec<String> = replayed
        .of_kind("retry")
        .iter()
        .map(|r| r["reason"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(reasons[0].contains("429"), "{reasons:?}");
    assert!(reasons[1].contains("500"), "{reasons:?}");
}

#[test]
fn a_retry_after_past_the_roles_timeout_fails_the_call_instead_of_waiting() {
    // The writer's timeout is 2m; the server asks for 5m.
    let calls =
        "calls:\n  - { step: write, attempt: 1, error: { status: 429, retry_after: 5m } }\n";
    let replayed = run(calls);
    replayed.assert_ending("failed{step_failed{write}}");
    assert!(replayed.of_kind("retry").is_empty());
    let finished = &replayed.of_kind("run_finished")[0];
    assert!(
        finished["message"]
            .as_str()
            .unwrap_or("")
            .contains("longer than the role's timeout of 120000 ms"),
        "{finished}"
    );
    assert!(
        finished["t_ms"].as_u64().unwrap_or(u64::MAX) < 60_000,
        "{finished}"
    );
}

#[test]
fn a_permanent_provider_error_is_not_retried() {
    let calls = "calls:\n  - { step: write, error: { status: 401, message: bad key } }\n";
    let replayed = run(calls);
    replayed.assert_ending("failed{step_failed{write}}");
    assert!(replayed.of_kind("retry").is_empty());
}

#[test]
fn malformed_output_then_a_valid_one() {
    let calls = format!(
        "calls:\n  - {{ step: write, attempt: 1, raw: \"not json {{\" }}\n  \
         - {{ step: write, attempt: 2, response: {{ title: T }} }}\n  \
         - {{ step: write, attempt: 3, response: {{ title: T, body: B }} }}\n{}",
        passing_tail(1)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let violations = replayed.of_kind("contract_violation");
    assert_eq!(violations.len(), 2);
    assert_eq!(violations[0]["contract"], "Draft");
    assert!(
        violations[0]["violations"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("not valid JSON")
    );
    assert_eq!(
        violations[1]["violations"][0]["path"], "body",
        "{}",
        violations[1]
    );
    assert_eq!(replayed.of_kind("retry").len(), 2);
}

#[test]
fn a_hard_gate_failure_is_not_hidden_by_a_perfect_score() {
    let calls = "calls:
  - { step: write, response: { title: T, body: \"key sk-abcdefghijklmnopqrstuvwxyz0123\" } }
  - { step: review, response: { relevance: 10, verdict: PASS } }
";
    let replayed = run(calls);
    replayed.assert_ending("blocked{hard_gate{SECRET_LEAK}}");
    let gate = &replayed.of_kind("gate")[0];
    assert_eq!(gate["score"], 10.0);
    assert_eq!(gate["passed"], false);
    assert_eq!(gate["issues"][0]["code"], "SECRET_LEAK");
    let finished = &replayed.of_kind("run_finished")[0];
    assert_eq!(finished["message"], "secret in candidate");
    assert_eq!(finished["delivered"], false);
}

#[test]
fn a_repair_that_succeeds() {
    let calls = format!(
        "calls:\n  - {{ step: write, response: {{ title: T, body: short }} }}\n  \
         - {{ step: review, response: {{ relevance: 4, verdict: PASS }} }}\n  \
         - {{ step: write, round: 2, response: {{ title: T, body: longer and on topic }} }}\n{}",
        passing_tail(2)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let repair = &replayed.of_kind("repair")[0];
    assert_eq!(repair["action"]["kind"], "rerun");
    assert_eq!(repair["action"]["step"], "write");
    assert_eq!(repair["action"]["with_feedback"], true);
    assert_eq!(
        repair["invalidated"],
        serde_json::json!(["write", "review", "judge", "deliver"])
    );
    let round = &replayed.of_kind("retry")[0];
    assert_eq!(round["retry"], "repair");
    assert_eq!(round["next"], 2);
    assert_eq!(
        replayed
            .report()
            .outcome
            .delivered
            .as_ref()
            .map(|d| d.candidate_id.as_str()),
        Some("c2")
    );
}

#[test]
fn repair_stops_when_rounds_make_no_progress() {
    let same = "{ title: T, body: same }";
    let calls = format!(
        "calls:\n  - {{ step: write, response: {same} }}\n  \
         - {{ step: review, response: {{ relevance: 4, verdict: PASS }} }}\n  \
         - {{ step: write, round: 2, response: {same} }}\n  \
         - {{ step: review, round: 2, response: {{ relevance: 4, verdict: PASS }} }}\n  \
         - {{ step: write, round: 3, response: {same} }}\n  \
         - {{ step: review, round: 3, response: {{ relevance: 4, verdict: PASS }} }}\n  \
         - {{ step: deliver, round: 3, response: {{ candidate_id: c1, summary: best so far }} }}\n"
    );
    let replayed = run(&calls);
    replayed.assert_ending("below_target{no_progress}");
    let stalls = replayed.of_kind("no_progress");
    assert_eq!(stalls.len(), 2);
    assert_eq!(stalls[1]["rounds"], 2);
    assert_eq!(stalls[1]["limit"], 2);
    assert_eq!(
        replayed.report().outcome.best.as_deref(),
        Some("c1"),
        "the earliest of equals"
    );
}

#[test]
fn a_converging_run_is_never_stopped_for_no_progress() {
    let calls = format!(
        "calls:\n  - {{ step: write, response: {{ title: T, body: a }} }}\n  \
         - {{ step: review, response: {{ relevance: 3, verdict: PASS }} }}\n  \
         - {{ step: write, round: 2, response: {{ title: T, body: ab }} }}\n  \
         - {{ step: review, round: 2, response: {{ relevance: 5, verdict: PASS }} }}\n  \
         - {{ step: write, round: 3, response: {{ title: T, body: abc }} }}\n{}",
        passing_tail(3)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    assert!(replayed.of_kind("no_progress").is_empty());
}

/// Three rounds below the gate's target (relevance 4, 5, 3): repair stops at `rounds 2`
/// and delivers the best, c2.
const THREE_ROUNDS: &str = "calls:
  - { step: write, round: 1, response: { title: A, body: first } }
  - { step: review, round: 1, response: { relevance: 4, verdict: PASS } }
  - { step: write, round: 2, response: { title: B, body: second } }
  - { step: review, round: 2, response: { relevance: 5, verdict: PASS } }
  - { step: write, round: 3, response: { title: C, body: third } }
  - { step: review, round: 3, response: { relevance: 3, verdict: PASS } }
  - { step: deliver, round: 3, response: { candidate_id: c2, summary: the best of three } }
";

#[test]
fn max_rounds_delivers_the_best_candidate_not_the_last() {
    let replayed = run(THREE_ROUNDS);
    replayed.assert_ending("below_target{max_rounds}");
    let outcome = &replayed.report().outcome;
    assert_eq!(outcome.best.as_deref(), Some("c2"));
    assert_eq!(
        outcome.delivered.as_ref().map(|d| d.candidate_id.as_str()),
        Some("c2")
    );
    assert_eq!(outcome.rounds, 3, "rounds 2 allows three rounds in all");
    let stopped = &replayed.of_kind("repair_stopped")[0];
    assert_eq!(stopped["reason"], "max_rounds");
    assert_eq!(stopped["best"], "c2");
    let delivery = &replayed.of_kind("delivery")[0];
    assert_eq!(delivery["matches"], true);
    assert_eq!(delivery["expected_hash"], outcome.candidates[1].1.as_str());
}

/// The review loop with a second finalize step, `archive`, first in the flow but reached
/// only by a `branch` the run does not take: a run whose repair stops delivers through
/// the finalize step reachable from the gate's `pass` edge, not the first in the flow.
#[test]
fn repair_that_stops_delivers_through_the_finalize_step_after_the_gate() {
    let spec = review_loop_with(
        "flow {\n  write   = writer(request)            -> review",
        "flow {
  start   = branch  when request.goal == \"archive\" -> archive  else -> write
  archive = finalize finalizer(best)   -> done
  write   = writer(request)            -> review",
    );
    let replayed = replay(&spec, INPUT, THREE_ROUNDS);
    replayed.assert_ending("below_target{max_rounds}");
    let started: Vec<_> = replayed
        .of_kind("step_started")
        .iter()
        .map(|event| event["step"].clone())
        .collect();
    assert_eq!(
        started.last(),
        Some(&serde_json::json!("deliver")),
        "{started:?}"
    );
    assert!(
        !started.contains(&serde_json::json!("archive")),
        "{started:?}"
    );
    assert_eq!(replayed.of_kind("delivery")[0]["matches"], true);
}

/// A gate that reads `run` sees the round it judges: a hard rule `run.round >= 2` fails a
/// good first round (REJECTED: rerun) and passes the second.
#[test]
fn a_gate_reading_run_sees_the_round() {
    let spec = review_loop_with(
        "pass when score >= 7.0",
        "hard later: run.round >= 2 else REJECTED\n  pass when score >= 7.0",
    );
    let calls = format!(
        "calls:\n  - {{ step: write, round: 1, response: {{ title: A, body: first }} }}\n  \
         - {{ step: review, round: 1, response: {{ relevance: 9, verdict: PASS }} }}\n  \
         - {{ step: write, round: 2, response: {{ title: A, body: second }} }}\n{}",
        passing_tail(2)
    );
    let replayed = replay(&spec, INPUT, &calls);
    replayed.assert_ending("completed{gate_passed}");
    let gates: Vec<_> = replayed
        .of_kind("gate")
        .iter()
        .map(|gate| gate["passed"].clone())
        .collect();
    assert_eq!(gates, [false, true], "round 1 fails on the round alone");
}

#[test]
fn a_budget_runs_out() {
    let calls = "calls:
  - { step: write, response: { title: T, body: B }, usage: { input_tokens: 90000, output_tokens: 20000 } }
";
    let replayed = run(calls);
    replayed.assert_ending("failed{budget_exhausted{tokens}}");
    let budget = &replayed.of_kind("budget")[0];
    assert_eq!(budget["budget"], "tokens");
    assert_eq!(budget["used"], 110_000);
    assert_eq!(budget["limit"], 100_000);
    assert!(
        replayed.of_kind("model_call").len() == 1,
        "no further call after the budget ran out"
    );
}

#[test]
fn an_always_invariant_breaks() {
    let calls = "calls:
  - { step: write, response: { title: T, body: B }, usage: { input_tokens: 5000, output_tokens: 1 } }
";
    let replayed = run(calls);
    replayed.assert_ending("failed{invariant{tokens_bounded}}");
    assert_eq!(
        replayed.of_kind("invariant_violated")[0]["invariant"],
        "tokens_bounded"
    );
}

#[test]
fn a_delivery_naming_no_candidate_is_a_contract_violation_never_a_delivery() {
    // The finalizer has `retry: 0`: the violation ends the step.
    let calls = "calls:
  - { step: write, response: { title: T, body: B } }
  - { step: review, response: { relevance: 9, verdict: PASS } }
  - { step: deliver, response: { candidate_id: c7, summary: wrong } }
";
    let replayed = run(calls);
    replayed.assert_ending("failed{step_failed{deliver}}");
    let violation = &replayed.of_kind("contract_violation")[0];
    assert_eq!(violation["violations"][0]["path"], "candidate_id");
    assert_eq!(
        violation["violations"][0]["message"],
        "\"c7\" names no candidate: it must be exactly one of `c1`; the one to deliver is `c1`"
    );
    assert!(replayed.of_kind("delivery").is_empty());
    assert!(
        replayed.report().outcome.delivered.is_none(),
        "nothing is presented as delivered"
    );
}

#[test]
fn an_artifact_tampered_after_evaluation_is_refused() {
    let calls = "calls:
  - { step: write, response: { title: T, body: B } }
  - { step: review, response: { relevance: 9, verdict: PASS } }
  - { step: deliver, response: { candidate_id: c1, summary: fine } }
faults:
  - { tamper: { after: judge } }
";
    let replayed = run(calls);
    replayed.assert_ending("failed{delivery_mismatch}");
    let delivery = &replayed.of_kind("delivery")[0];
    assert_eq!(delivery["matches"], false);
    assert_eq!(delivery["candidate"], "c1");
    assert_ne!(delivery["expected_hash"], delivery["actual_hash"]);
    assert_eq!(
        delivery["expected_hash"],
        replayed.of_kind("gate")[0]["hash"]
    );
}

#[test]
fn a_delivery_to_a_directory_is_written_atomically_and_read_back() {
    let directory =
        std::env::temp_dir().join(format!("charter-sched-delivery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let calls = format!(
        "calls:\n  - {{ step: write, response: {{ title: T, body: B }} }}\n{}",
        passing_tail(1)
    );
    let replayed = support::replay_to(
        &fixture("review_loop"),
        INPUT,
        &calls,
        charter_runtime::engine::run::DeliveryTarget::Directory(directory.clone()),
    );
    replayed.assert_ending("completed{gate_passed}");
    let text = std::fs::read_to_string(directory.join("delivery.json")).unwrap_or_default();
    let written: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!(written["candidate"]["id"], "c1");
    assert_eq!(written["summary"], "done");
    assert!(
        !directory.join(".delivery.json.tmp").exists(),
        "no temporary file is left"
    );
    let _ = std::fs::remove_dir_all(&directory);
}

/// A person who never answers.
struct Silent;

impl charter_runtime::engine::effects::HumanChannel for Silent {
    fn ask(
        &self,
        _request: charter_runtime::engine::provider::HumanRequest,
    ) -> charter_runtime::engine::provider::BoxFuture<
        '_,
        Result<serde_json::Value, charter_runtime::engine::provider::ProviderError>,
    > {
        Box::pin(std::future::pending())
    }
}

#[test]
fn a_cancel_ends_the_wait_for_a_person() {
    use std::sync::Arc;
    use std::time::Duration;

    use charter_runtime::engine::run::{RunConfig, run as run_spec};
    use charter_runtime::formats::scenario::Cassette;
    use charter_runtime::formats::trace::MemorySink;
    use charter_runtime::world::replay::ReplayProvider;

    let path = format!(
        "{}/tests/fixtures/review_loop.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let asking = text.replace(
        "deliver = finalize finalizer(best)   -> done",
        "deliver = finalize finalizer(best)   -> confirm\n  confirm = ask \"Publish it?\" max 1  when confirm.approved -> done  else -> write",
    );
    assert_ne!(asking, text, "the fixture's flow changed: update the test");
    let compilation = charter_compiler::compile(
        "review_ask.charter",
        &asking,
        &charter_compiler::MemoryLoader::default(),
    );
    let spec = compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
    let calls = format!(
        "{}calls:\n  - {{ step: write, response: {{ title: T, body: B }} }}\n{}",
        support::HEADER,
        passing_tail(1)
    );
    let cassette = Cassette::from_yaml("cassette.yaml", &calls).unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut sink = MemorySink::new();
    let outcome = runtime.block_on(async {
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        let config = RunConfig {
            cancel: Some(cancelled),
            ..RunConfig::default()
        };
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            let _ = cancel.send(true);
        });
        let replay = Arc::new(ReplayProvider::new(cassette));
        run_spec(
            &spec,
            serde_json::json!({"goal": "rust"}),
            charter_runtime::engine::effects::Effects::new(replay, &Silent, &mut sink)
                .with_files(&charter_runtime::world::files::LocalFiles),
            &config,
        )
        .await
    });
    let outcome = outcome.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        format!("{}{{{}}}", outcome.outcome, outcome.reason),
        "cancelled{cancelled}"
    );
    assert_eq!(sink.events().last().map(|e| e.t_ms), Some(3_600_000));
}

/// Runs the fixture on `calls` (cassette YAML after the header) on a paused clock with a
/// cancel flag: set at the start with `cancel_after` none, else set after that long.
fn run_cancelled(
    calls: &str,
    cancel_after: Option<std::time::Duration>,
) -> (
    charter_runtime::engine::run::RunOutcome,
    charter_runtime::formats::trace::MemorySink,
) {
    use std::sync::Arc;

    use charter_runtime::engine::run::{RunConfig, run as run_spec};
    use charter_runtime::formats::scenario::Cassette;
    use charter_runtime::formats::trace::MemorySink;
    use charter_runtime::world::replay::ReplayProvider;

    let spec = fixture("review_loop");
    let text = format!("{}{calls}", support::HEADER);
    let cassette = Cassette::from_yaml("cassette.yaml", &text).unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut sink = MemorySink::new();
    let outcome = runtime.block_on(async {
        // The sender is kept alive for the whole run.
        let (cancel, cancelled) = tokio::sync::watch::channel(cancel_after.is_none());
        let config = RunConfig {
            cancel: Some(cancelled),
            ..RunConfig::default()
        };
        tokio::spawn(async move {
            if let Some(after) = cancel_after {
                tokio::time::sleep(after).await;
                let _ = cancel.send(true);
            }
            std::future::pending::<()>().await;
        });
        let replay = Arc::new(ReplayProvider::new(cassette));
        run_spec(
            &spec,
            serde_json::json!({"goal": "rust"}),
            charter_runtime::engine::effects::Effects::new(
                replay.clone(),
                replay.as_ref(),
                &mut sink,
            )
            .with_files(&charter_runtime::world::files::LocalFiles),
            &config,
        )
        .await
    });
    (outcome.unwrap_or_else(|e| panic!("{e}")), sink)
}

#[test]
fn a_cancelled_run_drops_its_calls_and_ends_cancelled() {
    let (outcome, sink) = run_cancelled(
        "calls:\n  - { step: write, latency: 20s, response: { title: T, body: B } }\n",
        Some(std::time::Duration::from_secs(10)),
    );
    assert_eq!(
        format!("{}{{{}}}", outcome.outcome, outcome.reason),
        "cancelled{cancelled}"
    );
    let last = sink.events().last().map(|e| e.t_ms);
    assert_eq!(
        last,
        Some(10_000),
        "cancelled at 10s, not after the 20s call"
    );
}

#[test]
fn a_run_cancelled_before_it_starts_makes_no_call() {
    // Ctrl-C before the first step: the flag is already set.
    let (outcome, sink) = run_cancelled(
        "calls:\n  - { step: write, response: { title: T, body: B } }\n",
        None,
    );
    assert_eq!(
        format!("{}{{{}}}", outcome.outcome, outcome.reason),
        "cancelled{cancelled}"
    );
    assert!(
        sink.events().iter().all(|event| !matches!(
            event.kind,
            charter_runtime::formats::trace::EventKind::ModelCall { .. }
        )),
        "no model is called once the run is cancelled"
    );
}

#[test]
fn a_gate_failing_only_its_pass_rule_is_not_repaired() {
    let calls = "calls:
  - { step: write, response: { title: T, body: B } }
  - { step: review, response: { relevance: 6, verdict: PASS } }
  - { step: deliver, response: { candidate_id: c1, summary: close enough } }
";
    let replayed = run(calls);
    replayed.assert_ending("below_target{no_repair_action}");
    assert!(replayed.of_kind("repair").is_empty());
    assert_eq!(replayed.of_kind("gate")[0]["issues"], serde_json::json!([]));
    assert_eq!(
        replayed
            .report()
            .outcome
            .delivered
            .as_ref()
            .map(|d| d.candidate_id.as_str()),
        Some("c1")
    );
}

#[test]
fn a_steps_budget_refuses_the_step_past_it() {
    let path = format!(
        "{}/tests/fixtures/review_loop.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path)
        .unwrap_or_default()
        .replace("steps 20", "steps 5");
    let compilation = charter_runtime::compiler::compile(
        "review_loop.charter",
        &text,
        &charter_runtime::compiler::MemoryLoader::default(),
    );
    let spec = compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
    let calls = "calls:
  - { step: write, response: { title: T, body: a } }
  - { step: review, response: { relevance: 3, verdict: PASS } }
  - { step: write, round: 2, response: { title: T, body: b } }
  - { step: review, round: 2, response: { relevance: 3, verdict: PASS } }
";
    let replayed = replay(&spec, INPUT, calls);
    replayed.assert_ending("failed{budget_exhausted{steps}}");
    let budget = &replayed.of_kind("budget")[0];
    assert_eq!(budget["used"], 5);
    assert_eq!(
        budget["step"], "judge",
        "the sixth step, the round-2 judge, is refused"
    );
    assert_eq!(
        replayed.report().outcome.best.as_deref(),
        Some("c1"),
        "named, not delivered"
    );
    assert!(replayed.report().outcome.delivered.is_none());
}

/// The `review_loop` fixture with `from` replaced by `to`.
fn variant(from: &str, to: &str) -> charter_runtime::compiler::CompiledSpec {
    let path = format!(
        "{}/tests/fixtures/review_loop.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(text.contains(from), "the fixture has no {from:?}");
    let compilation = charter_runtime::compiler::compile(
        "review_loop.charter",
        &text.replace(from, to),
        &charter_runtime::compiler::MemoryLoader::default(),
    );
    compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics))
}

#[test]
fn a_cost_budget_is_charged_at_the_models_prices() {
    let spec = variant("price 1.00 / 2.00", "price 100.00 / 200.00");
    let calls = "calls:
  - { step: write, response: { title: T, body: B }, usage: { input_tokens: 4000, output_tokens: 4000 } }
";
    let replayed = replay(&spec, INPUT, calls);
    replayed.assert_ending("failed{budget_exhausted{cost}}");
    let budget = &replayed.of_kind("budget")[0];
    assert_eq!(budget["used"], 1.2, "4000 * 100 / 1M + 4000 * 200 / 1M");
}

#[test]
fn a_fail_action_ends_the_run_failed() {
    let spec = variant(
        "SECRET_LEAK   -> block \"secret in candidate\"",
        "SECRET_LEAK   -> fail \"secret in candidate\"",
    );
    let calls = "calls:
  - { step: write, response: { title: T, body: \"sk-abcdefghijklmnopqrstuvwxyz0123\" } }
  - { step: review, response: { relevance: 9, verdict: PASS } }
";
    let replayed = replay(&spec, INPUT, calls);
    replayed.assert_ending("failed{hard_gate{SECRET_LEAK}}");
    assert_eq!(replayed.of_kind("repair")[0]["action"]["kind"], "fail");
}

#[test]
fn a_retry_after_of_exactly_the_roles_timeout_is_waited_out() {
    // The writer's timeout is 2m; a wait of exactly 2m still fits it.
    let calls = format!(
        "calls:\n  - {{ step: write, attempt: 1, error: {{ status: 429, retry_after: 2m }} }}\n  \
         - {{ step: write, attempt: 2, response: {{ title: T, body: B }} }}\n{}",
        passing_tail(1)
    );
    let replayed = run(&calls);
    replayed.assert_ending("completed{gate_passed}");
    let retry = &replayed.of_kind("retry")[0];
    assert_eq!(retry["delay_ms"], 120_000, "{retry}");
}

#[test]
fn a_retry_after_past_the_wall_budget_left_ends_the_run_at_once() {
    let path = format!(
        "{}/tests/fixtures/review_loop.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{error}"))
        .replace("wall 30m", "wall 3m");
    let compilation = charter_runtime::compiler::compile(
        "review_loop.charter",
        &text,
        &charter_runtime::compiler::MemoryLoader::default(),
    );
    let spec = compilation
        .spec
        .unwrap_or_else(|| panic!("{:?}", compilation.diagnostics));
    // 90 s in, the server asks for 2 minutes: only 90 s of the wall budget are left.
    let calls = "calls:\n  - { step: write, attempt: 1, latency: 90s, error: { status: 429, retry_after: 2m } }\n";
    let replayed = replay(&spec, INPUT, calls);
    let finished = &replayed.of_kind("run_finished")[0];
    assert_eq!(finished["reason"], "budget_exhausted{wall}", "{finished}");
    assert_eq!(
        finished["t_ms"], 90_000,
        "stopped when the wait was asked for, not after it: {finished}"
    );
    assert!(replayed.of_kind("retry").is_empty());

    // A wait that fits what is left is made.
    let calls = format!(
        "calls:\n  - {{ step: write, attempt: 1, latency: 30s, error: {{ status: 429, retry_after: 1m }} }}\n  \
         - {{ step: write, attempt: 2, response: {{ title: T, body: B }} }}\n{}",
        passing_tail(1)
    );
    replay(&spec, INPUT, &calls).assert_ending("completed{gate_passed}");

    // A wait of exactly what is left is not made either: it would leave no time for the
    // retry it waits for.
    let calls = "calls:\n  - { step: write, attempt: 1, latency: 60s, error: { status: 429, retry_after: 2m } }\n";
    let replayed = replay(&spec, INPUT, calls);
    let finished = &replayed.of_kind("run_finished")[0];
    assert_eq!(finished["reason"], "budget_exhausted{wall}", "{finished}");
    assert_eq!(finished["t_ms"], 60_000, "{finished}");
    assert!(replayed.of_kind("retry").is_empty());

    // With the role's retries used up there is no wait to make: the call fails, and the
    // wall budget is not what ends the run.
    let calls = "calls:\n  - { step: write, attempt: 1, error: { status: 429, retry_after: 1s } }\n  \
                 - { step: write, attempt: 2, error: { status: 429, retry_after: 1s } }\n  \
                 - { step: write, attempt: 3, latency: 90s, error: { status: 429, retry_after: 2m } }\n";
    let replayed = replay(&spec, INPUT, calls);
    let finished = &replayed.of_kind("run_finished")[0];
    assert_ne!(
        finished["reason"], "budget_exhausted{wall}",
        "{}",
        replayed.jsonl
    );
    assert_eq!(replayed.of_kind("retry").len(), 2, "{}", replayed.jsonl);
}
