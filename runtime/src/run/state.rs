//! The run state: everything the scheduler owns and only the scheduler changes (phase, round, counters, step outputs, candidates).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::gate::GateResult;

/// The phase of the state machine (DESIGN §4): `received -> planning -> executing ->
/// evaluating -> (repairing -> executing ...) -> finalizing -> completed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Received,
    Planning,
    Executing,
    Evaluating,
    Repairing,
    Finalizing,
}

impl fmt::Display for Phase {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Phase::Received => "received",
            Phase::Planning => "planning",
            Phase::Executing => "executing",
            Phase::Evaluating => "evaluating",
            Phase::Repairing => "repairing",
            Phase::Finalizing => "finalizing",
        })
    }
}

/// What became of one work item of an `each` step.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemStatus {
    /// The item's output passed its contract (and its check, if any).
    Done(Value),
    /// The item's calls failed, or its check failed with no stage retries left.
    Failed(String),
    /// A dependency failed or was skipped.
    Skipped(String),
}

/// One work item of an `each` step: its id, its input value and what became of it.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemRecord {
    pub id: String,
    pub value: Value,
    pub depends_on: Vec<String>,
    pub status: ItemStatus,
}

/// The stored output of one step in one round.
#[derive(Clone, Debug, PartialEq)]
pub enum StepOutput {
    /// A role call, a finalize or an ask.
    Single(Value),
    /// An `each` step's items, in id order.
    Each(Vec<ItemRecord>),
    /// A gate step (its output is its evaluation).
    Gate(Value),
}

impl StepOutput {
    /// The value expressions see: a call's output, or the list of an `each` step's
    /// successful outputs in item id order.
    pub fn visible(&self) -> Value {
        match self {
            StepOutput::Single(value) | StepOutput::Gate(value) => value.clone(),
            StepOutput::Each(items) => Value::Array(
                items
                    .iter()
                    .filter_map(|item| match &item.status {
                        ItemStatus::Done(output) => Some(output.clone()),
                        _ => None,
                    })
                    .collect(),
            ),
        }
    }
}

/// The content of a candidate that its hash covers.
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateContent {
    pub items: Vec<Value>,
    /// The ids of the items in `items`, in the same order (empty for a single call).
    pub item_ids: Vec<String>,
    pub failed: Vec<String>,
    pub skipped: Vec<String>,
}

impl CandidateContent {
    /// The candidate content of a step's stored output.
    pub fn of(output: &StepOutput) -> CandidateContent {
        match output {
            StepOutput::Single(value) | StepOutput::Gate(value) => CandidateContent {
                items: vec![value.clone()],
                item_ids: Vec::new(),
                failed: Vec::new(),
                skipped: Vec::new(),
            },
            StepOutput::Each(records) => {
                let mut content = CandidateContent {
                    items: Vec::new(),
                    item_ids: Vec::new(),
                    failed: Vec::new(),
                    skipped: Vec::new(),
                };
                for record in records {
                    match &record.status {
                        ItemStatus::Done(output) => {
                            content.items.push(output.clone());
                            content.item_ids.push(record.id.clone());
                        }
                        ItemStatus::Failed(_) => content.failed.push(record.id.clone()),
                        ItemStatus::Skipped(_) => content.skipped.push(record.id.clone()),
                    }
                }
                content
            }
        }
    }

    /// What the hash covers: `{failed, items, skipped}` (never the id or round, so that
    /// two rounds producing the same content have the same hash).
    pub fn hashed_value(&self) -> Value {
        json!({ "items": self.items, "failed": self.failed, "skipped": self.skipped })
    }

    /// Every string in the items, one per line, in order: what `candidate.text` matches against.
    pub fn text(&self) -> String {
        let mut lines = Vec::new();
        for item in &self.items {
            collect_strings(item, &mut lines);
        }
        lines.join("\n")
    }
}

fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, out)),
        Value::Object(fields) => fields.values().for_each(|field| collect_strings(field, out)),
        _ => {}
    }
}

/// A candidate: one round's outputs of a gate's subject step, with its id and hash.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// `c<round>`.
    pub id: String,
    pub round: u64,
    /// The step whose outputs these are.
    pub step: String,
    pub content: CandidateContent,
    /// `sha256:<hex>` of the canonical JSON of [`CandidateContent::hashed_value`].
    pub hash: String,
    /// The gate's evaluation, once a gate judged it.
    pub evaluation: Option<GateResult>,
}

impl Candidate {
    /// The `Candidate` record expressions and prompts see.
    pub fn value(&self) -> Value {
        json!({
            "id": self.id,
            "round": self.round,
            "items": self.content.items,
            "text": self.content.text(),
            "hash": self.hash,
            "failed": self.content.failed,
            "skipped": self.content.skipped,
        })
    }

