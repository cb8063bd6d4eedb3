//! The versioned file formats of DESIGN §5: `scenario.yaml` and `cassette.yaml`, with their loading checks.
//!
//! These are file-format types, converted by hand to and from the runtime's internal
//! types (`replay` turns a [`RecordedCall`] into a `ModelResponse`), so internals can
//! change without breaking recorded goldens. Unknown fields are errors, so a typo in a
//! hand-written cassette is reported rather than ignored. Durations are written as in a
//! spec: `250ms`, `2s`, `20m`, `2h`.
//!
//! Loading a cassette checks that its `version` is supported, that no two calls share a
//! key (step, round, item, attempt, role), that no two human answers share (step,
//! round), that a call holds at most one of `response`, `raw` and `error`, and that no
//! `expect_prompt` text is empty; every error names the file and, where known, the line.
//!
//! A scenario has `input` or, for a conversation, `turns` (exactly one of them), and each
//! call and human answer of its cassette carries its `turn` (default 1). A cassette
//! without `recorded` is hand-written, *unpinned*: the spec's hashes are not compared with
//! it (a call's own `prompt_hash` still is). An entry with `tool: NAME` is a `tool` step's
//! call rather than a model call, and takes no model fields.
//!
//! `editors/vscode/schemas/` describes these files for editors, by hand:
//! `cli/tests/schema.rs` holds the schemas to these types, so a field added here needs its
//! property there and a use in that test's every-key files.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::time::Duration;

use charter_compiler::graph::CompiledSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::formats::trace::{Outcome, Reason};
use crate::formats::yaml::{self, YamlError};

/// The key of a model call (DESIGN §5): which step, repair round, work item and attempt,
/// and for the judge of a per-item `check ... by ROLE`, that role. Cassettes are looked
/// up by this key, never by the order of calls.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CallKey {
    pub step: String,
    /// The repair round, from 1.
    pub round: u64,
    /// The work item's id in an `each` step.
    pub item: Option<String>,
    /// The n-th call of this role for this step, round and item, from 1.
    pub attempt: u64,
    /// Set only for the `by` role of a per-item check.
    pub role: Option<String>,
}

impl CallKey {
    /// Round 1, attempt 1, no item, no role.
    pub fn new(step: impl Into<String>) -> Self {
        CallKey {
            step: step.into(),
            round: 1,
            item: None,
            attempt: 1,
            role: None,
        }
    }

    pub fn round(mut self, round: u64) -> Self {
        self.round = round;
        self
    }

    pub fn item(mut self, item: impl Into<String>) -> Self {
        self.item = Some(item.into());
        self
    }

    pub fn attempt(mut self, attempt: u64) -> Self {
        self.attempt = attempt;
        self
    }

    pub fn role(mut self, role: impl Into<String>) -> Self {
        self.role = Some(role.into());
        self
    }
}

/// Written as in a cassette: `{step: execute, round: 1, item: T-002, attempt: 3}`.
impl fmt::Display for CallKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{{step: {}, round: {}", self.step, self.round)?;
        if let Some(item) = &self.item {
            write!(formatter, ", item: {item}")?;
        }
        write!(formatter, ", attempt: {}", self.attempt)?;
        if let Some(role) = &self.role {
            write!(formatter, ", role: {role}")?;
        }
        formatter.write_str("}")
    }
}

/// The cassette format version this runtime reads and writes.
pub const CASSETTE_VERSION: u64 = 1;

/// `scenario.yaml`: what to run and, optionally, how it must end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The spec, relative to the project root (the directory that holds `golden/`).
    pub spec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The run's input (the `request`); absent in a conversation, which has `turns`.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub input: Value,
    /// A conversation (DESIGN §9.4): one input per turn, replayed in order with the
    /// session carried from turn to turn; the cassette's keys say which turn (`turn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<Vec<TurnInput>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expectation>,
}

/// One turn of a conversation scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnInput {
    pub input: Value,
}

