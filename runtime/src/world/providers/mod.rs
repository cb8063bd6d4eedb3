//! Live model providers over HTTP (`openai`, `anthropic`), what they share (the API key that never shows, HTTP error mapping, `Retry-After`, the tool loop's bookkeeping), and `Providers`, which routes a call by the provider part of its model.
//!
//! The library reads no environment: the CLI reads `OPENAI_BASE_URL`, `OPENAI_API_KEY`,
//! `ANTHROPIC_API_KEY` and passes them to the constructors, so tests point a provider at
//! a local mock server.
//!
//! **Timeouts and limits.** A provider sets a connect timeout and a total deadline on
//! each HTTP request ([`Limits::request_timeout`]), reads at most
//! [`Limits::max_body_bytes`] of a body (a larger one is a permanent error, found while
//! reading, so an endless body costs at most the limit) and cuts a `Retry-After` to
//! [`Limits::max_retry_after`]. The whole call (every turn of its tool loop) is also
//! bounded by the caller: the scheduler wraps each call in `tokio::time::timeout` with the
//! role's `timeout`, and dropping the future drops the HTTP request (and kills a running
//! tool command's process group).
//!
//! **Errors.** 429, 408 and 5xx answers and connection failures are transient; a 429 or
//! 503 with `Retry-After` (seconds or an HTTP date) is [`ProviderError::Throttled`] and
//! carries the delay; other 4xx are permanent; a 2xx whose body cannot be read as the
//! API's response is transient (a proxy or server glitch). Every message passes through
//! [`ApiKey::redact`], so the key never reaches an error, a trace or a log.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::{Value, json};

use crate::engine::effects::Provider;
use crate::engine::provider::{
    BoxFuture, CallLog, ModelOutput, ModelRequest, ModelResponse, ProviderError, ToolCall,
};
use crate::world::limits::{Limits, describe_bytes};
use crate::world::tools::ToolBox;

pub mod anthropic;
pub mod openai;
pub mod settings;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use settings::LiveSettings;

/// An API key. It has no `Display`, no `Serialize`, and its `Debug` prints
/// `ApiKey(<redacted>)`: the only way to read it is [`ApiKey::expose`], used where the
/// request header is built.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for the request header.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `<redacted>` (a server may echo
    /// what it was sent; an error may quote a header).
    pub fn redact(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_string()
        } else {
            text.replace(&self.0, "<redacted>")
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("ApiKey(<redacted>)")
    }
}

/// How a provider gets an answer that matches the role's output contract.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StructuredOutput {
    /// The API's own mechanism (OpenAI `response_format: json_schema`, an Anthropic tool
    /// the model is made to call); if the server refuses it (a 400 or 422 that names
    /// it), the provider retries once with JSON instructions and uses them from then on.
    #[default]
    Auto,
    /// The API's own mechanism, never falling back.
    Schema,
    /// JSON instructions with the schema in the prompt (servers without structured output).
    Instructions,
}

/// Routes each call to the provider named by its model's `provider:` part
/// (`openai:gpt-4o` -> `openai`).
#[derive(Clone, Default)]
pub struct Providers {
    by_name: BTreeMap<String, Arc<dyn Provider>>,
    /// What runs the calls of `tool` steps.
    tools: Option<Arc<ToolBox>>,
}

impl Providers {
    pub fn new() -> Self {
        Providers::default()
    }

    /// Serves models named `name:...` with `provider`.
    pub fn with(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.by_name.insert(name.into(), provider);
        self
    }

    /// Runs the calls of `tool` steps with `tools` (one attempt each: the scheduler
    /// applies the tool's timeout and retries).
    pub fn with_tools(mut self, tools: Arc<ToolBox>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// The provider names served, in order.
    pub fn names(&self) -> Vec<&str> {
        self.by_name.keys().map(String::as_str).collect()
    }
}

impl fmt::Debug for Providers {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Providers")
            .field("names", &self.names())
            .finish()
    }
}

