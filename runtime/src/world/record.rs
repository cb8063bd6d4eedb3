//! Recording a live run (DESIGN §5): `Recording` wraps any provider and human channel, keeps what each call answered by its key and in the order the run made the calls, scrubs secrets, journals every answer to disk as it comes (so a killed run resumes without asking the model again), and `write_recording` writes `scenario.yaml` and `cassette.yaml` atomically.
//!
//! What a call gave becomes a [`RecordedCall`] that [`crate::world::replay::ReplayProvider`]
//! plays back the same way:
//!
//! | the call                                   | recorded                                   |
//! | ------------------------------------------ | ------------------------------------------ |
//! | JSON output                                | `response`, `usage`, `latency`, `tool_calls` |
//! | any call that failed or was dropped after running tools | its `tool_calls` too, so a replay traces them |
//! | a provider note (an output mode refused)   | `notes`                                    |
//! | text output                                | `raw` (the scheduler parses and checks it) |
//! | an HTTP error                              | `error: {status, message, retry_after?}`   |
//! | no HTTP answer (connection refused, reset, a malformed body) | `error: {status: 503, message}`, transient as it was |
//! | `TimedOut` from the provider               | no answer, `latency` = its `after`         |
//! | dropped by the caller (a role `timeout`, a budget, a cancelled run) | no answer, `latency` = the time it ran plus 1 ms, so a replay under the same limit is cut at the same moment |
//! | a fatal error                              | nothing (replays cannot be recorded)       |
//!
//! Every string recorded (responses, raw text, tool arguments and results, error
//! messages, human answers) has each secret the recording was given replaced by
//! `<redacted>` (a [`Scrubber`]): the CLI gives it the API keys and the values of
//! environment variables named `*_KEY`, `*_TOKEN` and `*_SECRET`
//! ([`crate::world::secrets::secrets_by_name`]).
//!
//! **Resume.** With [`Recording::journaled`], every call and human answer is also
//! appended to a [`Journal`] (JSON lines, synced per line) the moment it ends. A run that
//! was killed is started again from the beginning with the journal it left: the
//! scheduler is deterministic given the same answers, so it makes the same calls under
//! the same keys, and each one already in the journal is answered from it at once; the
//! first call not in it goes to the model. The calls in flight when the run was killed
//! were never journaled, so they are made again — no call that had an answer is.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::effects::{HumanChannel, Provider};
use crate::engine::provider::{
    BoxFuture, CallKey, CallLog, CallLogEntries, HumanKey, HumanRequest, ModelOutput, ModelRequest,
    ModelResponse, ProviderError, ToolCall, ToolRequest, ToolResponse,
};
use crate::formats::scenario::{
    Cassette, LoadError, Recorded, RecordedCall, RecordedError, RecordedHuman, RecordedToolCall,
    RecordedUsage, Scenario,
};
use crate::world::files::{self, LineFile};
use crate::world::replay::playback;
use crate::world::secrets::Scrubber;

/// The status a call that got no HTTP answer is recorded with (it replays as transient).
pub const NO_ANSWER_STATUS: u16 = 503;

/// What a live run's calls and human answers gave, shared by the wrappers that record them.
#[derive(Clone)]
pub struct Recording {
    store: Arc<Store>,
}

struct Store {
    scrubber: Scrubber,
    calls: Mutex<BTreeMap<CallKey, RecordedCall>>,
    /// Each call's place in the order the run started its calls (the cassette's order).
    started: Mutex<HashMap<CallKey, usize>>,
    humans: Mutex<BTreeMap<HumanKey, Value>>,
    /// Where each call and answer is appended as it ends, if anywhere.
    journal: Option<Box<dyn JournalWrite>>,
    /// The calls and answers of the journal this recording resumes: played back, never
    /// asked again.
    resumed_calls: BTreeMap<CallKey, RecordedCall>,
    resumed_humans: BTreeMap<HumanKey, Value>,
    /// How many calls were answered from the journal.
    replayed: AtomicU64,
    /// The run was cancelled: calls dropped from now on are not recorded as timeouts.
    cancelled: AtomicBool,
    /// The first journal write that failed: from then on every call and question is
    /// refused (`ProviderError::JournalUnwritable`), and the run stops.
    journal_error: Mutex<Option<String>>,
}

