//! A first single-writer scheduler: runs a compiled flow step by step over the foundations (calls, each DAGs, gates, repair, delivery), appending every event to the trace.
//!
//! One task owns the run state ([`Run`]) and is the only code that changes it. Model calls
//! (and the items of an `each` step, polled together by this same task, in id order)
//! report what happens through a shared queue that the owner drains into the trace in
//! the order things happened; their results come back as values. Time is tokio's, so a
//! replay on a paused clock is deterministic.
//!
//! Scope of this first version (what the next iteration should add is listed in
//! ARCHITECTURE.md): steps `call`, `each` (DAG order, `concurrency`, per-item `check ...
//! by ... retries`, partial success), `gate` with `pass`/`fail`/`repair`, `finalize` with
//! verified delivery, `ask`, `when`/`else` transitions and terminals; repair with the
//! strongest action, `no_progress` and `rounds`; budgets checked before each step and
//! before each model call; `always` invariants after each step; `tamper` faults. A rerun
//! of an `each` step reruns all of its items.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;

use charter_compiler::graph::{
    ActionIr, CompiledSpec, InvariantIr, ItemCheckIr, NameIr, StepKind, TransitionIr,
};
use petgraph::graph::NodeIndex;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::budget::BudgetMeter;
use crate::call::{CallError, CallObserver, CallOutcome, RoleCall, call_role};
use crate::candidate::{Candidate, best_candidate, write_delivery};
use crate::dag::{ItemState, WorkDag};
use crate::eval::{Bindings, evaluate, evaluate_bool};
use crate::gate::{GateEvaluation, evaluate_gate};
use crate::provider::{CallKey, HumanChannel, HumanRequest, Provider, ProviderError, Usage};
use crate::repair::{
    ProgressTracker, RepairDecision, action_event, decide_repair, downstream, flow_order,
};
use crate::scenario::Fault;
use crate::trace::{
    BudgetKind, EventKind, IssueSeverity, ItemStatus, Outcome, Reason, RetryKind, Termination,
    TraceError, TraceEvent, TraceSink,
};
use crate::validate::{Validator, violations_text};

/// Where the run writes and what it injects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// The delivery directory; `None`: the delivery is verified in memory only.
    pub out_dir: Option<PathBuf>,
    /// Faults to inject (a replay's `faults`).
    pub faults: Vec<Fault>,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    pub termination: Termination,
    /// The best candidate's id, if any.
    pub best: Option<String>,
    /// The delivery file, when one was written and verified.
    pub delivery: Option<PathBuf>,
    /// The text of a `block`/`fail` action or terminal that ended the run.
    pub message: Option<String>,
}

/// The run could not go on (not an outcome: the recording, the input or the trace is bad).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Call(#[from] CallError),
    #[error(transparent)]
    Provider(ProviderError),
    #[error("the input is not a valid `{contract}`:\n{violations}")]
    Input {
        contract: String,
        violations: String,
    },
    #[error("internal error: {0}")]
    Internal(String),
}

/// Runs `spec` on `input`. Model calls go to `provider`, `ask` steps to `humans`, every
/// event to `sink`.
pub async fn run(
    spec: &CompiledSpec,
    input: Value,
    provider: &dyn Provider,
    humans: &dyn HumanChannel,
    sink: &mut dyn TraceSink,
    options: &RunOptions,
) -> Result<RunOutcome, RunError> {
    let start = Instant::now();
    let shared = Shared {
        start,
        pending: Mutex::new(Vec::new()),
        meter: Mutex::new(BudgetMeter::new(spec.budget.clone())),
    };
    let mut run = Run {
        spec,
        provider,
        humans,
        options,
        shared: &shared,
        sink,
        seq: 0,
        round: 0,
        request: Value::Null,
        outputs: BTreeMap::new(),
        items: BTreeMap::new(),
        attempts: BTreeMap::new(),
        feedback: BTreeMap::new(),
        candidates: Vec::new(),
        tracker: ProgressTracker::new(spec.repair.as_ref().map_or(2, |repair| repair.no_progress)),
        order: flow_order(&spec.flow),
        rejected: false,
        below_target: None,
        last_hard_code: None,
        previous: None,
    };
    let ended = run.run(input).await?;
    run.finish(ended)
}

/// An event reported by a call or item worker, waiting to be appended.
struct Pending {
    step: String,
    item: Option<String>,
    attempt: Option<u64>,
    t_ms: u64,
    kind: EventKind,
}

/// What workers share with the owner: the event queue and the budget meter.
struct Shared {
    start: Instant,
    pending: Mutex<Vec<Pending>>,
    meter: Mutex<BudgetMeter>,
}

impl Shared {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn push(&self, pending: Pending) {
        lock(&self.pending).push(pending);
    }

    fn exhausted(&self) -> Option<BudgetKind> {
        let mut meter = lock(&self.meter);
        meter.set_elapsed(self.start.elapsed());
        meter.exhausted()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reports one call's events into the shared queue.
struct Observer<'s> {
    shared: &'s Shared,
    step: String,
    item: Option<String>,
}

impl CallObserver for Observer<'_> {
    fn event(&self, attempt: u64, kind: EventKind) {
        self.shared.push(Pending {
            step: self.step.clone(),
            item: self.item.clone(),
            attempt: Some(attempt),
            t_ms: self.shared.now_ms(),
            kind,
        });
    }

    fn admit(&self) -> Result<(), BudgetKind> {
        match self.shared.exhausted() {
            Some(which) => Err(which),
            None => Ok(()),
        }
    }

