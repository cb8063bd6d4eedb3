//! `cargo xtask verify`: the single gate CI runs, stage by stage, each with a PASS/FAIL line.
//!
//! The stages, in order: `fmt`, `clippy` (`-D warnings`), `test`, `layers` (the
//! architecture check, `layers.rs`), `editors` (`editors.rs`), `spec-fmt` (`charter fmt
//! --check specs`, through `cargo run`), `specs` and `invalid` (the corpus compiled
//! in-process), `golden` and `determinism` (through the runtime's harness, the comparison
//! `cargo test` and `charter verify` use), and `explore` (every seed's base golden explored
//! for fault variants that break a property, `explore.rs`), with a summary table at the
//! end. A failing stage does not stop the later ones; `--skip-cargo` skips `fmt`,
//! `clippy`, `test`, `layers`, `editors` and `spec-fmt`. `.ci/run` is the CI entry point
//! that installs what the stages need and runs this.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use charter_compiler::{Compilation, render};
use charter_runtime::harness::report as golden_report;
use charter_runtime::harness::{self, HarnessConfig, ProblemKind, ScenarioReport};

use crate::corpus::{FsLoader, display_path, find_specs};
use crate::measure::format_duration;

/// What to verify.
#[derive(Clone, Debug, Default)]
pub struct VerifyConfig {
    /// Only specs whose path (relative to the workspace root) contains this.
    pub filter: Option<String>,
    /// Skip formatting, clippy and tests (the cargo stages) for fast iteration on specs.
    pub skip_cargo: bool,
    /// Only this shard of the specs (and, later, scenarios): for CI spread over machines.
    pub partition: Option<Partition>,
    /// Update snapshots instead of failing on a difference (`INSTA_UPDATE=always` for the
    /// test stage).
    pub accept: bool,
    /// Also write the results as a JUnit XML report here.
    pub junit: Option<PathBuf>,
    /// Also print GitHub Actions `::error` annotations for every failure.
    pub github: bool,
}

/// Shard K of N (`count:K/N`, the default, round-robin; or `hash:K/N`): the runtime's
/// partition, so `cargo xtask verify` and `charter verify` split the same way.
pub use charter_runtime::harness::Partition;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Pass,
    Fail,
    Skip,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "SKIP",
        }
    }
}

#[derive(Debug)]
struct StageResult {
    name: &'static str,
    verdict: Verdict,
    time: Duration,
    note: String,
}

#[derive(Debug)]
struct SpecResult {
    spec: String,
    /// What the spec must do: "clean" or "at least one error".
    expect: &'static str,
    errors: usize,
    warnings: usize,
    verdict: Verdict,
    /// The line of the first error, for annotations.
    line: Option<usize>,
}

/// Runs every stage (a failing stage does not stop the later ones, so one CI run shows
/// every problem) and prints the summary. Returns whether everything passed.
pub fn verify(root: &Path, config: &VerifyConfig) -> bool {
    let started = Instant::now();
    let mut stages = code_stages(root, config);
    stages.push(editors_stage(root, config));
    let mut specs = Vec::new();

    let specs_dir = root.join("specs");
    let all_specs = find_specs(&specs_dir);
    let selected: Vec<(PathBuf, String)> = all_specs
        .into_iter()
        .map(|path| {
            let shown = display_path(&path, root);
            (path, shown)
        })
        .filter(|(_, shown)| {
            config
                .filter
                .as_deref()
                .is_none_or(|pattern| shown.contains(pattern))
        })
        .enumerate()
        .filter(|(position, (_, shown))| {
            config
                .partition
                .is_none_or(|shard| shard.keeps(*position, shown))
        })
        .map(|(_, spec)| spec)
        .collect();
    let (invalid, valid): (Vec<_>, Vec<_>) = selected
        .into_iter()
        .filter(|(path, _)| !in_subdir(path, &specs_dir, "warnings"))
        .partition(|(path, _)| in_subdir(path, &specs_dir, "invalid"));

    stages.push(match config.skip_cargo {
        true => StageResult {
            name: "spec-fmt",
            verdict: Verdict::Skip,
            time: Duration::ZERO,
            note: "--skip-cargo".to_string(),
        },
        false => spec_format_stage(root),
    });
    stages.push(spec_stage("specs", &valid, Expect::Clean, &mut specs));
    stages.push(spec_stage("invalid", &invalid, Expect::Errors, &mut specs));
    let (golden, determinism, scenarios) = golden_stages(root, config);
    stages.push(golden);
    stages.push(determinism);
    stages.push(explore_stage(root, config));

    let total = started.elapsed();
    print_summary(&stages, &specs, &scenarios, total);
    let mut passed = stages.iter().all(|stage| stage.verdict != Verdict::Fail);
    if config.github {
        for spec in specs.iter().filter(|spec| spec.verdict == Verdict::Fail) {
            println!(
                "{}",
                golden_report::github_error(
                    &spec.spec,
                    spec.line.map(|line| line as u64),
                    "spec",
                    &format!(
                        "expected {}, got {} error(s) and {} warning(s)",
                        spec.expect, spec.errors, spec.warnings
                    ),
                )
            );
        }
        for stage in stages.iter().filter(|stage| {
            stage.verdict == Verdict::Fail && matches!(stage.name, "fmt" | "clippy" | "test")
        }) {
            println!("::error title=xtask verify {}::{}", stage.name, stage.note);
        }
        for line in golden_report::github_annotations(&scenarios) {
            println!("{line}");
        }
    }
    if let Some(path) = &config.junit {
        let report = junit_report(&stages, &specs, &scenarios, total);
        match harness::snapshot::write_atomically(path, &report) {
            Ok(()) => println!("wrote the JUnit report to {}", path.display()),
            Err(error) => {
                println!(
                    "FAIL cannot write the JUnit report {}: {error}",
                    path.display()
                );
                passed = false;
            }
        }
    }
    passed
}

