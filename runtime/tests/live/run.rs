//! Whole runs of a spec against a wiremock OpenAI server: a recorded run replays to the same outcome and events, and a run killed mid-way resumes from its journal without calling the model again for any answered call.

use std::sync::Arc;
use std::time::Duration;

use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use charter_runtime::engine::effects::Provider;
use charter_runtime::engine::run::{DeliveryTarget, RunConfig, RunOutcome, run};
use charter_runtime::formats::scenario::{Cassette, Recorded, Scenario};
use charter_runtime::formats::trace::{MemorySink, TraceEvent};
use charter_runtime::world::providers::{ApiKey, OpenAiConfig, OpenAiProvider};
use charter_runtime::world::record::{Journal, Recording, write_recording};
use charter_runtime::world::replay::{ReplayReport, replay_cassette};
use charter_runtime::world::secrets::{Scrubber, ScrubbingSink};
use charter_runtime::world::tools::ToolBox;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{NoHumans, SECRET, assert_no_secret};

fn review_loop() -> CompiledSpec {
    let path = format!(
        "{}/tests/fixtures/review_loop.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let compilation = compile("review_loop.charter", &text, &MemoryLoader::default());
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => spec,
        _ => panic!(
            "review_loop does not compile: {:?}",
            compilation.diagnostics
        ),
    }
}

fn input() -> Value {
    json!({"goal": "rust"})
}

fn chat(content: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10}
    }))
}

/// Answers for `role` (told apart by the schema name the provider sends).
fn for_role(role: &str) -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(body_partial_json(
        json!({"response_format": {"json_schema": {"name": role}}}),
    ))
}

/// The writer fails once (a 500 whose body echoes the key; retried after its 1 s
/// backoff), then every role answers;
/// the finalizer's first answer takes `finalizer_delay`.
async fn mount_run(server: &MockServer, finalizer_delay: Duration) {
    for_role("writer")
        .respond_with(
            ResponseTemplate::new(500).set_body_string(format!("upstream hiccup for {SECRET}")),
        )
        .up_to_n_times(1)
        .mount(server)
        .await;
    for_role("writer")
        .respond_with(chat(json!({"title": "Rust", "body": "Rust is fast."})))
        .mount(server)
        .await;
    for_role("reviewer")
        .respond_with(chat(json!({"relevance": 9, "verdict": "PASS"})))
        .mount(server)
        .await;
    for_role("finalizer")
        .respond_with(
            chat(json!({"candidate_id": "c1", "summary": "one post about Rust"}))
                .set_delay(finalizer_delay),
        )
        .up_to_n_times(1)
        .mount(server)
        .await;
    for_role("finalizer")
        .respond_with(chat(
            json!({"candidate_id": "c1", "summary": "one post about Rust"}),
        ))
        .mount(server)
        .await;
}

fn live_provider(server: &MockServer) -> OpenAiProvider {
    OpenAiProvider::new(
        OpenAiConfig::new(format!("{}/v1", server.uri()), Some(ApiKey::new(SECRET))),
        Arc::new(ToolBox::empty()),
    )
    .unwrap_or_else(|error| panic!("{error}"))
}

/// Requests the mock got for `role`.
async fn requests_for(server: &MockServer, role: &str) -> usize {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|request| {
            serde_json::from_slice::<Value>(&request.body)
                .ok()
                .is_some_and(|body| body["response_format"]["json_schema"]["name"] == role)
        })
        .count()
}

/// The events as JSON without their clock readings (a live run's include the real time
/// spent between calls, a replay's only the recorded latencies).
fn timeless(events: &[TraceEvent]) -> Vec<Value> {
    events
        .iter()
        .map(|event| {
            let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
            if let Value::Object(object) = &mut value {
                object.remove("t_ms");
            }
            value
        })
        .collect()
}

fn kinds(events: &[TraceEvent]) -> Vec<String> {
    timeless(events)
        .iter()
        .map(|event| {
            format!(
                "{} {}",
                event["kind"].as_str().unwrap_or("?"),
                event["step"].as_str().unwrap_or("")
            )
            .trim()
            .to_string()
        })
        .collect()
}

async fn live_run(
    spec: &CompiledSpec,
    provider: Arc<dyn Provider>,
) -> (RunOutcome, Vec<TraceEvent>) {
    let mut sink = ScrubbingSink::new(MemorySink::new(), Scrubber::new([SECRET.to_string()]));
    let outcome = run(
        spec,
        input(),
        charter_runtime::engine::effects::Effects::new(provider, &NoHumans, &mut sink)
            .with_files(&charter_runtime::world::files::LocalFiles),
        &RunConfig::default(),
    )
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    (outcome, sink.into_inner().events().to_vec())
}

