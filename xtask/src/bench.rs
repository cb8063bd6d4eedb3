//! `cargo xtask bench`: how fast the compiler, live runs and the golden harness are, measured in the fastest build (the `dist` profile: release with fat LTO).
//!
//! The debug `cargo xtask` process builds the binary in the `dist` profile (the one
//! distributed binaries use; `cargo install` uses `release`, which builds faster and runs
//! slightly slower) and re-runs it twice with `--in-release`. First under `taskset -c 0` (when available), for the figures that are
//! per core: the live runs, then a large generated spec and every seed spec compiled
//! (the compiler is single-threaded). Then unpinned, for the golden library, whose target
//! is for the whole 2-core machine (scenarios replay on every core), and `charter explore`
//! on closed_loop's happy path (variants per second, on every core).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use charter_compiler::{Loader, NoFiles, render};

use crate::corpus::{FsLoader, display_path, find_specs};
use crate::generator::{GenConfig, generate};
use crate::measure::{median, show};
use crate::verify::cargo;

/// What to measure.
#[derive(Clone, Copy, Debug)]
pub struct BenchConfig {
    /// Size of the generated spec.
    pub lines: usize,
    /// Timed compilations of the generated spec.
    pub runs: usize,
    /// Timed compilations of each seed spec.
    pub seed_runs: usize,
    /// The golden-library benchmark (scenarios, timed passes).
    pub golden: crate::golden::GoldenBenchConfig,
    /// Timed in-process replays of the 5-call repair loop.
    pub replay_runs: usize,
    /// Concurrent live runs against a loopback mock (`bench_live.rs`).
    pub live: crate::bench_live::LiveConfig,
    /// Which sections this process measures.
    pub sections: Sections,
}

/// The sections of the benchmark a process runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Sections {
    /// Every section.
    #[default]
    All,
    /// The per-core figures: live runs and compile times (run pinned to one core).
    PerCore,
    /// The golden library (run on every core).
    Golden,
    /// Only the repair-loop replay (to measure a change to the runtime quickly).
    Replay,
    /// Only `charter eval`'s throughput (the `charter` binary beside this one).
    Eval,
    /// Only the tool sandbox's cost per call (the `charter` binary beside this one).
    Sandbox,
}

/// The compile-time budget for the generated spec, per 10,000 lines (DESIGN issue 2, item 10).
const TARGET_PER_10K_LINES: Duration = Duration::from_millis(50);
/// The compile-time budget for one seed spec.
const TARGET_SEED: Duration = Duration::from_millis(1);
/// The budget for `charter lsp`'s analysis of one seed spec (compile and index), which
/// runs on every edit: under it, re-checking the whole spec needs no incremental cache.
const TARGET_EDITOR: Duration = Duration::from_millis(5);

/// The profile the benchmark builds and measures in: release with fat LTO and one codegen
/// unit (`Cargo.toml`), whose figures the targets are set for.
const BENCH_PROFILE: &str = "dist";

