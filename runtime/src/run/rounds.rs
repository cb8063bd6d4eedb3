//! Gate steps and the repair loop's mechanics: judging the round's candidate, no-progress and round accounting, carrying out the policy's decision, and stopping repair.

use super::*;

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
        let mut bindings = self.bindings();
        bindings.candidate = Some(candidate.value());
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
    pub(super) fn start_round(
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
