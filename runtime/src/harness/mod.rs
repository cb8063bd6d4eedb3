//! The golden harness (DESIGN §5–6): replays every recorded scenario under `golden/`, compares its normalized trace with `trace.snap`, and reports each scenario as a value.
//!
//! One comparison serves `cargo test` (golden/golden.rs), `cargo xtask verify` and
//! `charter verify`. For each `golden/<spec>/<scenario>/` it:
//! 1. reads `scenario.yaml` and `cassette.yaml` and compiles the scenario's spec (paths are
//!    relative to the project root, the directory that holds `golden/`);
//! 2. checks the cassette's names against the spec (steps, judge roles; "did you mean")
//!    and compares the hashes a pinned cassette was recorded under with the spec's: a
//!    difference is a *stale recording*, its own kind of failure, shown with a unified
//!    diff of each rendered prompt that changed (the cassette keeps the rendered prompt of
//!    each role's first call in `recorded.rendered`, written when the golden is accepted);
//!    a hand-written cassette without `recorded` is *unpinned* and not compared;
//! 3. replays the cassette on a paused clock (a call whose `prompt_hash` differs from its
//!    prompt now is stale too), checks `expect` (outcome, reason, stale, delivered,
//!    answer, calls, and the trajectory: steps, tools, not_called, gates) and that every
//!    recorded call was made;
//! 4. normalizes the trace (nothing machine- or time-dependent: the project root and the
//!    temporary directory become placeholders; virtual `t_ms` stays) and compares it with
//!    `trace.snap`, an insta snapshot file, so `cargo insta review` works on it;
//! 5. replays a second time and compares the two traces (determinism).
//!
//! With `accept`, a changed or missing snapshot is written (temp file + rename) and a
//! stale cassette's `recorded` block is rewritten with the current hashes and prompts
//! (an unpinned cassette gets one only with `pin`); the rest of the hand-written
//! cassette is left as it was. Without it, `pending_snapshots` writes `trace.snap.new`
//! beside a changed or new snapshot for `charter review` or `cargo insta review`.

mod check;
pub mod eval;
pub mod event_diff;
pub mod expect;
mod pin;
mod project;
pub mod record;
pub mod report;
pub mod rerecord;
mod skeleton;
pub mod snapshot;

pub use project::{VerifyOptions, verify_project_with};

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use charter_compiler::{CompiledSpec, LoadedFile, Loader, LockFile, compile, render};
use serde_json::Value;

use crate::engine::effects::Provider;
use crate::engine::provider::{BoxFuture, CallKey, ModelRequest, ModelResponse, ProviderError};
use crate::engine::run::{DeliveryTarget, RunConfig, RunError, replay_blocking};
use crate::formats::scenario::{Cassette, Recorded, Scenario};
use crate::formats::trace::{MemorySink, Outcome, Reason, TraceEvent, to_jsonl};
use crate::world::replay::ReplayProvider;

/// The directory under the project root that holds the scenarios.
pub const GOLDEN_DIR: &str = "golden";
pub const SCENARIO_FILE: &str = "scenario.yaml";
pub const CASSETTE_FILE: &str = "cassette.yaml";
pub const SNAPSHOT_FILE: &str = "trace.snap";

/// How to run the harness.
#[derive(Clone, Debug)]
pub struct HarnessConfig {
    /// Write changed or missing snapshots and refresh stale `recorded` blocks.
    pub accept: bool,
    /// With `accept`: also pin hand-written cassettes (write a `recorded` block into a
    /// cassette that has none). Without it, `accept` leaves unpinned cassettes unpinned.
    pub pin: bool,
    /// With `accept`: also keep the recorded answers of calls whose prompt changed (a
    /// stale recording), pinning them to the prompts of now. `charter review` asks for it
    /// scenario by scenario; `accept` alone never absorbs a stale call (DESIGN §10).
    pub repin: bool,
    /// Only scenarios whose id (`<spec>/<scenario>`) contains this text.
    pub filter: Option<String>,
    /// Only this shard of the scenarios.
    pub partition: Option<Partition>,
    /// When a snapshot differs (and `accept` is off), write the new one beside it as
    /// `trace.snap.new`, insta's pending snapshot, for `cargo insta review`.
    pub pending_snapshots: bool,
    /// Replay each scenario a second time and compare the traces.
    pub determinism: bool,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            accept: false,
            pin: false,
            repin: false,
            filter: None,
            partition: None,
            pending_snapshots: false,
            determinism: true,
        }
    }
}

/// How scenarios are spread over shards (DESIGN §11, as nextest does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PartitionMode {
    /// Round-robin over the selected scenarios in id order: the i-th (0-based) goes to
    /// shard `i % count + 1`, so shards differ in size by at most one.
    #[default]
    Count,
    /// By an FNV-1a hash of `<spec>/<scenario>`: a scenario's shard never changes when
    /// others are added or removed (shards may be uneven, or empty).
    Hash,
}

