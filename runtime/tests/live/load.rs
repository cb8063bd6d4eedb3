//! 200 concurrent live runs of one spec against one wiremock server: every run completes, every trace is whole, every call is made exactly once; throughput and peak memory are printed.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::NoHumans;
use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use charter_runtime::engine::run::{RunConfig, run};
use charter_runtime::formats::trace::{EventKind, MemorySink};
use charter_runtime::world::providers::{ApiKey, OpenAiConfig, OpenAiProvider};
use charter_runtime::world::tools::ToolBox;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

const RUNS: usize = 200;

fn chat(content: Value) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10}
        }))
        // A little latency, so that the runs overlap as live runs do.
        .set_delay(Duration::from_millis(20))
}

fn spec() -> CompiledSpec {
    let path = format!(
        "{}/tests/fixtures/review_loop.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let compilation = compile("review_loop.charter", &text, &MemoryLoader::default());
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => spec,
        _ => panic!("review_loop does not compile"),
    }
}

/// The peak resident set of this process, from `/proc` (Linux), in MiB.
fn peak_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

#[tokio::test]
async fn two_hundred_concurrent_live_runs_complete_with_whole_traces() {
    let server = MockServer::start().await;
    for (role, answer) in [
        ("writer", json!({"title": "Rust", "body": "Rust is fast."})),
        ("reviewer", json!({"relevance": 9, "verdict": "PASS"})),
        (
            "finalizer",
            json!({"candidate_id": "c1", "summary": "one post"}),
        ),
    ] {
        Mock::given(method("POST"))
            .and(body_partial_json(
                json!({"response_format": {"json_schema": {"name": role}}}),
            ))
            .respond_with(chat(answer))
            .mount(&server)
            .await;
    }
    let spec = Rc::new(spec());
    let provider = Arc::new(
        OpenAiProvider::new(
            OpenAiConfig::new(format!("{}/v1", server.uri()), Some(ApiKey::new("sk-load"))),
            Arc::new(ToolBox::empty()),
        )
        .unwrap_or_else(|error| panic!("{error}")),
    );
    let started = Instant::now();
    let local = tokio::task::LocalSet::new();
    let mut handles = Vec::new();
    for index in 0..RUNS {
        let spec = spec.clone();
        let provider = provider.clone();
        handles.push(local.spawn_local(async move {
            let mut sink = MemorySink::new();
            let outcome = run(
                &spec,
                json!({"goal": format!("topic {index}")}),
                charter_runtime::engine::effects::Effects::new(provider, &NoHumans, &mut sink),
                &RunConfig::default(),
            )
            .await;
            (outcome, sink)
        }));
    }
    let results = local
        .run_until(async move {
            let mut results = Vec::new();
            for handle in handles {
                results.push(handle.await);
            }
            results
        })
        .await;
    let elapsed = started.elapsed();
    let mut completed = 0;
    for result in results {
        let (outcome, sink) = result.unwrap_or_else(|error| panic!("a run panicked: {error}"));
        let outcome = outcome.unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(outcome.termination().to_string(), "completed{gate_passed}");
        let events = sink.events();
        assert!(matches!(
            events.first().map(|event| &event.kind),
            Some(EventKind::RunStarted { .. })
        ));
        assert!(matches!(
            events.last().map(|event| &event.kind),
            Some(EventKind::RunFinished { .. })
        ));
        assert!(
            events
                .iter()
                .enumerate()
                .all(|(index, event)| event.seq == index as u64),
            "a trace with a gap"
        );
        completed += 1;
    }
    assert_eq!(completed, RUNS);
    let requests = server.received_requests().await.unwrap_or_default().len();
    assert_eq!(requests, RUNS * 3, "each call made exactly once");
    eprintln!(
        "load: {RUNS} concurrent live runs ({requests} HTTP calls) in {:.2} s: {:.0} runs/s, peak memory {} (cargo test -p charter-runtime --test live load -- --nocapture)",
        elapsed.as_secs_f64(),
        RUNS as f64 / elapsed.as_secs_f64(),
        peak_memory_mib().map_or("unknown".to_string(), |mib| format!("{mib:.0} MiB"))
    );
}