/// Quick assertions on how a scenario's run ends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// Written like `gate_passed` or `hard_gate{SECRET_LEAK}` (quoted when written out, so
    /// the braces read back in a flow mapping too).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "reason_text"
    )]
    pub reason: Option<Reason>,
    /// `true`: the cassette is stale on purpose (it shows what a stale recording looks
    /// like); the harness then passes it only while it is stale, and `--accept` leaves
    /// its `recorded` block alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<bool>,
    /// The id of the candidate the run must deliver (`c2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<String>,
    /// What the run's answer must hold: a subset match (records may have more fields;
    /// lists match item by item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
    /// Model calls per step (every attempt, a per-item check's judge calls included).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calls: BTreeMap<String, u64>,
    /// Steps that must run in this order: a subsequence of the steps started (gaps
    /// allowed, a step of a later round counts again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    /// Tool name -> how many times it must be called (model tool calls and `tool` steps'
    /// attempts alike; a denied call is not a call).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, CallCount>,
    /// Steps, roles or tools that must never run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_called: Vec<String>,
    /// Gate name -> what its last evaluation in the run must show.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gates: BTreeMap<String, GateExpectation>,
}

/// `{ min: 1, max: 3 }`: bounds on a count, both inclusive, at least one given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallCount {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

/// `{ min_score: 7, passed: true }`: what a gate's last evaluation must show, at least
/// one given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateExpectation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
}

/// An `expect.reason` as written: plain (`gate_passed`), or quoted when it has an
/// argument in braces (`"step_failed{review}"`).
fn reason_text<S: serde::Serializer>(
    reason: &Option<Reason>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let text = reason.as_ref().map(ToString::to_string);
    match text.as_deref() {
        Some(text) if text.contains('{') => yaml::QuotedText(text).serialize(serializer),
        Some(text) => serializer.serialize_str(text),
        None => serializer.serialize_none(),
    }
}

/// `cassette.yaml`: what the models (and people) answered in a recorded run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cassette {
    pub version: u64,
    /// The hashes the cassette was recorded under. A cassette without them is
    /// hand-written (*unpinned*, DESIGN §10): it replays with no stale check of spec or
    /// prompt hashes (each call's `prompt_hash` is still checked where it has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Recorded>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<RecordedCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub humans: Vec<RecordedHuman>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
}

/// The hashes the cassette was recorded under (a replay under other hashes is stale).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    pub spec_hash: String,
    /// Role name -> prompt template hash.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, String>,
    /// Rules block name -> hash.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rules: BTreeMap<String, String>,
    /// Role name -> the rendered prompt of the role's first call in this recording
    /// (written when a golden is accepted). Not compared: it is what the harness diffs
    /// against when the recording is stale, so the diff shows the prompt that changed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rendered: BTreeMap<String, String>,
    /// Alias -> the model and parameters it ran with. Compared when present: a replay
    /// under another model or other parameters is stale.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, RecordedModel>,
    /// Alias -> `provider:model` given with `charter run --model`: a replay runs the
    /// spec with the same overrides.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, String>,
}

