//! `charter explore` (DESIGN §12): every fault at every recorded call, tool call and human answer of one scenario, replayed in virtual time and checked against P1–P5.
//!
//! [`load`] reads a scenario and compiles its spec; [`explore`] replays the base, derives
//! the variants ([`faults`]: one fault per variant at depth 1, every pair of faults at two
//! different sites at depth 2, every three at depth 3; a seeded sample of them with
//! `sample`), replays each in-process on a paused tokio clock (one
//! runtime per worker thread, reused from variant to variant) through an
//! [`provider::ExploreProvider`], and checks [`properties`]. A variant whose run makes a
//! call the recording has no answer for at all (no call of that step and item) is
//! *unanswered*: the recording cannot say what would happen, so it is counted apart and
//! is no violation. [`save`] writes violations and outcome changes as golden scenarios.

pub mod faults;
pub mod mutate;
pub mod properties;
pub mod provider;
pub mod save;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use charter_compiler::bounds::{self, Bounds};
use charter_compiler::graph::CompiledSpec;

use crate::engine::run::{DeliveryTarget, RunConfig, RunError, RunOutcome};
use crate::formats::scenario::{Cassette, Scenario};
use crate::formats::trace::{MemorySink, Termination, TraceEvent};

pub use faults::{Fault, FaultKind, Site};
pub use properties::{Property, Violation};

/// A scenario ready to explore.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The project root (the directory holding `golden/`).
    pub root: PathBuf,
    /// The scenario's directory.
    pub dir: PathBuf,
    /// `<spec>/<scenario>` as the harness names it (or the directory's name).
    pub name: String,
    pub scenario: Scenario,
    pub cassette: Cassette,
    pub spec: Arc<CompiledSpec>,
}

/// Reads the scenario in `dir` (its `scenario.yaml` and `cassette.yaml`) and compiles its
/// spec (with the recording's `--model` overrides), under project root `root`.
pub fn load(root: &Path, dir: &Path) -> Result<Loaded, String> {
    use crate::harness::{CASSETTE_FILE, SCENARIO_FILE};
    let read = |file: &str| {
        let path = dir.join(file);
        crate::world::files::read_regular(&path, crate::world::files::MAX_SOURCE_BYTES)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))
    };
    let scenario_file = dir.join(SCENARIO_FILE).display().to_string();
    let cassette_file = dir.join(CASSETTE_FILE).display().to_string();
    let scenario = Scenario::from_yaml(&scenario_file, &read(SCENARIO_FILE)?)
        .map_err(|error| error.to_string())?;
    let cassette = Cassette::from_yaml(&cassette_file, &read(CASSETTE_FILE)?)
        .map_err(|error| error.to_string())?;
    let spec = crate::harness::compile_spec(root, &scenario.spec).map_err(|problem| {
        let detail = problem
            .detail
            .map(|detail| format!("\n{detail}"))
            .unwrap_or_default();
        format!("{}: {}{detail}", problem.location.file, problem.message)
    })?;
    let overrides = cassette
        .recorded
        .as_ref()
        .map(|recorded| recorded.overrides.clone())
        .unwrap_or_default();
    let spec = if overrides.is_empty() {
        spec
    } else {
        let mut overridden = (*spec).clone();
        crate::engine::models::apply_overrides(&mut overridden, &overrides)
            .map_err(|message| format!("{cassette_file}: {message}"))?;
        Arc::new(overridden)
    };
    let name = match (dir.parent().and_then(Path::file_name), dir.file_name()) {
        (Some(spec), Some(scenario)) => {
            format!("{}/{}", spec.to_string_lossy(), scenario.to_string_lossy())
        }
        (None, Some(scenario)) => scenario.to_string_lossy().to_string(),
        _ => dir.display().to_string(),
    };
    Ok(Loaded {
        root: root.to_path_buf(),
        dir: dir.to_path_buf(),
        name,
        scenario,
        cassette,
        spec,
    })
}

