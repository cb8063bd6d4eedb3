//! `charter replay SCENARIO_DIR [--events FILE] [--out DIR]`: run a recorded scenario on a paused clock, showing its phases live.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use charter_compiler::CompiledSpec;
use charter_runtime::engine::models::apply_overrides;
use charter_runtime::engine::run::{DeliveryTarget, RunError};
use charter_runtime::formats::scenario::{Cassette, Recorded, Scenario};
use charter_runtime::formats::trace::{
    EventKind, Issue, Outcome as RunOutcome, RepairAction, ScoreResult, Tee, TraceError,
    TraceEvent, TraceSink,
};
use charter_runtime::world::jsonl::JsonlSink;
use charter_runtime::world::replay::{ReplayReport, replay_cassette};
use clap::Args;

use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};

use crate::loader::{
    ReadError, compile_whole, display_path, normalize, project_root_above, read_text_in,
};
use crate::{Context, Outcome, print_err, print_error, summary_line};

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

/// The spec of the scenario in `scenario_dir`, read inside its project and compiled
/// whole (`what` ends the message of a spec with errors: `nothing was {what}`), and its
/// path.
pub(crate) fn compile_scenario_spec(
    context: Context,
    scenario_dir: &Path,
    scenario: &Scenario,
    what: &str,
) -> Result<(CompiledSpec, PathBuf), Outcome> {
    let root = project_root(scenario_dir);
    let spec_path = root.join(&scenario.spec);
    let spec_name = display_path(&normalize(&spec_path));
    let text = read_text_in(&spec_path, &spec_name, Some(&project_root_above(&root))).map_err(
        |error| {
            let reason = match error {
                ReadError::Missing => format!("`{spec_name}` does not exist"),
                ReadError::Other(message) => message,
            };
            print_error(
                context,
                &format!(
                    "cannot read the scenario's spec: {reason} (`spec:` in scenario.yaml is \
                     relative to `{}`, the directory that holds golden/)",
                    display_path(&root)
                ),
            );
            Outcome::Failed
        },
    )?;
    let Some(spec) = compile_whole(context, &spec_name, &text, &spec_path, what) else {
        return Err(Outcome::Failed);
    };
    Ok((spec, spec_path))
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
    crate::print_answer(outcome.answer.as_ref())?;
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

/// `outcome: OUTCOME (REASON): MESSAGE; delivered ID (HASH) to PATH`.
fn outcome_line(outcome: &charter_runtime::engine::run::RunOutcome) -> String {
    let mut line = format!("outcome: {} ({})", outcome.outcome, outcome.reason);
    if let Some(message) = &outcome.message {
        line.push_str(&format!(": {}", one_line(message, MAX_LINE_CHARS)));
    }
    if let Some(delivered) = &outcome.delivered {
        line.push_str(&format!(
            "; delivered {} ({})",
            delivered.candidate_id, delivered.hash
        ));
        if let Some(path) = &delivered.path {
            line.push_str(&format!(" to {}", display_path(path)));
        }
    }
    line
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
            crate::print_answer(previous.outcome.answer.as_ref())
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

/// The directory that holds `golden/` above the scenario; the current directory when
/// the scenario is not under a `golden/` directory.
pub(crate) fn project_root(scenario: &Path) -> PathBuf {
    let absolute = std::path::absolute(scenario).unwrap_or_else(|_| scenario.to_path_buf());
    absolute
        .ancestors()
        .find(|ancestor| ancestor.file_name().is_some_and(|name| name == "golden"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Why a delivery was refused, never quoting an empty hash.
fn delivery_refused(candidate: &str, expected_hash: &str, actual_hash: &str) -> String {
    match (expected_hash.is_empty(), actual_hash.is_empty()) {
        (true, true) => {
            format!("delivery of {candidate} REFUSED: no candidate was evaluated")
        }
        (false, true) => format!(
            "delivery of {candidate} REFUSED: no evaluated candidate is `{candidate}` (the gate evaluated {})",
            short(expected_hash)
        ),
        (true, false) => format!(
            "delivery of {candidate} REFUSED: it was never evaluated (it hashes to {})",
            short(actual_hash)
        ),
        (false, false) => format!(
            "delivery of {candidate} REFUSED: evaluated {}, found {}",
            short(expected_hash),
            short(actual_hash)
        ),
    }
}

fn short(hash: &str) -> &str {
    hash.get(..19).unwrap_or(hash)
}

/// Shows a run's phases on stderr as its events are appended, counting off the items of
/// each `each` fan-out (`item ok [3/8]`).
#[derive(Debug, Default)]
pub(crate) struct LiveDisplay {
    /// Items settled and items in all, by (`each` step, round).
    fan_out: BTreeMap<(String, u64), (u64, u64)>,
    /// The calls in flight, for the heartbeat of a live run.
    calls: Option<std::sync::Arc<crate::live::LiveCalls>>,
}

impl LiveDisplay {
    /// A display that also keeps `calls` up to date (a live run's heartbeat).
    pub(crate) fn with_calls(calls: std::sync::Arc<crate::live::LiveCalls>) -> Self {
        LiveDisplay {
            calls: Some(calls),
            ..LiveDisplay::default()
        }
    }

    /// Tells the calls in flight what `event` started or ended.
    fn track(&self, event: &TraceEvent) {
        let Some(calls) = &self.calls else {
            return;
        };
        let mut slot = event.step.as_deref().unwrap_or_default().to_string();
        if let Some(item) = &event.item {
            slot.push_str(&format!("[{item}]"));
        }
        match &event.kind {
            EventKind::ModelCall { role, .. } => {
                let place = format!("{slot}#{}", event.attempt.unwrap_or(1));
                calls.call_started(&slot, &place, role);
            }
            EventKind::ModelResult { .. }
            | EventKind::Timeout { .. }
            | EventKind::Retry { .. }
            | EventKind::ItemDone { .. }
            | EventKind::StepStarted { .. } => calls.call_ended(&slot),
            EventKind::RunFinished { .. } => calls.all_ended(),
            _ => {}
        }
    }

    /// ` [k/n]` after an item settles, when its step said how many items it calls.
    fn progress(&mut self, event: &TraceEvent) -> String {
        let key = (
            event.step.as_deref().unwrap_or_default().to_string(),
            event.round,
        );
        match &event.kind {
            EventKind::StepStarted {
                items: Some(items), ..
            } => {
                self.fan_out.insert(key, (0, *items));
                String::new()
            }
            EventKind::ItemDone { .. } | EventKind::ItemSkipped { .. } => {
                match self.fan_out.get_mut(&key) {
                    Some((settled, items)) => {
                        *settled += 1;
                        format!(" [{settled}/{items}]")
                    }
                    None => String::new(),
                }
            }
            _ => String::new(),
        }
    }
}

impl TraceSink for LiveDisplay {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        self.track(event);
        let progress = self.progress(event);
        if let Some(line) = describe(event) {
            let time = format_time(event.t_ms);
            let mut place = event.step.as_deref().unwrap_or_default().to_string();
            if let Some(item) = &event.item {
                place.push_str(&format!("[{item}]"));
            }
            if let Some(attempt) = event.attempt {
                place.push_str(&format!("#{attempt}"));
            }
            // What a cassette or a model said is shown escaped and cut (DESIGN §15).
            let place = one_line(&place, 200);
            let line = one_line(&line, MAX_LINE_CHARS);
            print_err(&format!(
                "{time:>9}  r{:<2} {place:<24} {line}{progress}\n",
                event.round
            ));
        }
        Ok(())
    }
}

/// One line for the events worth showing live, built by the section of the run the event
/// belongs to: a step and its model calls, tool calls, work items, the evaluation of a
/// candidate, and the run's end. Each kind is named here, so a new kind of event cannot
/// go unshown unnoticed.
fn describe(event: &TraceEvent) -> Option<String> {
    let kind = &event.kind;
    match kind {
        // The runtime's phases (`planning`, `evaluating`...) are not the flow's words:
        // the view names the flow's own steps instead, each as it starts.
        EventKind::RunStarted { .. }
        | EventKind::PlanFrozen { .. }
        | EventKind::RunFinished { .. }
        | EventKind::Phase { .. } => None,
        EventKind::StepStarted { .. }
        | EventKind::ModelCall { .. }
        | EventKind::ModelResult { .. }
        | EventKind::ProviderNote { .. }
        | EventKind::Timeout { .. }
        | EventKind::StepError { .. }
        | EventKind::Retry { .. } => step_line(kind),
        EventKind::ToolCall { .. }
        | EventKind::ToolTimeout { .. }
        | EventKind::ToolDenied { .. }
        | EventKind::ContractViolation { .. } => tool_line(kind),
        EventKind::ItemDone { .. } | EventKind::ItemSkipped { .. } => item_line(kind),
        EventKind::Candidate { .. }
        | EventKind::Gate { .. }
        | EventKind::Repair { .. }
        | EventKind::NoProgress { .. }
        | EventKind::RepairStopped { .. }
        | EventKind::Budget { .. } => evaluation_line(kind),
        EventKind::Delivery { .. }
        | EventKind::InvariantViolated { .. }
        | EventKind::Human { .. }
        | EventKind::Session { .. } => ending_line(kind),
    }
}

/// The line of a step's start, a model call and its answer, a timeout or a retry.
fn step_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::StepStarted { role, items, tool } => {
            let role = match (role, tool) {
                (Some(role), _) => format!(" ({role})"),
                (None, Some(tool)) => format!(" (tool {tool})"),
                (None, None) => String::new(),
            };
            match items {
                Some(1) => format!("step{role}: 1 item"),
                Some(items) => format!("step{role}: {items} items"),
                None => format!("step{role}"),
            }
        }
        EventKind::ModelCall { role, model, .. } => format!("call {role} on {model}"),
        EventKind::ModelResult {
            input_tokens,
            output_tokens,
            latency_ms,
            ..
        } => format!(
            "answer in {} ({input_tokens}+{output_tokens} tokens)",
            format_time(*latency_ms)
        ),
        EventKind::ProviderNote { message, .. } => format!("note: {message}"),
        EventKind::Timeout { after_ms } => format!("timeout after {}", format_time(*after_ms)),
        EventKind::StepError { error, to } => format!("FAILED, on_error -> {to}: {error}"),
        EventKind::Retry {
            retry,
            next,
            delay_ms,
            reason,
        } => {
            let retry = serde_json::to_value(retry)
                .ok()
                .and_then(|value| value.as_str().map(str::to_string))
                .unwrap_or_default();
            let what = if retry == "repair" {
                "round"
            } else {
                "attempt"
            };
            format!(
                "retry ({retry}) -> {what} {next} in {}: {reason}",
                format_time(*delay_ms)
            )
        }
        _ => return None,
    };
    Some(line)
}

/// The line of a tool call: its result, its timeout, its denial, or a broken contract
/// (of a model's output too).
fn tool_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::ToolCall { tool, result, .. } => match result
            .as_object()
            .filter(|object| object.len() == 1)
            .and_then(|object| object.get("error"))
            .and_then(serde_json::Value::as_str)
        {
            Some(error) => format!("tool {tool} FAILED: {error}"),
            None => format!("tool {tool}"),
        },
        EventKind::ToolTimeout {
            tool, timeout_ms, ..
        } => format!(
            "tool {tool} TIMED OUT after {} (its process group killed)",
            charter_runtime::formats::scenario::duration_text::format(
                std::time::Duration::from_millis(*timeout_ms)
            )
        ),
        EventKind::ToolDenied {
            tool,
            rule: Some(rule),
            ..
        } => format!("tool {tool} DENIED by `{rule}`"),
        EventKind::ToolDenied { tool, allowed, .. } => {
            format!("tool {tool} DENIED (allowed: {})", allowed.join(", "))
        }
        EventKind::ContractViolation {
            contract,
            tool,
            violations,
        } => format!(
            "contract violation{} of {contract}: {}",
            tool.as_ref()
                .map(|tool| format!(" (tool {tool})"))
                .unwrap_or_default(),
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        _ => return None,
    };
    Some(line)
}

/// The line of a work item of an `each` step that finished or was skipped.
fn item_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::ItemDone { status, error } => match error {
            Some(error) => format!("item {status:?}: {error}").to_lowercase(),
            None => "item ok".to_string(),
        },
        EventKind::ItemSkipped { because } => format!("item skipped (depends on {because})"),
        _ => return None,
    };
    Some(line)
}

