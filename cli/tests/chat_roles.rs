//! Who answers a turn of the mention_roles seed (DESIGN §9.4, seed 002), live against a reactive wiremock OpenAI server on loopback: a Chinese @mention with no space, a full-width ＠, the per-turn role of `charter chat` (`--role`, `/role`), and a router that fails and leaves the turn to the delegate.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::{openai_answer, repository, typed};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "charter-cli-chat-roles-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

fn seed_spec() -> String {
    repository()
        .join("specs/seeds/mention_roles.charter")
        .to_string_lossy()
        .into_owned()
}

/// Answers by what each request says. The router reads the message it was sent: one that
/// mentions 漫画 goes to `creative`, one with 崩 is refused with a 429 every time (the
/// router's one retry is used up), anything else goes to `socrates`. Every other role
/// answers `"<role> heard: <its current message>"`, so an answer shows who was asked and
/// what text reached them.
struct ReadsTheMessage;

impl Respond for ReadsTheMessage {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let role = body["response_format"]["json_schema"]["name"]
            .as_str()
            .unwrap_or("unknown")
            .to_string();
        let prompt = body["messages"]
            .as_array()
            .map(|messages| {
                messages
                    .iter()
                    .filter_map(|message| message["content"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let line_after = |marker: &str| {
            prompt
                .split(marker)
                .nth(1)
                .and_then(|rest| rest.lines().next())
                .unwrap_or("")
                .to_string()
        };
        if role == "router" {
            let message = line_after("Message: ");
            if message.contains('崩') {
                return ResponseTemplate::new(429).set_body_json(
                    json!({"error": {"message": "rate limited", "type": "rate_limit"}}),
                );
            }
            let picked = if message.contains("漫画") {
                "creative"
            } else {
                "socrates"
            };
            return openai_answer(json!({"role": picked, "reason": "by the message"}));
        }
        // A role of this seed is sent the conversation as messages: the current message
        // is the last `user` one.
        let current = body["messages"]
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
        openai_answer(json!({"text": format!("{role} heard: {current}")}))
    }
}

async fn server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ReadsTheMessage)
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
        .env("OPENAI_API_KEY", "sk-chat-roles")
        .env("NO_COLOR", "1");
    command
}

/// The `text` of every answer printed on stdout, in order.
fn texts(stdout: &[u8]) -> Vec<String> {
    serde_json::Deserializer::from_slice(stdout)
        .into_iter::<Value>()
        .map(|answer| {
            answer.map_or_else(
                |error| panic!("stdout is not JSON ({error})"),
                |answer| answer["text"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn mentions_without_a_space_and_a_per_turn_role_pick_who_answers() {
    let server = server().await;
    let dir = temp_dir("mentions");
    let spec = seed_spec();
    let output = typed(
        charter(&dir, &server, &["chat", &spec, "--session", "team"]),
        "@创意伙伴帮我想两个漫画创意\n/role 创意总监\n你选哪个？\n＠socrates：为什么？\n/role\n@nobody 再想一个\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(
        texts(&output.stdout),
        [
            "creative heard: 帮我想两个漫画创意",
            "talker heard: 你选哪个？",
            "socrates heard: 为什么？",
            "socrates heard: @nobody 再想一个",
        ],
        "a no-space mention reaches its role stripped; /role presets the talker; a ＠mention \
         wins over the preset; once cleared, the sticky role hears an unknown @word whole\n{stderr}"
    );
    assert!(
        stderr.contains("role talker is preset for the following turns"),
        "{stderr}"
    );
    assert!(stderr.contains("role cleared"), "{stderr}");
    assert!(
        stderr.contains("`/role NAME` presets the role that answers the following turns"),
        "the chat says how to preset a role\n{stderr}"
    );
    assert_eq!(
        support::requests_for(&server, "router").await,
        0,
        "no turn needed the router"
    );
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(".charter/sessions/team.json")).unwrap_or_default(),
    )
    .unwrap_or(Value::Null);
    assert_eq!(
        session["turns"][1]["request"],
        json!({"text": "你选哪个？", "role": "talker"}),
        "the preset is the request's `role` field"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_role_flag_presets_the_role_and_an_unknown_name_is_refused_with_a_suggestion() {
    let server = server().await;
    let dir = temp_dir("flag");
    let spec = seed_spec();
    let preset = typed(
        charter(&dir, &server, &["chat", &spec, "--role", "创意总监"]),
        "这两个哪个好？\n/role 创意总鉴\n",
    );
    let stderr = String::from_utf8_lossy(&preset.stderr).into_owned();
    assert_eq!(
        preset.status.code(),
        Some(3),
        "a refused /role line is reported in the exit status\n{stderr}"
    );
    assert_eq!(texts(&preset.stdout), ["talker heard: 这两个哪个好？"]);
    assert!(
        stderr.contains(
            "/role: spec `mention_roles` has no role named `创意总鉴`; did you mean `创意总监`?"
        ),
        "{stderr}"
    );
    let refused = typed(
        charter(&dir, &server, &["chat", &spec, "--role", "creatve"]),
        "hi\n",
    );
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "--role: spec `mention_roles` has no role named `creatve`; did you mean `creative`?"
        ),
        "{stderr}"
    );
    let router = typed(
        charter(&dir, &server, &["chat", &spec, "--role", "router"]),
        "hi\n",
    );
    let stderr = String::from_utf8_lossy(&router.stderr).into_owned();
    assert_eq!(router.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("role `router` cannot answer a turn of spec `mention_roles`"),
        "{stderr}"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(["chat", "--help"])
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    assert!(
        help.contains("--role <NAME>") && help.contains("/role none"),
        "{help}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_router_reads_the_message_and_a_failing_router_leaves_the_turn_to_the_delegate() {
    let server = server().await;
    let dir = temp_dir("router");
    let spec = seed_spec();
    let routed = typed(
        charter(&dir, &server, &["chat", &spec, "--session", "routed"]),
        "画一个四格漫画\n",
    );
    assert_eq!(routed.status.code(), Some(0));
    assert_eq!(texts(&routed.stdout), ["creative heard: 画一个四格漫画"]);
    let failed = typed(
        charter(&dir, &server, &["chat", &spec, "--session", "failed"]),
        "系统崩了怎么办\n",
    );
    let stderr = String::from_utf8_lossy(&failed.stderr).into_owned();
    assert_eq!(
        failed.status.code(),
        Some(0),
        "a failed router does not fail the turn\n{stderr}"
    );
    assert_eq!(texts(&failed.stdout), ["delegate heard: 系统崩了怎么办"]);
    assert_eq!(
        support::requests_for(&server, "router").await,
        3,
        "one routed turn, and two attempts (retry 1) for the rate-limited one"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `charter serve SPEC --port 0` in `dir`, and its base address; killed when dropped.
struct Serve {
    child: std::process::Child,
    base: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path, server: &MockServer) -> Serve {
    use std::io::{BufRead, BufReader};
    let mut command = charter(dir, server, &["serve", "--port", "0", &seed_spec()]);
    command
        .env_remove("CHARTER_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap_or_else(|error| panic!("{error}"));
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut lines = BufReader::new(stderr).lines();
    let first = lines
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("charter serve said nothing"));
    let address = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in: {first}"))
        .to_string();
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    Serve {
        child,
        base: format!("http://{address}"),
    }
}

async fn take_turn(base: &str, session: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/sessions/{session}/turns"))
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_turn_over_http_takes_the_settings_role_by_display_name() {
    let server = server().await;
    let dir = temp_dir("http");
    let served = serve(&dir, &server);
    let (status, turn) = take_turn(
        &served.base,
        "web",
        json!({"input": "这两个哪个好？", "role": "创意总监"}),
    )
    .await;
    assert_eq!(status, 200, "{turn}");
    assert_eq!(
        turn["answer"]["text"], "talker heard: 这两个哪个好？",
        "{turn}"
    );
    let (status, refused) = take_turn(
        &served.base,
        "web",
        json!({"input": "再来一个", "role": "创意总鉴"}),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused.to_string().contains("did you mean `创意总监`?"),
        "{refused}"
    );
    let (status, mentioned) =
        take_turn(&served.base, "web", json!({"input": "@创意伙伴再来一个"})).await;
    assert_eq!(status, 200, "{mentioned}");
    assert_eq!(mentioned["answer"]["text"], "creative heard: 再来一个");
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}
