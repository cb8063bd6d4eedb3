//! `charter verify --rerecord --missing-only` on a copied seed golden against a wiremock OpenAI server on loopback: after a step is added to the spec, only that step's call reaches the mock, the cassette gains exactly that entry (the others stay byte for byte), and `charter verify` passes; without `--accept` nothing changes on disk; a scenario that lacks nothing asks nothing; `--filter` selects.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use charter_runtime::formats::scenario::{CallKey, Cassette};
use serde_json::json;
use support::{copy_dir, copy_file, openai_answer, repository};
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer};

const SPEC: &str = "specs/seeds/closed_loop.charter";
const GOLDEN: &str = "golden/closed_loop/repair_succeeds";
const OTHER: &str = "golden/closed_loop/happy_path";

/// A project holding the closed_loop seed and two of its goldens, with an `outline`
/// step (the planner again) added before `plan` when `outlined`.
fn project(name: &str, outlined: bool) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "charter-cli-rerecord-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let seeds = repository().join("specs/seeds");
    copy_file(&repository().join(SPEC), &dir.join(SPEC));
    copy_dir(
        &seeds.join("closed_loop"),
        &dir.join("specs/seeds/closed_loop"),
    );
    for golden in [GOLDEN, OTHER] {
        copy_dir(&repository().join(golden), &dir.join(golden));
    }
    if outlined {
        let spec = read(&dir.join(SPEC));
        let plan = "  plan     = planner(request)";
        assert!(spec.contains(plan), "the seed's flow changed");
        let outlined = spec.replacen(
            plan,
            &format!(
                "  outline  = planner(request)                                -> plan\n{plan}"
            ),
            1,
        );
        std::fs::write(dir.join(SPEC), outlined).unwrap_or_else(|error| panic!("{error}"));
    }
    dir
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn cassette(dir: &Path) -> Cassette {
    Cassette::read(&dir.join("cassette.yaml")).unwrap_or_else(|error| panic!("{error}"))
}

/// The planner answers with the plan the golden recorded.
async fn mount_planner(server: &MockServer) {
    let golden = cassette(&repository().join(GOLDEN));
    let plan = golden
        .calls
        .iter()
        .find(|call| call.step == "plan")
        .and_then(|call| call.response.clone())
        .unwrap_or_else(|| panic!("the golden has no plan"));
    Mock::given(method("POST"))
        .and(body_partial_json(
            json!({"response_format": {"json_schema": {"name": "planner"}}}),
        ))
        .respond_with(openai_answer(plan))
        .mount(server)
        .await;
}

fn charter(project: &Path, server: &MockServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(project)
        .args(["--color", "never"])
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-cli-rerecord-KEY-3141")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{error}"))
}

