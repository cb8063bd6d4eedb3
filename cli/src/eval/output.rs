//! What `charter eval` prints and writes: the text report on stdout (a table per input, side by side for several model sets, then the totals, the flaky inputs and why runs failed), `--json`, `--junit` and `--html`, and the exit status the pass rate decides.

use std::fmt::Write as _;
use std::time::Duration;

use charter_runtime::harness::eval::report::{Report, SetReport, Summary};
use charter_runtime::harness::report::{JunitCase, junit_testsuite};
use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};
use charter_runtime::world::files;

use super::runner::Finished;
use super::{EvalArgs, Ready, interval, percent, shown};
use crate::terminal::{Context, Outcome, print_error, print_out};

/// Prints the report on stdout and says whether the eval passed: the pass rate of every
/// model set at least `--min-pass-rate` (1 without it), every input valid, nothing
/// stopped it early.
pub(crate) fn print_report(
    args: &EvalArgs,
    context: Context,
    report: &Report,
    ready: &Ready,
) -> anyhow::Result<Outcome> {
    print_out(&render(report))?;
    let min = args.min_pass_rate.unwrap_or(1.0);
    let mut outcome = Outcome::Clean;
    for set in &report.sets {
        let overall = &set.overall;
        if overall.runs > 0 && overall.pass_rate + 1e-12 < min {
            outcome = Outcome::Failed;
            print_error(
                context,
                &format!(
                    "{}: pass rate {} is below --min-pass-rate {}",
                    set.name,
                    percent(overall.pass_rate),
                    percent(min)
                ),
            );
        }
    }
    if !report.invalid.is_empty() || report.stopped.is_some() || ready.lines.is_empty() {
        outcome = Outcome::Failed;
    }
    Ok(outcome)
}

/// The report as text.
pub(crate) fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "eval of {}: {} of {} run{} ({} per input and model set)",
        report.spec,
        report.ran,
        report.planned,
        if report.planned == 1 { "" } else { "s" },
        report.repeat
    );
    if let Some(stopped) = &report.stopped {
        let _ = writeln!(out, "stopped early: {stopped}");
    }
    out.push('\n');
    if report.sets.len() == 1 {
        inputs_table(&mut out, &report.sets[0]);
    } else {
        side_by_side(&mut out, report);
    }
    for set in &report.sets {
        set_details(&mut out, set, report.sets.len() > 1);
    }
    for invalid in &report.invalid {
        let _ = writeln!(
            out,
            "not run: line {} breaks the request contract: {}",
            invalid.line,
            one_line(&invalid.message, MAX_LINE_CHARS)
        );
    }
    out
}

fn inputs_table(out: &mut String, set: &SetReport) {
    let _ = writeln!(
        out,
        "{:<28} {:>5} {:>5} {:>7}  {:<17} {:>6} {:>9}  outcomes",
        "input", "runs", "pass", "rate", "95% interval", "calls", "cost"
    );
    for input in &set.inputs {
        let label = match &input.name {
            Some(name) => format!("line {} ({name})", input.line),
            None => format!("line {}", input.line),
        };
        row(out, &one_line(&label, 28), &input.summary);
    }
    row(out, "overall", &set.overall);
}

fn row(out: &mut String, label: &str, summary: &Summary) {
    let _ = writeln!(
        out,
        "{label:<28} {:>5} {:>5} {:>7}  {:<17} {:>6} {:>9}  {}",
        summary.runs,
        summary.passed,
        percent(summary.pass_rate),
        interval(summary),
        summary.calls,
        format!("${:.4}", summary.cost),
        outcomes(summary)
    );
}

/// One row per input, a column per model set: its pass rate and interval.
fn side_by_side(out: &mut String, report: &Report) {
    let _ = write!(out, "{:<28}", "input");
    for set in &report.sets {
        let _ = write!(out, " {:<28}", one_line(&set.name, 28));
    }
    out.push('\n');
    let cell = |summary: &Summary| {
        format!(
            "{}/{} {} {}",
            summary.passed,
            summary.runs,
            percent(summary.pass_rate),
            interval(summary)
        )
    };
    if let Some(first) = report.sets.first() {
        for (index, input) in first.inputs.iter().enumerate() {
            let _ = write!(out, "{:<28}", format!("line {}", input.line));
            for set in &report.sets {
                if let Some(input) = set.inputs.get(index) {
                    let _ = write!(out, " {:<28}", cell(&input.summary));
                }
            }
            out.push('\n');
        }
    }
    let _ = write!(out, "{:<28}", "overall");
    for set in &report.sets {
        let _ = write!(out, " {:<28}", cell(&set.overall));
    }
    out.push('\n');
}

