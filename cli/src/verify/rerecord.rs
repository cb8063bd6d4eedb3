//! `charter verify --rerecord --missing-only [--filter PAT] [--accept]`: each selected golden scenario replayed with a live model asked only for the calls its cassette lacks (DESIGN §17), VCR's `new_episodes`.
//!
//! Everything is checked before anything is asked: each scenario's spec compiles with
//! the recording's `--model` overrides and those given again, and every provider it
//! names has its key (a missing key is a usage error). Each scenario then runs through a
//! [`Fork::missing_only`] (the cassette answers what it holds, the live providers the
//! rest) inside a [`Recording`], so the run order of every call is known. Per scenario
//! the report lists the keys that would be added and the drift against the golden trace
//! (outcome, reason, delivered candidate, gate scores; golden → now). Without
//! `--accept` nothing is written and a change exits 1; with it the new entries are
//! inserted into the cassette's text in run order (the entries already there stay byte
//! for byte, see [`insert_calls`]), written atomically, and the scenario is then
//! verified with `--accept`, which refreshes the `recorded` block and the trace
//! snapshot, so a following `charter verify` passes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use charter_compiler::CompiledSpec;
use charter_runtime::engine::models::apply_overrides;
use charter_runtime::engine::run::{DeliveryTarget, RunConfig};
use charter_runtime::formats::scenario::{CallKey, Cassette, Recorded, RecordedCall, Scenario};
use charter_runtime::formats::trace::{TraceError, TraceEvent, TraceSink};
use charter_runtime::harness::record::{RecordingError, write_added_calls};
use charter_runtime::harness::rerecord::insert_calls;
use charter_runtime::harness::{HarnessConfig, ScenarioRef};
use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};
use charter_runtime::world::fork::Fork;
use charter_runtime::world::record::Recording;
use serde_json::Value;

use super::{VerifyArgs, VerifyFormat};
use crate::driver::{
    LiveEnvironment, LiveRun, TerminalHumans, TerminalRunOptions, model_overrides,
};
use crate::{Context, Outcome, print_err, print_error, print_out, summary_line};

/// One selected scenario, read and compiled, ready to run.
struct Selected {
    reference: ScenarioRef,
    scenario: Scenario,
    text: String,
    cassette: Cassette,
    spec: CompiledSpec,
}

/// What re-recording one scenario found.
struct Found {
    added: Vec<RecordedCall>,
    run_order: Vec<CallKey>,
    golden: Summary,
    now: Summary,
}

/// `charter verify --rerecord`.
pub fn run(args: &VerifyArgs, context: Context) -> anyhow::Result<Outcome> {
    if !args.missing_only {
        print_error(
            context,
            "--rerecord alone (every call asked live again) is not built yet: use \
             --rerecord --missing-only to ask a model only for the calls a cassette lacks",
        );
        return Ok(Outcome::Usage);
    }
    if args.format == VerifyFormat::Json {
        print_error(
            context,
            "--rerecord prints its report as text; leave out --format json",
        );
        return Ok(Outcome::Usage);
    }
    let selected = match select(args, context) {
        Ok(selected) => selected,
        Err(outcome) => return Ok(outcome),
    };
    let environment = LiveEnvironment::of_this_process();
    let mut checked = Vec::new();
    for one in selected {
        let missing = environment.settings.missing_for(&one.spec);
        if !missing.is_empty() {
            for line in missing {
                print_error(context, &line);
            }
            return Ok(Outcome::Usage);
        }
        checked.push(one);
    }
    if checked.is_empty() {
        print_error(
            context,
            &format!(
                "no golden scenario of one run matches{}",
                args.filter
                    .as_ref()
                    .map(|pattern| format!(" --filter `{pattern}`"))
                    .unwrap_or_default()
            ),
        );
        return Ok(Outcome::Usage);
    }
    let mut changed = false;
    let mut failed = false;
    let mut report = String::new();
    for one in &checked {
        let found = match rerecord(one, &environment, context) {
            Ok(found) => found,
            Err(message) => {
                print_error(context, &format!("{}: {message}", one.reference.id()));
                failed = true;
                continue;
            }
        };
        let drift = drift_rows(&found.golden, &found.now);
        changed |= !found.added.is_empty() || !drift.is_empty();
        report.push_str(&describe(one, &found, &drift));
        if args.accept && !found.added.is_empty() {
            match accept(args, one, &found) {
                Ok(line) => report.push_str(&line),
                Err(message) => {
                    print_error(context, &format!("{}: {message}", one.reference.id()));
                    failed = true;
                }
            }
        }
    }
    print_out(&report)?;
    Ok(if failed || (changed && !args.accept) {
        if changed && !args.accept && !failed {
            print_err(&summary_line(
                context,
                "note",
                "nothing was written; give --accept to add these calls to the cassettes",
            ));
        }
        Outcome::Failed
    } else {
        Outcome::Clean
    })
}

