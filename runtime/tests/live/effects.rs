//! Tool calls of failed attempts (DESIGN §4, issue 10 point 3): an attempt that ran an `external` tool and then failed is traced and recorded with its tool calls, and is not retried unless its role says `retry_after_effects: true`; the recording replays to the same events.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::NoHumans;
use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use charter_runtime::engine::run::{DeliveryTarget, RunConfig, run};
use charter_runtime::formats::scenario::Recorded;
use charter_runtime::formats::trace::{EventKind, MemorySink, Outcome, TraceEvent};
use charter_runtime::world::providers::{OpenAiConfig, OpenAiProvider};
use charter_runtime::world::record::Recording;
use charter_runtime::world::replay::replay_cassette;
use charter_runtime::world::tools::{FnTool, ToolBox};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn spec(retry_after_effects: bool) -> CompiledSpec {
    let text = format!(
        r#"spec effects version "1"
contract Request {{ goal: string }}
contract Post {{ text: string }}
contract Receipt {{ url: string }}
tool publish {{ input: Post  output: Receipt  effect: external }}
role poster {{
  model: "openai:local"
  prompt: """Publish {{{{ request.goal }}}}."""
  input: Request
  output: Receipt
  tools: [publish]
  max_tool_calls: 1
  retry: 1 backoff 10ms
  retry_after_effects: {retry_after_effects}
}}
flow {{ post = poster(request) -> done }}
"#
    );
    let compilation = compile("effects.charter", &text, &MemoryLoader::default());
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => spec,
        _ => panic!("{:?}", compilation.diagnostics),
    }
}

/// Every attempt: the model calls `publish`, then the server fails with a 500 on the
/// turn that would give the answer (the first time only, when `fail_once`).
async fn server(fail_once: bool) -> MockServer {
    let server = MockServer::start().await;
    let failures = Arc::new(AtomicUsize::new(0));
    Mock::given(method("POST"))
        .respond_with(move |request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            let answered = body["messages"]
                .as_array()
                .is_some_and(|messages| messages.iter().any(|m| m["role"] == "tool"));
            if !answered {
                return ResponseTemplate::new(200).set_body_json(json!({"choices": [{"index": 0,
                    "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                    "type": "function", "function": {"name": "publish", "arguments": "{\"text\": \"hi\"}"}}]}}]}));
            }
            if !fail_once || failures.fetch_add(1, Ordering::SeqCst) == 0 {
                return ResponseTemplate::new(500).set_body_string("upstream hiccup");
            }
            ResponseTemplate::new(200).set_body_json(json!({"choices": [{"index": 0,
                "message": {"role": "assistant", "content": "{\"url\": \"https://posts.example/1\"}"}}]}))
        })
        .mount(&server)
        .await;
    server
}