/// Builds the binary in [`BENCH_PROFILE`] and runs the measurement in it, pinned to one
/// core. Returns whether the run succeeded.
pub fn bench_in_release(root: &Path, config: BenchConfig) -> anyhow::Result<bool> {
    println!(
        "building xtask and charter in the {BENCH_PROFILE} profile (cargo build --profile {BENCH_PROFILE} -p xtask -p charter)..."
    );
    let status = Command::new(cargo())
        .args([
            "build",
            "--profile",
            BENCH_PROFILE,
            "--quiet",
            "-p",
            "xtask",
            "-p",
            "charter",
        ])
        .current_dir(root)
        .status()?;
    if !status.success() {
        anyhow::bail!("cargo build --profile {BENCH_PROFILE} -p xtask -p charter failed: {status}");
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map_or_else(|| root.join("target"), |dir| root.join(dir));
    let binary = target_dir
        .join(BENCH_PROFILE)
        .join(format!("xtask{}", std::env::consts::EXE_SUFFIX));
    let arguments = |sections: &str| {
        [
            "bench".to_string(),
            "--sections".to_string(),
            sections.to_string(),
            "--in-release".to_string(),
            "--lines".to_string(),
            config.lines.to_string(),
            "--runs".to_string(),
            config.runs.to_string(),
            "--seed-runs".to_string(),
            config.seed_runs.to_string(),
            "--scenarios".to_string(),
            config.golden.scenarios.to_string(),
            "--golden-runs".to_string(),
            config.golden.runs.to_string(),
            "--replay-runs".to_string(),
            config.replay_runs.to_string(),
        ]
    };
    let pinned = Command::new("taskset").arg("--version").output().is_ok();
    let mut per_core = if pinned {
        println!("pinned to one core: taskset -c 0 {}", binary.display());
        let mut command = Command::new("taskset");
        command.args(["-c", "0"]).arg(&binary);
        command
    } else {
        println!("taskset not found: not pinned (the compiler is single-threaded anyway)");
        Command::new(&binary)
    };
    let per_core = per_core
        .args(arguments("per-core"))
        .args(config.live.arguments())
        .current_dir(root)
        .status()?;
    println!("on every core: {}", binary.display());
    let golden = Command::new(&binary)
        .args(arguments("golden"))
        .current_dir(root)
        .status()?;
    Ok(per_core.success() && golden.success())
}

/// Measures in this process (which should be a release build). Returns whether the
/// generated spec compiled with no error.
pub fn bench_here(root: &Path, config: BenchConfig) -> bool {
    if cfg!(debug_assertions) {
        println!("warning: this is a debug build; figures are not comparable to the targets");
    }
    if config.sections == Sections::Golden {
        return golden_section(root, config);
    }
    if config.sections == Sections::Eval {
        return eval_section(root);
    }
    if config.sections == Sections::Sandbox {
        return sandbox_section(root);
    }
    if config.sections == Sections::Replay {
        return match crate::bench_replay::bench(root, config.replay_runs) {
            Ok(_) => true,
            Err(error) => {
                println!("repair loop replay: {error:#}");
                false
            }
        };
    }
    if !crate::bench_live::bench_live(root, config.live) {
        return false;
    }
    match crate::bench_replay::bench(root, config.replay_runs) {
        Ok(_) => {}
        Err(error) => {
            println!("repair loop replay: {error:#}");
            return false;
        }
    }
    let generated = generate(GenConfig {
        lines: config.lines,
        ..GenConfig::default()
    });
    let check = charter_compiler::compile("generated.charter", &generated.text, &NoFiles);
    let errors = check.diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = check.diagnostics.len() - errors;
    println!(
        "generated spec: {} lines, {} contracts, {} roles, {} tools, {} steps: {errors} error(s), {warnings} warning(s)",
        generated.lines, generated.contracts, generated.roles, generated.tools, generated.steps
    );
    if errors > 0 {
        let shown: Vec<_> = check.diagnostics.iter().take(20).cloned().collect();
        print!("{}", render::text(&shown, &check.sources, false));
        println!(
            "the generated spec must compile with no error; not timing it (see xtask/src/gen.rs)"
        );
        return false;
    }
    // The target scales with size, but ±10% around 10,000 lines counts as 10,000.
    let scale = generated.lines as f64 / 10_000.0;
    let scale = if (0.9..=1.1).contains(&scale) {
        1.0
    } else {
        scale
    };
    let target = TARGET_PER_10K_LINES.mul_f64(scale);
    let times = time_compilations("generated.charter", &generated.text, &NoFiles, config.runs);
    println!(
        "{:<46} {}  (target < {})",
        format!(
            "generated ({} lines, {} runs)",
            generated.lines, config.runs
        ),
        summary(&times),
        show(target)
    );
    report_target(&times, target);
    print_phases(&generated.text, config.runs);

    seed_section(root, config);
    config.sections == Sections::PerCore || golden_section(root, config)
}

/// Each seed spec: its compilation against [`TARGET_SEED`], and its analysis as
/// `charter lsp` runs it on every edit against [`TARGET_EDITOR`].
fn seed_section(root: &Path, config: BenchConfig) {
    let seeds_dir = root.join("specs").join("seeds");
    let seeds = find_specs(&seeds_dir);
    if seeds.is_empty() {
        println!("no seed specs in {}", display_path(&seeds_dir, root));
    }
    for path in seeds {
        let shown = display_path(&path, root);
        let Ok(text) = std::fs::read_to_string(&path) else {
            println!("{shown}: cannot read");
            continue;
        };
        // The first compilation fills the loader's cache, so the timed runs do no I/O.
        let loader = FsLoader::for_spec(&path, &shown);
        let first = charter_compiler::compile(&shown, &text, &loader);
        let note = if first.has_errors() {
            " (has errors)"
        } else {
            ""
        };
        let times = time_compilations(&shown, &text, &loader, config.seed_runs);
        println!(
            "{:<46} {}  (target < {}){note}",
            format!("{shown} ({} runs)", config.seed_runs),
            summary(&times),
            show(TARGET_SEED)
        );
        report_target(&times, TARGET_SEED);
        let times = time_analyses(&shown, &text, &loader, config.seed_runs);
        println!(
            "{:<46} {}  (target < {})",
            format!("  as `charter lsp` analyses it ({} runs)", config.seed_runs),
            summary(&times),
            show(TARGET_EDITOR)
        );
        report_target(&times, TARGET_EDITOR);
    }
}

/// The golden harness: a generated library of 1,000 closed_loop scenarios; then
/// `charter explore` on closed_loop's happy path (both on every core).
fn golden_section(root: &Path, config: BenchConfig) -> bool {
    let golden = match crate::golden::bench(root, config.golden) {
        Ok(_) => true,
        Err(error) => {
            println!("golden library: {error:#}");
            false
        }
    };
    let explore = match crate::explore::bench(root, 20) {
        Ok(()) => true,
        Err(error) => {
            println!("explore: {error}");
            false
        }
    };
    let eval = match crate::bench_eval::charter_beside_xtask() {
        Some(charter) => crate::bench_eval::bench_eval(root, &charter),
        None => {
            println!(
                "eval: skipped (no `charter` binary beside this xtask binary; `cargo xtask bench` builds both)"
            );
            true
        }
    };
    golden && explore && eval && sandbox_section(root)
}

/// The tool sandbox's cost per call, with the `charter` binary built beside this one.
fn sandbox_section(root: &Path) -> bool {
    let Some(charter) = crate::bench_eval::charter_beside_xtask() else {
        println!(
            "sandbox: skipped (no `charter` binary beside this xtask binary; `cargo xtask bench` builds both)"
        );
        return true;
    };
    match crate::bench_sandbox::bench(root, &charter) {
        Ok(()) => true,
        Err(error) => {
            println!("sandbox: {error}");
            false
        }
    }
}

/// `charter eval`'s throughput, with the `charter` binary built beside this one.
fn eval_section(root: &Path) -> bool {
    match crate::bench_eval::charter_beside_xtask() {
        Some(charter) => crate::bench_eval::bench_eval(root, &charter),
        None => {
            println!(
                "eval: skipped (no `charter` binary beside this xtask binary; `cargo xtask bench` builds both)"
            );
            true
        }
    }
}

/// Where the time goes: the median of each pipeline stage, run as `compile` runs them.
fn print_phases(text: &str, runs: usize) {
    let mut phases: [Vec<Duration>; 4] = Default::default();
    for _ in 0..runs.max(1) {
        let mut sources = charter_compiler::Sources::new();
        let file = sources.add("generated.charter", text);
        let started = Instant::now();
        let (ast, _) = charter_compiler::syntax::parse(file, &mut sources, &NoFiles);
        let parsed = Instant::now();
        let Some(ast) = ast else {
            return;
        };
        let (checked, _) = charter_compiler::check::check(&ast, &sources);
        let checked_at = Instant::now();
        let Ok(spec) = charter_compiler::graph::build(&ast, &checked, &sources) else {
            return;
        };
        let built = Instant::now();
        drop(black_box(charter_compiler::bounds::diagnostics(&spec)));
        let bounded = Instant::now();
        for (phase, time) in phases.iter_mut().zip([
            parsed - started,
            checked_at - parsed,
            built - checked_at,
            bounded - built,
        ]) {
            phase.push(time);
        }
    }
    let medians: Vec<String> = ["parse", "check", "graph", "bounds"]
        .iter()
        .zip(phases.iter_mut())
        .map(|(name, times)| {
            times.sort();
            format!("{name} {}", show(median(times)))
        })
        .collect();
    println!("  medians by stage: {}", medians.join(", "));
}

fn time_compilations(name: &str, text: &str, loader: &dyn Loader, runs: usize) -> Vec<Duration> {
    for _ in 0..3.min(runs) {
        drop(black_box(charter_compiler::compile(name, text, loader)));
    }
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let started = Instant::now();
            let compilation = black_box(charter_compiler::compile(
                black_box(name),
                black_box(text),
                loader,
            ));
            let time = started.elapsed();
            drop(compilation);
            time
        })
        .collect();
    times.sort();
    times
}

/// Times the language server's analysis of a spec: the compilation and the index of its
/// names that hover, definition, rename and highlighting read.
fn time_analyses(name: &str, text: &str, loader: &dyn Loader, runs: usize) -> Vec<Duration> {
    let documents = charter_ide::Documents::new();
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let started = Instant::now();
            let analysis = black_box(charter_ide::Analysis::new(
                black_box(name),
                black_box(text),
                &documents,
                loader,
            ));
            let time = started.elapsed();
            drop(analysis);
            time
        })
        .collect();
    times.sort();
    times
}

fn summary(sorted: &[Duration]) -> String {
    format!(
        "median {:>9}  min {:>9}  max {:>9}",
        show(median(sorted)),
        show(sorted.first().copied().unwrap_or_default()),
        show(sorted.last().copied().unwrap_or_default())
    )
}

fn report_target(sorted: &[Duration], target: Duration) {
    if median(sorted) > target {
        println!("  ^ over target");
    }
}
