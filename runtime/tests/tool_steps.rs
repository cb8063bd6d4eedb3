//! `tool` steps and tool limits (DESIGN §9.1–§9.2), replayed on a paused clock: a tool step's result read by a gate, its retries and failure, a missing recording, timeouts in virtual time, and tool calls inside a role call that carry `latency` and `error`.

mod support;

use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use serde_json::json;
use support::replay;

const SPEC: &str = r#"spec tool_steps version "1.0.0"
models { default = "openai:m" }
contract Request { text: string }
contract Draft { workflow_id: string  version: int }
contract WorkflowRef { workflow_id: string  version: int }
contract Report { errors: list<string> = [] }
contract Reply { text: string }
tool validate { input: WorkflowRef  output: Report  effect: read  timeout: 15m  retry: 1 backoff 2s }
tool run_workflow { input: WorkflowRef  output: Reply  effect: external  timeout: 15m  retry: 0 }
role maker { prompt: """Make {{ request.text }}. {{ feedback }}""" input: Request output: Draft timeout: 1m retry: 0 }
role runner {
  prompt: """Run {{ draft.workflow_id }}."""
  input: Draft
  output: Reply
  tools: [run_workflow]
  max_tool_calls: 2
  timeout: 20m
  retry: 0
}
gate valid on make {
  hard no_errors: len(check.errors) == 0 else DESIGN_ERROR detail check.errors
  pass when true
}
repair { rounds 1  DESIGN_ERROR -> rerun make with feedback }
budget { wall 60m }
flow {
  make  = maker(request) -> check
  check = tool validate({workflow_id: make.workflow_id, version: make.version}) -> judge
  judge = gate valid pass -> run fail -> repair
  run   = runner(make) -> done
}
"#;

fn spec() -> CompiledSpec {
    spec_with("retry: 1 backoff 2s")
}

const INPUT: &str = r#"{"text": "upload the report"}"#;

#[test]
fn a_tool_steps_result_feeds_the_gate_and_its_errors_reach_the_fixer() {
    let replay = replay(
        &spec(),
        INPUT,
        r#"calls:
  - { step: make, response: { workflow_id: wf-1, version: 1 } }
  - { step: check, tool: validate, result: { errors: ["ftp_upload needs a password"] }, latency: 3s }
  - { step: make, round: 2, response: { workflow_id: wf-1, version: 2 },
      expect_prompt: { contains: ["ftp_upload needs a password"] } }
  - { step: check, round: 2, tool: validate, result: { errors: [] } }
  - { step: run, round: 2, response: { text: ran } }
"#,
    );
    replay.assert_ending("completed{gate_passed}");
    let gates = replay.of_kind("gate");
    assert_eq!(gates.len(), 2);
    assert_eq!(gates[0]["passed"], false, "{}", replay.jsonl);
    assert_eq!(gates[1]["passed"], true);
    let tool_calls = replay.of_kind("tool_call");
    assert_eq!(tool_calls[0]["step"], "check");
    assert_eq!(tool_calls[0]["tool"], "validate");
    assert_eq!(
        tool_calls[0]["args"],
        json!({"workflow_id": "wf-1", "version": 1}),
        "the argument is the record the step built"
    );
    // The recorded latency passes in virtual time.
    assert_eq!(tool_calls[0]["t_ms"], 3000);
    assert!(replay.report().unused_calls.is_empty());
}

#[test]
fn a_failing_tool_step_retries_per_its_tool_then_fails_the_step() {
    let replay = replay(
        &spec(),
        INPUT,
        r#"calls:
  - { step: make, response: { workflow_id: wf-1, version: 1 } }
  - { step: check, tool: validate, error: { message: "the rule engine is down" } }
  - { step: check, attempt: 2, tool: validate, error: { message: "still down" } }
"#,
    );
    replay.assert_ending("failed{step_failed{check}}");
    let outline = replay.outline();
    let from_check: Vec<&str> = outline
        .iter()
        .map(String::as_str)
        .filter(|line| line.contains(" check"))
        .collect();
    assert_eq!(
        from_check,
        [
            "step_started check",
            "tool_call check #1",
            "retry check #1",
            "tool_call check #2"
        ]
    );
    let retry = &replay.of_kind("retry")[0];
    assert_eq!(retry["retry"], "tool");
    assert_eq!(retry["delay_ms"], 2000);
    assert_eq!(retry["reason"], "the rule engine is down");
    let finished = &replay.of_kind("run_finished")[0];
    assert!(
        finished["message"].as_str().is_some_and(
            |message| message.contains("tool `validate` failed after 2 attempts: still down")
        ),
        "{finished}"
    );
}