/// The selected scenarios of one run, each with its spec compiled with the recording's
/// `--model` overrides and those given; a scenario that cannot be read is a usage error.
fn select(args: &VerifyArgs, context: Context) -> Result<Vec<Selected>, Outcome> {
    let usage = |message: &str| {
        print_error(context, message);
        Outcome::Usage
    };
    let config = HarnessConfig {
        filter: args.filter.clone(),
        partition: args.partition,
        ..HarnessConfig::default()
    };
    let found =
        charter_runtime::harness::discover(&args.dir).map_err(|error| usage(&error.to_string()))?;
    let given = model_overrides(context, &args.models)?;
    let mut selected = Vec::new();
    for reference in charter_runtime::harness::select(found, &config) {
        let shown = reference.shown("cassette.yaml");
        let scenario = Scenario::read(&reference.dir.join("scenario.yaml"))
            .map_err(|error| usage(&error.to_string()))?;
        if scenario.turns.is_some() {
            print_err(&summary_line(
                context,
                "note",
                &format!(
                    "{} is a conversation (`turns`): it is not re-recorded",
                    reference.id()
                ),
            ));
            continue;
        }
        let text = std::fs::read_to_string(reference.dir.join("cassette.yaml"))
            .map_err(|error| usage(&format!("cannot read {shown}: {error}")))?;
        let cassette = Cassette::from_yaml(&shown, &text)
            .map_err(|error| usage(&one_line(&error.to_string(), MAX_LINE_CHARS)))?;
        let (mut spec, _) = crate::replay::compile_scenario_spec(
            context,
            &reference.dir,
            &scenario,
            "re-recorded",
        )?;
        let mut overrides = cassette.overrides();
        overrides.extend(given.clone());
        apply_overrides(&mut spec, &overrides).map_err(|message| usage(&message))?;
        selected.push(Selected {
            reference,
            scenario,
            text,
            cassette,
            spec,
        });
    }
    Ok(selected)
}

/// The events of a run, kept where the caller can read them after the run.
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<TraceEvent>>>);

impl TraceSink for Kept {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(event.clone());
        Ok(())
    }
}