/// The line of a round's candidate, its gate, the repair chosen or stopped, a round
/// without progress, or a budget used up.
fn evaluation_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::Candidate {
            id,
            hash,
            items,
            failed,
            skipped,
        } => format!(
            "candidate {id} {} ({items} items, {} failed, {} skipped)",
            short(hash),
            failed.len(),
            skipped.len()
        ),
        EventKind::Gate {
            gate,
            candidate,
            passed,
            score,
            issues,
            scores,
            ..
        } => {
            let verdict = GateVerdict {
                passed: *passed,
                score: *score,
                scores,
                issues,
            };
            format!(
                "gate {gate} on {candidate}: {}",
                gate_verdict_text(&verdict)
            )
        }
        EventKind::Repair {
            action,
            codes,
            items,
            ..
        } => repair_line(action, codes, items),
        EventKind::NoProgress { rounds, limit } => format!("no progress ({rounds} of {limit})"),
        EventKind::RepairStopped { reason, best } => match best {
            Some(best) => format!("repair stopped ({reason}): the best candidate is {best}"),
            None => format!("repair stopped ({reason}): no candidate passed the hard rules"),
        },
        EventKind::Budget {
            budget,
            used,
            limit,
        } => {
            format!("budget {budget} exhausted ({used} of {limit})")
        }
        _ => return None,
    };
    Some(line)
}

