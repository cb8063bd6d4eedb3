//! `charter verify --rerecord [--missing-only] [--filter PAT] [--accept]`: each selected golden scenario run again with live models (DESIGN §17, VCR's record modes), and its behaviour drift against the golden shown.
//!
//! Everything is checked before anything is asked: each scenario's spec compiles with
//! the recording's `--model` overrides and those given again, and every provider it
//! names has its key (a missing key is a usage error). A conversation (`turns`) is not
//! re-recorded, nor, without `--missing-only`, a scenario whose cassette injects
//! `faults` (a live run does not meet them). Each scenario then runs from its input
//! through a [`Fork`] inside a [`Recording`], so the run order of every call is known:
//! - [`missing`], `--missing-only` (VCR's `new_episodes`): the cassette answers what it
//!   holds and the live providers only the calls it lacks; `--accept` inserts exactly
//!   those entries into the cassette's text.
//! - [`all`], `--rerecord` alone (VCR's `all`): every model call and `tool` step call is
//!   asked live; the recorded answers of people are still replayed, since a person is not
//!   a model. `--accept` writes the run as a fresh cassette in run order.
//!
//! A question the cassette has no answer for is never put to the terminal: the scenario
//! reports it as an error ([`NoPerson`]). Per scenario the report shows the calls and the
//! drift against the golden trace ([`drift`]: outcome, reason, delivered candidate, gate
//! scores; golden → now). Without `--accept` nothing is written and a change exits 1.
//! With it, the new cassette is staged with the scenario's `scenario.yaml` as written,
//! accepted and checked as `charter verify --accept` then `charter verify` would
//! ([`write_added_calls`]); only a scenario that then passes (its `expect` met) has its
//! `cassette.yaml` and `trace.snap` written, each atomically, and one that does not is
//! left byte for byte as it was, the report saying why.

mod all;
mod drift;
mod missing;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use charter_compiler::CompiledSpec;
use charter_runtime::engine::effects::HumanChannel;
use charter_runtime::engine::models::apply_overrides;
use charter_runtime::engine::provider::{BoxFuture, HumanRequest, ProviderError};
use charter_runtime::engine::run::{DeliveryTarget, RunConfig};
use charter_runtime::formats::scenario::{Cassette, Recorded, Scenario};
use charter_runtime::formats::trace::{TraceError, TraceEvent, TraceSink};
use charter_runtime::harness::record::{RecordingError, write_added_calls};
use charter_runtime::harness::{HarnessConfig, ProblemKind, ScenarioRef};
use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};
use charter_runtime::world::fork::Fork;
use charter_runtime::world::record::Recording;
use serde_json::Value;

use super::{VerifyArgs, VerifyFormat};
use crate::driver::{LiveEnvironment, LiveRun, TerminalRunOptions, model_overrides};
use crate::terminal::{Context, Outcome, print_err, print_error, print_out, summary_line};
use drift::Summary;

/// One selected scenario, read and compiled, ready to run.
struct Selected {
    reference: ScenarioRef,
    scenario: Scenario,
    /// The cassette's text, as read.
    text: String,
    cassette: Cassette,
    spec: CompiledSpec,
    /// The cassette's `--model` overrides with those given again on top.
    overrides: BTreeMap<String, String>,
}

/// What re-recording one scenario gave: its report, whether something would change on
/// disk or in behaviour, and why `--accept` wrote nothing, if it did not.
struct Done {
    report: String,
    changed: bool,
    not_written: Option<String>,
}

