//! `charter serve --restate INGRESS_URL`: the §13 API and page over runs that live in Restate — each run is started as a `CharterRun` workflow through the ingress and followed there (its trace events, its ask, its result), so the routes, the event stream and the page are those of a local run.
//!
//! The server keeps no journal of such a run: Restate does, and `charter worker`s run it.
//! What the server keeps in the run's directory is what it needs to follow the run again
//! after a restart (`restate.json`: the ingress; `input.json`), and, once it ended, its
//! `result.json` and `stream.jsonl`, as for a local run. A run is followed by polling its
//! shared handlers (`events(since)`, `status`, and `rows(since)`: the role outputs and
//! tool rows, each put before the trace event it came before), a few times a second; an answer given to
//! the server goes to the run's `answer` handler. Cancelling is Restate's to do (its admin
//! API or CLI), so the server refuses it with the command that does it.

use std::time::Duration;

use charter_runtime::engine::provider::HumanRequest;
use charter_runtime::engine::session::Session;
use charter_runtime::world::files::LineFile;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::stream::Stream;

/// What following a run in Restate needs of the served run that shows it: its id, its
/// stream, and a way to put an `ask` to a person (`runs::Run` is one). A narrow trait, so
/// that the runs import this front and not the other way round.
pub(crate) trait Followed {
    fn id(&self) -> &str;
    fn stream(&self) -> &Stream;
    /// Shows `request` as the `ask` the run waits on; a client's answer arrives on the
    /// receiver.
    fn wait_for_answer(&self, request: HumanRequest) -> tokio::sync::oneshot::Receiver<Value>;
}

/// The file, in a run's directory, that says the run lives in Restate.
pub(crate) const RESTATE_FILE: &str = "restate.json";

/// How often a followed run's events and status are asked for while it changes; a run
/// that shows nothing new is asked half as often each time, down to [`IDLE_POLL`] (a
/// run waiting on an ask for a day costs its server little).
const POLL: Duration = Duration::from_millis(200);

/// The longest pause between two looks at a run that shows nothing new.
const IDLE_POLL: Duration = Duration::from_secs(2);

/// How long one request to the ingress may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How many requests in a row may fail (the ingress down, a node restarting) before the
/// run is given up as lost to this server: about two minutes.
const MAX_FAILURES: u32 = 600;

/// How many refusals in a row (a 4xx: no such workflow, a deployment not registered) end
/// the following of a run: about five seconds.
const MAX_REFUSALS: u32 = 25;

/// `restate.json`: where the run lives.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RestateFile {
    pub(crate) ingress: String,
}

/// The Restate ingress runs are started and followed through.
#[derive(Debug, Clone)]
pub(crate) struct Front {
    /// The ingress's base address, without a trailing `/`.
    pub(crate) ingress: String,
    client: reqwest::Client,
}

