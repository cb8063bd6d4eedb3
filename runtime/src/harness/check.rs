//! The check of one scenario as its stages: load, pin check, names check, input check, replay, stale recordings, expectations, unused recordings, determinism, snapshot.
//!
//! [`check_scenario`] runs the stages in that order into the scenario's report. A stage
//! that finds the scenario cannot go on (a file that does not load, an unknown name, a
//! bad input, a failed replay) puts its problems in the report and stops the check; the
//! stages after the replay each add what they find and never stop it. The order of the
//! problems in a report is the order of the stages.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use charter_compiler::CompiledSpec;

use super::{
    CASSETTE_FILE, HarnessConfig, Location, Problem, ProblemKind, ReplayFailure, Replayed,
    SCENARIO_FILE, SNAPSHOT_FILE, ScenarioFile, ScenarioRef, ScenarioReport, SpecCache, error_at,
    event_diff, expect, pin, refresh_recorded, replay_scenario, skeleton, snapshot, unified_diff,
};
use crate::engine::provider::CallKey;
use crate::engine::run::RunError;
use crate::formats::scenario::{Cassette, Expectation, Recorded, Scenario};
use crate::formats::trace::TraceEvent;

/// Checks one scenario into `report` (see the harness module documentation): its stages
/// in order, stopping after a stage that finds the scenario cannot go on.
pub(super) fn check_scenario(
    root: &Path,
    reference: &ScenarioRef,
    file: &ScenarioFile,
    config: &HarnessConfig,
    specs: &mut SpecCache,
    report: &mut ScenarioReport,
) {
    let Ok(check) = ScenarioCheck::load(root, reference, file, config, specs, report) else {
        return;
    };
    let pins = check.compare_pins(report);
    let Ok(()) = check.check_names(report) else {
        return;
    };
    let Ok(()) = check.check_inputs(report) else {
        return;
    };
    let Ok(first) = check.replay(report) else {
        return;
    };
    check.report_changed_hashes(&pins, &first, report);
    check.report_stale_prompts(&first, report);
    check.check_expected_stale(&pins, &first, report);
    check.check_expectations(&first, report);
    check.report_unused_recordings(&first, report);
    check.check_determinism(&first, report);
    check.compare_snapshot(&first, report);
}

/// A stage found that the scenario cannot go on, and put why in the report.
struct Stopped;

/// Puts `problem` in `report` and stops the check.
fn stop<T>(report: &mut ScenarioReport, problem: Problem) -> Result<T, Stopped> {
    report.problems.push(problem);
    Err(Stopped)
}

/// What the stages of one scenario's check share: the scenario, its cassette and the
/// spec it replays against, loaded once.
struct ScenarioCheck<'a> {
    root: &'a Path,
    reference: &'a ScenarioRef,
    config: &'a HarnessConfig,
    scenario: &'a Scenario,
    /// The text of `scenario.yaml`, for line numbers.
    scenario_text: &'a str,
    cassette: Arc<Cassette>,
    /// The text of `cassette.yaml`, for line numbers and for rewriting its `recorded`
    /// block.
    cassette_text: String,
    /// The scenario's spec, with the models the cassette was recorded with.
    spec: Arc<CompiledSpec>,
    /// The scenario's `expect` (all unset when it has none).
    expect: Expectation,
    /// The scenario is a conversation (`turns`), not a single run.
    conversation: bool,
    /// The scenario's files as shown to people.
    scenario_file: String,
    cassette_file: String,
    snapshot_file: String,
}

/// How the cassette's pinned hashes compare with the spec's now.
struct Pins {
    /// The hashes (and prompts, models, overrides) of the spec now.
    current: Recorded,
    /// Each way the cassette's `recorded` block differs from `current` (none for an
    /// unpinned cassette).
    changes: Vec<String>,
}