    /// True when the candidate was evaluated and no hard rule failed.
    pub fn eligible(&self) -> bool {
        self.evaluation
            .as_ref()
            .is_some_and(|evaluation| !evaluation.hard_failed())
    }
}

/// The counters of a run (`run` in expressions).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    pub step_count: u64,
    pub tokens: u64,
    pub cost: f64,
    pub elapsed_ms: u64,
}

/// What a round's evaluation looked like, for `no_progress`.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundSignature {
    pub codes: Vec<String>,
    pub score: Option<f64>,
    pub hash: String,
}

/// Everything the scheduler owns.
#[derive(Debug)]
pub struct RunState {
    pub phase: Phase,
    /// 1 for the first pass; each repair starts the next round.
    pub round: u64,
    pub counters: Counters,
    pub request: Value,
    /// Step outputs of the current round, by step name (invalidated steps removed).
    pub outputs: BTreeMap<String, StepOutput>,
    /// Every step output by (step, round): what a candidate of an earlier round is
    /// rebuilt from at delivery.
    pub history: BTreeMap<(String, u64), StepOutput>,
    /// Every candidate, in round order.
    pub candidates: Vec<Candidate>,
    /// Feedback for the next run of a step (repair `with feedback`), by step name.
    pub feedback: BTreeMap<String, Value>,
    /// Items of an `each` step to rerun in the current round (others are kept), by step.
    pub rerun_items: BTreeMap<String, Vec<String>>,
    /// The n-th call of a role for (step, round, item, role): the next attempt number.
    pub attempts: BTreeMap<(String, u64, Option<String>, Option<String>), u64>,
    /// Rounds in a row that made no progress.
    pub no_progress: u64,
    /// The previous round's evaluation signature.
    pub last_signature: Option<RoundSignature>,
    /// True once a gate step passed.
    pub gate_passed: bool,
    /// The last `ask` answer was a rejection.
    pub last_ask_rejected: bool,
}

impl RunState {
    pub fn new(request: Value) -> RunState {
        RunState {
            phase: Phase::Received,
            round: 1,
            counters: Counters::default(),
            request,
            outputs: BTreeMap::new(),
            history: BTreeMap::new(),
            candidates: Vec::new(),
            feedback: BTreeMap::new(),
            rerun_items: BTreeMap::new(),
            attempts: BTreeMap::new(),
            no_progress: 0,
            last_signature: None,
            gate_passed: false,
            last_ask_rejected: false,
        }
    }

    /// `run` in expressions: `{round, step_count, tokens, cost, elapsed}` (elapsed in ms).
    pub fn run_value(&self) -> Value {
        json!({
            "round": self.round,
            "step_count": self.counters.step_count,
            "tokens": self.counters.tokens,
            "cost": self.counters.cost,
            "elapsed": self.counters.elapsed_ms,
        })
    }

    /// The best candidate: the highest score among those with no hard failure; the
    /// earliest wins a tie.
    pub fn best(&self) -> Option<&Candidate> {
        let mut best: Option<&Candidate> = None;
        for candidate in self.candidates.iter().filter(|c| c.eligible()) {
            let score = candidate_score(candidate);
            match best {
                Some(current) if candidate_score(current) >= score => {}
                _ => best = Some(candidate),
            }
        }
        best
    }

    /// The current round's candidate of `step`, if formed.
    pub fn candidate_of(&self, step: &str) -> Option<&Candidate> {
        self.candidates
            .iter()
            .rev()
            .find(|candidate| candidate.round == self.round && candidate.step == step)
    }

    /// Step outputs as expressions see them.
    pub fn visible_outputs(&self) -> BTreeMap<String, Value> {
        self.outputs
            .iter()
            .map(|(step, output)| (step.clone(), output.visible()))
            .collect()
    }

    /// The next attempt number of a role's call for (step, current round, item, role).
    pub fn next_attempt(&mut self, step: &str, item: Option<&str>, role: Option<&str>) -> u64 {
        let key = (
            step.to_string(),
            self.round,
            item.map(str::to_string),
            role.map(str::to_string),
        );
        let counter = self.attempts.entry(key).or_insert(0);
        *counter += 1;
        *counter
    }
}

fn candidate_score(candidate: &Candidate) -> f64 {
    candidate
        .evaluation
        .as_ref()
        .and_then(|evaluation| evaluation.score)
        .unwrap_or(f64::NEG_INFINITY)
}

/// A JSON object from key/value pairs (trace event fields).
pub fn fields<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect()
}
