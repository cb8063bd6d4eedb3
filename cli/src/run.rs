//! `charter run SPEC --input FILE [--session ID] [--out DIR] [--events FILE] [--record DIR] [--tool NAME=COMMAND]... [--run-dir DIR]` and `charter run --resume RUN_DIR [--force]`: a live run against real providers, shown live, journaled for resume, optionally recorded as a scenario.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use charter_compiler::CompiledSpec;
use charter_runtime::engine::run::{DeliveryTarget, RunConfig, RunOutcome};
use charter_runtime::engine::session::Session;
use charter_runtime::engine::validate::{Violation, validate_request};
use charter_runtime::formats::scenario::{Recorded, Scenario};
use charter_runtime::formats::trace::{Outcome as RunState, Reason};
use charter_runtime::harness::record::expectation_of;
use charter_runtime::world::files;
use charter_runtime::world::files::DirLock;
use charter_runtime::world::jsonl::JsonlSink;
use charter_runtime::world::providers::Providers;
use charter_runtime::world::record::write_atomically;
use charter_runtime::world::secrets::Scrubber;
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::display::outcome_line;
use crate::driver::{
    LiveEnvironment, LiveFlags, LiveRun, LiveTotals, PreparedSpec, RunJournal, TerminalRunOptions,
    open_journal, tool_name,
};
use crate::loader::display_path;
use crate::recording::{
    absolute, check_record_spec, scenario_spec, sessions_dir, shown_from_here, write_recorded,
};
use crate::terminal::{Context, Outcome, print_err, print_error, summary_line};

/// Run a spec live against its models (OpenAI-compatible or Anthropic).
///
/// Keys and addresses come from OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY and
/// ANTHROPIC_BASE_URL; they never reach a trace, a journal or a recording. The phases
/// are shown on stderr as they happen. Every answer is journaled in the run directory as
/// it arrives, so a run that was killed continues with `--resume RUN_DIR` without asking
/// the model again for any answered call, with the same --out, --events and --record;
/// a resume refuses a spec, prompt or input that changed since (unless --force). Ctrl-C
/// and SIGTERM end the run `cancelled`. With --session ID the run is one turn of a
/// conversation kept in `.charter/sessions/ID.json` (for a spec with a `session`): the
/// turn reads it, and a turn that answered saves it back (atomically). With --fork
/// SCENARIO_DIR --at STEP[@ROUND] the run is a recorded scenario's, answered from its
/// cassette up to STEP and live from there (no run directory, no --resume). Exit status: 0
/// completed, 3 another terminal state, 1 an error, 2 a usage error.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter run specs/seeds/closed_loop.charter --input examples/closed_loop/request.json --record golden/closed_loop/live --tool web_search='python3 examples/tools/search.py'\n\nFork example: charter run --fork golden/closed_loop/happy_path --at evaluate --record golden/closed_loop/evaluated_now\n  (plan and execute are answered from the recording; the models are asked from evaluate on)"
)]
pub struct RunArgs {
    /// The spec to run.
    #[arg(value_name = "SPEC", required_unless_present_any = ["resume", "fork"])]
    pub spec: Option<PathBuf>,

    /// The run's input (the `request`), a JSON file.
    #[arg(long, value_name = "FILE", required_unless_present_any = ["resume", "fork"])]
    pub input: Option<PathBuf>,

