//! `charter verify --rerecord [--missing-only]` on copied seed goldens against a wiremock OpenAI server on loopback.
//!
//! `--missing-only`: after a step is added to the spec, only that step's call reaches the
//! mock, the cassette gains exactly that entry (the others stay byte for byte), and
//! `charter verify` passes; without `--accept` nothing changes on disk; a scenario that
//! lacks nothing asks nothing; `--filter` selects.
//!
//! `--rerecord` alone, with a reactive mock (each role answers as the golden recorded,
//! telling the round by what its prompt shows): answered as recorded, every call reaches
//! the mock and nothing drifts; an evaluator that scores the repair differently drifts
//! (golden -> now), and with `--accept` the fresh cassette is written only while the run
//! still meets `expect`; recorded answers of people are replayed, and a question the
//! cassette cannot answer is an error, never read from stdin.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use charter_runtime::formats::scenario::{CallKey, Cassette, Scenario};
use serde_json::{Value, json};
use support::{copy_dir, copy_file, openai_answer, repository};
use wiremock::matchers::{body_partial_json, body_string_contains, method};
use wiremock::{Mock, MockServer};

const SPEC: &str = "specs/seeds/closed_loop.charter";
const GOLDEN: &str = "golden/closed_loop/repair_succeeds";
const OTHER: &str = "golden/closed_loop/happy_path";
const ASKS: &str = "golden/closed_loop/human_declines_input";

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
    charter_typing(project, server, args, "")
}

/// `charter ARGS` with `typed` on its stdin (what a person at the terminal would answer).
fn charter_typing(project: &Path, server: &MockServer, args: &[&str], typed: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command
        .current_dir(project)
        .args(["--color", "never"])
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-cli-rerecord-KEY-3141")
        .env("NO_COLOR", "1");
    support::typed(command, typed)
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
async fn a_missing_key_or_a_json_report_is_a_usage_error() {
    let server = MockServer::start().await;
    let project = project("usage", true);
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
    for more in [&["--missing-only"][..], &[]] {
        let mut args = vec!["verify", "--rerecord"];
        args.extend(more);
        let keyless = charter(&project, &server, &args);
        assert_eq!(keyless.status.code(), Some(2), "{}", text(&keyless.stderr));
        assert!(
            text(&keyless.stderr).contains("ANTHROPIC_API_KEY"),
            "{}",
            text(&keyless.stderr)
        );
    }
    assert_eq!(requests(&server).await.len(), 0);
}

/// `charter verify --rerecord` (every call live) with the strong models on the mock.
fn full(project: &Path, server: &MockServer, more: &[&str]) -> Output {
    let mut args = vec![
        "verify",
        "--rerecord",
        "--model",
        "strong=openai:gpt-4o-mini",
    ];
    args.extend(more);
    charter(project, server, &args)
}

/// The answer `cassette` recorded for `step` in `round` (for `item`).
fn recorded(cassette: &Cassette, step: &str, round: u64, item: Option<&str>) -> Option<Value> {
    cassette
        .calls
        .iter()
        .find(|call| call.step == step && call.round == round && call.item.as_deref() == item)
        .and_then(|call| call.response.clone())
}

fn for_role(role: &str) -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(body_partial_json(
        json!({"response_format": {"json_schema": {"name": role}}}),
    ))
}

/// The closed_loop roles as a reactive mock answering what `golden` recorded, each
/// telling the round by what its prompt shows: an executor prompt with the repair's
/// feedback gets the round-2 answer of its work order, an evaluator prompt showing the
/// repaired work the round-2 evaluation. `edit(step, round, answer)` may change an
/// answer first (the story of a role that reacts differently now).
async fn mount_roles(server: &MockServer, golden: &Cassette, edit: &dyn Fn(&str, u64, &mut Value)) {
    let answer = |step: &str, round: u64, item: Option<&str>| {
        recorded(golden, step, round, item).map(|mut answer| {
            edit(step, round, &mut answer);
            answer
        })
    };
    let mut mocks = Vec::new();
    for (role, step) in [("planner", "plan"), ("finalizer", "deliver")] {
        let found = (1..=3).find_map(|round| answer(step, round, None));
        if let Some(found) = found {
            mocks.push(for_role(role).respond_with(openai_answer(found)));
        }
    }
    for item in ["T-001", "T-002"] {
        let work_order = format!("Work order {item}");
        if let Some(first) = answer("execute", 1, Some(item)) {
            mocks.push(
                for_role("executor")
                    .and(body_string_contains(work_order.as_str()))
                    .respond_with(openai_answer(first)),
            );
        }
        if let Some(repaired) = answer("execute", 2, Some(item)) {
            mocks.push(
                for_role("executor")
                    .and(body_string_contains(work_order.as_str()))
                    .and(body_string_contains("Fix the findings that concern"))
                    .respond_with(openai_answer(repaired))
                    .with_priority(1),
            );
        }
    }
    if let Some(first) = answer("evaluate", 1, None) {
        mocks.push(for_role("evaluator").respond_with(openai_answer(first)));
    }
    let repaired_work = recorded(golden, "execute", 2, Some("T-002"))
        .and_then(|work| work["output"].as_str().map(str::to_string));
    if let (Some(second), Some(work)) = (answer("evaluate", 2, None), repaired_work) {
        mocks.push(
            for_role("evaluator")
                .and(body_string_contains(work))
                .respond_with(openai_answer(second))
                .with_priority(1),
        );
    }
    for mock in mocks {
        mock.mount(server).await;
    }
}

