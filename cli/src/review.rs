//! `charter review [DIR]`: walk the stale recordings and the pending snapshots (`trace.snap.new`) that `charter verify` found, showing each diff, and accept, reject or skip each one.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use charter_runtime::harness::event_diff::event_diff;
use charter_runtime::harness::report::colorize;
use charter_runtime::harness::snapshot::{
    Pending, accept_pending, pending_contents, pending_path, pending_snapshots, reject_pending,
};
use charter_runtime::harness::{
    HarnessConfig, HarnessError, ProblemKind, SNAPSHOT_FILE, ScenarioReport, SpecCache, Status,
    discover, read_scenario, verify_project, verify_scenario,
};
use clap::Args;

use crate::loader::display_path;
use crate::terminal::{Context, Outcome, print_err, print_error, print_out};

/// Review what `charter verify` found changed: each stale recording (a call whose prompt
/// changed since it was recorded, or a cassette recorded under another spec), shown with
/// the prompt diff, and each pending `trace.snap.new`, shown as its diff against
/// `trace.snap` (event by event, field by field). Answer `a` to accept (a stale recording
/// keeps its answers and is pinned to the prompts of now, and its snapshot is written; a
/// pending snapshot becomes `trace.snap`), `A` to accept this and everything after it,
/// `r` to reject (the pending file is deleted; a stale recording stays stale) or `s` to
/// skip. Answers are read one line at a time from stdin; end of input skips what is left.
///
/// Exit status: 0 when nothing is left pending or stale, 1 when some were skipped or
/// rejected recordings stay stale, 2 on a usage error. `--all` accepts everything without
/// asking; `charter verify --accept` accepts every snapshot but never a stale call.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  charter verify; charter review\n  charter review --all      # accept every pending snapshot and stale recording"
)]
pub struct ReviewArgs {
    /// The project root: the directory that holds `golden/`.
    #[arg(value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Accept everything pending without asking (as answering `A` to the first).
    #[arg(long)]
    pub all: bool,
}

/// What was decided for one pending snapshot or stale recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Accept,
    Reject,
    Skip,
}

/// One thing to review: a stale recording (with what verify said of it) or a pending
/// snapshot.
enum Item {
    Stale(Box<ScenarioReport>),
    Snapshot(Pending),
}

/// How many of each decision were taken.
#[derive(Default)]
struct Tally {
    accepted: usize,
    rejected: usize,
    skipped: usize,
    /// Rejected stale recordings: still stale.
    left_stale: usize,
}

