//! `charter verify [DIR]`: a project's CI gate — compile every spec under `DIR/specs`, replay every golden scenario under `DIR/golden` and compare it with its snapshot.

mod json;
mod rerecord;

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use charter_compiler::{Diagnostic, render};
use charter_runtime::harness::report::{
    JunitCase, colorize, details, github_annotations, github_error, junit_case, junit_xml, summary,
    table,
};
use charter_runtime::harness::snapshot::write_atomically;
use charter_runtime::harness::{
    HarnessConfig, Partition, Problem, ScenarioReport, SpecWarnings, VerifyOptions,
    compile_spec_with_warnings, verify_project_with,
};
use charter_runtime::world::escape;
use clap::{Args, ValueEnum};

use crate::loader::{collect_specs, display_path};
use crate::terminal::{Context, Outcome, count, print_err, print_error, print_out, summary_line};

/// Verify a project: compile every spec under `DIR/specs` (compile-fail cases in
/// `specs/invalid/` excepted) and replay every recorded scenario under
/// `DIR/golden/<spec>/<scenario>/`, comparing its outcome, reason and normalized trace
/// with `expect` and `trace.snap`, twice (determinism).
///
/// Prints each spec's compiler warnings (as `charter check` does, on stderr), the diff of
/// each changed snapshot, the unified diff of each rendered prompt of a stale recording,
/// and a table of every scenario. Exit status: 0 when everything passed (warnings
/// allowed unless `--deny-warnings`), 1 on any failure, 2 on a usage error.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter verify --junit report.xml --github\n         charter verify --filter closed_loop/ --accept\n         charter verify --list --partition 2/4\n         charter verify --format json -j 4 --fail-fast\n         charter verify --rerecord --filter closed_loop/repair --model strong=openai:gpt-4o-mini\n         charter verify --rerecord --missing-only --filter closed_loop/ --accept\n\nRe-record: --rerecord runs each selected scenario from its input with live models: every\nmodel call and `tool` step call is asked again (the spec's models, or --model's over the\nrecording's); the recorded answers of people are replayed, and a question the cassette\ncannot answer is an error (a cassette that injects `faults` is left out: a live run does not\nmeet them). Per scenario it prints how many calls were made, whether each\nanswer is the recording's (same, changed, new, not made) and the drift against the golden\n(outcome, reason, delivered candidate, gate scores; golden -> now); it exits 1 when any\nscenario drifted. With --accept it writes the run as a fresh cassette in run order and the\nnew trace.snap, scenario.yaml kept as written, only when the new run still meets the\nscenario's `expect` (otherwise nothing is written and it exits 1, naming what is unmet).\nWith --missing-only it replays and asks a live model only for the calls the cassette lacks\n(a step added since the recording), lists the keys that would be added, and exits 1 when\nsomething would change; with --accept it adds exactly those entries to the cassette (the\nothers stay byte for byte) and writes the new snapshot, so `charter verify` passes."
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

    /// Treat the specs' compiler warnings as errors: a spec with a warning fails the run,
    /// as with `charter check --deny-warnings`.
    #[arg(long)]
    pub deny_warnings: bool,

    /// Print the specs and scenarios that would be verified (after `--filter` and
    /// `--partition`), one per line, and exit without compiling or replaying anything.
    #[arg(long, conflicts_with_all = ["accept", "fail_fast", "junit", "html", "github"])]
    pub list: bool,

    /// Stop at the first failure: a spec that fails stops the run before any replay, and
    /// the first scenario (in order) that does not pass ends it; what ran up to there is
    /// reported with its counts, and how many scenarios did not run. (With `-j N`,
    /// scenarios already replaying beside the failing one finish, and may leave a
    /// `trace.snap.new`, but are not reported.)
    #[arg(long, conflicts_with = "accept")]
    pub fail_fast: bool,

    /// How to print the results on stdout: `human` (diffs, table, summary) or `json` (one
    /// JSON document, described in docs/verify-json.md; nothing else on stdout).
    #[arg(
        long,
        value_name = "FORMAT",
        value_enum,
        ignore_case = true,
        default_value_t = VerifyFormat::Human
    )]
    pub format: VerifyFormat,

    /// Replay N scenarios at once (default: the machine's available parallelism). The
    /// output is the same for every N.
    #[arg(long, short = 'j', value_name = "N", value_parser = parse_jobs)]
    pub jobs: Option<NonZeroUsize>,

    /// Re-record the selected scenarios with live models: every model call asked again
    /// (people's recorded answers are replayed), or with `--missing-only` only the calls a
    /// cassette lacks. Prints the drift against each golden; nothing is written without
    /// `--accept`. See "Re-record" below.
    #[arg(long, conflicts_with_all = ["list", "pin", "fail_fast", "junit", "html", "github"])]
    pub rerecord: bool,

    /// With `--rerecord`: ask a live model only for the calls a cassette lacks, and add
    /// exactly those entries to it (with `--accept`).
    #[arg(long, requires = "rerecord")]
    pub missing_only: bool,

    /// With `--rerecord`: run model alias ALIAS on PROVIDER:MODEL instead of what the
    /// spec's `models` block (or the recording) says. Repeat for each alias.
    #[arg(
        long = "model",
        value_name = "ALIAS=PROVIDER:MODEL",
        requires = "rerecord"
    )]
    pub models: Vec<String>,
}

