//! `cargo xtask mutants`: measures the harness itself with cargo-mutants over the runtime's policies and mechanics (`gate`, `repair`, `budget`, `candidate`, `dag`, `run/`), scoped and time-limited, its report in `target/mutants/`.
//!
//! cargo-mutants is not a dependency: it is installed with `cargo install cargo-mutants`
//! where this runs, and this is not part of the CI gate. The measurement is `cargo test
//! -p charter-runtime` (unit tests, scheduler tests, live tests and the goldens) against
//! each mutant; the figure is caught / (caught + missed + timeouts), unviable mutants (ones
//! that do not build) left out.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The files whose mutants are measured.
pub const SCOPE: [&str; 6] = [
    "runtime/src/engine/gate.rs",
    "runtime/src/engine/repair.rs",
    "runtime/src/engine/budget.rs",
    "runtime/src/engine/candidate.rs",
    "runtime/src/engine/dag.rs",
    "runtime/src/engine/run/*.rs",
];

/// How a measurement is run.
#[derive(Clone, Debug)]
pub struct MutantsConfig {
    /// Only shard K of N of the mutants (a sample, when the whole set takes too long).
    pub shard: Option<(u32, u32)>,
    /// The run is stopped after this long; what finished is reported.
    pub time_limit: Duration,
    /// Seconds one mutant's tests may take before it counts as a timeout.
    pub test_timeout: u64,
}

/// What the report in `target/mutants/mutants.out` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MutantsSummary {
    pub caught: Vec<String>,
    pub missed: Vec<String>,
    pub timeout: Vec<String>,
    pub unviable: Vec<String>,
}

impl MutantsSummary {
    /// Reads the `caught.txt`, `missed.txt`, `timeout.txt` and `unviable.txt` cargo-mutants
    /// appends to as it goes (so a run stopped by the time limit still reports).
    pub fn read(out: &Path) -> Self {
        let lines = |name: &str| -> Vec<String> {
            std::fs::read_to_string(out.join(name))
                .unwrap_or_default()
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(str::to_string)
                .collect()
        };
        MutantsSummary {
            caught: lines("caught.txt"),
            missed: lines("missed.txt"),
            timeout: lines("timeout.txt"),
            unviable: lines("unviable.txt"),
        }
    }

    /// Viable mutants measured: caught, missed and timed out (a timeout is caught: the
    /// tests did not pass).
    pub fn viable(&self) -> usize {
        self.caught.len() + self.missed.len() + self.timeout.len()
    }

    /// The share of viable mutants the tests caught, in percent.
    pub fn caught_percent(&self) -> Option<f64> {
        let viable = self.viable();
        (viable > 0)
            .then(|| (self.caught.len() + self.timeout.len()) as f64 * 100.0 / viable as f64)
    }

    pub fn text(&self) -> String {
        let mut text = format!(
            "{} caught, {} missed, {} timeouts, {} unviable",
            self.caught.len(),
            self.missed.len(),
            self.timeout.len(),
            self.unviable.len()
        );
        if let Some(percent) = self.caught_percent() {
            text.push_str(&format!(
                ": {percent:.1}% of {} viable mutants caught",
                self.viable()
            ));
        }
        for missed in &self.missed {
            text.push_str(&format!("\n  missed: {missed}"));
        }
        text
    }
}

/// The report directory: `target/mutants` (cargo-mutants writes `mutants.out` in it).
pub fn output_dir(root: &Path) -> PathBuf {
    root.join("target").join("mutants")
}

/// Runs cargo-mutants over [`SCOPE`] and returns the summary of what finished.
pub fn mutants(root: &Path, config: &MutantsConfig) -> anyhow::Result<MutantsSummary> {
    let installed = Command::new("cargo")
        .args(["mutants", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !installed {
        anyhow::bail!("cargo-mutants is not installed: `cargo install cargo-mutants`");
    }
    let output = output_dir(root);
    std::fs::create_dir_all(&output)?;
    let mut command = Command::new("cargo");
    command
        .current_dir(root)
        .args(["mutants", "--package", "charter-runtime", "--no-shuffle"])
        .arg("--output")
        .arg(&output)
        .args(["--timeout", &config.test_timeout.to_string(), "--jobs", "1"])
        // Less debug information: each mutant links every test binary again.
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .env("CARGO_PROFILE_TEST_DEBUG", "0");
    for file in SCOPE {
        command.args(["--file", file]);
    }
    if let Some((shard, of)) = config.shard {
        command.args(["--shard", &format!("{}/{of}", shard.saturating_sub(1))]);
    }
    let mut child = command.spawn()?;
    let started = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if started.elapsed() >= config.time_limit {
            eprintln!(
                "mutants: the time limit ({} s) is reached; reporting what finished",
                config.time_limit.as_secs()
            );
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(MutantsSummary::read(&output.join("mutants.out")))
}
