//! The change loop (DESIGN §18) played end to end as a user plays it: comments and layout change nothing, a new step's error holds the entry to paste, the pasted entry gives a pending snapshot that `review` accepts, and a recording made for another request is caught at the call whose prompt changed.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use support::{copy_dir, openai_answer, repository};
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer};

/// What a `charter` command printed and how it ended.
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

fn charter(directory: &Path, args: &[&str]) -> Ran {
    charter_with_input(directory, args, "")
}

fn charter_with_input(directory: &Path, args: &[&str], input: &str) -> Ran {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .current_dir(directory)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{error}"));
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    let output = child
        .wait_with_output()
        .unwrap_or_else(|error| panic!("{error}"));
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn scratch(name: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("change-loop")
        .join(name);
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap_or_else(|error| panic!("{error}"));
    directory
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
}

fn replace(path: &Path, from: &str, to: &str) {
    let text = read(path);
    assert!(text.contains(from), "{} lacks {from:?}", path.display());
    write(path, &text.replacen(from, to, 1));
}

/// `text` (a spec) with a comment after each line outside a `"""` block, a block comment
/// before each declaration, another indentation and blank lines doubled: what comments and
/// a reformatting do to a spec, with every string left as it was.
fn relayout(text: &str) -> String {
    let mut out = String::new();
    let mut in_block = false;
    for line in text.lines() {
        let quotes = line.matches("\"\"\"").count();
        if in_block || quotes > 0 {
            out.push_str(line);
        } else if line.trim().is_empty() {
            out.push('\n');
        } else {
            let trimmed = line.trim_start();
            if ["role ", "contract ", "gate ", "tool ", "flow ", "rules "]
                .iter()
                .any(|keyword| line.starts_with(keyword))
            {
                out.push_str("/* a note on the next declaration */\n");
            }
            let depth = (line.len() - trimmed.len()) / 2;
            out.push_str(&"\t".repeat(depth + 1));
            out.push_str(trimmed);
            out.push_str("    // why this line is here");
        }
        out.push('\n');
        if quotes % 2 == 1 {
            in_block = !in_block;
        }
    }
    out
}

/// Every spec under `directory` (recursively).
fn specs_under(directory: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(directory) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(specs_under(&path));
        } else if path
            .extension()
            .is_some_and(|extension| extension == "charter")
        {
            found.push(path);
        }
    }
    found
}

