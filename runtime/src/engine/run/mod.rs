//! The scheduler: the single writer of run state, driving a compiled flow through its phases to a terminal state with a reason.
//!
//! One [`Scheduler`] owns the [`RunState`]. Role calls run as jobs that give their results
//! back; they never touch the state. A live call is a tokio task replying over a channel;
//! a replayed call (its answer and latency known at once) and a backoff are timed by the
//! scheduler itself, with no task. Every change is written to the trace before it takes
//! effect. Replies that arrive at the same instant are applied in a fixed order (item id,
//! then job number), so on a paused clock the same cassette gives the same trace whatever
//! order tokio wakes the tasks in.
//!
//! Module map: this file holds the flow walk (`step`, transitions, `each` and call steps,
//! candidates, faults, invariants, budgets, scope); `rounds` gate steps and the repair
//! loop's mechanics; `finalize` the finalize and `ask` steps; `jobs` the job channel, the
//! scheduler's own timed jobs and their per-instant ordering; `emit` the trace. [`step`]
//! is one role call and its provider retries; [`each`] work items, the task DAG, checks
//! and stage retries; [`gate`] gate evaluation with the items issues name; [`repair`] the
//! repair decision (the policy); [`delivery`] the verified delivery; [`state`] the state.
//! The pure pieces they build on are the crate's `gate`, `repair`, `candidate`, `dag` and
//! `budget` modules. `tool_step` runs `tool` steps, `summary` the `on_exhausted` step,
//! `session` ends a conversation's turn, and [`outcome`] is how a run ends.
//!
//! Counting (DESIGN §4): the attempt of a key is the n-th call of that role for (step,
//! round, item), whatever caused it; `retry: N` is N+1 calls; `rounds R` is R+1 rounds. A
//! rerun keeps the items it does not name and their outputs; what it invalidates follows
//! flow edges, never repair edges, and keeps the steps ranked before the target (a loop
//! back through an `ask` does not make an upstream step downstream); what it does not
//! touch carries into the next round, a subject that is not rerun becoming the new
//! round's candidate. `best` is the highest score with no hard failure (the earliest on a
//! tie). A step with an `on_error` edge that fails (`step_failed` of that very step) goes
//! there, traced `step_error`; any other stop (budget, invariant, cancel) stands.

pub mod delivery;
pub mod each;
mod emit;
mod finalize;
pub mod gate;
mod jobs;
pub mod outcome;
pub mod repair;
mod rounds;
mod session;
pub mod state;
pub mod step;
mod summary;
mod tool_step;

use std::collections::BTreeMap;
use std::sync::Arc;

use charter_compiler::CompiledSpec;
use charter_compiler::graph::{ExprIr, InvariantIr, NameIr, StepKind, TransitionIr};
use petgraph::Direction;
use petgraph::graph::EdgeReference;
use petgraph::graph::NodeIndex;
use petgraph::visit::{Bfs, EdgeRef};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::engine::effects::{Clock, Effects, Files, HumanChannel, PausedClock, Provider};
use crate::engine::eval::{
    Bindings, EvalError, evaluate, evaluate_bool, evaluate_shared, mentions,
};
use crate::engine::feedback::{self, Feedback, Reason as FeedbackReason};
use crate::engine::prompt::Prompts;
use crate::engine::provider::HumanRequest;
use crate::engine::validate::{Validator, validate_request_owned, violations_text};
use crate::formats::trace::{EventKind, RepairAction, RetryKind, TraceEvent, TraceSink};

pub use crate::formats::trace::BudgetKind;
pub use delivery::{Delivered, DeliveryTarget};
pub use outcome::{Fault, Outcome, Reason, RunConfig, RunError, RunOutcome, Tamper};
pub use state::Phase;

use crate::engine::budget::BudgetMeter;
use each::{Work, WorkState, build_items};
use gate::{Judged, judge};
use repair::{Decision, RepairPolicy};
use state::{Candidate, CandidateContent, ItemStatus, PendingFeedback, RunState, StepOutput};
use step::{CallUnit, JobMessage};

