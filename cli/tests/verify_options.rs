//! `charter verify`'s options of DESIGN §18 end to end: the specs' compiler warnings (and `--deny-warnings`), `--list`, `--fail-fast`, `--format json` (docs/verify-json.md) and `-j N`, whose output is the same for every N.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::{copy_dir, copy_file, repository};

struct Verified {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Verified {
    fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

fn charter(args: &[&str]) -> Verified {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    Verified {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn verify(dir: &Path, extra: &[&str]) -> Verified {
    let dir = dir.to_string_lossy();
    let mut args = vec!["verify", dir.as_ref()];
    args.extend_from_slice(extra);
    charter(&args)
}

/// An empty project directory in the temporary directory.
fn scratch(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!(
        "charter-verify-options-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap_or_else(|error| panic!("{error}"));
    root
}

/// A project holding the closed_loop seed spec (with its prompts) and the given golden
/// scenarios of it.
fn closed_loop_project(name: &str, scenarios: &[&str]) -> PathBuf {
    let root = scratch(name);
    let repo = repository();
    copy_dir(
        &repo.join("specs/seeds/closed_loop"),
        &root.join("specs/seeds/closed_loop"),
    );
    copy_file(
        &repo.join("specs/seeds/closed_loop.charter"),
        &root.join("specs/seeds/closed_loop.charter"),
    );
    for scenario in scenarios {
        copy_dir(
            &repo.join("golden/closed_loop").join(scenario),
            &root.join("golden/closed_loop").join(scenario),
        );
    }
    root
}

/// A copy of the repository's whole library: every spec and every golden scenario.
fn library_project(name: &str) -> PathBuf {
    let root = scratch(name);
    let repo = repository();
    copy_dir(&repo.join("specs"), &root.join("specs"));
    copy_dir(&repo.join("golden"), &root.join("golden"));
    root
}

/// Makes the first recorded call with `latency: 3s` take 6 s: the scenario's trace changes.
fn slow_first_call(scenario: &Path) {
    let path = scenario.join("cassette.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(text.contains("latency: 3s"), "{}", path.display());
    std::fs::write(&path, text.replacen("latency: 3s", "latency: 6s", 1))
        .unwrap_or_else(|error| panic!("{error}"));
}

/// The W007 example spec (worst case over its wall budget) as `specs/notes.charter`, with
/// a hand-written scenario of it (`golden/notes/first/`), so both the spec stage and the
/// scenario compile it.
fn project_with_a_warning(name: &str) -> PathBuf {
    let root = scratch(name);
    copy_file(
        &repository().join("specs/warnings/w007_worst_case_exceeds_budget.charter"),
        &root.join("specs/notes.charter"),
    );
    let scenario = root.join("golden/notes/first");
    std::fs::create_dir_all(&scenario).unwrap_or_else(|error| panic!("{error}"));
    let files = [
        (
            "scenario.yaml",
            "spec: specs/notes.charter\ndescription: one note\ninput: { topic: \"heat pumps\" }\n",
        ),
        (
            "cassette.yaml",
            "version: 1\ncalls:\n  - { step: write, latency: 2s, response: { title: \"Heat pumps\", body: \"They move heat.\" } }\n",
        ),
    ];
    for (file, text) in files {
        std::fs::write(scenario.join(file), text).unwrap_or_else(|error| panic!("{error}"));
    }
    let accepted = verify(&root, &["--accept"]);
    assert_eq!(accepted.code, Some(0), "{}", accepted.all());
    root
}

#[test]
fn verify_shows_each_specs_warnings_once_as_check_does_and_deny_warnings_fails() {
    let root = project_with_a_warning("warnings");
    let verified = verify(&root, &[]);
    assert_eq!(verified.code, Some(0), "{}", verified.all());
    assert_eq!(
        verified.stderr.matches("warning[W007]").count(),
        1,
        "{}",
        verified.stderr
    );
    // The same rendering `charter check` gives, relative to the project.
    let checked = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(["check", "specs/notes.charter"])
        .current_dir(&root)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    let checked = String::from_utf8_lossy(&checked.stderr).into_owned();
    assert!(checked.contains("warning[W007]"), "{checked}");
    assert!(
        verified.stderr.contains(&checked),
        "verify:\n{}\ncheck:\n{checked}",
        verified.stderr
    );
    assert!(
        verified
            .stdout
            .contains("1 spec compiled, 1 with warnings; 1 scenario: 1 unpinned (passed)"),
        "{}",
        verified.stdout
    );

    let denied = verify(&root, &["--deny-warnings"]);
    assert_eq!(denied.code, Some(1), "{}", denied.all());
    assert!(
        denied
            .stderr
            .contains("error: `specs/notes.charter`: 1 warning"),
        "{}",
        denied.stderr
    );
    assert!(
        denied.stdout.contains("1 with warnings (denied)"),
        "{}",
        denied.stdout
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn list_prints_what_would_be_verified_and_replays_nothing() {
    let scenarios = ["happy_path", "repair_succeeds", "timeout_then_recovery"];
    let root = closed_loop_project("list", &scenarios);
    // A changed scenario would leave a pending snapshot if it were replayed.
    slow_first_call(&root.join("golden/closed_loop/happy_path"));
    let listed = verify(&root, &["--list"]);
    assert_eq!(listed.code, Some(0), "{}", listed.all());
    assert_eq!(
        listed.stdout,
        "specs/seeds/closed_loop.charter\nclosed_loop/happy_path\nclosed_loop/repair_succeeds\nclosed_loop/timeout_then_recovery\n"
    );
    assert!(
        !root
            .join("golden/closed_loop/happy_path/trace.snap.new")
            .exists(),
        "--list replayed a scenario"
    );

    // The shards of a partition list every scenario once between them.
    let mut shards = Vec::new();
    for shard in ["1/2", "2/2"] {
        let listed = verify(&root, &["--list", "--partition", shard]);
        assert_eq!(listed.code, Some(0), "{}", listed.all());
        shards.extend(
            listed
                .stdout
                .lines()
                .filter(|line| line.starts_with("closed_loop/"))
                .map(str::to_string),
        );
    }
    shards.sort();
    assert_eq!(shards, scenarios.map(|name| format!("closed_loop/{name}")));

    let filtered = verify(&root, &["--list", "--filter", "repair"]);
    assert_eq!(filtered.stdout, "closed_loop/repair_succeeds\n");
    let json = verify(&root, &["--list", "--filter", "repair", "--format", "json"]);
    let document: Value = serde_json::from_str(&json.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", json.stdout));
    assert_eq!(document["version"], 1);
    assert_eq!(
        document["scenarios"],
        serde_json::json!(["closed_loop/repair_succeeds"])
    );
    let unmatched = verify(&root, &["--list", "--filter", "repair_succeds"]);
    assert_eq!(unmatched.code, Some(2), "{}", unmatched.all());
    assert!(
        unmatched.stderr.contains("did you mean `repair_succeeds`?"),
        "{}",
        unmatched.stderr
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn fail_fast_stops_at_the_first_failing_scenario_whatever_the_threads() {
    let root = closed_loop_project(
        "fail-fast",
        &["happy_path", "repair_succeeds", "timeout_then_recovery"],
    );
    slow_first_call(&root.join("golden/closed_loop/repair_succeeds"));
    slow_first_call(&root.join("golden/closed_loop/timeout_then_recovery"));
    let one = verify(&root, &["--fail-fast", "-j", "1"]);
    assert_eq!(one.code, Some(1), "{}", one.all());
    assert!(
        one.stdout.contains(
            "1 spec compiled; 2 scenarios: 1 passed, 1 changed; stopped at the first failure (--fail-fast): 1 not run"
        ),
        "{}",
        one.stdout
    );
    assert!(
        one.stdout.contains("CHANGED closed_loop/repair_succeeds")
            && !one.stdout.contains("timeout_then_recovery"),
        "{}",
        one.stdout
    );
    for jobs in ["2", "4"] {
        let many = verify(&root, &["--fail-fast", "-j", jobs]);
        assert_eq!(many.code, Some(1), "{}", many.all());
        assert_eq!(many.stdout, one.stdout, "-j {jobs}");
    }
    // Without it, every scenario runs.
    let all = verify(&root, &[]);
    assert!(
        all.stdout.contains("3 scenarios: 1 passed, 2 changed"),
        "{}",
        all.stdout
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A field of a JSON object, which must be there.
fn field<'a>(object: &'a Value, name: &str) -> &'a Value {
    object
        .get(name)
        .unwrap_or_else(|| panic!("no `{name}` in {object}"))
}

#[test]
fn format_json_is_one_document_with_the_documented_fields() {
    let root = project_with_a_warning("json");
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
        &repo.join("golden/closed_loop/happy_path"),
        &root.join("golden/closed_loop/happy_path"),
    );
    slow_first_call(&root.join("golden/closed_loop/happy_path"));
    let verified = verify(&root, &["--format", "json"]);
    assert_eq!(verified.code, Some(1), "{}", verified.all());
    // The whole of stdout is one document; the diagnostics are in it, not on stderr.
    let document: Value = serde_json::from_str(&verified.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", verified.stdout));
    assert!(
        !verified.stderr.contains("warning[W007]"),
        "{}",
        verified.stderr
    );

    let documented = std::fs::read_to_string(repo.join("docs/verify-json.md"))
        .unwrap_or_else(|error| panic!("{error}"));
    let object_fields: [(&str, &Value, &[&str]); 1] = [(
        "document",
        &document,
        &[
            "version",
            "passed",
            "filter",
            "partition",
            "deny_warnings",
            "fail_fast",
            "specs",
            "scenarios",
            "summary",
        ],
    )];
    let check = |what: &str, object: &Value, names: &[&str]| {
        for name in names {
            field(object, name);
            assert!(
                documented.contains(&format!("| `{name}` |")),
                "the {what} field `{name}` is not in docs/verify-json.md"
            );
        }
    };
    for (what, object, names) in object_fields {
        check(what, object, names);
    }
    assert_eq!(document["version"], 1);
    assert_eq!(document["passed"], false);

    let specs = field(&document, "specs")
        .as_array()
        .cloned()
        .unwrap_or_default();
    let notes = specs
        .iter()
        .find(|spec| spec["path"] == "specs/notes.charter")
        .unwrap_or_else(|| panic!("{specs:?}"));
    check(
        "spec",
        notes,
        &["path", "status", "passed", "problem", "warnings"],
    );
    assert_eq!(notes["status"], "warnings");
    assert_eq!(notes["warnings"][0]["code"], "W007");
    assert_eq!(notes["warnings"][0]["file"], "specs/notes.charter");
    assert!(notes["warnings"][0]["line"].as_u64().is_some(), "{notes}");

    let scenarios = field(&document, "scenarios")
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ids: Vec<&str> = scenarios
        .iter()
        .filter_map(|scenario| scenario["id"].as_str())
        .collect();
    assert_eq!(ids, ["closed_loop/happy_path", "notes/first"]);
    let changed = &scenarios[0];
    check(
        "scenario",
        changed,
        &[
            "id",
            "spec",
            "scenario",
            "description",
            "status",
            "passed",
            "outcome",
            "reason",
            "events",
            "problems",
            "notes",
            "accepted",
        ],
    );
    assert_eq!(changed["status"], "changed");
    assert_eq!(changed["passed"], false);
    let problem = &changed["problems"][0];
    check(
        "problem",
        problem,
        &["kind", "message", "file", "line", "detail"],
    );
    assert_eq!(problem["kind"], "changed");
    assert_eq!(problem["file"], "golden/closed_loop/happy_path/trace.snap");
    assert!(problem["line"].as_u64().is_some(), "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("~ every later event +3 s (t_ms +3000)")),
        "{problem}"
    );
    assert_eq!(scenarios[1]["status"], "unpinned");

    let summary = field(&document, "summary");
    check(
        "summary",
        summary,
        &[
            "specs",
            "specs_with_errors",
            "specs_with_warnings",
            "warnings",
            "scenarios",
            "passed",
            "failed",
            "not_run",
            "by_status",
            "text",
        ],
    );
    assert_eq!(summary["specs"], 2);
    assert_eq!(summary["specs_with_warnings"], 1);
    assert_eq!(summary["scenarios"], 2);
    assert_eq!(summary["passed"], 1);
    assert_eq!(summary["failed"], 1);
    assert_eq!(summary["by_status"]["changed"], 1);
    assert_eq!(summary["by_status"]["unpinned"], 1);

    // --github writes on stdout too: not with a JSON document.
    let both = verify(&root, &["--format", "json", "--github"]);
    assert_eq!(both.code, Some(2), "{}", both.all());
    assert!(both.stdout.is_empty(), "{}", both.stdout);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn jobs_give_the_same_output_as_one_thread_over_the_whole_library() {
    let root = library_project("jobs");
    // Two scenarios fail, so details, the table and the notes are printed too.
    slow_first_call(&root.join("golden/closed_loop/happy_path"));
    slow_first_call(&root.join("golden/closed_loop/repair_succeeds"));
    let one = verify(&root, &["-j", "1"]);
    assert_eq!(one.code, Some(1), "{}", one.all());
    assert!(
        one.stdout.contains("2 changed"),
        "the library has two changed scenarios: {}",
        one.stdout
    );
    let four = verify(&root, &["-j", "4"]);
    assert_eq!(four.code, Some(1), "{}", four.all());
    assert_eq!(four.stdout, one.stdout);
    assert_eq!(four.stderr, one.stderr);
    let one_json = verify(&root, &["-j", "1", "--format", "json"]);
    let four_json = verify(&root, &["--jobs", "4", "--format", "json"]);
    assert_eq!(four_json.stdout, one_json.stdout);
    assert!(
        serde_json::from_str::<Value>(&one_json.stdout).is_ok(),
        "{}",
        one_json.stdout
    );

    let none = verify(&root, &["-j", "0"]);
    assert_eq!(none.code, Some(2), "{}", none.all());
    assert!(none.stderr.contains("at least 1"), "{}", none.stderr);
    let _ = std::fs::remove_dir_all(&root);
}