    /// Fork the recorded run of the golden scenario SCENARIO_DIR (its scenario.yaml and
    /// cassette.yaml) at --at: the run starts over on the scenario's input with every
    /// call and `ask` before the fork point answered from the cassette at once (no model
    /// is asked), then goes live from the first call of the fork step in its round on:
    /// that call and every one after it go to the spec's models (or --model; the
    /// recording's own --model overrides apply otherwise), `tool` steps run with --tool.
    /// Add --record DIR to keep the forked run as a new scenario.
    #[arg(
        long,
        value_name = "SCENARIO_DIR",
        requires = "at",
        conflicts_with_all = ["spec", "input", "resume", "session", "run_dir"]
    )]
    pub fork: Option<PathBuf>,

    /// With --fork: the step to go live at, in round 1, or STEP@ROUND for a later repair
    /// round (e.g. `evaluate@2`).
    #[arg(long, value_name = "STEP[@ROUND]", requires = "fork")]
    pub at: Option<String>,

    /// Run one turn of the conversation ID: read `.charter/sessions/ID.json` (a new
    /// session when there is none), and save it after a turn that answered. ID is a
    /// plain name (letters, digits, `-`, `_`).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,

    /// Write the delivery (`delivery.json`) into DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Also write every trace event as one JSON line to FILE.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,

    /// Record the run as a scenario that `charter verify` passes: `scenario.yaml` (with an
    /// `expect` of how the run ended), `cassette.yaml` (the calls in the order the run made
    /// them, each with the hash of its prompt) and `trace.snap` in DIR, written only once
    /// its replay ends as the run did. A DIR that already holds a scenario is refused
    /// unless --force (which keeps its description and `expect`). The scenario's `spec:`
    /// is relative to the project root.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,

    #[command(flatten)]
    pub live: LiveFlags,

    /// Where the run keeps its journal and trace (default `.charter/runs/<time>-<random>`).
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub run_dir: Option<PathBuf>,

    /// Continue the run kept in RUN_DIR (its spec, input, tools, --model, --out, --events
    /// and --record are read from there; any given again replace them).
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["spec", "input"])]
    pub resume: Option<PathBuf>,

    /// With --resume: continue even though the spec, a prompt or the input changed since
    /// the run started (the journal's answers were given to the old ones). With --record:
    /// overwrite the scenario DIR holds.
    #[arg(long)]
    pub force: bool,
}

/// `run.json` in a run directory: what to run again on `--resume`, and the hashes a
/// resume checks. Written after the secrets are scrubbed from it: the input is named by
/// its file (and hash), not copied; a tool command keeps `<redacted>` for a secret.
#[derive(Debug, Serialize, Deserialize)]
struct RunFile {
    spec: PathBuf,
    input: PathBuf,
    tools: Vec<String>,
    /// `--model` overrides, `ALIAS=PROVIDER:MODEL`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    models: Vec<String>,
    #[serde(default)]
    out: Option<PathBuf>,
    #[serde(default)]
    events: Option<PathBuf>,
    #[serde(default)]
    record: Option<PathBuf>,
    /// `--session ID`, and the turn of that session this run is (a resume refuses a
    /// session that has moved on since).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session_turn: Option<u64>,
    #[serde(default)]
    hashes: RunHashes,
}

/// What a journal's answers were given to: the spec, its prompts, rules and files, and
/// the input.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct RunHashes {
    spec: String,
    prompts: std::collections::BTreeMap<String, String>,
    rules: std::collections::BTreeMap<String, String>,
    sources: std::collections::BTreeMap<String, String>,
    input: String,
}

impl RunHashes {
    fn of(spec: &CompiledSpec, input: &Value) -> Self {
        let recorded = Recorded::from_spec(spec);
        RunHashes {
            spec: recorded.spec_hash,
            prompts: recorded.prompts,
            rules: recorded.rules,
            sources: spec.source_hashes.clone(),
            input: charter_runtime::formats::canonical::hash_value(input),
        }
    }

    /// What changed from `self` (as the run started) to `now`, in words.
    fn changes(&self, now: &RunHashes) -> Vec<String> {
        let mut changed = Vec::new();
        if self.spec != now.spec || self.sources != now.sources || self.rules != now.rules {
            changed.push("the spec".to_string());
        }
        let roles: std::collections::BTreeSet<&String> =
            self.prompts.keys().chain(now.prompts.keys()).collect();
        for role in roles {
            if self.prompts.get(role) != now.prompts.get(role) {
                changed.push(format!("the prompt of `{role}`"));
            }
        }
        if self.input != now.input {
            changed.push("the input".to_string());
        }
        changed
    }
}

const RUN_FILE: &str = "run.json";
const JOURNAL_FILE: &str = "calls.jsonl";
const EVENTS_FILE: &str = "events.jsonl";

/// A run ready to start: what the stages before it (prepare, providers, journal) found.
struct ReadyRun {
    /// The run directory, held while this process runs it.
    _lock: DirLock,
    run_dir: PathBuf,
    run_file: RunFile,
    input: Value,
    prepared: PreparedSpec,
    /// The session this run is a turn of: its file, and its state before the turn.
    session: Option<(PathBuf, Session)>,
    environment: LiveEnvironment,
    providers: Providers,
    journal: RunJournal,
}