fn rerecord(project: &Path, server: &MockServer, more: &[&str]) -> Output {
    let mut args = vec![
        "verify",
        "--rerecord",
        "--missing-only",
        "--model",
        "strong=openai:gpt-4o-mini",
    ];
    args.extend(more);
    charter(project, server, &args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn requests(server: &MockServer) -> Vec<wiremock::Request> {
    server.received_requests().await.unwrap_or_default()
}

/// The text of every file under `dir`, by path.
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap_or_else(|error| panic!("{error}")) {
            let path = entry.unwrap_or_else(|error| panic!("{error}")).path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push((path.clone(), read(&path)));
            }
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn an_added_step_is_asked_live_alone_and_added_to_the_cassette() {
    let server = MockServer::start().await;
    mount_planner(&server).await;
    let project = project("accept", true);
    let before = read(&project.join(GOLDEN).join("cassette.yaml"));
    let old = cassette(&project.join(GOLDEN));

    let run = rerecord(
        &project,
        &server,
        &["--filter", "repair_succeeds", "--accept"],
    );
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("closed_loop/repair_succeeds: 1 call(s) to add:\n  + {step: outline, round: 1, attempt: 1}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("added 1 call(s) to golden/closed_loop/repair_succeeds/cassette.yaml, and wrote its trace.snap"),
        "{stdout}"
    );

    // Only the new step's call reached the mock: one request, the planner's.
    let seen = requests(&server).await;
    assert_eq!(seen.len(), 1);
    let body: serde_json::Value =
        serde_json::from_slice(&seen[0].body).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(body["response_format"]["json_schema"]["name"], "planner");

    // The cassette gained exactly that entry, before plan; the old entries are as they were.
    let now = cassette(&project.join(GOLDEN));
    let keys: Vec<CallKey> = now.calls.iter().map(|call| call.key()).collect();
    let mut expected: Vec<CallKey> = vec![CallKey::new("outline")];
    expected.extend(old.calls.iter().map(|call| call.key()));
    assert_eq!(keys, expected);
    assert_eq!(&now.calls[1..], &old.calls[..]);
    let after = read(&project.join(GOLDEN).join("cassette.yaml"));
    let calls = |text: &str| {
        text.split_once("\ncalls:\n")
            .map(|(_, calls)| calls.to_string())
    };
    let old_calls = calls(&before).unwrap_or_default();
    let new_calls = calls(&after).unwrap_or_default();
    let first_old = old_calls.lines().next().unwrap_or_default().to_string();
    let kept = new_calls
        .find(&format!("\n{first_old}\n"))
        .map(|at| &new_calls[at + 1..]);
    assert_eq!(kept, Some(old_calls.as_str()), "{after}");

    // And the project verifies as it is now.
    let verified = charter(
        &project,
        &server,
        &["verify", "--filter", "repair_succeeds"],
    );
    assert_eq!(
        verified.status.code(),
        Some(0),
        "{}{}",
        text(&verified.stdout),
        text(&verified.stderr)
    );
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn without_accept_nothing_changes_and_the_keys_are_listed() {
    let server = MockServer::start().await;
    mount_planner(&server).await;
    let project = project("dry", true);
    let before = files(&project);
    let run = rerecord(&project, &server, &[]);
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}{}", text(&run.stderr));
    for id in ["closed_loop/repair_succeeds", "closed_loop/happy_path"] {
        assert!(
            stdout.contains(&format!(
                "{id}: 1 call(s) to add:\n  + {{step: outline, round: 1, attempt: 1}}"
            )),
            "{stdout}"
        );
    }
    assert_eq!(files(&project), before);
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn a_scenario_that_lacks_nothing_asks_nothing_and_filter_selects() {
    let server = MockServer::start().await;
    let project = project("complete", false);
    let before = files(&project);
    let run = rerecord(&project, &server, &["--filter", "happy_path"]);
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    assert!(
        stdout.contains("closed_loop/happy_path: the cassette lacks no call"),
        "{stdout}"
    );
    assert!(!stdout.contains("repair_succeeds"), "{stdout}");
    assert_eq!(requests(&server).await.len(), 0);
    assert_eq!(files(&project), before);
}

#[tokio::test]
async fn a_missing_key_rerecord_alone_or_a_json_report_is_a_usage_error() {
    let server = MockServer::start().await;
    let project = project("usage", true);
    let alone = charter(&project, &server, &["verify", "--rerecord"]);
    assert_eq!(alone.status.code(), Some(2));
    assert!(
        text(&alone.stderr).contains("--missing-only"),
        "{}",
        text(&alone.stderr)
    );
    let json = charter(
        &project,
        &server,
        &["verify", "--rerecord", "--missing-only", "--format", "json"],
    );
    assert_eq!(json.status.code(), Some(2), "{}", text(&json.stderr));
    assert!(
        text(&json.stderr).contains("--format json"),
        "{}",
        text(&json.stderr)
    );
    // The spec's `strong` alias is Anthropic's, and no key for it is set.
    let keyless = charter(
        &project,
        &server,
        &["verify", "--rerecord", "--missing-only"],
    );
    assert_eq!(keyless.status.code(), Some(2), "{}", text(&keyless.stderr));
    assert!(
        text(&keyless.stderr).contains("ANTHROPIC_API_KEY"),
        "{}",
        text(&keyless.stderr)
    );
    assert_eq!(requests(&server).await.len(), 0);
}
