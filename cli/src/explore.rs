//! `charter explore`: every fault at every recorded call of one scenario, replayed in virtual time and checked against P1–P5 (DESIGN §12).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use charter_compiler::bounds::format_ms;
use charter_runtime::explore::{self, Ending, Exploration, FaultKind, Loaded, Options, Property};
use charter_runtime::world::escape::one_line;
use clap::Args;

use crate::terminal::{Context, Outcome, print_err, print_error, print_out};

/// Explore a recorded scenario: derive a variant for every recorded model call, tool call
/// and human answer and every fault kind, replay each in virtual time, and check each
/// against the properties the compiler proved.
///
/// Each fault is injected as the live provider, tool or person would surface it: transport
/// faults (timeout, 429, 500, auth, context_length), bad answers (malformed, contract,
/// truncated, refusal, stale, wrong_value), a slow answer, tool faults (tool_error,
/// tool_timeout, tool_bad_args) and human ones (human_reject, human_timeout); `charter
/// explain explore` says what each does and what the run should do about it.
///
/// A fault is transient: the faulted call's next attempt gets the recorded answer, and a
/// call the recording lacks (a repair round the base never ran) gets the nearest recorded
/// answer of the same step and item. Every variant must keep:
///   P1  it ends in a terminal state with a reason (no error, panic or hang);
///   P2  model calls, steps, tokens and virtual wall time stay within `charter check --bounds`;
///   P3  nothing is delivered unless its gate passed its hard rules with the same hash;
///   P4  no budget is exceeded beyond the calls in flight when it ran out;
///   P5  every invariant holds.
///
/// The table on stdout counts the variants per fault kind (a variant with faults of several
/// kinds counts in the row of each) and how their outcomes differ from the base; every
/// violation is listed with its faults. `--depth 3` grows fast (every three faults at
/// three places): `--sample N` runs N of them, drawn with `--seed`, and says the seed. A variant that makes a call
/// of a step and item the recording never made is counted as `unanswered` (the recording
/// cannot say what would happen): no violation.
///
/// Exit status: 0 no violation, 1 one or more violations, 2 usage error or a scenario that
/// cannot be read or does not replay.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    charter explore golden/closed_loop/happy_path\n  \
    charter explore golden/lead_agent/happy_path --faults timeout,429 --depth 2\n  \
    charter explore golden/lead_agent/happy_path --depth 3 --sample 2000 --seed 7\n  \
    charter explore golden/closed_loop/happy_path --save golden/closed_loop\n\n\
    With --save DIR, each violation and each distinct outcome change is written as a \
    golden scenario `DIR/<scenario>--<faults>/` (scenario.yaml, cassette.yaml with the \
    faults baked into its entries, trace.snap from replaying it), shrunk to the fewest \
    faults; save under the project's golden/<spec>/ so `charter verify` replays them.")]
pub struct ExploreArgs {
    /// The scenario directory: `golden/<spec>/<scenario>/` with `scenario.yaml` and `cassette.yaml`.
    #[arg(value_name = "SCENARIO_DIR")]
    pub scenario: PathBuf,

    /// The fault kinds, comma-separated (all by default): timeout, 429, 500, malformed,
    /// contract, truncated, refusal, auth, context_length, slow, stale, wrong_value,
    /// tool_error, tool_timeout, tool_bad_args, human_reject, human_timeout. `charter
    /// explain explore` says what each does and what the run is expected to do about it.
    #[arg(long, value_name = "KINDS", value_parser = explore::faults::parse_kinds,
          default_value = ALL_KINDS)]
    pub faults: std::vec::Vec<FaultKind>,

    /// 1: one fault per variant; 2: also every pair of faults at two different places;
    /// 3: also every three faults at three different places.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=3))]
    pub depth: u8,

    /// Run at most N variants: when there are more, a sample of N drawn with --seed (the
    /// same seed draws the same variants; the report says the seed).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample: Option<u64>,

    /// The seed of --sample's draw.
    #[arg(long, value_name = "SEED", default_value_t = explore::DEFAULT_SEED)]
    pub seed: u64,

    /// Write each violation and each distinct outcome change as a golden scenario into DIR.
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
}

