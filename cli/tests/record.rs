//! `charter run --record` against a wiremock OpenAI server on loopback writes a scenario that `charter verify` passes right after, with no edit: calls in run order with their prompt hashes, the rendered prompts, an `expect` of what happened (a braced reason quoted) and the trace snapshot.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use charter_runtime::formats::canonical::sha256;
use charter_runtime::formats::scenario::{CallKey, Cassette, Expectation, Scenario};
use charter_runtime::formats::trace::{Outcome, Reason};
use serde_json::{Value, json};
use support::{copy_dir, copy_file, openai_answer, repository};
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-cli-record-KEY-5150";

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("charter-cli-record-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// A project holding the closed_loop seed (spec and prompts) and `request.json`.
fn closed_loop_project(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    let seeds = repository().join("specs/seeds");
    copy_file(
        &seeds.join("closed_loop.charter"),
        &dir.join("specs/seeds/closed_loop.charter"),
    );
    copy_dir(
        &seeds.join("closed_loop"),
        &dir.join("specs/seeds/closed_loop"),
    );
    let _ = std::fs::write(
        dir.join("request.json"),
        json!({"goal": "a one-page brief on heat pumps", "constraints": ["cite sources"]})
            .to_string(),
    );
    dir
}

/// A project holding the scheduler's review_loop fixture and `request.json`.
fn review_loop_project(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    copy_file(
        &repository().join("runtime/tests/fixtures/review_loop.charter"),
        &dir.join("specs/review_loop.charter"),
    );
    let _ = std::fs::write(dir.join("request.json"), r#"{"goal": "rust"}"#);
    dir
}

fn for_role(role: &str) -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(body_partial_json(
        json!({"response_format": {"json_schema": {"name": role}}}),
    ))
}

/// Every role of closed_loop: a plan of two orders (the second after the first), each
/// carried out (under its own id), an evaluation that passes the gate, a delivery of c1.
async fn mount_closed_loop(server: &MockServer) {
    let task = |id: &str, depends_on: &[&str]| {
        json!({"id": id, "goal": format!("work order {id}"), "expected_output": "a section",
               "acceptance": ["cites a source"], "depends_on": depends_on})
    };
    let answers = [
        (
            "planner",
            json!({"goal": "a one-page brief on heat pumps", "success_criteria": ["one page"],
                   "tasks": [task("T-001", &[]), task("T-002", &["T-001"])]}),
        ),
        (
            "evaluator",
            json!({"relevance": 9, "completeness": 9, "clarity": 8, "usability": 9,
                   "on_plan": true, "findings": []}),
        ),
        (
            "finalizer",
            json!({"candidate_id": "c1", "summary": "a brief on heat pumps"}),
        ),
    ];
    for (role, content) in answers {
        for_role(role)
            .respond_with(openai_answer(content))
            .mount(server)
            .await;
    }
    // Each executor reports under the id of the work order its prompt gives.
    for id in ["T-001", "T-002"] {
        for_role("executor")
            .and(wiremock::matchers::body_string_contains(format!("Work order {id}")))
            .respond_with(openai_answer(json!({"task_id": id, "status": "ok",
                "output": "a section on heat pumps", "evidence": ["https://example.org/heat-pumps"]})))
            .mount(server)
            .await;
    }
}

fn charter(project: &Path, server: &MockServer, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command
        .current_dir(project)
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", KEY)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

fn output(mut command: Command) -> Output {
    command.output().unwrap_or_else(|error| panic!("{error}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `charter verify --verbose` in `project`: its exit code and its table.
fn verify(project: &Path) -> (Option<i32>, String) {
    let verified = Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(project)
        .args(["--color", "never", "verify", "--verbose"])
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    (
        verified.status.code(),
        format!("{}{}", text(&verified.stdout), text(&verified.stderr)),
    )
}

/// Every file under `dir` whose name ends with `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found
}

fn read_recording(dir: &Path) -> (Scenario, Cassette) {
    let scenario =
        Scenario::read(&dir.join("scenario.yaml")).unwrap_or_else(|error| panic!("{error}"));
    let cassette =
        Cassette::read(&dir.join("cassette.yaml")).unwrap_or_else(|error| panic!("{error}"));
    (scenario, cassette)
}

#[tokio::test]
async fn a_recorded_seed_run_passes_verify_right_after_with_calls_in_run_order() {
    let server = MockServer::start().await;
    mount_closed_loop(&server).await;
    let project = closed_loop_project("seed");
    let run = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/seeds/closed_loop.charter",
            "--input",
            "request.json",
            "--model",
            "strong=openai:gpt-4o-mini",
            "--record",
            "golden/closed_loop/live",
        ],
    ));
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("recorded to golden/closed_loop/live (scenario.yaml, cassette.yaml, trace.snap); it replays to completed (gate_passed)"),
        "{stderr}"
    );
    let dir = project.join("golden/closed_loop/live");
    let (scenario, cassette) = read_recording(&dir);

    // The calls in the order the run made them, not by step name.
    let keys: Vec<CallKey> = cassette.calls.iter().map(|call| call.key()).collect();
    assert_eq!(
        keys,
        [
            CallKey::new("plan"),
            CallKey::new("execute").item("T-001"),
            CallKey::new("execute").item("T-002"),
            CallKey::new("evaluate"),
            CallKey::new("deliver"),
        ]
    );
    // Each with the hash of its prompt; the rendered prompt of each role's first call is
    // kept, and it is the prompt the call's hash was taken of.
    let recorded = cassette.recorded.clone().unwrap_or_default();
    for (call, role) in
        cassette
            .calls
            .iter()
            .zip(["planner", "executor", "executor", "evaluator", "finalizer"])
    {
        let hash = call.prompt_hash.as_deref().unwrap_or_default();
        assert!(hash.starts_with("sha256:"), "{call:?}");
        if call.item.as_deref() != Some("T-002") {
            let rendered = recorded.rendered.get(role).map(String::as_str);
            assert_eq!(
                rendered.map(|prompt| sha256(prompt.as_bytes())).as_deref(),
                Some(hash),
                "{role}"
            );
        }
    }
    assert_eq!(
        recorded.overrides.get("strong").map(String::as_str),
        Some("openai:gpt-4o-mini")
    );

    // The scenario: the spec relative to the project root, and what happened.
    assert_eq!(scenario.spec, "specs/seeds/closed_loop.charter");
    assert!(scenario.description.is_some());
    assert_eq!(
        scenario.expect,
        Some(Expectation {
            outcome: Some(Outcome::Completed),
            reason: Some(Reason::GatePassed),
            delivered: Some("c1".into()),
            ..Expectation::default()
        })
    );
    assert!(dir.join("trace.snap").is_file());

    // `charter verify` passes it as it is: a pass, not NEW or CHANGED.
    let (code, table) = verify(&project);
    assert_eq!(code, Some(0), "{table}");
    assert!(
        table.lines().any(
            |line| line.starts_with("closed_loop  live") && line.trim_end().ends_with("  pass")
        ),
        "{table}"
    );
    assert!(files_ending(&project, ".snap.new").is_empty(), "{table}");
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_run_that_ended_step_failed_round_trips_with_its_reason_quoted() {
    let server = MockServer::start().await;
    for_role("writer")
        .respond_with(openai_answer(
            json!({"title": "Rust", "body": "Rust is fast."}),
        ))
        .mount(&server)
        .await;
    // The reviewer's request is refused for good: the step fails, and so does the run.
    for_role("reviewer")
        .respond_with(ResponseTemplate::new(400).set_body_json(
            json!({"error": {"message": "this request is not allowed", "type": "invalid_request_error"}}),
        ))
        .mount(&server)
        .await;
    let project = review_loop_project("step-failed");
    let run = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--record",
            "golden/review_loop/refused",
        ],
    ));
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("outcome: failed (step_failed{review})"),
        "{stderr}"
    );
    assert!(
        stderr.contains("it replays to failed (step_failed{review})"),
        "{stderr}"
    );
    let dir = project.join("golden/review_loop/refused");
    let written = std::fs::read_to_string(dir.join("scenario.yaml")).unwrap_or_default();
    assert!(
        written.contains("reason: \"step_failed{review}\"\n"),
        "{written}"
    );
    let (scenario, cassette) = read_recording(&dir);
    assert_eq!(
        scenario.expect,
        Some(Expectation {
            outcome: Some(Outcome::Failed),
            reason: Some(Reason::StepFailed {
                step: "review".into()
            }),
            ..Expectation::default()
        })
    );
    let keys: Vec<CallKey> = cassette.calls.iter().map(|call| call.key()).collect();
    assert_eq!(keys, [CallKey::new("write"), CallKey::new("review")]);
    assert_eq!(
        cassette
            .calls
            .last()
            .and_then(|call| call.error.as_ref())
            .and_then(|error| error.status),
        Some(400)
    );
    let (code, table) = verify(&project);
    assert_eq!(code, Some(0), "{table}");
    assert!(
        table
            .lines()
            .any(|line| line.starts_with("review_loop  refused")
                && line.contains("step_failed{review}")
                && line.trim_end().ends_with("  pass")),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

/// A recording whose replay cannot end as the run did (here: `--force` keeps an `expect`
/// the new run does not meet) is refused loudly, and nothing in the directory changes.
#[tokio::test]
async fn a_recording_that_does_not_replay_as_the_run_went_writes_nothing() {
    let server = MockServer::start().await;
    for_role("writer")
        .respond_with(openai_answer(
            json!({"title": "Rust", "body": "Rust is fast."}),
        ))
        .mount(&server)
        .await;
    for_role("reviewer")
        .respond_with(openai_answer(json!({"relevance": 9, "verdict": "PASS"})))
        .mount(&server)
        .await;
    for_role("finalizer")
        .respond_with(openai_answer(
            json!({"candidate_id": "c1", "summary": "one post"}),
        ))
        .mount(&server)
        .await;
    let project = review_loop_project("refused");
    let dir = project.join("golden/review_loop/kept");
    let _ = std::fs::create_dir_all(&dir);
    let kept =
        "spec: specs/review_loop.charter\ninput: { goal: rust }\nexpect: { outcome: blocked }\n";
    let _ = std::fs::write(dir.join("scenario.yaml"), kept);
    let run = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--run-dir",
            "runs/one",
            "--record",
            "golden/review_loop/kept",
            "--force",
        ],
    ));
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: cannot record to `golden/review_loop/kept`: the recording does not replay as the run went, so nothing was written there"),
        "{stderr}"
    );
    assert!(
        stderr.contains("expected outcome blocked, got completed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("help: the run's answers are kept in `runs/one`"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("scenario.yaml")).unwrap_or_default(),
        kept
    );
    assert!(!dir.join("cassette.yaml").exists());
    assert!(!dir.join("trace.snap").exists());
    let _ = std::fs::remove_dir_all(&project);
}

