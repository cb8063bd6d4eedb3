//! The repository's own automation: `cargo xtask verify | layers | editors | fuzz | bench | gen | mutants`.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use xtask::bench::{BenchConfig, Sections, bench_here, bench_in_release};
use xtask::bench_live::LiveConfig;
use xtask::corpus::{load_corpus, workspace_root};
use xtask::fuzz::{self, Corpus, Failure, FailureKind, FuzzConfig, FuzzStats};
use xtask::generator::{GenConfig, generate};
use xtask::measure::format_duration;
use xtask::verify::{Partition, VerifyConfig, verify};

/// The same allocator as the `charter` binary, so the benchmarks measure what it runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The repository's own automation (run from anywhere in the workspace).
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    after_help = "Examples:\n  cargo xtask verify                  the CI gate: fmt, clippy, tests, spec layout, specs\n  cargo xtask verify --skip-cargo --filter seeds\n  cargo xtask verify --partition 1/2 --junit verify.xml\n  cargo xtask layers                  the architecture check alone (verify's `layers` stage)\n  cargo xtask editors                 the VS Code extension and the tree-sitter grammar\n  cargo xtask fuzz --seconds 60       mutate the spec corpus, fail on a panic or hang\n  cargo xtask bench                   optimized-build timings vs the targets\n  cargo xtask gen --lines 500 > big.charter\n  cargo xtask mutants --shard 1/8 --minutes 45"
)]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// The single gate CI runs: fmt, clippy, tests, the specs, the golden scenarios
    ///
    /// Stages, in order, each with a PASS/FAIL line and its time: `cargo fmt --all -- --check`;
    /// `cargo clippy --workspace --all-targets -- -D warnings`; `cargo test --workspace`; the
    /// layers check (as `cargo xtask layers`: no file import circle, the runtime's layers, the
    /// CLI's commands as leaves); the editors stage (as `cargo xtask editors`); every spec under specs/ except specs/invalid/ and specs/warnings/ compiled in-process (any
    /// error or warning fails, the diagnostics are printed); every case in specs/invalid/
    /// must give at least one error (its exact diagnostics are snapshot-tested by
    /// compiler/tests/invalid.rs under `cargo test`); every scenario under golden/ replayed
    /// and compared with its `expect` and trace.snap, then replayed again to check it is
    /// deterministic; each seed's base scenario explored for fault variants that break a
    /// property (as `charter explore` does). A failing stage does not stop the later ones.
    /// Ends with a summary table and the scenario table, and exits 1 if anything failed.
    Verify(VerifyArgs),
    /// The architecture check alone: import circles, the runtime's layers, the CLI's commands
    ///
    /// Reads every source file of runtime, compiler, ide, cli and xtask with a Rust parser
    /// (every `use` form, `crate::`/`super::`/`self::` paths in code, types, patterns, macro
    /// and attribute arguments; tests and `#[cfg(test)]` code left out) and resolves each path to
    /// the file of the module it names. Findings: a circle of imports between files (a
    /// module naming its own descendants is not an import); in the runtime, an import from
    /// a lower layer to a higher one (formats < engine < world < top), a top-level module in
    /// no layer, and I/O named by the engine outside engine/effects.rs; in the CLI, a command
    /// importing another command, a shared module importing a command, and a top-level
    /// module in neither CLI_COMMANDS nor CLI_SHARED (xtask/src/layers.rs). Prints them
    /// grouped by crate and rule, each with its file, line and path, and exits 1 if there is
    /// any. `cargo xtask verify` runs this as its `layers` stage.
    Layers,
    /// The editor support alone: the VS Code extension and the tree-sitter grammar
    ///
    /// Both grammars know every keyword of compiler/src/syntax/grammar.pest, and the two
    /// highlight fixtures hold the same source; in editors/vscode: `npm ci` when
    /// node_modules is missing or older than package-lock.json, `npm test` (the TextMate
    /// grammar fixtures with vscode-tmgrammar-test, the folding tests, and every spec and
    /// template in specs/ tokenized with every region closed), `npm run
    /// package` (target/editors/charter.vsix, checked to hold every file package.json
    /// names and the language client); in editors/tree-sitter-charter: `tree-sitter
    /// generate` into target/ gives exactly the committed src/, `tree-sitter test`, and
    /// every spec in specs/seeds, specs/examples and specs/warnings parses without an error
    /// node. Tool output is shown only when a part fails. Without node/npm or tree-sitter
    /// (the pinned version) a part is skipped with the command that installs it; with CI
    /// set, that is a failure. `cargo xtask verify` runs this as its `editors` stage.
    /// Also: queries/helix/highlights.scm is queries/highlights.scm with Helix's capture
    /// names (--write regenerates it).
    Editors(EditorsArgs),
    /// Never-panics harness: compile mutated specs until time runs out
    ///
    /// Takes every specs/**/*.charter with the prompt and role files it reads, plus a few
    /// generated specs, and applies grammar-aware token mutations (delete, duplicate, swap,
    /// splice from other specs, keywords, punctuation, huge numbers, odd Unicode, unbalanced
    /// quotes and braces, deep nesting, truncation; sometimes to a prompt or role file).
    /// Each input is compiled in-process under catch_unwind on a worker thread; more than
    /// the time limit is a hang. A panic, hang or crash (e.g. stack overflow) writes the input
    /// to target/fuzz-failures/<hash>.charter (with a .txt note) and exits 1. The run is
    /// deterministic from --seed: input k is the same on every machine.
    Fuzz(FuzzArgs),
    /// Benchmarks in an optimized build: live runs, compile times, the golden library
    ///
    /// Builds xtask in the `dist` profile (release with fat LTO, as distributed), then, pinned to one core with `taskset -c 0` when available:
    /// 200 (--live-runs) concurrent live runs of specs/seeds/closed_loop.charter through the
    /// OpenAI provider against a mock server on 127.0.0.1 (throughput, peak memory, every
    /// trace complete; --skip-live to skip them); a generated spec of --lines lines, checked
    /// to compile with no error, and the median, min and max of --runs compilations; the same
    /// for each spec in specs/seeds/ with --seed-runs runs. Targets: under 50 ms per 10,000
    /// lines, under 1 ms per seed spec.
    ///
    /// Then on every core: a generated library of --scenarios closed_loop scenarios
    /// (fan-out widths, repair rounds, timeouts) accepted once, then replayed and compared
    /// --golden-runs times, with and without the determinism replay; and one scenario with
    /// 15-minute timeouts and a 60-minute budget. Targets: under 2 s and 100 MB for 1,000
    /// scenarios, under 5 ms for the long scenario.
    Bench(BenchArgs),
    /// Print the generated benchmark spec (to try it with `charter check`)
    Gen(GenArgs),
    /// Mutation testing of the runtime's policies and mechanics (needs cargo-mutants)
    ///
    /// Runs `cargo mutants` (install it with `cargo install cargo-mutants`; it is not part
    /// of the CI gate) over gate, repair, budget, candidate, dag and run/, testing each
    /// mutant with `cargo test -p charter-runtime` (which includes the goldens). Stops at
    /// --minutes and reports what finished: caught, missed (listed), timeouts, unviable,
    /// and the share of viable mutants caught. The report is in target/mutants/.
    Mutants(MutantsArgs),
}