/// What a gate said of a candidate, as `gate_verdict_text` shows it.
struct GateVerdict<'a> {
    passed: bool,
    score: Option<f64>,
    scores: &'a [ScoreResult],
    issues: &'a [Issue],
}

/// `PASS score 0.8 [clarity=0.9 tone=?] issues E1, E2`: the verdict, the score, each
/// score rule's value and the codes of the issues raised.
fn gate_verdict_text(verdict: &GateVerdict<'_>) -> String {
    let scores = verdict
        .scores
        .iter()
        .map(|score| match score.value {
            Some(value) => format!("{}={}", score.name, number(value)),
            None => format!("{}=?", score.name),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut codes: Vec<&str> = verdict
        .issues
        .iter()
        .map(|issue| issue.code.as_str())
        .collect();
    codes.dedup();
    format!(
        "{}{}{}{}",
        if verdict.passed { "PASS" } else { "FAIL" },
        verdict
            .score
            .map(|score| format!(" score {}", number(score)))
            .unwrap_or_default(),
        if scores.is_empty() {
            String::new()
        } else {
            format!(" [{scores}]")
        },
        if codes.is_empty() {
            String::new()
        } else {
            format!(" issues {}", codes.join(", "))
        }
    )
}

/// `repair: rerun STEP items a, b for CODE, CODE`: the action chosen, the items it
/// reruns (none named: all) and the issue codes that led to it.
fn repair_line(action: &RepairAction, codes: &[String], items: &[String]) -> String {
    let action = serde_json::to_value(action)
        .ok()
        .map(|value| {
            let kind = value["kind"].as_str().unwrap_or("?").to_string();
            match value["step"].as_str() {
                Some(step) => format!("{kind} {step}"),
                None => kind,
            }
        })
        .unwrap_or_default();
    let items = if items.is_empty() {
        String::new()
    } else {
        format!(" items {}", items.join(", "))
    };
    format!("repair: {action}{items} for {}", codes.join(", "))
}

/// The line of a delivery (verified or refused), a broken invariant, a person's answer,
/// or a conversation's turn kept in its session.
fn ending_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::Delivery {
            candidate,
            matches,
            expected_hash,
            actual_hash,
            ..
        } => {
            if *matches {
                format!("delivered {candidate}, hash verified")
            } else {
                delivery_refused(candidate, expected_hash, actual_hash)
            }
        }
        EventKind::InvariantViolated { invariant, message } => {
            format!("invariant {invariant} violated: {message}")
        }
        EventKind::Human { question, answer } => format!("asked {question:?}: {answer}"),
        EventKind::Session {
            turn, remembered, ..
        } => {
            let remembered: Vec<String> = remembered
                .iter()
                .map(|(field, value)| format!("{field} = {value}"))
                .collect();
            if remembered.is_empty() {
                format!("turn {turn} kept")
            } else {
                format!("turn {turn} kept; remembered {}", remembered.join(", "))
            }
        }
        _ => return None,
    };
    Some(line)
}