    fn charge(&self, role: &charter_compiler::graph::RoleIr, usage: Usage) {
        lock(&self.shared.meter).charge(&role.model, usage);
    }
}

/// A candidate with its evaluation.
struct Evaluated {
    candidate: Candidate,
    score: Option<f64>,
    hard_failure: bool,
    passed: bool,
}

/// How the flow ended, before the final event.
struct Ended {
    outcome: Outcome,
    reason: Reason,
    message: Option<String>,
    delivery: Option<PathBuf>,
}

fn ended(outcome: Outcome, reason: Reason) -> Ended {
    Ended {
        outcome,
        reason,
        message: None,
        delivery: None,
    }
}

/// The run state, owned by the one task that changes it.
struct Run<'a> {
    spec: &'a CompiledSpec,
    provider: &'a dyn Provider,
    humans: &'a dyn HumanChannel,
    options: &'a RunOptions,
    shared: &'a Shared,
    sink: &'a mut dyn TraceSink,
    seq: u64,
    round: u64,
    request: Value,
    /// Step name -> its output in the current round (a list for `each` steps).
    outputs: BTreeMap<String, Value>,
    /// `each` step -> item id -> (state, output when it succeeded).
    items: BTreeMap<String, BTreeMap<String, (ItemState, Option<Value>)>>,
    /// (step, round, item, role) -> the next attempt number.
    attempts: BTreeMap<(String, u64, Option<String>, Option<String>), u64>,
    /// Step -> the issues to give its role as `feedback` on its next run.
    feedback: BTreeMap<String, Value>,
    candidates: Vec<Evaluated>,
    tracker: ProgressTracker,
    order: BTreeMap<String, usize>,
    /// The last `ask` was answered with `approved: false`.
    rejected: bool,
    /// Set when repair stopped: the delivery that follows is below target for this reason.
    below_target: Option<Reason>,
    /// The code of the first hard rule the last gate evaluation failed, if any.
    last_hard_code: Option<String>,
    /// The step executed last (the one whose transition reached a terminal).
    previous: Option<String>,
}

/// What a step leads to.
enum Next {
    Node(NodeIndex),
    End(Ended),
}

impl<'a> Run<'a> {
    /// Appends everything workers reported, then `kind`.
    fn emit(
        &mut self,
        step: Option<&str>,
        item: Option<&str>,
        attempt: Option<u64>,
        kind: EventKind,
    ) -> Result<(), TraceError> {
        self.drain()?;
        let mut event = TraceEvent::new(self.seq, self.shared.now_ms(), self.round, kind);
        event.step = step.map(str::to_string);
        event.item = item.map(str::to_string);
        event.attempt = attempt;
        self.append(event)
    }

    fn drain(&mut self) -> Result<(), TraceError> {
        let pending: Vec<Pending> = std::mem::take(&mut *lock(&self.shared.pending));
        for pending in pending {
            let mut event = TraceEvent::new(self.seq, pending.t_ms, self.round, pending.kind);
            event.step = Some(pending.step);
            event.item = pending.item;
            event.attempt = pending.attempt;
            self.append(event)?;
        }
        Ok(())
    }

    fn append(&mut self, event: TraceEvent) -> Result<(), TraceError> {
        self.sink.append(&event)?;
        self.seq += 1;
        Ok(())
    }

    /// The best candidate: the highest score among those that passed their gate, or,
    /// when none did, among those with no hard failure.
    fn best(&self) -> Option<&Evaluated> {
        let passed: Vec<(Option<f64>, bool)> = self
            .candidates
            .iter()
            .map(|evaluated| (evaluated.score, !evaluated.passed))
            .collect();
        if let Some(index) = best_candidate(&passed) {
            return self.candidates.get(index);
        }
        let ranked: Vec<(Option<f64>, bool)> = self
            .candidates
            .iter()
            .map(|evaluated| (evaluated.score, evaluated.hard_failure))
            .collect();
        best_candidate(&ranked).and_then(|index| self.candidates.get(index))
    }

    fn bindings(&self) -> Bindings {
        let mut bindings = Bindings {
            request: Some(self.request.clone()),
            steps: self.outputs.clone(),
            run: Some(lock(&self.shared.meter).run_value(self.round)),
            ..Bindings::default()
        };
        if let Some(best) = self.best() {
            bindings.best = Some(best.candidate.to_value());
        }
        // `candidate` outside a gate: the current round's outputs of the gate's subject.
        let subject = self
            .spec
            .flow
            .graph
            .node_weights()
            .find_map(|step| match &step.kind {
                StepKind::Gate { gate, .. } => {
                    self.spec.gates.get(gate).map(|gate| gate.subject.clone())
                }
                _ => None,
            });
        if let Some(subject) = subject
            && self.outputs.contains_key(&subject)
        {
            bindings.candidate = Some(self.form_candidate(&subject).to_value());
        }
        bindings
    }

