//! Conversations (DESIGN §9.4) through the harness's turn-by-turn replay: `remember` assigns session fields after a turn that answered, `session.turns` keeps the last `keep` turns and reaches templates, `run.answered_by` names the role that answered, and a turn that fails leaves the session as it was.

use std::path::Path;
use std::sync::Arc;

use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use charter_runtime::engine::run::Outcome;
use charter_runtime::engine::session::Session;
use charter_runtime::formats::scenario::{Cassette, Scenario};
use charter_runtime::harness::{ReplayFailure, Replayed, replay_scenario};
use serde_json::{Value, json};

const SPEC: &str = r#"spec notes version "1.0.0"
models { default = "openai:m" }
contract Request { text: string }
contract Reply { text: string  topic: string? }
session Notes keep 2 { topic: string?  last_role: string? }
remember topic = answer.topic
remember last_role = run.answered_by
role answerer {
  model: default
  prompt: """
    {% for turn in session.turns %}[{{ turn.request.text }} => {{ turn.answer.text }} by {{ turn.role }}]{% endfor %}
    topic: {{ session.topic or "none" }}
    now: {{ request.text }}
  """
  input: Request
  output: Reply
  retry: 0
}
flow { answer = answerer(request) -> done }
"#;

fn spec() -> CompiledSpec {
    let compilation = compile("notes.charter", SPEC, &MemoryLoader::default());
    assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
    compilation.spec.unwrap_or_else(|| panic!("no spec"))
}

fn conversation(turns: &[&str], calls: &str) -> Result<Replayed, Box<ReplayFailure>> {
    let inputs: Vec<String> = turns
        .iter()
        .map(|text| format!("  - input: {{ text: {text:?} }}\n"))
        .collect();
    let scenario = Scenario::from_yaml(
        "scenario.yaml",
        &format!("spec: notes.charter\nturns:\n{}", inputs.concat()),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let cassette = Cassette::from_yaml(
        "cassette.yaml",
        &format!("version: 1\nrecorded: {{ spec_hash: x }}\ncalls:\n{calls}"),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    replay_scenario(&spec(), &scenario, &Arc::new(cassette), Path::new("."))
}

fn kinds(replayed: &Replayed, kind: &str) -> Vec<Value> {
    replayed
        .trace
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["kind"] == kind)
        .collect()
}

#[test]
fn remembered_fields_and_kept_turns_reach_the_next_turns_prompt() {
    let replayed = conversation(
        &["one", "two", "three"],
        r#"  - { step: answer, response: { text: "a1", topic: cats } }
  - { turn: 2, step: answer, expect_prompt: { contains: ["[one => a1 by answerer]", "topic: cats", "now: two"] }, response: { text: "a2" } }
  - { turn: 3, step: answer, expect_prompt: { contains: ["[one => a1 by answerer][two => a2 by answerer]", "topic: none", "now: three"] }, response: { text: "a3", topic: dogs } }
"#,
    )
    .unwrap_or_else(|failure| panic!("turn {}: {}", failure.turn, failure.error));
    assert_eq!(replayed.outcome.outcome, Outcome::Completed);
    let session = replayed
        .outcome
        .session
        .clone()
        .unwrap_or_else(|| panic!("no session after the last turn"));
    assert_eq!(session.turn_count, 3);
    assert_eq!(
        session.value(),
        json!({
            "topic": "dogs",
            "last_role": "answerer",
            "turns": [
                {"request": {"text": "two"}, "answer": {"text": "a2"}, "role": "answerer"},
                {"request": {"text": "three"}, "answer": {"text": "a3", "topic": "dogs"}, "role": "answerer"},
            ]
        }),
        "keep 2; a remembered none clears `topic` in turn 2, turn 3 sets it again"
    );
    let started: Vec<Value> = kinds(&replayed, "run_started")
        .iter()
        .map(|event| event["turn"].clone())
        .collect();
    assert_eq!(started, [json!(1), json!(2), json!(3)], "turn boundaries");
    let remembered: Vec<Value> = kinds(&replayed, "session")
        .iter()
        .map(|event| event["remembered"].clone())
        .collect();
    assert_eq!(
        remembered,
        [
            json!({"topic": "cats", "last_role": "answerer"}),
            json!({"topic": null, "last_role": "answerer"}),
            json!({"topic": "dogs", "last_role": "answerer"}),
        ]
    );
    assert_eq!(replayed.outcome.answered_by.as_deref(), Some("answerer"));
}

#[test]
fn a_turn_that_fails_leaves_the_session_as_it_was() {
    let replayed = conversation(
        &["one", "two", "three"],
        r#"  - { step: answer, response: { text: "a1", topic: cats } }
  - { turn: 2, step: answer, raw: "not json" }
  - { turn: 3, step: answer, expect_prompt: { contains: ["[one => a1 by answerer]", "topic: cats", "now: three"], not_contains: ["two"] }, response: { text: "a3" } }
"#,
    )
    .unwrap_or_else(|failure| panic!("turn {}: {}", failure.turn, failure.error));
    let finished: Vec<Value> = kinds(&replayed, "run_finished")
        .iter()
        .map(|event| event["outcome"].clone())
        .collect();
    assert_eq!(
        finished,
        [json!("completed"), json!("failed"), json!("completed")]
    );
    assert_eq!(
        kinds(&replayed, "session").len(),
        2,
        "no session event for the failed turn"
    );
    let session = replayed
        .outcome
        .session
        .unwrap_or_else(|| panic!("no session"));
    assert_eq!(session.turn_count, 2, "the failed turn is not counted");
}

#[test]
fn calls_recorded_for_a_turn_the_scenario_lacks_are_unused_and_a_missing_call_names_its_turn() {
    let replayed = conversation(
        &["one"],
        "  - { step: answer, response: { text: a1 } }\n  - { turn: 2, step: answer, response: { text: a2 } }\n",
    )
    .unwrap_or_else(|failure| panic!("{}", failure.error));
    assert_eq!(replayed.unused_calls.len(), 1);
    assert_eq!(replayed.unused_call_turns, [2]);
    let failure = conversation(
        &["one", "two"],
        "  - { step: answer, response: { text: a1 } }\n",
    )
    .err()
    .unwrap_or_else(|| panic!("turn 2 has no recording"));
    assert_eq!(failure.turn, 2);
    assert!(failure.error.to_string().contains("no recorded call"));
}

#[test]
fn a_single_run_of_a_session_spec_is_the_first_turn_of_a_new_session() {
    let spec = spec();
    let scenario = Scenario::from_yaml("s.yaml", "spec: notes.charter\ninput: { text: hi }\n")
        .unwrap_or_else(|error| panic!("{error}"));
    let cassette = Cassette::from_yaml(
        "c.yaml",
        "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: answer, response: { text: hello, topic: greetings } }\n",
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let replayed = replay_scenario(&spec, &scenario, &Arc::new(cassette), Path::new("."))
        .unwrap_or_else(|failure| panic!("{}", failure.error));
    let fresh = Session::new(&spec).unwrap_or_else(|error| panic!("{error}"));
    let next = replayed
        .outcome
        .session
        .unwrap_or_else(|| panic!("no session"));
    assert_eq!(fresh.turn_count, 0);
    assert_eq!(next.turn_count, 1);
    assert_eq!(next.fields.get("topic"), Some(&json!("greetings")));
}
