//! `charter eval SPEC --inputs FILE.jsonl`: each input run live N times on one or several model sets, judged against its `expect`, reported with pass rates and their 95% Wilson intervals (DESIGN §17); failures can be kept as golden scenarios.
//!
//! The stages, each refusing before anything is asked: read and check the inputs file
//! (every bad line named), compile the spec once per model set (`--model`, `--models
//! FILE`), check every key and `--save-failures` directory, validate each input against
//! the request contract (an input that breaks it is reported and left out; the others
//! run). Then [`runner`] runs the runs concurrently on one runtime, and [`output`] prints
//! the report and writes `--json`, `--junit` and `--html`; [`save`] writes the failures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use charter_compiler::CompiledSpec;
use charter_runtime::engine::models::apply_overrides;
use charter_runtime::engine::validate::validate_request;
use charter_runtime::harness::eval::report::{self, Invalid, Plan, Summary};
use charter_runtime::harness::eval::{EvalLine, name_problems, parse_inputs};
use charter_runtime::world::providers::Providers;

use crate::driver::{LiveEnvironment, PreparedSpec, SandboxFlags, model_overrides, tool_name};
use crate::loader::display_path;
use crate::terminal::{Context, Outcome, print_err, print_error};

mod html;
mod output;
mod runner;
mod save;

/// Run a spec live on every input of a JSON Lines file, N times each, and report how often
/// each run met its `expect`.
///
/// Each line of FILE.jsonl is one object: `{"input": {...}, "expect": {...}}`. `expect`
/// holds what a scenario's `expect` holds (outcome, reason, delivered, answer, calls,
/// steps, tools, not_called, gates); a line without it passes when the run completes.
/// Optional keys: `name` (shown beside the line number) and `answers` (the answers to the
/// run's `ask` steps in order, e.g. `[{"approved": true}]`: no person watches an eval).
///
/// The report gives per input and overall: the pass rate with its 95% Wilson interval,
/// how the runs ended, gate scores (mean, min), calls, tokens, cost and run latency
/// (p50/p95), the flaky inputs (some runs passed, some failed) and why runs failed.
///
/// Exit status: 0 when the pass rate is at least --min-pass-rate (every run must pass
/// without it); 1 below it, when an input breaks the request contract (it is reported and
/// the others run), or when --max-cost stopped the eval; 2 a usage error (a bad line, a
/// missing key: nothing runs); 3 interrupted by Ctrl-C or SIGTERM (the partial report is
/// printed).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: charter eval specs/review_loop.charter --inputs evals/posts.jsonl --repeat 10 --concurrency 8 --min-pass-rate 0.9 --max-cost 2.00\n         charter eval specs/review_loop.charter --inputs evals/posts.jsonl --models evals/models.yaml --html eval.html\n         charter eval specs/review_loop.charter --inputs evals/posts.jsonl --save-failures golden/review_loop\n\nA line of FILE.jsonl:\n  {\"name\": \"heat pumps\", \"input\": {\"goal\": \"heat pumps\"}, \"expect\": {\"outcome\": \"completed\", \"steps\": [\"write\", \"review\"], \"gates\": {\"quality\": {\"min_score\": 7}}}}\n\n--models FILE (YAML or JSON): one model set per name, each alias -> PROVIDER:MODEL, run side by side:\n  small: { default: \"openai:qwen2.5:7b\" }\n  large: { default: \"openai:gpt-4o\" }\n\n--save-failures DIR writes each failing run as DIR/line<L>-run<R>/ (scenario.yaml with the\nline's expect, cassette.yaml, trace.snap of what happened): `charter verify` replays it to\nthe same failure, offline, until the agent is fixed and the scenario re-recorded."
)]
pub struct EvalArgs {
    /// The spec to evaluate.
    #[arg(value_name = "SPEC")]
    pub spec: PathBuf,

    /// The inputs: one JSON object per line, `{"input": ..., "expect"?: ...}`.
    #[arg(long, value_name = "FILE.jsonl")]
    pub inputs: PathBuf,

    /// Run each input N times on each model set.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub repeat: u32,

    /// Run at most K runs at once.
    #[arg(long, value_name = "K", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub concurrency: u32,

    /// Start no new run once the runs so far cost USD or more (at the models' prices);
    /// the runs in flight finish.
    #[arg(long, value_name = "USD", value_parser = non_negative)]
    pub max_cost: Option<f64>,

    /// Pass when at least this share of the runs pass (0 to 1; 1 without it).
    #[arg(long, value_name = "R", value_parser = share)]
    pub min_pass_rate: Option<f64>,

    /// Write each failing run as a golden scenario into DIR/line<L>-run<R>/.
    #[arg(long, value_name = "DIR")]
    pub save_failures: Option<PathBuf>,

    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Also write the runs as JUnit XML to FILE (a test case per run).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Also write the report as one self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Leave wall-clock latency out of the report, so the same answers give the same
    /// report byte for byte (a seeded mock in CI).
    #[arg(long)]
    pub no_timing: bool,