/// `charter run`: the stages before the run, the run itself at the terminal, then what
/// it reports (its outcome, totals and answer), its session turn saved and its recording.
pub fn run(args: &RunArgs, context: Context) -> anyhow::Result<Outcome> {
    let ready = match ready_to_run(args, context) {
        Ok(ready) => ready,
        Err(outcome) => return Ok(outcome),
    };
    announce(args, &ready);
    let totals = LiveTotals::start(&ready.prepared.spec);
    let live_run = match live_run_at_terminal(args, context, &ready, &totals) {
        Ok(live_run) => live_run,
        Err(outcome) => return Ok(outcome),
    };
    let result = live_run.run(ready.input.clone());
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            print_error(context, &error);
            // What the failed run used so far is still worth knowing (it was paid for).
            print_err(&totals.line());
            return Ok(Outcome::Failed);
        }
    };
    print_err(&format!("{}\n", outcome_line(&outcome)));
    print_err(&totals.line());
    crate::terminal::print_answer(outcome.answer.as_ref())?;
    if let Err(failed) = save_session_turn(context, &ready, &outcome)
        .and_then(|()| record_run(context, &ready, &outcome))
    {
        return Ok(failed);
    }
    Ok(if outcome.outcome == RunState::Completed {
        Outcome::Clean
    } else {
        Outcome::NotCompleted
    })
}

/// The stages before the run, each refusal reported as it is found: prepare (the run
/// directory and `run.json`, the spec, the input, the session), then the providers, then
/// the journal. Nothing has been asked of a model yet.
fn ready_to_run(args: &RunArgs, context: Context) -> Result<ReadyRun, Outcome> {
    let Prepared {
        run_dir,
        mut run_file,
        input,
    } = prepare(args, context)?;
    let prepared = PreparedSpec::compile(context, &run_file.spec, &run_file.models, "run")?;
    let spec = &prepared.spec;
    // The input is checked before anything runs or is asked for (API keys included).
    if let Err(violations) = validate_request(spec, &input) {
        report_bad_input(context, args, &run_dir, spec, &violations);
        return Err(Outcome::Usage);
    }
    let session = match &run_file.session {
        Some(id) => Some(
            open_session(spec, id, &run_file, args.resume.is_some()).map_err(|message| {
                print_error(context, &message);
                // Nothing ran: the run directory made for this run goes again.
                if args.resume.is_none() {
                    let _ = std::fs::remove_dir(&run_dir);
                }
                Outcome::Usage
            })?,
        ),
        None => None,
    };
    run_file.session_turn = session.as_ref().map(|(_, session)| session.next_turn());
    let environment = LiveEnvironment::of_this_process();
    let providers =
        environment.providers_at_terminal(context, spec, &run_file.tools, args.live.sandbox)?;
    let hashes = RunHashes::of(spec, &input);
    // Held from the first write in the run directory until the run ends.
    let lock = hold_run_dir(context, &run_dir)?;
    keep_run_file(
        args,
        context,
        &run_dir,
        &mut run_file,
        hashes,
        &environment.scrubber,
    )?;
    let journal = open_journal(&run_dir.join(JOURNAL_FILE), &environment).map_err(|message| {
        print_error(context, &message);
        Outcome::Failed
    })?;
    Ok(ReadyRun {
        _lock: lock,
        run_dir,
        run_file,
        input,
        prepared,
        session,
        environment,
        providers,
        journal,
    })
}

/// Holds the run directory for this process (DESIGN §13.3): a run that another process
/// is running (a `charter serve`, another `charter run --resume`) is refused, never run
/// twice.
fn hold_run_dir(context: Context, run_dir: &Path) -> Result<DirLock, Outcome> {
    match DirLock::try_hold(run_dir) {
        Ok(Some(lock)) => Ok(lock),
        Ok(None) => {
            print_error(
                context,
                &format!(
                    "run directory `{}` is being run by another process (a `charter serve` or another `charter run --resume`); wait for it to end",
                    run_dir.display()
                ),
            );
            Err(Outcome::Failed)
        }
        Err(error) => {
            print_error(
                context,
                &format!("cannot lock run directory `{}`: {error}", run_dir.display()),
            );
            Err(Outcome::Failed)
        }
    }
}

