//! `charter run --fork SCENARIO_DIR --at STEP[@ROUND] [--record DIR]`: a golden scenario's recorded run played back up to a step, then live from there (DESIGN §17), optionally recorded as a new scenario.
//!
//! The stages are `charter run`'s (see `driver`), with the scenario in place of a spec
//! and an input: the scenario's spec is compiled with the recording's `--model`
//! overrides and then those given again; the fork point is checked against the spec and
//! the cassette before anything is asked; the run goes through a
//! [`charter_runtime::world::fork::Fork`] (recorded answers before the fork point,
//! the live providers from it on) inside a [`Recording`], so that `--record` writes every
//! call in run order, the replayed ones and the live ones, as `charter run --record`
//! does. A fork keeps no run directory: a fork that stopped is forked again.

use std::path::{Path, PathBuf};

use charter_runtime::engine::models::apply_overrides;
use charter_runtime::engine::run::{DeliveryTarget, RunConfig, RunOutcome};
use charter_runtime::formats::scenario::{Cassette, Recorded, Scenario};
use charter_runtime::formats::trace::{Outcome as RunState, Reason};
use charter_runtime::harness::record::expectation_of;
use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};
use charter_runtime::world::fork::{Fork, ForkPoint};
use charter_runtime::world::jsonl::JsonlSink;
use charter_runtime::world::record::Recording;

use crate::display::outcome_line;
use crate::driver::{
    LiveEnvironment, LiveFlags, LiveRun, LiveTotals, PreparedSpec, TerminalHumans,
    TerminalRunOptions, model_overrides, tool_name,
};
use crate::loader::display_path;
use crate::recording::{
    check_record_spec, compile_scenario_spec, scenario_spec, shown_from_here, write_recorded,
};
use crate::terminal::{Context, Outcome, print_err, print_error, summary_line};

/// What a fork is given: `charter run --fork`'s arguments, as `main` hands them over.
#[derive(Debug)]
pub struct ForkArgs {
    /// The golden scenario to fork (`--fork SCENARIO_DIR`).
    pub scenario: PathBuf,
    /// The fork point, `STEP[@ROUND]` (`--at`).
    pub at: Option<String>,
    pub record: Option<PathBuf>,
    pub force: bool,
    pub events: Option<PathBuf>,
    pub out: Option<PathBuf>,
    pub live: LiveFlags,
}

/// The scenario a fork starts from, read and checked.
struct Forked {
    scenario: Scenario,
    cassette: Cassette,
    prepared: PreparedSpec,
    spec_path: std::path::PathBuf,
    at: ForkPoint,
}

/// `charter run --fork`: checks everything before anything is asked, runs the fork at
/// the terminal, reports it and records it into --record.
pub fn run(args: &ForkArgs, context: Context) -> anyhow::Result<Outcome> {
    let scenario_dir = args.scenario.as_path();
    let forked = match read_fork(args, scenario_dir, context) {
        Ok(forked) => forked,
        Err(outcome) => return Ok(outcome),
    };
    let spec = &forked.prepared.spec;
    let environment = LiveEnvironment::of_this_process();
    let providers =
        match environment.providers_at_terminal(context, spec, &args.live.tools, args.live.sandbox)
        {
            Ok(providers) => providers,
            Err(outcome) => return Ok(outcome),
        };
    print_err(&format!(
        "fork {}: spec {} {}, replayed up to {}, live from there\n",
        display_path(scenario_dir),
        spec.name,
        spec.version,
        forked.at
    ));
    for (alias, target) in &forked.prepared.overrides {
        print_err(&format!("model `{alias}` runs on {target}\n"));
    }
    let recording = Recording::new(environment.secrets.clone());
    let fork = Fork::new(forked.cassette.clone(), forked.at.clone());
    let totals = LiveTotals::start(spec);
    let options = match terminal_options(args, context, &totals) {
        Ok(options) => options,
        Err(outcome) => return Ok(outcome),
    };
    let live_run = LiveRun::at_terminal_through(
        spec,
        &environment,
        (fork.provider(providers), fork.humans(TerminalHumans)),
        &recording,
        options,
    );
    let outcome = match live_run.run(forked.scenario.input.clone()) {
        Ok(outcome) => outcome,
        Err(error) => {
            print_error(context, &error);
            print_err(&totals.line());
            return Ok(Outcome::Failed);
        }
    };
    print_err(&format!("{}\n", outcome_line(&outcome)));
    print_err(&totals.line());
    report_fork(context, &fork);
    crate::terminal::print_answer(outcome.answer.as_ref())?;
    let scrubbed_input = environment.scrubber.value(&forked.scenario.input);
    if let Err(failed) = record_fork(
        args,
        context,
        (scenario_dir, &forked),
        scrubbed_input,
        &recording,
        &outcome,
    ) {
        return Ok(failed);
    }
    Ok(if outcome.outcome == RunState::Completed {
        Outcome::Clean
    } else {
        Outcome::NotCompleted
    })
}