/// What `charter verify` prints on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VerifyFormat {
    Human,
    Json,
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

fn parse_jobs(text: &str) -> Result<NonZeroUsize, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("expected a number of threads, at least 1 (e.g. 4), got `{text}`"))
}

/// Verifies the project as its stages: compile the specs, replay the scenarios, write the
/// `--html` page, print the report (details, table, summary and notes, or the JSON
/// document), print the GitHub annotations, write the `--junit` file; the exit status
/// says whether all passed. `--list` only lists what would be verified.
pub fn run(args: &VerifyArgs, context: Context) -> anyhow::Result<Outcome> {
    let root = &args.dir;
    if !root.is_dir() {
        print_error(
            context,
            &format!("`{}` is not a directory", display_path(root)),
        );
        return Ok(Outcome::Usage);
    }
    if args.github && args.format == VerifyFormat::Json {
        print_error(
            context,
            "--github prints annotations on stdout, which --format json keeps for its document; \
             use one of them",
        );
        return Ok(Outcome::Usage);
    }
    if args.rerecord {
        return rerecord::run(args, context);
    }
    let config = harness_config(args);
    if args.list {
        return list(args, context, &config);
    }
    let specs = check_specs(root, &config, args, context);
    // With --fail-fast, a spec that fails stops the run before any replay.
    let reports = if args.fail_fast && specs.failed(args.deny_warnings) > 0 {
        Vec::new()
    } else {
        match replay_scenarios(root, &config, args, context) {
            Ok(reports) => reports,
            Err(outcome) => return Ok(outcome),
        }
    };
    if let Some(outcome) = unmatched_filter(args, context, &config, specs.count(), reports.len()) {
        return Ok(outcome);
    }
    if let Some(path) = &args.html
        && let Err(outcome) = write_html_report(context, path, root, &reports, &specs.gates)
    {
        return Ok(outcome);
    }
    let not_run = if args.fail_fast {
        selected_scenarios(root, &config).saturating_sub(reports.len())
    } else {
        0
    };
    let failed = specs.failed(args.deny_warnings) > 0
        || reports.iter().any(|report| !report.status.passed());
    match args.format {
        VerifyFormat::Human => print_report(args, context, &specs, &reports, not_run)?,
        VerifyFormat::Json => {
            let run = json::Run {
                args,
                specs: &specs,
                reports: &reports,
                not_run,
                passed: !failed,
            };
            print_out(&format!("{}\n", json::document(&run)))?;
        }
    }
    note_nothing_to_verify(args, &config, specs.count(), reports.len());
    note_pending_snapshots(args, &reports);
    if args.github {
        print_github_annotations(root, &specs, &reports)?;
    }
    if let Some(path) = &args.junit
        && let Err(outcome) = write_junit_report(context, path, &specs, &reports)
    {
        return Ok(outcome);
    }
    Ok(if failed {
        Outcome::Failed
    } else {
        Outcome::Clean
    })
}

/// The human report on stdout: the details of what did not pass, the table and the
/// summary (with how many scenarios `--fail-fast` left unrun).
fn print_report(
    args: &VerifyArgs,
    context: Context,
    specs: &SpecsChecked,
    reports: &[ScenarioReport],
    not_run: usize,
) -> anyhow::Result<()> {
    print_details(context, reports)?;
    print_table(args, reports)?;
    print_summary(args, specs, reports, not_run)
}