impl Recording {
    /// A recording that scrubs `secrets` (empty strings are ignored) from all it keeps.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        Recording::build(secrets, None, Vec::new())
    }

    /// A recording that also appends every call and answer to `journal` as it ends, and
    /// resumes from `entries` (what [`Journal::open`] read back): a call or `ask` already
    /// there is answered from it at once, without asking the model or the person again.
    /// A run killed at any point (even `kill -9`) and started again with its journal
    /// makes no model call twice.
    pub fn journaled(
        secrets: impl IntoIterator<Item = String>,
        journal: Journal,
        entries: Vec<JournalEntry>,
    ) -> Self {
        Recording::build(secrets, Some(Box::new(journal)), entries)
    }

    /// [`Recording::journaled`] with a journal kept elsewhere than in a file: a durable
    /// execution engine's (DESIGN §16), given what it held when the run was started again.
    pub fn journaled_in(
        secrets: impl IntoIterator<Item = String>,
        journal: Box<dyn JournalWrite>,
        entries: Vec<JournalEntry>,
    ) -> Self {
        Recording::build(secrets, Some(journal), entries)
    }

    fn build(
        secrets: impl IntoIterator<Item = String>,
        journal: Option<Box<dyn JournalWrite>>,
        entries: Vec<JournalEntry>,
    ) -> Self {
        let mut resumed_calls = BTreeMap::new();
        let mut resumed_humans = BTreeMap::new();
        for entry in entries {
            match entry {
                JournalEntry::Call(call) => {
                    resumed_calls.insert(call.key(), *call);
                }
                JournalEntry::Human(human) => {
                    resumed_humans.insert((human.step, human.round, human.attempt), human.answer);
                }
            }
        }
        Recording {
            store: Arc::new(Store {
                scrubber: Scrubber::new(secrets),
                calls: Mutex::new(resumed_calls.clone()),
                started: Mutex::new(HashMap::new()),
                humans: Mutex::new(resumed_humans.clone()),
                journal,
                resumed_calls,
                resumed_humans,
                replayed: AtomicU64::new(0),
                cancelled: AtomicBool::new(false),
                journal_error: Mutex::new(None),
            }),
        }
    }

    /// Marks the run cancelled (Ctrl-C): calls dropped from now on are not recorded (a
    /// call cut by a timeout is; one cut by a cancel is not an answer to keep).
    pub fn cancel(&self) {
        self.store.cancelled.store(true, Ordering::SeqCst);
    }

    /// How many calls were answered from the journal instead of the model.
    pub fn replayed(&self) -> u64 {
        self.store.replayed.load(Ordering::SeqCst)
    }

    /// The first journal write that failed, if one did.
    pub fn journal_error(&self) -> Option<String> {
        lock(&self.store.journal_error).clone()
    }

    /// `inner`, with every call it answers recorded here.
    pub fn provider<P: Provider>(&self, inner: P) -> RecordingProvider<P> {
        RecordingProvider {
            inner,
            store: self.store.clone(),
        }
    }

    /// `inner`, with every answer it gives recorded here.
    pub fn humans<H: HumanChannel>(&self, inner: H) -> RecordingHumans<H> {
        RecordingHumans {
            inner,
            store: self.store.clone(),
        }
    }

    /// The cassette so far: calls in the order the run made them (a journaled call the
    /// run did not ask for again last, in key order), human answers in (step, round) order.
    pub fn cassette(&self, recorded: Recorded) -> Cassette {
        let mut cassette = Cassette::new(recorded);
        let mut calls: Vec<RecordedCall> = lock(&self.store.calls).values().cloned().collect();
        {
            let started = lock(&self.store.started);
            // Stable: calls never started keep their key order, after the others.
            calls.sort_by_key(|call| started.get(&call.key()).copied().unwrap_or(usize::MAX));
        }
        cassette.calls = calls;
        cassette.humans = lock(&self.store.humans)
            .iter()
            .map(|((step, round, attempt), answer)| RecordedHuman {
                turn: 1,
                step: step.clone(),
                round: *round,
                attempt: *attempt,
                answer: answer.clone(),
            })
            .collect();
        cassette
    }

    /// How many model calls are recorded.
    pub fn calls(&self) -> usize {
        lock(&self.store.calls).len()
    }
}