impl<'a> ScenarioCheck<'a> {
    /// The load stage: the scenario (read already), its cassette, and its spec with the
    /// cassette's model overrides. Sets the report's description.
    fn load(
        root: &'a Path,
        reference: &'a ScenarioRef,
        file: &'a ScenarioFile,
        config: &'a HarnessConfig,
        specs: &mut SpecCache,
        report: &mut ScenarioReport,
    ) -> Result<Self, Stopped> {
        let scenario_file = reference.shown(SCENARIO_FILE);
        let cassette_file = reference.shown(CASSETTE_FILE);
        let snapshot_file = reference.shown(SNAPSHOT_FILE);
        let (scenario, scenario_text) = match file {
            Ok((scenario, text)) => (scenario, text.as_str()),
            Err(problem) => return stop(report, problem.clone()),
        };
        report.description = scenario.description.clone();
        let (cassette, cassette_text) = match read_cassette(reference, &cassette_file) {
            Ok((cassette, text)) => (Arc::new(cassette), text),
            Err(problem) => return stop(report, problem),
        };
        let spec = match specs.get(root, &scenario.spec) {
            Ok(spec) => spec,
            Err(problem) => return stop(report, problem),
        };
        let spec = match with_recorded_models(spec, &cassette) {
            Ok(spec) => spec,
            Err(message) => {
                let line = line_of(&cassette_text, "overrides:");
                return stop(report, error_at(cassette_file, line, message));
            }
        };
        Ok(ScenarioCheck {
            root,
            reference,
            config,
            scenario,
            scenario_text,
            cassette,
            cassette_text,
            spec,
            expect: scenario.expect.clone().unwrap_or_default(),
            conversation: scenario.turns.is_some(),
            scenario_file,
            cassette_file,
            snapshot_file,
        })
    }

    /// The scenario expects a stale recording (`expect: { stale: true }`).
    fn expects_stale(&self) -> bool {
        self.expect.stale == Some(true)
    }

    /// The pin check: compares the hashes the cassette was recorded under with the
    /// spec's now, and marks the report stale or unpinned. What it found is reported
    /// after the replay, which renders the prompts to show.
    fn compare_pins(&self, report: &mut ScenarioReport) -> Pins {
        let mut current = Recorded::from_spec(&self.spec);
        // A refreshed `recorded` block keeps the `--model` overrides it was recorded with.
        current.overrides = self.cassette.overrides();
        let changes = self.cassette.stale_against(&current);
        report.stale = !changes.is_empty();
        report.unpinned = self.cassette.recorded.is_none();
        Pins { current, changes }
    }

    /// The names check: names the spec does not have (a misspelt step, a wrong judge
    /// role), each at its entry's line with "did you mean", and names under `expect`
    /// (`calls`, `steps`, `tools`, `not_called`, `gates`) the spec does not have. Either
    /// stops the check: nothing is replayed.
    fn check_names(&self, report: &mut ScenarioReport) -> Result<(), Stopped> {
        let names = crate::formats::scenario::unknown_names(&self.cassette, &self.spec);
        if !names.is_empty() {
            let call_lines = crate::formats::yaml::call_lines(&self.cassette_text);
            for problem in names {
                let line = match problem.entry {
                    crate::formats::scenario::Entry::Call(index) => call_lines.get(index).copied(),
                    crate::formats::scenario::Entry::Human(_) => {
                        line_of(&self.cassette_text, "humans:")
                    }
                    crate::formats::scenario::Entry::Fault(_) => {
                        line_of(&self.cassette_text, "faults:")
                    }
                };
                report
                    .problems
                    .push(error_at(self.cassette_file.clone(), line, problem.message));
            }
            return Err(Stopped);
        }
        let unknown_steps = expect::name_problems(&self.expect, &self.spec);
        if !unknown_steps.is_empty() {
            for message in unknown_steps {
                report.problems.push(error_at(
                    self.scenario_file.clone(),
                    line_of(self.scenario_text, "expect:"),
                    message,
                ));
            }
            return Err(Stopped);
        }
        Ok(())
    }

    /// The input check: a bad input is the scenario's mistake, shown at its `input:`
    /// (or `turns:`), as is a conversation against a spec without a `session`. Either
    /// stops the check: nothing is replayed.
    fn check_inputs(&self, report: &mut ScenarioReport) -> Result<(), Stopped> {
        let conversation = self.conversation;
        for (index, input) in self.scenario.inputs().iter().enumerate() {
            if let Err(violations) = crate::engine::validate::validate_request(&self.spec, input) {
                let contract = self.spec.request.as_deref().unwrap_or("Request");
                let which = if conversation {
                    format!("the `input` of turn {}", index + 1)
                } else {
                    "`input`".to_string()
                };
                return stop(
                    report,
                    error_at(
                        self.scenario_file.clone(),
                        line_of(
                            self.scenario_text,
                            if conversation { "turns:" } else { "input:" },
                        ),
                        format!(
                            "{which} does not match the request contract `{contract}`: {}",
                            violations
                                .iter()
                                .map(ToString::to_string)
                                .collect::<Vec<_>>()
                                .join("; ")
                        ),
                    ),
                );
            }
        }
        if conversation && self.spec.session.is_none() {
            return stop(
                report,
                error_at(
                    self.scenario_file.clone(),
                    line_of(self.scenario_text, "turns:"),
                    format!(
                        "the scenario is a conversation (`turns`), but spec `{}` declares no `session`",
                        self.spec.name
                    ),
                ),
            );
        }
        Ok(())
    }