/// `charter verify --rerecord`.
pub fn run(args: &VerifyArgs, context: Context) -> anyhow::Result<Outcome> {
    if args.format == VerifyFormat::Json {
        print_error(
            context,
            "--rerecord prints its report as text; leave out --format json",
        );
        return Ok(Outcome::Usage);
    }
    let environment = LiveEnvironment::of_this_process();
    let checked = match select(args, context).and_then(|selected| {
        keys_present(&selected, &environment, context)?;
        Ok(selected)
    }) {
        Ok(selected) if selected.is_empty() => {
            print_error(context, &nothing_selected(args));
            return Ok(Outcome::Usage);
        }
        Ok(selected) => selected,
        Err(outcome) => return Ok(outcome),
    };
    let (mut changed, mut failed) = (false, false);
    let mut report = String::new();
    for one in &checked {
        let done = if args.missing_only {
            missing::rerecord(args, one, &environment, context)
        } else {
            all::rerecord(args, one, &environment)
        };
        match done {
            Ok(done) => {
                report.push_str(&done.report);
                changed |= done.changed;
                if let Some(message) = done.not_written {
                    print_error(context, &format!("{}: {message}", one.reference.id()));
                    failed = true;
                }
            }
            Err(message) => {
                print_error(context, &format!("{}: {message}", one.reference.id()));
                failed = true;
            }
        }
    }
    print_out(&report)?;
    if changed && !args.accept && !failed {
        let note = if args.missing_only {
            "nothing was written; give --accept to add these calls to the cassettes"
        } else {
            "nothing was written; give --accept to write the new recordings"
        };
        print_err(&summary_line(context, "note", note));
    }
    Ok(if failed || (changed && !args.accept) {
        Outcome::Failed
    } else {
        Outcome::Clean
    })
}

/// The usage error of a `--rerecord` that selects no scenario.
fn nothing_selected(args: &VerifyArgs) -> String {
    format!(
        "no golden scenario to re-record matches{}",
        args.filter
            .as_ref()
            .map(|pattern| format!(" --filter `{pattern}`"))
            .unwrap_or_default()
    )
}

/// Refuses (a usage error, each missing key named) when a provider a selected scenario
/// names has no key, before any scenario runs.
fn keys_present(
    selected: &[Selected],
    environment: &LiveEnvironment,
    context: Context,
) -> Result<(), Outcome> {
    for one in selected {
        let missing = environment.settings.missing_for(&one.spec);
        if !missing.is_empty() {
            for line in missing {
                print_error(context, &line);
            }
            return Err(Outcome::Usage);
        }
    }
    Ok(())
}

/// The selected scenarios, each with its spec compiled with the recording's `--model`
/// overrides and those given; a scenario that cannot be read is a usage error, and one
/// that cannot be re-recorded is left out with a note.
fn select(args: &VerifyArgs, context: Context) -> Result<Vec<Selected>, Outcome> {
    let usage = |message: &str| {
        print_error(context, message);
        Outcome::Usage
    };
    let config = HarnessConfig {
        filter: args.filter.clone(),
        partition: args.partition,
        ..HarnessConfig::default()
    };
    let found =
        charter_runtime::harness::discover(&args.dir).map_err(|error| usage(&error.to_string()))?;
    let given = model_overrides(context, &args.models)?;
    let mut selected = Vec::new();
    for reference in charter_runtime::harness::select(found, &config) {
        let shown = reference.shown("cassette.yaml");
        let scenario = Scenario::read(&reference.dir.join("scenario.yaml"))
            .map_err(|error| usage(&error.to_string()))?;
        let text = std::fs::read_to_string(reference.dir.join("cassette.yaml"))
            .map_err(|error| usage(&format!("cannot read {shown}: {error}")))?;
        let cassette = Cassette::from_yaml(&shown, &text)
            .map_err(|error| usage(&one_line(&error.to_string(), MAX_LINE_CHARS)))?;
        if let Some(why) = left_out(args, &scenario, &cassette) {
            let message = format!("{} {why}: it is not re-recorded", reference.id());
            print_err(&summary_line(context, "note", &message));
            continue;
        }
        let (mut spec, _) = crate::recording::compile_scenario_spec(
            context,
            &reference.dir,
            &scenario,
            "re-recorded",
        )?;
        let mut overrides = cassette.overrides();
        overrides.extend(given.clone());
        apply_overrides(&mut spec, &overrides).map_err(|message| usage(&message))?;
        selected.push(Selected {
            reference,
            scenario,
            text,
            cassette,
            spec,
            overrides,
        });
    }
    Ok(selected)
}

/// Why a scenario is not re-recorded, if it is not: a conversation, or (all live) a
/// cassette that injects faults a live run does not meet.
fn left_out(args: &VerifyArgs, scenario: &Scenario, cassette: &Cassette) -> Option<&'static str> {
    if scenario.turns.is_some() {
        return Some("is a conversation (`turns`)");
    }
    if !args.missing_only && !cassette.faults.is_empty() {
        return Some("injects `faults` from its cassette, which a live run does not meet");
    }
    None
}