/// Shard `index` (1-based) of `count`; shards 1..=count together hold every selected
/// scenario exactly once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    pub mode: PartitionMode,
    pub index: u64,
    pub count: u64,
}

impl Partition {
    /// Whether the item at `position` (0-based, among the items the filter kept, in
    /// order) with id `id` belongs to this shard.
    pub fn keeps(self, position: usize, id: &str) -> bool {
        let slot = match self.mode {
            PartitionMode::Count => position as u64,
            PartitionMode::Hash => stable_hash(id),
        };
        slot % self.count + 1 == self.index
    }
}

impl FromStr for Partition {
    type Err = String;

    /// `count:K/N`, `hash:K/N` or `K/N` (count), with `1 <= K <= N`.
    fn from_str(text: &str) -> Result<Partition, String> {
        let error = || {
            format!(
                "expected count:K/N, hash:K/N or K/N with 1 <= K <= N (e.g. count:2/4), got `{text}`"
            )
        };
        let (mode, shard) = match text.split_once(':') {
            Some(("count", shard)) => (PartitionMode::Count, shard),
            Some(("hash", shard)) => (PartitionMode::Hash, shard),
            Some(_) => return Err(error()),
            None => (PartitionMode::Count, text),
        };
        let (index, count) = shard.split_once('/').ok_or_else(error)?;
        let index: u64 = index.trim().parse().map_err(|_| error())?;
        let count: u64 = count.trim().parse().map_err(|_| error())?;
        if index == 0 || count == 0 || index > count {
            return Err(error());
        }
        Ok(Partition { mode, index, count })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            PartitionMode::Count => "count",
            PartitionMode::Hash => "hash",
        };
        write!(formatter, "{mode}:{}/{}", self.index, self.count)
    }
}

/// FNV-1a, 64 bits: the same on every machine and every Rust version (unlike `DefaultHasher`).
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A scenario directory found under `golden/`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScenarioRef {
    /// The `<spec>` directory name.
    pub spec: String,
    /// The `<scenario>` directory name.
    pub name: String,
    pub dir: PathBuf,
}

impl ScenarioRef {
    /// `<spec>/<scenario>`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.spec, self.name)
    }

    /// A file of the scenario as shown to people: `golden/<spec>/<scenario>/<file>`.
    pub fn shown(&self, file: &str) -> String {
        format!("{GOLDEN_DIR}/{}/{}/{file}", self.spec, self.name)
    }
}

/// The harness could not look for scenarios at all.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("cannot read `{path}`: {message}")]
    Read { path: String, message: String },
}

/// Every `golden/<spec>/<scenario>/` under `root` that holds a `scenario.yaml`, sorted by id.
/// A project without `golden/` has no scenarios.
pub fn discover(root: &Path) -> Result<Vec<ScenarioRef>, HarnessError> {
    let golden = root.join(GOLDEN_DIR);
    if !golden.is_dir() {
        return Ok(Vec::new());
    }
    let mut scenarios = Vec::new();
    for spec_dir in sorted_dirs(&golden)? {
        for scenario_dir in sorted_dirs(&spec_dir)? {
            if !scenario_dir.join(SCENARIO_FILE).is_file() {
                continue;
            }
            let name_of = |path: &Path| {
                path.file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default()
            };
            scenarios.push(ScenarioRef {
                spec: name_of(&spec_dir),
                name: name_of(&scenario_dir),
                dir: scenario_dir.clone(),
            });
        }
    }
    scenarios.sort();
    Ok(scenarios)
}

