//! Tests of the replay provider on tokio's paused clock: lookup by key, latency, errors, unused calls, humans.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::*;
use crate::testing::EXAMPLE_CASSETTE;

fn replay() -> ReplayProvider {
    match Cassette::from_yaml("cassette.yaml", EXAMPLE_CASSETTE) {
        Ok(cassette) => ReplayProvider::new(cassette),
        Err(error) => panic!("{error}"),
    }
}

fn request(key: CallKey) -> ModelRequest {
    ModelRequest {
        key,
        role: "executor".into(),
        model: "openai:m".into(),
        prompt: "do it".into(),
        chat: None,
        output_schema: std::sync::Arc::new(json!({})),
        tools: vec!["web_search".into()],
        max_tool_calls: None,
        previous_error: None,
        settings: Default::default(),
        log: Default::default(),
    }
}

fn execute(attempt: u64) -> CallKey {
    CallKey::new("execute").item("T-002").attempt(attempt)
}

#[tokio::test(start_paused = true)]
async fn responses_come_after_their_recorded_latency() {
    let provider = replay();
    let start = Instant::now();
    let response = provider.complete(request(CallKey::new("plan"))).await;
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(
        response,
        Ok(ModelResponse {
            output: ModelOutput::Json(json!({"goal": "g", "tasks": []})),
            usage: Usage {
                input_tokens: 812,
                output_tokens: 240
            },
            tool_calls: vec![],
            latency: Duration::from_secs(2),
        })
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_latency_times_out_in_virtual_time() {
    let provider = replay();
    let start = Instant::now();
    let wall = std::time::Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(15 * 60),
        provider.complete(request(execute(1))),
    )
    .await;
    assert!(
        outcome.is_err(),
        "the 15m timeout fires before the 20m latency"
    );
    assert_eq!(start.elapsed(), Duration::from_secs(15 * 60));
    assert!(
        wall.elapsed() < Duration::from_secs(5),
        "virtual time costs no wall time"
    );
    // Without a timeout, the recorded call without an answer ends as a timeout after 20m.
    let start = Instant::now();
    let outcome = provider.complete(request(execute(1))).await;
    assert_eq!(
        outcome,
        Err(ProviderError::TimedOut {
            after: Duration::from_secs(20 * 60)
        })
    );
    assert_eq!(start.elapsed(), Duration::from_secs(20 * 60));
}

#[tokio::test(start_paused = true)]
async fn errors_raw_output_and_tool_calls_are_played_back() {
    let provider = replay();
    let error = provider.complete(request(execute(2))).await;
    assert_eq!(
        error,
        Err(ProviderError::Transient {
            status: Some(429),
            message: "recorded error".into()
        })
    );
    assert!(error.is_err_and(|error| error.is_transient()));
    let raw = provider
        .complete(request(execute(3)))
        .await
        .map(|response| response.output);
    assert_eq!(raw, Ok(ModelOutput::Text("not json {".into())));
    let with_tools = provider.complete(request(execute(4))).await;
    let tool_calls = with_tools
        .map(|response| response.tool_calls)
        .unwrap_or_default();
    assert_eq!(
        tool_calls,
        vec![ToolCall {
            tool: "web_search".into(),
            args: json!({"text": "q"}),
            result: json!({"urls": ["https://a.example"]}),
            latency: None,
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn permanent_errors_are_not_transient() {
    let text = "version: 1\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan, error: { status: 401, message: bad key } }\n  - { step: plan, attempt: 2, error: { status: 503 } }\n";
    let provider = match Cassette::from_yaml("c.yaml", text) {
        Ok(cassette) => ReplayProvider::new(cassette),
        Err(error) => panic!("{error}"),
    };
    let first = provider.complete(request(CallKey::new("plan"))).await;
    assert_eq!(
        first,
        Err(ProviderError::Permanent {
            status: Some(401),
            message: "bad key".into()
        })
    );
    let second = provider
        .complete(request(CallKey::new("plan").attempt(2)))
        .await;
    assert!(second.is_err_and(|error| error.is_transient()));
}

#[tokio::test(start_paused = true)]
async fn calls_are_looked_up_by_key_in_any_order_and_unknown_keys_are_errors() {
    let provider = replay();
    let start = Instant::now();
    let missing = provider
        .complete(request(CallKey::new("plan").round(2)))
        .await;
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "an unrecorded call fails at once"
    );
    let error = missing.err();
    assert!(error.as_ref().is_some_and(ProviderError::is_fatal));
    assert_eq!(
        error.map(|error| error.to_string()),
        Some(
            "the cassette has no call {step: plan, round: 2, attempt: 1}; the closest unused \
             recording is {step: plan, round: 1, attempt: 1}"
                .to_string()
        )
    );
    // The judge's call is keyed by its role too.
    let judge = CallKey::new("execute").round(2).item("T-001").role("judge");
    assert!(provider.complete(request(judge.clone())).await.is_ok());
    let without_role = CallKey::new("execute").round(2).item("T-001");
    assert!(provider.complete(request(without_role)).await.is_err());
    // Concurrent calls in reverse order get their own answers.
    let (late, early) = tokio::join!(
        provider.complete(request(execute(4))),
        provider.complete(request(CallKey::new("plan"))),
    );
    assert!(
        matches!(late.map(|r| r.output), Ok(ModelOutput::Json(value)) if value["task_id"] == "T-002")
    );
    assert!(
        matches!(early.map(|r| r.output), Ok(ModelOutput::Json(value)) if value["goal"] == "g")
    );
}

#[tokio::test(start_paused = true)]
async fn unused_calls_are_reported() {
    let provider = replay();
    assert_eq!(provider.unused().len(), 6);
    let _ = provider.complete(request(CallKey::new("plan"))).await;
    // A call whose future is dropped (by a timeout) still counts as made.
    let _ = tokio::time::timeout(
        Duration::from_millis(1),
        provider.complete(request(execute(1))),
    )
    .await;
    let unused: Vec<String> = provider.unused().iter().map(CallKey::to_string).collect();
    assert_eq!(
        unused,
        [
            "{step: execute, round: 1, item: T-002, attempt: 2}",
            "{step: execute, round: 1, item: T-002, attempt: 3}",
            "{step: execute, round: 1, item: T-002, attempt: 4}",
            "{step: execute, round: 2, item: T-001, attempt: 1, role: judge}",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn human_answers_are_looked_up_by_step_and_round() {
    let provider = replay();
    assert_eq!(
        provider.unused_humans(),
        vec![("confirm".to_string(), 1, 1)]
    );
    let answer = provider
        .ask(HumanRequest {
            step: "confirm".into(),
            round: 1,
            attempt: 1,
            question: "Approve?".into(),
        })
        .await;
    assert_eq!(answer, Ok(json!({"approved": true})));
    assert!(provider.unused_humans().is_empty());
    let missing: Result<Value, _> = provider.human("confirm", 2, 1);
    assert_eq!(
        missing.map_err(|error| error.to_string()),
        Err("the cassette has no human answer for step `confirm` in round 2".to_string())
    );
    assert_eq!(provider.faults().len(), 1);
    assert_eq!(
        provider
            .recorded()
            .map(|recorded| recorded.spec_hash.as_str()),
        Some("sha256:abc")
    );
}

#[tokio::test(start_paused = true)]
async fn the_provider_works_behind_a_trait_object() {
    let provider: std::sync::Arc<dyn Provider> = std::sync::Arc::new(replay());
    let response = provider.complete(request(CallKey::new("plan"))).await;
    assert!(response.is_ok());
}

/// A replay of one `plan` call that expects its prompt to hold `found` and not `stale`.
fn expecting_replay() -> ReplayProvider {
    let cassette = r#"
version: 1
recorded: { spec_hash: "sha256:x" }
calls:
  - step: plan
    expect_prompt: { contains: ["the finding", "the violation"], not_contains: ["stale note"] }
    response: { goal: "g", tasks: [] }
"#;
    match Cassette::from_yaml("cassette.yaml", cassette) {
        Ok(cassette) => ReplayProvider::new(cassette),
        Err(error) => panic!("{error}"),
    }
}

fn plan_request(prompt: &str, previous_error: Option<&str>) -> ModelRequest {
    ModelRequest {
        prompt: prompt.into(),
        chat: None,
        previous_error: previous_error.map(str::to_string),
        settings: Default::default(),
        log: Default::default(),
        ..request(CallKey::new("plan"))
    }
}

#[tokio::test(start_paused = true)]
async fn a_prompt_that_meets_expect_prompt_is_answered() {
    // The violation is told to the model in a second message; it counts as seen.
    let outcome = expecting_replay()
        .complete(plan_request(
            "fix the finding",
            Some("tasks: the violation"),
        ))
        .await;
    assert!(
        matches!(
            outcome,
            Ok(ModelResponse {
                output: ModelOutput::Json(_),
                ..
            })
        ),
        "{outcome:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_prompt_that_misses_expect_prompt_stops_the_replay_naming_key_and_texts() {
    let provider = expecting_replay();
    let outcome = provider
        .complete(plan_request("fix it; stale note: ignore", None))
        .await;
    let error = outcome.err();
    assert_eq!(
        error,
        Some(ProviderError::PromptExpectation {
            key: CallKey::new("plan"),
            unmet: vec![
                r#"does not contain "the finding""#.to_string(),
                r#"does not contain "the violation""#.to_string(),
                r#"contains "stale note", which `not_contains` forbids"#.to_string(),
            ],
        })
    );
    let error = error.unwrap_or_else(|| unreachable!());
    assert!(error.is_fatal());
    assert_eq!(
        error.to_string(),
        r#"the prompt of call {step: plan, round: 1, attempt: 1} does not contain "the finding"; does not contain "the violation"; contains "stale note", which `not_contains` forbids"#
    );
    // The call was looked up: it is not reported as unused as well.
    assert_eq!(provider.unused(), Vec::<CallKey>::new());
}

#[test]
fn an_empty_expect_prompt_text_is_a_loading_error() {
    let cassette = r#"
version: 1
recorded: { spec_hash: "sha256:x" }
calls:
  - step: plan
    expect_prompt: { contains: [""] }
"#;
    let error = Cassette::from_yaml("cassette.yaml", cassette).map(|_| ());
    let message = error
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(
        message.contains("cassette.yaml:5") && message.contains("`expect_prompt` text is empty"),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn calls_given_out_of_order_are_found_and_of_two_with_one_key_the_last_wins() {
    let mut cassette = match Cassette::from_yaml("cassette.yaml", EXAMPLE_CASSETTE) {
        Ok(cassette) => cassette,
        Err(error) => panic!("{error}"),
    };
    cassette.calls.reverse();
    let Some(mut again) = cassette
        .calls
        .iter()
        .find(|call| call.step == "plan")
        .cloned()
    else {
        panic!("the example cassette has a plan call");
    };
    again.response = Some(json!({"goal": "the later one", "tasks": []}));
    cassette.calls.push(again);
    let provider = ReplayProvider::new(cassette);
    assert_eq!(provider.unused().len(), 6);
    let sorted = provider.unused();
    assert!(
        sorted.windows(2).all(|pair| pair[0] < pair[1]),
        "{sorted:?}"
    );
    let answer = provider.complete(request(CallKey::new("plan"))).await;
    assert_eq!(
        answer.map(|response| response.output),
        Ok(ModelOutput::Json(
            json!({"goal": "the later one", "tasks": []})
        ))
    );
    let answer = provider.complete(request(execute(4))).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(provider.unused().len(), 4);
}
