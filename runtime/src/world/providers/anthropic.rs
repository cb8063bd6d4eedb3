//! The `anthropic` provider: the Messages API with tool use, structured output through a tool the model is made to call, usage, and the shared error and retry behaviour.
//!
//! One [`Provider::complete`] is a loop of requests to `{base_url}/v1/messages` with
//! `x-api-key` and `anthropic-version: 2023-06-01`. Structured output
//! ([`StructuredOutput::Auto`] or `Schema`): the role's output schema is offered as one
//! more tool, [`OUTPUT_TOOL`], and `tool_choice` makes the model call a tool (that one
//! when the role has no tools of its own, or once `max_tool_calls` is reached); the
//! arguments of its call are the output. With `Instructions`, the schema goes into the
//! system prompt and the final text is the output. A `messages: chat` role's system
//! message is the top-level `system` (before the instructions), and its conversation the
//! first `messages`. A `tool_use` block of any other tool
//! is run through the [`ToolBox`] (or refused) and answered with a `tool_result` block.

use std::fmt;
use std::sync::Arc;
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
    BoxFuture, ModelOutput, ModelRequest, ModelResponse, ProviderError, Usage, correction,
};
use crate::world::limits::Limits;
use crate::world::tools::ToolBox;

/// The default base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// The API version sent as `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The tool whose arguments are the role's output, in structured-output mode. (A role
/// whose own tool has this name gets JSON instructions instead.)
pub const OUTPUT_TOOL: &str = "charter_output";

/// How to reach the Messages API.
#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    /// Without the version path, e.g. `https://api.anthropic.com`; `/v1/messages` is
    /// appended.
    pub base_url: String,
    /// Sent as `x-api-key`.
    pub api_key: Option<ApiKey>,
    /// `Auto` and `Schema` both use [`OUTPUT_TOOL`] (every Messages API server has tools).
    pub structured_output: StructuredOutput,
    /// `max_tokens` of each request (the API requires it).
    pub max_tokens: u64,
    /// How long to wait for a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// The body size limit, the total deadline of each request and the `Retry-After` cap.
    pub limits: Limits,
}

impl AnthropicConfig {
    pub fn new(base_url: impl Into<String>, api_key: Option<ApiKey>) -> Self {
        AnthropicConfig {
            base_url: base_url.into(),
            api_key,
            structured_output: StructuredOutput::Auto,
            max_tokens: 4096,
            connect_timeout: Duration::from_secs(10),
            limits: Limits::default(),
        }
    }
}

/// A provider for the Anthropic Messages API.
pub struct AnthropicProvider {
    config: AnthropicConfig,
    endpoint: String,
    client: reqwest::Client,
    tools: Arc<ToolBox>,
}

/// By hand, so that nothing but the configuration's redacted form is shown.
impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("AnthropicProvider")
            .field("config", &self.config)
            .field("tools", &self.tools)
            .finish()
    }
}

impl AnthropicProvider {
    /// A provider calling `config.base_url`, running tool calls through `tools`.
    pub fn new(config: AnthropicConfig, tools: Arc<ToolBox>) -> Result<Self, ProviderError> {
        let client = http_client(config.connect_timeout, &config.limits)?;
        Ok(AnthropicProvider {
            endpoint: format!("{}/v1/messages", trim_base_url(&config.base_url)),
            config,
            client,
            tools,
        })
    }

    /// One call: a loop of turns, each sending the conversation so far, until the model
    /// answers (or runs out of turns). The tools the model calls on the way are run and
    /// answered, and the next turn sends the answers.
    async fn run(&self, request: ModelRequest) -> Result<ModelResponse, ProviderError> {
        let started = tokio::time::Instant::now();
        let offer = self.offer(&request);
        let mut messages = first_messages(&request);
        let mut tool_loop = ToolLoop::new(&self.tools, &request);
        let mut usage = Usage::default();
        let mut turns = 0u64;
        loop {
            if turns >= tool_loop.max_turns() {
                return Err(too_many_turns(turns));
            }
            turns += 1;
            let body = self.turn_body(&request, &offer, &messages, &tool_loop);
            let reply = self
                .post(&body, idle_timeout(&request, &self.config.limits))
                .await?;
            add_usage(&mut usage, reply.usage.as_ref());
            let tool_uses = match read_turn(&reply.content, offer.output_tool) {
                Turn::Answer(output) => {
                    return Ok(ModelResponse {
                        output,
                        usage,
                        tool_calls: tool_loop.calls,
                        latency: started.elapsed(),
                    });
                }
                Turn::ToolUses(tool_uses) => tool_uses,
            };
            let results = answer_tool_uses(&mut tool_loop, &tool_uses).await;
            messages.push(json!({"role": "assistant", "content": reply.content}));
            messages.push(json!({"role": "user", "content": results}));
        }
    }