fn sorted_dirs(directory: &Path) -> Result<Vec<PathBuf>, HarnessError> {
    let error = |error: std::io::Error| HarnessError::Read {
        path: directory.display().to_string(),
        message: error.to_string(),
    };
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(directory).map_err(error)? {
        let path = entry.map_err(error)?.path();
        if path.is_dir() {
            dirs.push(path);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// The scenarios `config`'s filter and partition keep, in order (the partition counts
/// among the scenarios the filter kept).
pub fn select(scenarios: Vec<ScenarioRef>, config: &HarnessConfig) -> Vec<ScenarioRef> {
    scenarios
        .into_iter()
        .filter(|scenario| {
            config
                .filter
                .as_deref()
                .is_none_or(|filter| scenario.id().contains(filter))
        })
        .enumerate()
        .filter(|(position, scenario)| {
            config
                .partition
                .is_none_or(|partition| partition.keeps(*position, &scenario.id()))
        })
        .map(|(_, scenario)| scenario)
        .collect()
}

/// How a scenario came out, worst first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// It could not be replayed: a bad file, a spec with errors, an unrecorded call.
    Error,
    /// The cassette was recorded under other hashes than the spec's now.
    Stale,
    /// The trace differs from its snapshot.
    Changed,
    /// The scenario has no snapshot yet (DESIGN §18: new, not changed).
    New,
    /// An `expect` not met, a recorded call never made, or two replays that differ.
    Failed,
    /// `accept` wrote a snapshot or refreshed the recording.
    Accepted,
    /// Stale, as its `expect: { stale: true }` says it must be.
    ExpectedStale,
    /// Passed, with a hand-written cassette that has no `recorded` block (DESIGN §10):
    /// no spec or prompt hashes were compared.
    Unpinned,
    Pass,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Error => "ERROR",
            Status::Stale => "STALE",
            Status::Changed => "CHANGED",
            Status::New => "NEW",
            Status::Failed => "FAIL",
            Status::Accepted => "accepted",
            Status::ExpectedStale => "pass (stale, expected)",
            Status::Unpinned => "unpinned",
            Status::Pass => "pass",
        }
    }

    /// Does the scenario count as passing?
    pub fn passed(self) -> bool {
        matches!(
            self,
            Status::Pass | Status::ExpectedStale | Status::Accepted | Status::Unpinned
        )
    }
}

/// What kind of problem a scenario has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    Error,
    Stale,
    Changed,
    NewSnapshot,
    Expect,
    Unused,
    Nondeterministic,
}

/// A file and line a problem points at (relative to the project root).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: Option<u64>,
}

/// One thing wrong with a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemKind,
    /// One line.
    pub message: String,
    /// A unified diff or other multi-line detail.
    pub detail: Option<String>,
    pub location: Location,
}

/// The result of one scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioReport {
    pub spec: String,
    pub scenario: String,
    pub description: Option<String>,
    pub outcome: Option<Outcome>,
    pub reason: Option<Reason>,
    /// The number of trace events.
    pub events: usize,
    /// The cassette was recorded under other hashes than the spec's now.
    pub stale: bool,
    /// The cassette has no `recorded` block (hand-written): no hashes were compared.
    pub unpinned: bool,
    pub status: Status,
    pub problems: Vec<Problem>,
    /// What `accept` wrote, one line each.
    pub accepted: Vec<String>,
    /// Findings that do not fail the scenario (an expected stale recording, with its diff).
    pub notes: Vec<Problem>,
    /// Wall time of the check (not part of any snapshot).
    pub elapsed: Duration,
}

impl ScenarioReport {
    pub fn id(&self) -> String {
        format!("{}/{}", self.spec, self.scenario)
    }

    /// The report with every text that came from files (names, messages, details) made
    /// safe to show: control characters escaped, long values cut (DESIGN §15). Every
    /// front (table, details, JUnit, GitHub annotations) shows reports in this form.
    pub fn escaped(mut self) -> Self {
        use crate::world::escape::{MAX_BLOCK_CHARS, MAX_LINE_CHARS, block, one_line};
        let line = |text: &str| one_line(text, MAX_LINE_CHARS);
        self.spec = line(&self.spec);
        self.scenario = line(&self.scenario);
        self.description = self.description.as_deref().map(line);
        self.accepted = self.accepted.iter().map(|text| line(text)).collect();
        for problem in self.problems.iter_mut().chain(self.notes.iter_mut()) {
            problem.message = line(&problem.message);
            problem.location.file = line(&problem.location.file);
            problem.detail = problem
                .detail
                .as_deref()
                .map(|detail| block(detail, MAX_BLOCK_CHARS));
        }
        self
    }
}

/// Compiled specs by path, so scenarios of one spec compile it once.
#[derive(Clone, Debug, Default)]
pub struct SpecCache {
    specs: HashMap<PathBuf, Result<Arc<CompiledSpec>, Problem>>,
}

impl SpecCache {
    pub fn new() -> Self {
        SpecCache::default()
    }

    /// The spec at `relative` (to `root`), compiled once.
    pub fn get(&mut self, root: &Path, relative: &str) -> Result<Arc<CompiledSpec>, Problem> {
        let path = root.join(relative);
        self.specs
            .entry(path.clone())
            .or_insert_with(|| compile_spec(root, relative))
            .clone()
    }
}

/// Compiles the spec at `relative` (to `root`); errors are a problem pointing at the
/// first error's line, with every diagnostic rendered as its detail.
pub fn compile_spec(root: &Path, relative: &str) -> Result<Arc<CompiledSpec>, Problem> {
    compile_spec_with_warnings(root, relative).map(|(spec, _)| spec)
}