    async fn run(&mut self, input: Value) -> Result<Ended, RunError> {
        let spec = self.spec;
        let request = match &spec.request {
            Some(contract) => Validator::for_spec(spec)
                .validate(contract, &input)
                .map_err(|violations| RunError::Input {
                    contract: contract.clone(),
                    violations: violations_text(&violations),
                })?,
            None => input,
        };
        self.emit(
            None,
            None,
            None,
            EventKind::RunStarted {
                spec: spec.name.clone(),
                version: spec.version.clone(),
                input: request.clone(),
            },
        )?;
        self.request = request;
        let recorded = crate::scenario::Recorded::from_spec(spec);
        self.emit(
            None,
            None,
            None,
            EventKind::PlanFrozen {
                spec_hash: recorded.spec_hash,
                rules: recorded.rules,
                prompts: recorded.prompts,
            },
        )?;
        self.round = 1;
        let mut node = spec.flow.entry;
        loop {
            let Some(step) = spec.flow.graph.node_weight(node) else {
                return Err(RunError::Internal("a transition leads to no node".into()));
            };
            let name = step.name.clone();
            match &step.kind {
                StepKind::Done => {
                    return Ok(match self.below_target.take() {
                        Some(reason) => ended(Outcome::BelowTarget, reason),
                        None => ended(Outcome::Completed, Reason::GatePassed),
                    });
                }
                StepKind::Blocked { reason } | StepKind::Failed { reason } => {
                    let outcome = if matches!(step.kind, StepKind::Blocked { .. }) {
                        Outcome::Blocked
                    } else {
                        Outcome::Failed
                    };
                    // A terminal reached by the flow: the reason is what led to it.
                    let previous_is_gate = self
                        .previous
                        .as_deref()
                        .and_then(|previous| spec.flow.step(previous))
                        .is_some_and(|(_, step)| matches!(step.kind, StepKind::Gate { .. }));
                    let why = match (&self.last_hard_code, previous_is_gate) {
                        _ if self.rejected => Reason::HumanRejected,
                        (Some(code), true) => Reason::HardGate { code: code.clone() },
                        _ => Reason::StepFailed {
                            step: self.previous.clone().unwrap_or_else(|| name.clone()),
                        },
                    };
                    let mut end = ended(outcome, why);
                    end.message = Some(reason.clone());
                    return Ok(end);
                }
                _ => {}
            }
            if let Some(which) = self.shared.exhausted() {
                return self.budget_exhausted(which);
            }
            lock(&self.shared.meter).count_step();
            let role = match &step.kind {
                StepKind::Call { role, .. }
                | StepKind::Each { role, .. }
                | StepKind::Finalize { role, .. } => Some(role.clone()),
                _ => None,
            };
            self.emit(Some(&name), None, None, EventKind::StepStarted { role })?;
            // The whole step runs within what is left of `budget.wall`: when it runs
            // out, the step's in-flight calls are dropped with its future.
            let wall_left = lock(&self.shared.meter).wall_left();
            let kind = step.kind.clone();
            let next = match wall_left {
                Some(left) => {
                    let result = tokio::time::timeout(left, self.execute(node, &name, kind)).await;
                    match result {
                        Ok(next) => next?,
                        Err(_) => {
                            self.drain()?;
                            let _ = self.shared.exhausted();
                            return self.budget_exhausted(BudgetKind::Wall);
                        }
                    }
                }
                None => self.execute(node, &name, kind).await?,
            };
            self.previous = Some(name.clone());
            self.tamper_after(&name);
            if let Some(end) = self.check_invariants()? {
                return Ok(end);
            }
            match next {
                Next::Node(target) => node = target,
                Next::End(end) => return Ok(end),
            }
        }
    }

    /// Runs one step and says where the flow goes next.
    async fn execute(
        &mut self,
        node: NodeIndex,
        name: &str,
        kind: StepKind,
    ) -> Result<Next, RunError> {
        let name = name.to_string();
        Ok(match kind {
            StepKind::Call { role, args } => self.call_step(node, &name, &role, &args).await?,
            StepKind::Each {
                var,
                over,
                role,
                args,
                concurrency,
                check,
            } => {
                self.each_step(
                    node,
                    &name,
                    &var,
                    &over,
                    &role,
                    &args,
                    concurrency,
                    check.as_ref(),
                )
                .await?
            }
            StepKind::Gate { gate, repair } => self.gate_step(node, &name, &gate, repair).await?,
            StepKind::Finalize { role, args } => {
                self.finalize_step(node, &name, &role, &args).await?
            }
            StepKind::Ask { question } => self.ask_step(node, &name, &question).await?,
            StepKind::Done | StepKind::Blocked { .. } | StepKind::Failed { .. } => {
                return Err(RunError::Internal("terminal handled above".into()));
            }
        })
    }

    fn finish(&mut self, end: Ended) -> Result<RunOutcome, RunError> {
        let best = self.best().map(|best| best.candidate.id.clone());
        self.emit(
            None,
            None,
            None,
            EventKind::RunFinished {
                outcome: end.outcome,
                reason: end.reason.clone(),
                best: best.clone(),
                delivered: end.delivery.is_some(),
                message: end.message.clone(),
            },
        )?;
        Ok(RunOutcome {
            termination: Termination {
                outcome: end.outcome,
                reason: end.reason,
            },
            best,
            delivery: end.delivery,
            message: end.message,
        })
    }

    fn budget_exhausted(&mut self, which: BudgetKind) -> Result<Ended, RunError> {
        let event = lock(&self.shared.meter).event(which);
        self.emit(None, None, None, event)?;
        Ok(ended(Outcome::Failed, Reason::BudgetExhausted(which)))
    }

    /// The next attempt number for (step, round, item, role), and reserves nothing.
    fn next_attempt(&self, step: &str, item: Option<&str>, role: Option<&str>) -> u64 {
        self.attempts
            .get(&(
                step.to_string(),
                self.round,
                item.map(str::to_string),
                role.map(str::to_string),
            ))
            .copied()
            .unwrap_or(1)
    }

