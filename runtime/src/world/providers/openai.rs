//! The `openai` provider: Chat Completions on any OpenAI-compatible server (OpenAI, vLLM, llama.cpp server, Ollama...), with JSON-schema structured output, tool calling and a fallback to JSON instructions.
//!
//! One [`Provider::complete`] is a loop of HTTP requests to `{base_url}/chat/completions`:
//! the prompt as a user message (for a `messages: chat` role, a system message, the
//! conversation's user and assistant messages and the current user message; the
//! correction after a contract violation as one more user message), the role's output schema as `response_format: {type: json_schema, ...}` and the
//! role's whitelisted tools as `tools`. While the model answers with `tool_calls`, each
//! is run through the [`ToolBox`] (or refused) and answered with a `tool` message; once
//! `max_tool_calls` is reached the next request says `tool_choice: none`. The final
//! message's content is the output; usage is summed over the turns.
//!
//! **Output modes.** A model entry's `output` (default `json_schema`) says how output
//! matching the contract is asked for: `json_schema` sends the schema as
//! `response_format: {type: json_schema}`; `json_object` sends `{type: json_object}` and
//! the schema as instructions in a system message; `prompt` sends only the instructions.
//! When a server refuses the mode (any 4xx/5xx whose body names `response_format` or
//! `json_schema`), the request is sent again at once in the next weaker mode, which is
//! kept for that model for the rest of the run, with a note in the call's log (the trace
//! shows it). Whatever the mode, the scheduler checks the reply against the contract.
//!
//! The model entry's `temperature`, `top_p`, `max_tokens` and `seed` are sent as they
//! are; the role's `tool_choice` applies until the model has called a tool. An assistant
//! message is never sent with `content: null` (llama-cpp-python refuses it).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use charter_compiler::graph::{OutputModeIr, ToolChoiceIr};

use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ApiKey, StructuredOutput, ToolLoop, http_client, idle_timeout, json_instructions, malformed,
    model_name, output_from_text, read_body, send_error, status_error, too_many_turns,
    trim_base_url, wire_schema, within_idle,
};
use crate::engine::effects::Provider;
use crate::engine::provider::{
    BoxFuture, ModelRequest, ModelResponse, ProviderError, Usage, correction,
};
use crate::world::limits::Limits;
use crate::world::tools::ToolBox;

/// The default base URL (`OPENAI_BASE_URL` overrides it in the CLI).
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// How to reach an OpenAI-compatible server.
#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    /// Up to and including the version, e.g. `https://api.openai.com/v1` or
    /// `http://localhost:11434/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer ...`; local servers often need none.
    pub api_key: Option<ApiKey>,
    pub structured_output: StructuredOutput,
    /// `strict` in `response_format` (OpenAI's strict mode requires every property to be
    /// required, which optional contract fields are not, so it is off by default).
    pub strict: bool,
    /// How long to wait for a TCP/TLS connection (the call as a whole is bounded by the
    /// role's `timeout`, applied by the caller).
    pub connect_timeout: Duration,
    /// The body size limit, the total deadline of each request and the `Retry-After` cap.
    pub limits: Limits,
}

impl OpenAiConfig {
    pub fn new(base_url: impl Into<String>, api_key: Option<ApiKey>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key,
            structured_output: StructuredOutput::Auto,
            strict: false,
            connect_timeout: Duration::from_secs(10),
            limits: Limits::default(),
        }
    }
}

/// A provider for OpenAI-compatible Chat Completions servers.
pub struct OpenAiProvider {
    config: OpenAiConfig,
    endpoint: String,
    client: reqwest::Client,
    tools: Arc<ToolBox>,
    /// Per model: the output mode this server was found to accept, when it refused a
    /// stronger one (`json_schema` -> `json_object` -> `prompt`), for the rest of the run.
    downgraded: Mutex<BTreeMap<String, OutputModeIr>>,
}

/// By hand, so that nothing but the configuration's redacted form is shown.
impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("OpenAiProvider")
            .field("config", &self.config)
            .field("tools", &self.tools)
            .field("downgraded", &*self.downgraded())
            .finish()
    }
}