/// The model an alias ran on, and the parameters it was called with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedModel {
    /// `provider:model`.
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The output mode, when not the default `json_schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

// Parameters come from literals in a spec, never NaN.
impl Eq for RecordedModel {}

impl std::fmt::Display for RecordedModel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.model)?;
        if let Some(temperature) = self.temperature {
            write!(formatter, " temperature {temperature}")?;
        }
        if let Some(top_p) = self.top_p {
            write!(formatter, " top_p {top_p}")?;
        }
        if let Some(max_tokens) = self.max_tokens {
            write!(formatter, " max_tokens {max_tokens}")?;
        }
        if let Some(seed) = self.seed {
            write!(formatter, " seed {seed}")?;
        }
        if let Some(output) = &self.output {
            write!(formatter, " output {output}")?;
        }
        Ok(())
    }
}

impl Recorded {
    /// The hashes a run of `spec` is bound to (what a recording of it writes).
    pub fn from_spec(spec: &CompiledSpec) -> Self {
        Recorded {
            spec_hash: spec.spec_hash.clone(),
            prompts: spec
                .roles
                .iter()
                .filter_map(|(name, role)| {
                    role.prompt
                        .as_ref()
                        .map(|prompt| (name.clone(), prompt.hash.clone()))
                })
                .collect(),
            rules: spec
                .rules
                .iter()
                .map(|(name, rules)| (name.clone(), rules.hash.clone()))
                .collect(),
            rendered: BTreeMap::new(),
            models: models_used(spec),
            overrides: BTreeMap::new(),
        }
    }

    /// What differs between these recorded hashes and `current` (empty: not stale), one
    /// line per difference, like `prompt planner: sha256:ab… -> sha256:cd…`. A `prompts`
    /// or `rules` map left empty in a hand-written cassette is not compared.
    pub fn stale_against(&self, current: &Recorded) -> Vec<String> {
        let mut changes = Vec::new();
        if self.spec_hash != current.spec_hash {
            changes.push(format!("spec: {} -> {}", self.spec_hash, current.spec_hash));
        }
        for (what, recorded, now) in [
            ("prompt", &self.prompts, &current.prompts),
            ("rules", &self.rules, &current.rules),
        ] {
            if recorded.is_empty() {
                continue;
            }
            for (name, hash) in recorded {
                match now.get(name) {
                    Some(now_hash) if now_hash == hash => {}
                    Some(now_hash) => changes.push(format!("{what} {name}: {hash} -> {now_hash}")),
                    None => changes.push(format!("{what} {name}: removed")),
                }
            }
            for name in now.keys().filter(|name| !recorded.contains_key(*name)) {
                changes.push(format!("{what} {name}: added"));
            }
        }
        if !self.models.is_empty() {
            for (alias, model) in &self.models {
                match current.models.get(alias) {
                    Some(now) if now == model => {}
                    Some(now) => changes.push(format!("model {alias}: {model} -> {now}")),
                    None => changes.push(format!("model {alias}: removed")),
                }
            }
            for alias in current.models.keys() {
                if !self.models.contains_key(alias) {
                    changes.push(format!("model {alias}: added"));
                }
            }
        }
        changes
    }
}

/// One recorded model call. With none of `response`, `raw` and `error`, the call gave no
/// answer within its `latency` (it timed out when recorded).
///
/// With `tool`, the entry is a call of a `tool` step (DESIGN §9.1) instead: `{ step:
/// validate, tool: validate_workflow, result: {...} }`, or `error: {message}` for a tool
/// that failed, or only a `latency` for one that was cut by its timeout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedCall {
    /// The turn of a conversation the call belongs to (DESIGN §9.4; default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub turn: u64,
    pub step: String,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub round: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub attempt: u64,
    /// The judge role of a per-item check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The tool of a `tool` step's call (the entry is then no model call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A `tool` step's result, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The role's final output, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    /// The output as raw text (for malformed output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
    #[serde(
        default,
        with = "duration_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub latency: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RecordedUsage>,
    /// `sha256:<hex>` of the rendered prompt the call answered (DESIGN §10), written by
    /// every recording. On replay a call whose prompt hashes differently is stale: the
    /// answer was given to another prompt (another request, a changed template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_hash: Option<String>,
    /// The tool calls the call made, in order; for a call that failed or timed out, those
    /// it made before it did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<RecordedToolCall>,
    /// What the provider noted during the call (an output mode the server refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What the call's prompt must (not) contain, checked on replay: how a hand-written
    /// scenario proves that a role saw what it needed (DESIGN §10). Boxed: most calls
    /// have none, and every journal entry holds a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_prompt: Option<Box<ExpectPrompt>>,
}

impl RecordedCall {
    /// What is wrong with the fields this entry combines: a `tool` step's call holds only
    /// `result`, `error: {message}` and `latency`; a model call no `result`, and its
    /// `error` a `status`.
    fn shape_problem(&self) -> Option<String> {
        if self.tool.is_some() {
            let model_fields = [
                ("response", self.response.is_some()),
                ("raw", self.raw.is_some()),
                ("usage", self.usage.is_some()),
                ("tool_calls", !self.tool_calls.is_empty()),
                ("notes", !self.notes.is_empty()),
                ("expect_prompt", self.expect_prompt.is_some()),
                ("role", self.role.is_some()),
            ];
            if let Some((field, _)) = model_fields.iter().find(|(_, given)| *given) {
                return Some(format!(
                    "a `tool` step's call has no `{field}` (it holds `result`, `error: {{message}}` or only `latency`)"
                ));
            }
            if self.result.is_some() && self.error.is_some() {
                return Some("has both `result` and `error`".to_string());
            }
            if self
                .error
                .as_ref()
                .is_some_and(|error| error.status.is_some())
            {
                return Some("a tool's `error` has a `message`, not a `status`".to_string());
            }
            return None;
        }
        if self.result.is_some() {
            return Some(
                "`result` is for a `tool` step's call (add `tool: NAME`); a model call answers with `response`"
                    .to_string(),
            );
        }
        if self
            .error
            .as_ref()
            .is_some_and(|error| error.status.is_none())
        {
            return Some("a model call's `error` needs a `status` (429, 500, ...)".to_string());
        }
        None
    }

