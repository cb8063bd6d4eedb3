//! Tests of the scenario and cassette formats: DESIGN §5's example, round trips, loading checks.

use serde_json::json;

use super::*;
use crate::testing::EXAMPLE_CASSETTE;

fn load(text: &str) -> Result<Cassette, String> {
    Cassette::from_yaml("golden/s/c/cassette.yaml", text).map_err(|error| error.to_string())
}

fn loaded(text: &str) -> Cassette {
    match load(text) {
        Ok(cassette) => cassette,
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn the_design_example_loads() {
    let cassette = loaded(EXAMPLE_CASSETTE);
    assert_eq!(cassette.version, 1);
    let recorded = cassette.recorded.clone().unwrap_or_default();
    assert_eq!(recorded.spec_hash, "sha256:abc");
    assert_eq!(
        recorded.prompts.get("planner").map(String::as_str),
        Some("sha256:def")
    );
    let keys: Vec<String> = cassette
        .calls
        .iter()
        .map(|call| call.key().to_string())
        .collect();
    assert_eq!(
        keys,
        [
            "{step: plan, round: 1, attempt: 1}",
            "{step: execute, round: 1, item: T-002, attempt: 1}",
            "{step: execute, round: 1, item: T-002, attempt: 2}",
            "{step: execute, round: 1, item: T-002, attempt: 3}",
            "{step: execute, round: 1, item: T-002, attempt: 4}",
            "{step: execute, round: 2, item: T-001, attempt: 1, role: judge}",
        ]
    );
    let plan = &cassette.calls[0];
    assert_eq!(plan.response, Some(json!({"goal": "g", "tasks": []})));
    assert_eq!(plan.latency, Some(Duration::from_secs(2)));
    assert_eq!(
        plan.usage,
        Some(RecordedUsage {
            input_tokens: 812,
            output_tokens: 240
        })
    );
    let timed_out = &cassette.calls[1];
    assert_eq!(timed_out.latency, Some(Duration::from_secs(20 * 60)));
    assert!(timed_out.response.is_none() && timed_out.raw.is_none() && timed_out.error.is_none());
    assert_eq!(
        cassette.calls[2].error,
        Some(RecordedError {
            status: Some(429),
            message: None,
            retry_after: None
        })
    );
    assert_eq!(cassette.calls[3].raw.as_deref(), Some("not json {"));
    assert_eq!(cassette.calls[4].tool_calls.len(), 1);
    assert_eq!(
        cassette.calls[4].tool_calls[0].result,
        json!({"urls": ["https://a.example"]})
    );
    assert_eq!(cassette.calls[5].latency, Some(Duration::from_millis(250)));
    assert_eq!(
        cassette.humans,
        vec![RecordedHuman {
            turn: 1,
            step: "confirm".into(),
            round: 1,
            attempt: 1,
            answer: json!({"approved": true})
        }]
    );
    assert_eq!(
        cassette.faults,
        vec![Fault::Tamper(Tamper {
            after: "judge".into(),
            item: Some("T-001".into())
        })]
    );
}

#[test]
fn cassettes_round_trip_through_yaml() {
    let cassette = loaded(EXAMPLE_CASSETTE);
    let text = match cassette.to_yaml() {
        Ok(text) => text,
        Err(error) => panic!("{error}"),
    };
    assert!(text.contains("latency: 20m"), "{text}");
    assert!(
        !text.contains("round: 1\n"),
        "defaults are left out: {text}"
    );
    assert_eq!(loaded(&text), cassette);
}

#[test]
fn loading_checks_name_the_file_and_line() {
    let cases = [
        (
            "version: 2\nrecorded: { spec_hash: x }\n",
            "golden/s/c/cassette.yaml:1:10: unsupported cassette version 2 (this charter reads version 1)",
        ),
        (
            "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan }\n  - { step: exec, item: a }\n  - { step: plan, round: 1, attempt: 1 }\n",
            "golden/s/c/cassette.yaml:6: duplicate call {step: plan, round: 1, attempt: 1} (first at line 4)",
        ),
        (
            "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan, raw: x, response: {} }\n",
            "golden/s/c/cassette.yaml:4: call {step: plan, round: 1, attempt: 1} has more than one of `response`, `raw` and `error`",
        ),
        (
            "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan, attempt: 0 }\n",
            "golden/s/c/cassette.yaml:4: call {step: plan, round: 1, attempt: 0}: `turn`, `round` and `attempt` count from 1",
        ),
        (
            "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan }\n  - { step: plan, turn: 2 }\n  - { turn: 2, step: plan, attempt: 1 }\n",
            "golden/s/c/cassette.yaml:6: duplicate call {step: plan, round: 1, attempt: 1} in turn 2 (first at line 5)",
        ),
        (
            "version: 1\nrecorded: { spec_hash: x }\nhumans:\n  - { step: ok, answer: {approved: true} }\n  - { step: ok, round: 1, answer: {approved: false} }\n",
            "golden/s/c/cassette.yaml:5: duplicate human answer for step `ok` in round 1 (attempt 1) (first at line 4)",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(load(text), Err(expected.to_string()), "{text}");
    }
}

#[test]
fn a_cassette_without_recorded_is_hand_written_and_unpinned() {
    let cassette = loaded("version: 1\ncalls:\n  - { step: plan, response: {} }\n");
    assert_eq!(cassette.recorded, None);
    let current = Recorded {
        spec_hash: "sha256:now".to_string(),
        ..Recorded::default()
    };
    assert!(cassette.stale_against(&current).is_empty());
    assert!(cassette.overrides().is_empty());
    assert!(!cassette.to_yaml().unwrap_or_default().contains("recorded"));
}

#[test]
fn format_errors_name_the_file_and_position() {
    let cases = [
        (
            "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan, latency: 2 seconds }\n",
            ":4:",
            "invalid duration",
        ),
        (
            "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan, respnse: {} }\n",
            ":4:",
            "respnse",
        ),
        (
            "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan, error: { status: many } }\n",
            ":4:",
            "",
        ),
        ("calls: []\n", "cassette.yaml", "version"),
        (
            "version: 1\nrecorded: { spec_hash: x }\nfaults: [ { smash: { after: x } } ]\n",
            ":3:",
            "smash",
        ),
    ];
    for (text, position, fragment) in cases {
        match load(text) {
            Ok(cassette) => panic!("{text:?} loaded: {cassette:?}"),
            Err(error) => {
                assert!(error.starts_with("golden/s/c/cassette.yaml"), "{error}");
                assert!(error.contains(position), "{text:?}: {error}");
                assert!(error.contains(fragment), "{text:?}: {error}");
            }
        }
    }
}

#[test]
fn scenarios_load_with_expectations() {
    let text = r#"spec: specs/closed_loop.charter
description: executor times out twice on T-002, third attempt succeeds
input: { goal: "write a post", constraints: [] }
expect: { outcome: completed, reason: gate_passed }
"#;
    let scenario = match Scenario::from_yaml("scenario.yaml", text) {
        Ok(scenario) => scenario,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(scenario.spec, "specs/closed_loop.charter");
    assert_eq!(
        scenario.input,
        json!({"goal": "write a post", "constraints": []})
    );
    assert_eq!(
        scenario.expect,
        Some(Expectation {
            outcome: Some(Outcome::Completed),
            reason: Some(Reason::GatePassed),
            ..Expectation::default()
        })
    );
    let with_argument = "spec: s.charter\ninput: {}\nexpect:\n  outcome: failed\n  reason: budget_exhausted{tokens}\n";
    let scenario =
        Scenario::from_yaml("scenario.yaml", with_argument).map(|scenario| scenario.expect);
    assert_eq!(
        scenario,
        Ok(Some(Expectation {
            outcome: Some(Outcome::Failed),
            reason: Some(Reason::BudgetExhausted(
                crate::formats::trace::BudgetKind::Tokens
            )),
            ..Expectation::default()
        }))
    );
    let bad = Scenario::from_yaml(
        "scenario.yaml",
        "spec: s\ninput: {}\nexpect: { outcome: done }\n",
    );
    assert!(
        matches!(&bad, Err(error) if error.to_string().starts_with("scenario.yaml:3:")),
        "{bad:?}"
    );
    match scenario_round_trip(text) {
        Ok(()) => {}
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn a_written_reason_with_braces_is_quoted_and_reads_back_in_a_flow_mapping_too() {
    let scenario = Scenario {
        spec: "specs/s.charter".into(),
        description: None,
        input: json!({"goal": "g"}),
        turns: None,
        expect: Some(Expectation {
            outcome: Some(Outcome::Failed),
            reason: Some(Reason::StepFailed {
                step: "review".into(),
            }),
            delivered: Some("c1".into()),
            ..Expectation::default()
        }),
    };
    let text = scenario.to_yaml().unwrap_or_else(|error| panic!("{error}"));
    assert!(text.contains("reason: \"step_failed{review}\"\n"), "{text}");
    let again = Scenario::from_yaml("scenario.yaml", &text);
    assert_eq!(again.as_ref().ok(), Some(&scenario), "{again:?}");
    // The written value, pasted into a flow mapping as scenarios are often written.
    let reason = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("reason: "))
        .unwrap_or_default();
    let flow = format!(
        "spec: specs/s.charter\ninput: {{goal: g}}\nexpect: {{ outcome: failed, reason: {reason}, delivered: c1 }}\n"
    );
    let pasted = Scenario::from_yaml("scenario.yaml", &flow);
    assert_eq!(pasted.as_ref().ok(), Some(&scenario), "{flow}: {pasted:?}");
    // A reason without braces stays plain.
    let plain = Scenario {
        expect: Some(Expectation {
            reason: Some(Reason::GatePassed),
            ..Expectation::default()
        }),
        ..scenario
    };
    let text = plain.to_yaml().unwrap_or_else(|error| panic!("{error}"));
    assert!(text.contains("reason: gate_passed\n"), "{text}");
}

fn scenario_round_trip(text: &str) -> Result<(), LoadError> {
    let scenario = Scenario::from_yaml("scenario.yaml", text)?;
    let again = Scenario::from_yaml("scenario.yaml", &scenario.to_yaml()?)?;
    assert_eq!(again, scenario);
    Ok(())
}

#[test]
fn durations_parse_and_format() {
    for (text, millis) in [
        ("250ms", 250),
        ("2s", 2_000),
        ("20m", 1_200_000),
        ("2h", 7_200_000),
        ("0ms", 0),
        ("1500ms", 1_500),
        ("4m50s", 290_000),
        ("1h30m", 5_400_000),
    ] {
        assert_eq!(
            duration_text::parse(text),
            Ok(Duration::from_millis(millis)),
            "{text}"
        );
    }
    for bad in [
        "",
        "2",
        "s",
        "2 s",
        "2.5s",
        "-1s",
        "2d",
        "50s4m",
        "99999999999999999999h",
    ] {
        assert!(duration_text::parse(bad).is_err(), "{bad}");
    }
    for (millis, text) in [
        (250, "250ms"),
        (2_000, "2s"),
        (90_000, "1m30s"),
        (290_000, "4m50s"),
        (1_200_000, "20m"),
        (7_200_000, "2h"),
        (0, "0ms"),
        (1_500, "1s500ms"),
    ] {
        assert_eq!(duration_text::format(Duration::from_millis(millis)), text);
    }
}

#[test]
fn files_are_read_from_disk_with_their_name() {
    let missing = Cassette::read(Path::new("/nonexistent/cassette.yaml"));
    assert!(
        matches!(&missing, Err(error) if error.to_string().starts_with("/nonexistent/cassette.yaml: cannot read the file:")),
        "{missing:?}"
    );
}

#[test]
fn stale_recordings_list_what_changed() {
    let spec = crate::testing::compile_spec(
        crate::testing::EXPR_SPEC
            .replace("EXPR", "review.score > 1")
            .as_str(),
    );
    let current = Recorded::from_spec(&spec);
    assert_eq!(current.spec_hash, spec.spec_hash);
    assert_eq!(
        current.prompts.keys().collect::<Vec<_>>(),
        ["finalizer", "reviewer"]
    );
    assert!(current.stale_against(&current).is_empty());
    let mut old = current.clone();
    old.spec_hash = "sha256:old".into();
    old.prompts.insert("reviewer".into(), "sha256:p0".into());
    old.prompts.remove("finalizer");
    old.prompts.insert("gone".into(), "sha256:g".into());
    let reviewer = current.prompts.get("reviewer").cloned().unwrap_or_default();
    assert_eq!(
        old.stale_against(&current),
        [
            format!("spec: sha256:old -> {}", spec.spec_hash),
            "prompt gone: removed".to_string(),
            format!("prompt reviewer: sha256:p0 -> {reviewer}"),
            "prompt finalizer: added".to_string(),
        ]
    );
    // A hand-written cassette that records only the spec hash is compared on it alone.
    let hand_written = Recorded {
        spec_hash: spec.spec_hash.clone(),
        ..Recorded::default()
    };
    assert!(hand_written.stale_against(&current).is_empty());
}

#[test]
fn a_replay_under_other_model_parameters_or_an_override_is_stale() {
    let spec = |params: &str| {
        crate::testing::compile_spec(
            crate::testing::EXPR_SPEC
                .replace("EXPR", "review.score > 1")
                .replace(
                    "role reviewer { model: \"openai:gpt-4o-mini\"",
                    &format!(
                        "models {{ default = \"openai:gpt-4o-mini\" {params} }}\nrole reviewer {{ model: default"
                    ),
                )
                .as_str(),
        )
    };
    let recorded = Recorded::from_spec(&spec("temperature 0.2 seed 7"));
    assert_eq!(
        recorded.models.get("default").map(ToString::to_string),
        Some("openai:gpt-4o-mini temperature 0.2 seed 7".to_string())
    );
    let mut now = Recorded::from_spec(&spec("temperature 0.7 seed 7"));
    now.spec_hash = recorded.spec_hash.clone();
    assert_eq!(
        recorded.stale_against(&now),
        [
            "model default: openai:gpt-4o-mini temperature 0.2 seed 7 -> openai:gpt-4o-mini temperature 0.7 seed 7"
        ]
    );
    // Recorded under `--model default=openai:qwen2.5:7b`: the same override replays clean.
    let mut overridden = spec("temperature 0.2 seed 7");
    let overrides = [("default".to_string(), "openai:qwen2.5:7b".to_string())].into();
    crate::engine::models::apply_overrides(&mut overridden, &overrides)
        .unwrap_or_else(|error| panic!("{error}"));
    let mut recorded = Recorded::from_spec(&overridden);
    recorded.overrides = overrides.clone();
    let mut replayed = spec("temperature 0.2 seed 7");
    assert_eq!(
        recorded
            .stale_against(&Recorded::from_spec(&replayed))
            .len(),
        1
    );
    crate::engine::models::apply_overrides(&mut replayed, &recorded.overrides)
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(
        recorded
            .stale_against(&Recorded::from_spec(&replayed))
            .is_empty()
    );
}

#[test]
fn a_scenario_is_one_input_or_a_conversation_of_turns() {
    let scenario =
        |text: &str| Scenario::from_yaml("scenario.yaml", text).map_err(|error| error.to_string());
    let conversation = scenario(
        "spec: s.charter\nturns:\n  - { input: { text: a } }\n  - { input: { text: b } }\n",
    )
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        conversation.inputs(),
        vec![json!({"text": "a"}), json!({"text": "b"})]
    );
    let single =
        scenario("spec: s.charter\ninput: { text: a }\n").unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(single.inputs(), vec![json!({"text": "a"})]);
    for (text, said) in [
        (
            "spec: s.charter\ninput: { text: a }\nturns: [ { input: { text: b } } ]\n",
            "not both",
        ),
        ("spec: s.charter\nturns: []\n", "at least one turn"),
        ("spec: s.charter\n", "needs `input`"),
    ] {
        let error = scenario(text).err().unwrap_or_default();
        assert!(error.contains(said), "{text}: {error}");
    }
}

#[test]
fn a_conversation_cassette_answers_each_turn_from_its_own_calls() {
    let cassette = loaded(
        "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: talk, response: { text: one } }\n  - { turn: 2, step: talk, response: { text: two } }\nhumans:\n  - { turn: 2, step: ok, answer: { approved: true } }\n",
    );
    let second = cassette.for_turn(2);
    assert_eq!(second.calls.len(), 1);
    assert_eq!(second.calls[0].turn, 1, "keyed as in a one-turn cassette");
    assert_eq!(second.calls[0].response, Some(json!({"text": "two"})));
    assert_eq!(second.humans.len(), 1);
    assert!(cassette.for_turn(1).humans.is_empty());
    assert!(cassette.for_turn(3).calls.is_empty());
}

#[test]
fn the_closest_unused_recording_is_a_near_name_never_a_far_one() {
    let missing = CallKey::new("execute").item("T-002");
    let near = CallKey::new("execute").item("T-02");
    let other_attempt = CallKey::new("execute").item("T-002").attempt(2);
    let far = CallKey::new("deliver");
    assert_eq!(
        closest_key(&missing, [&far, &other_attempt, &near]),
        Some(near.clone())
    );
    assert_eq!(
        closest_key(&missing, [&far, &other_attempt]),
        Some(other_attempt)
    );
    assert_eq!(closest_key(&missing, [&far]), None);
    assert_eq!(closest_key(&CallKey::new("plan"), [&near]), None);
}

#[test]
fn a_tool_step_entry_names_its_tool_and_a_model_step_takes_none() {
    let text = r#"spec tool_step version "1"
contract Request { goal: string }
contract Ref { id: string }
contract Report { errors: list<string> = [] }
tool validate { input: Ref  output: Report  effect: read  timeout: 30s }
role maker { model: "openai:x" prompt: """go""" input: Request output: Ref }
flow {
  make  = maker(request) -> check
  check = tool validate(make) -> done
}
"#;
    let compilation = crate::compiler::compile(
        "tool_step.charter",
        text,
        &crate::compiler::MemoryLoader::default(),
    );
    let spec = compilation
        .spec
        .unwrap_or_else(|| panic!("{:?}", compilation.diagnostics));
    let problems = |calls: &str| -> Vec<String> {
        unknown_names(&loaded(&format!("version: 1\ncalls:\n{calls}")), &spec)
            .into_iter()
            .map(|problem| problem.message)
            .collect()
    };
    assert!(
        problems(
            "  - { step: make, response: { id: a } }\n  - { step: check, tool: validate, result: { errors: [] } }\n"
        )
        .is_empty()
    );
    assert_eq!(
        problems("  - { step: check, tool: validat, result: { errors: [] } }\n"),
        [
            "call {step: check, round: 1, attempt: 1}: step `check` calls tool `validate`, not `validat`; did you mean `validate`?"
        ]
    );
    assert!(
        problems("  - { step: check, response: { errors: [] } }\n")[0]
            .contains("step `check` is a tool step: its entry gives `tool: validate`")
    );
    assert!(
        problems("  - { step: make, tool: validate, result: { id: a } }\n")[0]
            .contains("step `make` is a call step, not a tool step")
    );
}
