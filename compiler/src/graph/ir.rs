//! The IR types: a compiled spec as plain, owned, serializable data (the runtime's only view of the language).
//!
//! Nothing here borrows from or names an AST type. Every default the language defines
//! (`retry: 2 backoff 1s`, `no_progress 2`, concurrency 1, check retries 0) is resolved
//! into an explicit value, so the runtime never has to know a default. Maps are
//! `BTreeMap`s and lists keep source order, so `serde_json` output is deterministic.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};

use crate::diagnostics::Span;

/// The version of the IR's serialized form; it changes when a change would break a reader.
pub const IR_VERSION: u32 = 1;

/// A compiled spec: everything the runtime needs to execute it, and nothing else.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompiledSpec {
    /// [`IR_VERSION`] of the compiler that wrote it.
    pub ir_version: u32,
    /// The `spec NAME`.
    pub name: String,
    /// The `version "X"` string.
    pub version: String,
    /// The doc block after the header, if any.
    pub doc: Option<String>,
    /// The semantic hash of the spec (DESIGN §4 "Frozen plan", §18): `sha256:<hex>` of this
    /// compiled form, not of the text, so a comment or a change of layout moves no hash,
    /// snapshot or recording (`hash::semantic_hash`).
    pub spec_hash: String,
    /// The contract of `request`, the run's input (the entry role's input, or the
    /// contract named `Request`); `None` when nothing decides it.
    pub request: Option<String>,
    /// `sha256:<hex>` of every file a role reads (imported role files, front matter
    /// included, and prompt templates), by the path as written in the spec, and of every
    /// file a template includes, by its template name.
    pub source_hashes: BTreeMap<String, String>,
    /// Every contract by name, the built-ins `Candidate`, `Delivery` and `Answer` included.
    pub contracts: BTreeMap<String, ContractIr>,
    /// Every tool by name.
    pub tools: BTreeMap<String, ToolIr>,
    /// Every `mcp` server by name, whose tools roles name `SERVER.TOOL` (DESIGN §19). Absent
    /// from the JSON when the spec declares none, so the IR of every other spec (and its
    /// hash) is unchanged.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp: BTreeMap<String, McpServerIr>,
    /// Every model alias of the `models` block.
    pub models: BTreeMap<String, ModelIr>,
    /// Every rules block by name, with its content hash.
    pub rules: BTreeMap<String, RulesIr>,
    /// Every role (blocks and imported role files) by name.
    pub roles: BTreeMap<String, RoleIr>,
    /// Every gate by name.
    pub gates: BTreeMap<String, GateIr>,
    /// The repair table; `None` when the spec has no `repair` block.
    pub repair: Option<RepairIr>,
    /// Every invariant by name.
    pub invariants: BTreeMap<String, InvariantIr>,
    /// The run's budget (each limit `None` when not given).
    pub budget: BudgetIr,
    /// The flow graph.
    pub flow: FlowIr,
    /// The conversation state kept between turns (`session ... keep N`), if declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionIr>,
    /// Where things were written, for diagnostics computed from the IR (bounds). Not
    /// serialized: the runtime does not see source positions.
    #[serde(skip)]
    pub spans: SpecSpans,
}

impl CompiledSpec {
    /// Whether a role may name `name` as a tool: a declared tool, or `SERVER.TOOL` of a
    /// server of [`CompiledSpec::mcp`] whose allow-list holds TOOL (or is `*`).
    pub fn knows_tool(&self, name: &str) -> bool {
        self.tools.contains_key(name) || self.mcp_server_of(name).is_some()
    }

    /// The server of the `SERVER.TOOL` name `name`, when it provides the tool.
    pub fn mcp_server_of(&self, name: &str) -> Option<(&str, &McpServerIr)> {
        let (server, tool) = crate::names::mcp_tool(name)?;
        let (server, ir) = self.mcp.get_key_value(server)?;
        ir.tools.allows(tool).then_some((server.as_str(), ir))
    }