#[derive(Debug, Args)]
struct EditorsArgs {
    /// Rewrite editors/tree-sitter-charter/queries/helix/highlights.scm from queries/highlights.scm first
    #[arg(long)]
    write: bool,
}

#[derive(Debug, Args)]
struct MutantsArgs {
    /// Only shard K of N of the mutants (e.g. 1/8), a deterministic sample
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    shard: Option<(u32, u32)>,
    /// Stop after this many minutes and report what finished
    #[arg(long, value_name = "N", default_value_t = 60)]
    minutes: u64,
    /// Seconds one mutant's tests may take
    #[arg(long, value_name = "SECS", default_value_t = 180)]
    test_timeout: u64,
}

/// `cargo xtask editors [--write]`: the verify stage alone, after regenerating Helix's
/// query when asked.
fn editors_command(root: &std::path::Path, write: bool) -> anyhow::Result<bool> {
    if write {
        xtask::editors::helix_file(root, true).map_err(anyhow::Error::msg)?;
    }
    let outcome = xtask::editors::check(root, xtask::editors::in_ci());
    println!("{}", outcome.note);
    Ok(outcome.status != xtask::editors::Status::Failed)
}

/// `cargo xtask layers`: the verify stage's architecture check alone, its findings
/// grouped by crate and rule.
fn layers_command(root: &std::path::Path) -> anyhow::Result<bool> {
    let (findings, arrows) = xtask::layers::check_workspace(root).map_err(anyhow::Error::msg)?;
    print!("{}", xtask::layers::grouped(&findings));
    println!(
        "layers: {} finding(s); {arrows} paths from one file to another read",
        findings.len()
    );
    Ok(findings.is_empty())
}

