//! The `anthropic` provider against a wiremock Messages API server.

use std::sync::Arc;
use std::time::Duration;

use charter_runtime::engine::effects::Provider;
use charter_runtime::engine::provider::{ModelOutput, ProviderError, Usage};
use charter_runtime::engine::validate::Validator;
use charter_runtime::world::providers::anthropic::OUTPUT_TOOL;
use charter_runtime::world::providers::{
    AnthropicConfig, AnthropicProvider, ApiKey, StructuredOutput,
};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{
    SECRET, assert_no_secret, assert_searched_then_answered, bodies, request, spec, tool_box,
};

const MODEL: &str = "anthropic:claude-sonnet-4-5";

fn provider_with(
    server: &MockServer,
    structured_output: StructuredOutput,
) -> (AnthropicProvider, Arc<crate::support::Counts>) {
    let (tools, counts) = tool_box();
    let mut config = AnthropicConfig::new(server.uri(), Some(ApiKey::new(SECRET)));
    config.structured_output = structured_output;
    let provider = AnthropicProvider::new(config, tools).unwrap_or_else(|error| panic!("{error}"));
    (provider, counts)
}

fn provider(server: &MockServer) -> (AnthropicProvider, Arc<crate::support::Counts>) {
    provider_with(server, StructuredOutput::Auto)
}

fn message(
    content: Value,
    stop_reason: &str,
    input_tokens: u64,
    output_tokens: u64,
) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop_reason,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}
    }))
}

/// The model gives its final answer through the output tool.
fn output(value: Value) -> ResponseTemplate {
    message(
        json!([{"type": "tool_use", "id": "toolu_out", "name": OUTPUT_TOOL, "input": value}]),
        "tool_use",
        50,
        12,
    )
}

fn tool_use(calls: &[(&str, &str, Value)]) -> ResponseTemplate {
    let mut content = vec![json!({"type": "text", "text": "Let me look that up."})];
    content.extend(calls.iter().map(
        |(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input}),
    ));
    message(Value::Array(content), "tool_use", 20, 4)
}

async fn mount_once(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(response)
        .up_to_n_times(1)
        .mount(server)
        .await;
}

#[tokio::test]
async fn structured_output_through_the_output_tool() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", SECRET))
        .and(header("anthropic-version", "2023-06-01"))
        .and(body_partial_json(
            json!({"model": "claude-sonnet-4-5", "max_tokens": 4096}),
        ))
        .respond_with(output(json!({"text": "Rust is fast."})))
        .expect(1)
        .mount(&server)
        .await;
    let (provider, _) = provider(&server);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        response.output,
        ModelOutput::Json(json!({"text": "Rust is fast."}))
    );
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 50,
            output_tokens: 12
        }
    );
    let sent = bodies(&server).await;
    let body = &sent[0];
    let names: Vec<&str> = body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["search", OUTPUT_TOOL]);
    assert_eq!(
        body["tools"][1]["input_schema"]["properties"]["text"]["type"],
        "string"
    );
    assert!(body["tools"][1]["input_schema"].get("$schema").is_none());
    // The role has tools of its own: the model must call some tool (the output tool to answer).
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Write about rust."}]}])
    );
}

#[tokio::test]
async fn a_role_without_tools_is_made_to_call_the_output_tool() {
    let server = MockServer::start().await;
    mount_once(&server, output(json!({"text": "x"}))).await;
    let (provider, _) = provider(&server);
    let mut plain = request(MODEL);
    plain.tools.clear();
    plain.max_tool_calls = None;
    provider
        .complete(plain)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let sent = bodies(&server).await;
    assert_eq!(
        sent[0]["tool_choice"],
        json!({"type": "tool", "name": OUTPUT_TOOL})
    );
}

#[tokio::test]
async fn a_tool_use_round_trip() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        tool_use(&[("toolu_1", "search", json!({"text": "rust"}))]),
    )
    .await;
    mount_once(
        &server,
        output(json!({"text": "Rust.", "sources": ["https://docs.example/rust"]})),
    )
    .await;
    let (provider, counts) = provider(&server);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_searched_then_answered(&response, &counts);
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 70,
            output_tokens: 16
        }
    );
    let sent = bodies(&server).await;
    let messages = sent[1]["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][1]["id"], "toolu_1");
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert!(result.get("is_error").is_none());
    let content: Value =
        serde_json::from_str(result["content"].as_str().unwrap_or("")).unwrap_or(Value::Null);
    assert_eq!(content, json!({"urls": ["https://docs.example/rust"]}));
}

#[tokio::test]
async fn a_tool_outside_the_whitelist_is_refused_and_reported() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        tool_use(&[("toolu_1", "publish", json!({"text": "leak"}))]),
    )
    .await;
    mount_once(&server, output(json!({"text": "done"}))).await;
    let (provider, counts) = provider(&server);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(counts.publish(), 0);
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].tool, "publish");
    let sent = bodies(&server).await;
    let result = &sent[1]["messages"][2]["content"][0];
    assert_eq!(result["is_error"], true);
    let told = result["content"].as_str().unwrap_or_default();
    assert!(told.contains("tool `publish` is not allowed"), "{told}");
}