impl Provider for Providers {
    fn tool_sandbox(&self, tool: &str) -> Option<String> {
        self.tools.as_ref().and_then(|tools| tools.sandbox_of(tool))
    }

    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        let name = request
            .model
            .split_once(':')
            .map_or(request.model.as_str(), |(name, _)| name);
        match self.by_name.get(name) {
            Some(provider) => provider.complete(request),
            None => {
                let message = format!(
                    "no provider `{name}` is configured for model `{}` (configured: {})",
                    request.model,
                    self.names().join(", ")
                );
                Box::pin(async move {
                    Err(ProviderError::Permanent {
                        status: None,
                        message,
                    })
                })
            }
        }
    }

    fn run_tool(
        &self,
        request: crate::engine::provider::ToolRequest,
    ) -> BoxFuture<'_, Result<crate::engine::provider::ToolResponse, ProviderError>> {
        Box::pin(async move {
            let started = tokio::time::Instant::now();
            let result = match &self.tools {
                Some(tools) => tools
                    .call_with(
                        &crate::world::tools::ToolContext::step(&request.key.step),
                        &request.tool,
                        request.args,
                    )
                    .await
                    .map_err(|error| error.to_string()),
                None => Err(format!(
                    "tool `{}` is not available in this run",
                    request.tool
                )),
            };
            Ok(crate::engine::provider::ToolResponse {
                result,
                latency: started.elapsed(),
            })
        })
    }
}

/// The model name a provider sends: `openai:gpt-4o` -> `gpt-4o` (`ollama:llama3:8b` ->
/// `llama3:8b`); a name without a provider part is sent as it is.
pub(crate) fn model_name(model: &str) -> &str {
    model.split_once(':').map_or(model, |(_, name)| name)
}

/// The base URL without a trailing slash, so paths can be appended.
pub(crate) fn trim_base_url(base_url: &str) -> String {
    base_url.trim_end_matches('/').to_string()
}

/// An HTTP client with a connect timeout and a total deadline per request (the caller
/// also bounds whole calls with the role's `timeout`).
pub(crate) fn http_client(
    connect_timeout: Duration,
    limits: &Limits,
) -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .timeout(limits.request_timeout)
        .build()
        .map_err(|error| ProviderError::Permanent {
            status: None,
            message: format!("cannot build the HTTP client: {error}"),
        })
}

/// The error for a request that got no HTTP answer (connection refused or reset, DNS,
/// TLS, a connect timeout): transient, except a request that could not even be built.
pub(crate) fn send_error(error: &reqwest::Error, key: Option<&ApiKey>) -> ProviderError {
    let message = redact(key, &error_chain(error));
    if error.is_builder() {
        ProviderError::Permanent {
            status: None,
            message,
        }
    } else {
        ProviderError::Transient {
            status: None,
            message,
        }
    }
}

/// A response's body as text, read chunk by chunk and given up as soon as it would pass
/// `limit` bytes (a `Content-Length` over the limit is refused before reading): a larger
/// body is a permanent error, since asking again would only bring it again.
pub(crate) async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
    idle: Duration,
    key: Option<&ApiKey>,
) -> Result<String, ProviderError> {
    let status = response.status().as_u16();
    let too_large = || ProviderError::Permanent {
        status: Some(status),
        message: format!(
            "the response body is larger than the limit of {}",
            describe_bytes(limit)
        ),
    };
    if response
        .content_length()
        .is_some_and(|length| length > u64::try_from(limit).unwrap_or(u64::MAX))
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = within_idle(idle, response.chunk())
        .await?
        .map_err(|error| send_error(&error, key))?
    {
        if body.len().saturating_add(chunk.len()) > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(match String::from_utf8(body) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    })
}

/// How long the server may send no byte for this call (DESIGN §15): its model entry's
/// `idle_timeout`, or the limits' default.
pub(crate) fn idle_timeout(request: &ModelRequest, limits: &Limits) -> Duration {
    request
        .settings
        .params
        .idle_timeout_ms
        .map_or(limits.idle_timeout, Duration::from_millis)
}