/// How to explore.
#[derive(Clone, Debug)]
pub struct Options {
    pub kinds: Vec<FaultKind>,
    /// 1: one fault per variant; 2: also every pair of faults at two different sites;
    /// 3: also every three faults at three different sites.
    pub depth: u8,
    /// At most this many variants: when there are more, a sample drawn with `seed`.
    pub sample: Option<usize>,
    /// The seed of the sample (the same seed draws the same variants).
    pub seed: u64,
    /// Worker threads (each with its own runtime); at least 1.
    pub threads: usize,
}

/// The seed a sample is drawn with when none is given.
pub const DEFAULT_SEED: u64 = 1;

impl Default for Options {
    fn default() -> Self {
        Options {
            kinds: FaultKind::ALL.to_vec(),
            depth: 1,
            sample: None,
            seed: DEFAULT_SEED,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
        }
    }
}

/// How a variant's run ended.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ending {
    /// A terminal state with its reason.
    Terminal(Termination),
    /// The run made a call the recording has no answer of its step and item for.
    Unanswered(String),
    /// An error, a panic or no end (a P1 violation says which).
    Broken,
}

impl std::fmt::Display for Ending {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::Terminal(termination) => write!(formatter, "{termination}"),
            Ending::Unanswered(_) => formatter.write_str("unanswered"),
            Ending::Broken => formatter.write_str("broken"),
        }
    }
}

/// One variant, run and checked.
#[derive(Clone, Debug)]
pub struct VariantResult {
    pub faults: Vec<Fault>,
    pub ending: Ending,
    pub violations: Vec<Violation>,
}

/// What exploring a scenario found.
#[derive(Clone, Debug)]
pub struct Exploration {
    pub base: Termination,
    /// What the base itself (no fault) breaks.
    pub base_violations: Vec<Violation>,
    pub bounds: Bounds,
    pub sites: usize,
    /// Every variant of the kinds and depth asked for, before any sample.
    pub space: usize,
    /// The seed of the sample, when the variants are a sample of `space`.
    pub sampled: Option<u64>,
    pub variants: Vec<VariantResult>,
}

impl Exploration {
    /// Whether the base or any variant broke a property.
    pub fn any_violation(&self) -> bool {
        !self.base_violations.is_empty() || self.violations().next().is_some()
    }

    /// Variants with at least one violation.
    pub fn violations(&self) -> impl Iterator<Item = &VariantResult> {
        self.variants
            .iter()
            .filter(|variant| !variant.violations.is_empty())
    }

    /// A variant's fault kinds, joined with `+` (`timeout+429`).
    pub fn row_of(variant: &VariantResult) -> String {
        Self::kinds_of(variant)
            .iter()
            .map(|kind| kind.name())
            .collect::<Vec<_>>()
            .join("+")
    }