    /// The replay stage: replays the scenario and puts its outcome and event count in
    /// the report. A replay that fails stops the check.
    fn replay(&self, report: &mut ScenarioReport) -> Result<Replayed, Stopped> {
        match replay_scenario(&self.spec, self.scenario, &self.cassette, self.root) {
            Ok(first) => {
                report.outcome = Some(first.outcome.outcome);
                report.reason = Some(first.outcome.reason.clone());
                report.events = first.events.len();
                Ok(first)
            }
            Err(failure) => {
                // A replay that failed still counts the events it emitted (the table
                // shows them).
                report.events = failure.events;
                stop(report, self.replay_failure(*failure))
            }
        }
    }

    /// The problem of a failed replay, at the cassette line most likely to blame: a
    /// prompt that misses its `expect_prompt` at the call that expects it, a missing
    /// call at the closest unused recording (its likely misspelling).
    fn replay_failure(&self, failure: ReplayFailure) -> Problem {
        let ReplayFailure { turn, error, .. } = failure;
        let line_of_key = |key: &CallKey| {
            self.cassette
                .calls
                .iter()
                .position(|call| call.turn == turn && call.key() == *key)
                .and_then(|index| {
                    crate::formats::yaml::call_lines(&self.cassette_text)
                        .get(index)
                        .copied()
                })
        };
        let line = match &error {
            RunError::PromptExpectation { key, .. } => line_of_key(key),
            RunError::Unrecorded {
                closest: Some(closest),
                ..
            } => line_of_key(closest),
            _ => None,
        };
        let in_turn = if self.conversation {
            format!(" (turn {turn})")
        } else {
            String::new()
        };
        let mut problem = error_at(
            self.cassette_file.clone(),
            line.or(Some(1)),
            format!("the replay failed{in_turn}: {error}"),
        );
        if let RunError::Unrecorded { key, .. } = &error {
            problem.detail = self.entry_to_add(key, turn);
        }
        problem
    }

    /// What to paste into the cassette for the call `key` it lacks (a new step): the
    /// entry, with a skeleton response of the contract the call answers.
    fn entry_to_add(&self, key: &CallKey, turn: u64) -> Option<String> {
        let (entry, contract) = skeleton::missing_entry(&self.spec, key, turn)?;
        Some(format!(
            "add this entry under `calls:` in {} (its response is a skeleton of contract `{contract}`: write what the model answers), then run `charter verify` again:\n\n{entry}\n",
            self.cassette_file
        ))
    }

