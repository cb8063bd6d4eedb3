//! Runs on Restate (DESIGN §16): a real Restate server and `charter worker` on loopback against a counting mock model — the same results as `charter run`, a worker killed mid-call, an ask across a worker restart, a backoff that is a durable sleep, the server killed mid-run, a bad input, 200 runs at once, `charter serve --restate` in front (a conversation too), a three-node cluster losing a node.
//!
//! The server is the `@restatedev/restate-server` npm package, installed into
//! `target/restate/` (`.ci/run` installs it; so does this test when npm is there). Without
//! it the test is skipped, except in CI (`CI` set), where it fails. Every process it starts
//! is killed when it ends, passed or not, and every wait is bounded.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const PACKAGE: &str = "@restatedev/restate-server@1.7.12";
const SERVER_BIN: &str = "node_modules/@restatedev/restate-server-linux-x64/bin/restate-server";
/// Model calls one run of closed_loop makes against the mock.
const CALLS_PER_RUN: usize = 5;
const MODELS: [&str; 2] = ["--model", "strong=openai:gpt-4o-mini"];
/// How long the mock holds the answer a worker or a node is killed under.
const HOLD: Duration = Duration::from_secs(10);

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The server binary: `CHARTER_RESTATE_SERVER`, or the package in `target/restate/`
/// (installed there now if npm can). `None`: skip (a failure in CI).
fn server_binary() -> Option<PathBuf> {
    if let Some(given) = std::env::var_os("CHARTER_RESTATE_SERVER") {
        return Some(PathBuf::from(given));
    }
    let cache = repository().join("target/restate");
    let binary = cache.join(SERVER_BIN);
    if !binary.exists() {
        let _ = std::fs::create_dir_all(&cache);
        let _ = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&cache)
            .arg(PACKAGE)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    if binary.exists() {
        return Some(binary);
    }
    let install = format!(
        "npm install --no-audit --no-fund --prefix {} {PACKAGE}",
        cache.display()
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "the Restate server is not installed: {install}"
    );
    eprintln!("skipped: the Restate server is not installed ({install})");
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("no free port: {error}"))
}

/// A child process killed (`kill -9`) and reaped when dropped.
struct Guard(Child);

impl Guard {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The Restate server on free loopback ports with its base directory.
struct Server {
    binary: PathBuf,
    base: PathBuf,
    ingress: u16,
    admin: u16,
    fabric: u16,
    process: Option<Guard>,
}

impl Server {
    fn start(binary: PathBuf, base: PathBuf) -> Server {
        let mut server = Server {
            binary,
            base,
            ingress: free_port(),
            admin: free_port(),
            fabric: free_port(),
            process: None,
        };
        server.restart();
        server
    }

