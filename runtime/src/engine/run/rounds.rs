//! Gate steps and the repair loop's mechanics: judging the round's candidate, no-progress and round accounting, carrying out the policy's decision, and stopping repair.

use super::*;
use crate::engine::feedback::{Feedback, Reason as FeedbackReason};

impl Scheduler<'_> {
    /// Evaluates the gate of a `gate` step on the current round's candidate, and decides
    /// the next node: `pass`, `fail`, or the repair table's action.
    pub(super) async fn run_gate(
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
        let result = {
            // The scope ends with the judging: it shares the step outputs, which the gate
            // step's own output then joins without a copy of the others.
            let mut bindings = self.scope(reads_run(gate));
            bindings.candidate = Some(candidate.value());
            let mut failed_ids = candidate.inner.failed.clone();
            failed_ids.extend(candidate.inner.skipped.iter().cloned());
            Arc::new(judge(
                gate_name,
                gate,
                &bindings,
                &candidate.item_ids,
                &failed_ids,
            ))
        };
        self.emit(result.event(candidate.id(), candidate.hash(), None))?;
        if let Some(stored) = self
            .state
            .candidates
            .iter_mut()
            .rev()
            .find(|c| c.id() == candidate.id() && c.step == candidate.step)
        {
            stored.evaluation = Some(Arc::clone(&result));
        }
        let gate_value = serde_json::json!({
            "gate": gate_name,
            "passed": result.passed(),
            "score": result.score(),
            "codes": result.error_codes(),
        });
        self.store(step, StepOutput::Gate(Arc::new(gate_value)));
        let wanted = if result.passed() {
            // Warnings that act (DESIGN §8.5) run before the pass edge is followed.
            if let Some(next) = self.act_on_warnings(&candidate, &result).await? {
                return Ok(next);
            }
            self.state.gate_passed = true;
            Some(TransitionIr::Pass)
        } else if repair {
            None
        } else {
            Some(TransitionIr::Fail)
        };
        match wanted {
            Some(kind) => self
                .outgoing(node)
                .into_iter()
                .find(|edge| *edge.weight() == kind)
                .map(|edge| edge.target())
                .ok_or_else(|| flow_error(&format!("gate step `{step}` has no {kind:?} edge"))),
            None => self.repair(node, &candidate, &result).await,
        }
    }

    /// The repair loop's mechanics: no-progress and round accounting, then the action
    /// the policy chose.
    pub(super) async fn repair(
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
        let order = crate::engine::repair::flow_order(&spec.flow);
        let policy = RepairPolicy {
            table,
            order: &order,
        };
        let decision = policy.decide(result);
        match &decision {
            Decision::Block { .. } | Decision::Fail { .. } => {
                return Err(self.stop_by_arm(&decision));
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
        match self
            .start_repair(&decision, candidate, result, &order)
            .await?
        {
            Some(target) => Ok(target),
            // A person said no to repairing an error: the run is blocked (DESIGN §8.4).
            None => Err(Halt::Stop(Stop::new(
                Outcome::Blocked,
                Reason::HumanRejected,
                Some(format!(
                    "the person declined to repair {}",
                    result.error_codes().join(", ")
                )),
            ))),
        }
    }

    /// A gate passed with warnings whose arms are not `accept`: the strongest such arm
    /// runs before the pass edge (`ask`, `rerun`/`replan` with feedback, `block`/`fail`).
    /// `None`: go on along the pass edge (no such warning, rounds used up, or a person
    /// said no).
    async fn act_on_warnings(
        &mut self,
        candidate: &Candidate,
        result: &Judged,
    ) -> Result<Option<NodeIndex>, Halt> {
        let spec = self.spec;
        let Some(table) = &spec.repair else {
            return Ok(None);
        };
        let codes = result.warning_codes();
        if codes.is_empty() {
            return Ok(None);
        }
        let order = crate::engine::repair::flow_order(&spec.flow);
        let policy = RepairPolicy {
            table,
            order: &order,
        };
        let decision = match policy.decide_codes(result, &codes) {
            Decision::NoAction => return Ok(None),
            // A warning never reruns with nothing to show the fixer.
            Decision::Rerun {
                step, items, codes, ..
            } => Decision::Rerun {
                step,
                with_feedback: true,
                items,
                codes,
            },
            other => other,
        };
        if let Decision::Block { .. } | Decision::Fail { .. } = decision {
            self.enter_phase(Phase::Repairing)?;
            return Err(self.stop_by_arm(&decision));
        }
        // Rounds used up: a warning never blocks by itself.
        if self.state.round > table.rounds {
            return Ok(None);
        }
        self.enter_phase(Phase::Repairing)?;
        self.start_repair(&decision, candidate, result, &order)
            .await
    }

    /// A `block`/`fail` arm: the run stops with the arm's reason.
    fn stop_by_arm(&mut self, decision: &Decision) -> Halt {
        let (outcome, reason, code) = match decision {
            Decision::Block { reason, code } => (Outcome::Blocked, reason, code),
            Decision::Fail { reason, code } => (Outcome::Failed, reason, code),
            _ => return flow_error("not a block or fail arm"),
        };
        if let Err(halt) = self.emit_repair(decision, Vec::new()) {
            return halt;
        }
        Halt::Stop(Stop::new(
            outcome,
            Reason::HardGate { code: code.clone() },
            Some(reason.clone()),
        ))
    }

    /// Carries out an `ask`, `replan` or `rerun` decision: the target, what it
    /// invalidates (by `order`, the flow ranked upstream first), the feedback it runs
    /// with, and the next round. `None` when a person said no to an `ask`.
    async fn start_repair(
        &mut self,
        decision: &Decision,
        candidate: &Candidate,
        result: &Judged,
        order: &BTreeMap<&str, usize>,
    ) -> Result<Option<NodeIndex>, Halt> {
        let spec = self.spec;
        let (target, items, feedback) = match decision {
            Decision::Ask { question, .. } => {
                let answer = self.ask_human(question).await?;
                let approved = answer
                    .get("approved")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if !approved {
                    return Ok(None);
                }
                let target = candidate.step.clone();
                let mut feedback = self.gate_feedback(FeedbackReason::Human, &target, result);
                feedback.feedback.human = Some(answer);
                (target, Vec::new(), Some(feedback))
            }
            Decision::Replan { .. } => {
                self.replanning = true;
                let entry = spec
                    .flow
                    .graph
                    .node_weight(spec.flow.entry)
                    .map(|step| step.name.clone())
                    .unwrap_or_default();
                let feedback = self.gate_feedback(FeedbackReason::Replan, &entry, result);
                (entry, Vec::new(), Some(feedback))
            }
            Decision::Rerun {
                step,
                with_feedback,
                items,
                ..
            } => {
                let feedback =
                    with_feedback.then(|| self.gate_feedback(FeedbackReason::Gate, step, result));
                (step.clone(), items.clone(), feedback)
            }
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
        let rank = |step: &str| order.get(step).copied().unwrap_or(usize::MAX);
        let invalidated: Vec<String> =
            crate::engine::repair::downstream(&spec.flow, order, &target)
                .into_iter()
                .filter(|step| rank(step) >= rank(&target))
                .collect();
        self.emit_repair(decision, invalidated.clone())?;
        let mut codes = result.error_codes();
        if codes.is_empty() {
            codes = result.warning_codes();
        }
        self.emit(EventKind::Retry {
            retry: RetryKind::Repair,
            next: self.state.round + 1,
            delay_ms: 0,
            reason: codes.join(", "),
        })?;
        self.start_round(&target, &invalidated, items, feedback)?;
        Ok(Some(target_node))
    }

    /// The feedback a gate's failure (or warnings) gives the rerun of `target`: the
    /// issues with their details, the outputs of the steps the gate read (kept though the
    /// rerun invalidates them), and `target`'s own output being fixed.
    fn gate_feedback(
        &self,
        reason: FeedbackReason,
        target: &str,
        result: &Judged,
    ) -> state::PendingFeedback {
        let mut feedback = Feedback::new(reason, self.state.round);
        feedback.issues = result.issues(None);
        if let Some(gate) = self.spec.gates.get(&result.evaluation.gate) {
            feedback.judges = self.judges_of(gate, &self.scope(false));
        }
        state::PendingFeedback {
            feedback,
            previous: self.state.outputs().get(target).cloned(),
        }
    }

    /// The outputs of the steps `gate` reads, as bound now.
    pub(super) fn judges_of(
        &self,
        gate: &charter_compiler::graph::GateIr,
        bindings: &Bindings,
    ) -> BTreeMap<String, Value> {
        use crate::engine::eval::Env;
        crate::engine::feedback::steps_read(gate)
            .into_iter()
            .filter_map(|step| {
                let output = bindings.get(&NameIr::Step(step.clone()))?.clone();
                Some((step, output))
            })
            .collect()
    }

    /// Starts the next round at `target`: invalidates the steps given, and for an `each`
    /// target with named items, only those items (and their dependents).
    pub(super) fn start_round(
        &mut self,
        target: &str,
        invalidated: &[String],
        items: Vec<String>,
        feedback: Option<state::PendingFeedback>,
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
            self.state.remove_output(step);
        }
        // What is not rerun carries over into the new round as it was.
        let round = self.state.round;
        let kept: Vec<String> = self.state.outputs().keys().cloned().collect();
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
    pub(super) fn stop_repairing(
        &mut self,
        reason: Reason,
        gate_node: NodeIndex,
    ) -> Result<NodeIndex, Halt> {
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
    pub(super) fn finalize_node(&self, gate_node: NodeIndex) -> Option<NodeIndex> {
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

    pub(super) fn emit_repair(
        &mut self,
        decision: &Decision,
        invalidated: Vec<String>,
    ) -> Result<(), Halt> {
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
}

/// Whether any of `gate`'s expressions reads `run`.
fn reads_run(gate: &charter_compiler::graph::GateIr) -> bool {
    let run = NameIr::Run;
    let reads = |expr: &ExprIr| crate::engine::eval::mentions(expr, &run);
    reads(&gate.pass_when)
        || gate
            .rules
            .iter()
            .any(|rule| reads(&rule.expr) || rule.detail.as_ref().is_some_and(reads))
        || gate.scores.iter().any(|score| {
            reads(&score.expr)
                || score
                    .below
                    .as_ref()
                    .and_then(|below| below.detail.as_ref())
                    .is_some_and(reads)
        })
}