pub fn run(args: &ReviewArgs, context: Context) -> anyhow::Result<Outcome> {
    if !args.dir.is_dir() {
        print_error(
            context,
            &format!("`{}` is not a directory", display_path(&args.dir)),
        );
        return Ok(Outcome::Usage);
    }
    let items = match items(&args.dir) {
        Ok(items) => items,
        Err(error) => {
            print_error(context, &error.to_string());
            return Ok(Outcome::Usage);
        }
    };
    if items.is_empty() {
        print_out(
            "nothing to review: no stale recording, and no pending snapshot (`charter verify` writes one beside each changed or new trace.snap)\n",
        )?;
        return Ok(Outcome::Clean);
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut all = args.all;
    let mut tally = Tally::default();
    for (index, item) in items.iter().enumerate() {
        show(item, index + 1, items.len(), context)?;
        let decision = if all {
            Decision::Accept
        } else {
            let (decision, rest) = ask(&mut lines, context);
            all = rest;
            decision
        };
        decide(&args.dir, item, decision, context, &mut tally)?;
    }
    print_out(&format!(
        "\n{} accepted, {} rejected, {} skipped\n",
        tally.accepted, tally.rejected, tally.skipped
    ))?;
    Ok(if tally.skipped == 0 && tally.left_stale == 0 {
        Outcome::Clean
    } else {
        Outcome::Failed
    })
}

/// The stale recordings (found by verifying the project, which also refreshes every
/// pending snapshot), then the pending snapshots of the other scenarios.
fn items(root: &Path) -> Result<Vec<Item>, HarnessError> {
    let config = HarnessConfig {
        pending_snapshots: true,
        determinism: false,
        ..HarnessConfig::default()
    };
    let reports = verify_project(root, &config)?;
    let stale: Vec<ScenarioReport> = reports
        .into_iter()
        .filter(|report| report.status == Status::Stale)
        .collect();
    let mut items: Vec<Item> = Vec::new();
    let stale_ids: Vec<String> = stale.iter().map(ScenarioReport::id).collect();
    items.extend(
        stale
            .into_iter()
            .map(|report| Item::Stale(Box::new(report))),
    );
    items.extend(
        pending_snapshots(root)?
            .into_iter()
            .filter(|pending| !stale_ids.contains(&pending.id))
            .map(Item::Snapshot),
    );
    Ok(items)
}

/// Reads answers until one is understood: the decision, and whether it was `A` (accept
/// this and everything after it).
fn ask(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    context: Context,
) -> (Decision, bool) {
    loop {
        print_err("[a]ccept  [A]ccept all  [r]eject  [s]kip > ");
        match lines.next() {
            None => return (Decision::Skip, false),
            Some(Err(error)) => {
                print_error(context, &format!("cannot read the answer: {error}"));
                return (Decision::Skip, false);
            }
            Some(Ok(line)) => match line.trim() {
                "a" | "accept" => return (Decision::Accept, false),
                "A" | "all" => return (Decision::Accept, true),
                "r" | "R" | "reject" => return (Decision::Reject, false),
                "s" | "S" | "skip" => return (Decision::Skip, false),
                other => print_err(&format!("`{other}`: answer a, A, r or s\n")),
            },
        }
    }
}

/// Carries out `decision` on `item` and counts it.
fn decide(
    root: &Path,
    item: &Item,
    decision: Decision,
    context: Context,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let (id, done) = match (item, decision) {
        (_, Decision::Skip) => (item_id(item), Ok("skipped")),
        (Item::Snapshot(snapshot), Decision::Accept) => (
            snapshot.id.clone(),
            accept_pending(snapshot)
                .map(|()| "accepted")
                .map_err(|error| error.to_string()),
        ),
        (Item::Snapshot(snapshot), Decision::Reject) => (
            snapshot.id.clone(),
            reject_pending(snapshot)
                .map(|()| "rejected")
                .map_err(|error| error.to_string()),
        ),
        (Item::Stale(report), Decision::Accept) => (report.id(), repin(root, report)),
        (Item::Stale(report), Decision::Reject) => {
            tally.left_stale += 1;
            (report.id(), Ok("rejected (still stale: re-record it)"))
        }
    };
    match done {
        Ok(word) => {
            match decision {
                Decision::Accept => tally.accepted += 1,
                Decision::Reject => tally.rejected += 1,
                Decision::Skip => tally.skipped += 1,
            }
            print_out(&format!("{word} {id}\n"))
        }
        Err(error) => {
            tally.skipped += 1;
            print_error(context, &format!("cannot update `{id}`: {error}"));
            Ok(())
        }
    }
}

fn item_id(item: &Item) -> String {
    match item {
        Item::Stale(report) => report.id(),
        Item::Snapshot(snapshot) => snapshot.id.clone(),
    }
}

/// Keeps a stale recording's answers for the prompts of now: its `recorded` block and
/// each stale call's `prompt_hash` are refreshed and its snapshot written, as `verify
/// --accept` would for this scenario alone, stale calls included.
fn repin(root: &Path, report: &ScenarioReport) -> Result<&'static str, String> {
    let id = report.id();
    let scenarios = discover(root).map_err(|error| error.to_string())?;
    let reference = scenarios
        .into_iter()
        .find(|scenario| scenario.id() == id)
        .ok_or("the scenario is gone")?;
    let config = HarnessConfig {
        accept: true,
        repin: true,
        determinism: false,
        ..HarnessConfig::default()
    };
    let file = read_scenario(&reference);
    let after = verify_scenario(root, &reference, &file, &config, &mut SpecCache::new());
    let _ = std::fs::remove_file(pending_path(&reference.dir.join(SNAPSHOT_FILE)));
    if after.status.passed() {
        Ok("accepted (re-pinned)")
    } else {
        let problems: Vec<&str> = after
            .problems
            .iter()
            .map(|problem| problem.message.as_str())
            .collect();
        Err(format!("it still fails: {}", problems.join("; ")))
    }
}

/// The heading and what verify said of one item.
fn show(item: &Item, number: usize, total: usize, context: Context) -> anyhow::Result<()> {
    match item {
        Item::Snapshot(snapshot) => show_snapshot(snapshot, number, total, context),
        Item::Stale(report) => {
            print_out(&format!(
                "\n[{number}/{total}] {} (stale recording)\n",
                report.id()
            ))?;
            let mut text = String::new();
            for problem in report
                .problems
                .iter()
                .filter(|problem| problem.kind == ProblemKind::Stale)
            {
                text.push_str(&format!("{}\n", problem.message));
                if let Some(detail) = &problem.detail {
                    text.push_str(detail);
                }
            }
            let text = charter_runtime::world::escape::block(
                &text,
                charter_runtime::world::escape::MAX_BLOCK_CHARS,
            );
            if context.color_out {
                print_out(&colorize(&text))
            } else {
                print_out(&text)
            }
        }
    }
}

/// The heading and the diff of one pending snapshot.
fn show_snapshot(
    snapshot: &Pending,
    number: usize,
    total: usize,
    context: Context,
) -> anyhow::Result<()> {
    let heading = if snapshot.snapshot.exists() {
        "changed"
    } else {
        "new"
    };
    print_out(&format!(
        "\n[{number}/{total}] {} ({heading}): {}\n",
        snapshot.id,
        display_path(&snapshot.pending)
    ))?;
    let diff = match pending_contents(snapshot) {
        Ok((old, new)) => event_diff(&old, &new, "trace.snap", "trace.snap.new"),
        Err(error) => format!("(cannot read it: {error})\n"),
    };
    let diff = if diff.is_empty() {
        "(the same events: only the header differs)\n".to_string()
    } else {
        charter_runtime::world::escape::block(
            &diff,
            charter_runtime::world::escape::MAX_BLOCK_CHARS,
        )
    };
    if context.color_out {
        print_out(&colorize(&diff))
    } else {
        print_out(&diff)
    }
}