    /// Every tool name that can be listed: the declared tools, then `SERVER.TOOL` for the
    /// allow-listed tools of each server (a `tools: *` server's cannot be listed offline).
    pub fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tools.keys().cloned().collect();
        for (server, ir) in &self.mcp {
            if let McpToolsIr::Only(tools) = &ir.tools {
                names.extend(tools.iter().map(|tool| format!("{server}.{tool}")));
            }
        }
        names
    }
}

/// `session NAME keep N { fields }` and the spec's `remember` assignments (DESIGN §9.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionIr {
    /// The contract of the session's fields (in [`CompiledSpec::contracts`]).
    pub contract: String,
    /// How many turns `session.turns` keeps.
    pub keep: u64,
    /// `remember FIELD = EXPR`, in source order: evaluated after a turn that answered.
    pub remember: Vec<RememberIr>,
}

/// `remember FIELD = EXPR`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RememberIr {
    pub field: String,
    pub value: ExprIr,
}

/// Source positions of the parts of a spec that diagnostics over the IR point at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecSpans {
    /// The spec's name in its header.
    pub header: Option<Span>,
    /// The `budget` block.
    pub budget: Option<Span>,
    /// The `tokens`, `cost`, `wall` and `steps` entries of the budget.
    pub budget_tokens: Option<Span>,
    pub budget_cost: Option<Span>,
    pub budget_wall: Option<Span>,
    pub budget_steps: Option<Span>,
    /// Every step's whole definition, by step name.
    pub steps: BTreeMap<String, Span>,
    /// The list expression of every `each` step, by step name.
    pub each_over: BTreeMap<String, Span>,
}

/// A contract: a typed record exchanged between roles, tools and the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContractIr {
    /// True for `Candidate`, `Delivery` and `Answer`.
    pub builtin: bool,
    /// The fields in the order they were written.
    pub fields: Vec<FieldIr>,
    /// A JSON Schema (draft 2020-12) of the contract: required fields, types, enums,
    /// numeric `minimum`/`maximum`, list `minItems`/`maxItems`, `additionalProperties:
    /// false`, and referenced contracts under `$defs`. The same schema is given to models
    /// (`output_schema`) and used to validate outputs. Shared: every call of a run hands
    /// it to its provider, and a replay must not copy it each time.
    pub schema: std::sync::Arc<serde_json::Value>,
}

/// One field of a contract.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldIr {
    pub name: String,
    pub ty: TypeIr,
    /// Written with `?`: the field may be absent or `null`.
    pub optional: bool,
    /// The literal default (`= []`), used when the field is absent.
    pub default: Option<DefaultIr>,
}

/// A field's default value (wrapped so that a default of `none` is distinct from no default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DefaultIr {
    pub value: serde_json::Value,
}

/// A resolved type. Ranges are inclusive bounds; `None` means unbounded on that side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TypeIr {
    String,
    Bool,
    Int {
        min: Option<i64>,
        max: Option<i64>,
    },
    Float {
        min: Option<f64>,
        max: Option<f64>,
    },
    List {
        item: Box<TypeIr>,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
    /// One of the given variant names (serialized as strings).
    Enum {
        variants: Vec<String>,
    },
    /// A contract, by name (a key of [`CompiledSpec::contracts`]).
    Contract {
        name: String,
    },
    /// A nested optional type (`list<string?>`); a field's own `?` is [`FieldIr::optional`].
    Optional {
        inner: Box<TypeIr>,
    },
    /// Any JSON value (`Candidate.items`: the outputs of whichever step a gate judges).
    Any,
}

/// A tool a role may call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolIr {
    /// Input contract name.
    pub input: String,
    /// Output contract name (tool outputs are validated against it).
    pub output: String,
    pub effect: EffectIr,
    /// `timeout: D`: one call of the tool is cut after this long (DESIGN §9.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `retry: N`: a failed or timed-out call is run again up to N times.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry: u64,
    /// The wait before the first retry (doubling after), from `retry: N backoff D`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backoff_ms: u64,
    /// `sandbox { ... }` / `sandbox: required`: what the tool's processes may reach beyond
    /// the default sandbox (DESIGN §20). `None` when the tool says nothing: the default
    /// sandbox, not required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxIr>,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// A tool's `sandbox`: grants on top of the default sandbox (DESIGN §20: read the system's
