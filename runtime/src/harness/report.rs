//! Presenting harness results: the summary table, the details of each failure (with its diff), JUnit XML and GitHub Actions annotations. Pure functions returning text; only the binaries print.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Problem, ProblemKind, ScenarioReport, Status};

/// The table of results: spec, scenario, outcome, reason, events, result.
pub fn table(reports: &[ScenarioReport]) -> String {
    let headers = ["spec", "scenario", "outcome", "reason", "events", "result"];
    let rows: Vec<[String; 6]> = reports
        .iter()
        .map(|report| {
            [
                report.spec.clone(),
                report.scenario.clone(),
                report
                    .outcome
                    .map_or_else(|| "-".to_string(), |outcome| outcome.to_string()),
                report
                    .reason
                    .as_ref()
                    .map_or_else(|| "-".to_string(), ToString::to_string),
                report.events.to_string(),
                report.status.label().to_string(),
            ]
        })
        .collect();
    let mut widths = headers.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; 6]| {
        let mut text = String::new();
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if index == 4 {
                let _ = write!(text, "{cell:>width$}  ");
            } else {
                let _ = write!(text, "{cell:<width$}  ");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(headers);
    let rule = widths.map(|width| "-".repeat(width));
    line([
        rule[0].as_str(),
        rule[1].as_str(),
        rule[2].as_str(),
        rule[3].as_str(),
        rule[4].as_str(),
        rule[5].as_str(),
    ]);
    for row in &rows {
        line([
            row[0].as_str(),
            row[1].as_str(),
            row[2].as_str(),
            row[3].as_str(),
            row[4].as_str(),
            row[5].as_str(),
        ]);
    }
    out
}

/// One line: `42 scenarios: 40 passed, 1 changed, 1 stale`.
pub fn summary(reports: &[ScenarioReport]) -> String {
    let mut counts: Vec<(Status, usize)> = Vec::new();
    for report in reports {
        let status = match report.status {
            Status::ExpectedStale => Status::Pass,
            other => other,
        };
        match counts.iter_mut().find(|(seen, _)| *seen == status) {
            Some((_, count)) => *count += 1,
            None => counts.push((status, 1)),
        }
    }
    counts.sort();
    counts.reverse();
    let parts: Vec<String> = counts
        .iter()
        .map(|(status, count)| {
            let word = match status {
                Status::Pass | Status::ExpectedStale => "passed",
                Status::Accepted => "accepted",
                Status::Unpinned => "unpinned (passed)",
                Status::Failed => "failed",
                Status::Changed => "changed",
                Status::New => "new",
                Status::Stale => "stale",
                Status::Error if *count == 1 => "error",
                Status::Error => "errors",
            };
            format!("{count} {word}")
        })
        .collect();
    let noun = if reports.len() == 1 {
        "scenario"
    } else {
        "scenarios"
    };
    if parts.is_empty() {
        format!("0 {noun}")
    } else {
        format!("{} {noun}: {}", reports.len(), parts.join(", "))
    }
}

/// Every problem of every scenario that did not pass, with its diff, and what `accept` wrote.
pub fn details(reports: &[ScenarioReport]) -> String {
    let mut out = String::new();
    for report in reports {
        for accepted in &report.accepted {
            let _ = writeln!(out, "{}: {accepted}", report.id());
        }
        for note in &report.notes {
            let _ = writeln!(
                out,
                "\nnote {} (expected): {}\n  --> {}",
                report.id(),
                note.message,
                location_text(note)
            );
            if let Some(detail) = &note.detail {
                out.push_str(detail);
            }
        }
        for problem in &report.problems {
            let _ = writeln!(
                out,
                "\n{} {}: {}",
                kind_label(problem.kind),
                report.id(),
                problem.message
            );
            let _ = writeln!(out, "  --> {}", location_text(problem));
            if let Some(detail) = &problem.detail {
                out.push_str(detail);
                if !detail.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
    }
    out
}

/// `text` (details: headings, field-level event diffs, unified diffs) with ANSI colours for
/// a terminal: removed lines and old values red, added lines and new values green, event
/// headers and hunk headers cyan, problem headings bold red. Pure: the caller decides
/// whether colour is wanted (`--color`, NO_COLOR, a terminal).
pub fn colorize(text: &str) -> String {
    const RED: &str = "\u{1b}[31m";
    const GREEN: &str = "\u{1b}[32m";
    const CYAN: &str = "\u{1b}[36m";
    const BOLD_RED: &str = "\u{1b}[1;31m";
    const BOLD: &str = "\u{1b}[1m";
    const RESET: &str = "\u{1b}[0m";
    let headings = [
        "ERROR ",
        "STALE ",
        "CHANGED ",
        "NEW ",
        "FAIL ",
        "UNUSED ",
        "NONDETERMINISTIC ",
    ];
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let coloured = if headings.iter().any(|heading| body.starts_with(heading)) {
            format!("{BOLD_RED}{body}{RESET}")
        } else if body.starts_with("---") || body.starts_with("+++") {
            format!("{BOLD}{body}{RESET}")
        } else if body.starts_with("@@") || body.starts_with("~ ") {
            format!("{CYAN}{body}{RESET}")
        } else if body.starts_with('-') {
            format!("{RED}{body}{RESET}")
        } else if body.starts_with('+') {
            format!("{GREEN}{body}{RESET}")
        } else if let Some(field) = body.strip_prefix("    ")
            && let Some((path, values)) = field.split_once(": ")
            && let Some((old, new)) = values.split_once(" -> ")
            && !path.contains(' ')
        {
            format!("    {path}: {RED}{old}{RESET} -> {GREEN}{new}{RESET}")
        } else {
            body.to_string()
        };
        out.push_str(&coloured);
        out.push_str(end);
    }
    out
}

fn kind_label(kind: ProblemKind) -> &'static str {
    match kind {
        ProblemKind::Error => "ERROR",
        ProblemKind::Stale => "STALE",
        ProblemKind::Changed => "CHANGED",
        ProblemKind::NewSnapshot => "NEW",
        ProblemKind::Expect => "FAIL",
        ProblemKind::Unused => "UNUSED",
        ProblemKind::Nondeterministic => "NONDETERMINISTIC",
    }
}

/// The status a problem of `kind` gives a scenario.
fn status_of_kind(kind: ProblemKind) -> Status {
    match kind {
        ProblemKind::Error => Status::Error,
        ProblemKind::Stale => Status::Stale,
        ProblemKind::Changed => Status::Changed,
        ProblemKind::NewSnapshot => Status::New,
        ProblemKind::Expect | ProblemKind::Unused | ProblemKind::Nondeterministic => Status::Failed,
    }
}

fn location_text(problem: &Problem) -> String {
    match problem.location.line {
        Some(line) => format!("{}:{line}", problem.location.file),
        None => problem.location.file.clone(),
    }
}

/// One test case of a JUnit report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JunitCase {
    pub classname: String,
    pub name: String,
    pub time: Duration,
    /// `(message, text)` of a failure.
    pub failure: Option<(String, String)>,
    /// `(message, text)` of an error (the case could not run).
    pub error: Option<(String, String)>,
}