/// Every fault kind, comma-separated: the default of `--faults`.
const ALL_KINDS: &str = "timeout,429,500,malformed,contract,truncated,refusal,auth,context_length,slow,stale,wrong_value,tool_error,tool_timeout,tool_bad_args,human_reject,human_timeout";

/// Explores the scenario as its stages: load the recording (noting a stale one), explore
/// every variant, print the report and the speed, save what is worth keeping; the exit
/// status says whether any variant broke a property.
pub fn run(args: &ExploreArgs, context: Context) -> anyhow::Result<Outcome> {
    let loaded = match load_scenario(args, context) {
        Ok(loaded) => loaded,
        Err(outcome) => return Ok(outcome),
    };
    note_stale_recording(&loaded);
    let started = Instant::now();
    let exploration = match explore_variants(args, context, &loaded) {
        Ok(exploration) => exploration,
        Err(outcome) => return Ok(outcome),
    };
    let elapsed = started.elapsed();
    print_out(&table(&loaded, &exploration, args.depth))?;
    print_speed(exploration.variants.len(), elapsed);
    if let Some(save) = &args.save {
        match save_scenarios(context, &loaded, &exploration, save) {
            Ok(text) => print_out(&text)?,
            Err(outcome) => return Ok(outcome),
        }
    }
    if exploration.any_violation() {
        Ok(Outcome::Failed)
    } else {
        Ok(Outcome::Clean)
    }
}

/// The scenario, its recording and its compiled spec; `Err` is the usage error of a path
/// that is not a scenario directory or a scenario that cannot be read (said on stderr).
fn load_scenario(args: &ExploreArgs, context: Context) -> Result<Loaded, Outcome> {
    let dir = &args.scenario;
    if !dir.join("scenario.yaml").is_file() {
        print_error(
            context,
            &format!(
                "{} is not a scenario directory (it holds no scenario.yaml); give a directory like golden/closed_loop/happy_path",
                dir.display()
            ),
        );
        return Err(Outcome::Usage);
    }
    explore::load(&project_root(dir), dir).map_err(|message| {
        print_error(context, &message);
        Outcome::Usage
    })
}

/// Notes a recording made against another version of the spec: its answers may not fit.
fn note_stale_recording(loaded: &Loaded) {
    // A hand-written (unpinned) cassette has no hashes to compare.
    let changes = loaded
        .cassette
        .recorded
        .as_ref()
        .map(|recorded| {
            recorded.stale_against(&charter_runtime::formats::scenario::Recorded::from_spec(
                &loaded.spec,
            ))
        })
        .unwrap_or_default();
    if !changes.is_empty() {
        print_err(&format!(
            "note: the recording is stale ({}); its answers may no longer fit the spec\n",
            one_line(&changes.join("; "), 300)
        ));
    }
}

/// Replays every variant of the fault kinds and depth asked for, with a progress line
/// per step of a large exploration; `Err` is the usage error of a base that does not
/// replay (said on stderr).
fn explore_variants(
    args: &ExploreArgs,
    context: Context,
    loaded: &Loaded,
) -> Result<Exploration, Outcome> {
    let options = Options {
        kinds: args.faults.clone(),
        depth: args.depth,
        sample: args
            .sample
            .map(|sample| usize::try_from(sample).unwrap_or(usize::MAX)),
        seed: args.seed,
        ..Options::default()
    };
    let progress = |done: usize, total: usize| {
        if total >= 1000 {
            print_err(&format!("explore: {done}/{total} variants\n"));
        }
    };
    explore::explore(loaded, &options, &progress).map_err(|message| {
        print_error(context, &format!("{}: {message}", args.scenario.display()));
        Outcome::Usage
    })
}

