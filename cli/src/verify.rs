//! `charter verify [DIR]`: a project's CI gate — compile every spec under `DIR/specs`, replay every golden scenario under `DIR/golden` and compare it with its snapshot.

use std::path::{Path, PathBuf};

use charter_runtime::harness::report::{
    JunitCase, colorize, details, github_annotations, github_error, junit_case, junit_xml, summary,
    table,
};
use charter_runtime::harness::snapshot::write_atomically;
use charter_runtime::harness::{
    HarnessConfig, Partition, Problem, compile_spec, verify_project_with_progress,
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

pub fn run(args: &VerifyArgs, context: Context) -> anyhow::Result<Outcome> {
    let root = &args.dir;
    if !root.is_dir() {
        print_error(
            context,
            &format!("`{}` is not a directory", display_path(root)),
        );
        return Ok(Outcome::Usage);
    }
    let config = HarnessConfig {
        accept: args.accept,
        pin: args.pin,
        filter: args.filter.clone(),
        partition: args.partition,
        // Each changed or new snapshot gets a `trace.snap.new` for `charter review`.
        pending_snapshots: true,
        determinism: true,
    };

    let mut cases: Vec<JunitCase> = Vec::new();
    let mut annotations: Vec<String> = Vec::new();
    let mut failed = false;

    // Specs.
    let specs = specs_under(root, &config);
    let mut spec_errors = 0;
    for (relative, result) in &specs {
        let case = |failure: Option<(String, String)>| JunitCase {
            classname: "specs".to_string(),
            name: relative.clone(),
            time: std::time::Duration::ZERO,
            failure,
            error: None,
        };
        match result {
            Ok(()) => cases.push(case(None)),
            Err(problem) => {
                spec_errors += 1;
                failed = true;
                // What the spec file holds is shown escaped and cut (DESIGN §15).
                let mut problem = problem.clone();
                problem.message = escape::one_line(&problem.message, escape::MAX_LINE_CHARS);
                problem.location.file =
                    escape::one_line(&problem.location.file, escape::MAX_LINE_CHARS);
                problem.detail = problem
                    .detail
                    .map(|detail| escape::block(&detail, escape::MAX_BLOCK_CHARS));
                print_err(problem.detail.as_deref().unwrap_or(&problem.message));
                annotations.push(github_error(
                    &from_here(root, &problem.location.file),
                    problem.location.line,
                    "spec error",
                    &problem.message,
                ));
                cases.push(case(Some((
                    problem.message.clone(),
                    problem.detail.clone().unwrap_or_default(),
                ))));
            }
        }
    }

    // Scenarios.
    // On a terminal, one progress line, redrawn as scenarios finish and erased at the end;
    // nothing of it reaches a pipe or a CI log.
    let progress =
        |done: usize, total: usize, report: &charter_runtime::harness::ScenarioReport| {
            if context.interactive {
                print_err(&format!(
                    "\r\u{1b}[2K[{done}/{total}] {}",
                    escape::one_line(&report.id(), 60)
                ));
            }
        };
    let reports = verify_project_with_progress(root, &config, &progress);
    if context.interactive {
        print_err("\r\u{1b}[2K");
    }
    let reports = match reports {
        Ok(reports) => reports,
        Err(error) => {
            print_error(context, &error.to_string());
            return Ok(Outcome::Usage);
        }
    };
    cases.extend(reports.iter().map(junit_case));
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
    annotations.extend(github_annotations(&located));
    failed |= reports.iter().any(|report| !report.status.passed());
    if let Some(path) = &args.html {
        let page = html_report(root, &reports);
        if let Err(error) = crate::view::write_page(path, &page) {
            print_error(
                context,
                &format!("cannot write `{}`: {error}", display_path(path)),
            );
            return Ok(Outcome::Usage);
        }
    }

    let details = details(&reports);
    if !details.is_empty() {
        if context.color_out {
            print_out(&colorize(&details))?;
        } else {
            print_out(&details)?;
        }
        print_out("\n")?;
    }
    // The table: every row with --verbose, otherwise only the scenarios that did not pass
    // (a thousand passing scenarios are one count, not a thousand rows).
    let shown: Vec<_> = if args.verbose {
        reports.clone()
    } else {
        reports
            .iter()
            .filter(|report| !report.status.passed())
            .cloned()
            .collect()
    };
    if !shown.is_empty() {
        print_out(&table(&shown))?;
    }
    let spec_line = if specs.is_empty() {
        String::new()
    } else {
        format!(
            "{} spec{} compiled{}; ",
            specs.len(),
            if specs.len() == 1 { "" } else { "s" },
            if spec_errors == 0 {
                String::new()
            } else {
                format!(", {spec_errors} with errors")
            }
        )
    };
    print_out(&format!(
        "\n{spec_line}{}{}\n",
        summary(&reports),
        args.partition
            .map(|partition| format!(" (partition {partition})"))
            .unwrap_or_default()
    ))?;
    if specs.is_empty() && reports.is_empty() {
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
    let pending = reports
        .iter()
        .filter(|report| report.status == charter_runtime::harness::Status::Changed)
        .count();
    if pending > 0 && !args.accept {
        print_err(&format!(
            "note: {pending} pending snapshot{} (trace.snap.new) written: review {} with \
             `charter review`, or accept every change with `charter verify --accept`\n",
            if pending == 1 { "" } else { "s" },
            if pending == 1 { "it" } else { "them" },
        ));
    }
    if args.github {
        for line in &annotations {
            print_out(&format!("{line}\n"))?;
        }
    }
    if let Some(path) = &args.junit {
        let xml = junit_xml("charter verify", &cases);
        if let Err(error) = write_atomically(path, &xml) {
            print_error(
                context,
                &format!("cannot write `{}`: {error}", display_path(path)),
            );
            return Ok(Outcome::Usage);
        }
    }
    Ok(if failed {
        Outcome::Failed
    } else {
        Outcome::Clean
    })
}

/// The `--html` page: each scenario's status, problems (with their diffs) and timeline —
/// the trace it produced (`trace.snap.new` when that differs from the snapshot, else
/// `trace.snap`).
fn html_report(root: &Path, reports: &[charter_runtime::harness::ScenarioReport]) -> String {
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
