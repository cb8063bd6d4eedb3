//! Tests of recording: every kind of call outcome becomes a cassette entry that replays the same, secrets are scrubbed, files are written whole.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::engine::provider::{ToolCall, Usage};
use crate::world::replay::ReplayProvider;

const SECRET: &str = "sk-record-SECRET-77";

/// A scripted answer: after how long (never, for `None`) and what.
type Step = (Option<Duration>, Result<ModelResponse, ProviderError>);

/// Answers each call with the next scripted result after `delay` (a call whose delay is
/// `None` never answers).
struct Scripted {
    script: Mutex<VecDeque<Step>>,
}

impl Provider for Scripted {
    fn complete(
        &self,
        _request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        let next = lock(&self.script).pop_front();
        Box::pin(async move {
            match next {
                Some((Some(delay), result)) => {
                    tokio::time::sleep(delay).await;
                    result
                }
                Some((None, _)) => std::future::pending().await,
                None => Err(ProviderError::Permanent {
                    status: None,
                    message: "script exhausted".into(),
                }),
            }
        })
    }
}

fn response(output: ModelOutput, latency_ms: u64) -> ModelResponse {
    ModelResponse {
        output,
        usage: Usage {
            input_tokens: 11,
            output_tokens: 7,
        },
        tool_calls: Vec::new(),
        latency: Duration::from_millis(latency_ms),
    }
}

fn request(attempt: u64) -> ModelRequest {
    ModelRequest {
        key: CallKey::new("execute").item("T-1").attempt(attempt),
        role: "executor".into(),
        model: "openai:m".into(),
        prompt: "p".into(),
        chat: None,
        output_schema: std::sync::Arc::new(Value::Null),
        tools: vec!["search".into()],
        max_tool_calls: None,
        previous_error: None,
        settings: Default::default(),
        log: Default::default(),
    }
}

/// The results of calls 1..=7 of the script below, as a replay must give them back.
fn script() -> Vec<Step> {
    let mut with_tools = response(
        ModelOutput::Json(json!({"text": format!("done with {SECRET}")})),
        1200,
    );
    with_tools.tool_calls = vec![ToolCall {
        tool: "search".into(),
        args: json!({"text": SECRET}),
        result: json!({"urls": [format!("https://x.example/?key={SECRET}")]}),
        latency: None,
    }];
    vec![
        (Some(Duration::from_millis(1200)), Ok(with_tools)),
        (
            Some(Duration::from_millis(300)),
            Ok(response(ModelOutput::Text("not json {".into()), 300)),
        ),
        (
            Some(Duration::from_millis(40)),
            Err(ProviderError::Throttled {
                status: 429,
                retry_after: Duration::from_secs(2),
                message: "slow down".into(),
            }),
        ),
        (
            Some(Duration::from_millis(40)),
            Err(ProviderError::Transient {
                status: Some(500),
                message: "boom".into(),
            }),
        ),
        (
            Some(Duration::from_millis(5)),
            Err(ProviderError::Transient {
                status: None,
                message: format!("connection refused (key {SECRET})"),
            }),
        ),
        (
            Some(Duration::from_secs(3)),
            Err(ProviderError::TimedOut {
                after: Duration::from_secs(3),
            }),
        ),
        // Never answers: the caller's 15-minute timeout drops it.
        (None, Ok(response(ModelOutput::Text(String::new()), 0))),
    ]
}

async fn record_script() -> (Recording, Vec<Result<ModelResponse, ProviderError>>) {
    let recording = Recording::new([SECRET.to_string(), String::new()]);
    let provider = recording.provider(Scripted {
        script: Mutex::new(script().into()),
    });
    let mut results = Vec::new();
    for attempt in 1..=7 {
        let call = provider.complete(request(attempt));
        match tokio::time::timeout(Duration::from_secs(15 * 60), call).await {
            Ok(result) => results.push(result),
            Err(_) => results.push(Err(ProviderError::TimedOut {
                after: Duration::from_secs(15 * 60),
            })),
        }
    }
    (recording, results)
}