/// `--list`: the specs, then the scenarios, that the filter and partition select, one per
/// line (or as one JSON document); nothing is compiled or replayed.
fn list(args: &VerifyArgs, context: Context, config: &HarnessConfig) -> anyhow::Result<Outcome> {
    let root = &args.dir;
    let specs: Vec<String> = selected_specs(root, config)
        .iter()
        .map(|path| escape::one_line(path, escape::MAX_LINE_CHARS))
        .collect();
    let scenarios: Vec<String> = match charter_runtime::harness::discover(root) {
        Ok(found) => charter_runtime::harness::select(found, config)
            .iter()
            .map(|scenario| escape::one_line(&scenario.id(), escape::MAX_LINE_CHARS))
            .collect(),
        Err(error) => {
            print_error(context, &error.to_string());
            return Ok(Outcome::Usage);
        }
    };
    if let Some(outcome) = unmatched_filter(args, context, config, specs.len(), scenarios.len()) {
        return Ok(outcome);
    }
    match args.format {
        VerifyFormat::Human => {
            let mut out = String::new();
            for id in specs.iter().chain(&scenarios) {
                out.push_str(id);
                out.push('\n');
            }
            print_out(&out)?;
        }
        VerifyFormat::Json => print_out(&format!("{}\n", json::listing(&specs, &scenarios)))?,
    }
    note_nothing_to_verify(args, config, specs.len(), scenarios.len());
    Ok(Outcome::Clean)
}

