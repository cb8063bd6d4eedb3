//! `cargo xtask bench`, replay section: one 5-call repair loop (`xtask/bench/repair_loop/`) replayed in-process, again and again; the median time per run.
//!
//! The loop is plan, execute, evaluate FAIL, execute with the evaluator's findings,
//! evaluate PASS: a gate, a repair table, a rerun with feedback. One run is what
//! `charter replay` and the harness do per scenario, minus reading the files: the run on a
//! paused clock against the cassette (prompts rendered, answers validated, the gate and
//! the repair decided, `expect_prompt` checked) and its trace as the normalized JSON
//! Lines text a snapshot is compared with.
//!
//! A template gives back a prompt it rendered lately from the same values, so from the
//! second run on the loop's five prompts are not rendered again (as in a determinism
//! replay, a retry or an explored variant). The first replay of a scenario renders them:
//! its figure (every template's kept renders forgotten before each run) is printed too.

use std::path::Path;
use std::time::{Duration, Instant};

use charter_runtime::formats::scenario::{Cassette, Scenario};
use charter_runtime::harness::{self, CASSETTE_FILE, SCENARIO_FILE};

use crate::measure::{load_average, median};

/// Where the loop's spec, scenario and cassette live, under the repository root.
pub const FIXTURE: &str = "xtask/bench/repair_loop";

/// The target for one run (issue 14, item 4).
pub const TARGET: Duration = Duration::from_micros(30);

/// The loop, read and compiled once.
#[derive(Debug)]
pub struct Loop {
    spec: std::sync::Arc<charter_compiler::CompiledSpec>,
    scenario: Scenario,
    cassette: std::sync::Arc<Cassette>,
    root: std::path::PathBuf,
}

impl Loop {
    /// Reads and compiles the fixture under `repo`.
    pub fn load(repo: &Path) -> anyhow::Result<Loop> {
        let root = repo.join(FIXTURE);
        let scenario = Scenario::read(&root.join(SCENARIO_FILE))?;
        let cassette = std::sync::Arc::new(Cassette::read(&root.join(CASSETTE_FILE))?);
        let spec = harness::compile_spec(&root, &scenario.spec)
            .map_err(|problem| anyhow::anyhow!("{}: {}", problem.location.file, problem.message))?;
        Ok(Loop {
            spec,
            scenario,
            cassette,
            root,
        })
    }

    /// One replay; the model calls it made, or why it failed.
    pub fn replay(&self) -> anyhow::Result<harness::Replayed> {
        harness::replay(
            &self.spec,
            self.scenario.input.clone(),
            std::sync::Arc::clone(&self.cassette),
            &self.root,
        )
        .map_err(|error| anyhow::anyhow!("the repair loop did not replay: {error}"))
    }

    /// The run alone: the cassette replayed into an in-memory trace, with no trace text.
    pub fn run_only(&self) -> anyhow::Result<usize> {
        let mut sink = charter_runtime::formats::trace::MemorySink::new();
        charter_runtime::world::replay::replay_cassette(
            &self.spec,
            self.scenario.input.clone(),
            std::sync::Arc::clone(&self.cassette),
            charter_runtime::engine::run::DeliveryTarget::Memory,
            &mut sink,
        )
        .map_err(|error| anyhow::anyhow!("the repair loop did not replay: {error}"))?;
        Ok(sink.events().len())
    }

    /// Checks one replay against what the benchmark claims to measure: five model calls,
    /// a run that completed at the gate, every recording used.
    pub fn check(&self) -> anyhow::Result<harness::Replayed> {
        let replayed = self.replay()?;
        let calls = replayed
            .events
            .iter()
            .filter(|event| {
                matches!(
                    event.kind,
                    charter_runtime::formats::trace::EventKind::ModelCall { .. }
                )
            })
            .count();
        anyhow::ensure!(
            calls == 5,
            "the repair loop made {calls} model calls, not 5"
        );
        anyhow::ensure!(
            replayed.outcome.termination().to_string() == "completed{gate_passed}",
            "the repair loop ended {}",
            replayed.outcome.termination()
        );
        anyhow::ensure!(
            replayed.unused_calls.is_empty(),
            "the repair loop left recordings unused: {:?}",
            replayed.unused_calls
        );
        Ok(replayed)
    }
}

/// Times `runs` replays after a warm-up; prints the figures with the load average.
/// Returns whether the loop replayed as it should and the median met the target.
pub fn bench(repo: &Path, runs: usize) -> anyhow::Result<bool> {
    let replay_loop = Loop::load(repo)?;
    let first = replay_loop.check()?;
    for _ in 0..runs.clamp(1, 200) {
        std::hint::black_box(replay_loop.replay()?);
    }
    let mut times = Vec::with_capacity(runs.max(1));
    let mut run_times = Vec::with_capacity(runs.max(1));
    let mut first_times = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let replayed = replay_loop.replay()?;
        times.push(started.elapsed());
        std::hint::black_box(replayed);
        let started = Instant::now();
        let events = replay_loop.run_only()?;
        run_times.push(started.elapsed());
        std::hint::black_box(events);
        charter_runtime::engine::prompt::forget_renders();
        let started = Instant::now();
        let replayed = replay_loop.replay()?;
        first_times.push(started.elapsed());
        std::hint::black_box(replayed);
    }
    times.sort();
    run_times.sort();
    first_times.sort();
    let median_time = median(&times);
    let p90 = times.get(times.len() * 9 / 10).copied().unwrap_or_default();
    println!(
        "{:<46} median {}  p90 {}  min {}  ({} runs, {} trace events; target <= {})",
        "repair loop, 5 calls, replayed in-process",
        micros(median_time),
        micros(p90),
        micros(times.first().copied().unwrap_or_default()),
        times.len(),
        first.events.len(),
        micros(TARGET)
    );
    println!(
        "  of which the run alone (no trace text): median {}",
        micros(
            run_times
                .get(run_times.len() / 2)
                .copied()
                .unwrap_or_default()
        )
    );
    println!(
        "  a first replay (every prompt rendered): median {}",
        micros(median(&first_times))
    );
    println!("  load average {}", load_average());
    if median_time > TARGET {
        println!("  ^ repair loop replay over target");
    }
    Ok(median_time <= TARGET)
}

fn micros(duration: Duration) -> String {
    format!("{:.1}µs", duration.as_secs_f64() * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_benchmark_loop_makes_five_calls_and_passes_the_gate() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap_or(Path::new("."));
        let replay_loop = Loop::load(repo).expect("the fixture loads");
        // The rerun's prompt holds the evaluator's note: the cassette's `expect_prompt`
        // fails the replay otherwise.
        replay_loop
            .check()
            .expect("the loop replays as the benchmark claims");
    }
}
