//! A replay's calls are jobs the scheduler times itself (the recording answers at once, and the run moves its paused clock on to the next job due): every golden scenario gives exactly the trace and outcome it gives when each call runs as a tokio task that waits out its latency, as a live provider's does, sub-millisecond latencies included.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use charter_runtime::engine::effects::{Played, Provider, wait_out};
use charter_runtime::engine::provider::{
    BoxFuture, ModelRequest, ModelResponse, ProviderError, ToolRequest, ToolResponse,
};
use charter_runtime::engine::run::{DeliveryTarget, RunConfig, replay_blocking};
use charter_runtime::formats::scenario::{Cassette, Scenario};
use charter_runtime::formats::trace::{MemorySink, to_jsonl};
use charter_runtime::harness::{self, CASSETTE_FILE, SCENARIO_FILE};
use charter_runtime::world::replay::ReplayProvider;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A recording whose every call takes half a millisecond longer than recorded, as a
/// task (`now: false`) or answered at once: a timer rounds the latency up to the whole
/// millisecond, and a run moving its paused clock itself must do the same.
struct Slower {
    replay: Arc<ReplayProvider>,
    now: bool,
}

impl Slower {
    fn play(&self, request: &ModelRequest) -> Option<Played> {
        let half_ms = std::time::Duration::from_micros(500);
        self.replay
            .answer_now(request)
            .map(|(latency, outcome)| (latency + half_ms, outcome))
    }
}

impl Provider for Slower {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        let played = self
            .play(&request)
            .unwrap_or_else(|| panic!("a recording answers at once"));
        Box::pin(wait_out(played))
    }

    fn run_tool(&self, request: ToolRequest) -> BoxFuture<'_, Result<ToolResponse, ProviderError>> {
        self.replay.run_tool(request)
    }

    fn answer_now(&self, request: &ModelRequest) -> Option<Played> {
        if self.now { self.play(request) } else { None }
    }
}

/// How a replay of one scenario went: its trace text, or the error that stopped it, and
/// the recordings it left unused.
fn replay_with(
    root: &Path,
    dir: &Path,
    wrap: &dyn Fn(Arc<ReplayProvider>) -> Arc<dyn Provider>,
) -> (String, usize) {
    let scenario = Scenario::read(&dir.join(SCENARIO_FILE)).unwrap_or_else(|e| panic!("{e}"));
    let cassette = Cassette::read(&dir.join(CASSETTE_FILE)).unwrap_or_else(|e| panic!("{e}"));
    let spec = harness::compile_spec(root, &scenario.spec)
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
    let outcome = replay_blocking(
        &spec,
        scenario.input.clone(),
        charter_runtime::engine::effects::Effects::new(
            wrap(replay.clone()),
            replay.as_ref(),
            &mut sink,
        )
        .with_files(&charter_runtime::world::files::LocalFiles),
        &config,
    );
    let trace = to_jsonl(sink.events()).unwrap_or_else(|e| panic!("{e}"));
    let ended = match outcome {
        Ok(outcome) => format!("{}", outcome.termination()),
        Err(error) => format!("error: {error}"),
    };
    (format!("{trace}{ended}\n"), replay.unused().len())
}

/// Every single-turn golden scenario's directory, in name order.
fn goldens(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let seeds = std::fs::read_dir(root.join("golden")).unwrap_or_else(|e| panic!("{e}"));
    for seed in seeds.flatten().filter(|entry| entry.path().is_dir()) {
        for scenario in std::fs::read_dir(seed.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let dir = scenario.path();
            let single_turn = Scenario::read(&dir.join(SCENARIO_FILE))
                .is_ok_and(|scenario| scenario.turns.is_none());
            if single_turn && dir.join(CASSETTE_FILE).is_file() {
                found.push(dir);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_golden_replays_the_same_whether_its_calls_are_jobs_or_tasks() {
    let root = repository();
    let scenarios = goldens(&root);
    assert!(
        scenarios.len() >= 40,
        "only {} golden scenarios found",
        scenarios.len()
    );
    let mut timed = 0;
    for dir in &scenarios {
        let jobs = replay_with(&root, dir, &|replay| replay);
        let tasks = replay_with(&root, dir, &|replay| Arc::new(support::AsTask(replay)));
        assert_eq!(jobs, tasks, "{}: jobs and tasks differ", dir.display());
        let slower = |now| move |replay| -> Arc<dyn Provider> { Arc::new(Slower { replay, now }) };
        let slower_jobs = replay_with(&root, dir, &slower(true));
        let slower_tasks = replay_with(&root, dir, &slower(false));
        assert_eq!(
            slower_jobs,
            slower_tasks,
            "{}: sub-millisecond latencies differ",
            dir.display()
        );
        if jobs.0.contains("\"kind\":\"timeout\"") || jobs.0.contains("\"retry\":\"provider\"") {
            timed += 1;
        }
    }
    // The comparison covers timeouts and provider retries (backoff timers), not only
    // calls that answer in time.
    assert!(timed >= 3, "only {timed} goldens time out or retry a call");
}
