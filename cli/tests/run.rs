//! `charter run` against a wiremock OpenAI server on loopback: a live run recorded and replayed by `charter replay`, no key in any file written, and a run killed with SIGKILL resumed with `--resume` without a duplicate model call.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "sk-cli-SECRET-31337-never-written";

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-cli-run-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// A project with the scheduler's review_loop fixture as its spec and an input file.
fn project(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/fixtures/review_loop.charter");
    let text = std::fs::read_to_string(&fixture).unwrap_or_else(|error| panic!("{error}"));
    let _ = std::fs::create_dir_all(dir.join("specs"));
    let _ = std::fs::write(dir.join("specs/review_loop.charter"), text);
    let _ = std::fs::write(dir.join("request.json"), r#"{"goal": "rust"}"#);
    dir
}

fn chat(content: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10}
    }))
}

fn for_role(role: &str) -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(body_partial_json(
        json!({"response_format": {"json_schema": {"name": role}}}),
    ))
}

async fn mount(server: &MockServer, finalizer_delay: Duration) {
    for_role("writer")
        .respond_with(chat(json!({"title": "Rust", "body": "Rust is fast."})))
        .mount(server)
        .await;
    for_role("reviewer")
        .respond_with(chat(json!({"relevance": 9, "verdict": "PASS"})))
        .mount(server)
        .await;
    for_role("finalizer")
        .respond_with(
            chat(json!({"candidate_id": "c1", "summary": "one post"})).set_delay(finalizer_delay),
        )
        .up_to_n_times(1)
        .mount(server)
        .await;
    for_role("finalizer")
        .respond_with(chat(json!({"candidate_id": "c1", "summary": "one post"})))
        .mount(server)
        .await;
}

fn charter(project: &Path, server: &MockServer, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command
        .current_dir(project)
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", SECRET)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

fn output(mut command: Command) -> Output {
    command.output().unwrap_or_else(|error| panic!("{error}"))
}

/// Every file under `dir`, with its text.
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let text =
                    String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
                found.push((path, text));
            }
        }
    }
    found
}

#[tokio::test]
async fn a_live_run_is_recorded_and_replays_to_the_same_outcome() {
    let server = MockServer::start().await;
    mount(&server, Duration::ZERO).await;
    let project = project("record");
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
            "golden/review_loop/live",
            "--events",
            "events.jsonl",
            "--out",
            "out",
        ],
    ));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("outcome: completed (gate_passed)"),
        "{stderr}"
    );
    assert!(!stderr.contains(SECRET));
    let scenario = std::fs::read_to_string(project.join("golden/review_loop/live/scenario.yaml"))
        .unwrap_or_default();
    assert!(
        scenario.contains("spec: specs/review_loop.charter"),
        "{scenario}"
    );
    for (path, text) in files(&project) {
        assert!(
            !text.contains(SECRET),
            "the key leaked into {}",
            path.display()
        );
    }
    assert!(project.join("out/delivery.json").is_file());
    let events = std::fs::read_to_string(project.join("events.jsonl")).unwrap_or_default();
    assert!(events.lines().count() > 10);

    let replay = output(charter(
        &project,
        &server,
        &["replay", "golden/review_loop/live"],
    ));
    let replayed = String::from_utf8_lossy(&replay.stderr);
    assert_eq!(replay.status.code(), Some(0), "{replayed}");
    assert!(
        replayed.contains("outcome: completed (gate_passed)"),
        "{replayed}"
    );
    assert_eq!(
        support::requests_for(&server, "writer").await,
        1,
        "the replay made no call"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_run_killed_with_sigkill_resumes_without_a_duplicate_call() {
    let server = MockServer::start().await;
    // The finalizer's first answer never comes in time: the run is killed while waiting.
    mount(&server, Duration::from_secs(30)).await;
    let project = project("resume");
    let mut child = charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--run-dir",
            "runs/killed",
        ],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap_or_else(|error| panic!("{error}"));
    let journal = project.join("runs/killed/calls.jsonl");
    let started = Instant::now();
    while support::requests_for(&server, "finalizer").await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the run never reached the finalizer"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = child.kill(); // SIGKILL: no cleanup at all
    let _ = child.wait();
    let journaled = std::fs::read_to_string(&journal).unwrap_or_default();
    assert_eq!(journaled.lines().count(), 2, "{journaled}");

    let resumed = output(charter(
        &project,
        &server,
        &["run", "--resume", "runs/killed"],
    ));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("resumed: 2 answer(s) from the journal"),
        "{stderr}"
    );
    assert!(
        stderr.contains("outcome: completed (gate_passed)"),
        "{stderr}"
    );
    assert_eq!(
        support::requests_for(&server, "writer").await,
        1,
        "no duplicate call"
    );
    assert_eq!(
        support::requests_for(&server, "reviewer").await,
        1,
        "no duplicate call"
    );
    assert_eq!(
        support::requests_for(&server, "finalizer").await,
        2,
        "the call in flight was made again"
    );
    for (path, text) in files(&project) {
        assert!(
            !text.contains(SECRET),
            "the key leaked into {}",
            path.display()
        );
    }
    let _ = std::fs::remove_dir_all(&project);
}

