//! `charter worker SPEC... --listen ADDR`: runs on Restate (DESIGN §16) — serves the `CharterRun` workflow, keyed by run id, whose `run` drives one run of a spec and whose shared handlers answer an `ask` and report status and events.
//!
//! **How a run survives.** The scheduler runs as `charter run` runs it, on a thread of its
//! own, through a [`Recording`] whose journal is the invocation's Restate journal: each
//! model or tool call, once answered, is one `ctx.run` entry holding the answer (what the
//! local journal's line holds), acknowledged by the server before the run sees it. Restate
//! re-invokes a run whose worker was lost; the handler first reads back every entry the
//! journal holds, hands them to the recording (which answers those calls at once, keyed
//! as the local journal is), and only then starts the scheduler. No call that had an
//! answer is made again.
//!
//! Restate replays a journal in order, so every command the handler writes follows from
//! an entry read back the same way: the entries are written in the order the answers came,
//! and each state write (`status`, `events`) and each durable promise follows the entry
//! that says it. Reading back ends at the first `ctx.run` whose closure runs (the journal
//! has no more): that entry, a `started` marker, is then kept too.
//!
//! - `ask`: the entry `asked` names a durable promise (`ask/STEP/ROUND/ATTEMPT`) and the
//!   status says the run waits on it; the shared handler `answer` resolves it, whatever
//!   worker runs the run then.
//! - Waits: the run's clock ([`KeptClock`]) counts from the first `started` entry; a
//!   backoff's end is a `deadline` entry, which a run started again waits only what is left
//!   of; a wait with nothing in flight is a `sleep` entry and a durable sleep the handler
//!   waits on — the invocation suspends as on an ask, and no worker holds it meanwhile.
//! - Trace events are kept in the workflow's state (`events.N`, a batch with each entry);
//!   a run started again skips the events it had kept, so ids neither repeat nor skip.
//! - A request the worker cannot run (no such spec, an input that breaks the request
//!   contract) is a terminal error of that invocation, with its message in `status`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use tokio::time::Instant;

use charter_compiler::CompiledSpec;
use charter_runtime::engine::effects::{Clock, HumanChannel, Provider};
use charter_runtime::engine::provider::{
    BoxFuture, CallKey, CallObserver, HumanRequest, ProviderError,
};
use charter_runtime::engine::run::{RunConfig, RunOutcome};
use charter_runtime::engine::session::Session;
use charter_runtime::formats::trace::{TraceError, TraceEvent, TraceSink};
use charter_runtime::world::record::{JournalEntry, JournalWrite, Recording};
use charter_runtime::world::secrets::{Scrubber, ScrubbingSink};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::driver::{
    Fanout, LiveEnvironment, LiveFlags, LiveRun, LiveRunOptions, Observers, PreparedSpec, RunClock,
    ShownAnswers, StopOn, model_overrides,
};
use crate::terminal::{Context, Outcome, print_err};

/// `charter worker`: serve runs of the specs as a Restate deployment.
#[derive(Debug, clap::Args)]
#[command(
    about = "Serve runs of specs on Restate: the CharterRun workflow, for a Restate server to call",
    long_about = "Serve runs of specs on Restate (DESIGN §16): this process is a deployment that \
a Restate server calls. It serves the workflow `CharterRun`, keyed by run id:\n  \
run({\"spec\": NAME, \"input\": {...}}) runs the spec and returns its result (outcome, reason, answer); \
with \"session\": {...} (as `charter serve` keeps it) the run is a turn of that conversation, and its result holds the session it leaves;\n  \
answer({\"approved\": true, \"note\": \"...\"}) answers the `ask` the run waits on;\n  \
status() says running, waiting (and on which ask), finished (with the result) or error;\n  \
events(N) gives the run's trace events from the N-th on;\n  \
rows(N) the other rows of its live stream (role outputs, tools started and finished) from the N-th on.\n\
A worker killed mid-run loses nothing: the server calls the run again on any worker \
registered for it, every model answer already given comes from the journal, and no model \
is asked twice. A run waiting on an ask, or out a backoff with nothing in flight, suspends \
(no worker holds it) and a lost worker does not start the wait again. Model keys and addresses come from the environment, as for `charter run`.",
    after_help = "Examples:\n  \
restate-server --base-dir /var/lib/restate &             # the server: ingress :8080, admin :9070\n  \
charter worker specs/closed_loop.charter --listen 127.0.0.1:9080 &\n  \
curl -s localhost:9070/deployments -H 'content-type: application/json' -d '{\"uri\": \"http://127.0.0.1:9080\"}'\n  \
curl -s localhost:8080/CharterRun/run-1/run -H 'content-type: application/json' -d '{\"input\": {\"goal\": \"...\"}}'\n  \
curl -s localhost:8080/CharterRun/run-1/status -X POST"
)]
pub struct WorkerArgs {
    /// The specs this worker runs, named in `run` by their spec name (optional with one).
    #[arg(value_name = "SPEC", required = true)]
    pub specs: Vec<PathBuf>,

