//! Tests of the trajectory checks: steps as a subsequence, tool counts, what must never run, gates' last evaluations, and names the spec lacks.

use charter_compiler::graph::CompiledSpec;
use serde_json::json;

use super::*;
use crate::formats::trace::EventKind;
use crate::testing::{LOOP_SPEC, compile_spec};

/// The test loop spec with a `web_search` tool.
fn spec() -> CompiledSpec {
    compile_spec(&format!(
        "{LOOP_SPEC}\ncontract Query {{ q: string }}\ncontract Hits {{ hits: list<string> }}\ntool web_search {{ input: Query output: Hits effect: read }}\n"
    ))
}

/// The messages of [`unmet`], checking each names its key.
fn unmet(expect: &Expectation, events: &[TraceEvent], spec: &CompiledSpec) -> Vec<String> {
    super::unmet(expect, events, spec)
        .into_iter()
        .map(|unmet| {
            assert!(
                unmet
                    .message
                    .starts_with(&format!("expect.{}: ", unmet.key)),
                "{unmet:?}"
            );
            unmet.message
        })
        .collect()
}

fn expect(yaml: &str) -> Expectation {
    crate::formats::yaml::from_str("scenario.yaml", yaml).unwrap_or_else(|error| panic!("{error}"))
}

fn started(round: u64, step: &str, role: Option<&str>) -> TraceEvent {
    TraceEvent::new(
        0,
        0,
        round,
        EventKind::StepStarted {
            role: role.map(str::to_string),
            items: None,
            tool: None,
        },
    )
    .with_step(step)
}

fn model_call(round: u64, step: &str, role: &str) -> TraceEvent {
    TraceEvent::new(
        0,
        0,
        round,
        EventKind::ModelCall {
            role: role.to_string(),
            model: "openai:m".to_string(),
            prompt_hash: "sha256:0".to_string(),
        },
    )
    .with_step(step)
}

fn tool_call(round: u64, step: &str, tool: &str) -> TraceEvent {
    TraceEvent::new(
        0,
        0,
        round,
        EventKind::ToolCall {
            tool: tool.to_string(),
            args: json!({"q": "x"}),
            result: json!({"hits": []}),
            sandbox: None,
        },
    )
    .with_step(step)
}

fn gate(round: u64, candidate: &str, passed: bool, score: Option<f64>) -> TraceEvent {
    TraceEvent::new(
        0,
        0,
        round,
        EventKind::Gate {
            gate: "quality".to_string(),
            candidate: candidate.to_string(),
            hash: "sha256:0".to_string(),
            passed,
            score,
            rules: Vec::new(),
            scores: Vec::new(),
            issues: Vec::new(),
        },
    )
    .with_step("judge")
}

/// A repair loop: round 1 fails the gate at 4.5 after one search, round 2 passes at
/// 8.25 after two, and the run delivers.
fn repair_loop() -> Vec<TraceEvent> {
    let mut events = vec![
        started(1, "plan", Some("planner")),
        model_call(1, "plan", "planner"),
    ];
    for (round, searches, passed, score) in [(1, 1, false, 4.5), (2, 2, true, 8.25)] {
        events.push(started(round, "execute", Some("executor")));
        events.push(model_call(round, "execute", "executor"));
        for _ in 0..searches {
            events.push(tool_call(round, "execute", "web_search"));
        }
        events.push(started(round, "review", Some("reviewer")));
        events.push(model_call(round, "review", "reviewer"));
        events.push(started(round, "judge", None));
        events.push(gate(round, &format!("c{round}"), passed, Some(score)));
    }
    events.push(started(2, "deliver", Some("finalizer")));
    events.push(model_call(2, "deliver", "finalizer"));
    events
}

#[test]
fn a_run_that_meets_every_trajectory_check_has_nothing_unmet() {
    let expect = expect(
        "{ steps: [plan, judge, execute, judge, deliver], tools: { web_search: { min: 3, max: 3 } }, gates: { quality: { min_score: 8, passed: true } } }",
    );
    let spec = spec();
    assert_eq!(name_problems(&expect, &spec), Vec::<String>::new());
    assert_eq!(unmet(&expect, &repair_loop(), &spec), Vec::<String>::new());
}