/// Runs `charter run specs/review_loop.charter --input request.json ARGS...` in a new
/// project (after `setup`), expects a usage error (exit 2) whose message contains `says`,
/// and that no model was asked.
async fn usage_error(name: &str, setup: impl Fn(&Path), args: &[&str], says: &str, key: bool) {
    let server = MockServer::start().await;
    mount(&server, Duration::ZERO).await;
    let project = project(name);
    setup(&project);
    let mut all = vec![
        "run",
        "specs/review_loop.charter",
        "--input",
        "request.json",
    ];
    all.extend_from_slice(args);
    let mut command = charter(&project, &server, &all);
    if !key {
        command.env_remove("OPENAI_API_KEY");
    }
    let run = output(command);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{name}: {stderr}");
    assert!(stderr.contains(says), "{name}: {stderr}");
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        0,
        "{name}: a model was asked"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn an_out_that_is_a_file_is_a_usage_error() {
    usage_error(
        "out-file",
        |project| {
            let _ = std::fs::write(project.join("taken"), "a file");
        },
        &["--out", "taken", "--run-dir", "runs/one"],
        "--out `taken` cannot be used",
        true,
    )
    .await;
}

#[tokio::test]
async fn a_tool_without_a_command_is_a_usage_error_before_the_key_check() {
    usage_error(
        "tool-no-command",
        |_| {},
        &["--tool", "search", "--run-dir", "runs/one"],
        "--tool `search` is not NAME=COMMAND",
        false,
    )
    .await;
}

#[tokio::test]
async fn a_run_dir_that_holds_a_run_needs_resume() {
    for file in ["calls.jsonl", "events.jsonl"] {
        usage_error(
            &format!("run-dir-taken-{file}"),
            |project| {
                let _ = std::fs::create_dir_all(project.join("runs/old"));
                let _ = std::fs::write(project.join("runs/old").join(file), "");
            },
            &["--run-dir", "runs/old"],
            "continue it with `--resume runs/old`",
            true,
        )
        .await;
    }
}

/// Starts `charter run ARGS...` in `project` and waits until the run is waiting for the
/// finalizer's (slow) answer.
async fn start_until_finalizer(
    project: &Path,
    server: &MockServer,
    args: &[&str],
) -> std::process::Child {
    let child = charter(project, server, args)
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("{error}"));
    let started = Instant::now();
    while support::requests_for(server, "finalizer").await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run never reached the finalizer"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child
}

const RUN_KILLED: [&str; 12] = [
    "run",
    "specs/review_loop.charter",
    "--input",
    "request.json",
    "--run-dir",
    "runs/killed",
    "--out",
    "out",
    "--record",
    "golden/review_loop/live",
    "--events",
    "trace.jsonl",
];

