//! `charter run --fork SCENARIO_DIR --at STEP[@ROUND]` on a seed golden against a reactive wiremock OpenAI server on loopback: the calls before the fork point are answered from the recording (the server never sees them), the rest are asked live, and `--record` writes a scenario `charter verify` passes as it is; bad fork points are refused before anything is asked.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use charter_runtime::formats::scenario::{CallKey, Cassette, Scenario};
use charter_runtime::formats::trace::{Outcome, Reason};
use serde_json::{Value, json};
use support::{copy_dir, copy_file, openai_answer, repository};
use wiremock::matchers::{body_partial_json, body_string_contains, method};
use wiremock::{Mock, MockServer};

const GOLDEN: &str = "golden/closed_loop/repair_succeeds";

/// A project holding the closed_loop seed and its `repair_succeeds` golden: round 1's
/// evaluator finds T-002 off topic, round 2 reruns execute and passes.
fn project(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-cli-fork-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let seeds = repository().join("specs/seeds");
    copy_file(
        &seeds.join("closed_loop.charter"),
        &dir.join("specs/seeds/closed_loop.charter"),
    );
    copy_dir(
        &seeds.join("closed_loop"),
        &dir.join("specs/seeds/closed_loop"),
    );
    copy_dir(&repository().join(GOLDEN), &dir.join(GOLDEN));
    dir
}

fn for_role(role: &str) -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(body_partial_json(
        json!({"response_format": {"json_schema": {"name": role}}}),
    ))
}

fn evaluation(relevance: u64, clarity: u64) -> Value {
    json!({"relevance": relevance, "completeness": 9, "clarity": clarity, "usability": 9,
           "on_plan": true, "findings": []})
}

/// The evaluator answers only a prompt that shows the candidate `seen` (a request
/// without it gets wiremock's 404, which fails the run); the finalizer delivers
/// `candidate`.
async fn mount(server: &MockServer, seen: &str, scores: Value, candidate: &str) {
    for_role("evaluator")
        .and(body_string_contains(seen))
        .respond_with(openai_answer(scores))
        .mount(server)
        .await;
    for_role("finalizer")
        .respond_with(openai_answer(
            json!({"candidate_id": candidate, "summary": "a brief on heat pumps"}),
        ))
        .mount(server)
        .await;
}