/// `future`'s output, unless the server sends nothing for `idle`: then a timeout, which a
/// retry may help (a silent connection is dropped, not waited on until the wall budget).
pub(crate) async fn within_idle<T>(
    idle: Duration,
    future: impl std::future::Future<Output = T>,
) -> Result<T, ProviderError> {
    tokio::time::timeout(idle, future)
        .await
        .map_err(|_| ProviderError::TimedOut { after: idle })
}

/// An error and its sources, `a: b: c` (reqwest's own message hides the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

pub(crate) fn redact(key: Option<&ApiKey>, text: &str) -> String {
    match key {
        Some(key) => key.redact(text),
        None => text.to_string(),
    }
}

/// The most of an error body quoted in a message, in characters.
const BODY_EXCERPT: usize = 300;

/// The error for an HTTP answer with a non-success status from `url`. A 404 names the
/// URL (a base URL without its version path is the usual cause).
pub(crate) fn status_error(
    status: u16,
    headers: &HeaderMap,
    body: &str,
    key: Option<&ApiKey>,
    url: &str,
    limits: &Limits,
) -> ProviderError {
    let mut message = redact(key, &error_message(body));
    if status == 404 {
        let hint = if url.ends_with("/chat/completions") {
            "OpenAI-compatible servers usually serve under `/v1`: set OPENAI_BASE_URL to e.g. \
             `http://localhost:8080/v1`"
        } else {
            "the Anthropic base URL is given without `/v1` (`/v1/messages` is appended)"
        };
        message = format!("{url} answered 404 ({message}); is the base URL right? {hint}");
    }
    if (status == 429 || status == 503)
        && let Some(retry_after) = retry_after(headers, SystemTime::now())
    {
        return ProviderError::Throttled {
            status,
            // A server cannot park a run for an hour: the wait is cut to the cap.
            retry_after: retry_after.min(limits.max_retry_after),
            message,
        };
    }
    ProviderError::from_status(status, message)
}

/// What an error body says: the `error.message` both APIs use (or FastAPI's `detail`),
/// else the body's start; shortened, with the server's file paths left out (a traceback
/// tells the user nothing and tells everyone how the server is laid out).
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|value| {
        value
            .pointer("/error/message")
            .or_else(|| value.get("message"))
            .or_else(|| value.get("error"))
            .or_else(|| value.get("detail"))
            .and_then(Value::as_str)
    });
    let text = match message {
        Some(message) => message.to_string(),
        None => {
            let body = body.trim();
            if body.is_empty() {
                return "(empty body)".to_string();
            }
            body.to_string()
        }
    };
    excerpt(&strip_paths(&text), BODY_EXCERPT)
}

/// `text` with every file path (two or more components, Unix or Windows) replaced by
/// `<path>`; URLs are kept.
pub(crate) fn strip_paths(text: &str) -> String {
    static PATH: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let pattern = PATH.get_or_init(|| {
        regex::Regex::new(r#"(^|[\s"'(=,\[])((?:[A-Za-z]:)?(?:[/\\][\w.@+-]+){2,}[/\\]?)"#).ok()
    });
    match pattern {
        Some(pattern) => pattern.replace_all(text, "${1}<path>").into_owned(),
        None => text.to_string(),
    }
}

/// The first `max` characters of `text`, with `…` when cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    let mut cut: String = text.chars().take(max).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// The error for a success status whose body is not the API's response.
pub(crate) fn malformed(what: &str, body: &str, key: Option<&ApiKey>) -> ProviderError {
    ProviderError::Transient {
        status: None,
        message: redact(
            key,
            &format!(
                "malformed response body ({what}): {}",
                excerpt(body.trim(), BODY_EXCERPT)
            ),
        ),
    }
}

/// The delay a `Retry-After` (or OpenAI's `retry-after-ms`) header asks for, as of `now`:
/// a number of seconds, or an HTTP date (a date in the past is no delay).
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(millis) = headers
        .get("retry-after-ms")
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|millis| millis.is_finite() && *millis >= 0.0)
    {
        return Some(Duration::from_secs_f64(millis / 1000.0));
    }
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = text.parse::<f64>()
        && seconds.is_finite()
        && seconds >= 0.0
    {
        return Some(Duration::from_secs_f64(seconds));
    }
    let at = parse_http_date(text)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// An HTTP date in the preferred IMF-fixdate form (`Sun, 06 Nov 1994 08:49:37 GMT`), as