#[tokio::test]
async fn a_resume_keeps_out_record_and_events() {
    let server = MockServer::start().await;
    mount(&server, Duration::from_secs(30)).await;
    let project = project("resume-keeps");
    let mut child = start_until_finalizer(&project, &server, &RUN_KILLED).await;
    let _ = child.kill();
    let _ = child.wait();
    let resumed = output(charter(
        &project,
        &server,
        &["run", "--resume", "runs/killed"],
    ));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(project.join("out/delivery.json").is_file(), "{stderr}");
    assert!(
        project
            .join("golden/review_loop/live/cassette.yaml")
            .is_file(),
        "{stderr}"
    );
    let events = std::fs::read_to_string(project.join("trace.jsonl")).unwrap_or_default();
    assert!(events.contains("run_finished"), "{events}");
    let _ = std::fs::remove_dir_all(&project);
}

/// DESIGN §13.3: a run that another process is running is never resumed alongside it.
/// While the first `charter run` waits on the finalizer, `--resume` of its directory is
/// refused (exit 1) and asks no model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_of_a_run_another_process_is_running_is_refused() {
    let server = MockServer::start().await;
    mount(&server, Duration::from_secs(30)).await;
    let project = project("resume-held");
    let mut child = start_until_finalizer(&project, &server, &RUN_KILLED[..6]).await;
    let calls = server.received_requests().await.unwrap_or_default().len();
    let refused = output(charter(
        &project,
        &server,
        &["run", "--resume", "runs/killed"],
    ));
    let _ = child.kill();
    let _ = child.wait();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is being run by another process"),
        "{stderr}"
    );
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        calls
    );
    // Once the first process is gone (even by SIGKILL), the lock is free again.
    let resumed = output(charter(
        &project,
        &server,
        &["run", "--resume", "runs/killed"],
    ));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_ne!(resumed.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("another process"), "{stderr}");
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_resume_refuses_a_changed_spec_or_input_unless_forced() {
    let server = MockServer::start().await;
    mount(&server, Duration::from_secs(30)).await;
    let project = project("resume-changed");
    let mut child = start_until_finalizer(&project, &server, &RUN_KILLED[..6]).await;
    let _ = child.kill();
    let _ = child.wait();
    let spec = project.join("specs/review_loop.charter");
    let text = std::fs::read_to_string(&spec).unwrap_or_default();
    let edited = text.replace("Write a short post about", "Write a long post about");
    assert_ne!(text, edited);
    let _ = std::fs::write(&spec, &edited);
    let _ = std::fs::write(project.join("request.json"), r#"{"goal": "go"}"#);
    let refused = output(charter(
        &project,
        &server,
        &["run", "--resume", "runs/killed"],
    ));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the prompt of `writer`, the input changed since the run"),
        "{stderr}"
    );
    let forced = output(charter(
        &project,
        &server,
        &["run", "--resume", "runs/killed", "--force"],
    ));
    let stderr = String::from_utf8_lossy(&forced.stderr);
    assert_eq!(forced.status.code(), Some(0), "{stderr}");
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn sigterm_ends_the_run_cancelled_with_a_complete_trace() {
    let server = MockServer::start().await;
    mount(&server, Duration::from_secs(30)).await;
    let project = project("sigterm");
    let mut child = start_until_finalizer(&project, &server, &RUN_KILLED[..6]).await;
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(killed.success());
    let status = child.wait().unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(status.code(), Some(3), "ended by the signal: {status:?}");
    let events =
        std::fs::read_to_string(project.join("runs/killed/events.jsonl")).unwrap_or_default();
    let last = events.lines().last().unwrap_or_default();
    assert!(
        last.contains("\"kind\":\"run_finished\"") && last.contains("cancelled"),
        "{last}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_resume_does_not_write_through_a_symlinked_trace() {
    let server = MockServer::start().await;
    mount(&server, Duration::from_secs(30)).await;
    let project = project("resume-symlink");
    let mut child = start_until_finalizer(&project, &server, &RUN_KILLED[..6]).await;
    let _ = child.kill();
    let _ = child.wait();
    let canary = project.join("canary.txt");
    let _ = std::fs::write(&canary, "canary");
    let events = project.join("runs/killed/events.jsonl");
    let _ = std::fs::remove_file(&events);
    std::os::unix::fs::symlink(&canary, &events).unwrap_or_else(|error| panic!("{error}"));
    let resumed = output(charter(
        &project,
        &server,
        &["run", "--resume", "runs/killed"],
    ));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_ne!(resumed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&canary).ok().as_deref(),
        Some("canary")
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn no_file_written_holds_a_secret_from_an_answer_the_input_or_a_tool() {
    let server = MockServer::start().await;
    // The writer quotes the key; the reviewer passes it (the fixture's gate looks for
    // `sk-` keys of another shape).
    for_role("writer")
        .respond_with(chat(
            json!({"title": "Rust", "body": format!("the key is {SECRET}")}),
        ))
        .mount(&server)
        .await;
    mount(&server, Duration::ZERO).await;
    let project = project("secrets");
    // A tool for `--tool` to name (no role calls it).
    let spec = project.join("specs/review_loop.charter");
    let text = std::fs::read_to_string(&spec).unwrap_or_default();
    let _ = std::fs::write(
        &spec,
        format!("{text}\ntool search {{ input: Request  output: Request  effect: read }}\n"),
    );
    let _ = std::fs::write(
        project.join("request.json"),
        json!({"goal": format!("rust {SECRET}")}).to_string(),
    );
    let tool = format!("search=echo {SECRET} >/dev/null; echo '{{}}'");
    let run = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--tool",
            &tool,
            "--out",
            "out",
            "--record",
            "golden/review_loop/live",
        ],
    ));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(project.join("out/delivery.json").is_file(), "{stderr}");
    // The input's secret is kept as `<redacted>`, and each call's prompt hash is taken of
    // the prompt so scrubbed: the recording replays with no stale call.
    assert!(
        stderr.contains(
            "recorded to golden/review_loop/live (scenario.yaml, cassette.yaml, trace.snap)"
        ),
        "{stderr}"
    );
    for (path, text) in files(&project) {
        if path.ends_with("request.json") {
            continue; // the user's own file
        }
        assert!(
            !text.contains(SECRET),
            "the key leaked into {}",
            path.display()
        );
    }
    let _ = std::fs::remove_dir_all(&project);
}

