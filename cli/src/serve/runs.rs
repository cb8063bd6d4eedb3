//! The runs of `charter serve`: each runs live on a thread of its own, journaled in `.charter/runs/<id>/` as `charter run` journals, answered (`ask`) and cancelled over HTTP, and resumed from its journal when the server starts again.
//!
//! A run directory holds `serve.json` (what runs: the spec and its hashes), `input.json`,
//! `calls.jsonl` (the journal), `events.jsonl` (the trace), `stream.jsonl` (the event
//! stream clients get), `out/` (the delivery) and, once it ended, `result.json`. A
//! directory without `result.json` is a run the server was stopped in: it resumes.

use charter_runtime::world::sandbox::Sandbox;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use charter_compiler::CompiledSpec;
use charter_runtime::engine::effects::{HumanChannel, Provider};
use charter_runtime::engine::provider::{BoxFuture, CallObserver, HumanRequest, ProviderError};
use charter_runtime::engine::run::{RunConfig, RunOutcome};
use charter_runtime::engine::session::Session;
use charter_runtime::formats::scenario::{Cassette, Recorded};
use charter_runtime::formats::trace::TraceEvent;
use charter_runtime::formats::trace::TraceSink;
use charter_runtime::totals::RunTotals;
use charter_runtime::world::files;
use charter_runtime::world::files::LineFile;
use charter_runtime::world::jsonl::JsonlSink;
use charter_runtime::world::record::Recording;
use charter_runtime::world::replay::ReplayProvider;
use charter_runtime::world::secrets::{Scrubber, ScrubbingSink};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::restate::{Followed, RESTATE_FILE, RestateFile};
use super::stream::{OutputObserver, Stream, StreamSink};
use crate::driver::{
    Fanout, LiveEnvironment, LiveFlags, LiveRun, LiveRunOptions, Observers, RunClock, ShownAnswers,
    StopOn, open_journal,
};

const SERVE_FILE: &str = "serve.json";
const INPUT_FILE: &str = "input.json";
const JOURNAL_FILE: &str = "calls.jsonl";
const EVENTS_FILE: &str = "events.jsonl";
const STREAM_FILE: &str = "stream.jsonl";
const RESULT_FILE: &str = "result.json";

/// The most bytes of a run's own file read back (`serve.json`, `input.json`,
/// `result.json`, `stream.jsonl`).
const READ_LIMIT: u64 = charter_runtime::world::limits::DEFAULT_MAX_BYTES as u64;

/// A spec the server runs.
#[derive(Debug)]
pub(crate) struct ServedSpec {
    /// The name a client gives (`POST /runs {"spec": ...}`): the spec's own name.
    pub(crate) name: String,
    /// The file, absolute: a run directory names it, so a restart finds it again.
    pub(crate) path: PathBuf,
    pub(crate) spec: Arc<CompiledSpec>,
    /// `--replay`: the recording its runs answer from (in virtual time, people's answers
    /// included), and the scenario's input, used when a client gives none.
    pub(crate) replay: Option<Replay>,
    /// The `--model` overrides applied to it, alias to `PROVIDER:MODEL`.
    pub(crate) overrides: BTreeMap<String, String>,
}

/// A recording a served spec's runs replay instead of calling models (`--replay DIR`).
#[derive(Debug, Clone)]
pub(crate) struct Replay {
    pub(crate) cassette: Arc<Cassette>,
    pub(crate) input: Value,
    /// A recorded conversation (`turns:`): turn N of a session replays the calls recorded
    /// for turn N (a run on its own, those of turn 1).
    pub(crate) conversation: bool,
}

/// A run that is one turn of a conversation: the session it starts from and its number.
#[derive(Debug, Clone)]
pub(crate) struct Turn {
    pub(crate) session: Session,
    pub(crate) number: u64,
}

/// A person's answers from the recording, for a run that replays it.
struct RecordedHumans(Arc<ReplayProvider>);

impl HumanChannel for RecordedHumans {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        self.0.ask(request)
    }
}