/// The warnings of a spec that compiled, with the files they point into (to render them
/// as `charter check` does).
#[derive(Clone, Debug, Default)]
pub struct SpecWarnings {
    pub diagnostics: Vec<charter_compiler::Diagnostic>,
    pub sources: charter_compiler::Sources,
}

/// [`compile_spec`], also giving the spec's warnings (`charter verify` shows them).
pub fn compile_spec_with_warnings(
    root: &Path,
    relative: &str,
) -> Result<(Arc<CompiledSpec>, SpecWarnings), Problem> {
    let path = root.join(relative);
    let shown = clean_relative(relative);
    // `spec:` may name only a file inside the project (after symlinks): a regular file
    // within the size limit. The reason quotes nothing of the file.
    let text = read_source_text(&path, root, &shown).map_err(|message| Problem {
        kind: ProblemKind::Error,
        message: format!("cannot read the spec: {message}"),
        detail: None,
        location: Location {
            file: shown.clone(),
            line: None,
        },
    })?;
    let loader = FsLoader {
        root: root.to_path_buf(),
        directory: Path::new(&shown)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
    };
    let compilation = compile(&shown, &text, &loader);
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => Ok((
            Arc::new(spec),
            SpecWarnings {
                diagnostics: compilation.diagnostics,
                sources: compilation.sources,
            },
        )),
        _ => {
            let first = compilation
                .diagnostics
                .iter()
                .find(|diagnostic| diagnostic.is_error());
            let location = first
                .and_then(|diagnostic| diagnostic.primary_span())
                .map(|span| {
                    let (line, _) = compilation.sources.line_column(span.file, span.start);
                    Location {
                        file: compilation
                            .sources
                            .get(span.file)
                            .map_or_else(|| shown.clone(), |file| file.name.clone()),
                        line: Some(line as u64),
                    }
                })
                .unwrap_or(Location {
                    file: shown.clone(),
                    line: None,
                });
            Err(Problem {
                kind: ProblemKind::Error,
                message: format!(
                    "the spec `{shown}` has errors{}",
                    first
                        .map(|diagnostic| format!(": {}", diagnostic.message))
                        .unwrap_or_default()
                ),
                detail: Some(render::text(
                    &compilation.diagnostics,
                    &compilation.sources,
                    false,
                )),
                location,
            })
        }
    }
}

/// `a/./b/../c` -> `a/c`, with `/` separators (paths as people read them).
fn clean_relative(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// Reads the files a spec names, relative to the spec's directory; display names are
/// relative to the project root.
#[derive(Debug)]
struct FsLoader {
    root: PathBuf,
    /// The spec's directory, relative to the root.
    directory: PathBuf,
}

impl Loader for FsLoader {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        if Path::new(relative_path).has_root() {
            return Err(format!(
                "`{relative_path}` is an absolute path; paths are relative to the spec file"
            ));
        }
        let shown = clean_relative(&format!(
            "{}/{relative_path}",
            self.directory.to_string_lossy()
        ));
        read_source_text(&self.root.join(&shown), &self.root, &shown).map(|text| LoadedFile {
            display_name: shown,
            text,
        })
    }

    /// `charter.lock` at the project root, shown as `charter.lock`.
    fn load_lock(&self) -> LockFile {
        use crate::world::files::{MAX_SOURCE_BYTES, SourceError, read_source};
        let display_name = crate::formats::lock::LOCK_FILE.to_string();
        let path = self.root.join(&display_name);
        match read_source(&path, Some(&self.root), MAX_SOURCE_BYTES) {
            Err(SourceError::Missing) => LockFile::Missing { display_name },
            Err(error) => LockFile::Unreadable {
                reason: error.message(&display_name, "."),
                display_name,
            },
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => LockFile::Found(LoadedFile { display_name, text }),
                Err(_) => LockFile::Unreadable {
                    reason: format!("`{display_name}` is not UTF-8 text"),
                    display_name,
                },
            },
        }
    }
}

/// A file a spec or scenario names, read as text only inside `root`
/// ([`crate::world::files::read_source`]); the error is a one-line reason naming it as `shown`.
fn read_source_text(path: &Path, root: &Path, shown: &str) -> Result<String, String> {
    let bytes =
        crate::world::files::read_source(path, Some(root), crate::world::files::MAX_SOURCE_BYTES)
            .map_err(|error| error.message(shown, "."))?;
    String::from_utf8(bytes).map_err(|_| format!("`{shown}` is not UTF-8 text"))
}

/// Runs the harness over the project at `root`: every selected scenario, results in
/// scenario order. Scenarios are independent, so they are spread over the machine's
/// cores (each replay has its own paused clock; nothing is shared but the compiled specs).
pub fn verify_project(
    root: &Path,
    config: &HarnessConfig,
) -> Result<Vec<ScenarioReport>, HarnessError> {
    verify_project_with_progress(root, config, &|_, _, _| {})
}