    /// The address to serve the deployment on (the Restate server calls it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9080")]
    pub listen: SocketAddr,

    #[command(flatten)]
    pub live: LiveFlags,
}

/// Compiles the specs, then serves the deployment until the process is stopped.
pub fn run(args: &WorkerArgs, context: Context) -> anyhow::Result<Outcome> {
    let overrides = match model_overrides(context, &args.live.models) {
        Ok(overrides) => overrides,
        Err(outcome) => return Ok(outcome),
    };
    let environment = LiveEnvironment::of_this_process();
    let sandbox = match args.live.sandbox.sandbox() {
        Ok(sandbox) => sandbox,
        Err(message) => {
            crate::terminal::print_error(context, &message);
            return Ok(Outcome::Usage);
        }
    };
    if !args.live.tools.is_empty() {
        crate::driver::warn_of_missing_sandbox(context, &sandbox);
    }
    let mut specs = HashMap::new();
    for path in &args.specs {
        let prepared = match PreparedSpec::compile_served(context, path, &overrides) {
            Ok(prepared) => prepared,
            Err(outcome) => return Ok(outcome),
        };
        let missing = environment.settings.missing_for(&prepared.spec);
        if !missing.is_empty() {
            for line in missing {
                crate::terminal::print_error(context, &line);
            }
            return Ok(Outcome::Usage);
        }
        if let Err(message) = environment.providers(&prepared.spec, &args.live.tools, &sandbox) {
            crate::terminal::print_error(context, &message);
            return Ok(Outcome::Usage);
        }
        specs.insert(prepared.spec.name.clone(), Arc::new(prepared.spec));
    }
    let worker = Worker(Arc::new(Served {
        specs,
        environment,
        tools: args.live.tools.clone(),
        sandbox,
        show_output: args.live.show_output,
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let listen = args.listen;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        print_err(&format!(
            "charter worker: serving CharterRun on http://{}\n",
            listener.local_addr()?
        ));
        let workflow = worker
            .into_service_definition()
            .options(ServiceOptions::default().abort_timeout(ABORT_TIMEOUT));
        HttpServer::new(Endpoint::builder().bind(workflow).build())
            .serve(listener)
            .await;
        anyhow::Ok(())
    })?;
    Ok(Outcome::Clean)
}

/// How long Restate lets a run's invocation go on once it has been silent for the
/// inactivity timeout (1 minute by default) and cannot suspend. A model or tool call runs
/// outside any Restate await, so a call longer than Restate's default (1 minute) would be
/// cut and the run started again; a run waiting on an `ask` suspends instead, whatever
/// this says.
const ABORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// What every run of this worker shares.
struct Served {
    specs: HashMap<String, Arc<CompiledSpec>>,
    environment: LiveEnvironment,
    tools: Vec<String>,
    /// The sandbox tool commands run in.
    sandbox: Arc<charter_runtime::world::sandbox::Sandbox>,
    /// `--show-output`: each model answer on stderr, named by its run.
    show_output: bool,
}

/// The workflow's implementation.
#[derive(Clone)]
struct Worker(Arc<Served>);

/// The name of every `ctx.run` entry: a replay checks each entry's name, and reading back
/// cannot know which kind of entry comes next.
const ENTRY: &str = "charter";

/// One thing a run's Restate journal keeps (the value of each `ctx.run` entry).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kept", rename_all = "snake_case")]
enum Kept {
    /// The run was started (again) here, at `at_ms` (ms since the Unix epoch): the first
    /// start is when the run's wall budget and event times count from.
    Started {
        #[serde(default)]
        at_ms: Option<u64>,
    },
    /// The end of a backoff (named by the call it follows), kept the first time the run
    /// waits it: a run started again waits only what is left of it.
    Deadline {
        key: String,
        until_ms: u64,
        events: Vec<Value>,
    },
    /// The run waits with nothing in flight until `until_ms`: a durable sleep follows
    /// this entry, on which the invocation may suspend.
    Sleep { until_ms: u64, events: Vec<Value> },
    /// A call's answer or a person's answer, as the local journal keeps it, with the
    /// trace events emitted before it.
    Answer {
        entry: JournalEntry,
        events: Vec<Value>,
    },
    /// The run asks: it waits on the durable promise `promise`.
    Asked {
        promise: String,
        step: String,
        question: String,
        events: Vec<Value>,
    },
    /// The run's last trace events and its result.
    Finished { events: Vec<Value>, result: Value },
}

#[restate_sdk::workflow(name = "CharterRun")]
impl Worker {
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        Json(body): Json<Value>,
    ) -> Result<Json<Value>, HandlerError> {
        let ctx = &ctx;
        ctx.set("status", Json(json!({"state": "running"})));
        let (spec, input, session) = match self.admit(&body) {
            Ok(admitted) => admitted,
            Err(message) => {
                ctx.set(
                    "status",
                    Json(json!({"state": "error", "message": message})),
                );
                return Err(TerminalError::new(message).into());
            }
        };
        let mut kept = KeptState::default();
        loop {
            let live = Arc::new(AtomicBool::new(false));
            let flag = live.clone();
            let Json(entry) = ctx
                .run(|| async move {
                    flag.store(true, Ordering::SeqCst);
                    Ok(Json(Kept::Started {
                        at_ms: Some(unix_ms()),
                    }))
                })
                .name(ENTRY)
                .await?;
            kept.apply(ctx, &entry);
            if live.load(Ordering::SeqCst) {
                break;
            }
            if let Kept::Finished { result, .. } = entry {
                return Ok(Json(result));
            }
        }
        let result = self.drive(ctx, kept, spec, (input, session)).await?;
        Ok(Json(result))
    }

    #[handler]
    async fn answer(
        &self,
        ctx: SharedWorkflowContext<'_>,
        Json(answer): Json<Value>,
    ) -> Result<(), HandlerError> {
        let status: Option<Json<Value>> = ctx.get("status").await?;
        let status = status.map(|Json(status)| status).unwrap_or(Value::Null);
        let Some(promise) = status.pointer("/ask/promise").and_then(Value::as_str) else {
            return Err(TerminalError::new(format!(
                "this run waits on no ask (its status is {status})"
            ))
            .into());
        };
        ctx.resolve_promise(promise, Json(answer));
        Ok(())
    }

    #[handler]
    async fn status(&self, ctx: SharedWorkflowContext<'_>) -> Result<Json<Value>, HandlerError> {
        let status: Option<Json<Value>> = ctx.get("status").await?;
        Ok(status.unwrap_or_else(|| Json(json!({"state": "unknown"}))))
    }

    #[handler]
    async fn events(
        &self,
        ctx: SharedWorkflowContext<'_>,
        Json(since): Json<Value>,
    ) -> Result<Json<Value>, HandlerError> {
        let since = since_of(&since);
        let batches: Option<Json<u64>> = ctx.get(BATCHES).await?;
        let batches = batches.map_or(0, |Json(batches)| batches);
        // The last batches first, back to the one that holds event `since`.
        let mut events = Vec::new();
        for index in (0..batches).rev() {
            let batch: Option<Json<EventBatch>> = ctx.get(&batch_key(index)).await?;
            let Some(Json(batch)) = batch else { break };
            let from = batch.from;
            events.splice(0..0, batch.events);
            if from <= since {
                let skip = usize::try_from(since - from).unwrap_or(usize::MAX);
                events.drain(..skip.min(events.len()));
                break;
            }
        }
        Ok(Json(Value::Array(events)))
    }

    /// The stream's other rows from the `since`th on (at most 1,000), each `{at, row}`:
    /// `row` comes before trace event number `at`.
    #[handler]
    async fn rows(
        &self,
        ctx: SharedWorkflowContext<'_>,
        Json(since): Json<Value>,
    ) -> Result<Json<Value>, HandlerError> {
        let since = since_of(&since);
        let count: Option<Json<u64>> = ctx.get(ROWS).await?;
        let count = count.map_or(0, |Json(count)| count);
        let mut rows = Vec::new();
        for index in since..count.min(since.saturating_add(MAX_ROWS)) {
            let row: Option<Json<Value>> = ctx.get(&row_key(index)).await?;
            let Some(Json(row)) = row else { break };
            rows.push(row);
        }
        Ok(Json(Value::Array(rows)))
    }
}