    pub fn key(&self) -> CallKey {
        CallKey {
            step: self.step.clone(),
            round: self.round,
            item: self.item.clone(),
            attempt: self.attempt,
            role: self.role.clone(),
        }
    }
}

/// A provider error the call returned, or why a tool failed (a tool's error has a
/// `message` and no `status`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedError {
    /// The HTTP status (429 and 5xx are transient; other 4xx permanent): required for a
    /// model call's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The wait the server asked for (`Retry-After`), replayed as
    /// `ProviderError::Throttled`.
    #[serde(
        default,
        with = "duration_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_after: Option<Duration>,
}

/// `expect_prompt: { contains: [...], not_contains: [...] }` on a call: texts that every
/// message the model is shown for this call (the rendered prompt, and on a provider retry
/// the violations it is told) must hold, and texts none of them may hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectPrompt {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contains: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_contains: Vec<String>,
}

impl ExpectPrompt {
    /// What `prompt` fails of these expectations, one line per text, in the order they are
    /// written (`contains` first); empty when it meets them all.
    pub fn unmet(&self, prompt: &str) -> Vec<String> {
        let missing = self
            .contains
            .iter()
            .filter(|text| !prompt.contains(text.as_str()))
            .map(|text| format!("does not contain {text:?}"));
        let present = self
            .not_contains
            .iter()
            .filter(|text| prompt.contains(text.as_str()))
            .map(|text| format!("contains {text:?}, which `not_contains` forbids"));
        missing.chain(present).collect()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedToolCall {
    pub tool: String,
    #[serde(default)]
    pub args: Value,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub result: Value,
    /// Why the tool gave no result (`{message}`): the model was told it as an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
    /// How long the tool ran. A call whose latency reaches its tool's `timeout` timed out
    /// (a replay traces `tool_timeout`; without `result` or `error`, the model was told
    /// the timeout).
    #[serde(
        default,
        with = "duration_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub latency: Option<Duration>,
}

/// A person's answer to an `ask` step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedHuman {
    /// The turn of a conversation the answer belongs to (default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub turn: u64,
    pub step: String,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub round: u64,
    /// The n-th time the step asked in that round (default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub attempt: u64,
    /// An `Answer`: `{approved: bool, note?: string}`.
    pub answer: Value,
}

/// A fault injected into a replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Alter a stored output after step `after` ran (as a late overwrite would): `item`'s
    /// output in an `each` step, or the step's whole output.
    Tamper(Tamper),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tamper {
    pub after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
}

fn one() -> u64 {
    1
}

fn is_one(value: &u64) -> bool {
    *value == 1
}

/// A file that could not be read or does not pass the loading checks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct LoadError(#[from] pub YamlError);

impl Scenario {
    /// Parses `text`, the content of the file shown as `file`.
    pub fn from_yaml(file: &str, text: &str) -> Result<Scenario, LoadError> {
        let scenario: Scenario = yaml::from_str(file, text)?;
        let error = |message: &str| LoadError(YamlError::at(file, None, None, message.to_string()));
        match (&scenario.turns, scenario.input.is_null()) {
            (Some(_), false) => Err(error(
                "a scenario has `input` (one run) or `turns` (a conversation), not both",
            )),
            (Some(turns), true) if turns.is_empty() => Err(error(
                "`turns` is empty: a conversation has at least one turn",
            )),
            (None, true) => Err(error(
                "a scenario needs `input` (the request), or `turns: [{input}, ...]` for a conversation",
            )),
            _ => Ok(scenario),
        }
    }

    /// The inputs of the runs this scenario makes: one, or one per turn.
    pub fn inputs(&self) -> Vec<Value> {
        match &self.turns {
            Some(turns) => turns.iter().map(|turn| turn.input.clone()).collect(),
            None => vec![self.input.clone()],
        }
    }

    /// Reads and parses the file at `path`.
    pub fn read(path: &Path) -> Result<Scenario, LoadError> {
        let (name, text) = read_file(path)?;
        Scenario::from_yaml(&name, &text)
    }

    pub fn to_yaml(&self) -> Result<String, LoadError> {
        Ok(yaml::to_string("scenario.yaml", self)?)
    }
}

impl Cassette {
    /// The `--model` overrides the cassette was recorded with (none for a hand-written one).
    pub fn overrides(&self) -> BTreeMap<String, String> {
        self.recorded
            .as_ref()
            .map(|recorded| recorded.overrides.clone())
            .unwrap_or_default()
    }