/// How many scenarios the filter and partition select.
fn selected_scenarios(root: &Path, config: &HarnessConfig) -> usize {
    charter_runtime::harness::discover(root)
        .map(|found| charter_runtime::harness::select(found, config).len())
        .unwrap_or(0)
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

/// What compiling the specs found: each spec's result (its warnings, or the problem of its
/// errors), a JUnit case for each, and a GitHub annotation for each failure.
#[derive(Default)]
struct SpecsChecked {
    specs: Vec<SpecChecked>,
    cases: Vec<JunitCase>,
    annotations: Vec<String>,
    /// Each compiled spec's gates (rules and score thresholds, as `GET /specs/{name}`
    /// tells them), by spec name: what the `--html` page reads a gate event against.
    gates: std::collections::BTreeMap<String, serde_json::Value>,
}

/// One spec compiled: its path relative to the project root, and its warnings or the
/// problem of its errors (escaped as shown).
struct SpecChecked {
    path: String,
    result: Result<SpecWarnings, Problem>,
}

impl SpecsChecked {
    fn count(&self) -> usize {
        self.specs.len()
    }

    fn with_errors(&self) -> usize {
        self.specs
            .iter()
            .filter(|spec| spec.result.is_err())
            .count()
    }

    fn with_warnings(&self) -> usize {
        self.specs
            .iter()
            .filter(|spec| spec.warnings().is_some_and(|warnings| !warnings.is_empty()))
            .count()
    }

    /// How many specs fail the run: those with errors, and with `deny_warnings` those
    /// with warnings.
    fn failed(&self, deny_warnings: bool) -> usize {
        self.with_errors()
            + if deny_warnings {
                self.with_warnings()
            } else {
                0
            }
    }
}

impl SpecChecked {
    /// The warnings of a spec that compiled.
    fn warnings(&self) -> Option<&[Diagnostic]> {
        self.result
            .as_ref()
            .ok()
            .map(|warnings| warnings.diagnostics.as_slice())
    }
}

/// Compiles every selected spec, printing (in human format) each error and each warning
/// on stderr as it is found, as `charter check` prints them.
fn check_specs(
    root: &Path,
    config: &HarnessConfig,
    args: &VerifyArgs,
    context: Context,
) -> SpecsChecked {
    let human = args.format == VerifyFormat::Human;
    let mut checked = SpecsChecked::default();
    for relative in selected_specs(root, config) {
        let result = compile_spec_with_warnings(root, &relative)
            .map(|(spec, warnings)| {
                checked
                    .gates
                    .insert(spec.name.clone(), crate::page::gates(&spec));
                warnings
            })
            .map_err(|problem| escaped_problem(&problem));
        let failure = match &result {
            Ok(warnings) => {
                if human {
                    print_spec_warnings(context, args.deny_warnings, &relative, warnings);
                }
                spec_warnings_failure(root, args.deny_warnings, &relative, warnings, &mut checked)
            }
            Err(problem) => {
                if human {
                    print_spec_problem(problem);
                }
                checked.annotations.push(github_error(
                    &from_here(root, &problem.location.file),
                    problem.location.line,
                    "spec error",
                    &problem.message,
                ));
                Some((
                    problem.message.clone(),
                    problem.detail.clone().unwrap_or_default(),
                ))
            }
        };
        checked.cases.push(JunitCase {
            classname: "specs".to_string(),
            name: relative.clone(),
            time: std::time::Duration::ZERO,
            failure,
            error: None,
        });
        checked.specs.push(SpecChecked {
            path: relative,
            result,
        });
    }
    checked
}

/// Prints a spec's errors on stderr. Rendered diagnostics end their own lines; a message
/// alone (a spec that cannot be read) is a line of its own too.
fn print_spec_problem(problem: &Problem) {
    match problem.detail.as_deref() {
        Some(detail) if detail.ends_with('\n') => print_err(detail),
        Some(detail) => print_err(&format!("{detail}\n")),
        None => print_err(&format!("error: {}\n", problem.message)),
    }
}

/// Prints a spec's warnings on stderr as `charter check` does: each rendered, then
/// `warning: `PATH`: N warnings` (`error:` when they are denied).
fn print_spec_warnings(context: Context, deny: bool, relative: &str, warnings: &SpecWarnings) {
    if warnings.diagnostics.is_empty() {
        return;
    }
    print_err(&render::text(
        &warnings.diagnostics,
        &warnings.sources,
        context.color,
    ));
    let level = if deny { "error" } else { "warning" };
    let message = format!(
        "`{}`: {}",
        escape::one_line(relative, escape::MAX_LINE_CHARS),
        count(warnings.diagnostics.len(), "warning")
    );
    print_err(&summary_line(context, level, &message));
}

/// With `deny`, a spec's warnings fail it: the JUnit failure (message and the rendered
/// warnings), and a GitHub annotation at the first warning.
fn spec_warnings_failure(
    root: &Path,
    deny: bool,
    relative: &str,
    warnings: &SpecWarnings,
    checked: &mut SpecsChecked,
) -> Option<(String, String)> {
    let first = warnings.diagnostics.first().filter(|_| deny)?;
    let message = format!(
        "`{relative}`: {} (denied): {}",
        count(warnings.diagnostics.len(), "warning"),
        first.message
    );
    let line = first
        .primary_span()
        .map(|span| warnings.sources.line_column(span.file, span.start).0 as u64);
    let file = first
        .primary_span()
        .and_then(|span| warnings.sources.get(span.file))
        .map_or(relative, |file| file.name.as_str());
    checked.annotations.push(github_error(
        &from_here(root, file),
        line,
        "spec warning (denied)",
        &message,
    ));
    let rendered = render::text(&warnings.diagnostics, &warnings.sources, false);
    Some((message, escape::block(&rendered, escape::MAX_BLOCK_CHARS)))
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
    args: &VerifyArgs,
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
    let options = VerifyOptions {
        jobs: args.jobs,
        fail_fast: args.fail_fast,
    };
    let reports = verify_project_with(root, config, options, &progress);
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
    gates: &std::collections::BTreeMap<String, serde_json::Value>,
) -> Result<(), Outcome> {
    let page = html_report(root, reports, gates);
    crate::page::write_page(path, &page).map_err(|error| {
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

/// `N specs compiled, K with errors, W with warnings; <scenario counts> (partition P)`,
/// after a blank line; with `--fail-fast`, how many scenarios did not run.
fn print_summary(
    args: &VerifyArgs,
    specs: &SpecsChecked,
    reports: &[ScenarioReport],
    not_run: usize,
) -> anyhow::Result<()> {
    let spec_line = if specs.count() == 0 {
        String::new()
    } else {
        let mut line = format!(
            "{} spec{} compiled",
            specs.count(),
            if specs.count() == 1 { "" } else { "s" },
        );
        if specs.with_errors() > 0 {
            line.push_str(&format!(", {} with errors", specs.with_errors()));
        }
        if specs.with_warnings() > 0 {
            line.push_str(&format!(
                ", {} with warnings{}",
                specs.with_warnings(),
                if args.deny_warnings { " (denied)" } else { "" }
            ));
        }
        format!("{line}; ")
    };
    let stopped = if not_run > 0 {
        format!("; stopped at the first failure (--fail-fast): {not_run} not run")
    } else {
        String::new()
    };
    print_out(&format!(
        "\n{spec_line}{}{}{stopped}\n",
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
    specs: usize,
    scenarios: usize,
) -> Option<Outcome> {
    let filter = args.filter.as_deref()?;
    if args.partition.is_some() || specs > 0 || scenarios > 0 {
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
    let spec_paths = selected_specs(&args.dir, &everything);
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
    specs: usize,
    scenarios: usize,
) {
    if specs > 0 || scenarios > 0 {
        return;
    }
    let root = &args.dir;
    match args.partition {
        Some(partition) => {
            let unsharded = HarnessConfig {
                partition: None,
                ..config.clone()
            };
            let scenarios = selected_scenarios(root, &unsharded);
            let spec_count = selected_specs(root, &unsharded).len();
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

/// The `--html` page: a summary table (failures first) of every scenario, then each
/// scenario's status, problems (with their diffs) and timeline — the trace it produced
/// (`trace.snap.new` when that differs from the snapshot, with the first event where it
/// departs from `trace.snap` marked, else `trace.snap`) — with the commit and the time.
fn html_report(
    root: &Path,
    reports: &[ScenarioReport],
    gates: &std::collections::BTreeMap<String, serde_json::Value>,
) -> String {
    let read = |path: &Path| {
        charter_runtime::world::files::read_regular(
            path,
            charter_runtime::world::limits::DEFAULT_MAX_BYTES as u64,
        )
        .ok()
    };
    let scenarios: Vec<serde_json::Value> = reports
        .iter()
        .map(|report| {
            let directory = root
                .join("golden")
                .join(&report.spec)
                .join(&report.scenario);
            let snapshot =
                read(&directory.join("trace.snap")).map(|text| crate::page::trace_events(&text));
            let produced = read(&directory.join("trace.snap.new"))
                .map(|text| crate::page::trace_events(&text));
            let events = produced
                .clone()
                .or_else(|| snapshot.clone())
                .unwrap_or_default();
            let mut scenario = serde_json::json!({
                "name": report.id(),
                "status": if report.status.passed() { "passed" } else { report.status.label() },
                "events": events,
            });
            if let (Some(produced), Some(snapshot)) = (&produced, &snapshot)
                && let Some(index) = departs_at(produced, snapshot)
            {
                scenario["diverged"] = serde_json::json!(index);
            }
            if let Some(description) = &report.description {
                scenario["description"] = serde_json::json!(description);
            }
            // The spec's gates: each score's threshold beside its value.
            if let Some(gates) = gates.get(&report.spec) {
                scenario["spec"] = serde_json::json!({"gates": gates});
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
    let mut meta = serde_json::json!({
        "generated_ms": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or_default(),
    });
    if let Some(commit) = commit_of(root) {
        meta["commit"] = serde_json::json!(commit);
    }
    crate::page::report_page("charter verify", &meta, &scenarios)
}

/// The index of the first event of `produced` that is not the snapshot's event at that
/// place (`None`: they are the same).
fn departs_at(produced: &[serde_json::Value], snapshot: &[serde_json::Value]) -> Option<usize> {
    let same = produced
        .iter()
        .zip(snapshot)
        .take_while(|(now, then)| now == then)
        .count();
    (same < produced.len().max(snapshot.len())).then(|| same.min(produced.len().saturating_sub(1)))
}

/// The commit `root` is checked out at (`git rev-parse --short HEAD`, with `+` when the
/// work tree has changes), or `None` outside a git work tree or without git.
fn commit_of(root: &Path) -> Option<String> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]).filter(|commit| !commit.is_empty())?;
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|status| !status.is_empty());
    Some(if dirty { format!("{commit}+") } else { commit })
}

/// Every spec under `root/specs` (except the compile-fail cases in `specs/invalid/`) that
/// the filter and partition keep, by path relative to `root`, in order.
fn selected_specs(root: &Path, config: &HarnessConfig) -> Vec<String> {
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
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_trace_departs_from_its_snapshot_at_the_first_event_that_differs() {
        let events = |kinds: &[&str]| -> Vec<serde_json::Value> {
            kinds.iter().map(|kind| json!({"kind": kind})).collect()
        };
        let snapshot = events(&["a", "b", "c"]);
        assert_eq!(departs_at(&events(&["a", "b", "c"]), &snapshot), None);
        assert_eq!(departs_at(&events(&["a", "x", "c"]), &snapshot), Some(1));
        assert_eq!(
            departs_at(&events(&["a", "b", "c", "d"]), &snapshot),
            Some(3)
        );
        assert_eq!(departs_at(&events(&["a", "b"]), &snapshot), Some(1));
    }
}