/// The quality gate's score of an evaluation, as the seed weighs it and the drift table
/// prints it.
fn quality(evaluation: &Value) -> String {
    let score = |name: &str| evaluation[name].as_f64().unwrap_or(f64::NAN);
    let weighted = 3.0 * score("relevance")
        + 3.0 * score("completeness")
        + 2.0 * score("usability")
        + score("clarity");
    format!("{}", weighted / 9.0)
}

/// Sets the relevance the evaluator gives the repaired candidate (round 2 on).
fn second_relevance(relevance: u64) -> impl Fn(&str, u64, &mut Value) {
    move |step, round, answer| {
        if step == "evaluate" && round == 2 {
            answer["relevance"] = json!(relevance);
        }
    }
}

fn golden() -> Cassette {
    cassette(&repository().join(GOLDEN))
}

#[tokio::test]
async fn a_full_rerecord_answered_as_recorded_asks_every_call_and_shows_no_drift() {
    let server = MockServer::start().await;
    let golden = golden();
    mount_roles(&server, &golden, &|_, _, _| {}).await;
    let project = project("all-same", false);
    let before = files(&project);

    let run = full(&project, &server, &["--filter", "repair_succeeds"]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    let calls = golden.calls.len();
    assert!(
        stdout.contains(&format!(
            "closed_loop/repair_succeeds: {calls} call(s) asked live; against the recording \
             {calls} same, 0 changed, 0 new, 0 not made"
        )),
        "{stdout}"
    );
    for call in &golden.calls {
        assert!(
            stdout.contains(&format!("  same      {}\n", call.key())),
            "{stdout}"
        );
    }
    let expect = Scenario::read(&project.join(GOLDEN).join("scenario.yaml"))
        .unwrap_or_else(|error| panic!("{error}"))
        .expect
        .unwrap_or_default();
    let delivered = recorded(&golden, "deliver", 2, None).unwrap_or_default();
    assert!(
        stdout.contains(&format!(
            "  no drift: {} ({}), delivered {}",
            expect
                .outcome
                .map(|outcome| outcome.to_string())
                .unwrap_or_default(),
            expect
                .reason
                .map(|reason| reason.to_string())
                .unwrap_or_default(),
            delivered["candidate_id"].as_str().unwrap_or_default()
        )),
        "{stdout}"
    );
    assert_eq!(
        requests(&server).await.len(),
        calls,
        "one request per recorded call"
    );
    assert_eq!(files(&project), before);
}

#[tokio::test]
async fn a_role_that_reacts_differently_drifts_and_nothing_is_written_without_accept() {
    let server = MockServer::start().await;
    let golden = golden();
    mount_roles(&server, &golden, &second_relevance(5)).await;
    let project = project("all-drift", false);
    let before = files(&project);

    let run = full(&project, &server, &["--filter", "repair_succeeds"]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(1), "{stdout}{stderr}");
    let old = recorded(&golden, "evaluate", 2, None).unwrap_or_default();
    let mut new = old.clone();
    second_relevance(5)("evaluate", 2, &mut new);
    let gate = format!("gate quality c2  {} -> {}\n", quality(&old), quality(&new));
    assert!(stdout.contains(&gate), "{stdout}");
    assert!(stdout.contains("  outcome "), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "  changed   {}\n",
            CallKey::new("evaluate").round(2)
        )),
        "{stdout}"
    );
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert_eq!(files(&project), before);
}