    /// What every turn of `request` offers the model alike: the role's tools, the
    /// output tool when the output comes as a call of it, and otherwise the JSON
    /// instructions as the system prompt.
    fn offer(&self, request: &ModelRequest) -> Offer {
        let schema = wire_schema(request);
        let output_tool = schema.is_some()
            && self.config.structured_output != StructuredOutput::Instructions
            && request.settings.params.output != OutputModeIr::Prompt
            && !request.tools.iter().any(|tool| tool == OUTPUT_TOOL);
        let mut tool_definitions: Vec<Value> = request
            .tools
            .iter()
            .filter_map(|name| self.tools.definition(name))
            .map(|definition| {
                json!({
                    "name": definition.name,
                    "description": definition.description,
                    "input_schema": definition.input_schema,
                })
            })
            .collect();
        let own_tools = !tool_definitions.is_empty();
        let mut system = None;
        match (&schema, output_tool) {
            (Some(schema), true) => tool_definitions.push(json!({
                "name": OUTPUT_TOOL,
                "description": "Give your final answer: call this tool once, with the answer as its input.",
                "input_schema": schema,
            })),
            (Some(schema), false) => system = Some(json_instructions(schema)),
            (None, _) => {}
        }
        Offer {
            tool_definitions,
            own_tools,
            output_tool,
            system,
        }
    }

    /// The body of one turn's request: the model, its parameters, the conversation so
    /// far, and the tools offered in this turn with the `tool_choice` that applies now.
    fn turn_body(
        &self,
        request: &ModelRequest,
        offer: &Offer,
        messages: &[Value],
        tool_loop: &ToolLoop<'_>,
    ) -> Value {
        let tools_done = tool_loop.exhausted();
        let params = &request.settings.params;
        let mut body = json!({
            "model": model_name(&request.model),
            "max_tokens": params.max_tokens.unwrap_or(self.config.max_tokens),
            "messages": messages,
        });
        // The Messages API takes no seed.
        if let Some(temperature) = params.temperature {
            body["temperature"] = json!(temperature);
        }
        if let Some(top_p) = params.top_p {
            body["top_p"] = json!(top_p);
        }
        if let Some(system) = system_text(request, offer.system.as_deref()) {
            body["system"] = json!(system);
        }
        // A role's `tool_choice` binds until the model has called a tool: until then
        // the output tool is not offered, so the model cannot answer instead.
        let forced = match &request.settings.tool_choice {
            _ if !offer.own_tools || tools_done || !tool_loop.choice_pending() => None,
            ToolChoiceIr::Auto => None,
            ToolChoiceIr::Required => Some(json!({"type": "any"})),
            ToolChoiceIr::Tool(name) => Some(json!({"type": "tool", "name": name})),
        };
        if let Some(forced) = forced {
            let own: Vec<Value> = offer
                .tool_definitions
                .iter()
                .filter(|tool| tool.get("name").and_then(Value::as_str) != Some(OUTPUT_TOOL))
                .cloned()
                .collect();
            body["tools"] = Value::Array(own);
            body["tool_choice"] = forced;
        } else if !offer.tool_definitions.is_empty() {
            body["tools"] = Value::Array(offer.tool_definitions.clone());
            body["tool_choice"] = match (offer.output_tool, offer.own_tools && !tools_done) {
                (true, true) => json!({"type": "any"}),
                (true, false) => json!({"type": "tool", "name": OUTPUT_TOOL}),
                (false, true) => json!({"type": "auto"}),
                (false, false) => json!({"type": "none"}),
            };
        }
        body
    }

    async fn post(&self, body: &Value, idle: Duration) -> Result<MessagesResponse, ProviderError> {
        let key = self.config.api_key.as_ref();
        let mut builder = self
            .client
            .post(&self.endpoint)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(body);
        if let Some(key) = key {
            let mut value = reqwest::header::HeaderValue::from_str(key.expose()).map_err(|_| {
                ProviderError::Permanent {
                    status: None,
                    message: "the API key is not a valid HTTP header value".to_string(),
                }
            })?;
            value.set_sensitive(true);
            builder = builder.header("x-api-key", value);
        }
        let response = within_idle(idle, builder.send())
            .await?
            .map_err(|error| send_error(&error, key))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = read_body(response, self.config.limits.max_body_bytes, idle, key).await?;
        if !(200..300).contains(&status) {
            return Err(status_error(
                status,
                &headers,
                &text,
                key,
                &self.endpoint,
                &self.config.limits,
            ));
        }
        serde_json::from_str(&text).map_err(|error| malformed(&error.to_string(), &text, key))
    }
}

impl Provider for AnthropicProvider {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        Box::pin(self.run(request))
    }
}

