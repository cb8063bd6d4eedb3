//! Trajectory checks of `expect` end to end: each kind (`steps`, `tools`, `not_called`, `gates`) written wrong in a copied golden fails `charter verify` (exit 1) saying what was expected and what the run did, in text and in `--format json`; a name the spec lacks is an error with "did you mean" before anything runs; a conversation's trajectory spans its turns.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{copy_dir, copy_file, repository};

/// The closed_loop scenarios copied: `repair_succeeds` expects steps and a gate score,
/// `tool_denied` tool counts and a tool never called.
const SCENARIOS: [&str; 2] = ["repair_succeeds", "tool_denied"];

/// A fresh project holding the closed_loop seed spec and [`SCENARIOS`].
fn project(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("trajectory-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let repo = repository();
    copy_dir(
        &repo.join("specs/seeds/closed_loop"),
        &root.join("specs/seeds/closed_loop"),
    );
    copy_file(
        &repo.join("specs/seeds/closed_loop.charter"),
        &root.join("specs/seeds/closed_loop.charter"),
    );
    for scenario in SCENARIOS {
        copy_dir(
            &repo.join("golden/closed_loop").join(scenario),
            &root.join("golden/closed_loop").join(scenario),
        );
    }
    root
}

/// Replaces `from` (which must be there) with `to` in a scenario's `scenario.yaml`.
fn edit(root: &Path, scenario: &str, from: &str, to: &str) {
    let path = root
        .join("golden/closed_loop")
        .join(scenario)
        .join("scenario.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(text.contains(from), "{} lacks {from:?}", path.display());
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap_or_else(|error| panic!("{error}"));
}

fn charter(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"))
}

/// stdout and stderr together.
fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_goldens_trajectories_pass_as_written() {
    let root = project("pass");
    let verified = charter(&root, &["verify"]);
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn each_kind_of_trajectory_check_fails_saying_what_was_expected_and_what_ran() {
    let root = project("fail");
    edit(
        &root,
        "repair_succeeds",
        "steps: [judge, execute, evaluate, judge, deliver]",
        "steps: [judge, deliver, execute]",
    );
    edit(&root, "repair_succeeds", "min_score: 8,", "min_score: 9,");
    edit(
        &root,
        "tool_denied",
        "web_search: { min: 1, max: 1 }",
        "web_search: { min: 2, max: 3 }",
    );
    edit(
        &root,
        "tool_denied",
        "not_called: [read_artifact]",
        "not_called: [web_search]",
    );
    // (scenario, line of the key in scenario.yaml, message)
    let expected = [
        (
            "repair_succeeds",
            8,
            "expect.steps: `execute` never ran after `deliver` (it ran only before); steps run: plan, execute, evaluate, judge, execute, evaluate, judge, deliver",
        ),
        (
            "repair_succeeds",
            9,
            "expect.gates: gate `quality` passed with score 8.67 on its last evaluation (candidate c2), expected a score of at least 9 and a pass",
        ),
        (
            "tool_denied",
            7,
            "expect.tools: `web_search` was called 1 time, expected between 2 and 3",
        ),
        (
            "tool_denied",
            9,
            "expect.not_called: tool `web_search` was called in step `execute` (round 1), expected it never to",
        ),
    ];

    let verified = charter(&root, &["verify"]);
    let all = text(&verified);
    assert_eq!(verified.status.code(), Some(1), "{all}");
    for (scenario, line, message) in expected {
        let at = format!("{message}\n  --> golden/closed_loop/{scenario}/scenario.yaml:{line}");
        assert!(all.contains(&at), "missing {at:?} in:\n{all}");
    }

    let json = charter(&root, &["verify", "--format", "json"]);
    assert_eq!(json.status.code(), Some(1), "{}", text(&json));
    let document: serde_json::Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", text(&json)));
    for (scenario, line, message) in expected {
        let found = document["scenarios"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["scenario"] == scenario)
            .flat_map(|entry| entry["problems"].as_array().cloned().unwrap_or_default())
            .any(|problem| {
                problem["kind"] == "expect"
                    && problem["message"] == message
                    && problem["file"] == format!("golden/closed_loop/{scenario}/scenario.yaml")
                    && problem["line"] == line
            });
        assert!(found, "no expect problem {message:?} in:\n{document:#}");
    }

    let replayed = charter(&root, &["replay", "golden/closed_loop/tool_denied"]);
    let all = text(&replayed);
    assert_eq!(replayed.status.code(), Some(1), "{all}");
    assert!(
        all.contains(expected[2].2) && all.contains(expected[3].2),
        "{all}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_name_the_spec_lacks_is_an_error_with_a_hint_before_the_run() {
    let root = project("names");
    edit(
        &root,
        "repair_succeeds",
        "steps: [judge, execute, evaluate, judge, deliver]",
        "steps: [judge, execute, evalute]",
    );
    edit(
        &root,
        "repair_succeeds",
        "quality: { min_score",
        "qualty: { min_score",
    );
    edit(
        &root,
        "tool_denied",
        "web_search: { min: 1, max: 1 }",
        "web_serch: { min: 1 }",
    );
    edit(
        &root,
        "tool_denied",
        "not_called: [read_artifact]",
        "not_called: [escalate]",
    );
    let verified = charter(&root, &["verify"]);
    let all = text(&verified);
    assert_eq!(verified.status.code(), Some(1), "{all}");
    for message in [
        "`expect.steps` names step `evalute`, which the spec `closed_loop` does not have; did you mean `evaluate`?",
        "`expect.gates` names gate `qualty`, which the spec `closed_loop` does not have; did you mean `quality`?",
        "`expect.tools` names tool `web_serch`, which the spec `closed_loop` does not have; did you mean `web_search`?",
        "`expect.not_called` names `escalate`, which is no step, role or tool of the spec `closed_loop`",
        "golden/closed_loop/repair_succeeds/scenario.yaml",
        "golden/closed_loop/tool_denied/scenario.yaml",
    ] {
        assert!(all.contains(message), "missing {message:?} in:\n{all}");
    }
    // Stopped before the replay: no trace was compared.
    assert!(!all.contains("expect.steps:"), "{all}");

    let replayed = charter(&root, &["replay", "golden/closed_loop/repair_succeeds"]);
    let all = text(&replayed);
    assert_eq!(replayed.status.code(), Some(1), "{all}");
    assert!(all.contains("did you mean `evaluate`?"), "{all}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn an_unknown_key_under_expect_is_an_error_naming_the_key_and_the_file() {
    let root = project("key");
    edit(&root, "repair_succeeds", "  steps: [", "  step: [");
    let verified = charter(&root, &["verify"]);
    let all = text(&verified);
    assert_eq!(verified.status.code(), Some(1), "{all}");
    assert!(
        all.contains("golden/closed_loop/repair_succeeds/scenario.yaml") && all.contains("`step`"),
        "{all}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A project holding the mention_roles seed and its conversation golden.
fn conversation_project(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("trajectory-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let repo = repository();
    for path in [
        "specs/seeds/mention_roles",
        "golden/mention_roles/conversation_sticky_creative",
    ] {
        copy_dir(&repo.join(path), &root.join(path));
    }
    copy_file(
        &repo.join("specs/seeds/mention_roles.charter"),
        &root.join("specs/seeds/mention_roles.charter"),
    );
    root
}

#[test]
fn a_conversations_trajectory_is_every_turns_in_order() {
    let root = conversation_project("conversation");
    let scenario = "golden/mention_roles/conversation_sticky_creative";
    let replayed = charter(&root, &["replay", scenario]);
    assert_eq!(replayed.status.code(), Some(0), "{}", text(&replayed));

    let path = root.join(scenario).join("scenario.yaml");
    let yaml = std::fs::read_to_string(&path).unwrap_or_default();
    let from = "steps: [creative_turn, creative_turn, talker_turn]";
    assert!(yaml.contains(from), "{yaml}");
    std::fs::write(
        &path,
        yaml.replacen(
            from,
            "steps: [creative_turn, talker_turn, creative_turn]",
            1,
        ),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let message = "expect.steps: `creative_turn` never ran after `talker_turn` (it ran only before); steps run: pick, creative_turn, pick, creative_turn, pick, talker_turn";
    for args in [vec!["verify"], vec!["replay", scenario]] {
        let output = charter(&root, &args);
        let all = text(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {all}");
        assert!(all.contains(message), "{args:?}: {all}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
