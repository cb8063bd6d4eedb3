//! The one driver of a live run, shared by `charter run`, `charter chat` and `charter serve`, in named stages: prepare, providers, journal, signals, run and totals.
//!
//! Every live run does the same work in the same order, and each stage here does it once
//! for all three commands:
//!
//! 1. prepare: [`PreparedSpec::compile`] reads and compiles the spec and applies its
//!    `--model` overrides;
//! 2. providers: [`LiveEnvironment`] reads the keys and addresses from the environment,
//!    with the secrets every file and event is scrubbed of, and builds the providers with
//!    the `--tool` commands;
//! 3. journal: [`open_journal`] opens a run directory's journal, so a run that was killed
//!    continues without asking a model again;
//! 4. signals: [`StopOn`] says what cancels the run: Ctrl-C and SIGTERM at a terminal, or
//!    a server's cancel;
//! 5. run: [`LiveRun::run`] runs the spec on a tokio runtime, with the local files;
//! 6. totals: [`LiveTotals`] adds up what the run used, for the totals line.
//!
//! What a command does around the stages (`run.json` and `--resume`, a chat's turns, a
//! server's run directories and HTTP) stays in the command's own file. Where the commands
//! differ inside a stage they say so with an options struct ([`LiveRunOptions`],
//! [`TerminalRunOptions`]), not with flags.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use charter_compiler::CompiledSpec;
use charter_compiler::graph::ToolChoiceIr;
use charter_runtime::engine::effects::{Clock, Effects, HumanChannel, Provider};
use charter_runtime::engine::models::{apply_overrides, parse_override};
use charter_runtime::engine::provider::{
    BoxFuture, CallKey, CallObserver, HumanRequest, ProviderError,
};
use charter_runtime::engine::run::{RunConfig, RunOutcome};
use charter_runtime::formats::trace::{TraceError, TraceEvent, TraceSink};
use charter_runtime::totals::TotalsSink;
use charter_runtime::world::files::LocalFiles;
use charter_runtime::world::providers::{LiveSettings, Providers};
use charter_runtime::world::record::{Journal, Recording};
use charter_runtime::world::sandbox::{Enforcement, Sandbox};
use charter_runtime::world::secrets::{Scrubber, ScrubbingSink, secrets_by_name};
use charter_runtime::world::tools::{CommandTool, ToolBox};
use serde_json::{Value, json};

use crate::display::{LiveCalls, LiveDisplay};
use crate::loader::{compile_whole, display_path, normalize, project_root_above};
use crate::terminal::{Context, Outcome, print_err, print_error, summary_line};

/// The flags of every command that runs a spec live (`charter run`, `chat` and `serve`),
/// with one meaning wherever they are given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LiveFlags {
    /// A tool as a command, run by `sh -c`: the call's JSON arguments on stdin, one JSON
    /// value on stdout. Repeat for each tool.
    #[arg(long = "tool", value_name = "NAME=COMMAND")]
    pub tools: Vec<String>,

    /// Run model alias ALIAS on PROVIDER:MODEL instead of what the spec's `models` block
    /// says (e.g. `--model default=openai:qwen2.5:7b`); the alias keeps its parameters.
    /// Repeat for each alias. A recording notes it, and its replays apply it.
    #[arg(long = "model", value_name = "ALIAS=PROVIDER:MODEL")]
    pub models: Vec<String>,

    /// Also show each model answer (shortened) on stderr as it arrives.
    #[arg(long)]
    pub show_output: bool,

    #[command(flatten)]
    pub sandbox: SandboxFlags,
}

/// How tool commands are sandboxed (DESIGN §20), on every command that runs them.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct SandboxFlags {
    /// Run tool commands unsandboxed, with all of your rights (files, network, keys in the
    /// environment). By default each runs confined: it reads only the system and the
    /// project, writes only its own directory, has no network and no secrets.
    #[arg(long, conflicts_with = "require_sandbox")]
    pub no_sandbox: bool,

    /// Refuse to run tools where this machine cannot sandbox them fully (no Landlock, user
    /// namespaces off, no pids cgroup as root), rather than warn and run them with what it has.
    #[arg(long)]
    pub require_sandbox: bool,
}