    /// Stale hashes: a cassette recorded under other hashes than the spec's is its own
    /// kind of failure, shown with the prompts that changed (a note when the scenario
    /// expects it; with `accept`, its `recorded` block is refreshed instead). A cassette
    /// that is not stale but whose recorded prompts are not this run's gets them
    /// refreshed with `accept`, and a hand-written one is pinned with `pin`.
    fn report_changed_hashes(&self, pins: &Pins, first: &Replayed, report: &mut ScenarioReport) {
        let recorded = self.cassette.recorded.as_ref();
        let recorded_line = line_of(&self.cassette_text, "recorded:");
        let accept = self.config.accept;
        // Each model call's prompt hash, read off the trace once: what `accept` pins.
        let call_hashes = if accept {
            pin::call_prompt_hashes(&first.events)
        } else {
            BTreeMap::new()
        };
        if !pins.changes.is_empty() {
            let stale = Problem {
                kind: ProblemKind::Stale,
                message: format!(
                    "stale recording: the cassette was recorded under other hashes ({})",
                    pins.changes.join("; ")
                ),
                detail: Some(prompt_diffs(
                    recorded.map(|recorded| &recorded.rendered),
                    &first.prompts,
                )),
                location: Location {
                    file: self.cassette_file.clone(),
                    line: recorded_line,
                },
            };
            if self.expects_stale() {
                report.notes.push(stale);
            } else if accept && (first.stale_prompts.is_empty() || self.config.repin) {
                match self.refresh_recorded(pins, first, &call_hashes) {
                    Ok(()) => report.accepted.push(format!(
                        "refreshed the recorded hashes in {}",
                        self.cassette_file
                    )),
                    Err(message) => report.problems.push(error_at(
                        self.cassette_file.clone(),
                        recorded_line,
                        message,
                    )),
                }
            } else {
                report.problems.push(stale);
            }
        } else if accept
            && !self.expects_stale()
            && (first.stale_prompts.is_empty() || self.config.repin)
            && (self.config.pin || recorded.is_some())
            && (recorded.map(|recorded| &recorded.rendered) != Some(&first.prompts)
                || !first.stale_prompts.is_empty()
                || pin::unpinned_calls(&self.cassette, &call_hashes) > 0)
        {
            // Not stale, but the recorded prompts are not those of this run (a recorded
            // response changed what a later prompt shows), or a call has no `prompt_hash`
            // yet: keep them current for the next diff. A hand-written cassette is pinned
            // only when asked (`--pin`).
            let what = if recorded.is_some() {
                format!("refreshed the recorded prompts in {}", self.cassette_file)
            } else {
                format!("pinned {} (wrote its `recorded` block)", self.cassette_file)
            };
            match self.refresh_recorded(pins, first, &call_hashes) {
                Ok(()) => {
                    report.unpinned = false;
                    report.accepted.push(what);
                }
                Err(message) => report.problems.push(error_at(
                    self.cassette_file.clone(),
                    recorded_line,
                    message,
                )),
            }
        }
    }

    /// Rewrites the cassette's `recorded` block with the spec's hashes now and this
    /// run's prompts, and pins each call the run made to the hash of its prompt.
    fn refresh_recorded(
        &self,
        pins: &Pins,
        first: &Replayed,
        call_hashes: &BTreeMap<pin::TurnKey, String>,
    ) -> Result<(), String> {
        let stale = if self.config.repin {
            first.stale_prompts.as_slice()
        } else {
            &[]
        };
        let (text, _) = pin::pin_calls(&self.cassette_text, &self.cassette, call_hashes, stale)?;
        refresh_recorded(self.reference, &text, &pins.current, &first.prompts)
    }

    /// Stale prompts: calls that answered another prompt (another request, a changed
    /// template) are stale whether or not the cassette is pinned, and never absorbed by
    /// `accept`, since the recorded answer belongs to the other prompt.
    fn report_stale_prompts(&self, first: &Replayed, report: &mut ScenarioReport) {
        if first.stale_prompts.is_empty() || (self.config.accept && self.config.repin) {
            return;
        }
        report.stale = true;
        let lines = crate::formats::yaml::call_lines(&self.cassette_text);
        for stale in &first.stale_prompts {
            let line = self
                .cassette
                .calls
                .iter()
                .position(|call| call.key() == stale.key)
                .and_then(|index| lines.get(index).copied());
            let problem = Problem {
                kind: ProblemKind::Stale,
                message: format!(
                    "stale recording: call {} answered another prompt ({} -> {}); re-record it, or keep its answer for the new prompt with `charter review`",
                    stale.key, stale.recorded, stale.now
                ),
                detail: Some(stale_prompt_diff(self.cassette.recorded.as_ref(), stale)),
                location: Location {
                    file: self.cassette_file.clone(),
                    line,
                },
            };
            if self.expects_stale() {
                report.notes.push(problem);
            } else {
                report.problems.push(problem);
            }
        }
    }

    /// A scenario that expects a stale recording fails when nothing was stale.
    fn check_expected_stale(&self, pins: &Pins, first: &Replayed, report: &mut ScenarioReport) {
        if !pins.changes.is_empty() || !first.stale_prompts.is_empty() || !self.expects_stale() {
            return;
        }
        report.problems.push(Problem {
            kind: ProblemKind::Expect,
            message: if self.cassette.recorded.is_none() {
                "the scenario expects a stale recording, but the cassette is unpinned (it has no `recorded` block to compare)"
                    .to_string()
            } else {
                "the scenario expects a stale recording, but the cassette's hashes match the spec"
                    .to_string()
            },
            detail: None,
            location: Location {
                file: self.scenario_file.clone(),
                line: line_of(self.scenario_text, "expect:"),
            },
        });
    }

