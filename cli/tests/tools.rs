//! Tools with limits in live runs (DESIGN §9.1–§9.2), through `charter run --tool` against a reactive wiremock model on loopback: a workflow the role's `permit` refuses never starts, a tool cut by its timeout leaves no process behind (inside a role call and as a `tool` step), and a tool step runs, is recorded and replays.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-cli-tools-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// A project holding the `workflow_runner` example, with `edit` applied to its spec text.
fn project(name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let dir = temp_dir(name);
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/examples");
    let read = |path: &str| {
        std::fs::read_to_string(examples.join(path)).unwrap_or_else(|error| panic!("{error}"))
    };
    let _ = std::fs::create_dir_all(dir.join("specs/prompts"));
    // The stand-in tools keep their state (a marker, the pids they started) in the
    // project, which a tool may write only when its sandbox says so.
    let granted = read("workflow_runner.charter")
        .replacen(
            "  retry: 0\n}",
            "  retry: 0\n  sandbox { write: [\".\"] }\n}",
            1,
        )
        .replace(
            "effect: read  timeout: 30s  retry: 1 backoff 1s }",
            "effect: external  timeout: 30s  retry: 1 backoff 1s  sandbox { write: [\".\"] } }",
        );
    let _ = std::fs::write(dir.join("specs/workflow_runner.charter"), edit(granted));
    let _ = std::fs::write(
        dir.join("specs/prompts/operator.md.j2"),
        read("prompts/operator.md.j2"),
    );
    dir
}

/// The operator as a model: asks to run the workflow the request names, then answers
/// from what the tool message told it (refused, timed out, or the run's result).
struct Operator;

impl Respond for Operator {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let told = messages
            .iter()
            .filter(|message| message["role"] == "tool")
            .filter_map(|message| message["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        if told.is_empty() {
            let prompt = messages
                .iter()
                .filter_map(|message| message["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            // The workflow the request (not the role's own text) names.
            let request = prompt.split_once("# Request").map_or("", |(_, rest)| rest);
            let workflow = request
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .find(|word| word.starts_with("wf_"))
                .unwrap_or("wf_9")
                .to_string();
            let arguments = json!({ "workflow_id": workflow }).to_string();
            return ResponseTemplate::new(200).set_body_json(json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                    "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "run_workflow", "arguments": arguments}}]},
                    "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 10}
            }));
        }
        let reply = if told.contains("was refused") {
            json!({"text": format!("refused: {told}"), "status": "refused"})
        } else if told.contains("timed out") {
            json!({"text": format!("stopped: {told}"), "workflow_id": "wf_9", "status": "timed_out"})
        } else {
            json!({"text": format!("ran: {told}"), "workflow_id": "wf_9", "status": "succeeded"})
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.to_string()},
                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 60, "completion_tokens": 12}
        }))
    }
}

async fn operator_server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Operator)
        .mount(&server)
        .await;
    server
}

