//! The `openai` provider against a wiremock Chat Completions server.

use std::sync::Arc;
use std::time::Duration;

use charter_runtime::engine::effects::Provider;
use charter_runtime::engine::provider::{ModelOutput, ProviderError, Usage};
use charter_runtime::engine::validate::Validator;
use charter_runtime::world::providers::{ApiKey, OpenAiConfig, OpenAiProvider, StructuredOutput};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{
    SECRET, assert_no_secret, assert_searched_then_answered, bodies, request, spec, tool_box,
};

const MODEL: &str = "openai:gpt-4o-mini";

fn provider(server: &MockServer) -> (OpenAiProvider, Arc<crate::support::Counts>) {
    provider_with(server, StructuredOutput::Auto)
}

fn provider_with(
    server: &MockServer,
    structured_output: StructuredOutput,
) -> (OpenAiProvider, Arc<crate::support::Counts>) {
    let (tools, counts) = tool_box();
    let mut config = OpenAiConfig::new(format!("{}/v1", server.uri()), Some(ApiKey::new(SECRET)));
    config.structured_output = structured_output;
    let provider = OpenAiProvider::new(config, tools).unwrap_or_else(|error| panic!("{error}"));
    (provider, counts)
}

/// A final answer with `content`.
fn answer(content: &str, prompt_tokens: u64, completion_tokens: u64) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}
    }))
}

/// An answer that calls tools: `(id, name, arguments text)`.
fn tool_calls(calls: &[(&str, &str, &str)]) -> ResponseTemplate {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": null, "tool_calls": calls},
            "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3}
    }))
}

async fn mount_once(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(response)
        .up_to_n_times(1)
        .mount(server)
        .await;
}

#[tokio::test]
async fn structured_output_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {SECRET}").as_str()))
        .and(body_partial_json(json!({
            "model": "gpt-4o-mini",
            "response_format": {"type": "json_schema", "json_schema": {"name": "writer", "strict": false}}
        })))
        .respond_with(answer(r#"{"text": "Rust is fast."}"#, 120, 8))
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
            input_tokens: 120,
            output_tokens: 8
        }
    );
    assert!(response.tool_calls.is_empty());
    let sent = bodies(&server).await;
    let body = &sent[0];
    // The schema is the output contract's, without its `$schema` draft keyword.
    let mut schema = (*spec().contracts["Essay"].schema).clone();
    if let Value::Object(object) = &mut schema {
        object.remove("$schema");
    }
    assert_eq!(body["response_format"]["json_schema"]["schema"], schema);
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Write about rust."}])
    );
    assert_eq!(body["tools"][0]["function"]["name"], "search");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(
        body["tools"].as_array().map(Vec::len),
        Some(1),
        "only the whitelisted tool is offered"
    );
}

#[tokio::test]
async fn a_tool_call_round_trip() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        tool_calls(&[("call_1", "search", r#"{"text": "rust"}"#)]),
    )
    .await;
    mount_once(
        &server,
        answer(
            r#"{"text": "Rust.", "sources": ["https://docs.example/rust"]}"#,
            30,
            6,
        ),
    )
    .await;
    let (provider, counts) = provider(&server);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_searched_then_answered(&response, &counts);
    // Usage is summed over both turns.
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 40,
            output_tokens: 9
        }
    );
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    let messages = sent[1]["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["tool_calls"][0]["id"], "call_1");
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], "call_1");
    let content: Value =
        serde_json::from_str(messages[2]["content"].as_str().unwrap_or("")).unwrap_or(Value::Null);
    assert_eq!(content, json!({"urls": ["https://docs.example/rust"]}));
}