/// A run cancelled by a signal is not recorded (its replay could not end `cancelled`);
/// `--resume` continues it from the journal and records it when it ends.
#[tokio::test]
async fn a_cancelled_run_is_recorded_by_its_resume() {
    let server = MockServer::start().await;
    for_role("writer")
        .respond_with(openai_answer(
            json!({"title": "Rust", "body": "Rust is fast."}),
        ))
        .mount(&server)
        .await;
    for_role("reviewer")
        .respond_with(openai_answer(json!({"relevance": 9, "verdict": "PASS"})))
        .mount(&server)
        .await;
    // The finalizer's first answer comes too late: the run is stopped while it waits.
    for_role("finalizer")
        .respond_with(
            openai_answer(json!({"candidate_id": "c1", "summary": "one post"}))
                .set_delay(Duration::from_secs(30)),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    for_role("finalizer")
        .respond_with(openai_answer(
            json!({"candidate_id": "c1", "summary": "one post"}),
        ))
        .mount(&server)
        .await;
    let project = review_loop_project("cancelled");
    let child = charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--run-dir",
            "runs/stopped",
            "--record",
            "golden/review_loop/live",
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap_or_else(|error| panic!("{error}"));
    let started = Instant::now();
    while finalizer_asked(&server).await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run never reached the finalizer"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let signalled = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(signalled.success());
    let stopped = child
        .wait_with_output()
        .unwrap_or_else(|error| panic!("{error}"));
    let stderr = text(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("note: the run was cancelled, so nothing was recorded to `golden/review_loop/live`; `charter run --resume runs/stopped` continues it"),
        "{stderr}"
    );
    assert!(!project.join("golden").exists(), "{stderr}");

    let resumed = output(charter(
        &project,
        &server,
        &["run", "--resume", "runs/stopped"],
    ));
    let stderr = text(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "recorded to golden/review_loop/live (scenario.yaml, cassette.yaml, trace.snap)"
        ),
        "{stderr}"
    );
    let (_, cassette) = read_recording(&project.join("golden/review_loop/live"));
    let keys: Vec<CallKey> = cassette.calls.iter().map(|call| call.key()).collect();
    assert_eq!(
        keys,
        [
            CallKey::new("write"),
            CallKey::new("review"),
            CallKey::new("deliver")
        ]
    );
    let (code, table) = verify(&project);
    assert_eq!(code, Some(0), "{table}");
    let _ = std::fs::remove_dir_all(&project);
}

async fn finalizer_asked(server: &MockServer) -> usize {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|request| {
            serde_json::from_slice::<Value>(&request.body)
                .ok()
                .is_some_and(|body| body["response_format"]["json_schema"]["name"] == "finalizer")
        })
        .count()
}
