//! The properties every variant must keep (DESIGN §12, P1–P5), checked on its outcome and trace.
//!
//! P1 (a terminal state with a reason, no error, panic or hang) is decided by the caller,
//! which saw how the run ended; the rest are read from the trace: P2 the worst case of
//! `check --bounds` (model calls, steps, virtual wall time, tokens when known), P3 the
//! delivery (a gate evaluation of the delivered candidate with every hard rule holding and
//! the same hash, and a delivery event that matches), P4 the budgets (no model call
//! starts once tokens, cost or wall time ran out, except the one `on_exhausted` summary;
//! no step runs past `budget.steps`), P5 no invariant broke.

use std::fmt;

use charter_compiler::bounds::{Bounds, format_ms};
use charter_compiler::graph::CompiledSpec;

use crate::engine::budget::BudgetMeter;
use crate::engine::provider::Usage;
use crate::engine::run::RunOutcome;
use crate::formats::trace::{BudgetKind, EventKind, RuleSeverity, TraceEvent};

/// Which property.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Property {
    P1,
    P2,
    P3,
    P4,
    P5,
}

impl Property {
    /// What the property promises, for a table's legend.
    pub fn promise(self) -> &'static str {
        match self {
            Property::P1 => "ends in a terminal state with a reason (no error, panic or hang)",
            Property::P2 => "stays within `charter check --bounds`'s worst case",
            Property::P3 => {
                "delivers only a candidate that passed its gate's hard rules, hash matching"
            }
            Property::P4 => "exceeds no budget beyond the calls in flight when it ran out",
            Property::P5 => "keeps every invariant",
        }
    }
}

impl fmt::Display for Property {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{self:?}")
    }
}

/// One broken property, said in a sentence.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Violation {
    pub property: Property,
    pub message: String,
}

impl Violation {
    pub fn new(property: Property, message: impl Into<String>) -> Self {
        Violation {
            property,
            message: message.into(),
        }
    }
}

/// P2–P5 on a run that ended with `outcome` and wrote `events`.
pub fn check(
    spec: &CompiledSpec,
    bounds: &Bounds,
    outcome: &RunOutcome,
    events: &[TraceEvent],
) -> Vec<Violation> {
    let mut violations = Vec::new();
    within_bounds(bounds, events, &mut violations);
    delivery(outcome, events, &mut violations);
    budgets(spec, events, &mut violations);
    for event in events {
        if let EventKind::InvariantViolated { invariant, message } = &event.kind {
            violations.push(Violation::new(
                Property::P5,
                format!("invariant `{invariant}` broke: {message}"),
            ));
        }
    }
    violations
}

/// P2: the run's measures against the worst case.
fn within_bounds(bounds: &Bounds, events: &[TraceEvent], violations: &mut Vec<Violation>) {
    let calls = events
        .iter()
        .filter(|event| matches!(event.kind, EventKind::ModelCall { .. }))
        .count() as u64;
    let steps = events
        .iter()
        .filter(|event| matches!(event.kind, EventKind::StepStarted { .. }))
        .count() as u64;
    let tokens: u64 = events
        .iter()
        .map(|event| match &event.kind {
            EventKind::ModelResult {
                input_tokens,
                output_tokens,
                ..
            } => input_tokens.saturating_add(*output_tokens),
            _ => 0,
        })
        .sum();
    let wall = events.last().map_or(0, |event| event.t_ms);
    let total = &bounds.total;
    if let Some(worst) = total.calls
        && calls > worst
    {
        violations.push(Violation::new(
            Property::P2,
            format!("{calls} model calls, over the worst case of {worst}"),
        ));
    }
    if let Some(worst) = total.steps
        && steps > worst
    {
        violations.push(Violation::new(
            Property::P2,
            format!("{steps} steps, over the worst case of {worst}"),
        ));
    }
    if let Some(worst) = total.wall_ms
        && wall > worst
    {
        violations.push(Violation::new(
            Property::P2,
            format!(
                "{} of virtual wall time, over the worst case of {}",
                format_ms(wall),
                format_ms(worst)
            ),
        ));
    }
    if let Some(worst) = total.tokens
        && tokens > worst
    {
        violations.push(Violation::new(
            Property::P2,
            format!("{tokens} tokens, over the worst case of {worst}"),
        ));
    }
}

