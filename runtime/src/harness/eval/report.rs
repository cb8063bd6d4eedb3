//! An eval's report, built from its judged runs: per model set, overall and per input, the pass rate with its 95% Wilson interval, how the runs ended, gate scores, calls, tokens, cost and latency, the flaky inputs and the reasons runs failed.
//!
//! The report depends only on which runs ended how, never on the order they finished in:
//! every figure is a count, or a sum or mean over values sorted first, so an eval against
//! a seeded mock gives the same report byte for byte whatever the concurrency (latency,
//! the one figure that cannot repeat, is left out when timings are not kept).

use std::collections::BTreeMap;

use serde::Serialize;

use super::stats::{percentile, wilson_interval};
use super::{EvalLine, RunResult};

/// The whole report: what `--json` writes and every other output prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The spec's name.
    pub spec: String,
    /// Runs per input and model set (`--repeat`).
    pub repeat: usize,
    /// Runs planned (valid inputs × repeat × model sets) and runs that ran.
    pub planned: u64,
    pub ran: u64,
    /// Why the eval stopped before every planned run ran (the cost cap, an interrupt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Inputs that were not run (they break the request contract), with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<Invalid>,
    pub sets: Vec<SetReport>,
}

/// An input that was not run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Invalid {
    pub line: usize,
    pub message: String,
}

/// A model set's results (a spec run with one set of `--model` overrides).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SetReport {
    pub name: String,
    /// The overrides of the set, alias to `PROVIDER:MODEL` (the spec's own models for the
    /// others).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, String>,
    pub overall: Summary,
    pub inputs: Vec<InputReport>,
    /// The lines of the inputs whose runs disagree: some passed, some failed.
    pub flaky: Vec<usize>,
}

/// One input's results on one model set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputReport {
    pub line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub summary: Summary,
    /// Why runs failed: each unmet expectation with how many runs missed it, most first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<Failure>,
}

/// An unmet expectation and how many runs missed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub unmet: String,
    pub runs: u64,
}

/// The figures of a group of runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub runs: u64,
    pub passed: u64,
    /// `passed / runs` (0 with no runs).
    pub pass_rate: f64,
    /// The 95% Wilson score interval of the pass rate, `[low, high]`.
    pub interval: [f64; 2],
    /// How the runs ended (`completed{done}` → count).
    pub outcomes: BTreeMap<String, u64>,
    /// Each gate's score at its last evaluation, over the runs that evaluated it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub gates: BTreeMap<String, GateFigures>,
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// USD at the models' prices.
    pub cost: f64,
    /// Some call was made on a model without a price: `cost` is a floor.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unpriced: bool,
    /// Wall time per run, when timings are kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<Latency>,
}

/// A gate's scores over runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateFigures {
    pub mean: f64,
    pub min: f64,
    /// Runs that evaluated the gate.
    pub runs: u64,
}

/// Run latency percentiles, in milliseconds (nearest rank).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Latency {
    pub p50: u64,
    pub p95: u64,
}

/// What the report is built from besides the runs.
#[derive(Clone, Debug)]
pub struct Plan<'a> {
    pub spec: &'a str,
    pub repeat: usize,
    /// The valid inputs, in file order.
    pub lines: &'a [EvalLine],
    pub invalid: Vec<Invalid>,
    /// Each model set's name and overrides, in order.
    pub sets: &'a [(String, BTreeMap<String, String>)],
    pub stopped: Option<String>,
}

/// The report of `runs` (in any order) made for `plan`.
pub fn build(plan: Plan<'_>, runs: &[RunResult]) -> Report {
    let sets = plan
        .sets
        .iter()
        .enumerate()
        .map(|(index, (name, models))| {
            let of_set: Vec<&RunResult> = runs.iter().filter(|run| run.set == index).collect();
            set_report(name, models, plan.lines, &of_set)
        })
        .collect();
    Report {
        spec: plan.spec.to_string(),
        repeat: plan.repeat,
        planned: (plan.lines.len() * plan.repeat * plan.sets.len()) as u64,
        ran: runs.len() as u64,
        stopped: plan.stopped,
        invalid: plan.invalid,
        sets,
    }
}

