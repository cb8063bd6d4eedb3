//! The routes the seeds take on what their roles are told, live against a reactive wiremock OpenAI server on loopback: LeadAgent answers a plain question without planning a workflow, and Auto Agent's `on_error -> analyze` sends a failed executor's error back to the analyzer, which changes course.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use support::{copy_dir, copy_file, openai_answer, repository};
use wiremock::matchers::{body_partial_json, body_string_contains, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A project holding seed `name` (its spec and its prompts) and `request` as request.json.
fn project(name: &str, request: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "charter-cli-seed-routes-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let seeds = repository().join("specs/seeds");
    copy_file(
        &seeds.join(format!("{name}.charter")),
        &dir.join(format!("specs/seeds/{name}.charter")),
    );
    copy_dir(&seeds.join(name), &dir.join(format!("specs/seeds/{name}")));
    std::fs::write(dir.join("request.json"), request.to_string())
        .unwrap_or_else(|error| panic!("{error}"));
    dir
}

fn for_role(role: &str) -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(body_partial_json(
        json!({"response_format": {"json_schema": {"name": role}}}),
    ))
}

/// `charter run SPEC --input request.json --out out --events events.jsonl ARGS...`, every
/// model on the mock.
fn run(project: &Path, server: &MockServer, spec: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(project)
        .args(["--color", "never", "run", spec, "--input", "request.json"])
        .args(["--out", "out", "--events", "events.jsonl"])
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-cli-seed-routes-KEY-1618")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{error}"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test]
async fn lead_agent_answers_a_plain_question_without_planning_a_workflow() {
    const QUESTION: &str = "what does a cron expression like 0 2 * * * mean?";
    let server = MockServer::start().await;
    // The lead calls it chat only when it was shown this question; anything else would be
    // routed to the planner, which answers too, so a wrong route shows as a planner call.
    for_role("lead")
        .and(body_string_contains(QUESTION))
        .respond_with(openai_answer(
            json!({"kind": "chat", "why": "a question, not a workflow"}),
        ))
        .mount(&server)
        .await;
    for_role("lead")
        .respond_with(openai_answer(
            json!({"kind": "workflow", "why": "asks for an automation"}),
        ))
        .mount(&server)
        .await;
    for_role("assistant")
        .and(body_string_contains(QUESTION))
        .respond_with(openai_answer(
            json!({"answer": "every day at 02:00 (from the question about 0 2 * * *)"}),
        ))
        .mount(&server)
        .await;
    for_role("planner")
        .respond_with(openai_answer(
            json!({"goal": "g", "nodes": [{"id": "n1", "kind": "script", "purpose": "p"}]}),
        ))
        .mount(&server)
        .await;
    let project = project("lead_agent", &json!({ "message": QUESTION }));
    let ran = run(
        &project,
        &server,
        "specs/seeds/lead_agent.charter",
        &["--model", "default=openai:gpt-4o-mini"],
    );
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("outcome: completed (done)"), "{stderr}");
    let answer: Value = serde_json::from_str(&read(&project.join("out/answer.json")))
        .unwrap_or_else(|error| panic!("{error}: {stderr}"));
    assert_eq!(
        answer["answer"],
        "every day at 02:00 (from the question about 0 2 * * *)"
    );
    assert_eq!(support::requests_for(&server, "lead").await, 1);
    assert_eq!(support::requests_for(&server, "assistant").await, 1);
    assert_eq!(
        support::requests_for(&server, "planner").await,
        0,
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn auto_agent_sends_a_failed_executor_back_to_the_analyzer_with_its_error() {
    let server = MockServer::start().await;
    for_role("executor")
        .respond_with(ResponseTemplate::new(500).set_body_string("executor backend down"))
        .mount(&server)
        .await;
    // The analyzer declares the task done only once it was told the executor failed.
    for_role("analyzer")
        .and(body_string_contains("STEP_FAILED"))
        .respond_with(openai_answer(json!({
            "situation": "the executor failed; the greeting needs no tool",
            "strategy": "none", "progress": 100, "status": "COMPLETED"
        })))
        .mount(&server)
        .await;
    for_role("analyzer")
        .respond_with(openai_answer(json!({
            "situation": "nothing done yet", "strategy": "search the web",
            "progress": 0, "status": "CONTINUE"
        })))
        .mount(&server)
        .await;
    for_role("summarizer")
        .and(body_string_contains(
            "the executor failed; the greeting needs no tool",
        ))
        .respond_with(openai_answer(
            json!({"answer": "Hello, team!", "complete": true}),
        ))
        .mount(&server)
        .await;
    let project = project("auto_agent", &json!({ "goal": "greet the team" }));
    let ran = run(&project, &server, "specs/seeds/auto_agent.charter", &[]);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("outcome: completed (done)"), "{stderr}");
    assert!(stderr.contains("on_error -> analyze"), "{stderr}");
    let events = read(&project.join("events.jsonl"));
    let routed: Vec<Value> = events
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["kind"] == "step_error")
        .collect();
    assert_eq!(routed.len(), 1, "{events}");
    assert_eq!(routed[0]["step"], "execute");
    assert_eq!(routed[0]["to"], "analyze");
    assert_eq!(
        support::requests_for(&server, "executor").await,
        3,
        "three attempts"
    );
    assert_eq!(support::requests_for(&server, "analyzer").await, 2);
    let answer: Value = serde_json::from_str(&read(&project.join("out/answer.json")))
        .unwrap_or_else(|error| panic!("{error}: {stderr}"));
    assert_eq!(answer["answer"], "Hello, team!");
    let _ = std::fs::remove_dir_all(&project);
}