/// The events of a run, kept where the caller can read them after the run.
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<TraceEvent>>>);

impl TraceSink for Kept {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(event.clone());
        Ok(())
    }
}

/// The human channel behind a re-recording's cassette: a question the cassette has no
/// answer for is not put to the terminal; it is noted and gets no answer, and the
/// scenario then reports it.
#[derive(Clone, Default)]
struct NoPerson(Arc<Mutex<Vec<HumanRequest>>>);

impl NoPerson {
    /// The first question no one answered, if any.
    fn first_unanswered(&self) -> Option<HumanRequest> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .first()
            .cloned()
    }
}

impl HumanChannel for NoPerson {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        let error = ProviderError::NoHumanAnswer {
            step: request.step.clone(),
            round: request.round,
            attempt: request.attempt,
        };
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(request);
        Box::pin(async move { Err(error) })
    }
}

/// What a live run of one scenario gave.
struct Ran {
    /// The run as recorded: its calls and answers of people in run order.
    recorded: Cassette,
    golden: Summary,
    now: Summary,
}

/// Runs `one` from its input with `fork` in front of the live providers, recorded under
/// `recorded`; a question the cassette has no answer for is an error.
fn run_live(
    one: &Selected,
    environment: &LiveEnvironment,
    fork: &Fork,
    recorded: Recorded,
) -> Result<Ran, String> {
    let providers = environment
        .providers(
            &one.spec,
            &[],
            &std::sync::Arc::new(charter_runtime::world::sandbox::Sandbox::off()),
        )
        .map_err(|error| one_line(&error, MAX_LINE_CHARS))?;
    let recording = Recording::new(environment.secrets.clone());
    let kept = Kept::default();
    let person = NoPerson::default();
    let options = TerminalRunOptions {
        show_output: false,
        more_sinks: vec![Box::new(kept.clone())],
        config: RunConfig {
            delivery: DeliveryTarget::Memory,
            ..RunConfig::default()
        },
    };
    print_err(&format!("re-record {}\n", one.reference.id()));
    let live_run = LiveRun::at_terminal_through(
        &one.spec,
        environment,
        (fork.provider(providers), fork.humans(person.clone())),
        &recording,
        options,
    );
    let ran = live_run.run(one.scenario.input.clone());
    if let Some(question) = person.first_unanswered() {
        return Err(format!(
            "the run asked a person a question at step `{}` (round {}) that the cassette has \
             no answer for; record the scenario with `charter run --record` instead",
            one_line(&question.step, MAX_LINE_CHARS),
            question.round
        ));
    }
    ran?;
    let events = kept
        .0
        .lock()
        .map(|events| events.clone())
        .unwrap_or_default();
    Ok(Ran {
        recorded: recording.cassette(recorded),
        golden: Summary::of_golden(&one.reference.dir),
        now: Summary::of_run(&events),
    })
}

/// Stages `cassette_text` as `one`'s cassette beside its `scenario.yaml` as written,
/// checks it as `charter verify --accept` then `charter verify` would, and writes
/// `cassette.yaml` and `trace.snap` when it passes; otherwise the sentence that says why
/// nothing was written (the unmet `expect`, or what else the check found).
fn write_checked(args: &VerifyArgs, one: &Selected, cassette_text: &str) -> Result<(), String> {
    match write_added_calls(&args.dir, &one.reference.dir, cassette_text) {
        Ok(_) => Ok(()),
        Err(RecordingError::Check(report)) => {
            let problems: Vec<String> = report
                .problems
                .iter()
                .map(|problem| one_line(&problem.message, MAX_LINE_CHARS))
                .collect();
            let unmet_expect = report
                .problems
                .iter()
                .all(|problem| problem.kind == ProblemKind::Expect);
            Err(if unmet_expect && !problems.is_empty() {
                format!(
                    "nothing was written: the new run does not meet the scenario's `expect` \
                     in {}: {}",
                    one_line(&one.reference.shown("scenario.yaml"), MAX_LINE_CHARS),
                    problems.join("; ")
                )
            } else {
                format!(
                    "nothing was written: with the new recording the scenario does not \
                     verify: {}",
                    problems.join("; ")
                )
            })
        }
        Err(error) => Err(format!("nothing was written: {error}")),
    }
}