/// Runs `spec` on `input` to a terminal state. Every effect on the outside world goes
/// through `effects` (DESIGN §16): models and tools through its provider, people through
/// its human channel, the trace to its sink, the delivery through its files, time on its
/// clock; `config` says where the delivery goes. Call it inside a tokio runtime; a replay
/// uses a paused clock (see [`replay_blocking`]).
pub async fn run(
    spec: &CompiledSpec,
    input: Value,
    effects: Effects<'_>,
    config: &RunConfig,
) -> Result<RunOutcome, RunError> {
    let Effects {
        provider,
        humans,
        sink,
        files,
        clock,
    } = effects;
    let (sender, receiver) = unbounded_channel();
    let now = clock.now();
    // A run started again (by a durable engine) counts its budget from its first start.
    let started = now.checked_sub(clock.started_ago()).unwrap_or(now);
    let mut scheduler = Scheduler {
        spec,
        prompts: Prompts::new(spec),
        provider,
        humans,
        config,
        sink,
        files,
        state: RunState::new(
            Value::Null,
            BudgetMeter::new(spec.budget.clone()),
            spec.repair.as_ref().map_or(2, |repair| repair.no_progress),
        ),
        started,
        wall_deadline: spec
            .budget
            .wall_ms
            .map(|wall| started + std::time::Duration::from_millis(wall)),
        sender,
        receiver,
        handles: BTreeMap::new(),
        run_moves_clock: clock.moved_only_by_the_run(),
        clock,
        now: None,
        role_settings: Vec::new(),
        calls: Vec::new(),
        due: Vec::new(),
        next_job_id: 0,
        last_job: 0,
        seq: 0,
        current_step: None,
        current_role: None,
        pending_stop: None,
        fired_faults: Vec::new(),
        delivered: None,
        replanning: false,
        summarizing: false,
        answer: None,
        session: None,
    };
    let result = scheduler.run_to_end(input).await;
    scheduler.abort_jobs();
    result
}

