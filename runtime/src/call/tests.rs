//! Tests of one role call against small cassettes on tokio's paused clock: timeouts, errors, malformed output, tools, budgets.

use std::sync::Mutex;

use charter_compiler::graph::CompiledSpec;
use serde_json::json;
use tokio::time::Instant;

use super::*;
use crate::replay::ReplayProvider;
use crate::scenario::Cassette;
use crate::testing::compile_spec;

const SPEC: &str = r#"spec calls version "1"
contract Task { id: string  goal: string }
contract StageResult { task_id: string  status: ok | failed | partial  output: string }
contract Query { text: string }
contract Hits { urls: list<string> }
contract Post { title: string  body: string }
contract Receipt { url: string }
tool web_search { input: Query  output: Hits  effect: read }
tool publish { input: Post  output: Receipt  effect: external }
role executor {
  model: "openai:m"
  prompt: """{{ task.goal }}"""
  input: Task
  output: StageResult
  tools: [web_search]
  max_tool_calls: 2
  timeout: 15m
  retry: 3 backoff 2s
}
role publisher { model: "openai:m" prompt: """{{ task.goal }}""" input: Task output: StageResult tools: [publish] max_tool_calls: 1 }
flow {
  execute = executor(request) -> post
  post = publisher(request) -> done
}
"#;

const OK: &str = "{ task_id: T-1, status: ok, output: done }";

/// Records what the call reports, and admits at most `admit` calls.
struct Recorder {
    events: Mutex<Vec<(u64, EventKind)>>,
    admit: Mutex<u64>,
    tokens: Mutex<u64>,
}

impl Recorder {
    fn new(admit: u64) -> Self {
        Recorder {
            events: Mutex::new(Vec::new()),
            admit: Mutex::new(admit),
            tokens: Mutex::new(0),
        }
    }

    /// Events as `attempt:kind` (with the retry delay, the timeout or the tool).
    fn summary(&self) -> Vec<String> {
        let events = self
            .events
            .lock()
            .map(|events| events.clone())
            .unwrap_or_default();
        events
            .iter()
            .map(|(attempt, kind)| match kind {
                EventKind::Retry { next, delay_ms, .. } => {
                    format!("{attempt}:retry->{next}+{delay_ms}ms")
                }
                EventKind::Timeout { after_ms } => format!("{attempt}:timeout@{after_ms}ms"),
                EventKind::ToolCall { tool, .. } => format!("{attempt}:tool_call({tool})"),
                EventKind::ToolDenied { tool, .. } => format!("{attempt}:tool_denied({tool})"),
                EventKind::ContractViolation {
                    tool: Some(tool), ..
                } => format!("{attempt}:contract_violation({tool})"),
                other => {
                    let value = serde_json::to_value(other).unwrap_or_default();
                    format!("{attempt}:{}", value["kind"].as_str().unwrap_or("?"))
                }
            })
            .collect()
    }

    fn violations(&self) -> Vec<String> {
        let events = self
            .events
            .lock()
            .map(|events| events.clone())
            .unwrap_or_default();
        events
            .iter()
            .filter_map(|(_, kind)| match kind {
                EventKind::ContractViolation { violations, .. } => {
                    Some(violations_text(violations))
                }
                _ => None,
            })
            .collect()
    }
}

impl CallObserver for Recorder {
    fn event(&self, attempt: u64, kind: EventKind) {
        if let Ok(mut events) = self.events.lock() {
            events.push((attempt, kind));
        }
    }

    fn admit(&self) -> Result<(), BudgetKind> {
        let Ok(mut left) = self.admit.lock() else {
            return Err(BudgetKind::Steps);
        };
        if *left == 0 {
            return Err(BudgetKind::Tokens);
        }
        *left -= 1;
        Ok(())
    }

    fn charge(&self, _role: &RoleIr, usage: Usage) {
        if let Ok(mut tokens) = self.tokens.lock() {
            *tokens += usage.total();
        }
    }
}

fn spec() -> CompiledSpec {
    compile_spec(SPEC)
}

/// Replays `calls` (cassette entries for step `execute`, item T-1) for role `role`.
async fn run(
    role: &str,
    calls: &str,
    admit: u64,
) -> (Result<CallOutcome, CallError>, Recorder, Duration) {
    let text = format!("version: 1\nrecorded: {{ spec_hash: x }}\ncalls:\n{calls}");
    let provider = match Cassette::from_yaml("cassette.yaml", &text) {
        Ok(cassette) => ReplayProvider::new(cassette),
        Err(error) => panic!("{error}"),
    };
    let spec = spec();
    let recorder = Recorder::new(admit);
    let call = RoleCall {
        spec: &spec,
        role,
        key: CallKey::new("execute").item("T-1"),
        inputs: vec![json!({"id": "T-1", "goal": "search"})],
        feedback: None,
    };
    let start = Instant::now();
    let outcome = call_role(call, &provider, &recorder).await;
    (outcome, recorder, start.elapsed())
}