#[tokio::test(start_paused = true)]
async fn the_run_gets_the_answer_as_scrubbed() {
    // A model that quotes the key: the answer the scheduler gets (and so the delivery and
    // every answer file built from it) holds `<redacted>`, as the recording does.
    let (_, results) = record_script().await;
    let first = results.first().and_then(|result| result.as_ref().ok());
    assert_eq!(
        first.map(|response| &response.output),
        Some(&ModelOutput::Json(json!({"text": "done with <redacted>"})))
    );
    for result in &results {
        assert!(!format!("{result:?}").contains(SECRET), "{result:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn every_outcome_is_recorded_by_key_and_scrubbed() {
    let (recording, _) = record_script().await;
    let cassette = recording.cassette(Recorded {
        spec_hash: "sha256:s".into(),
        ..Recorded::default()
    });
    let text = cassette.to_yaml().unwrap_or_else(|error| panic!("{error}"));
    assert!(!text.contains(SECRET), "{text}");
    let calls = &cassette.calls;
    assert_eq!(calls.len(), 7);
    assert_eq!(
        calls[0].response,
        Some(json!({"text": "done with <redacted>"}))
    );
    assert_eq!(calls[0].latency, Some(Duration::from_millis(1200)));
    assert_eq!(
        calls[0].usage,
        Some(RecordedUsage {
            input_tokens: 11,
            output_tokens: 7
        })
    );
    assert_eq!(calls[0].tool_calls[0].args, json!({"text": "<redacted>"}));
    assert_eq!(calls[1].raw.as_deref(), Some("not json {"));
    assert_eq!(
        calls[2].error,
        Some(RecordedError {
            status: Some(429),
            message: Some("slow down".into()),
            retry_after: Some(Duration::from_secs(2)),
        })
    );
    assert_eq!(
        calls[3].error.as_ref().map(|error| error.status),
        Some(Some(500))
    );
    assert_eq!(
        calls[4].error,
        Some(RecordedError {
            status: Some(NO_ANSWER_STATUS),
            message: Some("connection refused (key <redacted>)".into()),
            retry_after: None,
        })
    );
    assert_eq!(calls[5].latency, Some(Duration::from_secs(3)));
    assert!(calls[5].error.is_none() && calls[5].response.is_none());
    // Dropped by the caller's timeout: recorded just past it.
    assert_eq!(
        calls[6].latency,
        Some(Duration::from_millis(15 * 60 * 1000 + 1))
    );
    assert!(calls[6].response.is_none() && calls[6].raw.is_none() && calls[6].error.is_none());
    assert!(!format!("{recording:?}").contains(SECRET));
}

/// Answers every call at once with its key's step, after as long as `delay_ms` says for
/// that step.
struct ByStep;

impl Provider for ByStep {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        let delay = match request.key.step.as_str() {
            "plan" => 30,
            "execute" => 20,
            _ => 10,
        };
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            Ok(response(
                ModelOutput::Json(json!({"step": request.key.step})),
                delay,
            ))
        })
    }
}

#[tokio::test(start_paused = true)]
async fn calls_are_listed_in_the_order_the_run_made_them() {
    // Started plan, execute T-2, execute T-1, deliver: neither key order (deliver first)
    // nor the order they ended in (deliver, then the items, then plan).
    let recording = Recording::new(Vec::<String>::new());
    let provider = recording.provider(ByStep);
    let keys = [
        CallKey::new("plan"),
        CallKey::new("execute").item("T-2"),
        CallKey::new("execute").item("T-1"),
        CallKey::new("deliver"),
    ];
    let call = |key: &CallKey| {
        let mut request = request(1);
        request.key = key.clone();
        provider.complete(request)
    };
    let [plan, second, first, deliver] = &keys;
    let results = tokio::join!(call(plan), call(second), call(first), call(deliver));
    assert!(
        results.0.is_ok() && results.1.is_ok() && results.2.is_ok() && results.3.is_ok(),
        "{results:?}"
    );
    let cassette = recording.cassette(Recorded::default());
    let listed: Vec<CallKey> = cassette.calls.iter().map(RecordedCall::key).collect();
    assert_eq!(listed, keys);
    assert!(
        cassette.calls.iter().all(|call| call
            .prompt_hash
            .as_deref()
            .is_some_and(|hash| hash.starts_with("sha256:"))),
        "{:?}",
        cassette.calls
    );
}

#[tokio::test(start_paused = true)]
async fn a_prompt_is_hashed_as_the_recording_keeps_the_input_scrubbed() {
    // The input held a secret: the recording keeps it as `<redacted>`, a replay renders
    // the prompt from that, and the hash must match the prompt the replay renders.
    let recording = Recording::new([SECRET.to_string()]);
    let provider = recording.provider(ByStep);
    let mut asked = request(1);
    asked.prompt = format!("write about rust {SECRET}");
    let answered = provider.complete(asked).await;
    assert!(answered.is_ok(), "{answered:?}");
    let cassette = recording.cassette(Recorded::default());
    assert_eq!(
        cassette
            .calls
            .first()
            .and_then(|call| call.prompt_hash.clone()),
        Some(crate::formats::canonical::sha256(
            b"write about rust <redacted>"
        ))
    );
}