impl SandboxFlags {
    /// The sandbox these flags ask for, applied by this binary, over the project of the
    /// current directory (which tools may read).
    pub(crate) fn sandbox(&self) -> Result<Arc<Sandbox>, String> {
        let enforcement = if self.no_sandbox {
            Enforcement::Off
        } else if self.require_sandbox {
            Enforcement::Required
        } else {
            Enforcement::Default
        };
        let launcher = std::env::current_exe()
            .map_err(|error| format!("cannot find this program to sandbox tools with: {error}"))?;
        let here = std::env::current_dir().unwrap_or_default();
        Sandbox::new(enforcement, launcher, project_root_above(&here)).map(Arc::new)
    }
}

/// Warns once that tools will run with less than the whole sandbox, naming each missing
/// piece (`--require-sandbox` makes it an error instead; `--no-sandbox` is silent: asked for).
pub(crate) fn warn_of_missing_sandbox(context: Context, sandbox: &Sandbox) {
    let missing = sandbox.missing();
    if !missing.is_empty() {
        print_err(&summary_line(
            context,
            "warning",
            &format!(
                "tools run sandboxed only in part: this machine lacks {} (--require-sandbox refuses to run them so)",
                missing.join("; ")
            ),
        ));
    }
}

/// The prepare stage's result: the spec compiled whole, with the `--model` overrides
/// applied to it.
#[derive(Debug)]
pub(crate) struct PreparedSpec {
    pub(crate) spec: CompiledSpec,
    /// The `--model` overrides applied, alias to `PROVIDER:MODEL`; a recording notes them
    /// so that its replays run the same models.
    pub(crate) overrides: BTreeMap<String, String>,
    /// The spec's path as messages show it.
    pub(crate) shown_path: String,
}

/// The `--model` flags (`ALIAS=PROVIDER:MODEL` each), alias to `PROVIDER:MODEL`; one given
/// wrong is a usage error, printed.
pub(crate) fn model_overrides(
    context: Context,
    models: &[String],
) -> Result<BTreeMap<String, String>, Outcome> {
    let mut overrides = BTreeMap::new();
    for given in models {
        let (alias, target) = parse_override(given).map_err(|message| {
            print_error(context, &message);
            Outcome::Usage
        })?;
        overrides.insert(alias, target);
    }
    Ok(overrides)
}

impl PreparedSpec {
    /// Reads and compiles the spec at `path`, then applies `models` (`ALIAS=PROVIDER:MODEL`
    /// each). A file that cannot be read or an override given wrong is a usage error; a
    /// spec with errors has its diagnostics printed and ends with `nothing was {what}`.
    pub(crate) fn compile(
        context: Context,
        path: &Path,
        models: &[String],
        what: &str,
    ) -> Result<Self, Outcome> {
        let (mut spec, shown_path) = read_and_compile(context, path, what)?;
        let overrides = model_overrides(context, models)?;
        apply_overrides(&mut spec, &overrides).map_err(|message| {
            print_error(context, &message);
            Outcome::Usage
        })?;
        Ok(PreparedSpec {
            spec,
            overrides,
            shown_path,
        })
    }

    /// [`PreparedSpec::compile`] for one of several specs a server runs: of `overrides`,
    /// only those whose alias the spec defines apply to it (the server checks that each
    /// applies to some spec).
    pub(crate) fn compile_served(
        context: Context,
        path: &Path,
        overrides: &BTreeMap<String, String>,
    ) -> Result<Self, Outcome> {
        let (mut spec, shown_path) = read_and_compile(context, path, "served")?;
        let overrides: BTreeMap<String, String> = overrides
            .iter()
            .filter(|(alias, _)| spec.models.contains_key(alias.as_str()))
            .map(|(alias, target)| (alias.clone(), target.clone()))
            .collect();
        apply_overrides(&mut spec, &overrides).map_err(|message| {
            print_error(context, &message);
            Outcome::Usage
        })?;
        Ok(PreparedSpec {
            spec,
            overrides,
            shown_path,
        })
    }
}

/// Reads and compiles the spec at `path`: the spec and its path as messages show it.
fn read_and_compile(
    context: Context,
    path: &Path,
    what: &str,
) -> Result<(CompiledSpec, String), Outcome> {
    let shown_path = display_path(&normalize(path));
    let text = std::fs::read_to_string(path).map_err(|error| {
        print_error(context, &format!("cannot read `{shown_path}`: {error}"));
        Outcome::Usage
    })?;
    let spec = compile_whole(context, &shown_path, &text, path, what).ok_or(Outcome::Failed)?;
    Ok((spec, shown_path))
}

