//! Saving what exploring found as golden scenarios: each violation and each distinct outcome change, shrunk to the fewest faults, with its cassette and the trace its replay gives.
//!
//! A saved cassette holds exactly the answers the variant was served, under the keys it
//! was served for (faults baked in, nearest answers moved to the keys that asked), so it
//! replays with the ordinary replay provider; its `trace.snap` is produced by that replay
//! (`harness::replay_scenario`), never by the explorer. Files are written through
//! `files::write_atomically`.

use std::path::{Path, PathBuf};

use super::{
    Ending, Exploration, Fault, Limits, Loaded, VariantResult, faults, paused_runtime, play,
};
use crate::formats::scenario::{Cassette, Expectation, Scenario};

/// One scenario written.
#[derive(Clone, Debug)]
pub struct Saved {
    pub dir: PathBuf,
    /// Why it was saved: `violation: P2 ...` or `completed{gate_passed} -> failed{...}`.
    pub why: String,
    pub faults: Vec<Fault>,
    /// How the saved scenario's own replay ended (it should be the variant's ending).
    pub replayed: String,
}

/// The variants worth saving: the violations (one per set of violated properties and
/// kind of fault) and one per distinct outcome change, each shrunk to the fewest faults
/// that reproduce it.
pub fn chosen(loaded: &Loaded, exploration: &Exploration) -> Vec<(String, Vec<Fault>)> {
    let bounds = &exploration.bounds;
    let limits = Limits::for_bounds(bounds);
    let Ok(runtime) = paused_runtime() else {
        return Vec::new();
    };
    let mut chosen: Vec<(String, Vec<Fault>)> = Vec::new();
    let mut seen_violations = std::collections::BTreeSet::new();
    let mut by_size: Vec<&VariantResult> = exploration.violations().collect();
    by_size.sort_by_key(|variant| variant.faults.len());
    for variant in by_size {
        // One scenario per kind of violation (its properties) and kind of fault: the
        // variants that differ only in where the fault hit or in a count tell one story.
        let properties: std::collections::BTreeSet<_> = variant
            .violations
            .iter()
            .map(|violation| violation.property)
            .collect();
        if !seen_violations.insert((properties, Exploration::row_of(variant))) {
            continue;
        }
        let faults = shrink(variant, |smaller| {
            let again = super::run_variant(&runtime, loaded, bounds, limits, smaller);
            again.violations == variant.violations
        });
        let messages: Vec<String> = variant
            .violations
            .iter()
            .map(|violation| format!("{}: {}", violation.property, violation.message))
            .collect();
        chosen.push((format!("violation: {}", messages.join("; ")), faults));
    }
    for (termination, variants) in exploration.changes() {
        let Some(fewest) = variants.iter().min_by_key(|variant| variant.faults.len()) else {
            continue;
        };
        let faults = shrink(fewest, |smaller| {
            let again = super::run_variant(&runtime, loaded, bounds, limits, smaller);
            again.ending == Ending::Terminal(termination.clone())
        });
        chosen.push((format!("{} -> {termination}", exploration.base), faults));
    }
    chosen
}

/// The fewest of `variant`'s faults for which `reproduces` holds (a single fault is tried
/// before keeping a pair).
pub(crate) fn shrink(
    variant: &VariantResult,
    mut reproduces: impl FnMut(&[Fault]) -> bool,
) -> Vec<Fault> {
    if variant.faults.len() > 1 {
        for fault in &variant.faults {
            if reproduces(std::slice::from_ref(fault)) {
                return vec![*fault];
            }
        }
    }
    variant.faults.clone()
}