/// The `since` a shared handler is given: a number, or `{"since": N}` (0 otherwise).
fn since_of(since: &Value) -> u64 {
    since
        .as_u64()
        .or_else(|| since.get("since").and_then(Value::as_u64))
        .unwrap_or(0)
}

/// The state key of the number of event batches a run has kept.
const BATCHES: &str = "events.batches";

/// The state key of event batch `index`.
fn batch_key(index: u64) -> String {
    format!("events.{index}")
}

/// The state key of the number of other rows a run has kept.
const ROWS: &str = "rows.count";

/// The state key of row `index`.
fn row_key(index: u64) -> String {
    format!("rows.{index}")
}

/// The most rows one `rows` call gives.
const MAX_ROWS: u64 = 1000;

/// Whether `event` is a row of the stream that is no trace event (what a run's
/// observer tells: a role's output, a tool started or finished).
fn is_live_row(event: &Value) -> bool {
    event
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|kind| crate::stream_rows::LIVE_ROW_KINDS.contains(&kind))
}

/// The trace events kept with one entry, from event number `from` on: a run's trace is
/// kept in batches, so that each state write holds only what is new.
#[derive(Debug, Serialize, Deserialize)]
struct EventBatch {
    from: u64,
    events: Vec<Value>,
}

/// What the entries read back (or written) so far say: the answers to resume from, the
/// trace events kept, the asks whose promise was taken, when the run first started, the
/// backoffs' ends and the durable sleeps taken.
#[derive(Default)]
struct KeptState<'a> {
    entries: Vec<JournalEntry>,
    /// How many trace events are kept, in how many batches.
    events: u64,
    batches: u64,
    /// How many of the stream's other rows (a role's output, a tool started or finished)
    /// are kept, each as `rows.N`.
    rows: u64,
    promises: HashMap<String, PromiseFuture<'a>>,
    /// The first start, in ms since the Unix epoch.
    started_ms: Option<u64>,
    deadlines: HashMap<String, u64>,
    /// The durable sleeps not yet waited on by this invocation, by their end.
    sleeps: HashMap<u64, SleepFuture<'a>>,
}

type PromiseFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Json<Value>, TerminalError>> + Send + 'a>>;

type SleepFuture<'a> = Pin<Box<dyn Future<Output = Result<(), TerminalError>> + Send + 'a>>;

impl<'a> KeptState<'a> {
    /// Does what `entry` says to the workflow's state, the same when it is written and
    /// when it is read back (Restate checks that a replay writes the same).
    fn apply(&mut self, ctx: &'a WorkflowContext<'a>, entry: &Kept) {
        match entry {
            Kept::Started { at_ms } => {
                if self.started_ms.is_none() {
                    self.started_ms = *at_ms;
                }
            }
            Kept::Deadline {
                key,
                until_ms,
                events,
            } => {
                self.keep_events(ctx, events);
                self.deadlines.insert(key.clone(), *until_ms);
            }
            Kept::Sleep { until_ms, events } => {
                self.keep_events(ctx, events);
                // Read back, the sleep is the one taken then: it ends when it was to end
                // (Restate keeps its wake-up time), whatever this duration says.
                let duration = std::time::Duration::from_millis(until_ms.saturating_sub(unix_ms()));
                let future: SleepFuture<'a> = Box::pin(ctx.sleep(duration));
                self.sleeps.insert(*until_ms, future);
            }
            Kept::Answer { entry, events } => {
                self.keep_events(ctx, events);
                if let JournalEntry::Human(human) = entry {
                    self.promises
                        .remove(&promise_name(&human.step, human.round, human.attempt));
                    ctx.set("status", Json(json!({"state": "running"})));
                }
                self.entries.push(entry.clone());
            }
            Kept::Asked {
                promise,
                step,
                question,
                events,
            } => {
                self.keep_events(ctx, events);
                ctx.set(
                    "status",
                    Json(json!({"state": "waiting", "ask": {
                        "promise": promise, "step": step, "question": question}})),
                );
                // The SDK ties a promise's future to its name's lifetime: the name (a few
                // bytes per ask) lives as long as the process.
                let name: &'a str = Box::leak(promise.clone().into_boxed_str());
                let future: PromiseFuture<'a> = Box::pin(ctx.promise::<Json<Value>>(name));
                self.promises.insert(promise.clone(), future);
            }
            Kept::Finished { events, result } => {
                self.keep_events(ctx, events);
                ctx.set(
                    "status",
                    Json(json!({"state": "finished", "result": result})),
                );
            }
        }
    }

    /// Keeps the trace events in a batch, and each other row of the stream with the number
    /// of the trace event it came before.
    fn keep_events(&mut self, ctx: &WorkflowContext<'a>, events: &[Value]) {
        let mut trace = Vec::with_capacity(events.len());
        let rows_before = self.rows;
        for event in events {
            if is_live_row(event) {
                let at = self.events + trace.len() as u64;
                ctx.set(&row_key(self.rows), Json(json!({"at": at, "row": event})));
                self.rows += 1;
            } else {
                trace.push(event.clone());
            }
        }
        if self.rows != rows_before {
            ctx.set(ROWS, Json(self.rows));
        }
        if !trace.is_empty() {
            let kept = trace.len() as u64;
            let batch = EventBatch {
                from: self.events,
                events: trace,
            };
            ctx.set(&batch_key(self.batches), Json(batch));
            self.batches += 1;
            ctx.set(BATCHES, Json(self.batches));
            self.events += kept;
        }
    }
}