/// `K/N` with 1 <= K <= N.
fn parse_shard(text: &str) -> Result<(u32, u32), String> {
    let (shard, of) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}` is not K/N"))?;
    let shard: u32 = shard
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not K/N"))?;
    let of: u32 = of
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not K/N"))?;
    if shard == 0 || shard > of {
        return Err(format!("`{text}`: K must be between 1 and N"));
    }
    Ok((shard, of))
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// Only specs (e.g. specs/seeds/agency.charter) and scenarios (e.g. closed_loop/happy_path) whose path contains PATTERN
    #[arg(long, value_name = "PATTERN")]
    filter: Option<String>,
    /// Skip fmt, clippy, the tests, the layers check, the specs' layout (charter fmt --check) and the editors stage; only the spec, golden and explore stages (fast iteration)
    #[arg(long)]
    skip_cargo: bool,
    /// Only shard K of N of the specs and scenarios, to spread CI over machines: count:K/N (the default, round-robin; also K/N) or hash:K/N (by name). An empty shard passes
    #[arg(long, value_name = "[count:|hash:]K/N")]
    partition: Option<Partition>,
    /// Accept new and changed snapshots (runs the tests with INSTA_UPDATE=always)
    #[arg(long)]
    accept: bool,
    /// Also write the results as a JUnit XML report
    #[arg(long, value_name = "FILE")]
    junit: Option<std::path::PathBuf>,
    /// Also print GitHub Actions `::error file=...,line=...` annotations
    #[arg(long)]
    github: bool,
}

#[derive(Debug, Args)]
struct FuzzArgs {
    /// How long to run
    #[arg(long, value_name = "N", default_value_t = 30)]
    seconds: u64,
    /// Seed of the mutation sequence (default: from the clock; printed either way)
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Stop after this many inputs even if time is left
    #[arg(long, value_name = "N")]
    inputs: Option<u64>,
    /// Seconds one compilation may take before it counts as a hang
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    hang_limit: f64,
    /// Run the loop in this process (used by the parent process, which watches for crashes)
    #[arg(long, hide = true)]
    child: bool,
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Size of the generated spec in lines
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    lines: usize,
    /// Timed compilations of the generated spec
    #[arg(long, value_name = "N", default_value_t = 30)]
    runs: usize,
    /// Timed compilations of each seed spec
    #[arg(long, value_name = "N", default_value_t = 200)]
    seed_runs: usize,
    /// Generated closed_loop scenarios in the golden-library benchmark
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    scenarios: usize,
    /// Timed passes over the golden library
    #[arg(long, value_name = "N", default_value_t = 3)]
    golden_runs: usize,
    /// Timed in-process replays of the 5-call repair loop (`xtask/bench/repair_loop/`)
    #[arg(long, value_name = "N", default_value_t = 20_001)]
    replay_runs: usize,
    #[command(flatten)]
    live: LiveConfig,
    /// Measure in this process instead of re-running in the `dist` profile's build
    #[arg(long, hide = true)]
    in_release: bool,
    /// The sections this process measures (the optimized process is run once per core
    /// setting)
    #[arg(long, hide = true, value_enum, default_value_t = Sections::All)]
    sections: Sections,
}

#[derive(Debug, Args)]
struct GenArgs {
    /// Size of the spec in lines
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    lines: usize,
    /// Generator seed
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = workspace_root();
    let result = match cli.command {
        Task::Verify(args) => Ok(verify(
            &root,
            &VerifyConfig {
                filter: args.filter,
                skip_cargo: args.skip_cargo,
                partition: args.partition,
                accept: args.accept,
                junit: args.junit,
                github: args.github,
            },
        )),
        Task::Layers => layers_command(&root),
        Task::Editors(args) => editors_command(&root, args.write),
        Task::Fuzz(args) => fuzz_command(&root, &args),
        Task::Bench(args) => {
            let config = BenchConfig {
                lines: args.lines,
                runs: args.runs,
                seed_runs: args.seed_runs,
                golden: xtask::golden::GoldenBenchConfig {
                    scenarios: args.scenarios,
                    runs: args.golden_runs,
                    ..xtask::golden::GoldenBenchConfig::default()
                },
                replay_runs: args.replay_runs,
                live: args.live,
                sections: args.sections,
            };
            if args.in_release || !cfg!(debug_assertions) {
                Ok(bench_here(&root, config))
            } else {
                bench_in_release(&root, config)
            }
        }
        Task::Mutants(args) => xtask::mutants::mutants(
            &root,
            &xtask::mutants::MutantsConfig {
                shard: args.shard,
                time_limit: Duration::from_secs(args.minutes.saturating_mul(60)),
                test_timeout: args.test_timeout,
            },
        )
        .map(|summary| {
            println!("mutants: {}", summary.text());
            true
        }),
        Task::Gen(args) => {
            let mut config = GenConfig {
                lines: args.lines,
                ..GenConfig::default()
            };
            if let Some(seed) = args.seed {
                config.seed = seed;
            }
            print!("{}", generate(config).text);
            Ok(true)
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The parent runs the harness in a child process and follows which input it is on, so
/// even an input that kills the process (a stack overflow aborts; it cannot be caught) is
/// saved: the parent rebuilds it from the seed and its index.
fn fuzz_command(root: &std::path::Path, args: &FuzzArgs) -> anyhow::Result<bool> {
    let seed = args.seed.unwrap_or_else(clock_seed);
    if args.child {
        return Ok(fuzz_child(root, args, seed));
    }
    let mut command = Command::new(std::env::current_exe()?);
    command
        .args(["fuzz", "--child", "--seed", &seed.to_string()])
        .args(["--seconds", &args.seconds.to_string()])
        .args(["--hang-limit", &args.hang_limit.to_string()]);
    if let Some(inputs) = args.inputs {
        command.args(["--inputs", &inputs.to_string()]);
    }
    let mut child = command.stdout(Stdio::piped()).spawn()?;
    let mut current: Option<u64> = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            match line.strip_prefix("input ").map(str::parse::<u64>) {
                Some(Ok(index)) => current = Some(index),
                _ => println!("{line}"),
            }
        }
    }
    let status = child.wait()?;
    if status.success() {
        return Ok(true);
    }
    if status.code() == Some(1) {
        // The child found a panic or hang and reported it.
        return Ok(false);
    }
    println!("the fuzz process died: {status}");
    let Some(index) = current else {
        anyhow::bail!("the fuzz process died before its first input");
    };
    let corpus = Corpus::new(load_corpus(&root.join("specs"), root));
    let failure = Failure {
        kind: FailureKind::Crash(format!("{status} (a stack overflow or an abort)")),
        input: corpus.input(seed, index),
    };
    report_failure(root, &failure, seed, None);
    Ok(false)
}

fn fuzz_child(root: &std::path::Path, args: &FuzzArgs, seed: u64) -> bool {
    let corpus = Corpus::new(load_corpus(&root.join("specs"), root));
    println!(
        "fuzzing {} corpus specs for {}s, seed {seed} (hang limit {}s)",
        corpus.len(),
        args.seconds,
        args.hang_limit
    );
    let config = FuzzConfig {
        seed,
        duration: Some(Duration::from_secs(args.seconds)),
        max_inputs: args.inputs,
        hang_limit: Duration::from_secs_f64(args.hang_limit.max(0.001)),
    };
    let mut stdout = std::io::stdout();
    let result = fuzz::run(&corpus, config, |index| {
        // One line per input, flushed before compiling: the parent's record of where a
        // crash happened.
        let _ = writeln!(stdout, "input {index}");
        let _ = stdout.flush();
    });
    match result {
        Ok(stats) => {
            print_stats(&stats);
            true
        }
        Err((stats, failure)) => {
            report_failure(root, &failure, seed, Some(&stats));
            // A hung compile thread cannot be stopped; leave now, with the right status.
            std::process::exit(1);
        }
    }
}

fn report_failure(root: &std::path::Path, failure: &Failure, seed: u64, stats: Option<&FuzzStats>) {
    let dir = root.join("target").join("fuzz-failures");
    println!(
        "FAIL input {} (from {}, mutations: {}): {}",
        failure.input.index,
        failure.input.origin,
        failure.input.mutant.mutations.join(", "),
        failure.kind
    );
    match fuzz::save_failure(&dir, failure, seed) {
        Ok(path) => println!("saved the input to {}", path.display()),
        Err(error) => println!("could not save the input in {}: {error}", dir.display()),
    }
    if let Some(stats) = stats {
        print_stats(stats);
    }
    println!(
        "reproduce: cargo xtask fuzz --seed {seed} --inputs {}",
        failure.input.index + 1
    );
}

fn print_stats(stats: &FuzzStats) {
    println!(
        "fuzz: {} inputs in {} ({:.0} inputs/s): {} with errors ({} syntax, {} from later checks), {} clean; seed {}",
        stats.inputs,
        format_duration(stats.elapsed),
        stats.per_second(),
        stats.with_errors,
        stats.syntax_errors,
        stats.with_errors - stats.syntax_errors,
        stats.clean,
        stats.seed
    );
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_well_formed() {
        // Clap checks names and options only when a subcommand is built: check them all.
        super::Cli::command().debug_assert();
    }
}
