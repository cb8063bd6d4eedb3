//! The run state: everything the scheduler owns and only the scheduler changes (phase, round, counters, step outputs, candidates).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::gate::Judged;
use crate::engine::budget::BudgetMeter;
use crate::engine::candidate::best_candidate;
use crate::engine::feedback::Feedback;
use crate::engine::repair::ProgressTracker;

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
    /// A role call, a finalize or an ask (shared: the round's outputs, the history and
    /// the answer hold the same value).
    Single(Arc<Value>),
    /// An `each` step's items, in id order.
    Each(Vec<ItemRecord>),
    /// A gate step (its output is its evaluation).
    Gate(Arc<Value>),
}

impl StepOutput {
    /// The value expressions see: a call's output, or the list of an `each` step's
    /// successful outputs in item id order.
    pub fn visible(&self) -> Value {
        match self {
            StepOutput::Single(value) | StepOutput::Gate(value) => (**value).clone(),
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

    /// [`StepOutput::visible`], shared with the output where it is one value.
    pub fn visible_shared(&self) -> Arc<Value> {
        match self {
            StepOutput::Single(value) | StepOutput::Gate(value) => Arc::clone(value),
            StepOutput::Each(_) => Arc::new(self.visible()),
        }
    }
}

/// Files written by tools (effect `write`, arguments `{path, content}`), by item id
/// (`""` for a single call), then path -> content.
pub type Artifacts = BTreeMap<String, BTreeMap<String, String>>;

/// The content of a candidate that its hash covers.
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateContent {
    /// Files the items' tools wrote: path -> content (part of the hash).
    pub artifacts: BTreeMap<String, String>,
    pub items: Vec<Value>,
    /// The ids of the items in `items`, in the same order (empty for a single call).
    pub item_ids: Vec<String>,
    pub failed: Vec<String>,
    pub skipped: Vec<String>,
}

impl CandidateContent {
    /// The candidate content of a step's stored output.
    /// The candidate content of a step's stored output and the files its items wrote
    /// (by item id; `""` for a single call).
    pub fn of(output: &StepOutput, written: Option<&Artifacts>) -> CandidateContent {
        let files = |item: &str| {
            written
                .and_then(|written| written.get(item))
                .cloned()
                .unwrap_or_default()
        };
        match output {
            StepOutput::Single(value) | StepOutput::Gate(value) => CandidateContent {
                artifacts: files(""),
                items: vec![(**value).clone()],
                item_ids: Vec::new(),
                failed: Vec::new(),
                skipped: Vec::new(),
            },
            StepOutput::Each(records) => {
                let mut content = CandidateContent {
                    artifacts: BTreeMap::new(),
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
                            content.artifacts.extend(files(&record.id));
                        }
                        ItemStatus::Failed(_) => content.failed.push(record.id.clone()),
                        ItemStatus::Skipped(_) => content.skipped.push(record.id.clone()),
                    }
                }
                content
            }
        }
    }

    /// The candidate of round `round` with this content (its hash and text computed).
    pub fn into_candidate(self, round: u64) -> crate::engine::candidate::Candidate {
        crate::engine::candidate::Candidate::new(
            round,
            self.items,
            self.failed,
            self.skipped,
            self.artifacts,
        )
    }
}

/// A candidate: one round's outputs of a gate's subject step, and its evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The step whose outputs these are.
    pub step: String,
    /// The ids of the items, in the order of `inner.items` (empty for a single call).
    pub item_ids: Vec<String>,
    /// Id `c<round>`, content, text and hash (shared: a gate step works on a copy of its
    /// candidate while the run state changes).
    pub inner: Arc<crate::engine::candidate::Candidate>,
    /// The gate's evaluation, once a gate judged it.
    pub evaluation: Option<Arc<Judged>>,
    /// `inner` as expressions and prompts see it, built once.
    value: Arc<Value>,
}

impl Candidate {
    pub fn new(
        step: String,
        item_ids: Vec<String>,
        inner: crate::engine::candidate::Candidate,
    ) -> Self {
        let value = Arc::new(inner.to_value());
        Candidate {
            step,
            item_ids,
            inner: Arc::new(inner),
            evaluation: None,
            value,
        }
    }

    pub fn id(&self) -> &str {
        &self.inner.id
    }

    pub fn round(&self) -> u64 {
        self.inner.round
    }

    pub fn hash(&self) -> &str {
        &self.inner.hash
    }

    /// The `Candidate` record expressions and prompts see.
    pub fn value(&self) -> Arc<Value> {
        Arc::clone(&self.value)
    }

    pub fn score(&self) -> Option<f64> {
        self.evaluation.as_deref().and_then(Judged::score)
    }
}

/// Feedback waiting for the next run of a step: the feedback, and the step's output being
/// fixed (for an `each` step, each item's `previous` is its own output in it).
#[derive(Clone, Debug, PartialEq)]
pub struct PendingFeedback {
    pub feedback: Feedback,
    pub previous: Option<StepOutput>,
}

