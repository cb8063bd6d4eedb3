//! One compatibility test per server dialect people run, at the HTTP level: llama-cpp-python (500 on `json_schema`, 500 on `content: null`), a server without tool support, Ollama's and vLLM's response shapes, llama.cpp's `llama-server`, and Anthropic's `overloaded` 529; plus the model parameters and `tool_choice` as each API receives them.

use std::sync::Arc;

use charter_runtime::compiler::graph::{ModelParamsIr, OutputModeIr, ToolChoiceIr};
use charter_runtime::engine::effects::Provider;
use charter_runtime::engine::provider::{ModelOutput, ModelRequest, ProviderError};
use charter_runtime::world::providers::{
    AnthropicConfig, AnthropicProvider, ApiKey, OpenAiConfig, OpenAiProvider,
};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support::{SECRET, bodies, request, tool_box};

fn openai(server: &MockServer) -> (OpenAiProvider, Arc<crate::support::Counts>) {
    let (tools, counts) = tool_box();
    let config = OpenAiConfig::new(format!("{}/v1", server.uri()), None);
    let provider = OpenAiProvider::new(config, tools).unwrap_or_else(|error| panic!("{error}"));
    (provider, counts)
}

fn completion(message: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    }))
}

const ESSAY: &str = r#"{"text": "Rust.", "sources": ["https://docs.example/rust"]}"#;

/// llama-cpp-python's server: `response_format` may be `text` or `json_object` only (a
/// 500 with a pydantic message and the server's own paths otherwise), and an assistant
/// message with `content: null` is refused with a 500 too. It calls `search` once, then
/// answers.
struct LlamaCppPython;

impl Respond for LlamaCppPython {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        if body["response_format"]["type"] == "json_schema" {
            return ResponseTemplate::new(500).set_body_json(json!({"detail": [{
                "type": "literal_error",
                "loc": ["body", "response_format", "type"],
                "msg": "Input should be 'text' or 'json_object'",
                "ctx": {"file": "/home/srv/venv/lib/python3.11/site-packages/llama_cpp/server/types.py"}
            }]}));
        }
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        if messages.iter().any(|message| message["content"].is_null()) {
            return ResponseTemplate::new(500)
                .set_body_string("Internal Server Error: content must be a string");
        }
        if messages.iter().any(|message| message["role"] == "tool") {
            return completion(json!({"role": "assistant", "content": ESSAY}));
        }
        completion(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "search", "arguments": "{\"text\": \"rust\"}"}}
        ]}))
    }
}

#[tokio::test]
async fn llama_cpp_python_falls_back_to_json_object_once_and_never_gets_null_content() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(LlamaCppPython)
        .mount(&server)
        .await;
    let (provider, counts) = openai(&server);
    let first = request("openai:qwen2.5-0.5b-instruct");
    let log = first.log.clone();
    let response = provider
        .complete(first)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        response.output,
        ModelOutput::Json(serde_json::from_str(ESSAY).unwrap_or_default())
    );
    assert_eq!(counts.search(), 1);
    let notes = log.entries().notes;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("`json_schema`") && notes[0].contains("`json_object`"),
        "{notes:?}"
    );
    assert!(!notes[0].contains("site-packages"), "{notes:?}");
    // The next call of the same model starts in the mode that worked, with no note.
    let second = request("openai:qwen2.5-0.5b-instruct");
    let log = second.log.clone();
    provider
        .complete(second)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(log.entries().notes.is_empty());
    let sent = bodies(&server).await;
    let schema_requests = sent
        .iter()
        .filter(|body| body["response_format"]["type"] == "json_schema")
        .count();
    assert_eq!(
        schema_requests, 1,
        "json_schema is tried once per run and model"
    );
    assert_eq!(sent.len(), 5, "1 refused + 2 turns + 2 turns");
    for body in &sent {
        for message in body["messages"].as_array().into_iter().flatten() {
            assert!(!message["content"].is_null(), "content: null sent: {body}");
        }
    }
}

#[tokio::test]
async fn a_server_that_refuses_every_response_format_is_asked_with_instructions_only() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            if body.get("response_format").is_some() {
                ResponseTemplate::new(400).set_body_json(
                    json!({"error": {"message": "response_format is not supported"}}),
                )
            } else {
                completion(json!({"role": "assistant", "content": ESSAY}))
            }
        })
        .mount(&server)
        .await;
    let (provider, _) = openai(&server);
    let mut asked = request("openai:tiny");
    asked.tools.clear();
    let log = asked.log.clone();
    let response = provider
        .complete(asked)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(matches!(response.output, ModelOutput::Json(_)));
    assert_eq!(
        log.entries().notes.len(),
        2,
        "json_schema, then json_object"
    );
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3);
    assert!(sent[2].get("response_format").is_none());
    let system = sent[2]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(system.contains("JSON Schema"), "{system}");
}

#[tokio::test]
async fn a_server_without_tool_support_fails_the_call_with_its_reason_and_no_retry_storm() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "registry.ollama.ai/library/gemma:2b does not support tools",
            "type": "api_error"
        }})))
        .mount(&server)
        .await;
    let (provider, counts) = openai(&server);
    let error = provider
        .complete(request("openai:gemma:2b"))
        .await
        .err()
        .unwrap_or_else(|| panic!("a tool call against a server without tools succeeded"));
    assert!(!error.is_transient(), "{error}");
    assert!(
        error.to_string().contains("does not support tools"),
        "{error}"
    );
    assert_eq!(counts.search(), 0);
    assert_eq!(bodies(&server).await.len(), 1);
}