/// `explored N variants in S s (R variants/s)` on stderr.
fn print_speed(count: usize, elapsed: std::time::Duration) {
    let seconds = elapsed.as_secs_f64();
    print_err(&format!(
        "explored {count} variants in {seconds:.2} s ({:.0} variants/s)\n",
        if seconds > 0.0 {
            count as f64 / seconds
        } else {
            0.0
        }
    ));
}

/// Saves each violation and distinct outcome change as a golden scenario under `dir`,
/// giving the lines that list them; `Err` is the usage error of a save that failed.
fn save_scenarios(
    context: Context,
    loaded: &Loaded,
    exploration: &Exploration,
    dir: &Path,
) -> Result<String, Outcome> {
    let saved = explore::save::save(loaded, exploration, dir).map_err(|message| {
        print_error(context, &format!("cannot save: {message}"));
        Outcome::Usage
    })?;
    let mut text = String::new();
    if saved.is_empty() {
        let _ = writeln!(
            text,
            "\nnothing to save: no violation and no outcome change"
        );
    } else {
        let _ = writeln!(text, "\nsaved {} scenario(s):", saved.len());
    }
    for scenario in &saved {
        let _ = writeln!(
            text,
            "  {}\n    {} (replays as {})",
            scenario.dir.display(),
            one_line(&scenario.why, 300),
            scenario.replayed
        );
    }
    Ok(text)
}

/// The report: the table per fault kind, the outcome changes, the unanswered variants,
/// the violations of the base and of the variants.
pub fn table(loaded: &Loaded, exploration: &Exploration, depth: u8) -> String {
    let mut out = String::new();
    write_heading(&mut out, loaded, exploration, depth);
    write_fault_table(&mut out, exploration);
    write_outcome_changes(&mut out, loaded, exploration);
    write_unanswered(&mut out, loaded, exploration);
    write_base_violations(&mut out, exploration);
    write_variant_violations(&mut out, loaded, exploration);
    out
}

/// What was explored (scenario, base ending, fault sites, variants) and the worst case
/// `charter check --bounds` allows.
fn write_heading(out: &mut String, loaded: &Loaded, exploration: &Exploration, depth: u8) {
    let total = &exploration.bounds.total;
    let bound = |value: Option<u64>, what: &str| {
        value.map_or(format!("unbounded {what}"), |value| {
            format!("{value} {what}")
        })
    };
    let _ = writeln!(
        out,
        "explore {}: base {}, {} fault sites, {} variants (depth {depth})",
        loaded.name,
        exploration.base,
        exploration.sites,
        exploration.variants.len()
    );
    if let Some(seed) = exploration.sampled {
        let _ = writeln!(
            out,
            "sample: {} of {} variants, drawn with seed {seed} (--seed {seed} draws the same)",
            exploration.variants.len(),
            exploration.space
        );
    }
    let _ = writeln!(
        out,
        "worst case (check --bounds): {}, {}, {}\n",
        bound(total.calls, "calls"),
        bound(total.steps, "steps"),
        total
            .wall_ms
            .map_or("unbounded wall time".to_string(), |ms| format!(
                "{} wall time",
                format_ms(ms)
            ))
    );
}

/// One row per fault kind (variants, same, changed, unanswered, violations) and a total;
/// a variant with faults of several kinds counts in the row of each, and once in the total.
fn write_fault_table(out: &mut String, exploration: &Exploration) {
    let rows = exploration.rows();
    let width = rows
        .keys()
        .map(|kind| kind.name().len())
        .max()
        .unwrap_or(5)
        .max(5);
    let _ = writeln!(
        out,
        "{:<width$}  {:>8}  {:>6}  {:>7}  {:>10}  {:>10}",
        "fault", "variants", "same", "changed", "unanswered", "violations"
    );
    for (kind, counts) in &rows {
        let _ = writeln!(
            out,
            "{:<width$}  {:>8}  {:>6}  {:>7}  {:>10}  {:>10}",
            kind.name(),
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            counts[4]
        );
    }
    let sums = exploration.total();
    let _ = writeln!(
        out,
        "{:<width$}  {:>8}  {:>6}  {:>7}  {:>10}  {:>10}",
        "total", sums[0], sums[1], sums[2], sums[3], sums[4]
    );
    if exploration
        .variants
        .iter()
        .any(|variant| variant.faults.len() > 1)
    {
        let _ = writeln!(
            out,
            "(a variant with faults of several kinds counts in the row of each, once in the total)"
        );
    }
}