impl PendingFeedback {
    /// The feedback of a single call: `previous` is the step's output.
    pub fn for_call(self) -> Feedback {
        let mut feedback = self.feedback;
        feedback.previous = self.previous.map(|previous| previous.visible());
        feedback
    }

    /// The feedback of work item `item`: its own issues and its own previous output.
    pub fn for_item(&self, item: &str) -> Feedback {
        let previous = match &self.previous {
            Some(StepOutput::Each(records)) => records
                .iter()
                .find(|record| record.id == item)
                .and_then(|record| match &record.status {
                    ItemStatus::Done(output) => Some(output.clone()),
                    _ => None,
                }),
            _ => None,
        };
        self.feedback.for_item(item, previous)
    }
}

/// One run of a step, as `history` shows it: `{step, round, visit, output}`.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryEntry {
    pub step: String,
    pub round: u64,
    /// The n-th run of the step within its round (loops closed by `when`), from 1.
    pub visit: u64,
    pub output: Arc<Value>,
}

/// Everything the scheduler owns.
#[derive(Debug)]
pub struct RunState {
    pub phase: Phase,
    /// 1 for the first pass; each repair starts the next round.
    pub round: u64,
    /// Tokens, cost, steps and elapsed time against the budget.
    pub meter: BudgetMeter,
    pub request: Arc<Value>,
    /// Step outputs of the current round, by step name (invalidated steps removed);
    /// changed only through `set_output` and `remove_output`, which keep `visible` in step.
    outputs: BTreeMap<String, StepOutput>,
    /// `outputs` as expressions see them, built once per change.
    visible: Arc<BTreeMap<String, Arc<Value>>>,
    /// Every step output by (step, round): what a candidate of an earlier round is
    /// rebuilt from at delivery.
    pub history: BTreeMap<(String, u64), StepOutput>,
    /// The files each step's items wrote, by (step, round).
    pub artifacts: BTreeMap<(String, u64), Artifacts>,
    /// Every candidate, in round order.
    pub candidates: Vec<Candidate>,
    /// Feedback for the next run of a step, by step name (taken when the step runs).
    pub feedback: BTreeMap<String, PendingFeedback>,
    /// Every run of a step, in order: what `history` shows a role.
    pub runs: Vec<HistoryEntry>,
    /// How often each `ask` step has asked in this run (for `ask "…" max N`).
    pub asks: BTreeMap<String, u64>,
    /// The n-th question of a step in a round, by (step, round): a human answer's attempt.
    pub human_attempts: BTreeMap<(String, u64), u64>,
    /// Items of an `each` step to rerun in the current round (others are kept), by step.
    pub rerun_items: BTreeMap<String, Vec<String>>,
    /// The n-th call of a role for (step, round, item, role): the next attempt number.
    pub attempts: BTreeMap<(String, u64, Option<String>, Option<String>), u64>,
    /// Rounds in a row that made no progress (`repair.no_progress`).
    pub progress: ProgressTracker,
    /// True once a gate step passed.
    pub gate_passed: bool,
    /// The last `ask` answer was a rejection.
    pub last_ask_rejected: bool,
    /// The role of the last role step that ran: whose output the answer is.
    pub answered_by: Option<String>,
    /// The conversation's state (`session`), in a run that is one turn of one.
    pub session: Option<Arc<Value>>,
    /// The last [`RunState::run_shared`] and what it was built from: expressions and
    /// prompts read `run` many times between two changes of it.
    run_cache: std::sync::Mutex<Option<(RunKey, Arc<Value>)>>,
}

/// What `run` is built from (the cost as bits, so the key compares exactly).
#[derive(Clone, Debug, PartialEq)]
struct RunKey {
    round: u64,
    steps: u64,
    tokens: u64,
    cost: u64,
    elapsed: std::time::Duration,
    answered_by: Option<String>,
}

impl RunState {
    pub fn new(request: Value, meter: BudgetMeter, no_progress: u64) -> RunState {
        RunState {
            phase: Phase::Received,
            round: 1,
            meter,
            request: Arc::new(request),
            outputs: BTreeMap::new(),
            visible: Arc::new(BTreeMap::new()),
            history: BTreeMap::new(),
            artifacts: BTreeMap::new(),
            candidates: Vec::new(),
            feedback: BTreeMap::new(),
            runs: Vec::new(),
            asks: BTreeMap::new(),
            human_attempts: BTreeMap::new(),
            rerun_items: BTreeMap::new(),
            attempts: BTreeMap::new(),
            progress: ProgressTracker::new(no_progress),
            gate_passed: false,
            last_ask_rejected: false,
            answered_by: None,
            session: None,
            run_cache: std::sync::Mutex::new(None),
        }
    }