/// A set's totals, gate scores, latency, flaky inputs and why its runs failed.
fn set_details(out: &mut String, set: &SetReport, named: bool) {
    out.push('\n');
    if named {
        let _ = writeln!(out, "{}:", set.name);
    }
    let overall = &set.overall;
    let _ = writeln!(
        out,
        "pass rate {} (95% interval {}), {} of {} runs",
        percent(overall.pass_rate),
        interval(overall),
        overall.passed,
        overall.runs
    );
    let _ = writeln!(
        out,
        "calls {}, tokens {} in / {} out, cost ${:.4}{}",
        overall.calls,
        overall.input_tokens,
        overall.output_tokens,
        overall.cost,
        if overall.unpriced {
            " (at least: some models have no price)"
        } else {
            ""
        }
    );
    if let Some(latency) = overall.latency_ms {
        let _ = writeln!(
            out,
            "latency per run: p50 {} ms, p95 {} ms",
            latency.p50, latency.p95
        );
    }
    for (gate, figures) in &overall.gates {
        let _ = writeln!(
            out,
            "gate {gate}: score mean {:.2}, min {:.2} ({} runs)",
            figures.mean, figures.min, figures.runs
        );
    }
    if !set.flaky.is_empty() {
        let lines: Vec<String> = set
            .flaky
            .iter()
            .map(|line| format!("line {line}"))
            .collect();
        let _ = writeln!(
            out,
            "flaky (some runs pass, some fail): {}",
            lines.join(", ")
        );
    }
    let failing: Vec<_> = set
        .inputs
        .iter()
        .filter(|input| !input.failures.is_empty())
        .collect();
    if !failing.is_empty() {
        let _ = writeln!(out, "why runs failed:");
        for input in failing {
            for failure in &input.failures {
                let _ = writeln!(
                    out,
                    "  line {}: {} ({} run{})",
                    input.line,
                    one_line(&failure.unmet, MAX_LINE_CHARS),
                    failure.runs,
                    if failure.runs == 1 { "" } else { "s" }
                );
            }
        }
    }
}

fn outcomes(summary: &Summary) -> String {
    summary
        .outcomes
        .iter()
        .map(|(ending, count)| format!("{ending} {count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The speed line on stderr: how many runs in how long.
pub(crate) fn speed_line(finished: &Finished) -> String {
    let seconds = finished.elapsed.as_secs_f64().max(1e-6);
    format!(
        "{} runs in {:.2} s ({:.0} runs/s)\n",
        finished.results.len(),
        seconds,
        finished.results.len() as f64 / seconds
    )
}

/// Writes `--json`, `--junit` and `--html`, each atomically; one that cannot be written
/// is a usage error (said on stderr), the others are still written.
pub(crate) fn write_files(
    args: &EvalArgs,
    context: Context,
    report: &Report,
    finished: &Finished,
) -> Result<(), Outcome> {
    let mut wanted: Vec<(&std::path::Path, Result<String, String>)> = Vec::new();
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(report)
            .map(|text| format!("{text}\n"))
            .map_err(|error| error.to_string());
        wanted.push((path, text));
    }
    if let Some(path) = &args.junit {
        wanted.push((path, Ok(junit(report, finished))));
    }
    if let Some(path) = &args.html {
        wanted.push((path, Ok(super::html::page(report))));
    }
    let mut result = Ok(());
    for (path, text) in wanted {
        let written = text.and_then(|text| {
            files::write_atomically(path, text.as_bytes()).map_err(|error| error.to_string())
        });
        if let Err(error) = written {
            print_error(context, &format!("cannot write `{}`: {error}", shown(path)));
            result = Err(Outcome::Usage);
        }
    }
    result
}

/// The runs as JUnit XML: a suite per model set, a test case per run (`line 3 #2`).
fn junit(report: &Report, finished: &Finished) -> String {
    let mut runs: Vec<_> = finished.results.iter().collect();
    runs.sort_by_key(|run| (run.set, run.line, run.repeat));
    let mut suites = String::new();
    for (index, set) in report.sets.iter().enumerate() {
        let cases: Vec<JunitCase> = runs
            .iter()
            .filter(|run| run.set == index)
            .map(|run| JunitCase {
                classname: format!("eval.{}", report.spec),
                name: format!("line {} #{}", run.line, run.repeat),
                time: Duration::from_millis(run.latency_ms.unwrap_or(0)),
                failure: (!run.passed).then(|| (run.unmet.join("; "), run.unmet.join("\n"))),
                error: None,
            })
            .collect();
        suites.push_str(&junit_testsuite(
            &format!("eval {}: {}", report.spec, set.name),
            &cases,
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"eval {}\">\n{suites}</testsuites>\n",
        charter_runtime::harness::report::xml_escape(&report.spec)
    )
}
