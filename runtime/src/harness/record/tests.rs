//! Tests of writing a recording as a scenario: what is written is what `verify --accept` writes and passes `verify`; a recording that does not replay to its outcome, or whose call answered another prompt, writes nothing.

use std::path::{Path, PathBuf};

use super::*;
use crate::formats::trace::{Outcome, Reason};

/// A project holding the closed_loop seed (its spec and prompts) and no scenario.
fn project(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!(
        "charter-harness-record-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    copy_tree(
        &repository().join("specs/seeds/closed_loop"),
        &root.join("specs/seeds/closed_loop"),
    );
    copy(
        &repository().join("specs/seeds/closed_loop.charter"),
        &root.join("specs/seeds/closed_loop.charter"),
    );
    root
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn copy(from: &Path, to: &Path) {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|error| panic!("{error}"));
    }
    std::fs::copy(from, to).unwrap_or_else(|error| panic!("{}: {error}", from.display()));
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(entry.file_name()));
        } else {
            copy(&path, &to.join(entry.file_name()));
        }
    }
}

/// The happy-path recording of closed_loop (its scenario and cassette), as a live run
/// would hand it over: no rendered prompts yet, `expect` as given.
fn recording(expect: Expectation) -> (Scenario, Cassette) {
    let dir = repository().join("golden/closed_loop/happy_path");
    let scenario =
        Scenario::read(&dir.join(SCENARIO_FILE)).unwrap_or_else(|error| panic!("{error}"));
    let mut cassette =
        Cassette::read(&dir.join(CASSETTE_FILE)).unwrap_or_else(|error| panic!("{error}"));
    if let Some(recorded) = &mut cassette.recorded {
        recorded.rendered.clear();
    }
    let scenario = Scenario {
        description: Some("recorded live run of closed_loop".into()),
        expect: Some(expect),
        ..scenario
    };
    (scenario, cassette)
}

