//! `charter verify [DIR]`: a project's CI gate — compile every spec under `DIR/specs`, replay every golden scenario under `DIR/golden` and compare it with its snapshot.

use std::path::{Path, PathBuf};

use charter_runtime::harness::report::{
    JunitCase, colorize, details, github_annotations, github_error, junit_case, junit_xml, summary,
    table,
};
use charter_runtime::harness::snapshot::write_atomically;
use charter_runtime::harness::{
    HarnessConfig, Partition, Problem, ScenarioReport, compile_spec, verify_project_with_progress,
};
use charter_runtime::world::escape;
use clap::Args;

use crate::loader::{collect_specs, display_path};
use crate::{Context, Outcome, print_err, print_error, print_out};

/// Verify a project: compile every spec under `DIR/specs` (compile-fail cases in
/// `specs/invalid/` excepted) and replay every recorded scenario under
/// `DIR/golden/<spec>/<scenario>/`, comparing its outcome, reason and normalized trace
/// with `expect` and `trace.snap`, twice (determinism).
///
/// Prints the diff of each changed snapshot, the unified diff of each rendered prompt of
/// a stale recording, and a table of every scenario. Exit status: 0 when everything
/// passed, 1 on any failure, 2 on a usage error.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter verify --junit report.xml --github\n         charter verify --filter closed_loop/ --accept"
)]
pub struct VerifyArgs {
    /// The project root: the directory that holds `golden/` (and `specs/`).
    #[arg(value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,

    /// Write changed or new snapshots and refresh stale recordings instead of failing.
    /// Hand-written cassettes (no `recorded` block) stay unpinned unless `--pin`.
    #[arg(long)]
    pub accept: bool,

    /// With `--accept`: also pin hand-written cassettes, writing the spec and prompt
    /// hashes they replay under into a `recorded` block, so later changes show as stale.
    #[arg(long, requires = "accept")]
    pub pin: bool,

    /// Only scenarios (`<spec>/<scenario>`) and specs whose path contains PAT.
    #[arg(long, value_name = "PAT")]
    pub filter: Option<String>,

    /// Only shard K of N: `count:K/N` (the default, also written `K/N`) deals the
    /// scenarios (and specs) round-robin, so shards differ by at most one; `hash:K/N`
    /// places each by a hash of its name, so it never moves when others are added. An
    /// empty shard says so and passes.
    #[arg(long, value_name = "[count:|hash:]K/N", value_parser = parse_partition)]
    pub partition: Option<Partition>,

    /// Also write the results as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Also print GitHub Actions `::error` annotations pointing at the failing file and line.
    #[arg(long)]
    pub github: bool,

    /// Also write one self-contained HTML page to FILE (no network needed to open it):
    /// every scenario with its status, its timeline in virtual time and, for one that did
    /// not pass, what went wrong with its diff.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Show every scenario's row in the table, not only those that did not pass.
    #[arg(long, short)]
    pub verbose: bool,
}

/// `file` (relative to the project root `root`) as a path from the current directory; a
/// root outside the current directory leaves it relative to the root.
fn from_here(root: &Path, file: &str) -> String {
    let root = if root.is_absolute() {
        let current = std::env::current_dir().unwrap_or_default();
        match crate::loader::normalize(root).strip_prefix(crate::loader::normalize(&current)) {
            Ok(inside) => inside.to_path_buf(),
            Err(_) => return file.to_string(),
        }
    } else {
        root.to_path_buf()
    };
    let shown = display_path(&crate::loader::normalize(&root.join(file)));
    if shown.is_empty() {
        file.to_string()
    } else {
        shown
    }
}

fn parse_partition(text: &str) -> Result<Partition, String> {
    text.parse()
}