/// program directories and the project, write only the call's own directory, its HOME and
/// TMPDIR; no network; a clean environment; 256 processes).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxIr {
    /// More paths the tool may read, as written: relative to the project root, `~/...`
    /// (the user's home) or absolute. The runtime resolves them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// More paths the tool may write, as written (inside the project: the checker rejects
    /// any other, E019).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// What the tool may connect to (default: nothing).
    #[serde(default, skip_serializing_if = "NetworkIr::is_default")]
    pub network: NetworkIr,
    /// Environment variables passed through to the tool, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// How many processes the tool may have at once (`None`: the runtime's default, 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// A tool that cannot be sandboxed is an error, not a warning (`sandbox: required`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// `network: none | loopback | any` of a tool's sandbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkIr {
    /// No network (a network namespace of its own).
    #[default]
    None,
    /// Only the machine itself.
    Loopback,
    /// Any address.
    Any,
}

impl NetworkIr {
    pub fn is_default(&self) -> bool {
        *self == NetworkIr::None
    }

    /// As written in a spec.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkIr::None => "none",
            NetworkIr::Loopback => "loopback",
            NetworkIr::Any => "any",
        }
    }
}

/// An `mcp` server: how it is reached and which of its tools the spec may use.
///
/// In JSON the transport's keys sit at the server's level: `{"command": ["npx", ...],
/// "env": {...}, "tools": [...]}` or `{"url": "http://...", "headers": {...}, "tools": "*"}`;
/// defaults (no env, no timeout, no retry, no sandbox) are left out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct McpServerIr {
    /// Started as a process (stdio) or connected to by URL (streamable HTTP).
    #[serde(flatten)]
    pub transport: McpTransportIr,
    /// The environment a started server gets on top of the sandbox's clean one (DESIGN §20),
    /// by variable name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, SecretOrTextIr>,
    /// The tools the spec may use from the server (its allow-list).
    pub tools: McpToolsIr,
    /// `timeout: D`: one call of one of its tools is cut after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `retry: N`: a failed or timed-out call is run again up to N times.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry: u64,
    /// The wait before the first retry (doubling after), from `retry: N backoff D`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backoff_ms: u64,
    /// `sandbox { ... }` / `sandbox: required` of a started server, as on a tool; `None`
    /// when it says nothing (the default sandbox). Never set for a `url` server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxIr>,
}

/// How an `mcp` server is reached.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum McpTransportIr {
    /// `command: [...]`: the program and its arguments, started in the project root and
    /// spoken to over stdio (`"command": [...]` in JSON).
    Command {
        #[serde(rename = "command")]
        argv: Vec<String>,
    },
    /// `url: "..."`: a running server spoken to over streamable HTTP, with the headers sent
    /// on every request.
    Url {
        url: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, SecretOrTextIr>,
    },
}

/// A value of `env` or `headers`: text as written, or `env("VAR")`, the name of a variable
/// of Charter's environment read when the value is used (never its value). In JSON: the
/// text as a string, `{"env": "VAR"}` for a variable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "SecretOrTextJson", into = "SecretOrTextJson")]
pub enum SecretOrTextIr {
    Text(String),
    Env(String),
}

/// The JSON form of [`SecretOrTextIr`].
#[derive(Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum SecretOrTextJson {
    Text(String),
    Env { env: String },
}

impl From<SecretOrTextJson> for SecretOrTextIr {
    fn from(json: SecretOrTextJson) -> Self {
        match json {
            SecretOrTextJson::Text(text) => SecretOrTextIr::Text(text),
            SecretOrTextJson::Env { env } => SecretOrTextIr::Env(env),
        }
    }
}