fn charter(project: &Path, server: &MockServer, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command
        .current_dir(project)
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-test")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

fn output(mut command: Command) -> Output {
    command.output().unwrap_or_else(|error| panic!("{error}"))
}

/// `charter run` of the project's spec on `text`, with `tools` (`NAME=COMMAND`) and
/// `extra` arguments; the events are written to `events.jsonl` in the project.
fn run(
    project: &Path,
    server: &MockServer,
    text: &str,
    tools: &[String],
    extra: &[&str],
) -> Output {
    let _ = std::fs::write(
        project.join("request.json"),
        json!({ "text": text }).to_string(),
    );
    let mut args: Vec<String> = [
        "run",
        "specs/workflow_runner.charter",
        "--input",
        "request.json",
        "--events",
        "events.jsonl",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    for tool in tools {
        args.push("--tool".to_string());
        args.push(tool.clone());
    }
    args.extend(extra.iter().map(ToString::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    output(charter(project, server, &args))
}

fn events(project: &Path) -> Vec<Value> {
    std::fs::read_to_string(project.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn of_kind<'e>(events: &'e [Value], kind: &str) -> Vec<&'e Value> {
    events
        .iter()
        .filter(|event| event["kind"] == kind)
        .collect()
}

/// The operator's reply: what the rule engine (the `audit` tool step) was given. The run's
/// answer on stdout is the rule engine's findings, the last tool step's output.
fn reply(events: &[Value]) -> Value {
    of_kind(events, "tool_call")
        .into_iter()
        .rfind(|call| call["step"] == "audit")
        .map(|call| call["args"].clone())
        .unwrap_or(Value::Null)
}

/// A rule engine that finds nothing wrong with any reply.
const CLEAN_AUDIT: &str = r#"check_reply=cat >/dev/null; echo '{"problems": []}'"#;

#[tokio::test]
async fn a_workflow_the_permit_refuses_never_starts_and_one_it_allows_does() {
    let server = operator_server().await;
    let project = project("permit", |text| text);
    let marker = project.join("started.marker");
    let run_workflow = format!(
        "run_workflow=touch '{}'; cat >/dev/null; echo '{{\"workflow_id\": \"wf_9\", \"status\": \"succeeded\", \"output\": \"report uploaded\"}}'",
        marker.display()
    );
    let tools = [run_workflow, CLEAN_AUDIT.to_string()];

    let denied = run(&project, &server, "run wf_99 for me", &tools, &[]);
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert_eq!(denied.status.code(), Some(0), "{stderr}");
    assert!(
        !marker.exists(),
        "the refused workflow's command was started: {stderr}"
    );
    let trace = events(&project);
    let refusals = of_kind(&trace, "tool_denied");
    assert_eq!(refusals.len(), 1, "{trace:?}");
    assert_eq!(
        refusals[0]["rule"],
        "permit run_workflow when contains([\"wf_9\", \"wf_12\"], args.workflow_id)"
    );
    assert!(
        of_kind(&trace, "tool_call")
            .iter()
            .all(|call| call["tool"] != "run_workflow")
    );
    // The model was told the rule, and its reply says so.
    let answer = reply(&trace);
    assert_eq!(answer["status"], "refused", "{answer}");
    // The run's answer on stdout is the last step's output: the rule engine's findings.
    let stdout: Value = serde_json::from_slice(&denied.stdout).unwrap_or(Value::Null);
    assert_eq!(stdout, json!({"problems": []}));
    assert!(
        answer["text"].as_str().is_some_and(|text| text.contains(
            "was refused: its arguments do not meet `permit run_workflow when contains("
        )),
        "{answer}"
    );

    // The same command does run for a workflow the rule allows: the marker is a real witness.
    let allowed = run(&project, &server, "run wf_9 now", &tools, &[]);
    let stderr = String::from_utf8_lossy(&allowed.stderr);
    assert_eq!(allowed.status.code(), Some(0), "{stderr}");
    assert!(
        marker.exists(),
        "the allowed workflow did not run: {stderr}"
    );
    let answer = reply(&events(&project));
    assert_eq!(answer["status"], "succeeded", "{answer}");
    let _ = std::fs::remove_dir_all(&project);
}

/// A command that starts two `sleep` children in the background, writes their pids and
/// its own, then sleeps itself: only a kill of its whole process group ends them all.
fn sleeper(pids: &Path, answer: &str) -> String {
    format!(
        "sleep 600 & echo $! >> '{pids}'; sleep 600 & echo $! >> '{pids}'; echo $$ >> '{pids}'; sleep 600; echo '{answer}'",
        pids = pids.display()
    )
}

/// The pids written to `file`.
fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// A process that exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The processes of `file` still alive once the killed ones had time to be reaped by
/// init (a kill is immediate, but reaping happens after it).
fn survivors(file: &Path) -> Vec<i32> {
    let started = Instant::now();
    loop {
        let living: Vec<i32> = pids(file).into_iter().filter(|pid| alive(*pid)).collect();
        if living.is_empty() || started.elapsed() > Duration::from_secs(20) {
            return living;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn a_tool_call_cut_by_its_timeout_leaves_no_process_behind() {
    let server = operator_server().await;
    // The same limits, in seconds rather than minutes.
    let project = project("timeout", |text| {
        text.replace(
            "  effect: external\n  timeout: 15m\n",
            "  effect: external\n  timeout: 2s\n",
        )
    });
    let pid_file = project.join("pids.txt");
    let run_workflow = format!(
        "run_workflow={}",
        sleeper(
            &pid_file,
            r#"{"workflow_id": "wf_9", "status": "succeeded"}"#
        )
    );
    let tools = [run_workflow, CLEAN_AUDIT.to_string()];
    let ran = run(
        &project,
        &server,
        "run wf_9 now",
        &tools,
        &["--record", "golden/workflow_runner/cut"],
    );
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(0), "{stderr}");
    assert_eq!(pids(&pid_file).len(), 3, "the tool did not start: {stderr}");
    assert_eq!(survivors(&pid_file), Vec::<i32>::new(), "{stderr}");
    let trace = events(&project);
    let timeouts = of_kind(&trace, "tool_timeout");
    assert_eq!(timeouts.len(), 1, "{trace:?}");
    assert_eq!(timeouts[0]["tool"], "run_workflow");
    assert_eq!(timeouts[0]["timeout_ms"], 2000);
    // The model was told the tool timed out, and said so.
    let answer = reply(&trace);
    assert_eq!(answer["status"], "timed_out", "{answer}");
    assert!(stderr.contains("TIMED OUT"), "{stderr}");
    // The recording keeps how long the tool ran: its replay times out the same way.
    let replayed = output(charter(
        &project,
        &server,
        &["replay", "golden/workflow_runner/cut"],
    ));
    let replay_stderr = String::from_utf8_lossy(&replayed.stderr);
    assert_eq!(replayed.status.code(), Some(0), "{replay_stderr}");
    assert!(
        replay_stderr.contains("tool run_workflow TIMED OUT after 2s"),
        "{replay_stderr}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_tool_step_cut_by_its_timeout_is_retried_then_fails_and_leaves_no_process() {
    let server = operator_server().await;
    let project = project("step-timeout", |text| {
        text.replace(
            "timeout: 30s  retry: 1 backoff 1s",
            "timeout: 1s  retry: 1 backoff 100ms",
        )
    });
    let pid_file = project.join("pids.txt");
    let tools = [
        r#"run_workflow=cat >/dev/null; echo '{"workflow_id": "wf_9", "status": "succeeded"}'"#
            .to_string(),
        format!("check_reply={}", sleeper(&pid_file, r#"{"problems": []}"#)),
    ];
    let ran = run(
        &project,
        &server,
        "run wf_9 now",
        &tools,
        &["--record", "golden/workflow_runner/cut"],
    );
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(3), "{stderr}");
    // Two attempts, three processes each.
    assert_eq!(pids(&pid_file).len(), 6, "{stderr}");
    assert_eq!(survivors(&pid_file), Vec::<i32>::new(), "{stderr}");
    let trace = events(&project);
    let timeouts = of_kind(&trace, "tool_timeout");
    assert_eq!(timeouts.len(), 2, "{trace:?}");
    assert_eq!(timeouts[1]["attempt"], 2);
    let retries = of_kind(&trace, "retry");
    assert_eq!(retries[0]["retry"], "tool");
    let finished = of_kind(&trace, "run_finished");
    assert_eq!(finished[0]["reason"], "step_failed{audit}", "{trace:?}");
    // Both cut attempts are recorded with only their latency, and replay as timeouts.
    let replayed = output(charter(
        &project,
        &server,
        &["replay", "golden/workflow_runner/cut"],
    ));
    let replay_stderr = String::from_utf8_lossy(&replayed.stderr);
    assert_eq!(replayed.status.code(), Some(3), "{replay_stderr}");
    assert_eq!(
        replay_stderr
            .matches("tool check_reply TIMED OUT after 1s")
            .count(),
        2,
        "{replay_stderr}"
    );
    assert!(
        replay_stderr.contains("step_failed{audit}"),
        "{replay_stderr}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_tool_step_runs_live_is_recorded_and_replays_to_the_same_answer() {
    let server = operator_server().await;
    let project = project("step-record", |text| text);
    // The rule engine fails once (the first call finds no state file), then answers.
    let state = project.join("audit.state");
    let audit = format!(
        "check_reply=cat >/dev/null; if [ -e '{state}' ]; then echo '{{\"problems\": []}}'; else touch '{state}'; echo 'rules not loaded' >&2; exit 3; fi",
        state = state.display()
    );
    let tools = [
        r#"run_workflow=cat >/dev/null; echo '{"workflow_id": "wf_9", "status": "succeeded", "output": "uploaded"}'"#
            .to_string(),
        audit,
    ];
    let ran = run(
        &project,
        &server,
        "run wf_9 now",
        &tools,
        &["--record", "golden/workflow_runner/live"],
    );
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(0), "{stderr}");
    let trace = events(&project);
    let audits: Vec<&Value> = of_kind(&trace, "tool_call")
        .into_iter()
        .filter(|call| call["step"] == "audit")
        .collect();
    assert_eq!(audits.len(), 2, "{trace:?}");
    assert!(
        audits[0]["result"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("rules not loaded")),
        "{:?}",
        audits[0]
    );
    assert_eq!(audits[1]["result"], json!({"problems": []}));
    // The live view shows the tool step's tool as it runs and ends.
    assert!(stderr.contains("step (tool check_reply)"), "{stderr}");
    assert!(stderr.contains("tool check_reply failed"), "{stderr}");
    assert!(stderr.contains("tool check_reply done"), "{stderr}");
    let cassette =
        std::fs::read_to_string(project.join("golden/workflow_runner/live/cassette.yaml"))
            .unwrap_or_default();
    assert!(cassette.contains("tool: check_reply"), "{cassette}");
    assert!(cassette.contains("rules not loaded"), "{cassette}");

    let replayed = output(charter(
        &project,
        &server,
        &["replay", "golden/workflow_runner/live"],
    ));
    let replay_stderr = String::from_utf8_lossy(&replayed.stderr);
    assert_eq!(replayed.status.code(), Some(0), "{replay_stderr}");
    assert_eq!(
        String::from_utf8_lossy(&replayed.stdout),
        String::from_utf8_lossy(&ran.stdout),
        "the replay answers as the live run did"
    );
    assert!(
        replay_stderr.contains("tool check_reply FAILED"),
        "{replay_stderr}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

/// DESIGN §13.3: a server that stops (SIGTERM) ends the process groups of the tools its
/// runs are running, rather than leave them behind; the runs stay journaled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_leaves_no_tool_process_behind() {
    use std::io::{BufRead, BufReader};
    let server = operator_server().await;
    let project = project("serve-stop", |text| text);
    let pid_file = project.join("pids.txt");
    let run_workflow = format!(
        "run_workflow={}",
        sleeper(
            &pid_file,
            r#"{"workflow_id": "wf_9", "status": "succeeded"}"#
        )
    );
    let mut child = charter(
        &project,
        &server,
        &[
            "serve",
            "--port",
            "0",
            "--tool",
            &run_workflow,
            "--tool",
            CLEAN_AUDIT,
            "specs/workflow_runner.charter",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap_or_else(|error| panic!("{error}"));
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut lines = BufReader::new(stderr).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let base = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|address| format!("http://{address}"))
        .unwrap_or_else(|| panic!("no address in: {first}"));
    let started = reqwest::Client::new()
        .post(format!("{base}/runs"))
        .json(&json!({"spec": "workflow_runner", "input": {"text": "run wf_9 now"}}))
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(started.status(), 201);
    let waiting = Instant::now();
    while pids(&pid_file).len() < 3 {
        assert!(
            waiting.elapsed() < Duration::from_secs(20),
            "the tool never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let said: Vec<String> = lines.map_while(Result::ok).collect();
    let _ = child.wait();
    assert!(
        said.iter()
            .any(|line| line.contains("1 running tool was stopped")),
        "{said:?}"
    );
    assert_eq!(survivors(&pid_file), Vec::<i32>::new(), "{said:?}");
    let _ = std::fs::remove_dir_all(&project);
}

/// Two roles whose models each call `whoami`, then a `tool` step that calls it directly.
const WHO_CALLS: &str = r#"spec who_calls version "1.0.0"
models { default = "openai:gpt-4o-mini" }
contract Request { text: string }
contract Note    { text: string }
contract Caller  { role: string  step: string }
tool whoami { input: Note  output: Caller  effect: read }
role scout  { model: default  prompt: """Look at {{ request.text }}""" input: Request output: Note tools: [whoami] max_tool_calls: 1 }
role critic { model: default  prompt: """Judge {{ note.text }}""" input: Note output: Note tools: [whoami] max_tool_calls: 1 }
flow {
  look  = scout(request)    -> judge
  judge = critic(look)      -> stamp
  stamp = tool whoami(judge) -> done
}
"#;

/// A model that calls `whoami` once, then answers what the tool told it.
struct AsksWhoItIs;

impl Respond for AsksWhoItIs {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let told = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|message| message["role"] == "tool")
            .filter_map(|message| message["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let message = if told.is_empty() {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                "type": "function", "function": {"name": "whoami", "arguments": "{\"text\": \"me?\"}"}}]})
        } else {
            json!({"role": "assistant", "content": json!({ "text": told }).to_string()})
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5}
        }))
    }
}

/// Issue 28 (seed 002): a command tool is told which role calls it (`CHARTER_ROLE`) and in
/// which step (`CHARTER_STEP`); a `tool` step has no role, so the variable is unset there,
/// even when Charter itself runs with one. The recording replays without the tool.
#[tokio::test]
async fn a_command_tool_is_told_which_role_calls_it_and_replay_is_unaffected() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(AsksWhoItIs)
        .mount(&server)
        .await;
    let project = temp_dir("who-calls");
    let _ = std::fs::create_dir_all(project.join("specs"));
    let _ = std::fs::write(project.join("specs/who_calls.charter"), WHO_CALLS);
    let _ = std::fs::write(project.join("request.json"), r#"{"text": "the sky"}"#);
    let script = project.join("whoami.sh");
    let _ = std::fs::write(
        &script,
        "cat >/dev/null\nprintf '{\"role\": \"%s\", \"step\": \"%s\"}' \"${CHARTER_ROLE-(unset)}\" \"$CHARTER_STEP\"\n",
    );
    let tool = format!("whoami=sh '{}'", script.display());
    let mut live = charter(
        &project,
        &server,
        &[
            "run",
            "specs/who_calls.charter",
            "--input",
            "request.json",
            "--events",
            "events.jsonl",
            "--tool",
            &tool,
            "--record",
            "golden/who_calls/live",
        ],
    );
    live.env("CHARTER_ROLE", "inherited")
        .env("CHARTER_STEP", "inherited");
    let ran = output(live);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(0), "{stderr}");
    let trace = events(&project);
    let results: Vec<(String, Value)> = of_kind(&trace, "tool_call")
        .into_iter()
        .map(|call| {
            (
                call["step"].as_str().unwrap_or_default().to_string(),
                call["result"].clone(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            ("look".to_string(), json!({"role": "scout", "step": "look"})),
            (
                "judge".to_string(),
                json!({"role": "critic", "step": "judge"})
            ),
            (
                "stamp".to_string(),
                json!({"role": "(unset)", "step": "stamp"})
            ),
        ],
        "{trace:?}"
    );
    let answer: Value = serde_json::from_slice(&ran.stdout).unwrap_or(Value::Null);
    assert_eq!(answer, json!({"role": "(unset)", "step": "stamp"}));

    // Replay runs no tool: the answers come from the recording, whatever the tool now says.
    let _ = std::fs::write(&script, "echo broken; exit 9\n");
    let replayed = output(charter(
        &project,
        &server,
        &["replay", "golden/who_calls/live"],
    ));
    let replay_stderr = String::from_utf8_lossy(&replayed.stderr);
    assert_eq!(replayed.status.code(), Some(0), "{replay_stderr}");
    assert_eq!(
        String::from_utf8_lossy(&replayed.stdout),
        String::from_utf8_lossy(&ran.stdout),
        "the replay answers as the live run did"
    );
    let _ = std::fs::remove_dir_all(&project);
}

/// Issue 28: a recording made with a template that includes a shared piece replays clean,
/// and goes stale when only the piece changes, as it would if the template had.
#[tokio::test]
async fn changing_an_included_piece_makes_the_recording_stale() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(AsksWhoItIs)
        .mount(&server)
        .await;
    let project = temp_dir("include-stale");
    let _ = std::fs::create_dir_all(project.join("specs/prompts/parts"));
    let spec = WHO_CALLS.replace(
        r#"prompt: """Look at {{ request.text }}""""#,
        r#"prompt: file("prompts/scout.md.j2")"#,
    );
    let _ = std::fs::write(project.join("specs/who_calls.charter"), spec);
    let _ = std::fs::write(
        project.join("specs/prompts/scout.md.j2"),
        "Look at {{ request.text }}.\n{% include \"parts/tone.j2\" %}\n",
    );
    let tone = project.join("specs/prompts/parts/tone.j2");
    let _ = std::fs::write(&tone, "Be calm.");
    let _ = std::fs::write(project.join("request.json"), r#"{"text": "the sky"}"#);
    let ran = output(charter(
        &project,
        &server,
        &[
            "run",
            "specs/who_calls.charter",
            "--input",
            "request.json",
            "--tool",
            r#"whoami=cat >/dev/null; echo '{"role": "r", "step": "s"}'"#,
            "--record",
            "golden/who_calls/live",
        ],
    ));
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let replay = || {
        let replayed = output(charter(
            &project,
            &server,
            &["replay", "golden/who_calls/live"],
        ));
        String::from_utf8_lossy(&replayed.stderr).into_owned()
    };
    let clean = replay();
    assert!(!clean.contains("stale"), "{clean}");
    let _ = std::fs::write(&tone, "Be brief.");
    let stale = replay();
    assert!(stale.contains("stale recording"), "{stale}");
    assert!(stale.contains("prompt scout"), "{stale}");
    let _ = std::fs::remove_dir_all(&project);
}