    /// What differs between the hashes the cassette was recorded under and `current`
    /// (see [`Recorded::stale_against`]); nothing for an unpinned cassette.
    pub fn stale_against(&self, current: &Recorded) -> Vec<String> {
        self.recorded
            .as_ref()
            .map(|recorded| recorded.stale_against(current))
            .unwrap_or_default()
    }

    /// An empty cassette recorded (pinned) under `recorded`.
    pub fn new(recorded: Recorded) -> Self {
        Cassette {
            version: CASSETTE_VERSION,
            recorded: Some(recorded),
            calls: Vec::new(),
            humans: Vec::new(),
            faults: Vec::new(),
        }
    }

    /// The part of a conversation's cassette that answers turn `turn`: its calls and human
    /// answers (keyed as in a one-turn cassette), the recorded block and the faults.
    pub fn for_turn(&self, turn: u64) -> Cassette {
        Cassette {
            version: self.version,
            recorded: self.recorded.clone(),
            calls: self
                .calls
                .iter()
                .filter(|call| call.turn == turn)
                .map(|call| RecordedCall {
                    turn: 1,
                    ..call.clone()
                })
                .collect(),
            humans: self
                .humans
                .iter()
                .filter(|human| human.turn == turn)
                .map(|human| RecordedHuman {
                    turn: 1,
                    ..human.clone()
                })
                .collect(),
            faults: self.faults.clone(),
        }
    }

    /// Parses `text`, the content of the file shown as `file`, and runs the loading checks.
    pub fn from_yaml(file: &str, text: &str) -> Result<Cassette, LoadError> {
        // The common case parses once: a well-formed cassette of this version that passes
        // the checks needs no positions (they only place the checks' error messages).
        if let Ok(cassette) = yaml::from_str::<Cassette>(file, text)
            && cassette.version == CASSETTE_VERSION
            && cassette.check(file, &Positions::default()).is_ok()
        {
            return Ok(cassette);
        }
        // Positions first, so that the checks below can point at lines. Only `version`
        // is read before the whole file, so an unsupported version is reported as such
        // even when the rest of the file is in a format this runtime does not know.
        let positions: Positions = yaml::from_str(file, text).unwrap_or_default();
        if let Some(version) = &positions.version
            && version.value != CASSETTE_VERSION
        {
            return Err(LoadError(YamlError::at(
                file,
                Some(version.referenced.line()),
                Some(version.referenced.column()),
                format!(
                    "unsupported cassette version {} (this charter reads version {CASSETTE_VERSION})",
                    version.value
                ),
            )));
        }
        let cassette: Cassette = yaml::from_str(file, text)?;
        cassette.check(file, &positions)?;
        Ok(cassette)
    }

    /// Reads, parses and checks the file at `path`.
    pub fn read(path: &Path) -> Result<Cassette, LoadError> {
        let (name, text) = read_file(path)?;
        Cassette::from_yaml(&name, &text)
    }

    pub fn to_yaml(&self) -> Result<String, LoadError> {
        Ok(yaml::to_string("cassette.yaml", self)?)
    }

