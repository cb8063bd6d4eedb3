//! The names a cassette uses, checked against the spec it replays: steps, roles and items that the spec does not have, with "did you mean", and the recording nearest to a key the cassette lacks.
//!
//! A hand-written cassette's commonest mistake is a misspelt name: a call keyed
//! `{step: critique}` for a step called `critic` would otherwise only show up as a missing
//! call and an unused one, far apart. These checks name the entry and the likely fix.

use charter_compiler::diagnostics::did_you_mean;
use charter_compiler::graph::{CompiledSpec, StepKind};

use super::{Cassette, Fault};
use crate::formats::scenario::CallKey;

/// Where in a cassette a name problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The n-th (0-based) entry of `calls`.
    Call(usize),
    /// The n-th entry of `humans`.
    Human(usize),
    /// The n-th entry of `faults`.
    Fault(usize),
}

/// A name in a cassette that the spec does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameProblem {
    pub entry: Entry,
    /// One line: what is wrong, and "did you mean" where a name is close.
    pub message: String,
}

/// Every step, role and (static) item name in `cassette` that `spec` does not have, in
/// file order: calls, then human answers, then faults. One piece: three passes in file
/// order over the same name checks, which the passes share as closures.
pub fn unknown_names(cassette: &Cassette, spec: &CompiledSpec) -> Vec<NameProblem> {
    let steps: Vec<&str> = spec.flow.steps.keys().map(String::as_str).collect();
    let unknown_step = |step: &str| -> Option<String> {
        if spec.flow.steps.contains_key(step) {
            return None;
        }
        Some(format!(
            "the spec `{}` has no step `{step}`{}",
            spec.name,
            suggestion(step, &steps)
        ))
    };
    let mut problems = Vec::new();
    for (index, call) in cassette.calls.iter().enumerate() {
        let key = call.key();
        let problem = |message: String| NameProblem {
            entry: Entry::Call(index),
            message: format!("call {key}: {message}"),
        };
        if let Some(message) = unknown_step(&call.step) {
            problems.push(problem(message));
            continue;
        }
        let kind = spec.flow.step(&call.step).map(|(_, step)| &step.kind);
        let check_role = match kind {
            Some(StepKind::Each {
                check: Some(check), ..
            }) => check.by.as_deref(),
            _ => None,
        };
        if let Some(role) = &call.role {
            match check_role {
                Some(by) if by == role => {}
                Some(by) => problems.push(problem(format!(
                    "the per-item check of step `{}` is made by role `{by}`, not `{role}`{}",
                    call.step,
                    suggestion(role, &[by])
                ))),
                None => problems.push(problem(format!(
                    "`role:` names the judge of a per-item check, and step `{}` has none; \
                     leave `role` out for the step's own role",
                    call.step
                ))),
            }
        }
        match (kind, &call.tool) {
            (Some(StepKind::Tool { tool, .. }), Some(named)) if tool != named => {
                problems.push(problem(format!(
                    "step `{}` calls tool `{tool}`, not `{named}`{}",
                    call.step,
                    suggestion(named, &[tool.as_str()])
                )));
                continue;
            }
            (Some(StepKind::Tool { .. }), Some(_)) => continue,
            (Some(StepKind::Tool { tool, .. }), None) => {
                problems.push(problem(format!(
                    "step `{}` is a tool step: its entry gives `tool: {tool}` and a `result` \
                     (or `error`), not a model's answer",
                    call.step
                )));
                continue;
            }
            (Some(other), Some(named)) => {
                problems.push(problem(format!(
                    "step `{}` is a {} step, not a tool step: leave `tool: {named}` out, or \
                     list the tool call under the call's `tool_calls`",
                    call.step,
                    kind_name(other)
                )));
                continue;
            }
            _ => {}
        }
        match kind {
            Some(StepKind::Each { .. }) => {}
            Some(_) if call.item.is_some() => problems.push(problem(format!(
                "step `{}` has no items (only an `each` step has); leave `item` out",
                call.step
            ))),
            Some(StepKind::Call { .. } | StepKind::Finalize { .. }) | None => {}
            Some(other) => problems.push(problem(format!(
                "step `{}` calls no model (it is a {} step)",
                call.step,
                kind_name(other)
            ))),
        }
    }
    for (index, human) in cassette.humans.iter().enumerate() {
        if let Some(message) = unknown_step(&human.step) {
            problems.push(NameProblem {
                entry: Entry::Human(index),
                message: format!("human answer: {message}"),
            });
        }
    }
    for (index, fault) in cassette.faults.iter().enumerate() {
        let Fault::Tamper(tamper) = fault;
        if let Some(message) = unknown_step(&tamper.after) {
            problems.push(NameProblem {
                entry: Entry::Fault(index),
                message: format!("fault `tamper` after: {message}"),
            });
        }
    }
    problems
}

/// The recorded key most like `missing` among `candidates` (the unused recordings), if
/// one is close: the same step or a similar name, with little else differing.
pub fn closest_key<'a>(
    missing: &CallKey,
    candidates: impl IntoIterator<Item = &'a CallKey>,
) -> Option<CallKey> {
    let similar = |a: &str, b: &str| did_you_mean(a, [b]).is_some();
    let distance = |key: &CallKey| -> u32 {
        let mut distance = 0;
        if key.step != missing.step {
            distance += if similar(&key.step, &missing.step) {
                2
            } else {
                10
            };
        }
        match (&key.item, &missing.item) {
            (Some(a), Some(b)) if a != b => distance += if similar(a, b) { 1 } else { 2 },
            (a, b) if a != b => distance += 2,
            _ => {}
        }
        if key.role != missing.role {
            distance += 2;
        }
        // A misspelt name is likelier than a recording under another round or attempt.
        distance += 2 * u32::from(key.round != missing.round)
            + 2 * u32::from(key.attempt != missing.attempt);
        distance
    };
    candidates
        .into_iter()
        .map(|key| (distance(key), key))
        .filter(|(distance, _)| *distance <= 4)
        .min_by_key(|(distance, key)| (*distance, (*key).clone()))
        .map(|(_, key)| key.clone())
}

/// `; did you mean `x`?` when a name is close, else the names there are (up to 12).
fn suggestion(name: &str, names: &[&str]) -> String {
    if let Some(hint) = did_you_mean(name, names.iter().copied()) {
        return format!("; {hint}");
    }
    if names.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = names
        .iter()
        .take(12)
        .map(|name| format!("`{name}`"))
        .collect();
    let more = if names.len() > 12 { ", …" } else { "" };
    format!(" (it has {}{more})", shown.join(", "))
}

fn kind_name(kind: &StepKind) -> &'static str {
    match kind {
        StepKind::Call { .. } => "call",
        StepKind::Each { .. } => "each",
        StepKind::Gate { .. } => "gate",
        StepKind::Finalize { .. } => "finalize",
        StepKind::Branch => "branch",
        StepKind::Ask { .. } => "ask",
        StepKind::Tool { .. } => "tool",
        _ => "terminal",
    }
}