#[tokio::test]
async fn accept_writes_a_fresh_cassette_that_verifies_while_the_run_meets_expect() {
    let server = MockServer::start().await;
    let golden = golden();
    mount_roles(&server, &golden, &second_relevance(10)).await;
    let project = project("all-accept", false);
    let dir = project.join(GOLDEN);
    let scenario = read(&dir.join("scenario.yaml"));

    let run = full(
        &project,
        &server,
        &["--filter", "repair_succeeds", "--accept"],
    );
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    let old = recorded(&golden, "evaluate", 2, None).unwrap_or_default();
    let mut new = old.clone();
    second_relevance(10)("evaluate", 2, &mut new);
    assert!(
        stdout.contains(&format!(
            "gate quality c2  {} -> {}\n",
            quality(&old),
            quality(&new)
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "wrote golden/closed_loop/repair_succeeds/cassette.yaml ({} call(s), in run order)",
            golden.calls.len()
        )),
        "{stdout}"
    );

    // The new answer is recorded, every call under the key it had, the expected prompt
    // of the repaired work order kept, and the scenario as written.
    let written = cassette(&dir);
    assert_eq!(recorded(&written, "evaluate", 2, None), Some(new));
    let keys = |cassette: &Cassette| {
        let mut keys: Vec<CallKey> = cassette.calls.iter().map(|call| call.key()).collect();
        keys.sort();
        keys
    };
    assert_eq!(keys(&written), keys(&golden));
    let expected_prompt = |cassette: &Cassette| {
        cassette
            .calls
            .iter()
            .find(|call| call.expect_prompt.is_some())
            .map(|call| (call.key(), call.expect_prompt.clone()))
    };
    assert!(expected_prompt(&golden).is_some());
    assert_eq!(expected_prompt(&written), expected_prompt(&golden));
    assert_eq!(
        written.recorded.map(|recorded| recorded.overrides),
        Some([("strong".to_string(), "openai:gpt-4o-mini".to_string())].into())
    );
    assert_eq!(read(&dir.join("scenario.yaml")), scenario);

    // And the project verifies as it is now, asking nothing.
    let asked = requests(&server).await.len();
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
    assert_eq!(requests(&server).await.len(), asked);
}

#[tokio::test]
async fn accept_writes_nothing_when_the_new_run_breaks_expect_and_names_it() {
    let server = MockServer::start().await;
    mount_roles(&server, &golden(), &second_relevance(5)).await;
    let project = project("all-broken", false);
    let before = files(&project);

    let run = full(
        &project,
        &server,
        &["--filter", "repair_succeeds", "--accept"],
    );
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "closed_loop/repair_succeeds: nothing was written: the new run does not meet the \
             scenario's `expect` in golden/closed_loop/repair_succeeds/scenario.yaml: expected \
             outcome completed, got "
        ),
        "{stderr}"
    );
    assert!(!stdout.contains("wrote "), "{stdout}");
    assert_eq!(files(&project), before);
}

#[tokio::test]
async fn recorded_answers_of_people_are_replayed_and_an_unrecorded_question_is_an_error() {
    let server = MockServer::start().await;
    let asks = cassette(&repository().join(ASKS));
    mount_roles(&server, &asks, &|_, _, _| {}).await;
    let project = project("all-person", false);
    copy_dir(&repository().join(ASKS), &project.join(ASKS));
    // The person's recorded answer (declining) is given, not the `y` typed at the terminal.
    let run = charter_typing(
        &project,
        &server,
        &[
            "verify",
            "--rerecord",
            "--model",
            "strong=openai:gpt-4o-mini",
            "--filter",
            "human_declines_input",
        ],
        "y\n",
    );
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("  no drift: blocked (human_rejected)"),
        "{stdout}"
    );
    assert_eq!(requests(&server).await.len(), asks.calls.len());

    // repair_succeeds with an evaluator that now finds an error it cannot fix: the repair
    // asks a person, and its cassette has no answer.
    let server = MockServer::start().await;
    let finding = asks.calls.iter().find_map(|call| {
        (call.step == "evaluate")
            .then(|| call.response.clone())
            .flatten()
    });
    let finding = finding.unwrap_or_default()["findings"].clone();
    mount_roles(&server, &golden(), &move |step, round, answer| {
        if step == "evaluate" && round == 1 {
            answer["findings"] = finding.clone();
        }
    })
    .await;
    let before = files(&project);
    let run = charter_typing(
        &project,
        &server,
        &[
            "verify",
            "--rerecord",
            "--model",
            "strong=openai:gpt-4o-mini",
            "--filter",
            "repair_succeeds",
            "--accept",
        ],
        "y\n",
    );
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("asked a person a question at step `judge` (round 1) that the cassette has no answer for"),
        "{stderr}"
    );
    assert_eq!(files(&project), before);
}

#[tokio::test]
async fn a_cassette_that_injects_faults_is_not_rerecorded_live() {
    let server = MockServer::start().await;
    let project = project("all-faults", false);
    let tampered = "golden/closed_loop/delivery_tampered_artifact";
    copy_dir(&repository().join(tampered), &project.join(tampered));
    assert!(!cassette(&project.join(tampered)).faults.is_empty());
    let before = files(&project);
    let run = full(
        &project,
        &server,
        &["--filter", "delivery_tampered_artifact"],
    );
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "closed_loop/delivery_tampered_artifact injects `faults` from its cassette, which a \
             live run does not meet: it is not re-recorded"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "no golden scenario to re-record matches --filter `delivery_tampered_artifact`"
        ),
        "{stderr}"
    );
    assert_eq!(requests(&server).await.len(), 0);
    assert_eq!(files(&project), before);
}