/// Verifies the project as its stages: compile the specs, replay the scenarios, write the
/// `--html` page, print the report (details, table, summary and notes), print the GitHub
/// annotations, write the `--junit` file; the exit status says whether all passed.
pub fn run(args: &VerifyArgs, context: Context) -> anyhow::Result<Outcome> {
    let root = &args.dir;
    if !root.is_dir() {
        print_error(
            context,
            &format!("`{}` is not a directory", display_path(root)),
        );
        return Ok(Outcome::Usage);
    }
    let config = harness_config(args);
    let specs = check_specs(root, &config);
    let reports = match replay_scenarios(root, &config, context) {
        Ok(reports) => reports,
        Err(outcome) => return Ok(outcome),
    };
    if let Some(outcome) = unmatched_filter(args, context, &config, &specs, &reports) {
        return Ok(outcome);
    }
    if let Some(path) = &args.html
        && let Err(outcome) = write_html_report(context, path, root, &reports)
    {
        return Ok(outcome);
    }
    print_details(context, &reports)?;
    print_table(args, &reports)?;
    print_summary(args, &specs, &reports)?;
    note_nothing_to_verify(args, &config, &specs, &reports);
    note_pending_snapshots(args, &reports);
    if args.github {
        print_github_annotations(root, &specs, &reports)?;
    }
    if let Some(path) = &args.junit
        && let Err(outcome) = write_junit_report(context, path, &specs, &reports)
    {
        return Ok(outcome);
    }
    let failed = specs.with_errors > 0 || reports.iter().any(|report| !report.status.passed());
    Ok(if failed {
        Outcome::Failed
    } else {
        Outcome::Clean
    })
}

/// The harness's configuration from the command line.
fn harness_config(args: &VerifyArgs) -> HarnessConfig {
    HarnessConfig {
        accept: args.accept,
        pin: args.pin,
        repin: false,
        filter: args.filter.clone(),
        partition: args.partition,
        // Each changed or new snapshot gets a `trace.snap.new` for `charter review`.
        pending_snapshots: true,
        determinism: true,
    }
}

/// What compiling the specs found: how many were compiled and how many had errors, a
/// JUnit case for each, and a GitHub annotation for each error.
struct SpecsChecked {
    count: usize,
    with_errors: usize,
    cases: Vec<JunitCase>,
    annotations: Vec<String>,
}

/// Compiles every selected spec, printing each error on stderr as it is found.
fn check_specs(root: &Path, config: &HarnessConfig) -> SpecsChecked {
    let specs = specs_under(root, config);
    let mut checked = SpecsChecked {
        count: specs.len(),
        with_errors: 0,
        cases: Vec::new(),
        annotations: Vec::new(),
    };
    for (relative, result) in &specs {
        let failure = match result {
            Ok(()) => None,
            Err(problem) => {
                checked.with_errors += 1;
                let problem = escaped_problem(problem);
                // Rendered diagnostics end their own lines; a message alone (a spec that
                // cannot be read) is a line of its own too.
                match problem.detail.as_deref() {
                    Some(detail) if detail.ends_with('\n') => print_err(detail),
                    Some(detail) => print_err(&format!("{detail}\n")),
                    None => print_err(&format!("error: {}\n", problem.message)),
                }
                checked.annotations.push(github_error(
                    &from_here(root, &problem.location.file),
                    problem.location.line,
                    "spec error",
                    &problem.message,
                ));
                Some((problem.message, problem.detail.unwrap_or_default()))
            }
        };
        checked.cases.push(JunitCase {
            classname: "specs".to_string(),
            name: relative.clone(),
            time: std::time::Duration::ZERO,
            failure,
            error: None,
        });
    }
    checked
}

/// A spec's problem as it is shown: what the spec file holds is escaped and cut
/// (DESIGN §15).
fn escaped_problem(problem: &Problem) -> Problem {
    let mut problem = problem.clone();
    problem.message = escape::one_line(&problem.message, escape::MAX_LINE_CHARS);
    problem.location.file = escape::one_line(&problem.location.file, escape::MAX_LINE_CHARS);
    problem.detail = problem
        .detail
        .map(|detail| escape::block(&detail, escape::MAX_BLOCK_CHARS));
    problem
}

