//! `charter review [DIR]`: walk the pending snapshots (`trace.snap.new`) that `charter verify` left, showing each diff, and accept, reject or skip each one.

use std::io::BufRead;
use std::path::PathBuf;

use charter_runtime::harness::event_diff::event_diff;
use charter_runtime::harness::report::colorize;
use charter_runtime::harness::snapshot::{
    Pending, accept_pending, pending_contents, pending_snapshots, reject_pending,
};
use clap::Args;

use crate::loader::display_path;
use crate::{Context, Outcome, print_err, print_error, print_out};

/// Review the snapshots `charter verify` found changed or new: for each pending
/// `trace.snap.new`, show the diff against `trace.snap` (event by event, field by field)
/// and answer `a` to accept it (it becomes `trace.snap`), `r` to reject it (it is
/// deleted, `trace.snap` stays) or `s` to skip it (it stays pending). Answers are read
/// one line at a time from stdin; end of input skips what is left.
///
/// Exit status: 0 when nothing is left pending, 1 when some were skipped, 2 on a usage
/// error. `charter verify --accept` accepts every change at once.
#[derive(Debug, Args)]
#[command(after_help = "Example: charter verify; charter review")]
pub struct ReviewArgs {
    /// The project root: the directory that holds `golden/`.
    #[arg(value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
}

/// What was decided for one pending snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Accept,
    Reject,
    Skip,
}

pub fn run(args: &ReviewArgs, context: Context) -> anyhow::Result<Outcome> {
    if !args.dir.is_dir() {
        print_error(
            context,
            &format!("`{}` is not a directory", display_path(&args.dir)),
        );
        return Ok(Outcome::Usage);
    }
    let pending = match pending_snapshots(&args.dir) {
        Ok(pending) => pending,
        Err(error) => {
            print_error(context, &error.to_string());
            return Ok(Outcome::Usage);
        }
    };
    if pending.is_empty() {
        print_out(
            "no pending snapshots: `charter verify` writes one beside each changed or new trace.snap\n",
        )?;
        return Ok(Outcome::Clean);
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let (mut accepted, mut rejected, mut skipped) = (0, 0, 0);
    for (index, snapshot) in pending.iter().enumerate() {
        show(snapshot, index + 1, pending.len(), context)?;
        let decision = loop {
            print_err("[a]ccept  [r]eject  [s]kip > ");
            match lines.next() {
                None => break Decision::Skip,
                Some(Err(error)) => {
                    print_error(context, &format!("cannot read the answer: {error}"));
                    break Decision::Skip;
                }
                Some(Ok(line)) => match line.trim() {
                    "a" | "A" | "accept" => break Decision::Accept,
                    "r" | "R" | "reject" => break Decision::Reject,
                    "s" | "S" | "skip" => break Decision::Skip,
                    other => print_err(&format!("`{other}`: answer a, r or s\n")),
                },
            }
        };
        let done = match decision {
            Decision::Accept => accept_pending(snapshot).map(|()| "accepted"),
            Decision::Reject => reject_pending(snapshot).map(|()| "rejected"),
            Decision::Skip => Ok("skipped"),
        };
        match done {
            Ok(word) => {
                match decision {
                    Decision::Accept => accepted += 1,
                    Decision::Reject => rejected += 1,
                    Decision::Skip => skipped += 1,
                }
                print_out(&format!("{word} {}\n", snapshot.id))?;
            }
            Err(error) => {
                skipped += 1;
                print_error(
                    context,
                    &format!(
                        "cannot update `{}`: {error}",
                        display_path(&snapshot.snapshot)
                    ),
                );
            }
        }
    }
    print_out(&format!(
        "\n{accepted} accepted, {rejected} rejected, {skipped} skipped\n"
    ))?;
    Ok(if skipped == 0 {
        Outcome::Clean
    } else {
        Outcome::Failed
    })
}

/// The heading and the diff of one pending snapshot.
fn show(snapshot: &Pending, number: usize, total: usize, context: Context) -> anyhow::Result<()> {
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
