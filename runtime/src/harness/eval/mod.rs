//! `charter eval`'s pure parts (DESIGN §17): reading the inputs file (one `{input, expect?}` per line), judging one run against its line's `expect`, and the report's figures ([`report`], [`stats`]).
//!
//! Nothing here runs a spec or touches a file: the CLI reads the file, runs each line as
//! many times as asked, and hands each run's outcome and trace to [`judge`]; the
//! [`report::Report`] it builds from the judged runs is what every output prints.

use std::collections::BTreeMap;

use charter_compiler::diagnostics::did_you_mean;
use charter_compiler::graph::CompiledSpec;
use serde_json::Value;

use crate::engine::run::RunOutcome;
use crate::formats::scenario::Expectation;
use crate::formats::trace::{EventKind, Outcome, TraceEvent};
use crate::totals::RunTotals;

pub mod report;
pub mod stats;

#[cfg(test)]
mod tests;

/// The keys a line of an inputs file may hold.
const LINE_KEYS: [&str; 4] = ["input", "expect", "answers", "name"];

/// The keys `expect` may hold (as in `scenario.yaml`).
const EXPECT_KEYS: [&str; 10] = [
    "outcome",
    "reason",
    "stale",
    "delivered",
    "answer",
    "calls",
    "steps",
    "tools",
    "not_called",
    "gates",
];

/// One line of an inputs file.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalLine {
    /// Its line number in the file (1-based), which names it in every report.
    pub line: usize,
    /// A short name to show beside the line number, if the line gives one.
    pub name: Option<String>,
    pub input: Value,
    /// What a run must show to pass; a line without one passes when the run completes.
    pub expect: Expectation,
    /// The answers to the run's `ask` steps, in the order they are asked (each like
    /// `{"approved": true, "note": "..."}`): no person watches an eval.
    pub answers: Vec<Value>,
}

impl EvalLine {
    /// `line 3` or `line 3 (refund)`.
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) => format!("line {} ({name})", self.line),
            None => format!("line {}", self.line),
        }
    }
}

/// A line of the inputs file that cannot be read, with why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "line {}: {}", self.line, self.message)
    }
}

/// Every line of an inputs file (JSON Lines; blank lines are skipped), or every line that
/// cannot be read, each with why and how to fix it.
pub fn parse_inputs(text: &str) -> Result<Vec<EvalLine>, Vec<LineError>> {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        match parse_line(line, raw) {
            Ok(parsed) => lines.push(parsed),
            Err(message) => errors.push(LineError { line, message }),
        }
    }
    if errors.is_empty() {
        Ok(lines)
    } else {
        Err(errors)
    }
}

fn parse_line(line: usize, raw: &str) -> Result<EvalLine, String> {
    let value: Value = serde_json::from_str(raw).map_err(|error| format!("not JSON: {error}"))?;
    let Value::Object(mut fields) = value else {
        return Err(format!(
            "is {}, not an object; each line is one JSON object like {{\"input\": {{...}}, \"expect\": {{\"outcome\": \"completed\"}}}}",
            kind_of(&value)
        ));
    };
    if let Some(unknown) = fields.keys().find(|key| !LINE_KEYS.contains(&key.as_str())) {
        return Err(unknown_key(
            "",
            unknown,
            &LINE_KEYS,
            "a line holds `input` and, optionally, `expect`, `answers` and `name`",
        ));
    }
    let input = fields
        .remove("input")
        .ok_or_else(|| "has no `input` (the request the spec runs on)".to_string())?;
    let expect = match fields.remove("expect") {
        None | Some(Value::Null) => Expectation::default(),
        Some(expect) => parse_expect(expect)?,
    };
    let answers = match fields.remove("answers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(answers)) => answers,
        Some(other) => {
            return Err(format!(
                "`answers` is {}, not a list of answers like [{{\"approved\": true}}]",
                kind_of(&other)
            ));
        }
    };
    let name = match fields.remove("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name),
        Some(other) => return Err(format!("`name` is {}, not a string", kind_of(&other))),
    };
    Ok(EvalLine {
        line,
        name,
        input,
        expect,
        answers,
    })
}