/// Replays every selected scenario and compares it with its snapshot; `Err` is the usage
/// error of a project whose scenarios cannot be found or read (said on stderr).
fn replay_scenarios(
    root: &Path,
    config: &HarnessConfig,
    context: Context,
) -> Result<Vec<ScenarioReport>, Outcome> {
    // On a terminal, one progress line, redrawn as scenarios finish and erased at the end;
    // nothing of it reaches a pipe or a CI log.
    let progress = |done: usize, total: usize, report: &ScenarioReport| {
        if context.interactive {
            print_err(&format!(
                "\r\u{1b}[2K[{done}/{total}] {}",
                escape::one_line(&report.id(), 60)
            ));
        }
    };
    let reports = verify_project_with_progress(root, config, &progress);
    if context.interactive {
        print_err("\r\u{1b}[2K");
    }
    reports.map_err(|error| {
        print_error(context, &error.to_string());
        Outcome::Usage
    })
}

/// Writes the `--html` page; `Err` is the usage error of a file that cannot be written.
fn write_html_report(
    context: Context,
    path: &Path,
    root: &Path,
    reports: &[ScenarioReport],
) -> Result<(), Outcome> {
    let page = html_report(root, reports);
    crate::view::write_page(path, &page).map_err(|error| {
        print_error(
            context,
            &format!("cannot write `{}`: {error}", display_path(path)),
        );
        Outcome::Usage
    })
}

/// The details of every scenario that did not pass (its problems and diffs), on stdout.
fn print_details(context: Context, reports: &[ScenarioReport]) -> anyhow::Result<()> {
    let details = details(reports);
    if details.is_empty() {
        return Ok(());
    }
    if context.color_out {
        print_out(&colorize(&details))?;
    } else {
        print_out(&details)?;
    }
    print_out("\n")
}

/// The table: every row with --verbose, otherwise only the scenarios that did not pass
/// (a thousand passing scenarios are one count, not a thousand rows).
fn print_table(args: &VerifyArgs, reports: &[ScenarioReport]) -> anyhow::Result<()> {
    let shown: Vec<_> = if args.verbose {
        reports.to_vec()
    } else {
        reports
            .iter()
            .filter(|report| !report.status.passed())
            .cloned()
            .collect()
    };
    if shown.is_empty() {
        return Ok(());
    }
    print_out(&table(&shown))
}

/// `N specs compiled, K with errors; <scenario counts> (partition P)`, after a blank line.
fn print_summary(
    args: &VerifyArgs,
    specs: &SpecsChecked,
    reports: &[ScenarioReport],
) -> anyhow::Result<()> {
    let spec_line = if specs.count == 0 {
        String::new()
    } else {
        format!(
            "{} spec{} compiled{}; ",
            specs.count,
            if specs.count == 1 { "" } else { "s" },
            if specs.with_errors == 0 {
                String::new()
            } else {
                format!(", {} with errors", specs.with_errors)
            }
        )
    };
    print_out(&format!(
        "\n{spec_line}{}{}\n",
        summary(reports),
        args.partition
            .map(|partition| format!(" (partition {partition})"))
            .unwrap_or_default()
    ))
}

