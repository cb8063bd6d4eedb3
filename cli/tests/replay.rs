//! `charter replay` end to end: exit codes, the live display, `--events` and `--out`, on the scenarios under `runtime/tests/fixtures/golden`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn golden(scenario: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../runtime/tests/fixtures/golden")
        .join(scenario)
}

/// Runs `charter replay` with `args`; returns (exit code, stderr).
fn replay(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .arg("--color")
        .arg("never")
        .arg("replay")
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn replay_scenario(scenario: &str) -> (i32, String) {
    let path = golden(scenario);
    replay(&[path.as_os_str()])
}

#[test]
fn a_scenario_of_every_seed_spec_ends_as_expected() {
    let cases = [
        (
            "closed_loop/timeout_then_pass",
            0,
            "outcome: completed (gate_passed)",
        ),
        ("agency/stage_retry", 0, "outcome: completed (gate_passed)"),
        (
            "lead_agent/happy_path",
            0,
            "outcome: completed (gate_passed)",
        ),
        (
            "lead_agent/plan_rejected",
            3,
            "outcome: blocked (human_rejected)",
        ),
        ("auto_agent/pass_first_time", 0, "outcome: completed (done)"),
        (
            "mention_roles/business_turn",
            0,
            "outcome: completed (done)",
        ),
        ("review_loop/passing", 0, "outcome: completed (gate_passed)"),
        (
            "review_loop/max_rounds",
            3,
            "outcome: below_target (max_rounds)",
        ),
    ];
    for (scenario, code, last) in cases {
        let (exit, stderr) = replay_scenario(scenario);
        assert_eq!(exit, code, "{scenario}:\n{stderr}");
        assert!(stderr.contains(last), "{scenario}:\n{stderr}");
        assert!(!stderr.contains("error:"), "{scenario}:\n{stderr}");
    }
}

#[test]
fn the_live_display_shows_steps_rounds_items_counted_off_retries_and_gate_scores() {
    let (_, stderr) = replay_scenario("closed_loop/timeout_then_pass");
    // The runtime's phase names are not shown: the flow's own step names are.
    assert!(!stderr.contains("phase "), "{stderr}");
    for expected in [
        "plan                     step (planner)",
        "execute                  step (executor): 2 items",
        "execute[T-001]           item ok [1/2]",
        "execute[T-002]           item ok [2/2]",
        "execute[T-002]#1",
        "timeout after 4m00s",
        "retry (provider) -> attempt 2 in 2.000s",
        "gate quality on c1: PASS score 8.67",
        "delivered c1, hash verified",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    let (_, stderr) = replay_scenario("review_loop/max_rounds");
    assert!(stderr.contains(" r3 "), "rounds are shown:\n{stderr}");
    assert!(stderr.contains("retry (repair) -> round 2"), "{stderr}");
}

#[test]
fn an_unrecorded_call_is_an_error_naming_its_key() {
    let (exit, stderr) = replay_scenario("review_loop/unrecorded");
    assert_eq!(exit, 1, "{stderr}");
    assert!(
        stderr.contains("error: no recorded call for {step: review, round: 1, attempt: 1}"),
        "{stderr}"
    );
}

#[test]
fn a_bad_cassette_is_an_error() {
    let (exit, stderr) = replay_scenario("review_loop/bad_cassette");
    assert_eq!(exit, 1, "{stderr}");
    assert!(stderr.contains("bad cassette"), "{stderr}");
}

#[test]
fn a_missing_scenario_directory_is_a_usage_error() {
    let (exit, stderr) = replay_scenario("review_loop/no_such_scenario");
    assert_eq!(exit, 2, "{stderr}");
    let (exit, _) = replay(&[]);
    assert_eq!(exit, 2, "a missing argument is a usage error");
}

#[test]
fn events_and_the_delivery_are_written_where_asked() {
    let directory = std::env::temp_dir().join(format!("charter-replay-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap_or_default();
    let events = directory.join("events.jsonl");
    let out = directory.join("out");
    let scenario = golden("review_loop/passing");
    let (exit, stderr) = replay(&[
        scenario.as_os_str(),
        "--events".as_ref(),
        events.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(exit, 0, "{stderr}");
    let jsonl = std::fs::read_to_string(&events).unwrap_or_default();
    let lines: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_default())
        .collect();
    assert_eq!(
        lines.first().map(|e| e["kind"].clone()),
        Some("run_started".into())
    );
    assert_eq!(
        lines.last().map(|e| e["kind"].clone()),
        Some("run_finished".into())
    );
    let delivery = std::fs::read_to_string(out.join("delivery.json")).unwrap_or_default();
    assert!(delivery.contains("\"id\":\"c1\""), "{delivery}");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn an_expectation_the_run_does_not_meet_is_an_error() {
    let directory =
        std::env::temp_dir().join(format!("charter-replay-expect-{}", std::process::id()));
    let scenario = directory.join("golden/review_loop/wrong_expect");
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&scenario).unwrap_or_default();
    let fixtures = golden("review_loop/passing");
    let spec = fixtures.join("../../../review_loop.charter");
    // The spec changed since the recording (a comment added): the replay says so.
    let text = std::fs::read_to_string(&spec).unwrap_or_default();
    std::fs::write(
        directory.join("review_loop.charter"),
        format!("{text}// edited\n"),
    )
    .unwrap_or_default();
    std::fs::copy(
        fixtures.join("cassette.yaml"),
        scenario.join("cassette.yaml"),
    )
    .unwrap_or_default();
    std::fs::write(
        scenario.join("scenario.yaml"),
        "spec: review_loop.charter\ninput: { goal: rust }\nexpect: { outcome: failed, reason: max_rounds }\n",
    )
    .unwrap_or_default();
    let (exit, stderr) = replay(&[scenario.as_os_str()]);
    assert_eq!(exit, 1, "{stderr}");
    assert!(
        stderr.contains("warning: stale recording: spec: sha256:"),
        "{stderr}"
    );
    assert!(
        stderr.contains("the scenario expected outcome failed, got completed and reason max_rounds, got gate_passed"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&directory);
}

/// DESIGN §9.3: the answer goes to stdout as JSON (progress stays on stderr), and `--out`
/// writes `answer.json` for a flow that delivers nothing.
#[test]
fn the_answer_is_json_on_stdout_and_answer_json_in_out() {
    let out = std::env::temp_dir().join(format!("charter-replay-answer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let scenario = golden("mention_roles/business_turn");
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(["--color", "never", "replay"])
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let answer: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("stdout is not one JSON value ({error}): {stdout}"));
    assert!(answer.get("text").is_some(), "{answer}");
    assert!(
        !stderr.contains(&stdout),
        "the answer is not mixed into the progress"
    );
    let written = std::fs::read_to_string(out.join("answer.json")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&written).ok(),
        Some(answer)
    );
}

/// Text a cassette or scenario holds that would forge a GitHub annotation, clear the
/// screen, ring the bell and move the cursor back, as YAML writes it.
const HOSTILE: &str = r#""\n::error file=README.md,line=1::forged\e[2J\a\rover""#;

/// Every value a replay prints from its files reaches the terminal escaped: no control
/// character but a line break, and no line a CI runner would read as a command. Each case
/// puts the hostile text in another field (the stale warning printed the spec hash raw).
#[test]
fn hostile_text_in_a_recording_reaches_the_terminal_escaped() {
    let root = std::env::temp_dir().join(format!("charter-replay-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/fixtures");
    let scenario_dir = root.join("golden/review_loop/hostile");
    std::fs::create_dir_all(&scenario_dir).unwrap_or_else(|error| panic!("{error}"));
    std::fs::copy(
        fixtures.join("review_loop.charter"),
        root.join("review_loop.charter"),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let calls = "calls:\n  - { step: write, response: { title: Rust, body: fast }, latency: 2s }\n  - { step: review, response: { relevance: 9, verdict: PASS } }\n  - { step: deliver, response: { candidate_id: c1, summary: s } }\n";
    let scenario = |description: &str| {
        format!("spec: review_loop.charter\ndescription: {description}\ninput: {{ goal: rust }}\n")
    };
    let cases = [
        // The stale warning: a recorded hash, and a prompt's name and hash.
        (
            scenario("plain"),
            format!("version: 1\nrecorded:\n  spec_hash: {HOSTILE}\n{calls}"),
        ),
        (
            scenario("plain"),
            format!(
                "version: 1\nrecorded:\n  spec_hash: x\n  prompts: {{ {HOSTILE}: {HOSTILE} }}\n{calls}"
            ),
        ),
        // The heading: the scenario's description.
        (scenario(HOSTILE), format!("version: 1\n{calls}")),
        // A bad cassette: a step the spec lacks, named in the error.
        (
            scenario("plain"),
            format!("version: 1\ncalls:\n  - {{ step: {HOSTILE}, response: {{}} }}\n"),
        ),
        // A recorded call never made: its key in the warning.
        (
            scenario("plain"),
            format!(
                "version: 1\n{calls}  - {{ step: review, round: 9, item: {HOSTILE}, response: {{}} }}\n"
            ),
        ),
    ];
    for (index, (scenario, cassette)) in cases.iter().enumerate() {
        std::fs::write(scenario_dir.join("scenario.yaml"), scenario)
            .unwrap_or_else(|error| panic!("{error}"));
        std::fs::write(scenario_dir.join("cassette.yaml"), cassette)
            .unwrap_or_else(|error| panic!("{error}"));
        let (_, stderr) = replay(&[scenario_dir.as_os_str()]);
        assert!(
            stderr.contains("forged"),
            "case {index} printed nothing of the text: {stderr}"
        );
        // Every command that reads the recording: replay, verify (its table, details and
        // GitHub annotations) and explore.
        let verify = ["--color", "never", "verify", "--verbose", "--github"];
        let explore = ["--color", "never", "explore"];
        let outputs = [
            ("replay", stderr),
            ("verify", printed(&root, &verify, None)),
            ("explore", printed(&root, &explore, Some(&scenario_dir))),
        ];
        for (command, text) in outputs {
            for (number, line) in text.lines().enumerate() {
                // `verify --github` writes annotations of its own; none may be the forged one.
                assert!(
                    !line.starts_with("::")
                        || (line.starts_with("::error file=")
                            && !line.starts_with("::error file=README.md")),
                    "case {index}, {command}, line {number} is a CI command: {text}"
                );
                assert!(
                    !line.chars().any(|c| c.is_control() && c != '\t'),
                    "case {index}, {command}, line {number} holds a control character: {line:?}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// `charter ARGS [PATH]` run in `dir`: its stdout and stderr together.
fn printed(dir: &Path, args: &[&str], path: Option<&Path>) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command.current_dir(dir).args(args);
    if let Some(path) = path {
        command.arg(path);
    }
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