#[test]
fn a_result_that_breaks_the_output_contract_is_a_failed_attempt() {
    let replay = replay(
        &spec(),
        INPUT,
        r#"calls:
  - { step: make, response: { workflow_id: wf-1, version: 1 } }
  - { step: check, tool: validate, result: { errors: "not a list" } }
  - { step: check, attempt: 2, tool: validate, result: { errors: [] } }
  - { step: run, response: { text: ran } }
"#,
    );
    replay.assert_ending("completed{gate_passed}");
    let violation = &replay.of_kind("contract_violation")[0];
    assert_eq!(violation["tool"], "validate");
    assert_eq!(violation["contract"], "Report");
}

#[test]
fn a_missing_tool_recording_is_an_error_naming_its_key() {
    let replay = replay(
        &spec(),
        INPUT,
        "calls:\n  - { step: make, response: { workflow_id: wf-1, version: 1 } }\n",
    );
    assert_eq!(
        replay.ending(),
        "error: no recorded call for {step: check, round: 1, attempt: 1}"
    );
}

#[test]
fn a_tool_step_past_its_timeout_is_cut_at_the_timeout_in_virtual_time() {
    let replay = replay(
        &spec(),
        INPUT,
        r#"calls:
  - { step: make, response: { workflow_id: wf-1, version: 1 } }
  - { step: check, tool: validate, latency: 20m }
  - { step: check, attempt: 2, tool: validate, result: { errors: [] }, latency: 1s }
  - { step: run, response: { text: ran } }
"#,
    );
    replay.assert_ending("completed{gate_passed}");
    let timeout = &replay.of_kind("tool_timeout")[0];
    assert_eq!(timeout["step"], "check");
    assert_eq!(timeout["timeout_ms"], 900_000);
    assert_eq!(timeout["t_ms"], 900_000, "cut at 15 minutes, not at 20");
    let call = &replay.of_kind("tool_call")[0];
    // 15m, the 2 s backoff, then the 1 s call.
    assert_eq!(call["t_ms"], 903_000);
}

#[test]
fn a_tool_call_inside_a_role_call_that_ran_to_its_timeout_is_a_tool_timeout() {
    let replay = replay(
        &spec(),
        INPUT,
        r#"calls:
  - { step: make, response: { workflow_id: wf-1, version: 1 } }
  - { step: check, tool: validate, result: { errors: [] } }
  - { step: run, latency: 15m30s, response: { text: "the workflow ran past its time limit" },
      tool_calls: [
        { tool: run_workflow, args: { workflow_id: wf-1, version: 1 }, latency: 15m },
        { tool: run_workflow, args: { workflow_id: wf-1, version: 1 }, latency: 10s,
          error: { message: "the engine refused: busy" } } ] }
"#,
    );
    replay.assert_ending("completed{gate_passed}");
    let timeouts = replay.of_kind("tool_timeout");
    assert_eq!(timeouts.len(), 1, "{}", replay.jsonl);
    assert_eq!(timeouts[0]["tool"], "run_workflow");
    assert_eq!(timeouts[0]["timeout_ms"], 900_000);
    let calls = replay.of_kind("tool_call");
    let failed: Vec<_> = calls.iter().filter(|call| call["step"] == "run").collect();
    assert_eq!(
        failed[0]["result"],
        json!({"error": "the engine refused: busy"}),
        "a recorded tool error is what the model was told"
    );
    // The role call's latency passes in virtual time (15m30s after the start).
    let result = &replay.of_kind("model_result")[1];
    assert_eq!(result["latency_ms"], 930_000);
}

#[test]
fn a_cassette_mixing_tool_and_model_fields_is_refused_with_the_key() {
    let text = format!(
        "{}calls:\n  - {{ step: check, tool: validate, response: {{ errors: [] }} }}\n",
        support::HEADER
    );
    let error = charter_runtime::formats::scenario::Cassette::from_yaml("cassette.yaml", &text)
        .expect_err("a tool entry with a response");
    assert!(
        error.to_string().contains(
            "call {step: check, round: 1, attempt: 1}: a `tool` step's call has no `response`"
        ),
        "{error}"
    );
    let text = format!(
        "{}calls:\n  - {{ step: make, error: {{ message: boom }} }}\n",
        support::HEADER
    );
    let error = charter_runtime::formats::scenario::Cassette::from_yaml("cassette.yaml", &text)
        .expect_err("a model error without a status");
    assert!(
        error
            .to_string()
            .contains("a model call's `error` needs a `status`"),
        "{error}"
    );
}