/// [`verify_project`], telling `progress` of each scenario as it finishes: (how many are
/// done, how many in all, its report). Called from the worker threads, in the order they
/// finish.
pub fn verify_project_with_progress(
    root: &Path,
    config: &HarnessConfig,
    progress: &(dyn Fn(usize, usize, &ScenarioReport) + Sync),
) -> Result<Vec<ScenarioReport>, HarnessError> {
    verify_project_with(root, config, VerifyOptions::default(), progress)
}

/// What one replay gave.
#[derive(Debug)]
pub struct Replayed {
    pub outcome: crate::engine::run::RunOutcome,
    pub events: Vec<TraceEvent>,
    /// The normalized trace as JSON lines.
    pub trace: String,
    pub unused_calls: Vec<CallKey>,
    pub unused_humans: Vec<crate::engine::provider::HumanKey>,
    /// The turn of each of `unused_calls` and `unused_humans`, in order (all 1 outside a
    /// conversation).
    pub unused_call_turns: Vec<u64>,
    pub unused_human_turns: Vec<u64>,
    /// Role -> the rendered prompt of its first call (by call key).
    pub prompts: BTreeMap<String, String>,
    /// Calls whose prompt differs from the one their recorded answer was given to.
    pub stale_prompts: Vec<crate::world::replay::StalePrompt>,
}

impl Replayed {
    /// Adds the replay of turn `number` of a conversation to the turns before it: its
    /// events and trace after theirs, its unused recordings (of turn `number`), the
    /// prompts of roles it called first, and its stale prompts; its outcome becomes the
    /// conversation's.
    fn append_turn(&mut self, turn: Replayed, number: u64) {
        self.events.extend(turn.events);
        self.trace.push_str(&turn.trace);
        self.unused_call_turns
            .extend(turn.unused_calls.iter().map(|_| number));
        self.unused_calls.extend(turn.unused_calls);
        self.unused_human_turns
            .extend(turn.unused_humans.iter().map(|_| number));
        self.unused_humans.extend(turn.unused_humans);
        for (role, prompt) in turn.prompts {
            self.prompts.entry(role).or_insert(prompt);
        }
        self.stale_prompts.extend(turn.stale_prompts);
        self.outcome = turn.outcome;
    }
}

/// A replay that failed, and in which turn of a conversation (1 for a single run).
#[derive(Debug)]
pub struct ReplayFailure {
    pub turn: u64,
    pub error: RunError,
    /// The trace events the replay emitted before it failed (all turns so far).
    pub events: usize,
}

/// Replays a scenario's run, or each turn of its conversation in order with the session
/// carried from turn to turn (DESIGN §9.4): one trace, whose `run_started` events carry
/// the turn; the outcome is the last turn's.
pub fn replay_scenario(
    spec: &CompiledSpec,
    scenario: &Scenario,
    cassette: &Arc<Cassette>,
    root: &Path,
) -> Result<Replayed, Box<ReplayFailure>> {
    let Some(turns) = &scenario.turns else {
        let (replayed, events) = replay_counting(
            spec,
            scenario.input.clone(),
            Arc::clone(cassette),
            root,
            None,
        );
        return replayed.map_err(|error| {
            Box::new(ReplayFailure {
                turn: 1,
                error,
                events,
            })
        });
    };
    let mut session = crate::engine::session::Session::new(spec).map_err(|error| {
        Box::new(ReplayFailure {
            turn: 1,
            error: RunError::Flow(format!("a scenario with `turns` needs a session: {error}")),
            events: 0,
        })
    })?;
    let mut all: Option<Replayed> = None;
    let mut emitted = 0;
    for (index, turn) in turns.iter().enumerate() {
        let number = u64::try_from(index).unwrap_or(u64::MAX).saturating_add(1);
        let (replayed, events) = replay_counting(
            spec,
            turn.input.clone(),
            cassette.for_turn(number),
            root,
            Some(session.clone()),
        );
        emitted += events;
        let replayed = replayed.map_err(|error| {
            Box::new(ReplayFailure {
                turn: number,
                error,
                events: emitted,
            })
        })?;
        if let Some(next) = &replayed.outcome.session {
            session = next.clone();
        }
        match &mut all {
            None => all = Some(replayed),
            Some(so_far) => so_far.append_turn(replayed, number),
        }
    }
    // Calls recorded for a turn the scenario does not have are never made.
    let mut replayed = all.ok_or_else(|| {
        Box::new(ReplayFailure {
            turn: 1,
            error: RunError::Flow("`turns` is empty".to_string()),
            events: 0,
        })
    })?;
    let count = u64::try_from(turns.len()).unwrap_or(u64::MAX);
    for call in cassette.calls.iter().filter(|call| call.turn > count) {
        replayed.unused_calls.push(call.key());
        replayed.unused_call_turns.push(call.turn);
    }
    Ok(replayed)
}

