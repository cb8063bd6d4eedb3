//! Fault kinds, the sites of a cassette they apply to, and faults baked into cassette entries (DESIGN §12).
//!
//! A *site* is one recorded thing a fault can hit: a model call, a tool call made inside a
//! model call, a `tool` step's call, or a human answer. A fault is a (site, kind) pair;
//! [`bake`] writes it into a copy of the cassette as an ordinary entry (a call with no
//! answer past its role's timeout, an `error: {status: 429}`, a `raw` that is not JSON...),
//! so a variant is just another cassette and a saved variant replays with `charter
//! replay` like any golden.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use charter_compiler::graph::CompiledSpec;
use serde_json::{Value, json};

use crate::engine::validate::Validator;
use charter_compiler::graph::RoleIr;

use super::mutate;
use crate::formats::scenario::{Cassette, RecordedCall, RecordedError, RecordedToolCall};

/// What goes wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// A model call gives no answer before its role's timeout.
    Timeout,
    /// A model call is refused with HTTP 429.
    RateLimited,
    /// A model call fails with HTTP 500.
    ServerError,
    /// A model answers text that is not JSON.
    Malformed,
    /// A model answers JSON that breaks its role's output contract.
    Contract,
    /// A model's answer is cut at the token limit (`finish_reason: length`): JSON cut short.
    Truncated,
    /// A model refuses: its answer is a refusal, not the contract's JSON.
    Refusal,
    /// A model call is refused with HTTP 401 (a bad or revoked key): not retryable.
    Auth,
    /// A model call is refused with HTTP 400, the prompt past the model's context window:
    /// not retryable.
    ContextLength,
    /// A model call succeeds just under its role's timeout (a `tool` step's, its tool's).
    Slow,
    /// A model answers what an earlier call of the same step answered.
    Stale,
    /// A model answers schema-valid JSON with a wrong value: another candidate id at a
    /// `finalize`, another item's id echoed, an enum (or a yes/no) flipped.
    WrongValue,
    /// A tool (inside a model call, or a `tool` step) fails.
    ToolError,
    /// A tool gives no result before its tool's timeout.
    ToolTimeout,
    /// A model calls a tool with arguments cut short (not JSON): the tool does not run.
    ToolBadArgs,
    /// A person answers an `ask` with no.
    HumanReject,
    /// Nobody answers an `ask`.
    HumanTimeout,
}

impl FaultKind {
    /// Every kind, in the order tables show them.
    pub const ALL: [FaultKind; 17] = [
        FaultKind::Timeout,
        FaultKind::RateLimited,
        FaultKind::ServerError,
        FaultKind::Malformed,
        FaultKind::Contract,
        FaultKind::Truncated,
        FaultKind::Refusal,
        FaultKind::Auth,
        FaultKind::ContextLength,
        FaultKind::Slow,
        FaultKind::Stale,
        FaultKind::WrongValue,
        FaultKind::ToolError,
        FaultKind::ToolTimeout,
        FaultKind::ToolBadArgs,
        FaultKind::HumanReject,
        FaultKind::HumanTimeout,
    ];