impl From<SecretOrTextIr> for SecretOrTextJson {
    fn from(value: SecretOrTextIr) -> Self {
        match value {
            SecretOrTextIr::Text(text) => SecretOrTextJson::Text(text),
            SecretOrTextIr::Env(env) => SecretOrTextJson::Env { env },
        }
    }
}

/// The tools of an `mcp` server the spec may use. In JSON: `"*"`, or the list of names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "McpToolsJson", into = "McpToolsJson")]
pub enum McpToolsIr {
    /// `tools: *`: every tool the server lists.
    All,
    /// `tools: [a, b]`: these, by the server's names for them.
    Only(Vec<String>),
}

impl McpToolsIr {
    /// Whether the spec may use the server's tool `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        match self {
            McpToolsIr::All => true,
            McpToolsIr::Only(tools) => tools.iter().any(|allowed| allowed == tool),
        }
    }
}

/// The JSON form of [`McpToolsIr`].
#[derive(Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum McpToolsJson {
    All(String),
    Only(Vec<String>),
}

impl TryFrom<McpToolsJson> for McpToolsIr {
    type Error = String;

    fn try_from(json: McpToolsJson) -> Result<Self, Self::Error> {
        match json {
            McpToolsJson::All(star) if star == "*" => Ok(McpToolsIr::All),
            McpToolsJson::All(other) => Err(format!(
                "an mcp server's `tools` is `\"*\"` or a list of names, not `{other:?}`"
            )),
            McpToolsJson::Only(tools) => Ok(McpToolsIr::Only(tools)),
        }
    }
}

impl From<McpToolsIr> for McpToolsJson {
    fn from(tools: McpToolsIr) -> Self {
        match tools {
            McpToolsIr::All => McpToolsJson::All("*".to_string()),
            McpToolsIr::Only(tools) => McpToolsJson::Only(tools),
        }
    }
}

/// What a tool does to the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectIr {
    Read,
    Write,
    External,
}

/// A model alias: `alias = "provider:model" price IN / OUT`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelIr {
    pub provider: String,
    pub model: String,
    /// USD per one million input tokens.
    pub price_in: Option<f64>,
    /// USD per one million output tokens.
    pub price_out: Option<f64>,
    /// Sampling parameters and the structured-output mode.
    #[serde(default, skip_serializing_if = "ModelParamsIr::is_default")]
    pub params: ModelParamsIr,
}

/// A `models` entry's parameters: sent where the provider takes them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelParamsIr {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// How long the server may send no byte before the call is a timeout (DESIGN §15; the
    /// runtime's default, 120 s, when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// How output matching the contract is asked for (default `json_schema`).
    #[serde(default, skip_serializing_if = "OutputModeIr::is_default")]
    pub output: OutputModeIr,
}

impl ModelParamsIr {
    pub fn is_default(&self) -> bool {
        *self == ModelParamsIr::default()
    }
}

/// `output json_schema | json_object | prompt` of a `models` entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputModeIr {
    /// The server enforces the contract's JSON Schema (`response_format: json_schema`).
    #[default]
    JsonSchema,
    /// The server enforces JSON; the schema is given as instructions.
    JsonObject,
    /// Instructions only (servers without structured output).
    Prompt,
}

impl OutputModeIr {
    pub fn is_default(&self) -> bool {
        *self == OutputModeIr::JsonSchema
    }

    /// As written in a spec.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputModeIr::JsonSchema => "json_schema",
            OutputModeIr::JsonObject => "json_object",
            OutputModeIr::Prompt => "prompt",
        }
    }
}

/// A role's `tool_choice`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoiceIr {
    /// The model decides (the default).
    #[default]
    Auto,
    /// The model must call some tool before it answers.
    Required,
    /// The model must call this tool before it answers.
    Tool(String),
}

impl ToolChoiceIr {
    pub fn is_auto(&self) -> bool {
        *self == ToolChoiceIr::Auto
    }
}