/// Says why nothing was verified when no spec and no scenario was: an empty shard (of how
/// many the whole selection holds), or a project without specs/ and golden/.
/// A `--filter` that selects nothing, in a project that has specs or scenarios, is a
/// mistake rather than a pass: exit 2, naming the closest spec or scenario.
fn unmatched_filter(
    args: &VerifyArgs,
    context: Context,
    config: &HarnessConfig,
    specs: &SpecsChecked,
    reports: &[ScenarioReport],
) -> Option<Outcome> {
    let filter = args.filter.as_deref()?;
    if args.partition.is_some() || specs.count > 0 || !reports.is_empty() {
        return None;
    }
    let everything = HarnessConfig {
        filter: None,
        partition: None,
        ..config.clone()
    };
    let scenarios: Vec<String> = charter_runtime::harness::discover(&args.dir)
        .map(|found| {
            charter_runtime::harness::select(found, &everything)
                .iter()
                .map(|scenario| scenario.id())
                .collect()
        })
        .unwrap_or_default();
    let spec_paths: Vec<String> = specs_under(&args.dir, &everything)
        .into_iter()
        .map(|(relative, _)| relative)
        .collect();
    if scenarios.is_empty() && spec_paths.is_empty() {
        return None;
    }
    // A filter matches part of `<spec>/<scenario>` or of a spec's path: any of those parts
    // may be the one meant.
    let parts: Vec<&str> = scenarios
        .iter()
        .chain(&spec_paths)
        .flat_map(|name| std::iter::once(name.as_str()).chain(name.split(['/', '.'])))
        .collect();
    let hint = charter_runtime::compiler::diagnostics::did_you_mean(filter, parts)
        .unwrap_or_else(|| {
            format!(
                "it matches part of a scenario's `<spec>/<scenario>` ({} of them, such as `{}`) or of a spec's path",
                scenarios.len(),
                scenarios.first().or(spec_paths.first()).map_or("", String::as_str)
            )
        });
    print_error(
        context,
        &format!(
            "--filter `{}` matches no spec and no scenario; {hint}",
            escape::one_line(filter, escape::MAX_LINE_CHARS)
        ),
    );
    Some(Outcome::Usage)
}

fn note_nothing_to_verify(
    args: &VerifyArgs,
    config: &HarnessConfig,
    specs: &SpecsChecked,
    reports: &[ScenarioReport],
) {
    if specs.count > 0 || !reports.is_empty() {
        return;
    }
    let root = &args.dir;
    match args.partition {
        Some(partition) => {
            let unsharded = HarnessConfig {
                partition: None,
                ..config.clone()
            };
            let scenarios = charter_runtime::harness::discover(root)
                .map(|found| charter_runtime::harness::select(found, &unsharded).len())
                .unwrap_or(0);
            let spec_count = specs_under_count(root, &unsharded);
            print_err(&format!(
                "note: shard {partition} is empty: it holds none of the {scenarios} \
                 scenario{} and {spec_count} spec{} selected; nothing to verify, so it passes\n",
                if scenarios == 1 { "" } else { "s" },
                if spec_count == 1 { "" } else { "s" },
            ));
        }
        None => print_err(&format!(
            "note: nothing to verify: `{}` has no specs/ and no golden/ scenarios\n",
            display_path(root)
        )),
    }
}

/// Points at `charter review` when changed snapshots were left as `trace.snap.new`
/// (without `--accept`, which writes them instead).
fn note_pending_snapshots(args: &VerifyArgs, reports: &[ScenarioReport]) {
    let pending = reports
        .iter()
        .filter(|report| {
            matches!(
                report.status,
                charter_runtime::harness::Status::Changed | charter_runtime::harness::Status::New
            )
        })
        .count();
    if pending > 0 && !args.accept {
        print_err(&format!(
            "note: {pending} pending snapshot{} (trace.snap.new) written: review {} with \
             `charter review`, or accept every change with `charter verify --accept`\n",
            if pending == 1 { "" } else { "s" },
            if pending == 1 { "it" } else { "them" },
        ));
    }
}

/// The `::error` annotations of the specs, then of the scenarios, on stdout.
fn print_github_annotations(
    root: &Path,
    specs: &SpecsChecked,
    reports: &[ScenarioReport],
) -> anyhow::Result<()> {
    // Annotations point at files from where verify runs (GitHub resolves them from the
    // checkout), not from the project root.
    let located: Vec<_> = reports
        .iter()
        .cloned()
        .map(|mut report| {
            for problem in &mut report.problems {
                problem.location.file = from_here(root, &problem.location.file);
            }
            report
        })
        .collect();
    for line in specs
        .annotations
        .iter()
        .chain(&github_annotations(&located))
    {
        print_out(&format!("{line}\n"))?;
    }
    Ok(())
}

