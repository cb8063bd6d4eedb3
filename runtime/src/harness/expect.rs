//! Checking a scenario's `expect` against how its run ended: outcome, reason, the delivered candidate, the answer (a subset match), the model calls per step (DESIGN §10) and the trajectory (DESIGN §17, [`trajectory`]).

use std::collections::BTreeMap;

use charter_compiler::diagnostics::did_you_mean;
use charter_compiler::graph::CompiledSpec;
use serde_json::Value;

use crate::engine::run::RunOutcome;
use crate::formats::scenario::Expectation;
use crate::formats::trace::{EventKind, TraceEvent};

pub mod trajectory;

/// Model calls per step in a trace: its `model_call` events by step (every attempt, a
/// per-item check's judge calls included).
pub fn calls_per_step(events: &[TraceEvent]) -> BTreeMap<String, u64> {
    let mut calls = BTreeMap::new();
    for event in events {
        if let (EventKind::ModelCall { .. }, Some(step)) = (&event.kind, &event.step) {
            *calls.entry(step.to_string()).or_insert(0) += 1;
        }
    }
    calls
}

/// What `expect` names that `spec` does not have (`calls` and the trajectory keys), and
/// trajectory bounds that cannot hold, one message each with "did you mean" (checked
/// before a run is judged, like the cassette's names).
pub fn name_problems(expect: &Expectation, spec: &CompiledSpec) -> Vec<String> {
    let mut problems = unknown_call_steps(expect, spec);
    problems.extend(trajectory::name_problems(expect, spec));
    problems
}

/// Steps `expect.calls` names that `spec` does not have, one message each with "did you
/// mean".
fn unknown_call_steps(expect: &Expectation, spec: &CompiledSpec) -> Vec<String> {
    expect
        .calls
        .keys()
        .filter(|step| !spec.flow.steps.contains_key(*step))
        .map(|step| {
            let hint = did_you_mean(step, spec.flow.steps.keys().map(String::as_str))
                .map(|hint| format!("; {hint}"))
                .unwrap_or_default();
            format!(
                "`expect.calls` names step `{step}`, which the spec `{}` does not have{hint}",
                spec.name
            )
        })
        .collect()
}

/// What the run did not meet of `expect`, one phrase each (`outcome completed, got
/// failed`), in the order the fields are written; empty when it met them all.
pub fn unmet(
    expect: &Expectation,
    outcome: &RunOutcome,
    calls: &BTreeMap<String, u64>,
) -> Vec<String> {
    let mut unmet = Vec::new();
    if let Some(expected) = expect.outcome
        && expected != outcome.outcome
    {
        unmet.push(format!("outcome {expected}, got {}", outcome.outcome));
    }
    if let Some(expected) = &expect.reason
        && *expected != outcome.reason
    {
        unmet.push(format!("reason {expected}, got {}", outcome.reason));
    }
    if let Some(expected) = &expect.delivered {
        let delivered = outcome
            .delivered
            .as_ref()
            .map(|delivered| delivered.candidate_id.as_str());
        if delivered != Some(expected.as_str()) {
            let got = match (delivered, &outcome.best) {
                (Some(id), _) => id.to_string(),
                (None, Some(best)) => format!("no delivery (best {best})"),
                (None, None) => "no delivery".to_string(),
            };
            unmet.push(format!("delivered {expected}, got {got}"));
        }
    }
    if let Some(expected) = &expect.answer {
        match &outcome.answer {
            None => unmet.push("an answer, got none".to_string()),
            Some(answer) => {
                if let Some(difference) = subset_difference(expected, answer, "answer") {
                    unmet.push(difference);
                }
            }
        }
    }
    for (step, expected) in &expect.calls {
        let made = calls.get(step).copied().unwrap_or(0);
        if made != *expected {
            unmet.push(format!(
                "{expected} model call{} in step `{step}`, got {made}",
                if *expected == 1 { "" } else { "s" }
            ));
        }
    }
    unmet
}

/// Where `actual` fails to hold `expected` as a subset: every field of an expected record
/// is in the actual one and holds its value as a subset; lists match item by item and
/// have the same length; other values are equal (`1 == 1.0`). `None` when it holds.
pub fn subset_difference(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Object(expected), Value::Object(actual)) => {
            expected
                .iter()
                .find_map(|(key, value)| match actual.get(key) {
                    Some(found) => subset_difference(value, found, &format!("{path}.{key}")),
                    None => Some(format!("{path}.{key} = {}, got no `{key}`", short(value))),
                })
        }
        (Value::Array(expected), Value::Array(actual)) => {
            if expected.len() != actual.len() {
                return Some(format!(
                    "{path} with {} item{}, got {}",
                    expected.len(),
                    if expected.len() == 1 { "" } else { "s" },
                    actual.len()
                ));
            }
            expected
                .iter()
                .zip(actual)
                .enumerate()
                .find_map(|(index, (expected, actual))| {
                    subset_difference(expected, actual, &format!("{path}[{index}]"))
                })
        }
        _ if crate::engine::value::values_equal(expected, actual) => None,
        _ => Some(format!(
            "{path} = {}, got {}",
            short(expected),
            short(actual)
        )),
    }
}

/// A value as compact JSON, cut to 80 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