#[tokio::test(start_paused = true)]
async fn a_recording_replays_to_the_same_results() {
    let (recording, live) = record_script().await;
    let text = recording
        .cassette(Recorded {
            spec_hash: "sha256:s".into(),
            ..Recorded::default()
        })
        .to_yaml()
        .unwrap_or_else(|error| panic!("{error}"));
    let cassette =
        Cassette::from_yaml("cassette.yaml", &text).unwrap_or_else(|error| panic!("{error}"));
    let replay = ReplayProvider::new(cassette);
    for (index, live) in live.into_iter().enumerate() {
        let attempt = index as u64 + 1;
        let call = replay.complete(request(attempt));
        let replayed = match tokio::time::timeout(Duration::from_secs(15 * 60), call).await {
            Ok(result) => result,
            Err(_) => Err(ProviderError::TimedOut {
                after: Duration::from_secs(15 * 60),
            }),
        };
        // Secrets are scrubbed and a call with no HTTP answer comes back as a 503: the
        // rest is the same.
        let normalize = |result: Result<ModelResponse, ProviderError>| match result {
            Ok(response) => format!(
                "{:?} {:?} {:?} {}",
                response.output,
                response.usage,
                response.latency,
                response.tool_calls.len()
            )
            .replace(SECRET, "<redacted>"),
            Err(error) => format!(
                "transient={} retry_after={:?}",
                error.is_transient(),
                error.retry_after()
            ),
        };
        assert_eq!(normalize(replayed), normalize(live), "call {attempt}");
    }
    assert!(replay.unused().is_empty());
}

#[tokio::test]
async fn human_answers_are_recorded() {
    struct Yes;
    impl HumanChannel for Yes {
        fn ask(&self, _request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
            Box::pin(async { Ok(json!({"approved": true, "note": format!("ok {SECRET}")})) })
        }
    }
    let recording = Recording::new([SECRET.to_string()]);
    let humans = recording.humans(Yes);
    let answer = humans
        .ask(HumanRequest {
            step: "confirm".into(),
            round: 2,
            attempt: 1,
            question: "ok?".into(),
        })
        .await;
    assert_eq!(
        answer.map(|answer| answer["note"].clone()),
        Ok(json!("ok <redacted>"))
    );
    let cassette = recording.cassette(Recorded::default());
    assert_eq!(
        cassette.humans,
        [RecordedHuman {
            turn: 1,
            step: "confirm".into(),
            round: 2,
            attempt: 1,
            answer: json!({"approved": true, "note": "ok <redacted>"}),
        }]
    );
}

