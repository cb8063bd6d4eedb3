//! `charter run SPEC --input FILE [--out DIR] [--events FILE] [--record DIR] [--tool NAME=COMMAND]... [--run-dir DIR]` and `charter run --resume RUN_DIR`: a live run against real providers, shown live, journaled for resume, optionally recorded as a scenario.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use charter_compiler::CompiledSpec;
use charter_runtime::models::{apply_overrides, parse_override};
use charter_runtime::provider::{BoxFuture, HumanChannel, HumanRequest, ProviderError};
use charter_runtime::providers::LiveSettings;
use charter_runtime::record::{Journal, Recording, write_atomically, write_recording};
use charter_runtime::run::{DeliveryTarget, RunConfig, RunOutcome};
use charter_runtime::scenario::{Recorded, Scenario};
use charter_runtime::secrets::{Scrubber, ScrubbingSink, secrets_by_name};
use charter_runtime::tools::{CommandTool, ToolBox};
use charter_runtime::trace::{JsonlSink, Outcome as RunState, TraceSink};
use charter_runtime::validate::{Violation, validate_request};
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
/// the model again for any answered call. Ctrl-C ends the run `cancelled`. Exit status:
/// 0 completed, 3 another terminal state, 1 an error, 2 a usage error.
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

    /// Write the delivery (`delivery.json`) into DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Also write every trace event as one JSON line to FILE.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,

    /// Record the run as a scenario: `scenario.yaml` and `cassette.yaml` in DIR.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,

    /// A tool as a command, run by `sh -c`: the call's JSON arguments on stdin, one JSON
    /// value on stdout. Repeat for each tool.
    #[arg(long = "tool", value_name = "NAME=COMMAND")]
    pub tools: Vec<String>,

    /// Where the run keeps its journal and trace (default `.charter/runs/<time>`).
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

    /// Continue the run kept in RUN_DIR (its spec, input and tools are read from there).
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["spec", "input"])]
    pub resume: Option<PathBuf>,
}

/// `run.json` in a run directory: what to run again on `--resume`.
#[derive(Debug, Serialize, Deserialize)]
struct RunFile {
    spec: PathBuf,
    input: Value,
    tools: Vec<String>,
    /// `--model` overrides, `ALIAS=PROVIDER:MODEL`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    models: Vec<String>,
}

const RUN_FILE: &str = "run.json";
const JOURNAL_FILE: &str = "calls.jsonl";
const EVENTS_FILE: &str = "events.jsonl";

