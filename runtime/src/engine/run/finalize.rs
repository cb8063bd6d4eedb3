//! The `finalize` step (the finalizer must name `best`; the delivery is written, read back and re-hashed) and `ask` steps (a person's `Answer`).

use super::*;

impl Scheduler<'_> {
    /// The finalize step: the role gets `best`; its `Delivery.candidate_id` must be
    /// `best.id`; the delivery is written, read back and re-hashed.
    pub(super) async fn run_finalize(
        &mut self,
        step: &str,
        role: &str,
        args: &[ExprIr],
    ) -> Result<(), Halt> {
        let best = self.state.best().cloned();
        let inputs = self.eval_args(args, &Bindings::default())?;
        let output = self.single_call(step, role, inputs).await?;
        self.store(step, StepOutput::Single(Arc::new(output.clone())));
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
        let rebuilt = CandidateContent::of(stored, written).into_candidate(best.round());
        let summary = output
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let checked = delivery::deliver(
            &self.config.delivery,
            self.files,
            &rebuilt,
            summary,
            best.hash(),
        )
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
    pub(super) fn mismatch(&mut self, candidate: &str, expected: &str, message: String) -> Halt {
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

    /// An `ask` step: a person's `Answer`, readable as the step's output. With `max N`,
    /// the step asks at most N times in a run: the N-th rejection blocks the run
    /// (`human_rejected`), and reaching the step again after N answers blocks it too
    /// (`max_rounds`: the loop through the step has used its rounds; nothing failed).
    pub(super) async fn run_ask(
        &mut self,
        step: &str,
        question: &str,
        max: Option<u64>,
    ) -> Result<(), Halt> {
        let asked = self.state.asks.get(step).copied().unwrap_or(0);
        if let Some(max) = max
            && asked >= max
        {
            return Err(Halt::Stop(Stop::new(
                Outcome::Blocked,
                Reason::MaxRounds,
                Some(format!(
                    "step `{step}` has asked {asked} times, its limit (`max {max}`)"
                )),
            )));
        }
        let answer = self.ask_human(question).await?;
        let asked = asked + 1;
        self.state.asks.insert(step.to_string(), asked);
        let rejected = !answer
            .get("approved")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        self.state.last_ask_rejected = rejected;
        self.store(step, StepOutput::Single(Arc::new(answer)));
        if let Some(max) = max
            && rejected
            && asked >= max
        {
            return Err(Halt::Stop(Stop::new(
                Outcome::Blocked,
                Reason::HumanRejected,
                Some(format!(
                    "step `{step}` was answered no {asked} times, its limit (`max {max}`)"
                )),
            )));
        }
        Ok(())
    }

    /// After an `ask` step: the role step that runs next sees the answer as
    /// `feedback.human` (with its own output so far as `previous`).
    pub(super) fn hand_answer_on(&mut self, ask: &str, next: NodeIndex) {
        let Some(next_step) = self.spec.flow.graph.node_weight(next) else {
            return;
        };
        if !matches!(
            next_step.kind,
            StepKind::Call { .. } | StepKind::Each { .. } | StepKind::Finalize { .. }
        ) {
            return;
        }
        let Some(answer) = self.state.outputs().get(ask).map(StepOutput::visible) else {
            return;
        };
        let target = next_step.name.clone();
        let previous = self.state.outputs().get(&target).cloned();
        let pending = self
            .state
            .feedback
            .entry(target)
            .or_insert_with(|| state::PendingFeedback {
                feedback: crate::engine::feedback::Feedback::new(
                    crate::engine::feedback::Reason::Human,
                    self.state.round,
                ),
                previous,
            });
        pending.feedback.human = Some(answer);
    }

    pub(super) async fn ask_human(&mut self, question: &str) -> Result<Value, Halt> {
        let step = self.current_step.as_deref().unwrap_or_default().to_string();
        let attempt = self
            .state
            .human_attempts
            .entry((step.clone(), self.state.round))
            .or_insert(0);
        *attempt += 1;
        let request = HumanRequest {
            step: step.clone(),
            round: self.state.round,
            attempt: *attempt,
            question: question.to_string(),
        };
        // A person may take any time; a cancel (Ctrl-C, `DELETE /runs/{id}`) ends the wait.
        let asked = self.humans.ask(request);
        let answer = match self.config.cancel.clone() {
            Some(mut cancel) => tokio::select! {
                biased;
                () = super::jobs::cancelled(&mut cancel) => {
                    self.clock_moved();
                    return Err(self.cancel_stop());
                }
                answer = asked => answer,
            },
            None => asked.await,
        };
        self.clock_moved();
        let answer = match answer {
            Ok(answer) => answer,
            Err(error @ crate::engine::provider::ProviderError::JournalUnwritable { .. }) => {
                return Err(self.journal_stop(error.to_string()));
            }
            // Nobody can answer (the person never came back, the input ended): without
            // a yes nothing goes on, and the run ends saying why rather than erring.
            Err(crate::engine::provider::ProviderError::Unanswered { message }) => {
                return Err(Halt::Stop(super::Stop::new(
                    crate::formats::trace::Outcome::Blocked,
                    crate::formats::trace::Reason::HumanRejected,
                    Some(if message.contains(&format!("`{step}`")) {
                        message
                    } else {
                        format!("the question of step `{step}` got no answer: {message}")
                    }),
                )));
            }
            Err(error) => {
                return Err(Halt::Error(RunError::Human {
                    step: step.clone(),
                    message: error.to_string(),
                }));
            }
        };
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
}
