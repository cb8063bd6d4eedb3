//! The never-panics harness: grammar-aware mutations of the spec corpus, each compiled
//! in-process under `catch_unwind` on a worker thread with a time limit.
//!
//! Input `k` of a run depends only on the seed, `k` and the corpus, so any input can be
//! rebuilt on its own (the parent process of `cargo xtask fuzz` relies on this to save the
//! input that crashed a child outright, e.g. with a stack overflow).

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use charter_compiler::MemoryLoader;

use crate::corpus::CorpusSpec;
use crate::generator::{GenConfig, generate};
use crate::mutate::{Donors, Mutant, mutate};
use crate::rng::{Rng, fnv1a};

/// The stack the compile worker gets: the same as a program's main thread on Linux, so a
/// nesting depth that overflows here would overflow `charter check` too.
const WORKER_STACK: usize = 8 * 1024 * 1024;

/// The inputs the harness mutates: the specs on disk (with the files they read) and a few
/// generated specs, plus their tokens for splicing.
#[derive(Debug)]
pub struct Corpus {
    specs: Vec<CorpusSpec>,
    donors: Donors,
}

impl Corpus {
    /// `specs` from disk plus three generated specs of different shapes (so the harness has
    /// material even when `specs/` is empty).
    pub fn new(mut specs: Vec<CorpusSpec>) -> Corpus {
        for (lines, seed) in [(60, 11), (150, 12), (400, 13)] {
            specs.push(CorpusSpec {
                name: format!("generated-{lines}.charter"),
                text: generate(GenConfig { lines, seed }).text,
                loader: MemoryLoader::default(),
            });
        }
        let donors = Donors::new(
            specs.iter().map(|spec| spec.text.as_str()).chain(
                specs
                    .iter()
                    .flat_map(|spec| spec.loader.files.values().map(String::as_str)),
            ),
        );
        Corpus { specs, donors }
    }

    pub fn len(&self) -> usize {
        self.specs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Builds input `index` of the run seeded with `seed`.
    pub fn input(&self, seed: u64, index: u64) -> FuzzInput {
        let mut rng = Rng::for_item(seed, index);
        let fallback = CorpusSpec {
            name: "empty.charter".to_string(),
            text: String::new(),
            loader: MemoryLoader::default(),
        };
        let origin = self
            .specs
            .get(rng.below(self.specs.len()))
            .unwrap_or(&fallback);
        let mutant = mutate(&mut rng, &origin.text, &origin.loader.files, &self.donors);
        FuzzInput {
            index,
            origin: origin.name.clone(),
            original_files: origin.loader.files.clone(),
            mutant,
        }
    }
}

/// One input of a run.
#[derive(Clone, Debug)]
pub struct FuzzInput {
    pub index: u64,
    /// The corpus spec it was derived from.
    pub origin: String,
    original_files: BTreeMap<String, String>,
    pub mutant: Mutant,
}

/// When a run stops.
#[derive(Clone, Copy, Debug)]
pub struct FuzzConfig {
    pub seed: u64,
    /// Stop after this long...
    pub duration: Option<Duration>,
    /// ...or after this many inputs, whichever comes first.
    pub max_inputs: Option<u64>,
    /// A compilation slower than this is a hang.
    pub hang_limit: Duration,
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default)]
pub struct FuzzStats {
    pub seed: u64,
    pub inputs: u64,
    /// Inputs that gave at least one error (the usual outcome of a mutation).
    pub with_errors: u64,
    /// Of those, inputs with a syntax error (E001): the checks after the parser did not run.
    pub syntax_errors: u64,
    /// Inputs that compiled with no error (perhaps with warnings).
    pub clean: u64,
    pub elapsed: Duration,
}

impl FuzzStats {
    pub fn per_second(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.inputs as f64 / seconds
        } else {
            0.0
        }
    }
}

/// An input that broke the compiler's promise.
#[derive(Clone, Debug)]
pub struct Failure {
    pub kind: FailureKind,
    pub input: FuzzInput,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureKind {
    Panic(String),
    Hang(Duration),
    /// The process running the harness died (stack overflow, abort) on this input.
    Crash(String),
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailureKind::Panic(message) => write!(formatter, "panic: {message}"),
            FailureKind::Hang(limit) => {
                write!(formatter, "hang: compilation took longer than {limit:?}")
            }
            FailureKind::Crash(status) => write!(formatter, "crash: {status}"),
        }
    }
}

/// Runs inputs `0, 1, 2, ...` until the config's limit, calling `on_input(k)` before
/// compiling input `k`. Stops at the first panic or hang.
pub fn run(
    corpus: &Corpus,
    config: FuzzConfig,
    mut on_input: impl FnMut(u64),
) -> Result<FuzzStats, (FuzzStats, Box<Failure>)> {
    let started = Instant::now();
    let mut stats = FuzzStats {
        seed: config.seed,
        ..FuzzStats::default()
    };
    let mut worker = Worker::spawn();
    loop {
        if config.max_inputs.is_some_and(|max| stats.inputs >= max)
            || config
                .duration
                .is_some_and(|limit| started.elapsed() >= limit)
        {
            break;
        }
        let input = corpus.input(config.seed, stats.inputs);
        on_input(input.index);
        let outcome = worker.compile(&input, config.hang_limit);
        stats.inputs += 1;
        stats.elapsed = started.elapsed();
        match outcome {
            Outcome::Compiled { errors, syntax } => {
                if errors > 0 {
                    stats.with_errors += 1;
                    stats.syntax_errors += u64::from(syntax);
                } else {
                    stats.clean += 1;
                }
            }
            Outcome::Failed(kind) => {
                return Err((stats, Box::new(Failure { kind, input })));
            }
        }
        if worker.is_dead() {
            worker = Worker::spawn();
        }
    }
    stats.elapsed = started.elapsed();
    Ok(stats)
}