/// `expect` read as in `scenario.yaml`; an unknown key is named with a did-you-mean.
fn parse_expect(expect: Value) -> Result<Expectation, String> {
    if let Value::Object(fields) = &expect
        && let Some(unknown) = fields
            .keys()
            .find(|key| !EXPECT_KEYS.contains(&key.as_str()))
    {
        return Err(unknown_key(
            "expect.",
            unknown,
            &EXPECT_KEYS,
            "`expect` holds what `scenario.yaml`'s `expect` holds",
        ));
    }
    serde_json::from_value(expect).map_err(|error| format!("`expect`: {error}"))
}

/// `unknown key `expect.stesp`; did you mean `steps`? (...)`.
fn unknown_key(prefix: &str, key: &str, known: &[&str], what: &str) -> String {
    let hint = did_you_mean(key, known.iter().copied())
        .map(|hint| format!("; {hint}"))
        .unwrap_or_default();
    format!("unknown key `{prefix}{key}`{hint} ({what})")
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// What each line's `expect` names that `spec` does not have (a step, a tool, a gate),
/// each with its line and a did-you-mean: checked before anything runs.
pub fn name_problems(lines: &[EvalLine], spec: &CompiledSpec) -> Vec<LineError> {
    lines
        .iter()
        .flat_map(|line| {
            super::expect::name_problems(&line.expect, spec)
                .into_iter()
                .map(|message| LineError {
                    line: line.line,
                    message,
                })
        })
        .collect()
}

/// One run of an eval, judged.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// The inputs file's line the run ran.
    pub line: usize,
    /// Which of the line's runs this is (1-based).
    pub repeat: usize,
    /// The model set it ran on (an index into the report's sets).
    pub set: usize,
    pub passed: bool,
    /// `completed{done}`, `failed{step_failed{plan}}`, or `error` for a run that could not
    /// run to an outcome.
    pub ending: String,
    /// What the run did not meet of its line's `expect`, one phrase each.
    pub unmet: Vec<String>,
    /// Each gate's score at its last evaluation in the run.
    pub gates: BTreeMap<String, f64>,
    pub totals: RunTotals,
    /// The run's wall time, when timings are kept.
    pub latency_ms: Option<u64>,
}

/// Judges a run of `line` against its `expect` (by default: the run completes), from
/// how it ended and its trace.
pub fn judge(
    line: &EvalLine,
    spec: &CompiledSpec,
    outcome: &RunOutcome,
    events: &[TraceEvent],
) -> (Vec<String>, BTreeMap<String, f64>, RunTotals) {
    let mut expect = line.expect.clone();
    if expect == Expectation::default() {
        expect.outcome = Some(Outcome::Completed);
    }
    let mut unmet = super::expect::unmet(&expect, outcome, &super::expect::calls_per_step(events));
    unmet.extend(
        super::expect::trajectory::unmet(&expect, events, spec)
            .into_iter()
            .map(|unmet| unmet.message),
    );
    let mut totals = RunTotals::default();
    let mut gates = BTreeMap::new();
    for event in events {
        totals.add(spec, event);
        if let EventKind::Gate {
            gate,
            score: Some(score),
            ..
        } = &event.kind
        {
            gates.insert(gate.clone(), *score);
        }
    }
    (unmet, gates, totals)
}

/// `completed{done}`: how a run ended, as the report counts it.
pub fn ending_of(outcome: &RunOutcome) -> String {
    format!("{}{{{}}}", outcome.outcome, outcome.reason)
}

/// The expectation a saved failure keeps: the line's, or "it completes" when it gave none
/// (what a run had to show to pass).
pub fn expectation_to_keep(line: &EvalLine) -> Expectation {
    if line.expect == Expectation::default() {
        Expectation {
            outcome: Some(Outcome::Completed),
            ..Expectation::default()
        }
    } else {
        line.expect.clone()
    }
}
