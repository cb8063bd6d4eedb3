//! `charter verify --format json`: the run as one JSON document on stdout, schema version 1 (described in `docs/verify-json.md`).
//!
//! The document holds what the human report shows (each spec's result and warnings, each
//! scenario's status and problems with their diffs, the counts) and nothing that changes
//! from one run to the next (no times), so it is the same for every `-j N`.

use charter_runtime::harness::report::summary;
use charter_runtime::harness::{Problem, ProblemKind, ScenarioReport, SpecWarnings, Status};
use serde_json::{Value, json};

use super::{SpecChecked, SpecsChecked, VerifyArgs};

/// The version of the document's schema: raised when a field changes meaning or goes away
/// (adding a field does not raise it).
pub const SCHEMA_VERSION: u64 = 1;

/// What the document describes.
pub struct Run<'a> {
    pub args: &'a VerifyArgs,
    pub specs: &'a SpecsChecked,
    pub reports: &'a [ScenarioReport],
    /// Scenarios `--fail-fast` left unrun.
    pub not_run: usize,
    /// The run passed (exit status 0).
    pub passed: bool,
}

/// The document, pretty-printed.
pub fn document(run: &Run<'_>) -> String {
    let deny = run.args.deny_warnings;
    let document = json!({
        "version": SCHEMA_VERSION,
        "passed": run.passed,
        "filter": run.args.filter,
        "partition": run.args.partition.map(|partition| partition.to_string()),
        "deny_warnings": deny,
        "fail_fast": run.args.fail_fast,
        "specs": run.specs.specs.iter().map(|spec| spec_value(spec, deny)).collect::<Vec<_>>(),
        "scenarios": run.reports.iter().map(scenario_value).collect::<Vec<_>>(),
        "summary": summary_value(run),
    });
    pretty(&document)
}

/// `--list --format json`: `{"version": 1, "specs": [...], "scenarios": [...]}`.
pub fn listing(specs: &[String], scenarios: &[String]) -> String {
    pretty(&json!({
        "version": SCHEMA_VERSION,
        "specs": specs,
        "scenarios": scenarios,
    }))
}

fn pretty(value: &Value) -> String {
    // A `Value` always serializes; the fallback keeps the output a JSON document anyway.
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// A spec: its path, `ok` / `warnings` / `error`, whether it passed, the problem of its
/// errors and its warnings (as `charter check --format json` writes diagnostics).
fn spec_value(spec: &SpecChecked, deny: bool) -> Value {
    let (status, passed, problem, warnings) = match &spec.result {
        Err(problem) => ("error", false, problem_value(problem), Vec::new()),
        Ok(warnings) if warnings.diagnostics.is_empty() => ("ok", true, Value::Null, Vec::new()),
        Ok(warnings) => ("warnings", !deny, Value::Null, diagnostics(warnings)),
    };
    json!({
        "path": spec.path,
        "status": status,
        "passed": passed,
        "problem": problem,
        "warnings": warnings,
    })
}

/// The warnings as the compiler's JSON renderer writes them, one object each.
fn diagnostics(warnings: &SpecWarnings) -> Vec<Value> {
    charter_compiler::render::json(&warnings.diagnostics, &warnings.sources)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn scenario_value(report: &ScenarioReport) -> Value {
    json!({
        "id": report.id(),
        "spec": report.spec,
        "scenario": report.scenario,
        "description": report.description,
        "status": status_name(report.status),
        "passed": report.status.passed(),
        "outcome": report.outcome.map(|outcome| outcome.to_string()),
        "reason": report.reason.as_ref().map(ToString::to_string),
        "events": report.events,
        "problems": report.problems.iter().map(problem_value).collect::<Vec<_>>(),
        "notes": report.notes.iter().map(problem_value).collect::<Vec<_>>(),
        "accepted": report.accepted,
    })
}

fn problem_value(problem: &Problem) -> Value {
    json!({
        "kind": kind_name(problem.kind),
        "message": problem.message,
        "file": problem.location.file,
        "line": problem.location.line,
        "detail": problem.detail,
    })
}

/// The counts: specs (with errors, with warnings, warnings in all), scenarios run, passed
/// and not, each status, and those `--fail-fast` left unrun.
fn summary_value(run: &Run<'_>) -> Value {
    let statuses = [
        Status::Pass,
        Status::Unpinned,
        Status::Accepted,
        Status::ExpectedStale,
        Status::Failed,
        Status::Changed,
        Status::New,
        Status::Stale,
        Status::Error,
    ];
    let by_status: serde_json::Map<String, Value> = statuses
        .iter()
        .map(|status| {
            let count = run
                .reports
                .iter()
                .filter(|report| report.status == *status)
                .count();
            (status_name(*status).to_string(), json!(count))
        })
        .collect();
    let passed = run
        .reports
        .iter()
        .filter(|report| report.status.passed())
        .count();
    let warnings: usize = run
        .specs
        .specs
        .iter()
        .filter_map(SpecChecked::warnings)
        .map(<[_]>::len)
        .sum();
    json!({
        "specs": run.specs.count(),
        "specs_with_errors": run.specs.with_errors(),
        "specs_with_warnings": run.specs.with_warnings(),
        "warnings": warnings,
        "scenarios": run.reports.len(),
        "passed": passed,
        "failed": run.reports.len() - passed,
        "not_run": run.not_run,
        "by_status": by_status,
        "text": summary(run.reports),
    })
}

/// A status as the document names it.
fn status_name(status: Status) -> &'static str {
    match status {
        Status::Error => "error",
        Status::Stale => "stale",
        Status::Changed => "changed",
        Status::New => "new",
        Status::Failed => "failed",
        Status::Accepted => "accepted",
        Status::ExpectedStale => "expected_stale",
        Status::Unpinned => "unpinned",
        Status::Pass => "pass",
    }
}

/// A problem's kind as the document names it.
fn kind_name(kind: ProblemKind) -> &'static str {
    match kind {
        ProblemKind::Error => "error",
        ProblemKind::Stale => "stale",
        ProblemKind::Changed => "changed",
        ProblemKind::NewSnapshot => "new_snapshot",
        ProblemKind::Expect => "expect",
        ProblemKind::Unused => "unused",
        ProblemKind::Nondeterministic => "nondeterministic",
    }
}
