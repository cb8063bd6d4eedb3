//! Running an eval's runs: K workers on one multi-threaded runtime take the runs in turn (repeat by repeat, so a cost cap or an interrupt cuts every input alike), each run live with its line's answers to `ask`, judged as it ends; the cost cap stops new runs, Ctrl-C or SIGTERM cancels the runs in flight.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use charter_compiler::CompiledSpec;
use charter_runtime::engine::effects::{Effects, HumanChannel, Provider};
use charter_runtime::engine::provider::{BoxFuture, HumanRequest, ProviderError};
use charter_runtime::engine::run::{RunConfig, RunOutcome};
use charter_runtime::formats::scenario::{Cassette, Recorded};
use charter_runtime::formats::trace::{MemorySink, Reason, TraceEvent};
use charter_runtime::harness::eval::{EvalLine, RunResult, ending_of, judge};
use charter_runtime::totals::RunTotals;
use charter_runtime::world::providers::Providers;
use charter_runtime::world::record::Recording;
use charter_runtime::world::secrets::{Scrubber, ScrubbingSink};
use serde_json::Value;

use super::{EvalArgs, Ready};
use crate::terminal::{Context, print_err};

/// What the runs gave.
pub(crate) struct Finished {
    /// Every run that ended (a run cancelled by an interrupt is not one).
    pub(crate) results: Vec<RunResult>,
    /// The runs that failed, with their recordings, for `--save-failures`.
    pub(crate) failed: Vec<FailedRun>,
    /// Why the eval stopped before every run ran, if it did.
    pub(crate) stopped: Option<String>,
    /// Ctrl-C or SIGTERM ended it.
    pub(crate) interrupted: bool,
    /// The eval's wall time.
    pub(crate) elapsed: Duration,
}

/// A failed run and what it was told, to keep as a scenario.
pub(crate) struct FailedRun {
    pub(crate) result: RunResult,
    pub(crate) cassette: Cassette,
}

/// One run to make: a model set, a line (its index) and which of its runs.
#[derive(Clone, Copy, Debug)]
struct Job {
    set: usize,
    line: usize,
    repeat: usize,
}

/// A model set as the workers share it.
struct SetRun {
    spec: Arc<CompiledSpec>,
    providers: Providers,
    recorded: Recorded,
}

/// What every worker shares.
struct State {
    lines: Vec<EvalLine>,
    sets: Vec<SetRun>,
    jobs: Vec<Job>,
    next: AtomicUsize,
    max_cost: Option<f64>,
    keep_recordings: bool,
    keep_timing: bool,
    secrets: Vec<String>,
    scrubber: Scrubber,
    cancel: tokio::sync::watch::Receiver<bool>,
    interrupted: AtomicBool,
    progress: Progress,
    done: Mutex<Done>,
}

/// The runs that ended so far.
#[derive(Default)]
struct Done {
    results: Vec<RunResult>,
    failed: Vec<FailedRun>,
    cost: f64,
    stopped: Option<String>,
}

/// Runs every run of `ready` as `args` say.
pub(crate) fn run_all(args: &EvalArgs, context: Context, ready: &Ready) -> Finished {
    let (cancel_sender, cancel) = tokio::sync::watch::channel(false);
    let state = Arc::new(State {
        lines: ready.lines.clone(),
        sets: ready
            .sets
            .iter()
            .map(|set| SetRun {
                spec: set.spec.clone(),
                providers: set.providers.clone(),
                recorded: Recorded {
                    overrides: set.overrides.clone(),
                    ..Recorded::from_spec(&set.spec)
                },
            })
            .collect(),
        jobs: jobs(ready.lines.len(), args.repeat as usize, ready.sets.len()),
        next: AtomicUsize::new(0),
        max_cost: args.max_cost,
        keep_recordings: args.save_failures.is_some(),
        keep_timing: !args.no_timing,
        secrets: ready.environment.secrets.clone(),
        scrubber: ready.environment.scrubber.clone(),
        cancel,
        interrupted: AtomicBool::new(false),
        progress: Progress::new(context.interactive),
        done: Mutex::new(Done::default()),
    });
    let started = Instant::now();
    let workers = (args.concurrency as usize).min(state.jobs.len().max(1));
    let threads = std::thread::available_parallelism()
        .map_or(2, std::num::NonZero::get)
        .min(workers);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(async {
            let watcher = tokio::spawn(watch_signals(state.clone(), cancel_sender));
            let handles: Vec<_> = (0..workers)
                .map(|_| tokio::spawn(worker(state.clone())))
                .collect();
            for handle in handles {
                let _ = handle.await;
            }
            watcher.abort();
        }),
        Err(error) => {
            state.done().stopped = Some(format!("cannot start the runtime: {error}"));
        }
    }
    state.progress.clear();
    let interrupted = state.interrupted.load(Ordering::SeqCst);
    let mut done = std::mem::take(&mut *state.done());
    if interrupted {
        done.stopped =
            Some("interrupted (Ctrl-C or SIGTERM): the runs in flight were cancelled".to_string());
    }
    Finished {
        results: done.results,
        failed: done.failed,
        stopped: done.stopped,
        interrupted,
        elapsed: started.elapsed(),
    }
}