/// A scenario as a JUnit test case (class `golden.<spec>`, name `<scenario>`).
pub fn junit_case(report: &ScenarioReport) -> JunitCase {
    let text = {
        let mut text = String::new();
        for problem in &report.problems {
            let _ = writeln!(text, "{} ({})", problem.message, location_text(problem));
            if let Some(detail) = &problem.detail {
                text.push_str(detail);
                text.push('\n');
            }
        }
        text
    };
    // The message names the failure that decided the status (an `expect` miss is not
    // called stale because the cassette is stale too), with its kind.
    let deciding = report
        .problems
        .iter()
        .find(|problem| status_of_kind(problem.kind) == report.status)
        .or(report.problems.first());
    let message = deciding
        .map(|problem| {
            let others = report.problems.len() - 1;
            format!(
                "{}: {}{}",
                kind_label(problem.kind),
                problem.message,
                if others > 0 {
                    format!(" (and {others} more)")
                } else {
                    String::new()
                }
            )
        })
        .unwrap_or_default();
    let (failure, error) = match report.status {
        Status::Pass | Status::ExpectedStale | Status::Accepted | Status::Unpinned => (None, None),
        Status::Error => (None, Some((message, text))),
        _ => (Some((message, text)), None),
    };
    JunitCase {
        classname: format!("golden.{}", report.spec),
        name: report.scenario.clone(),
        time: report.elapsed,
        failure,
        error,
    }
}

