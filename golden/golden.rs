//! The golden comparison under `cargo test`: every scenario in the repository's `golden/` replays to its `expect` and its `trace.snap`, twice.
//!
//! A difference fails the test with the diff. Outside CI the new trace is also written
//! beside the snapshot as `trace.snap.new`, so `cargo insta review` (or `charter verify
//! --accept`) can accept it; `INSTA_UPDATE=always` accepts it directly.

use std::path::Path;

use charter_runtime::harness::report::{details, summary, table};
use charter_runtime::harness::{HarnessConfig, verify_project};

#[test]
fn every_golden_scenario_replays_to_its_snapshot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let update = std::env::var("INSTA_UPDATE").unwrap_or_default();
    let in_ci = std::env::var_os("CI").is_some();
    let config = HarnessConfig {
        accept: update == "always",
        pending_snapshots: !in_ci && update != "no",
        ..HarnessConfig::default()
    };
    let reports = match verify_project(&root, &config) {
        Ok(reports) => reports,
        Err(error) => panic!("cannot look for scenarios: {error}"),
    };
    assert!(
        reports.len() >= 5,
        "expected the seed scenario library under golden/, found {} scenarios",
        reports.len()
    );
    let failed: Vec<_> = reports
        .iter()
        .filter(|report| !report.status.passed())
        .cloned()
        .collect();
    assert!(
        failed.is_empty(),
        "{}\n{}\n{}",
        details(&failed),
        table(&reports),
        summary(&reports)
    );
}

/// Field report 002's role files as the report writes them (upper-case tool names, the id
/// `exp-master`, no contracts, the body as a system message): a project of its own under
/// `runtime/tests/fixtures/report_002`, since its role files keep the report's warnings.
#[test]
fn report_002_role_files_as_written_replay_to_their_snapshot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report_002");
    let config = HarnessConfig {
        pending_snapshots: false,
        ..HarnessConfig::default()
    };
    let reports = match verify_project(&root, &config) {
        Ok(reports) => reports,
        Err(error) => panic!("cannot look for scenarios: {error}"),
    };
    assert_eq!(reports.len(), 1, "{}", table(&reports));
    assert!(
        reports.iter().all(|report| report.status.passed()),
        "{}\n{}",
        details(&reports),
        table(&reports)
    );
}