/// Runs `one` with the cassette answering what it holds and the live providers the rest.
fn rerecord(
    one: &Selected,
    environment: &LiveEnvironment,
    context: Context,
) -> Result<Found, String> {
    let providers = environment
        .providers(&one.spec, &[])
        .map_err(|error| one_line(&error, MAX_LINE_CHARS))?;
    let fork = Fork::missing_only(one.cassette.clone());
    let recording = Recording::new(environment.secrets.clone());
    let kept = Kept::default();
    let options = TerminalRunOptions {
        show_output: false,
        more_sinks: vec![Box::new(kept.clone())],
        config: RunConfig {
            delivery: DeliveryTarget::Memory,
            ..RunConfig::default()
        },
    };
    print_err(&format!("re-record {}\n", one.reference.id()));
    let live_run = LiveRun::at_terminal_through(
        &one.spec,
        environment,
        (fork.provider(providers), fork.humans(TerminalHumans)),
        &recording,
        options,
    );
    live_run.run(one.scenario.input.clone())?;
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
    let recorded = recording.cassette(Recorded::from_spec(&one.spec));
    let new_humans = recorded.humans.iter().any(|human| {
        !one.cassette.humans.iter().any(|old| {
            old.step == human.step && old.round == human.round && old.attempt == human.attempt
        })
    });
    if new_humans {
        return Err(
            "the run asked a person a question the cassette has no answer for; record it \
             with `charter run --record` instead"
                .to_string(),
        );
    }
    let holds = |key: &CallKey| one.cassette.calls.iter().any(|call| call.key() == *key);
    let run_order: Vec<CallKey> = recorded.calls.iter().map(RecordedCall::key).collect();
    let added = recorded
        .calls
        .into_iter()
        .filter(|call| !holds(&call.key()))
        .collect();
    let events = kept
        .0
        .lock()
        .map(|events| events.clone())
        .unwrap_or_default();
    let now: Vec<Value> = events
        .iter()
        .filter_map(|event| serde_json::to_value(event).ok())
        .collect();
    let golden = std::fs::read_to_string(one.reference.dir.join("trace.snap"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect::<Vec<Value>>();
    Ok(Found {
        added,
        run_order,
        golden: Summary::of(&golden),
        now: Summary::of(&now),
    })
}

/// What the drift table compares: how the run ended and what its gates scored.
#[derive(Default, PartialEq)]
struct Summary {
    outcome: String,
    reason: String,
    delivered: String,
    /// `gate candidate` → `score` (or `passed`/`failed` for a gate without a score).
    gates: BTreeMap<String, String>,
}

impl Summary {
    fn of(events: &[Value]) -> Summary {
        let mut summary = Summary::default();
        let text = |event: &Value, field: &str| match event.get(field) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        for event in events {
            match event.get("kind").and_then(Value::as_str) {
                Some("run_finished") => {
                    summary.outcome = text(event, "outcome");
                    summary.reason = text(event, "reason");
                    summary.delivered = match event.get("delivered").and_then(Value::as_bool) {
                        Some(true) => text(event, "best"),
                        _ => "-".to_string(),
                    };
                }
                Some("gate") => {
                    let score = match event.get("score").and_then(Value::as_f64) {
                        Some(score) => format!("{score}"),
                        None => match event.get("passed").and_then(Value::as_bool) {
                            Some(true) => "passed".to_string(),
                            _ => "failed".to_string(),
                        },
                    };
                    let name = format!("gate {} {}", text(event, "gate"), text(event, "candidate"));
                    summary.gates.insert(name, score);
                }
                _ => {}
            }
        }
        summary
    }
}

/// The rows that differ between the golden and now: (what, golden, now).
fn drift_rows(golden: &Summary, now: &Summary) -> Vec<(String, String, String)> {
    let mut rows = Vec::new();
    for (what, old, new) in [
        ("outcome", &golden.outcome, &now.outcome),
        ("reason", &golden.reason, &now.reason),
        ("delivered", &golden.delivered, &now.delivered),
    ] {
        if old != new {
            rows.push((what.to_string(), old.clone(), new.clone()));
        }
    }
    let names: std::collections::BTreeSet<&String> =
        golden.gates.keys().chain(now.gates.keys()).collect();
    for name in names {
        let old = golden
            .gates
            .get(name)
            .cloned()
            .unwrap_or_else(|| "-".to_string());
        let new = now
            .gates
            .get(name)
            .cloned()
            .unwrap_or_else(|| "-".to_string());
        if old != new {
            rows.push((name.clone(), old, new));
        }
    }
    rows
}

/// The scenario's report: the keys to add and the drift table.
fn describe(one: &Selected, found: &Found, drift: &[(String, String, String)]) -> String {
    let mut out = String::new();
    let id = one_line(&one.reference.id(), MAX_LINE_CHARS);
    if found.added.is_empty() {
        let _ = writeln!(out, "{id}: the cassette lacks no call");
    } else {
        let _ = writeln!(out, "{id}: {} call(s) to add:", found.added.len());
        for call in &found.added {
            let _ = writeln!(
                out,
                "  + {}",
                one_line(&call.key().to_string(), MAX_LINE_CHARS)
            );
        }
    }
    if drift.is_empty() {
        let _ = writeln!(
            out,
            "  no drift: {} ({}), delivered {}",
            found.now.outcome, found.now.reason, found.now.delivered
        );
        return out;
    }
    let width = drift
        .iter()
        .map(|row| row.0.len())
        .max()
        .unwrap_or(0)
        .max(5);
    let old_width = drift
        .iter()
        .map(|row| row.1.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let _ = writeln!(out, "  {:width$}  {:old_width$}    now", "drift", "golden");
    for (what, old, new) in drift {
        let _ = writeln!(
            out,
            "  {:width$}  {:old_width$} -> {}",
            one_line(what, MAX_LINE_CHARS),
            one_line(old, MAX_LINE_CHARS),
            one_line(new, MAX_LINE_CHARS)
        );
    }
    out
}

/// Writes the new calls into the cassette and the new trace snapshot, each atomically,
/// once the scenario with them verifies after `--accept` (its `recorded` block and
/// snapshot refreshed); nothing is written when it does not.
fn accept(args: &VerifyArgs, one: &Selected, found: &Found) -> Result<String, String> {
    let (text, _) = insert_calls(&one.text, &one.cassette, &found.run_order, &found.added)?;
    let dir = &one.reference.dir;
    match write_added_calls(&args.dir, dir, &text) {
        Ok(_) => Ok(format!(
            "  added {} call(s) to {}, and wrote its trace.snap\n",
            found.added.len(),
            one_line(&one.reference.shown("cassette.yaml"), MAX_LINE_CHARS)
        )),
        Err(RecordingError::Check(report)) => {
            let problems: Vec<String> = report
                .problems
                .iter()
                .map(|problem| one_line(&problem.message, MAX_LINE_CHARS))
                .collect();
            Err(format!(
                "nothing was written: with the new calls the scenario does not verify: {}",
                problems.join("; ")
            ))
        }
        Err(error) => Err(format!("nothing was written: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_drift_table_holds_only_what_changed_golden_then_now() {
        let golden = Summary::of(&[
            json!({"kind": "gate", "gate": "quality", "candidate": "c1", "passed": false, "score": 6.5}),
            json!({"kind": "run_finished", "outcome": "completed", "reason": "gate_passed",
                   "best": "c1", "delivered": true}),
        ]);
        let now = Summary::of(&[
            json!({"kind": "gate", "gate": "quality", "candidate": "c1", "passed": true, "score": 8.0}),
            json!({"kind": "run_finished", "outcome": "completed", "reason": "gate_passed",
                   "best": "c2", "delivered": false}),
        ]);
        assert_eq!(
            drift_rows(&golden, &now),
            [
                ("delivered".to_string(), "c1".to_string(), "-".to_string()),
                (
                    "gate quality c1".to_string(),
                    "6.5".to_string(),
                    "8".to_string()
                ),
            ]
        );
        assert!(drift_rows(&now, &now).is_empty());
    }
}