/// A JUnit XML document with one test suite named `suite`.
pub fn junit_xml(suite: &str, cases: &[JunitCase]) -> String {
    let failures = cases.iter().filter(|case| case.failure.is_some()).count();
    let errors = cases.iter().filter(|case| case.error.is_some()).count();
    let total: Duration = cases.iter().map(|case| case.time).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{:.3}\">",
        xml_escape(suite),
        cases.len(),
        total.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{:.3}\">",
        xml_escape(suite),
        cases.len(),
        total.as_secs_f64()
    );
    out.push_str(&junit_testcases(cases));
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// One `<testsuite>` element (indented two spaces) with `cases`, to put into a larger
/// JUnit document.
pub fn junit_testsuite(name: &str, cases: &[JunitCase]) -> String {
    let failures = cases.iter().filter(|case| case.failure.is_some()).count();
    let errors = cases.iter().filter(|case| case.error.is_some()).count();
    let total: Duration = cases.iter().map(|case| case.time).sum();
    let mut out = format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{:.3}\">\n",
        xml_escape(name),
        cases.len(),
        total.as_secs_f64()
    );
    out.push_str(&junit_testcases(cases));
    out.push_str("  </testsuite>\n");
    out
}

fn junit_testcases(cases: &[JunitCase]) -> String {
    let mut out = String::new();
    for case in cases {
        let _ = write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml_escape(&case.classname),
            xml_escape(&case.name),
            case.time.as_secs_f64()
        );
        let mut body = String::new();
        for (tag, entry) in [("failure", &case.failure), ("error", &case.error)] {
            if let Some((message, text)) = entry {
                let _ = writeln!(
                    body,
                    "      <{tag} message=\"{}\">{}</{tag}>",
                    xml_escape(message),
                    xml_escape(text)
                );
            }
        }
        if body.is_empty() {
            out.push_str("/>\n");
        } else {
            out.push_str(">\n");
            out.push_str(&body);
            out.push_str("    </testcase>\n");
        }
    }
    out
}

/// Escapes text for XML attributes and content; characters XML 1.0 cannot hold
/// (control characters other than tab and line breaks) become `?`.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// GitHub Actions workflow commands, one `::error file=...,line=...,title=...::message`
/// per problem of a scenario that did not pass.
pub fn github_annotations(reports: &[ScenarioReport]) -> Vec<String> {
    let mut lines = Vec::new();
    for report in reports.iter().filter(|report| !report.status.passed()) {
        for problem in &report.problems {
            lines.push(github_error(
                &problem.location.file,
                problem.location.line,
                &format!("{} {}", kind_label(problem.kind), report.id()),
                &problem.message,
            ));
        }
    }
    lines
}

/// One `::error` workflow command, escaped as GitHub requires.
pub fn github_error(file: &str, line: Option<u64>, title: &str, message: &str) -> String {
    let mut properties = format!("file={}", github_property(file));
    if let Some(line) = line {
        let _ = write!(properties, ",line={line}");
    }
    let _ = write!(properties, ",title={}", github_property(title));
    format!("::error {properties}::{}", github_data(message))
}

fn github_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn github_property(text: &str) -> String {
    github_data(text).replace(':', "%3A").replace(',', "%2C")
}