fn promise_name(step: &str, round: u64, attempt: u64) -> String {
    format!("ask/{step}/{round}/{attempt}")
}

/// What the run's thread asks of the handler, which alone holds the Restate context.
enum ToHandler {
    /// Keep `entry` (and the events before it); say when it is kept.
    Keep(Kept, mpsc::Sender<Result<(), String>>),
    /// The run waits with nothing in flight until `until_ms`: say when the durable sleep
    /// ends.
    Sleep {
        until_ms: u64,
        events: Vec<Value>,
        reply: tokio::sync::oneshot::Sender<Result<(), String>>,
    },
    /// The run asks: the answer, when someone gives it.
    Ask {
        request: HumanRequest,
        events: Vec<Value>,
        reply: tokio::sync::oneshot::Sender<Result<Value, String>>,
    },
}

impl Worker {
    /// The spec and input `body` names, or why they cannot be run.
    fn admit(&self, body: &Value) -> Result<(Arc<CompiledSpec>, Value, Option<Session>), String> {
        let served = &self.0;
        let spec = match body.get("spec").and_then(Value::as_str) {
            Some(name) => served.specs.get(name).cloned().ok_or_else(|| {
                let mut names: Vec<&str> = served.specs.keys().map(String::as_str).collect();
                names.sort_unstable();
                format!(
                    "this worker does not run spec `{}`; it runs {}",
                    charter_runtime::world::escape::one_line(name, 100),
                    names.join(", ")
                )
            })?,
            None if served.specs.len() == 1 => {
                served.specs.values().next().cloned().ok_or("no spec")?
            }
            None => {
                let mut names: Vec<&str> = served.specs.keys().map(String::as_str).collect();
                names.sort_unstable();
                return Err(format!(
                    "give the spec to run as \"spec\": one of {}",
                    names.join(", ")
                ));
            }
        };
        let input = body.get("input").cloned().unwrap_or(Value::Null);
        if let Err(violations) = charter_runtime::engine::validate::validate_request(&spec, &input)
        {
            let contract = spec.request.as_deref().unwrap_or("Request");
            let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
            return Err(format!(
                "the input does not match the request contract `{contract}`; nothing was run: {}",
                listed.join("; ")
            ));
        }
        let session = match body.get("session") {
            None | Some(Value::Null) => None,
            Some(session) => Some(session_of(&spec, session)?),
        };
        Ok((spec, input, session))
    }

    /// Runs the scheduler on a thread of its own, keeping each answer in the journal as it
    /// comes and resolving each ask from its promise, to the run's end.
    async fn drive<'a>(
        &self,
        ctx: &'a WorkflowContext<'a>,
        mut kept: KeptState<'a>,
        spec: Arc<CompiledSpec>,
        (input, session): (Value, Option<Session>),
    ) -> Result<Value, HandlerError> {
        let (to_handler, mut requests) = tokio::sync::mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(PendingEvents {
            skip: usize::try_from(kept.events).unwrap_or(usize::MAX),
            skip_rows: usize::try_from(kept.rows).unwrap_or(usize::MAX),
            events: Vec::new(),
        }));
        let run = self.run_effects(ctx.key(), &mut kept, &spec, to_handler, &pending)?;
        // The invocation ended here (suspended, or its worker told to stop): the run's
        // thread stops too, before it makes another call.
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        let _cancel_on_drop = CancelOnDrop(cancel);
        let (done_tx, mut done) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(run.start(&spec, input, session, cancelled));
        });
        // The asks and the durable sleeps the run waits on, each replying when it ends.
        let mut waits: Waits<'a> = FuturesUnordered::new();
        let outcome = loop {
            tokio::select! {
                request = requests.recv() => match request {
                    Some(request) => take_request(ctx, &mut kept, request, &mut waits).await?,
                    // The run's thread has let go of its effects: its result is next.
                    None => break (&mut done).await,
                },
                Some(()) = waits.next(), if !waits.is_empty() => {}
                outcome = &mut done => break outcome,
            }
        };
        let outcome = outcome
            .map_err(|_| TerminalError::new("the run's thread ended without a result"))?
            .map_err(TerminalError::new)?;
        let result = result_of(&outcome);
        let events = std::mem::take(&mut pending_lock(&pending).events);
        keep(
            ctx,
            &mut kept,
            Kept::Finished {
                events,
                result: result.clone(),
            },
        )
        .await?;
        Ok(result)
    }

    /// What run `key` acts on the world with: calls through a recording whose journal is
    /// the handler's (answering those `kept` holds), asks and waits through the handler,
    /// trace events and stream rows held in `pending` for the next entry.
    fn run_effects(
        &self,
        key: &str,
        kept: &mut KeptState<'_>,
        spec: &CompiledSpec,
        to_handler: tokio::sync::mpsc::UnboundedSender<ToHandler>,
        pending: &Arc<Mutex<PendingEvents>>,
    ) -> Result<RunEffects, TerminalError> {
        let served = &self.0;
        let recording = Recording::journaled_in(
            served.environment.secrets.clone(),
            Box::new(HandlerJournal {
                to_handler: to_handler.clone(),
                pending: pending.clone(),
            }),
            std::mem::take(&mut kept.entries),
        );
        let providers = served
            .environment
            .providers(spec, &served.tools, &served.sandbox)
            .map_err(TerminalError::new)?;
        let scrubber = served.environment.scrubber.clone();
        let mut observers: Vec<Arc<dyn CallObserver>> = vec![Arc::new(KeptRows {
            pending: pending.clone(),
            scrubber: scrubber.clone(),
        })];
        if served.show_output {
            observers.push(Arc::new(ShownAnswers {
                run: key.to_string(),
                scrubber: scrubber.clone(),
            }));
        }
        Ok(RunEffects {
            provider: Arc::new(recording.provider(providers)),
            humans: Box::new(recording.humans(HandlerAsks {
                to_handler: to_handler.clone(),
                pending: pending.clone(),
            })),
            clock: Arc::new(KeptClock::new(
                kept.started_ms,
                kept.deadlines.clone(),
                to_handler,
                pending.clone(),
            )),
            sink: ScrubbingSink::new(
                Fanout(vec![Box::new(KeptEvents(pending.clone()))]),
                scrubber,
            ),
            observer: Arc::new(Observers(observers)),
        })
    }
}