    /// Run alias ALIAS on PROVIDER:MODEL (every model set). Repeat for each alias.
    #[arg(long = "model", value_name = "ALIAS=PROVIDER:MODEL")]
    pub models: Vec<String>,

    /// Several model sets from a YAML or JSON file (`NAME: {ALIAS: PROVIDER:MODEL}`), run
    /// on the same inputs and reported side by side.
    #[arg(long = "models", value_name = "FILE")]
    pub models_file: Option<PathBuf>,

    /// A tool as a command, run by `sh -c` (see `charter run --help`). Repeat per tool.
    #[arg(long = "tool", value_name = "NAME=COMMAND")]
    pub tools: Vec<String>,

    #[command(flatten)]
    pub sandbox: SandboxFlags,
}

fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Ok(value),
        _ => Err(format!("`{text}` is not an amount of USD (e.g. 2.50)")),
    }
}

fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err(format!(
            "`{text}` is not a share between 0 and 1 (e.g. 0.9)"
        )),
    }
}

/// A model set compiled: its spec with the set's overrides, and its providers.
pub(crate) struct ModelSet {
    pub(crate) name: String,
    pub(crate) overrides: BTreeMap<String, String>,
    pub(crate) spec: Arc<CompiledSpec>,
    pub(crate) providers: Providers,
}

/// Everything checked and ready to run.
pub(crate) struct Ready {
    pub(crate) lines: Vec<EvalLine>,
    pub(crate) invalid: Vec<Invalid>,
    pub(crate) sets: Vec<ModelSet>,
    pub(crate) environment: LiveEnvironment,
    /// The spec's path as messages show it.
    pub(crate) shown_path: String,
}

/// `charter eval`.
pub fn run(args: &EvalArgs, context: Context) -> anyhow::Result<Outcome> {
    let ready = match prepare(args, context) {
        Ok(ready) => ready,
        Err(outcome) => return Ok(outcome),
    };
    let spec_name = ready.sets[0].spec.name.clone();
    print_err(&format!(
        "eval {}: {} input{} × {} run{} × {} model set{}, {} at a time\n",
        ready.shown_path,
        ready.lines.len(),
        plural(ready.lines.len()),
        args.repeat,
        plural(args.repeat as usize),
        ready.sets.len(),
        plural(ready.sets.len()),
        args.concurrency
    ));
    for invalid in &ready.invalid {
        print_error(
            context,
            &format!(
                "{}:{}: the input breaks the request contract, so it was not run: {}",
                display_path(&args.inputs),
                invalid.line,
                invalid.message
            ),
        );
    }
    let finished = runner::run_all(args, context, &ready);
    let set_names: Vec<NamedSet> = ready
        .sets
        .iter()
        .map(|set| (set.name.clone(), set.overrides.clone()))
        .collect();
    let report = report::build(
        Plan {
            spec: &spec_name,
            repeat: args.repeat as usize,
            lines: &ready.lines,
            invalid: ready.invalid.clone(),
            sets: &set_names,
            stopped: finished.stopped.clone(),
        },
        &finished.results,
    );
    let mut outcome = output::print_report(args, context, &report, &ready)?;
    if !args.no_timing {
        print_err(&output::speed_line(&finished));
    }
    if let Some(dir) = &args.save_failures
        && let Err(failed) = save::save_failures(context, args, dir, &ready, &finished)
    {
        outcome = worst(outcome, failed);
    }
    if let Err(failed) = output::write_files(args, context, &report, &finished) {
        outcome = worst(outcome, failed);
    }
    Ok(match (finished.interrupted, outcome) {
        (_, Outcome::Usage) => Outcome::Usage,
        (true, _) => Outcome::NotCompleted,
        (false, outcome) => outcome,
    })
}