#[test]
fn recordings_are_written_whole() {
    let dir = std::env::temp_dir().join(format!("charter-record-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let scenario = Scenario {
        spec: "specs/x.charter".into(),
        description: Some("recorded".into()),
        input: json!({"goal": "g"}),
        turns: None,
        expect: None,
    };
    let mut cassette = Cassette::new(Recorded {
        spec_hash: "sha256:s".into(),
        ..Recorded::default()
    });
    cassette.calls.push(empty_call(&CallKey::new("plan")));
    write_recording(&dir, &scenario, &cassette).unwrap_or_else(|error| panic!("{error}"));
    let names: Vec<String> = fs::read_dir(&dir)
        .map(|entries| {
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        ["cassette.yaml", "scenario.yaml"],
        "no temporary file is left"
    );
    let read = Cassette::read(&dir.join("cassette.yaml")).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(read, cassette);
    assert_eq!(
        Scenario::read(&dir.join("scenario.yaml")).ok(),
        Some(scenario.clone())
    );
    // Into a path that is a file: an error naming it, not a panic.
    let blocked = dir.join("cassette.yaml").join("sub");
    let error = write_recording(&blocked, &scenario, &cassette)
        .err()
        .map(|error| error.to_string());
    assert!(error.is_some_and(|error| error.contains("cannot write")));
    let _ = fs::remove_dir_all(&dir);
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-journal-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::create_dir_all(&dir);
    dir.join("calls.jsonl")
}

/// Counts the calls that reach it and answers each with its attempt number.
#[derive(Default)]
struct Counting {
    calls: Mutex<u64>,
}

impl Provider for Counting {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        *lock(&self.calls) += 1;
        Box::pin(async move {
            Ok(response(
                ModelOutput::Json(json!({"attempt": request.key.attempt, "key": SECRET})),
                5,
            ))
        })
    }
}

struct Yes;

impl HumanChannel for Yes {
    fn ask(&self, _request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        Box::pin(async { Ok(json!({"approved": true})) })
    }
}

fn confirm() -> HumanRequest {
    HumanRequest {
        step: "confirm".into(),
        round: 1,
        attempt: 1,
        question: "ok?".into(),
    }
}

#[tokio::test]
async fn a_resumed_run_asks_nothing_twice() {
    let path = temp_path("resume");
    // The first run: two calls and an answer, then it is killed.
    {
        let (journal, entries) = Journal::open(&path).unwrap_or_else(|error| panic!("{error}"));
        assert!(entries.is_empty());
        let recording = Recording::journaled([SECRET.to_string()], journal, entries);
        let provider = recording.provider(Counting::default());
        for attempt in 1..=2 {
            let answer = provider.complete(request(attempt)).await;
            assert!(answer.is_ok());
        }
        let humans = recording.humans(Yes);
        assert!(humans.ask(confirm()).await.is_ok());
        assert_eq!(recording.journal_error(), None);
    }
    let text = fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(text.lines().count(), 3);
    assert!(!text.contains(SECRET), "{text}");

    // The resumed run: the same two calls and the answer come from the journal.
    let (journal, entries) = Journal::open(&path).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(entries.len(), 3);
    let recording = Recording::journaled([SECRET.to_string()], journal, entries);
    let counting = Arc::new(Counting::default());
    let provider = recording.provider(counting.clone());
    for attempt in 1..=2 {
        let answer = provider.complete(request(attempt)).await;
        assert_eq!(
            answer.map(|response| response.output),
            Ok(ModelOutput::Json(
                json!({"attempt": attempt, "key": "<redacted>"})
            ))
        );
    }
    assert_eq!(
        *lock(&counting.calls),
        0,
        "no call already in the journal is made again"
    );
    assert_eq!(recording.replayed(), 2);
    struct Never;
    impl HumanChannel for Never {
        fn ask(&self, _request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
            Box::pin(async {
                Err(ProviderError::NoHumanAnswer {
                    step: "confirm".into(),
                    round: 1,
                    attempt: 1,
                })
            })
        }
    }
    let humans = recording.humans(Never);
    assert_eq!(humans.ask(confirm()).await, Ok(json!({"approved": true})));
    // A call the first run never made goes to the model, and into the journal.
    assert!(provider.complete(request(3)).await.is_ok());
    assert_eq!(*lock(&counting.calls), 1);
    assert_eq!(
        fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .count(),
        4
    );
    let cassette = recording.cassette(Recorded::default());
    assert_eq!(cassette.calls.len(), 3);
    assert_eq!(cassette.humans.len(), 1);
    let _ = fs::remove_dir_all(path.parent().unwrap_or(&path));
}

/// What an observer and a question-showing channel are told (a server's event stream).
#[derive(Default)]
struct Shown(Mutex<Vec<String>>);

impl crate::engine::provider::CallObserver for Shown {
    fn tool_started(&self, key: &CallKey, tool: &str) {
        lock(&self.0).push(format!("{} started {tool}", key.attempt));
    }

    fn tool_finished(&self, key: &CallKey, tool: &str, ok: bool) {
        lock(&self.0).push(format!("{} finished {tool} {ok}", key.attempt));
    }
}

impl HumanChannel for Shown {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        lock(&self.0).push(format!("asked {}", request.question));
        Box::pin(async { Ok(json!({"approved": true})) })
    }

    fn answered_before(&self, request: &HumanRequest, _answer: &Value) {
        lock(&self.0).push(format!("asked {}", request.question));
    }
}

/// A live provider whose call runs two tools (one fails), as the OpenAI tool loop does:
/// each started and finished on the call's log, and returned with the answer.
struct ToolLoop;

impl Provider for ToolLoop {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        let mut calls = Vec::new();
        for (tool, result, ok) in [
            ("search", json!({"hits": 2}), true),
            ("fetch", json!({"error": "404"}), false),
        ] {
            request.log.tool_started(tool);
            let call = ToolCall {
                tool: tool.into(),
                args: json!({"q": "x"}),
                result,
                latency: Some(Duration::from_millis(3)),
            };
            request.log.tool_finished(call.clone(), ok);
            calls.push(call);
        }
        Box::pin(async move {
            let mut answer = response(ModelOutput::Json(json!({"ok": true})), 5);
            answer.tool_calls = calls;
            Ok(answer)
        })
    }
}