#[test]
fn steps_must_run_in_order_as_a_subsequence() {
    let spec = spec();
    let events = repair_loop();
    for (steps, message) in [
        ("[plan, review, deliver]", None),
        (
            "[execute, execute, execute]",
            Some(
                "expect.steps: `execute` never ran after `execute` (it ran only before); steps run: plan, execute, review, judge, execute, review, judge, deliver",
            ),
        ),
        (
            "[deliver, plan]",
            Some(
                "expect.steps: `plan` never ran after `deliver` (it ran only before); steps run: plan, execute, review, judge, execute, review, judge, deliver",
            ),
        ),
        (
            "[plan, judge, judge, judge]",
            Some(
                "expect.steps: `judge` never ran after `judge` (it ran only before); steps run: plan, execute, review, judge, execute, review, judge, deliver",
            ),
        ),
    ] {
        let expect = expect(&format!("{{ steps: {steps} }}"));
        assert_eq!(
            unmet(&expect, &events, &spec).first().map(String::as_str),
            message,
            "{steps}"
        );
    }
    let cut: Vec<TraceEvent> = events.into_iter().take(2).collect();
    assert_eq!(
        unmet(&expect("{ steps: [plan, execute] }"), &cut, &spec),
        ["expect.steps: `execute` never ran after `plan`; steps run: plan"]
    );
    assert_eq!(
        unmet(&expect("{ steps: [plan] }"), &[], &spec),
        ["expect.steps: `plan` never ran; steps run: none"]
    );
}

#[test]
fn tools_count_every_call_and_timeout_against_their_bounds() {
    let spec = spec();
    let mut events = repair_loop();
    events.push(TraceEvent::new(
        0,
        0,
        2,
        EventKind::ToolTimeout {
            tool: "web_search".to_string(),
            args: json!({}),
            timeout_ms: 1000,
            sandbox: None,
        },
    ));
    events.push(TraceEvent::new(
        0,
        0,
        2,
        EventKind::ToolDenied {
            tool: "web_search".to_string(),
            allowed: Vec::new(),
            rule: None,
        },
    ));
    for (bounds, message) in [
        ("{ min: 4 }", None),
        ("{ max: 4 }", None),
        (
            "{ min: 1, max: 3 }",
            Some("expect.tools: `web_search` was called 4 times, expected between 1 and 3"),
        ),
        (
            "{ min: 5 }",
            Some("expect.tools: `web_search` was called 4 times, expected at least 5"),
        ),
        (
            "{ min: 2, max: 2 }",
            Some("expect.tools: `web_search` was called 4 times, expected exactly 2"),
        ),
    ] {
        let expect = expect(&format!("{{ tools: {{ web_search: {bounds} }} }}"));
        assert_eq!(
            unmet(&expect, &events, &spec).first().map(String::as_str),
            message,
            "{bounds}"
        );
    }
    assert_eq!(
        unmet(&expect("{ tools: { web_search: { min: 1 } } }"), &[], &spec),
        ["expect.tools: `web_search` was called 0 times, expected at least 1"]
    );
}

#[test]
fn not_called_matches_a_step_a_role_or_a_tool_and_says_which() {
    let spec = spec();
    let events = repair_loop();
    for (name, message) in [
        (
            "deliver",
            "expect.not_called: step `deliver` ran (round 2), expected it never to",
        ),
        (
            "reviewer",
            "expect.not_called: role `reviewer` was called in step `review` (round 1), expected it never to",
        ),
        (
            "web_search",
            "expect.not_called: tool `web_search` was called in step `execute` (round 1), expected it never to",
        ),
    ] {
        let expect = expect(&format!("{{ not_called: [{name}] }}"));
        assert_eq!(unmet(&expect, &events, &spec), [message], "{name}");
    }
    let before_delivery: Vec<TraceEvent> = events.into_iter().take(5).collect();
    let expect = expect("{ not_called: [deliver, finalizer, web_search] }");
    let cut: Vec<TraceEvent> = before_delivery
        .into_iter()
        .filter(|event| !matches!(event.kind, EventKind::ToolCall { .. }))
        .collect();
    assert_eq!(unmet(&expect, &cut, &spec), Vec::<String>::new());
}