/// `serve.json`: what a run directory runs, and the hashes a resume checks.
#[derive(Debug, Serialize, Deserialize)]
struct ServeFile {
    spec: PathBuf,
    spec_hash: String,
    prompts: BTreeMap<String, String>,
}

impl ServeFile {
    fn of(served: &ServedSpec) -> Self {
        let recorded = Recorded::from_spec(&served.spec);
        ServeFile {
            spec: served.path.clone(),
            spec_hash: recorded.spec_hash,
            prompts: recorded.prompts,
        }
    }
}

/// What every run shares: the environment's keys and where runs are kept.
#[derive(Debug)]
pub(crate) struct Runs {
    pub(crate) specs: Vec<ServedSpec>,
    pub(crate) runs_dir: PathBuf,
    /// The environment the server started in (keys, base addresses and the secrets to
    /// scrub), which each run's providers are built from.
    environment: LiveEnvironment,
    /// `--tool NAME=COMMAND` and `--show-output`, as `charter run` takes them (`--model`
    /// is applied to the served specs already).
    live: LiveFlags,
    /// The sandbox tool commands run in (`--no-sandbox`, `--require-sandbox`).
    pub(crate) sandbox: Arc<Sandbox>,
    runs: Mutex<BTreeMap<String, Arc<Run>>>,
    /// Runs running now (started, or resumed at start, and not ended).
    active: std::sync::atomic::AtomicUsize,
    /// How many may run at once (`--max-runs`); resumed runs are never refused.
    pub(crate) max_runs: usize,
    /// `--restate INGRESS_URL`: runs live in Restate, run by `charter worker`s; this
    /// server starts and follows them.
    pub(crate) restate: Option<super::restate::Front>,
}

/// One run: its stream, what it is doing, and the handles to answer or cancel it.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) id: String,
    pub(crate) spec: String,
    /// The input it runs on (as checked and journaled).
    pub(crate) input: Value,
    pub(crate) stream: Arc<Stream>,
    state: Mutex<RunState>,
    cancel: tokio::sync::watch::Sender<bool>,
    /// It lives in Restate (`--restate`): followed there, cancelled there.
    remote: bool,
}

#[derive(Debug, Default)]
struct RunState {
    /// The `result.json` of a run that ended.
    result: Option<Value>,
    /// The `ask` waiting for a person, and where its answer goes.
    pending: Option<(HumanRequest, tokio::sync::oneshot::Sender<Value>)>,
    recording: Option<Recording>,
    cancelled: bool,
    /// The conversation turn this run is, if it is one.
    turn: Option<Turn>,
    /// The session after the turn, when the turn answered.
    next_session: Option<Session>,
    /// When the pending `ask` was asked, in ms since the epoch.
    asked_ms: u128,
}

impl Followed for Run {
    fn id(&self) -> &str {
        &self.id
    }

    fn stream(&self) -> &Stream {
        &self.stream
    }

    fn wait_for_answer(&self, request: HumanRequest) -> tokio::sync::oneshot::Receiver<Value> {
        Run::wait_for_answer(self, request)
    }
}

/// Why an answer or a cancel was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The run ended.
    Ended,
    /// No `ask` is waiting.
    NoQuestion,
    /// The run lives in Restate, which cancels it.
    Remote,
}

impl Run {
    fn new(id: String, spec: String, input: Value, stream: Arc<Stream>) -> Arc<Self> {
        Self::of(id, spec, input, stream, false)
    }

    fn of(id: String, spec: String, input: Value, stream: Arc<Stream>, remote: bool) -> Arc<Self> {
        Arc::new(Run {
            id,
            spec,
            input,
            stream,
            state: Mutex::new(RunState::default()),
            cancel: tokio::sync::watch::channel(false).0,
            remote,
        })
    }

    /// Shows `request` as the `ask` the run waits on (its status says so, an `ask` event
    /// tells the stream); a client's answer arrives on the receiver.
    pub(crate) fn wait_for_answer(
        &self,
        request: HumanRequest,
    ) -> tokio::sync::oneshot::Receiver<Value> {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let mut event = ask_event(&request);
        event["asked"] = json!(now_ms());
        {
            let mut state = self.state();
            state.pending = Some((request, sender));
            state.asked_ms = now_ms();
        }
        self.stream.push(&event);
        receiver
    }