    /// The expectations stage: the outcome, reason, delivery, answer and call counts
    /// the scenario's `expect` asks for (one problem), then each trajectory check the
    /// run failed (a problem each, `expect.steps: ...`).
    fn check_expectations(&self, first: &Replayed, report: &mut ScenarioReport) {
        let unmet = expect::unmet(
            &self.expect,
            &first.outcome,
            &expect::calls_per_step(&first.events),
        );
        let location = Location {
            file: self.scenario_file.clone(),
            line: line_of(self.scenario_text, "expect:"),
        };
        if !unmet.is_empty() {
            report.problems.push(Problem {
                kind: ProblemKind::Expect,
                message: format!("expected {}", unmet.join(" and ")),
                detail: first.outcome.message.clone(),
                location: location.clone(),
            });
        }
        for unmet in expect::trajectory::unmet(&self.expect, &first.events, &self.spec) {
            report.problems.push(Problem {
                kind: ProblemKind::Expect,
                message: unmet.message,
                detail: None,
                location: Location {
                    file: self.scenario_file.clone(),
                    line: expect_key_line(self.scenario_text, unmet.key).or(location.line),
                },
            });
        }
    }

    /// Recordings the run never used: each recorded call never made (with a hint when
    /// its item never ran) and each human answer never asked for.
    fn report_unused_recordings(&self, first: &Replayed, report: &mut ScenarioReport) {
        let lines = if first.unused_calls.is_empty() {
            Vec::new()
        } else {
            crate::formats::yaml::call_lines(&self.cassette_text)
        };
        for (key, turn) in first.unused_calls.iter().zip(&first.unused_call_turns) {
            let line = self
                .cassette
                .calls
                .iter()
                .position(|call| call.turn == *turn && call.key() == *key)
                .and_then(|index| lines.get(index).copied());
            let in_turn = if self.conversation {
                format!(" in turn {turn}")
            } else {
                String::new()
            };
            report.problems.push(Problem {
                kind: ProblemKind::Unused,
                message: format!(
                    "recorded call {key}{in_turn} was never made{}",
                    unknown_item_hint(key, &first.events)
                ),
                detail: None,
                location: Location {
                    file: self.cassette_file.clone(),
                    line,
                },
            });
        }
        for (step, round, attempt) in &first.unused_humans {
            report.problems.push(Problem {
                kind: ProblemKind::Unused,
                message: format!(
                    "recorded human answer for step `{step}` in round {round} (attempt {attempt}) was never asked for"
                ),
                detail: None,
                location: Location {
                    file: self.cassette_file.clone(),
                    line: line_of(&self.cassette_text, "humans:"),
                },
            });
        }
    }

    /// The determinism stage (unless turned off): a second replay gives the same trace,
    /// byte for byte.
    fn check_determinism(&self, first: &Replayed, report: &mut ScenarioReport) {
        if !self.config.determinism {
            return;
        }
        let location = || Location {
            file: self.cassette_file.clone(),
            line: Some(1),
        };
        match replay_scenario(&self.spec, self.scenario, &self.cassette, self.root) {
            Ok(second) if second.trace == first.trace => {}
            Ok(second) => report.problems.push(Problem {
                kind: ProblemKind::Nondeterministic,
                message: "a second replay gave another trace".to_string(),
                detail: Some(unified_diff(
                    &first.trace,
                    &second.trace,
                    "first replay",
                    "second replay",
                )),
                location: location(),
            }),
            Err(failure) => report.problems.push(Problem {
                kind: ProblemKind::Nondeterministic,
                message: format!(
                    "a second replay failed where the first did not: {}",
                    failure.error
                ),
                detail: None,
                location: location(),
            }),
        }
    }