/// The name of a `--tool NAME=COMMAND`, or the sentence that says it is not one. Usage
/// errors such as this come before anything is run, asked for or checked (API keys
/// included).
pub(crate) fn tool_name(given: &str) -> Result<&str, String> {
    given
        .split_once('=')
        .map(|(name, _)| name.trim())
        .filter(|name| !name.is_empty())
        .ok_or_else(|| {
            format!("--tool `{given}` is not NAME=COMMAND (e.g. --tool search='python3 search.py')")
        })
}

/// The providers stage's inputs, read once from the environment: where the providers are,
/// their keys, and every secret a file, a journal or a trace event is scrubbed of.
#[derive(Debug)]
pub(crate) struct LiveEnvironment {
    pub(crate) settings: LiveSettings,
    /// The keys, and the value of every variable whose name says it holds a secret.
    pub(crate) secrets: Vec<String>,
    pub(crate) scrubber: Scrubber,
}

impl LiveEnvironment {
    /// The environment this process runs in.
    pub(crate) fn of_this_process() -> Self {
        LiveEnvironment::from_variables(std::env::vars().collect())
    }

    /// The environment `variables` describe (a server keeps the one it started in).
    pub(crate) fn from_variables(variables: Vec<(String, String)>) -> Self {
        let settings = LiveSettings::from_variables(variables.clone());
        let mut secrets = settings.secrets();
        secrets.extend(secrets_by_name(variables));
        LiveEnvironment {
            settings,
            scrubber: Scrubber::new(secrets.clone()),
            secrets,
        }
    }

    /// The providers for `spec` with the `tools` given (`NAME=COMMAND` each), for a
    /// command at the terminal: a missing key or a tool given wrong is a usage error, a
    /// provider that cannot be built a failure, each reported on stderr; a tool the flow
    /// calls with no command given is warned of.
    pub(crate) fn providers_at_terminal(
        &self,
        context: Context,
        spec: &CompiledSpec,
        tools: &[String],
        sandbox: SandboxFlags,
    ) -> Result<Providers, Outcome> {
        let missing = self.settings.missing_for(spec);
        if !missing.is_empty() {
            for line in missing {
                print_error(context, &line);
            }
            return Err(Outcome::Usage);
        }
        let sandbox = sandbox.sandbox().map_err(|message| {
            print_error(context, &message);
            Outcome::Usage
        })?;
        if !tools.is_empty() {
            warn_of_missing_sandbox(context, &sandbox);
        }
        let tools = tool_box(spec, tools, &sandbox).map_err(|message| {
            print_error(context, &message);
            Outcome::Usage
        })?;
        warn_of_tools_without_command(context, spec, &tools);
        warn_of_mcp_servers(context, spec);
        self.settings.providers(Arc::new(tools)).map_err(|error| {
            print_error(context, &error.to_string());
            Outcome::Failed
        })
    }

    /// The providers for `spec` with the `tools` given, or why there are none (a server
    /// checked the keys and tools when it started, and reports this to the run's clients).
    pub(crate) fn providers(
        &self,
        spec: &CompiledSpec,
        tools: &[String],
        sandbox: &Arc<Sandbox>,
    ) -> Result<Providers, String> {
        self.settings
            .providers(Arc::new(tool_box(spec, tools, sandbox)?))
            .map_err(|error| error.to_string())
    }
}

/// The tools given as `NAME=COMMAND`, each run in `sandbox` with what its declaration
/// grants.
pub(crate) fn tool_box(
    spec: &CompiledSpec,
    tools: &[String],
    sandbox: &Arc<Sandbox>,
) -> Result<ToolBox, String> {
    let mut tool_box = ToolBox::for_spec(spec);
    for given in tools {
        let Some((name, command)) = given.split_once('=') else {
            return Err(format!("--tool `{given}` is not NAME=COMMAND"));
        };
        let declared = spec
            .tools
            .get(name.trim())
            .and_then(|tool| tool.sandbox.as_ref());
        if declared.is_some_and(|declared| declared.required)
            && let Some(refusal) = sandbox.refuses_required(name.trim())
        {
            return Err(refusal);
        }
        let grants = sandbox.grants(declared);
        tool_box
            .insert(
                name.trim(),
                Arc::new(CommandTool::new(command).sandboxed(sandbox.clone(), grants)),
            )
            .map_err(|error| format!("--tool {}: {error}", name.trim()))?;
    }
    Ok(tool_box)
}