/// The asks and durable sleeps a run waits on, each replying to the run's thread when it
/// ends.
type Waits<'a> = FuturesUnordered<Pin<Box<dyn Future<Output = ()> + Send + 'a>>>;

/// What a run on Restate acts on the world with ([`Worker::run_effects`]).
struct RunEffects {
    provider: Arc<dyn Provider>,
    humans: Box<dyn HumanChannel>,
    clock: Arc<KeptClock>,
    sink: ScrubbingSink<Fanout>,
    observer: Arc<dyn CallObserver>,
}

impl RunEffects {
    /// Runs `spec` on `input` (a turn of `session`, if given) to its end, on the calling
    /// thread, until `cancelled`.
    fn start(
        self,
        spec: &CompiledSpec,
        input: Value,
        session: Option<Session>,
        cancelled: tokio::sync::watch::Receiver<bool>,
    ) -> Result<RunOutcome, String> {
        LiveRun {
            spec,
            provider: self.provider,
            humans: self.humans,
            sink: self.sink,
            config: RunConfig {
                observer: Some(self.observer),
                session,
                ..RunConfig::default()
            },
            options: LiveRunOptions {
                stop: StopOn::Cancel(cancelled),
                clock: RunClock::Kept(self.clock),
            },
            heartbeat_calls: None,
        }
        .run(input)
    }
}

/// Does what the run's thread asks: keeps an entry, or takes an ask's promise or a
/// durable sleep (writing the entry that names it, unless one read back does) and waits
/// on it among `waits`.
async fn take_request<'a>(
    ctx: &'a WorkflowContext<'a>,
    kept: &mut KeptState<'a>,
    request: ToHandler,
    waits: &mut Waits<'a>,
) -> Result<(), TerminalError> {
    match request {
        ToHandler::Keep(entry, reply) => {
            let written = keep(ctx, kept, entry).await;
            let _ = reply.send(written.as_ref().map(|_| ()).map_err(ToString::to_string));
            written
        }
        ToHandler::Ask {
            request,
            events,
            reply,
        } => {
            let promise = promise_name(&request.step, request.round, request.attempt);
            if !kept.promises.contains_key(&promise) {
                let asked = Kept::Asked {
                    promise: promise.clone(),
                    step: request.step.clone(),
                    question: request.question.clone(),
                    events,
                };
                keep(ctx, kept, asked).await?;
            }
            if let Some(future) = kept.promises.remove(&promise) {
                waits.push(Box::pin(async move {
                    let answer = future.await;
                    let _ =
                        reply.send(answer.map(|Json(answer)| answer).map_err(|e| e.to_string()));
                }));
            }
            Ok(())
        }
        ToHandler::Sleep {
            until_ms,
            events,
            reply,
        } => {
            if !kept.sleeps.contains_key(&until_ms) {
                keep(ctx, kept, Kept::Sleep { until_ms, events }).await?;
            }
            if let Some(future) = kept.sleeps.remove(&until_ms) {
                waits.push(Box::pin(async move {
                    let _ = reply.send(future.await.map_err(|error| error.to_string()));
                }));
            }
            Ok(())
        }
    }
}

