//! `charter verify` end to end (issue 4's acceptance): a changed recorded response fails with a diff naming the scenario, a changed prompt template is a stale recording with the prompt diff, `--accept` makes both pass; partitions cover every scenario once; JUnit and GitHub output.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{copy_dir, copy_file, repository};

struct Verified {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn verify(dir: &Path, extra: &[&str]) -> Verified {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .arg("verify")
        .arg(dir)
        .args(extra)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    Verified {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

impl Verified {
    fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// A fresh project in the temporary directory holding the closed_loop seed spec (with
/// its prompts) and one of its golden scenarios.
fn project(name: &str, scenario: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("charter-verify-{name}-{}", std::process::id()));
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
    copy_dir(
        &repo.join("golden/closed_loop").join(scenario),
        &root.join("golden/closed_loop").join(scenario),
    );
    root
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        text.contains(from),
        "{} does not contain {from:?}",
        path.display()
    );
    std::fs::write(path, text.replacen(from, to, 1)).unwrap_or_else(|error| panic!("{error}"));
}

/// Removes each call's `prompt_hash` from a cassette whose block-style entries hold them:
/// the calls after a changed answer then replay as answered (their prompts show the
/// change), and the behaviour change is what `verify` reports.
fn unpin_calls(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{error}"));
    assert!(text.contains("    prompt_hash: "), "{text}");
    std::fs::write(path, support::without_prompt_hashes(&text))
        .unwrap_or_else(|error| panic!("{error}"));
}

#[test]
fn a_changed_response_fails_with_a_diff_a_changed_prompt_is_stale_and_accept_fixes_both() {
    let root = project("acceptance", "happy_path");
    let first = verify(&root, &[]);
    assert_eq!(first.code, Some(0), "{}", first.all());

    // One recorded response changes: the behaviour changed, shown as a diff naming the scenario.
    edit(
        &root.join("golden/closed_loop/happy_path/cassette.yaml"),
        "output: \"Heat pumps move heat instead of making it...\"",
        "output: \"Heat pumps burn gas.\"",
    );
    unpin_calls(&root.join("golden/closed_loop/happy_path/cassette.yaml"));
    let changed = verify(&root, &[]);
    assert_eq!(changed.code, Some(1), "{}", changed.all());
    assert!(
        changed
            .stdout
            .contains("CHANGED closed_loop/happy_path: behaviour changed"),
        "{}",
        changed.all()
    );
    assert!(
        changed
            .stdout
            .contains("--- golden/closed_loop/happy_path/trace.snap (snapshot)")
            && changed
                .stdout
                .contains("+++ closed_loop/happy_path (replay)"),
        "{}",
        changed.all()
    );
    // Field by field, never as two whole JSON lines.
    assert!(
        changed
            .stdout
            .lines()
            .any(|line| line.starts_with("~ event ") && line.contains("(candidate, round 1"))
            && changed
                .stdout
                .lines()
                .any(|line| line.starts_with("    candidate.hash: \"sha256:")),
        "a field-level diff of trace events: {}",
        changed.all()
    );
    assert!(
        !changed
            .stdout
            .lines()
            .any(|line| line.starts_with("-{\"seq\"") || line.starts_with("+{\"seq\"")),
        "{}",
        changed.all()
    );
    assert!(
        !changed.stdout.contains("stale recording"),
        "{}",
        changed.all()
    );
    let accepted = verify(&root, &["--accept"]);
    assert_eq!(accepted.code, Some(0), "{}", accepted.all());
    let again = verify(&root, &[]);
    assert_eq!(again.code, Some(0), "{}", again.all());

    // A prompt template changes: a stale recording, with the rendered prompt's diff.
    edit(
        &root.join("specs/seeds/closed_loop/prompts/planner.md.j2"),
        "You are the planner.",
        "You are the planner. Prefer fewer, larger work orders.",
    );
    let stale = verify(&root, &[]);
    assert_eq!(stale.code, Some(1), "{}", stale.all());
    assert!(
        stale
            .stdout
            .contains("STALE closed_loop/happy_path: stale recording"),
        "{}",
        stale.all()
    );
    assert!(
        stale.stdout.contains("prompt planner: sha256:"),
        "{}",
        stale.all()
    );
    assert!(
        stale
            .stdout
            .contains("--- prompt of role `planner` (recorded)")
            && stale
                .stdout
                .contains("+You are the planner. Prefer fewer, larger work orders."),
        "{}",
        stale.all()
    );
    // The planner's call answered another prompt: `--accept` does not take that on its
    // own (DESIGN §10); `charter review` shows it and keeps the answer when told to.
    assert!(
        stale
            .stdout
            .contains("call {step: plan, round: 1, attempt: 1} answered another prompt")
            && stale
                .stdout
                .contains("keep its answer for the new prompt with `charter review`"),
        "{}",
        stale.all()
    );
    let accepted = verify(&root, &["--accept"]);
    assert_eq!(accepted.code, Some(1), "{}", accepted.all());
    assert!(accepted.stdout.contains("STALE"), "{}", accepted.all());
    let reviewed = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(["review", "--all"])
        .arg(&root)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    let shown = String::from_utf8_lossy(&reviewed.stdout);
    assert_eq!(reviewed.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("closed_loop/happy_path (stale recording)")
            && shown.contains("+You are the planner. Prefer fewer, larger work orders.")
            && shown.contains("accepted (re-pinned) closed_loop/happy_path"),
        "{shown}"
    );
    let clean = verify(&root, &[]);
    assert_eq!(clean.code, Some(0), "{}", clean.all());
    assert!(
        clean.stdout.contains("1 scenario: 1 passed"),
        "{}",
        clean.all()
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn junit_and_github_annotations_point_at_the_failure() {
    let root = project("reports", "happy_path");
    edit(
        &root.join("golden/closed_loop/happy_path/scenario.yaml"),
        "expect: { outcome: completed, reason: gate_passed }",
        "expect: { outcome: completed, reason: max_rounds }",
    );
    let report = root.join("report.xml");
    let report_arg = report.to_string_lossy().into_owned();
    let failed = verify(&root, &["--github", "--junit", &report_arg]);
    assert_eq!(failed.code, Some(1), "{}", failed.all());
    assert!(
        failed.stdout.contains(
            "::error file=golden/closed_loop/happy_path/scenario.yaml,line=4,title=FAIL closed_loop/happy_path::expected reason max_rounds, got gate_passed"
        ),
        "{}",
        failed.all()
    );
    let xml = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(
        xml.contains("<testcase classname=\"golden.closed_loop\" name=\"happy_path\""),
        "{xml}"
    );
    assert!(
        xml.contains("<failure message=\"FAIL: expected reason max_rounds, got gate_passed\">"),
        "{xml}"
    );
    assert!(xml.contains("failures=\"1\""), "{xml}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn partitions_together_run_every_scenario_exactly_once() {
    let repo = repository();
    let rows = |output: &str| -> Vec<String> {
        output
            .lines()
            .skip_while(|line| !line.starts_with("spec "))
            .skip(2)
            .take_while(|line| !line.trim().is_empty())
            .map(|line| {
                line.split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect()
    };
    let everything = verify(&repo, &["--verbose"]);
    assert_eq!(everything.code, Some(0), "{}", everything.all());
    let mut all = rows(&everything.stdout);
    assert!(
        all.len() >= 40,
        "{} scenarios: {}",
        all.len(),
        everything.stdout
    );
    let mut sharded = Vec::new();
    for shard in ["1/3", "2/3", "3/3"] {
        let part = verify(&repo, &["--verbose", "--partition", shard]);
        assert_eq!(part.code, Some(0), "{}", part.all());
        sharded.extend(rows(&part.stdout));
    }
    all.sort();
    sharded.sort();
    assert_eq!(sharded, all);
    let bad = verify(&repo, &["--partition", "4/3"]);
    assert_eq!(bad.code, Some(2), "{}", bad.all());
}

#[test]
fn a_project_with_a_broken_spec_fails_on_the_spec_line() {
    let root = project("broken", "happy_path");
    edit(
        &root.join("specs/seeds/closed_loop.charter"),
        "budget { tokens 500000",
        "budget { tokenz 500000",
    );
    let failed = verify(&root, &["--github"]);
    assert_eq!(failed.code, Some(1), "{}", failed.all());
    assert!(
        failed
            .stdout
            .contains("::error file=specs/seeds/closed_loop.charter,line="),
        "{}",
        failed.all()
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The `cargo test` side of the comparison: a changed trace is left beside its snapshot as
/// insta's pending `trace.snap.new` (what `cargo insta review` shows and accepts), insta
/// reads it as the new trace, and it goes away once the trace matches again.
#[test]
fn a_changed_trace_leaves_a_pending_snapshot_insta_can_read() {
    use charter_runtime::harness::{HarnessConfig, Status, verify_project};
    let root = project("pending", "happy_path");
    let snapshot = root.join("golden/closed_loop/happy_path/trace.snap");
    let pending = root.join("golden/closed_loop/happy_path/trace.snap.new");
    let config = HarnessConfig {
        pending_snapshots: true,
        ..HarnessConfig::default()
    };
    let cassette = root.join("golden/closed_loop/happy_path/cassette.yaml");
    let original = std::fs::read_to_string(&cassette).unwrap_or_default();
    edit(
        &cassette,
        "output: \"Heat pumps move heat instead of making it...\"",
        "output: \"Heat pumps burn gas.\"",
    );
    unpin_calls(&cassette);
    let statuses = || -> Vec<Status> {
        verify_project(&root, &config)
            .unwrap_or_default()
            .iter()
            .map(|report| report.status)
            .collect()
    };
    assert_eq!(statuses(), [Status::Changed]);
    let old = insta::Snapshot::from_file(&snapshot);
    let new = insta::Snapshot::from_file(&pending);
    let (Ok(old), Ok(new)) = (old, new) else {
        panic!("insta cannot read the snapshot or the pending snapshot");
    };
    let text = |snapshot: &insta::Snapshot| {
        snapshot
            .as_text()
            .map(ToString::to_string)
            .unwrap_or_default()
    };
    // The trace holds output hashes, not texts: the item's and the candidate's hashes moved.
    assert_ne!(text(&old), text(&new));
    assert_eq!(text(&old).lines().count(), text(&new).lines().count());
    assert_eq!(new.metadata().source(), old.metadata().source());
    assert_eq!(new.metadata().description(), old.metadata().description());

    // Back to the recorded response: the pending snapshot is out of date and removed.
    std::fs::write(&cassette, original).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(statuses(), [Status::Pass]);
    assert!(!pending.exists());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn values_from_a_cassette_reach_the_terminal_and_junit_escaped_and_cut() {
    let root = project("escaped", "happy_path");
    // A spec hash that tries to start a workflow command on a line of its own and to
    // colour the terminal, then goes on for a megabyte.
    let crafted = format!(
        "spec_hash: \"sha256:x\\n::error::pwned\\e[31m{}\"",
        "y".repeat(1024 * 1024)
    );
    let cassette = root.join("golden/closed_loop/happy_path/cassette.yaml");
    let text = std::fs::read_to_string(&cassette).unwrap_or_default();
    let Some(line) = text
        .lines()
        .find(|line| line.trim_start().starts_with("spec_hash:"))
    else {
        panic!("the cassette has no spec_hash");
    };
    edit(&cassette, line.trim_start(), &crafted);
    let junit = root.join("junit.xml");
    let junit_arg = junit.display().to_string();
    let verified = verify(&root, &["--junit", &junit_arg]);
    assert_eq!(verified.code, Some(1), "{}", verified.stderr);
    for (what, output) in [("stdout", &verified.stdout), ("stderr", &verified.stderr)] {
        assert!(
            !output.lines().any(|line| line.starts_with("::")),
            "a workflow command on {what}"
        );
        assert!(!output.contains('\u{1b}'), "an escape character on {what}");
        assert!(
            output.len() < 100_000,
            "{what} holds {} bytes",
            output.len()
        );
    }
    assert!(
        verified
            .stdout
            .contains("sha256:x\\n::error::pwned\\x1b[31m"),
        "{}",
        &verified.stdout[..verified.stdout.len().min(3000)]
    );
    let xml = std::fs::read_to_string(&junit).unwrap_or_default();
    assert!(
        xml.len() < 100_000,
        "the JUnit file holds {} bytes",
        xml.len()
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// DESIGN §10: a hand-written call may state what its prompt must (not) contain. In
/// `repair_succeeds` the round-2 executor is rerun with the evaluator's issues: a text
/// the feedback holds passes, a text it does not hold fails the scenario at that call,
/// naming its key and the text.
#[test]
fn expect_prompt_passes_when_the_prompt_holds_the_text_and_fails_naming_key_and_text() {
    let root = project("expect-prompt", "repair_succeeds");
    let cassette = root.join("golden/closed_loop/repair_succeeds/cassette.yaml");
    let call = "  - step: execute\n    round: 2\n    item: T-001\n";
    edit(
        &cassette,
        call,
        &format!(
            "{call}    expect_prompt: {{ contains: [\"LOW_RELEVANCE\"], not_contains: [\"STAGE_FAILED\"] }}\n"
        ),
    );
    let passed = verify(&root, &[]);
    assert_eq!(passed.code, Some(0), "{}", passed.all());

    edit(
        &cassette,
        "contains: [\"LOW_RELEVANCE\"]",
        "contains: [\"LOW_RELEVANCE\", \"cite the efficiency figures\"]",
    );
    let text = std::fs::read_to_string(&cassette).unwrap_or_default();
    let line = text
        .find(call)
        .map(|at| text[..at].matches('\n').count() + 1)
        .unwrap_or_default();
    let failed = verify(&root, &["--github"]);
    assert_eq!(failed.code, Some(1), "{}", failed.all());
    let all = failed.all();
    assert!(
        all.contains(
            r#"the prompt of call {step: execute, round: 2, item: T-001, attempt: 1} does not contain "cite the efficiency figures""#
        ),
        "{all}"
    );
    assert!(
        !all.contains("LOW_RELEVANCE\" "),
        "only the missing text is named: {all}"
    );
    assert!(
        failed.stdout.contains(&format!(
            "::error file=golden/closed_loop/repair_succeeds/cassette.yaml,line={line}"
        )),
        "{all}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// DESIGN §8.6: a scenario whose `input` breaks the request contract is an error at its
/// `input:` line naming the field, and nothing is replayed (`charter replay` says the same).
#[test]
fn a_scenario_with_a_bad_input_fails_naming_the_field() {
    let root = project("bad-input", "happy_path");
    let scenario = root.join("golden/closed_loop/happy_path");
    edit(
        &scenario.join("scenario.yaml"),
        "input: { goal: ",
        "input: { gaol: ",
    );
    let failed = verify(&root, &["--github"]);
    assert_eq!(failed.code, Some(1), "{}", failed.all());
    let all = failed.all();
    assert!(
        all.contains("`input` does not match the request contract `Request`: goal: "),
        "{all}"
    );
    assert!(all.contains("gaol"), "{all}");
    assert!(
        failed
            .stdout
            .contains("::error file=golden/closed_loop/happy_path/scenario.yaml,line=3"),
        "{all}"
    );
    let replayed = Command::new(env!("CARGO_BIN_EXE_charter"))
        .arg("replay")
        .arg(&scenario)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    let stderr = String::from_utf8_lossy(&replayed.stderr);
    assert_eq!(replayed.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("goal: ") && stderr.contains("gaol"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("call planner"),
        "a model call was replayed: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The data a `--html` page holds: its `<script id="data">` JSON.
fn page_data(page: &str) -> serde_json::Value {
    let start = page
        .find("<script type=\"application/json\" id=\"data\">")
        .map(|at| at + "<script type=\"application/json\" id=\"data\">".len())
        .unwrap_or_else(|| panic!("no data in the page"));
    let end = page[start..]
        .find("</script>")
        .unwrap_or_else(|| panic!("the data does not end"));
    serde_json::from_str(&page[start..start + end]).unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn an_html_report_shows_every_scenario_its_timeline_and_the_failures_diff() {
    let root = project("html", "happy_path");
    copy_dir(
        &repository().join("golden/closed_loop/repair_succeeds"),
        &root.join("golden/closed_loop/repair_succeeds"),
    );
    edit(
        &root.join("golden/closed_loop/happy_path/cassette.yaml"),
        "output: \"Heat pumps move heat instead of making it...\"",
        "output: \"Heat pumps burn gas.\"",
    );
    unpin_calls(&root.join("golden/closed_loop/happy_path/cassette.yaml"));
    let report = root.join("report.html");
    let verified = verify(&root, &["--html", report.to_str().unwrap_or_default()]);
    assert_eq!(verified.code, Some(1), "{}", verified.all());
    let page = std::fs::read_to_string(&report).unwrap_or_else(|error| panic!("{error}"));
    assert!(
        page.contains("function charterTimeline"),
        "the script is inside"
    );
    assert!(
        !page.contains("https://") && !page.contains("http://"),
        "no network"
    );
    let data = page_data(&page);
    let scenarios = data["scenarios"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = scenarios
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["closed_loop/happy_path", "closed_loop/repair_succeeds"]
    );
    let failing = &scenarios[0];
    assert_eq!(failing["status"], "CHANGED", "{failing}");
    let diff = failing["diff"].as_str().unwrap_or_default();
    assert!(diff.contains("behaviour changed"), "{diff}");
    assert!(
        diff.contains("delivery.actual_hash: ") && diff.contains(" -> "),
        "the field-level diff: {diff}"
    );
    let passing = &scenarios[1];
    assert_eq!(passing["status"], "passed", "{passing}");
    assert!(passing.get("diff").is_none());
    // Each timeline is the trace it produced.
    let kinds: Vec<&str> = passing["events"]
        .as_array()
        .map(|events| events.iter().filter_map(|e| e["kind"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(kinds.first(), Some(&"run_started"));
    assert_eq!(kinds.last(), Some(&"run_finished"));
    assert!(
        kinds.contains(&"repair") && kinds.contains(&"gate"),
        "{kinds:?}"
    );
    assert!(failing["events"].to_string().contains("run_finished"));
}

#[test]
fn charter_view_writes_a_trace_as_a_page() {
    let root = project("view", "happy_path");
    let trace = root.join("golden/closed_loop/happy_path/trace.snap");
    let out = root.join("trace.html");
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args([
            "view",
            trace.to_str().unwrap_or_default(),
            "-o",
            out.to_str().unwrap_or_default(),
        ])
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let page = std::fs::read_to_string(&out).unwrap_or_else(|error| panic!("{error}"));
    let data = page_data(&page);
    let scenario = &data["scenarios"][0];
    assert_eq!(scenario["status"], "completed");
    let snapshot = std::fs::read_to_string(&trace).unwrap_or_default();
    let lines = snapshot
        .lines()
        .filter(|line| line.starts_with('{'))
        .count();
    assert_eq!(scenario["events"].as_array().map(Vec::len), Some(lines));

    let empty = root.join("empty.jsonl");
    std::fs::write(&empty, "not a trace\n").unwrap_or_else(|error| panic!("{error}"));
    let refused = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(["view", empty.to_str().unwrap_or_default()])
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        !root.join("empty.html").exists(),
        "nothing written for a refused trace"
    );
}

/// Specs that cannot be read are each reported on a line of their own (the messages used
/// to run together with no line break).
#[test]
fn specs_that_cannot_be_read_are_reported_a_line_each() {
    let root =
        std::env::temp_dir().join(format!("charter-verify-unreadable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("specs")).unwrap_or_else(|error| panic!("{error}"));
    for name in ["a", "b"] {
        std::fs::write(
            root.join(format!("specs/{name}.charter")),
            b"spec x version \"1\"\n\xff\xfe\n",
        )
        .unwrap_or_else(|error| panic!("{error}"));
    }
    let verified = verify(&root, &[]);
    assert_eq!(verified.code, Some(1), "{}", verified.all());
    let lines: Vec<&str> = verified
        .stderr
        .lines()
        .filter(|line| line.contains("is not UTF-8 text"))
        .collect();
    assert_eq!(lines.len(), 2, "{}", verified.stderr);
    assert!(
        lines.iter().all(|line| line.starts_with("error: ")),
        "{lines:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A `--filter` that matches nothing is a usage error naming the closest scenario, not a
/// pass that verified nothing.
#[test]
fn a_filter_that_matches_nothing_is_a_usage_error_with_the_closest_name() {
    let root = project("filter-none", "timeout_then_recovery");
    let verified = verify(&root, &["--filter", "timeout_then_recovry"]);
    assert_eq!(verified.code, Some(2), "{}", verified.all());
    assert!(
        verified.stderr.contains("matches no spec and no scenario")
            && verified
                .stderr
                .contains("did you mean `timeout_then_recovery`?"),
        "{}",
        verified.stderr
    );
    let verified = verify(&root, &["--filter", "recovery"]);
    assert_eq!(verified.code, Some(0), "{}", verified.all());
    let _ = std::fs::remove_dir_all(&root);
}
