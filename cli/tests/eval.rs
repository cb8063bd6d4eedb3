//! `charter eval` against a seeded stochastic reactive mock (wiremock on loopback): the writer stays on the requested topic with probability p, the reviewer judges what the draft says, the finalizer delivers the candidate its prompt names. The pass rate and its Wilson interval equal a hand computation, the same seed gives the same report byte for byte, `--min-pass-rate` decides the exit status, `--max-cost` stops new runs at the cap, `--save-failures` scenarios replay to their failure, and bad lines are named.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

use serde_json::{Value, json};
use support::{copy_file, openai_answer, repository};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The review_loop example: write -> review (judged by gate `quality`) -> deliver; a
/// draft the gate fails is rewritten with the reviewer's notes.
fn project(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-cli-eval-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy_file(
        &repository().join("specs/examples/review_loop.charter"),
        &dir.join("specs/review_loop.charter"),
    );
    dir
}

/// A number in [0, 1) drawn from `seed`, the topic and which time the topic is asked
/// for (splitmix64 over an FNV-1a hash): the mock's and the hand computation's coin.
fn draw(seed: u64, topic: &str, nth: u64) -> f64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in topic.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = seed ^ hash ^ nth.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The three roles of review_loop, each answering by what its request holds.
struct Stochastic {
    seed: u64,
    p: f64,
    /// First drafts asked for, by topic.
    asked: Mutex<HashMap<String, u64>>,
}

impl Stochastic {
    fn new(seed: u64, p: f64) -> Self {
        Stochastic {
            seed,
            p,
            asked: Mutex::new(HashMap::new()),
        }
    }

    /// A first draft stays on topic with probability p (the n-th first draft of a topic
    /// draws the n-th coin of that topic); a rewrite that was told it is off topic
    /// always is.
    fn write(&self, prompt: &str) -> Value {
        let topic = between(prompt, "post about ", ".").unwrap_or_default();
        let on_topic = if prompt.contains("off topic") {
            true
        } else {
            let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
            let nth = asked.entry(topic.clone()).or_insert(0);
            let coin = draw(self.seed, &topic, *nth);
            *nth += 1;
            coin < self.p
        };
        if on_topic {
            json!({"title": format!("On {topic}"), "body": format!("Everything about {topic}.")})
        } else {
            json!({"title": "Gardening", "body": "Tomatoes like sun."})
        }
    }
}

/// The text between `start` and the next `end`.
fn between(text: &str, start: &str, end: &str) -> Option<String> {
    let from = text.find(start)? + start.len();
    let to = text[from..].find(end)? + from;
    Some(text[from..to].to_string())
}