/// Refuses to resume a run whose spec, prompts or input changed since its journal
/// answered them (unless --force), then writes `run.json` with the hashes of what this
/// run answers, so that the next resume can check them.
fn keep_run_file(
    args: &RunArgs,
    context: Context,
    run_dir: &Path,
    run_file: &mut RunFile,
    hashes: RunHashes,
    scrubber: &Scrubber,
) -> Result<(), Outcome> {
    if args.resume.is_some() {
        let changed = run_file.hashes.changes(&hashes);
        if !changed.is_empty() && !args.force {
            print_error(
                context,
                &format!(
                    "{} changed since the run in `{}` started; its journal answered the old \
                     ones (start a new run, or give --force to continue anyway)",
                    changed.join(", "),
                    display_path(run_dir)
                ),
            );
            return Err(Outcome::Usage);
        }
    }
    run_file.hashes = hashes;
    write_run_file(run_dir, run_file, scrubber).map_err(|error| {
        print_error(
            context,
            &format!(
                "cannot write `{}`: {error}",
                display_path(&run_dir.join(RUN_FILE))
            ),
        );
        Outcome::Failed
    })
}

/// The run's first lines on stderr: what runs, and where (with how many answers the
/// journal already held, on a resume), then each model alias `--model` moved.
fn announce(args: &RunArgs, ready: &ReadyRun) {
    let spec = &ready.prepared.spec;
    print_err(&format!(
        "run {}: spec {} {} in {}{}\n",
        ready.prepared.shown_path,
        spec.name,
        spec.version,
        display_path(&ready.run_dir),
        if args.resume.is_some() {
            format!(
                " (resumed: {} answer(s) from the journal)",
                ready.journal.answers_kept
            )
        } else {
            String::new()
        }
    ));
    for (alias, target) in &ready.prepared.overrides {
        print_err(&format!("model `{alias}` runs on {target} (--model)\n"));
    }
}

/// The run stage as `charter run` wires it: the live view with the totals and the events
/// files (`events.jsonl` in the run directory, and --events), the delivery into --out or
/// kept in memory, and the session the run is a turn of.
fn live_run_at_terminal<'ready>(
    args: &RunArgs,
    context: Context,
    ready: &'ready ReadyRun,
    totals: &LiveTotals,
) -> Result<LiveRun<'ready>, Outcome> {
    let mut more_sinks = vec![totals.sink()];
    let events_files =
        std::iter::once(ready.run_dir.join(EVENTS_FILE)).chain(ready.run_file.events.clone());
    for path in events_files {
        let sink = JsonlSink::create(&path).map_err(|error| {
            print_error(context, &error.to_string());
            Outcome::Usage
        })?;
        more_sinks.push(Box::new(sink));
    }
    let config = RunConfig {
        session: ready.session.as_ref().map(|(_, session)| session.clone()),
        ..RunConfig::default()
    };
    let config = match &ready.run_file.out {
        Some(directory) => config.with_out_dir(directory.clone()),
        None => RunConfig {
            delivery: DeliveryTarget::Memory,
            ..config
        },
    };
    Ok(LiveRun::at_terminal(
        &ready.prepared.spec,
        &ready.environment,
        ready.providers.clone(),
        &ready.journal.recording,
        TerminalRunOptions {
            show_output: args.live.show_output,
            more_sinks,
            config,
        },
    ))
}

/// Saves the turn the run took to its session (atomically), or says that the session is
/// unchanged because the turn did not answer.
fn save_session_turn(
    context: Context,
    ready: &ReadyRun,
    outcome: &RunOutcome,
) -> Result<(), Outcome> {
    let (Some((path, _)), Some(id)) = (&ready.session, &ready.run_file.session) else {
        return Ok(());
    };
    match &outcome.session {
        Some(next) => {
            let started = next.turn_count.saturating_sub(1);
            let scrubber = &ready.environment.scrubber;
            charter_runtime::world::sessions::save_turn(
                path,
                &ready.prepared.spec,
                started,
                next,
                scrubber,
            )
            .map_err(|error| {
                print_error(context, &error.to_string());
                Outcome::Failed
            })?;
            print_err(&format!(
                "session {id}: turn {} saved to {}\n",
                next.turn_count,
                display_path(path)
            ));
        }
        None => print_err(&format!(
            "session {id}: unchanged (the turn did not answer)\n"
        )),
    }
    Ok(())
}