/// Writes the `--junit` file, the specs' cases before the scenarios'; `Err` is the usage
/// error of a file that cannot be written.
fn write_junit_report(
    context: Context,
    path: &Path,
    specs: &SpecsChecked,
    reports: &[ScenarioReport],
) -> Result<(), Outcome> {
    let cases: Vec<JunitCase> = specs
        .cases
        .iter()
        .cloned()
        .chain(reports.iter().map(junit_case))
        .collect();
    let xml = junit_xml("charter verify", &cases);
    write_atomically(path, &xml).map_err(|error| {
        print_error(
            context,
            &format!("cannot write `{}`: {error}", display_path(path)),
        );
        Outcome::Usage
    })
}

/// The `--html` page: each scenario's status, problems (with their diffs) and timeline —
/// the trace it produced (`trace.snap.new` when that differs from the snapshot, else
/// `trace.snap`).
fn html_report(root: &Path, reports: &[ScenarioReport]) -> String {
    let scenarios: Vec<serde_json::Value> = reports
        .iter()
        .map(|report| {
            let directory = root
                .join("golden")
                .join(&report.spec)
                .join(&report.scenario);
            let trace = ["trace.snap.new", "trace.snap"]
                .iter()
                .map(|name| directory.join(name))
                .find(|path| path.is_file())
                .and_then(|path| {
                    charter_runtime::world::files::read_regular(
                        &path,
                        charter_runtime::world::limits::DEFAULT_MAX_BYTES as u64,
                    )
                    .ok()
                })
                .unwrap_or_default();
            let mut scenario = serde_json::json!({
                "name": report.id(),
                "status": if report.status.passed() { "passed" } else { report.status.label() },
                "events": crate::view::trace_events(&trace),
            });
            if let Some(description) = &report.description {
                scenario["description"] = serde_json::json!(description);
            }
            if !report.problems.is_empty() {
                let messages: Vec<&str> = report
                    .problems
                    .iter()
                    .map(|problem| problem.message.as_str())
                    .collect();
                scenario["message"] = serde_json::json!(messages.join("; "));
                scenario["diff"] = serde_json::json!(escape::block(
                    &details(std::slice::from_ref(report)),
                    escape::MAX_BLOCK_CHARS
                ));
            }
            scenario
        })
        .collect();
    crate::view::static_page("charter verify", &scenarios)
}

/// How many specs `specs_under` would select (without compiling them).
fn specs_under_count(root: &Path, config: &HarnessConfig) -> usize {
    let directory = root.join("specs");
    let Ok(paths) = collect_specs(&[directory]) else {
        return 0;
    };
    paths
        .iter()
        .map(|path| display_path(path.strip_prefix(root).unwrap_or(path)))
        .filter(|relative| {
            !relative.starts_with("specs/invalid/")
                && config
                    .filter
                    .as_deref()
                    .is_none_or(|filter| relative.contains(filter))
        })
        .count()
}

/// Every spec under `root/specs` (except the compile-fail cases in `specs/invalid/`) that
/// the filter and partition keep, with its compilation result, by path relative to `root`.
fn specs_under(root: &Path, config: &HarnessConfig) -> Vec<(String, Result<(), Problem>)> {
    let directory = root.join("specs");
    if !directory.is_dir() {
        return Vec::new();
    }
    let Ok(paths) = collect_specs(&[directory]) else {
        return Vec::new();
    };
    paths
        .iter()
        .map(|path| display_path(path.strip_prefix(root).unwrap_or(path)))
        .filter(|relative| {
            !relative.starts_with("specs/invalid/")
                && config
                    .filter
                    .as_deref()
                    .is_none_or(|filter| relative.contains(filter))
        })
        .enumerate()
        .filter(|(position, relative)| {
            config
                .partition
                .is_none_or(|partition| partition.keeps(*position, relative))
        })
        .map(|(_, relative)| relative)
        .map(|relative| {
            let result = compile_spec(root, &relative).map(|_| ());
            (relative, result)
        })
        .collect()
}