fn charter(project: &Path, server: &MockServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(project)
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-cli-fork-KEY-2718")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// `charter run --fork GOLDEN --at AT --record DIR` with every model on the mock.
fn fork(project: &Path, server: &MockServer, at: &str, record: &str) -> Output {
    charter(
        project,
        server,
        &[
            "run",
            "--fork",
            GOLDEN,
            "--at",
            at,
            "--model",
            "strong=openai:gpt-4o-mini",
            "--record",
            record,
        ],
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn cassette(dir: &Path) -> Cassette {
    Cassette::read(&dir.join("cassette.yaml")).unwrap_or_else(|error| panic!("{error}"))
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

async fn requests(server: &MockServer) -> usize {
    server
        .received_requests()
        .await
        .map(|requests| requests.len())
        .unwrap_or_default()
}

/// The new recording holds the golden's first `replayed` calls as they were, then the
/// calls the mock answered; it returns the number of those.
fn check_recording(dir: &Path, replayed: usize, keys: &[CallKey]) -> usize {
    let golden = cassette(&repository().join(GOLDEN));
    let forked = cassette(dir);
    let forked_keys: Vec<CallKey> = forked.calls.iter().map(|call| call.key()).collect();
    assert_eq!(forked_keys, keys);
    for (recorded, golden) in forked.calls.iter().zip(&golden.calls).take(replayed) {
        assert_eq!(recorded.key(), golden.key());
        assert_eq!(recorded.response, golden.response, "{}", golden.key());
        assert_eq!(recorded.prompt_hash, golden.prompt_hash, "{}", golden.key());
    }
    forked.calls.len() - replayed
}

fn key(step: &str, round: u64, item: Option<&str>) -> CallKey {
    let key = CallKey::new(step).round(round);
    match item {
        Some(item) => key.item(item),
        None => key,
    }
}

#[tokio::test]
async fn a_fork_at_evaluate_replays_what_came_before_and_asks_the_rest_live() {
    let server = MockServer::start().await;
    // The evaluator now passes the round-1 candidate the recorded one found off topic:
    // it is asked with the recorded executor output in its prompt.
    mount(
        &server,
        "a history of refrigerators",
        evaluation(9, 7),
        "c1",
    )
    .await;
    let project = project("at-evaluate");
    let run = fork(
        &project,
        &server,
        "evaluate",
        "golden/closed_loop/evaluated_now",
    );
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("replayed up to evaluate@1, live from there"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "fork: 3 answer(s) replayed from the recording, 2 asked live from evaluate@1"
        ),
        "{stderr}"
    );

    // plan and both execute calls came from the recording: the mock saw only the rest.
    let dir = project.join("golden/closed_loop/evaluated_now");
    let live = check_recording(
        &dir,
        3,
        &[
            key("plan", 1, None),
            key("execute", 1, Some("T-001")),
            key("execute", 1, Some("T-002")),
            key("evaluate", 1, None),
            key("deliver", 1, None),
        ],
    );
    assert_eq!(requests(&server).await, live);
    assert_eq!(live, 2);
    let forked = cassette(&dir);
    assert_eq!(
        forked.calls.get(3).and_then(|call| call.response.clone()),
        Some(evaluation(9, 7))
    );
    let scenario =
        Scenario::read(&dir.join("scenario.yaml")).unwrap_or_else(|error| panic!("{error}"));
    let expect = scenario.expect.unwrap_or_default();
    assert_eq!(
        (expect.outcome, expect.reason, expect.delivered.as_deref()),
        (
            Some(Outcome::Completed),
            Some(Reason::GatePassed),
            Some("c1")
        )
    );
    assert!(
        scenario
            .description
            .unwrap_or_default()
            .contains("forked from golden/closed_loop/repair_succeeds at evaluate@1"),
    );

    // The recording replays green with no edit, beside the golden it was forked from.
    let (code, table) = verify(&project);
    assert_eq!(code, Some(0), "{table}");
    assert!(
        table.contains("evaluated_now") && table.contains("repair_succeeds"),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_fork_at_a_later_round_replays_the_step_in_earlier_rounds() {
    let server = MockServer::start().await;
    // Round 2's evaluator sees the rerun's recorded output; evaluate@1 is never asked.
    mount(
        &server,
        "Heat pumps move heat instead of making it",
        evaluation(10, 9),
        "c2",
    )
    .await;
    let project = project("at-round-two");
    let run = fork(
        &project,
        &server,
        "evaluate@2",
        "golden/closed_loop/round_two_now",
    );
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");

    let dir = project.join("golden/closed_loop/round_two_now");
    let live = check_recording(
        &dir,
        6,
        &[
            key("plan", 1, None),
            key("execute", 1, Some("T-001")),
            key("execute", 1, Some("T-002")),
            key("evaluate", 1, None),
            key("execute", 2, Some("T-001")),
            key("execute", 2, Some("T-002")),
            key("evaluate", 2, None),
            key("deliver", 2, None),
        ],
    );
    assert_eq!((requests(&server).await, live), (2, 2));
    let forked = cassette(&dir);
    assert_eq!(
        forked.calls.get(6).and_then(|call| call.response.clone()),
        Some(evaluation(10, 9))
    );
    let (code, table) = verify(&project);
    assert_eq!(code, Some(0), "{table}");
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn bad_fork_points_are_refused_before_anything_is_asked() {
    let server = MockServer::start().await;
    let project = project("refused");
    let cases: [(&[&str], &str); 5] = [
        (
            &["run", "--fork", "golden/closed_loop", "--at", "evaluate"],
            "--fork `golden/closed_loop` is not a recorded scenario: it has no scenario.yaml",
        ),
        (
            &["run", "--fork", GOLDEN, "--at", "evalute"],
            "spec `closed_loop` has no step `evalute`; did you mean `evaluate`?",
        ),
        (
            &["run", "--fork", GOLDEN, "--at", "deliver@3"],
            "the recording never reaches step `deliver` in round 3; it has plan@1, execute@1, evaluate@1, execute@2, evaluate@2, deliver@2",
        ),
        (
            &["run", "--fork", GOLDEN, "--at", "evaluate@second"],
            "--at `evaluate@second`: the round after `@` must be a whole number from 1",
        ),
        (
            &["run", "--fork", GOLDEN, "--at", "evaluate", "--force"],
            "--force goes with --record",
        ),
    ];
    for (args, expected) in cases {
        let run = charter(&project, &server, args);
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    // --at means nothing without --fork, and --fork takes no SPEC.
    for args in [
        &[
            "run",
            "specs/seeds/closed_loop.charter",
            "--input",
            "x.json",
            "--at",
            "plan",
        ][..],
        &[
            "run",
            "specs/seeds/closed_loop.charter",
            "--fork",
            GOLDEN,
            "--at",
            "plan",
        ][..],
    ] {
        let run = charter(&project, &server, args);
        assert_eq!(
            run.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&run.stderr)
        );
    }
    assert_eq!(requests(&server).await, 0);
    let help = charter(&project, &server, &["run", "--help"]);
    let help = text(&help.stdout);
    assert!(help.contains("--at <STEP[@ROUND]>"), "{help}");
    assert!(help.contains("Fork example: charter run --fork "), "{help}");
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_replayed_answer_given_to_another_prompt_is_warned_of() {
    let server = MockServer::start().await;
    mount(
        &server,
        "a history of refrigerators",
        evaluation(9, 7),
        "c1",
    )
    .await;
    let project = project("stale");
    // The planner's prompt changed since the recording: its recorded answer was given to
    // the old one.
    let planner = project.join("specs/seeds/closed_loop/prompts/planner.md.j2");
    let mut prompt = std::fs::read_to_string(&planner).unwrap_or_else(|error| panic!("{error}"));
    prompt.push_str("\nKeep the plan short.\n");
    std::fs::write(&planner, prompt).unwrap_or_else(|error| panic!("{error}"));
    let run = charter(
        &project,
        &server,
        &[
            "run",
            "--fork",
            GOLDEN,
            "--at",
            "evaluate",
            "--model",
            "strong=openai:gpt-4o-mini",
        ],
    );
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "warning: the recorded answer of {step: plan, round: 1, attempt: 1} was given to another prompt of `planner`"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("of {step: execute"), "{stderr}");
    let _ = std::fs::remove_dir_all(&project);
}
