//! `charter run SPEC --input FILE [--session ID] [--out DIR] [--events FILE] [--record DIR] [--tool NAME=COMMAND]... [--run-dir DIR]` and `charter run --resume RUN_DIR [--force]`: a live run against real providers, shown live, journaled for resume, optionally recorded as a scenario.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use charter_compiler::CompiledSpec;
use charter_runtime::engine::effects::HumanChannel;
use charter_runtime::engine::models::{apply_overrides, parse_override};
use charter_runtime::engine::provider::{BoxFuture, HumanRequest, ProviderError};
use charter_runtime::engine::run::{DeliveryTarget, RunConfig, RunOutcome};
use charter_runtime::engine::validate::{Violation, validate_request};
use charter_runtime::formats::scenario::{Recorded, Scenario};
use charter_runtime::formats::trace::{Outcome as RunState, TraceSink};
use charter_runtime::world::jsonl::JsonlSink;
use charter_runtime::world::providers::LiveSettings;
use charter_runtime::world::record::{Journal, Recording, write_atomically, write_recording};
use charter_runtime::world::secrets::{Scrubber, ScrubbingSink, secrets_by_name};
use charter_runtime::world::tools::{CommandTool, ToolBox};
use charter_runtime::world::{escape, files};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::live::LiveCalls;
use crate::loader::{compile_whole, display_path, normalize};
use crate::replay::LiveDisplay;
use crate::{Context, Outcome, print_err, print_error, summary_line};

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
/// turn reads it, and a turn that answered saves it back (atomically). Exit status: 0
/// completed, 3 another terminal state, 1 an error, 2 a usage error.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter run specs/seeds/closed_loop.charter --input request.json --record golden/closed_loop/live --tool search='python3 tools/search.py'"
)]
pub struct RunArgs {
    /// The spec to run.
    #[arg(value_name = "SPEC", required_unless_present = "resume")]
    pub spec: Option<PathBuf>,

    /// The run's input (the `request`), a JSON file.
    #[arg(long, value_name = "FILE", required_unless_present = "resume")]
    pub input: Option<PathBuf>,

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

    /// Record the run as a scenario: `scenario.yaml` and `cassette.yaml` in DIR. A DIR
    /// that already holds a scenario is refused unless --force (which keeps its
    /// description and `expect`). The scenario's `spec:` is relative to the project root.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,

    /// A tool as a command, run by `sh -c`: the call's JSON arguments on stdin, one JSON
    /// value on stdout. Repeat for each tool.
    #[arg(long = "tool", value_name = "NAME=COMMAND")]
    pub tools: Vec<String>,

    /// Where the run keeps its journal and trace (default `.charter/runs/<time>-<random>`).
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub run_dir: Option<PathBuf>,

    /// Run model alias ALIAS on PROVIDER:MODEL for this run instead of what the spec's
    /// `models` block says (e.g. `--model default=openai:qwen2.5:7b`); the alias keeps its
    /// parameters. Repeat for each alias. A recording notes it, and replays apply it.
    #[arg(long = "model", value_name = "ALIAS=PROVIDER:MODEL")]
    pub models: Vec<String>,