    /// The name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Timeout => "timeout",
            FaultKind::RateLimited => "429",
            FaultKind::ServerError => "500",
            FaultKind::Malformed => "malformed",
            FaultKind::Contract => "contract",
            FaultKind::Truncated => "truncated",
            FaultKind::Refusal => "refusal",
            FaultKind::Auth => "auth",
            FaultKind::ContextLength => "context_length",
            FaultKind::Slow => "slow",
            FaultKind::Stale => "stale",
            FaultKind::WrongValue => "wrong_value",
            FaultKind::ToolError => "tool_error",
            FaultKind::ToolTimeout => "tool_timeout",
            FaultKind::ToolBadArgs => "tool_bad_args",
            FaultKind::HumanReject => "human_reject",
            FaultKind::HumanTimeout => "human_timeout",
        }
    }

    /// What the fault does, and what the runtime is expected to do about it (the text of
    /// `charter explain explore`).
    pub fn effect(self) -> &'static str {
        match self {
            FaultKind::Timeout => {
                "the model call gives no answer before its role's `timeout`: traced `timeout`, retried up to the role's `retry`; when the retries run out the step fails"
            }
            FaultKind::RateLimited => {
                "HTTP 429: transient, retried after a backoff up to the role's `retry`; a role with `retry: 0` fails its step at once"
            }
            FaultKind::ServerError => "HTTP 500: transient, retried like a 429",
            FaultKind::Malformed => {
                "the answer is not JSON: a `contract_violation`, the model is re-asked with the error up to `retry`"
            }
            FaultKind::Contract => {
                "the answer breaks the role's output contract (a required field missing): a `contract_violation`, re-asked up to `retry`"
            }
            FaultKind::Truncated => {
                "the answer is cut at the token limit (`finish_reason: length`), its JSON cut short: a `provider_note` says so and the cut text is a `contract_violation`, re-asked up to `retry`"
            }
            FaultKind::Refusal => {
                "the model refuses (\"I'm sorry, but I can't help with that request.\"): not JSON, so a `contract_violation`, re-asked up to `retry`"
            }
            FaultKind::Auth => {
                "HTTP 401 (a bad or revoked API key): permanent, never retried: the step fails"
            }
            FaultKind::ContextLength => {
                "HTTP 400, the prompt past the model's context window: permanent, never retried: the step fails"
            }
            FaultKind::Slow => {
                "the answer comes just under the role's `timeout` (a `tool` step's result just under its tool's): accepted; only the run's wall time grows, within `check --bounds`"
            }
            FaultKind::Stale => {
                "the answer an earlier call of the same step gave comes again (another item's, an earlier round's): valid against the contract, so the flow goes on with it; gates, `each` id checks and invariants must catch what it breaks"
            }
            FaultKind::WrongValue => {
                "a schema-valid but wrong answer (another candidate id at a `finalize`, another item's id echoed, an enum or a yes/no flipped): a `finalize` naming no candidate is re-asked; the rest flows on, and nothing that failed its gate may be delivered"
            }
            FaultKind::ToolError => {
                "a tool fails: a model is told the error and answers anyway; a `tool` step's error reaches the flow"
            }
            FaultKind::ToolTimeout => {
                "a tool gives no result before its tool's `timeout`: traced `tool_timeout`; a model is told, a `tool` step fails"
            }
            FaultKind::ToolBadArgs => {
                "a model calls a tool with arguments cut short (not JSON): the tool does not run, the model is told to call it again with one JSON object"
            }
            FaultKind::HumanReject => {
                "a person answers an `ask` with no: the flow takes the `ask`'s no route (replan, block)"
            }
            FaultKind::HumanTimeout => {
                "nobody answers an `ask` (the person never comes back, the input ends): the run ends `blocked{human_rejected}` saying nobody answered; nothing is delivered without the answer"
            }
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

impl FromStr for FaultKind {
    type Err = String;

    fn from_str(text: &str) -> Result<FaultKind, String> {
        let text = text.trim();
        FaultKind::ALL
            .into_iter()
            .find(|kind| kind.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = FaultKind::ALL.iter().map(|kind| kind.name()).collect();
                let suggestion = charter_compiler::diagnostics::did_you_mean(
                    &text.to_ascii_lowercase(),
                    names.iter().copied(),
                )
                .map(|hint| format!(" ({hint})"))
                .unwrap_or_default();
                format!(
                    "unknown fault `{text}`{suggestion}; the faults are {}",
                    names.join(", ")
                )
            })
    }
}

/// Parses `timeout,429,...` (no duplicates kept; order of [`FaultKind::ALL`]).
pub fn parse_kinds(text: &str) -> Result<Vec<FaultKind>, String> {
    let mut kinds = Vec::new();
    for part in text.split(',').filter(|part| !part.trim().is_empty()) {
        let kind: FaultKind = part.parse()?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        let names: Vec<&str> = FaultKind::ALL.iter().map(|kind| kind.name()).collect();
        return Err(format!(
            "no fault named: give at least one of {}",
            names.join(", ")
        ));
    }
    kinds.sort();
    Ok(kinds)
}

/// One recorded thing a fault can hit, by its index in the cassette.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Site {
    /// `calls[call]`, a model call.
    Call { call: usize },
    /// `calls[call].tool_calls[tool]`.
    ToolCall { call: usize, tool: usize },
    /// `calls[call]`, a `tool` step's call.
    ToolStep { call: usize },
    /// `humans[human]`.
    Human { human: usize },
}

/// A fault at a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fault {
    pub site: Site,
    pub kind: FaultKind,
}