/// Runs [`run`] on a current-thread tokio runtime whose clock is paused: every recorded
/// latency, timeout and backoff passes in virtual time, deterministically.
///
/// The runtime is kept per thread and reused by the next replay on that thread (a
/// library of scenarios replays thousands of runs): a run's times are measured from its
/// own start, and a run aborts its jobs before it returns, so nothing of one run reaches
/// the next. Should the thread's runtime be in use (a replay called from inside a
/// replay, which tokio refuses anyway), a runtime is built for the call, as before.
pub fn replay_blocking(
    spec: &CompiledSpec,
    input: Value,
    effects: Effects<'_>,
    config: &RunConfig,
) -> Result<RunOutcome, RunError> {
    thread_local! {
        static PAUSED: std::cell::RefCell<Option<tokio::runtime::Runtime>> =
            const { std::cell::RefCell::new(None) };
    }
    let paused = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .map_err(|error| RunError::Flow(format!("cannot start the runtime: {error}")))
    };
    let replay = run(
        spec,
        input,
        effects.with_clock(Arc::new(PausedClock)),
        config,
    );
    PAUSED.with(|slot| {
        let Ok(mut slot) = slot.try_borrow_mut() else {
            return paused()?.block_on(replay);
        };
        let runtime = match slot.take() {
            Some(runtime) => runtime,
            None => paused()?,
        };
        let result = runtime.block_on(replay);
        *slot = Some(runtime);
        result
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

/// An `each` step's work list for one round: every item (id, value, dependencies) and
/// the outputs of those kept from the previous round.
struct EachList {
    items: Vec<(String, Value, Vec<String>)>,
    keep: BTreeMap<String, Value>,
}

impl EachList {
    /// How many items this round calls (the kept ones are not called again).
    fn to_run(&self) -> u64 {
        let kept = self
            .items
            .iter()
            .filter(|(id, _, _)| self.keep.contains_key(id))
            .count();
        u64::try_from(self.items.len().saturating_sub(kept)).unwrap_or(u64::MAX)
    }
}

/// The single writer of a run's state.
pub(crate) struct Scheduler<'r> {
    spec: &'r CompiledSpec,
    /// Each role's prompt context, built on its first call.
    prompts: Prompts<'r>,
    provider: Arc<dyn Provider>,
    humans: &'r dyn HumanChannel,
    config: &'r RunConfig,
    sink: &'r mut dyn TraceSink,
    files: &'r dyn Files,
    state: RunState,
    started: Instant,
    wall_deadline: Option<Instant>,
    sender: UnboundedSender<JobMessage>,
    receiver: UnboundedReceiver<JobMessage>,
    /// Tasks in flight, by job id (aborted when the run stops).
    handles: BTreeMap<u64, JoinHandle<()>>,
    clock: Arc<dyn Clock>,
    /// Whether only the run's own waits move the clock ([`Clock::moved_only_by_the_run`]).
    run_moves_clock: bool,
    /// The paused clock's reading since the run last waited ([`Scheduler::now`]).
    now: Option<Instant>,
    /// Each role's `provider:model` and call settings, made on its first call.
    role_settings: Vec<(String, String, Arc<crate::engine::provider::CallSettings>)>,
    /// Calls issued to such a provider since the last wait: (job, request, timeout).
    calls: Vec<(u64, crate::engine::provider::ModelRequest, Option<u64>)>,
    /// The scheduler's own jobs that have started: each message and when it arrives.
    due: Vec<(Instant, JobMessage)>,
    next_job_id: u64,
    /// The id of the job created last.
    last_job: u64,
    seq: u64,
    current_step: Option<Arc<str>>,
    /// The role of the step running now (for checks and stage retries).
    current_role: Option<String>,
    /// Where the run ends once it reaches `done` after repair stopped (below_target).
    pending_stop: Option<Stop>,
    fired_faults: Vec<usize>,
    delivered: Option<Delivered>,
    /// The current round began with `replan` (its entry step is planning again).
    replanning: bool,
    /// The `on_exhausted` step is running: no budget stops it, and its call is not retried.
    summarizing: bool,
    /// The output of the last role step that ran: the run's answer if it ends well.
    answer: Option<Arc<Value>>,
    /// The conversation this run is a turn of, as the turn found it.
    session: Option<crate::engine::session::Session>,
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
        // Before anything runs: a bad input calls nothing.
        let request = validate_request_owned(spec, input)
            .map_err(|violations| RunError::Input(violations_text(&violations)))?;
        self.state.request = Arc::new(request.clone());
        // A spec that keeps a session runs each turn in one; given none, a new one.
        self.session = match (&self.config.session, &spec.session) {
            (Some(session), _) => Some(session.clone()),
            (None, Some(_)) => crate::engine::session::Session::new(spec).ok(),
            (None, None) => None,
        };
        self.state.session = self
            .session
            .as_ref()
            .map(|session| Arc::new(session.value()));
        let turn = self
            .session
            .as_ref()
            .map(crate::engine::session::Session::next_turn);
        let frozen = (|| {
            self.emit(EventKind::RunStarted {
                spec: spec.name.clone(),
                version: spec.version.clone(),
                input: request,
                turn,
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
        let stop = match (&stop.reason, &spec.budget.on_exhausted) {
            (Reason::BudgetExhausted(which), Some(summary)) => {
                let which = *which;
                match self.summarize(summary, which).await {
                    Ok(stop) | Err(Halt::Stop(stop)) => stop,
                    Err(Halt::Error(error)) => {
                        self.abort_jobs();
                        return Err(error);
                    }
                }
            }
            _ => stop,
        };
        self.abort_jobs();
        self.finish(stop)
    }

    /// Walks the flow from its entry step until a terminal.
    async fn flow(&mut self) -> Result<Stop, Halt> {
        let mut node = self.spec.flow.entry;
        loop {
            node = match self.step(node).await {
                Ok(next) => next,
                Err(Halt::Stop(stop)) => self.on_error(node, stop)?,
                Err(halt) => return Err(halt),
            };
        }
    }

    /// `on_error -> STEP`: when the step at `node` failed (`step_failed` of that step),
    /// the run goes to STEP, whose role sees the error in `feedback`; any other stop stands.
    fn on_error(&mut self, node: NodeIndex, stop: Stop) -> Result<NodeIndex, Halt> {
        let graph = &self.spec.flow.graph;
        let failed = match (&stop.reason, graph.node_weight(node)) {
            (Reason::StepFailed { step }, Some(here)) if *step == here.name => step.clone(),
            _ => return Err(Halt::Stop(stop)),
        };
        let handler = self
            .outgoing(node)
            .into_iter()
            .find(|edge| *edge.weight() == TransitionIr::OnError)
            .map(|edge| edge.target());
        let Some((handler, to)) =
            handler.and_then(|handler| Some((handler, graph.node_weight(handler)?.name.clone())))
        else {
            return Err(Halt::Stop(stop));
        };
        let error = stop
            .message
            .unwrap_or_else(|| "the step failed".to_string());
        self.emit(EventKind::StepError {
            error: error.clone(),
            to: to.clone(),
        })?;
        let mut feedback = Feedback::new(FeedbackReason::Error, self.state.round);
        feedback.issues.push(feedback::issue(feedback::IssueFields {
            code: "STEP_FAILED",
            severity: "error",
            gate: None,
            rule: &failed,
            message: &error,
            detail: None,
            items: &[],
        }));
        self.state.feedback.insert(
            to,
            PendingFeedback {
                feedback,
                previous: None,
            },
        );
        Ok(handler)
    }

    /// Runs the step at `node` and returns the node to go to next. One piece: one arm per
    /// step kind, each calling the module that runs it; splitting would scatter the dispatch.
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
        self.current_step = Some(Arc::from(name.as_str()));
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
        // An `each` step's list is evaluated before it starts, so that `step_started` can
        // say how many items this round runs (the phase view counts them off).
        let mut each_list = match &step.kind {
            StepKind::Each { over, .. } => Some(self.each_list(&name, over)),
            _ => None,
        };
        let items = match &each_list {
            Some(Ok(list)) => Some(list.to_run()),
            _ => None,
        };
        let tool = match &step.kind {
            StepKind::Tool { tool, .. } => Some(tool.clone()),
            _ => None,
        };
        self.emit(EventKind::StepStarted { role, items, tool })?;
        let next = match &step.kind {
            StepKind::Call { role, args } => {
                let inputs = self.eval_args(args, &Bindings::default())?;
                let output = self.single_call(&name, role, inputs).await?;
                self.store(&name, StepOutput::Single(Arc::new(output)));
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
                let list = match each_list.take() {
                    Some(list) => list,
                    None => self.each_list(&name, over),
                };
                let list = list.map_err(|message| self.dag_failure(&name, message))?;
                self.run_each(&name, list, var, role, args, *concurrency, check.as_ref())
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
            StepKind::Ask { question, max } => {
                self.run_ask(&name, question, *max).await?;
                None
            }
            StepKind::Tool { tool, args } => {
                let output = self.run_tool_step(&name, tool, args).await?;
                self.store(&name, StepOutput::Single(Arc::new(output)));
                None
            }
            // A branch calls nothing: only its transitions are evaluated.
            StepKind::Branch
            | StepKind::Done
            | StepKind::Blocked { .. }
            | StepKind::Failed { .. } => None,
        };
        if node == spec.flow.entry {
            self.replanning = false;
        }
        self.form_candidate(&name)?;
        self.apply_faults(&name);
        self.check_invariants()?;
        self.check_budget()?;
        let next = match next {
            Some(next) => next,
            None => self.next_node(node)?,
        };
        if matches!(step.kind, StepKind::Ask { .. }) {
            self.hand_answer_on(&name, next);
        }
        Ok(next)
    }

    /// The edges leaving `node`, in source order (the order transitions are tried in).
    fn outgoing(&self, node: NodeIndex) -> Vec<EdgeReference<'r, TransitionIr>> {
        let mut edges: Vec<_> = self
            .spec
            .flow
            .graph
            .edges_directed(node, Direction::Outgoing)
            .collect();
        edges.sort_by_key(|edge| edge.id().index());
        edges
    }

    /// Follows the first edge of `node` whose condition holds (edges in source order).
    fn next_node(&mut self, node: NodeIndex) -> Result<NodeIndex, Halt> {
        let edges = self.outgoing(node);
        // The names in scope are gathered only for a `when` condition.
        let mut bindings: Option<Bindings> = None;
        for edge in edges {
            let take = match edge.weight() {
                TransitionIr::Always | TransitionIr::Else => true,
                TransitionIr::When { condition } => {
                    match evaluate_bool(condition, bindings.get_or_insert_with(|| self.bindings()))
                    {
                        Ok(holds) => holds,
                        Err(error) => {
                            return Err(self.step_failure(format!(
                                "a `when` condition cannot be evaluated: {error}"
                            )));
                        }
                    }
                }
                TransitionIr::Pass
                | TransitionIr::Fail
                | TransitionIr::OnError
                | TransitionIr::Repair { .. } => false,
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
        inputs: Vec<Arc<Value>>,
    ) -> Result<Value, Halt> {
        let mut works = vec![Work {
            id: None,
            value: Value::Null,
            depends_on: Vec::new(),
            inputs,
            state: WorkState::Waiting,
            stage_retries_used: 0,
            feedback: self
                .state
                .feedback
                .remove(step)
                .map(|pending| Arc::new(pending.for_call().into_value())),
            context: serde_json::Map::new(),
        }];
        self.drive(step, role, &mut works, 1, None).await?;
        match works.pop().map(|work| work.state) {
            Some(WorkState::Settled(ItemStatus::Done(output))) => Ok(output),
            Some(WorkState::Settled(ItemStatus::Failed(reason))) => Err(self.step_failure(reason)),
            _ => Err(self.step_failure("the call did not finish".to_string())),
        }
    }

    /// An `each` step's work items for this round, and the outputs of those kept from the
    /// previous round (a rerun that names items). Changes no state but the pending rerun.
    fn each_list(&mut self, step: &str, over: &ExprIr) -> Result<EachList, String> {
        let bindings = self.bindings();
        let list = match evaluate(over, &bindings) {
            Ok(Value::Array(list)) => list,
            Ok(other) => {
                return Err(format!(
                    "`each` needs a list, but got {}",
                    crate::engine::value::describe(&other)
                ));
            }
            Err(error) => return Err(error.to_string()),
        };
        let items = build_items(&list)?;
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
        Ok(EachList { items, keep })
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_each(
        &mut self,
        step: &str,
        list: EachList,
        var: &str,
        role: &str,
        args: &[ExprIr],
        concurrency: u64,
        check: Option<&charter_compiler::graph::ItemCheckIr>,
    ) -> Result<(), Halt> {
        let EachList { items, keep } = list;
        let previous_round = self.state.round.saturating_sub(1);
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
        let feedback = self.state.feedback.remove(step);
        let mut works = Vec::with_capacity(items.len());
        for (id, value, depends_on) in items {
            let mut scope = Bindings::default();
            scope.set(NameIr::Local(var.to_string()), value.clone());
            let inputs = self.eval_args(args, &scope)?;
            let state = match keep.get(&id) {
                Some(output) => WorkState::Settled(ItemStatus::Done(output.clone())),
                None => WorkState::Waiting,
            };
            let item_feedback = feedback.as_ref().map(|pending| pending.for_item(&id));
            works.push(Work {
                id: Some(id),
                value,
                depends_on,
                inputs,
                state,
                stage_retries_used: 0,
                feedback: item_feedback.map(|feedback| Arc::new(feedback.into_value())),
                context: serde_json::Map::new(),
            });
        }
        self.drive(step, role, &mut works, concurrency, check)
            .await?;
        let records = Self::records(&works);
        self.store(step, StepOutput::Each(records));
        Ok(())
    }

    /// The stop a terminal node means.
    fn terminal_stop(&mut self, kind: &StepKind) -> Stop {
        let from = self.current_step.as_deref().unwrap_or_default().to_string();
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
                    Reason::Routed { step: from }
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
        let answer = match stop.outcome {
            Outcome::Completed | Outcome::BelowTarget => {
                self.answer.take().map(Arc::unwrap_or_clone)
            }
            _ => None,
        };
        let session = match &answer {
            Some(answer) => self.remember(answer)?,
            None => None,
        };
        // A flow that delivers nothing answers: `answer.json` beside where a delivery goes.
        if let (None, Some(answer), delivery::DeliveryTarget::Directory(directory)) =
            (&delivered, &answer, &self.config.delivery)
        {
            let path = directory.join("answer.json");
            let text = serde_json::to_string_pretty(answer).unwrap_or_default() + "\n";
            // The directory may not exist yet (a served run's), as for a delivery.
            let files = self.files;
            let written = files
                .create_dir_all(directory)
                .and_then(|()| files.write(&path, text.as_bytes()));
            written.map_err(|error| {
                RunError::Delivery(format!(
                    "cannot write the answer to {}: {error}",
                    path.display()
                ))
            })?;
        }
        self.current_step = None;
        let event = EventKind::RunFinished {
            outcome: stop.outcome,
            reason: stop.reason.clone(),
            best: best.clone(),
            delivered: delivered.is_some(),
            message: stop.message.clone(),
        };
        // A trace that cannot take `run_finished` ends the run as unrecorded, whatever
        // it reached.
        let stop = match self.emit(event) {
            Ok(()) => stop,
            Err(Halt::Error(error)) => return Err(error),
            Err(Halt::Stop(unwritten)) => unwritten,
        };
        Ok(RunOutcome {
            answer,
            answered_by: self.state.answered_by.clone(),
            session,
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

    /// Stores a step's output for the current round (scope and history), and logs the
    /// run for roles that keep `history`.
    fn store(&mut self, step: &str, output: StepOutput) {
        let round = self.state.round;
        let visible = output.visible_shared();
        if let Some((_, step_ir)) = self.spec.flow.step(step)
            && matches!(
                step_ir.kind,
                StepKind::Call { .. }
                    | StepKind::Each { .. }
                    | StepKind::Finalize { .. }
                    | StepKind::Tool { .. }
            )
        {
            self.answer = Some(Arc::clone(&visible));
            self.state.answered_by = match &step_ir.kind {
                StepKind::Call { role, .. }
                | StepKind::Each { role, .. }
                | StepKind::Finalize { role, .. } => Some(role.clone()),
                _ => None,
            };
        }
        let visit = 1 + self
            .state
            .runs
            .iter()
            .filter(|entry| entry.step == step && entry.round == round)
            .count() as u64;
        self.state.runs.push(state::HistoryEntry {
            step: step.to_string(),
            round,
            visit,
            output: Arc::clone(&visible),
        });
        self.state
            .history
            .insert((step.to_string(), round), output.clone());
        self.state
            .set_output_visible(step.to_string(), output, visible);
    }

    /// What `history` shows `role`: the earlier runs of the steps it names, oldest
    /// first, at most `last N`; `None` when the role keeps no history.
    fn history_for(&self, role: &str) -> Option<Value> {
        let history = self.spec.roles.get(role)?.history.as_ref()?;
        let entries: Vec<&state::HistoryEntry> = self
            .state
            .runs
            .iter()
            .filter(|entry| history.steps.contains(&entry.step))
            .collect();
        let keep = history.last.map_or(entries.len(), |last| {
            usize::try_from(last).unwrap_or(usize::MAX)
        });
        let skip = entries.len().saturating_sub(keep);
        Some(Value::Array(
            entries
                .into_iter()
                .skip(skip)
                .map(|entry| {
                    json!({
                        "step": entry.step,
                        "round": entry.round,
                        "visit": entry.visit,
                        "output": *entry.output,
                    })
                })
                .collect(),
        ))
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
        let Some(output) = self.state.outputs().get(step) else {
            return Ok(());
        };
        let written = self
            .state
            .artifacts
            .get(&(step.to_string(), self.state.round));
        let mut content = CandidateContent::of(output, written);
        let item_ids = std::mem::take(&mut content.item_ids);
        let candidate = Candidate::new(
            step.to_string(),
            item_ids,
            content.into_candidate(self.state.round),
        );
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
        if self.config.faults.is_empty() {
            return;
        }
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
                        tamper(Arc::make_mut(value), after);
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
                    self.state.set_output(name, stored);
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
        if self.summarizing {
            return Ok(());
        }
        let elapsed = self.elapsed();
        self.state.meter.set_elapsed(elapsed);
        match self.state.meter.exhausted() {
            Some(BudgetKind::Steps) | None => Ok(()),
            Some(which) => Err(self.budget_stop(which)),
        }
    }

    /// In-flight calls are dropped, no further call is made, and the run fails; the best
    /// candidate so far is named but not delivered.
    fn budget_stop(&mut self, which: BudgetKind) -> Halt {
        self.abort_jobs();
        let elapsed = self.elapsed();
        self.state.meter.set_elapsed(elapsed);
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
        let step = self.current_step.as_deref().unwrap_or_default().to_string();
        Halt::Stop(Stop::new(
            Outcome::Failed,
            Reason::StepFailed { step },
            Some(message),
        ))
    }

    /// Names in scope: `request`, step outputs of this round, `run`, `best`, and the
    /// current round's latest candidate.
    fn bindings(&self) -> Bindings {
        self.scope(true)
    }

    /// [`Scheduler::bindings`], with `run` only `with_run`: it changes with every call, so
    /// it is built for the expressions that read it.
    fn scope(&self, with_run: bool) -> Bindings {
        let mut bindings = Bindings {
            request: Some(self.state.request.clone()),
            steps: self.state.visible_outputs(),
            run: with_run.then(|| self.state.run_shared()),
            session: self.state.session.clone(),
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
    fn eval_args(&mut self, args: &[ExprIr], extra: &Bindings) -> Result<Vec<Arc<Value>>, Halt> {
        let mut bindings = self.scope(args.iter().any(|arg| mentions(arg, &NameIr::Run)));
        bindings.locals.extend(extra.locals.clone());
        if bindings.best.is_none() {
            bindings.best = Some(Arc::new(Value::Null));
        }
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            match evaluate_shared(arg, &bindings) {
                Ok(value) => values.push(value),
                // A step that did not run on the way here (another `when` branch, or a
                // finalize reached when repair stopped) is `none` to the role.
                Err(EvalError::Unbound { .. }) => values.push(Arc::new(Value::Null)),
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
