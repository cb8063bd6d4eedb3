//! Ending well when a budget runs out (DESIGN §9.3): the `on_exhausted` step runs once — one call, whatever the budget, no retries — and its output is the run's answer.

use super::*;

impl Scheduler<'_> {
    /// Runs the `on_exhausted` step `step` after budget `which` ran out (in-flight calls
    /// were dropped already). The run ends `below_target{budget_exhausted{which}}` with the
    /// summary as its answer, or `failed` with the same reason if the summary failed.
    pub(super) async fn summarize(&mut self, step: &str, which: BudgetKind) -> Result<Stop, Halt> {
        let spec = self.spec;
        let Some(StepKind::Call { role, args }) = spec.flow.step(step).map(|(_, ir)| &ir.kind)
        else {
            return Err(flow_error(&format!(
                "`on_exhausted` names step `{step}`, which does not call a role"
            )));
        };
        self.summarizing = true;
        self.abort_jobs();
        self.current_step = Some(Arc::from(step));
        self.current_role = Some(role.clone());
        self.state.meter.count_step();
        self.enter_phase(Phase::Finalizing)?;
        self.emit(EventKind::StepStarted {
            role: Some(role.clone()),
            items: None,
            tool: None,
        })?;
        let inputs = self.eval_args(args, &Bindings::default())?;
        match self.single_call(step, role, inputs).await {
            Ok(output) => {
                self.store(step, StepOutput::Single(Arc::new(output)));
                Ok(Stop::new(
                    Outcome::BelowTarget,
                    Reason::BudgetExhausted(which),
                    Some(format!(
                        "the {which} budget ran out; `{step}` summarized the run"
                    )),
                ))
            }
            Err(Halt::Stop(unwritten)) if unwritten.reason == Reason::JournalUnwritable => {
                Ok(unwritten)
            }
            Err(Halt::Stop(failed)) => Ok(Stop::new(
                Outcome::Failed,
                Reason::BudgetExhausted(which),
                Some(format!(
                    "the {which} budget ran out, and its summary `{step}` failed: {}",
                    failed.message.unwrap_or_default()
                )),
            )),
            Err(error) => Err(error),
        }
    }
}