/// The stages over the code: fmt, clippy, the tests, then the architecture check (which
/// reads the sources, as clippy does), each skipped with `--skip-cargo`.
fn code_stages(root: &Path, config: &VerifyConfig) -> Vec<StageResult> {
    let cargo_stages: [(&'static str, &[&str]); 3] = [
        ("fmt", &["fmt", "--all", "--", "--check"]),
        (
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        ),
        ("test", &["test", "--workspace"]),
    ];
    let skipped = |name| StageResult {
        name,
        verdict: Verdict::Skip,
        time: Duration::ZERO,
        note: "--skip-cargo".to_string(),
    };
    let mut stages: Vec<StageResult> = cargo_stages
        .into_iter()
        .map(|(name, args)| match config.skip_cargo {
            true => skipped(name),
            false => run_cargo(root, name, args, config.accept),
        })
        .collect();
    stages.push(match config.skip_cargo {
        true => skipped("layers"),
        false => layers_stage(root),
    });
    stages
}

/// The architecture check (`layers.rs`, also `cargo xtask layers`): no file import
/// circle in any crate, the runtime's layers import only downward and its engine does no
/// I/O, and a CLI command is a leaf.
fn layers_stage(root: &Path) -> StageResult {
    println!(
        "==> layers: no file import circle; the runtime's layers import only downward, its engine does no I/O; a CLI command imports no command"
    );
    let started = Instant::now();
    let (verdict, note) = match crate::layers::check_workspace(root) {
        Ok((findings, arrows)) if findings.is_empty() => (
            Verdict::Pass,
            format!("{arrows} paths between files; formats < engine < world < top"),
        ),
        Ok((findings, _)) => {
            for line in crate::layers::grouped(&findings).lines() {
                println!("  {line}");
            }
            (Verdict::Fail, format!("{} finding(s)", findings.len()))
        }
        Err(error) => (Verdict::Fail, error),
    };
    let time = started.elapsed();
    print_stage_line("layers", verdict, time, &note);
    StageResult {
        name: "layers",
        verdict,
        time,
        note,
    }
}

fn in_subdir(path: &Path, specs_dir: &Path, name: &str) -> bool {
    path.strip_prefix(specs_dir)
        .ok()
        .and_then(|relative| relative.components().next())
        .is_some_and(|first| first.as_os_str() == name)
}

/// The cargo to run: the one that runs us (`CARGO`), else `cargo` from `PATH`.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

fn run_cargo(root: &Path, name: &'static str, args: &[&str], accept: bool) -> StageResult {
    println!("==> {name}: cargo {}", args.join(" "));
    let started = Instant::now();
    let mut command = Command::new(cargo());
    command.args(args).current_dir(root);
    if accept {
        // insta writes every new or changed snapshot and lets the assertion pass.
        command
            .env("INSTA_UPDATE", "always")
            .env("INSTA_FORCE_PASS", "1");
    }
    let status = command.status();
    let time = started.elapsed();
    let (verdict, note) = match status {
        Ok(status) if status.success() => (Verdict::Pass, String::new()),
        Ok(status) => (
            Verdict::Fail,
            format!("cargo {} failed ({status})", args.join(" ")),
        ),
        Err(error) => (Verdict::Fail, format!("cannot run {}: {error}", cargo())),
    };
    print_stage_line(name, verdict, time, &note);
    StageResult {
        name,
        verdict,
        time,
        note,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// No error and no warning.
    Clean,
    /// At least one error (the exact diagnostics are snapshot-tested by `cargo test`).
    Errors,
}

fn spec_stage(
    name: &'static str,
    specs: &[(PathBuf, String)],
    expect: Expect,
    results: &mut Vec<SpecResult>,
) -> StageResult {
    match expect {
        Expect::Clean => println!("==> {name}: compile every spec (errors or warnings fail)"),
        Expect::Errors => println!("==> {name}: every compile-fail case gives at least one error"),
    }
    let started = Instant::now();
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut failed = 0;
    for (path, shown) in specs {
        let result = check_spec(path, shown, expect, color);
        if result.verdict == Verdict::Fail {
            failed += 1;
        }
        results.push(result);
    }
    let time = started.elapsed();
    let (verdict, note) = if failed > 0 {
        (Verdict::Fail, format!("{failed} of {} failed", specs.len()))
    } else if specs.is_empty() {
        (Verdict::Pass, "no specs matched".to_string())
    } else {
        (Verdict::Pass, format!("{} spec(s)", specs.len()))
    };
    print_stage_line(name, verdict, time, &note);
    StageResult {
        name,
        verdict,
        time,
        note,
    }
}

fn check_spec(path: &Path, shown: &str, expect: Expect, color: bool) -> SpecResult {
    let expect_label = match expect {
        Expect::Clean => "clean",
        Expect::Errors => "error(s)",
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => {
            println!("  FAIL {shown}: cannot read: {error}");
            return SpecResult {
                spec: shown.to_string(),
                expect: expect_label,
                errors: 0,
                warnings: 0,
                verdict: Verdict::Fail,
                line: None,
            };
        }
    };
    let loader = FsLoader::for_spec(path, shown);
    let compilation = compile_guarded(shown, &text, &loader);
    let line = compilation.as_ref().ok().and_then(|compilation| {
        let span = compilation
            .diagnostics
            .iter()
            .find(|diagnostic| diagnostic.is_error())?
            .primary_span()?;
        Some(compilation.sources.line_column(span.file, span.start).0)
    });
    let (errors, warnings, rendered) = match &compilation {
        Ok(compilation) => {
            let errors = compilation
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .count();
            let warnings = compilation.diagnostics.len() - errors;
            let rendered = render::text(&compilation.diagnostics, &compilation.sources, color);
            (errors, warnings, rendered)
        }
        Err(panic) => (1, 0, format!("the compiler panicked: {panic}\n")),
    };
    let passed = compilation.is_ok()
        && match expect {
            Expect::Clean => errors == 0 && warnings == 0,
            Expect::Errors => errors > 0,
        };
    let verdict = if passed { Verdict::Pass } else { Verdict::Fail };
    println!(
        "  {} {shown} ({errors} error(s), {warnings} warning(s))",
        verdict.label()
    );
    if !passed {
        if expect == Expect::Errors && errors == 0 {
            println!("  expected at least one error, got none");
        }
        print!("{rendered}");
    }
    SpecResult {
        spec: shown.to_string(),
        expect: expect_label,
        errors,
        warnings,
        verdict,
        line,
    }
}

/// Compiles under `catch_unwind`: a panicking compiler is a failed spec, not a dead gate.
fn compile_guarded(name: &str, text: &str, loader: &FsLoader) -> Result<Compilation, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        charter_compiler::compile(name, text, loader)
    }))
    .map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|message| (*message).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_string())
    })
}