impl OpenAiProvider {
    /// A provider calling `config.base_url`, running tool calls through `tools`.
    pub fn new(config: OpenAiConfig, tools: Arc<ToolBox>) -> Result<Self, ProviderError> {
        let client = http_client(config.connect_timeout, &config.limits)?;
        Ok(OpenAiProvider {
            endpoint: format!("{}/chat/completions", trim_base_url(&config.base_url)),
            config,
            client,
            tools,
            downgraded: Mutex::new(BTreeMap::new()),
        })
    }

    fn downgraded(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, OutputModeIr>> {
        self.downgraded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The output mode of a call: the model entry's, the configuration's, or the weaker
    /// one this server was found to accept.
    fn output_mode(&self, request: &ModelRequest) -> OutputModeIr {
        let asked = match self.config.structured_output {
            StructuredOutput::Instructions => OutputModeIr::Prompt,
            _ => request.settings.params.output,
        };
        match self.downgraded().get(&request.model) {
            Some(found) => asked.max(*found),
            None => asked,
        }
    }

    /// After `mode` was refused: the next weaker mode, remembered for this model (with a
    /// note in the call's log the first time), or `None` when there is none to try.
    fn fall_back(
        &self,
        request: &ModelRequest,
        mode: OutputModeIr,
        error: &ProviderError,
    ) -> Option<OutputModeIr> {
        if self.config.structured_output == StructuredOutput::Schema {
            return None;
        }
        let next = match mode {
            OutputModeIr::JsonSchema => OutputModeIr::JsonObject,
            OutputModeIr::JsonObject => OutputModeIr::Prompt,
            OutputModeIr::Prompt => return None,
        };
        let mut downgraded = self.downgraded();
        let known = downgraded.get(&request.model).copied();
        if known.is_none_or(|known| known < next) {
            downgraded.insert(request.model.clone(), next);
            request.log.note(format!(
                "the server refused output mode `{}` for model `{}` ({}); using `{}` for the rest of the run",
                mode.as_str(),
                request.model,
                error,
                next.as_str()
            ));
        }
        Some(next)
    }

    /// One model call: requests in a loop, each tool call the model asks for run and its
    /// result sent back, until the model answers or the tool turns run out. One piece: the
    /// loop's state (messages, turns, the tool loop) is shared by every step of it.
    async fn run(&self, request: ModelRequest) -> Result<ModelResponse, ProviderError> {
        let started = tokio::time::Instant::now();
        let schema = wire_schema(&request);
        let mut messages = first_messages(&request);
        if let Some(previous_error) = &request.previous_error {
            messages.push(json!({"role": "user", "content": correction(previous_error)}));
        }
        let tool_definitions: Vec<Value> = request
            .tools
            .iter()
            .filter_map(|name| self.tools.definition(name))
            .map(|definition| {
                json!({
                    "type": "function",
                    "function": {
                        "name": definition.name,
                        "description": definition.description,
                        "parameters": definition.input_schema,
                    }
                })
            })
            .collect();
        let mut tool_loop = ToolLoop::new(&self.tools, &request);
        let mut usage = Usage::default();
        let mut turns = 0u64;
        loop {
            if turns >= tool_loop.max_turns() {
                return Err(too_many_turns(turns));
            }
            turns += 1;
            let tools = ToolOffer {
                definitions: &tool_definitions,
                done: tool_loop.exhausted(),
                choice_pending: tool_loop.choice_pending(),
            };
            let reply = self
                .send(&request, schema.as_ref(), &messages, &tools)
                .await?;
            if let Some(reported) = &reply.usage {
                usage.input_tokens = usage
                    .input_tokens
                    .saturating_add(reported.prompt_tokens.unwrap_or_default());
                usage.output_tokens = usage
                    .output_tokens
                    .saturating_add(reported.completion_tokens.unwrap_or_default());
            }
            let Some(choice) = reply.choices.into_iter().next() else {
                return Err(malformed("no choices", "", self.config.api_key.as_ref()));
            };
            let message = choice.message;
            let tool_calls = message.tool_calls.unwrap_or_default();
            if tool_calls.is_empty() {
                // An answer cut at the token limit is seldom whole JSON: it then fails the
                // contract like any malformed answer, and the trace says why.
                if choice.finish_reason.as_deref() == Some("length") {
                    request.log.note(super::TRUNCATED_NOTE.to_string());
                }
                let text = message
                    .content
                    .map(content_text)
                    .filter(|text| !text.is_empty())
                    .or(message.refusal)
                    .unwrap_or_default();
                return Ok(ModelResponse {
                    output: output_from_text(&text),
                    usage,
                    tool_calls: tool_loop.calls,
                    latency: started.elapsed(),
                });
            }
            // Never `content: null`: some servers (llama-cpp-python) refuse it.
            messages.push(json!({
                "role": "assistant",
                "content": message.content.map(content_text).unwrap_or_default(),
                "tool_calls": tool_calls.iter().map(|call| json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                })).collect::<Vec<_>>(),
            }));
            for call in tool_calls {
                let raw = call.function.arguments;
                let args = if raw.trim().is_empty() {
                    Ok(json!({}))
                } else {
                    serde_json::from_str::<Value>(&raw).map_err(|error| {
                        (
                            Value::String(raw.clone()),
                            format!(
                                "the arguments of this call to `{}` are not valid JSON ({error}); \
                                 the tool did not run: call it again with one JSON object",
                                call.function.name
                            ),
                        )
                    })
                };
                let answer = tool_loop.call(&call.function.name, args).await;
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": answer.content.to_string(),
                }));
            }
        }
    }

    /// One HTTP request; when the server refuses the output mode (any 4xx/5xx whose body
    /// names `response_format`), asks again at once in the next weaker mode, and remembers.
    async fn send(
        &self,
        request: &ModelRequest,
        schema: Option<&Value>,
        messages: &[Value],
        tools: &ToolOffer<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        let mut mode = self.output_mode(request);
        loop {
            let body = self.body(request, schema, mode, messages, tools);
            match self
                .post(&body, idle_timeout(request, &self.config.limits))
                .await
            {
                Err(Refusal::Schema(error)) if schema.is_some() => {
                    match self.fall_back(request, mode, &error) {
                        Some(next) => mode = next,
                        None => return Err(error),
                    }
                }
                other => return other.map_err(Refusal::into_error),
            }
        }
    }

    fn body(
        &self,
        request: &ModelRequest,
        schema: Option<&Value>,
        mode: OutputModeIr,
        messages: &[Value],
        tools: &ToolOffer<'_>,
    ) -> Value {
        let mut all_messages = Vec::with_capacity(messages.len() + 1);
        all_messages.extend(messages.iter().cloned());
        if let Some(schema) = schema
            && mode != OutputModeIr::JsonSchema
        {
            let instructions = json_instructions(schema);
            match all_messages.first_mut() {
                // A `messages: chat` role's system message comes first; one system message
                // (some servers' chat templates take no second one) gets the instructions.
                Some(first) if first["role"] == "system" => {
                    let system = first["content"].as_str().unwrap_or_default();
                    first["content"] = json!(format!("{system}\n\n{instructions}"));
                }
                _ => all_messages.insert(0, json!({"role": "system", "content": instructions})),
            }
        }
        let mut body = json!({
            "model": model_name(&request.model),
            "messages": all_messages,
        });
        match (schema, mode) {
            (Some(schema), OutputModeIr::JsonSchema) => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {
                        "name": schema_name(&request.role),
                        "schema": schema,
                        "strict": self.config.strict,
                    }
                });
            }
            (Some(_), OutputModeIr::JsonObject) => {
                body["response_format"] = json!({"type": "json_object"});
            }
            _ => {}
        }
        let params = &request.settings.params;
        if let Some(temperature) = params.temperature {
            body["temperature"] = json!(temperature);
        }
        if let Some(top_p) = params.top_p {
            body["top_p"] = json!(top_p);
        }
        if let Some(max_tokens) = params.max_tokens {
            body["max_tokens"] = json!(max_tokens);
        }
        if let Some(seed) = params.seed {
            body["seed"] = json!(seed);
        }
        if !tools.definitions.is_empty() {
            body["tools"] = Value::Array(tools.definitions.to_vec());
            body["tool_choice"] = if tools.done {
                json!("none")
            } else if tools.choice_pending {
                match &request.settings.tool_choice {
                    ToolChoiceIr::Auto => json!("auto"),
                    ToolChoiceIr::Required => json!("required"),
                    ToolChoiceIr::Tool(name) => {
                        json!({"type": "function", "function": {"name": name}})
                    }
                }
            } else {
                json!("auto")
            };
        }
        body
    }

    async fn post(&self, body: &Value, idle: Duration) -> Result<ChatResponse, Refusal> {
        let key = self.config.api_key.as_ref();
        let mut builder = self.client.post(&self.endpoint).json(body);
        if let Some(key) = key {
            let mut value =
                reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.expose()))
                    .map_err(|_| {
                        Refusal::Other(ProviderError::Permanent {
                            status: None,
                            message: "the API key is not a valid HTTP header value".to_string(),
                        })
                    })?;
            value.set_sensitive(true);
            builder = builder.header(reqwest::header::AUTHORIZATION, value);
        }
        let response = within_idle(idle, builder.send())
            .await
            .map_err(Refusal::Other)?
            .map_err(|error| Refusal::Other(send_error(&error, key)))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = read_body(response, self.config.limits.max_body_bytes, idle, key)
            .await
            .map_err(Refusal::Other)?;
        if !(200..300).contains(&status) {
            let error = status_error(
                status,
                &headers,
                &text,
                key,
                &self.endpoint,
                &self.config.limits,
            );
            let lower = text.to_ascii_lowercase();
            let names_schema = lower.contains("response_format") || lower.contains("json_schema");
            return Err(if status >= 400 && names_schema {
                Refusal::Schema(error)
            } else {
                Refusal::Other(error)
            });
        }
        serde_json::from_str(&text)
            .map_err(|error| Refusal::Other(malformed(&error.to_string(), &text, key)))
    }
}