    /// Also show each model answer (shortened) as it arrives.
    #[arg(long)]
    pub show_output: bool,

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

pub fn run(args: &RunArgs, context: Context) -> anyhow::Result<Outcome> {
    let Prepared {
        run_dir,
        mut run_file,
        input,
    } = match prepare(args, context) {
        Ok(prepared) => prepared,
        Err(outcome) => return Ok(outcome),
    };
    let spec_name = display_path(&normalize(&run_file.spec));
    let text = match std::fs::read_to_string(&run_file.spec) {
        Ok(text) => text,
        Err(error) => {
            print_error(context, &format!("cannot read `{spec_name}`: {error}"));
            return Ok(Outcome::Usage);
        }
    };
    let Some(mut spec) = compile_whole(context, &spec_name, &text, &run_file.spec, "run") else {
        return Ok(Outcome::Failed);
    };
    let mut overrides = std::collections::BTreeMap::new();
    for given in &run_file.models {
        match parse_override(given) {
            Ok((alias, target)) => {
                overrides.insert(alias, target);
            }
            Err(message) => {
                print_error(context, &message);
                return Ok(Outcome::Usage);
            }
        }
    }
    if let Err(message) = apply_overrides(&mut spec, &overrides) {
        print_error(context, &message);
        return Ok(Outcome::Usage);
    }
    let spec = &spec;
    // The input is checked before anything runs or is asked for (API keys included).
    let input = match validate_request(spec, &input) {
        Ok(_) => input,
        Err(violations) => {
            report_bad_input(context, args, &run_dir, spec, &violations);
            return Ok(Outcome::Usage);
        }
    };

    let session = match &run_file.session {
        Some(id) => match open_session(spec, id, &run_file, args.resume.is_some()) {
            Ok(opened) => Some(opened),
            Err(message) => {
                print_error(context, &message);
                // Nothing ran: the run directory made for this run goes again.
                if args.resume.is_none() {
                    let _ = std::fs::remove_dir(&run_dir);
                }
                return Ok(Outcome::Usage);
            }
        },
        None => None,
    };
    run_file.session_turn = session.as_ref().map(|(_, session)| session.next_turn());

    let variables: Vec<(String, String)> = std::env::vars().collect();
    let settings = LiveSettings::from_variables(variables.clone());
    let missing = settings.missing_for(spec);
    if !missing.is_empty() {
        for line in missing {
            print_error(context, &line);
        }
        return Ok(Outcome::Usage);
    }
    let tools = match tool_box(spec, &run_file.tools) {
        Ok(tools) => Arc::new(tools),
        Err(message) => {
            print_error(context, &message);
            return Ok(Outcome::Usage);
        }
    };
    // Only roles the flow calls can call a tool: a role file imported but never used
    // (or a tool only such a role holds) is no reason for a warning.
    let called = roles_called(spec);
    for name in tools.unimplemented() {
        if spec
            .roles
            .iter()
            .filter(|(role, _)| called.contains(role.as_str()))
            .any(|(_, role)| role.tools.iter().any(|tool| tool == name))
        {
            print_err(&summary_line(
                context,
                "warning",
                &format!(
                    "tool `{name}` has no implementation (give it with --tool {name}=COMMAND); its calls will fail"
                ),
            ));
        }
    }
    let providers = match settings.providers(tools) {
        Ok(providers) => providers,
        Err(error) => {
            print_error(context, &error.to_string());
            return Ok(Outcome::Failed);
        }
    };
    let mut secrets = settings.secrets();
    secrets.extend(secrets_by_name(variables));
    let scrubber = Scrubber::new(secrets.clone());

    let hashes = RunHashes::of(spec, &input);
    if args.resume.is_some() {
        let changed = run_file.hashes.changes(&hashes);
        if !changed.is_empty() && !args.force {
            print_error(
                context,
                &format!(
                    "{} changed since the run in `{}` started; its journal answered the old \
                     ones (start a new run, or give --force to continue anyway)",
                    changed.join(", "),
                    display_path(&run_dir)
                ),
            );
            return Ok(Outcome::Usage);
        }
    }
    run_file.hashes = hashes;
    if let Err(error) = write_run_file(&run_dir, &run_file, &scrubber) {
        print_error(
            context,
            &format!(
                "cannot write `{}`: {error}",
                display_path(&run_dir.join(RUN_FILE))
            ),
        );
        return Ok(Outcome::Failed);
    }

    let (journal, entries) = match Journal::open(&run_dir.join(JOURNAL_FILE)) {
        Ok(opened) => opened,
        Err(error) => {
            print_error(context, &error.to_string());
            return Ok(Outcome::Failed);
        }
    };
    let resumed = entries.len();
    let recording = Recording::journaled(secrets.clone(), journal, entries);
    let provider = Arc::new(recording.provider(providers));
    let humans = recording.humans(TerminalHumans);

    print_err(&format!(
        "run {spec_name}: spec {} {} in {}{}\n",
        spec.name,
        spec.version,
        display_path(&run_dir),
        if args.resume.is_some() {
            format!(" (resumed: {resumed} answer(s) from the journal)")
        } else {
            String::new()
        }
    ));

    for (alias, target) in &overrides {
        print_err(&format!("model `{alias}` runs on {target} (--model)\n"));
    }
    let calls = LiveCalls::new(args.show_output);
    let totals = charter_runtime::totals::TotalsSink::new(Arc::new(spec.clone()));
    let started = std::time::Instant::now();
    let mut sinks: Vec<Box<dyn TraceSink>> = vec![
        Box::new(LiveDisplay::with_calls(calls.clone())),
        Box::new(totals.clone()),
    ];
    for path in std::iter::once(run_dir.join(EVENTS_FILE)).chain(run_file.events.clone()) {
        match JsonlSink::create(&path) {
            Ok(sink) => sinks.push(Box::new(sink)),
            Err(error) => {
                print_error(context, &error.to_string());
                return Ok(Outcome::Usage);
            }
        }
    }
    let mut sink = ScrubbingSink::new(Fanout(sinks), scrubber.clone());
    let config = RunConfig {
        observer: Some(calls.clone()),
        session: session.as_ref().map(|(_, session)| session.clone()),
        ..RunConfig::default()
    };
    let config = match &run_file.out {
        Some(directory) => config.with_out_dir(directory.clone()),
        None => RunConfig {
            delivery: DeliveryTarget::Memory,
            ..config
        },
    };
    let heartbeat = calls.heartbeat();
    let result = run_live(
        spec,
        input.clone(),
        provider,
        &humans,
        config,
        &mut sink,
        &recording,
    );
    drop(heartbeat);
    if let Some(error) = recording.journal_error() {
        print_err(&summary_line(
            context,
            "warning",
            &format!("the journal is incomplete: {error}"),
        ));
    }
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            print_error(context, &error);
            // What the failed run used so far is still worth knowing (it was paid for).
            print_err(&format!(
                "{}\n",
                crate::replay::totals_line(&totals.totals(), started.elapsed(), false)
            ));
            return Ok(Outcome::Failed);
        }
    };
    print_err(&format!("{}\n", outcome_line(&outcome)));
    print_err(&format!(
        "{}\n",
        crate::replay::totals_line(&totals.totals(), started.elapsed(), false)
    ));
    crate::print_answer(outcome.answer.as_ref())?;
    if let (Some((path, _)), Some(id)) = (&session, &run_file.session) {
        match &outcome.session {
            Some(next) => {
                let started = next.turn_count.saturating_sub(1);
                if let Err(error) = charter_runtime::world::sessions::save_turn(
                    path, spec, started, next, &scrubber,
                ) {
                    print_error(context, &error.to_string());
                    return Ok(Outcome::Failed);
                }
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
    }

    if let Some(directory) = &run_file.record {
        // Overwriting (--force): what a person wrote about the scenario stays.
        let kept = Scenario::read(&directory.join("scenario.yaml")).ok();
        let scenario = Scenario {
            spec: scenario_spec(&run_file.spec, directory),
            description: kept
                .as_ref()
                .and_then(|kept| kept.description.clone())
                .or_else(|| Some(format!("recorded live run of {}", spec.name))),
            input: scrubber.value(&input),
            turns: None,
            expect: kept.and_then(|kept| kept.expect),
        };
        let mut recorded = Recorded::from_spec(spec);
        recorded.overrides = overrides.clone();
        let cassette = recording.cassette(recorded);
        if let Err(error) = write_recording(directory, &scenario, &cassette) {
            print_error(context, &error.to_string());
            return Ok(Outcome::Failed);
        }
        print_err(&format!("recorded to {}\n", display_path(directory)));
    }
    Ok(if outcome.outcome == RunState::Completed {
        Outcome::Clean
    } else {
        Outcome::NotCompleted
    })
}

/// The directory sessions are kept in, relative to where `charter` runs.
pub(crate) fn sessions_dir() -> PathBuf {
    PathBuf::from(".charter").join("sessions")
}

/// Loads session `id` for `spec` (a new one when it has no file yet): its path and state.
/// A spec without a `session`, a recording of a session that already has turns, and a
/// resume of a turn the session has moved past are refused with a sentence that says why.
fn open_session(
    spec: &CompiledSpec,
    id: &str,
    run_file: &RunFile,
    resuming: bool,
) -> Result<(PathBuf, charter_runtime::engine::session::Session), String> {
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
    for given in &args.tools {
        if given
            .split_once('=')
            .is_none_or(|(name, _)| name.trim().is_empty())
        {
            print_error(
                context,
                &format!(
                    "--tool `{given}` is not NAME=COMMAND (e.g. --tool search='python3 search.py')"
                ),
            );
            return Err(Outcome::Usage);
        }
    }
    let (run_dir, mut run_file) = match &args.resume {
        Some(run_dir) => (run_dir.clone(), read_run_file(run_dir, context)?),
        None => {
            let (Some(spec), Some(input)) = (&args.spec, &args.input) else {
                print_error(context, "give a SPEC and --input FILE, or --resume RUN_DIR");
                return Err(Outcome::Usage);
            };
            let run_file = RunFile {
                spec: absolute(spec),
                input: absolute(input),
                tools: args.tools.clone(),
                models: args.models.clone(),
                out: None,
                events: None,
                record: None,
                session: None,
                session_turn: None,
                hashes: RunHashes::default(),
            };
            (PathBuf::new(), run_file)
        }
    };
    // Given again (or for the first time), an option replaces what the run kept.
    if !args.tools.is_empty() {
        run_file.tools = args.tools.clone();
    }
    if !args.models.is_empty() {
        run_file.models = args.models.clone();
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
    let input = read_input(&run_file.input, context)?;
    if args.resume.is_some() {
        return Ok(Prepared {
            run_dir,
            run_file,
            input,
        });
    }
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
    match run_dir {
        Ok(run_dir) => Ok(Prepared {
            run_dir,
            run_file,
            input,
        }),
        Err(error) => {
            print_error(
                context,
                &format!("cannot prepare the run directory: {error}"),
            );
            Err(Outcome::Usage)
        }
    }
}

const REDACTED: &str = "<redacted>";

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

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
    let text = files::read_regular(
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

/// The tools given as `NAME=COMMAND`.
pub(crate) fn tool_box(spec: &CompiledSpec, tools: &[String]) -> Result<ToolBox, String> {
    let mut tool_box = ToolBox::for_spec(spec);
    for given in tools {
        let Some((name, command)) = given.split_once('=') else {
            return Err(format!("--tool `{given}` is not NAME=COMMAND"));
        };
        tool_box
            .insert(name.trim(), Arc::new(CommandTool::new(command)))
            .map_err(|error| format!("--tool {}: {error}", name.trim()))?;
    }
    Ok(tool_box)
}

/// Runs the spec on a tokio runtime with a real clock; Ctrl-C or SIGTERM cancels it.
pub(crate) fn run_live(
    spec: &CompiledSpec,
    input: Value,
    provider: Arc<dyn charter_runtime::engine::effects::Provider>,
    humans: &dyn HumanChannel,
    mut config: RunConfig,
    sink: &mut dyn TraceSink,
    recording: &Recording,
) -> Result<RunOutcome, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the runtime: {error}"))?;
    runtime.block_on(async {
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        config.cancel = Some(cancelled);
        let on_interrupt = recording.clone();
        // SIGTERM (CI cancellation, `timeout`, `docker stop`) is handled like Ctrl-C.
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|error| format!("cannot handle SIGTERM: {error}"))?;
        let watcher = tokio::spawn(async move {
            let interrupted = tokio::select! {
                signal = tokio::signal::ctrl_c() => signal.is_ok(),
                signal = terminate.recv() => signal.is_some(),
            };
            if interrupted {
                // Calls dropped by the cancel are not answers to keep in the journal.
                on_interrupt.cancel();
                let _ = cancel.send(true);
            }
        });
        let result = charter_runtime::engine::run::run(
            spec,
            input,
            charter_runtime::engine::effects::Effects::new(provider, humans, sink)
                .with_files(&charter_runtime::world::files::LocalFiles),
            &config,
        )
        .await;
        watcher.abort();
        result.map_err(|error| error.to_string())
    })
}

/// `outcome: completed (gate_passed); delivered c1 (sha256:...) to out/delivery.json`
pub(crate) fn outcome_line(outcome: &RunOutcome) -> String {
    let mut line = format!("outcome: {} ({})", outcome.outcome, outcome.reason);
    if let Some(message) = &outcome.message {
        line.push_str(&format!(
            ": {}",
            escape::one_line(message, escape::MAX_LINE_CHARS)
        ));
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

/// The spec's path as a scenario in `record_dir` names it: relative to the project root
/// (the directory holding `golden/`, or the current directory when the recording is not
/// under one), as `charter verify` and `charter replay` read it; absolute only for a spec
/// outside that root.
pub(crate) fn scenario_spec(spec: &Path, record_dir: &Path) -> String {
    let spec = std::path::absolute(spec).unwrap_or_else(|_| spec.to_path_buf());
    let record_dir = std::path::absolute(record_dir).unwrap_or_else(|_| record_dir.to_path_buf());
    let current = std::env::current_dir().ok();
    let root = record_dir
        .ancestors()
        .find(|ancestor| ancestor.file_name().is_some_and(|name| name == "golden"))
        .and_then(Path::parent)
        .or(current.as_deref());
    let relative = root.and_then(|root| {
        normalize(&spec)
            .strip_prefix(normalize(root))
            .ok()
            .map(Path::to_path_buf)
    });
    relative
        .unwrap_or(spec)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Every event to every sink.
pub(crate) struct Fanout(pub(crate) Vec<Box<dyn TraceSink>>);

impl TraceSink for Fanout {
    fn append(
        &mut self,
        event: &charter_runtime::formats::trace::TraceEvent,
    ) -> Result<(), charter_runtime::formats::trace::TraceError> {
        for sink in &mut self.0 {
            sink.append(event)?;
        }
        Ok(())
    }
}

/// Asks the person at the terminal: the question on stderr, `y` or `n` (and an optional
/// note after it) on stdin. No answer (end of input) is an error: the run cannot decide.
pub(crate) struct TerminalHumans;

impl HumanChannel for TerminalHumans {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        Box::pin(async move {
            print_err(&format!(
                "\n{}\napprove? [y/n, then an optional note] ",
                request.question
            ));
            let line = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                std::io::stdin()
                    .read_line(&mut line)
                    .map(|read| (read, line))
            })
            .await;
            match line {
                Ok(Ok((read, line))) if read > 0 => {
                    let line = line.trim();
                    let (word, note) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                    let approved = matches!(word.to_ascii_lowercase().as_str(), "y" | "yes");
                    let mut answer = json!({"approved": approved});
                    if !note.trim().is_empty() {
                        answer["note"] = json!(note.trim());
                    }
                    Ok(answer)
                }
                _ => Err(ProviderError::NoHumanAnswer {
                    step: request.step,
                    round: request.round,
                    attempt: request.attempt,
                }),
            }
        })
    }
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

/// The roles the flow calls: of role, `each`, `finalize` steps and per-item checks' judges.
pub(crate) fn roles_called(spec: &CompiledSpec) -> std::collections::BTreeSet<&str> {
    use charter_compiler::graph::StepKind;
    let mut roles = std::collections::BTreeSet::new();
    for step in spec.flow.graph.node_weights() {
        match &step.kind {
            StepKind::Call { role, .. } | StepKind::Finalize { role, .. } => {
                roles.insert(role.as_str());
            }
            StepKind::Each { role, check, .. } => {
                roles.insert(role.as_str());
                if let Some(by) = check.as_ref().and_then(|check| check.by.as_deref()) {
                    roles.insert(by);
                }
            }
            _ => {}
        }
    }
    roles
}