    fn state(&self) -> MutexGuard<'_, RunState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `{id, spec, started, status, events, question?, asked?, ...result}`: status is
    /// `running`, `waiting` (an `ask` waits for an answer; `asked` is when, in ms since
    /// the epoch) or `finished`; `started` is when the run started (ms since the epoch).
    pub(crate) fn status(&self) -> Value {
        let state = self.state();
        let mut status = json!({
            "id": self.id,
            "spec": self.spec,
            "started": started_ms(&self.id),
            "events": self.stream.len(),
        });
        if let Some(result) = &state.result {
            status["status"] = json!("finished");
            if let Some(fields) = result.as_object() {
                for (name, field) in fields {
                    status[name] = field.clone();
                }
            }
        } else if let Some((request, _)) = &state.pending {
            status["status"] = json!("waiting");
            status["question"] = json!(request.question);
            status["step"] = json!(request.step);
            status["asked"] = json!(state.asked_ms);
        } else {
            status["status"] = json!(if state.cancelled {
                "cancelling"
            } else {
                "running"
            });
        }
        status
    }

    /// Answers the waiting `ask` with `answer` (`{approved, note?}`).
    pub(crate) fn answer(&self, answer: Value) -> Result<(), Refusal> {
        let mut state = self.state();
        if state.result.is_some() {
            return Err(Refusal::Ended);
        }
        let Some((_, sender)) = state.pending.take() else {
            return Err(Refusal::NoQuestion);
        };
        sender.send(answer).map_err(|_| Refusal::Ended)
    }

    /// Cancels the run: in-flight calls are dropped (and not journaled) and it ends
    /// `cancelled`.
    pub(crate) fn cancel(&self) -> Result<(), Refusal> {
        let mut state = self.state();
        if state.result.is_some() {
            return Err(Refusal::Ended);
        }
        if self.remote {
            return Err(Refusal::Remote);
        }
        state.cancelled = true;
        if let Some(recording) = &state.recording {
            recording.cancel();
        }
        let _ = self.cancel.send(true);
        Ok(())
    }

    /// The result, once the run has ended.
    pub(crate) fn result(&self) -> Option<Value> {
        self.state().result.clone()
    }

    /// The session a turn leaves (`None`: not a turn, or one that did not answer).
    pub(crate) fn next_session(&self) -> Option<Session> {
        self.state().next_session.clone()
    }

    /// Waits until the run has ended; its result.
    pub(crate) async fn finished(&self) -> Value {
        let mut changes = self.stream.subscribe();
        loop {
            if let Some(result) = self.result() {
                return result;
            }
            if changes.changed().await.is_err() {
                return self.result().unwrap_or_else(
                    || json!({"outcome": "error", "message": "the run stopped without a result"}),
                );
            }
        }
    }

    fn finish(&self, result: Value) {
        self.stream.push(&{
            let mut event = result.clone();
            event["kind"] = json!("answer");
            event
        });
        {
            let mut state = self.state();
            state.result = Some(result);
            // The journal (`calls.jsonl`) is closed with it: a finished run holds no file.
            state.recording = None;
        }
        self.stream.end();
    }
}

/// Asks over HTTP: the question goes on the stream as an `ask` event and waits for
/// `POST /runs/{id}/answers`.
struct HttpHumans(Arc<Run>);

/// The `ask` event of a question, as the stream shows it.
fn ask_event(request: &HumanRequest) -> Value {
    json!({
        "kind": "ask",
        "round": request.round,
        "step": request.step,
        "attempt": request.attempt,
        "question": request.question,
    })
}

impl HumanChannel for HttpHumans {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        Box::pin(async move {
            let key = (request.step.clone(), request.round, request.attempt);
            // Waiting before it is told: a client that saw the question can answer it.
            let receiver = self.0.wait_for_answer(request);
            receiver.await.map_err(|_| ProviderError::NoHumanAnswer {
                step: key.0,
                round: key.1,
                attempt: key.2,
            })
        })
    }

    /// A question its journal answers after a restart: shown where it was shown before.
    fn answered_before(&self, request: &HumanRequest, _answer: &Value) {
        self.0.stream.push(&ask_event(request));
    }
}