    fn set_attempt(&mut self, step: &str, item: Option<&str>, role: Option<&str>, next: u64) {
        self.attempts.insert(
            (
                step.to_string(),
                self.round,
                item.map(str::to_string),
                role.map(str::to_string),
            ),
            next,
        );
    }

    /// Follows the first matching transition of a non-gate step.
    fn follow(&self, node: NodeIndex, from: &str) -> Result<Next, RunError> {
        let bindings = self.bindings();
        for (transition, target) in self.spec.flow.transitions(node) {
            let taken = match transition {
                TransitionIr::Always | TransitionIr::Else => true,
                TransitionIr::When { condition } => {
                    evaluate_bool(condition, &bindings).unwrap_or(false)
                }
                _ => false,
            };
            if taken {
                return Ok(Next::Node(target));
            }
        }
        Ok(Next::End(ended(
            Outcome::Failed,
            Reason::StepFailed {
                step: from.to_string(),
            },
        )))
    }

    fn arguments(
        &self,
        args: &[charter_compiler::graph::ExprIr],
        bindings: &Bindings,
    ) -> Result<Vec<Value>, String> {
        args.iter()
            .map(|arg| evaluate(arg, bindings).map_err(|error| error.to_string()))
            .collect()
    }

    async fn call_step(
        &mut self,
        node: NodeIndex,
        name: &str,
        role: &str,
        args: &[charter_compiler::graph::ExprIr],
    ) -> Result<Next, RunError> {
        let inputs = match self.arguments(args, &self.bindings()) {
            Ok(inputs) => inputs,
            Err(_) => return Ok(Next::End(step_failed(name))),
        };
        let feedback = self.feedback.remove(name);
        match self.call(name, None, role, None, inputs, feedback).await? {
            CallOutcome::Output { value, .. } => {
                self.outputs.insert(name.to_string(), value);
                self.follow(node, name)
            }
            CallOutcome::Failed { .. } => Ok(Next::End(step_failed(name))),
            CallOutcome::BudgetExhausted(which) => Ok(Next::End(self.budget_exhausted(which)?)),
        }
    }

    /// One role call of this step, its events drained into the trace.
    async fn call(
        &mut self,
        step: &str,
        item: Option<&str>,
        role: &str,
        key_role: Option<&str>,
        inputs: Vec<Value>,
        feedback: Option<Value>,
    ) -> Result<CallOutcome, RunError> {
        let mut key = CallKey::new(step)
            .round(self.round)
            .attempt(self.next_attempt(step, item, key_role));
        key.item = item.map(str::to_string);
        key.role = key_role.map(str::to_string);
        let observer = Observer {
            shared: self.shared,
            step: step.to_string(),
            item: item.map(str::to_string),
        };
        let call = RoleCall {
            spec: self.spec,
            role,
            key,
            inputs,
            feedback,
        };
        let outcome = call_role(call, self.provider, &observer).await;
        self.drain()?;
        let outcome = outcome?;
        let next = match &outcome {
            CallOutcome::Output { next_attempt, .. } | CallOutcome::Failed { next_attempt, .. } => {
                Some(*next_attempt)
            }
            CallOutcome::BudgetExhausted(_) => None,
        };
        if let Some(next) = next {
            self.set_attempt(step, item, key_role, next);
        }
        Ok(outcome)
    }

    #[allow(clippy::too_many_arguments)]
    async fn each_step(
        &mut self,
        node: NodeIndex,
        name: &str,
        var: &str,
        over: &charter_compiler::graph::ExprIr,
        role: &str,
        args: &[charter_compiler::graph::ExprIr],
        concurrency: u64,
        check: Option<&ItemCheckIr>,
    ) -> Result<Next, RunError> {
        let bindings = self.bindings();
        let list = match evaluate(over, &bindings) {
            Ok(Value::Array(list)) => list,
            _ => return Ok(Next::End(step_failed(name))),
        };
        let mut dag = match WorkDag::build(&list) {
            Ok(dag) => dag,
            Err(_) => return Ok(Next::End(step_failed(name))),
        };
        let feedback = self.feedback.remove(name);
        let limit = usize::try_from(concurrency.max(1)).unwrap_or(usize::MAX);
        let mut outputs: BTreeMap<String, Value> = BTreeMap::new();
        let mut running: Vec<Worker<'a>> = Vec::new();
        loop {
            for id in dag.ready() {
                if running.len() >= limit {
                    break;
                }
                let Some(item) = dag.item(&id).cloned() else {
                    continue;
                };
                let mut item_bindings = bindings.clone();
                item_bindings.set(NameIr::Local(var.to_string()), item);
                let Ok(inputs) = self.arguments(args, &item_bindings) else {
                    dag.start(&id);
                    self.item_failed(name, &id, &mut dag, "its arguments cannot be evaluated")?;
                    continue;
                };
                dag.start(&id);
                let context = WorkerContext {
                    spec: self.spec,
                    provider: self.provider,
                    shared: self.shared,
                    round: self.round,
                    step: name.to_string(),
                    item: id.clone(),
                    role: role.to_string(),
                    check: check.cloned(),
                    attempt: self.next_attempt(name, Some(&id), None),
                    judge_attempt: check
                        .and_then(|check| check.by.as_deref())
                        .map_or(1, |by| self.next_attempt(name, Some(&id), Some(by))),
                    bindings: bindings.clone(),
                };
                let feedback = feedback.clone();
                running.push(Worker {
                    future: Box::pin(item_worker(context, inputs, feedback)),
                });
            }
            if running.is_empty() {
                break;
            }
            let (index, result) = next_done(&mut running).await;
            running.remove(index);
            let result = result?;
            self.set_attempt(name, Some(&result.id), None, result.next_attempt);
            if let (Some(by), Some(next)) = (
                check.and_then(|check| check.by.as_deref()),
                result.next_judge_attempt,
            ) {
                self.set_attempt(name, Some(&result.id), Some(by), next);
            }
            match result.outcome {
                ItemOutcome::Done(value) => {
                    dag.finish(&result.id);
                    self.emit(
                        Some(name),
                        Some(&result.id),
                        None,
                        EventKind::ItemDone {
                            status: ItemStatus::Ok,
                            error: None,
                        },
                    )?;
                    outputs.insert(result.id, value);
                }
                ItemOutcome::Failed(reason) => {
                    self.item_failed(name, &result.id, &mut dag, &reason)?;
                }
                ItemOutcome::Budget(which) => {
                    // In-flight items are dropped with `running`.
                    return Ok(Next::End(self.budget_exhausted(which)?));
                }
            }
        }
        let mut states = BTreeMap::new();
        for id in dag.ids() {
            let state = dag.state(&id).cloned().unwrap_or(ItemState::Pending);
            states.insert(id.clone(), (state, outputs.get(&id).cloned()));
        }
        self.outputs.insert(
            name.to_string(),
            Value::Array(outputs.into_values().collect()),
        );
        self.items.insert(name.to_string(), states);
        self.follow(node, name)
    }