fn output_at(outcome: &Result<CallOutcome, CallError>) -> Option<u64> {
    match outcome {
        Ok(CallOutcome::Output { next_attempt, .. }) => Some(*next_attempt),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn timeout_then_recovery() {
    let calls = format!(
        "  - {{ step: execute, item: T-1, attempt: 1, latency: 20m }}\n  - {{ step: execute, item: T-1, attempt: 2, latency: 1s, response: {OK}, usage: {{ input_tokens: 10, output_tokens: 5 }} }}\n"
    );
    let (outcome, recorder, elapsed) = run("executor", &calls, 10).await;
    assert_eq!(output_at(&outcome), Some(3));
    assert_eq!(
        recorder.summary(),
        [
            "1:model_call",
            "1:timeout@900000ms",
            "1:retry->2+2000ms",
            "2:model_call",
            "2:model_result"
        ]
    );
    assert_eq!(elapsed, Duration::from_secs(15 * 60 + 2 + 1));
    assert_eq!(
        recorder
            .tokens
            .lock()
            .map(|tokens| *tokens)
            .unwrap_or_default(),
        15
    );
}

#[tokio::test(start_paused = true)]
async fn timeouts_exhausting_retries() {
    let calls: String = (1..=4)
        .map(|attempt| {
            format!("  - {{ step: execute, item: T-1, attempt: {attempt}, latency: 20m }}\n")
        })
        .collect();
    let (outcome, recorder, elapsed) = run("executor", &calls, 10).await;
    assert_eq!(
        outcome,
        Ok(CallOutcome::Failed {
            reason: "4 attempt(s) failed; the last: timed out after 900000ms".into(),
            next_attempt: 5
        })
    );
    let retries: Vec<String> = recorder
        .summary()
        .into_iter()
        .filter(|event| event.contains("retry"))
        .collect();
    assert_eq!(
        retries,
        [
            "1:retry->2+2000ms",
            "2:retry->3+4000ms",
            "3:retry->4+8000ms"
        ]
    );
    assert_eq!(elapsed, Duration::from_secs(4 * 15 * 60 + 2 + 4 + 8));
}

#[tokio::test(start_paused = true)]
async fn transient_errors_then_success() {
    let calls = format!(
        "  - {{ step: execute, item: T-1, attempt: 1, error: {{ status: 429 }} }}\n  - {{ step: execute, item: T-1, attempt: 2, error: {{ status: 500, message: boom }} }}\n  - {{ step: execute, item: T-1, attempt: 3, response: {OK} }}\n"
    );
    let (outcome, recorder, elapsed) = run("executor", &calls, 10).await;
    assert_eq!(output_at(&outcome), Some(4));
    assert_eq!(
        recorder.summary(),
        [
            "1:model_call",
            "1:retry->2+2000ms",
            "2:model_call",
            "2:retry->3+4000ms",
            "3:model_call",
            "3:model_result"
        ]
    );
    assert_eq!(elapsed, Duration::from_secs(6));
}

#[tokio::test(start_paused = true)]
async fn permanent_errors_fail_at_once() {
    let calls =
        "  - { step: execute, item: T-1, attempt: 1, error: { status: 401, message: bad key } }\n";
    let (outcome, recorder, _) = run("executor", calls, 10).await;
    assert_eq!(
        outcome,
        Ok(CallOutcome::Failed {
            reason: "provider error 401: bad key".into(),
            next_attempt: 2
        })
    );
    assert_eq!(recorder.summary(), ["1:model_call"]);
}

#[tokio::test(start_paused = true)]
async fn malformed_output_then_a_valid_one() {
    let calls = r#"  - { step: execute, item: T-1, attempt: 1, raw: "not json {" }
  - { step: execute, item: T-1, attempt: 2, response: { task_id: T-1, status: done } }
  - { step: execute, item: T-1, attempt: 3, raw: "```json\n{\"task_id\": \"T-1\", \"status\": \"ok\", \"output\": \"x\"}\n```" }
"#;
    let (outcome, recorder, _) = run("executor", calls, 10).await;
    assert_eq!(output_at(&outcome), Some(4), "{outcome:?}");
    assert_eq!(
        recorder.violations(),
        [
            "$: the output is not valid JSON: expected ident at line 1 column 2".to_string(),
            "status: expected one of `ok`, `failed`, `partial`, got string \"done\"\noutput: missing required field `output` (string)".to_string(),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn tools_outside_the_whitelist_or_beyond_the_limit_are_denied() {
    let calls = format!(
        "  - {{ step: execute, item: T-1, response: {OK}, tool_calls: [\n      {{ tool: web_search, args: {{ text: a }}, result: {{ urls: [] }} }},\n      {{ tool: publish, args: {{ title: t, body: b }}, result: {{ url: u }} }},\n      {{ tool: web_search, args: {{ text: b }}, result: {{ hits: 3 }} }},\n      {{ tool: web_search, args: {{ text: c }}, result: {{ urls: [] }} }} ] }}\n"
    );
    let (outcome, recorder, _) = run("executor", &calls, 10).await;
    assert_eq!(
        recorder.summary(),
        [
            "1:model_call",
            "1:model_result",
            "1:tool_call(web_search)",
            "1:tool_denied(publish)",
            "1:tool_call(web_search)",
            "1:contract_violation(web_search)",
            "1:tool_call(web_search)",
        ]
    );
    match outcome {
        Ok(CallOutcome::Output { tool_calls, .. }) => {
            let args: Vec<Value> = tool_calls.into_iter().map(|call| call.args).collect();
            assert_eq!(args, [json!({"text": "a"}), json!({"text": "c"})]);
        }
        other => panic!("{other:?}"),
    }
    // The publisher may call `publish` once; a second call is beyond its limit.
    let calls = "  - { step: execute, item: T-1, response: { task_id: T-1, status: ok, output: p }, tool_calls: [\n      { tool: publish, args: { title: t, body: b }, result: { url: u } },\n      { tool: publish, args: { title: t, body: b }, result: { url: v } } ] }\n";
    let (_, recorder, _) = run("publisher", calls, 10).await;
    assert_eq!(
        recorder.summary(),
        [
            "1:model_call",
            "1:model_result",
            "1:tool_call(publish)",
            "1:tool_denied(publish)"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_unrecorded_call_is_an_error_and_a_spent_budget_makes_no_call() {
    let (outcome, _, _) = run("executor", "  - { step: other, response: {} }\n", 10).await;
    assert_eq!(
        outcome.map_err(|error| error.to_string()),
        Err(
            "the cassette has no call {step: execute, round: 1, item: T-1, attempt: 1}".to_string()
        )
    );
    let calls = "  - { step: execute, item: T-1, attempt: 1, error: { status: 503 } }\n";
    let (outcome, recorder, _) = run("executor", calls, 1).await;
    assert_eq!(
        outcome,
        Ok(CallOutcome::BudgetExhausted(BudgetKind::Tokens))
    );
    assert_eq!(recorder.summary(), ["1:model_call", "1:retry->2+2000ms"]);
}

#[test]
fn backoff_doubles() {
    assert_eq!(backoff(1000, 1), Duration::from_secs(1));
    assert_eq!(backoff(1000, 2), Duration::from_secs(2));
    assert_eq!(backoff(1000, 4), Duration::from_secs(8));
    assert_eq!(backoff(1000, 200), Duration::from_millis(u64::MAX));
}

/// Answers 429 with `Retry-After: 30s` the first time, then a valid output.
struct ThrottledOnce {
    calls: Mutex<u64>,
}

impl Provider for ThrottledOnce {
    fn complete(
        &self,
        _request: ModelRequest,
    ) -> crate::provider::BoxFuture<'_, Result<crate::provider::ModelResponse, ProviderError>> {
        let first = self
            .calls
            .lock()
            .map(|mut calls| {
                *calls += 1;
                *calls == 1
            })
            .unwrap_or(false);
        Box::pin(async move {
            if first {
                return Err(ProviderError::Throttled {
                    status: 429,
                    retry_after: Duration::from_secs(30),
                    message: "slow down".into(),
                });
            }
            Ok(crate::provider::ModelResponse {
                output: ModelOutput::Json(
                    json!({"task_id": "T-1", "status": "ok", "output": "done"}),
                ),
                usage: Usage::default(),
                tool_calls: Vec::new(),
                latency: Duration::ZERO,
            })
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_longer_than_the_backoff_is_waited() {
    let spec = spec();
    let recorder = Recorder::new(10);
    let provider = ThrottledOnce {
        calls: Mutex::new(0),
    };
    let call = RoleCall {
        spec: &spec,
        role: "executor",
        key: CallKey::new("execute").item("T-1"),
        inputs: vec![json!({"id": "T-1", "goal": "search"})],
        feedback: None,
    };
    let start = Instant::now();
    let outcome = call_role(call, &provider, &recorder).await;
    assert_eq!(output_at(&outcome), Some(3));
    assert!(
        recorder
            .summary()
            .contains(&"1:retry->2+30000ms".to_string()),
        "{:?}",
        recorder.summary()
    );
    assert_eq!(start.elapsed(), Duration::from_secs(30));
}