    /// A variant's distinct fault kinds, in table order.
    pub fn kinds_of(variant: &VariantResult) -> Vec<FaultKind> {
        let mut kinds: Vec<FaultKind> = variant.faults.iter().map(|fault| fault.kind).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Per fault kind, in table order: (variants, same ending as the base, changed,
    /// unanswered, with violations). A variant with faults of several kinds counts in
    /// the row of each.
    pub fn rows(&self) -> BTreeMap<FaultKind, [usize; 5]> {
        let mut rows: BTreeMap<FaultKind, [usize; 5]> = BTreeMap::new();
        for variant in &self.variants {
            let counts = self.counts(variant);
            for kind in Self::kinds_of(variant) {
                let row = rows.entry(kind).or_default();
                for (sum, count) in row.iter_mut().zip(counts) {
                    *sum += count;
                }
            }
        }
        rows
    }

    /// The same counts over every variant, each once.
    pub fn total(&self) -> [usize; 5] {
        let mut total = [0usize; 5];
        for variant in &self.variants {
            for (sum, count) in total.iter_mut().zip(self.counts(variant)) {
                *sum += count;
            }
        }
        total
    }

    /// A variant's contribution to a row: 1 variant, and 1 in each column it falls in.
    fn counts(&self, variant: &VariantResult) -> [usize; 5] {
        let mut counts = [1, 0, 0, 0, 0];
        match &variant.ending {
            Ending::Terminal(termination) if *termination == self.base => counts[1] = 1,
            Ending::Terminal(_) => counts[2] = 1,
            Ending::Unanswered(_) => counts[3] = 1,
            Ending::Broken => {}
        }
        if !variant.violations.is_empty() {
            counts[4] = 1;
        }
        counts
    }

    /// Every distinct ending other than the base's, with the variants that reach it.
    pub fn changes(&self) -> BTreeMap<Termination, Vec<&VariantResult>> {
        let mut changes: BTreeMap<Termination, Vec<&VariantResult>> = BTreeMap::new();
        for variant in &self.variants {
            if let Ending::Terminal(termination) = &variant.ending
                && *termination != self.base
            {
                changes
                    .entry(termination.clone())
                    .or_default()
                    .push(variant);
            }
        }
        changes
    }
}

/// The single faults of `cassette` for `kinds`, faults that change nothing left out.
pub fn singles(spec: &CompiledSpec, cassette: &Cassette, kinds: &[FaultKind]) -> Vec<Fault> {
    faults::sites(cassette)
        .into_iter()
        .flat_map(|site| {
            kinds
                .iter()
                .filter(move |kind| faults::applies(site, **kind))
                .map(move |kind| Fault { site, kind: *kind })
        })
        .filter(|fault| faults::changes(spec, cassette, std::slice::from_ref(fault)))
        .collect()
}

/// Every variant of `cassette` for `kinds` at `depth` (1 to 3): each single fault, then
/// (depth 2) each pair and (depth 3) each three of them at different sites.
pub fn variants(
    spec: &CompiledSpec,
    cassette: &Cassette,
    kinds: &[FaultKind],
    depth: u8,
) -> Vec<Vec<Fault>> {
    let mut all = Vec::new();
    each_variant(&singles(spec, cassette, kinds), depth, &mut |faults| {
        all.push(faults.to_vec());
    });
    all
}

/// Calls `visit` with each variant of `singles` at `depth`, in the order of [`variants`].
fn each_variant(singles: &[Fault], depth: u8, visit: &mut dyn FnMut(&[Fault])) {
    for fault in singles {
        visit(std::slice::from_ref(fault));
    }
    if depth >= 2 {
        for (i, first) in singles.iter().enumerate() {
            for second in singles.iter().skip(i + 1) {
                if first.site != second.site {
                    visit(&[*first, *second]);
                }
            }
        }
    }
    if depth >= 3 {
        for (i, first) in singles.iter().enumerate() {
            for (j, second) in singles.iter().enumerate().skip(i + 1) {
                if first.site == second.site {
                    continue;
                }
                for third in singles.iter().skip(j + 1) {
                    if third.site != first.site && third.site != second.site {
                        visit(&[*first, *second, *third]);
                    }
                }
            }
        }
    }
}

/// The variants of [`variants`], or, when there are more than `sample`, `sample` of them
/// drawn with `seed` (the same seed draws the same ones), in the order of [`variants`];
/// with how many there are in all.
pub fn sampled_variants(
    spec: &CompiledSpec,
    cassette: &Cassette,
    kinds: &[FaultKind],
    depth: u8,
    sample: Option<usize>,
    seed: u64,
) -> (Vec<Vec<Fault>>, usize) {
    let singles = singles(spec, cassette, kinds);
    let Some(size) = sample else {
        let mut all = Vec::new();
        each_variant(&singles, depth, &mut |faults| all.push(faults.to_vec()));
        let space = all.len();
        return (all, space);
    };
    // Reservoir sampling (algorithm R): one pass, `size` variants kept, each variant
    // equally likely; the space at depth 3 need not fit in memory.
    let mut random = SplitMix64(seed);
    let mut kept: Vec<(usize, Vec<Fault>)> = Vec::with_capacity(size.min(1 << 16));
    let mut seen = 0usize;
    each_variant(&singles, depth, &mut |faults| {
        if kept.len() < size {
            kept.push((seen, faults.to_vec()));
        } else {
            let at = random.below(seen as u64 + 1);
            if let Some(slot) = usize::try_from(at).ok().and_then(|at| kept.get_mut(at)) {
                *slot = (seen, faults.to_vec());
            }
        }
        seen += 1;
    });
    kept.sort_by_key(|(index, _)| *index);
    (kept.into_iter().map(|(_, faults)| faults).collect(), seen)
}

/// A small, seeded, portable pseudo-random generator (SplitMix64): a sample must draw the
/// same variants on every machine and release.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (bound > 0), without modulo bias worth noting at these sizes.
    fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(bound.max(1))) >> 64) as u64
    }
}

