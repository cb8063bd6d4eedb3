//! Per-call prompt hashes (DESIGN §10): every recording writes the hash of the prompt each call answered, and a replay whose prompt differs — a recording made for another request — is a stale recording naming the key, with the prompt diff where the cassette holds the text, never absorbed by `--accept`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use charter_runtime::engine::run::{RunConfig, replay_blocking};
use charter_runtime::formats::scenario::{Cassette, Recorded, Scenario};
use charter_runtime::formats::trace::MemorySink;
use charter_runtime::harness::{self, HarnessConfig, ProblemKind, Status};
use charter_runtime::world::record::{Recording, write_recording};
use charter_runtime::world::replay::ReplayProvider;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|error| panic!("{error}"));
    for entry in std::fs::read_dir(from)
        .unwrap_or_else(|error| panic!("{error}"))
        .flatten()
    {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap_or_else(|error| panic!("{error}"));
        }
    }
}

/// Records `golden/closed_loop/timeout_then_recovery` into a fresh project, with the
/// golden cassette standing in for the models: what `charter run --record` writes.
fn recorded_project(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("recordings")
        .join(name);
    let _ = std::fs::remove_dir_all(&root);
    let repo = repository();
    copy_dir(
        &repo.join("specs/seeds/closed_loop"),
        &root.join("specs/seeds/closed_loop"),
    );
    std::fs::copy(
        repo.join("specs/seeds/closed_loop.charter"),
        root.join("specs/seeds/closed_loop.charter"),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let golden = repo.join("golden/closed_loop/timeout_then_recovery");
    let scenario = Scenario::read(&golden.join("scenario.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let models = Cassette::read(&golden.join("cassette.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let spec = harness::compile_spec(&root, &scenario.spec)
        .unwrap_or_else(|problem| panic!("{}", problem.message));

    let recording = Recording::new(Vec::new());
    let live = Arc::new(ReplayProvider::new(models));
    let provider = Arc::new(recording.provider(live.clone()));
    let mut sink = MemorySink::new();
    let outcome = replay_blocking(
        &spec,
        scenario.input.clone(),
        charter_runtime::engine::effects::Effects::new(provider, live.as_ref(), &mut sink)
            .with_files(&charter_runtime::world::files::LocalFiles),
        &RunConfig::default(),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        outcome.outcome,
        charter_runtime::formats::trace::Outcome::Completed
    );
    let cassette = recording.cassette(Recorded::from_spec(&spec));
    assert!(
        cassette.calls.iter().all(|call| call
            .prompt_hash
            .as_deref()
            .is_some_and(|hash| hash.starts_with("sha256:"))),
        "every recorded call carries its prompt's hash"
    );
    write_recording(
        &root.join("golden/closed_loop/recorded"),
        &scenario,
        &cassette,
    )
    .unwrap_or_else(|error| panic!("{error}"));
    root
}

fn verify(root: &Path, accept: bool) -> harness::ScenarioReport {
    let config = HarnessConfig {
        accept,
        ..HarnessConfig::default()
    };
    let mut reports = harness::verify_project(root, &config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reports.len(), 1);
    reports.remove(0)
}

#[test]
fn a_recording_made_for_another_request_is_stale_naming_the_call_with_the_prompt_diff() {
    let root = recorded_project("another_request");
    // The recording replays clean; accepting it writes the snapshot and the prompts.
    let accepted = verify(&root, true);
    assert!(accepted.status.passed(), "{:?}", accepted.problems);
    let clean = verify(&root, false);
    assert_eq!(clean.status, Status::Pass, "{:?}", clean.problems);

    // The same recording under another request.
    let scenario_path = root.join("golden/closed_loop/recorded/scenario.yaml");
    let text = std::fs::read_to_string(&scenario_path).unwrap_or_default();
    assert!(text.contains("heat pumps"), "{text}");
    std::fs::write(&scenario_path, text.replace("heat pumps", "solar panels"))
        .unwrap_or_else(|error| panic!("{error}"));
    let report = verify(&root, false);
    assert_eq!(report.status, Status::Stale, "{:?}", report.problems);
    let stale: Vec<_> = report
        .problems
        .iter()
        .filter(|problem| problem.kind == ProblemKind::Stale)
        .collect();
    let planner = stale
        .iter()
        .find(|problem| {
            problem
                .message
                .contains("call {step: plan, round: 1, attempt: 1} answered another prompt")
        })
        .unwrap_or_else(|| panic!("{stale:?}"));
    let diff = planner.detail.as_deref().unwrap_or_default();
    let line_with = |sign: char, text: &str| {
        diff.lines()
            .any(|line| line.starts_with(sign) && line.contains(text))
    };
    assert!(line_with('-', "heat pumps"), "{diff}");
    assert!(line_with('+', "solar panels"), "{diff}");
    assert!(
        diff.contains("prompt of call {step: plan, round: 1, attempt: 1} (recorded)"),
        "{diff}"
    );
    assert_eq!(
        planner.location.file,
        "golden/closed_loop/recorded/cassette.yaml"
    );
    assert!(planner.location.line.is_some());

    // `--accept` cannot make an answer fit another prompt: still stale.
    let accepted = verify(&root, true);
    assert_eq!(accepted.status, Status::Stale, "{:?}", accepted.problems);
}

#[test]
fn a_call_without_prompt_hash_is_not_checked() {
    let root = recorded_project("no_hash");
    let cassette_path = root.join("golden/closed_loop/recorded/cassette.yaml");
    let text = std::fs::read_to_string(&cassette_path).unwrap_or_default();
    let without: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("prompt_hash:"))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_ne!(without, text, "the recording wrote prompt hashes");
    std::fs::write(&cassette_path, without).unwrap_or_else(|error| panic!("{error}"));
    let report = verify(&root, true);
    assert!(report.status.passed(), "{:?}", report.problems);
    assert!(!report.stale);
}
