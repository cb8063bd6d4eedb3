//! The golden harness inside `cargo xtask`: the benchmark over a generated library of 1,000 `closed_loop` scenarios, and the one-scenario long-timeout replay.
//!
//! Everything runs through `charter_runtime::harness` (the same comparison `cargo test`
//! and `charter verify` use); this module only generates scenarios and times them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use charter_runtime::formats::scenario::{Cassette, Recorded, Scenario};
use charter_runtime::harness::{self, HarnessConfig};

use crate::measure::{load_average, median, peak_memory_mb, reset_peak_memory, show};

/// What the golden benchmark measures.
#[derive(Clone, Copy, Debug)]
pub struct GoldenBenchConfig {
    /// Scenarios in the generated library.
    pub scenarios: usize,
    /// Timed passes over the whole library.
    pub runs: usize,
    /// Timed replays of the long-timeout scenario.
    pub single_runs: usize,
}

impl Default for GoldenBenchConfig {
    fn default() -> Self {
        GoldenBenchConfig {
            scenarios: 1_000,
            runs: 3,
            single_runs: 101,
        }
    }
}

/// Targets (issue 4, item 5; the library's tightened by issue 14, item 4), for the `dist`
/// build (`cargo xtask bench` builds it) on a 2-core machine.
const TARGET_LIBRARY: Duration = Duration::from_secs(1);
const TARGET_PEAK_MB: f64 = 100.0;
const TARGET_LONG_SCENARIO: Duration = Duration::from_millis(5);

/// The spec variant with 15-minute executor timeouts and a 60-minute wall budget.
const LONG_SPEC: &str = "specs/seeds/closed_loop_long.charter";
const SEED_SPEC: &str = "specs/seeds/closed_loop.charter";