#[tokio::test]
async fn a_tool_outside_the_whitelist_is_refused_and_reported() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        tool_calls(&[("call_1", "publish", r#"{"text": "leak"}"#)]),
    )
    .await;
    mount_once(&server, answer(r#"{"text": "done"}"#, 5, 1)).await;
    let (provider, counts) = provider(&server);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(counts.publish(), 0, "a refused tool never runs");
    assert_eq!(response.tool_calls.len(), 1);
    let denied = &response.tool_calls[0];
    assert_eq!(denied.tool, "publish");
    assert!(
        !request(MODEL).tools.contains(&denied.tool),
        "recorded so the scheduler emits tool_denied"
    );
    let error = denied.result["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("not allowed") && error.contains("search"),
        "{error}"
    );
    let sent = bodies(&server).await;
    let told = sent[1]["messages"][2]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(told.contains("tool `publish` is not allowed"), "{told}");
}

#[tokio::test]
async fn calls_past_max_tool_calls_are_refused_and_tools_switched_off() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        tool_calls(&[
            ("c1", "search", r#"{"text": "a"}"#),
            ("c2", "search", r#"{"text": "b"}"#),
            ("c3", "search", r#"{"text": "c"}"#),
        ]),
    )
    .await;
    mount_once(&server, answer(r#"{"text": "done"}"#, 5, 1)).await;
    let (provider, counts) = provider(&server);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(counts.search(), 2);
    assert_eq!(response.tool_calls.len(), 3);
    let third = response.tool_calls[2].result["error"]
        .as_str()
        .unwrap_or_default();
    assert!(third.contains("limit of 2 tool call(s)"), "{third}");
    let sent = bodies(&server).await;
    assert_eq!(sent[1]["tool_choice"], "none");
}

#[tokio::test]
async fn bad_tool_arguments_are_told_to_the_model() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        tool_calls(&[
            ("c1", "search", r#"{"text": "#),
            ("c2", "search", r#"{"txt": "a"}"#),
        ]),
    )
    .await;
    mount_once(&server, answer(r#"{"text": "done"}"#, 5, 1)).await;
    let (provider, counts) = provider(&server);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(counts.search(), 0);
    assert_eq!(response.tool_calls[0].args, json!(r#"{"text": "#));
    let not_json = response.tool_calls[0].result["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        not_json.contains("are not valid JSON") && not_json.contains("did not run"),
        "{not_json}"
    );
    let broken = response.tool_calls[1].result["error"]
        .as_str()
        .unwrap_or_default();
    assert!(broken.contains("missing required field `text`"), "{broken}");
}

#[tokio::test]
async fn a_429_carries_its_retry_after() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "2")
            .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests"}})),
    )
    .await;
    let (provider, _) = provider(&server);
    let error = provider.complete(request(MODEL)).await.err();
    assert_eq!(
        error,
        Some(ProviderError::Throttled {
            status: 429,
            retry_after: Duration::from_secs(2),
            message: "Rate limit reached".into()
        })
    );
    assert!(error.is_some_and(|error| error.is_transient()));
}

#[tokio::test]
async fn a_500_is_transient_and_a_400_permanent() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(500).set_body_string("upstream exploded"),
    )
    .await;
    mount_once(
        &server,
        ResponseTemplate::new(404)
            .set_body_json(json!({"error": {"message": "The model `gpt-9` does not exist"}})),
    )
    .await;
    let (provider, _) = provider(&server);
    let error = provider.complete(request(MODEL)).await.err();
    assert_eq!(
        error,
        Some(ProviderError::Transient {
            status: Some(500),
            message: "upstream exploded".into()
        })
    );
    let error = provider.complete(request(MODEL)).await.err();
    assert!(
        matches!(&error, Some(ProviderError::Permanent { status: Some(404), message }) if message.contains("gpt-9")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_401_and_a_context_length_400_are_permanent_and_sent_once() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"
        }})),
    )
    .await;
    mount_once(
        &server,
        ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens.",
            "type": "invalid_request_error", "code": "context_length_exceeded"
        }})),
    )
    .await;
    let (provider, _) = provider(&server);
    let auth = provider.complete(request(MODEL)).await.err();
    assert!(
        matches!(&auth, Some(error @ ProviderError::Permanent { status: Some(401), .. }) if !error.is_transient()),
        "{auth:?}"
    );
    let context = provider.complete(request(MODEL)).await.err();
    assert!(
        matches!(&context, Some(error @ ProviderError::Permanent { status: Some(400), message })
            if !error.is_transient() && message.contains("maximum context length")),
        "{context:?}"
    );
    // A context-length 400 names no output mode: it is not taken for a refused
    // `response_format` and sent again in a weaker mode.
    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(requests.len(), 2);
}

#[tokio::test]
async fn an_answer_cut_at_the_token_limit_is_noted_and_checked_as_text() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": "{\"text\": \"the first half of"},
                "finish_reason": "length"
            }],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4096}
        })),
    )
    .await;
    mount_once(&server, answer(r#"{"text": "whole"}"#, 1, 1)).await;
    let (provider, _) = provider(&server);
    let cut = request(MODEL);
    let log = cut.log.clone();
    let response = provider
        .complete(cut)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        response.output,
        ModelOutput::Text("{\"text\": \"the first half of".into())
    );
    assert_eq!(
        log.entries().notes,
        vec![charter_runtime::world::providers::TRUNCATED_NOTE.to_string()]
    );
    // A whole answer (`finish_reason: stop`) is noted nothing.
    let whole = request(MODEL);
    let log = whole.log.clone();
    let response = provider
        .complete(whole)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(response.output, ModelOutput::Json(json!({"text": "whole"})));
    assert!(log.entries().notes.is_empty());
}