/// Writes the run as a scenario into the --record directory, if one was given: its
/// calls in the order the run made them, an `expect` of how it ended (or the one --force
/// keeps), and the trace snapshot its replay gives, checked as `charter verify` checks
/// it. A cancelled run is not recorded: `--resume` continues it and records it then.
fn record_run(context: Context, ready: &ReadyRun, outcome: &RunOutcome) -> Result<(), Outcome> {
    let Some(directory) = &ready.run_file.record else {
        return Ok(());
    };
    if outcome.reason == Reason::Cancelled {
        print_err(&summary_line(
            context,
            "note",
            &format!(
                "the run was cancelled, so nothing was recorded to `{}`; `charter run --resume {}` continues it and records it when it ends",
                shown_from_here(directory),
                display_path(&ready.run_dir)
            ),
        ));
        return Ok(());
    }
    let spec = &ready.prepared.spec;
    // Overwriting (--force): what a person wrote about the scenario stays.
    let kept = Scenario::read(&directory.join("scenario.yaml")).ok();
    let scenario = Scenario {
        spec: scenario_spec(&ready.run_file.spec, directory),
        description: kept
            .as_ref()
            .and_then(|kept| kept.description.clone())
            .or_else(|| Some(format!("recorded live run of {}", spec.name))),
        input: ready.environment.scrubber.value(&ready.input),
        turns: None,
        expect: kept
            .and_then(|kept| kept.expect)
            .or_else(|| Some(expectation_of(outcome))),
    };
    let mut recorded = Recorded::from_spec(spec);
    recorded.overrides = ready.prepared.overrides.clone();
    let cassette = ready.journal.recording.cassette(recorded);
    write_recorded(context, directory, scenario, cassette).inspect_err(|_| {
        print_err(&format!(
            "help: the run's answers are kept in `{}`; `charter run --resume {} --record DIR` records them again without asking a model\n",
            display_path(&ready.run_dir),
            display_path(&ready.run_dir)
        ));
    })
}

/// Loads session `id` for `spec` (a new one when it has no file yet): its path and state.
/// A spec without a `session`, a recording of a session that already has turns, and a
/// resume of a turn the session has moved past are refused with a sentence that says why.
fn open_session(
    spec: &CompiledSpec,
    id: &str,
    run_file: &RunFile,
    resuming: bool,
) -> Result<(PathBuf, Session), String> {
    if spec.session.is_none() {
        return Err(format!(
            "--session {id}: spec `{}` declares no `session`, so it keeps nothing between \
             turns (add `session NAME keep N {{ ... }}` to the spec, or run without --session)",
            spec.name
        ));
    }
    let path = charter_runtime::world::sessions::session_path(&sessions_dir(), id)
        .map_err(|error| error.to_string())?;
    let session =
        charter_runtime::world::sessions::load(&path, spec).map_err(|error| error.to_string())?;
    if resuming
        && run_file
            .session_turn
            .is_some_and(|turn| turn != session.next_turn())
    {
        return Err(format!(
            "session {id} has moved on since this run started (it is at turn {}); the turn \
             was saved already or another turn ran; start a new run instead",
            session.turn_count
        ));
    }
    if run_file.record.is_some() && session.turn_count > 0 {
        return Err(format!(
            "--record starts from a new session, and session {id} already has {} turn(s); \
             record the whole conversation with `charter chat --record DIR`",
            session.turn_count
        ));
    }
    Ok((path, session))
}

/// What `prepare` found: the run directory, what to run, and the input it read.
struct Prepared {
    run_dir: PathBuf,
    run_file: RunFile,
    input: Value,
}