    fn item_failed(
        &mut self,
        step: &str,
        id: &str,
        dag: &mut WorkDag,
        reason: &str,
    ) -> Result<(), TraceError> {
        let skipped = dag.fail(id);
        self.emit(
            Some(step),
            Some(id),
            None,
            EventKind::ItemDone {
                status: ItemStatus::Failed,
                error: Some(reason.to_string()),
            },
        )?;
        for dependent in skipped {
            self.emit(
                Some(step),
                Some(&dependent),
                None,
                EventKind::ItemSkipped {
                    because: id.to_string(),
                },
            )?;
        }
        Ok(())
    }

    /// The candidate of `subject`'s outputs this round.
    fn form_candidate(&self, subject: &str) -> Candidate {
        match self.items.get(subject) {
            Some(states) => {
                let mut items = Vec::new();
                let mut failed = Vec::new();
                let mut skipped = Vec::new();
                for (id, (state, output)) in states {
                    match (state, output) {
                        (ItemState::Done, Some(output)) => items.push(output.clone()),
                        (ItemState::Skipped { .. }, _) => skipped.push(id.clone()),
                        _ => failed.push(id.clone()),
                    }
                }
                Candidate::new(self.round, items, failed, skipped, BTreeMap::new())
            }
            None => {
                let items = self.outputs.get(subject).cloned().into_iter().collect();
                Candidate::new(self.round, items, vec![], vec![], BTreeMap::new())
            }
        }
    }