/// Writes each chosen variant as `<dir>/<scenario>--<faults>/` (scenario.yaml,
/// cassette.yaml, trace.snap). `dir` should lie under the project's `golden/<spec>/`, so
/// `charter verify` finds the scenarios; the `spec:` path is the base scenario's.
pub fn save(loaded: &Loaded, exploration: &Exploration, dir: &Path) -> Result<Vec<Saved>, String> {
    let limits = Limits::for_bounds(&exploration.bounds);
    let runtime = paused_runtime()?;
    let base_name = loaded.dir.file_name().map_or_else(
        || "scenario".to_string(),
        |name| name.to_string_lossy().to_string(),
    );
    let mut saved = Vec::new();
    for (why, faults) in chosen(loaded, exploration) {
        let variant = faults::bake(&loaded.spec, &loaded.cassette, &faults);
        let played = play(&runtime, loaded, &variant, limits);
        let (calls, humans) = played.served();
        let ending = match &played.result {
            Ok(Ok(outcome)) => Some(outcome.termination()),
            _ => None,
        };
        let cassette = Cassette {
            version: loaded.cassette.version,
            // The rendered prompts are the base's (a diff aid, not compared): left out.
            recorded: loaded.cassette.recorded.clone().map(|recorded| {
                crate::formats::scenario::Recorded {
                    rendered: std::collections::BTreeMap::new(),
                    ..recorded
                }
            }),
            calls,
            humans,
            faults: loaded.cassette.faults.clone(),
        };
        let described: Vec<String> = faults
            .iter()
            .map(|fault| fault.describe(&loaded.cassette))
            .collect();
        let scenario = Scenario {
            spec: loaded.scenario.spec.clone(),
            description: Some(format!(
                "explored from {}: {}; {why}",
                loaded.name,
                described.join(" and ")
            )),
            input: loaded.scenario.input.clone(),
            turns: loaded.scenario.turns.clone(),
            expect: ending.map(|termination| Expectation {
                outcome: Some(termination.outcome),
                reason: Some(termination.reason),
                ..Expectation::default()
            }),
        };
        let slug: Vec<String> = faults
            .iter()
            .map(|fault| fault.slug(&loaded.cassette))
            .collect();
        let target = dir.join(format!("{base_name}--{}", slug.join("--")));
        let replayed = write_scenario(loaded, &target, &scenario, &cassette)?;
        saved.push(Saved {
            dir: target,
            why,
            faults,
            replayed,
        });
    }
    Ok(saved)
}

/// Writes the scenario and cassette into `target`, replays them as the harness does and
/// writes the trace it gives; returns how the replay ended (or why it failed).
fn write_scenario(
    loaded: &Loaded,
    target: &Path,
    scenario: &Scenario,
    cassette: &Cassette,
) -> Result<String, String> {
    use crate::harness::{CASSETTE_FILE, SCENARIO_FILE, SNAPSHOT_FILE, snapshot};
    std::fs::create_dir_all(target)
        .map_err(|error| format!("cannot create {}: {error}", target.display()))?;
    let write = |file: &str, text: &str| {
        let path = target.join(file);
        crate::world::files::write_atomically(&path, text.as_bytes())
            .map_err(|error| format!("cannot write {}: {error}", path.display()))
    };
    let scenario_text = crate::formats::yaml::to_string(SCENARIO_FILE, scenario)
        .map_err(|error| error.to_string())?;
    let cassette_text = crate::formats::yaml::to_string(CASSETTE_FILE, cassette)
        .map_err(|error| error.to_string())?;
    write(SCENARIO_FILE, &scenario_text)?;
    write(CASSETTE_FILE, &cassette_text)?;
    let replayed = crate::harness::replay_scenario(
        &loaded.spec,
        scenario,
        &std::sync::Arc::new(cassette.clone()),
        &loaded.root,
    );
    match replayed {
        Ok(replayed) => {
            let source = target
                .strip_prefix(&loaded.root)
                .unwrap_or(target)
                .join(SCENARIO_FILE);
            let text = snapshot::render(
                &source.display().to_string(),
                scenario.description.as_deref(),
                &replayed.trace,
            );
            write(SNAPSHOT_FILE, &text)?;
            Ok(replayed.outcome.termination().to_string())
        }
        Err(failure) => Ok(format!("replay failed: {}", failure.error)),
    }
}