/// seconds since the Unix epoch.
pub fn parse_http_date(text: &str) -> Option<u64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_weekday, day, month, year, time, zone] = parts.as_slice() else {
        return None;
    };
    if *zone != "GMT" && *zone != "UTC" {
        return None;
    }
    let day: u64 = day.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|name| name.eq_ignore_ascii_case(month))? as u64
        + 1;
    let year: u64 = year.parse().ok()?;
    let mut clock = time.split(':').map(|part| part.parse::<u64>().ok());
    let (Some(Some(hours)), Some(Some(minutes)), Some(Some(seconds)), None) =
        (clock.next(), clock.next(), clock.next(), clock.next())
    else {
        return None;
    };
    if !(1..=31).contains(&day) || year < 1970 || hours > 23 || minutes > 59 || seconds > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), for years from 1970.
    let (year, month) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let day_of_year = (153 * month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = (era * 146_097 + day_of_era).checked_sub(719_468)?;
    Some(days * 86_400 + hours * 3600 + minutes * 60 + seconds)
}

/// The instructions that ask for JSON when the server cannot enforce the schema.
pub(crate) fn json_instructions(schema: &Value) -> String {
    format!(
        "Answer with one JSON value and nothing else (no prose, no Markdown fence). It must \
         match this JSON Schema:\n{}",
        serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string())
    )
}

/// The role's output schema as sent to a model (`None` when the role has none).
pub(crate) fn wire_schema(request: &ModelRequest) -> Option<Value> {
    if request.output_schema.is_null() {
        return None;
    }
    let mut schema = (*request.output_schema).clone();
    crate::world::tools::strip_schema_keyword(&mut schema);
    Some(schema)
}

/// A model's final text: JSON when it parses as such (a Markdown fence tolerated), else
/// the text itself, for the caller's contract check to report.
pub(crate) fn output_from_text(text: &str) -> ModelOutput {
    match crate::engine::validate::parse_output(text) {
        Ok(value) => ModelOutput::Json(value),
        Err(_) => ModelOutput::Text(text.to_string()),
    }
}

/// The note a provider makes of an answer cut at the model's token limit (OpenAI's
/// `finish_reason: length`); the cut text itself is then checked like any answer.
pub const TRUNCATED_NOTE: &str = "the answer was cut at the model's token limit (finish_reason `length`); raise the role's `max_tokens` or ask for a shorter answer";

/// How many model turns a call may take when the role sets no `max_tool_calls`.
pub const DEFAULT_MAX_TURNS: u64 = 16;

/// The bookkeeping of one call's tool loop: refuses tools outside the whitelist or past
/// `max_tool_calls`, runs the others through the tool box, and records every call the
/// model made, in order, with what it was answered. The scheduler re-derives which calls
/// were denied from the same rules (whitelist, then the count of permitted calls), so it
/// records `tool_denied` for exactly the calls refused here.
pub(crate) struct ToolLoop<'a> {
    /// The role's `permit` rules and its `meta`: a call breaking a rule is refused unrun.
    settings: &'a crate::engine::provider::CallSettings,
    tools: &'a ToolBox,
    allowed: &'a [String],
    limit: Option<u64>,
    permitted: u64,
    log: &'a CallLog,
    /// Who the tools are told calls them: the role and its step.
    context: crate::world::tools::ToolContext,
    pub(crate) calls: Vec<ToolCall>,
}

/// What the model is told a tool call gave.
pub(crate) struct ToolAnswer {
    pub(crate) content: Value,
    pub(crate) is_error: bool,
}

