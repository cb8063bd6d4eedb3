//! The `explore` stage of `cargo xtask verify`: every seed's base (happy-path) golden explored at depth 2 with every fault kind; any property violation fails the stage.

use std::path::Path;

use charter_runtime::explore::{self, Options};

/// How deep the stage explores: every pair of faults. Every seed base at depth 2 with
/// every kind is 6,675 variants: 9.9 s in the dev build on two cores, 0.7 s in release.
pub const DEPTH: u8 = 2;

/// The base scenario of each seed spec: the run where everything goes right. Every fault
/// kind is explored on each (none is left out: none breaks a property).
pub const SEED_BASES: [&str; 7] = [
    "agency/all_orders_pass",
    "auto_agent/pass_first_time",
    "closed_loop/happy_path",
    "lead_agent/happy_path",
    "mention_roles/explicit_business",
    "mention_roles/auto_routed_creative",
    "mention_roles/conversation_sticky_creative",
];

/// What exploring the bases found: whether every one kept every property, a one-line
/// note, and a line per problem (a violation with its faults, or a base that failed).
#[derive(Debug)]
pub struct Explored {
    /// Scenarios explored.
    pub scenarios: usize,
    pub passed: bool,
    pub note: String,
    pub problems: Vec<String>,
}

/// Explores each of [`SEED_BASES`] whose id contains `filter` (all without one) and whose
/// spec has goldens in this project (`golden/<spec>/`; a scratch project has none).
pub fn seed_bases(root: &Path, filter: Option<&str>) -> Explored {
    let names: Vec<&str> = SEED_BASES
        .iter()
        .copied()
        .filter(|name| filter.is_none_or(|pattern| name.contains(pattern)))
        .filter(|name| {
            name.split('/')
                .next()
                .is_some_and(|spec| root.join("golden").join(spec).is_dir())
        })
        .collect();
    scenarios(root, &names, "seed bases")
}

/// Explores the goldens `names` (`<spec>/<scenario>`) at [`DEPTH`] with every fault kind.
pub fn scenarios(root: &Path, names: &[&str], what: &str) -> Explored {
    let mut variants = 0usize;
    let mut changed = 0usize;
    let mut scenarios = 0usize;
    let mut problems = Vec::new();
    for name in names {
        let dir = root.join("golden").join(name);
        let loaded = match explore::load(root, &dir) {
            Ok(loaded) => loaded,
            Err(message) => {
                problems.push(format!("{name}: {message}"));
                continue;
            }
        };
        let options = Options {
            depth: DEPTH,
            ..Options::default()
        };
        let exploration = match explore::explore(&loaded, &options, &|_, _| {}) {
            Ok(exploration) => exploration,
            Err(message) => {
                problems.push(format!("{name}: {message}"));
                continue;
            }
        };
        scenarios += 1;
        variants += exploration.variants.len();
        changed += exploration.changes().values().map(Vec::len).sum::<usize>();
        for violation in &exploration.base_violations {
            problems.push(format!(
                "{name} (no fault): {} {}",
                violation.property, violation.message
            ));
        }
        for variant in exploration.violations() {
            let faults: Vec<String> = variant
                .faults
                .iter()
                .map(|fault| fault.describe(&loaded.cassette))
                .collect();
            for violation in &variant.violations {
                problems.push(format!(
                    "{name} with {}: {} {}",
                    faults.join(" + "),
                    violation.property,
                    violation.message
                ));
            }
        }
    }
    let note = if problems.is_empty() {
        format!(
            "{scenarios} {what}, {variants} variants at depth {DEPTH} with every fault kind, no violation ({changed} change the outcome)"
        )
    } else {
        format!("{} violation(s) or failures", problems.len())
    };
    Explored {
        scenarios,
        passed: problems.is_empty(),
        note,
        problems,
    }
}

/// `cargo xtask bench`'s explore figure: closed_loop's happy path explored with every
/// fault kind, at depth 1 (`passes` times) and depth 2, variants per second on every core
/// (target ≥ 2,000), with the load average read before and after.
pub fn bench(root: &Path, passes: usize) -> Result<(), String> {
    let dir = root.join("golden").join("closed_loop").join("happy_path");
    let loaded = explore::load(root, &dir)?;
    let load = crate::measure::load_average;
    let before = load();
    for depth in [1u8, 2] {
        let options = Options {
            depth,
            ..Options::default()
        };
        let mut rates = Vec::new();
        let mut count = 0;
        for _ in 0..passes.max(1) {
            let started = std::time::Instant::now();
            let exploration = explore::explore(&loaded, &options, &|_, _| {})?;
            let seconds = started.elapsed().as_secs_f64();
            count = exploration.variants.len();
            if exploration.any_violation() {
                return Err(format!(
                    "closed_loop/happy_path at depth {depth} has violations"
                ));
            }
            rates.push(count as f64 / seconds.max(1e-9));
        }
        rates.sort_by(f64::total_cmp);
        let median = rates.get(rates.len() / 2).copied().unwrap_or(0.0);
        println!(
            "{:<46} {median:>8.0} variants/s median of {} passes of {count} (min {:.0}, max {:.0}; {} threads)  (target >= 2000)",
            format!("explore closed_loop/happy_path depth {depth}"),
            rates.len(),
            rates.first().copied().unwrap_or(0.0),
            rates.last().copied().unwrap_or(0.0),
            options.threads
        );
        if median < 2000.0 {
            println!("  ^ explore at depth {depth} under target");
        }
    }
    println!("  load average before {before}, after {}", load());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    #[test]
    fn the_seed_bases_keep_every_property() {
        let explored = seed_bases(&root(), Some("closed_loop"));
        assert!(explored.passed, "{:?}", explored.problems);
        assert!(
            explored
                .note
                .starts_with("1 seed bases, 1264 variants at depth 2 with every fault kind"),
            "{}",
            explored.note
        );
    }

    #[test]
    fn a_violation_fails_the_stage_and_names_its_faults() {
        let explored = scenarios(&root(), &["closed_loop/invariant_tokens"], "scenarios");
        assert!(!explored.passed);
        assert!(
            explored.problems.iter().any(|problem| problem
                .starts_with("closed_loop/invariant_tokens with timeout at {step: plan")
                && problem.contains("P5 invariant `tokens_bounded` broke")),
            "{:?}",
            explored.problems
        );
        let scratch = seed_bases(&root().join("specs"), None);
        assert_eq!(
            (scratch.scenarios, scratch.passed),
            (0, true),
            "no golden/ there"
        );
        let missing = scenarios(&root(), &["closed_loop/nope"], "scenarios");
        assert!(!missing.passed);
        assert!(
            missing.problems[0].contains("cannot read"),
            "{:?}",
            missing.problems
        );
    }
}