#[tokio::test]
async fn ollama_shapes_and_model_names_with_a_tag() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            let answered = body["messages"]
                .as_array()
                .is_some_and(|messages| messages.iter().any(|m| m["role"] == "tool"));
            let message = if answered {
                json!({"role": "assistant", "content": ESSAY})
            } else {
                // Ollama sends the arguments as a JSON text and an empty content.
                json!({"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_x1", "index": 0, "type": "function", "function": {"name": "search", "arguments": "{\"text\":\"rust\"}"}}
                ]})
            };
            ResponseTemplate::new(200).set_body_json(json!({
                "id": "chatcmpl-599", "object": "chat.completion", "created": 1733011200,
                "model": "llama3.2:3b", "system_fingerprint": "fp_ollama",
                "choices": [{"index": 0, "message": message, "finish_reason": if answered { "stop" } else { "tool_calls" }}],
                "usage": {"prompt_tokens": 60, "completion_tokens": 12, "total_tokens": 72}
            }))
        })
        .mount(&server)
        .await;
    let (provider, counts) = openai(&server);
    let response = provider
        .complete(request("openai:llama3.2:3b"))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(matches!(response.output, ModelOutput::Json(_)));
    assert_eq!(counts.search(), 1);
    assert_eq!(response.usage.input_tokens, 120);
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["model"], "llama3.2:3b");
    assert_eq!(sent[1]["messages"][1]["content"], "");
}

#[tokio::test]
async fn vllm_shapes_with_empty_tool_calls_and_reasoning_fields() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-b7", "object": "chat.completion", "created": 1733011200,
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "choices": [{"index": 0, "logprobs": null, "finish_reason": "stop", "stop_reason": null,
                "message": {"role": "assistant", "reasoning_content": null, "content": ESSAY, "tool_calls": []}}],
            "usage": {"prompt_tokens": 30, "total_tokens": 40, "completion_tokens": 10, "prompt_tokens_details": null},
            "prompt_logprobs": null
        })))
        .mount(&server)
        .await;
    let (provider, counts) = openai(&server);
    let response = provider
        .complete(request("openai:Qwen/Qwen2.5-7B-Instruct"))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        response.output,
        ModelOutput::Json(serde_json::from_str(ESSAY).unwrap_or_default())
    );
    assert_eq!(counts.search(), 0);
    assert_eq!(
        bodies(&server).await[0]["model"],
        "Qwen/Qwen2.5-7B-Instruct"
    );
}

#[tokio::test]
async fn llama_server_takes_json_schema_and_the_model_parameters() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"finish_reason": "stop", "index": 0,
                "message": {"role": "assistant", "content": ESSAY}}],
            "created": 1733011200, "model": "gpt-3.5-turbo", "object": "chat.completion",
            "usage": {"completion_tokens": 10, "prompt_tokens": 30, "total_tokens": 40},
            "timings": {"prompt_n": 30, "predicted_n": 10, "predicted_ms": 85000.0}
        })))
        .mount(&server)
        .await;
    let (provider, _) = openai(&server);
    let mut asked = request("openai:local");
    std::sync::Arc::make_mut(&mut asked.settings).params = ModelParamsIr {
        temperature: Some(0.2),
        top_p: Some(0.9),
        max_tokens: Some(800),
        seed: Some(7),
        idle_timeout_ms: None,
        output: OutputModeIr::JsonSchema,
    };
    std::sync::Arc::make_mut(&mut asked.settings).tool_choice = ToolChoiceIr::Tool("search".into());
    provider
        .complete(asked)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let sent = &bodies(&server).await[0];
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(sent["temperature"], json!(0.2));
    assert_eq!(sent["top_p"], json!(0.9));
    assert_eq!(sent["max_tokens"], json!(800));
    assert_eq!(sent["seed"], json!(7));
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "function", "function": {"name": "search"}})
    );
}

#[tokio::test]
async fn tool_choice_required_binds_until_a_tool_was_called() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(LlamaCppPython)
        .mount(&server)
        .await;
    let (provider, _) = openai(&server);
    let mut asked: ModelRequest = request("openai:local");
    std::sync::Arc::make_mut(&mut asked.settings).params.output = OutputModeIr::JsonObject;
    std::sync::Arc::make_mut(&mut asked.settings).tool_choice = ToolChoiceIr::Required;
    provider
        .complete(asked)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2, "json_object from the start: nothing refused");
    assert_eq!(sent[0]["tool_choice"], "required");
    assert_eq!(sent[1]["tool_choice"], "auto");
}

#[tokio::test]
async fn anthropic_overloaded_529_is_transient_and_parameters_are_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(529).set_body_json(json!({
            "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}
        })))
        .mount(&server)
        .await;
    let (tools, _) = tool_box();
    let provider = AnthropicProvider::new(
        AnthropicConfig::new(server.uri(), Some(ApiKey::new(SECRET))),
        tools,
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let mut asked = request("anthropic:claude-sonnet-4-5");
    std::sync::Arc::make_mut(&mut asked.settings)
        .params
        .temperature = Some(0.3);
    std::sync::Arc::make_mut(&mut asked.settings)
        .params
        .max_tokens = Some(900);
    std::sync::Arc::make_mut(&mut asked.settings).params.seed = Some(1);
    let error = provider
        .complete(asked)
        .await
        .err()
        .unwrap_or_else(|| panic!("a 529 was taken as an answer"));
    assert!(error.is_transient(), "{error}");
    assert_eq!(error.status(), Some(529));
    assert!(matches!(error, ProviderError::Transient { .. }));
    assert!(error.to_string().contains("Overloaded"), "{error}");
    let sent = &bodies(&server).await[0];
    assert_eq!(sent["temperature"], json!(0.3));
    assert_eq!(sent["max_tokens"], json!(900));
    assert!(sent.get("seed").is_none(), "the Messages API takes no seed");
}