/// Every run, repeat by repeat, then line by line, then model set by model set.
fn jobs(lines: usize, repeat: usize, sets: usize) -> Vec<Job> {
    let mut jobs = Vec::with_capacity(lines * repeat * sets);
    for repeat in 1..=repeat {
        for line in 0..lines {
            for set in 0..sets {
                jobs.push(Job { set, line, repeat });
            }
        }
    }
    jobs
}

impl State {
    fn done(&self) -> MutexGuard<'_, Done> {
        self.done
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next run to make, or none: all taken, interrupted, or the cost cap reached
    /// (said once, in the report).
    fn next_job(&self) -> Option<Job> {
        if self.interrupted.load(Ordering::SeqCst) {
            return None;
        }
        if let Some(cap) = self.max_cost {
            let mut done = self.done();
            if done.cost >= cap {
                if done.stopped.is_none() {
                    let left = self
                        .jobs
                        .len()
                        .saturating_sub(self.next.load(Ordering::SeqCst));
                    done.stopped = Some(format!(
                        "the cost cap: ${:.4} spent of --max-cost ${cap:.4}; {left} run{} not started",
                        done.cost,
                        if left == 1 { "" } else { "s" }
                    ));
                }
                return None;
            }
        }
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        self.jobs.get(index).copied()
    }

    fn finish(&self, result: RunResult, cassette: Option<Cassette>) {
        let mut done = self.done();
        done.cost += result.totals.cost;
        if let (false, Some(cassette)) = (result.passed, cassette) {
            done.failed.push(FailedRun {
                result: result.clone(),
                cassette,
            });
        }
        done.results.push(result);
        let (count, passed, cost) = (
            done.results.len(),
            done.results.iter().filter(|run| run.passed).count(),
            done.cost,
        );
        drop(done);
        self.progress.show(count, self.jobs.len(), passed, cost);
    }
}

async fn worker(state: Arc<State>) {
    while let Some(job) = state.next_job() {
        if let Some((result, cassette)) = run_one(&state, job).await {
            state.finish(result, cassette);
        }
    }
}