impl<'a> ToolLoop<'a> {
    pub(crate) fn new(tools: &'a ToolBox, request: &'a ModelRequest) -> Self {
        ToolLoop {
            tools,
            settings: request.settings.as_ref(),
            allowed: &request.tools,
            limit: request.max_tool_calls,
            permitted: 0,
            log: &request.log,
            context: crate::world::tools::ToolContext::role(&request.role, &request.key.step),
            calls: Vec::new(),
        }
    }

    /// The role's `tool_choice` still binds: no tool has been called yet in this call.
    pub(crate) fn choice_pending(&self) -> bool {
        self.calls.is_empty()
    }

    /// No further tool call may be made (the model must answer now).
    pub(crate) fn exhausted(&self) -> bool {
        self.limit.is_some_and(|limit| self.permitted >= limit)
    }

    /// The most model turns this call may take.
    pub(crate) fn max_turns(&self) -> u64 {
        match self.limit {
            // Each permitted call may take a turn of its own, then the final answer, and
            // one turn in which the model is told it is out of calls.
            Some(limit) => limit.saturating_add(2),
            None => DEFAULT_MAX_TURNS,
        }
    }

    /// Handles one tool call: `args` is the parsed arguments, or the reason they could
    /// not be parsed (with the raw text recorded as the arguments).
    pub(crate) async fn call(
        &mut self,
        tool: &str,
        args: Result<Value, (Value, String)>,
    ) -> ToolAnswer {
        let whitelisted = self.allowed.iter().any(|allowed| allowed == tool);
        let mut latency = None;
        let (recorded_args, outcome) = if !whitelisted {
            let allowed = if self.allowed.is_empty() {
                "this role may call no tools".to_string()
            } else {
                format!("it may call only {}", self.allowed.join(", "))
            };
            let args = match args {
                Ok(args) | Err((args, _)) => args,
            };
            (
                args,
                Err(format!(
                    "tool `{tool}` is not allowed for this role ({allowed}); the call was refused"
                )),
            )
        } else if let Some(rule) = args.as_ref().ok().and_then(|args| {
            crate::engine::permit::refused_by(
                &self.settings.permits,
                tool,
                args,
                &self.settings.meta,
                &self.settings.inputs,
            )
        }) {
            let args = match args {
                Ok(args) | Err((args, _)) => args,
            };
            (
                args,
                Err(format!(
                    "tool `{tool}` was refused: its arguments do not meet `{rule}`; the call was not made"
                )),
            )
        } else if self.exhausted() {
            let args = match args {
                Ok(args) | Err((args, _)) => args,
            };
            (
                args,
                Err(format!(
                    "the limit of {} tool call(s) is reached; answer now without tools",
                    self.limit.unwrap_or_default()
                )),
            )
        } else {
            self.permitted += 1;
            match args {
                Ok(args) => {
                    self.log.tool_started(tool);
                    let (result, ran) = self
                        .tools
                        .call_limited_with(&self.context, tool, args.clone())
                        .await;
                    latency = Some(ran);
                    (args, result.map_err(|error| error.to_string()))
                }
                Err((raw, reason)) => (raw, Err(reason)),
            }
        };
        let answer = match outcome {
            Ok(result) => ToolAnswer {
                content: result,
                is_error: false,
            },
            Err(message) => ToolAnswer {
                content: json!({ "error": message }),
                is_error: true,
            },
        };
        let call = ToolCall {
            tool: tool.to_string(),
            args: recorded_args,
            result: answer.content.clone(),
            latency,
        };
        self.log.tool_finished(call.clone(), !answer.is_error);
        self.calls.push(call);
        answer
    }
}

/// The error for a model that still calls tools after the call's last allowed turn.
pub(crate) fn too_many_turns(turns: u64) -> ProviderError {
    ProviderError::Permanent {
        status: None,
        message: format!("the model was still calling tools after {turns} turns"),
    }
}

#[cfg(test)]
mod tests;
