//! Conversations live (DESIGN §9.4): `charter chat` answering typed turns from stdin and `charter run --session` one turn at a time, against a wiremock OpenAI server on loopback whose answer depends on the request (who is asked, and what they were told); the session file kept between turns.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::{copy_dir, copy_file, repository, typed};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SECRET: &str = "sk-chat-SECRET-4242-never-written";

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-cli-chat-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

fn seed_spec() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/seeds/mention_roles.charter")
}

/// Plays every role of the mention_roles seed: the router picks `socrates`; any other
/// role answers `"<role> heard: <the current message it was shown>"`, so an answer proves
/// which role was asked and what text reached it.
struct Roles;

impl Respond for Roles {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let role = body["response_format"]["json_schema"]["name"]
            .as_str()
            .unwrap_or("unknown")
            .to_string();
        // The seed's roles are `messages: chat`: the current message is the last user
        // message (the history comes before it).
        let heard = body["messages"]
            .as_array()
            .and_then(|messages| {
                messages
                    .iter()
                    .rev()
                    .find(|message| message["role"] == "user")
            })
            .and_then(|message| message["content"].as_str())
            .unwrap_or("")
            .to_string();
        let content = if role == "router" {
            json!({"role": "socrates", "reason": "a question to think through"})
        } else {
            json!({"text": format!("{role} heard: {heard}")})
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10}
        }))
    }
}

async fn server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Roles)
        .mount(&server)
        .await;
    server
}

fn charter(dir: &Path, server: &MockServer, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command
        .current_dir(dir)
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", SECRET)
        .env("NO_COLOR", "1");
    command
}

/// The JSON values printed on stdout, in order.
fn answers(stdout: &[u8]) -> Vec<Value> {
    serde_json::Deserializer::from_slice(stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|error| {
            panic!(
                "stdout is not a sequence of JSON values ({error}): {}",
                String::from_utf8_lossy(stdout)
            )
        })
}