/// Warns of each tool a called role holds that no `--tool` gave a command for. Only roles
/// the flow calls can call a tool: a role file imported but never used (or a tool only
/// such a role holds) is no reason for a warning.
fn warn_of_tools_without_command(context: Context, spec: &CompiledSpec, tools: &ToolBox) {
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
}

/// Warns, once per MCP server, that this build does not connect to MCP servers yet: the
/// server's tools the called roles hold are not offered to the model (a `tool_choice` that
/// names one cannot be met).
fn warn_of_mcp_servers(context: Context, spec: &CompiledSpec) {
    let called = roles_called(spec);
    let mut held: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (_, role) in spec
        .roles
        .iter()
        .filter(|(role, _)| called.contains(role.as_str()))
    {
        for tool in &role.tools {
            if let Some((server, _)) = spec.mcp_server_of(tool) {
                let tools = held.entry(server).or_default();
                if !tools.contains(&tool.as_str()) {
                    tools.push(tool);
                }
            }
        }
    }
    for (server, tools) in held {
        let chosen: Vec<String> = spec
            .roles
            .iter()
            .filter(|(role, _)| called.contains(role.as_str()))
            .filter_map(|(name, role)| match &role.tool_choice {
                ToolChoiceIr::Tool(tool) if tools.contains(&tool.as_str()) => {
                    Some(format!("`{name}`"))
                }
                _ => None,
            })
            .collect();
        let choice = if chosen.is_empty() {
            String::new()
        } else {
            format!(
                "; the `tool_choice` of {} names one, so its calls will fail",
                chosen.join(", ")
            )
        };
        let tools: Vec<String> = tools.iter().map(|tool| format!("`{tool}`")).collect();
        print_err(&summary_line(
            context,
            "warning",
            &format!(
                "MCP server `{server}` is not connected: this build of charter does not speak MCP yet, so {} {} not offered to the model{choice}",
                tools.join(", "),
                if tools.len() == 1 { "is" } else { "are" }
            ),
        ));
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

/// The journal stage's result: the recording every call and answer of the run goes
/// through, appended to the journal as each ends.
#[derive(Debug)]
pub(crate) struct RunJournal {
    pub(crate) recording: Recording,
    /// How many answers the journal already held (those of a run that is resumed).
    pub(crate) answers_kept: usize,
}

/// Opens the journal at `path` (a new one when there is none) and resumes from what it
/// holds: a call or `ask` already answered there is answered from it, not asked again.
pub(crate) fn open_journal(
    path: &Path,
    environment: &LiveEnvironment,
) -> Result<RunJournal, String> {
    let (journal, entries) = Journal::open(path).map_err(|error| error.to_string())?;
    let answers_kept = entries.len();
    Ok(RunJournal {
        recording: Recording::journaled(environment.secrets.clone(), journal, entries),
        answers_kept,
    })
}

/// The signals stage: what ends a live run early, as `cancelled`.
#[derive(Debug)]
pub(crate) enum StopOn {
    /// Ctrl-C or SIGTERM at the terminal (SIGTERM is how CI, `timeout` and `docker stop`
    /// cancel). The recording is told first, since the calls the cancel drops are not
    /// answers to keep in the journal.
    Signals(Recording),
    /// A cancel sent by whoever started the run (a server's `DELETE /runs/{id}`, which
    /// tells the recording itself). A server's own Ctrl-C cancels no run: the journals
    /// keep its runs for a restart.
    Cancel(tokio::sync::watch::Receiver<bool>),
}

/// The clock a run's timers (backoffs, timeouts, the wall budget) follow.
#[derive(Debug, Clone)]
pub(crate) enum RunClock {
    /// Real time: a live run.
    Real,
    /// Paused time that jumps to the next timer: a served replay, whose recorded latencies
    /// and timeouts take no real time.
    Paused,
    /// Real time whose waits a durable engine keeps (a run on Restate).
    Kept(Arc<dyn Clock>),
}

/// Where the commands' runs differ in driving the engine.
#[derive(Debug)]
pub(crate) struct LiveRunOptions {
    pub(crate) stop: StopOn,
    pub(crate) clock: RunClock,
}

/// The run stage: one run with everything the engine acts on the world with, and what
/// drives it.
pub(crate) struct LiveRun<'spec> {
    pub(crate) spec: &'spec CompiledSpec,
    /// Model calls and `tool` steps (through the recording, for a live run).
    pub(crate) provider: Arc<dyn Provider>,
    /// The answers to `ask` steps.
    pub(crate) humans: Box<dyn HumanChannel>,
    /// Every sink the run's trace events go to, each event scrubbed of secrets first.
    pub(crate) sink: ScrubbingSink<Fanout>,
    /// Where the delivery goes, the observer of calls and the session; the driver sets
    /// the cancel from [`LiveRunOptions::stop`].
    pub(crate) config: RunConfig,
    pub(crate) options: LiveRunOptions,
    /// The calls in flight a terminal's heartbeat reports while the run runs; none for a
    /// served run, whose clients watch its stream instead.
    pub(crate) heartbeat_calls: Option<Arc<LiveCalls>>,
}

impl std::fmt::Debug for LiveRun<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LiveRun")
            .field("spec", &self.spec.name)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// What `charter run` and `charter chat` give a run watched at the terminal.
pub(crate) struct TerminalRunOptions {
    /// `--show-output`: each model answer, shortened, as it arrives.
    pub(crate) show_output: bool,
    /// Sinks besides the live view (`charter run`'s totals and events files).
    pub(crate) more_sinks: Vec<Box<dyn TraceSink>>,
    /// Where the delivery goes and the session the run is a turn of.
    pub(crate) config: RunConfig,
}

impl<'spec> LiveRun<'spec> {
    /// A run watched at the terminal: shown live on stderr with a heartbeat for long
    /// calls, a person asked on stdin, every call and answer through `recording`, and
    /// cancelled by Ctrl-C or SIGTERM.
    pub(crate) fn at_terminal(
        spec: &'spec CompiledSpec,
        environment: &LiveEnvironment,
        providers: Providers,
        recording: &Recording,
        options: TerminalRunOptions,
    ) -> Self {
        LiveRun::at_terminal_through(
            spec,
            environment,
            (providers, TerminalHumans),
            recording,
            options,
        )
    }

    /// [`LiveRun::at_terminal`] with the calls and questions going to `provider` and
    /// `humans` (through `recording`) instead of straight to the providers and the
    /// person at the terminal: a fork's replay in front of them.
    pub(crate) fn at_terminal_through<P, H>(
        spec: &'spec CompiledSpec,
        environment: &LiveEnvironment,
        (provider, humans): (P, H),
        recording: &Recording,
        options: TerminalRunOptions,
    ) -> Self
    where
        P: Provider + 'static,
        H: HumanChannel + 'static,
    {
        let calls = LiveCalls::new(options.show_output);
        let mut sinks: Vec<Box<dyn TraceSink>> =
            vec![Box::new(LiveDisplay::with_calls(calls.clone()))];
        sinks.extend(options.more_sinks);
        LiveRun {
            spec,
            provider: Arc::new(recording.provider(provider)),
            humans: Box::new(recording.humans(humans)),
            sink: ScrubbingSink::new(Fanout(sinks), environment.scrubber.clone()),
            config: RunConfig {
                observer: Some(calls.clone()),
                ..options.config
            },
            options: LiveRunOptions {
                stop: StopOn::Signals(recording.clone()),
                clock: RunClock::Real,
            },
            heartbeat_calls: Some(calls),
        }
    }

    /// Runs the spec on `input` to its end, on a tokio runtime of its own with the clock
    /// the options name, writing deliveries to the local files; cancelled as
    /// [`LiveRunOptions::stop`] says.
    pub(crate) fn run(mut self, input: Value) -> Result<RunOutcome, String> {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        builder.enable_all();
        if matches!(self.options.clock, RunClock::Paused) {
            builder.start_paused(true);
        }
        let runtime = builder
            .build()
            .map_err(|error| format!("cannot start the runtime: {error}"))?;
        let heartbeat = self.heartbeat_calls.as_ref().map(LiveCalls::heartbeat);
        let result = runtime.block_on(async {
            let signal_watcher = match self.options.stop {
                StopOn::Signals(recording) => {
                    let (watcher, cancelled) = watch_signals(recording)?;
                    self.config.cancel = Some(cancelled);
                    Some(watcher)
                }
                StopOn::Cancel(cancelled) => {
                    self.config.cancel = Some(cancelled);
                    None
                }
            };
            let mut effects =
                Effects::new(self.provider, &*self.humans, &mut self.sink).with_files(&LocalFiles);
            if let RunClock::Kept(clock) = &self.options.clock {
                effects = effects.with_clock(clock.clone());
            }
            let result =
                charter_runtime::engine::run::run(self.spec, input, effects, &self.config).await;
            if let Some(watcher) = signal_watcher {
                watcher.abort();
            }
            result.map_err(|error| error.to_string())
        });
        drop(heartbeat);
        result
    }
}

/// Watches for Ctrl-C and SIGTERM on the current runtime: the first tells `recording`,
/// then cancels the run through the returned receiver.
fn watch_signals(
    recording: Recording,
) -> Result<
    (
        tokio::task::JoinHandle<()>,
        tokio::sync::watch::Receiver<bool>,
    ),
    String,
> {
    let (cancel, cancelled) = tokio::sync::watch::channel(false);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|error| format!("cannot handle SIGTERM: {error}"))?;
    let watcher = tokio::spawn(async move {
        let interrupted = tokio::select! {
            signal = tokio::signal::ctrl_c() => signal.is_ok(),
            signal = terminate.recv() => signal.is_some(),
        };
        if interrupted {
            // Calls dropped by the cancel are not answers to keep in the journal.
            recording.cancel();
            let _ = cancel.send(true);
        }
    });
    Ok((watcher, cancelled))
}