/// What every turn of one call offers the model alike ([`AnthropicProvider::offer`]).
struct Offer {
    /// The definitions of the role's tools, then the output tool's when `output_tool`.
    tool_definitions: Vec<Value>,
    /// The role has tools of its own (besides the output tool).
    own_tools: bool,
    /// The output comes as the arguments of a call of [`OUTPUT_TOOL`].
    output_tool: bool,
    /// The JSON instructions, when the output comes as text.
    system: Option<String>,
}

/// What one turn's reply comes to.
enum Turn<'a> {
    /// The model answered (by calling the output tool, or with text): the call is done.
    Answer(ModelOutput),
    /// The model called tools: its `tool_use` blocks, to run and answer.
    ToolUses(Vec<&'a Value>),
}

/// The messages a call starts with: the prompt as one user message, or for a `messages:
/// chat` role the conversation's user and assistant messages (its system message is the
/// request's top-level `system`); the last user message also carries the correction of
/// the previous attempt's answer if there is one.
fn first_messages(request: &ModelRequest) -> Vec<Value> {
    let mut messages = Vec::new();
    let current = match &request.chat {
        None => request.prompt.as_str(),
        Some(chat) => {
            let (last, earlier) = chat
                .messages
                .split_last()
                .map_or(("", &[][..]), |(last, earlier)| {
                    (last.text.as_str(), earlier)
                });
            for message in earlier {
                messages.push(json!({
                    "role": message.speaker.as_str(),
                    "content": [{"type": "text", "text": message.text}],
                }));
            }
            last
        }
    };
    let mut user_content = vec![json!({"type": "text", "text": current})];
    if let Some(previous_error) = &request.previous_error {
        user_content.push(json!({"type": "text", "text": correction(previous_error)}));
    }
    messages.push(json!({"role": "user", "content": user_content}));
    messages
}

/// The request's top-level `system`: a `messages: chat` role's system message and the
/// JSON instructions, either or both.
fn system_text(request: &ModelRequest, instructions: Option<&str>) -> Option<String> {
    match (
        request.chat.as_ref().map(|chat| chat.system.as_str()),
        instructions,
    ) {
        (Some(system), Some(instructions)) => Some(format!("{system}\n\n{instructions}")),
        (Some(system), None) => Some(system.to_string()),
        (None, instructions) => instructions.map(str::to_string),
    }
}

/// Adds the tokens a turn's reply reports to the call's usage.
fn add_usage(usage: &mut Usage, reported: Option<&MessagesUsage>) {
    if let Some(reported) = reported {
        usage.input_tokens = usage
            .input_tokens
            .saturating_add(reported.input_tokens.unwrap_or_default());
        usage.output_tokens = usage
            .output_tokens
            .saturating_add(reported.output_tokens.unwrap_or_default());
    }
}

/// Reads a turn's content blocks: a call of the output tool (when `output_tool`) is the
/// answer, as is the text of a turn that calls no tool; otherwise the model's
/// `tool_use` blocks are to be answered.
fn read_turn(content: &[Value], output_tool: bool) -> Turn<'_> {
    let mut text = String::new();
    let mut tool_uses = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                text.push_str(block.get("text").and_then(Value::as_str).unwrap_or(""));
            }
            Some("tool_use") => tool_uses.push(block),
            _ => {}
        }
    }
    let output_call = tool_uses.iter().find(|block| {
        output_tool && block.get("name").and_then(Value::as_str) == Some(OUTPUT_TOOL)
    });
    if let Some(output_call) = output_call {
        let input = output_call.get("input").cloned().unwrap_or(Value::Null);
        return Turn::Answer(ModelOutput::Json(input));
    }
    if tool_uses.is_empty() {
        return Turn::Answer(output_from_text(&text));
    }
    Turn::ToolUses(tool_uses)
}

/// Runs (or refuses) each `tool_use` block through the tool loop, in order, and gives
/// back the `tool_result` blocks that answer them.
async fn answer_tool_uses(tool_loop: &mut ToolLoop<'_>, tool_uses: &[&Value]) -> Vec<Value> {
    let mut results = Vec::with_capacity(tool_uses.len());
    for block in tool_uses {
        let id = block.get("id").and_then(Value::as_str).unwrap_or_default();
        let name = block
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let args = block.get("input").cloned().unwrap_or_else(|| json!({}));
        let answer = tool_loop.call(name, Ok(args)).await;
        let mut result = json!({
            "type": "tool_result",
            "tool_use_id": id,
            "content": answer.content.to_string(),
        });
        if answer.is_error {
            result["is_error"] = json!(true);
        }
        results.push(result);
    }
    results
}

#[derive(Debug, Deserialize)]
struct MessagesResponse {
    content: Vec<Value>,
    #[serde(default)]
    usage: Option<MessagesUsage>,
}

#[derive(Debug, Deserialize)]
struct MessagesUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}
