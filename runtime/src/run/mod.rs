//! The scheduler: the single writer of run state, driving a compiled flow through its phases to a terminal state with a reason.
//!
//! One [`Scheduler`] owns the [`RunState`]. Role calls run as tokio tasks (jobs) that send
//! their results back over a channel; they never touch the state. Every change is written
//! to the trace before it takes effect. Replies that arrive at the same instant are
//! applied in a fixed order (item id, then job number), so on a paused clock the same
//! cassette gives the same trace whatever order tokio wakes the tasks in.
//!
//! Module map: [`step`] one role call and its provider retries; [`each`] work items, the
//! task DAG, checks and stage retries; [`gate`] gate evaluation with the items issues
//! name; [`repair`] the repair decision; [`delivery`] the verified delivery; [`state`] the
//! state. The pure pieces they build on are the crate's `gate`, `repair`, `candidate`,
//! `dag` and `budget` modules.

pub mod delivery;
pub mod each;
pub mod gate;
pub mod outcome;
pub mod repair;
pub mod state;
pub mod step;

use std::collections::BTreeMap;
use std::sync::Arc;

use charter_compiler::CompiledSpec;
use charter_compiler::graph::{ExprIr, InvariantIr, NameIr, StepKind, TransitionIr};
use petgraph::Direction;
use petgraph::graph::NodeIndex;
use petgraph::visit::{Bfs, EdgeRef};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::eval::{Bindings, EvalError, evaluate, evaluate_bool};
use crate::provider::{HumanChannel, HumanRequest, Provider};
use crate::trace::{EventKind, RepairAction, RetryKind, TraceEvent, TraceSink};
use crate::validate::{Validator, violations_text};

pub use crate::trace::BudgetKind;
pub use delivery::{Delivered, DeliveryTarget};
pub use outcome::{Fault, Outcome, Reason, RunConfig, RunError, RunOutcome, Tamper};
pub use state::Phase;

use crate::budget::BudgetMeter;
use each::{Work, WorkState, build_items};
use gate::{Judged, judge};
use repair::{Decision, RepairPolicy};
use state::{Candidate, CandidateContent, ItemStatus, RunState, StepOutput};
use step::{CallUnit, JobMessage};

/// Runs `spec` on `input` to a terminal state. All I/O comes in through the parameters:
/// models through `provider`, people through `humans`, the trace through `sink`, the
/// delivery through `config`. Call it inside a tokio runtime; a replay uses a paused
/// clock (see [`replay_blocking`]).
pub async fn run(
    spec: &CompiledSpec,
    input: Value,
    provider: Arc<dyn Provider>,
    humans: &dyn HumanChannel,
    config: &RunConfig,
    sink: &mut dyn TraceSink,
) -> Result<RunOutcome, RunError> {
    let (sender, receiver) = unbounded_channel();
    let now = Instant::now();
    let mut scheduler = Scheduler {
        spec,
        provider,
        humans,
        config,
        sink,
        state: RunState::new(
            Value::Null,
            BudgetMeter::new(spec.budget.clone()),
            spec.repair.as_ref().map_or(2, |repair| repair.no_progress),
        ),
        started: now,
        wall_deadline: spec
            .budget
            .wall_ms
            .map(|wall| now + std::time::Duration::from_millis(wall)),
        sender,
        receiver,
        handles: BTreeMap::new(),
        next_job_id: 0,
        last_job: 0,
        seq: 0,
        current_step: None,
        current_role: None,
        pending_stop: None,
        fired_faults: Vec::new(),
        delivered: None,
        replanning: false,
    };
    let result = scheduler.run_to_end(input).await;
    scheduler.abort_jobs();
    result
}

/// Runs [`run`] on a fresh current-thread tokio runtime whose clock starts paused: every
/// recorded latency, timeout and backoff passes in virtual time, deterministically.
pub fn replay_blocking(
    spec: &CompiledSpec,
    input: Value,
    provider: Arc<dyn Provider>,
    humans: &dyn HumanChannel,
    config: &RunConfig,
    sink: &mut dyn TraceSink,
) -> Result<RunOutcome, RunError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|error| RunError::Flow(format!("cannot start the runtime: {error}")))?;
    runtime.block_on(run(spec, input, provider, humans, config, sink))
}

/// What a replay of a cassette produced: the outcome, and the recordings it never used.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayReport {
    pub outcome: RunOutcome,
    /// Recorded calls the run never made.
    pub unused_calls: Vec<crate::provider::CallKey>,
    /// Recorded human answers never asked for: (step, round).
    pub unused_humans: Vec<(String, u64)>,
}

/// Replays `cassette` for `spec` on `input` on a paused clock: calls and human answers
/// come from the cassette, its faults are injected, the delivery goes to `delivery`.
pub fn replay_cassette(
    spec: &CompiledSpec,
    input: Value,
    cassette: crate::scenario::Cassette,
    delivery: DeliveryTarget,
    sink: &mut dyn TraceSink,
) -> Result<ReplayReport, RunError> {
    let config = RunConfig {
        delivery,
        faults: cassette.faults.clone(),
        cancel: None,
    };
    let replay = Arc::new(crate::replay::ReplayProvider::new(cassette));
    let outcome = replay_blocking(spec, input, replay.clone(), replay.as_ref(), &config, sink)?;
    Ok(ReplayReport {
        outcome,
        unused_calls: replay.unused(),
        unused_humans: replay.unused_humans(),
    })
}

/// Why the flow stopped: a terminal state (a value), or an error.
#[derive(Debug)]
pub(crate) enum Halt {
    Stop(Stop),
    Error(RunError),
}

/// A terminal state reached, with its reason.
#[derive(Clone, Debug)]
pub(crate) struct Stop {
    pub outcome: Outcome,
    pub reason: Reason,
    pub message: Option<String>,
}