/// A resumed run tells its observer and its human channel what the first run told them,
/// in the same order: a server's stream keeps its event ids across a restart.
#[tokio::test]
async fn a_resumed_call_tells_its_tool_calls_and_a_resumed_answer_its_question_again() {
    let path = temp_path("resume-shown");
    let observed = |shown: Arc<Shown>| {
        let mut call = request(1);
        let key = call.key.clone();
        call.log = CallLog::new(
            || key,
            Some(shown as Arc<dyn crate::engine::provider::CallObserver>),
        );
        call
    };
    let first = Arc::new(Shown::default());
    {
        let (journal, entries) = Journal::open(&path).unwrap_or_else(|error| panic!("{error}"));
        let recording = Recording::journaled(Vec::new(), journal, entries);
        let provider = recording.provider(ToolLoop);
        assert!(provider.complete(observed(first.clone())).await.is_ok());
        assert!(recording.humans(first.clone()).ask(confirm()).await.is_ok());
    }
    let (journal, entries) = Journal::open(&path).unwrap_or_else(|error| panic!("{error}"));
    let recording = Recording::journaled(Vec::new(), journal, entries);
    let provider = recording.provider(Counting::default());
    let again = Arc::new(Shown::default());
    assert!(provider.complete(observed(again.clone())).await.is_ok());
    assert_eq!(recording.replayed(), 1, "the call came from the journal");
    assert_eq!(
        recording.humans(again.clone()).ask(confirm()).await,
        Ok(json!({"approved": true}))
    );
    assert_eq!(*lock(&again.0), *lock(&first.0));
    assert_eq!(
        *lock(&again.0),
        [
            "1 started search",
            "1 finished search true",
            "1 started fetch",
            "1 finished fetch false",
            "asked ok?"
        ]
    );
    let _ = fs::remove_dir_all(path.parent().unwrap_or(&path));
}

#[tokio::test]
async fn a_line_cut_by_a_kill_is_dropped_and_a_damaged_journal_is_an_error() {
    let path = temp_path("torn");
    {
        let (journal, entries) = Journal::open(&path).unwrap_or_else(|error| panic!("{error}"));
        let recording = Recording::journaled(Vec::new(), journal, entries);
        let provider = recording.provider(Counting::default());
        assert!(provider.complete(request(1)).await.is_ok());
    }
    let whole = fs::read_to_string(&path).unwrap_or_default();
    // The kill came in the middle of the second line.
    let torn = format!(
        "{whole}{}",
        whole.get(..whole.len() / 2).unwrap_or_default()
    );
    let _ = fs::write(&path, &torn);
    let (journal, entries) = Journal::open(&path).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(entries.len(), 1);
    assert_eq!(
        fs::read_to_string(&path).unwrap_or_default(),
        whole,
        "the torn line is cut"
    );
    let recording = Recording::journaled(Vec::new(), journal, entries);
    let provider = recording.provider(Counting::default());
    assert!(provider.complete(request(2)).await.is_ok());
    let reopened = Journal::open(&path).map(|(_, entries)| entries.len());
    assert_eq!(reopened.ok(), Some(2));

    // A damaged line that is not the last: an error naming it.
    let text = fs::read_to_string(&path).unwrap_or_default();
    let _ = fs::write(&path, format!("{{\"call\": 7}}\n{text}"));
    let error = Journal::open(&path)
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(
        error.ends_with(":1: this journal line cannot be read (the journal is damaged)"),
        "{error}"
    );
    let _ = fs::remove_dir_all(path.parent().unwrap_or(&path));
}

#[tokio::test(start_paused = true)]
async fn calls_dropped_by_a_cancel_are_not_recorded() {
    let recording = Recording::new(Vec::new());
    let provider = recording.provider(Scripted {
        script: Mutex::new(
            vec![(
                None,
                Err(ProviderError::Permanent {
                    status: None,
                    message: String::new(),
                }),
            )]
            .into(),
        ),
    });
    let call = provider.complete(request(1));
    recording.cancel();
    let cut = tokio::time::timeout(Duration::from_secs(1), call).await;
    assert!(cut.is_err());
    assert_eq!(recording.calls(), 0);
}

