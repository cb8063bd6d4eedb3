//! `charter verify --rerecord --missing-only` (VCR's `new_episodes`): the cassette answers the calls it holds, a live model only those it lacks (a step added since the recording); `--accept` inserts exactly those entries into the cassette's text, in run order, the entries already there kept byte for byte ([`insert_calls`]).

use std::fmt::Write as _;

use charter_runtime::formats::scenario::{CallKey, Recorded, RecordedCall};
use charter_runtime::harness::rerecord::insert_calls;
use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};
use charter_runtime::world::fork::Fork;

use super::drift::{drift_rows, drift_table};
use super::{Done, Selected, VerifyArgs, run_live, write_checked};
use crate::driver::LiveEnvironment;
use crate::terminal::{Context, print_err, summary_line};

/// Replays `one` asking a live model only for what its cassette lacks; reports the keys
/// to add and the drift, and adds them with `--accept`.
pub(super) fn rerecord(
    args: &VerifyArgs,
    one: &Selected,
    environment: &LiveEnvironment,
    context: Context,
) -> Result<Done, String> {
    let fork = Fork::missing_only(one.cassette.clone());
    let ran = run_live(one, environment, &fork, Recorded::from_spec(&one.spec))?;
    for stale in fork.stale_prompts() {
        print_err(&summary_line(
            context,
            "warning",
            &format!(
                "{}: the recorded answer of {} was given to another prompt of `{}`",
                one.reference.id(),
                stale.key,
                stale.role
            ),
        ));
    }
    let holds = |key: &CallKey| one.cassette.calls.iter().any(|call| call.key() == *key);
    let run_order: Vec<CallKey> = ran.recorded.calls.iter().map(RecordedCall::key).collect();
    let added: Vec<RecordedCall> = ran
        .recorded
        .calls
        .into_iter()
        .filter(|call| !holds(&call.key()))
        .collect();
    let drift = drift_rows(&ran.golden, &ran.now);
    let mut done = Done {
        report: describe(one, &added),
        changed: !added.is_empty() || !drift.is_empty(),
        not_written: None,
    };
    done.report.push_str(&drift_table(&ran.now, &drift));
    if args.accept && !added.is_empty() {
        match accept(args, one, &run_order, &added) {
            Ok(line) => done.report.push_str(&line),
            Err(message) => done.not_written = Some(message),
        }
    }
    Ok(done)
}

/// The keys the scenario's cassette would gain.
fn describe(one: &Selected, added: &[RecordedCall]) -> String {
    let mut out = String::new();
    let id = one_line(&one.reference.id(), MAX_LINE_CHARS);
    if added.is_empty() {
        let _ = writeln!(out, "{id}: the cassette lacks no call");
        return out;
    }
    let _ = writeln!(out, "{id}: {} call(s) to add:", added.len());
    for call in added {
        let _ = writeln!(
            out,
            "  + {}",
            one_line(&call.key().to_string(), MAX_LINE_CHARS)
        );
    }
    out
}

/// Inserts the new calls into the cassette's text and writes it with the new trace
/// snapshot, once the scenario with them verifies (see [`write_checked`]).
fn accept(
    args: &VerifyArgs,
    one: &Selected,
    run_order: &[CallKey],
    added: &[RecordedCall],
) -> Result<String, String> {
    let (text, _) = insert_calls(&one.text, &one.cassette, run_order, added)?;
    write_checked(args, one, &text)?;
    Ok(format!(
        "  added {} call(s) to {}, and wrote its trace.snap\n",
        added.len(),
        one_line(&one.reference.shown("cassette.yaml"), MAX_LINE_CHARS)
    ))
}
