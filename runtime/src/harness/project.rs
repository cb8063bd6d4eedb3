//! Verifying a project's scenarios on worker threads (`charter verify -j N`, `--fail-fast`): the reports come in scenario order and are the same whatever the threads did.
//!
//! Each selected scenario file is read once and each spec compiled once, up front, so the
//! workers only read their copy of the cache. Workers take the next scenario in order;
//! with `fail_fast`, none takes a scenario after the first one (in scenario order) known
//! not to pass, and the reports end with that one. Every scenario before it was taken
//! before it was, so the reports are exactly those one thread going through the
//! scenarios in order would have made.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{
    HarnessConfig, HarnessError, ScenarioFile, ScenarioRef, ScenarioReport, SpecCache, discover,
    read_scenario, select, verify_scenario,
};

/// How [`verify_project_with`] spreads the work and when it stops; no option changes a
/// report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// How many scenarios replay at once; none: the machine's available parallelism.
    pub jobs: Option<NonZeroUsize>,
    /// Stop at the first scenario, in scenario order, that does not pass: the reports end
    /// with it.
    pub fail_fast: bool,
}

/// Runs the harness over the project at `root` (see [`super::verify_project`]) with
/// `options`, telling `progress` of each scenario as it finishes: (how many are done, how
/// many in all, its report), from the worker threads, in the order they finish.
pub fn verify_project_with(
    root: &Path,
    config: &HarnessConfig,
    options: VerifyOptions,
    progress: &(dyn Fn(usize, usize, &ScenarioReport) + Sync),
) -> Result<Vec<ScenarioReport>, HarnessError> {
    let scenarios: Vec<(ScenarioRef, ScenarioFile)> = select(discover(root)?, config)
        .into_iter()
        .map(|reference| {
            let file = read_scenario(&reference);
            (reference, file)
        })
        .collect();
    let mut specs = SpecCache::new();
    for (_, file) in &scenarios {
        if let Ok((scenario, _)) = file {
            let _ = specs.get(root, &scenario.spec);
        }
    }
    let jobs = options
        .jobs
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get)
        .min(scenarios.len().max(1));
    let queue = Queue {
        root,
        config,
        scenarios: &scenarios,
        fail_fast: options.fail_fast,
        next: AtomicUsize::new(0),
        last: AtomicUsize::new(usize::MAX),
        finished: AtomicUsize::new(0),
        progress,
    };
    let mut results = if jobs <= 1 {
        queue.work(specs)
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..jobs)
                .map(|_| {
                    let specs = specs.clone();
                    let queue = &queue;
                    scope.spawn(move || queue.work(specs))
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        })
    };
    results.sort_by_key(|(index, _)| *index);
    let last = queue.last.load(Ordering::Relaxed);
    Ok(results
        .into_iter()
        .take_while(|(index, _)| *index <= last)
        .map(|(_, report)| report)
        .collect())
}

/// The scenarios the workers share, and where they are.
struct Queue<'a> {
    root: &'a Path,
    config: &'a HarnessConfig,
    scenarios: &'a [(ScenarioRef, ScenarioFile)],
    fail_fast: bool,
    /// The index of the next scenario to take.
    next: AtomicUsize,
    /// With `fail_fast`: the index of the first scenario found not to pass (`usize::MAX`
    /// while none has); no scenario after it is taken.
    last: AtomicUsize,
    /// How many scenarios have finished.
    finished: AtomicUsize,
    progress: &'a (dyn Fn(usize, usize, &ScenarioReport) + Sync),
}

impl Queue<'_> {
    /// One worker: takes the next scenario until none is left (or, with `fail_fast`, one
    /// before it did not pass), and returns its reports with their indexes.
    fn work(&self, mut specs: SpecCache) -> Vec<(usize, ScenarioReport)> {
        let mut done = Vec::new();
        loop {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            if index > self.last.load(Ordering::Relaxed) {
                break;
            }
            let Some((reference, file)) = self.scenarios.get(index) else {
                break;
            };
            let report =
                verify_scenario(self.root, reference, file, self.config, &mut specs).escaped();
            if self.fail_fast && !report.status.passed() {
                self.last.fetch_min(index, Ordering::Relaxed);
            }
            let finished = self.finished.fetch_add(1, Ordering::Relaxed) + 1;
            (self.progress)(finished, self.scenarios.len(), &report);
            done.push((index, report));
        }
        done
    }
}
