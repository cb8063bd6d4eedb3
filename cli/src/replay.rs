//! `charter replay SCENARIO_DIR [--events FILE] [--out DIR]`: run a recorded scenario on a paused clock, showing its phases live.

use std::path::PathBuf;

use charter_compiler::CompiledSpec;
use charter_runtime::engine::models::apply_overrides;
use charter_runtime::engine::run::{DeliveryTarget, RunError};
use charter_runtime::formats::scenario::{Cassette, Recorded, Scenario};
use charter_runtime::formats::trace::{Outcome as RunOutcome, Tee, TraceSink};
use charter_runtime::world::jsonl::JsonlSink;
use charter_runtime::world::replay::{ReplayReport, replay_cassette};
use clap::Args;

use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};

use crate::display::{LiveDisplay, outcome_line, totals_line};
use crate::loader::display_path;
use crate::recording::compile_scenario_spec;
use crate::terminal::{Context, Outcome, print_err, print_error, summary_line};

/// Replay a recorded scenario (`scenario.yaml` + `cassette.yaml`) deterministically, in
/// virtual time, without a network.
///
/// The phases are shown on stderr as they happen: steps, rounds, items, retries, gate
/// scores, repairs; the last line is the outcome and its reason. Exit status: 0 when the
/// run completed, 3 when it ended in any other terminal state (below_target, blocked,
/// failed, cancelled), 1 on an error (an unrecorded call, a bad scenario or cassette, a
/// spec with errors, an `expect` the run did not meet), 2 on a usage error (a path that is
/// not a scenario directory, an `--out` or `--events` that cannot be written).
///
/// The scenario's `spec:` is relative to the directory that holds `golden/` (the current
/// directory when the scenario is not under one). The delivery is written atomically
/// (a temporary file, then a rename), so `--out` never holds half a delivery; the
/// `--events` file gets each event as it happens, so a failed run leaves what it recorded.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter replay runtime/tests/fixtures/golden/review_loop/passing \
                  --events trace.jsonl --out out"
)]
pub struct ReplayArgs {
    /// The scenario directory: `golden/<spec>/<scenario>/` with `scenario.yaml` and `cassette.yaml`.
    #[arg(value_name = "SCENARIO_DIR")]
    pub scenario: PathBuf,

    /// Also write every trace event as one JSON line to FILE.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,