/// Replays `cassette` for `spec` on `input` on a paused clock, delivering in memory,
/// and normalizes the trace against `root`.
pub fn replay(
    spec: &CompiledSpec,
    input: Value,
    cassette: impl Into<Arc<Cassette>>,
    root: &Path,
) -> Result<Replayed, RunError> {
    replay_turn(spec, input, cassette, root, None)
}

/// [`replay`] as one turn of a conversation in `session` (none: a single run).
pub fn replay_turn(
    spec: &CompiledSpec,
    input: Value,
    cassette: impl Into<Arc<Cassette>>,
    root: &Path,
    session: Option<crate::engine::session::Session>,
) -> Result<Replayed, RunError> {
    replay_counting(spec, input, cassette, root, session).0
}

/// [`replay_turn`], with the number of trace events the run emitted, which a failed
/// replay (an unrecorded call) has too.
pub fn replay_counting(
    spec: &CompiledSpec,
    input: Value,
    cassette: impl Into<Arc<Cassette>>,
    root: &Path,
    session: Option<crate::engine::session::Session>,
) -> (Result<Replayed, RunError>, usize) {
    let replay = Arc::new(ReplayProvider::new(cassette));
    let config = RunConfig {
        delivery: DeliveryTarget::Memory,
        faults: replay.faults().to_vec(),
        cancel: None,
        observer: None,
        session,
    };
    let capture = Arc::new(PromptCapture {
        inner: replay.clone(),
        first: Mutex::new(BTreeMap::new()),
    });
    let mut sink = MemorySink::new();
    let outcome = replay_blocking(
        spec,
        input,
        crate::engine::effects::Effects::new(capture.clone(), replay.as_ref(), &mut sink)
            .with_files(&crate::world::files::LocalFiles),
        &config,
    );
    let events = sink.into_events();
    let count = events.len();
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => return (Err(error), count),
    };
    let trace = match to_jsonl(&events) {
        Ok(text) => normalize_trace(text, root),
        Err(error) => return (Err(RunError::Flow(error.to_string())), count),
    };
    let prompts = capture
        .first
        .lock()
        .map(|mut first| {
            std::mem::take(&mut *first)
                .into_iter()
                .map(|(role, (_, prompt))| (role, prompt))
                .collect()
        })
        .unwrap_or_default();
    let unused_calls = replay.unused();
    let unused_humans = replay.unused_humans();
    let replayed = Replayed {
        outcome,
        events,
        trace,
        unused_call_turns: unused_calls.iter().map(|_| 1).collect(),
        unused_human_turns: unused_humans.iter().map(|_| 1).collect(),
        unused_calls,
        unused_humans,
        prompts,
        stale_prompts: replay.stale_prompts(),
    };
    (Ok(replayed), count)
}

/// A provider that keeps the rendered prompt of each role's first call (the smallest
/// call key, so the choice does not depend on timing) and passes the call on.
struct PromptCapture {
    inner: Arc<ReplayProvider>,
    first: Mutex<BTreeMap<String, (CallKey, String)>>,
}

impl PromptCapture {
    /// Keeps `request`'s prompt if it is its role's first call.
    fn capture(&self, request: &ModelRequest) {
        if let Ok(mut first) = self.first.lock() {
            let earlier = first
                .get(&request.role)
                .is_some_and(|(key, _)| *key <= request.key);
            if !earlier {
                first.insert(
                    request.role.clone(),
                    (request.key.clone(), request.prompt.clone()),
                );
            }
        }
    }
}

impl Provider for PromptCapture {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        self.capture(&request);
        self.inner.complete(request)
    }

    fn answer_now(&self, request: &ModelRequest) -> Option<crate::engine::effects::Played> {
        self.capture(request);
        self.inner.answer_now(request)
    }

    fn run_tool(
        &self,
        request: crate::engine::provider::ToolRequest,
    ) -> BoxFuture<'_, Result<crate::engine::provider::ToolResponse, ProviderError>> {
        self.inner.run_tool(request)
    }
}