/// The limits a variant runs under: model calls and virtual time past which it is
/// taken as not ending.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub calls: u64,
    pub virtual_time: Duration,
}

impl Limits {
    /// Far past the worst case (or generous when it is unbounded).
    pub fn for_bounds(bounds: &Bounds) -> Limits {
        Limits {
            calls: bounds
                .total
                .calls
                .map_or(10_000, |calls| calls.saturating_mul(4).saturating_add(100)),
            virtual_time: Duration::from_millis(
                bounds.total.wall_ms.map_or(30 * 24 * 3_600_000, |wall| {
                    wall.saturating_mul(4).saturating_add(24 * 3_600_000)
                }),
            ),
        }
    }
}

/// A current-thread tokio runtime whose clock starts paused, for a worker's variants.
pub fn paused_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|error| format!("cannot start the runtime: {error}"))
}

/// What one run of a cassette gave (each turn of a conversation in order): how it
/// ended, its trace, and what was served.
#[derive(Debug)]
pub struct Played {
    /// The last turn's outcome, or the first error; `Err` for a panic or no end.
    pub result: Result<Result<RunOutcome, RunError>, String>,
    /// Every turn's events, in order.
    pub events: Vec<TraceEvent>,
    /// Each turn that ended in a terminal state: its outcome and its events' range.
    pub turns: Vec<(RunOutcome, std::ops::Range<usize>)>,
    /// Each turn's provider, with its turn number.
    pub providers: Vec<(u64, Arc<provider::ExploreProvider>)>,
}

impl Played {
    /// Whether any turn passed the call limit.
    pub fn hit_limit(&self) -> bool {
        self.providers
            .iter()
            .any(|(_, provider)| provider.hit_limit())
    }

    /// Whether any turn asked for something the recording has nothing of.
    pub fn missing(&self) -> bool {
        self.providers
            .iter()
            .any(|(_, provider)| provider.missing())
    }

    /// Every answer served, with its turn, in turn then key order.
    pub fn served(
        &self,
    ) -> (
        Vec<crate::formats::scenario::RecordedCall>,
        Vec<crate::formats::scenario::RecordedHuman>,
    ) {
        let mut calls = Vec::new();
        let mut humans = Vec::new();
        for (turn, provider) in &self.providers {
            let (turn_calls, turn_humans) = provider.served();
            calls.extend(turn_calls.into_iter().map(|mut call| {
                call.turn = *turn;
                call
            }));
            humans.extend(turn_humans.into_iter().map(|mut human| {
                human.turn = *turn;
                human
            }));
        }
        (calls, humans)
    }
}