impl fmt::Debug for Recording {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Recording")
            .field("scrubber", &self.store.scrubber)
            .field("calls", &self.calls())
            .field("humans", &lock(&self.store.humans).len())
            .finish()
    }
}

impl Store {
    fn scrub_text(&self, text: &str) -> String {
        self.scrubber.text(text)
    }

    fn scrub(&self, value: &Value) -> Value {
        self.scrubber.value(value)
    }

    /// `response` with every known secret replaced in its output and tool calls.
    fn scrub_response(&self, mut response: ModelResponse) -> ModelResponse {
        response.output = match response.output {
            ModelOutput::Json(value) => ModelOutput::Json(self.scrub(&value)),
            ModelOutput::Text(text) => ModelOutput::Text(self.scrub_text(&text)),
        };
        for tool_call in &mut response.tool_calls {
            tool_call.args = self.scrub(&tool_call.args);
            tool_call.result = self.scrub(&tool_call.result);
        }
        response
    }

    /// `error` with every known secret replaced in its message.
    fn scrub_error(&self, mut error: ProviderError) -> ProviderError {
        if let ProviderError::Transient { message, .. }
        | ProviderError::Permanent { message, .. }
        | ProviderError::Throttled { message, .. } = &mut error
        {
            *message = self.scrub_text(message);
        }
        error
    }

    /// Notes that the run started the call `key`: its place in the cassette.
    fn note_started(&self, key: &CallKey) {
        let mut started = lock(&self.started);
        let next = started.len();
        started.entry(key.clone()).or_insert(next);
    }

    fn record(&self, call: RecordedCall) {
        self.journal(&JournalEntry::Call(Box::new(call.clone())));
        lock(&self.calls).insert(call.key(), call);
    }

    fn record_human(&self, human: RecordedHuman) {
        self.journal(&JournalEntry::Human(human.clone()));
        lock(&self.humans).insert((human.step, human.round, human.attempt), human.answer);
    }

    /// Once a journal write has failed: the error that stops the run, so that no further
    /// call is made that a resume could not find (DESIGN §15).
    fn unwritable(&self) -> Option<ProviderError> {
        lock(&self.journal_error)
            .clone()
            .map(|message| ProviderError::JournalUnwritable { message })
    }

    fn journal(&self, entry: &JournalEntry) {
        if let Some(journal) = &self.journal
            && let Err(error) = journal.append(entry)
        {
            lock(&self.journal_error).get_or_insert(error);
        }
    }

    /// The tool calls of a call as a cassette keeps them: an answer that is an error
    /// (`{"error": message}`) as `error: {message}`, with how long the tool ran.
    fn tool_calls(&self, calls: &[ToolCall]) -> Vec<RecordedToolCall> {
        calls
            .iter()
            .map(|tool_call| {
                let error = crate::engine::run::step::error_answer(&tool_call.result);
                RecordedToolCall {
                    tool: tool_call.tool.clone(),
                    args: self.scrub(&tool_call.args),
                    result: if error.is_some() {
                        Value::Null
                    } else {
                        self.scrub(&tool_call.result)
                    },
                    error: error.map(|message| RecordedError {
                        status: None,
                        message: Some(self.scrub_text(message)),
                        retry_after: None,
                    }),
                    latency: tool_call.latency,
                }
            })
            .collect()
    }