#[test]
fn an_argument_that_breaks_the_input_contract_fails_the_step_without_a_call() {
    // Versions count from 1: a draft of version 0 cannot be checked.
    let text = SPEC.replace(
        "contract WorkflowRef { workflow_id: string  version: int }",
        "contract WorkflowRef { workflow_id: string  version: int(1..) }",
    );
    let compilation = compile("tool_steps.charter", &text, &MemoryLoader::default());
    let spec = compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
    let replay = replay(
        &spec,
        INPUT,
        r#"calls:
  - { step: make, response: { workflow_id: wf-1, version: 0 } }
  - { step: check, tool: validate, result: { errors: [] } }
"#,
    );
    replay.assert_ending("failed{step_failed{check}}");
    let violation = &replay.of_kind("contract_violation")[0];
    assert_eq!(violation["contract"], "WorkflowRef");
    assert_eq!(violation["tool"], "validate");
    assert!(replay.of_kind("tool_call").is_empty(), "{}", replay.jsonl);
    assert_eq!(
        replay.report().unused_calls.len(),
        1,
        "the recorded tool call was never made"
    );
}

#[test]
fn a_tool_step_without_a_timeout_is_cut_by_the_wall_budget() {
    let text = SPEC.replace(
        "effect: read  timeout: 15m  retry: 1 backoff 2s",
        "effect: read  retry: 1 backoff 2s",
    );
    let compilation = compile("tool_steps.charter", &text, &MemoryLoader::default());
    let spec = compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
    let replay = replay(
        &spec,
        INPUT,
        r#"calls:
  - { step: make, response: { workflow_id: wf-1, version: 1 } }
  - { step: check, tool: validate, latency: 2h, result: { errors: [] } }
"#,
    );
    replay.assert_ending("failed{budget_exhausted{wall}}");
    let budget = &replay.of_kind("budget")[0];
    assert_eq!(budget["t_ms"], 3_600_000, "{}", replay.jsonl);
    assert!(replay.of_kind("tool_call").is_empty());
}

/// The spec with `validate`'s `retry: 1 backoff 2s` replaced by `validate_retry`.
fn spec_with(validate_retry: &str) -> CompiledSpec {
    let text = SPEC.replace("retry: 1 backoff 2s", validate_retry);
    let compilation = compile("tool_steps.charter", &text, &MemoryLoader::default());
    assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
    compilation.spec.unwrap_or_else(|| panic!("no spec"))
}

/// A tool step's retries back off like a role's (the delay doubles each retry), and the
/// step's failure says how many attempts were made — nothing when there was one.
#[test]
fn a_tool_steps_backoff_doubles_and_its_failure_counts_the_attempts() {
    let failing = |attempts: u64| {
        let mut calls = String::from(
            "calls:\n  - { step: make, response: { workflow_id: wf-1, version: 1 } }\n",
        );
        for attempt in 1..=attempts {
            calls.push_str(&format!(
                "  - {{ step: check, attempt: {attempt}, tool: validate, error: {{ message: \"down {attempt}\" }} }}\n"
            ));
        }
        calls
    };
    let replayed = replay(&spec_with("retry: 2 backoff 2s"), INPUT, &failing(3));
    replayed.assert_ending("failed{step_failed{check}}");
    let delays: Vec<_> = replayed
        .of_kind("retry")
        .iter()
        .map(|retry| retry["delay_ms"].clone())
        .collect();
    assert_eq!(delays, [json!(2000), json!(4000)], "{}", replayed.jsonl);
    let calls: Vec<_> = replayed
        .of_kind("tool_call")
        .iter()
        .map(|call| call["t_ms"].clone())
        .collect();
    assert_eq!(
        calls,
        [json!(0), json!(2000), json!(6000)],
        "{}",
        replayed.jsonl
    );
    let finished = &replayed.of_kind("run_finished")[0];
    assert!(
        finished["message"].as_str().is_some_and(
            |message| message.contains("tool `validate` failed after 3 attempts: down 3")
        ),
        "{finished}"
    );

    let replayed = replay(&spec_with("retry: 0"), INPUT, &failing(1));
    replayed.assert_ending("failed{step_failed{check}}");
    assert!(replayed.of_kind("retry").is_empty());
    let finished = &replayed.of_kind("run_finished")[0];
    let message = finished["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("tool `validate` failed: down 1"),
        "{finished}"
    );
    assert!(!message.contains("after"), "{finished}");
}
