//! Writing the trace: every event gets the next `seq`, the run's clock in `t_ms`, the round, and its step, item and attempt.

use super::*;

impl Scheduler<'_> {
    pub(super) fn elapsed(&self) -> std::time::Duration {
        Instant::now().duration_since(self.started)
    }

    pub(super) fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Appends an event for the current step.
    pub(super) fn emit(&mut self, kind: EventKind) -> Result<(), Halt> {
        let step = self.current_step.clone();
        self.append(step, None, None, kind)
    }

    /// Appends an event about one call.
    pub(super) fn emit_call(&mut self, unit: &CallUnit, kind: EventKind) -> Result<(), Halt> {
        self.append(
            Some(unit.step.clone()),
            unit.item.clone(),
            Some(unit.attempt),
            kind,
        )
    }

    /// Appends an event about one work item.
    pub(super) fn emit_item(
        &mut self,
        step: &str,
        item: Option<&str>,
        kind: EventKind,
    ) -> Result<(), Halt> {
        self.append(Some(step.to_string()), item.map(str::to_string), None, kind)
    }

    pub(super) fn append(
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
            .append_owned(event)
            .map_err(|error| Halt::Error(RunError::Trace(error.to_string())))
    }
}