    async fn gate_step(
        &mut self,
        node: NodeIndex,
        name: &str,
        gate_name: &str,
        repair: bool,
    ) -> Result<Next, RunError> {
        let spec = self.spec;
        let Some(gate) = spec.gates.get(gate_name) else {
            return Err(RunError::Internal(format!("unknown gate `{gate_name}`")));
        };
        let candidate = self.form_candidate(&gate.subject);
        self.emit(
            Some(name),
            None,
            None,
            EventKind::Candidate {
                id: candidate.id.clone(),
                hash: candidate.hash.clone(),
                items: candidate.items.len() as u64,
                failed: candidate.failed.clone(),
                skipped: candidate.skipped.clone(),
            },
        )?;
        let mut bindings = self.bindings();
        bindings.candidate = Some(candidate.to_value());
        let evaluation = evaluate_gate(gate_name, gate, &bindings);
        self.emit(
            Some(name),
            None,
            None,
            evaluation.to_event(&candidate.id, &candidate.hash, None),
        )?;
        self.outputs.insert(
            name.to_string(),
            json!({"passed": evaluation.passed, "score": evaluation.score}),
        );
        let codes = evaluation.error_codes();
        self.candidates.push(Evaluated {
            candidate: candidate.clone(),
            score: evaluation.score,
            hard_failure: evaluation.hard_failure(),
            passed: evaluation.passed,
        });
        self.last_hard_code = evaluation
            .rules
            .iter()
            .find(|rule| !rule.holds && rule.severity == charter_compiler::graph::SeverityIr::Hard)
            .map(|rule| rule.code.clone());
        let edge = |wanted: fn(&TransitionIr) -> bool| {
            spec.flow
                .transitions(node)
                .into_iter()
                .find(|(transition, _)| wanted(transition))
                .map(|(_, target)| target)
        };
        let pass_target = edge(|transition| matches!(transition, TransitionIr::Pass));
        if evaluation.passed {
            return Ok(match pass_target {
                Some(target) => Next::Node(target),
                None => Next::End(step_failed(name)),
            });
        }
        if !repair {
            return Ok(
                match edge(|transition| matches!(transition, TransitionIr::Fail)) {
                    Some(target) => Next::Node(target),
                    None => Next::End(step_failed(name)),
                },
            );
        }
        let Some(table) = &spec.repair else {
            return Ok(Next::End(step_failed(name)));
        };
        // Repair stops when progress stalls or rounds run out: deliver the best as below target.
        self.tracker
            .record(&codes, evaluation.score, &candidate.hash);
        let stop = if self.tracker.exhausted() {
            self.emit(
                Some(name),
                None,
                None,
                EventKind::NoProgress {
                    rounds: self.tracker.stalled(),
                    limit: self.tracker.limit(),
                },
            )?;
            Some(Reason::NoProgress)
        } else if self.round > table.rounds {
            Some(Reason::MaxRounds)
        } else {
            None
        };
        let decision = decide_repair(table, &codes, &self.order);
        let stop = stop.or(match decision {
            RepairDecision::NoAction => Some(Reason::NoRepairAction),
            RepairDecision::Act { .. } => None,
        });
        if let Some(reason) = stop {
            return Ok(self.stop_repairing(reason, &evaluation, pass_target));
        }
        let RepairDecision::Act {
            action,
            codes: acted,
        } = decision
        else {
            return Err(RunError::Internal("no repair decision".into()));
        };
        let first_code = acted.first().cloned().unwrap_or_default();
        let rerun = match &action {
            ActionIr::Rerun { step, .. } => Some(step.clone()),
            ActionIr::Replan => spec
                .flow
                .graph
                .node_weight(spec.flow.entry)
                .map(|entry| entry.name.clone()),
            _ => None,
        };
        let invalidated = rerun
            .as_deref()
            .map(|step| downstream(&spec.flow, step))
            .unwrap_or_default();
        self.emit(
            Some(name),
            None,
            None,
            EventKind::Repair {
                action: action_event(&action),
                codes: acted.clone(),
                invalidated: invalidated.clone(),
                items: vec![],
            },
        )?;
        match action {
            ActionIr::Block { reason } => Ok(Next::End(Ended {
                message: Some(reason),
                ..ended(Outcome::Blocked, Reason::HardGate { code: first_code })
            })),
            ActionIr::Fail { reason } => Ok(Next::End(Ended {
                message: Some(reason),
                ..ended(Outcome::Failed, Reason::HardGate { code: first_code })
            })),
            ActionIr::Ask { question } => {
                let approved = self.ask(name, &question).await?;
                if approved {
                    Ok(match pass_target {
                        Some(target) => Next::Node(target),
                        None => Next::End(step_failed(name)),
                    })
                } else {
                    Ok(Next::End(ended(Outcome::Blocked, Reason::HumanRejected)))
                }
            }
            ActionIr::Accept => {
                Ok(self.stop_repairing(Reason::NoRepairAction, &evaluation, pass_target))
            }
            ActionIr::Rerun { .. } | ActionIr::Replan => {
                let Some(step) = rerun else {
                    return Err(RunError::Internal("a rerun without a step".into()));
                };
                if matches!(
                    action,
                    ActionIr::Rerun {
                        with_feedback: true,
                        ..
                    }
                ) {
                    let issues: Vec<Value> = evaluation
                        .issues
                        .iter()
                        .filter(|issue| issue.severity == IssueSeverity::Error)
                        .map(|issue| json!({"code": issue.code, "message": issue.message, "rule": issue.rule}))
                        .collect();
                    self.feedback.insert(step.clone(), Value::Array(issues));
                }
                self.emit(
                    Some(name),
                    None,
                    None,
                    EventKind::Retry {
                        retry: RetryKind::Repair,
                        next: self.round + 1,
                        delay_ms: 0,
                        reason: format!("gate `{gate_name}` failed: {}", codes.join(", ")),
                    },
                )?;
                for step in &invalidated {
                    self.outputs.remove(step);
                    self.items.remove(step);
                }
                self.round += 1;
                match spec.flow.steps.get(&step) {
                    Some(target) => Ok(Next::Node(*target)),
                    None => Err(RunError::Internal(format!(
                        "rerun of unknown step `{step}`"
                    ))),
                }
            }
        }
    }

    /// Repair stops: finalize the best candidate as below target, or fail without one.
    fn stop_repairing(
        &mut self,
        reason: Reason,
        evaluation: &GateEvaluation,
        pass_target: Option<NodeIndex>,
    ) -> Next {
        if self.best().is_none() {
            let hard = evaluation
                .rules
                .iter()
                .find(|rule| {
                    !rule.holds && rule.severity == charter_compiler::graph::SeverityIr::Hard
                })
                .map(|rule| rule.code.clone());
            return Next::End(match hard {
                Some(code) => ended(Outcome::Failed, Reason::HardGate { code }),
                None => ended(Outcome::Failed, reason),
            });
        }
        match pass_target {
            Some(target) => {
                self.below_target = Some(reason);
                Next::Node(target)
            }
            None => Next::End(ended(Outcome::BelowTarget, reason)),
        }
    }

