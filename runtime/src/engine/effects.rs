//! The side-effect boundary: every effect the scheduler has on the outside world goes through the traits of this module, passed in as [`Effects`].
//!
//! The scheduler is deterministic given the answers these give: a model or tool call
//! ([`Provider`]), a person's answer to an `ask` ([`HumanChannel`]), the clock and its
//! timers — a backoff, a `Retry-After`, a call's timeout, the wall budget ([`Clock`]) —,
//! appending a trace event ([`TraceSink`]) and writing a delivery or an answer file
//! ([`Files`]). Today's implementations are a live provider with its journal (a killed run
//! started again answers every call already made from the journal) and a recording played
//! back on a paused clock (`world::replay`). A journaling engine that re-executes a run
//! from its start (DESIGN §16) implements the same traits: each call one journal entry,
//! each wait with nothing in flight a durable sleep ([`Clock::idle_until`]), each backoff's
//! end kept ([`Clock::keep_deadline`]), each `ask` a durable promise, each trace event
//! appended to its state; since the scheduler asks for the same effects given the same
//! answers, the journal answers every one already made.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

pub use crate::engine::provider::BoxFuture;
use crate::engine::provider::{
    HumanRequest, ModelRequest, ModelResponse, ProviderError, ToolRequest, ToolResponse,
};
pub use crate::formats::trace::TraceSink;

/// What a run is given to act on the outside world with.
pub struct Effects<'a> {
    /// Model calls and `tool` steps.
    pub provider: Arc<dyn Provider>,
    /// The answers to `ask` steps.
    pub humans: &'a dyn HumanChannel,
    /// Where each trace event is appended, before it takes effect.
    pub sink: &'a mut dyn TraceSink,
    /// Where a delivery and an answer file are written ([`NoFiles`] by default: a run
    /// delivering in memory writes none).
    pub files: &'a dyn Files,
    /// The clock and its timers ([`LiveClock`] by default; a replay's is paused).
    pub clock: Arc<dyn Clock>,
}

impl<'a> Effects<'a> {
    /// Calls through `provider`, answers from `humans`, the trace to `sink`; no files and
    /// the runtime's clock.
    pub fn new(
        provider: Arc<dyn Provider>,
        humans: &'a dyn HumanChannel,
        sink: &'a mut dyn TraceSink,
    ) -> Self {
        Effects {
            provider,
            humans,
            sink,
            files: &NoFiles,
            clock: Arc::new(LiveClock),
        }
    }

    /// Writes the delivery and the answer file through `files`.
    pub fn with_files(mut self, files: &'a dyn Files) -> Self {
        self.files = files;
        self
    }

    /// Keeps time with `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

impl fmt::Debug for Effects<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Effects")
            .field("files", &self.files)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// Answers model calls, and the calls of `tool` steps (run live, or played back from a
/// cassette: they are recorded and replayed like model calls).
pub trait Provider: Send + Sync {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>>;

    /// Runs one attempt of a `tool` step. A tool that fails is an `Ok` response holding
    /// the error; `Err` is for what stops the run (a call the cassette does not hold).
    /// A provider that runs no tools answers that the tool is not available.
    fn run_tool(&self, request: ToolRequest) -> BoxFuture<'_, Result<ToolResponse, ProviderError>> {
        Box::pin(async move {
            Ok(ToolResponse {
                result: Err(format!(
                    "tool `{}` is not available in this run",
                    request.tool
                )),
                latency: Duration::ZERO,
            })
        })
    }

    /// `request`'s answer and how long the call takes, given at once by a provider that
    /// knows it without waiting (a recording). It has the effects [`Provider::complete`]
    /// has when it starts (the call is marked used, its log written); the scheduler makes
    /// the answer arrive after the latency, or at the role's timeout, as a task's would,
    /// on its own clock. `None` (the default): the call runs as a task, through
    /// `complete`.
    fn answer_now(&self, request: &ModelRequest) -> Option<Played> {
        let _ = request;
        None
    }

    /// The sandbox `tool` runs in (DESIGN §20), named by its `tool_call` and
    /// `tool_timeout` events; `None` for a provider that runs no tool (a replay).
    fn tool_sandbox(&self, tool: &str) -> Option<String> {
        let _ = tool;
        None
    }
}

/// A call's answer given at once ([`Provider::answer_now`]): how long the call takes,
/// and what it answers then.
pub type Played = (Duration, Result<ModelResponse, ProviderError>);

/// A played answer as [`Provider::complete`] gives it: after its latency.
pub async fn wait_out((latency, outcome): Played) -> Result<ModelResponse, ProviderError> {
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    outcome
}

impl<P: Provider + ?Sized> Provider for Arc<P> {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        (**self).complete(request)
    }

    fn run_tool(&self, request: ToolRequest) -> BoxFuture<'_, Result<ToolResponse, ProviderError>> {
        (**self).run_tool(request)
    }

    fn answer_now(&self, request: &ModelRequest) -> Option<Played> {
        (**self).answer_now(request)
    }

    fn tool_sandbox(&self, tool: &str) -> Option<String> {
        (**self).tool_sandbox(tool)
    }
}