impl Runs {
    pub(crate) fn new(
        specs: Vec<ServedSpec>,
        runs_dir: PathBuf,
        variables: Vec<(String, String)>,
        (live, sandbox): (LiveFlags, Arc<Sandbox>),
        max_runs: usize,
    ) -> Self {
        Runs {
            specs,
            runs_dir,
            environment: LiveEnvironment::from_variables(variables),
            live,
            sandbox,
            runs: Mutex::new(BTreeMap::new()),
            active: std::sync::atomic::AtomicUsize::new(0),
            max_runs,
            restate: None,
        }
    }

    /// Takes a place for a new run, or `false` when `max_runs` are running.
    pub(crate) fn try_admit(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |active| {
                (active < self.max_runs).then_some(active + 1)
            })
            .is_ok()
    }

    /// Gives back a run's place (it ended, or never started).
    pub(crate) fn release(&self) {
        self.active
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// What every run's events, files and results are scrubbed of.
    pub(crate) fn scrubber(&self) -> &Scrubber {
        &self.environment.scrubber
    }

    fn runs(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Run>>> {
        self.runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Run>> {
        self.runs().get(id).cloned()
    }

    /// Every run's status, newest first.
    pub(crate) fn list(&self) -> Vec<Value> {
        self.runs().values().rev().map(|run| run.status()).collect()
    }

    pub(crate) fn spec(&self, name: &str) -> Option<&ServedSpec> {
        self.specs.iter().find(|served| served.name == name)
    }

    /// The environment's missing keys for the served specs, one line each.
    pub(crate) fn missing_keys(&self) -> Vec<String> {
        let mut missing: Vec<String> = self
            .specs
            .iter()
            .filter(|served| served.replay.is_none())
            .flat_map(|served| self.environment.settings.missing_for(&served.spec))
            .collect();
        missing.dedup();
        missing
    }

    /// Starts a new run of `served` on `input` (already checked against its request
    /// contract): its directory, then its thread. Returns its id.
    pub(crate) fn start(
        self: &Arc<Self>,
        served: &ServedSpec,
        input: Value,
    ) -> Result<String, String> {
        self.start_turn(served, input, None)
            .map(|run| run.id.clone())
    }

    /// Starts a run as [`Runs::start`] does, as one turn of a conversation when `turn` is
    /// given; the run.
    pub(crate) fn start_turn(
        self: &Arc<Self>,
        served: &ServedSpec,
        input: Value,
        turn: Option<Turn>,
    ) -> Result<Arc<Run>, String> {
        let millis = now_ms();
        let dir = files::create_unique_dir(&self.runs_dir, &format!("{millis}-"))
            .map_err(|error| format!("cannot make the run directory: {error}"))?;
        let id = dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let input = self.scrubber().value(&input);
        let written = serde_json::to_string_pretty(&ServeFile::of(served))
            .map_err(|error| error.to_string())
            .and_then(|text| {
                files::write_atomically(&dir.join(SERVE_FILE), text.as_bytes())
                    .map_err(|error| error.to_string())
            })
            .and_then(|()| {
                files::write_atomically(&dir.join(INPUT_FILE), input.to_string().as_bytes())
                    .map_err(|error| error.to_string())
            })
            .and_then(|()| match &self.restate {
                Some(front) => serde_json::to_string_pretty(&RestateFile {
                    ingress: front.ingress.clone(),
                })
                .map_err(|error| error.to_string())
                .and_then(|text| {
                    files::write_atomically(&dir.join(RESTATE_FILE), text.as_bytes())
                        .map_err(|error| error.to_string())
                }),
                None => Ok(()),
            });
        if let Err(error) = written {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("cannot write the run directory: {error}"));
        }
        if let Some(front) = &self.restate {
            return self.launch_remote(id, served, input, dir, front.clone(), Some(turn));
        }
        self.launch(id, served, input, dir, turn)
    }

    /// Starts run `id` in Restate — as a turn of a conversation when `start` holds one —
    /// unless `start` is `None` (it was started before this server last stopped), and
    /// follows it there, on a thread of its own, to its end.
    fn launch_remote(
        self: &Arc<Self>,
        id: String,
        served: &ServedSpec,
        input: Value,
        dir: PathBuf,
        front: super::restate::Front,
        start: Option<Option<Turn>>,
    ) -> Result<Arc<Run>, String> {
        let lock = match files::DirLock::try_hold(&dir) {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                return Err("another `charter serve` in this directory follows it".to_string());
            }
            Err(error) => return Err(format!("cannot lock its directory: {error}")),
        };
        let stream = Stream::create(Some(&dir.join(STREAM_FILE)), self.scrubber().clone())
            .map_err(|error| format!("cannot write the event stream: {error}"))?;
        let run = Run::of(id.clone(), served.name.clone(), input.clone(), stream, true);
        let turn = start.clone().flatten();
        let session = turn.as_ref().map(|turn| turn.session.clone());
        run.state().turn = turn;
        let dir_of_refused = dir.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| format!("cannot start the run: {error}"))?;
        let handle = run.clone();
        let runs = self.clone();
        let spec = served.spec.clone();
        let name = served.name.clone();
        // The run is started on its own thread (this one may be the server's), which says
        // whether Restate took it before it follows it.
        let (taken_tx, taken) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(format!("run {}", run.id))
            .spawn(move || {
                if start.is_some() {
                    let started =
                        runtime.block_on(front.start(&run.id, &name, &input, session.as_ref()));
                    if started.is_err() {
                        drop(lock);
                        let _ = taken_tx.send(started);
                        return;
                    }
                    let _ = taken_tx.send(started);
                } else {
                    let _ = taken_tx.send(Ok(()));
                }
                let started = std::time::Instant::now();
                // Followed again after a restart, the run's events come again from the first.
                let trace = LineFile::create(&dir.join(EVENTS_FILE)).ok();
                let mut result = runtime.block_on(front.follow(&*run, trace));
                // A turn's result holds the session it leaves, for the conversation to keep.
                if let Some(session) = result
                    .as_object_mut()
                    .and_then(|result| result.remove("session"))
                {
                    run.state().next_session = serde_json::from_value(session).ok();
                }
                result["totals"] = totals_json(&spec, &run.stream, started, false);
                runs.end(&run, &dir, lock, &result);
            })
            .map_err(|error| format!("cannot follow the run: {error}"))?;
        match taken.recv() {
            Ok(Ok(())) => {
                self.runs().insert(id, handle.clone());
                Ok(handle)
            }
            Ok(Err(message)) => {
                let _ = std::fs::remove_dir_all(&dir_of_refused);
                Err(message)
            }
            Err(_) => Err("the run's thread ended before Restate answered".to_string()),
        }
    }

    /// Runs `served` in `dir` on a thread of its own (from its journal, if it has one).
    fn launch(
        self: &Arc<Self>,
        id: String,
        served: &ServedSpec,
        input: Value,
        dir: PathBuf,
        turn: Option<Turn>,
    ) -> Result<Arc<Run>, String> {
        // Held until the run ends: no other process runs it meanwhile.
        let lock = match files::DirLock::try_hold(&dir) {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                return Err(
                    "another process is running it (a second `charter serve` in this directory, or `charter run --resume`)"
                        .to_string(),
                );
            }
            Err(error) => return Err(format!("cannot lock its directory: {error}")),
        };
        let stream = Stream::create(Some(&dir.join(STREAM_FILE)), self.scrubber().clone())
            .map_err(|error| format!("cannot write the event stream: {error}"))?;
        let run = Run::new(id.clone(), served.name.clone(), input.clone(), stream);
        run.state().turn = turn;
        self.runs().insert(id, run.clone());
        let handle = run.clone();
        let runs = self.clone();
        let spec = served.spec.clone();
        let replay = served.replay.clone();
        std::thread::Builder::new()
            .name(format!("run {}", run.id))
            .spawn(move || {
                // A run that panicked still ends for its clients, as an error.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    runs.execute(&run, &spec, replay.as_ref(), input, &dir)
                }))
                .unwrap_or_else(|_| {
                    json!({"outcome": "error", "message": "the run stopped on an internal error"})
                });
                runs.end(&run, &dir, lock, &result);
            })
            .map(|_| handle)
            .map_err(|error| format!("cannot start the run: {error}"))
    }

    /// Ends `run` with `result`, scrubbed: kept in its directory as `result.json`, its
    /// directory's `lock` and its place let go, then its clients told.
    fn end(&self, run: &Run, dir: &Path, lock: files::DirLock, result: &Value) {
        let result = self.scrubber().value(result);
        // A run whose result cannot be kept still ends for its clients; a restart resumes
        // it from its journal (or follows it again in Restate).
        let _ = serde_json::to_string_pretty(&result)
            .map(|text| files::write_atomically(&dir.join(RESULT_FILE), text.as_bytes()));
        // Its place and its directory are free before its clients hear the end, so a
        // client that saw the answer can start the next run at once.
        drop(lock);
        self.release();
        run.finish(result);
    }

    /// Runs the spec to its end; the result (`outcome`, `reason`, `answer`...) or
    /// `{outcome: "error", message}`.
    fn execute(
        &self,
        run: &Arc<Run>,
        spec: &CompiledSpec,
        replay: Option<&Replay>,
        input: Value,
        dir: &Path,
    ) -> Value {
        let started = std::time::Instant::now();
        let executed = match replay {
            Some(replay) => self.try_replay(run, spec, replay, input, dir),
            None => self.try_execute(run, spec, input, dir),
        };
        let mut result = match executed {
            Ok(outcome) => {
                run.state().next_session = outcome.session.clone();
                let mut result = crate::stream_rows::result_of(&outcome);
                if let Some(answer) = result.get_mut("answer") {
                    *answer = super::stream::bounded(answer, crate::stream_rows::MAX_OUTPUT_CHARS);
                }
                result
            }
            Err(message) => json!({"outcome": "error", "message": message}),
        };
        result["totals"] = totals_json(spec, &run.stream, started, replay.is_some());
        result
    }

    /// A live run: its providers, its journal (resumed from, after a restart), and a
    /// person asked over HTTP.
    fn try_execute(
        &self,
        run: &Arc<Run>,
        spec: &CompiledSpec,
        input: Value,
        dir: &Path,
    ) -> Result<RunOutcome, String> {
        let providers =
            self.environment
                .providers(spec, &tools_for(spec, &self.live.tools), &self.sandbox)?;
        let recording = open_journal(&dir.join(JOURNAL_FILE), &self.environment)?.recording;
        {
            let mut state = run.state();
            if state.cancelled {
                recording.cancel();
            }
            state.recording = Some(recording.clone());
        }
        let provider = Arc::new(recording.provider(providers));
        let humans = Box::new(recording.humans(HttpHumans(run.clone())));
        self.served_run(run, spec, provider, humans, dir, RunClock::Real)?
            .run(input)
    }

    /// Runs the spec against a recording (`--replay`) on a paused clock: the recorded
    /// latencies, timeouts and people's answers, in virtual time, watched like a live run.
    fn try_replay(
        &self,
        run: &Arc<Run>,
        spec: &CompiledSpec,
        replay: &Replay,
        input: Value,
        dir: &Path,
    ) -> Result<RunOutcome, String> {
        let turn = run.state().turn.as_ref().map(|turn| turn.number);
        let cassette = match turn.or(replay.conversation.then_some(1)) {
            Some(number) => Arc::new(replay.cassette.for_turn(number)),
            None => Arc::clone(&replay.cassette),
        };
        let provider = Arc::new(ReplayProvider::new(cassette));
        let humans = Box::new(RecordedHumans(provider.clone()));
        self.served_run(run, spec, provider, humans, dir, RunClock::Paused)?
            .run(input)
    }

    /// The run stage as a server wires it, live or replayed: the trace to `events.jsonl`
    /// and to the run's event stream (with each role's output), the delivery into `out/`,
    /// and a cancel only from the run's own `DELETE`.
    fn served_run<'spec>(
        &self,
        run: &Arc<Run>,
        spec: &'spec CompiledSpec,
        provider: Arc<dyn Provider>,
        humans: Box<dyn HumanChannel>,
        dir: &Path,
        clock: RunClock,
    ) -> Result<LiveRun<'spec>, String> {
        let sinks: Vec<Box<dyn TraceSink>> = vec![
            Box::new(JsonlSink::create(dir.join(EVENTS_FILE)).map_err(|error| error.to_string())?),
            Box::new(StreamSink(run.stream.clone())),
        ];
        Ok(LiveRun {
            spec,
            provider,
            humans,
            sink: ScrubbingSink::new(Fanout(sinks), self.scrubber().clone()),
            config: RunConfig {
                observer: Some(self.observer(run)),
                session: run.state().turn.as_ref().map(|turn| turn.session.clone()),
                ..RunConfig::default()
            }
            .with_out_dir(dir.join("out")),
            options: LiveRunOptions {
                stop: StopOn::Cancel(run.cancel.subscribe()),
                clock,
            },
            heartbeat_calls: None,
        })
    }

    /// What a run's calls are told to: its event stream (each role's output) and, with
    /// `--show-output`, the server's stderr.
    fn observer(&self, run: &Arc<Run>) -> Arc<dyn CallObserver> {
        let stream: Arc<dyn CallObserver> = Arc::new(OutputObserver(run.stream.clone()));
        if !self.live.show_output {
            return stream;
        }
        let shown = Arc::new(ShownAnswers {
            run: run.id.clone(),
            scrubber: self.scrubber().clone(),
        });
        Arc::new(Observers(vec![stream, shown]))
    }

    /// Reads the runs kept in the runs directory: an ended one is listed (with its
    /// stream), one that did not end resumes from its journal. Returns a line for each
    /// run resumed or left alone.
    pub(crate) fn restore(self: &Arc<Self>) -> Vec<String> {
        let mut lines = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.runs_dir) else {
            return lines;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.join(SERVE_FILE).is_file())
            .collect();
        dirs.sort();
        for dir in dirs {
            let id = dir
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            match self.restore_one(&id, &dir) {
                Ok(Some(line)) | Err(line) => lines.push(line),
                Ok(None) => {}
            }
        }
        lines
    }

    fn restore_one(self: &Arc<Self>, id: &str, dir: &Path) -> Result<Option<String>, String> {
        let read = |name: &str| {
            files::read_regular(&dir.join(name), READ_LIMIT)
                .map_err(|error| format!("run {id} left alone: cannot read {name}: {error}"))
        };
        let kept: ServeFile = serde_json::from_str(&read(SERVE_FILE)?)
            .map_err(|error| format!("run {id} left alone: {SERVE_FILE}: {error}"))?;
        let served = self.specs.iter().find(|served| served.path == kept.spec);
        if dir.join(RESULT_FILE).is_file() {
            let result: Value = serde_json::from_str(&read(RESULT_FILE)?)
                .map_err(|error| format!("run {id} left alone: {RESULT_FILE}: {error}"))?;
            let stream = Stream::ended(
                &read(STREAM_FILE).unwrap_or_default(),
                self.scrubber().clone(),
            );
            let name = served.map_or_else(
                || kept.spec.to_string_lossy().into_owned(),
                |served| served.name.clone(),
            );
            let input = read(INPUT_FILE)
                .ok()
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or(Value::Null);
            let run = Run::new(id.to_string(), name, input, stream);
            run.state().result = Some(result);
            self.runs().insert(id.to_string(), run);
            return Ok(None);
        }
        let Some(served) = served else {
            return Err(format!(
                "run {id} left alone: its spec `{}` is not served (give it to `charter serve` to resume the run)",
                kept.spec.display()
            ));
        };
        if dir.join(RESTATE_FILE).is_file() {
            return self.refollow(id, dir, served);
        }
        let now = ServeFile::of(served);
        if now.spec_hash != kept.spec_hash || now.prompts != kept.prompts {
            return Err(format!(
                "run {id} left alone: spec `{}` or a prompt changed since the run started (its journal answered the old ones)",
                served.name
            ));
        }
        let input: Value = serde_json::from_str(&read(INPUT_FILE)?)
            .map_err(|error| format!("run {id} left alone: {INPUT_FILE}: {error}"))?;
        // A resumed run takes its place whatever the limit: it was admitted before.
        self.active
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.launch(id.to_string(), served, input, dir.to_path_buf(), None)
            .map_err(|error| {
                self.release();
                format!("run {id} left alone: {error}")
            })?;
        Ok(Some(format!(
            "run {id} of {} resumed from its journal",
            served.name
        )))
    }
}