    fn check(&self, file: &str, positions: &Positions) -> Result<(), LoadError> {
        let line_of = |entries: &[serde_saphyr::Spanned<Value>], index: usize| {
            entries
                .get(index)
                .map(|entry| entry.referenced.line())
                .filter(|line| *line > 0)
        };
        let error = |line: Option<u64>, message: String| {
            LoadError(YamlError::at(file, line, None, message))
        };
        if self.version != CASSETTE_VERSION {
            return Err(error(
                None,
                format!(
                    "unsupported cassette version {} (this charter reads version {CASSETTE_VERSION})",
                    self.version
                ),
            ));
        }
        let mut seen: HashMap<(u64, CallKey), usize> = HashMap::new();
        for (index, call) in self.calls.iter().enumerate() {
            let line = line_of(&positions.calls, index);
            if call.round == 0 || call.attempt == 0 || call.turn == 0 {
                return Err(error(
                    line,
                    format!(
                        "call {}: `turn`, `round` and `attempt` count from 1",
                        call.key()
                    ),
                ));
            }
            if let Some(problem) = call.shape_problem() {
                return Err(error(line, format!("call {}: {problem}", call.key())));
            }
            let answers = [
                call.response.is_some(),
                call.raw.is_some(),
                call.error.is_some(),
            ];
            if answers.iter().filter(|given| **given).count() > 1 {
                return Err(error(
                    line,
                    format!(
                        "call {} has more than one of `response`, `raw` and `error`",
                        call.key()
                    ),
                ));
            }
            let texts = call
                .expect_prompt
                .iter()
                .flat_map(|expect| expect.contains.iter().chain(&expect.not_contains));
            if texts.into_iter().any(String::is_empty) {
                return Err(error(
                    line,
                    format!(
                        "call {}: an `expect_prompt` text is empty (every prompt contains it)",
                        call.key()
                    ),
                ));
            }
            if let Some(first) = seen.insert((call.turn, call.key()), index) {
                let first_line = line_of(&positions.calls, first)
                    .map(|line| format!(" (first at line {line})"))
                    .unwrap_or_default();
                let turn = if call.turn == 1 {
                    String::new()
                } else {
                    format!(" in turn {}", call.turn)
                };
                return Err(error(
                    line,
                    format!("duplicate call {}{turn}{first_line}", call.key()),
                ));
            }
        }
        let mut seen_humans: HashMap<(u64, &str, u64, u64), usize> = HashMap::new();
        for (index, human) in self.humans.iter().enumerate() {
            let line = line_of(&positions.humans, index);
            if let Some(first) =
                seen_humans.insert((human.turn, &human.step, human.round, human.attempt), index)
            {
                let first_line = line_of(&positions.humans, first)
                    .map(|line| format!(" (first at line {line})"))
                    .unwrap_or_default();
                return Err(error(
                    line,
                    format!(
                        "duplicate human answer for step `{}` in round {} (attempt {}){first_line}",
                        human.step, human.round, human.attempt
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Where the parts of a cassette are, for the messages of the loading checks.
#[derive(Debug, Default, Deserialize)]
struct Positions {
    #[serde(default)]
    version: Option<serde_saphyr::Spanned<u64>>,
    #[serde(default)]
    calls: Vec<serde_saphyr::Spanned<Value>>,
    #[serde(default)]
    humans: Vec<serde_saphyr::Spanned<Value>>,
}

fn read_file(path: &Path) -> Result<(String, String), LoadError> {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((name, text)),
        Err(error) => Err(LoadError(YamlError::at(
            &name,
            None,
            None,
            format!("cannot read the file: {error}"),
        ))),
    }
}

/// Durations written as in a spec (`250ms`, `2s`, `20m`, `2h`), for serde's `with`.
pub mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Parses a duration as the language writes it: `250ms`, `2s`, `20m`, `2h`, or a
    /// compound form, largest unit first (`4m50s`) — the compiler's one parser.
    pub fn parse(text: &str) -> Result<Duration, String> {
        charter_compiler::parse_duration(text.trim())
            .map(Duration::from_millis)
            .map_err(|error| format!("invalid duration {text:?}: {error}"))
    }

    /// Writes a duration as the console does, largest unit first (`90s` is `1m30s`,
    /// `20m`, `2s500ms`); below a millisecond it is rounded down.
    pub fn format(duration: Duration) -> String {
        let mut millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        if millis == 0 {
            return "0ms".to_string();
        }
        let mut text = String::new();
        for (unit, per) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
            if millis >= per {
                text.push_str(&format!("{}{unit}", millis / per));
                millis %= per;
            }
        }
        text
    }

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format(*duration))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse(&text).map_err(serde::de::Error::custom)
    }

    /// The same for `Option<Duration>` fields (with `#[serde(default)]`).
    pub mod option {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(
            duration: &Option<Duration>,
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            match duration {
                Some(duration) => serializer.serialize_str(&super::format(*duration)),
                None => serializer.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<Duration>, D::Error> {
            let text = Option::<String>::deserialize(deserializer)?;
            text.map(|text| super::parse(&text).map_err(serde::de::Error::custom))
                .transpose()
        }
    }
}

/// Every alias with the model and parameters it runs with.
pub fn models_used(spec: &CompiledSpec) -> BTreeMap<String, RecordedModel> {
    spec.models
        .iter()
        .map(|(alias, entry)| {
            let params = &entry.params;
            (
                alias.clone(),
                RecordedModel {
                    model: format!("{}:{}", entry.provider, entry.model),
                    temperature: params.temperature,
                    top_p: params.top_p,
                    max_tokens: params.max_tokens,
                    seed: params.seed,
                    output: (!params.output.is_default())
                        .then(|| params.output.as_str().to_string()),
                },
            )
        })
        .collect()
}

mod names;

pub use names::{Entry, NameProblem, closest_key, unknown_names};

#[cfg(test)]
mod tests;