/// DESIGN §8.6: the input is checked against the request contract before anything runs,
/// even before the key check; every violation is listed and no run directory is left.
#[tokio::test]
async fn an_input_that_breaks_the_request_contract_is_a_usage_error_listing_the_fields() {
    for (name, input, says) in [
        ("input-wrong-type", r#"{"goal": 3}"#, "goal: "),
        ("input-missing-field", r#"{"topic": "rust"}"#, "goal: "),
    ] {
        usage_error(
            name,
            |project| {
                let _ = std::fs::write(project.join("request.json"), input);
            },
            &["--run-dir", "runs/one"],
            says,
            false,
        )
        .await;
    }
    let server = MockServer::start().await;
    let project = project("input-listed");
    let _ = std::fs::write(project.join("request.json"), r#"{"goal": 3, "topic": "x"}"#);
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
        ],
    ));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "error: the input `request.json` does not match the request contract `Request`:"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("\n  goal: ") && stderr.contains("topic"),
        "{stderr}"
    );
    assert!(
        !project.join("runs/one").exists(),
        "a run directory was left: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn model_overrides_reach_the_server_are_recorded_and_replayed() {
    let server = MockServer::start().await;
    mount(&server, Duration::ZERO).await;
    let project = project("model_override");
    let run = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--run-dir",
            "runs/local",
            "--model",
            "default=openai:qwen2.5:7b",
            "--show-output",
            "--record",
            "golden/review_loop/local",
        ],
    ));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("model `default` runs on openai:qwen2.5:7b (--model)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#"answered: {"body":"Rust is fast.","title":"Rust"}"#),
        "--show-output shows the answer:\n{stderr}"
    );
    assert!(!stderr.contains("phase "), "{stderr}");
    let models: Vec<String> = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|request| serde_json::from_slice::<Value>(&request.body).ok())
        .map(|body| body["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(!models.is_empty());
    assert!(
        models.iter().all(|model| model == "qwen2.5:7b"),
        "{models:?}"
    );
    let cassette = std::fs::read_to_string(project.join("golden/review_loop/local/cassette.yaml"))
        .unwrap_or_default();
    assert!(
        cassette.contains("overrides:") && cassette.contains("default: openai:qwen2.5:7b"),
        "{cassette}"
    );
    let replay = output(charter(
        &project,
        &server,
        &["replay", "golden/review_loop/local"],
    ));
    let replayed = String::from_utf8_lossy(&replay.stderr);
    assert_eq!(replay.status.code(), Some(0), "{replayed}");
    assert!(!replayed.contains("stale"), "{replayed}");
    assert!(
        replayed.contains("call writer on openai:qwen2.5:7b"),
        "{replayed}"
    );

    // An alias the spec does not have is a usage error, before anything runs.
    let unknown = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--model",
            "fast=openai:x",
        ],
    ));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("alias `fast`"), "{stderr}");
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn the_missing_tool_warning_names_only_tools_of_roles_the_flow_calls() {
    let server = MockServer::start().await;
    mount(&server, Duration::ZERO).await;
    let project = project("missing_tool");
    let spec = project.join("specs/review_loop.charter");
    let text = std::fs::read_to_string(&spec).unwrap_or_default().replace(
        "role finalizer {",
        "contract Query { text: string }\ncontract Hits { urls: list<string> }\n\
         tool lookup { input: Query  output: Hits  effect: read }\n\
         tool archive { input: Query  output: Hits  effect: read }\n\
         role spare { model: default  prompt: \"\"\"x\"\"\"  input: Request  output: Draft  tools: [archive]  max_tool_calls: 1 }\n\
         role finalizer {\n  tools: [lookup]\n  max_tool_calls: 1",
    );
    let _ = std::fs::write(&spec, text);
    let run = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--run-dir",
            "runs/warn",
        ],
    ));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("tool `lookup` has no implementation"),
        "{stderr}"
    );
    assert!(!stderr.contains("`archive`"), "{stderr}");
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_default_run_directory_is_never_one_that_exists() {
    // Runs started in the same millisecond once shared `.charter/runs/<ms>` and mixed
    // their journals. Every name a millisecond clock could give in the next 20 seconds is
    // taken here: the new run must make a directory of its own.
    const TAKEN: u128 = 20_000;
    let server = MockServer::start().await;
    mount(&server, Duration::ZERO).await;
    let project = project("unique-dirs");
    let runs = project.join(".charter/runs");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_millis())
        .unwrap_or_default();
    for millis in now..now + TAKEN {
        let _ = std::fs::create_dir_all(runs.join(millis.to_string()));
    }
    let run = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
        ],
    ));
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let journals: Vec<PathBuf> = std::fs::read_dir(&runs)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("events.jsonl").exists())
        .collect();
    let count = std::fs::read_dir(&runs).into_iter().flatten().count();
    assert_eq!(
        usize::try_from(TAKEN + 1).ok(),
        Some(count),
        "a directory of its own"
    );
    assert_eq!(journals.len(), 1, "{journals:?}");
    let name = journals[0]
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(
        name.parse::<u128>().is_err(),
        "not a bare millisecond name another run could take: {name}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn record_refuses_to_overwrite_a_scenario_unless_forced_and_keeps_its_expect_and_relative_paths()
 {
    let server = MockServer::start().await;
    mount(&server, Duration::ZERO).await;
    let project = project("record_force");
    let scenario_dir = project.join("golden/review_loop/written");
    let _ = std::fs::create_dir_all(&scenario_dir);
    let written = "spec: specs/review_loop.charter\ndescription: written by hand\ninput: { goal: rust }\nexpect: { outcome: completed, reason: gate_passed }\n";
    let _ = std::fs::write(scenario_dir.join("scenario.yaml"), written);
    let args = [
        "run",
        "specs/review_loop.charter",
        "--input",
        "request.json",
        "--record",
        "golden/review_loop/written",
    ];
    let refused = output(charter(&project, &server, &args));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("golden/review_loop/written/scenario.yaml` already exists; give --force"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(scenario_dir.join("scenario.yaml")).unwrap_or_default(),
        written
    );
    assert_eq!(
        support::requests_for(&server, "writer").await,
        0,
        "nothing ran"
    );

    let mut forced = args.to_vec();
    forced.push("--force");
    let run = output(charter(&project, &server, &forced));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("totals: 3 calls, 90 tokens (60 in, 30 out)"),
        "{stderr}"
    );
    let scenario = std::fs::read_to_string(scenario_dir.join("scenario.yaml")).unwrap_or_default();
    assert!(
        scenario.contains("spec: specs/review_loop.charter"),
        "{scenario}"
    );
    assert!(
        scenario.contains("description: written by hand"),
        "{scenario}"
    );
    assert!(scenario.contains("outcome: completed"), "{scenario}");
    let cassette = std::fs::read_to_string(scenario_dir.join("cassette.yaml")).unwrap_or_default();
    assert!(cassette.contains("prompt_hash: sha256:"), "{cassette}");

    // Outside `golden/`, the spec is relative to where the run was started.
    let run = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--record",
            "recorded",
        ],
    ));
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let scenario =
        std::fs::read_to_string(project.join("recorded/scenario.yaml")).unwrap_or_default();
    assert!(
        scenario.contains("spec: specs/review_loop.charter"),
        "{scenario}"
    );

    let misplaced = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/review_loop.charter",
            "--input",
            "request.json",
            "--force",
        ],
    ));
    assert_eq!(misplaced.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&project);
}