impl Runs {
    /// Follows again a run that lives in Restate, started before this server last stopped.
    fn refollow(
        self: &Arc<Self>,
        id: &str,
        dir: &Path,
        served: &ServedSpec,
    ) -> Result<Option<String>, String> {
        let read = |name: &str| {
            files::read_regular(&dir.join(name), READ_LIMIT)
                .map_err(|error| format!("run {id} left alone: cannot read {name}: {error}"))
        };
        let kept: RestateFile = serde_json::from_str(&read(RESTATE_FILE)?)
            .map_err(|error| format!("run {id} left alone: {RESTATE_FILE}: {error}"))?;
        let Some(front) = self
            .restate
            .as_ref()
            .filter(|front| front.ingress == kept.ingress)
        else {
            return Err(format!(
                "run {id} left alone: it lives in Restate at {} (serve with --restate {} to follow it)",
                kept.ingress, kept.ingress
            ));
        };
        let input: Value = serde_json::from_str(&read(INPUT_FILE)?)
            .map_err(|error| format!("run {id} left alone: {INPUT_FILE}: {error}"))?;
        self.active
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.launch_remote(
            id.to_string(),
            served,
            input,
            dir.to_path_buf(),
            front.clone(),
            None,
        )
        .map_err(|error| {
            self.release();
            format!("run {id} left alone: {error}")
        })?;
        Ok(Some(format!(
            "run {id} of {} followed again in Restate",
            served.name
        )))
    }
}