    /// The entry for a call that ended with `result` after `elapsed`, if it is recorded.
    fn entry(
        &self,
        key: &CallKey,
        elapsed: Duration,
        result: &Result<ModelResponse, ProviderError>,
        log: &CallLogEntries,
    ) -> Option<RecordedCall> {
        let mut call = empty_call(key);
        call.notes = log.notes.iter().map(|note| self.scrub_text(note)).collect();
        if result.is_err() {
            call.tool_calls = self.tool_calls(&log.tool_calls);
        }
        match result {
            Ok(response) => {
                match &response.output {
                    ModelOutput::Json(value) => call.response = Some(self.scrub(value)),
                    ModelOutput::Text(text) => call.raw = Some(self.scrub_text(text)),
                }
                call.latency = Some(response.latency);
                call.usage = Some(RecordedUsage {
                    input_tokens: response.usage.input_tokens,
                    output_tokens: response.usage.output_tokens,
                });
                call.tool_calls = self.tool_calls(&response.tool_calls);
            }
            Err(error) if error.is_fatal() => return None,
            Err(ProviderError::TimedOut { after }) => call.latency = Some(*after),
            Err(error) => {
                let message = match error {
                    ProviderError::Transient { message, .. }
                    | ProviderError::Permanent { message, .. }
                    | ProviderError::Throttled { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                let status = error.status().unwrap_or(if error.is_transient() {
                    NO_ANSWER_STATUS
                } else {
                    400
                });
                call.latency = Some(elapsed);
                call.error = Some(RecordedError {
                    status: Some(status),
                    message: Some(self.scrub_text(&message)),
                    retry_after: error.retry_after(),
                });
            }
        }
        Some(call)
    }
}

fn empty_call(key: &CallKey) -> RecordedCall {
    RecordedCall {
        turn: 1,
        step: key.step.clone(),
        round: key.round,
        item: key.item.clone(),
        attempt: key.attempt,
        role: key.role.clone(),
        tool: None,
        result: None,
        response: None,
        raw: None,
        error: None,
        latency: None,
        usage: None,
        prompt_hash: None,
        tool_calls: Vec::new(),
        notes: Vec::new(),
        expect_prompt: None,
    }
}

/// A provider whose calls are recorded into a [`Recording`].
pub struct RecordingProvider<P> {
    inner: P,
    store: Arc<Store>,
}

impl<P> fmt::Debug for RecordingProvider<P> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("RecordingProvider")
    }
}

/// Records a call that is dropped before it ends (the caller's timeout fired, or the run
/// stopped) as a call without an answer.
struct DropGuard {
    store: Arc<Store>,
    key: Option<CallKey>,
    started: tokio::time::Instant,
    log: CallLog,
    prompt_hash: String,
}

/// Records a `tool` step call that is dropped before it ends (its timeout fired, or the
/// run stopped) as a call with only a latency.
struct ToolDropGuard {
    store: Arc<Store>,
    key: Option<CallKey>,
    tool: String,
    started: tokio::time::Instant,
}

impl Drop for ToolDropGuard {
    fn drop(&mut self) {
        if let Some(key) = self.key.take()
            && !self.store.cancelled.load(Ordering::SeqCst)
        {
            let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let mut call = empty_call(&key);
            call.tool = Some(self.tool.clone());
            call.latency = Some(Duration::from_millis(elapsed.saturating_add(1)));
            self.store.record(call);
        }
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if let Some(key) = self.key.take()
            && !self.store.cancelled.load(Ordering::SeqCst)
        {
            let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let mut call = empty_call(&key);
            call.latency = Some(Duration::from_millis(elapsed.saturating_add(1)));
            let log = self.log.entries();
            call.tool_calls = self.store.tool_calls(&log.tool_calls);
            call.notes = log.notes;
            call.prompt_hash = Some(self.prompt_hash.clone());
            self.store.record(call);
        }
    }
}

impl<P: Provider> Provider for RecordingProvider<P> {
    fn tool_sandbox(&self, tool: &str) -> Option<String> {
        self.inner.tool_sandbox(tool)
    }