/// Runs `variant` (with the base for the calls it lacks) on `runtime`: the scenario's one
/// run, or each turn of its conversation in the session the turn before left. A panic or
/// no end within the limits is `Err` with what happened.
pub fn play(
    runtime: &tokio::runtime::Runtime,
    loaded: &Loaded,
    variant: &Cassette,
    limits: Limits,
) -> Played {
    let spec = loaded.spec.as_ref();
    let conversation = loaded.scenario.turns.is_some();
    let mut session = if conversation {
        match crate::engine::session::Session::new(spec) {
            Ok(session) => Some(session),
            Err(error) => {
                return Played {
                    result: Ok(Err(RunError::Flow(format!(
                        "a scenario with `turns` needs a session: {error}"
                    )))),
                    events: Vec::new(),
                    turns: Vec::new(),
                    providers: Vec::new(),
                };
            }
        }
    } else {
        None
    };
    let mut played = Played {
        result: Err("has no input".to_string()),
        events: Vec::new(),
        turns: Vec::new(),
        providers: Vec::new(),
    };
    for (index, input) in loaded.scenario.inputs().into_iter().enumerate() {
        let turn = u64::try_from(index).unwrap_or(u64::MAX).saturating_add(1);
        let (turn_variant, turn_base) = if conversation {
            (
                Cow::Owned(variant.for_turn(turn)),
                Cow::Owned(loaded.cassette.for_turn(turn)),
            )
        } else {
            (Cow::Borrowed(variant), Cow::Borrowed(&loaded.cassette))
        };
        let provider = Arc::new(provider::ExploreProvider::new(
            &turn_variant,
            &turn_base,
            limits.calls,
        ));
        played.providers.push((turn, provider.clone()));
        let config = RunConfig {
            delivery: DeliveryTarget::Memory,
            faults: variant.faults.clone(),
            session: session.clone(),
            ..RunConfig::default()
        };
        let mut sink = MemorySink::new();
        let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
            runtime.block_on(async {
                let run = crate::engine::run::run(
                    spec,
                    input,
                    crate::engine::effects::Effects::new(
                        provider.clone(),
                        provider.as_ref(),
                        &mut sink,
                    ),
                    &config,
                );
                tokio::time::timeout(limits.virtual_time, run).await
            })
        }));
        let start = played.events.len();
        played.events.extend(sink.into_events());
        played.result = match run {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(_)) => Err(format!(
                "did not end within {} of virtual time",
                bounds::format_ms(
                    u64::try_from(limits.virtual_time.as_millis()).unwrap_or(u64::MAX)
                )
            )),
            Err(panic) => Err(format!("panicked: {}", panic_text(panic.as_ref()))),
        };
        match &played.result {
            Ok(Ok(outcome)) => {
                if let Some(next) = &outcome.session {
                    session = Some(next.clone());
                }
                played
                    .turns
                    .push((outcome.clone(), start..played.events.len()));
            }
            _ => break,
        }
    }
    played
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

/// Runs and checks one variant.
pub fn run_variant(
    runtime: &tokio::runtime::Runtime,
    loaded: &Loaded,
    bounds: &Bounds,
    limits: Limits,
    faults: &[Fault],
) -> VariantResult {
    let cassette = faults::bake(&loaded.spec, &loaded.cassette, faults);
    let played = play(runtime, loaded, &cassette, limits);
    let (ending, violations) = judge(loaded, bounds, limits, &played);
    VariantResult {
        faults: faults.to_vec(),
        ending,
        violations,
    }
}

