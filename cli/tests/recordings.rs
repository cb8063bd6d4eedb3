//! Recordings people can write and trust (DESIGN §10): hand-written (unpinned) cassettes, "did you mean" for names a cassette gets wrong, the closest unused recording for a missing call, per-call prompt hashes, and `expect` on delivery, answer and calls.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{copy_dir, copy_file, repository};

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// `charter ARGS` in `dir`, with NO_COLOR.
fn charter(dir: &Path, args: &[&str]) -> Ran {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    let ran = Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
    ran
}

/// A fresh project holding the closed_loop seed (spec and prompts) and a copy of one of
/// its golden scenarios, renamed `scenario`.
fn project(name: &str, from: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("recordings-tests")
        .join(name);
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
        &repo.join("golden/closed_loop").join(from),
        &root.join("golden/closed_loop/scenario"),
    );
    root
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = read(path);
    assert!(
        text.contains(from),
        "{} does not contain {from:?}",
        path.display()
    );
    std::fs::write(path, text.replacen(from, to, 1)).unwrap_or_else(|error| panic!("{error}"));
}

fn cassette(root: &Path) -> PathBuf {
    root.join("golden/closed_loop/scenario/cassette.yaml")
}

/// The cassette without its `recorded:` block and its calls' `prompt_hash`: what a
/// person writes by hand.
fn unpin(root: &Path) {
    let path = cassette(root);
    let text = read(&path);
    let mut out = String::new();
    let mut skipping = false;
    for line in text.split_inclusive('\n') {
        if line.starts_with("recorded:") {
            skipping = true;
            continue;
        }
        if skipping && (line.starts_with(' ') || line.trim().is_empty()) {
            continue;
        }
        skipping = false;
        out.push_str(line);
    }
    let out = support::without_prompt_hashes(&out);
    assert!(!out.contains("recorded:"), "{out}");
    std::fs::write(&path, out).unwrap_or_else(|error| panic!("{error}"));
}

