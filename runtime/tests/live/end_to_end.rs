//! A role call through the scheduler's call mechanics (`call_role`) against a wiremock OpenAI server, recorded, written to disk and replayed: the same events, and no key in any file.

use std::sync::Mutex;

use charter_runtime::call::{CallObserver, CallOutcome, RoleCall, call_role};
use charter_runtime::compiler::graph::RoleIr;
use charter_runtime::provider::{CallKey, Provider, Usage};
use charter_runtime::providers::{ApiKey, OpenAiConfig, OpenAiProvider};
use charter_runtime::record::{Recording, write_recording};
use charter_runtime::replay::ReplayProvider;
use charter_runtime::scenario::{Cassette, Recorded, Scenario};
use charter_runtime::trace::{BudgetKind, EventKind};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{SECRET, assert_no_secret, spec, tool_box};

/// Keeps every event as JSON, with its attempt.
#[derive(Default)]
struct Events(Mutex<Vec<Value>>);

impl Events {
    fn all(&self) -> Vec<Value> {
        self.0
            .lock()
            .map(|events| events.clone())
            .unwrap_or_default()
    }

    fn kinds(&self) -> Vec<String> {
        self.all()
            .iter()
            .map(|event| {
                let kind = event["kind"].as_str().unwrap_or("?");
                match event["tool"].as_str() {
                    Some(tool) => format!("{}:{kind}({tool})", event["attempt"]),
                    None => format!("{}:{kind}", event["attempt"]),
                }
            })
            .collect()
    }
}

impl CallObserver for Events {
    fn event(&self, attempt: u64, kind: EventKind) {
        let mut value = serde_json::to_value(&kind).unwrap_or_default();
        value["attempt"] = json!(attempt);
        if let Ok(mut events) = self.0.lock() {
            events.push(value);
        }
    }

    fn admit(&self) -> Result<(), BudgetKind> {
        Ok(())
    }

    fn charge(&self, _role: &RoleIr, _usage: Usage) {}
}

fn chat(message: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4}
    }))
}

async fn call(provider: &dyn Provider, events: &Events) -> CallOutcome {
    let spec = spec();
    let call = RoleCall {
        spec: &spec,
        role: "writer",
        key: CallKey::new("write"),
        inputs: vec![json!({"goal": "rust"})],
        feedback: None,
    };
    call_role(call, provider, events)
        .await
        .unwrap_or_else(|error| panic!("{error}"))
}

#[tokio::test]
async fn a_live_call_is_recorded_and_replays_to_the_same_events() {
    let server = MockServer::start().await;
    let once = |response: ResponseTemplate| {
        Mock::given(method("POST"))
            .respond_with(response)
            .up_to_n_times(1)
    };
    once(
        ResponseTemplate::new(429)
            .insert_header("retry-after", "0")
            .set_body_json(json!({"error": {"message": "Rate limit reached"}})),
    )
    .mount(&server)
    .await;
    once(chat(json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"text\": \"rust\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "publish", "arguments": "{\"text\": \"x\"}"}}
        ]
    })))
    .mount(&server)
    .await;
    // The model quotes the key it somehow saw: the recording must not keep it.
    once(chat(json!({
        "role": "assistant",
        "content": format!("{{\"text\": \"Rust, said {SECRET}\"}}")
    })))
    .mount(&server)
    .await;

    let (tools, counts) = tool_box();
    let live = OpenAiProvider::new(
        OpenAiConfig::new(format!("{}/v1", server.uri()), Some(ApiKey::new(SECRET))),
        tools,
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let recording = Recording::new([SECRET.to_string()]);
    let recorded_provider = recording.provider(live);
    let live_events = Events::default();
    let outcome = call(&recorded_provider, &live_events).await;
    let CallOutcome::Output {
        value, tool_calls, ..
    } = &outcome
    else {
        panic!("expected an output, got {outcome:?}");
    };
    assert_eq!(
        value,
        &json!({"text": format!("Rust, said {SECRET}"), "sources": []})
    );
    assert_eq!(tool_calls.len(), 1, "only the permitted call is kept");
    assert_eq!(counts.search(), 1);
    assert_eq!(counts.publish(), 0);
    assert_eq!(
        live_events.kinds(),
        [
            "1:model_call",
            "1:retry",
            "2:model_call",
            "2:model_result",
            "2:tool_call(search)",
            "2:tool_denied(publish)"
        ]
    );

    // Written to disk, read back, replayed.
    let dir = std::env::temp_dir().join(format!("charter-live-record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let scenario = Scenario {
        spec: "runtime/tests/live/support.rs".into(),
        description: Some("recorded against wiremock".into()),
        input: json!({"goal": "rust"}),
        expect: None,
    };
    let cassette = recording.cassette(Recorded::from_spec(&spec()));
    write_recording(&dir, &scenario, &cassette).unwrap_or_else(|error| panic!("{error}"));
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        assert!(!text.is_empty());
        assert_no_secret(&entry.path().display().to_string(), &text);
    }
    let cassette =
        Cassette::read(&dir.join("cassette.yaml")).unwrap_or_else(|error| panic!("{error}"));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cassette.calls.len(), 2);
    let replay = ReplayProvider::new(cassette);
    let replay_events = Events::default();
    let replayed = call(&replay, &replay_events).await;
    assert!(replay.unused().is_empty());
    // The same events, field for field (the delay waited, the latency, the tool calls);
    // only the output quotes `<redacted>` where the live model quoted the key.
    assert_eq!(replay_events.all(), live_events.all());
    let CallOutcome::Output { value, .. } = replayed else {
        panic!("expected an output, got {replayed:?}");
    };
    assert_eq!(
        value,
        json!({"text": "Rust, said <redacted>", "sources": []})
    );
}
