//! What a run shows at the terminal as it goes: a line per event worth showing ([`LiveDisplay`], a trace sink), the calls in flight and their heartbeat (`calls`), the outcome line and the totals line. Shared by `replay`, `run`, `chat`, `fork` and the live driver.

mod calls;
mod lines;

use std::collections::BTreeMap;

use charter_runtime::engine::run::RunOutcome;
use charter_runtime::formats::trace::{EventKind, TraceError, TraceEvent, TraceSink};
use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};

use crate::loader::display_path;
use crate::terminal::print_err;

pub(crate) use calls::{LiveCalls, answered, place};
use lines::{describe, format_time};

/// Shows a run's phases on stderr as its events are appended, counting off the items of
/// each `each` fan-out (`item ok [3/8]`).
#[derive(Debug, Default)]
pub(crate) struct LiveDisplay {
    /// Items settled and items in all, by (`each` step, round).
    fan_out: BTreeMap<(String, u64), (u64, u64)>,
    /// The calls in flight, for the heartbeat of a live run.
    calls: Option<std::sync::Arc<calls::LiveCalls>>,
}

impl LiveDisplay {
    /// A display that also keeps `calls` up to date (a live run's heartbeat).
    pub(crate) fn with_calls(calls: std::sync::Arc<calls::LiveCalls>) -> Self {
        LiveDisplay {
            calls: Some(calls),
            ..LiveDisplay::default()
        }
    }

    /// Tells the calls in flight what `event` started or ended.
    fn track(&self, event: &TraceEvent) {
        let Some(calls) = &self.calls else {
            return;
        };
        let mut slot = event.step.as_deref().unwrap_or_default().to_string();
        if let Some(item) = &event.item {
            slot.push_str(&format!("[{item}]"));
        }
        match &event.kind {
            EventKind::ModelCall { role, .. } => {
                let place = format!("{slot}#{}", event.attempt.unwrap_or(1));
                calls.call_started(&slot, &place, role);
            }
            EventKind::ModelResult { .. }
            | EventKind::Timeout { .. }
            | EventKind::Retry { .. }
            | EventKind::ItemDone { .. }
            | EventKind::StepStarted { .. } => calls.call_ended(&slot),
            EventKind::RunFinished { .. } => calls.all_ended(),
            _ => {}
        }
    }

    /// ` [k/n]` after an item settles, when its step said how many items it calls.
    fn progress(&mut self, event: &TraceEvent) -> String {
        let key = (
            event.step.as_deref().unwrap_or_default().to_string(),
            event.round,
        );
        match &event.kind {
            EventKind::StepStarted {
                items: Some(items), ..
            } => {
                self.fan_out.insert(key, (0, *items));
                String::new()
            }
            EventKind::ItemDone { .. } | EventKind::ItemSkipped { .. } => {
                match self.fan_out.get_mut(&key) {
                    Some((settled, items)) => {
                        *settled += 1;
                        format!(" [{settled}/{items}]")
                    }
                    None => String::new(),
                }
            }
            _ => String::new(),
        }
    }
}

impl TraceSink for LiveDisplay {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        self.track(event);
        let progress = self.progress(event);
        if let Some(line) = describe(event) {
            let time = format_time(event.t_ms);
            let mut place = event.step.as_deref().unwrap_or_default().to_string();
            if let Some(item) = &event.item {
                place.push_str(&format!("[{item}]"));
            }
            if let Some(attempt) = event.attempt {
                place.push_str(&format!("#{attempt}"));
            }
            // What a cassette or a model said is shown escaped and cut (DESIGN §15).
            let place = one_line(&place, 200);
            let line = one_line(&line, MAX_LINE_CHARS);
            print_err(&format!(
                "{time:>9}  r{:<2} {place:<24} {line}{progress}\n",
                event.round
            ));
        }
        Ok(())
    }
}

/// `outcome: completed (gate_passed); delivered c1 (sha256:...) to out/delivery.json`
pub(crate) fn outcome_line(outcome: &RunOutcome) -> String {
    let mut line = format!("outcome: {} ({})", outcome.outcome, outcome.reason);
    if let Some(message) = &outcome.message {
        line.push_str(&format!(": {}", one_line(message, MAX_LINE_CHARS)));
    }
    if let Some(delivered) = &outcome.delivered {
        line.push_str(&format!(
            "; delivered {} ({})",
            delivered.candidate_id, delivered.hash
        ));
        if let Some(path) = &delivered.path {
            line.push_str(&format!(" to {}", display_path(path)));
        }
    }
    line
}

/// `totals: 6 calls, 8,300 tokens (6,400 in, 1,900 out), $0.0176; 3m12s virtual in 4ms`
/// (a replay), or `…; 1m20s` (a live run, whose clock is the wall clock).
pub(crate) fn totals_line(
    totals: &charter_runtime::totals::RunTotals,
    real: std::time::Duration,
    virtual_clock: bool,
) -> String {
    use charter_runtime::formats::scenario::duration_text::format;
    let run_time = format(std::time::Duration::from_millis(totals.t_ms));
    if virtual_clock {
        format!(
            "totals: {}; {run_time} virtual in {}",
            totals.usage_text(),
            format(real)
        )
    } else {
        format!("totals: {}; {}", totals.usage_text(), format(real))
    }
}