/// How a role's call is laid out as messages (`messages:` in a role file or a role block).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessagesIr {
    /// The whole rendered prompt is one user message (the default).
    #[default]
    Prompt,
    /// The rendered prompt is the system message, then the session's turns as alternating
    /// user and assistant messages, then the current request as the last user message.
    Chat,
}

impl MessagesIr {
    pub fn is_prompt(&self) -> bool {
        *self == MessagesIr::Prompt
    }
}

/// A rules block and its frozen content hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RulesIr {
    pub version: Option<String>,
    pub lines: Vec<String>,
    /// `sha256:<hex>` of the canonical JSON `{"lines":[...],"version":...}`.
    pub hash: String,
}

/// A role, with every default resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoleIr {
    /// The model this role calls, resolved from its alias.
    pub model: RoleModelIr,
    /// The prompt template; `None` when the role has none.
    pub prompt: Option<PromptIr>,
    /// Names of the rules blocks whose lines the prompt gets (keys of [`CompiledSpec::rules`]).
    pub rules: Vec<String>,
    /// Input contract names, in order.
    pub inputs: Vec<String>,
    /// Output contract name.
    pub output: String,
    /// Whitelisted tool names (keys of [`CompiledSpec::tools`], or `SERVER.TOOL` for a tool
    /// of a server of [`CompiledSpec::mcp`]); empty means no tools.
    pub tools: Vec<String>,
    /// Tool calls allowed per model call; `None` means no limit was given.
    pub max_tool_calls: Option<u64>,
    /// Limit of one model call in milliseconds; `None`: only `budget.wall` bounds it.
    pub timeout_ms: Option<u64>,
    /// Provider retries after the first attempt (default 2).
    pub retry: u64,
    /// First retry delay in milliseconds, doubling on each retry (default 1000).
    pub backoff_ms: u64,
    /// Per-tool usage notes from a role file's `tool_rules`, by tool name.
    pub tool_rules: BTreeMap<String, String>,
    /// A role file's human-readable name and description.
    pub display_name: Option<String>,
    /// A role file's `id` as written when the spec knows the role by another (`exp-master`
    /// for `exp_master`): a mention may use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_id: Option<String>,
    pub description: Option<String>,
    /// The role file's path when the role was imported; `None` for a `role` block.
    pub file: Option<String>,
    /// `history: [steps] last N`: the earlier outputs of these steps reach the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryIr>,
    /// `permit TOOL when EXPR` rules, in source order (DESIGN §9.2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permits: Vec<PermitIr>,
    /// A role file's own front-matter keys (DESIGN §9.2): `meta` to its template.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, serde_json::Value>,
    /// `tool_choice: auto | required | TOOL`.
    #[serde(default, skip_serializing_if = "ToolChoiceIr::is_auto")]
    pub tool_choice: ToolChoiceIr,
    /// `retry_after_effects: true`: a provider retry may follow an attempt whose tools had
    /// a `write` or `external` effect (otherwise the step fails instead of repeating them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry_after_effects: bool,
    /// `messages: chat` (a role file's or a role block's): a system message and the
    /// conversation.
    #[serde(default, skip_serializing_if = "MessagesIr::is_prompt")]
    pub messages: MessagesIr,
}

/// `permit TOOL when EXPR`: `condition` sees `args` (the call's arguments) and `meta`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PermitIr {
    pub tool: String,
    pub condition: ExprIr,
    /// The rule as written (`permit run_workflow when ...`), for `tool_denied`.
    pub rule: String,
}

/// `history: [steps] last N` (DESIGN §8.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryIr {
    /// The steps whose earlier outputs the role sees, as written.
    pub steps: Vec<String>,
    /// At most this many entries (the newest); `None`: all of them.
    pub last: Option<u64>,
}

