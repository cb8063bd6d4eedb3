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
use crate::formats::scenario::{Cassette, RecordedCall, RecordedError};

/// What goes wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// A model call gives no answer before its role's timeout; a tool gives none before
    /// its tool's.
    Timeout,
    /// A model call is refused with HTTP 429.
    RateLimited,
    /// A model call fails with HTTP 500.
    ServerError,
    /// A model answers text that is not JSON.
    Malformed,
    /// A model answers JSON that breaks its role's output contract.
    Contract,
    /// A tool (inside a model call, or a `tool` step) fails.
    ToolError,
    /// A person answers an `ask` with no.
    HumanReject,
}

impl FaultKind {
    /// Every kind, in the order tables show them.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::Timeout,
        FaultKind::RateLimited,
        FaultKind::ServerError,
        FaultKind::Malformed,
        FaultKind::Contract,
        FaultKind::ToolError,
        FaultKind::HumanReject,
    ];

    /// The name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Timeout => "timeout",
            FaultKind::RateLimited => "429",
            FaultKind::ServerError => "500",
            FaultKind::Malformed => "malformed",
            FaultKind::Contract => "contract",
            FaultKind::ToolError => "tool_error",
            FaultKind::HumanReject => "human_reject",
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
                let suggestion = names
                    .iter()
                    .copied()
                    .filter(|name| strsim_like(name, text))
                    .map(|name| format!(" (did you mean `{name}`?)"))
                    .next()
                    .unwrap_or_default();
                format!(
                    "unknown fault `{text}`{suggestion}; the faults are {}",
                    names.join(", ")
                )
            })
    }
}

/// A cheap "close enough" for did-you-mean on seven fixed names: same first letter and a
/// length within two, or one contains the other.
fn strsim_like(name: &str, text: &str) -> bool {
    if text.is_empty() {
        return false;
    }
    let lower = text.to_ascii_lowercase();
    name.contains(&lower)
        || lower.contains(name)
        || (name.chars().next() == lower.chars().next() && name.len().abs_diff(lower.len()) <= 2)
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
        return Err("no fault named: give at least one of timeout, 429, 500, malformed, contract, tool_error, human_reject".to_string());
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
    match site {
        Site::Call { .. } => matches!(
            kind,
            FaultKind::Timeout
                | FaultKind::RateLimited
                | FaultKind::ServerError
                | FaultKind::Malformed
                | FaultKind::Contract
        ),
        Site::ToolCall { .. } | Site::ToolStep { .. } => {
            matches!(kind, FaultKind::Timeout | FaultKind::ToolError)
        }
        Site::Human { .. } => kind == FaultKind::HumanReject,
    }
}

/// The text a malformed answer gives: JSON cut short.
pub const MALFORMED: &str = "{\"explore\": \"the answer was cut off";

/// `cassette` with `faults` written into its entries. A fault that changes nothing (a
/// timeout of a call that already timed out, a no to an answer that was already no) leaves
/// the entry as it was; [`changes`] says whether any did.
pub fn bake(spec: &CompiledSpec, cassette: &Cassette, faults: &[Fault]) -> Cassette {
    let mut baked = cassette.clone();
    for fault in faults {
        match fault.site {
            Site::Call { call } => {
                if let Some(entry) = baked.calls.get_mut(call) {
                    fault_call(spec, entry, fault.kind);
                }
            }
            Site::ToolStep { call } => {
                if let Some(entry) = baked.calls.get_mut(call) {
                    let timeout = entry
                        .tool
                        .as_ref()
                        .and_then(|tool| spec.tools.get(tool))
                        .and_then(|tool| tool.timeout_ms);
                    entry.result = None;
                    match fault.kind {
                        FaultKind::ToolError => {
                            entry.error = Some(error(None, "the tool failed (explore fault)"));
                        }
                        _ => {
                            entry.error = None;
                            entry.latency = Some(past(timeout, entry.latency));
                        }
                    }
                }
            }
            Site::ToolCall { call, tool } => {
                if let Some(entry) = baked
                    .calls
                    .get_mut(call)
                    .and_then(|call| call.tool_calls.get_mut(tool))
                {
                    let timeout = spec.tools.get(&entry.tool).and_then(|tool| tool.timeout_ms);
                    entry.result = Value::Null;
                    match fault.kind {
                        FaultKind::ToolError => {
                            entry.error = Some(error(None, "the tool failed (explore fault)"));
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
            }
            Site::Human { human } => {
                if let Some(entry) = baked.humans.get_mut(human) {
                    entry.answer = json!({"approved": false, "note": "no (explore fault: the person rejects)"});
                }
            }
        }
    }
    baked
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

fn fault_call(spec: &CompiledSpec, entry: &mut RecordedCall, kind: FaultKind) {
    let role = spec
        .flow
        .graph
        .node_weights()
        .find(|step| step.name == entry.step)
        .and_then(|step| entry.role.clone().or_else(|| step_role(&step.kind)))
        .and_then(|role| spec.roles.get(&role));
    match kind {
        FaultKind::Timeout => {
            entry.response = None;
            entry.raw = None;
            entry.error = None;
            entry.usage = None;
            entry.latency = Some(past(role.and_then(|role| role.timeout_ms), entry.latency));
        }
        FaultKind::RateLimited | FaultKind::ServerError => {
            let status = if kind == FaultKind::RateLimited {
                429
            } else {
                500
            };
            entry.response = None;
            entry.raw = None;
            entry.usage = None;
            entry.tool_calls.clear();
            entry.error = Some(error(
                Some(status),
                &format!("HTTP {status} (explore fault)"),
            ));
            entry.latency = Some(Duration::from_secs(1));
        }
        FaultKind::Malformed => {
            entry.response = None;
            entry.error = None;
            entry.raw = Some(MALFORMED.to_string());
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
        FaultKind::ToolError | FaultKind::HumanReject => {}
    }
}

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

fn error(status: Option<u16>, message: &str) -> RecordedError {
    RecordedError {
        status,
        message: Some(message.to_string()),
        retry_after: None,
    }
}