/// The run directory and what to run: from the arguments, or from `run.json` on
/// `--resume` (where arguments given again replace what it holds).
fn prepare(args: &RunArgs, context: Context) -> Result<Prepared, Outcome> {
    // Usage errors come before anything is run, asked for or checked (such as API keys).
    for given in &args.live.tools {
        if let Err(message) = tool_name(given) {
            print_error(context, &message);
            return Err(Outcome::Usage);
        }
    }
    let (kept_run_dir, mut run_file) = match &args.resume {
        Some(run_dir) => (Some(run_dir.clone()), read_run_file(run_dir, context)?),
        None => (None, new_run_file(args, context)?),
    };
    replace_options_given_again(args, context, &mut run_file)?;
    check_options(args, context, &run_file)?;
    let input = read_input(&run_file.input, context)?;
    let run_dir = match kept_run_dir {
        Some(run_dir) => run_dir,
        None => new_run_dir(args, context)?,
    };
    Ok(Prepared {
        run_dir,
        run_file,
        input,
    })
}

/// The `run.json` of a new run: the spec and input given, and the tools and models.
fn new_run_file(args: &RunArgs, context: Context) -> Result<RunFile, Outcome> {
    let (Some(spec), Some(input)) = (&args.spec, &args.input) else {
        print_error(context, "give a SPEC and --input FILE, or --resume RUN_DIR");
        return Err(Outcome::Usage);
    };
    Ok(RunFile {
        spec: absolute(spec),
        input: absolute(input),
        tools: args.live.tools.clone(),
        models: args.live.models.clone(),
        out: None,
        events: None,
        record: None,
        session: None,
        session_turn: None,
        hashes: RunHashes::default(),
    })
}

/// Given again (or for the first time), an option replaces what the run kept.
fn replace_options_given_again(
    args: &RunArgs,
    context: Context,
    run_file: &mut RunFile,
) -> Result<(), Outcome> {
    if !args.live.tools.is_empty() {
        run_file.tools = args.live.tools.clone();
    }
    if !args.live.models.is_empty() {
        run_file.models = args.live.models.clone();
    }
    if let Some(out) = &args.out {
        run_file.out = Some(absolute(out));
    }
    if let Some(events) = &args.events {
        run_file.events = Some(absolute(events));
    }
    if let Some(record) = &args.record {
        run_file.record = Some(absolute(record));
    }
    if let Some(session) = &args.session {
        if let Err(error) = charter_runtime::world::sessions::validate_id(session) {
            print_error(context, &error.to_string());
            return Err(Outcome::Usage);
        }
        run_file.session = Some(session.clone());
    }
    Ok(())
}

/// Refuses what the options cannot do together: --force with nothing to force, a
/// recording over a scenario kept there, a tool whose command `run.json` could not keep,
/// and an --out that is no directory.
fn check_options(args: &RunArgs, context: Context, run_file: &RunFile) -> Result<(), Outcome> {
    if args.force && args.resume.is_none() && args.record.is_none() {
        print_error(
            context,
            "--force goes with --resume (continue a changed run) or --record (overwrite a scenario)",
        );
        return Err(Outcome::Usage);
    }
    // A recording never silently replaces a scenario someone wrote or kept.
    if let Some(record) = &run_file.record
        && !args.force
        && let Some(existing) = ["scenario.yaml", "cassette.yaml"]
            .iter()
            .map(|file| record.join(file))
            .find(|path| path.exists())
    {
        print_error(
            context,
            &format!(
                "`{}` already exists; give --force to overwrite the scenario (its description \
                 and `expect` are kept), or record into a new directory",
                display_path(&existing)
            ),
        );
        return Err(Outcome::Usage);
    }
    if let Some(record) = &run_file.record
        && let Err(message) = check_record_spec(&run_file.spec, record)
    {
        print_error(context, &message);
        return Err(Outcome::Usage);
    }
    if let Some(tool) = run_file.tools.iter().find(|tool| tool.contains(REDACTED)) {
        let name = tool.split_once('=').map_or(tool.as_str(), |(name, _)| name);
        print_error(
            context,
            &format!(
                "the command of tool `{name}` held a secret, which `run.json` does not keep; \
                 give it again with --tool {name}=COMMAND"
            ),
        );
        return Err(Outcome::Usage);
    }
    if let Some(out) = &run_file.out {
        let usable = if out.exists() && !out.is_dir() {
            Err("it exists and is not a directory".to_string())
        } else {
            std::fs::create_dir_all(out).map_err(|error| error.to_string())
        };
        if let Err(error) = usable {
            print_error(
                context,
                &format!(
                    "--out `{}` cannot be used: {error}",
                    display_path(args.out.as_deref().unwrap_or(out))
                ),
            );
            return Err(Outcome::Usage);
        }
    }
    Ok(())
}