impl<P: Provider + ?Sized> Provider for Box<P> {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        (**self).complete(request)
    }

    fn run_tool(&self, request: ToolRequest) -> BoxFuture<'_, Result<ToolResponse, ProviderError>> {
        (**self).run_tool(request)
    }

    fn answer_now(&self, request: &ModelRequest) -> Option<Played> {
        (**self).answer_now(request)
    }

    fn tool_sandbox(&self, tool: &str) -> Option<String> {
        (**self).tool_sandbox(tool)
    }
}

/// Where an `ask` step's answer comes from: a person at a terminal in live runs, the
/// cassette in replays. The answer is an `Answer` record (`{approved, note?}`), which the
/// scheduler validates.
pub trait HumanChannel: Send + Sync {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>>;

    /// Told of a question answered before the run was stopped, which a journal answers
    /// now instead of asking again: a channel that shows its questions (a server's event
    /// stream) shows this one where it showed it before, so a resumed run's stream is the
    /// same events with the same ids.
    fn answered_before(&self, request: &HumanRequest, answer: &Value) {
        let _ = (request, answer);
    }
}

impl<H: HumanChannel + ?Sized> HumanChannel for Arc<H> {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        (**self).ask(request)
    }

    fn answered_before(&self, request: &HumanRequest, answer: &Value) {
        (**self).answered_before(request, answer);
    }
}

/// The run's clock and its timers. A run reads the clock for every event's `t_ms` and
/// for its budgets, and waits on it for backoffs, timeouts and the wall budget.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now(&self) -> Instant;

    /// A timer that ends at `deadline` (at once if it has passed).
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()>;

    /// Whether only this run's own waits move the clock (a replay's paused clock, used by
    /// nothing else): then a reading holds until the run next waits, and a run with
    /// nothing in flight but its own timed jobs moves the clock on itself ([`Clock::skip_to`]).
    fn moved_only_by_the_run(&self) -> bool {
        false
    }

    /// Moves a clock that only the run moves on to `deadline`, as a timer would: to the
    /// whole millisecond. Any other clock sleeps.
    fn skip_to(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        self.sleep_until(deadline)
    }

    /// A timer the run waits on with nothing in flight (no call, no tool): the next
    /// backoff's end or the wall budget's. A durable engine's clock makes it a durable
    /// sleep, during which the run need not be held by any process. Default: a timer.
    fn idle_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        self.sleep_until(deadline)
    }

    /// The end of the backoff named `key` (the call it follows: one name per backoff in a
    /// run) that would end at `deadline`. A durable engine's clock keeps it the first
    /// time, and gives back the kept end when a run started again waits the same backoff,
    /// so the run does not wait it anew. Default: `deadline`.
    fn keep_deadline(&self, key: &str, deadline: Instant) -> Instant {
        let _ = key;
        deadline
    }

    /// How long before now the run first started: zero, but for a durable engine's run
    /// started again, whose wall budget and event times count from its first start.
    fn started_ago(&self) -> Duration {
        Duration::ZERO
    }
}

/// Tokio's clock, whatever the runtime's is (real time live; paused and moved by its
/// timers in a test).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveClock;

impl Clock for LiveClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep_until(deadline))
    }
}

/// A paused tokio clock that one run alone uses (a replay's, in virtual time): the run
/// moves it on itself when nothing else could act before its next job is due.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PausedClock;

impl Clock for PausedClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep_until(deadline))
    }

    fn moved_only_by_the_run(&self) -> bool {
        true
    }

    fn skip_to(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        // The clock started on a whole millisecond and only moves by whole ones.
        let wait = deadline.saturating_duration_since(Instant::now());
        let wait = wait.as_nanos().div_ceil(1_000_000);
        let wait = Duration::from_millis(u64::try_from(wait).unwrap_or(u64::MAX));
        Box::pin(tokio::time::advance(wait))
    }
}

/// The files a run writes: its delivery (written whole, read back and re-hashed; a
/// mismatch set aside) and a flow's answer.
pub trait Files: Send + Sync + fmt::Debug {
    /// Creates `directory` and its parents.
    fn create_dir_all(&self, directory: &Path) -> io::Result<()>;
    /// Writes `bytes` to `path` whole or not at all, never through a symlink.
    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Reads `path` back, at most `limit` bytes, never through a symlink.
    fn read(&self, path: &Path, limit: u64) -> io::Result<String>;
    /// Renames `from` to `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
}

/// Writes nothing: every write is refused. What a run that delivers in memory is given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoFiles;

impl NoFiles {
    fn refused(path: &Path) -> io::Error {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "this run writes no files ({} was asked for)",
                path.display()
            ),
        )
    }
}

impl Files for NoFiles {
    fn create_dir_all(&self, directory: &Path) -> io::Result<()> {
        Err(NoFiles::refused(directory))
    }

    fn write(&self, path: &Path, _bytes: &[u8]) -> io::Result<()> {
        Err(NoFiles::refused(path))
    }

    fn read(&self, path: &Path, _limit: u64) -> io::Result<String> {
        Err(NoFiles::refused(path))
    }

    fn rename(&self, from: &Path, _to: &Path) -> io::Result<()> {
        Err(NoFiles::refused(from))
    }
}