/// The usage checks, the scenario, its spec with its models, and the fork point checked
/// against both; each refusal reported as it is found (exit 2, or 1 for a spec with
/// errors).
fn read_fork(args: &ForkArgs, scenario_dir: &Path, context: Context) -> Result<Forked, Outcome> {
    let usage = |message: &str| {
        print_error(context, message);
        Outcome::Usage
    };
    for given in &args.live.tools {
        tool_name(given).map_err(|message| usage(&message))?;
    }
    let at = ForkPoint::parse(args.at.as_deref().unwrap_or_default())
        .map_err(|message| usage(&message))?;
    let (scenario, cassette) = read_scenario(scenario_dir).map_err(|message| usage(&message))?;
    let (mut spec, spec_path) = compile_scenario_spec(context, scenario_dir, &scenario, "forked")?;
    // The models the recording was made with, then those given again.
    let mut overrides = cassette.overrides();
    overrides.extend(model_overrides(context, &args.live.models)?);
    apply_overrides(&mut spec, &overrides).map_err(|message| usage(&message))?;
    at.check(&spec, &cassette)
        .map_err(|message| usage(&message))?;
    check_record(args).map_err(|message| usage(&message))?;
    if let Some(record) = &args.record {
        check_record_spec(&spec_path, record).map_err(|message| usage(&message))?;
    }
    Ok(Forked {
        scenario,
        cassette,
        prepared: PreparedSpec {
            shown_path: display_path(&spec_path),
            spec,
            overrides,
        },
        spec_path,
        at,
    })
}

/// The scenario and cassette in `dir`, or why it is not a scenario a fork can start from.
fn read_scenario(dir: &Path) -> Result<(Scenario, Cassette), String> {
    let shown = display_path(dir);
    for file in ["scenario.yaml", "cassette.yaml"] {
        if !dir.join(file).is_file() {
            return Err(format!(
                "--fork `{shown}` is not a recorded scenario: it has no {file} (give a \
                 scenario directory such as golden/<spec>/<scenario>, holding scenario.yaml \
                 and cassette.yaml)"
            ));
        }
    }
    let scenario = Scenario::read(&dir.join("scenario.yaml"))
        .map_err(|error| format!("--fork `{shown}`: bad scenario: {error}"))?;
    let cassette = Cassette::read(&dir.join("cassette.yaml")).map_err(|error| {
        format!(
            "--fork `{shown}`: bad cassette: {}",
            one_line(&error.to_string(), MAX_LINE_CHARS)
        )
    })?;
    if scenario.turns.is_some() {
        return Err(format!(
            "--fork `{shown}` is a conversation (`turns`); a fork starts from a scenario of \
             one run"
        ));
    }
    Ok((scenario, cassette))
}

/// Refuses --force with no --record, and a --record over a scenario kept there without
/// --force.
fn check_record(args: &ForkArgs) -> Result<(), String> {
    let Some(record) = &args.record else {
        return match args.force {
            true => Err("--force goes with --record (overwrite a scenario)".to_string()),
            false => Ok(()),
        };
    };
    if args.force {
        return Ok(());
    }
    match ["scenario.yaml", "cassette.yaml"]
        .iter()
        .map(|file| record.join(file))
        .find(|path| path.exists())
    {
        Some(existing) => Err(format!(
            "`{}` already exists; give --force to overwrite the scenario (its description \
             and `expect` are kept), or record into a new directory",
            display_path(&existing)
        )),
        None => Ok(()),
    }
}