/// The more serious of two outcomes (usage over failure over success).
fn worst(a: Outcome, b: Outcome) -> Outcome {
    let rank = |outcome: Outcome| match outcome {
        Outcome::Clean => 0,
        Outcome::NotCompleted => 1,
        Outcome::Failed => 2,
        Outcome::Usage => 3,
    };
    if rank(b) > rank(a) { b } else { a }
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// Every check before anything is asked; each refusal printed (exit 2, or 1 for a spec
/// with errors).
fn prepare(args: &EvalArgs, context: Context) -> Result<Ready, Outcome> {
    let usage = |message: &str| {
        print_error(context, message);
        Outcome::Usage
    };
    for given in &args.tools {
        tool_name(given).map_err(|message| usage(&message))?;
    }
    let lines = read_lines(context, &args.inputs)?;
    let base = PreparedSpec::compile(context, &args.spec, &args.models, "evaluated")?;
    let named = model_sets(context, args)?;
    let environment = LiveEnvironment::of_this_process();
    let mut sets = Vec::new();
    for (name, set_overrides) in named {
        let mut spec = base.spec.clone();
        let mut overrides = base.overrides.clone();
        overrides.extend(set_overrides);
        apply_overrides(&mut spec, &overrides)
            .map_err(|message| usage(&format!("model set `{name}`: {message}")))?;
        let providers =
            environment.providers_at_terminal(context, &spec, &args.tools, args.sandbox)?;
        sets.push(ModelSet {
            name,
            overrides,
            spec: Arc::new(spec),
            providers,
        });
    }
    let spec = &sets[0].spec;
    let problems = name_problems(&lines, spec);
    if !problems.is_empty() {
        for problem in problems {
            let shown = display_path(&args.inputs);
            print_error(
                context,
                &format!("{shown}:{}: {}", problem.line, problem.message),
            );
        }
        return Err(Outcome::Usage);
    }
    if let Some(dir) = &args.save_failures {
        crate::recording::check_record_spec(&args.spec, dir).map_err(|message| usage(&message))?;
    }
    let (lines, invalid) = valid_inputs(spec, lines);
    Ok(Ready {
        lines,
        invalid,
        sets,
        environment,
        shown_path: base.shown_path,
    })
}

/// The inputs file read; every line that cannot be read is named (exit 2).
fn read_lines(context: Context, path: &Path) -> Result<Vec<EvalLine>, Outcome> {
    let shown = display_path(path);
    let text = std::fs::read_to_string(path).map_err(|error| {
        print_error(context, &format!("cannot read `{shown}`: {error}"));
        Outcome::Usage
    })?;
    let lines = parse_inputs(&text).map_err(|errors| {
        for error in errors {
            print_error(
                context,
                &format!("{shown}:{}: {}", error.line, error.message),
            );
        }
        Outcome::Usage
    })?;
    if lines.is_empty() {
        print_error(
            context,
            &format!(
                "`{shown}` holds no inputs (one JSON object per line: {{\"input\": {{...}}}})"
            ),
        );
        return Err(Outcome::Usage);
    }
    Ok(lines)
}

/// A model set's name and its overrides (alias to `PROVIDER:MODEL`).
type NamedSet = (String, BTreeMap<String, String>);

/// The model sets: those of `--models FILE` by name, or one set (`spec models`, or the
/// `--model` overrides) without it.
fn model_sets(context: Context, args: &EvalArgs) -> Result<Vec<NamedSet>, Outcome> {
    let Some(path) = &args.models_file else {
        let name = if args.models.is_empty() {
            "spec models".to_string()
        } else {
            args.models.join(" ")
        };
        return Ok(vec![(name, BTreeMap::new())]);
    };
    let shown = display_path(path);
    let usage = |message: String| {
        print_error(context, &message);
        Outcome::Usage
    };
    let text = std::fs::read_to_string(path)
        .map_err(|error| usage(format!("cannot read `{shown}`: {error}")))?;
    let sets: BTreeMap<String, BTreeMap<String, String>> =
        charter_runtime::formats::yaml::from_str(&shown, &text).map_err(|error| {
            usage(format!(
                "{error} (a model set per name: `NAME: {{ALIAS: \"PROVIDER:MODEL\"}}`)"
            ))
        })?;
    if sets.is_empty() {
        return Err(usage(format!("`{shown}` names no model set")));
    }
    let mut checked = Vec::new();
    for (name, aliases) in sets {
        let given: Vec<String> = aliases
            .iter()
            .map(|(alias, target)| format!("{alias}={target}"))
            .collect();
        let overrides = model_overrides(context, &given)?;
        checked.push((name, overrides));
    }
    Ok(checked)
}

/// The inputs that hold to the request contract (with its defaults filled in), and those
/// that do not, each with its violations.
fn valid_inputs(spec: &CompiledSpec, lines: Vec<EvalLine>) -> (Vec<EvalLine>, Vec<Invalid>) {
    let mut valid = Vec::new();
    let mut invalid = Vec::new();
    for mut line in lines {
        match validate_request(spec, &line.input) {
            Ok(input) => {
                line.input = input;
                valid.push(line);
            }
            Err(violations) => invalid.push(Invalid {
                line: line.line,
                message: violations
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            }),
        }
    }
    (valid, invalid)
}

/// The path a `--save-failures` scenario or an output file is shown by.
pub(crate) fn shown(path: &Path) -> String {
    crate::recording::shown_from_here(path)
}

/// `share` as a percentage with one decimal, `70.0%`: how the text report and the page
/// show a pass rate.
pub(crate) fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// A pass rate's Wilson interval, `[45.7%, 88.1%]`.
pub(crate) fn interval(summary: &Summary) -> String {
    format!(
        "[{}, {}]",
        percent(summary.interval[0]),
        percent(summary.interval[1])
    )
}