#[test]
fn a_hand_written_cassette_replays_unpinned_and_is_pinned_only_with_pin() {
    let root = project("unpinned", "timeout_then_recovery");
    unpin(&root);
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    assert!(ran.stdout.contains("unpinned"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("1 scenario: 1 unpinned (passed)"),
        "{}",
        ran.stdout
    );

    // A changed prompt template does not make an unpinned cassette stale: only the
    // trace (which holds the prompt hashes) changes.
    edit(
        &root.join("specs/seeds/closed_loop/prompts/planner.md.j2"),
        "You are",
        "You, above all, are",
    );
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(ran.stdout.contains("CHANGED"), "{}", ran.stdout);
    assert!(!ran.all().contains("STALE"), "{}", ran.all());

    // `--accept` takes the trace and leaves a hand-written cassette as it is written.
    let before = read(&cassette(&root));
    let ran = charter(&root, &["verify", "--accept"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    assert_eq!(read(&cassette(&root)), before);
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    assert!(ran.stdout.contains("1 unpinned (passed)"), "{}", ran.stdout);

    // `--accept --pin` writes the `recorded` block after `version:`, keeping the rest.
    let ran = charter(&root, &["verify", "--accept", "--pin"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    assert!(
        ran.stdout
            .contains("pinned golden/closed_loop/scenario/cassette.yaml"),
        "{}",
        ran.stdout
    );
    let pinned = read(&cassette(&root));
    assert!(
        pinned.starts_with("version: 1\nrecorded:\n  spec_hash: sha256:"),
        "{pinned}"
    );
    // Each of the six model calls is pinned to the prompt it answered; nothing else moved.
    assert_eq!(
        pinned.matches("prompt_hash: \"sha256:").count(),
        6,
        "{pinned}"
    );
    let calls_unpinned = support::without_prompt_hashes(&pinned);
    assert!(
        calls_unpinned.ends_with(before.trim_start_matches("version: 1\n")),
        "{pinned}"
    );
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    assert!(
        ran.stdout.contains("1 scenario: 1 passed"),
        "{}",
        ran.stdout
    );

    // Pinned, the same kind of change is now stale.
    edit(
        &root.join("specs/seeds/closed_loop/prompts/planner.md.j2"),
        "You, above all, are",
        "You are",
    );
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(ran.stdout.contains("STALE"), "{}", ran.stdout);
}

#[test]
fn a_misspelt_step_or_judge_role_in_a_cassette_is_named_with_did_you_mean() {
    let root = project("misspelt_step", "timeout_then_recovery");
    unpin(&root);
    edit(
        &cassette(&root),
        "  - step: evaluate\n",
        "  - step: evalute\n",
    );
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stdout.contains(
            "call {step: evalute, round: 1, attempt: 1}: the spec `closed_loop` has no step `evalute`; did you mean `evaluate`?"
        ),
        "{}",
        ran.stdout
    );
    // At the entry's own line.
    assert_points_at_cassette_line(&root, &ran.stdout, "step: evalute");
    // `charter replay` says the same, and nothing about another version of the spec.
    let ran = charter(&root, &["replay", "golden/closed_loop/scenario"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stderr.contains("did you mean `evaluate`?"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("another version"), "{}", ran.stderr);

    edit(
        &cassette(&root),
        "  - step: evalute\n",
        "  - step: evaluate\n    role: evaluator\n",
    );
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stdout
            .contains("`role:` names the judge of a per-item check, and step `evaluate` has none"),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_missing_call_names_the_closest_unused_recording_and_a_misspelt_item() {
    let root = project("closest", "timeout_then_recovery");
    unpin(&root);
    edit(
        &cassette(&root),
        "{ step: execute, item: T-002, attempt: 1, latency: 20m }",
        "{ step: execute, item: T-02, attempt: 1, latency: 20m }",
    );
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stdout.contains(
            "no recorded call for {step: execute, round: 1, item: T-002, attempt: 1}; the closest unused recording is {step: execute, round: 1, item: T-02, attempt: 1}"
        ),
        "{}",
        ran.stdout
    );
    assert_points_at_cassette_line(&root, &ran.stdout, "item: T-02,");
    // `charter replay` of an unpinned cassette does not blame another version of the spec.
    let ran = charter(&root, &["replay", "golden/closed_loop/scenario"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stderr.contains("the closest unused recording is"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("another version"), "{}", ran.stderr);
}

#[test]
fn an_unused_call_for_an_item_that_never_ran_suggests_the_item() {
    let root = project("unused_item", "timeout_then_recovery");
    unpin(&root);
    // An extra recording for a misspelt item: the run never asks for it.
    let text = read(&cassette(&root));
    std::fs::write(
        cassette(&root),
        text.replacen(
            "calls:\n",
            "calls:\n  - { step: execute, item: T-0001, attempt: 3, latency: 1s }\n",
            1,
        ),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stdout.contains(
            "item `T-0001` never ran in step `execute` (its items: `T-001`, `T-002`); did you mean `T-001`?"
        ),
        "{}",
        ran.stdout
    );
}

#[test]
fn expect_checks_the_delivered_candidate_the_answer_and_calls_per_step() {
    let root = project("expect", "max_rounds_best_candidate");
    let scenario = root.join("golden/closed_loop/scenario/scenario.yaml");
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());

    edit(&scenario, "delivered: c2 ", "delivered: c4 ");
    edit(
        &scenario,
        "answer: { candidate_id: c2 }",
        "answer: { candidate_id: c4, summary: x }",
    );
    edit(&scenario, "execute: 8", "execute: 7");
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stdout.contains(
            "expected delivered c4, got c2 and answer.candidate_id = \"c4\", got \"c2\" and 7 model calls in step `execute`, got 8"
        ),
        "{}",
        ran.stdout
    );
    // `charter replay` checks the same expectations.
    let ran = charter(&root, &["replay", "golden/closed_loop/scenario"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stderr
            .contains("7 model calls in step `execute`, got 8"),
        "{}",
        ran.stderr
    );

    // A step the spec does not have is named before anything runs.
    edit(&scenario, "execute: 7", "exeucte: 7");
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stdout.contains(
            "`expect.calls` names step `exeucte`, which the spec `closed_loop` does not have; did you mean `execute`?"
        ),
        "{}",
        ran.stdout
    );
    let ran = charter(&root, &["replay", "golden/closed_loop/scenario"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stderr.contains("did you mean `execute`?"),
        "{}",
        ran.stderr
    );
}

#[test]
fn annotations_are_relative_to_where_verify_runs_and_an_erroring_scenario_counts_its_events() {
    let root = project("annotations", "timeout_then_recovery");
    unpin(&root);
    // A call the cassette lacks: the replay stops part way, after some events.
    edit(
        &cassette(&root),
        "  - step: deliver\n",
        "  - step: deliver\n    round: 2\n",
    );
    let parent = root.parent().unwrap_or(&root).to_path_buf();
    let name = root
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let report = format!("{name}/report.xml");
    let ran = charter(&parent, &["verify", &name, "--github", "--junit", &report]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stdout.contains(&format!(
            "::error file={name}/golden/closed_loop/scenario/cassette.yaml,line="
        )),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("title=ERROR closed_loop/scenario::"),
        "{}",
        ran.stdout
    );
    let row = ran
        .stdout
        .lines()
        .find(|line| line.starts_with("closed_loop") && line.contains("ERROR"))
        .unwrap_or_default()
        .to_string();
    let events: usize = row
        .split_whitespace()
        .rev()
        .nth(1)
        .and_then(|count| count.parse().ok())
        .unwrap_or(0);
    assert!(events > 20, "the events emitted before the error: {row}");
    let xml = read(&root.join("report.xml"));
    assert!(
        xml.contains("<error message=\"ERROR: the replay failed: no recorded call for {step: deliver, round: 1, attempt: 1}"),
        "{xml}"
    );
}

/// The `result` rows of a verify table: scenario names.
fn rows(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|line| line.starts_with("closed_loop "))
        .filter_map(|line| line.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

#[test]
fn partitions_deal_round_robin_by_default_and_an_empty_shard_passes_saying_so() {
    let root = project("partition", "happy_path");
    for name in [
        "timeout_then_recovery",
        "malformed_output",
        "repair_succeeds",
        "no_progress",
        "partial_success",
        "budget_exhausted",
    ] {
        copy_dir(
            &repository().join("golden/closed_loop").join(name),
            &root.join("golden/closed_loop").join(name),
        );
    }
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    for shard in ["1/3", "count:2/3", "3/3"] {
        let ran = charter(&root, &["verify", "--verbose", "--partition", shard]);
        assert_eq!(ran.code, Some(0), "{}", ran.all());
        let names = rows(&ran.stdout);
        sizes.push(names.len());
        seen.extend(names);
    }
    assert_eq!(sizes, vec![3, 2, 2], "round-robin: no shard is empty");
    seen.sort();
    assert_eq!(seen.len(), 7);
    seen.dedup();
    assert_eq!(seen.len(), 7, "every scenario in exactly one shard");

    // By hash: together every scenario exactly once too.
    let mut hashed = Vec::new();
    for shard in ["hash:1/3", "hash:2/3", "hash:3/3"] {
        let ran = charter(&root, &["verify", "--verbose", "--partition", shard]);
        assert_eq!(ran.code, Some(0), "{}", ran.all());
        hashed.extend(rows(&ran.stdout));
    }
    hashed.sort();
    hashed.dedup();
    assert_eq!(hashed.len(), 7);

    let ran = charter(&root, &["verify", "--partition", "9/9"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    assert!(
        ran.stderr.contains(
            "note: shard count:9/9 is empty: it holds none of the 7 scenarios and 1 spec selected; nothing to verify, so it passes"
        ),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("has no specs/"), "{}", ran.stderr);
}

#[test]
fn verify_lists_only_what_failed_unless_verbose_and_colours_only_when_asked() {
    let root = project("output", "happy_path");
    copy_dir(
        &repository().join("golden/closed_loop/malformed_output"),
        &root.join("golden/closed_loop/malformed_output"),
    );
    edit(
        &root.join("golden/closed_loop/scenario/cassette.yaml"),
        "relevance: 9",
        "relevance: 7",
    );
    let plain = charter(&root, &["verify"]);
    assert_eq!(plain.code, Some(1), "{}", plain.all());
    let table_rows: Vec<&str> = plain
        .stdout
        .lines()
        .filter(|line| line.starts_with("closed_loop "))
        .collect();
    assert_eq!(table_rows.len(), 1, "only the failure: {}", plain.stdout);
    assert!(table_rows[0].contains("CHANGED"), "{}", plain.stdout);
    assert!(
        plain.stdout.contains("2 scenarios: 1 passed, 1 changed"),
        "{}",
        plain.stdout
    );
    assert!(
        plain
            .stdout
            .contains("    gate.score: 8.666666666666666 -> 8.0"),
        "{}",
        plain.stdout
    );
    assert!(
        !plain.all().contains('\u{1b}'),
        "no colour in a pipe: {}",
        plain.all()
    );

    let verbose = charter(&root, &["verify", "--verbose"]);
    let rows = verbose
        .stdout
        .lines()
        .filter(|line| line.starts_with("closed_loop "))
        .count();
    assert_eq!(rows, 2, "{}", verbose.stdout);

    let coloured = charter(&root, &["--color", "always", "verify"]);
    assert!(
        coloured.stdout.contains(
            "    gate.score: \u{1b}[31m8.666666666666666\u{1b}[0m -> \u{1b}[32m8.0\u{1b}[0m"
        ),
        "{}",
        coloured.stdout
    );
    // The output is the same but for the colour codes.
    let stripped = coloured
        .stdout
        .replace("\u{1b}[31m", "")
        .replace("\u{1b}[32m", "")
        .replace("\u{1b}[36m", "")
        .replace("\u{1b}[1;31m", "")
        .replace("\u{1b}[1m", "")
        .replace("\u{1b}[0m", "");
    assert_eq!(stripped, plain.stdout);
}

#[test]
fn charter_new_scaffolds_a_project_that_verifies_with_a_ci_workflow() {
    let parent = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("recordings-tests")
        .join("new");
    let _ = std::fs::remove_dir_all(&parent);
    std::fs::create_dir_all(&parent).unwrap_or_else(|error| panic!("{error}"));
    let ran = charter(&parent, &["new", "support_agent"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    let root = parent.join("support_agent");
    for file in [
        "specs/support_agent.charter",
        "specs/prompts/writer.md.j2",
        "golden/support_agent/writer_fixes_review/scenario.yaml",
        "golden/support_agent/writer_fixes_review/cassette.yaml",
        "golden/support_agent/writer_fixes_review/trace.snap",
        ".github/workflows/charter.yml",
    ] {
        assert!(root.join(file).is_file(), "{file}");
    }
    assert!(read(&root.join(".github/workflows/charter.yml")).contains("charter verify --github"));
    assert!(
        !read(&root.join("golden/support_agent/writer_fixes_review/cassette.yaml"))
            .contains("recorded:")
    );
    let verified = charter(&root, &["verify"]);
    assert_eq!(verified.code, Some(0), "{}", verified.all());
    assert!(
        verified
            .stdout
            .contains("1 spec compiled; 1 scenario: 1 unpinned (passed)"),
        "{}",
        verified.stdout
    );
    let checked = charter(&root, &["check", "--deny-warnings", "specs"]);
    assert_eq!(
        checked.code,
        Some(0),
        "no warning either: {}",
        checked.all()
    );

    let again = charter(&parent, &["new", "support_agent"]);
    assert_eq!(again.code, Some(2), "{}", again.all());
    assert!(
        again
            .stderr
            .contains("already exists and is not an empty directory"),
        "{}",
        again.stderr
    );
    // A directory name that is no spec identifier names the spec as one.
    let dashed = charter(&parent, &["new", "Support-Agent"]);
    assert_eq!(dashed.code, Some(0), "{}", dashed.all());
    assert!(
        parent
            .join("Support-Agent/specs/support_agent.charter")
            .is_file(),
        "{}",
        dashed.stderr
    );
    let bad = charter(&parent, &["new", "2-3"]);
    assert_eq!(bad.code, Some(2), "{}", bad.all());
    assert!(bad.stderr.contains("cannot name a spec"), "{}", bad.stderr);
}

#[test]
fn completions_for_each_shell_and_one_format_flag_across_commands() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    for (shell, marker) in [
        ("bash", "complete -F _charter"),
        ("zsh", "#compdef charter"),
        ("fish", "complete -c charter"),
    ] {
        let ran = charter(dir, &["completions", shell]);
        assert_eq!(ran.code, Some(0), "{}", ran.all());
        assert!(ran.stdout.contains(marker), "{shell}: {}", ran.stdout);
        for command in ["verify", "review", "new", "completions"] {
            assert!(ran.stdout.contains(command), "{shell} lacks {command}");
        }
    }
    let bad = charter(dir, &["completions", "tcsh"]);
    assert_eq!(bad.code, Some(2));

    let spec = repository().join("specs/seeds/closed_loop.charter");
    let spec = spec.to_string_lossy();
    for flag in ["--format", "--message-format"] {
        let ran = charter(dir, &["check", flag, "json", &spec]);
        assert_eq!(ran.code, Some(0), "{flag}: {}", ran.all());
    }
    let graph = charter(dir, &["graph", "--format", "json", &spec]);
    assert_eq!(graph.code, Some(0), "{}", graph.all());
}

#[test]
fn replay_ends_with_totals_of_calls_tokens_cost_and_virtual_time() {
    let root = project("totals", "timeout_then_recovery");
    let ran = charter(&root, &["replay", "golden/closed_loop/scenario"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    // 6 calls (T-002 twice); tokens and cost from the cassette's usage at the spec's
    // prices: planner and evaluator at 3.00/15.00, executor and finalizer at 0.15/0.60.
    assert!(
        ran.stderr.contains(
            "totals: 6 calls, 8,300 tokens (6,400 in, 1,900 out), $0.0176; 6m10s virtual in "
        ),
        "{}",
        ran.stderr
    );
}

/// `stdout` names the line of the scenario's cassette that holds `needle`.
fn assert_points_at_cassette_line(root: &Path, stdout: &str, needle: &str) {
    let line = read(&cassette(root))
        .lines()
        .position(|line| line.contains(needle))
        .map(|index| index + 1)
        .unwrap_or_default();
    assert!(
        stdout.contains(&format!("golden/closed_loop/scenario/cassette.yaml:{line}")),
        "{stdout}"
    );
}