/// Each ending other than the base's: how many variants reach it, of which fault kinds,
/// and the example with the fewest faults.
fn write_outcome_changes(out: &mut String, loaded: &Loaded, exploration: &Exploration) {
    let changes = exploration.changes();
    if changes.is_empty() {
        let _ = writeln!(
            out,
            "\nno outcome change: every variant ends as the base does"
        );
        return;
    }
    let _ = writeln!(out, "\noutcome changes (from {}):", exploration.base);
    for (termination, variants) in &changes {
        let kinds: BTreeSet<String> = variants.iter().map(|v| Exploration::row_of(v)).collect();
        let example = variants
            .iter()
            .min_by_key(|variant| variant.faults.len())
            .map(|variant| faults_text(loaded, &variant.faults))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} -> {termination}: {} variant(s) ({}), e.g. {example}",
            exploration.base,
            variants.len(),
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
}

/// The variants that made a call the recording holds no answer for (the first 20).
fn write_unanswered(out: &mut String, loaded: &Loaded, exploration: &Exploration) {
    let unanswered: Vec<_> = exploration
        .variants
        .iter()
        .filter_map(|variant| match &variant.ending {
            Ending::Unanswered(why) => Some((variant, why)),
            _ => None,
        })
        .collect();
    if unanswered.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nunanswered (the recording holds no answer for a call these variants make):"
    );
    for (variant, why) in unanswered.iter().take(20) {
        let _ = writeln!(out, "  {}: {why}", faults_text(loaded, &variant.faults));
    }
    if unanswered.len() > 20 {
        let _ = writeln!(out, "  ... and {} more", unanswered.len() - 20);
    }
}

/// The properties the base scenario breaks without any fault, when it breaks any.
fn write_base_violations(out: &mut String, exploration: &Exploration) {
    if exploration.base_violations.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nthe base scenario itself (no fault) breaks:");
    for violation in &exploration.base_violations {
        write_violation(out, violation);
    }
}

/// Each variant that broke a property, with its faults and what it broke.
fn write_variant_violations(out: &mut String, loaded: &Loaded, exploration: &Exploration) {
    let violations: Vec<_> = exploration.violations().collect();
    if violations.is_empty() {
        let _ = writeln!(out, "\nno violation: P1-P5 hold on every variant");
        return;
    }
    let _ = writeln!(out, "\n{} variant(s) with violations:", violations.len());
    for variant in violations {
        let _ = writeln!(out, "  faults: {}", faults_text(loaded, &variant.faults));
        for violation in &variant.violations {
            write_violation(out, violation);
        }
    }
}

/// `    P3 (delivery): MESSAGE`.
fn write_violation(out: &mut String, violation: &explore::Violation) {
    let _ = writeln!(
        out,
        "    {} ({}): {}",
        violation.property,
        short_promise(violation.property),
        one_line(&violation.message, 500)
    );
}

fn short_promise(property: Property) -> &'static str {
    match property {
        Property::P1 => "terminal state",
        Property::P2 => "bounds",
        Property::P3 => "delivery",
        Property::P4 => "budget",
        Property::P5 => "invariant",
    }
}

fn faults_text(loaded: &Loaded, faults: &[explore::Fault]) -> String {
    faults
        .iter()
        .map(|fault| one_line(&fault.describe(&loaded.cassette), 200))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The directory that holds `golden/` above the scenario, else the current directory.
fn project_root(scenario: &Path) -> PathBuf {
    let absolute = std::path::absolute(scenario).unwrap_or_else(|_| scenario.to_path_buf());
    absolute
        .ancestors()
        .find(|ancestor| ancestor.file_name().is_some_and(|name| name == "golden"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