impl Respond for Stochastic {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let prompt: String = body["messages"]
            .as_array()
            .map(|messages| {
                messages
                    .iter()
                    .filter_map(|message| message["content"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        match body["response_format"]["json_schema"]["name"].as_str() {
            Some("writer") => openai_answer(self.write(&prompt)),
            Some("reviewer") => {
                // On topic when the post names its topic ("On topic-3").
                let on_topic = prompt.contains("On topic-");
                openai_answer(if on_topic {
                    json!({"relevance": 9, "verdict": "PASS", "notes": "on topic"})
                } else {
                    json!({"relevance": 2, "verdict": "FAIL", "notes": "off topic: write about the topic asked for"})
                })
            }
            Some("finalizer") => {
                let id = between(&prompt, "Deliver candidate ", " ").unwrap_or_default();
                openai_answer(json!({"candidate_id": id, "summary": "a post"}))
            }
            _ => ResponseTemplate::new(400),
        }
    }
}

async fn server(seed: u64, p: f64) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Stochastic::new(seed, p))
        .mount(&server)
        .await;
    server
}

fn charter(project: &Path, server: &MockServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(project)
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-cli-eval-KEY-1618")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{error}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn all(output: &Output) -> String {
    format!("{}{}", text(&output.stdout), text(&output.stderr))
}

/// An inputs file of `topics` topics, each expecting its first draft to pass review.
fn inputs(project: &Path, topics: usize) {
    let lines: Vec<String> = (1..=topics)
        .map(|topic| {
            json!({"input": {"goal": format!("topic-{topic}")},
                   "expect": {"outcome": "completed", "calls": {"write": 1}}})
            .to_string()
        })
        .collect();
    std::fs::write(project.join("inputs.jsonl"), lines.join("\n") + "\n")
        .unwrap_or_else(|error| panic!("{error}"));
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The 95% Wilson score interval, written out from its definition.
fn wilson(passed: f64, runs: f64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let p = passed / runs;
    let centre = p + z * z / (2.0 * runs);
    let spread = z * (p * (1.0 - p) / runs + z * z / (4.0 * runs * runs)).sqrt();
    let denominator = 1.0 + z * z / runs;
    (
        (centre - spread) / denominator,
        (centre + spread) / denominator,
    )
}

const SEED: u64 = 20_261_202;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pass_rate_and_interval_are_the_hand_computed_ones_and_the_same_seed_gives_the_same_report()
 {
    let dir = project("rate");
    inputs(&dir, 5);
    let eval = |server: &MockServer, report: &str, min: &str| {
        charter(
            &dir,
            server,
            &[
                "eval",
                "specs/review_loop.charter",
                "--inputs",
                "inputs.jsonl",
                "--repeat",
                "10",
                "--concurrency",
                "8",
                "--no-timing",
                "--json",
                report,
                "--min-pass-rate",
                min,
            ],
        )
    };
    let first_server = server(SEED, 0.7).await;
    let first = eval(&first_server, "first.json", "0.9");

    // By hand: a run passes when its first draft is on topic.
    let per_topic: Vec<u64> = (1..=5)
        .map(|topic| {
            (0..10)
                .filter(|nth| draw(SEED, &format!("topic-{topic}"), *nth) < 0.7)
                .count() as u64
        })
        .collect();
    let passed: u64 = per_topic.iter().sum();
    assert!(
        passed < 45,
        "the seed must give a rate below 0.9 for this test: {passed}"
    );
    assert_eq!(first.status.code(), Some(1), "{}", all(&first));
    assert!(
        all(&first).contains("is below --min-pass-rate 90.0%"),
        "{}",
        all(&first)
    );

    let report = read_json(&dir.join("first.json"));
    let overall = &report["sets"][0]["overall"];
    assert_eq!(overall["runs"], json!(50), "{report:#}");
    assert_eq!(overall["passed"], json!(passed), "{report:#}");
    assert_eq!(overall["pass_rate"].as_f64(), Some(passed as f64 / 50.0));
    let (low, high) = wilson(passed as f64, 50.0);
    let interval = &overall["interval"];
    assert!(
        (interval[0].as_f64().unwrap_or(-1.0) - low).abs() < 1e-12,
        "{interval} vs {low}"
    );
    assert!(
        (interval[1].as_f64().unwrap_or(-1.0) - high).abs() < 1e-12,
        "{interval} vs {high}"
    );
    for (index, expected) in per_topic.iter().enumerate() {
        let input = &report["sets"][0]["inputs"][index];
        assert_eq!(input["line"], json!(index + 1));
        assert_eq!(input["passed"], json!(expected), "{input:#}");
    }
    // Each failed run rewrote its draft once the reviewer said it was off topic.
    assert_eq!(
        overall["outcomes"],
        json!({"completed{gate_passed}": 50}),
        "{report:#}"
    );
    assert_eq!(overall["calls"], json!(150 + 2 * (50 - passed)));

    // The same seed, a fresh mock: the same report, byte for byte; and a lower bar passes.
    let second_server = server(SEED, 0.7).await;
    let second = eval(&second_server, "second.json", "0.5");
    assert_eq!(second.status.code(), Some(0), "{}", all(&second));
    assert_eq!(
        std::fs::read(dir.join("first.json")).ok(),
        std::fs::read(dir.join("second.json")).ok()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_cap_stops_new_runs() {
    let dir = project("cost");
    inputs(&dir, 1);
    let server = server(SEED, 1.0).await;
    // Each run is 3 calls of 20 + 10 tokens at 0.15 / 0.60 per 1M: $0.000027.
    let output = charter(
        &dir,
        &server,
        &[
            "eval",
            "specs/review_loop.charter",
            "--inputs",
            "inputs.jsonl",
            "--repeat",
            "20",
            "--concurrency",
            "1",
            "--max-cost",
            "0.0001",
            "--json",
            "report.json",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", all(&output));
    let report = read_json(&dir.join("report.json"));
    assert_eq!(report["ran"], json!(4), "{report:#}");
    assert_eq!(report["planned"], json!(20));
    let stopped = report["stopped"].as_str().unwrap_or_default();
    assert!(
        stopped.contains("cost cap") && stopped.contains("16 runs not started"),
        "{stopped}"
    );
    assert_eq!(server.received_requests().await.map(|r| r.len()), Some(12));
    assert!(
        all(&output).contains("stopped early: the cost cap"),
        "{}",
        all(&output)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_failures_replay_to_their_failure() {
    let dir = project("save");
    inputs(&dir, 2);
    let server = server(SEED, 0.5).await;
    let output = charter(
        &dir,
        &server,
        &[
            "eval",
            "specs/review_loop.charter",
            "--inputs",
            "inputs.jsonl",
            "--repeat",
            "4",
            "--concurrency",
            "4",
            "--json",
            "report.json",
            "--save-failures",
            "golden/review_loop",
        ],
    );
    let report = read_json(&dir.join("report.json"));
    let failed = 8 - report["sets"][0]["overall"]["passed"].as_u64().unwrap_or(8);
    assert!(failed > 0, "the seed must fail some runs: {report:#}");
    assert_eq!(output.status.code(), Some(1), "{}", all(&output));
    let saved: Vec<PathBuf> = std::fs::read_dir(dir.join("golden/review_loop"))
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(saved.len() as u64, failed, "{}", all(&output));
    for scenario in &saved {
        let name = scenario
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        assert!(
            name.as_deref().is_some_and(|n| n.starts_with("line")),
            "{name:?}"
        );
        for file in ["scenario.yaml", "cassette.yaml", "trace.snap"] {
            assert!(scenario.join(file).is_file(), "{}", scenario.display());
        }
    }
    // Offline, each replays to the failure the eval saw, and to nothing else.
    let verified = Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(&dir)
        .args(["--color", "never", "verify"])
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    let shown = all(&verified);
    assert_eq!(verified.status.code(), Some(1), "{shown}");
    assert_eq!(
        shown
            .matches("expected 1 model call in step `write`, got 2")
            .count() as u64,
        failed,
        "{shown}"
    );
    for word in ["CHANGED", "STALE", "ERROR", "NEW"] {
        assert!(!shown.contains(word), "{word} in {shown}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lines_are_named_and_a_contract_breaking_input_is_left_out() {
    let dir = project("lines");
    let server = server(SEED, 1.0).await;
    let eval = |lines: &str| {
        std::fs::write(dir.join("inputs.jsonl"), lines).unwrap_or_else(|e| panic!("{e}"));
        charter(
            &dir,
            &server,
            &[
                "eval",
                "specs/review_loop.charter",
                "--inputs",
                "inputs.jsonl",
            ],
        )
    };
    let output = eval("{\"input\": {\"goal\": \"topic-1\"}}\n[\"goal\"]\n");
    assert_eq!(output.status.code(), Some(2), "{}", all(&output));
    assert!(
        all(&output).contains("inputs.jsonl:2: is a list, not an object"),
        "{}",
        all(&output)
    );

    let output =
        eval("{\"input\": {\"goal\": \"topic-1\"}, \"expect\": {\"stesp\": [\"write\"]}}\n");
    assert_eq!(output.status.code(), Some(2), "{}", all(&output));
    assert!(
        all(&output).contains("inputs.jsonl:1: unknown key `expect.stesp`; did you mean `steps`?"),
        "{}",
        all(&output)
    );

    let output =
        eval("{\"input\": {\"goal\": \"topic-1\"}, \"expect\": {\"steps\": [\"wirte\"]}}\n");
    assert_eq!(output.status.code(), Some(2), "{}", all(&output));
    assert!(
        all(&output).contains("inputs.jsonl:1:") && all(&output).contains("did you mean `write`?"),
        "{}",
        all(&output)
    );
    assert_eq!(server.received_requests().await.map(|r| r.len()), Some(0));

    let output = eval("{\"input\": {\"goal\": \"topic-1\"}}\n{\"input\": {\"topic\": 3}}\n");
    assert_eq!(output.status.code(), Some(1), "{}", all(&output));
    assert!(
        all(&output).contains("inputs.jsonl:2: the input breaks the request contract"),
        "{}",
        all(&output)
    );
    assert!(all(&output).contains("goal"), "{}", all(&output));
    assert_eq!(server.received_requests().await.map(|r| r.len()), Some(3));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A spec whose run asks a person before it finishes: approved, it answers with the
/// draft; refused, it is blocked.
const ASKING: &str = r#"spec asking version "1.0.0"

models { default = "openai:gpt-4o-mini" }

contract Request { goal: string }
contract Draft   { title: string  body: string }

role writer {
  model: default
  prompt: """Write a short post about {{ request.goal }}."""
  input: Request
  output: Draft
}

flow {
  write   = writer(request) -> confirm
  confirm = ask "Publish it?"
              when confirm.approved -> done
              else                  -> blocked "not approved"
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_s_answers_answer_the_run_s_questions_in_order() {
    let dir = project("answers");
    std::fs::write(dir.join("specs/asking.charter"), ASKING).unwrap_or_else(|e| panic!("{e}"));
    let server = server(SEED, 1.0).await;
    let lines = [
        json!({"name": "approved", "input": {"goal": "topic-1"}, "answers": [{"approved": true}]}),
        json!({"name": "refused", "input": {"goal": "topic-2"}, "answers": [{"approved": false}],
               "expect": {"outcome": "blocked"}}),
        json!({"name": "unanswered", "input": {"goal": "topic-3"}}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(dir.join("inputs.jsonl"), text.join("\n")).unwrap_or_else(|e| panic!("{e}"));
    let output = charter(
        &dir,
        &server,
        &[
            "eval",
            "specs/asking.charter",
            "--inputs",
            "inputs.jsonl",
            "--json",
            "report.json",
        ],
    );
    let report = read_json(&dir.join("report.json"));
    let inputs = &report["sets"][0]["inputs"];
    assert_eq!(
        inputs[0]["outcomes"],
        json!({"completed{done}": 1}),
        "{report:#}"
    );
    assert_eq!(
        inputs[1]["outcomes"],
        json!({"blocked{human_rejected}": 1}),
        "{report:#}"
    );
    assert_eq!(inputs[1]["passed"], json!(1), "{report:#}");
    assert_eq!(inputs[2]["passed"], json!(0), "{report:#}");
    // The question nobody answered blocks the run, which says why.
    let why: Vec<&str> = inputs[2]["failures"]
        .as_array()
        .map(|failures| {
            failures
                .iter()
                .filter_map(|failure| failure["unmet"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        why.iter()
            .any(|why| why.contains("the run ended blocked{human_rejected}")
                && why.contains("line 3 gives no answer for this question (\"Publish it?\")")),
        "{why:?}"
    );
    assert_eq!(output.status.code(), Some(1), "{}", all(&output));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Answers by the model a request names: `small` writes off topic every time.
struct ByModel;

impl Respond for ByModel {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let small = body["model"].as_str() == Some("small");
        let rewrite = request.body.windows(9).any(|window| window == b"off topic");
        let mock = Stochastic::new(SEED, if small && !rewrite { 0.0 } else { 1.0 });
        mock.respond(request)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_sets_run_side_by_side() {
    let dir = project("models");
    inputs(&dir, 2);
    std::fs::write(
        dir.join("models.yaml"),
        "large: { default: \"openai:large\" }\nsmall: { default: \"openai:small\" }\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ByModel)
        .mount(&server)
        .await;
    let output = charter(
        &dir,
        &server,
        &[
            "eval",
            "specs/review_loop.charter",
            "--inputs",
            "inputs.jsonl",
            "--repeat",
            "3",
            "--models",
            "models.yaml",
            "--json",
            "report.json",
            "--min-pass-rate",
            "0.5",
        ],
    );
    let report = read_json(&dir.join("report.json"));
    assert_eq!(report["sets"][0]["name"], json!("large"));
    assert_eq!(
        report["sets"][0]["overall"]["passed"],
        json!(6),
        "{report:#}"
    );
    assert_eq!(report["sets"][1]["name"], json!("small"));
    assert_eq!(
        report["sets"][1]["overall"]["passed"],
        json!(0),
        "{report:#}"
    );
    let shown = all(&output);
    assert_eq!(output.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("small: pass rate 0.0% is below --min-pass-rate 50.0%"),
        "{shown}"
    );
    let header = shown
        .lines()
        .find(|line| line.starts_with("input "))
        .unwrap_or_default();
    assert!(
        header.contains("large") && header.contains("small"),
        "{shown}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_prints_the_partial_report() {
    let dir = project("interrupt");
    inputs(&dir, 1);
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(SlowWriter)
        .mount(&server)
        .await;
    let child = Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(&dir)
        .args([
            "eval",
            "specs/review_loop.charter",
            "--inputs",
            "inputs.jsonl",
            "--repeat",
            "50",
            "--concurrency",
            "2",
        ])
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-cli-eval-KEY-1618")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{error}"));
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let output = child
        .wait_with_output()
        .unwrap_or_else(|error| panic!("{error}"));
    let shown = all(&output);
    assert_eq!(output.status.code(), Some(3), "{shown}");
    assert!(shown.contains("stopped early: interrupted"), "{shown}");
    let ran: u64 = between(&shown, "eval of review_loop: ", " of 50")
        .and_then(|ran| ran.parse().ok())
        .unwrap_or(50);
    assert!(ran < 50, "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The stochastic mock at p = 1, each writer answer after 200 ms.
struct SlowWriter;

impl Respond for SlowWriter {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        Stochastic::new(SEED, 1.0)
            .respond(request)
            .set_delay(std::time::Duration::from_millis(200))
    }
}