/// Generates the library under a fresh temporary directory, accepts its snapshots once
/// (untimed), then times `runs` full harness passes (replay, expect, unused calls,
/// snapshot comparison and the determinism replay) and the long-timeout scenario.
/// Prints the figures; returns whether every scenario passed and every target was met.
/// One piece: the benchmark's steps in the order they run and are timed.
pub fn bench(repo: &Path, config: GoldenBenchConfig) -> anyhow::Result<bool> {
    // Reset the peak (Linux: writing 5 to clear_refs resets VmHWM), so the figure below is
    // this benchmark's, not that of the benchmarks before it in the same process.
    let _ = reset_peak_memory();
    let root = std::env::temp_dir().join(format!("charter-golden-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    generate_library(repo, &root, config.scenarios)?;
    let accept = HarnessConfig {
        accept: true,
        ..HarnessConfig::default()
    };
    let accepted = harness::verify_project(&root, &accept)?;
    let unfinished: Vec<_> = accepted
        .iter()
        .filter(|report| !report.status.passed())
        .collect();
    if let Some(first) = unfinished.first() {
        let details = harness::report::details(&[(*first).clone()]);
        anyhow::bail!(
            "{} generated scenarios do not replay cleanly; the first:\n{details}",
            unfinished.len()
        );
    }

    // The target figure: replay and compare (snapshot, expect, unused calls) once per
    // scenario. Then the whole harness as `verify` runs it, with the determinism replay.
    let mut all_passed = true;
    let mut figures = Vec::new();
    for (label, determinism) in [
        ("replay + compare", false),
        ("with the determinism replay", true),
    ] {
        let harness_config = HarnessConfig {
            determinism,
            ..HarnessConfig::default()
        };
        let mut times = Vec::new();
        for _ in 0..config.runs.max(1) {
            let started = Instant::now();
            let reports = harness::verify_project(&root, &harness_config)?;
            times.push(started.elapsed());
            all_passed &= reports.len() == config.scenarios + 1
                && reports.iter().all(|report| report.status.passed());
        }
        times.sort();
        figures.push((label, median(&times)));
        println!(
            "golden library, {label}: {} closed_loop scenarios, {} runs: median {}  min {}  max {}{}",
            config.scenarios + 1,
            times.len(),
            show(median(&times)),
            show(times.first().copied().unwrap_or_default()),
            show(times.last().copied().unwrap_or_default()),
            if determinism {
                String::new()
            } else {
                format!("  (target < {})", show(TARGET_LIBRARY))
            }
        );
    }
    let events: usize = accepted.iter().map(|report| report.events).sum();
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    println!(
        "  {events} trace events in all; {threads} worker thread(s); load average {}",
        load_average()
    );
    let median = figures.first().map(|(_, time)| *time).unwrap_or_default();

    let long = time_long_scenario(&root, config.single_runs)?;
    println!(
        "long scenario (15m timeouts, 60m wall budget, 20m recorded latency), {} runs: median {}  (target < {})",
        config.single_runs,
        show(long),
        show(TARGET_LONG_SCENARIO)
    );
    let peak = peak_memory_mb();
    match peak {
        Some(peak) => {
            println!("peak memory (VmHWM): {peak:.1} MB  (target < {TARGET_PEAK_MB:.0} MB)")
        }
        None => println!("peak memory: /proc/self/status has no VmHWM on this system"),
    }
    let _ = std::fs::remove_dir_all(&root);

    let mut met = all_passed;
    if !all_passed {
        println!("  ^ some scenarios did not pass on a timed run");
    }
    if median > TARGET_LIBRARY {
        println!("  ^ library over target");
        met = false;
    }
    if long > TARGET_LONG_SCENARIO {
        println!("  ^ long scenario over target");
        met = false;
    }
    if peak.is_some_and(|peak| peak > TARGET_PEAK_MB) {
        println!("  ^ peak memory over target");
        met = false;
    }
    Ok(met)
}

/// The median time of one replay of the long-timeout scenario (its first replay warms up).
fn time_long_scenario(root: &Path, runs: usize) -> anyhow::Result<Duration> {
    let dir = root.join("golden/closed_loop_long/timeout_15m");
    let scenario = Scenario::read(&dir.join(harness::SCENARIO_FILE))?;
    let cassette = std::sync::Arc::new(Cassette::read(&dir.join(harness::CASSETTE_FILE))?);
    let spec = harness::compile_spec(root, &scenario.spec)
        .map_err(|problem| anyhow::anyhow!("{}: {}", problem.location.file, problem.message))?;
    let mut times = Vec::new();
    for run in 0..=runs.max(1) {
        let started = Instant::now();
        let replayed = harness::replay(
            &spec,
            scenario.input.clone(),
            std::sync::Arc::clone(&cassette),
            root,
        )
        .map_err(|error| anyhow::anyhow!("the long scenario failed: {error}"))?;
        let time = started.elapsed();
        if run == 0 {
            println!(
                "  long scenario: {} in {} of virtual time",
                replayed.outcome.termination(),
                replayed
                    .events
                    .last()
                    .map_or_else(String::new, |event| show(Duration::from_millis(event.t_ms)))
            );
        } else {
            times.push(time);
        }
    }
    times.sort();
    Ok(median(&times))
}

/// Writes a project under `root`: the closed_loop seed spec with its prompts, its
/// long-timeout variant, and `count` scenarios varying fan-out width (1 to 8 work orders,
/// some depending on T-001), repair rounds (1 to 3) and timeouts (every fifth scenario's
/// T-001 times out once), plus `golden/closed_loop_long/timeout_15m`.
pub fn generate_library(repo: &Path, root: &Path, count: usize) -> anyhow::Result<()> {
    let seeds = repo.join("specs/seeds");
    copy_dir(
        &seeds.join("closed_loop"),
        &root.join("specs/seeds/closed_loop"),
    )?;
    let text = std::fs::read_to_string(seeds.join("closed_loop.charter"))
        .context("reading the closed_loop seed")?;
    write(&root.join(SEED_SPEC), &text)?;
    let long = text
        .replace("timeout: 4m", "timeout: 15m")
        .replace("cost 4.00  steps 24", "cost 4.00  wall 60m  steps 24");
    anyhow::ensure!(
        long.contains("timeout: 15m") && long.contains("wall 60m"),
        "the closed_loop seed changed: cannot derive its long-timeout variant"
    );
    write(&root.join(LONG_SPEC), &long)?;

    let recorded = |spec: &str| -> anyhow::Result<String> {
        let compiled = harness::compile_spec(root, spec)
            .map_err(|problem| anyhow::anyhow!("{}", problem.message))?;
        Ok(Recorded::from_spec(&compiled).spec_hash)
    };
    let seed_hash = recorded(SEED_SPEC)?;
    let long_hash = recorded(LONG_SPEC)?;

    for index in 0..count {
        let width = 1 + index % 8;
        let rounds = 1 + (index / 8) % 3;
        let timeout = index % 5 == 0;
        let dir = root.join(format!("golden/closed_loop/generated_{index:04}"));
        write(
            &dir.join(harness::SCENARIO_FILE),
            &format!(
                "spec: {SEED_SPEC}\ndescription: generated - {width} work orders, {rounds} round(s){}\n\
                 input: {{ goal: \"brief number {index}\" }}\nexpect: {{ outcome: completed, reason: gate_passed }}\n",
                if timeout {
                    ", T-001 times out once"
                } else {
                    ""
                }
            ),
        )?;
        write(
            &dir.join(harness::CASSETTE_FILE),
            &cassette(&seed_hash, index, width, rounds, timeout, "20m"),
        )?;
    }
    let dir = root.join("golden/closed_loop_long/timeout_15m");
    write(
        &dir.join(harness::SCENARIO_FILE),
        &format!(
            "spec: {LONG_SPEC}\ndescription: 15-minute timeouts against a 20-minute recorded latency, inside a 60-minute wall budget\n\
             input: {{ goal: \"a long brief\" }}\nexpect: {{ outcome: completed, reason: gate_passed }}\n"
        ),
    )?;
    write(
        &dir.join(harness::CASSETTE_FILE),
        &cassette(&long_hash, 0, 3, 1, true, "20m"),
    )?;
    Ok(())
}

/// A hand-shaped cassette: the plan, `rounds` rounds of `width` work orders (the last
/// passing the gate), T-001 timing out once in round 1 when `timeout`.
fn cassette(
    spec_hash: &str,
    index: usize,
    width: usize,
    rounds: usize,
    timeout: bool,
    latency: &str,
) -> String {
    let mut out = format!("version: 1\nrecorded: {{ spec_hash: \"{spec_hash}\" }}\ncalls:\n");
    let _ = writeln!(
        out,
        "  - step: plan\n    latency: 3s\n    usage: {{ input_tokens: 900, output_tokens: 300 }}\n    response:\n      \
         goal: \"brief number {index}\"\n      success_criteria: [\"one page\"]\n      tasks:"
    );
    for task in 1..=width {
        let depends = if task > 1 && task % 2 == 0 {
            ", depends_on: [T-001]"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "        - {{ id: T-{task:03}, goal: \"part {task}\", expected_output: \"text\", acceptance: [\"done\"]{depends} }}"
        );
    }
    for round in 1..=rounds {
        for task in 1..=width {
            let mut attempt = 1;
            if timeout && round == 1 && task == 1 {
                let _ = writeln!(
                    out,
                    "  - {{ step: execute, item: T-001, latency: {latency} }}"
                );
                attempt = 2;
            }
            let _ = writeln!(
                out,
                "  - {{ step: execute, round: {round}, item: T-{task:03}, attempt: {attempt}, latency: 40s, \
                 usage: {{ input_tokens: 1200, output_tokens: 400 }}, \
                 response: {{ task_id: T-{task:03}, status: ok, output: \"part {task} of brief {index}, round {round}\", evidence: [\"https://example.org/{task}\"] }} }}"
            );
        }
        let relevance = if round < rounds { 4 } else { 9 };
        let _ = writeln!(
            out,
            "  - {{ step: evaluate, round: {round}, latency: 20s, usage: {{ input_tokens: 2000, output_tokens: 200 }}, \
             response: {{ relevance: {relevance}, completeness: 9, clarity: 8, usability: 8, on_plan: true }} }}"
        );
    }
    let _ = writeln!(
        out,
        "  - {{ step: deliver, round: {rounds}, latency: 5s, usage: {{ input_tokens: 800, output_tokens: 100 }}, \
         response: {{ candidate_id: c{rounds}, summary: \"brief {index}\" }} }}"
    );
    out
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let path: PathBuf = entry?.path();
        let Some(name) = path.file_name() else {
            continue;
        };
        if path.is_dir() {
            copy_dir(&path, &to.join(name))?;
        } else {
            std::fs::copy(&path, to.join(name))
                .with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_generated_library_replays_to_its_expectations() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let root = std::env::temp_dir().join(format!(
            "charter-golden-library-test-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        let generated = generate_library(&repo, &root, 24);
        assert!(generated.is_ok(), "{generated:?}");
        let config = HarnessConfig {
            accept: true,
            ..HarnessConfig::default()
        };
        let reports = harness::verify_project(&root, &config).unwrap_or_default();
        assert_eq!(reports.len(), 25);
        let failed: Vec<_> = reports
            .iter()
            .filter(|report| !report.status.passed())
            .cloned()
            .collect();
        assert!(failed.is_empty(), "{}", harness::report::details(&failed));
        let again = harness::verify_project(&root, &HarnessConfig::default()).unwrap_or_default();
        assert!(
            again
                .iter()
                .all(|report| report.status == harness::Status::Pass)
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