    /// `run` in expressions: `{round, step_count, tokens, cost, elapsed}` (elapsed in ms),
    /// and `answered_by` once a role step has run.
    pub fn run_value(&self) -> Value {
        let mut value = self.meter.run_value(self.round);
        if let (Some(role), Value::Object(fields)) = (&self.answered_by, &mut value) {
            fields.insert("answered_by".to_string(), Value::String(role.clone()));
        }
        value
    }

    /// [`RunState::run_value`], shared: built again only when what it shows changed.
    pub fn run_shared(&self) -> Arc<Value> {
        let key = RunKey {
            round: self.round,
            steps: self.meter.steps,
            tokens: self.meter.tokens,
            cost: self.meter.cost.to_bits(),
            elapsed: self.meter.elapsed,
            answered_by: self.answered_by.clone(),
        };
        let Ok(mut cache) = self.run_cache.lock() else {
            return Arc::new(self.run_value());
        };
        if let Some((cached, value)) = cache.as_ref()
            && *cached == key
        {
            return Arc::clone(value);
        }
        let value = Arc::new(self.run_value());
        *cache = Some((key, Arc::clone(&value)));
        value
    }

    /// The best candidate: the highest score among those evaluated with no hard
    /// failure; the earliest wins a tie.
    pub fn best(&self) -> Option<&Candidate> {
        let ranks: Vec<(Option<f64>, bool)> = self
            .candidates
            .iter()
            .map(|candidate| match &candidate.evaluation {
                Some(judged) => (judged.score(), judged.hard_failure()),
                None => (None, true),
            })
            .collect();
        best_candidate(&ranks).and_then(|index| self.candidates.get(index))
    }

    /// The current round's candidate of `step`, if formed.
    pub fn candidate_of(&self, step: &str) -> Option<&Candidate> {
        self.candidates
            .iter()
            .rev()
            .find(|candidate| candidate.round() == self.round && candidate.step == step)
    }

    /// Step outputs as expressions see them (shared, not copied).
    pub fn visible_outputs(&self) -> Arc<BTreeMap<String, Arc<Value>>> {
        Arc::clone(&self.visible)
    }

    /// Step outputs of the current round, by step name.
    pub fn outputs(&self) -> &BTreeMap<String, StepOutput> {
        &self.outputs
    }

    /// Sets a step's output in the current round.
    pub fn set_output(&mut self, step: String, output: StepOutput) {
        let visible = output.visible_shared();
        self.set_output_visible(step, output, visible);
    }

    /// [`RunState::set_output`] with the output's visible value already built.
    pub fn set_output_visible(&mut self, step: String, output: StepOutput, visible: Arc<Value>) {
        Arc::make_mut(&mut self.visible).insert(step.clone(), visible);
        self.outputs.insert(step, output);
    }

    /// Removes a step's output from the current round (the step is rerun).
    pub fn remove_output(&mut self, step: &str) {
        Arc::make_mut(&mut self.visible).remove(step);
        self.outputs.remove(step);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(id: &str, status: ItemStatus) -> ItemRecord {
        ItemRecord {
            id: id.to_string(),
            value: json!({"id": id}),
            depends_on: Vec::new(),
            status,
        }
    }

    #[test]
    fn an_each_steps_output_is_the_list_of_its_done_items_in_order() {
        let output = StepOutput::Each(vec![
            item("T-1", ItemStatus::Done(json!({"text": "one"}))),
            item("T-2", ItemStatus::Failed("timed out".into())),
            item("T-3", ItemStatus::Done(json!({"text": "three"}))),
            item("T-4", ItemStatus::Skipped("T-2 failed".into())),
        ]);
        let expected = json!([{"text": "one"}, {"text": "three"}]);
        assert_eq!(output.visible(), expected);
        assert_eq!(*output.visible_shared(), expected);
    }

    #[test]
    fn a_single_output_is_shared_not_copied() {
        let value = Arc::new(json!({"text": "one"}));
        let output = StepOutput::Single(Arc::clone(&value));
        assert!(Arc::ptr_eq(&output.visible_shared(), &value));
        assert_eq!(output.visible(), *value);
    }

    #[test]
    fn run_is_built_again_only_when_what_it_shows_changed() {
        let meter = BudgetMeter::new(charter_compiler::graph::BudgetIr::default());
        let mut state = RunState::new(json!({}), meter, 0);
        let first = state.run_shared();
        assert!(Arc::ptr_eq(&first, &state.run_shared()));
        state.meter.steps += 1;
        let second = state.run_shared();
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(second["step_count"], 1);
        state.answered_by = Some("writer".into());
        let third = state.run_shared();
        assert_eq!(third["answered_by"], "writer");
        state.round += 1;
        assert_eq!(state.run_shared()["round"], 2);
        state.meter.elapsed += std::time::Duration::from_secs(1);
        assert_eq!(state.run_shared()["elapsed"], 1000);
        state.meter.tokens += 7;
        assert_eq!(state.run_shared()["tokens"], 7);
    }
}