/// A score as people read it: at most two decimals, no trailing zeros.
fn number(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `totals: 6 calls, 8,300 tokens (6,400 in, 1,900 out), $0.0176; 3m12s virtual in 4ms`
/// (a replay), or `…; 1m20s` (a live run, whose clock is the wall clock).
pub(crate) fn totals_line(
    totals: &charter_runtime::totals::RunTotals,
    real: std::time::Duration,
    virtual_clock: bool,
) -> String {
    use charter_runtime::formats::scenario::duration_text::format;
    let run_time = format(std::time::Duration::from_millis(totals.t_ms));
    if virtual_clock {
        format!(
            "totals: {}; {run_time} virtual in {}",
            totals.usage_text(),
            format(real)
        )
    } else {
        format!("totals: {}; {}", totals.usage_text(), format(real))
    }
}

fn format_time(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{:03}s", ms / 1000, ms % 1000)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::delivery_refused;

    #[test]
    fn a_refused_delivery_never_quotes_an_empty_hash() {
        for (expected, actual, says) in [
            ("", "", "no candidate was evaluated"),
            (
                "sha256:aaaaaaaaaaaaaaaaaaaa",
                "",
                "no evaluated candidate is `c1`",
            ),
            ("", "sha256:bbbbbbbbbbbbbbbbbbbb", "it was never evaluated"),
            (
                "sha256:aaaaaaaaaaaaaaaaaaaa",
                "sha256:bbbbbbbbbbbbbbbbbbbb",
                "evaluated sha256:aaaaaaaaaaaa, found sha256:bbbbbbbbbbbb",
            ),
        ] {
            let line = delivery_refused("c1", expected, actual);
            assert!(line.contains(says), "{line}");
            assert!(
                !line.contains(", found ,") && !line.ends_with("found "),
                "{line}"
            );
            assert!(
                !line.contains("evaluated ,") && !line.contains("evaluated )"),
                "{line}"
            );
        }
    }
}