/// A small tmpfs mounted at `dir` (root only), unmounted when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Option<SmallDisk> {
        let _ = std::fs::create_dir_all(dir);
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        mounted.then(|| SmallDisk(dir.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// DESIGN §15: a journal or trace write that fails on a full disk stops the run at once —
/// `failed{journal_unwritable}`, exit 3, no further call — instead of going on and ending
/// with exit 0 and a warning; `--resume` once there is room continues from the journal.
/// On a real ENOSPC: a 64 KiB tmpfs (mounting needs root, as CI runs; elsewhere the test
/// says it was skipped, and fails under CI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_the_run_and_a_resume_continues_it() {
    let server = MockServer::start().await;
    mount(&server, Duration::ZERO).await;
    let project = project("full-disk");
    let Some(disk) = SmallDisk::mount(&project.join("disk"), "64k") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot mount a tmpfs for the full-disk test"
        );
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    // The disk holds the run directory; a filler leaves it room for a few events only.
    let filler = disk.0.join("filler");
    let _ = std::fs::write(&filler, vec![b'x'; 56 * 1024]);
    let args = [
        "run",
        "specs/review_loop.charter",
        "--input",
        "request.json",
        "--run-dir",
        "disk/run",
    ];
    let full = output(charter(&project, &server, &args));
    let stderr = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("journal_unwritable"), "{stderr}");
    let calls_then = server.received_requests().await.unwrap_or_default().len();
    assert!(
        calls_then < 3,
        "the run went on calling: {calls_then} calls\n{stderr}"
    );

    let _ = std::fs::remove_file(&filler);
    let resumed = output(charter(&project, &server, &["run", "--resume", "disk/run"]));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("outcome: completed"), "{stderr}");
    // Only a call whose answer the full disk kept out of the journal is made again.
    let calls = server.received_requests().await.unwrap_or_default().len();
    assert!(calls <= 4, "{calls} calls for a run of 3");
    drop(disk);
    let _ = std::fs::remove_dir_all(&project);
}