#[tokio::test]
async fn past_max_tool_calls_the_output_tool_is_forced() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        tool_use(&[
            ("t1", "search", json!({"text": "a"})),
            ("t2", "search", json!({"text": "b"})),
            ("t3", "search", json!({"text": "c"})),
        ]),
    )
    .await;
    mount_once(&server, output(json!({"text": "done"}))).await;
    let (provider, counts) = provider(&server);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(counts.search(), 2);
    assert_eq!(response.tool_calls.len(), 3);
    let sent = bodies(&server).await;
    assert_eq!(
        sent[1]["tool_choice"],
        json!({"type": "tool", "name": OUTPUT_TOOL})
    );
}

#[tokio::test]
async fn a_model_that_never_stops_calling_tools_is_an_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(tool_use(&[("t", "search", json!({"text": "again"}))]))
        .mount(&server)
        .await;
    let (provider, _) = provider(&server);
    let error = provider.complete(request(MODEL)).await.err();
    assert!(
        matches!(&error, Some(ProviderError::Permanent { status: None, message }) if message.contains("still calling tools after 4 turns")),
        "{error:?}"
    );
}

#[tokio::test]
async fn json_instructions_instead_of_the_output_tool() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        message(
            json!([{"type": "text", "text": "```json\n{\"text\": \"hi\"}\n```"}]),
            "end_turn",
            3,
            2,
        ),
    )
    .await;
    let (provider, _) = provider_with(&server, StructuredOutput::Instructions);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(response.output, ModelOutput::Json(json!({"text": "hi"})));
    let sent = bodies(&server).await;
    let system = sent[0]["system"].as_str().unwrap_or_default();
    assert!(system.contains("JSON Schema"), "{system}");
    assert_eq!(sent[0]["tool_choice"], json!({"type": "auto"}));
    assert_eq!(sent[0]["tools"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn a_429_carries_its_retry_after() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "5")
            .set_body_json(json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}})),
    )
    .await;
    let (provider, _) = provider(&server);
    let error = provider.complete(request(MODEL)).await.err();
    assert_eq!(
        error.as_ref().and_then(ProviderError::retry_after),
        Some(Duration::from_secs(5))
    );
    assert!(error.is_some_and(|error| error.is_transient()));
}

#[tokio::test]
async fn a_500_and_an_overload_are_transient() {
    let server = MockServer::start().await;
    mount_once(&server, ResponseTemplate::new(500).set_body_json(json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}))).await;
    mount_once(&server, ResponseTemplate::new(529).set_body_json(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))).await;
    mount_once(&server, ResponseTemplate::new(400).set_body_json(json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}))).await;
    let (provider, _) = provider(&server);
    for (status, message) in [(500, "Internal server error"), (529, "Overloaded")] {
        let error = provider.complete(request(MODEL)).await.err();
        assert_eq!(
            error,
            Some(ProviderError::Transient {
                status: Some(status),
                message: message.into()
            })
        );
    }
    let error = provider.complete(request(MODEL)).await.err();
    assert!(!error.is_some_and(|error| error.is_transient()));
}

#[tokio::test]
async fn a_slow_response_is_cut_by_the_callers_timeout() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        output(json!({"text": "late"})).set_delay(Duration::from_millis(300)),
    )
    .await;
    let (provider, _) = provider(&server);
    let result = tokio::time::timeout(
        Duration::from_millis(100),
        provider.complete(request(MODEL)),
    )
    .await;
    assert!(result.is_err());
}

#[tokio::test]
async fn a_malformed_body_is_a_transient_error() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_string("{\"content\": "),
    )
    .await;
    let (provider, _) = provider(&server);
    let error = provider.complete(request(MODEL)).await.err();
    assert!(
        matches!(&error, Some(ProviderError::Transient { status: None, message }) if message.starts_with("malformed response body")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_schema_violating_answer_is_returned_for_validation() {
    let server = MockServer::start().await;
    mount_once(&server, output(json!({"text": 7}))).await;
    let (provider, _) = provider(&server);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let ModelOutput::Json(value) = response.output else {
        panic!("expected JSON, got {:?}", response.output);
    };
    let spec = spec();
    let violations = Validator::for_spec(&spec)
        .validate("Essay", &value)
        .err()
        .unwrap_or_default();
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].path, "text");
}

#[tokio::test]
async fn the_key_never_shows() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(401).set_body_json(json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {SECRET}")}})),
    )
    .await;
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_string(format!("<{SECRET}>")),
    )
    .await;
    mount_once(
        &server,
        tool_use(&[("t1", "publish", json!({"text": "x"}))]),
    )
    .await;
    mount_once(&server, output(json!({"text": "fine"}))).await;
    let (provider, _) = provider(&server);
    assert_no_secret("the provider's Debug", &format!("{provider:?}"));
    for _ in 0..2 {
        let error = provider
            .complete(request(MODEL))
            .await
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        assert_no_secret("an error message", &error.to_string());
        assert_no_secret("an error's Debug", &format!("{error:?}"));
    }
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_no_secret("a response", &format!("{response:?}"));
    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(requests.len(), 4);
    for sent in &requests {
        assert_eq!(
            sent.headers
                .get("x-api-key")
                .and_then(|value| value.to_str().ok()),
            Some(SECRET)
        );
        assert_no_secret("a request body", &String::from_utf8_lossy(&sent.body));
    }
}