fn session_file(dir: &Path, id: &str) -> Value {
    let path = dir.join(".charter/sessions").join(format!("{id}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("no session file {}: {error}", path.display()));
    assert!(!text.contains(SECRET), "the key is never written");
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{error}: {text}"))
}

#[tokio::test]
async fn chat_answers_three_typed_turns_and_keeps_the_session() {
    let server = server().await;
    let dir = temp_dir("three-turns");
    let spec = seed_spec();
    let output = typed(
        charter(
            &dir,
            &server,
            &["chat", spec.to_str().unwrap_or(""), "--session", "team"],
        ),
        "@创意伙伴 想两个漫画创意\n\n第二个展开讲讲\n@创意总监 你选哪个？\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let texts: Vec<Value> = answers(&output.stdout)
        .into_iter()
        .map(|answer| answer["text"].clone())
        .collect();
    assert_eq!(
        texts,
        [
            json!("creative heard: 想两个漫画创意"),
            json!("creative heard: 第二个展开讲讲"),
            json!("talker heard: 你选哪个？"),
        ],
        "an @mention picks the role, the next turn sticks to it, and the role sees the text without its @name\n{stderr}"
    );
    assert_eq!(
        support::requests_for(&server, "router").await,
        0,
        "no turn needed the router"
    );
    let session = session_file(&dir, "team");
    assert_eq!(session["turn_count"], 3);
    assert_eq!(session["fields"]["role"], "talker");
    let turns = session["turns"].as_array().cloned().unwrap_or_default();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[0]["request"]["text"], "@创意伙伴 想两个漫画创意");
    assert_eq!(turns[0]["role"], "creative");
    assert_eq!(turns[2]["answer"]["text"], "talker heard: 你选哪个？");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_chat_continues_its_session_and_the_talker_sees_the_earlier_turns() {
    let server = server().await;
    let dir = temp_dir("continue");
    let spec = seed_spec();
    let spec = spec.to_str().unwrap_or("");
    let first = typed(
        charter(&dir, &server, &["chat", spec, "--session", "s"]),
        "@creative three names for a cafe\n",
    );
    assert_eq!(first.status.code(), Some(0));
    // A later chat in the same session: no @mention, so the sticky role answers.
    let second = typed(
        charter(&dir, &server, &["chat", spec, "--session", "s"]),
        "one more\n",
    );
    let stderr = String::from_utf8_lossy(&second.stderr).into_owned();
    assert_eq!(second.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("1 turn(s) so far"), "{stderr}");
    assert_eq!(
        answers(&second.stdout),
        [json!({"text": "creative heard: one more", "workflows": []})]
    );
    let bodies: Vec<Value> = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|request| serde_json::from_slice(&request.body).unwrap_or(Value::Null))
        .collect();
    let last_roles: Vec<(String, String)> = bodies
        .last()
        .and_then(|body| body["messages"].as_array())
        .into_iter()
        .flatten()
        .map(|message| {
            (
                message["role"].as_str().unwrap_or_default().to_string(),
                message["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    // The second chat's call carries the first turn as a user message (its @name kept) and
    // the answer, between the role's system message and the current message.
    assert_eq!(last_roles.len(), 4, "{last_roles:?}");
    assert_eq!(last_roles[0].0, "system");
    assert_eq!(
        last_roles[1],
        (
            "user".to_string(),
            "@creative three names for a cafe".to_string()
        )
    );
    assert_eq!(last_roles[2].0, "assistant");
    assert_eq!(last_roles[3], ("user".to_string(), "one more".to_string()));
    assert_eq!(session_file(&dir, "s")["turn_count"], 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn run_with_a_session_takes_one_turn_and_prints_its_answer() {
    let server = server().await;
    let dir = temp_dir("run-session");
    let spec = seed_spec();
    let spec = spec.to_str().unwrap_or("");
    let _ = std::fs::write(dir.join("t1.json"), r#"{"text": "is remote work better?"}"#);
    let _ = std::fs::write(dir.join("t2.json"), r#"{"text": "why do you ask?"}"#);
    let first = typed(
        charter(
            &dir,
            &server,
            &["run", spec, "--session", "r", "--input", "t1.json"],
        ),
        "",
    );
    let stderr = String::from_utf8_lossy(&first.stderr).into_owned();
    assert_eq!(first.status.code(), Some(0), "{stderr}");
    assert_eq!(
        answers(&first.stdout),
        [json!({"text": "socrates heard: is remote work better?", "workflows": []})],
        "no role named: the router picked socrates"
    );
    assert!(stderr.contains("session r: turn 1 saved"), "{stderr}");
    let second = typed(
        charter(
            &dir,
            &server,
            &["run", spec, "--session", "r", "--input", "t2.json"],
        ),
        "",
    );
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(
        answers(&second.stdout),
        [json!({"text": "socrates heard: why do you ask?", "workflows": []})]
    );
    assert_eq!(
        support::requests_for(&server, "router").await,
        1,
        "the second turn sticks to socrates without the router"
    );
    assert_eq!(session_file(&dir, "r")["fields"]["role"], "socrates");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_session_id_that_is_not_a_plain_name_is_refused_before_anything_runs() {
    let server = server().await;
    let dir = temp_dir("bad-id");
    let spec = seed_spec();
    let spec = spec.to_str().unwrap_or("");
    let _ = std::fs::write(dir.join("t.json"), r#"{"text": "hi"}"#);
    for args in [
        vec!["chat", spec, "--session", "../escape"],
        vec!["run", spec, "--session", "../escape", "--input", "t.json"],
    ] {
        let output = typed(charter(&dir, &server, &args), "hello\n");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("is not a plain name"), "{stderr}");
    }
    assert!(!dir.join(".charter/escape.json").exists());
    assert!(!dir.join("escape.json").exists());
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn chat_needs_a_request_contract_with_one_string_field() {
    let server = server().await;
    let dir = temp_dir("two-strings");
    let _ = std::fs::write(
        dir.join("two.charter"),
        r#"spec two version "1"
models { default = "openai:m" }
contract Request { text: string  topic: string }
contract Reply { text: string }
session Chat keep 5 { last: string? }
role talker { model: default prompt: """{{ request.text }} {{ request.topic }}""" input: Request output: Reply }
flow { talk = talker(request) -> done }
"#,
    );
    let output = typed(charter(&dir, &server, &["chat", "two.charter"]), "hi\n");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`Request` has 2 string fields (`text`, `topic`)"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A project holding the mention_roles seed at `specs/mention_roles.charter`.
fn seed_project(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    let seeds = repository().join("specs/seeds");
    copy_file(
        &seeds.join("mention_roles.charter"),
        &dir.join("specs/mention_roles.charter"),
    );
    copy_dir(
        &seeds.join("mention_roles"),
        &dir.join("specs/mention_roles"),
    );
    dir
}

#[tokio::test]
async fn a_recorded_chat_replays_turn_by_turn_and_passes_verify() {
    let server = server().await;
    let dir = seed_project("record");
    let recording = dir.join("golden/mention_roles/conversation");
    let output = typed(
        charter(
            &dir,
            &server,
            &[
                "chat",
                "specs/mention_roles.charter",
                "--session",
                "rec",
                "--record",
                "golden/mention_roles/conversation",
            ],
        ),
        "@socrates what is a good life?\nand a good death?\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("recorded to golden/mention_roles/conversation (scenario.yaml, cassette.yaml, trace.snap); it replays to completed (done)"),
        "{stderr}"
    );
    let scenario = std::fs::read_to_string(recording.join("scenario.yaml")).unwrap_or_default();
    assert!(scenario.contains("turns:"), "{scenario}");
    assert!(
        scenario.contains("expect:\n  outcome: completed\n  reason: done\n"),
        "{scenario}"
    );
    let cassette = std::fs::read_to_string(recording.join("cassette.yaml")).unwrap_or_default();
    assert!(cassette.contains("turn: 2"), "{cassette}");
    assert!(cassette.contains("  rendered:\n"), "{cassette}");
    assert!(!cassette.contains(SECRET));
    assert!(recording.join("trace.snap").is_file());
    let replayed = Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(&dir)
        .args([
            "--color",
            "never",
            "replay",
            "golden/mention_roles/conversation",
        ])
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    let replay_stderr = String::from_utf8_lossy(&replayed.stderr).into_owned();
    assert_eq!(replayed.status.code(), Some(0), "{replay_stderr}");
    assert_eq!(
        answers(&replayed.stdout),
        answers(&output.stdout),
        "the replay answers each turn as the live chat did"
    );
    let verified = Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(&dir)
        .args(["--color", "never", "verify", "--verbose"])
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    let table = String::from_utf8_lossy(&verified.stdout).into_owned();
    assert_eq!(
        verified.status.code(),
        Some(0),
        "{table}{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    assert!(
        table
            .lines()
            .any(|line| line.starts_with("mention_roles  conversation")
                && line.trim_end().ends_with("  pass")),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording of a spec outside the project `charter verify` would run in could never be
/// checked: it is refused before any turn.
#[tokio::test]
async fn recording_a_spec_outside_the_project_is_refused_before_any_turn() {
    let server = server().await;
    let dir = temp_dir("record-outside");
    let spec = repository().join("specs/seeds/mention_roles.charter");
    let output = typed(
        charter(
            &dir,
            &server,
            &[
                "chat",
                spec.to_str().unwrap_or(""),
                "--record",
                "golden/mention_roles/conversation",
            ],
        ),
        "@socrates hello\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is outside the project root"), "{stderr}");
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        0
    );
    assert!(!dir.join("golden").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_session_for_a_spec_that_keeps_none_is_a_usage_error() {
    let server = server().await;
    let dir = temp_dir("no-session");
    let _ = std::fs::write(
        dir.join("plain.charter"),
        r#"spec plain version "1"
models { default = "openai:m" }
contract Request { text: string }
contract Reply { text: string }
role talker { model: default prompt: """{{ request.text }}""" input: Request output: Reply }
flow { talk = talker(request) -> done }
"#,
    );
    let _ = std::fs::write(dir.join("t.json"), r#"{"text": "hi"}"#);
    for args in [
        vec!["chat", "plain.charter", "--session", "s"],
        vec![
            "run",
            "plain.charter",
            "--session",
            "s",
            "--input",
            "t.json",
        ],
    ] {
        let output = typed(charter(&dir, &server, &args), "hello\n");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("declares no `session`"), "{stderr}");
    }
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        0
    );
    assert!(!dir.join(".charter/sessions").exists());
    let runs = std::fs::read_dir(dir.join(".charter/runs"))
        .map(|entries| entries.count())
        .unwrap_or(0);
    assert_eq!(
        runs, 0,
        "no run directory is left for a run that never started"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