#[tokio::test]
async fn a_slow_response_is_cut_by_the_callers_timeout() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        answer(r#"{"text": "late"}"#, 1, 1).set_delay(Duration::from_millis(300)),
    )
    .await;
    let (provider, _) = provider(&server);
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(
        Duration::from_millis(100),
        provider.complete(request(MODEL)),
    )
    .await;
    assert!(result.is_err(), "the timeout fires first");
    assert!(
        started.elapsed() < Duration::from_millis(290),
        "the call was dropped, not awaited"
    );
}

#[tokio::test]
async fn a_connection_refused_is_transient() {
    // Bind a port, then free it: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("{error}"));
    let (tools, _) = tool_box();
    let provider = OpenAiProvider::new(
        OpenAiConfig::new(
            format!("http://127.0.0.1:{port}/v1"),
            Some(ApiKey::new(SECRET)),
        ),
        tools,
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let error = provider.complete(request(MODEL)).await.err();
    assert!(
        matches!(&error, Some(ProviderError::Transient { status: None, .. })),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_malformed_body_is_a_transient_error() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_string("<html>gateway</html>"),
    )
    .await;
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_json(json!({"choices": []})),
    )
    .await;
    let (provider, _) = provider(&server);
    for _ in 0..2 {
        let error = provider.complete(request(MODEL)).await.err();
        assert!(
            matches!(&error, Some(ProviderError::Transient { status: None, message }) if message.starts_with("malformed response body")),
            "{error:?}"
        );
    }
}

#[tokio::test]
async fn a_schema_violating_answer_is_returned_for_validation() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        answer(r#"{"txt": "oops", "sources": "none"}"#, 1, 1),
    )
    .await;
    mount_once(&server, answer("Sure! Here is the answer: Rust.", 1, 1)).await;
    let (provider, _) = provider(&server);
    let spec = spec();
    let validator = Validator::for_spec(&spec);
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let ModelOutput::Json(value) = response.output else {
        panic!("expected JSON, got {:?}", response.output);
    };
    let violations = validator
        .validate("Essay", &value)
        .err()
        .unwrap_or_default();
    let text: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "text: missing required field `text` (string)",
            "sources: expected list<string>, got string \"none\"",
            "txt: unknown field `txt`; did you mean `text`?"
        ]
    );
    // Prose is returned as text; the caller's parse reports it.
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        response.output,
        ModelOutput::Text("Sure! Here is the answer: Rust.".into())
    );
}

#[tokio::test]
async fn a_refused_json_schema_falls_back_to_json_object_once_and_for_all() {
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(400).set_body_json(
            json!({"error": {"message": "'response_format.type' must be 'json_object' or 'text'"}}),
        ),
    )
    .await;
    Mock::given(method("POST"))
        .respond_with(answer(r#"{"text": "ok"}"#, 1, 1))
        .mount(&server)
        .await;
    let (provider, _) = provider(&server);
    for _ in 0..2 {
        let response = provider
            .complete(request(MODEL))
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(response.output, ModelOutput::Json(json!({"text": "ok"})));
    }
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3, "one refusal, then one request per call");
    assert!(sent[0].get("response_format").is_some());
    for body in &sent[1..] {
        assert_eq!(body["response_format"], json!({"type": "json_object"}));
        assert_eq!(body["messages"][0]["role"], "system");
        let instructions = body["messages"][0]["content"].as_str().unwrap_or_default();
        assert!(
            instructions.contains("JSON Schema") && instructions.contains("\"sources\""),
            "{instructions}"
        );
    }
    // `Schema` never falls back: the refusal is the answer.
    let server = MockServer::start().await;
    mount_once(
        &server,
        ResponseTemplate::new(400)
            .set_body_json(json!({"error": {"message": "response_format is not supported"}})),
    )
    .await;
    let (provider, _) = provider_with(&server, StructuredOutput::Schema);
    let error = provider.complete(request(MODEL)).await.err();
    assert!(matches!(
        error,
        Some(ProviderError::Permanent {
            status: Some(400),
            ..
        })
    ));
}