/// The totals stage: what a run used (tokens, calls, time), added up from its trace
/// events as they happen, for the totals line.
#[derive(Debug)]
pub(crate) struct LiveTotals {
    sink: TotalsSink,
    started: Instant,
}

impl LiveTotals {
    /// Starts counting now, for a run of `spec`.
    pub(crate) fn start(spec: &CompiledSpec) -> Self {
        LiveTotals {
            sink: TotalsSink::new(Arc::new(spec.clone())),
            started: Instant::now(),
        }
    }

    /// The sink that counts: give it the run's trace events.
    pub(crate) fn sink(&self) -> Box<dyn TraceSink> {
        Box::new(self.sink.clone())
    }

    /// `totals: ...`, with the real time since the count started, and a newline.
    pub(crate) fn line(&self) -> String {
        format!(
            "{}\n",
            crate::display::totals_line(&self.sink.totals(), self.started.elapsed(), false)
        )
    }
}

/// Every event to every sink.
pub(crate) struct Fanout(pub(crate) Vec<Box<dyn TraceSink>>);

impl std::fmt::Debug for Fanout {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Fanout")
            .field("sinks", &self.0.len())
            .finish()
    }
}

impl TraceSink for Fanout {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        for sink in &mut self.0 {
            sink.append(event)?;
        }
        Ok(())
    }
}