#[test]
fn comments_and_layout_in_every_spec_change_no_snapshot_and_stale_no_recording() {
    let root = scratch("comments");
    let repo = repository();
    for directory in ["specs/seeds", "specs/examples", "golden"] {
        copy_dir(&repo.join(directory), &root.join(directory));
    }
    // The MCP example is checked against the project's lock.
    write(
        &root.join("charter.lock"),
        &read(&repo.join("charter.lock")),
    );
    let mut seeds = specs_under(&root.join("specs/seeds"));
    seeds.extend(specs_under(&root.join("specs/examples")));
    assert!(seeds.len() >= 6, "{seeds:?}");
    for spec in &seeds {
        let text = read(spec);
        let changed = relayout(&text);
        assert_ne!(changed, text);
        write(spec, &changed);
    }
    let ran = charter(&root, &["verify"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    assert!(!ran.stdout.contains("CHANGED"), "{}", ran.stdout);
    assert!(!ran.stdout.contains("STALE"), "{}", ran.stdout);
    let _ = std::fs::remove_dir_all(&root);
}

/// `charter run ... --record DIR` of the project's spec against `server`.
fn record(project: &Path, server: &MockServer, directory: &str) -> Ran {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(project)
        .args([
            "run",
            "specs/my_agent.charter",
            "--input",
            "request.json",
            "--record",
            directory,
        ])
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-change-loop-test")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test]
async fn a_new_step_is_an_entry_to_paste_then_a_pending_snapshot_that_review_accepts() {
    let root = scratch("new-step");
    let made = charter(&root, &["new", "my_agent"]);
    assert_eq!(made.code, Some(0), "{}", made.all());
    let project = root.join("my_agent");
    let spec = project.join("specs/my_agent.charter");
    let cassette = project.join("golden/my_agent/writer_fixes_review/cassette.yaml");

    // A comment: still green.
    let mut text = read(&spec);
    text.push_str("// x\n");
    write(&spec, &text);
    let ran = charter(&project, &["verify"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());

    // A step before the writer: the error is the entry to add, with a response of the
    // writer's contract `Draft`.
    replace(
        &spec,
        "  write   = writer(request)          -> review",
        "  outline = writer(request)            -> write\n  write   = writer(request)          -> review",
    );
    let ran = charter(&project, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    let entry = "  - { step: outline, response: { title: TODO, body: TODO } }";
    assert!(
        ran.stdout
            .contains("no recorded call for {step: outline, round: 1, attempt: 1}")
            && ran.stdout.contains("add this entry under `calls:`")
            && ran.stdout.contains(entry),
        "{}",
        ran.stdout
    );
    assert!(
        !project
            .join("golden/my_agent/writer_fixes_review/trace.snap.new")
            .exists()
    );

    // Paste it (with a latency): the scenario replays, its snapshot is pending, and the
    // diff shows the new step's events.
    let pasted = read(&cassette).replacen("calls:\n", &format!("calls:\n{entry}\n"), 1);
    write(
        &cassette,
        &pasted.replacen(
            "response: { title: TODO",
            "latency: 2s, response: { title: TODO",
            1,
        ),
    );
    let ran = charter(&project, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        project
            .join("golden/my_agent/writer_fixes_review/trace.snap.new")
            .is_file(),
        "{}",
        ran.all()
    );
    assert!(
        ran.stdout.contains("CHANGED my_agent/writer_fixes_review"),
        "{}",
        ran.stdout
    );
    assert!(ran.stdout.contains("step outline"), "{}", ran.stdout);

    // Review accepts it; verify is green.
    let reviewed = charter_with_input(&project, &["review"], "a\n");
    assert_eq!(reviewed.code, Some(0), "{}", reviewed.all());
    let ran = charter(&project, &["verify"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());

    // A live run recorded against a model server verifies right after, with no edit.
    let server = MockServer::start().await;
    for (role, content) in [
        (
            "writer",
            json!({"title": "Tides", "body": "The moon pulls the sea."}),
        ),
        ("reviewer", json!({"score": 8, "verdict": "PASS"})),
        (
            "finalizer",
            json!({"candidate_id": "c1", "summary": "why tides turn"}),
        ),
    ] {
        Mock::given(method("POST"))
            .and(body_partial_json(
                json!({"response_format": {"json_schema": {"name": role}}}),
            ))
            .respond_with(openai_answer(content))
            .mount(&server)
            .await;
    }
    write(
        &project.join("request.json"),
        r#"{"goal": "why the tides turn"}"#,
    );
    let ran = record(&project, &server, "golden/my_agent/live");
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    let ran = charter(&project, &["verify"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    assert!(ran.stdout.contains("2 scenarios"), "{}", ran.stdout);

    // Pinned, the recording is tied to its request: a cassette recorded for another
    // input fails at the call whose prompt changed, with the prompt's diff.
    let ran = charter(&project, &["verify", "--accept", "--pin"]);
    assert_eq!(ran.code, Some(0), "{}", ran.all());
    replace(
        &project.join("golden/my_agent/writer_fixes_review/scenario.yaml"),
        "why the sky is blue\"",
        "why the sea is salty\"",
    );
    let ran = charter(&project, &["verify"]);
    assert_eq!(ran.code, Some(1), "{}", ran.all());
    assert!(
        ran.stdout.contains(
            "STALE my_agent/writer_fixes_review: stale recording: call {step: outline, round: 1, attempt: 1} answered another prompt"
        ),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("-Write a short piece on: why the sky is blue")
            && ran
                .stdout
                .contains("+Write a short piece on: why the sea is salty"),
        "{}",
        ran.stdout
    );
    let _ = std::fs::remove_dir_all(&root);
}