#[tokio::test]
async fn a_correction_is_sent_after_a_contract_violation() {
    let server = MockServer::start().await;
    mount_once(&server, answer(r#"{"text": "ok"}"#, 1, 1)).await;
    let (provider, _) = provider(&server);
    let mut retry = request(MODEL);
    retry.previous_error = Some("text: missing required field `text` (string)".into());
    provider
        .complete(retry)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let sent = bodies(&server).await;
    let correction = sent[0]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        correction.contains("missing required field `text`"),
        "{correction}"
    );
}

#[tokio::test]
async fn the_key_never_shows() {
    let server = MockServer::start().await;
    // A server that echoes the key back in its errors.
    mount_once(
        &server,
        ResponseTemplate::new(401).set_body_json(
            json!({"error": {"message": format!("Incorrect API key provided: {SECRET}")}}),
        ),
    )
    .await;
    mount_once(
        &server,
        ResponseTemplate::new(200).set_body_string(format!("oops {SECRET}")),
    )
    .await;
    mount_once(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "1")
            .set_body_string(SECRET),
    )
    .await;
    mount_once(
        &server,
        tool_calls(&[("c1", "publish", r#"{"text": "x"}"#)]),
    )
    .await;
    mount_once(&server, answer(r#"{"text": "fine"}"#, 1, 1)).await;
    let (provider, _) = provider(&server);
    assert_no_secret("the provider's Debug", &format!("{provider:?}"));
    for _ in 0..3 {
        let error = provider.complete(request(MODEL)).await.err();
        let error = error.unwrap_or_else(|| panic!("expected an error"));
        assert_no_secret("an error message", &error.to_string());
        assert_no_secret("an error's Debug", &format!("{error:?}"));
    }
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_no_secret("a response", &format!("{response:?}"));
    for call in &response.tool_calls {
        assert_no_secret(
            "a tool call",
            &serde_json::to_string(&call.args).unwrap_or_default(),
        );
        assert_no_secret(
            "a tool result",
            &serde_json::to_string(&call.result).unwrap_or_default(),
        );
    }
    // The key was sent, where it belongs.
    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(requests.len(), 5);
    for sent in &requests {
        assert_eq!(
            sent.headers
                .get("authorization")
                .and_then(|value| value.to_str().ok()),
            Some(format!("Bearer {SECRET}").as_str())
        );
        assert_no_secret("a request body", &String::from_utf8_lossy(&sent.body));
    }
}

#[tokio::test]
async fn a_failing_command_tool_is_told_to_the_model_and_the_call_goes_on() {
    use charter_runtime::world::tools::{CommandTool, ToolBox};
    let server = MockServer::start().await;
    mount_once(
        &server,
        tool_calls(&[
            ("c1", "search", r#"{"text": "rust"}"#),
            ("c2", "search", r#"{"text": "again"}"#),
        ]),
    )
    .await;
    mount_once(&server, answer(r#"{"text": "without sources"}"#, 1, 1)).await;
    // The first call fails (exit 2, with a reason on stderr); the second answers JSON.
    let command =
        r#"if grep -q rust; then echo 'index offline' >&2; exit 2; fi; echo '{"urls": ["u"]}'"#;
    let tools = ToolBox::for_spec(&spec())
        .with("search", CommandTool::new(command))
        .unwrap_or_else(|error| panic!("{error}"));
    let provider = OpenAiProvider::new(
        OpenAiConfig::new(format!("{}/v1", server.uri()), Some(ApiKey::new(SECRET))),
        Arc::new(tools),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let response = provider
        .complete(request(MODEL))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        response.output,
        ModelOutput::Json(json!({"text": "without sources"}))
    );
    let failure = response.tool_calls[0].result["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        failure.contains("exit status 2") && failure.contains("index offline"),
        "{failure}"
    );
    assert_eq!(response.tool_calls[1].result, json!({"urls": ["u"]}));
    let sent = bodies(&server).await;
    let told = sent[1]["messages"][2]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(told.contains("index offline"), "{told}");
}

/// DESIGN §9.2: a call whose arguments break a `permit` rule is refused like one outside
/// the whitelist: the tool never runs, and the model is told which rule it broke.
#[tokio::test]
async fn a_call_breaking_a_permit_is_refused_unrun_naming_the_rule() {
    let text = crate::support::SPEC.replace(
        "tools: [search] max_tool_calls: 2",
        "tools: [search] max_tool_calls: 2 permit search when args.text != \"secret plans\"",
    );
    let compilation = charter_runtime::compiler::compile(
        "live.charter",
        &text,
        &charter_runtime::compiler::MemoryLoader::default(),
    );
    let spec = compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
    let server = MockServer::start().await;
    mount_once(
        &server,
        tool_calls(&[
            ("call_1", "search", r#"{"text": "secret plans"}"#),
            ("call_2", "search", r#"{"text": "rust"}"#),
        ]),
    )
    .await;
    mount_once(&server, answer(r#"{"text": "done"}"#, 5, 1)).await;
    let (provider, counts) = provider(&server);
    let mut request = request(MODEL);
    std::sync::Arc::make_mut(&mut request.settings).permits = spec.roles["writer"].permits.clone();
    let response = provider
        .complete(request)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(counts.search(), 1, "only the permitted call ran");
    let refused = response.tool_calls[0].result["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        refused.contains("permit search when args.text != \"secret plans\""),
        "{refused}"
    );
    assert_eq!(
        response.tool_calls[1].result["urls"][0],
        "https://docs.example/rust"
    );
}