#[test]
fn gates_are_judged_on_their_last_evaluation() {
    let spec = spec();
    let events = repair_loop();
    assert_eq!(
        unmet(
            &expect("{ gates: { quality: { min_score: 8.25 } } }"),
            &events,
            &spec
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        unmet(
            &expect("{ gates: { quality: { min_score: 9 } } }"),
            &events,
            &spec
        ),
        [
            "expect.gates: gate `quality` passed with score 8.25 on its last evaluation (candidate c2), expected a score of at least 9"
        ]
    );
    assert_eq!(
        unmet(
            &expect("{ gates: { quality: { passed: false } } }"),
            &events,
            &spec
        ),
        [
            "expect.gates: gate `quality` passed with score 8.25 on its last evaluation (candidate c2), expected a fail"
        ]
    );
    let first_round: Vec<TraceEvent> = events
        .iter()
        .filter(|event| event.round == 1)
        .cloned()
        .collect();
    assert_eq!(
        unmet(
            &expect("{ gates: { quality: { min_score: 7, passed: true } } }"),
            &first_round,
            &spec
        ),
        [
            "expect.gates: gate `quality` failed with score 4.5 on its last evaluation (candidate c1), expected a score of at least 7 and a pass"
        ]
    );
    let mut unscored = first_round.clone();
    unscored.push(gate(1, "c1", true, None));
    assert_eq!(
        unmet(
            &expect("{ gates: { quality: { min_score: 7 } } }"),
            &unscored,
            &spec
        ),
        [
            "expect.gates: gate `quality` passed with no score on its last evaluation (candidate c1), expected a score of at least 7"
        ]
    );
    assert_eq!(
        unmet(
            &expect("{ gates: { quality: { passed: true } } }"),
            &events[..2],
            &spec
        ),
        ["expect.gates: gate `quality` was never evaluated, expected a pass"]
    );
}

#[test]
fn names_the_spec_lacks_and_bounds_that_cannot_hold_are_problems_with_a_hint() {
    let spec = spec();
    let wrong = expect(
        "{ steps: [plan, evalute], tools: { web_serch: { min: 1 }, web_search: { min: 3, max: 1 } }, not_called: [reviewr, planner], gates: { qualty: { min_score: 7 }, quality: {} } }",
    );
    assert_eq!(
        name_problems(&wrong, &spec),
        [
            "`expect.steps` names step `evalute`, which the spec `closed_loop` does not have",
            "`expect.tools.web_search` has `min: 3` above `max: 1`, which no run can meet",
            "`expect.tools` names tool `web_serch`, which the spec `closed_loop` does not have; did you mean `web_search`?",
            "`expect.not_called` names `reviewr`, which is no step, role or tool of the spec `closed_loop`; did you mean `reviewer`?",
            "`expect.gates.quality` gives neither `min_score` nor `passed` (write e.g. `{ min_score: 7 }`)",
            "`expect.gates` names gate `qualty`, which the spec `closed_loop` does not have; did you mean `quality`?",
        ]
    );
    assert_eq!(
        name_problems(&expect("{ tools: { web_search: {} } }"), &spec),
        ["`expect.tools.web_search` gives neither `min` nor `max` (write e.g. `{ min: 1 }`)"]
    );
}

#[test]
fn unknown_keys_under_a_trajectory_check_are_errors() {
    for yaml in [
        "{ tools: { web_search: { minimum: 1 } } }",
        "{ gates: { quality: { score: 7 } } }",
        "{ step: [plan] }",
    ] {
        let error = crate::formats::yaml::from_str::<Expectation>("scenario.yaml", yaml)
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("scenario.yaml") && error.contains("unknown field"),
            "{yaml}: {error}"
        );
    }
}

/// Tools of MCP servers are named `SERVER.TOOL` in `expect` too: an allow-listed one (or
/// any under `tools: *`) is known, another gets "did you mean".
#[test]
fn tools_of_mcp_servers_are_named_server_dot_tool() {
    let spec = compile_spec(&format!(
        "{LOOP_SPEC}\nmcp files {{ command: [\"npx\", \"server\"]  tools: [read_text_file] }}\nmcp web {{ url: \"http://127.0.0.1:3001/mcp\"  tools: * }}\n"
    ));
    let known = expect(
        "{ tools: { files.read_text_file: { min: 1 }, web.search: { max: 2 } }, not_called: [files.read_text_file, web.fetch] }",
    );
    assert_eq!(name_problems(&known, &spec), Vec::<String>::new());
    let wrong =
        expect("{ tools: { files.read_file: { min: 1 } }, not_called: [file.read_text_file] }");
    assert_eq!(
        name_problems(&wrong, &spec),
        [
            "`expect.tools` names tool `files.read_file`, which the spec `closed_loop` does not have; did you mean `files.read_text_file`?",
            "`expect.not_called` names `file.read_text_file`, which is no step, role or tool of the spec `closed_loop`; did you mean `files.read_text_file`?",
        ]
    );
    // Counted like any tool from the run's trace.
    let events = [tool_call(1, "execute", "files.read_text_file")];
    let counted = expect("{ tools: { files.read_text_file: { min: 1, max: 1 } } }");
    assert_eq!(unmet(&counted, &events, &spec), Vec::<String>::new());
}
