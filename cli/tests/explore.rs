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
    // A row per kind that has a place to strike here (no tool or `ask` in this run).
    for row in [
        "timeout",
        "429",
        "500",
        "malformed",
        "contract",
        "truncated",
        "refusal",
        "auth",
        "context_length",
        "slow",
        "stale",
        "wrong_value",
    ] {
        assert!(
            stdout
                .lines()
                .any(|line| line.starts_with(&format!("{row} "))),
            "no row {row}: {stdout}"
        );
    }
    // auth and context_length are not retried: the step they strike fails.
    assert!(
        stdout.contains("completed{gate_passed} -> failed{step_failed{plan}}: 2 variant(s) (auth, context_length)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("no violation: P1-P5 hold on every variant"),
        "{stdout}"
    );
    let variants = stdout
        .lines()
        .find_map(|line| line.strip_prefix("total "))
        .and_then(|line| line.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    assert!(
        text(&output.stderr).contains(&format!("explored {variants} variants")),
        "{stdout}"
    );
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
    let output = charter(&["explore", "golden/closed_loop/happy_path", "--depth", "4"]);
    assert_eq!(output.status.code(), Some(2));
    let output = charter(&["explore", "golden/closed_loop/happy_path", "--sample", "0"]);
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

#[test]
fn the_table_groups_the_peers_fault_kinds_by_kind() {
    // lead_agent's happy path has tool calls and an `ask`: every kind has a place.
    let output = charter(&["explore", "golden/lead_agent/happy_path"]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let rows: Vec<&str> = stdout
        .lines()
        .skip_while(|line| !line.starts_with("fault "))
        .skip(1)
        .take_while(|line| !line.starts_with("total "))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(
        rows,
        [
            "timeout",
            "429",
            "500",
            "malformed",
            "contract",
            "truncated",
            "refusal",
            "auth",
            "context_length",
            "slow",
            "wrong_value",
            "tool_error",
            "tool_timeout",
            "tool_bad_args",
            "human_reject",
            "human_timeout"
        ],
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "completed{gate_passed} -> blocked{human_rejected}: 1 variant(s) (human_timeout)"
        ),
        "{stdout}"
    );
    let explain = charter(&["explain", "explore"]);
    let explained = text(&explain.stdout);
    assert_eq!(explain.status.code(), Some(0));
    for kind in rows {
        assert!(
            explained.contains(&format!("\n  {kind}\n      ")),
            "{kind}: {explained}"
        );
    }
}

#[test]
fn depth_3_with_a_sample_draws_the_same_variants_for_the_same_seed() {
    let run = |seed: &str| {
        let output = charter(&[
            "explore",
            "golden/closed_loop/happy_path",
            "--depth",
            "3",
            "--faults",
            "timeout,429,auth,wrong_value,stale",
            "--sample",
            "150",
            "--seed",
            seed,
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    let first = run("7");
    let heading = first.lines().nth(1).unwrap_or_default();
    assert!(
        heading.starts_with("sample: 150 of ")
            && heading.ends_with("variants, drawn with seed 7 (--seed 7 draws the same)"),
        "{first}"
    );
    assert!(first.contains("150 variants (depth 3)"), "{first}");
    assert!(
        first.contains(
            "(a variant with faults of several kinds counts in the row of each, once in the total)"
        ),
        "{first}"
    );
    assert_eq!(run("7"), first, "the same seed, the same variants");
    let other = run("8");
    assert!(other.contains("drawn with seed 8"), "{other}");
    // Without a sample, depth 3 runs the whole space the sample was drawn from.
    let space: usize = heading
        .trim_start_matches("sample: 150 of ")
        .split_whitespace()
        .next()
        .and_then(|count| count.parse().ok())
        .unwrap_or_default();
    let whole = charter(&[
        "explore",
        "golden/closed_loop/happy_path",
        "--depth",
        "3",
        "--faults",
        "timeout,429,auth,wrong_value,stale",
    ]);
    let whole = text(&whole.stdout);
    assert!(
        whole.contains(&format!("{space} variants (depth 3)")),
        "{whole}"
    );
    assert!(!whole.contains("sample:"), "{whole}");
}