/// The live view's options: the totals and --events sinks, the delivery into --out or
/// kept in memory.
fn terminal_options(
    args: &ForkArgs,
    context: Context,
    totals: &LiveTotals,
) -> Result<TerminalRunOptions, Outcome> {
    let mut more_sinks = vec![totals.sink()];
    if let Some(path) = &args.events {
        let sink = JsonlSink::create(path).map_err(|error| {
            print_error(context, &error.to_string());
            Outcome::Usage
        })?;
        more_sinks.push(Box::new(sink));
    }
    let config = match &args.out {
        Some(directory) => {
            std::fs::create_dir_all(directory).map_err(|error| {
                print_error(
                    context,
                    &format!(
                        "--out `{}` cannot be used: {error}",
                        display_path(directory)
                    ),
                );
                Outcome::Usage
            })?;
            RunConfig::default().with_out_dir(directory.clone())
        }
        None => RunConfig {
            delivery: DeliveryTarget::Memory,
            ..RunConfig::default()
        },
    };
    Ok(TerminalRunOptions {
        show_output: args.live.show_output,
        more_sinks,
        config,
    })
}

/// `fork: N answer(s) replayed, M asked live`, and a warning for a fork point never
/// reached or a replayed call whose prompt changed since it was recorded.
fn report_fork(context: Context, fork: &Fork) {
    let at = fork.at().map(ToString::to_string).unwrap_or_default();
    print_err(&format!(
        "fork: {} answer(s) replayed from the recording, {} asked live from {} (the totals \
         count the replayed calls too, though no model was asked for them)\n",
        fork.replayed(),
        fork.asked_live(),
        at
    ));
    if !fork.reached() {
        print_err(&summary_line(
            context,
            "warning",
            &format!("the run never reached {at}: it ended on the recording's answers alone"),
        ));
    }
    for stale in fork.stale_prompts() {
        print_err(&summary_line(
            context,
            "warning",
            &format!(
                "the recorded answer of {} was given to another prompt of `{}` (the spec or \
                 a prompt before the fork point changed since the recording)",
                stale.key, stale.role
            ),
        ));
    }
}

/// Writes the fork as a scenario into --record, if given: every call in the order the
/// run made them, the scenario's input, an `expect` of how the fork ended (or the one
/// --force keeps). A cancelled fork is not recorded.
fn record_fork(
    args: &ForkArgs,
    context: Context,
    (scenario_dir, forked): (&Path, &Forked),
    input: serde_json::Value,
    recording: &Recording,
    outcome: &RunOutcome,
) -> Result<(), Outcome> {
    let Some(directory) = &args.record else {
        return Ok(());
    };
    if outcome.reason == Reason::Cancelled {
        print_err(&summary_line(
            context,
            "note",
            &format!(
                "the fork was cancelled, so nothing was recorded to `{}`",
                shown_from_here(directory)
            ),
        ));
        return Ok(());
    }
    let kept = Scenario::read(&directory.join("scenario.yaml")).ok();
    let scenario = Scenario {
        spec: scenario_spec(&forked.spec_path, directory),
        description: kept
            .as_ref()
            .and_then(|kept| kept.description.clone())
            .or_else(|| {
                Some(format!(
                    "forked from {} at {}, live from there",
                    display_path(scenario_dir),
                    forked.at
                ))
            }),
        input,
        turns: None,
        expect: kept
            .and_then(|kept| kept.expect)
            .or_else(|| Some(expectation_of(outcome))),
    };
    let mut recorded = Recorded::from_spec(&forked.prepared.spec);
    recorded.overrides = forked.prepared.overrides.clone();
    write_recorded(context, directory, scenario, recording.cassette(recorded))
}