    /// Write the delivery (`delivery.json`) into DIR. Without it the delivery is still
    /// written and read back, in memory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Said when a replay fails and the cassette's hashes differ from the spec's.
const STALE_NOTE: &str = "note: the cassette was recorded against another version of this spec or \
     its prompts (see the warnings above); re-record it, or check `spec:` in scenario.yaml\n";

/// Replays the scenario as its stages: check the paths, replay the recording (read it,
/// compile its spec, check its names, replay every turn), then report what the run left
/// unused, its outcome, and whether it met the scenario's `expect`.
pub fn run(args: &ReplayArgs, context: Context) -> anyhow::Result<Outcome> {
    if let Some(problem) = usage_problem(args) {
        print_error(context, &problem);
        return Ok(Outcome::Usage);
    }
    let replayed = match replay_recording(args, context) {
        Ok(replayed) => replayed,
        Err(outcome) => return Ok(outcome),
    };
    warn_of_unused_recording(context, &replayed.report);
    report_outcome(context, args, &replayed)?;
    if let Err(outcome) = check_expectations(context, &replayed) {
        return Ok(outcome);
    }
    Ok(exit_status(&replayed.report.outcome))
}

/// A replay that ran to its end, with what the lines after it show: the scenario (for
/// its `expect`), the run's totals and the wall clock it started on.
struct Replayed {
    scenario: Scenario,
    report: ReplayReport,
    totals: charter_runtime::totals::TotalsSink,
    started: std::time::Instant,
    /// The trajectory checks of `expect` the run failed, one message each.
    trajectory_unmet: Vec<String>,
}

/// Reads the recording, compiles its spec and replays it; `Err` holds the exit status of
/// a stage that stopped it (having said why).
fn replay_recording(args: &ReplayArgs, context: Context) -> Result<Replayed, Outcome> {
    let (scenario, cassette) = read_recording(args, context)?;
    let spec = compile_recorded_spec(args, context, &scenario, &cassette)?;
    print_heading(args, &spec, &scenario);
    let stale = warn_of_stale_recording(context, &cassette, &spec);
    check_recorded_names(context, &scenario, &cassette, &spec, stale)?;
    replay_showing_phases(args, context, &spec, scenario, cassette, stale)
}

/// The scenario and its cassette, read from the scenario directory.
fn read_recording(args: &ReplayArgs, context: Context) -> Result<(Scenario, Cassette), Outcome> {
    let scenario = Scenario::read(&args.scenario.join("scenario.yaml")).map_err(|error| {
        print_error(context, &format!("bad scenario: {error}"));
        Outcome::Failed
    })?;
    let cassette = Cassette::read(&args.scenario.join("cassette.yaml")).map_err(|error| {
        print_error(
            context,
            &format!(
                "bad cassette: {}",
                one_line(&error.to_string(), MAX_LINE_CHARS)
            ),
        );
        Outcome::Failed
    })?;
    Ok((scenario, cassette))
}

/// The scenario's spec, compiled, with the models the recording was made with.
fn compile_recorded_spec(
    args: &ReplayArgs,
    context: Context,
    scenario: &Scenario,
    cassette: &Cassette,
) -> Result<CompiledSpec, Outcome> {
    let (mut spec, _) = compile_scenario_spec(context, &args.scenario, scenario, "replayed")?;
    // A recording made with `charter run --model` replays with the same models.
    if let Err(message) = apply_overrides(&mut spec, &cassette.overrides()) {
        print_error(context, &format!("bad cassette: {message}"));
        return Err(Outcome::Failed);
    }
    Ok(spec)
}

/// `replay DIR: spec NAME VERSION — DESCRIPTION`, the first line of a replay.
fn print_heading(args: &ReplayArgs, spec: &CompiledSpec, scenario: &Scenario) {
    print_err(&format!(
        "replay {}: spec {} {}{}\n",
        display_path(&args.scenario),
        spec.name,
        spec.version,
        scenario
            .description
            .as_deref()
            .map(|description| format!(" — {}", one_line(description, MAX_LINE_CHARS)))
            .unwrap_or_default()
    ));
}

/// Warns of each hash of the recording that differs from the spec's, and says whether
/// any did. A stale recording still replays (it is the harness that fails on it).
fn warn_of_stale_recording(context: Context, cassette: &Cassette, spec: &CompiledSpec) -> bool {
    let changes = cassette.stale_against(&Recorded::from_spec(spec));
    let stale = !changes.is_empty();
    for change in changes {
        print_err(&summary_line(
            context,
            "warning",
            &format!("stale recording: {change}"),
        ));
    }
    stale
}

/// Stops the replay before it starts when the cassette or the scenario's `expect` names
/// what the spec does not have, each name with its "did you mean".
fn check_recorded_names(
    context: Context,
    scenario: &Scenario,
    cassette: &Cassette,
    spec: &CompiledSpec,
    stale: bool,
) -> Result<(), Outcome> {
    let names = charter_runtime::formats::scenario::unknown_names(cassette, spec);
    let expected_steps = scenario
        .expect
        .as_ref()
        .map(|expect| charter_runtime::harness::expect::name_problems(expect, spec))
        .unwrap_or_default();
    if names.is_empty() && expected_steps.is_empty() {
        return Ok(());
    }
    for problem in &names {
        print_error(
            context,
            &format!(
                "bad cassette: {}",
                one_line(&problem.message, MAX_LINE_CHARS)
            ),
        );
    }
    for message in &expected_steps {
        print_error(
            context,
            &format!("bad scenario: {}", one_line(message, MAX_LINE_CHARS)),
        );
    }
    if stale {
        print_err(STALE_NOTE);
    }
    Err(Outcome::Failed)
}

/// Replays every turn with its phases shown live on stderr (and written to `--events`),
/// counting the run's totals from the moment the replay starts.
fn replay_showing_phases(
    args: &ReplayArgs,
    context: Context,
    spec: &CompiledSpec,
    scenario: Scenario,
    cassette: Cassette,
    stale: bool,
) -> Result<Replayed, Outcome> {
    let live = LiveDisplay::default();
    let totals = charter_runtime::totals::TotalsSink::new(std::sync::Arc::new(spec.clone()));
    let started = std::time::Instant::now();
    let live = Tee(live, totals.clone());
    let report = match &args.events {
        Some(path) => {
            let file = JsonlSink::create(path).map_err(|error| {
                print_error(context, &error.to_string());
                Outcome::Usage
            })?;
            let mut sink = Tee(file, live);
            replay(spec, &scenario, cassette, args, &mut sink)
        }
        None => {
            let mut sink = live;
            replay(spec, &scenario, cassette, args, &mut sink)
        }
    };
    match report {
        Ok(report) => {
            let trajectory_unmet = scenario
                .expect
                .as_ref()
                .map(|expect| {
                    charter_runtime::harness::expect::trajectory::unmet(
                        expect,
                        &report.trajectory,
                        spec,
                    )
                    .into_iter()
                    .map(|unmet| unmet.message)
                    .collect()
                })
                .unwrap_or_default();
            Ok(Replayed {
                scenario,
                report,
                totals,
                started,
                trajectory_unmet,
            })
        }
        Err(error) => Err(explain_replay_failure(args, context, spec, &error, stale)),
    }
}

/// Says why the replay failed, with a hint where one helps; the exit status is 1.
fn explain_replay_failure(
    args: &ReplayArgs,
    context: Context,
    spec: &CompiledSpec,
    error: &RunError,
    stale: bool,
) -> Outcome {
    print_error(context, &error.to_string());
    if let RunError::Input(_) = error {
        print_err(&format!(
            "help: `input:` in `{}` must be a `{}`\n",
            display_path(&args.scenario.join("scenario.yaml")),
            spec.request.as_deref().unwrap_or("Request")
        ));
    }
    // The note helps only where the stale hashes can explain the failure: a call
    // the cassette lacks (a changed flow asks for calls it was not recorded with).
    if stale && matches!(error, RunError::Unrecorded { .. }) {
        print_err(STALE_NOTE);
    }
    Outcome::Failed
}

/// Warns of what the recording holds that the replay did not use as recorded: answers to
/// prompts that changed, calls never made, human answers never asked for.
fn warn_of_unused_recording(context: Context, report: &ReplayReport) {
    for stale in &report.stale_prompts {
        print_err(&summary_line(
            context,
            "warning",
            &format!(
                "stale recording: call {} answered another prompt ({} -> {}); re-record it",
                stale.key, stale.recorded, stale.now
            ),
        ));
    }
    for key in &report.unused_calls {
        print_err(&summary_line(
            context,
            "warning",
            &format!("recorded call {key} was never made"),
        ));
    }
    for (step, round, attempt) in &report.unused_humans {
        print_err(&summary_line(
            context,
            "warning",
            &format!(
                "recorded human answer for step `{step}` in round {round} (attempt {attempt}) was never asked for"
            ),
        ));
    }
}

/// The outcome line and the totals line on stderr, the answer on stdout, and a warning
/// when `--out` holds a delivery this run did not make.
fn report_outcome(context: Context, args: &ReplayArgs, replayed: &Replayed) -> anyhow::Result<()> {
    let outcome = &replayed.report.outcome;
    print_err(&format!("{}\n", outcome_line(outcome)));
    print_err(&format!(
        "{}\n",
        totals_line(&replayed.totals.totals(), replayed.started.elapsed(), true)
    ));
    crate::terminal::print_answer(outcome.answer.as_ref())?;
    if let Some(directory) = &args.out
        && outcome.delivered.is_none()
        && directory.join("delivery.json").is_file()
    {
        print_err(&summary_line(
            context,
            "warning",
            &format!(
                "`{}` is from an earlier run: this run delivered nothing",
                display_path(&directory.join("delivery.json"))
            ),
        ));
    }
    Ok(())
}

/// The exit status of a replay that met its `expect`: 0 when the run completed, 3 when it
/// ended in any other terminal state.
fn exit_status(outcome: &charter_runtime::engine::run::RunOutcome) -> Outcome {
    if outcome.outcome == RunOutcome::Completed {
        Outcome::Clean
    } else {
        Outcome::NotCompleted
    }
}

/// Fails the replay when the run did not meet the scenario's `expect`, saying what it
/// expected.
fn check_expectations(context: Context, replayed: &Replayed) -> Result<(), Outcome> {
    let Some(expect) = &replayed.scenario.expect else {
        return Ok(());
    };
    let report = &replayed.report;
    let unmet =
        charter_runtime::harness::expect::unmet(expect, &report.outcome, &report.calls_per_step);
    if unmet.is_empty() && replayed.trajectory_unmet.is_empty() {
        return Ok(());
    }
    if !unmet.is_empty() {
        print_error(
            context,
            &format!("the scenario expected {}", unmet.join(" and ")),
        );
    }
    for message in &replayed.trajectory_unmet {
        print_error(context, message);
    }
    Err(Outcome::Failed)
}

/// What is wrong with the paths given, before anything is read or run: a scenario path
/// that is not a directory holding `scenario.yaml`, an `--out` that is not (and cannot be
/// made) a directory. `--out` is created here, so a run cannot fail late for it.
fn usage_problem(args: &ReplayArgs) -> Option<String> {
    let shown = display_path(&args.scenario);
    if !args.scenario.exists() {
        return Some(format!("`{shown}` does not exist"));
    }
    if !args.scenario.is_dir() {
        return Some(format!(
            "`{shown}` is a file; give the scenario directory (the one that holds \
             `scenario.yaml` and `cassette.yaml`)"
        ));
    }
    if !args.scenario.join("scenario.yaml").exists() {
        return Some(format!(
            "`{shown}` is not a scenario directory: it has no `scenario.yaml`"
        ));
    }
    if let Some(directory) = &args.out {
        let out = display_path(directory);
        if directory.exists() && !directory.is_dir() {
            return Some(format!("`--out {out}` is not a directory"));
        }
        if let Err(error) = std::fs::create_dir_all(directory) {
            return Some(format!(
                "cannot create the `--out` directory `{out}`: {error}"
            ));
        }
    }
    if let Some(events) = &args.events
        && events.is_dir()
    {
        return Some(format!(
            "`--events {}` is a directory; give a file name",
            display_path(events)
        ));
    }
    None
}

/// Replays the recording into `sink`: its one run, or each turn of its conversation in
/// order, delivering into `--out` when it is given (else in memory).
fn replay(
    spec: &CompiledSpec,
    scenario: &Scenario,
    cassette: Cassette,
    args: &ReplayArgs,
    sink: &mut dyn TraceSink,
) -> Result<ReplayReport, RunError> {
    let target = match &args.out {
        Some(directory) => DeliveryTarget::Directory(directory.clone()),
        None => DeliveryTarget::Memory,
    };
    let Some(turns) = &scenario.turns else {
        return replay_cassette(spec, scenario.input.clone(), cassette, target, sink);
    };
    // A conversation: each turn in order, in the session the turn before left; every
    // turn's answer but the last is printed here (the last with the outcome).
    let mut session = charter_runtime::engine::session::Session::new(spec)
        .map_err(|error| RunError::Flow(error.to_string()))?;
    let mut report: Option<ReplayReport> = None;
    let count = turns.len();
    for (index, turn) in turns.iter().enumerate() {
        if let Some(previous) = &report {
            crate::terminal::print_answer(previous.outcome.answer.as_ref())
                .map_err(|error| RunError::Flow(error.to_string()))?;
        }
        let number = u64::try_from(index + 1).unwrap_or(u64::MAX);
        print_err(&format!("turn {number} of {count}\n"));
        let replayed = charter_runtime::world::replay::replay_cassette_in(
            spec,
            turn.input.clone(),
            cassette.for_turn(number),
            target.clone(),
            Some(session.clone()),
            sink,
        )?;
        if let Some(next) = &replayed.outcome.session {
            session = next.clone();
        }
        let mut replayed = replayed;
        if let Some(previous) = report {
            replayed.unused_calls.splice(0..0, previous.unused_calls);
            replayed.unused_humans.splice(0..0, previous.unused_humans);
            replayed.trajectory.splice(0..0, previous.trajectory);
            for (step, calls) in previous.calls_per_step {
                *replayed.calls_per_step.entry(step).or_insert(0) += calls;
            }
        }
        report = Some(replayed);
    }
    report.ok_or_else(|| RunError::Flow("`turns` is empty".to_string()))
}