/// The golden stages: every scenario in `golden/` replayed through the runtime's harness
/// (outcome, reason, unused recordings, stale recordings, trace snapshot), and each
/// replayed a second time and compared with the first (determinism). One harness pass
/// gives both; the determinism stage reads its own kind of problem from it. One piece:
/// the two stages come from one pass over the reports.
fn golden_stages(
    root: &Path,
    config: &VerifyConfig,
) -> (StageResult, StageResult, Vec<ScenarioReport>) {
    println!("==> golden: replay every scenario in golden/ and compare its trace snapshot");
    let started = Instant::now();
    let harness_config = HarnessConfig {
        accept: config.accept,
        pin: false,
        repin: false,
        filter: config.filter.clone(),
        partition: config.partition,
        pending_snapshots: false,
        determinism: true,
    };
    let reports = match harness::verify_project(root, &harness_config) {
        Ok(reports) => reports,
        Err(error) => {
            let note = error.to_string();
            print_stage_line("golden", Verdict::Fail, started.elapsed(), &note);
            let stage = |name| StageResult {
                name,
                verdict: Verdict::Fail,
                time: Duration::ZERO,
                note: note.clone(),
            };
            return (stage("golden"), stage("determinism"), Vec::new());
        }
    };
    let time = started.elapsed();
    let details = golden_report::details(&reports);
    if !details.is_empty() {
        print!("{details}");
    }
    let nondeterministic = |report: &ScenarioReport| {
        report
            .problems
            .iter()
            .any(|problem| problem.kind == ProblemKind::Nondeterministic)
    };
    let golden_failed = reports
        .iter()
        .filter(|report| {
            report
                .problems
                .iter()
                .any(|problem| problem.kind != ProblemKind::Nondeterministic)
        })
        .count();
    let unstable = reports
        .iter()
        .filter(|report| nondeterministic(report))
        .count();
    let golden_note = if reports.is_empty() {
        match config.partition {
            Some(partition) => {
                format!("shard {partition} is empty: nothing to replay, so it passes")
            }
            None => "no scenarios matched".to_string(),
        }
    } else if golden_failed > 0 {
        format!("{golden_failed} of {} failed", reports.len())
    } else {
        golden_report::summary(&reports)
    };
    let golden_verdict = if golden_failed > 0 {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    print_stage_line("golden", golden_verdict, time, &golden_note);
    let (determinism_verdict, determinism_note) = if unstable > 0 {
        (
            Verdict::Fail,
            format!("{unstable} scenario(s) replayed to another trace"),
        )
    } else {
        (
            Verdict::Pass,
            format!(
                "{} scenario(s) replayed twice, identical traces",
                reports.len()
            ),
        )
    };
    print_stage_line(
        "determinism",
        determinism_verdict,
        Duration::ZERO,
        &determinism_note,
    );
    (
        StageResult {
            name: "golden",
            verdict: golden_verdict,
            time,
            note: golden_note,
        },
        StageResult {
            name: "determinism",
            verdict: determinism_verdict,
            time: Duration::ZERO,
            note: format!("{determinism_note} (timed with golden)"),
        },
        reports,
    )
}

/// The editor support (`crate::editors`): the VS Code extension's grammar tests and
/// package, the tree-sitter grammar's tests and a parse of every spec. Skipped with
/// `--skip-cargo`; a missing tool skips its part, except in CI, where it fails.
fn editors_stage(root: &Path, config: &VerifyConfig) -> StageResult {
    if config.skip_cargo {
        return StageResult {
            name: "editors",
            verdict: Verdict::Skip,
            time: Duration::ZERO,
            note: "--skip-cargo".to_string(),
        };
    }
    println!("==> editors: VS Code grammar tests and .vsix, tree-sitter generate/test/parse");
    let started = Instant::now();
    let outcome = crate::editors::check(root, crate::editors::in_ci());
    let verdict = match outcome.status {
        crate::editors::Status::Passed => Verdict::Pass,
        crate::editors::Status::Failed => Verdict::Fail,
        crate::editors::Status::Skipped => Verdict::Skip,
    };
    let time = started.elapsed();
    print_stage_line("editors", verdict, time, &outcome.note);
    StageResult {
        name: "editors",
        verdict,
        time,
        note: outcome.note,
    }
}

/// `charter fmt --check specs`: every spec of the corpus is in the canonical layout (the
/// binary, built by cargo as for the test stage, run as a user runs it; its diff is
/// printed when a spec is not formatted). Skipped with `--skip-cargo`.
fn spec_format_stage(root: &Path) -> StageResult {
    let mut stage = run_cargo(
        root,
        "spec-fmt",
        &[
            "run", "--quiet", "-p", "charter", "--", "fmt", "--check", "specs",
        ],
        false,
    );
    if stage.verdict == Verdict::Fail {
        stage.note = "a spec is not formatted: run `charter fmt specs`".to_string();
    }
    stage
}

/// Every seed's base golden explored at depth 2 with every fault kind (`crate::explore`):
/// no property may break.
fn explore_stage(root: &Path, config: &VerifyConfig) -> StageResult {
    let started = Instant::now();
    let explored = crate::explore::seed_bases(root, config.filter.as_deref());
    let (verdict, note) = match (explored.passed, explored.scenarios) {
        (true, 0) => (
            Verdict::Skip,
            "no seed base golden in this project (or none matched the filter)".to_string(),
        ),
        (true, _) => (Verdict::Pass, explored.note),
        (false, _) => (Verdict::Fail, explored.note),
    };
    let time = started.elapsed();
    print_stage_line("explore", verdict, time, &note);
    for problem in &explored.problems {
        println!("  {problem}");
    }
    StageResult {
        name: "explore",
        verdict,
        time,
        note,
    }
}

fn print_stage_line(name: &str, verdict: Verdict, time: Duration, note: &str) {
    let note = if note.is_empty() {
        String::new()
    } else {
        format!(" ({note})")
    };
    println!(
        "{} {name} in {}{note}",
        verdict.label(),
        format_duration(time)
    );
}

fn print_summary(
    stages: &[StageResult],
    specs: &[SpecResult],
    scenarios: &[ScenarioReport],
    total: Duration,
) {
    println!();
    println!("{:<11} {:<6} {:>9}  note", "stage", "result", "time");
    for stage in stages {
        println!(
            "{:<11} {:<6} {:>9}  {}",
            stage.name,
            stage.verdict.label(),
            format_duration(stage.time),
            stage.note
        );
    }
    if !specs.is_empty() {
        let width = specs
            .iter()
            .map(|spec| spec.spec.len())
            .max()
            .unwrap_or(4)
            .max(4);
        println!();
        println!(
            "{:<width$} {:<8} {:>6} {:>8}  result",
            "spec", "expect", "errors", "warnings"
        );
        for spec in specs {
            println!(
                "{:<width$} {:<8} {:>6} {:>8}  {}",
                spec.spec,
                spec.expect,
                spec.errors,
                spec.warnings,
                spec.verdict.label()
            );
        }
    }
    if !scenarios.is_empty() {
        println!();
        print!("{}", golden_report::table(scenarios));
        println!("{}", golden_report::summary(scenarios));
    }
    let failed: Vec<&str> = stages
        .iter()
        .filter(|stage| stage.verdict == Verdict::Fail)
        .map(|stage| stage.name)
        .collect();
    println!();
    if failed.is_empty() {
        println!("verify: PASS in {}", format_duration(total));
    } else {
        println!(
            "verify: FAIL in {} (failed: {})",
            format_duration(total),
            failed.join(", ")
        );
    }
}

/// The stages and specs as JUnit XML (one test suite each), which CI systems display.
fn junit_report(
    stages: &[StageResult],
    specs: &[SpecResult],
    scenarios: &[ScenarioReport],
    total: Duration,
) -> String {
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let failures = |verdicts: &mut dyn Iterator<Item = Verdict>| {
        verdicts.filter(|verdict| *verdict == Verdict::Fail).count()
    };
    xml.push_str(&format!(
        "<testsuites name=\"xtask verify\" time=\"{:.3}\">\n",
        total.as_secs_f64()
    ));
    xml.push_str(&format!(
        "  <testsuite name=\"stages\" tests=\"{}\" failures=\"{}\">\n",
        stages.len(),
        failures(&mut stages.iter().map(|stage| stage.verdict))
    ));
    for stage in stages {
        xml.push_str(&format!(
            "    <testcase classname=\"verify\" name=\"{}\" time=\"{:.3}\">",
            escape_xml(stage.name),
            stage.time.as_secs_f64()
        ));
        match stage.verdict {
            Verdict::Pass => {}
            Verdict::Fail => xml.push_str(&format!(
                "<failure message=\"{}\"/>",
                escape_xml(&stage.note)
            )),
            Verdict::Skip => xml.push_str(&format!(
                "<skipped message=\"{}\"/>",
                escape_xml(&stage.note)
            )),
        }
        xml.push_str("</testcase>\n");
    }
    xml.push_str("  </testsuite>\n");
    xml.push_str(&format!(
        "  <testsuite name=\"specs\" tests=\"{}\" failures=\"{}\">\n",
        specs.len(),
        failures(&mut specs.iter().map(|spec| spec.verdict))
    ));
    for spec in specs {
        xml.push_str(&format!(
            "    <testcase classname=\"specs\" name=\"{}\">",
            escape_xml(&spec.spec)
        ));
        if spec.verdict == Verdict::Fail {
            xml.push_str(&format!(
                "<failure message=\"expected {}, got {} error(s) and {} warning(s)\"/>",
                spec.expect, spec.errors, spec.warnings
            ));
        }
        xml.push_str("</testcase>\n");
    }
    xml.push_str("  </testsuite>\n");
    let cases: Vec<_> = scenarios.iter().map(golden_report::junit_case).collect();
    xml.push_str(&golden_report::junit_testsuite("golden", &cases));
    xml.push_str("</testsuites>\n");
    xml
}

fn escape_xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec stages on a scratch corpus: a clean spec passes, a compile-fail case must
    /// give an error, and `--filter` narrows both.
    #[test]
    fn spec_stages_judge_a_scratch_corpus() {
        let root = std::env::temp_dir().join(format!("xtask-verify-{}", std::process::id()));
        let invalid = root.join("specs").join("invalid");
        std::fs::create_dir_all(&invalid).expect("create scratch corpus");
        let clean = crate::generator::generate(crate::generator::GenConfig {
            lines: 100,
            seed: 3,
        })
        .text;
        let write = |path: PathBuf, text: &str| std::fs::write(path, text).expect("write spec");
        write(root.join("specs").join("good.charter"), &clean);
        write(invalid.join("e001_broken.charter"), "spec broken version\n");
        let config = |filter: Option<&str>| VerifyConfig {
            filter: filter.map(str::to_string),
            skip_cargo: true,
            ..VerifyConfig::default()
        };
        assert!(verify(&root, &config(None)));

        // A "compile-fail" case that compiles clean fails the gate, unless filtered out.
        write(invalid.join("e002_not_really.charter"), &clean);
        assert!(!verify(&root, &config(None)));
        assert!(verify(&root, &config(Some("good"))));
        assert!(!verify(&root, &config(Some("not_really"))));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn an_empty_shard_passes_and_says_so() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let config = VerifyConfig {
            partition: Some("count:999/999".parse().expect("valid partition")),
            ..VerifyConfig::default()
        };
        let (golden, determinism, reports) = golden_stages(&root, &config);
        assert!(reports.is_empty());
        assert_eq!(golden.verdict, Verdict::Pass);
        assert_eq!(determinism.verdict, Verdict::Pass);
        assert_eq!(
            golden.note,
            "shard count:999/999 is empty: nothing to replay, so it passes"
        );
    }

    #[test]
    fn partitions_parse_and_split_evenly() {
        let shard: Partition = "2/3".parse().expect("valid partition");
        assert_eq!(shard.to_string(), "count:2/3");
        let kept: Vec<usize> = (0..7)
            .filter(|position| shard.keeps(*position, "any"))
            .collect();
        assert_eq!(kept, vec![1, 4]);
        let hashed: Partition = "hash:2/3".parse().expect("valid partition");
        assert_eq!(hashed.to_string(), "hash:2/3");
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", "round:1/2"] {
            assert!(bad.parse::<Partition>().is_err(), "{bad}");
        }
    }

    #[test]
    fn junit_report_escapes_and_counts() {
        let stages = [StageResult {
            name: "test",
            verdict: Verdict::Fail,
            time: Duration::from_millis(5),
            note: "exit <1> & \"quoted\"".to_string(),
        }];
        let specs = [SpecResult {
            spec: "specs/a.charter".to_string(),
            expect: "clean",
            errors: 2,
            warnings: 0,
            verdict: Verdict::Fail,
            line: Some(3),
        }];
        let xml = junit_report(&stages, &specs, &[], Duration::from_secs(1));
        assert!(xml.contains("failure message=\"exit &lt;1&gt; &amp; &quot;quoted&quot;\""));
        assert!(xml.contains("name=\"specs\" tests=\"1\" failures=\"1\""));
        assert!(xml.contains("expected clean, got 2 error(s)"));
        assert!(xml.contains("<testsuite name=\"golden\" tests=\"0\""));
    }

    #[test]
    fn subdirectories_are_recognised_by_their_first_component() {
        let specs = Path::new("/r/specs");
        assert!(in_subdir(
            Path::new("/r/specs/invalid/e001.charter"),
            specs,
            "invalid"
        ));
        assert!(!in_subdir(
            Path::new("/r/specs/seeds/invalid.charter"),
            specs,
            "invalid"
        ));
        assert!(!in_subdir(
            Path::new("/r/specs/a.charter"),
            specs,
            "invalid"
        ));
    }
}