impl Fault {
    /// How a table names the fault: `timeout at {step: execute, item: T-002}`.
    pub fn describe(&self, cassette: &Cassette) -> String {
        let call = |index: usize| {
            cassette.calls.get(index).map_or_else(
                || format!("call #{index}"),
                |call| match call.turn {
                    1 => call.key().to_string(),
                    turn => format!("turn {turn} {}", call.key()),
                },
            )
        };
        let at = match self.site {
            Site::Call { call: index } | Site::ToolStep { call: index } => call(index),
            Site::ToolCall { call: index, tool } => {
                let name = cassette
                    .calls
                    .get(index)
                    .and_then(|call| call.tool_calls.get(tool))
                    .map_or("?", |tool| tool.tool.as_str());
                format!("tool call {} #{} of {}", name, tool + 1, call(index))
            }
            Site::Human { human } => cassette.humans.get(human).map_or_else(
                || format!("human answer #{human}"),
                |human| {
                    let turn = match human.turn {
                        1 => String::new(),
                        turn => format!("turn {turn} "),
                    };
                    format!(
                        "{turn}answer {{step: {}, round: {}, attempt: {}}}",
                        human.step, human.round, human.attempt
                    )
                },
            ),
        };
        format!("{} at {at}", self.kind)
    }

    /// A short, file-name-safe label: `execute-T-002-a1-timeout`.
    pub fn slug(&self, cassette: &Cassette) -> String {
        let call = |index: usize| {
            cassette.calls.get(index).map_or_else(
                || format!("call{index}"),
                |call| {
                    let mut parts = Vec::new();
                    if call.turn != 1 {
                        parts.push(format!("t{}", call.turn));
                    }
                    parts.push(call.step.clone());
                    if call.round != 1 {
                        parts.push(format!("r{}", call.round));
                    }
                    if let Some(item) = &call.item {
                        parts.push(item.clone());
                    }
                    if let Some(role) = &call.role {
                        parts.push(role.clone());
                    }
                    parts.push(format!("a{}", call.attempt));
                    parts.join("-")
                },
            )
        };
        let at = match self.site {
            Site::Call { call: index } | Site::ToolStep { call: index } => call(index),
            Site::ToolCall { call: index, tool } => format!("{}-tool{}", call(index), tool + 1),
            Site::Human { human } => cassette.humans.get(human).map_or_else(
                || format!("human{human}"),
                |human| format!("{}-r{}-a{}", human.step, human.round, human.attempt),
            ),
        };
        let slug = format!("{at}-{}", self.kind);
        slug.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

/// Every site of `cassette`, in cassette order.
pub fn sites(cassette: &Cassette) -> Vec<Site> {
    let mut sites = Vec::new();
    for (index, call) in cassette.calls.iter().enumerate() {
        if call.tool.is_some() {
            sites.push(Site::ToolStep { call: index });
            continue;
        }
        sites.push(Site::Call { call: index });
        for tool in 0..call.tool_calls.len() {
            sites.push(Site::ToolCall { call: index, tool });
        }
    }
    for human in 0..cassette.humans.len() {
        sites.push(Site::Human { human });
    }
    sites
}

/// Whether a fault of `kind` can hit `site`.
pub fn applies(site: Site, kind: FaultKind) -> bool {
    use FaultKind::*;
    match site {
        Site::Call { .. } => matches!(
            kind,
            Timeout
                | RateLimited
                | ServerError
                | Malformed
                | Contract
                | Truncated
                | Refusal
                | Auth
                | ContextLength
                | Slow
                | Stale
                | WrongValue
        ),
        Site::ToolCall { .. } => matches!(kind, ToolError | ToolTimeout | ToolBadArgs),
        Site::ToolStep { .. } => matches!(kind, ToolError | ToolTimeout | Slow),
        Site::Human { .. } => matches!(kind, HumanReject | HumanTimeout),
    }
}

/// The text a malformed answer gives: JSON cut short.
pub const MALFORMED: &str = "{\"explore\": \"the answer was cut off";

/// `cassette` with `faults` written into its entries. A fault that changes nothing (a
/// timeout of a call that already timed out, a no to an answer that was already no, a
/// `stale` answer with no earlier call of its step) leaves the entry as it was;
/// [`changes`] says whether any did.
pub fn bake(spec: &CompiledSpec, cassette: &Cassette, faults: &[Fault]) -> Cassette {
    let mut baked = cassette.clone();
    for fault in faults {
        match fault.site {
            Site::Call { call } => {
                // What the fault needs of the other calls is read before this one changes.
                let earlier = mutate::earlier_answer(cassette, call);
                let context = mutate::Context::of(spec, cassette, call);
                if let Some(entry) = baked.calls.get_mut(call) {
                    fault_call(spec, entry, fault.kind, earlier, &context);
                }
            }
            Site::ToolStep { call } => {
                if let Some(entry) = baked.calls.get_mut(call) {
                    fault_tool_step(spec, entry, fault.kind);
                }
            }
            Site::ToolCall { call, tool } => {
                if let Some(entry) = baked
                    .calls
                    .get_mut(call)
                    .and_then(|call| call.tool_calls.get_mut(tool))
                {
                    fault_tool_call(spec, entry, fault.kind);
                }
            }
            Site::Human { human } => {
                if let Some(entry) = baked.humans.get_mut(human) {
                    entry.answer = match fault.kind {
                        FaultKind::HumanTimeout => Value::Null,
                        _ => {
                            json!({"approved": false, "note": "no (explore fault: the person rejects)"})
                        }
                    };
                }
            }
        }
    }
    baked
}

/// A `tool` step's call with `kind` baked in: an error, no result past its tool's
/// timeout, or its result just under that timeout.
fn fault_tool_step(spec: &CompiledSpec, entry: &mut RecordedCall, kind: FaultKind) {
    let timeout = entry
        .tool
        .as_ref()
        .and_then(|tool| spec.tools.get(tool))
        .and_then(|tool| tool.timeout_ms);
    match kind {
        FaultKind::ToolError => {
            entry.result = None;
            entry.error = Some(error(None, "the tool failed (explore fault)"));
        }
        FaultKind::Slow => {
            if entry.result.is_some()
                && let Some(latency) = just_under(timeout, entry.latency)
            {
                entry.latency = Some(latency);
            }
        }
        _ => {
            entry.result = None;
            entry.error = None;
            entry.latency = Some(past(timeout, entry.latency));
        }
    }
}

/// A tool call inside a model call with `kind` baked in: what the model was told.
fn fault_tool_call(spec: &CompiledSpec, entry: &mut RecordedToolCall, kind: FaultKind) {
    let timeout = spec.tools.get(&entry.tool).and_then(|tool| tool.timeout_ms);
    entry.result = Value::Null;
    match kind {
        FaultKind::ToolError => {
            entry.error = Some(error(None, "the tool failed (explore fault)"));
        }
        FaultKind::ToolBadArgs => {
            // As a provider's tool loop answers arguments that are not JSON: the tool
            // does not run, and the model is told to call it again.
            let cut = mutate::cut_short(&entry.args.to_string());
            let reason = serde_json::from_str::<Value>(&cut).err().map_or_else(
                || "EOF while parsing".to_string(),
                |error| error.to_string(),
            );
            entry.error = Some(error(
                None,
                &format!(
                    "the arguments of this call to `{}` are not valid JSON ({reason}); the tool did not run: call it again with one JSON object",
                    entry.tool
                ),
            ));
            entry.args = Value::String(cut);
            entry.latency = None;
        }
        _ => {
            entry.error = None;
            entry.latency = Some(match timeout {
                Some(ms) => Duration::from_millis(ms),
                None => entry.latency.unwrap_or(Duration::from_secs(1)),
            });
        }
    }
}

/// Whether baking `faults` changed any entry of `cassette`.
pub fn changes(spec: &CompiledSpec, cassette: &Cassette, faults: &[Fault]) -> bool {
    faults.iter().all(|fault| {
        let one = bake(spec, cassette, std::slice::from_ref(fault));
        one != *cassette
            && !(fault.kind == FaultKind::HumanReject
                && matches!(fault.site, Site::Human { human } if cassette.humans.get(human)
                    .is_some_and(|human| human.answer.get("approved") != Some(&Value::Bool(true)))))
    })
}

/// The role a call is made by (a per-item check's judge, else its step's role).
fn call_role<'a>(spec: &'a CompiledSpec, entry: &RecordedCall) -> Option<&'a RoleIr> {
    spec.flow
        .graph
        .node_weights()
        .find(|step| step.name == entry.step)
        .and_then(|step| entry.role.clone().or_else(|| step_role(&step.kind)))
        .and_then(|role| spec.roles.get(&role))
}