/// Writes `entry` as one `ctx.run` entry, then does what it says to the state.
async fn keep<'a>(
    ctx: &'a WorkflowContext<'a>,
    kept: &mut KeptState<'a>,
    entry: Kept,
) -> Result<(), TerminalError> {
    let Json(written) = ctx
        .run(|| async move { Ok(Json(entry)) })
        .name(ENTRY)
        .await?;
    kept.apply(ctx, &written);
    Ok(())
}

/// The session a turn of a conversation starts from (`"session"` in `run`'s body, as
/// `charter serve` keeps it), or why this spec cannot take it.
fn session_of(spec: &CompiledSpec, session: &Value) -> Result<Session, String> {
    if spec.session.is_none() {
        return Err(format!(
            "spec `{}` keeps no session (it has no `session` contract); send no \"session\"",
            spec.name
        ));
    }
    let session: Session = serde_json::from_value(session.clone())
        .map_err(|error| format!("the \"session\" is not a session: {error}"))?;
    if session.spec != spec.name {
        return Err(format!(
            "the session belongs to spec `{}`, not `{}`",
            charter_runtime::world::escape::one_line(&session.spec, 100),
            spec.name
        ));
    }
    Ok(session)
}

/// What a finished run tells, as `charter serve`'s `GET /runs/{id}` (its answer whole),
/// with the session a conversation's turn leaves.
fn result_of(outcome: &RunOutcome) -> Value {
    let mut result = crate::stream_rows::result_of(outcome);
    if let Some(session) = &outcome.session {
        result["session"] = json!(session);
    }
    result
}

/// The trace events emitted since the last entry was kept (after skipping those a run
/// started again emits a second time).
struct PendingEvents {
    skip: usize,
    /// The other rows of the stream to skip, as `skip`.
    skip_rows: usize,
    events: Vec<Value>,
}

fn pending_lock(pending: &Mutex<PendingEvents>) -> std::sync::MutexGuard<'_, PendingEvents> {
    pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The run's observer: the rows of a served run's stream that are no trace events (a
/// role's output, a tool started or finished), scrubbed, wait with the events for the
/// next entry.
struct KeptRows {
    pending: Arc<Mutex<PendingEvents>>,
    scrubber: Scrubber,
}

impl KeptRows {
    fn keep(&self, row: Value) {
        let mut pending = pending_lock(&self.pending);
        if pending.skip_rows > 0 {
            pending.skip_rows -= 1;
            return;
        }
        pending.events.push(self.scrubber.value(&row));
    }
}

impl std::fmt::Debug for KeptRows {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("KeptRows").finish_non_exhaustive()
    }
}

impl CallObserver for KeptRows {
    fn tool_started(&self, key: &CallKey, tool: &str) {
        self.keep(crate::stream_rows::tool_started_row(key, tool));
    }

    fn tool_finished(&self, key: &CallKey, tool: &str, ok: bool) {
        self.keep(crate::stream_rows::tool_finished_row(key, tool, ok));
    }

    fn model_answered(&self, key: &CallKey, answer: &str) {
        self.keep(crate::stream_rows::role_output_row(key, answer));
    }
}

/// The run's trace sink: each event waits in [`PendingEvents`] for the next entry.
struct KeptEvents(Arc<Mutex<PendingEvents>>);

impl TraceSink for KeptEvents {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        let mut pending = pending_lock(&self.0);
        if pending.skip > 0 {
            pending.skip -= 1;
            return Ok(());
        }
        let value = serde_json::to_value(event)?;
        pending.events.push(value);
        Ok(())
    }
}

/// The recording's journal: each entry goes to the handler, and the run's thread waits
/// until the Restate server has kept it.
struct HandlerJournal {
    to_handler: tokio::sync::mpsc::UnboundedSender<ToHandler>,
    pending: Arc<Mutex<PendingEvents>>,
}

impl JournalWrite for HandlerJournal {
    fn append(&self, entry: &JournalEntry) -> Result<(), String> {
        let events = std::mem::take(&mut pending_lock(&self.pending).events);
        let (reply, written) = mpsc::channel();
        let kept = Kept::Answer {
            entry: entry.clone(),
            events,
        };
        self.to_handler
            .send(ToHandler::Keep(kept, reply))
            .map_err(|_| "the run's invocation has ended".to_string())?;
        written
            .recv()
            .map_err(|_| "the run's invocation has ended".to_string())?
    }
}