/// The `NAME=COMMAND`s of `tools` that `spec` declares (the server may serve specs with
/// other tools).
pub(crate) fn tools_for(spec: &CompiledSpec, tools: &[String]) -> Vec<String> {
    tools
        .iter()
        .filter(|given| {
            given
                .split_once('=')
                .is_some_and(|(name, _)| spec.tools.contains_key(name.trim()))
        })
        .cloned()
        .collect()
}

/// Now, in ms since the epoch.
fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| since.as_millis())
        .unwrap_or_default()
}

/// When a run started, from its id (`<ms since the epoch>-...`); 0 when the id does not
/// say.
fn started_ms(id: &str) -> u64 {
    id.split('-')
        .next()
        .and_then(|millis| millis.parse().ok())
        .unwrap_or(0)
}

/// What a run used, added up from the trace events on its stream.
/// A result's `totals`: what the stream's trace events add up to, the wall time since
/// `started`, and whether the run replayed a recording.
fn totals_json(
    spec: &CompiledSpec,
    stream: &Stream,
    started: std::time::Instant,
    replay: bool,
) -> Value {
    let used = totals_of(spec, stream);
    json!({
        "calls": used.calls,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "cost": used.cost,
        "unpriced": used.unpriced,
        "t_ms": used.t_ms,
        "wall_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "replay": replay,
    })
}

fn totals_of(spec: &CompiledSpec, stream: &Stream) -> RunTotals {
    let mut totals = RunTotals::default();
    for index in 0..stream.len() {
        if let Ok(Some(text)) = stream.get(index)
            && let Ok(event) = serde_json::from_str::<TraceEvent>(&text)
        {
            totals.add(spec, &event);
        }
    }
    totals
}