fn fault_call(
    spec: &CompiledSpec,
    entry: &mut RecordedCall,
    kind: FaultKind,
    earlier: Option<Value>,
    context: &mutate::Context,
) {
    let role = call_role(spec, entry);
    match kind {
        FaultKind::Timeout => {
            entry.response = None;
            entry.raw = None;
            entry.error = None;
            entry.usage = None;
            entry.latency = Some(past(role.and_then(|role| role.timeout_ms), entry.latency));
        }
        FaultKind::RateLimited
        | FaultKind::ServerError
        | FaultKind::Auth
        | FaultKind::ContextLength => {
            let (status, message) = match kind {
                FaultKind::RateLimited => (429, "HTTP 429 (explore fault)"),
                FaultKind::ServerError => (500, "HTTP 500 (explore fault)"),
                FaultKind::Auth => (401, "Incorrect API key provided (explore fault)"),
                _ => (400, CONTEXT_LENGTH),
            };
            entry.response = None;
            entry.raw = None;
            entry.usage = None;
            entry.tool_calls.clear();
            entry.error = Some(error(Some(status), message));
            entry.latency = Some(Duration::from_secs(1));
        }
        FaultKind::Malformed | FaultKind::Refusal | FaultKind::Truncated => {
            let raw = match kind {
                FaultKind::Malformed => MALFORMED.to_string(),
                FaultKind::Refusal => REFUSAL.to_string(),
                _ => mutate::cut_short(
                    &entry
                        .response
                        .as_ref()
                        .map_or_else(|| MALFORMED.to_string(), Value::to_string),
                ),
            };
            if kind == FaultKind::Truncated {
                entry.notes.push(TRUNCATED_NOTE.to_string());
            }
            entry.response = None;
            entry.error = None;
            entry.raw = Some(raw);
        }
        FaultKind::Contract => {
            let contract = role.map(|role| role.output.as_str()).unwrap_or_default();
            let validator = Validator::for_spec(spec);
            // An empty record breaks most contracts (a required field is missing); one
            // whose fields are all optional gets a list instead of a record.
            let broken = if validator.validate(contract, &json!({})).is_err() {
                json!({})
            } else {
                json!(["explore: not a record"])
            };
            entry.raw = None;
            entry.error = None;
            entry.response = Some(broken);
        }
        FaultKind::Slow => {
            if (entry.response.is_some() || entry.raw.is_some())
                && let Some(latency) =
                    just_under(role.and_then(|role| role.timeout_ms), entry.latency)
            {
                entry.latency = Some(latency);
            }
        }
        FaultKind::Stale => {
            if let Some(answer) = earlier {
                entry.raw = None;
                entry.error = None;
                entry.response = Some(answer);
            }
        }
        FaultKind::WrongValue => {
            if let (Some(role), Some(response)) = (role, entry.response.as_mut()) {
                mutate::wrong_value(spec, &role.output, response, context);
            }
        }
        FaultKind::ToolError
        | FaultKind::ToolTimeout
        | FaultKind::ToolBadArgs
        | FaultKind::HumanReject
        | FaultKind::HumanTimeout => {}
    }
}