    async fn finalize_step(
        &mut self,
        node: NodeIndex,
        name: &str,
        role: &str,
        args: &[charter_compiler::graph::ExprIr],
    ) -> Result<Next, RunError> {
        let Some(best) = self.best() else {
            return Ok(Next::End(step_failed(name)));
        };
        let best_id = best.candidate.id.clone();
        let evaluated_hash = best.candidate.hash.clone();
        let delivered = best.candidate.clone();
        let inputs = match self.arguments(args, &self.bindings()) {
            Ok(inputs) => inputs,
            Err(_) => return Ok(Next::End(step_failed(name))),
        };
        let output = match self.call(name, None, role, None, inputs, None).await? {
            CallOutcome::Output { value, .. } => value,
            CallOutcome::Failed { .. } => return Ok(Next::End(step_failed(name))),
            CallOutcome::BudgetExhausted(which) => {
                return Ok(Next::End(self.budget_exhausted(which)?));
            }
        };
        self.outputs.insert(name.to_string(), output.clone());
        let candidate_id = output
            .get("candidate_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let summary = output.get("summary").and_then(Value::as_str).unwrap_or("");
        if candidate_id != best_id {
            self.emit(
                Some(name),
                None,
                None,
                EventKind::Delivery {
                    candidate: candidate_id.to_string(),
                    path: String::new(),
                    expected_hash: evaluated_hash,
                    actual_hash: String::new(),
                    matches: false,
                },
            )?;
            return Ok(Next::End(ended(Outcome::Failed, Reason::DeliveryMismatch)));
        }
        let (path, actual_hash) = match &self.options.out_dir {
            Some(dir) => {
                let check = write_delivery(dir, &delivered, summary, &evaluated_hash)
                    .map_err(|error| RunError::Internal(error.to_string()))?;
                (Some(check.path), check.actual_hash)
            }
            None => (None, delivered.rehash()),
        };
        let matches = actual_hash == evaluated_hash;
        self.emit(
            Some(name),
            None,
            None,
            EventKind::Delivery {
                candidate: best_id,
                path: path
                    .as_ref()
                    .and_then(|path| path.file_name())
                    .map(|file| file.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                expected_hash: evaluated_hash,
                actual_hash,
                matches,
            },
        )?;
        if !matches {
            return Ok(Next::End(ended(Outcome::Failed, Reason::DeliveryMismatch)));
        }
        match self.follow(node, name)? {
            Next::Node(target) => {
                // The delivery is verified: a `done` after it carries the delivery's path.
                if let Some(StepKind::Done) = self
                    .spec
                    .flow
                    .graph
                    .node_weight(target)
                    .map(|step| &step.kind)
                {
                    let mut end = match self.below_target.take() {
                        Some(reason) => ended(Outcome::BelowTarget, reason),
                        None => ended(Outcome::Completed, Reason::GatePassed),
                    };
                    end.delivery = path;
                    return Ok(Next::End(end));
                }
                Ok(Next::Node(target))
            }
            end => Ok(end),
        }
    }

    async fn ask_step(
        &mut self,
        node: NodeIndex,
        name: &str,
        question: &str,
    ) -> Result<Next, RunError> {
        self.ask(name, question).await?;
        self.follow(node, name)
    }

    /// Asks a person; records and returns whether they approved.
    async fn ask(&mut self, step: &str, question: &str) -> Result<bool, RunError> {
        let answer = self
            .humans
            .ask(HumanRequest {
                step: step.to_string(),
                round: self.round,
                question: question.to_string(),
            })
            .await
            .map_err(RunError::Provider)?;
        let answer = Validator::for_spec(self.spec)
            .validate("Answer", &answer)
            .map_err(|violations| RunError::Input {
                contract: "Answer".into(),
                violations: violations_text(&violations),
            })?;
        self.emit(
            Some(step),
            None,
            None,
            EventKind::Human {
                question: question.to_string(),
                answer: answer.clone(),
            },
        )?;
        let approved = answer
            .get("approved")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        self.rejected = !approved;
        self.outputs.insert(step.to_string(), answer);
        Ok(approved)
    }

    /// Applies the `tamper` faults that fire after `step`: the stored output of the
    /// named item (or every item) of the latest candidate is overwritten, as a late
    /// writer would, without updating the hash the gate evaluated.
    fn tamper_after(&mut self, step: &str) {
        let options = self.options;
        for fault in &options.faults {
            let Fault::Tamper(tamper) = fault;
            if tamper.after != step {
                continue;
            }
            let Some(latest) = self.candidates.last_mut() else {
                continue;
            };
            for item in &mut latest.candidate.items {
                let id = item
                    .get("id")
                    .or_else(|| item.get("task_id"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if (tamper.item.is_none() || tamper.item == id)
                    && let Value::Object(record) = item
                {
                    record.insert("tampered".into(), Value::Bool(true));
                }
            }
        }
    }

    fn check_invariants(&mut self) -> Result<Option<Ended>, RunError> {
        let bindings = self.bindings();
        let spec = self.spec;
        for (name, invariant) in &spec.invariants {
            let InvariantIr::Always { expr } = invariant else {
                continue;
            };
            let message = match evaluate_bool(expr, &bindings) {
                Ok(true) => continue,
                Ok(false) => "the condition is false".to_string(),
                Err(error) => format!("the condition cannot be evaluated: {error}"),
            };
            let name = name.clone();
            self.emit(
                None,
                None,
                None,
                EventKind::InvariantViolated {
                    invariant: name.clone(),
                    message,
                },
            )?;
            return Ok(Some(ended(Outcome::Failed, Reason::Invariant { name })));
        }
        Ok(None)
    }
}

fn step_failed(step: &str) -> Ended {
    ended(
        Outcome::Failed,
        Reason::StepFailed {
            step: step.to_string(),
        },
    )
}

/// What an item worker needs: shared references only, so the owner stays free to append.
struct WorkerContext<'a> {
    spec: &'a CompiledSpec,
    provider: &'a dyn Provider,
    shared: &'a Shared,
    round: u64,
    step: String,
    item: String,
    role: String,
    check: Option<ItemCheckIr>,
    attempt: u64,
    judge_attempt: u64,
    bindings: Bindings,
}

enum ItemOutcome {
    Done(Value),
    Failed(String),
    Budget(BudgetKind),
}

struct ItemResult {
    id: String,
    outcome: ItemOutcome,
    next_attempt: u64,
    next_judge_attempt: Option<u64>,
}

type WorkerFuture<'a> = Pin<Box<dyn Future<Output = Result<ItemResult, RunError>> + Send + 'a>>;

struct Worker<'a> {
    future: WorkerFuture<'a>,
}

/// Polls every worker in order and returns the first that is done (the earliest in the
/// list when several are: deterministic on a paused clock).
async fn next_done<'a>(workers: &mut [Worker<'a>]) -> (usize, Result<ItemResult, RunError>) {
    std::future::poll_fn(|context| {
        for (index, worker) in workers.iter_mut().enumerate() {
            if let Poll::Ready(result) = worker.future.as_mut().poll(context) {
                return Poll::Ready((index, result));
            }
        }
        Poll::Pending
    })
    .await
}