    fn run_tool(&self, request: ToolRequest) -> BoxFuture<'_, Result<ToolResponse, ProviderError>> {
        let key = request.key.clone();
        let store = self.store.clone();
        store.note_started(&key);
        if let Some(previous) = store
            .resumed_calls
            .get(&key)
            .filter(|call| call.tool.is_some())
        {
            // Answered before the run was stopped: played back at once, not run again.
            store.replayed.fetch_add(1, Ordering::SeqCst);
            let (_, response) = crate::world::replay::playback_tool(previous);
            return Box::pin(async move { Ok(response) });
        }
        if let Some(error) = store.unwritable() {
            return Box::pin(async move { Err(error) });
        }
        let tool = request.tool.clone();
        let call = self.inner.run_tool(request);
        Box::pin(async move {
            let mut guard = ToolDropGuard {
                store: store.clone(),
                key: Some(key.clone()),
                tool: tool.clone(),
                started: tokio::time::Instant::now(),
            };
            let response = call.await;
            guard.key = None;
            let response = response?;
            let result = match response.result {
                Ok(value) => Ok(store.scrub(&value)),
                Err(message) => Err(store.scrub_text(&message)),
            };
            let mut entry = empty_call(&key);
            entry.tool = Some(tool);
            entry.latency = Some(response.latency);
            match &result {
                Ok(value) => entry.result = Some(value.clone()),
                Err(message) => {
                    entry.error = Some(RecordedError {
                        status: None,
                        message: Some(message.clone()),
                        retry_after: None,
                    });
                }
            }
            store.record(entry);
            if let Some(error) = store.unwritable() {
                return Err(error);
            }
            Ok(ToolResponse {
                result,
                latency: response.latency,
            })
        })
    }

    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        let key = request.key.clone();
        let store = self.store.clone();
        store.note_started(&key);
        if let Some(previous) = store.resumed_calls.get(&key) {
            // Answered before the run was stopped: played back at once.
            store.replayed.fetch_add(1, Ordering::SeqCst);
            let (_, result) = playback(previous);
            resumed_log(previous, &request.log);
            return Box::pin(async move { result });
        }
        if let Some(error) = store.unwritable() {
            return Box::pin(async move { Err(error) });
        }
        let log = request.log.clone();
        // The hash of the prompt as the recording keeps the run's input (scrubbed): a
        // replay renders it from that input, so a secret in the input does not make the
        // recorded call stale.
        let prompt_hash =
            crate::formats::canonical::sha256(store.scrub_text(&request.prompt).as_bytes());
        let call = self.inner.complete(request);
        Box::pin(async move {
            let mut guard = DropGuard {
                store: store.clone(),
                key: Some(key.clone()),
                started: tokio::time::Instant::now(),
                log: log.clone(),
                prompt_hash: prompt_hash.clone(),
            };
            let result = call.await;
            guard.key = None;
            if let Some(mut entry) =
                store.entry(&key, guard.started.elapsed(), &result, &log.entries())
            {
                entry.prompt_hash = Some(prompt_hash);
                store.record(entry);
            }
            if let Some(error) = store.unwritable() {
                return Err(error);
            }
            // The run goes on with the answer as recorded: a secret a model quoted never
            // reaches the run's state, so no delivery, answer or trace can hold it, and a
            // replay of the recording sees what the live run saw.
            result
                .map(|response| store.scrub_response(response))
                .map_err(|error| store.scrub_error(error))
        })
    }
}

/// A journaled call's log as the live call left it: its notes, and each of its tool calls
/// started and finished, so an observer (a server's event stream) is told of them again in
/// the same order, and a resumed run's stream keeps its ids.
fn resumed_log(previous: &RecordedCall, log: &CallLog) {
    for note in &previous.notes {
        log.note(note.clone());
    }
    for recorded in &previous.tool_calls {
        let ok = recorded.error.is_none() && !recorded.result.is_null();
        log.tool_started(&recorded.tool);
        log.tool_finished(crate::world::replay::played_tool_call(recorded), ok);
    }
}

/// A human channel whose answers are recorded into a [`Recording`].
pub struct RecordingHumans<H> {
    inner: H,
    store: Arc<Store>,
}

impl<H> fmt::Debug for RecordingHumans<H> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("RecordingHumans")
    }
}

impl<H: HumanChannel> HumanChannel for RecordingHumans<H> {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        let slot = (request.step.clone(), request.round, request.attempt);
        Box::pin(async move {
            if let Some(answer) = self.store.resumed_humans.get(&slot) {
                self.inner.answered_before(&request, answer);
                return Ok(answer.clone());
            }
            if let Some(error) = self.store.unwritable() {
                return Err(error);
            }
            let answer = self.inner.ask(request).await?;
            let answer = self.store.scrub(&answer);
            self.store.record_human(RecordedHuman {
                turn: 1,
                step: slot.0,
                round: slot.1,
                attempt: slot.2,
                answer: answer.clone(),
            });
            match self.store.unwritable() {
                Some(error) => Err(error),
                None => Ok(answer),
            }
        })
    }
}