/// The directory of a new run: --run-dir (which must not hold a run already), or a new
/// one under `.charter/runs`.
fn new_run_dir(args: &RunArgs, context: Context) -> Result<PathBuf, Outcome> {
    let run_dir = match &args.run_dir {
        Some(run_dir) => {
            if run_dir.join(JOURNAL_FILE).exists() || run_dir.join(EVENTS_FILE).exists() {
                let shown = display_path(run_dir);
                print_error(
                    context,
                    &format!(
                        "`{shown}` already holds a run; continue it with `--resume {shown}`, or give another --run-dir"
                    ),
                );
                return Err(Outcome::Usage);
            }
            std::fs::create_dir_all(run_dir).map(|()| run_dir.clone())
        }
        // Time, then random: runs started in the same millisecond get directories of
        // their own (created exclusively), still sorted by when they started.
        None => {
            let millis = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|since| since.as_millis())
                .unwrap_or_default();
            files::create_unique_dir(
                &PathBuf::from(".charter").join("runs"),
                &format!("{millis}-"),
            )
        }
    };
    run_dir.map_err(|error| {
        print_error(
            context,
            &format!("cannot prepare the run directory: {error}"),
        );
        Outcome::Usage
    })
}

const REDACTED: &str = "<redacted>";

/// `run.json` of the run in `run_dir`.
fn read_run_file(run_dir: &Path, context: Context) -> Result<RunFile, Outcome> {
    let path = run_dir.join(RUN_FILE);
    let text = files::read_regular(&path, RUN_FILE_LIMIT).map_err(|error| {
        print_error(
            context,
            &format!(
                "`{}` is not a run directory: {error}",
                display_path(run_dir)
            ),
        );
        Outcome::Usage
    })?;
    serde_json::from_str(&text).map_err(|error| {
        print_error(
            context,
            &format!("`{}` cannot be read: {error}", display_path(&path)),
        );
        Outcome::Usage
    })
}

/// The most of `run.json` read (it names files; it holds no input).
const RUN_FILE_LIMIT: u64 = 1024 * 1024;

/// The run's input, a JSON file.
fn read_input(path: &Path, context: Context) -> Result<Value, Outcome> {
    let text = files::read_followed(
        path,
        charter_runtime::world::limits::DEFAULT_MAX_BYTES as u64,
    )
    .map_err(|error| {
        print_error(
            context,
            &format!("cannot read `{}`: {error}", display_path(path)),
        );
        Outcome::Usage
    })?;
    serde_json::from_str(&text).map_err(|error| {
        print_error(
            context,
            &format!("`{}` is not JSON: {error}", display_path(path)),
        );
        Outcome::Usage
    })
}

/// Writes `run.json` (atomically, through the scrubber).
fn write_run_file(run_dir: &Path, run_file: &RunFile, scrubber: &Scrubber) -> Result<(), String> {
    let value = serde_json::to_value(run_file).map_err(|error| error.to_string())?;
    let text =
        serde_json::to_string_pretty(&scrubber.value(&value)).map_err(|error| error.to_string())?;
    write_atomically(&run_dir.join(RUN_FILE), &text).map_err(|error| error.to_string())
}

/// Lists the input's violations of the request contract (exit 2: nothing was run). A run
/// directory made for this run is removed again, so no run is left to `--resume`.
fn report_bad_input(
    context: Context,
    args: &RunArgs,
    run_dir: &Path,
    spec: &CompiledSpec,
    violations: &[Violation],
) {
    let source = args
        .input
        .as_deref()
        .map_or_else(|| display_path(&run_dir.join(RUN_FILE)), display_path);
    let contract = spec.request.as_deref().unwrap_or("Request");
    let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
    print_error(
        context,
        &format!(
            "the input `{source}` does not match the request contract `{contract}`:\n{}",
            listed.join("\n")
        ),
    );
    print_err(&format!(
        "help: nothing was run; give an input that is a `{contract}` (fields with a default may be left out)\n"
    ));
    if args.resume.is_none() {
        let _ = std::fs::remove_file(run_dir.join(RUN_FILE));
        let _ = std::fs::remove_dir(run_dir);
    }
}