    /// The snapshot stage: compares the trace with `trace.snap`. With `accept`, a
    /// changed or missing snapshot (or only its header) is written; without it, a change
    /// is a problem, and `pending_snapshots` writes the new snapshot beside the old.
    fn compare_snapshot(&self, first: &Replayed, report: &mut ScenarioReport) {
        let snapshot_path = self.reference.dir.join(SNAPSHOT_FILE);
        let wanted = snapshot::render(
            &self.scenario_file,
            self.scenario.description.as_deref(),
            &first.trace,
        );
        let existing = std::fs::read_to_string(&snapshot_path).ok();
        let old = existing.as_deref().map(snapshot::contents);
        let new = snapshot::contents(&wanted);
        if old.as_deref() == Some(new.as_str()) {
            // A pending snapshot left by an earlier failing run is out of date now (insta
            // drops it the same way), so `cargo insta review` does not offer it.
            if self.config.pending_snapshots || self.config.accept {
                let _ = std::fs::remove_file(snapshot::pending_path(&snapshot_path));
            }
            // Only the header differs (the scenario's description changed): `--accept`
            // brings it up to date.
            if self.config.accept && existing.as_deref() != Some(wanted.as_str()) {
                match self.write_snapshot(&snapshot_path, &wanted) {
                    Ok(()) => report
                        .accepted
                        .push(format!("wrote {} (its header)", self.snapshot_file)),
                    Err(problem) => report.problems.push(problem),
                }
            }
            return;
        }
        if self.config.accept {
            match self.write_snapshot(&snapshot_path, &wanted) {
                Ok(()) => {
                    let _ = std::fs::remove_file(snapshot::pending_path(&snapshot_path));
                    report
                        .accepted
                        .push(format!("wrote {}", self.snapshot_file));
                }
                Err(problem) => report.problems.push(problem),
            }
            return;
        }
        if self.config.pending_snapshots {
            let _ = snapshot::write_atomically(&snapshot::pending_path(&snapshot_path), &wanted);
        }
        report
            .problems
            .push(self.snapshot_problem(old.as_deref(), &new, &wanted));
    }

    /// Writes `wanted` as the snapshot at `path`; a failure is an error at the snapshot.
    fn write_snapshot(&self, path: &Path, wanted: &str) -> Result<(), Problem> {
        snapshot::write_atomically(path, wanted).map_err(|error| {
            error_at(
                self.snapshot_file.clone(),
                None,
                format!("cannot write the snapshot: {error}"),
            )
        })
    }

    /// The problem of a trace that differs from its snapshot (`old`, the contents of
    /// the snapshot file; none when there is no snapshot yet): the event diff at the
    /// first changed line. `new` is the trace's contents, `wanted` the snapshot file it
    /// would be.
    fn snapshot_problem(&self, old: Option<&str>, new: &str, wanted: &str) -> Problem {
        let Some(old) = old else {
            return Problem {
                kind: ProblemKind::NewSnapshot,
                message: format!(
                    "{} does not exist yet; accept the trace to create it",
                    self.snapshot_file
                ),
                detail: None,
                location: Location {
                    file: self.scenario_file.clone(),
                    line: Some(1),
                },
            };
        };
        let line = first_changed_line(old, new).map(|line| line + snapshot::header_lines(wanted));
        Problem {
            kind: ProblemKind::Changed,
            message: format!(
                "behaviour changed: the trace of {} differs from {}",
                self.reference.id(),
                self.snapshot_file
            ),
            detail: Some(event_diff::event_diff(
                old,
                new,
                &format!("{} (snapshot)", self.snapshot_file),
                &format!("{} (replay)", self.reference.id()),
            )),
            location: Location {
                file: self.snapshot_file.clone(),
                line,
            },
        }
    }
}

/// Reads and parses the scenario's `cassette.yaml` (shown as `shown`), with its text.
fn read_cassette(reference: &ScenarioRef, shown: &str) -> Result<(Cassette, String), Problem> {
    let text = std::fs::read_to_string(reference.dir.join(CASSETTE_FILE))
        .map_err(|error| error_at(shown.to_string(), None, format!("cannot read: {error}")))?;
    Cassette::from_yaml(shown, &text)
        .map(|cassette| (cassette, text))
        .map_err(|error| error_at(shown.to_string(), error.0.line, error.to_string()))
}

/// `spec` with the models the cassette was recorded with: a recording made with
/// `charter run --model` replays with the same models. A cassette without overrides
/// replays against the shared compiled spec, not a copy.
fn with_recorded_models(
    spec: Arc<CompiledSpec>,
    cassette: &Cassette,
) -> Result<Arc<CompiledSpec>, String> {
    let overrides = cassette.overrides();
    if overrides.is_empty() {
        return Ok(spec);
    }
    let mut overridden = (*spec).clone();
    crate::engine::models::apply_overrides(&mut overridden, &overrides)?;
    Ok(Arc::new(overridden))
}