/// Runs one item: its role call, then its per-item check (stage retries with feedback).
async fn item_worker(
    context: WorkerContext<'_>,
    inputs: Vec<Value>,
    feedback: Option<Value>,
) -> Result<ItemResult, RunError> {
    let observer = Observer {
        shared: context.shared,
        step: context.step.clone(),
        item: Some(context.item.clone()),
    };
    let mut attempt = context.attempt;
    let mut judge_attempt = context.judge_attempt;
    let mut feedback = feedback;
    let stage_retries = context.check.as_ref().map_or(0, |check| check.retries);
    let mut stage = 0;
    loop {
        let key = CallKey::new(context.step.clone())
            .round(context.round)
            .item(context.item.clone())
            .attempt(attempt);
        let call = RoleCall {
            spec: context.spec,
            role: &context.role,
            key,
            inputs: inputs.clone(),
            feedback: feedback.clone(),
        };
        let output = match call_role(call, context.provider, &observer).await? {
            CallOutcome::Output {
                value,
                next_attempt,
                ..
            } => {
                attempt = next_attempt;
                value
            }
            CallOutcome::Failed {
                reason,
                next_attempt,
            } => {
                return Ok(ItemResult {
                    id: context.item,
                    outcome: ItemOutcome::Failed(reason),
                    next_attempt,
                    next_judge_attempt: None,
                });
            }
            CallOutcome::BudgetExhausted(which) => {
                return Ok(ItemResult {
                    id: context.item,
                    outcome: ItemOutcome::Budget(which),
                    next_attempt: attempt,
                    next_judge_attempt: None,
                });
            }
        };
        let Some(check) = &context.check else {
            return Ok(ItemResult {
                id: context.item,
                outcome: ItemOutcome::Done(output),
                next_attempt: attempt,
                next_judge_attempt: None,
            });
        };
        let mut bindings = context.bindings.clone();
        bindings.item = Some(output.clone());
        if let Some(by) = &check.by {
            let mut key = CallKey::new(context.step.clone())
                .round(context.round)
                .item(context.item.clone())
                .attempt(judge_attempt);
            key.role = Some(by.clone());
            let call = RoleCall {
                spec: context.spec,
                role: by,
                key,
                inputs: vec![output.clone()],
                feedback: None,
            };
            match call_role(call, context.provider, &observer).await? {
                CallOutcome::Output {
                    value,
                    next_attempt,
                    ..
                } => {
                    judge_attempt = next_attempt;
                    bindings.by_role.insert(by.clone(), value);
                }
                CallOutcome::Failed {
                    reason,
                    next_attempt,
                } => {
                    return Ok(ItemResult {
                        id: context.item,
                        outcome: ItemOutcome::Failed(format!("its judge failed: {reason}")),
                        next_attempt: attempt,
                        next_judge_attempt: Some(next_attempt),
                    });
                }
                CallOutcome::BudgetExhausted(which) => {
                    return Ok(ItemResult {
                        id: context.item,
                        outcome: ItemOutcome::Budget(which),
                        next_attempt: attempt,
                        next_judge_attempt: Some(judge_attempt),
                    });
                }
            }
        }
        let Some(gate) = context.spec.gates.get(&check.gate) else {
            return Err(RunError::Internal(format!("unknown gate `{}`", check.gate)));
        };
        let evaluation = evaluate_gate(&check.gate, gate, &bindings);
        observer.event(
            attempt.saturating_sub(1),
            evaluation.to_event("", "", Some(&context.item)),
        );
        if evaluation.passed {
            return Ok(ItemResult {
                id: context.item,
                outcome: ItemOutcome::Done(output),
                next_attempt: attempt,
                next_judge_attempt: Some(judge_attempt),
            });
        }
        if stage >= stage_retries {
            return Ok(ItemResult {
                id: context.item,
                outcome: ItemOutcome::Failed(format!(
                    "check `{}` failed: {}",
                    check.gate,
                    evaluation.error_codes().join(", ")
                )),
                next_attempt: attempt,
                next_judge_attempt: Some(judge_attempt),
            });
        }
        stage += 1;
        observer.event(
            attempt.saturating_sub(1),
            EventKind::Retry {
                retry: RetryKind::Stage,
                next: attempt,
                delay_ms: 0,
                reason: format!(
                    "check `{}` failed: {}",
                    check.gate,
                    evaluation.error_codes().join(", ")
                ),
            },
        );
        feedback = Some(Value::Array(
            evaluation
                .issues
                .iter()
                .map(|issue| json!({"code": issue.code, "message": issue.message, "rule": issue.rule}))
                .collect(),
        ));
    }
}

#[cfg(test)]
mod tests;
