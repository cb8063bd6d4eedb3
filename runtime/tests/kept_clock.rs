//! A durable engine's clock (DESIGN §16): the scheduler names each backoff by the call it follows and waits the end the clock keeps, waits with nothing in flight through `idle_until`, and counts a run started again from its first start — shown on LeadAgent's `runner_429_retried` (a 429, then a 2 s backoff) played as tasks on a paused clock.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use charter_runtime::engine::effects::{Clock, Effects};
use charter_runtime::engine::provider::BoxFuture;
use charter_runtime::engine::run::{DeliveryTarget, RunConfig, run};
use charter_runtime::formats::scenario::{Cassette, Scenario};
use charter_runtime::formats::trace::MemorySink;
use charter_runtime::harness::{self, CASSETTE_FILE, SCENARIO_FILE};
use charter_runtime::world::replay::ReplayProvider;
use serde_json::Value;
use tokio::time::Instant;

/// The backoff after the runner's rate-limited first call.
const BACKOFF: &str = "after {step: execute, round: 1, attempt: 1}";
const BACKOFF_MS: u64 = 2000;

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/lead_agent/runner_429_retried")
}

/// Tokio's (paused) clock that keeps backoffs' ends as a durable engine's would, and
/// notes what the run asked of it.
#[derive(Debug, Default)]
struct KeepingClock {
    /// Ends kept before (a run started again): by key, ms from the run's start.
    kept_before: HashMap<String, u64>,
    started_ago: Duration,
    start: Mutex<Option<Instant>>,
    asked: Mutex<Vec<(String, u64)>>,
    idle: Mutex<Vec<u64>>,
}

impl KeepingClock {
    fn since_start(&self, instant: Instant) -> u64 {
        let start = self
            .start
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or(instant);
        u64::try_from(instant.saturating_duration_since(start).as_millis()).unwrap_or(u64::MAX)
    }
}

impl Clock for KeepingClock {
    fn now(&self) -> Instant {
        let now = Instant::now();
        self.start
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(now);
        now
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep_until(deadline))
    }

    fn idle_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        let at = self.since_start(deadline);
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(at);
        self.sleep_until(deadline)
    }

    fn keep_deadline(&self, key: &str, deadline: Instant) -> Instant {
        let at = self.since_start(deadline);
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((key.to_string(), at));
        match self.kept_before.get(key) {
            Some(kept) => {
                let start = self
                    .start
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .unwrap_or(deadline);
                start + Duration::from_millis(*kept)
            }
            None => deadline,
        }
    }

    fn started_ago(&self) -> Duration {
        self.started_ago
    }
}

/// The scenario run live-like on `clock`: its outcome and its events.
fn run_on(clock: Arc<KeepingClock>) -> (String, Vec<Value>) {
    let dir = scenario_dir();
    let scenario = Scenario::read(&dir.join(SCENARIO_FILE)).unwrap_or_else(|e| panic!("{e}"));
    let cassette = Cassette::read(&dir.join(CASSETTE_FILE)).unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let spec = harness::compile_spec(&root, &scenario.spec)
        .unwrap_or_else(|problem| panic!("{}", problem.message));
    let config = RunConfig {
        delivery: DeliveryTarget::Memory,
        faults: cassette.faults.clone(),
        cancel: None,
        observer: None,
        session: None,
    };
    let replay = Arc::new(ReplayProvider::new(cassette));
    let mut sink = MemorySink::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let outcome = runtime.block_on(run(
        &spec,
        scenario.input.clone(),
        Effects::new(
            Arc::new(support::AsTask(replay.clone())),
            replay.as_ref(),
            &mut sink,
        )
        .with_clock(clock),
        &config,
    ));
    let ended = match outcome {
        Ok(outcome) => outcome.termination().to_string(),
        Err(error) => format!("error: {error}"),
    };
    let events = sink
        .events()
        .iter()
        .map(|event| serde_json::to_value(event).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    (ended, events)
}

fn t_ms_of(events: &[Value], kind: &str, attempt: u64) -> u64 {
    events
        .iter()
        .find(|event| {
            event["kind"] == kind && event["step"] == "execute" && event["attempt"] == attempt
        })
        .and_then(|event| event["t_ms"].as_u64())
        .unwrap_or_else(|| panic!("no {kind} event of execute's attempt {attempt}: {events:?}"))
}

#[test]
fn a_backoff_is_kept_by_the_call_it_follows_and_waited_with_nothing_in_flight() {
    let clock = Arc::new(KeepingClock::default());
    let (ended, events) = run_on(clock.clone());
    assert_eq!(ended, "completed{gate_passed}");
    let retry_at = t_ms_of(&events, "retry", 1);
    let asked = clock
        .asked
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    assert_eq!(asked, vec![(BACKOFF.to_string(), retry_at + BACKOFF_MS)]);
    let idle = clock.idle.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        idle.contains(&(retry_at + BACKOFF_MS)),
        "the backoff was not waited through idle_until: {idle:?}"
    );
}

#[test]
fn a_run_started_again_waits_only_what_is_left_of_a_kept_backoff() {
    let (_, plain) = run_on(Arc::new(KeepingClock::default()));
    let retry_at = t_ms_of(&plain, "retry", 1);
    // The backoff was kept when the run first waited it; 500 ms of it are left.
    let clock = Arc::new(KeepingClock {
        kept_before: HashMap::from([(BACKOFF.to_string(), retry_at + 500)]),
        ..KeepingClock::default()
    });
    let (ended, kept) = run_on(clock);
    assert_eq!(ended, "completed{gate_passed}");
    let last = |events: &[Value]| events.last().and_then(|event| event["t_ms"].as_u64());
    assert_eq!(
        last(&kept)
            .zip(last(&plain))
            .map(|(kept, plain)| plain - kept),
        Some(BACKOFF_MS - 500),
        "the run did not end {} ms sooner",
        BACKOFF_MS - 500
    );
}

#[test]
fn a_run_started_again_counts_its_wall_budget_from_its_first_start() {
    // LeadAgent's wall budget is 60 minutes; this run first started 59 m 58 s ago.
    let clock = Arc::new(KeepingClock {
        started_ago: Duration::from_secs(60 * 60 - 2),
        ..KeepingClock::default()
    });
    let (ended, events) = run_on(clock);
    assert_eq!(ended, "failed{budget_exhausted{wall}}");
    let first = events.first().and_then(|event| event["t_ms"].as_u64());
    assert_eq!(first, Some((60 * 60 - 2) * 1000), "{:?}", events.first());
}