/// Removes what depends on the machine from a trace: the project root (as given and
/// canonical) and the temporary directory become `<root>` and `<tmp>`. Virtual times
/// stay: they are deterministic.
///
/// The paths are worked out once per root (they take system calls) and replaced in one
/// pass over the trace, the longest match first at each place; a trace with nothing to
/// replace (the usual case) is returned as it is, not copied.
pub fn normalize_trace(trace: String, root: &Path) -> String {
    let replacements = path_replacements(root);
    let mut firsts: Vec<char> = replacements
        .iter()
        .filter_map(|(text, _)| text.chars().next())
        .collect();
    firsts.sort_unstable();
    firsts.dedup();
    // One first character (`/`) is searched for with memchr; several, one by one.
    let next = |rest: &str| match firsts.as_slice() {
        [only] => rest.find(*only),
        many => rest.find(many),
    };
    let mut normalized: Option<String> = None;
    let (mut copied, mut at) = (0, 0);
    while let Some(offset) = trace.get(at..).and_then(next) {
        let start = at + offset;
        let rest = trace.get(start..).unwrap_or_default();
        match replacements
            .iter()
            .find(|(text, _)| rest.starts_with(text.as_str()))
        {
            Some((text, placeholder)) => {
                let normalized =
                    normalized.get_or_insert_with(|| String::with_capacity(trace.len()));
                normalized.push_str(trace.get(copied..start).unwrap_or_default());
                normalized.push_str(placeholder);
                at = start + text.len();
                copied = at;
            }
            None => at = start + rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    match normalized {
        Some(mut normalized) => {
            normalized.push_str(trace.get(copied..).unwrap_or_default());
            normalized
        }
        None => trace,
    }
}

/// What [`normalize_trace`] replaces for `root`, longest first (so a root inside the
/// temporary directory stays `<root>`); kept per root for the process once the root
/// exists, so a library of scenarios asks the file system once.
fn path_replacements(root: &Path) -> Arc<Vec<(String, &'static str)>> {
    type Cache = Mutex<BTreeMap<std::path::PathBuf, Arc<Vec<(String, &'static str)>>>>;
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(BTreeMap::new()));
    if let Some(found) = cache.lock().ok().and_then(|cache| cache.get(root).cloned()) {
        return found;
    }
    let mut replacements: Vec<(String, &'static str)> = Vec::new();
    let mut add = |path: &Path, placeholder: &'static str| {
        let text = path.to_string_lossy().trim_end_matches('/').to_string();
        if text.len() > 1 && !replacements.iter().any(|(known, _)| *known == text) {
            replacements.push((text, placeholder));
        }
    };
    let canonical = root.canonicalize();
    if let Ok(canonical) = &canonical {
        add(canonical, "<root>");
    }
    if let Ok(absolute) = std::path::absolute(root) {
        add(&absolute, "<root>");
    }
    let temp = std::env::temp_dir();
    if let Ok(canonical) = temp.canonicalize() {
        add(&canonical, "<tmp>");
    }
    add(&temp, "<tmp>");
    replacements.sort_by_key(|(text, _)| std::cmp::Reverse(text.len()));
    let replacements = Arc::new(replacements);
    // A root that does not exist yet may canonicalize differently once it does.
    if canonical.is_ok()
        && let Ok(mut cache) = cache.lock()
    {
        if cache.len() >= 256 {
            cache.clear();
        }
        cache.insert(root.to_path_buf(), Arc::clone(&replacements));
    }
    replacements
}

/// A unified diff of `old` and `new`, with `old_name`/`new_name` headers.
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

/// A scenario's `scenario.yaml`, parsed, with its text (for line numbers); or why not.
pub type ScenarioFile = Result<(Scenario, String), Problem>;

/// Reads and parses the `scenario.yaml` of `reference`.
pub fn read_scenario(reference: &ScenarioRef) -> ScenarioFile {
    let shown = reference.shown(SCENARIO_FILE);
    let text = std::fs::read_to_string(reference.dir.join(SCENARIO_FILE))
        .map_err(|error| error_at(shown.clone(), None, format!("cannot read: {error}")))?;
    Scenario::from_yaml(&shown, &text)
        .map(|scenario| (scenario, text))
        .map_err(|error| error_at(shown.clone(), error.0.line, error.to_string()))
}

/// Checks one scenario (see the module documentation), given its read `scenario.yaml`.
pub fn verify_scenario(
    root: &Path,
    scenario: &ScenarioRef,
    file: &ScenarioFile,
    config: &HarnessConfig,
    specs: &mut SpecCache,
) -> ScenarioReport {
    let started = Instant::now();
    let mut report = ScenarioReport {
        spec: scenario.spec.clone(),
        scenario: scenario.name.clone(),
        description: None,
        outcome: None,
        reason: None,
        events: 0,
        stale: false,
        unpinned: false,
        status: Status::Pass,
        problems: Vec::new(),
        accepted: Vec::new(),
        notes: Vec::new(),
        elapsed: Duration::ZERO,
    };
    check::check_scenario(root, scenario, file, config, specs, &mut report);
    report.status = status_of(&report);
    report.elapsed = started.elapsed();
    report
}

fn status_of(report: &ScenarioReport) -> Status {
    let has = |kind: ProblemKind| report.problems.iter().any(|problem| problem.kind == kind);
    if has(ProblemKind::Error) {
        Status::Error
    } else if has(ProblemKind::Stale) {
        Status::Stale
    } else if has(ProblemKind::Changed) {
        Status::Changed
    } else if has(ProblemKind::NewSnapshot) {
        Status::New
    } else if !report.problems.is_empty() {
        Status::Failed
    } else if !report.accepted.is_empty() {
        Status::Accepted
    } else if report.stale {
        Status::ExpectedStale
    } else if report.unpinned {
        Status::Unpinned
    } else {
        Status::Pass
    }
}

fn error_at(file: String, line: Option<u64>, message: String) -> Problem {
    Problem {
        kind: ProblemKind::Error,
        message,
        detail: None,
        location: Location { file, line },
    }
}

/// Rewrites the `recorded:` block of the cassette (and nothing else) with `current`
/// and the rendered prompts, atomically, after checking that the result reads back.
fn refresh_recorded(
    reference: &ScenarioRef,
    cassette_text: &str,
    current: &Recorded,
    prompts: &BTreeMap<String, String>,
) -> Result<(), String> {
    let mut recorded = current.clone();
    recorded.rendered = prompts.clone();
    let mut block = None;
    for literal in [true, false] {
        let text = recorded_block(&recorded, literal)?;
        let candidate = replace_recorded_block(cassette_text, &text)?;
        let reads_back = Cassette::from_yaml(CASSETTE_FILE, &candidate)
            .map(|cassette| cassette.recorded.as_ref() == Some(&recorded))
            .unwrap_or(false);
        if reads_back {
            block = Some(candidate);
            break;
        }
    }
    let Some(updated) = block else {
        return Err("cannot write a `recorded` block that reads back the same".to_string());
    };
    snapshot::write_atomically(&reference.dir.join(CASSETTE_FILE), &updated)
        .map_err(|error| format!("cannot write the cassette: {error}"))
}

/// The `recorded:` block as YAML; prompts as block literals when `literal`.
fn recorded_block(recorded: &Recorded, literal: bool) -> Result<String, String> {
    #[derive(serde::Serialize)]
    struct Block<'a> {
        recorded: Body<'a>,
    }
    #[derive(serde::Serialize)]
    struct Body<'a> {
        spec_hash: &'a str,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        prompts: &'a BTreeMap<String, String>,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        rules: &'a BTreeMap<String, String>,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        rendered: BTreeMap<&'a str, Text<'a>>,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        models: &'a BTreeMap<String, crate::formats::scenario::RecordedModel>,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        overrides: &'a BTreeMap<String, String>,
    }
    #[derive(serde::Serialize)]
    #[serde(untagged)]
    enum Text<'a> {
        Block(crate::formats::yaml::BlockText<'a>),
        Plain(&'a str),
    }
    let body = Body {
        spec_hash: &recorded.spec_hash,
        prompts: &recorded.prompts,
        rules: &recorded.rules,
        rendered: recorded
            .rendered
            .iter()
            .map(|(role, text)| {
                let text = if literal {
                    Text::Block(crate::formats::yaml::BlockText(text))
                } else {
                    Text::Plain(text)
                };
                (role.as_str(), text)
            })
            .collect(),
        models: &recorded.models,
        overrides: &recorded.overrides,
    };
    crate::formats::yaml::to_string(CASSETTE_FILE, &Block { recorded: body })
        .map_err(|error| error.to_string())
}

/// `text` with its top-level `recorded:` entry (the key line and the indented lines
/// under it) replaced by `block`; a cassette without one gets it after its `version:`
/// line (pinning a hand-written cassette).
fn replace_recorded_block(text: &str, block: &str) -> Result<String, String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let Some(start) = lines.iter().position(|line| line.starts_with("recorded:")) else {
        let after = lines
            .iter()
            .position(|line| line.starts_with("version:"))
            .ok_or("the cassette has no top-level `version:` entry")?;
        let mut out: String = lines.iter().take(after + 1).copied().collect();
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(block);
        if !block.ends_with('\n') {
            out.push('\n');
        }
        out.extend(lines.iter().skip(after + 1).copied());
        return Ok(out);
    };
    let end = lines
        .iter()
        .enumerate()
        .skip(start + 1)
        .find(|(_, line)| {
            let first = line.chars().next();
            first.is_some_and(|first| !matches!(first, ' ' | '\t' | '\n' | '\r' | '#'))
        })
        .map_or(lines.len(), |(index, _)| index);
    let mut out: String = lines.iter().take(start).copied().collect();
    out.push_str(block);
    if !block.ends_with('\n') {
        out.push('\n');
    }
    out.extend(lines.iter().skip(end).copied());
    Ok(out)
}

#[cfg(test)]
mod tests;
