//! Ending well (DESIGN §9.3): a budget that runs out hands the run to its `on_exhausted` step (one call, whatever the budget), and every run that ends well has an answer.

mod support;

use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use charter_runtime::engine::run::DeliveryTarget;
use serde_json::json;
use support::{replay, replay_to};

const SPEC: &str = r#"spec ending version "1.0.0"
models { default = "openai:m" }
contract Request { goal: string }
contract Note { text: string }
role worker { prompt: """Work on {{ request.goal }}.""" input: Request output: Note retry: 2 backoff 1s }
role summarizer { prompt: """Sum up {{ note.text }}.""" input: Note output: Note retry: 2 backoff 1s }
budget { steps 3  on_exhausted summarize }
flow {
  work      = worker(request) when work.text == "again" -> work  else -> summarize
  summarize = summarizer(work) -> done
}
"#;

fn spec() -> CompiledSpec {
    let compilation = compile("ending.charter", SPEC, &MemoryLoader::default());
    assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
    compilation.spec.unwrap_or_else(|| panic!("no spec"))
}

fn work(attempt: u64, text: &str) -> String {
    format!("  - {{ step: work, attempt: {attempt}, response: {{ text: {text} }} }}\n")
}

#[test]
fn a_run_without_finalize_answers_with_its_last_role_output() {
    let calls = format!(
        "calls:\n{}  - {{ step: summarize, response: {{ text: done }} }}\n",
        work(1, "first")
    );
    let replayed = replay(&spec(), r#"{"goal": "g"}"#, &calls);
    replayed.assert_ending("completed{done}");
    assert_eq!(
        replayed.report().outcome.answer,
        Some(json!({"text": "done"}))
    );
}

#[test]
fn a_spent_steps_budget_runs_the_summary_once_and_it_is_the_answer() {
    let calls = format!(
        "calls:\n{}{}{}  - {{ step: summarize, response: {{ text: summary }} }}\n",
        work(1, "again"),
        work(2, "again"),
        work(3, "again"),
    );
    let replayed = replay(&spec(), r#"{"goal": "g"}"#, &calls);
    replayed.assert_ending("below_target{budget_exhausted{steps}}");
    assert_eq!(
        replayed.report().outcome.answer,
        Some(json!({"text": "summary"}))
    );
    let budget = replayed.of_kind("budget");
    assert_eq!(budget.len(), 1, "{}", replayed.jsonl);
    assert_eq!(
        replayed.report().unused_calls,
        [],
        "the summary ran though the budget was spent"
    );
}

#[test]
fn the_summary_is_one_call_and_its_failure_fails_the_run() {
    let calls = format!(
        "calls:\n{}{}{}  - {{ step: summarize, error: {{ status: 500 }} }}\n  - {{ step: summarize, attempt: 2, response: {{ text: late }} }}\n",
        work(1, "again"),
        work(2, "again"),
        work(3, "again"),
    );
    let replayed = replay(&spec(), r#"{"goal": "g"}"#, &calls);
    replayed.assert_ending("failed{budget_exhausted{steps}}");
    assert_eq!(replayed.report().outcome.answer, None);
    assert_eq!(
        replayed.report().unused_calls.len(),
        1,
        "no retry of the summary: {}",
        replayed.jsonl
    );
}

#[test]
fn the_answer_is_written_as_answer_json_where_a_delivery_would_go() {
    let dir = std::env::temp_dir().join(format!("charter-ending-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("{error}"));
    let calls = format!(
        "calls:\n{}  - {{ step: summarize, response: {{ text: done }} }}\n",
        work(1, "first")
    );
    let replayed = replay_to(
        &spec(),
        r#"{"goal": "g"}"#,
        &calls,
        DeliveryTarget::Directory(dir.clone()),
    );
    replayed.assert_ending("completed{done}");
    let written = std::fs::read_to_string(dir.join("answer.json")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&written).ok(),
        Some(json!({"text": "done"}))
    );
}

/// `charter serve` gives each run an output directory that does not exist yet: the answer
/// creates it, as a delivery does (a flow without `finalize` used to end in an error).
#[test]
fn the_answer_creates_the_directory_it_goes_to() {
    let base = std::env::temp_dir().join(format!("charter-ending-new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let dir = base.join("runs").join("r1").join("out");
    let calls = format!(
        "calls:\n{}  - {{ step: summarize, response: {{ text: done }} }}\n",
        work(1, "first")
    );
    let replayed = replay_to(
        &spec(),
        r#"{"goal": "g"}"#,
        &calls,
        DeliveryTarget::Directory(dir.clone()),
    );
    let written = std::fs::read_to_string(dir.join("answer.json")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&base);
    replayed.assert_ending("completed{done}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&written).ok(),
        Some(json!({"text": "done"}))
    );
}