impl Stop {
    fn new(outcome: Outcome, reason: Reason, message: Option<String>) -> Stop {
        Stop {
            outcome,
            reason,
            message,
        }
    }
}

/// The single writer of a run's state.
pub(crate) struct Scheduler<'r> {
    spec: &'r CompiledSpec,
    provider: Arc<dyn Provider>,
    humans: &'r dyn HumanChannel,
    config: &'r RunConfig,
    sink: &'r mut dyn TraceSink,
    state: RunState,
    started: Instant,
    wall_deadline: Option<Instant>,
    sender: UnboundedSender<JobMessage>,
    receiver: UnboundedReceiver<JobMessage>,
    /// Jobs in flight, by id (aborted when the run stops).
    handles: BTreeMap<u64, JoinHandle<()>>,
    next_job_id: u64,
    /// The id of the job created last.
    last_job: u64,
    seq: u64,
    current_step: Option<String>,
    /// The role of the step running now (for checks and stage retries).
    current_role: Option<String>,
    /// Where the run ends once it reaches `done` after repair stopped (below_target).
    pending_stop: Option<Stop>,
    fired_faults: Vec<usize>,
    delivered: Option<Delivered>,
    /// The current round began with `replan` (its entry step is planning again).
    replanning: bool,
}

impl std::fmt::Debug for Scheduler<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Scheduler")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<'r> Scheduler<'r> {
    async fn run_to_end(&mut self, input: Value) -> Result<RunOutcome, RunError> {
        let spec = self.spec;
        let request = match spec.contracts.get("Request") {
            Some(_) => Validator::for_spec(spec)
                .validate("Request", &input)
                .map_err(|violations| RunError::Input(violations_text(&violations)))?,
            None => input,
        };
        self.state.request = request.clone();
        let frozen = (|| {
            self.emit(EventKind::RunStarted {
                spec: spec.name.clone(),
                version: spec.version.clone(),
                input: request,
            })?;
            self.emit(EventKind::PlanFrozen {
                spec_hash: spec.spec_hash.clone(),
                rules: spec
                    .rules
                    .iter()
                    .map(|(name, rules)| (name.clone(), rules.hash.clone()))
                    .collect(),
                prompts: spec
                    .roles
                    .iter()
                    .filter_map(|(name, role)| {
                        role.prompt.as_ref().map(|p| (name.clone(), p.hash.clone()))
                    })
                    .collect(),
            })
        })();
        let ended = match frozen {
            Ok(()) => self.flow().await,
            Err(halt) => Err(halt),
        };
        let stop = match ended {
            Ok(stop) | Err(Halt::Stop(stop)) => stop,
            Err(Halt::Error(error)) => {
                self.abort_jobs();
                return Err(error);
            }
        };
        self.abort_jobs();
        self.finish(stop)
    }

    /// Walks the flow from its entry step until a terminal.
    async fn flow(&mut self) -> Result<Stop, Halt> {
        let mut node = self.spec.flow.entry;
        loop {
            node = self.step(node).await?;
        }
    }

    /// Runs the step at `node` and returns the node to go to next.
    async fn step(&mut self, node: NodeIndex) -> Result<NodeIndex, Halt> {
        let spec = self.spec;
        let Some(step) = spec.flow.graph.node_weight(node) else {
            return Err(flow_error("the flow points at a missing node"));
        };
        if step.kind.is_terminal() {
            return Err(Halt::Stop(self.terminal_stop(&step.kind)));
        }
        let name = step.name.clone();
        // A refusal (cancelled, steps budget) is about the step that would have run.
        self.current_step = Some(name.clone());
        if self.is_cancelled() {
            return Err(self.cancel_stop());
        }
        if spec
            .budget
            .steps
            .is_some_and(|limit| self.state.meter.steps >= limit)
        {
            return Err(self.budget_stop(BudgetKind::Steps));
        }
        self.state.meter.count_step();
        self.state.last_ask_rejected = false;
        self.enter_phase(self.phase_of(node, &step.kind))?;
        let role = match &step.kind {
            StepKind::Call { role, .. }
            | StepKind::Each { role, .. }
            | StepKind::Finalize { role, .. } => Some(role.clone()),
            _ => None,
        };
        self.current_role = role.clone();
        self.emit(EventKind::StepStarted { role })?;
        let next = match &step.kind {
            StepKind::Call { role, args } => {
                let inputs = self.eval_args(args, &Bindings::default())?;
                let output = self.single_call(&name, role, inputs).await?;
                self.store(&name, StepOutput::Single(output));
                None
            }
            StepKind::Each {
                var,
                over,
                role,
                args,
                concurrency,
                check,
            } => {
                self.run_each(&name, var, over, role, args, *concurrency, check.as_ref())
                    .await?;
                None
            }
            StepKind::Gate { gate, repair } => {
                Some(self.run_gate(node, &name, gate, *repair).await?)
            }
            StepKind::Finalize { role, args } => {
                self.run_finalize(&name, role, args).await?;
                None
            }
            StepKind::Ask { question } => {
                self.run_ask(&name, question).await?;
                None
            }
            StepKind::Done | StepKind::Blocked { .. } | StepKind::Failed { .. } => None,
        };
        if node == spec.flow.entry {
            self.replanning = false;
        }
        self.form_candidate(&name)?;
        self.apply_faults(&name);
        self.check_invariants()?;
        self.check_budget()?;
        match next {
            Some(next) => Ok(next),
            None => self.next_node(node),
        }
    }

    /// Follows the first edge of `node` whose condition holds (edges in source order).
    fn next_node(&mut self, node: NodeIndex) -> Result<NodeIndex, Halt> {
        let spec = self.spec;
        let mut edges: Vec<_> = spec
            .flow
            .graph
            .edges_directed(node, Direction::Outgoing)
            .collect();
        edges.sort_by_key(|edge| edge.id().index());
        let bindings = self.bindings();
        for edge in edges {
            let take = match edge.weight() {
                TransitionIr::Always | TransitionIr::Else => true,
                TransitionIr::When { condition } => match evaluate_bool(condition, &bindings) {
                    Ok(holds) => holds,
                    Err(error) => {
                        return Err(self.step_failure(format!(
                            "a `when` condition cannot be evaluated: {error}"
                        )));
                    }
                },
                TransitionIr::Pass | TransitionIr::Fail | TransitionIr::Repair { .. } => false,
            };
            if take {
                return Ok(edge.target());
            }
        }
        Err(self.step_failure("no transition applies after this step".to_string()))
    }

    /// Runs a single role call as a one-item work list.
    async fn single_call(
        &mut self,
        step: &str,
        role: &str,
        inputs: Vec<Value>,
    ) -> Result<Value, Halt> {
        let mut works = vec![Work {
            id: None,
            value: Value::Null,
            depends_on: Vec::new(),
            inputs,
            state: WorkState::Waiting,
            stage_retries_used: 0,
            feedback: self.state.feedback.get(step).cloned(),
            context: serde_json::Map::new(),
        }];
        self.drive(step, role, &mut works, 1, None).await?;
        match works.pop().map(|work| work.state) {
            Some(WorkState::Settled(ItemStatus::Done(output))) => Ok(output),
            Some(WorkState::Settled(ItemStatus::Failed(reason))) => Err(self.step_failure(reason)),
            _ => Err(self.step_failure("the call did not finish".to_string())),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_each(
        &mut self,
        step: &str,
        var: &str,
        over: &ExprIr,
        role: &str,
        args: &[ExprIr],
        concurrency: u64,
        check: Option<&charter_compiler::graph::ItemCheckIr>,
    ) -> Result<(), Halt> {
        let bindings = self.bindings();
        let list = match evaluate(over, &bindings) {
            Ok(Value::Array(list)) => list,
            Ok(other) => {
                let message = format!(
                    "`each` needs a list, but got {}",
                    crate::value::describe(&other)
                );
                return Err(self.dag_failure(step, message));
            }
            Err(error) => return Err(self.dag_failure(step, error.to_string())),
        };
        let items = match build_items(&list) {
            Ok(items) => items,
            Err(message) => return Err(self.dag_failure(step, message)),
        };
        // Items kept from the previous round (a rerun that names items).
        let previous_round = self.state.round.saturating_sub(1);
        let keep: BTreeMap<String, Value> = match (
            self.state.rerun_items.remove(step),
            self.state.history.get(&(step.to_string(), previous_round)),
        ) {
            (Some(rerun), Some(StepOutput::Each(previous))) => {
                let rerun = with_dependents(&items, &rerun);
                previous
                    .iter()
                    .filter(|record| !rerun.contains(&record.id))
                    .filter_map(|record| match &record.status {
                        ItemStatus::Done(output) => Some((record.id.clone(), output.clone())),
                        _ => None,
                    })
                    .collect()
            }
            _ => BTreeMap::new(),
        };
        if !keep.is_empty() {
            let previous = self
                .state
                .artifacts
                .get(&(step.to_string(), previous_round))
                .cloned()
                .unwrap_or_default();
            let kept: state::Artifacts = previous
                .into_iter()
                .filter(|(item, _)| keep.contains_key(item))
                .collect();
            self.state
                .artifacts
                .insert((step.to_string(), self.state.round), kept);
        }
        let feedback = self.state.feedback.get(step).cloned();
        let mut works = Vec::with_capacity(items.len());
        for (id, value, depends_on) in items {
            let mut scope = Bindings::default();
            scope.set(NameIr::Local(var.to_string()), value.clone());
            let inputs = self.eval_args(args, &scope)?;
            let state = match keep.get(&id) {
                Some(output) => WorkState::Settled(ItemStatus::Done(output.clone())),
                None => WorkState::Waiting,
            };
            works.push(Work {
                id: Some(id),
                value,
                depends_on,
                inputs,
                state,
                stage_retries_used: 0,
                feedback: feedback.clone(),
                context: serde_json::Map::new(),
            });
        }
        self.drive(step, role, &mut works, concurrency, check)
            .await?;
        let records = Self::records(&works);
        self.store(step, StepOutput::Each(records));
        Ok(())
    }

    /// Evaluates the gate of a `gate` step on the current round's candidate, and decides
    /// the next node: `pass`, `fail`, or the repair table's action.
    async fn run_gate(
        &mut self,
        node: NodeIndex,
        step: &str,
        gate_name: &str,
        repair: bool,
    ) -> Result<NodeIndex, Halt> {
        let spec = self.spec;
        let Some(gate) = spec.gates.get(gate_name) else {
            return Err(flow_error(&format!("unknown gate `{gate_name}`")));
        };
        let Some(candidate) = self.state.candidate_of(&gate.subject).cloned() else {
            return Err(self.step_failure(format!(
                "gate `{gate_name}` judges step `{}`, which has no output in round {}",
                gate.subject, self.state.round
            )));
        };
        let mut bindings = self.bindings();
        bindings.set(NameIr::Candidate, candidate.value());
        let mut failed_ids = candidate.inner.failed.clone();
        failed_ids.extend(candidate.inner.skipped.iter().cloned());
        let result = judge(gate_name, gate, &bindings, &candidate.item_ids, &failed_ids);
        self.emit(result.event(candidate.id(), candidate.hash(), None))?;
        if let Some(stored) = self
            .state
            .candidates
            .iter_mut()
            .rev()
            .find(|c| c.id() == candidate.id() && c.step == candidate.step)
        {
            stored.evaluation = Some(result.clone());
        }
        let gate_value = serde_json::json!({
            "gate": gate_name,
            "passed": result.passed(),
            "score": result.score(),
            "codes": result.error_codes(),
        });
        self.store(step, StepOutput::Gate(gate_value));
        let wanted = if result.passed() {
            self.state.gate_passed = true;
            Some(TransitionIr::Pass)
        } else if repair {
            None
        } else {
            Some(TransitionIr::Fail)
        };
        match wanted {
            Some(kind) => {
                let mut edges: Vec<_> = spec
                    .flow
                    .graph
                    .edges_directed(node, Direction::Outgoing)
                    .collect();
                edges.sort_by_key(|edge| edge.id().index());
                edges
                    .into_iter()
                    .find(|edge| *edge.weight() == kind)
                    .map(|edge| edge.target())
                    .ok_or_else(|| flow_error(&format!("gate step `{step}` has no {kind:?} edge")))
            }
            None => self.repair(node, &candidate, &result).await,
        }
    }

    /// The repair loop's mechanics: no-progress and round accounting, then the action
    /// the policy chose.
    async fn repair(
        &mut self,
        gate_node: NodeIndex,
        candidate: &Candidate,
        result: &Judged,
    ) -> Result<NodeIndex, Halt> {
        let spec = self.spec;
        let Some(table) = &spec.repair else {
            return self.stop_repairing(Reason::NoRepairAction, gate_node);
        };
        self.enter_phase(Phase::Repairing)?;
        let progressed =
            self.state
                .progress
                .record(&result.error_codes(), result.score(), candidate.hash());
        if !progressed {
            self.emit(EventKind::NoProgress {
                rounds: self.state.progress.stalled(),
                limit: self.state.progress.limit(),
            })?;
        }
        let policy = RepairPolicy {
            table,
            flow: &spec.flow,
        };
        let decision = policy.decide(result);
        match &decision {
            Decision::Block { reason, code } | Decision::Fail { reason, code } => {
                let outcome = if matches!(decision, Decision::Block { .. }) {
                    Outcome::Blocked
                } else {
                    Outcome::Failed
                };
                self.emit_repair(&decision, Vec::new())?;
                return Err(Halt::Stop(Stop::new(
                    outcome,
                    Reason::HardGate { code: code.clone() },
                    Some(reason.clone()),
                )));
            }
            Decision::NoAction => return self.stop_repairing(Reason::NoRepairAction, gate_node),
            _ => {}
        }
        if self.state.progress.exhausted() {
            return self.stop_repairing(Reason::NoProgress, gate_node);
        }
        if self.state.round > table.rounds {
            return self.stop_repairing(Reason::MaxRounds, gate_node);
        }
        let (target, items, feedback) = match &decision {
            Decision::Ask { question, .. } => {
                let answer = self.ask_human(question).await?;
                let approved = answer
                    .get("approved")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if !approved {
                    return self.stop_repairing(Reason::HumanRejected, gate_node);
                }
                (candidate.step.clone(), Vec::new(), true)
            }
            Decision::Replan { .. } => {
                self.replanning = true;
                let entry = spec
                    .flow
                    .graph
                    .node_weight(spec.flow.entry)
                    .map(|step| step.name.clone())
                    .unwrap_or_default();
                (entry, Vec::new(), false)
            }
            Decision::Rerun {
                step,
                with_feedback,
                items,
                ..
            } => (step.clone(), items.clone(), *with_feedback),
            Decision::Block { .. } | Decision::Fail { .. } | Decision::NoAction => {
                return Err(flow_error("unreachable repair decision"));
            }
        };
        let Some(&target_node) = spec.flow.steps.get(&target) else {
            return Err(flow_error(&format!(
                "repair reruns unknown step `{target}`"
            )));
        };
        // What a rerun invalidates: the target and what follows it. A loop back through the
        // flow (an `ask` that returns to an earlier step) does not make an upstream step
        // "downstream": steps ranked before the target in flow order are kept.
        let order = crate::repair::flow_order(&spec.flow);
        let rank = |step: &str| order.get(step).copied().unwrap_or(usize::MAX);
        let invalidated: Vec<String> = crate::repair::downstream(&spec.flow, &target)
            .into_iter()
            .filter(|step| rank(step) >= rank(&target))
            .collect();
        self.emit_repair(&decision, invalidated.clone())?;
        self.emit(EventKind::Retry {
            retry: RetryKind::Repair,
            next: self.state.round + 1,
            delay_ms: 0,
            reason: result.error_codes().join(", "),
        })?;
        self.start_round(
            &target,
            &invalidated,
            items,
            feedback.then(|| result.feedback()),
        )?;
        Ok(target_node)
    }

    /// Starts the next round at `target`: invalidates the steps given, and for an `each`
    /// target with named items, only those items (and their dependents).
    fn start_round(
        &mut self,
        target: &str,
        invalidated: &[String],
        items: Vec<String>,
        feedback: Option<Value>,
    ) -> Result<(), Halt> {
        let previous = self.state.round;
        self.state.round += 1;
        self.state.feedback.clear();
        if let Some(feedback) = feedback {
            self.state.feedback.insert(target.to_string(), feedback);
        }
        if !items.is_empty() {
            self.state.rerun_items.insert(target.to_string(), items);
        }
        for step in invalidated {
            self.state.outputs.remove(step);
        }
        // What is not rerun carries over into the new round as it was.
        let round = self.state.round;
        let kept: Vec<String> = self.state.outputs.keys().cloned().collect();
        for step in &kept {
            if let Some(output) = self.state.history.get(&(step.clone(), previous)).cloned() {
                self.state.history.insert((step.clone(), round), output);
            }
            if let Some(files) = self.state.artifacts.get(&(step.clone(), previous)).cloned() {
                self.state.artifacts.insert((step.clone(), round), files);
            }
        }
        self.enter_phase(Phase::Executing)?;
        // A gate's subject that is not rerun (a rerun of its judge, say) is this round's
        // candidate again, under this round's id.
        for step in &kept {
            self.form_candidate(step)?;
        }
        Ok(())
    }

    /// Stops repairing: the best candidate goes to the finalize step as `below_target`
    /// (or the run fails when no candidate passed the hard rules).
    fn stop_repairing(&mut self, reason: Reason, gate_node: NodeIndex) -> Result<NodeIndex, Halt> {
        let best = self.state.best().map(|best| best.id().to_string());
        self.emit(EventKind::RepairStopped {
            reason: reason.clone(),
            best: best.clone(),
        })?;
        let Some(best) = best else {
            return Err(Halt::Stop(Stop::new(
                Outcome::Failed,
                reason,
                Some("no candidate passed the hard rules".to_string()),
            )));
        };
        let stop = Stop::new(
            Outcome::BelowTarget,
            reason,
            Some(format!(
                "delivering the best candidate {best}, which did not pass the gate"
            )),
        );
        match self.finalize_node(gate_node) {
            Some(node) => {
                self.pending_stop = Some(stop);
                Ok(node)
            }
            None => Err(Halt::Stop(stop)),
        }
    }

    /// The finalize step to deliver through: the first reachable from the gate's `pass`
    /// edge, else the first in the flow.
    fn finalize_node(&self, gate_node: NodeIndex) -> Option<NodeIndex> {
        let graph = &self.spec.flow.graph;
        let is_finalize = |node: NodeIndex| {
            matches!(
                graph.node_weight(node).map(|s| &s.kind),
                Some(StepKind::Finalize { .. })
            )
        };
        let pass_target = graph
            .edges_directed(gate_node, Direction::Outgoing)
            .find(|edge| *edge.weight() == TransitionIr::Pass)
            .map(|edge| edge.target());
        if let Some(start) = pass_target {
            let mut bfs = Bfs::new(graph, start);
            while let Some(node) = bfs.next(graph) {
                if is_finalize(node) {
                    return Some(node);
                }
            }
        }
        graph.node_indices().find(|node| is_finalize(*node))
    }

    /// The finalize step: the role gets `best`; its `Delivery.candidate_id` must be
    /// `best.id`; the delivery is written, read back and re-hashed.
    async fn run_finalize(&mut self, step: &str, role: &str, args: &[ExprIr]) -> Result<(), Halt> {
        let best = self.state.best().cloned();
        let inputs = self.eval_args(args, &Bindings::default())?;
        let output = self.single_call(step, role, inputs).await?;
        self.store(step, StepOutput::Single(output.clone()));
        let proposed = output
            .get("candidate_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let Some(best) = best else {
            return Err(self.mismatch(
                &proposed,
                "",
                format!("the finalizer named candidate `{proposed}`, but no candidate was evaluated without a hard failure"),
            ));
        };
        if proposed != best.id() {
            let message = format!(
                "the finalizer delivered candidate `{proposed}`, but the best evaluated candidate is `{}`",
                best.id()
            );
            return Err(self.mismatch(&proposed, best.hash(), message));
        }
        let Some(stored) = self.state.history.get(&(best.step.clone(), best.round())) else {
            let message = format!("the outputs of candidate `{}` are gone", best.id());
            return Err(self.mismatch(best.id(), best.hash(), message));
        };
        let written = self.state.artifacts.get(&(best.step.clone(), best.round()));
        let rebuilt = CandidateContent::of(stored, written).to_candidate(best.round());
        let summary = output
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let checked = delivery::deliver(&self.config.delivery, &rebuilt, summary, best.hash())
            .map_err(|message| Halt::Error(RunError::Delivery(message)))?;
        self.emit(EventKind::Delivery {
            candidate: best.id().to_string(),
            path: checked.path.clone(),
            expected_hash: best.hash().to_string(),
            actual_hash: checked.actual_hash.clone(),
            matches: checked.delivered.is_some(),
        })?;
        match checked.delivered {
            Some(delivered) => {
                self.delivered = Some(delivered);
                Ok(())
            }
            None => Err(Halt::Stop(Stop::new(
                Outcome::Failed,
                Reason::DeliveryMismatch,
                Some(format!(
                    "the delivered candidate `{}` hashes to {}, not to the evaluated {}",
                    best.id(),
                    checked.actual_hash,
                    best.hash()
                )),
            ))),
        }
    }

    /// A delivery refused before anything was written.
    fn mismatch(&mut self, candidate: &str, expected: &str, message: String) -> Halt {
        let actual = self
            .state
            .candidates
            .iter()
            .find(|c| c.id() == candidate)
            .map(|c| c.hash().to_string())
            .unwrap_or_default();
        if let Err(halt) = self.emit(EventKind::Delivery {
            candidate: candidate.to_string(),
            path: String::new(),
            expected_hash: expected.to_string(),
            actual_hash: actual,
            matches: false,
        }) {
            return halt;
        }
        Halt::Stop(Stop::new(
            Outcome::Failed,
            Reason::DeliveryMismatch,
            Some(message),
        ))
    }

    /// An `ask` step: a person's `Answer`.
    async fn run_ask(&mut self, step: &str, question: &str) -> Result<(), Halt> {
        let answer = self.ask_human(question).await?;
        self.state.last_ask_rejected = !answer
            .get("approved")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        self.store(step, StepOutput::Single(answer));
        Ok(())
    }

    async fn ask_human(&mut self, question: &str) -> Result<Value, Halt> {
        let step = self.current_step.clone().unwrap_or_default();
        let request = HumanRequest {
            step: step.clone(),
            round: self.state.round,
            question: question.to_string(),
        };
        let answer = self.humans.ask(request).await.map_err(|error| {
            Halt::Error(RunError::Human {
                step: step.clone(),
                message: error.to_string(),
            })
        })?;
        let answer = Validator::for_spec(self.spec)
            .validate("Answer", &answer)
            .map_err(|violations| {
                Halt::Error(RunError::Human {
                    step: step.clone(),
                    message: format!(
                        "the answer is not an `Answer`: {}",
                        violations_text(&violations)
                    ),
                })
            })?;
        self.emit(EventKind::Human {
            question: question.to_string(),
            answer: answer.clone(),
        })?;
        Ok(answer)
    }

    /// The stop a terminal node means.
    fn terminal_stop(&mut self, kind: &StepKind) -> Stop {
        let from = self.current_step.clone().unwrap_or_default();
        match kind {
            StepKind::Done => self.pending_stop.take().unwrap_or_else(|| {
                let reason = if self.state.gate_passed {
                    Reason::GatePassed
                } else {
                    Reason::Done
                };
                Stop::new(Outcome::Completed, reason, None)
            }),
            StepKind::Blocked { reason } | StepKind::Failed { reason } => {
                let outcome = if matches!(kind, StepKind::Blocked { .. }) {
                    Outcome::Blocked
                } else {
                    Outcome::Failed
                };
                let why = if self.state.last_ask_rejected {
                    Reason::HumanRejected
                } else {
                    Reason::StepFailed { step: from }
                };
                Stop::new(outcome, why, Some(reason.clone()))
            }
            _ => Stop::new(Outcome::Failed, Reason::StepFailed { step: from }, None),
        }
    }

    /// Writes `run_finished` and builds the outcome.
    fn finish(&mut self, stop: Stop) -> Result<RunOutcome, RunError> {
        let best = self.state.best().map(|best| best.id().to_string());
        let delivered = match stop.outcome {
            Outcome::Completed | Outcome::BelowTarget => self.delivered.clone(),
            _ => None,
        };
        self.current_step = None;
        let event = EventKind::RunFinished {
            outcome: stop.outcome,
            reason: stop.reason.clone(),
            best: best.clone(),
            delivered: delivered.is_some(),
            message: stop.message.clone(),
        };
        match self.emit(event) {
            Ok(()) => {}
            Err(Halt::Error(error)) => return Err(error),
            Err(Halt::Stop(_)) => {}
        }
        Ok(RunOutcome {
            outcome: stop.outcome,
            reason: stop.reason,
            message: stop.message,
            best,
            delivered,
            rounds: self.state.round,
            candidates: self
                .state
                .candidates
                .iter()
                .map(|c| (c.id().to_string(), c.hash().to_string(), c.score()))
                .collect(),
        })
    }

    // ---- state helpers ----

    /// Stores a step's output for the current round (scope and history).
    fn store(&mut self, step: &str, output: StepOutput) {
        self.state
            .history
            .insert((step.to_string(), self.state.round), output.clone());
        self.state.outputs.insert(step.to_string(), output);
    }

    /// Forms the round's candidate when `step` is the subject of a gate step's gate.
    fn form_candidate(&mut self, step: &str) -> Result<(), Halt> {
        let spec = self.spec;
        let is_subject = spec.flow.graph.node_weights().any(|node| match &node.kind {
            StepKind::Gate { gate, .. } => spec.gates.get(gate).is_some_and(|g| g.subject == step),
            _ => false,
        });
        if !is_subject {
            return Ok(());
        }
        let Some(output) = self.state.outputs.get(step) else {
            return Ok(());
        };
        let written = self
            .state
            .artifacts
            .get(&(step.to_string(), self.state.round));
        let content = CandidateContent::of(output, written);
        let candidate = Candidate {
            step: step.to_string(),
            item_ids: content.item_ids.clone(),
            inner: content.to_candidate(self.state.round),
            evaluation: None,
        };
        self.emit(EventKind::Candidate {
            id: candidate.id().to_string(),
            hash: candidate.hash().to_string(),
            items: candidate.inner.items.len() as u64,
            failed: candidate.inner.failed.clone(),
            skipped: candidate.inner.skipped.clone(),
        })?;
        let round = self.state.round;
        self.state
            .candidates
            .retain(|c| !(c.round() == round && c.step == step));
        self.state.candidates.push(candidate);
        Ok(())
    }

    /// Applies the `tamper` faults that fire after `step` (each once): the stored output
    /// of the named item, or of the candidate's step, is overwritten after the fact.
    fn apply_faults(&mut self, step: &str) {
        let faults = self.config.faults.clone();
        let round = self.state.round;
        let subjects: Vec<String> = self
            .state
            .candidates
            .iter()
            .filter(|c| c.round() == round)
            .map(|c| c.step.clone())
            .collect();
        for (index, fault) in faults.iter().enumerate() {
            let Fault::Tamper(Tamper { after, item }) = fault;
            if after != step || self.fired_faults.contains(&index) {
                continue;
            }
            self.fired_faults.push(index);
            let mut hit = None;
            for ((name, r), output) in self.state.history.iter_mut() {
                if *r != round {
                    continue;
                }
                match (output, item) {
                    (StepOutput::Each(records), Some(item)) => {
                        for record in records.iter_mut().filter(|record| &record.id == item) {
                            if let ItemStatus::Done(value) = &mut record.status {
                                tamper(value, after);
                                hit = Some(name.clone());
                            }
                        }
                    }
                    (StepOutput::Single(value), None)
                        if name == after || subjects.contains(name) =>
                    {
                        tamper(value, after);
                        hit = Some(name.clone());
                    }
                    _ => {}
                }
            }
            if let Some(name) = hit {
                // A late overwrite also reaches the files the item wrote.
                let key = item.clone().unwrap_or_default();
                if let Some(files) = self
                    .state
                    .artifacts
                    .get_mut(&(name.clone(), round))
                    .and_then(|written| written.get_mut(&key))
                {
                    for content in files.values_mut() {
                        content.push_str("\n(overwritten after evaluation)");
                    }
                }
                if let Some(stored) = self.state.history.get(&(name.clone(), round)).cloned() {
                    self.state.outputs.insert(name, stored);
                }
            }
        }
    }

    /// Checks every `always` invariant; a broken one fails the run.
    fn check_invariants(&mut self) -> Result<(), Halt> {
        let spec = self.spec;
        let any = spec
            .invariants
            .values()
            .any(|invariant| matches!(invariant, InvariantIr::Always { .. }));
        if !any {
            return Ok(());
        }
        let bindings = self.bindings();
        for (name, invariant) in &spec.invariants {
            let InvariantIr::Always { expr } = invariant else {
                continue;
            };
            let broken = match evaluate_bool(expr, &bindings) {
                Ok(holds) => (!holds).then(|| "the expression is false".to_string()),
                Err(EvalError::Unbound { .. }) => None,
                Err(error) => Some(error.to_string()),
            };
            if let Some(message) = broken {
                self.emit(EventKind::InvariantViolated {
                    invariant: name.clone(),
                    message: message.clone(),
                })?;
                return Err(Halt::Stop(Stop::new(
                    Outcome::Failed,
                    Reason::Invariant { name: name.clone() },
                    Some(format!("invariant `{name}` no longer holds: {message}")),
                )));
            }
        }
        Ok(())
    }

    /// Fails the run when a budget ran out (tokens, cost, wall; steps are checked
    /// before a step starts).
    fn check_budget(&mut self) -> Result<(), Halt> {
        self.state.meter.set_elapsed(self.elapsed());
        match self.state.meter.exhausted() {
            Some(BudgetKind::Steps) | None => Ok(()),
            Some(which) => Err(self.budget_stop(which)),
        }
    }

    /// In-flight calls are dropped, no further call is made, and the run fails; the best
    /// candidate so far is named but not delivered.
    fn budget_stop(&mut self, which: BudgetKind) -> Halt {
        self.abort_jobs();
        self.state.meter.set_elapsed(self.elapsed());
        if let Err(halt) = self.emit(self.state.meter.event(which)) {
            return halt;
        }
        let best = self.state.best().map(|best| best.id().to_string());
        Halt::Stop(Stop::new(
            Outcome::Failed,
            Reason::BudgetExhausted(which),
            best.map(|best| format!("the best candidate so far, {best}, is not delivered")),
        ))
    }

    /// After a batch of replies: budgets and `always` invariants.
    fn after_batch(&mut self) -> Result<(), Halt> {
        self.check_budget()?;
        self.check_invariants()
    }

    fn step_failure(&mut self, message: String) -> Halt {
        let step = self.current_step.clone().unwrap_or_default();
        Halt::Stop(Stop::new(
            Outcome::Failed,
            Reason::StepFailed { step },
            Some(message),
        ))
    }

    /// Names in scope: `request`, step outputs of this round, `run`, `best`, and the
    /// current round's latest candidate.
    fn bindings(&self) -> Bindings {
        let mut bindings = Bindings {
            request: Some(self.state.request.clone()),
            steps: self.state.visible_outputs(),
            run: Some(self.state.run_value()),
            ..Bindings::default()
        };
        if let Some(best) = self.state.best() {
            bindings.best = Some(best.value());
        }
        if let Some(candidate) = self
            .state
            .candidates
            .iter()
            .rev()
            .find(|c| c.round() == self.state.round)
        {
            bindings.candidate = Some(candidate.value());
        }
        bindings
    }

    /// Evaluates a call's arguments (with `extra`'s locals on top of the run's names).
    fn eval_args(&mut self, args: &[ExprIr], extra: &Bindings) -> Result<Vec<Value>, Halt> {
        let mut bindings = self.bindings();
        bindings.locals.extend(extra.locals.clone());
        if bindings.best.is_none() {
            bindings.best = Some(Value::Null);
        }
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            match evaluate(arg, &bindings) {
                Ok(value) => values.push(value),
                // A step that did not run on the way here (another `when` branch, or a
                // finalize reached when repair stopped) is `none` to the role.
                Err(EvalError::Unbound { .. }) => values.push(Value::Null),
                Err(error) => {
                    return Err(
                        self.step_failure(format!("an argument cannot be evaluated: {error}"))
                    );
                }
            }
        }
        Ok(values)
    }

    fn phase_of(&self, node: NodeIndex, kind: &StepKind) -> Phase {
        match kind {
            StepKind::Gate { .. } => Phase::Evaluating,
            StepKind::Finalize { .. } => Phase::Finalizing,
            StepKind::Each { .. } => Phase::Executing,
            StepKind::Ask { .. } => match self.state.phase {
                Phase::Received => Phase::Planning,
                other => other,
            },
            StepKind::Call { role, .. } => {
                let judges = self
                    .spec
                    .roles
                    .get(role)
                    .is_some_and(|role| role.inputs.iter().any(|input| input == "Candidate"));
                let planning = self.state.round == 1 || self.replanning;
                if node == self.spec.flow.entry && planning {
                    Phase::Planning
                } else if judges {
                    Phase::Evaluating
                } else {
                    Phase::Executing
                }
            }
            _ => self.state.phase,
        }
    }

    /// Moves the state machine to `phase`, writing the transition first.
    fn enter_phase(&mut self, phase: Phase) -> Result<(), Halt> {
        if self.state.phase == phase {
            return Ok(());
        }
        self.emit(EventKind::Phase {
            from: self.state.phase.to_string(),
            to: phase.to_string(),
        })?;
        self.state.phase = phase;
        Ok(())
    }

    // ---- jobs ----

    fn next_job(&mut self) -> u64 {
        self.next_job_id += 1;
        self.last_job = self.next_job_id;
        self.next_job_id
    }

    /// Waits for the next replies and returns every one that arrives at the same instant,
    /// in item id order (then job order). A wall budget that runs out while waiting
    /// stops the run.
    async fn wait_batch(
        &mut self,
        owners: &BTreeMap<u64, usize>,
        works: &[Work],
    ) -> Result<Vec<JobMessage>, Halt> {
        let deadline = self.wall_deadline;
        let receiver = &mut self.receiver;
        let receive = async move {
            match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, receiver.recv())
                    .await
                    .ok()
                    .flatten(),
                None => receiver.recv().await,
            }
        };
        let first = match self.config.cancel.clone() {
            Some(mut cancel) => tokio::select! {
                biased;
                () = cancelled(&mut cancel) => None,
                first = receive => Some(first),
            },
            None => Some(receive.await),
        };
        let Some(first) = first else {
            return Err(self.cancel_stop());
        };
        let mut batch: Vec<JobMessage> = first.into_iter().collect();
        // Let every task woken at this instant run and report before deciding anything:
        // yielding never advances a paused clock.
        let mut quiet = 0;
        while quiet < 3 {
            tokio::task::yield_now().await;
            let mut got = false;
            while let Ok(message) = self.receiver.try_recv() {
                batch.push(message);
                got = true;
            }
            quiet = if got { 0 } else { quiet + 1 };
        }
        if batch.is_empty() {
            self.check_budget()?;
            return Err(self.budget_stop(BudgetKind::Wall));
        }
        batch.sort_by(|a, b| {
            let item = |job: u64| {
                owners
                    .get(&job)
                    .and_then(|index| works.get(*index))
                    .and_then(|work| work.id.clone())
            };
            item(a.job).cmp(&item(b.job)).then(a.job.cmp(&b.job))
        });
        Ok(batch)
    }

    /// The run was cancelled: in-flight calls are dropped.
    fn cancel_stop(&mut self) -> Halt {
        self.abort_jobs();
        Halt::Stop(Stop::new(
            Outcome::Cancelled,
            Reason::Cancelled,
            Some("the run was cancelled".to_string()),
        ))
    }

    fn is_cancelled(&self) -> bool {
        self.config
            .cancel
            .as_ref()
            .is_some_and(|cancel| *cancel.borrow())
    }

    fn abort_jobs(&mut self) {
        for (_, handle) in std::mem::take(&mut self.handles) {
            handle.abort();
        }
    }

    // ---- trace ----

    fn elapsed(&self) -> std::time::Duration {
        Instant::now().duration_since(self.started)
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Appends an event for the current step.
    fn emit(&mut self, kind: EventKind) -> Result<(), Halt> {
        let step = self.current_step.clone();
        self.append(step, None, None, kind)
    }

    /// Appends an event about one call.
    fn emit_call(&mut self, unit: &CallUnit, kind: EventKind) -> Result<(), Halt> {
        self.append(
            Some(unit.step.clone()),
            unit.item.clone(),
            Some(unit.attempt),
            kind,
        )
    }

    /// Appends an event about one work item.
    fn emit_item(&mut self, step: &str, item: Option<&str>, kind: EventKind) -> Result<(), Halt> {
        self.append(Some(step.to_string()), item.map(str::to_string), None, kind)
    }

    fn emit_repair(&mut self, decision: &Decision, invalidated: Vec<String>) -> Result<(), Halt> {
        let (action, codes, items) = match decision {
            Decision::Block { reason, code } => (
                RepairAction::Block {
                    reason: reason.clone(),
                },
                vec![code.clone()],
                Vec::new(),
            ),
            Decision::Fail { reason, code } => (
                RepairAction::Fail {
                    reason: reason.clone(),
                },
                vec![code.clone()],
                Vec::new(),
            ),
            Decision::Ask { question, codes } => (
                RepairAction::Ask {
                    question: question.clone(),
                },
                codes.clone(),
                Vec::new(),
            ),
            Decision::Replan { codes } => (RepairAction::Replan, codes.clone(), Vec::new()),
            Decision::Rerun {
                step,
                with_feedback,
                items,
                codes,
            } => (
                RepairAction::Rerun {
                    step: step.clone(),
                    with_feedback: *with_feedback,
                },
                codes.clone(),
                items.clone(),
            ),
            Decision::NoAction => (RepairAction::Accept, Vec::new(), Vec::new()),
        };
        self.emit(EventKind::Repair {
            action,
            codes,
            invalidated,
            items,
        })
    }

    fn append(
        &mut self,
        step: Option<String>,
        item: Option<String>,
        attempt: Option<u64>,
        kind: EventKind,
    ) -> Result<(), Halt> {
        let round = if self.state.meter.steps == 0 {
            0
        } else {
            self.state.round
        };
        let event = TraceEvent {
            seq: self.seq,
            t_ms: self.elapsed_ms(),
            round,
            step,
            item,
            attempt,
            kind,
        };
        self.seq += 1;
        self.sink
            .append(&event)
            .map_err(|error| Halt::Error(RunError::Trace(error.to_string())))
    }
}

/// Resolves once `cancel` holds `true` (never, if its sender is gone while it is false).
async fn cancelled(cancel: &mut tokio::sync::watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The ids in `rerun` and every item that depends on one of them, transitively.
fn with_dependents(items: &[(String, Value, Vec<String>)], rerun: &[String]) -> Vec<String> {
    let mut set: Vec<String> = rerun.to_vec();
    loop {
        let before = set.len();
        for (id, _, depends_on) in items {
            if !set.contains(id) && depends_on.iter().any(|dependency| set.contains(dependency)) {
                set.push(id.clone());
            }
        }
        if set.len() == before {
            set.sort();
            return set;
        }
    }
}

/// Alters a stored output as a late overwrite would.
fn tamper(value: &mut Value, after: &str) {
    match value {
        Value::Object(fields) => {
            fields.insert("tampered_after".into(), json!(after));
        }
        other => *other = json!({ "tampered_after": after, "was": other.clone() }),
    }
}

fn flow_error(message: &str) -> Halt {
    Halt::Error(RunError::Flow(message.to_string()))
}