/// `--show-output` for runs no terminal watches (a server's): each model answer, shortened
/// and scrubbed of secrets, on stderr as it arrives, named by its run and place.
#[derive(Debug)]
pub(crate) struct ShownAnswers {
    /// The run the answers belong to, as its lines name it.
    pub(crate) run: String,
    pub(crate) scrubber: Scrubber,
}

impl CallObserver for ShownAnswers {
    fn tool_started(&self, _key: &CallKey, _tool: &str) {}

    fn tool_finished(&self, _key: &CallKey, _tool: &str, _ok: bool) {}

    fn model_answered(&self, key: &CallKey, answer: &str) {
        let answered = crate::display::answered(&self.scrubber.text(answer));
        print_err(&format!(
            "run {}  {:<28} {answered}\n",
            self.run,
            crate::display::place(key)
        ));
    }
}

/// Every observer told of every call, in order.
pub(crate) struct Observers(pub(crate) Vec<Arc<dyn CallObserver>>);

impl std::fmt::Debug for Observers {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Observers")
            .field("observers", &self.0.len())
            .finish()
    }
}

impl CallObserver for Observers {
    fn tool_started(&self, key: &CallKey, tool: &str) {
        for observer in &self.0 {
            observer.tool_started(key, tool);
        }
    }

    fn tool_finished(&self, key: &CallKey, tool: &str, ok: bool) {
        for observer in &self.0 {
            observer.tool_finished(key, tool, ok);
        }
    }

    fn model_answered(&self, key: &CallKey, answer: &str) {
        for observer in &self.0 {
            observer.model_answered(key, answer);
        }
    }
}

/// Asks the person at the terminal: the question on stderr, `y` or `n` (and an optional
/// note after it) on stdin. No answer (end of input) is an error: the run cannot decide.
#[derive(Debug)]
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
                _ => Err(ProviderError::Unanswered {
                    message: format!(
                        "standard input ended before the question of step `{}` was answered (answer `y` or `n` on it, or record the run's answers into a scenario)",
                        request.step
                    ),
                }),
            }
        })
    }
}