/// The model a role calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoleModelIr {
    /// The alias used, when the role named one (not a literal `"provider:model"`).
    pub alias: Option<String>,
    pub provider: String,
    pub model: String,
    pub price_in: Option<f64>,
    pub price_out: Option<f64>,
    /// The alias's parameters (defaults for a literal `"provider:model"`).
    #[serde(default, skip_serializing_if = "ModelParamsIr::is_default")]
    pub params: ModelParamsIr,
}

/// A role's prompt template (minijinja source, not rendered).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptIr {
    /// The template text.
    pub template: String,
    /// Where it came from: the template file's (or role file's) path as written in the
    /// spec, or `inline` for an inline block.
    pub source: String,
    /// True for an inline `"""..."""` prompt.
    pub inline: bool,
    /// The files the template includes (`{% include "parts/tone.j2" %}`, directly or
    /// through another included file): their template names (paths relative to the
    /// spec's directory, `render_env::include_path`) and texts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub includes: BTreeMap<String, String>,
    /// `sha256:<hex>` of the template text; with includes, of the canonical JSON
    /// `{"includes":{NAME:TEXT,...},"template":TEXT}`, so a changed included piece changes it
    /// as a changed template does.
    pub hash: String,
}

/// A gate: rules evaluated by the runtime from data, never by a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateIr {
    /// The step whose outputs this round form the candidate (`gate NAME on STEP`).
    pub subject: String,
    /// The `hard` and `warn` rules, in source order.
    pub rules: Vec<GateRuleIr>,
    /// The `score` rules, in source order; `score` is their weighted mean.
    pub scores: Vec<ScoreIr>,
    /// `pass when EXPR` (the gate passes only if every hard rule holds too).
    pub pass_when: ExprIr,
}

impl GateIr {
    /// Every issue code this gate can emit (rules and scores with `below`).
    pub fn codes(&self) -> BTreeSet<String> {
        let mut codes: BTreeSet<String> = self.rules.iter().map(|rule| rule.code.clone()).collect();
        codes.extend(
            self.scores
                .iter()
                .filter_map(|score| score.below.as_ref().map(|below| below.code.clone())),
        );
        codes
    }
}

/// `hard|warn NAME: EXPR else CODE`: when `expr` is false, an issue `code` is raised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateRuleIr {
    pub name: String,
    pub severity: SeverityIr,
    pub expr: ExprIr,
    pub code: String,
    /// `detail EXPR`: evaluated when the rule fails; its value travels with the issue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<ExprIr>,
}

/// A gate rule's severity: a hard failure fails the gate; a warning is only reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeverityIr {
    Hard,
    Warn,
}

/// `score NAME weight W: EXPR (below T CODE)?`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreIr {
    pub name: String,
    pub weight: f64,
    pub expr: ExprIr,
    pub below: Option<BelowIr>,
}

/// A score's issue: raised (as an error-level issue) when the score is below `threshold`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BelowIr {
    pub threshold: f64,
    pub code: String,
    /// `detail EXPR`: evaluated when the issue is raised; its value travels with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<ExprIr>,
}

/// The repair table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepairIr {
    /// Repair rounds after the first pass (`rounds 3` allows 4 rounds in all).
    pub rounds: u64,
    /// Rounds without progress before repair stops (default 2).
    pub no_progress: u64,
    /// The arms in source order (the wildcard, if any, last).
    pub arms: Vec<RepairArmIr>,
}

/// `CODES -> action` or `_ -> action`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepairArmIr {
    pub pattern: RepairPatternIr,
    pub action: ActionIr,
}

/// Which issue codes an arm handles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RepairPatternIr {
    Codes {
        codes: Vec<String>,
    },
    /// `_`: every code no earlier arm names.
    Wildcard,
}

/// A repair action from the whitelist.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionIr {
    /// Invalidate `step` and everything downstream of it, and run again.
    Rerun { step: String, with_feedback: bool },
    /// Run the flow again from its entry step (the plan).
    Replan,
    /// Treat the issue as acceptable.
    Accept,
    /// Stop the run as `blocked` with this reason.
    Block { reason: String },
    /// Stop the run as `failed` with this reason.
    Fail { reason: String },
    /// Ask a person this question.
    Ask { question: String },
}