/// The run's asks: each waits on its durable promise, through the handler.
struct HandlerAsks {
    to_handler: tokio::sync::mpsc::UnboundedSender<ToHandler>,
    pending: Arc<Mutex<PendingEvents>>,
}

impl HumanChannel for HandlerAsks {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        let events = std::mem::take(&mut pending_lock(&self.pending).events);
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self.to_handler.send(ToHandler::Ask {
            request,
            events,
            reply,
        });
        Box::pin(async move {
            let unanswered = |message: String| ProviderError::Unanswered { message };
            sent.map_err(|_| unanswered("the run's invocation has ended".to_string()))?;
            answer
                .await
                .map_err(|_| unanswered("the run's invocation has ended".to_string()))?
                .map_err(unanswered)
        })
    }
}

/// Now, in ms since the Unix epoch (what Restate's timers and the kept times count in).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// Cancels the run's thread when the invocation's handler is dropped.
struct CancelOnDrop(tokio::sync::watch::Sender<bool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}

/// The run's clock on Restate: real time, whose waits the journal keeps. A backoff's end
/// is a `deadline` entry (kept once, given back to a run started again); a wait with
/// nothing in flight is a durable sleep the invocation may suspend on; the run's first
/// start is the `started` entry's.
struct KeptClock {
    /// One moment as an instant and in ms since the Unix epoch: maps the one to the other.
    base: (Instant, u64),
    started_ms: Option<u64>,
    deadlines: Mutex<HashMap<String, u64>>,
    to_handler: tokio::sync::mpsc::UnboundedSender<ToHandler>,
    pending: Arc<Mutex<PendingEvents>>,
}

impl std::fmt::Debug for KeptClock {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KeptClock")
            .field("started_ms", &self.started_ms)
            .finish_non_exhaustive()
    }
}

impl KeptClock {
    fn new(
        started_ms: Option<u64>,
        deadlines: HashMap<String, u64>,
        to_handler: tokio::sync::mpsc::UnboundedSender<ToHandler>,
        pending: Arc<Mutex<PendingEvents>>,
    ) -> KeptClock {
        KeptClock {
            base: (Instant::now(), unix_ms()),
            started_ms,
            deadlines: Mutex::new(deadlines),
            to_handler,
            pending,
        }
    }

    fn to_ms(&self, instant: Instant) -> u64 {
        let (base, base_ms) = self.base;
        let millis =
            |duration: std::time::Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        match instant.checked_duration_since(base) {
            Some(after) => base_ms.saturating_add(millis(after)),
            None => base_ms.saturating_sub(millis(base - instant)),
        }
    }

    fn to_instant(&self, ms: u64) -> Instant {
        let (base, base_ms) = self.base;
        if ms >= base_ms {
            base + std::time::Duration::from_millis(ms - base_ms)
        } else {
            base.checked_sub(std::time::Duration::from_millis(base_ms - ms))
                .unwrap_or(base)
        }
    }
}

impl Clock for KeptClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep_until(deadline))
    }

    fn idle_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        if deadline <= Instant::now() {
            return Box::pin(std::future::ready(()));
        }
        let events = std::mem::take(&mut pending_lock(&self.pending).events);
        let (reply, ended) = tokio::sync::oneshot::channel();
        let sent = self.to_handler.send(ToHandler::Sleep {
            until_ms: self.to_ms(deadline),
            events,
            reply,
        });
        Box::pin(async move {
            if sent.is_ok() {
                let _ = ended.await;
            }
            // Restate's timer counts on the system clock: the run's own may be a hair
            // behind, and the run goes on only once its deadline has passed.
            tokio::time::sleep_until(deadline).await;
        })
    }

    fn keep_deadline(&self, key: &str, deadline: Instant) -> Instant {
        let kept = self
            .deadlines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .copied();
        if let Some(until_ms) = kept {
            return self.to_instant(until_ms);
        }
        let until_ms = self.to_ms(deadline);
        let events = std::mem::take(&mut pending_lock(&self.pending).events);
        let (reply, written) = mpsc::channel();
        let entry = Kept::Deadline {
            key: key.to_string(),
            until_ms,
            events,
        };
        // Kept before the run waits it; an invocation that has ended keeps nothing more
        // (the run's thread is being stopped).
        if self.to_handler.send(ToHandler::Keep(entry, reply)).is_ok() {
            let _ = written.recv();
        }
        self.deadlines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.to_string(), until_ms);
        self.to_instant(until_ms)
    }

    fn started_ago(&self) -> std::time::Duration {
        let Some(started_ms) = self.started_ms else {
            return std::time::Duration::ZERO;
        };
        std::time::Duration::from_millis(self.to_ms(Instant::now()).saturating_sub(started_ms))
    }
}