pub fn run(args: &RunArgs, context: Context) -> anyhow::Result<Outcome> {
    let (run_dir, run_file) = match prepare(args, context) {
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
    let run_file = match validate_request(spec, &run_file.input) {
        Ok(_) => run_file,
        Err(violations) => {
            report_bad_input(context, args, &run_dir, spec, &violations);
            return Ok(Outcome::Usage);
        }
    };

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
    let mut sinks: Vec<Box<dyn TraceSink>> = vec![Box::new(LiveDisplay::with_calls(calls.clone()))];
    for path in std::iter::once(run_dir.join(EVENTS_FILE)).chain(args.events.clone()) {
        match JsonlSink::create(&path) {
            Ok(sink) => sinks.push(Box::new(sink)),
            Err(error) => {
                print_error(context, &error.to_string());
                return Ok(Outcome::Usage);
            }
        }
    }
    let mut sink = ScrubbingSink::new(Fanout(sinks), Scrubber::new(secrets));
    let config = RunConfig {
        observer: Some(calls.clone()),
        ..RunConfig::default()
    };
    let config = match &args.out {
        Some(directory) => config.with_out_dir(directory.clone()),
        None => RunConfig {
            delivery: DeliveryTarget::Memory,
            ..config
        },
    };
    let heartbeat = calls.heartbeat();
    let result = run_live(
        spec,
        run_file.input.clone(),
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
            return Ok(Outcome::Failed);
        }
    };
    print_err(&format!("{}\n", outcome_line(&outcome)));
    crate::print_answer(outcome.answer.as_ref())?;

    if let Some(directory) = &args.record {
        let scenario = Scenario {
            spec: scenario_spec(&run_file.spec, directory),
            description: Some(format!("recorded live run of {}", spec.name)),
            input: run_file.input.clone(),
            expect: None,
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

/// The run directory and what to run: from the arguments (written to `run.json`), or
/// from `run.json` on `--resume`.
fn prepare(args: &RunArgs, context: Context) -> Result<(PathBuf, RunFile), Outcome> {
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
    if let Some(out) = &args.out {
        let usable = if out.exists() && !out.is_dir() {
            Err("it exists and is not a directory".to_string())
        } else {
            std::fs::create_dir_all(out).map_err(|error| error.to_string())
        };
        if let Err(error) = usable {
            print_error(
                context,
                &format!("--out `{}` cannot be used: {error}", display_path(out)),
            );
            return Err(Outcome::Usage);
        }
    }
    if let Some(run_dir) = &args.resume {
        let path = run_dir.join(RUN_FILE);
        let text = std::fs::read_to_string(&path).map_err(|error| {
            print_error(
                context,
                &format!(
                    "`{}` is not a run directory: {error}",
                    display_path(run_dir)
                ),
            );
            Outcome::Usage
        })?;
        let mut run_file: RunFile = serde_json::from_str(&text).map_err(|error| {
            print_error(
                context,
                &format!("`{}` cannot be read: {error}", display_path(&path)),
            );
            Outcome::Usage
        })?;
        if !args.tools.is_empty() {
            run_file.tools = args.tools.clone();
        }
        if !args.models.is_empty() {
            run_file.models = args.models.clone();
        }
        return Ok((run_dir.clone(), run_file));
    }
    let (Some(spec), Some(input)) = (&args.spec, &args.input) else {
        print_error(context, "give a SPEC and --input FILE, or --resume RUN_DIR");
        return Err(Outcome::Usage);
    };
    let input_text = std::fs::read_to_string(input).map_err(|error| {
        print_error(
            context,
            &format!("cannot read `{}`: {error}", display_path(input)),
        );
        Outcome::Usage
    })?;
    let input: Value = serde_json::from_str(&input_text).map_err(|error| {
        print_error(
            context,
            &format!("`{}` is not JSON: {error}", display_path(input)),
        );
        Outcome::Usage
    })?;
    let run_dir = args.run_dir.clone().unwrap_or_else(|| {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| since.as_millis())
            .unwrap_or_default();
        PathBuf::from(".charter")
            .join("runs")
            .join(millis.to_string())
    });
    if run_dir.join(JOURNAL_FILE).exists() || run_dir.join(EVENTS_FILE).exists() {
        let shown = display_path(&run_dir);
        print_error(
            context,
            &format!(
                "`{shown}` already holds a run; continue it with `--resume {shown}`, or give another --run-dir"
            ),
        );
        return Err(Outcome::Usage);
    }
    let run_file = RunFile {
        spec: std::path::absolute(spec).unwrap_or_else(|_| spec.clone()),
        input,
        tools: args.tools.clone(),
        models: args.models.clone(),
    };
    let written = std::fs::create_dir_all(&run_dir)
        .map_err(|error| error.to_string())
        .and_then(|()| serde_json::to_string_pretty(&run_file).map_err(|error| error.to_string()))
        .and_then(|text| {
            write_atomically(&run_dir.join(RUN_FILE), &text).map_err(|error| error.to_string())
        });
    if let Err(error) = written {
        print_error(
            context,
            &format!(
                "cannot prepare the run directory `{}`: {error}",
                display_path(&run_dir)
            ),
        );
        return Err(Outcome::Usage);
    }
    Ok((run_dir, run_file))
}

/// The tools given as `NAME=COMMAND`.
fn tool_box(spec: &CompiledSpec, tools: &[String]) -> Result<ToolBox, String> {
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

/// Runs the spec on a tokio runtime with a real clock; Ctrl-C cancels it.
fn run_live(
    spec: &CompiledSpec,
    input: Value,
    provider: Arc<dyn charter_runtime::provider::Provider>,
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
        let watcher = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                // Calls dropped by the cancel are not answers to keep in the journal.
                on_interrupt.cancel();
                let _ = cancel.send(true);
            }
        });
        let result = charter_runtime::run::run(spec, input, provider, humans, &config, sink).await;
        watcher.abort();
        result.map_err(|error| error.to_string())
    })
}

/// `outcome: completed (gate_passed); delivered c1 (sha256:...) to out/delivery.json`
fn outcome_line(outcome: &RunOutcome) -> String {
    let mut line = format!("outcome: {} ({})", outcome.outcome, outcome.reason);
    if let Some(message) = &outcome.message {
        line.push_str(&format!(": {message}"));
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
/// (the directory holding `golden/`) when the recording is under one, else absolute.
fn scenario_spec(spec: &Path, record_dir: &Path) -> String {
    let spec = std::path::absolute(spec).unwrap_or_else(|_| spec.to_path_buf());
    let record_dir = std::path::absolute(record_dir).unwrap_or_else(|_| record_dir.to_path_buf());
    let root = record_dir
        .ancestors()
        .find(|ancestor| ancestor.file_name().is_some_and(|name| name == "golden"))
        .and_then(Path::parent);
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
struct Fanout(Vec<Box<dyn TraceSink>>);

impl TraceSink for Fanout {
    fn append(
        &mut self,
        event: &charter_runtime::trace::TraceEvent,
    ) -> Result<(), charter_runtime::trace::TraceError> {
        for sink in &mut self.0 {
            sink.append(event)?;
        }
        Ok(())
    }
}

/// The roles the flow calls: of role, `each`, `finalize` steps and per-item checks' judges.
fn roles_called(spec: &CompiledSpec) -> std::collections::BTreeSet<&str> {
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

/// Asks the person at the terminal: the question on stderr, `y` or `n` (and an optional
/// note after it) on stdin. No answer (end of input) is an error: the run cannot decide.
struct TerminalHumans;

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