/// An invariant the runtime enforces (and the compiler checked where it could).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InvariantIr {
    /// `ROLE has no tools`
    HasNoTools { role: String },
    /// `only ROLE uses TOOL`
    OnlyUses { role: String, tool: String },
    /// `always EXPR`: checked after every step.
    Always { expr: ExprIr },
}

/// The run's limits; `None` when not given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetIr {
    pub tokens: Option<u64>,
    /// USD.
    pub cost: Option<f64>,
    pub wall_ms: Option<u64>,
    /// Step executions (`run.step_count`).
    pub steps: Option<u64>,
    /// `on_exhausted STEP`: the step run once when a budget runs out (its output is the
    /// run's answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exhausted: Option<String>,
}

/// The flow: a directed graph of steps and terminals.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlowIr {
    /// Nodes are steps and terminals; edges are transitions. Step nodes come first, in
    /// source order; terminal nodes follow in the order they are first targeted (one node
    /// per distinct terminal: `done`, and each distinct `blocked`/`failed` reason).
    pub graph: DiGraph<StepIr, TransitionIr>,
    /// The first step of the flow.
    pub entry: NodeIndex,
    /// Step name -> its node (terminals are not listed).
    pub steps: BTreeMap<String, NodeIndex>,
}

impl FlowIr {
    /// The node and definition of step `name` (not terminals).
    pub fn step(&self, name: &str) -> Option<(NodeIndex, &StepIr)> {
        let node = *self.steps.get(name)?;
        Some((node, self.graph.node_weight(node)?))
    }

    /// The transitions out of `node` in the order they were written, with their targets.
    /// Use this rather than petgraph's `edges`, which yields the newest edge first: `when`
    /// arms are tried in this order.
    pub fn transitions(&self, node: NodeIndex) -> Vec<(&TransitionIr, NodeIndex)> {
        let mut edges: Vec<_> = self
            .graph
            .edges(node)
            .map(|edge| (edge.id(), edge.weight(), edge.target()))
            .collect();
        edges.sort_by_key(|(id, _, _)| *id);
        edges
            .into_iter()
            .map(|(_, transition, target)| (transition, target))
            .collect()
    }
}

/// A node of the flow graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepIr {
    /// The step's name; for terminals `done`, `blocked` or `failed`.
    pub name: String,
    /// What the node does (serialized flat: `{"name": .., "kind": "call", "role": ..}`).
    #[serde(flatten)]
    pub kind: StepKind,
}

/// What a node does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepKind {
    /// `role(args)`: one role call.
    Call { role: String, args: Vec<ExprIr> },
    /// `each VAR in OVER: role(args) concurrency N check GATE by ROLE retries N`.
    Each {
        var: String,
        over: ExprIr,
        role: String,
        args: Vec<ExprIr>,
        /// Items run at once (default 1).
        concurrency: u64,
        check: Option<ItemCheckIr>,
    },
    /// `gate NAME`; `repair` is true for `fail -> repair` (the repair table decides).
    Gate { gate: String, repair: bool },
    /// `finalize role(args)`: the role's output is a `Delivery`.
    Finalize { role: String, args: Vec<ExprIr> },
    /// `branch`: no call, only its transitions.
    Branch,
    /// `tool NAME(args)`: one tool call, no model; its output is the tool's output
    /// contract (DESIGN §9.1).
    Tool { tool: String, args: Vec<ExprIr> },
    /// `ask "question" max N`: a human decision point (its output is an `Answer`); `max`
    /// bounds how often the run may ask it.
    Ask {
        question: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u64>,
    },
    /// Terminal: the run completed.
    Done,
    /// Terminal: the run is blocked.
    Blocked { reason: String },
    /// Terminal: the run failed.
    Failed { reason: String },
}

impl StepKind {
    /// True for `done`, `blocked` and `failed`.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            StepKind::Done | StepKind::Blocked { .. } | StepKind::Failed { .. }
        )
    }
}