    /// (Re)starts the server on the same base directory and ports, and waits until its
    /// admin API answers.
    fn restart(&mut self) {
        let log = std::fs::File::create(self.base.join("server.log"))
            .unwrap_or_else(|error| panic!("{error}"));
        let child = Command::new(&self.binary)
            .current_dir(&self.base)
            .args([
                "--listen-mode",
                "tcp",
                "--no-logo",
                "--default-num-partitions",
                "2",
            ])
            .arg("--base-dir")
            .arg(self.base.join("data"))
            .env("RESTATE_DISABLE_TELEMETRY", "true")
            // A run silent for a second suspends (an ask waits with no worker holding it).
            .env("RESTATE_WORKER__INVOKER__INACTIVITY_TIMEOUT", "1s")
            .env(
                "RESTATE_INGRESS__BIND_ADDRESS",
                format!("127.0.0.1:{}", self.ingress),
            )
            .env(
                "RESTATE_ADMIN__BIND_ADDRESS",
                format!("127.0.0.1:{}", self.admin),
            )
            .env("RESTATE_BIND_ADDRESS", format!("127.0.0.1:{}", self.fabric))
            .env(
                "RESTATE_ADVERTISED_ADDRESS",
                format!("http://127.0.0.1:{}", self.fabric),
            )
            .env(
                "RESTATE_ADMIN__QUERY_ENGINE__PGSQL_BIND_ADDRESS",
                format!("127.0.0.1:{}", free_port()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", self.binary.display()));
        self.process = Some(Guard(child));
        let admin = format!("http://127.0.0.1:{}/health", self.admin);
        let ingress = format!("http://127.0.0.1:{}/restate/health", self.ingress);
        wait_for(
            "the Restate server's admin API and ingress to answer",
            60,
            || http_ok(&admin) && http_ok(&ingress),
        );
    }

    fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    fn ingress(&self, path: &str, body: &Value) -> (u16, Value) {
        post(&format!("http://127.0.0.1:{}{path}", self.ingress), body)
    }

    /// Registers (again) the worker at `uri`.
    fn register(&self, uri: &str) {
        let (status, body) = post(
            &format!("http://127.0.0.1:{}/deployments", self.admin),
            &json!({"uri": uri, "force": true}),
        );
        assert!(
            (200..300).contains(&status),
            "registering the worker at {uri} answered {status}: {body}"
        );
    }
}

/// Three Restate nodes on loopback forming one cluster: a replicated log (each record on
/// two nodes) and a replicated metadata store; node 1 provisions it.
struct Cluster {
    nodes: Vec<Option<Guard>>,
    ingress: Vec<u16>,
    admin: Vec<u16>,
}

impl Cluster {
    fn start(binary: &Path, base: &Path) -> Cluster {
        let fabric: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let ingress: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let admin: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let peers: Vec<String> = fabric
            .iter()
            .map(|port| format!("\"http://127.0.0.1:{port}\""))
            .collect();
        let mut nodes = Vec::new();
        for index in 0..3 {
            let directory = base.join(format!("node{}", index + 1));
            std::fs::create_dir_all(&directory).unwrap_or_else(|error| panic!("{error}"));
            let config = format!(
                "cluster-name = \"charter-test\"\nnode-name = \"n{node}\"\nauto-provision = {provision}\n\
                 default-replication = 2\ndefault-num-partitions = 2\ndisable-telemetry = true\n\
                 listen-mode = \"tcp\"\nbase-dir = \"{base}\"\n\
                 bind-address = \"127.0.0.1:{fabric}\"\nadvertised-address = \"http://127.0.0.1:{fabric}\"\n\
                 [metadata-client]\naddresses = [{peers}]\n\
                 [admin]\nbind-address = \"127.0.0.1:{admin}\"\n\
                 [admin.query-engine]\npgsql-bind-address = \"127.0.0.1:{pgsql}\"\n\
                 [ingress]\nbind-address = \"127.0.0.1:{ingress}\"\n",
                node = index + 1,
                provision = index == 0,
                base = directory.join("data").display(),
                fabric = fabric[index],
                peers = peers.join(", "),
                admin = admin[index],
                pgsql = free_port(),
                ingress = ingress[index],
            );
            let config_file = directory.join("config.toml");
            std::fs::write(&config_file, config).unwrap_or_else(|error| panic!("{error}"));
            let log = std::fs::File::create(directory.join("server.log"))
                .unwrap_or_else(|error| panic!("{error}"));
            let child = Command::new(binary)
                .arg("--config-file")
                .arg(&config_file)
                .arg("--no-logo")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
            nodes.push(Some(Guard(child)));
        }
        let cluster = Cluster {
            nodes,
            ingress,
            admin,
        };
        wait_for(
            "the three nodes' admin APIs and ingresses to answer",
            90,
            || {
                (0..3).all(|node| {
                    http_ok(&format!("http://127.0.0.1:{}/health", cluster.admin[node]))
                        && http_ok(&format!(
                            "http://127.0.0.1:{}/restate/health",
                            cluster.ingress[node]
                        ))
                })
            },
        );
        cluster
    }

    fn server(&self, node: usize) -> Server {
        Server {
            binary: PathBuf::new(),
            base: PathBuf::new(),
            ingress: self.ingress[node],
            admin: self.admin[node],
            fabric: 0,
            process: None,
        }
    }
}

fn http_ok(url: &str) -> bool {
    blocking_client()
        .get(url)
        .send()
        .is_ok_and(|response| response.status().is_success())
}

fn blocking_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

fn post(url: &str, body: &Value) -> (u16, Value) {
    let request = blocking_client().post(url);
    // `null`: no body (a handler without input takes none).
    let request = if body.is_null() {
        request
    } else {
        request.json(body)
    };
    match request.send() {
        Ok(response) => {
            let status = response.status().as_u16();
            let text = response.text().unwrap_or_default();
            (
                status,
                serde_json::from_str(&text).unwrap_or(Value::String(text)),
            )
        }
        Err(error) => (0, Value::String(error.to_string())),
    }
}

/// Polls `ready` every 100 ms for up to `seconds`; fails naming `what` did not happen.
fn wait_for(what: &str, seconds: u64, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("waited {seconds} s for {what}, in vain");
}

/// The mock model: closed_loop's roles, each answered validly; counts every request, and
/// can hold one executor answer back (a call in flight to kill a worker under).
#[derive(Clone, Default)]
struct MockModel {
    calls: Arc<AtomicUsize>,
    hold_next_executor: Arc<AtomicBool>,
    held: Arc<AtomicUsize>,
    /// The next evaluation finds an error it cannot fix: the gate asks a person.
    needs_input_next: Arc<AtomicBool>,
    /// The next planner call is told to come back in [`RETRY_AFTER`] (a 429): when that
    /// was, and when the planner was asked again.
    rate_limit_next_planner: Arc<AtomicBool>,
    rate_limited_at: Arc<Mutex<Option<Instant>>>,
    planner_retried_at: Arc<Mutex<Option<Instant>>>,
}

/// The wait a rate-limited planner call is told to keep (`Retry-After`).
const RETRY_AFTER: Duration = Duration::from_secs(10);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Respond for MockModel {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let text = |pointer: &str| {
            body.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let role = text("/response_format/json_schema/name");
        let prompt = text("/messages/0/content");
        if role == "planner" {
            if self.rate_limit_next_planner.swap(false, Ordering::SeqCst) {
                *lock(&self.rate_limited_at) = Some(Instant::now());
                return ResponseTemplate::new(429)
                    .insert_header("retry-after", RETRY_AFTER.as_secs().to_string().as_str())
                    .set_body_json(
                        json!({"error": {"message": "rate limited", "type": "rate_limit"}}),
                    );
            }
            if lock(&self.rate_limited_at).is_some() {
                lock(&self.planner_retried_at).get_or_insert_with(Instant::now);
            }
        }
        let content = match role.as_str() {
            "planner" => json!({
                "goal": "a brief on heat pumps",
                "success_criteria": ["two sourced paragraphs"],
                "tasks": [
                    {"id": "T-001", "goal": "collect sources", "expected_output": "a list of sources",
                     "acceptance": ["at least two sources"]},
                    {"id": "T-002", "goal": "write the brief", "inputs": ["T-001"],
                     "expected_output": "the brief", "acceptance": ["cites the sources"],
                     "depends_on": ["T-001"]}
                ]
            }),
            "executor" => {
                let id = prompt
                    .split_once("## Work order ")
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .unwrap_or("T-001")
                    .to_string();
                json!({"task_id": id, "status": "ok", "output": format!("{id} done"),
                       "evidence": [format!("{id}.md")]})
            }
            "evaluator" if self.needs_input_next.swap(false, Ordering::SeqCst) => json!({
                "relevance": 9, "completeness": 9, "clarity": 9, "usability": 9,
                "on_plan": true, "findings": [{"code": "MISSING_DATA", "severity": "error",
                    "evidence": "the 2024 figures", "auto_fixable": false}]
            }),
            "evaluator" => json!({
                "relevance": 9, "completeness": 9, "clarity": 9, "usability": 9,
                "on_plan": true, "findings": []
            }),
            "finalizer" => {
                // The prompt says which candidate to deliver.
                let id = prompt
                    .split_once("Set `candidate_id` to \"")
                    .and_then(|(_, rest)| rest.split('"').next())
                    .unwrap_or("c1")
                    .to_string();
                json!({"candidate_id": id, "summary": "a brief on heat pumps"})
            }
            // mention_roles: the router sends a message about 漫画 to `creative`, any
            // other to `socrates`; a role answers what it heard and how many earlier turns
            // its messages hold (the session's history).
            "router" => {
                let message = prompt
                    .split("Message: ")
                    .nth(1)
                    .and_then(|rest| rest.lines().next())
                    .unwrap_or_default();
                let picked = if message.contains("漫画") {
                    "creative"
                } else {
                    "socrates"
                };
                json!({"role": picked, "reason": "by the message"})
            }
            "delegate" | "business" | "creative" | "talker" | "socrates" | "exp_master" => {
                let messages = body["messages"].as_array().cloned().unwrap_or_default();
                let current = messages
                    .iter()
                    .rev()
                    .find(|message| message["role"] == "user")
                    .and_then(|message| message["content"].as_str())
                    .unwrap_or_default();
                let earlier = messages
                    .iter()
                    .filter(|message| message["role"] == "assistant")
                    .count();
                json!({"text": format!("{role} heard: {current} ({earlier} earlier)")})
            }
            other => {
                return ResponseTemplate::new(400)
                    .set_body_json(json!({"error": {"message": format!("no role {other:?}")}}));
            }
        };
        let mut answer = ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 400, "completion_tokens": 60}
        }));
        if role == "executor" && self.hold_next_executor.swap(false, Ordering::SeqCst) {
            self.held.fetch_add(1, Ordering::SeqCst);
            answer = answer.set_delay(HOLD);
        }
        answer
    }
}