/// Runs each `tool` step call by counting it, answering a secret, failing for `attempt 2`
/// and never answering for `attempt 3`.
#[derive(Default)]
struct ToolRunner {
    calls: Mutex<u64>,
}

impl Provider for ToolRunner {
    fn complete(
        &self,
        _request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        Box::pin(async {
            Err(ProviderError::NotRecorded {
                key: CallKey::new("x"),
                closest: None,
            })
        })
    }

    fn run_tool(
        &self,
        request: crate::engine::provider::ToolRequest,
    ) -> BoxFuture<'_, Result<crate::engine::provider::ToolResponse, ProviderError>> {
        *lock(&self.calls) += 1;
        Box::pin(async move {
            let result = match request.key.attempt {
                2 => Err(format!("engine down ({SECRET})")),
                3 => std::future::pending().await,
                _ => Ok(json!({"issues": [], "token": SECRET})),
            };
            Ok(crate::engine::provider::ToolResponse {
                result,
                latency: Duration::from_millis(40),
            })
        })
    }
}

fn tool_request(attempt: u64) -> crate::engine::provider::ToolRequest {
    crate::engine::provider::ToolRequest {
        key: CallKey::new("validate").attempt(attempt),
        tool: "validate_workflow".into(),
        args: json!({"workflow_id": "W-1"}),
    }
}

#[tokio::test(start_paused = true)]
async fn tool_step_calls_are_recorded_scrubbed_journaled_and_resumed_unrun() {
    let path = temp_path("tool-steps");
    {
        let (journal, entries) = Journal::open(&path).unwrap_or_else(|error| panic!("{error}"));
        let recording = Recording::journaled([SECRET.to_string()], journal, entries);
        let provider = recording.provider(ToolRunner::default());
        let done = provider.run_tool(tool_request(1)).await;
        assert_eq!(
            done.map(|response| response.result),
            Ok(Ok(json!({"issues": [], "token": "<redacted>"})))
        );
        let failed = provider.run_tool(tool_request(2)).await;
        assert_eq!(
            failed.map(|response| response.result),
            Ok(Err("engine down (<redacted>)".to_string()))
        );
        // Cut by the caller (the step's timeout): recorded with the time it ran.
        let cut = tokio::time::timeout(Duration::from_secs(15), provider.run_tool(tool_request(3)));
        assert!(cut.await.is_err());
        let cassette = recording.cassette(Recorded::default());
        let entries: Vec<_> = cassette
            .calls
            .iter()
            .map(|call| {
                (
                    call.tool.clone(),
                    call.result.clone(),
                    call.error.as_ref().and_then(|error| error.message.clone()),
                    call.latency,
                )
            })
            .collect();
        let tool = Some("validate_workflow".to_string());
        assert_eq!(
            entries,
            [
                (
                    tool.clone(),
                    Some(json!({"issues": [], "token": "<redacted>"})),
                    None,
                    Some(Duration::from_millis(40))
                ),
                (
                    tool.clone(),
                    None,
                    Some("engine down (<redacted>)".to_string()),
                    Some(Duration::from_millis(40))
                ),
                (tool, None, None, Some(Duration::from_millis(15_001))),
            ]
        );
        // The cassette loads, and replays each entry as it was.
        let text = cassette.to_yaml().unwrap_or_else(|error| panic!("{error}"));
        assert!(!text.contains(SECRET), "{text}");
        let reloaded =
            Cassette::from_yaml("cassette.yaml", &text).unwrap_or_else(|error| panic!("{error}"));
        let replay = ReplayProvider::new(reloaded);
        let played = replay.run_tool(tool_request(2)).await;
        assert_eq!(
            played.map(|response| response.result),
            Ok(Err("engine down (<redacted>)".to_string()))
        );
    }
    // Resumed: the answered calls come from the journal; the tool does not run again.
    let (journal, entries) = Journal::open(&path).unwrap_or_else(|error| panic!("{error}"));
    let recording = Recording::journaled([SECRET.to_string()], journal, entries);
    let runner = Arc::new(ToolRunner::default());
    let provider = recording.provider(runner.clone());
    let done = provider.run_tool(tool_request(1)).await;
    assert_eq!(
        done.map(|response| response.result),
        Ok(Ok(json!({"issues": [], "token": "<redacted>"})))
    );
    assert_eq!(
        *lock(&runner.calls),
        0,
        "no tool already in the journal runs again"
    );
    let _ = fs::remove_dir_all(path.parent().unwrap_or(&path));
}