impl Front {
    /// The front for `url`, or why it cannot be one.
    pub(crate) fn new(url: &str) -> Result<Self, String> {
        let ingress = url.trim_end_matches('/').to_string();
        let parsed = reqwest::Url::parse(&ingress)
            .map_err(|error| format!("--restate {url}: not an address ({error}); give the ingress's, e.g. http://127.0.0.1:8080"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "--restate {url}: the ingress is an http:// or https:// address, e.g. http://127.0.0.1:8080"
            ));
        }
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|error| format!("--restate: cannot make an HTTP client: {error}"))?;
        Ok(Front { ingress, client })
    }

    fn url(&self, id: &str, handler: &str) -> String {
        format!("{}/CharterRun/{id}/{handler}", self.ingress)
    }

    /// Calls handler `handler` of run `id` with `body`: its JSON answer, or why not.
    async fn call(&self, id: &str, handler: &str, body: &Value) -> Result<Value, Failure> {
        let request = self.client.post(self.url(id, handler));
        // `null`: no body (a handler that takes no input refuses one).
        let request = if body.is_null() {
            request
        } else {
            request.json(body)
        };
        let response = request
            .send()
            .await
            .map_err(|error| Failure::Unreachable(error.to_string()))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|error| Failure::Unreachable(error.to_string()))?;
        if !status.is_success() {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|body| {
                    body.get("message")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or(text);
            return Err(Failure::Refused(
                status.as_u16(),
                charter_runtime::world::escape::one_line(&message, 300),
            ));
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text)
            .map_err(|error| Failure::Refused(status.as_u16(), format!("not JSON: {error}")))
    }

    /// Starts run `id` of spec `spec` on `input` — a turn of a conversation that starts
    /// from `session`, when given — without waiting for it.
    pub(crate) async fn start(
        &self,
        id: &str,
        spec: &str,
        input: &Value,
        session: Option<&Session>,
    ) -> Result<(), String> {
        let mut body = json!({"spec": spec, "input": input});
        if let Some(session) = session {
            body["session"] = json!(session);
        }
        self.call(id, "run/send", &body)
            .await
            .map(|_| ())
            .map_err(|failure| format!("Restate did not take the run: {failure}"))
    }

    /// Follows run `id` to its end: puts its trace events on its stream as Restate keeps
    /// them, shows its ask (and sends the answer a client gives), and returns its result
    /// (`{outcome, reason, ...}`, or `{outcome: "error", message}`).
    /// Each trace event also goes to `trace` (the run's `events.jsonl`, as a local run's).
    pub(crate) async fn follow(&self, run: &impl Followed, mut trace: Option<LineFile>) -> Value {
        let mut keep = |event: &Value| {
            run.stream().push(event);
            if let Some(file) = trace.as_mut() {
                let line = run.stream().scrubbed(event);
                // A trace that cannot be written is no reason to stop following the run.
                if file.append_line(line.as_bytes()).is_err() {
                    trace = None;
                }
            }
        };
        let mut since: u64 = 0;
        // The stream's other rows (role outputs, tools started and finished), each put
        // before the trace event it came before.
        let mut rows = Rows::default();
        let mut failures = 0u32;
        // The promise of the ask shown last, and where a client's answer to it arrives.
        let mut shown: Option<String> = None;
        let mut answers: Option<tokio::sync::oneshot::Receiver<Value>> = None;
        let mut pause = POLL;
        let mut last_state = Value::Null;
        loop {
            let (events, status) = match self.poll(run.id(), since).await {
                Ok(polled) => {
                    failures = 0;
                    polled
                }
                Err(failure) => {
                    failures += 1;
                    if let Some(lost) = self.lost(failures, &failure) {
                        return lost;
                    }
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            };
            let before = since;
            // A row is kept with trace events (its call's `model_result` comes before it):
            // there are new rows only when there are new events.
            if events.as_array().is_some_and(|events| !events.is_empty()) {
                self.rows(run.id(), &mut rows).await;
            }
            for event in events.as_array().into_iter().flatten() {
                rows.show_before(since, run.stream());
                keep(event);
                since += 1;
            }
            rows.show_before(since, run.stream());
            let state = status.get("state").cloned().unwrap_or(Value::Null);
            pause = if since == before && state == last_state {
                (pause * 2).min(IDLE_POLL)
            } else {
                POLL
            };
            last_state = state;
            if let Some(result) = ended(&status) {
                // Events kept with the last entry, if the poll above came before it.
                self.rows(run.id(), &mut rows).await;
                if let Ok(events) = self.call(run.id(), "events", &json!(since)).await {
                    for event in events.as_array().into_iter().flatten() {
                        rows.show_before(since, run.stream());
                        keep(event);
                        since += 1;
                    }
                }
                rows.show_before(u64::MAX, run.stream());
                return result;
            }
            if status.get("state").and_then(Value::as_str) == Some("waiting")
                && let Some(promise) = status.pointer("/ask/promise").and_then(Value::as_str)
                && shown.as_deref() != Some(promise)
            {
                answers = Some(run.wait_for_answer(asked(promise, &status)));
                shown = Some(promise.to_string());
            }
            let Some(receiver) = answers.as_mut() else {
                tokio::time::sleep(pause).await;
                continue;
            };
            tokio::select! {
                answer = receiver => {
                    answers = None;
                    // The run goes on at once: look again soon.
                    pause = POLL;
                    if let Ok(answer) = answer
                        && let Err(failure) = self.call(run.id(), "answer", &answer).await
                    {
                        return json!({"outcome": "error", "message": format!(
                            "Restate did not take the answer: {failure}")});
                    }
                }
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}

/// The most rows the worker's `rows` handler gives at once.
const ROWS_PER_CALL: usize = 1000;

/// The rows of a run's stream that are no trace events, read from Restate and not yet
/// shown: each `{at, row}`, shown before trace event number `at`.
#[derive(Default)]
struct Rows {
    read: u64,
    waiting: std::collections::VecDeque<(u64, Value)>,
}

impl Rows {
    /// Shows every row that comes before trace event number `next`.
    fn show_before(&mut self, next: u64, stream: &Stream) {
        while let Some((at, _)) = self.waiting.front()
            && *at <= next
        {
            if let Some((_, row)) = self.waiting.pop_front() {
                stream.push(&row);
            }
        }
    }
}

impl Front {
    /// Reads the rows run `id` kept since those read already. A worker that keeps none
    /// (or a failed request) leaves the stream with its trace events alone.
    async fn rows(&self, id: &str, rows: &mut Rows) {
        loop {
            let Ok(read) = self.call(id, "rows", &json!(rows.read)).await else {
                return;
            };
            let read = read.as_array().cloned().unwrap_or_default();
            let more = read.len() >= ROWS_PER_CALL;
            for kept in read {
                rows.read += 1;
                let at = kept.get("at").and_then(Value::as_u64).unwrap_or(u64::MAX);
                if let Some(row) = kept.get("row") {
                    rows.waiting.push_back((at, row.clone()));
                }
            }
            if !more {
                return;
            }
        }
    }

    /// Run `id`'s trace events from the `since`th on, and its status.
    async fn poll(&self, id: &str, since: u64) -> Result<(Value, Value), Failure> {
        let events = self.call(id, "events", &json!(since)).await?;
        let status = self.call(id, "status", &Value::Null).await?;
        Ok((events, status))
    }

    /// The run's end, when `failures` requests in a row have failed, the last with
    /// `failure`: a few refusals (not a server error), or about two minutes of no answer.
    fn lost(&self, failures: u32, failure: &Failure) -> Option<Value> {
        let most = match failure {
            Failure::Refused(status, _) if *status < 500 => MAX_REFUSALS,
            _ => MAX_FAILURES,
        };
        (failures >= most).then(|| {
            json!({"outcome": "error", "message": format!(
                "lost the run in Restate ({}): {failure}", self.ingress)})
        })
    }
}

/// The result a status says the run ended with (`finished`, or `error` with its message),
/// or `None` while it goes on.
fn ended(status: &Value) -> Option<Value> {
    match status.get("state").and_then(Value::as_str) {
        Some("finished") => Some(status.get("result").cloned().unwrap_or_else(
            || json!({"outcome": "error", "message": "Restate's status has no result"}),
        )),
        Some("error") => {
            let message = status
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the run failed in Restate");
            Some(json!({"outcome": "error", "message": message}))
        }
        _ => None,
    }
}

/// The ask a status names: its step, round and attempt from its promise's name
/// (`ask/STEP/ROUND/ATTEMPT`), its question from the status.
fn asked(promise: &str, status: &Value) -> HumanRequest {
    let mut parts = promise.rsplitn(3, '/');
    let attempt = parts.next().and_then(|part| part.parse().ok()).unwrap_or(1);
    let round = parts.next().and_then(|part| part.parse().ok()).unwrap_or(1);
    let step = parts
        .next()
        .map_or("", |rest| rest.strip_prefix("ask/").unwrap_or(rest));
    HumanRequest {
        step: status
            .pointer("/ask/step")
            .and_then(Value::as_str)
            .unwrap_or(step)
            .to_string(),
        round,
        attempt,
        question: status
            .pointer("/ask/question")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    }
}

/// Why a request to the ingress gave nothing.
#[derive(Debug)]
enum Failure {
    /// No answer: the ingress is down or the connection broke.
    Unreachable(String),
    /// An answer that is an error, or not JSON.
    Refused(u16, String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(error) => write!(f, "the ingress does not answer ({error})"),
            Failure::Refused(status, message) => write!(f, "{status}: {message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_is_read_from_its_promise_and_the_status() {
        let status = json!({"state": "waiting", "ask": {
            "promise": "ask/approve_plan/2/1", "step": "approve_plan", "question": "Go?"}});
        let request = asked("ask/approve_plan/2/1", &status);
        assert_eq!(request.step, "approve_plan");
        assert_eq!((request.round, request.attempt), (2, 1));
        assert_eq!(request.question, "Go?");
        let bare = asked("ask/a/b/3/4", &json!({}));
        assert_eq!(
            (bare.step.as_str(), bare.round, bare.attempt),
            ("a/b", 3, 4)
        );
    }

    #[test]
    fn an_ingress_is_an_http_address() {
        assert!(
            Front::new("http://127.0.0.1:8080/")
                .is_ok_and(|front| front.ingress == "http://127.0.0.1:8080")
        );
        assert!(Front::new("127.0.0.1:8080").is_err());
        assert!(Front::new("ftp://host").is_err());
    }
}