/// One line of a journal: a call or a human answer, as in a cassette.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum JournalEntry {
    /// Boxed: a call is much larger than a human answer.
    Call(Box<RecordedCall>),
    Human(RecordedHuman),
}

/// Where a recording appends each call and answer as it ends: a [`Journal`] file, or a
/// durable execution engine's journal. `append` returns once the entry is kept (synced to
/// disk, or acknowledged by the engine), before the run sees the answer.
pub trait JournalWrite: Send + Sync {
    fn append(&self, entry: &JournalEntry) -> Result<(), String>;
}

impl JournalWrite for Journal {
    fn append(&self, entry: &JournalEntry) -> Result<(), String> {
        Journal::append(self, entry).map_err(|error| error.to_string())
    }
}

/// An append-only file of [`JournalEntry`] JSON lines, each written whole and synced to
/// disk before the call it records is answered, so a run killed at any moment leaves
/// every answer it had received.
pub struct Journal {
    path: PathBuf,
    file: Mutex<LineFile>,
}

impl fmt::Debug for Journal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Journal")
            .field("path", &self.path)
            .finish()
    }
}

impl Journal {
    /// Opens (or creates) the journal at `path` for appending and returns what it holds.
    /// A last line cut short by a kill is dropped (and cut from the file); any other line
    /// that cannot be read is an error naming it.
    pub fn open(path: &Path) -> Result<(Journal, Vec<JournalEntry>), RecordError> {
        let io = |source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Opened once, never through a symlink, and read from the same handle.
        let mut file = files::open_append(path).map_err(io)?;
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(io)?;
        let mut entries = Vec::new();
        let mut kept = 0usize;
        let mut lines = text.split_inclusive(|byte| *byte == b'\n').peekable();
        let mut number = 0usize;
        while let Some(line) = lines.next() {
            number += 1;
            let last = lines.peek().is_none();
            let complete = line.ends_with(b"\n");
            let content = String::from_utf8_lossy(line);
            if content.trim().is_empty() {
                kept += line.len();
                continue;
            }
            match serde_json::from_str::<JournalEntry>(content.trim()) {
                Ok(entry) if complete => {
                    entries.push(entry);
                    kept += line.len();
                }
                // Written whole but for its newline, or cut short: the kill came mid-write.
                Ok(_) | Err(_) if last && !complete => break,
                Ok(_) | Err(_) => {
                    return Err(RecordError::Journal {
                        path: path.to_path_buf(),
                        line: number,
                    });
                }
            }
        }
        let file = LineFile::resume(file, kept as u64).map_err(io)?;
        Ok((
            Journal {
                path: path.to_path_buf(),
                file: Mutex::new(file),
            },
            entries,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn append(&self, entry: &JournalEntry) -> Result<(), RecordError> {
        let io = |source| RecordError::Io {
            path: self.path.clone(),
            source,
        };
        let mut line =
            serde_json::to_string(entry).map_err(|error| io(std::io::Error::other(error)))?;
        line.push('\n');
        let mut file = lock(&self.file);
        file.append_line(line.as_bytes()).map_err(io)?;
        file.sync().map_err(io)
    }
}

/// The recording could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Format(#[from] LoadError),
    #[error("{}:{line}: this journal line cannot be read (the journal is damaged)", path.display())]
    Journal { path: PathBuf, line: usize },
}

/// Writes `scenario.yaml` and `cassette.yaml` into `dir` (created if needed), each
/// atomically: a temporary file in the same directory, synced, then renamed over the
/// target, so a reader never sees half a file.
pub fn write_recording(
    dir: &Path,
    scenario: &Scenario,
    cassette: &Cassette,
) -> Result<(), RecordError> {
    fs::create_dir_all(dir).map_err(|source| RecordError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    write_atomically(&dir.join("scenario.yaml"), &scenario.to_yaml()?)?;
    write_atomically(&dir.join("cassette.yaml"), &cassette.to_yaml()?)?;
    Ok(())
}

/// Writes `text` to `path` through [`files::write_atomically`] (an exclusive temporary
/// file, synced, renamed; a symlink at `path` is an error).
pub fn write_atomically(path: &Path, text: &str) -> Result<(), RecordError> {
    files::write_atomically(path, text.as_bytes()).map_err(|source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