/// Replays `cassette` (on its own paused runtime, so on a thread of its own).
fn replay(spec: &CompiledSpec, cassette: Cassette) -> (ReplayReport, Vec<TraceEvent>) {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut sink = MemorySink::new();
                let report =
                    replay_cassette(spec, input(), cassette, DeliveryTarget::Memory, &mut sink)
                        .unwrap_or_else(|error| panic!("{error}"));
                (report, sink.events().to_vec())
            })
            .join()
            .unwrap_or_else(|_| panic!("the replay panicked"))
    })
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-live-run-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

#[tokio::test]
async fn a_recorded_run_replays_to_the_same_outcome_and_events() {
    let server = MockServer::start().await;
    mount_run(&server, Duration::ZERO).await;
    let spec = review_loop();
    let recording = Recording::new([SECRET.to_string()]);
    let provider = Arc::new(recording.provider(live_provider(&server)));
    let (outcome, live_events) = live_run(&spec, provider).await;
    assert_eq!(outcome.termination().to_string(), "completed{gate_passed}");
    assert_eq!(requests_for(&server, "writer").await, 2);

    let dir = temp_dir("record");
    let scenario = Scenario {
        spec: "runtime/tests/fixtures/review_loop.charter".into(),
        description: Some("recorded against a mock server".into()),
        input: input(),
        turns: None,
        expect: None,
    };
    write_recording(
        &dir,
        &scenario,
        &recording.cassette(Recorded::from_spec(&spec)),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        assert_no_secret(&entry.path().display().to_string(), &text);
    }
    assert_no_secret(
        "the trace",
        &serde_json::to_string(&timeless(&live_events)).unwrap_or_default(),
    );
    let cassette =
        Cassette::read(&dir.join("cassette.yaml")).unwrap_or_else(|error| panic!("{error}"));
    let _ = std::fs::remove_dir_all(&dir);

    let (report, replayed) = replay(&spec, cassette);
    assert_eq!(report.outcome.termination(), outcome.termination());
    assert!(report.unused_calls.is_empty(), "{:?}", report.unused_calls);
    assert_eq!(kinds(&replayed), kinds(&live_events));
    assert_eq!(timeless(&replayed), timeless(&live_events));
}

#[tokio::test]
async fn a_killed_run_resumes_without_asking_the_model_again() {
    let server = MockServer::start().await;
    // The finalizer's first answer is slow: the run is killed while it waits for it.
    mount_run(&server, Duration::from_secs(5)).await;
    let spec = review_loop();
    let dir = temp_dir("resume");
    let journal_path = dir.join("calls.jsonl");

    {
        let (journal, entries) =
            Journal::open(&journal_path).unwrap_or_else(|error| panic!("{error}"));
        let recording = Recording::journaled([SECRET.to_string()], journal, entries);
        let provider: Arc<dyn Provider> = Arc::new(recording.provider(live_provider(&server)));
        let mut sink = MemorySink::new();
        let config = RunConfig::default();
        let killed = run(
            &spec,
            input(),
            charter_runtime::engine::effects::Effects::new(provider, &NoHumans, &mut sink)
                .with_files(&charter_runtime::world::files::LocalFiles),
            &config,
        );
        tokio::pin!(killed);
        tokio::select! {
            ended = &mut killed => panic!("the run ended before it was killed: {ended:?}"),
            () = tokio::time::sleep(Duration::from_millis(2500)) => {
                // Like `kill -9`: what was in flight is not journaled.
                recording.cancel();
            }
        }
    }
    assert_eq!(requests_for(&server, "writer").await, 2);
    assert_eq!(requests_for(&server, "reviewer").await, 1);
    assert_eq!(
        requests_for(&server, "finalizer").await,
        1,
        "in flight when killed"
    );

    let (journal, entries) = Journal::open(&journal_path).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        entries.len(),
        3,
        "the writer's two calls and the reviewer's"
    );
    let recording = Recording::journaled([SECRET.to_string()], journal, entries);
    let provider = Arc::new(recording.provider(live_provider(&server)));
    let (outcome, resumed_events) = live_run(&spec, provider).await;
    assert_eq!(outcome.termination().to_string(), "completed{gate_passed}");
    assert_eq!(recording.replayed(), 3);
    // No call that had an answer was made again; the one in flight was.
    assert_eq!(requests_for(&server, "writer").await, 2);
    assert_eq!(requests_for(&server, "reviewer").await, 1);
    assert_eq!(requests_for(&server, "finalizer").await, 2);

    // It ends as an uninterrupted run does: the same events as a replay of its recording.
    let (report, replayed) = replay(&spec, recording.cassette(Recorded::from_spec(&spec)));
    assert_eq!(report.outcome.termination(), outcome.termination());
    assert_eq!(kinds(&replayed), kinds(&resumed_events));
    let _ = std::fs::remove_dir_all(&dir);
}
