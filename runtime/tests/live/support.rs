//! What the live-provider tests share: a spec with tools, requests, tool boxes that count their calls, and the secret key.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use charter_runtime::compiler::graph::CompiledSpec;
use charter_runtime::compiler::{MemoryLoader, compile};
use charter_runtime::engine::provider::{
    CallKey, ModelOutput, ModelRequest, ModelResponse, ToolCall,
};
use charter_runtime::world::tools::{FnTool, ToolBox};
use serde_json::{Value, json};

/// The key every test uses: no error, Debug output or response may contain it.
pub const SECRET: &str = "sk-live-SECRET-4242-do-not-leak";

pub const SPEC: &str = r#"spec live version "1"
contract Request { goal: string }
contract Query { text: string  limit: int(1..=10) = 3 }
contract Hits { urls: list<string> }
contract Essay { text: string  sources: list<string> = [] }
tool search { input: Query  output: Hits  effect: read }
tool publish { input: Query  output: Hits  effect: external }
role writer { model: "openai:gpt-4o-mini" prompt: """Write about {{ request.goal }}.""" input: Request output: Essay tools: [search] max_tool_calls: 2 retry: 2 backoff 10ms }
role poster { model: "openai:gpt-4o-mini" prompt: """{{ request.goal }}""" input: Request output: Essay tools: [publish] max_tool_calls: 1 }
flow {
  write = writer(request) -> post
  post = poster(request) -> done
}
"#;

pub fn spec() -> CompiledSpec {
    let compilation = compile("live.charter", SPEC, &MemoryLoader::default());
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => spec,
        _ => panic!(
            "the test spec does not compile: {:?}",
            compilation.diagnostics
        ),
    }
}

/// A request for role `writer` of [`SPEC`] to model `model`.
pub fn request(model: &str) -> ModelRequest {
    let spec = spec();
    ModelRequest {
        key: CallKey::new("write"),
        role: "writer".into(),
        model: model.into(),
        prompt: "Write about rust.".into(),
        chat: None,
        output_schema: std::sync::Arc::clone(&spec.contracts["Essay"].schema),
        tools: vec!["search".into()],
        max_tool_calls: Some(2),
        previous_error: None,
        settings: Default::default(),
        log: Default::default(),
    }
}

/// How often each tool ran.
#[derive(Debug, Default)]
pub struct Counts {
    pub search: AtomicUsize,
    pub publish: AtomicUsize,
}

impl Counts {
    pub fn search(&self) -> usize {
        self.search.load(Ordering::SeqCst)
    }
    pub fn publish(&self) -> usize {
        self.publish.load(Ordering::SeqCst)
    }
}

/// `search` answers one URL per query; `publish` would answer too (it must never run in
/// these tests: `writer` may not call it).
pub fn tool_box() -> (Arc<ToolBox>, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let search_counts = counts.clone();
    let publish_counts = counts.clone();
    let tools = ToolBox::for_spec(&spec())
        .with(
            "search",
            FnTool::new(move |args: Value| {
                search_counts.search.fetch_add(1, Ordering::SeqCst);
                async move {
                    let text = args["text"].as_str().unwrap_or_default().to_string();
                    Ok(json!({"urls": [format!("https://docs.example/{text}")]}))
                }
            }),
        )
        .and_then(|tools| {
            tools.with(
                "publish",
                FnTool::new(move |_args: Value| {
                    publish_counts.publish.fetch_add(1, Ordering::SeqCst);
                    async move { Ok(json!({"urls": []})) }
                }),
            )
        })
        .unwrap_or_else(|error| panic!("{error}"));
    (Arc::new(tools), counts)
}

/// The JSON bodies of the requests a mock server received, in order.
pub async fn bodies(server: &wiremock::MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|request| serde_json::from_slice(&request.body).unwrap_or(Value::Null))
        .collect()
}

/// Fails if `text` contains the secret key.
pub fn assert_no_secret(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "the key leaked into {what}: {text}");
}

/// The answer both providers' tool round-trip tests expect: the model searched once for
/// `rust` (the tool box's result fed back), then answered with the source it found.
#[track_caller]
pub fn assert_searched_then_answered(response: &ModelResponse, counts: &Counts) {
    assert_eq!(
        response.output,
        ModelOutput::Json(json!({"text": "Rust.", "sources": ["https://docs.example/rust"]}))
    );
    let tool_calls: Vec<ToolCall> = response
        .tool_calls
        .iter()
        .map(|call| {
            assert!(
                call.latency.is_some(),
                "a live tool call keeps how long it ran"
            );
            ToolCall {
                latency: None,
                ..call.clone()
            }
        })
        .collect();
    assert_eq!(
        tool_calls,
        [ToolCall {
            tool: "search".into(),
            args: json!({"text": "rust"}),
            result: json!({"urls": ["https://docs.example/rust"]}),
            latency: None,
        }]
    );
    assert_eq!(counts.search(), 1);
}

/// A human channel for runs with no `ask` step: any question is an error naming it.
pub struct NoHumans;

impl charter_runtime::engine::effects::HumanChannel for NoHumans {
    fn ask(
        &self,
        request: charter_runtime::engine::provider::HumanRequest,
    ) -> charter_runtime::engine::provider::BoxFuture<
        '_,
        Result<Value, charter_runtime::engine::provider::ProviderError>,
    > {
        Box::pin(async move {
            Err(
                charter_runtime::engine::provider::ProviderError::NoHumanAnswer {
                    step: request.step,
                    round: request.round,
                    attempt: request.attempt,
                },
            )
        })
    }
}