/// The per-item check of an `each` step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ItemCheckIr {
    pub gate: String,
    /// The role that judges each item (its output is in scope in the gate by its name).
    pub by: Option<String>,
    /// Stage retries of an item that fails the check (default 0).
    pub retries: u64,
}

/// An edge of the flow graph: when the runtime takes it after its source step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TransitionIr {
    /// `-> target`
    Always,
    /// `when EXPR -> target` (arms are tried in the order written, see
    /// [`FlowIr::transitions`]; the first true one is taken).
    When { condition: ExprIr },
    /// `else -> target`
    Else,
    /// A gate step's `pass -> target`.
    Pass,
    /// A gate step's `fail -> target`.
    Fail,
    /// `on_error -> STEP`: taken only when the step fails (instead of `step_failed`);
    /// never by the transitions above.
    OnError,
    /// A gate step with `fail -> repair`: the repair arm (index into [`RepairIr::arms`])
    /// whose action goes to this edge's target (`rerun`, `replan` -> entry, `block`,
    /// `fail`). `codes` are the arm's codes this gate can emit (`_` for the wildcard).
    /// Informational: the repair table is what the runtime applies.
    Repair {
        arm: usize,
        codes: Vec<String>,
        action: ActionIr,
    },
}

/// A resolved expression the runtime interprets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExprIr {
    /// A scalar literal: bool, integer, float, string or `none` (null).
    Literal {
        value: serde_json::Value,
    },
    /// An enum variant written as a bare name (compares equal to the string).
    Variant {
        name: String,
    },
    /// `root.field.field...`
    Path {
        root: NameIr,
        fields: Vec<String>,
    },
    /// `[a, b, ...]`
    List {
        items: Vec<ExprIr>,
    },
    /// `{ key: expr, ... }`
    Record {
        fields: BTreeMap<String, ExprIr>,
    },
    Unary {
        op: UnaryOpIr,
        operand: Box<ExprIr>,
    },
    Binary {
        op: BinaryOpIr,
        lhs: Box<ExprIr>,
        rhs: Box<ExprIr>,
    },
    Call {
        function: BuiltinIr,
        args: Vec<ExprIr>,
    },
    /// `every|some|count VAR in OVER: BODY`
    Quantifier {
        quantifier: QuantifierIr,
        var: String,
        over: Box<ExprIr>,
        body: Box<ExprIr>,
    },
}

/// What the first name of a path refers to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum NameIr {
    /// `request`: the run's input.
    Request,
    /// A step's output in the current round (a list for `each` steps).
    Step(String),
    /// `candidate`: the current round's candidate of the gate's subject step.
    Candidate,
    /// `best`: the best evaluated candidate.
    Best,
    /// `run`: `{round, step_count, tokens, cost, elapsed, answered_by}`.
    Run,
    /// `session`: the conversation's fields and its last `turns`.
    Session,
    /// `score`: the gate's weighted mean score.
    Score,
    /// `item`: the item's output, inside a per-item check.
    Item,
    /// The `by` role's verdict on the item, inside a per-item check.
    ByRole(String),
    /// A quantifier's or `each` step's variable.
    Local(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryOpIr {
    Not,
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOpIr {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
}

/// The built-in functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuiltinIr {
    Len,
    Contains,
    Matches,
    Sum,
    Min,
    Max,
    /// `mention(text)`: the known role name (id or role-file `name`) an `@`/`＠` at the
    /// start of the text is followed by, longest first, or none. Lowered with a second
    /// argument: the literal table `{name: id}` of the spec.
    Mention,
    /// `strip_mention(text)`: the text without that mention and the separator after it
    /// (whole when it mentions no known name). Lowered with the same table.
    StripMention,
    /// `role_named(name)`: the id of the role whose id or role-file `name` is `name`, or
    /// none. Lowered with a second argument: the literal table `{name: id}` of the spec.
    RoleNamed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantifierIr {
    Every,
    Some,
    Count,
}