/// For an unused call whose item never ran in its step: `; item `T-02` never ran in step
/// `work` (its items: …); did you mean `T-002`?`. Items are data (a plan's tasks), so
/// they are known only from the replay.
fn unknown_item_hint(key: &CallKey, events: &[TraceEvent]) -> String {
    let Some(item) = &key.item else {
        return String::new();
    };
    let mut items: Vec<&str> = events
        .iter()
        .filter(|event| event.step.as_deref() == Some(key.step.as_str()))
        .filter_map(|event| event.item.as_deref())
        .collect();
    items.sort_unstable();
    items.dedup();
    if items.contains(&item.as_str()) {
        return String::new();
    }
    if items.is_empty() {
        return format!("; step `{}` ran no item", key.step);
    }
    let hint = charter_compiler::diagnostics::did_you_mean(item, items.iter().copied())
        .map(|hint| format!("; {hint}"))
        .unwrap_or_default();
    let shown: Vec<String> = items
        .iter()
        .take(12)
        .map(|item| format!("`{item}`"))
        .collect();
    format!(
        "; item `{item}` never ran in step `{}` (its items: {}){hint}",
        key.step,
        shown.join(", ")
    )
}

/// The 1-based line of the first line of `text` that starts with `prefix`.
fn line_of(text: &str, prefix: &str) -> Option<u64> {
    text.lines()
        .position(|line| line.starts_with(prefix))
        .map(|index| index as u64 + 1)
}

/// The 1-based line of `key:` written in block style under `expect:` (`  steps: [...]`);
/// `None` when `expect` is a flow mapping or lacks the key.
fn expect_key_line(text: &str, key: &str) -> Option<u64> {
    let start = line_of(text, "expect:")?;
    text.lines()
        .enumerate()
        .skip(usize::try_from(start).ok()?)
        .take_while(|(_, line)| line.starts_with(' ') || line.trim().is_empty())
        .find(|(_, line)| line.trim_start().starts_with(&format!("{key}:")))
        .map(|(index, _)| index as u64 + 1)
}

/// The 1-based number of the first line where `old` and `new` differ.
fn first_changed_line(old: &str, new: &str) -> Option<u64> {
    let mut old_lines = old.lines();
    let mut new_lines = new.lines();
    let mut number = 1;
    loop {
        match (old_lines.next(), new_lines.next()) {
            (None, None) => return None,
            (a, b) if a == b => number += 1,
            _ => return Some(number),
        }
    }
}

/// Unified diffs of each rendered prompt that differs from the one recorded.
fn prompt_diffs(
    rendered: Option<&BTreeMap<String, String>>,
    now: &BTreeMap<String, String>,
) -> String {
    let mut out = String::new();
    for (role, prompt) in now {
        match rendered.and_then(|rendered| rendered.get(role)) {
            Some(old) if old == prompt => {}
            Some(old) => out.push_str(&unified_diff(
                old,
                prompt,
                &format!("prompt of role `{role}` (recorded)"),
                &format!("prompt of role `{role}` (now)"),
            )),
            None => out.push_str(&format!(
                "(the cassette holds no rendered prompt of role `{role}` to compare with)\n"
            )),
        }
    }
    if out.is_empty() {
        out.push_str("(no rendered prompt changed: the spec text changed elsewhere)\n");
    }
    out
}

/// The diff of a stale call's prompt against the one it was recorded for, when the
/// cassette holds that text (the role's first rendered prompt, if it hashes to the
/// call's `prompt_hash`).
fn stale_prompt_diff(
    recorded: Option<&Recorded>,
    stale: &crate::world::replay::StalePrompt,
) -> String {
    let known = recorded
        .and_then(|recorded| recorded.rendered.get(&stale.role))
        .filter(|text| crate::formats::canonical::sha256(text.as_bytes()) == stale.recorded);
    match known {
        Some(old) => unified_diff(
            old,
            &stale.prompt,
            &format!("prompt of call {} (recorded)", stale.key),
            &format!("prompt of call {} (now)", stale.key),
        ),
        None => format!(
            "(the cassette holds only the hash of the prompt call {} answered, not its text)\n",
            stale.key
        ),
    }
}