/// How a played run ended and which properties it broke.
pub fn judge(
    loaded: &Loaded,
    bounds: &Bounds,
    limits: Limits,
    played: &Played,
) -> (Ending, Vec<Violation>) {
    match &played.result {
        Err(what) => (
            Ending::Broken,
            vec![Violation::new(Property::P1, what.clone())],
        ),
        Ok(Err(_)) if played.hit_limit() => (
            Ending::Broken,
            vec![Violation::new(
                Property::P1,
                format!("did not end: more than {} model calls", limits.calls),
            )],
        ),
        Ok(Err(RunError::Unrecorded { key, .. })) if played.missing() => (
            Ending::Unanswered(format!(
                "the recording has no call of step `{}`{} (asked for {key})",
                key.step,
                key.item
                    .as_ref()
                    .map(|item| format!(", item {item}"))
                    .unwrap_or_default()
            )),
            Vec::new(),
        ),
        Ok(Err(RunError::Human { step, .. })) if played.missing() => (
            Ending::Unanswered(format!(
                "the recording has no answer of `ask` step `{step}`"
            )),
            Vec::new(),
        ),
        Ok(Err(error)) => (
            Ending::Broken,
            vec![Violation::new(Property::P1, format!("error: {error}"))],
        ),
        Ok(Ok(outcome)) => {
            // Each turn is a run of its own: the bounds and the budget are per run.
            let mut violations = Vec::new();
            for (turn_outcome, range) in &played.turns {
                let events = played.events.get(range.clone()).unwrap_or_default();
                violations.extend(properties::check(
                    &loaded.spec,
                    bounds,
                    turn_outcome,
                    events,
                ));
                let finished = events.last().is_some_and(|event| {
                    matches!(
                        event.kind,
                        crate::formats::trace::EventKind::RunFinished { .. }
                    )
                });
                if !finished {
                    violations.push(Violation::new(
                        Property::P1,
                        "the trace does not end with `run_finished`",
                    ));
                }
            }
            violations.sort();
            violations.dedup();
            (Ending::Terminal(outcome.termination()), violations)
        }
    }
}

/// Explores `loaded`: replays the base (which must end in a terminal state), then every
/// variant, `progress(done, total)` called now and then from the workers.
pub fn explore(
    loaded: &Loaded,
    options: &Options,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Exploration, String> {
    let bounds = bounds::compute(&loaded.spec);
    let limits = Limits::for_bounds(&bounds);
    let runtime = paused_runtime()?;
    let base_played = play(&runtime, loaded, &loaded.cassette, limits);
    let base = match &base_played.result {
        Ok(Ok(outcome)) => outcome.termination(),
        Ok(Err(error)) => return Err(format!("the scenario itself does not replay: {error}")),
        Err(what) => return Err(format!("the scenario itself does not replay: it {what}")),
    };
    let (_, base_violations) = judge(loaded, &bounds, limits, &base_played);
    drop(runtime);
    let (all, space) = sampled_variants(
        &loaded.spec,
        &loaded.cassette,
        &options.kinds,
        options.depth,
        options.sample,
        options.seed,
    );
    let total = all.len();
    let sampled = (total < space).then_some(options.seed);
    let threads = options.threads.clamp(1, 64).min(total.max(1));
    let done = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<VariantResult>> = vec![None; total];
    let chunks: Vec<Vec<(usize, VariantResult)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|worker| {
                let all = &all;
                let bounds = &bounds;
                let done = &done;
                scope.spawn(move || -> Result<Vec<(usize, VariantResult)>, String> {
                    let mut runtime = paused_runtime()?;
                    let mut out = Vec::new();
                    for (index, faults) in all.iter().enumerate().skip(worker).step_by(threads) {
                        let result = run_variant(&runtime, loaded, bounds, limits, faults);
                        if matches!(result.ending, Ending::Broken) {
                            // A panic or a cut run may leave tasks behind: start afresh.
                            runtime = paused_runtime()?;
                        }
                        out.push((index, result));
                        let now = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        if now.is_multiple_of(250) || now == total {
                            progress(now, total);
                        }
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .map_err(|_| "a worker thread panicked".to_string())
                    .and_then(|chunk| chunk)
            })
            .collect::<Result<Vec<_>, String>>()
    })?;
    for (index, result) in chunks.into_iter().flatten() {
        if let Some(slot) = results.get_mut(index) {
            *slot = Some(result);
        }
    }
    Ok(Exploration {
        base,
        base_violations,
        bounds,
        sites: faults::sites(&loaded.cassette).len(),
        space,
        sampled,
        variants: results.into_iter().flatten().collect(),
    })
}

#[cfg(test)]
mod kinds_tests;
#[cfg(test)]
mod tests;