/// What a refusing model answers.
pub const REFUSAL: &str = "I'm sorry, but I can't help with that request.";

/// What a 400 for a prompt past the model's context window says (OpenAI's wording).
pub const CONTEXT_LENGTH: &str = "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages. (explore fault)";

/// The note a provider makes of an answer cut at the token limit.
pub const TRUNCATED_NOTE: &str = crate::world::providers::TRUNCATED_NOTE;

/// The role a step's own calls are made by.
fn step_role(kind: &charter_compiler::graph::StepKind) -> Option<String> {
    use charter_compiler::graph::StepKind;
    match kind {
        StepKind::Call { role, .. }
        | StepKind::Each { role, .. }
        | StepKind::Finalize { role, .. } => Some(role.clone()),
        _ => None,
    }
}

/// A latency just past `timeout` (one second), or the recorded one when there is no
/// timeout (the call then fails as timed out after it).
fn past(timeout_ms: Option<u64>, recorded: Option<Duration>) -> Duration {
    match timeout_ms {
        Some(ms) => Duration::from_millis(ms.saturating_add(1000)),
        None => recorded.unwrap_or(Duration::from_secs(1)),
    }
}

/// A latency just under `timeout` (one millisecond), when there is one and the recorded
/// latency is shorter.
fn just_under(timeout_ms: Option<u64>, recorded: Option<Duration>) -> Option<Duration> {
    let under = Duration::from_millis(timeout_ms?.checked_sub(1)?);
    (recorded.unwrap_or(Duration::ZERO) < under).then_some(under)
}

fn error(status: Option<u16>, message: &str) -> RecordedError {
    RecordedError {
        status,
        message: Some(message.to_string()),
        retry_after: None,
    }
}