/// Runs `spec` live against `server`, recording; returns the events, the outcome and the
/// recording, and how often `publish` ran.
async fn run_live(
    spec: &CompiledSpec,
    server: &MockServer,
) -> (
    Vec<TraceEvent>,
    charter_runtime::engine::run::RunOutcome,
    Recording,
    usize,
) {
    let published = Arc::new(AtomicUsize::new(0));
    let counter = published.clone();
    let tools = ToolBox::for_spec(spec)
        .with(
            "publish",
            FnTool::new(move |_args: Value| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { Ok(json!({"url": "https://posts.example/1"})) }
            }),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    let provider = OpenAiProvider::new(
        OpenAiConfig::new(format!("{}/v1", server.uri()), None),
        Arc::new(tools),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let recording = Recording::new(Vec::new());
    let mut sink = MemorySink::default();
    let config = RunConfig {
        delivery: DeliveryTarget::Memory,
        ..RunConfig::default()
    };
    let outcome = run(
        spec,
        json!({"goal": "hi"}),
        charter_runtime::engine::effects::Effects::new(
            Arc::new(recording.provider(provider)),
            &NoHumans,
            &mut sink,
        )
        .with_files(&charter_runtime::world::files::LocalFiles),
        &config,
    )
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    (
        sink.events().to_vec(),
        outcome,
        recording,
        published.load(Ordering::SeqCst),
    )
}

fn tool_calls(events: &[TraceEvent]) -> Vec<Option<u64>> {
    events
        .iter()
        .filter(|event| matches!(event.kind, EventKind::ToolCall { .. }))
        .map(|event| event.attempt)
        .collect()
}

#[tokio::test]
async fn an_attempt_that_published_and_then_failed_is_traced_and_not_retried() {
    let spec = spec(false);
    let server = server(false).await;
    let (events, outcome, recording, published) = run_live(&spec, &server).await;
    assert_eq!(
        published, 1,
        "the external tool ran once and was not repeated"
    );
    assert_eq!(outcome.outcome, Outcome::Failed);
    let message = outcome.message.clone().unwrap_or_default();
    assert!(
        message.contains("`publish`") && message.contains("retry_after_effects"),
        "{message}"
    );
    assert_eq!(
        tool_calls(&events),
        [Some(1)],
        "the failed attempt's tool call is traced"
    );
    let cassette = recording.cassette(Recorded::from_spec(&spec));
    assert_eq!(cassette.calls.len(), 1);
    assert_eq!(
        cassette.calls[0].error.as_ref().map(|error| error.status),
        Some(Some(500))
    );
    assert_eq!(cassette.calls[0].tool_calls.len(), 1);
    assert_eq!(cassette.calls[0].tool_calls[0].tool, "publish");

    // The recording replays to the same events (times aside: the replay's are virtual).
    let mut replayed = MemorySink::default();
    let report = tokio::task::spawn_blocking(move || {
        let spec = spec;
        let report = replay_cassette(
            &spec,
            json!({"goal": "hi"}),
            cassette,
            DeliveryTarget::Memory,
            &mut replayed,
        );
        (report, replayed.events().to_vec())
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    let (report, replayed) = report;
    let report = report.unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(report.outcome.outcome, Outcome::Failed);
    let kinds = |events: &[TraceEvent]| -> Vec<String> {
        events
            .iter()
            .map(|event| {
                let mut value = serde_json::to_value(event).unwrap_or_default();
                if let Some(object) = value.as_object_mut() {
                    object.remove("t_ms");
                    object.remove("latency_ms");
                }
                value.to_string()
            })
            .collect()
    };
    assert_eq!(tool_calls(&replayed), [Some(1)]);
    assert_eq!(kinds(&replayed), kinds(&events));
}

#[tokio::test]
async fn retry_after_effects_allows_the_retry_and_both_runs_are_traced() {
    let spec = spec(true);
    let server = server(true).await;
    let (events, outcome, recording, published) = run_live(&spec, &server).await;
    assert_eq!(outcome.outcome, Outcome::Completed, "{:?}", outcome.message);
    assert_eq!(published, 2);
    assert_eq!(tool_calls(&events), [Some(1), Some(2)]);
    let cassette = recording.cassette(Recorded::from_spec(&spec));
    let recorded: Vec<usize> = cassette
        .calls
        .iter()
        .map(|call| call.tool_calls.len())
        .collect();
    assert_eq!(recorded, [1, 1]);
}

#[tokio::test]
async fn a_refused_output_mode_is_a_provider_note_in_the_trace_and_the_cassette() {
    let spec = spec(false);
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            if body["response_format"]["type"] == "json_schema" {
                return ResponseTemplate::new(500).set_body_json(json!({"detail": [{
                    "loc": ["body", "response_format", "type"],
                    "msg": "Input should be 'text' or 'json_object'"}]}));
            }
            ResponseTemplate::new(200).set_body_json(json!({"choices": [{"index": 0,
                "message": {"role": "assistant", "content": "{\"url\": \"https://posts.example/1\"}"}}]}))
        })
        .mount(&server)
        .await;
    let (events, outcome, recording, published) = run_live(&spec, &server).await;
    assert_eq!(outcome.outcome, Outcome::Completed, "{:?}", outcome.message);
    assert_eq!(published, 0);
    let notes: Vec<&TraceEvent> = events
        .iter()
        .filter(|event| matches!(event.kind, EventKind::ProviderNote { .. }))
        .collect();
    assert_eq!(notes.len(), 1, "{events:?}");
    let cassette = recording.cassette(Recorded::from_spec(&spec));
    assert_eq!(cassette.calls[0].notes.len(), 1);
    assert_eq!(
        cassette
            .recorded
            .as_ref()
            .and_then(|recorded| recorded.models.get("default"))
            .map(|model| model.model.as_str()),
        None,
        "a literal model is no alias"
    );
}