enum Outcome {
    Compiled { errors: usize, syntax: bool },
    Failed(FailureKind),
}

type Job = (String, String, MemoryLoader);

/// A thread that compiles one input at a time, so a hang can be timed out from outside.
struct Worker {
    jobs: Option<mpsc::Sender<Job>>,
    results: mpsc::Receiver<Result<(usize, bool), String>>,
    dead: bool,
}

impl Worker {
    fn spawn() -> Worker {
        let (job_sender, job_receiver) = mpsc::channel::<Job>();
        let (result_sender, result_receiver) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("fuzz-compile".to_string())
            .stack_size(WORKER_STACK)
            .spawn(move || {
                for (name, text, loader) in job_receiver {
                    let result = catch_unwind(AssertUnwindSafe(|| {
                        let compilation = charter_compiler::compile(&name, &text, &loader);
                        // Rendering is part of what a user runs; it must not panic either.
                        let _ = charter_compiler::render::text(
                            &compilation.diagnostics,
                            &compilation.sources,
                            false,
                        );
                        let errors = compilation
                            .diagnostics
                            .iter()
                            .filter(|diagnostic| diagnostic.is_error())
                            .count();
                        let syntax = compilation
                            .diagnostics
                            .iter()
                            .any(|diagnostic| diagnostic.code == charter_compiler::Code::E001);
                        (errors, syntax)
                    }))
                    .map_err(|payload| panic_message(payload.as_ref()));
                    if result_sender.send(result).is_err() {
                        break;
                    }
                }
            });
        Worker {
            dead: spawned.is_err(),
            jobs: Some(job_sender),
            results: result_receiver,
        }
    }

    fn is_dead(&self) -> bool {
        self.dead
    }

    fn compile(&mut self, input: &FuzzInput, limit: Duration) -> Outcome {
        let job = (
            format!("fuzz-{}.charter", input.index),
            input.mutant.text.clone(),
            MemoryLoader {
                files: input.mutant.files.clone(),
            },
        );
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if !sent {
            self.dead = true;
            return Outcome::Failed(FailureKind::Crash(
                "the compile worker could not start".into(),
            ));
        }
        match self.results.recv_timeout(limit) {
            Ok(Ok((errors, syntax))) => Outcome::Compiled { errors, syntax },
            Ok(Err(message)) => Outcome::Failed(FailureKind::Panic(message)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // The thread cannot be stopped; leave it and let the caller exit.
                self.dead = true;
                self.jobs = None;
                Outcome::Failed(FailureKind::Hang(limit))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.dead = true;
                Outcome::Failed(FailureKind::Crash("the compile worker died".into()))
            }
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|message| (*message).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".to_string())
}

/// Writes a failing input to `dir/<hash>.charter`, with a `<hash>.txt` note saying how it
/// was made and, when it reads files, those files under `<hash>.files/`. Returns the spec's
/// path.
pub fn save_failure(dir: &Path, failure: &Failure, seed: u64) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let input = &failure.input;
    let hash = format!("{:016x}", fnv1a(input.mutant.text.as_bytes()));
    let spec_path = dir.join(format!("{hash}.charter"));
    std::fs::write(&spec_path, &input.mutant.text)?;
    let mut note = format!(
        "{}\nseed: {seed}\ninput: {}\nderived from: {}\nmutations: {}\n",
        failure.kind,
        input.index,
        input.origin,
        input.mutant.mutations.join(", ")
    );
    if !input.mutant.files.is_empty() {
        let files_dir = dir.join(format!("{hash}.files"));
        for (relative, text) in &input.mutant.files {
            // Only plain relative paths are recreated; others are listed in the note.
            let plain = !relative.starts_with('/')
                && relative
                    .split('/')
                    .all(|part| !part.is_empty() && part != "..");
            let changed = input.original_files.get(relative) != Some(text);
            note.push_str(&format!(
                "file: {relative}{}\n",
                if changed { " (mutated)" } else { "" }
            ));
            if plain {
                let path = files_dir.join(relative);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(path, text)?;
            }
        }
    }
    std::fs::write(dir.join(format!("{hash}.txt")), note)?;
    Ok(spec_path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{load_corpus, workspace_root};

    /// The harness as `cargo test` runs it: a few hundred mutations of the real corpus with
    /// a fixed seed, none of which may panic or hang.
    #[test]
    fn three_hundred_mutations_do_not_panic() {
        let root = workspace_root();
        let corpus = Corpus::new(load_corpus(&root.join("specs"), &root));
        let config = FuzzConfig {
            seed: 0x5EED,
            duration: None,
            max_inputs: Some(300),
            hang_limit: Duration::from_secs(10),
        };
        match run(&corpus, config, |_| {}) {
            Ok(stats) => assert_eq!(stats.inputs, 300),
            Err((_, failure)) => {
                let saved = save_failure(
                    &root.join("target").join("fuzz-failures"),
                    &failure,
                    config.seed,
                );
                panic!(
                    "input {} (from {}, mutations {:?}) broke the compiler: {}; saved to {saved:?}",
                    failure.input.index,
                    failure.input.origin,
                    failure.input.mutant.mutations,
                    failure.kind
                );
            }
        }
    }

    #[test]
    fn inputs_are_rebuilt_identically_from_seed_and_index() {
        let corpus = Corpus::new(Vec::new());
        for index in [0, 7, 99] {
            assert_eq!(
                corpus.input(3, index).mutant.text,
                corpus.input(3, index).mutant.text
            );
        }
        assert_ne!(
            corpus.input(3, 0).mutant.text,
            corpus.input(4, 0).mutant.text
        );
    }
}
