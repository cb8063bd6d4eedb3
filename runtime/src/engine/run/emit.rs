//! Writing the trace: every event gets the next `seq`, the run's clock in `t_ms`, the round, and its step, item and attempt.

use super::*;

impl Scheduler<'_> {
    /// The run's clock now. A clock only the run moves (a replay's paused one) moves only while the run waits, so it is read
    /// once between two waits ([`Scheduler::clock_moved`], after each wait, forgets the
    /// reading); any other clock is read every time.
    pub(super) fn now(&mut self) -> Instant {
        if !self.run_moves_clock {
            return self.clock.now();
        }
        let clock = &self.clock;
        *self.now.get_or_insert_with(|| clock.now())
    }

    /// The run has waited: its clock may have moved.
    pub(super) fn clock_moved(&mut self) {
        self.now = None;
    }

    pub(super) fn elapsed(&mut self) -> std::time::Duration {
        self.now().duration_since(self.started)
    }

    pub(super) fn elapsed_ms(&mut self) -> u64 {
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
            Some(Arc::clone(&unit.step)),
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
        self.append(Some(Arc::from(step)), item.map(str::to_string), None, kind)
    }

    pub(super) fn append(
        &mut self,
        step: Option<Arc<str>>,
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
        // A trace that cannot be written is a journal that cannot be written: the run
        // stops at once rather than go on unrecorded (its `run_finished` is tried too).
        self.sink
            .append_owned(event)
            .map_err(|error| self.journal_stop(format!("cannot write the trace: {error}")))
    }
}
