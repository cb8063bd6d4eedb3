//! `charter serve` as a program on loopback against a wiremock OpenAI server: a run started over HTTP and streamed as server-sent events (late clients, `Last-Event-ID`, 50 clients at once), an `ask` answered over HTTP, a cancel, a killed server that resumes its runs from their journals, and the token rules.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "sk-serve-SECRET-4242-never-written";

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-cli-serve-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// A project with the scheduler's review_loop fixture and a copy of it that asks a
/// person before it ends (`review_ask`).
fn project(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/fixtures/review_loop.charter");
    let text = std::fs::read_to_string(&fixture).unwrap_or_else(|error| panic!("{error}"));
    let _ = std::fs::create_dir_all(dir.join("specs"));
    let _ = std::fs::write(dir.join("specs/review_loop.charter"), &text);
    let asking = text
        .replace("spec review_loop", "spec review_ask")
        .replace(
            "deliver = finalize finalizer(best)   -> done",
            "deliver = finalize finalizer(best)   -> confirm\n  confirm = ask \"Publish it?\" max 1  when confirm.approved -> done  else -> write",
        );
    assert_ne!(asking, text, "the fixture's flow changed: update the test");
    let _ = std::fs::write(dir.join("specs/review_ask.charter"), asking);
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

async fn model() -> MockServer {
    model_with_writer_after(std::time::Duration::ZERO).await
}

/// [`model`], its writer answering only after `delay` (a call still in flight).
async fn model_with_writer_after(delay: std::time::Duration) -> MockServer {
    let server = MockServer::start().await;
    for_role("writer")
        .respond_with(chat(json!({"title": "Rust", "body": "Rust is fast."})).set_delay(delay))
        .mount(&server)
        .await;
    for_role("reviewer")
        .respond_with(chat(json!({"relevance": 9, "verdict": "PASS"})))
        .mount(&server)
        .await;
    for_role("finalizer")
        .respond_with(chat(json!({"candidate_id": "c1", "summary": "one post"})))
        .mount(&server)
        .await;
    server
}

/// A running `charter serve`, killed when dropped.
struct Server {
    child: Child,
    base: String,
    /// What it said on stderr at start, after the address line.
    said: Vec<String>,
    /// What it said on stderr after that, as it says it.
    later: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    /// The lines it said on stderr after its start, once one holds `needle` (or after
    /// ten seconds, whatever they are then).
    fn said_later(&self, needle: &str) -> Vec<String> {
        for _ in 0..200 {
            let lines = self
                .later
                .lock()
                .map(|lines| lines.clone())
                .unwrap_or_default();
            if lines.iter().any(|line| line.contains(needle)) {
                return lines;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        self.later
            .lock()
            .map(|lines| lines.clone())
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `charter serve ARGS` refused as a usage error (exit 2): its stderr.
fn usage_error(project: &Path, model: &MockServer, args: &[&str]) -> String {
    let output = serve_command(project, model, args)
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(output.status.code(), Some(2));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn serve_command(project: &Path, model: &MockServer, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command
        .current_dir(project)
        .arg("serve")
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("CHARTER_TOKEN")
        .env("OPENAI_BASE_URL", format!("{}/v1", model.uri()))
        .env("OPENAI_API_KEY", SECRET)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Starts `charter serve --port 0 ARGS` and reads its address (and the lines after it
/// that tell of restored runs, up to `expect_lines` of them).
fn start(project: &Path, model: &MockServer, args: &[&str], expect_lines: usize) -> Server {
    start_with(project, model, args, &[], expect_lines)
}

/// [`start`] with environment variables of its own.
fn start_with(
    project: &Path,
    model: &MockServer,
    args: &[&str],
    variables: &[(&str, &str)],
    expect_lines: usize,
) -> Server {
    let mut all = vec!["--port", "0"];
    all.extend_from_slice(args);
    let mut command = serve_command(project, model, &all);
    command.envs(variables.iter().copied());
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
        .unwrap_or_else(|| panic!("no address in: {first}"));
    let said: Vec<String> = lines
        .by_ref()
        .take(expect_lines)
        .map_while(Result::ok)
        .collect();
    // Keep draining stderr so the server never blocks on a full pipe.
    let later = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = later.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Ok(mut kept) = kept.lock() {
                kept.push(line);
            }
        }
    });
    Server {
        child,
        base: format!("http://{address}"),
        said,
        later,
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
struct Sse {
    id: String,
    event: String,
    data: Value,
}

/// Reads a run's event stream, `until` an event says stop (or the stream ends).
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn open(base: &str, id: &str, last: Option<&str>) -> Events {
        let mut request = reqwest::Client::new().get(format!("{base}/runs/{id}/events"));
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last);
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(response.status(), 200);
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|value| value.to_str().ok()),
            Some("text/event-stream")
        );
        Events {
            response,
            buffer: String::new(),
        }
    }

    /// The next event, or `None` at the end of the stream.
    async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let mut event = Sse {
                    id: String::new(),
                    event: String::new(),
                    data: Value::Null,
                };
                let mut data = String::new();
                for line in frame.lines() {
                    if let Some(id) = line.strip_prefix("id: ") {
                        event.id = id.to_string();
                    } else if let Some(name) = line.strip_prefix("event: ") {
                        event.event = name.to_string();
                    } else if let Some(text) = line.strip_prefix("data: ") {
                        data.push_str(text);
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                event.data =
                    serde_json::from_str(&data).unwrap_or_else(|error| panic!("{error}: {data}"));
                assert!(event.event.is_empty(), "an unnamed event, for EventSource");
                event.event = event.data["kind"].as_str().unwrap_or_default().to_string();
                return Some(event);
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                Ok(None) => return None,
                Err(error) => panic!("the stream broke: {error}"),
            }
        }
    }

    /// Every event up to and including the first of `kind`.
    async fn until(&mut self, kind: &str) -> Vec<Sse> {
        let mut seen = Vec::new();
        while let Some(event) = self.next().await {
            let done = event.event == kind;
            seen.push(event);
            if done {
                return seen;
            }
        }
        panic!("the stream ended before a `{kind}` event: {seen:#?}");
    }

    /// Every event to the end of the stream.
    async fn rest(&mut self) -> Vec<Sse> {
        let mut seen = Vec::new();
        while let Some(event) = self.next().await {
            seen.push(event);
        }
        seen
    }
}

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{base}{path}"))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn start_run(base: &str, spec: &str) -> String {
    let (status, body) = post(
        base,
        "/runs",
        json!({"spec": spec, "input": {"goal": "rust"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id: {body}"))
        .to_string()
}

fn kinds(events: &[Sse]) -> Vec<&str> {
    events.iter().map(|event| event.event.as_str()).collect()
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
                found.push((
                    path.clone(),
                    std::fs::read_to_string(&path).unwrap_or_default(),
                ));
            }
        }
    }
    found
}

#[tokio::test]
async fn a_run_started_over_http_streams_its_events_and_ends_with_the_answer() {
    let project = project("stream");
    let model = model().await;
    let server = start(&project, &model, &["specs/review_loop.charter"], 0);
    let id = start_run(&server.base, "review_loop").await;

    let events = Events::open(&server.base, &id, None).await.rest().await;
    let ids: Vec<String> = events.iter().map(|event| event.id.clone()).collect();
    let expected: Vec<String> = (0..events.len()).map(|index| index.to_string()).collect();
    assert_eq!(ids, expected, "ids count up from 0 with no gap");
    let kinds = kinds(&events);
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"answer"), "{kinds:?}");
    assert_eq!(kinds[kinds.len() - 2], "run_finished", "{kinds:?}");
    for kind in [
        "step_started",
        "model_call",
        "model_result",
        "role_output",
        "gate",
        "delivery",
    ] {
        assert!(kinds.contains(&kind), "no `{kind}` in {kinds:?}");
    }
    let writer_output = events
        .iter()
        .find(|event| event.event == "role_output" && event.data["step"] == "write")
        .unwrap_or_else(|| panic!("no output of the writer: {kinds:?}"));
    assert_eq!(writer_output.data["output"]["body"], "Rust is fast.");
    let answer = &events[events.len() - 1].data;
    assert_eq!(answer["outcome"], "completed", "{answer}");
    assert_eq!(answer["answer"]["candidate_id"], "c1", "{answer}");

    let (status, run) = get(&server.base, &format!("/runs/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(run["status"], "finished", "{run}");
    assert_eq!(run["outcome"], "completed", "{run}");
    assert_eq!(run["reason"], "gate_passed", "{run}");
    assert_eq!(run["answer"]["summary"], "one post", "{run}");

    // A client that comes after the end gets every event; Last-Event-ID skips those seen.
    let late = Events::open(&server.base, &id, None).await.rest().await;
    assert_eq!(late, events);
    let after = Events::open(&server.base, &id, Some("3"))
        .await
        .rest()
        .await;
    assert_eq!(after, events[4..].to_vec());

    // Journaled as `charter run` journals, and no key anywhere.
    let run_dir = project.join(".charter/runs").join(&id);
    for file in [
        "serve.json",
        "input.json",
        "calls.jsonl",
        "events.jsonl",
        "stream.jsonl",
        "result.json",
        "out/delivery.json",
    ] {
        assert!(
            run_dir.join(file).is_file(),
            "no {file} in {}",
            run_dir.display()
        );
    }
    for (path, text) in files(&project) {
        assert!(!text.contains(SECRET), "{} holds the key", path.display());
    }
    for event in &events {
        assert!(!event.data.to_string().contains(SECRET));
    }
}

#[tokio::test]
async fn an_ask_is_answered_over_http_and_the_run_goes_on() {
    let project = project("ask");
    let model = model().await;
    let server = start(&project, &model, &["specs/review_ask.charter"], 0);
    let id = start_run(&server.base, "review_ask").await;

    let mut stream = Events::open(&server.base, &id, None).await;
    let asked = stream.until("ask").await;
    let ask = &asked[asked.len() - 1].data;
    assert_eq!(ask["question"], "Publish it?", "{ask}");
    assert_eq!(ask["step"], "confirm", "{ask}");
    let (_, run) = get(&server.base, &format!("/runs/{id}")).await;
    assert_eq!(run["status"], "waiting", "{run}");
    assert_eq!(run["question"], "Publish it?", "{run}");

    let (status, refused) = post(
        &server.base,
        &format!("/runs/{id}/answers"),
        json!({"approve": true}),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    let (status, answered) = post(
        &server.base,
        &format!("/runs/{id}/answers"),
        json!({"approved": true, "note": "ship it"}),
    )
    .await;
    assert_eq!(status, 200, "{answered}");

    let rest = stream.rest().await;
    let kinds = kinds(&rest);
    assert!(kinds.contains(&"human"), "{kinds:?}");
    let answer = &rest[rest.len() - 1].data;
    assert_eq!(answer["outcome"], "completed", "{answer}");
    let (status, again) = post(
        &server.base,
        &format!("/runs/{id}/answers"),
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 409, "{again}");
}

#[tokio::test]
async fn a_run_is_cancelled_over_http() {
    let project = project("cancel");
    let model = model().await;
    let server = start(&project, &model, &["specs/review_ask.charter"], 0);
    let id = start_run(&server.base, "review_ask").await;
    let mut stream = Events::open(&server.base, &id, None).await;
    stream.until("ask").await;

    let response = reqwest::Client::new()
        .delete(format!("{}/runs/{id}", server.base))
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(response.status(), 202);
    let rest = stream.rest().await;
    let finished = rest
        .iter()
        .find(|event| event.event == "run_finished")
        .unwrap_or_else(|| panic!("no run_finished: {rest:?}"));
    assert_eq!(finished.data["outcome"], "cancelled", "{:?}", finished.data);
    let (_, run) = get(&server.base, &format!("/runs/{id}")).await;
    assert_eq!(run["outcome"], "cancelled", "{run}");
    let response = reqwest::Client::new()
        .delete(format!("{}/runs/{id}", server.base))
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(response.status(), 409);
}

#[tokio::test]
async fn fifty_clients_on_one_run_each_get_every_event_in_order() {
    let project = project("fifty");
    let model = model().await;
    let server = start(&project, &model, &["specs/review_ask.charter"], 0);
    let id = start_run(&server.base, "review_ask").await;
    let mut clients = Vec::new();
    for _ in 0..50 {
        let base = server.base.clone();
        let id = id.clone();
        clients.push(tokio::spawn(async move {
            Events::open(&base, &id, None).await.rest().await
        }));
    }
    // The run waits for its answer while the clients connect: some get the first events
    // from what was kept, all get the rest as they happen.
    let mut watcher = Events::open(&server.base, &id, None).await;
    watcher.until("ask").await;
    let (status, body) = post(
        &server.base,
        &format!("/runs/{id}/answers"),
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let everything = Events::open(&server.base, &id, None).await.rest().await;
    assert_eq!(
        everything.last().map(|event| event.event.as_str()),
        Some("answer")
    );
    for client in clients {
        let seen = client.await.unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(seen, everything);
    }
}

#[tokio::test]
async fn a_killed_server_resumes_its_runs_from_their_journals() {
    let project = project("restart");
    let model = model().await;
    let mut server = start(&project, &model, &["specs/review_ask.charter"], 0);
    let id = start_run(&server.base, "review_ask").await;
    Events::open(&server.base, &id, None)
        .await
        .until("ask")
        .await;
    let calls_before = model.received_requests().await.unwrap_or_default().len();
    // SIGKILL: no chance to write anything more.
    let _ = server.child.kill();
    let _ = server.child.wait();

    let server = start(&project, &model, &["specs/review_ask.charter"], 1);
    assert!(
        server
            .said
            .iter()
            .any(|line| line.contains(&id) && line.contains("resumed")),
        "{:?}",
        server.said
    );
    let mut stream = Events::open(&server.base, &id, None).await;
    stream.until("ask").await;
    assert_eq!(
        model.received_requests().await.unwrap_or_default().len(),
        calls_before,
        "the resumed run asked the model again for a journaled answer"
    );
    let (status, body) = post(
        &server.base,
        &format!("/runs/{id}/answers"),
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let rest = stream.rest().await;
    assert_eq!(rest[rest.len() - 1].data["outcome"], "completed");
    assert_eq!(support::requests_for(&model, "writer").await, 1);

    // A third start finds the run ended: it is listed, and not run again.
    drop(server);
    let server = start(&project, &model, &["specs/review_ask.charter"], 0);
    let (_, run) = get(&server.base, &format!("/runs/{id}")).await;
    assert_eq!(run["status"], "finished", "{run}");
    assert_eq!(run["outcome"], "completed", "{run}");
    let replayed = Events::open(&server.base, &id, None).await.rest().await;
    assert_eq!(
        replayed.last().map(|event| event.event.as_str()),
        Some("answer")
    );
}

/// DESIGN §13.3: a run directory is held by the process running it. A second server
/// started in the same directory while a run's call is in flight leaves that run alone
/// (it used to resume it too and ask the model again: two writers, one journal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_in_the_directory_leaves_a_running_run_alone() {
    let project = project("two-servers");
    let model = model_with_writer_after(std::time::Duration::from_millis(1500)).await;
    let first = start(&project, &model, &["specs/review_loop.charter"], 0);
    let id = start_run(&first.base, "review_loop").await;
    let mut waited = 0;
    while support::requests_for(&model, "writer").await == 0 && waited < 500 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        waited += 1;
    }
    let second = start(&project, &model, &["specs/review_loop.charter"], 1);
    assert!(
        second.said.iter().any(|line| line.contains(&id)
            && line.contains("left alone")
            && line.contains("another process")),
        "{:?}",
        second.said
    );
    let rest = Events::open(&first.base, &id, None).await.rest().await;
    assert_eq!(rest[rest.len() - 1].data["outcome"], "completed");
    assert_eq!(
        support::requests_for(&model, "writer").await,
        1,
        "the run was run twice"
    );
}

/// DESIGN §13.3: a resumed run's stream is the same events with the same ids, so a
/// browser reconnecting with `Last-Event-ID` after a restart neither skips nor repeats
/// one. The question answered before the kill is shown again where it was (a journal
/// answers it now, and it used to vanish, shifting every later id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_streams_the_same_events_with_the_same_ids() {
    let project = project("same-ids");
    let text = std::fs::read_to_string(project.join("specs/review_loop.charter"))
        .unwrap_or_else(|error| panic!("{error}"));
    let asking_first = text.replace("spec review_loop", "spec ask_first").replace(
        "  write   = writer(request)            -> review",
        "  confirm = ask \"Write it?\" max 1  when confirm.approved -> write  else -> done\n  write   = writer(request)            -> review",
    );
    assert_ne!(
        asking_first, text,
        "the fixture's flow changed: update the test"
    );
    let _ = std::fs::write(project.join("specs/ask_first.charter"), asking_first);
    let model = model_with_writer_after(std::time::Duration::from_secs(30)).await;
    let mut server = start(&project, &model, &["specs/ask_first.charter"], 0);
    let id = start_run(&server.base, "ask_first").await;
    let mut stream = Events::open(&server.base, &id, None).await;
    let mut before = stream.until("ask").await;
    let (status, body) = post(
        &server.base,
        &format!("/runs/{id}/answers"),
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    before.extend(stream.until("model_call").await);
    // The writer's call is in flight (30 s): kill the server, start it again.
    let _ = server.child.kill();
    let _ = server.child.wait();
    let server = start(&project, &model, &["specs/ask_first.charter"], 1);
    let after = Events::open(&server.base, &id, None)
        .await
        .until("model_call")
        .await;
    let shown = |events: &[Sse]| -> Vec<(String, String)> {
        events
            .iter()
            .map(|event| (event.id.clone(), event.event.clone()))
            .collect()
    };
    assert_eq!(shown(&after), shown(&before));
    assert!(after.iter().any(|event| event.event == "ask"), "{after:?}");
}

#[tokio::test]
async fn a_token_is_required_off_loopback_and_checked_when_given() {
    let project = project("token");
    let model = model().await;
    let stderr = usage_error(
        &project,
        &model,
        &["--host", "0.0.0.0", "specs/review_loop.charter"],
    );
    assert!(stderr.contains("--token"), "{stderr}");

    let server = start(
        &project,
        &model,
        &["--token", "t0ken-xyz", "specs/review_loop.charter"],
        0,
    );
    let client = reqwest::Client::new();
    let url = format!("{}/runs", server.base);
    let none = client
        .get(&url)
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(none.status(), 401);
    assert_eq!(
        none.headers()
            .get("www-authenticate")
            .and_then(|value| value.to_str().ok()),
        Some("Bearer")
    );
    let wrong = client
        .get(&url)
        .bearer_auth("t0ken-xyZ")
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(wrong.status(), 401);
    let right = client
        .get(&url)
        .bearer_auth("t0ken-xyz")
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(right.status(), 200);
    assert_eq!(model.received_requests().await.unwrap_or_default().len(), 0);

    // The page needs no token; an event stream takes it from the cookie the page sets
    // (EventSource sends no header), never from its URL.
    let page = client
        .get(format!("{}/", server.base))
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap_or_default();
    assert!(page.contains("charter_token="), "the page sets no cookie");
    assert!(
        !page.contains("access_token"),
        "the page puts the token in a URL"
    );
    let started = client
        .post(&url)
        .bearer_auth("t0ken-xyz")
        .json(&json!({"spec": "review_loop", "input": {"goal": "rust"}}))
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(started.status(), 201);
    let id = started.json::<Value>().await.unwrap_or_default()["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let events = format!("{}/runs/{id}/events", server.base);
    let with = |url: String, cookie: &str| {
        let request = client.get(url).header("cookie", cookie.to_string());
        async move {
            request
                .send()
                .await
                .unwrap_or_else(|error| panic!("{error}"))
        }
    };
    assert_eq!(with(events.clone(), "").await.status(), 401);
    assert_eq!(
        with(events.clone(), "charter_token=t0ken").await.status(),
        401
    );
    let query = with(format!("{events}?access_token=t0ken-xyz"), "").await;
    assert_eq!(query.status(), 401, "a token in the URL is taken");
    let status = with(
        format!("{}/runs/{id}", server.base),
        "charter_token=t0ken-xyz",
    )
    .await;
    assert_eq!(
        status.status(),
        401,
        "only an event stream takes the token from the cookie"
    );
    let streamed = with(events, "theme=dark; charter_token=t0ken%2Dxyz").await;
    assert_eq!(streamed.status(), 200);
    let text = streamed.text().await.unwrap_or_default();
    assert!(text.contains("\"kind\":\"answer\""), "{text}");
}

/// DESIGN §13.3: the token need not be on the command line, where `ps` shows it: from
/// --token-file (its first line) or CHARTER_TOKEN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_comes_from_a_file_or_the_environment() {
    let project = project("token-file");
    let model = model().await;
    let _ = std::fs::write(project.join("token.txt"), "from-the-file\n");
    let from_file = start(
        &project,
        &model,
        &["--token-file", "token.txt", "specs/review_loop.charter"],
        0,
    );
    let from_env = start_with(
        &project,
        &model,
        &["specs/review_loop.charter"],
        &[("CHARTER_TOKEN", "from-the-env")],
        0,
    );
    let client = reqwest::Client::new();
    for (server, token) in [(&from_file, "from-the-file"), (&from_env, "from-the-env")] {
        let url = format!("{}/runs", server.base);
        let status = |bearer: &str| {
            let request = client.get(&url).bearer_auth(bearer.to_string());
            async move {
                request
                    .send()
                    .await
                    .unwrap_or_else(|error| panic!("{error}"))
                    .status()
            }
        };
        assert_eq!(status("wrong").await, 401, "{token}");
        assert_eq!(status(token).await, 200, "{token}");
    }
    let both = usage_error(
        &project,
        &model,
        &[
            "--token",
            "x",
            "--token-file",
            "token.txt",
            "specs/review_loop.charter",
        ],
    );
    assert!(both.contains("--token-file"), "{both}");
    let missing = usage_error(
        &project,
        &model,
        &["--token-file", "nope.txt", "specs/review_loop.charter"],
    );
    assert!(missing.contains("nope.txt"), "{missing}");
}

/// DESIGN §13.3: runs are bounded. Past --max-runs a `POST /runs` is 429 with
/// Retry-After, and a place is free again once a run ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_past_max_runs_are_refused_until_one_ends() {
    let project = project("max-runs");
    let model = model().await;
    let server = start(
        &project,
        &model,
        &["--max-runs", "1", "specs/review_ask.charter"],
        0,
    );
    let first = start_run(&server.base, "review_ask").await;
    let mut stream = Events::open(&server.base, &first, None).await;
    stream.until("ask").await;
    let refused = reqwest::Client::new()
        .post(format!("{}/runs", server.base))
        .json(&json!({"spec": "review_ask", "input": {"goal": "rust"}}))
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().get("retry-after").is_some());
    let (status, body) = post(
        &server.base,
        &format!("/runs/{first}/answers"),
        json!({"approved": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    stream.rest().await;
    // The place is given back before the run's clients hear its end.
    let (status, body) = post(
        &server.base,
        "/runs",
        json!({"spec": "review_ask", "input": {"goal": "rust"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let bad = usage_error(
        &project,
        &model,
        &["--max-runs", "0", "specs/review_ask.charter"],
    );
    assert!(bad.contains("--max-runs"), "{bad}");
}

/// The files a process holds open (Linux: its `/proc/PID/fd` entries).
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// DESIGN §13.3: a finished run holds no open file, so a server that ran 200 runs holds
/// as many descriptors as one that ran a few (each run used to keep `stream.jsonl` and
/// `calls.jsonl` open, and a server ran out of descriptors after some hundreds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_holds_no_open_file() {
    let project = project("descriptors");
    let model = model().await;
    let server = start(
        &project,
        &model,
        &["--max-runs", "8", "specs/review_loop.charter"],
        0,
    );
    let pid = server.child.id();
    let finish = |count: usize| {
        let base = server.base.clone();
        async move {
            for _ in 0..count {
                let id = start_run(&base, "review_loop").await;
                let mut stream = Events::open(&base, &id, None).await;
                stream.until("answer").await;
            }
        }
    };
    // A few runs first, so pools and caches have what they keep.
    finish(5).await;
    let before = open_files(pid);
    assert!(before > 0, "cannot read /proc/{pid}/fd");
    let batches: Vec<_> = (0..4).map(|_| tokio::spawn(finish(50))).collect();
    for batch in batches {
        batch.await.unwrap_or_else(|error| panic!("{error}"));
    }
    let after = open_files(pid);
    assert!(
        after <= before + 8,
        "{before} files open after 5 runs, {after} after 200 more"
    );
}

/// DESIGN §13.3: another site's page cannot start, read, answer or cancel a run — not by
/// a `text/plain` POST (no CORS preflight), not by a DNS name rebound to 127.0.0.1 — and
/// the server's own page and a JSON client still can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_site_and_a_rebound_name_are_refused_on_every_route() {
    let project = project("cross-site");
    let model = model().await;
    let server = start(&project, &model, &["specs/review_loop.charter"], 0);
    let port = server
        .base
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let own = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let body = r#"{"spec": "review_loop", "input": {"goal": "rust"}}"#;
    let send =
        |method: reqwest::Method, path: &str, headers: &[(&str, &str)], body: Option<&str>| {
            let mut request = client.request(method, format!("{}{path}", server.base));
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            if let Some(body) = body {
                request = request.body(body.to_string());
            }
            async move {
                let response = request
                    .send()
                    .await
                    .unwrap_or_else(|error| panic!("{error}"));
                let status = response.status().as_u16();
                (status, response.text().await.unwrap_or_default())
            }
        };
    let post = reqwest::Method::POST;
    let get = reqwest::Method::GET;
    let delete = reqwest::Method::DELETE;
    let json = ("content-type", "application/json");

    // What a page on any site can send without a preflight: a text/plain POST.
    let (status, text) = send(
        post.clone(),
        "/runs",
        &[
            ("origin", "http://evil.example"),
            ("content-type", "text/plain"),
        ],
        Some(body),
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("another site"), "{text}");
    let (status, text) = send(
        post.clone(),
        "/runs",
        &[("content-type", "text/plain")],
        Some(body),
    )
    .await;
    assert_eq!(status, 415, "{text}");
    // A foreign Origin on every route, JSON or not; and DNS rebinding: evil.example now
    // resolves to 127.0.0.1, and the browser sends its name as the Host.
    let rebound = format!("evil.example:{port}");
    let foreign = [("origin", "http://evil.example"), json];
    let renamed = [("host", rebound.as_str()), json];
    let routes = [
        (post.clone(), "/runs"),
        (get.clone(), "/runs"),
        (get.clone(), "/runs/x"),
        (get.clone(), "/runs/x/events"),
        (delete.clone(), "/runs/x"),
        (post.clone(), "/runs/x/answers"),
        (get.clone(), "/"),
    ];
    for (headers, refusal) in [
        (&foreign, "another site"),
        (&renamed, "--allow-host evil.example"),
    ] {
        for (method, path) in &routes {
            let (status, text) = send(method.clone(), path, headers, Some(body)).await;
            assert_eq!(status, 403, "{method} {path}: {text}");
            assert!(text.contains(refusal), "{method} {path}: {text}");
        }
    }
    assert_eq!(model.received_requests().await.unwrap_or_default().len(), 0);

    // The server's own page (its Origin) and a plain JSON client still start a run.
    let (status, text) = send(
        post.clone(),
        "/runs",
        &[("origin", own.as_str()), json],
        Some(body),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let (status, text) = send(post, "/runs", &[("host", "localhost"), json], Some(body)).await;
    assert_eq!(status, 201, "{text}");
    let (status, _) = send(get, "/runs", &[], None).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_wrong_spec_or_input_is_refused_with_what_to_give() {
    let project = project("refused");
    let model = model().await;
    let server = start(&project, &model, &["specs/review_loop.charter"], 0);
    let (status, body) = post(
        &server.base,
        "/runs",
        json!({"spec": "review_lop", "input": {"goal": "x"}}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let message = body["error"].as_str().unwrap_or_default();
    assert!(message.contains("did you mean `review_loop`?"), "{message}");
    let (status, body) = post(
        &server.base,
        "/runs",
        json!({"spec": "review_loop", "input": {"goal": 3}}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(body["violations"].to_string().contains("goal"), "{body}");
    let (status, _) = get(&server.base, "/runs/nope").await;
    assert_eq!(status, 404);
    assert!(
        !project.join(".charter/runs").exists()
            || std::fs::read_dir(project.join(".charter/runs"))
                .map(|dir| dir.count())
                .unwrap_or(0)
                == 0
    );
    assert_eq!(model.received_requests().await.unwrap_or_default().len(), 0);
}

#[tokio::test]
async fn the_page_is_served_whole_with_no_network() {
    let project = project("page");
    let model = model().await;
    let server = start(&project, &model, &["specs/review_loop.charter"], 0);
    let response = reqwest::get(format!("{}/", server.base))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok()),
        Some("text/html; charset=utf-8")
    );
    let page = response.text().await.unwrap_or_default();
    for part in [
        "function charterTimeline",
        "new EventSource",
        "/answers",
        "\"DELETE\"",
        "id=\"answer\"",
    ] {
        assert!(page.contains(part), "the page lacks {part}");
    }
    assert!(!page.contains("/*JS*/") && !page.contains("/*CSS*/"));
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the page loads nothing from the network"
    );
}

#[tokio::test]
async fn the_stream_tells_a_watcher_of_retries_gate_issues_repairs_and_shortened_outputs() {
    let project = project("watcher");
    let model = MockServer::start().await;
    for_role("writer")
        .respond_with(ResponseTemplate::new(500).set_body_string("overloaded"))
        .up_to_n_times(1)
        .mount(&model)
        .await;
    let long_body = "Rust is fast. ".repeat(1_000);
    for_role("writer")
        .respond_with(chat(json!({"title": "Rust", "body": long_body})))
        .mount(&model)
        .await;
    for_role("reviewer")
        .respond_with(chat(json!({"relevance": 3, "verdict": "FAIL"})))
        .up_to_n_times(1)
        .mount(&model)
        .await;
    for_role("reviewer")
        .respond_with(chat(json!({"relevance": 9, "verdict": "PASS"})))
        .mount(&model)
        .await;
    for_role("finalizer")
        .respond_with(chat(json!({"candidate_id": "c2", "summary": "one post"})))
        .mount(&model)
        .await;
    let server = start(&project, &model, &["specs/review_loop.charter"], 0);
    let id = start_run(&server.base, "review_loop").await;
    let events = Events::open(&server.base, &id, None).await.rest().await;
    let of = |kind: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|event| event.event == kind)
            .map(|event| &event.data)
            .collect()
    };
    let retries = of("retry");
    let provider: Vec<&&Value> = retries
        .iter()
        .filter(|retry| retry["retry"] == "provider")
        .collect();
    assert_eq!(provider.len(), 1, "{:?}", kinds(&events));
    assert_eq!(provider[0]["step"], "write");
    assert!(
        retries.iter().any(|retry| retry["retry"] == "repair"),
        "{retries:?}"
    );
    let gates = of("gate");
    assert_eq!(gates.len(), 2);
    assert_eq!(gates[0]["passed"], false);
    let codes = gates[0]["issues"].to_string();
    assert!(codes.contains("REJECTED"), "{codes}");
    assert_eq!(gates[1]["passed"], true);
    assert_eq!(gates[1]["score"], 9.0);
    let repair = of("repair");
    assert_eq!(repair.len(), 1);
    assert!(repair[0]["codes"].to_string().contains("REJECTED"));
    for result in of("model_result") {
        assert!(
            result["latency_ms"].is_u64() && result["t_ms"].is_u64(),
            "{result}"
        );
    }
    let outputs = of("role_output");
    assert_eq!(
        outputs.len(),
        5,
        "two writers, two reviewers, one finalizer"
    );
    let writer = outputs[0]["output"].as_str().unwrap_or_default();
    assert!(
        writer.chars().count() < 4_100 && writer.contains("more bytes not shown"),
        "a long output is shortened: {} characters",
        writer.chars().count()
    );
    for event in &events {
        let text = event.data.to_string();
        assert!(
            text.len() < 40_000,
            "an event is bounded: {} bytes",
            text.len()
        );
    }
    assert_eq!(of("delivery").len(), 1);
    assert_eq!(of("answer")[0]["outcome"], "completed");
}

#[tokio::test]
async fn a_tool_no_served_spec_declares_is_a_usage_error() {
    let project = project("tool");
    let model = model().await;
    let stderr = usage_error(
        &project,
        &model,
        &["--tool", "serch=true", "specs/review_loop.charter"],
    );
    assert!(
        stderr.contains("no spec served declares a tool `serch`"),
        "{stderr}"
    );
    assert!(!project.join(".charter").exists(), "nothing was started");
}

#[tokio::test]
async fn a_recording_is_served_with_no_model_and_no_key() {
    // `--replay`: the seed's recording answers every call (in virtual time: its 20-minute
    // timeouts cost nothing), a run started with no input takes the scenario's, and the
    // model server is never asked.
    let project = temp_dir("replay");
    let model = MockServer::start().await;
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../golden/closed_loop/repair_succeeds")
        .to_string_lossy()
        .into_owned();
    let server = start(&project, &model, &["--replay", &scenario], 0);
    let (status, body) = post(&server.base, "/runs", json!({"spec": "closed_loop"})).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap_or_default().to_string();
    let events = Events::open(&server.base, &id, None).await.rest().await;
    let seen = kinds(&events);
    let gates = seen.iter().filter(|kind| **kind == "gate").count();
    assert_eq!(
        gates, 2,
        "the recording's failed gate, then its passing one: {seen:?}"
    );
    let finished = events
        .iter()
        .find(|event| event.event == "run_finished")
        .unwrap_or_else(|| panic!("no run_finished: {seen:?}"));
    assert_eq!(finished.data["outcome"], "completed");
    assert_eq!(seen.last(), Some(&"answer"), "{seen:?}");
    let (_, status) = get(&server.base, &format!("/runs/{id}")).await;
    assert_eq!(status["delivered"]["candidate_id"], "c2", "{status}");
    assert!(
        model
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty(),
        "no model is asked"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[test]
fn replay_needs_a_scenario_that_can_be_read() {
    let project = temp_dir("replay-bad");
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(&project)
        .args(["serve", "--port", "0", "--replay", "no/such/scenario"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--replay no/such/scenario: bad scenario"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn served_runs_take_model_overrides_and_show_each_answer_with_show_output() {
    let project = project("model");
    let model = model().await;
    let server = start(
        &project,
        &model,
        &[
            "--model",
            "default=openai:qwen2.5:7b",
            "--show-output",
            "specs/review_loop.charter",
        ],
        1,
    );
    assert_eq!(
        server.said,
        ["spec review_loop: model `default` runs on openai:qwen2.5:7b (--model)"]
    );
    let id = start_run(&server.base, "review_loop").await;
    let events = Events::open(&server.base, &id, None).await.rest().await;
    assert_eq!(events[events.len() - 1].data["outcome"], "completed");

    // Every call went to the model --model named, none to the spec's own.
    let requests = model.received_requests().await.unwrap_or_default();
    assert!(!requests.is_empty());
    for request in &requests {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        assert_eq!(body["model"], "qwen2.5:7b", "{body}");
    }
    // Each answer shown on stderr as it arrived, named by its run and place.
    let said = server.said_later("deliver#1");
    let answered: Vec<&String> = said
        .iter()
        .filter(|line| line.starts_with(&format!("run {id}  ")) && line.contains("answered: "))
        .collect();
    assert_eq!(answered.len(), 3, "writer, reviewer, finalizer: {said:#?}");
    assert!(
        answered[0].contains("write#1") && answered[0].contains("Rust is fast."),
        "{said:#?}"
    );
    assert!(said.iter().all(|line| !line.contains(SECRET)));
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_served_run_shows_no_answer_without_show_output_and_runs_the_specs_model() {
    let project = project("no-show");
    let model = model().await;
    let server = start(&project, &model, &["specs/review_loop.charter"], 0);
    let id = start_run(&server.base, "review_loop").await;
    let events = Events::open(&server.base, &id, None).await.rest().await;
    assert_eq!(events[events.len() - 1].data["outcome"], "completed");
    let requests = model.received_requests().await.unwrap_or_default();
    for request in &requests {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        assert_eq!(body["model"], "gpt-4o-mini", "{body}");
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let said = server
        .later
        .lock()
        .map(|lines| lines.clone())
        .unwrap_or_default();
    assert!(
        said.iter().all(|line| !line.contains("answered: ")),
        "{said:#?}"
    );
    let _ = std::fs::remove_dir_all(&project);
}

#[tokio::test]
async fn a_model_alias_no_served_spec_defines_is_a_usage_error() {
    let project = project("alias");
    let model = model().await;
    let stderr = usage_error(
        &project,
        &model,
        &["--model", "strong=openai:x", "specs/review_loop.charter"],
    );
    assert!(
        stderr.contains(
            "--model names alias `strong`, which no served spec defines (their aliases: default)"
        ),
        "{stderr}"
    );
    let wrong = usage_error(
        &project,
        &model,
        &["--model", "default", "specs/review_loop.charter"],
    );
    assert!(wrong.contains("is not ALIAS=PROVIDER:MODEL"), "{wrong}");
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../golden/closed_loop/repair_succeeds")
        .to_string_lossy()
        .into_owned();
    let replayed = usage_error(
        &project,
        &model,
        &["--model", "default=openai:x", "--replay", &scenario],
    );
    assert!(replayed.contains("no spec is served live"), "{replayed}");
    assert!(!project.join(".charter").exists(), "nothing was started");
}
