//! End-to-end tests of `charter explore` on the seed goldens: the table, exit codes, `--save`, usage errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn charter(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

#[test]
fn a_happy_path_with_no_violation_exits_0_with_its_table() {
    let output = charter(&["explore", "golden/closed_loop/happy_path"]);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    assert!(stdout.contains("base completed{gate_passed}"), "{stdout}");
    for row in ["timeout", "429", "500", "malformed", "contract"] {
        assert!(
            stdout.lines().any(|line| line.starts_with(row)),
            "no row {row}: {stdout}"
        );
    }
    assert!(
        stdout.contains("no violation: P1-P5 hold on every variant"),
        "{stdout}"
    );
    assert!(text(&output.stderr).contains("explored 25 variants"));
}

#[test]
fn a_conversation_is_explored_turn_by_turn() {
    let output = charter(&[
        "explore",
        "golden/mention_roles/conversation_sticky_creative",
    ]);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    assert!(stdout.contains("base completed{done}"), "{stdout}");
}

#[test]
fn outcome_changes_are_listed_from_the_base() {
    let output = charter(&[
        "explore",
        "golden/workflow_runner/rule_engine_sends_back",
        "--faults",
        "429",
    ]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout
            .contains("completed{gate_passed} -> failed{step_failed{operate}}: 2 variant(s) (429)"),
        "{stdout}"
    );
}

#[test]
fn a_violation_exits_1_and_names_its_property_and_faults() {
    // The recording's tokens already touch the invariant's limit: any retry breaks it.
    let output = charter(&[
        "explore",
        "golden/closed_loop/invariant_tokens",
        "--faults",
        "timeout",
    ]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("variant(s) with violations"), "{stdout}");
    assert!(
        stdout.contains("P5 (invariant): invariant `tokens_bounded` broke"),
        "{stdout}"
    );
    assert!(
        stdout.contains("faults: timeout at {step: plan"),
        "{stdout}"
    );

    // Saved: one scenario per kind of violation and kind of fault, shrunk to one fault.
    let temp = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("explore-tests")
        .join("violations");
    let _ = std::fs::remove_dir_all(&temp);
    let output = charter(&[
        "explore",
        "golden/closed_loop/invariant_tokens",
        "--faults",
        "timeout",
        "--save",
        &temp.to_string_lossy(),
    ]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("saved 1 scenario(s)"), "{stdout}");
    assert!(
        stdout.contains("violation: P5: invariant `tokens_bounded` broke: the expression is false (replays as failed{invariant{tokens_bounded}})"),
        "{stdout}"
    );
    assert!(
        temp.join("invariant_tokens--plan-a1-timeout")
            .join("trace.snap")
            .is_file()
    );
}

#[test]
fn save_writes_golden_scenarios_that_replay() {
    let temp = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("explore-tests")
        .join("save");
    let _ = std::fs::remove_dir_all(&temp);
    let save = temp.to_string_lossy().to_string();
    let output = charter(&[
        "explore",
        "golden/lead_agent/happy_path",
        "--faults",
        "timeout",
        "--save",
        &save,
    ]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("saved 2 scenario(s)"), "{stdout}");
    let saved = temp.join("happy_path--create-a1-timeout");
    for file in ["scenario.yaml", "cassette.yaml", "trace.snap"] {
        assert!(saved.join(file).is_file(), "{file}");
    }
    let replay = charter(&["replay", &saved.to_string_lossy()]);
    assert_eq!(replay.status.code(), Some(3), "{}", text(&replay.stderr));
    assert!(
        text(&replay.stderr).contains("outcome: failed (step_failed{create})"),
        "{}",
        text(&replay.stderr)
    );
}

#[test]
fn usage_errors_exit_2_and_say_what_to_do() {
    let output = charter(&[
        "explore",
        "golden/closed_loop/happy_path",
        "--faults",
        "timout",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("did you mean `timeout`"));
    let output = charter(&["explore", "golden/closed_loop/happy_path", "--depth", "3"]);
    assert_eq!(output.status.code(), Some(2));
    let output = charter(&["explore", "golden/closed_loop"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("is not a scenario directory"));
    // A scenario whose cassette cannot be read is an input error.
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("explore-tests")
        .join("golden")
        .join("x")
        .join("broken");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap_or_else(|error| panic!("{error}"));
    std::fs::write(
        scratch.join("scenario.yaml"),
        "spec: specs/seeds/closed_loop.charter\ninput: {}\n",
    )
    .unwrap_or_else(|error| panic!("{error}"));
    std::fs::write(scratch.join("cassette.yaml"), "version: 1\ncalls: [ {\n")
        .unwrap_or_else(|error| panic!("{error}"));
    let output = charter(&["explore", &scratch.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("cassette.yaml"),
        "{}",
        text(&output.stderr)
    );
    let help = charter(&["explore", "--help"]);
    let help = text(&help.stdout);
    assert!(
        help.contains("charter explore golden/closed_loop/happy_path --save"),
        "{help}"
    );
    assert!(help.contains("P3"), "{help}");
}