fn set_report(
    name: &str,
    models: &BTreeMap<String, String>,
    lines: &[EvalLine],
    runs: &[&RunResult],
) -> SetReport {
    let inputs: Vec<InputReport> = lines
        .iter()
        .map(|line| {
            let of_line: Vec<&RunResult> = runs
                .iter()
                .copied()
                .filter(|run| run.line == line.line)
                .collect();
            InputReport {
                line: line.line,
                name: line.name.clone(),
                summary: summary(&of_line),
                failures: failures(&of_line),
            }
        })
        .collect();
    let flaky = inputs
        .iter()
        .filter(|input| input.summary.passed > 0 && input.summary.passed < input.summary.runs)
        .map(|input| input.line)
        .collect();
    SetReport {
        name: name.to_string(),
        models: models.clone(),
        overall: summary(runs),
        inputs,
        flaky,
    }
}

/// The figures of `runs`.
pub fn summary(runs: &[&RunResult]) -> Summary {
    let count = runs.len() as u64;
    let passed = runs.iter().filter(|run| run.passed).count() as u64;
    let (low, high) = wilson_interval(passed, count);
    let mut outcomes = BTreeMap::new();
    for run in runs {
        *outcomes.entry(run.ending.clone()).or_insert(0) += 1;
    }
    let mut costs: Vec<f64> = runs.iter().map(|run| run.totals.cost).collect();
    Summary {
        runs: count,
        passed,
        pass_rate: if count == 0 {
            0.0
        } else {
            passed as f64 / count as f64
        },
        interval: [low, high],
        outcomes,
        gates: gate_figures(runs),
        calls: runs.iter().map(|run| run.totals.calls).sum(),
        input_tokens: runs.iter().map(|run| run.totals.input_tokens).sum(),
        output_tokens: runs.iter().map(|run| run.totals.output_tokens).sum(),
        cost: sorted_sum(&mut costs),
        unpriced: runs.iter().any(|run| run.totals.unpriced),
        latency_ms: latency(runs),
    }
}

/// Each gate's mean and least score over the runs that evaluated it.
fn gate_figures(runs: &[&RunResult]) -> BTreeMap<String, GateFigures> {
    let mut scores: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for run in runs {
        for (gate, score) in &run.gates {
            scores.entry(gate).or_default().push(*score);
        }
    }
    scores
        .into_iter()
        .map(|(gate, mut scores)| {
            let count = scores.len();
            let total = sorted_sum(&mut scores);
            let figures = GateFigures {
                mean: total / count as f64,
                min: scores.first().copied().unwrap_or(0.0),
                runs: count as u64,
            };
            (gate.to_string(), figures)
        })
        .collect()
}

/// The sum of `values` added smallest first, so the same values in any order give the
/// same sum to the last bit; `values` is left sorted.
fn sorted_sum(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.iter().sum()
}

/// The runs' latency percentiles, if every run kept its timing.
fn latency(runs: &[&RunResult]) -> Option<Latency> {
    let mut times: Vec<u64> = runs
        .iter()
        .map(|run| run.latency_ms)
        .collect::<Option<_>>()?;
    times.sort_unstable();
    Some(Latency {
        p50: percentile(&times, 50)?,
        p95: percentile(&times, 95)?,
    })
}

/// Each unmet expectation of the failed runs with how many missed it, most first (then
/// alphabetically).
fn failures(runs: &[&RunResult]) -> Vec<Failure> {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for run in runs.iter().filter(|run| !run.passed) {
        for unmet in &run.unmet {
            *counts.entry(unmet).or_insert(0) += 1;
        }
    }
    let mut failures: Vec<Failure> = counts
        .into_iter()
        .map(|(unmet, runs)| Failure {
            unmet: unmet.to_string(),
            runs,
        })
        .collect();
    failures.sort_by(|a, b| b.runs.cmp(&a.runs).then_with(|| a.unmet.cmp(&b.unmet)));
    failures
}