fn completed() -> Expectation {
    Expectation {
        outcome: Some(Outcome::Completed),
        reason: Some(Reason::GatePassed),
        delivered: Some("c1".into()),
        ..Expectation::default()
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn the_files_written_are_those_verify_accept_writes_and_verify_passes() {
    let root = project("written");
    let (scenario, cassette) = recording(completed());
    let dir = root.join("golden/closed_loop/live");
    let written = write_scenario(&NewScenario {
        root: &root,
        dir: &dir,
        scenario: scenario.clone(),
        cassette: cassette.clone(),
    });
    assert!(written.is_ok(), "{written:?}");

    // The same recording, written plainly and accepted by the harness.
    let accepted_dir = root.join("golden/closed_loop/accepted");
    std::fs::create_dir_all(&accepted_dir).unwrap_or_else(|error| panic!("{error}"));
    let to_yaml = |text: Result<String, LoadError>| text.unwrap_or_else(|error| panic!("{error}"));
    std::fs::write(
        accepted_dir.join(SCENARIO_FILE),
        to_yaml(scenario.to_yaml()),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    std::fs::write(
        accepted_dir.join(CASSETTE_FILE),
        to_yaml(cassette.to_yaml()),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let accept = HarnessConfig {
        accept: true,
        filter: Some("accepted".into()),
        ..HarnessConfig::default()
    };
    let reports =
        super::super::verify_project(&root, &accept).unwrap_or_else(|error| panic!("{error}"));
    assert!(
        reports
            .iter()
            .all(|report| report.status == Status::Accepted),
        "{reports:?}"
    );
    assert_eq!(
        read(&dir.join(CASSETTE_FILE)),
        read(&accepted_dir.join(CASSETTE_FILE))
    );
    assert!(read(&dir.join(CASSETTE_FILE)).contains("  rendered:\n    evaluator: |"));
    assert_eq!(
        snapshot::contents(&read(&dir.join(SNAPSHOT_FILE))),
        snapshot::contents(&read(&accepted_dir.join(SNAPSHOT_FILE)))
    );
    assert!(
        read(&dir.join(SNAPSHOT_FILE))
            .starts_with("---\nsource: golden/closed_loop/live/scenario.yaml\n")
    );

    // `verify` passes both, with nothing left pending.
    let reports = super::super::verify_project(&root, &HarnessConfig::default())
        .unwrap_or_else(|error| panic!("{error}"));
    let statuses: Vec<(String, Status)> = reports
        .iter()
        .map(|report| (report.id(), report.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("closed_loop/accepted".to_string(), Status::Pass),
            ("closed_loop/live".to_string(), Status::Pass)
        ],
        "{reports:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_recording_that_does_not_replay_to_the_runs_outcome_writes_nothing() {
    let root = project("other-outcome");
    let (scenario, cassette) = recording(Expectation {
        outcome: Some(Outcome::Failed),
        reason: Some(Reason::StepFailed {
            step: "execute".into(),
        }),
        ..Expectation::default()
    });
    let dir = root.join("golden/closed_loop/live");
    let written = write_scenario(&NewScenario {
        root: &root,
        dir: &dir,
        scenario,
        cassette,
    });
    match written {
        Err(RecordingError::Check(report)) => {
            assert_eq!(report.status, Status::Failed, "{report:?}");
            let messages: Vec<&str> = report
                .problems
                .iter()
                .map(|problem| problem.message.as_str())
                .collect();
            assert_eq!(
                messages,
                [
                    "expected outcome failed, got completed and reason step_failed{execute}, got gate_passed"
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(!dir.exists(), "something was written");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_call_that_answered_another_prompt_writes_nothing_and_a_pending_snapshot_goes() {
    let root = project("other-prompt");
    let (scenario, mut cassette) = recording(completed());
    let dir = root.join("golden/closed_loop/live");
    if let Some(first) = cassette.calls.first_mut() {
        first.prompt_hash = Some(crate::formats::canonical::sha256(b"another request"));
    }
    let refused = write_scenario(&NewScenario {
        root: &root,
        dir: &dir,
        scenario: scenario.clone(),
        cassette: cassette.clone(),
    });
    match refused {
        Err(RecordingError::Check(report)) => {
            assert_eq!(report.status, Status::Stale, "{report:?}");
            assert!(
                report.problems.iter().any(|problem| problem
                    .message
                    .starts_with("stale recording: call {step: plan, round: 1, attempt: 1} answered another prompt")),
                "{report:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(!dir.exists(), "something was written");

    // Recorded again into a directory an earlier check left a pending snapshot in.
    std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("{error}"));
    let pending = snapshot::pending_path(&dir.join(SNAPSHOT_FILE));
    std::fs::write(&pending, "---\nexpression: trace\n---\nold\n")
        .unwrap_or_else(|error| panic!("{error}"));
    if let Some(first) = cassette.calls.first_mut() {
        first.prompt_hash = None;
    }
    let written = write_scenario(&NewScenario {
        root: &root,
        dir: &dir,
        scenario,
        cassette,
    });
    assert!(written.is_ok(), "{written:?}");
    assert!(!pending.exists());
    assert!(dir.join(SNAPSHOT_FILE).is_file());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_recording_made_with_model_overrides_keeps_them_and_passes() {
    let root = project("overrides");
    let (scenario, mut cassette) = recording(completed());
    let overrides: std::collections::BTreeMap<String, String> =
        [("strong".to_string(), "openai:gpt-4o-mini".to_string())].into();
    let spec = super::super::compile_spec(&root, &scenario.spec)
        .unwrap_or_else(|problem| panic!("{}", problem.message));
    let mut overridden = (*spec).clone();
    crate::engine::models::apply_overrides(&mut overridden, &overrides)
        .unwrap_or_else(|error| panic!("{error}"));
    cassette.recorded = Some(crate::formats::scenario::Recorded {
        overrides: overrides.clone(),
        ..crate::formats::scenario::Recorded::from_spec(&overridden)
    });
    let dir = root.join("golden/closed_loop/live");
    let written = write_scenario(&NewScenario {
        root: &root,
        dir: &dir,
        scenario,
        cassette,
    });
    assert!(written.is_ok(), "{written:?}");
    let kept = Cassette::read(&dir.join(CASSETTE_FILE)).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(kept.overrides(), overrides);
    assert!(read(&dir.join(SNAPSHOT_FILE)).contains("\"model\":\"openai:gpt-4o-mini\""));
    let _ = std::fs::remove_dir_all(&root);
}