impl Provider for OpenAiProvider {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        Box::pin(self.run(request))
    }
}

/// The tools offered in one request, and how the model is to choose among them.
struct ToolOffer<'a> {
    definitions: &'a [Value],
    /// `max_tool_calls` is reached: `tool_choice: none`.
    done: bool,
    /// No tool has been called yet: the role's `tool_choice` applies.
    choice_pending: bool,
}

/// A failed request; `Schema` when the server refused `response_format`.
enum Refusal {
    Schema(ProviderError),
    Other(ProviderError),
}

impl Refusal {
    fn into_error(self) -> ProviderError {
        match self {
            Refusal::Schema(error) | Refusal::Other(error) => error,
        }
    }
}

/// `response_format.json_schema.name` allows `[a-zA-Z0-9_-]{1,64}`: the role's name with
/// anything else replaced.
fn schema_name(role: &str) -> String {
    let name: String = role
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "output".to_string()
    } else {
        name
    }
}

/// A message's content: a string, or (some servers) a list of text parts.
fn content_text(content: Value) -> String {
    match content {
        Value::String(text) => text,
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[derive(Debug, Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: AssistantMessage,
    /// `length` when the answer was cut at the token limit.
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct AssistantMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: String,
    function: WireFunction,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    name: String,
    /// A JSON text; some servers send an object instead.
    #[serde(default, deserialize_with = "arguments_text")]
    arguments: String,
}

fn arguments_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(text) => text,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

#[derive(Debug, Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// The messages a call starts with: the prompt as one user message, or for a `messages:
/// chat` role its system message and conversation.
fn first_messages(request: &ModelRequest) -> Vec<Value> {
    let Some(chat) = &request.chat else {
        return vec![json!({"role": "user", "content": request.prompt})];
    };
    let mut messages = Vec::with_capacity(chat.messages.len() + 1);
    messages.push(json!({"role": "system", "content": chat.system}));
    for message in &chat.messages {
        messages.push(json!({"role": message.speaker.as_str(), "content": message.text}));
    }
    messages
}
