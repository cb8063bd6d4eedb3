//! `messages: chat` on the wire (DESIGN §9.4): each provider dialect sends a role's system message, the conversation and the current message as its API expects, against wiremock on loopback; and a whole run of a `role` block that says it (or not).

use std::sync::Arc;

use charter_runtime::compiler::graph::OutputModeIr;
use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use charter_runtime::engine::chat::{ChatMessage, ChatMessages, Speaker};
use charter_runtime::engine::effects::{Effects, Provider};
use charter_runtime::engine::provider::{CallSettings, ModelOutput, ModelRequest};
use charter_runtime::engine::run::{RunConfig, run};
use charter_runtime::formats::trace::{MemorySink, Outcome};
use charter_runtime::world::providers::{
    AnthropicConfig, AnthropicProvider, ApiKey, OpenAiConfig, OpenAiProvider, StructuredOutput,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{NoHumans, SECRET, bodies, request, tool_box};

const SYSTEM: &str = "You are the creative director.";

/// A call of a `messages: chat` role on its second turn, retried after a contract
/// violation.
fn chat_request(model: &str, output: OutputModeIr) -> ModelRequest {
    let chat = ChatMessages {
        system: SYSTEM.to_string(),
        messages: vec![
            ChatMessage {
                speaker: Speaker::User,
                text: "@创意伙伴 想两个漫画创意".to_string(),
            },
            ChatMessage {
                speaker: Speaker::Assistant,
                text: "① Bug 转生 ② 凌晨三点的编译器".to_string(),
            },
            ChatMessage {
                speaker: Speaker::User,
                text: "你选哪个？".to_string(),
            },
        ],
    };
    let mut settings = CallSettings::default();
    settings.params.output = output;
    ModelRequest {
        prompt: chat.transcript(),
        chat: Some(Arc::new(chat)),
        previous_error: Some("missing field `text`".to_string()),
        settings: Arc::new(settings),
        tools: Vec::new(),
        ..request(model)
    }
}

fn openai(server: &MockServer) -> OpenAiProvider {
    let (tools, _) = tool_box();
    let config = OpenAiConfig::new(format!("{}/v1", server.uri()), Some(ApiKey::new(SECRET)));
    OpenAiProvider::new(config, tools).unwrap_or_else(|error| panic!("{error}"))
}

fn anthropic(server: &MockServer, structured_output: StructuredOutput) -> AnthropicProvider {
    let (tools, _) = tool_box();
    let mut config = AnthropicConfig::new(server.uri(), Some(ApiKey::new(SECRET)));
    config.structured_output = structured_output;
    AnthropicProvider::new(config, tools).unwrap_or_else(|error| panic!("{error}"))
}

async fn mount(server: &MockServer, route: &str, body: Value) {
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(server)
        .await;
}

fn openai_answer(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    })
}

/// What an OpenAI-dialect server answering `{"text": "二"}` is sent for `request`, and
/// what the provider makes of its answer.
async fn sent_to_openai(request: ModelRequest) -> (ModelOutput, Value) {
    let server = MockServer::start().await;
    mount(
        &server,
        "/v1/chat/completions",
        openai_answer(r#"{"text": "二"}"#),
    )
    .await;
    let response = openai(&server)
        .complete(request)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    (response.output, bodies(&server).await.remove(0))
}

/// What an Anthropic server answering `answer` is sent for `request` (through
/// `structured_output`), and what the provider makes of its answer.
async fn sent_to_anthropic(
    answer: Value,
    structured_output: StructuredOutput,
    request: ModelRequest,
) -> (ModelOutput, Value) {
    let server = MockServer::start().await;
    mount(&server, "/v1/messages", answer).await;
    let response = anthropic(&server, structured_output)
        .complete(request)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    (response.output, bodies(&server).await.remove(0))
}

/// `(role, content)` of each message sent.
fn roles_and_texts(messages: &Value) -> Vec<(String, String)> {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .map(|message| {
            let content = match &message["content"] {
                Value::String(text) => text.clone(),
                Value::Array(blocks) => blocks
                    .iter()
                    .filter_map(|block| block["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(" | "),
                other => other.to_string(),
            };
            (
                message["role"].as_str().unwrap_or_default().to_string(),
                content,
            )
        })
        .collect()
}

#[tokio::test]
async fn openai_sends_a_system_message_then_the_conversation() {
    let (output, sent) =
        sent_to_openai(chat_request("openai:gpt-4o", OutputModeIr::JsonSchema)).await;
    assert_eq!(output, ModelOutput::Json(json!({"text": "二"})));
    let messages = roles_and_texts(&sent["messages"]);
    let roles: Vec<&str> = messages.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "user"]);
    assert_eq!(messages[0].1, SYSTEM);
    assert_eq!(messages[1].1, "@创意伙伴 想两个漫画创意");
    assert_eq!(messages[2].1, "① Bug 转生 ② 凌晨三点的编译器");
    assert_eq!(messages[3].1, "你选哪个？");
    assert!(
        messages[4].1.contains("missing field `text`"),
        "{messages:?}"
    );
    assert_eq!(sent["response_format"]["type"], "json_schema");
}

#[tokio::test]
async fn openai_puts_json_instructions_into_the_one_system_message() {
    let (_, sent) = sent_to_openai(chat_request("openai:gpt-4o", OutputModeIr::JsonObject)).await;
    let messages = roles_and_texts(&sent["messages"]);
    let systems: Vec<&String> = messages
        .iter()
        .filter(|(role, _)| role == "system")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(systems.len(), 1, "{messages:?}");
    assert!(systems[0].starts_with(SYSTEM), "{}", systems[0]);
    assert!(systems[0].contains("JSON Schema"), "{}", systems[0]);
    assert_eq!(messages[0].0, "system");
}

#[tokio::test]
async fn anthropic_takes_the_system_message_as_its_top_level_system() {
    let (output, sent) = sent_to_anthropic(
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "toolu_out", "name": charter_runtime::world::providers::anthropic::OUTPUT_TOOL, "input": {"text": "二"}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 3}
        }),
        StructuredOutput::Auto,
        chat_request("anthropic:claude-sonnet-4-5", OutputModeIr::JsonSchema),
    )
    .await;
    assert_eq!(output, ModelOutput::Json(json!({"text": "二"})));
    assert_eq!(sent["system"], SYSTEM);
    let messages = roles_and_texts(&sent["messages"]);
    let roles: Vec<&str> = messages.iter().map(|(role, _)| role.as_str()).collect();
    // Strictly alternating, starting with the user; the correction joins the last message.
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(messages[0].1, "@创意伙伴 想两个漫画创意");
    assert_eq!(messages[1].1, "① Bug 转生 ② 凌晨三点的编译器");
    assert!(messages[2].1.starts_with("你选哪个？ | "), "{messages:?}");
    assert!(
        messages[2].1.contains("missing field `text`"),
        "{messages:?}"
    );
}