fn charter(project: &Path, model: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command
        .current_dir(project)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{model}/v1"))
        .env("OPENAI_API_KEY", "sk-restate-test")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

fn spec() -> PathBuf {
    repository().join("specs/seeds/closed_loop.charter")
}

/// A conversation's spec (field report 002): its roles are sent the session's turns.
fn conversation_spec() -> PathBuf {
    repository().join("specs/seeds/mention_roles.charter")
}

fn start_worker(project: &Path, model: &str, port: u16) -> Guard {
    let log = std::fs::File::create(project.join(format!("worker-{}.log", free_port())))
        .unwrap_or_else(|error| panic!("{error}"));
    let child = charter(project, model)
        .arg("worker")
        .arg(spec())
        .arg(conversation_spec())
        .args(MODELS)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start charter worker: {error}"));
    let guard = Guard(child);
    wait_for("charter worker to listen", 30, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    guard
}

/// `charter serve --restate INGRESS` on `port`, serving closed_loop.
fn start_front(project: &Path, ingress: &str, port: u16) -> Guard {
    let log = std::fs::File::create(project.join(format!("serve-{}.log", free_port())))
        .unwrap_or_else(|error| panic!("{error}"));
    let child = Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(project)
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .arg("serve")
        .arg(spec())
        .arg(conversation_spec())
        .args(["--restate", ingress, "--port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start charter serve --restate: {error}"));
    let guard = Guard(child);
    wait_for("charter serve --restate to listen", 30, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    guard
}

fn get_text(url: &str) -> String {
    blocking_client()
        .get(url)
        .send()
        .and_then(reqwest::blocking::Response::text)
        .unwrap_or_default()
}

fn get(url: &str) -> Value {
    serde_json::from_str(&get_text(url)).unwrap_or(Value::Null)
}

fn delete(url: &str) -> (u16, Value) {
    match blocking_client().delete(url).send() {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.json().unwrap_or(Value::Null))
        }
        Err(error) => (0, Value::String(error.to_string())),
    }
}

fn input(index: usize) -> Value {
    json!({"goal": format!("a brief on heat pumps, number {index}"), "constraints": ["cite sources"]})
}

/// A trace with what changes from run to run taken out: times and latencies.
fn normalized(events: &[Value]) -> Vec<Value> {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.retain(|key, _| !key.ends_with("_ms") && key != "latency");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    events
        .iter()
        .cloned()
        .map(|mut event| {
            strip(&mut event);
            event
        })
        .collect()
}

/// `charter run` on `input`: its answer (stdout), its `run_finished` event and its trace.
fn charter_run(project: &Path, model: &str, index: usize) -> (Value, Value, Vec<Value>) {
    let input_file = project.join(format!("input-{index}.json"));
    let events_file = project.join(format!("events-{index}.jsonl"));
    std::fs::write(&input_file, input(index).to_string()).unwrap_or_else(|e| panic!("{e}"));
    let output = charter(project, model)
        .arg("run")
        .arg(spec())
        .args(MODELS)
        .arg("--input")
        .arg(&input_file)
        .arg("--events")
        .arg(&events_file)
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(
        output.status.success(),
        "charter run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events: Vec<Value> = std::fs::read_to_string(&events_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let finished = events
        .iter()
        .rev()
        .find(|event| event["kind"] == "run_finished")
        .cloned()
        .unwrap_or(Value::Null);
    let answer = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (answer, finished, events)
}

fn finish_of(events: &[Value]) -> Value {
    events
        .iter()
        .rev()
        .find(|event| event["kind"] == "run_finished")
        .cloned()
        .unwrap_or(Value::Null)
}

/// The model calls a run's trace says it made (one `model_call` event each).
fn model_calls(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|event| event["kind"] == "model_call")
        .count()
}

impl Server {
    fn status(&self, id: &str) -> Value {
        self.ingress(&format!("/CharterRun/{id}/status"), &json!(null))
            .1
    }

    fn events(&self, id: &str) -> Vec<Value> {
        let (_, events) = self.ingress(&format!("/CharterRun/{id}/events"), &json!(0));
        events.as_array().cloned().unwrap_or_default()
    }

    /// Starts run `id` without waiting for it.
    fn send(&self, id: &str, body: &Value) {
        let (status, answer) = self.ingress(&format!("/CharterRun/{id}/run/send"), body);
        assert!(
            (200..300).contains(&status),
            "starting run {id}: {status} {answer}"
        );
    }

    /// Waits up to `seconds` for run `id`'s invocation to be suspended: no worker holds it.
    fn wait_suspended(&self, id: &str, seconds: u64) {
        let query = format!("http://127.0.0.1:{}/query", self.admin);
        let sql = format!(
            "SELECT status FROM sys_invocation WHERE target_service_key = '{id}' AND \
             target_handler_name = 'run'"
        );
        wait_for(&format!("run {id} to suspend"), seconds, || {
            let invocation = blocking_client()
                .post(&query)
                .header("accept", "application/json")
                .json(&json!({"query": sql}))
                .send()
                .and_then(|response| response.json::<Value>())
                .unwrap_or(Value::Null);
            invocation["rows"][0]["status"] == "suspended"
        });
    }

    /// Waits up to `seconds` for run `id`'s status to be `state`.
    fn wait_state(&self, id: &str, state: &str, seconds: u64) -> Value {
        let mut last = Value::Null;
        wait_for(
            &format!("run {id} to be {state} (last status: see below)"),
            seconds,
            || {
                last = self.status(id);
                last["state"] == state
            },
        );
        last
    }
}

#[test]
fn runs_on_restate_survive_a_worker_killed_mid_call() {
    let Some(binary) = server_binary() else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|error| panic!("{error}"));
    let mock = MockModel::default();
    let model = runtime.block_on(async {
        let server = MockServer::builder()
            .disable_request_recording()
            .start()
            .await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(mock.clone())
            .mount(&server)
            .await;
        server
    });
    let model_uri = model.uri();
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("restate");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap_or_else(|error| panic!("{error}"));
    let project = scratch.as_path();
    let mut server = Server::start(binary, project.to_path_buf());
    let worker_port = free_port();
    let worker_uri = format!("http://127.0.0.1:{worker_port}");
    let mut worker = start_worker(project, &model_uri, worker_port);
    server.register(&worker_uri);

    // (a) The same runs through `charter run` and through Restate end the same.
    let runs = 20;
    for index in 0..runs {
        let (local_answer, local_finish, local_trace) = charter_run(project, &model_uri, index);
        let (status, result) = server.ingress(
            &format!("/CharterRun/same-{index}/run"),
            &json!({"spec": "closed_loop", "input": input(index)}),
        );
        assert_eq!(status, 200, "run same-{index}: {result}");
        let (_, events) = server.ingress(&format!("/CharterRun/same-{index}/events"), &json!(0));
        let events = events.as_array().cloned().unwrap_or_default();
        let restate_finish = finish_of(&events);
        assert_eq!(
            result["outcome"], local_finish["outcome"],
            "run same-{index}"
        );
        assert_eq!(result["reason"], local_finish["reason"], "run same-{index}");
        assert_eq!(result["outcome"], "completed");
        assert!(local_answer.is_object(), "charter run printed no answer");
        assert_eq!(result["answer"], local_answer, "run same-{index}");
        assert_eq!(
            restate_finish["best"], local_finish["best"],
            "run same-{index}"
        );
        assert_eq!(
            normalized(&events),
            normalized(&local_trace),
            "run same-{index}: the trace through Restate differs from charter run's"
        );
        let (_, later) = server.ingress(&format!("/CharterRun/same-{index}/events"), &json!(7));
        assert_eq!(
            later.as_array().map(Vec::as_slice),
            events.get(7..),
            "events(7)"
        );
    }
    assert_eq!(mock.calls.load(Ordering::SeqCst), 2 * runs * CALLS_PER_RUN);

    // (b) A worker killed with a call in flight: a new one finishes the run, and only the
    // call that had no answer is made again.
    let before = mock.calls.load(Ordering::SeqCst);
    mock.hold_next_executor.store(true, Ordering::SeqCst);
    let ingress = format!("http://127.0.0.1:{}/CharterRun/killed/run", server.ingress);
    let started = std::thread::spawn(move || {
        post(
            &ingress,
            &json!({"spec": "closed_loop", "input": input(99)}),
        )
    });
    wait_for("the held executor call to be in flight", 60, || {
        mock.held.load(Ordering::SeqCst) == 1
    });
    worker.kill();
    worker = start_worker(project, &model_uri, worker_port);
    let (status, result) = started
        .join()
        .unwrap_or_else(|_| (0, Value::String("the request thread panicked".into())));
    assert_eq!(status, 200, "the killed run: {result}");
    assert_eq!(result["outcome"], "completed", "{result}");
    assert_eq!(
        mock.calls.load(Ordering::SeqCst) - before,
        CALLS_PER_RUN + 1,
        "the model was asked again for a call it had answered"
    );

    // (c) An ask waits across a worker restart and is answered through the ingress.
    let before = mock.calls.load(Ordering::SeqCst);
    mock.needs_input_next.store(true, Ordering::SeqCst);
    server.send("asks", &json!({"spec": "closed_loop", "input": input(98)}));
    let waiting = server.wait_state("asks", "waiting", 60);
    assert!(waiting["ask"]["question"].is_string(), "{waiting}");
    worker.kill();
    worker = start_worker(project, &model_uri, worker_port);
    server.wait_suspended("asks", 60);
    let (status, body) = server.ingress(
        "/CharterRun/asks/answer",
        &json!({"approved": true, "note": "use the 2024 figures"}),
    );
    assert!((200..300).contains(&status), "answering: {status} {body}");
    let finished = server.wait_state("asks", "finished", 120);
    assert_eq!(finished["result"]["outcome"], "completed", "{finished}");
    let events = server.events("asks");
    assert!(
        events
            .iter()
            .any(|event| event["kind"] == "human" && event["answer"]["approved"] == true),
        "the trace holds no answer: {events:?}"
    );
    assert_eq!(
        mock.calls.load(Ordering::SeqCst) - before,
        model_calls(&events),
        "a call was made twice around the ask"
    );

    // (i) A backoff is a durable sleep: the planner is told to come back in 10 s; the
    // run, with nothing else in flight, suspends (no worker holds it); its worker is
    // killed and a new one started: the planner is asked again when the server said, not
    // 10 s after the restart, and no call is made twice.
    let before = mock.calls.load(Ordering::SeqCst);
    mock.rate_limit_next_planner.store(true, Ordering::SeqCst);
    server.send(
        "backoff",
        &json!({"spec": "closed_loop", "input": input(96)}),
    );
    wait_for("the planner to be rate-limited", 60, || {
        lock(&mock.rate_limited_at).is_some()
    });
    let limited_at = lock(&mock.rate_limited_at).unwrap_or_else(Instant::now);
    server.wait_suspended("backoff", 60);
    std::thread::sleep((limited_at + RETRY_AFTER / 2).saturating_duration_since(Instant::now()));
    worker.kill();
    let restarted = Instant::now();
    worker = start_worker(project, &model_uri, worker_port);
    let finished = server.wait_state("backoff", "finished", 120);
    assert_eq!(finished["result"]["outcome"], "completed", "{finished}");
    let retried_at =
        lock(&mock.planner_retried_at).unwrap_or_else(|| panic!("the planner was not asked again"));
    let waited = retried_at.duration_since(limited_at);
    assert!(
        waited + Duration::from_millis(50) >= RETRY_AFTER,
        "the planner was asked again after {waited:?}, sooner than its server said"
    );
    assert!(
        retried_at < restarted + RETRY_AFTER - Duration::from_secs(1),
        "the wait started again with the new worker: the planner was asked again {:?} after \
         the restart",
        retried_at.duration_since(restarted)
    );
    let events = server.events("backoff");
    assert!(
        events.iter().any(|event| event["kind"] == "retry"
            && event["delay_ms"] == u64::try_from(RETRY_AFTER.as_millis()).unwrap_or(0)),
        "the trace holds no retry waiting what the server said: {events:?}"
    );
    assert_eq!(
        mock.calls.load(Ordering::SeqCst) - before,
        model_calls(&events),
        "a call was made twice around the wait"
    );

    // (e) The server killed mid-run and started again on its base directory: the run
    // completes, and only the call in flight is made again.
    let before = mock.calls.load(Ordering::SeqCst);
    let held_before = mock.held.load(Ordering::SeqCst);
    mock.hold_next_executor.store(true, Ordering::SeqCst);
    server.send(
        "server-killed",
        &json!({"spec": "closed_loop", "input": input(97)}),
    );
    wait_for("the held executor call to be in flight", 60, || {
        mock.held.load(Ordering::SeqCst) == held_before + 1
    });
    server.kill();
    server.restart();
    let finished = server.wait_state("server-killed", "finished", 120);
    assert_eq!(finished["result"]["outcome"], "completed", "{finished}");
    let events = server.events("server-killed");
    assert_eq!(
        mock.calls.load(Ordering::SeqCst) - before,
        model_calls(&events) + 1,
        "the model was asked again for a call it had answered"
    );

    // (d) An input that breaks the request contract is a terminal error, told in status.
    let (status, body) = server.ingress(
        "/CharterRun/bad/run",
        &json!({"spec": "closed_loop", "input": {"goal": 7}}),
    );
    assert!(status >= 400, "a bad input was accepted: {status} {body}");
    let (status, body) = server.ingress(
        "/CharterRun/no-such-spec/run",
        &json!({"spec": "nope", "input": input(0)}),
    );
    assert!(status >= 400, "an unknown spec was run: {status} {body}");
    let unknown = server.status("no-such-spec");
    assert!(
        unknown["message"]
            .as_str()
            .is_some_and(|message| message.contains("does not run spec `nope`")),
        "{unknown}"
    );
    let (_, status) = server.ingress("/CharterRun/bad/status", &json!(null));
    assert_eq!(status["state"], "error", "{status}");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|message| message.contains("request contract")),
        "{status}"
    );

    // (f) 200 runs at once: each completes with exactly its calls.
    let before = mock.calls.load(Ordering::SeqCst);
    let many = 200;
    let started = Instant::now();
    for index in 0..many {
        server.send(
            &format!("many-{index}"),
            &json!({"spec": "closed_loop", "input": input(1000 + index)}),
        );
    }
    for index in 0..many {
        let finished = server.wait_state(&format!("many-{index}"), "finished", 300);
        assert_eq!(
            finished["result"]["outcome"], "completed",
            "many-{index}: {finished}"
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(
        mock.calls.load(Ordering::SeqCst) - before,
        many * CALLS_PER_RUN
    );
    let peak = std::fs::read_to_string(format!("/proc/{}/status", worker.0.id()))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .unwrap_or_default();
    eprintln!(
        "{many} runs at once through Restate: {seconds:.1} s, {:.1} runs/s; one worker's peak memory {peak}",
        many as f64 / seconds
    );

    // (h) `charter serve --restate`: the API and page over runs that live in Restate — a
    // run started through it asks, is answered through it, and ends as in Restate; a
    // server killed while it follows a run follows it again when started again.
    let serve_port = free_port();
    let ingress = format!("http://127.0.0.1:{}", server.ingress);
    let mut front = start_front(project, &ingress, serve_port);
    let base = format!("http://127.0.0.1:{serve_port}");
    let before = mock.calls.load(Ordering::SeqCst);
    mock.needs_input_next.store(true, Ordering::SeqCst);
    let (status, started) = post(
        &format!("{base}/runs"),
        &json!({"spec": "closed_loop", "input": input(95)}),
    );
    assert_eq!(status, 201, "serve --restate refused a run: {started}");
    let id = started["id"].as_str().unwrap_or_default().to_string();
    let mut shown = Value::Null;
    wait_for("the served run to wait on its ask", 60, || {
        shown = get(&format!("{base}/runs/{id}"));
        shown["status"] == "waiting"
    });
    assert!(shown["question"].is_string(), "{shown}");
    assert_eq!(
        server.status(&id)["state"],
        "waiting",
        "Restate does not hold the run"
    );
    let (status, cancelled) = delete(&format!("{base}/runs/{id}"));
    assert_eq!(status, 409, "{cancelled}");
    assert!(
        cancelled["error"]
            .as_str()
            .is_some_and(|message| message.contains("restate invocations cancel")),
        "{cancelled}"
    );
    let (status, answered) = post(
        &format!("{base}/runs/{id}/answers"),
        &json!({"approved": true, "note": "use the 2024 figures"}),
    );
    assert_eq!(status, 200, "answering through serve: {answered}");
    wait_for("the served run to finish", 120, || {
        shown = get(&format!("{base}/runs/{id}"));
        shown["status"] == "finished"
    });
    assert_eq!(shown["outcome"], "completed", "{shown}");
    let in_restate = server.status(&id);
    assert_eq!(
        shown["answer"], in_restate["result"]["answer"],
        "{in_restate}"
    );
    let events = server.events(&id);
    let trace = get_text(&format!("{base}/runs/{id}/trace.jsonl"));
    let served_trace: Vec<Value> = trace
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    assert_eq!(served_trace, events, "the served trace is not Restate's");
    // Its stream is the trace events with each role's output where a local run's stream
    // shows it: after the call's `model_result`.
    let stream: Vec<Value> = blocking_client()
        .get(format!("{base}/runs/{id}/events"))
        .send()
        .and_then(|response| response.text())
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect();
    let is_row = |event: &&Value| event["kind"] == "role_output";
    // Besides the trace: the outputs, the ask shown and the answer at the end.
    let traced: Vec<&Value> = stream
        .iter()
        .filter(|event| {
            !is_row(event)
                && !["ask", "answer"].contains(&event["kind"].as_str().unwrap_or_default())
        })
        .collect();
    assert!(
        traced == events.iter().collect::<Vec<_>>(),
        "the stream's trace events are not Restate's: {:?}",
        stream
            .iter()
            .map(|event| &event["kind"])
            .collect::<Vec<_>>()
    );
    let outputs: Vec<(usize, &Value)> = stream
        .iter()
        .enumerate()
        .filter(|(_, event)| is_row(event))
        .collect();
    assert_eq!(outputs.len(), model_calls(&events), "one output per call");
    for (index, output) in &outputs {
        let answered = stream[..*index].iter().rposition(|event| {
            event["kind"] == "model_result"
                && event["step"] == output["step"]
                && event["attempt"] == output["attempt"]
        });
        assert!(
            answered.is_some(),
            "a role_output before its model_result: {output}"
        );
    }
    assert!(
        outputs
            .iter()
            .any(|(_, output)| output["step"] == "plan" && output["output"]["tasks"].is_array()),
        "no planner output: {outputs:?}"
    );
    assert_eq!(
        shown["totals"]["calls"],
        json!(model_calls(&events)),
        "{shown}"
    );
    assert_eq!(
        mock.calls.load(Ordering::SeqCst) - before,
        model_calls(&events)
    );
    let listed = get(&format!("{base}/runs"));
    assert!(
        listed["runs"]
            .as_array()
            .is_some_and(|runs| runs.iter().any(|run| run["id"] == id.as_str())),
        "GET /runs does not list {id}: {listed}"
    );
    // Killed while following a run whose call is in flight, started again: it follows
    // the run to its end.
    let held_before = mock.held.load(Ordering::SeqCst);
    mock.hold_next_executor.store(true, Ordering::SeqCst);
    let (status, started) = post(
        &format!("{base}/runs"),
        &json!({"spec": "closed_loop", "input": input(94)}),
    );
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_str().unwrap_or_default().to_string();
    wait_for("the held executor call to be in flight", 60, || {
        mock.held.load(Ordering::SeqCst) == held_before + 1
    });
    front.kill();
    front = start_front(project, &ingress, serve_port);
    wait_for("the run followed again to finish", 120, || {
        shown = get(&format!("{base}/runs/{id}"));
        shown["status"] == "finished"
    });
    assert_eq!(shown["outcome"], "completed", "{shown}");
    // A conversation: two turns of one session, each a run in Restate. The second is
    // sent the first as history and answered by the role the first left sticky, from
    // the session serve kept.
    let before = mock.calls.load(Ordering::SeqCst);
    let turn = |text: &str| {
        post(
            &format!("{base}/sessions/chat-1/turns"),
            &json!({"spec": "mention_roles", "input": text}),
        )
    };
    let (status, first) = turn("帮我想两个漫画创意");
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["answered_by"], "creative", "{first}");
    assert_eq!(
        first["answer"]["text"], "creative heard: 帮我想两个漫画创意 (0 earlier)",
        "{first}"
    );
    assert_eq!(first["saved"], true, "{first}");
    let (status, second) = turn("再来一个");
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        second["answer"]["text"], "creative heard: 再来一个 (1 earlier)",
        "the second turn did not start from the first's session: {second}"
    );
    let first_run = first["run"].as_str().unwrap_or_default();
    assert_eq!(
        server.status(first_run)["state"],
        "finished",
        "the turn did not run in Restate"
    );
    let turns = get(&format!("{base}/sessions/chat-1"));
    assert_eq!(turns["turns"].as_array().map(Vec::len), Some(2), "{turns}");
    let calls = model_calls(&server.events(first_run))
        + model_calls(&server.events(second["run"].as_str().unwrap_or_default()));
    assert_eq!(mock.calls.load(Ordering::SeqCst) - before, calls);
    // A bad input is refused before anything reaches Restate.
    let (status, refused) = post(
        &format!("{base}/runs"),
        &json!({"spec": "closed_loop", "input": {"goal": 7}}),
    );
    assert_eq!(status, 422, "{refused}");
    drop(front);
    server.kill();

    // (g) A three-node cluster with a replicated log, one node killed mid-run: the run
    // completes, and no call is made twice but the one in flight.
    let mut cluster = Cluster::start(&server.binary, &project.join("cluster"));
    let front = cluster.server(0);
    let admin = format!("http://127.0.0.1:{}/deployments", front.admin);
    wait_for("the cluster to register the worker", 90, || {
        let (status, _) = post(&admin, &json!({"uri": worker_uri, "force": true}));
        (200..300).contains(&status)
    });
    let before = mock.calls.load(Ordering::SeqCst);
    let held_before = mock.held.load(Ordering::SeqCst);
    mock.hold_next_executor.store(true, Ordering::SeqCst);
    front.send(
        "node-killed",
        &json!({"spec": "closed_loop", "input": input(96)}),
    );
    wait_for("the held executor call to be in flight", 60, || {
        mock.held.load(Ordering::SeqCst) == held_before + 1
    });
    if let Some(mut node) = cluster.nodes[2].take() {
        node.kill();
    }
    let finished = front.wait_state("node-killed", "finished", 120);
    assert_eq!(finished["result"]["outcome"], "completed", "{finished}");
    let made = mock.calls.load(Ordering::SeqCst) - before;
    let events = front.events("node-killed");
    assert!(
        made == model_calls(&events) || made == model_calls(&events) + 1,
        "{made} calls for a run that made {}",
        model_calls(&events)
    );
    drop(cluster);
    drop(worker);
}