/// Makes one run and judges it; `None` for a run an interrupt cancelled.
async fn run_one(state: &State, job: Job) -> Option<(RunResult, Option<Cassette>)> {
    let set = &state.sets[job.set];
    let line = &state.lines[job.line];
    let recording = state
        .keep_recordings
        .then(|| Recording::new(state.secrets.clone()));
    let answers = LineAnswers::new(line);
    let (provider, humans): (Arc<dyn Provider>, Box<dyn HumanChannel>) = match &recording {
        Some(recording) => (
            Arc::new(recording.provider(set.providers.clone())),
            Box::new(recording.humans(answers)),
        ),
        None => (Arc::new(set.providers.clone()), Box::new(answers)),
    };
    let mut sink = ScrubbingSink::new(MemorySink::new(), state.scrubber.clone());
    let config = RunConfig {
        cancel: Some(state.cancel.clone()),
        ..RunConfig::default()
    };
    let started = Instant::now();
    let ran = charter_runtime::engine::run::run(
        &set.spec,
        line.input.clone(),
        Effects::new(provider, &*humans, &mut sink),
        &config,
    )
    .await;
    let latency_ms = state
        .keep_timing
        .then(|| u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
    let events = sink.into_inner().into_events();
    let result = match ran {
        Ok(outcome) if outcome.reason == Reason::Cancelled => return None,
        Ok(outcome) => judged(line, job, &set.spec, &outcome, &events),
        Err(error) => RunResult {
            line: line.line,
            repeat: job.repeat,
            set: job.set,
            passed: false,
            ending: "error".to_string(),
            unmet: vec![format!("the run stopped on an error: {error}")],
            gates: Default::default(),
            totals: totals_of(&set.spec, &events),
            latency_ms: None,
        },
    };
    let result = RunResult {
        latency_ms,
        ..result
    };
    let cassette = recording
        .filter(|_| !result.passed && result.ending != "error")
        .map(|recording| recording.cassette(set.recorded.clone()));
    Some((result, cassette))
}

fn judged(
    line: &EvalLine,
    job: Job,
    spec: &CompiledSpec,
    outcome: &RunOutcome,
    events: &[TraceEvent],
) -> RunResult {
    let (mut unmet, gates, totals) = judge(line, spec, outcome, events);
    // A failed run's own word on why it ended (an `ask` nobody answered says which line
    // gave no answer).
    if !unmet.is_empty()
        && let Some(message) = &outcome.message
    {
        unmet.push(format!("the run ended {}: {message}", ending_of(outcome)));
    }
    RunResult {
        line: line.line,
        repeat: job.repeat,
        set: job.set,
        passed: unmet.is_empty(),
        ending: ending_of(outcome),
        unmet,
        gates,
        totals,
        latency_ms: None,
    }
}

fn totals_of(spec: &CompiledSpec, events: &[TraceEvent]) -> RunTotals {
    let mut totals = RunTotals::default();
    for event in events {
        totals.add(spec, event);
    }
    totals
}

/// Waits for Ctrl-C or SIGTERM: the first stops new runs and cancels those in flight.
async fn watch_signals(state: Arc<State>, cancel: tokio::sync::watch::Sender<bool>) {
    let Ok(mut terminate) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        return;
    };
    let interrupted = tokio::select! {
        signal = tokio::signal::ctrl_c() => signal.is_ok(),
        signal = terminate.recv() => signal.is_some(),
    };
    if interrupted {
        state.interrupted.store(true, Ordering::SeqCst);
        let _ = cancel.send(true);
    }
}

/// The answers a line gives to its run's `ask` steps, in order; a question with none
/// left stops the run with an error (no person watches an eval).
struct LineAnswers {
    line: usize,
    answers: Mutex<VecDeque<Value>>,
}

impl LineAnswers {
    fn new(line: &EvalLine) -> Self {
        LineAnswers {
            line: line.line,
            answers: Mutex::new(line.answers.iter().cloned().collect()),
        }
    }
}

impl HumanChannel for LineAnswers {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        let next = self
            .answers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop_front();
        let line = self.line;
        Box::pin(async move {
            next.ok_or_else(|| ProviderError::Unanswered {
                message: format!(
                    "line {line} gives no answer for this question (\"{}\"); list the answers to the run's questions in order, e.g. \"answers\": [{{\"approved\": true}}]",
                    request.question
                ),
            })
        })
    }
}

/// The progress line on a terminal, redrawn as runs end and erased at the end; nothing
/// of it reaches a pipe or a CI log.
struct Progress {
    interactive: bool,
    started: Instant,
}

impl Progress {
    fn new(interactive: bool) -> Self {
        Progress {
            interactive,
            started: Instant::now(),
        }
    }

    fn show(&self, count: usize, total: usize, passed: usize, cost: f64) {
        if !self.interactive {
            return;
        }
        let seconds = self.started.elapsed().as_secs_f64().max(1e-3);
        print_err(&format!(
            "\r\u{1b}[2K[{count}/{total}] {passed} passed · ${cost:.4} · {:.1} runs/s",
            count as f64 / seconds
        ));
    }

    fn clear(&self) {
        if self.interactive {
            print_err("\r\u{1b}[2K");
        }
    }
}