#[tokio::test]
async fn anthropic_json_instructions_follow_the_system_message() {
    let (_, sent) = sent_to_anthropic(
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "{\"text\": \"二\"}"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 3}
        }),
        StructuredOutput::Instructions,
        chat_request("anthropic:claude-sonnet-4-5", OutputModeIr::JsonSchema),
    )
    .await;
    let system = sent["system"].as_str().unwrap_or_default();
    assert!(system.starts_with(SYSTEM), "{system}");
    assert!(system.contains("JSON Schema"), "{system}");
}

/// A role that does not opt in still sends its prompt as the one user message.
#[tokio::test]
async fn a_role_without_chat_sends_one_user_message() {
    let plain = ModelRequest {
        tools: Vec::new(),
        ..request("openai:gpt-4o")
    };
    let (_, sent) = sent_to_openai(plain).await;
    assert_eq!(
        roles_and_texts(&sent["messages"]),
        [("user".to_string(), "Write about rust.".to_string())]
    );
}

/// A spec whose one role is a `role` block; `messages` is its `messages:` line, if any.
fn role_block_spec(messages: &str) -> CompiledSpec {
    let text = format!(
        "spec helper version \"1\"\n\
         models {{ default = \"openai:gpt-4o\" }}\n\
         contract Request {{ text: string }}\n\
         contract Reply {{ text: string }}\n\
         role helper {{\n  model: default\n  prompt: \"{SYSTEM}\"\n  input: Request\n  output: Reply\n  {messages}\n}}\n\
         flow {{ answer = helper(request) -> done }}\n"
    );
    let compilation = compile("helper.charter", &text, &MemoryLoader::default());
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => spec,
        _ => panic!("does not compile: {:?}\n{text}", compilation.diagnostics),
    }
}

/// `(role, content)` of each message of the one call a whole run of `spec` makes against
/// a wiremock OpenAI server.
async fn messages_of_a_run(spec: &CompiledSpec) -> Vec<(String, String)> {
    let server = MockServer::start().await;
    mount(
        &server,
        "/v1/chat/completions",
        openai_answer(r#"{"text": "hi"}"#),
    )
    .await;
    let provider: Arc<dyn Provider> = Arc::new(openai(&server));
    let mut sink = MemorySink::new();
    let outcome = run(
        spec,
        json!({"text": "Hello there"}),
        Effects::new(provider, &NoHumans, &mut sink),
        &RunConfig::default(),
    )
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(outcome.outcome, Outcome::Completed, "{:?}", outcome.message);
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    roles_and_texts(&sent[0]["messages"])
}

/// `messages: chat` in a `role` block, as in a role file: the rendered prompt goes as the
/// system message and the request's text as the user's.
#[tokio::test]
async fn a_role_block_with_messages_chat_sends_a_system_then_a_user_message() {
    let messages = messages_of_a_run(&role_block_spec("messages: chat")).await;
    let roles: Vec<&str> = messages.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["system", "user"], "{messages:?}");
    assert!(messages[0].1.starts_with(SYSTEM), "{messages:?}");
    assert_eq!(messages[1].1, "Hello there");
}

/// The same role block saying nothing, or `messages: prompt`, sends its prompt as the one
/// user message.
#[tokio::test]
async fn a_role_block_without_chat_sends_one_user_message() {
    for messages in ["", "messages: prompt"] {
        let sent = messages_of_a_run(&role_block_spec(messages)).await;
        let roles: Vec<&str> = sent.iter().map(|(role, _)| role.as_str()).collect();
        assert_eq!(roles, ["user"], "{messages}: {sent:?}");
        assert!(sent[0].1.starts_with(SYSTEM), "{messages}: {sent:?}");
    }
}
