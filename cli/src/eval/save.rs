//! `charter eval --save-failures DIR`: each failing run written as a golden scenario, `DIR/line<L>-run<R>/`, that replays offline to the same failure: the input, the line's `expect` (what should have happened), the run's cassette and the trace snapshot of what did.
//!
//! Each is staged and checked by the harness before it is written (see
//! `harness::record::write_failure`): its replay must reach the recorded trace, and its
//! only problems must be the unmet `expect`. A run that stopped on an error has no
//! replayable recording and is only reported.

use std::path::{Path, PathBuf};

use charter_runtime::formats::scenario::Scenario;
use charter_runtime::harness::eval::{EvalLine, expectation_to_keep};
use charter_runtime::harness::record::{NewScenario, RecordingError, write_failure};

use super::runner::{FailedRun, Finished};
use super::{EvalArgs, Ready, shown};
use crate::terminal::{Context, Outcome, print_err, print_error, summary_line};

/// Writes every failed run of `finished` into `dir`; `Err` when one could not be written
/// (each said on stderr; the others are still written).
pub(crate) fn save_failures(
    context: Context,
    args: &EvalArgs,
    dir: &Path,
    ready: &Ready,
    finished: &Finished,
) -> Result<(), Outcome> {
    let root = crate::recording::recording_root(dir);
    let spec = crate::recording::scenario_spec(&args.spec, dir);
    let mut failed: Vec<&FailedRun> = finished.failed.iter().collect();
    failed.sort_by_key(|run| (run.result.line, run.result.repeat, run.result.set));
    let mut result = Ok(());
    let mut saved = 0;
    for run in failed {
        let Some(line) = ready.lines.iter().find(|line| line.line == run.result.line) else {
            continue;
        };
        let target = free_dir(dir, &name_of(run, ready));
        let scenario = Scenario {
            spec: spec.clone(),
            description: Some(description(line, run, ready)),
            input: ready.environment.scrubber.value(&line.input),
            turns: None,
            expect: Some(expectation_to_keep(line)),
        };
        let written = write_failure(&NewScenario {
            root: &root,
            dir: &target,
            scenario,
            cassette: run.cassette.clone(),
        });
        match written {
            Ok(_) => saved += 1,
            Err(error) => {
                result = Err(Outcome::Failed);
                print_error(
                    context,
                    &format!(
                        "cannot save the failing run {} to `{}`: {}",
                        name_of(run, ready),
                        shown(&target),
                        why(&error)
                    ),
                );
            }
        }
    }
    let errors = finished
        .results
        .iter()
        .filter(|run| run.ending == "error")
        .count();
    if errors > 0 {
        print_err(&summary_line(
            context,
            "note",
            &format!(
                "{errors} run{} stopped on an error and left no recording to save",
                if errors == 1 { "" } else { "s" }
            ),
        ));
    }
    if saved > 0 {
        print_err(&format!(
            "saved {saved} failing run{} under {} (`charter verify` replays each to its failure)\n",
            if saved == 1 { "" } else { "s" },
            shown(dir)
        ));
    }
    result
}

/// `line3-run2`, with the model set after it when there are several (`line3-run2-large`).
fn name_of(run: &FailedRun, ready: &Ready) -> String {
    let base = format!("line{}-run{}", run.result.line, run.result.repeat);
    if ready.sets.len() == 1 {
        return base;
    }
    let set: String = ready.sets[run.result.set]
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{base}-{set}")
}

/// `dir/name`, or `dir/name-2`, `-3`... when it is taken: a saved failure never replaces
/// a scenario already there.
fn free_dir(dir: &Path, name: &str) -> PathBuf {
    let first = dir.join(name);
    if !first.exists() {
        return first;
    }
    (2..)
        .map(|number| dir.join(format!("{name}-{number}")))
        .find(|path| !path.exists())
        .unwrap_or(first)
}

fn description(line: &EvalLine, run: &FailedRun, ready: &Ready) -> String {
    let set = if ready.sets.len() > 1 {
        format!(" on model set {}", ready.sets[run.result.set].name)
    } else {
        String::new()
    };
    format!(
        "live eval failure: {}, run {}{set}: {}",
        line.label(),
        run.result.repeat,
        run.result.unmet.join("; ")
    )
}

fn why(error: &RecordingError) -> String {
    match error {
        RecordingError::Check(report) => {
            let problems: Vec<&str> = report
                .problems
                .iter()
                .map(|problem| problem.message.as_str())
                .collect();
            format!(
                "its replay does not reach the same failure ({})",
                problems.join("; ")
            )
        }
        other => other.to_string(),
    }
}