/// P3: a delivery names a candidate a gate passed on its hard rules, with the same hash.
fn delivery(outcome: &RunOutcome, events: &[TraceEvent], violations: &mut Vec<Violation>) {
    for event in events {
        if let EventKind::Delivery {
            candidate,
            matches: true,
            expected_hash,
            actual_hash,
            ..
        } = &event.kind
            && expected_hash != actual_hash
        {
            violations.push(Violation::new(
                Property::P3,
                format!(
                    "the delivery of {candidate} says it matches, but its hashes differ ({expected_hash}, {actual_hash})"
                ),
            ));
        }
    }
    let Some(delivered) = &outcome.delivered else {
        return;
    };
    let id = &delivered.candidate_id;
    let evaluations: Vec<(&String, bool)> = events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::Gate {
                candidate,
                hash,
                rules,
                ..
            } if candidate == id => Some((
                hash,
                rules
                    .iter()
                    .all(|rule| rule.severity != RuleSeverity::Hard || rule.holds),
            )),
            _ => None,
        })
        .collect();
    if evaluations.is_empty() {
        violations.push(Violation::new(
            Property::P3,
            format!("{id} was delivered, but no gate evaluated it"),
        ));
    } else if !evaluations
        .iter()
        .any(|(hash, hard)| *hard && **hash == delivered.hash)
    {
        let why = if evaluations.iter().any(|(_, hard)| *hard) {
            "with another hash than the one its gate passed"
        } else {
            "though a hard rule of its gate failed"
        };
        violations.push(Violation::new(
            Property::P3,
            format!("{id} was delivered {why}"),
        ));
    }
    let matched = events.iter().any(|event| {
        matches!(&event.kind, EventKind::Delivery { candidate, matches: true, .. } if candidate == id)
    });
    if !matched {
        violations.push(Violation::new(
            Property::P3,
            format!("{id} was delivered with no matching `delivery` event"),
        ));
    }
}

/// P4: once tokens, cost or wall time ran out, no model call starts (the one
/// `on_exhausted` summary aside); no step starts past `budget.steps`.
fn budgets(spec: &CompiledSpec, events: &[TraceEvent], violations: &mut Vec<Violation>) {
    let limits = &spec.budget;
    if limits.tokens.is_none()
        && limits.cost.is_none()
        && limits.wall_ms.is_none()
        && limits.steps.is_none()
    {
        return;
    }
    let mut meter = BudgetMeter::new(limits.clone());
    let mut steps = 0u64;
    let mut summary_calls = 0u64;
    let summary = limits.on_exhausted.as_deref();
    for event in events {
        meter.set_elapsed(std::time::Duration::from_millis(event.t_ms));
        match &event.kind {
            EventKind::ModelResult {
                role,
                input_tokens,
                output_tokens,
                ..
            } => {
                if let Some(role) = spec.roles.get(role) {
                    meter.charge(
                        &role.model,
                        Usage {
                            input_tokens: *input_tokens,
                            output_tokens: *output_tokens,
                        },
                    );
                }
            }
            EventKind::StepStarted { .. } => {
                steps += 1;
                let is_summary = summary.is_some() && event.step.as_deref() == summary;
                if let Some(limit) = limits.steps
                    && steps > limit
                    && !is_summary
                {
                    violations.push(Violation::new(
                        Property::P4,
                        format!(
                            "step {} (`{}`) ran past `budget.steps` {limit}",
                            steps,
                            event.step.as_deref().unwrap_or("?")
                        ),
                    ));
                }
            }
            EventKind::ModelCall { .. } => {
                let ran_out = meter
                    .exhausted()
                    .filter(|which| *which != BudgetKind::Steps);
                let Some(which) = ran_out else { continue };
                let is_summary = summary.is_some() && event.step.as_deref() == summary;
                if is_summary && summary_calls == 0 {
                    summary_calls += 1;
                    continue;
                }
                violations.push(Violation::new(
                    Property::P4,
                    format!(
                        "a model call of `{}` started at {} after `budget.{}` ran out",
                        event.step.as_deref().unwrap_or("?"),
                        format_ms(event.t_ms),
                        which.as_str()
                    ),
                ));
            }
            _ => {}
        }
    }
}
