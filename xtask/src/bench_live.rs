//! `cargo xtask bench`, live section: N concurrent live runs of the `closed_loop` seed spec through the real OpenAI-compatible provider against a mock server on loopback; throughput, peak memory and whole traces.
//!
//! The mock is a wiremock server on 127.0.0.1 (its own thread) that plays Chat
//! Completions: it answers each role (named by the request's `response_format`) with a
//! fixed valid output after a small latency, so every run goes plan -> execute (two work
//! orders, the second depending on the first) -> evaluate -> gate -> deliver and ends
//! `completed{gate_passed}` in five HTTP calls. The runs share one `OpenAiProvider` and
//! run on one current-thread tokio runtime. Requests go to loopback only, their number is
//! bounded (runs x five, plus the spec's own retry bounds if something goes wrong), and the
//! section ends by itself within [`SECTION_LIMIT`].

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use charter_runtime::compiler::CompiledSpec;
use charter_runtime::engine::effects::Effects;
use charter_runtime::engine::effects::HumanChannel;
use charter_runtime::engine::provider::{BoxFuture, HumanRequest, ProviderError};
use charter_runtime::engine::run::{RunConfig, run};
use charter_runtime::world::providers::{ApiKey, OpenAiConfig, OpenAiProvider};
use charter_runtime::world::tools::ToolBox;

use charter_runtime::formats::trace::{EventKind, MemorySink, Outcome, Reason, TraceEvent};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::corpus::{FsLoader, display_path};
use crate::measure::{median, memory_mib, reset_peak_memory};

/// The seed spec the live runs execute.
const SPEC: &str = "specs/seeds/closed_loop.charter";
/// The most runs `--live-runs` accepts (bounds the requests the section makes).
pub const MAX_RUNS: u32 = 10_000;
/// The mock's answer time, so that the runs overlap as live runs do.
const MOCK_LATENCY: Duration = Duration::from_millis(20);
/// HTTP calls one run makes: planner, executor for each of the two work orders,
/// evaluator, finalizer.
const CALLS_PER_RUN: usize = 5;
/// The whole section stops after this long, finished or not.
const SECTION_LIMIT: Duration = Duration::from_secs(600);

/// What the live section runs (`--live-runs N`, `--skip-live`).
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct LiveConfig {
    /// Concurrent live runs of specs/seeds/closed_loop.charter through the OpenAI provider
    /// against a mock server on 127.0.0.1
    #[arg(
        long,
        value_name = "N",
        default_value_t = 200,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_RUNS))
    )]
    pub live_runs: u32,
    /// Skip the live runs
    #[arg(long)]
    pub skip_live: bool,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            live_runs: 200,
            skip_live: false,
        }
    }
}

impl LiveConfig {
    /// The options that give this configuration, for the re-run in the release build.
    pub fn arguments(&self) -> Vec<String> {
        let mut arguments = vec!["--live-runs".to_string(), self.live_runs.to_string()];
        if self.skip_live {
            arguments.push("--skip-live".to_string());
        }
        arguments
    }
}

/// What the runs did.
#[derive(Debug)]
pub struct LiveReport {
    pub runs: usize,
    /// Runs whose trace is whole and ends `completed{gate_passed}`.
    pub complete: usize,
    /// Why the others are not (the first few).
    pub problems: Vec<String>,
    /// Requests the mock answered.
    pub http_calls: usize,
    /// From the first run started to the last one finished.
    pub wall: Duration,
    /// Each run's own time, sorted.
    pub run_times: Vec<Duration>,
}

/// Runs the live section and prints its figures. Returns whether every trace is complete.
pub fn bench_live(root: &Path, config: LiveConfig) -> bool {
    if config.skip_live {
        println!("live runs: skipped (--skip-live)");
        return true;
    }
    let reset = reset_peak_memory();
    let before = memory_mib("VmRSS:");
    let report = match live_runs(root, config.live_runs) {
        Ok(report) => report,
        Err(error) => {
            println!("live runs: {error:#}");
            return false;
        }
    };
    let peak = memory_mib("VmHWM:");
    println!(
        "live runs: {} concurrent runs of {SPEC} through OpenAiProvider against a wiremock server on 127.0.0.1 ({} ms per response)",
        report.runs,
        MOCK_LATENCY.as_millis()
    );
    let seconds = report.wall.as_secs_f64().max(1e-9);
    println!(
        "  {} runs, {} HTTP calls in {seconds:.2} s: {:.1} runs/s, {:.0} calls/s; per run median {:.2} s, max {:.2} s",
        report.runs,
        report.http_calls,
        report.runs as f64 / seconds,
        report.http_calls as f64 / seconds,
        median(&report.run_times).as_secs_f64(),
        report
            .run_times
            .last()
            .copied()
            .unwrap_or_default()
            .as_secs_f64()
    );
    let shown = |mib: Option<f64>| mib.map_or("unknown".to_string(), |mib| format!("{mib:.1} MiB"));
    println!(
        "  peak memory {} (VmHWM from /proc/self/status: this whole process's peak resident set, {}; {} resident before the runs)",
        shown(peak),
        if reset {
            "reset at the start of this section"
        } else {
            "not resettable here, so since the process started"
        },
        shown(before)
    );
    println!(
        "  {}/{} traces complete (run_started first, seq without gaps, run_finished completed{{gate_passed}} last, delivered)",
        report.complete, report.runs
    );
    for problem in &report.problems {
        println!("  incomplete: {problem}");
    }
    let expected_calls = report.runs * CALLS_PER_RUN;
    if report.http_calls != expected_calls {
        println!(
            "  ^ expected {expected_calls} HTTP calls ({CALLS_PER_RUN} per run), the mock answered {}",
            report.http_calls
        );
    }
    report.complete == report.runs && report.http_calls == expected_calls
}

/// Starts the mock, runs `runs` live runs of the seed spec at once and checks their traces.
pub fn live_runs(root: &Path, runs: u32) -> anyhow::Result<LiveReport> {
    let spec = Rc::new(load_spec(root)?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime
        .block_on(async { tokio::time::timeout(SECTION_LIMIT, drive(spec, runs as usize)).await });
    match report {
        Ok(report) => report,
        Err(_) => anyhow::bail!(
            "the live runs did not finish within {} s",
            SECTION_LIMIT.as_secs()
        ),
    }
}

fn load_spec(root: &Path) -> anyhow::Result<CompiledSpec> {
    let path = root.join(SPEC);
    let shown = display_path(&path, root);
    let text = std::fs::read_to_string(&path)
        .map_err(|error| anyhow::anyhow!("cannot read {shown}: {error}"))?;
    let compilation =
        charter_runtime::compiler::compile(&shown, &text, &FsLoader::for_spec(&path, &shown));
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => Ok(spec),
        _ => anyhow::bail!("{shown} does not compile (cargo run -p charter -- check {shown})"),
    }
}

async fn drive(spec: Rc<CompiledSpec>, runs: usize) -> anyhow::Result<LiveReport> {
    let calls = Arc::new(AtomicUsize::new(0));
    let server = MockServer::builder()
        .disable_request_recording()
        .start()
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(MockModel {
            calls: calls.clone(),
        })
        .mount(&server)
        .await;
    let provider = Arc::new(
        OpenAiProvider::new(
            OpenAiConfig::new(
                format!("{}/v1", server.uri()),
                Some(ApiKey::new("sk-bench-loopback")),
            ),
            Arc::new(ToolBox::for_spec(&spec)),
        )
        .map_err(|error| anyhow::anyhow!("{error}"))?,
    );
    let local = tokio::task::LocalSet::new();
    let started = Instant::now();
    let handles: Vec<_> = (0..runs)
        .map(|index| {
            let spec = spec.clone();
            let provider = provider.clone();
            local.spawn_local(async move {
                let run_started = Instant::now();
                let mut sink = MemorySink::new();
                let outcome = run(
                    &spec,
                    json!({"goal": format!("a brief on heat pumps, number {index}")}),
                    Effects::new(provider, &NoHumans, &mut sink),
                    &RunConfig::default(),
                )
                .await;
                let verdict = match outcome {
                    Ok(outcome) => {
                        let ending = outcome.termination().to_string();
                        if ending == "completed{gate_passed}" {
                            trace_complete(sink.events())
                        } else {
                            Err(format!("ended {ending}"))
                        }
                    }
                    Err(error) => Err(error.to_string()),
                };
                (verdict, run_started.elapsed())
            })
        })
        .collect();
    let results = local
        .run_until(async move {
            let mut results = Vec::with_capacity(handles.len());
            for handle in handles {
                results.push(handle.await);
            }
            results
        })
        .await;
    let wall = started.elapsed();
    let mut report = LiveReport {
        runs,
        complete: 0,
        problems: Vec::new(),
        http_calls: calls.load(Ordering::Relaxed),
        wall,
        run_times: Vec::with_capacity(runs),
    };
    for (index, result) in results.into_iter().enumerate() {
        let problem = match result {
            Ok((verdict, time)) => {
                report.run_times.push(time);
                verdict.err()
            }
            Err(error) => Some(format!("panicked: {error}")),
        };
        match problem {
            None => report.complete += 1,
            Some(problem) if report.problems.len() < 5 => {
                report.problems.push(format!("run {index}: {problem}"));
            }
            Some(_) => {}
        }
    }
    report.run_times.sort();
    Ok(report)
}

/// A trace is complete when it starts with `run_started`, its `seq` has no gap, and it
/// ends with `run_finished` `completed{gate_passed}` with a delivery.
pub fn trace_complete(events: &[TraceEvent]) -> Result<(), String> {
    if !matches!(
        events.first().map(|event| &event.kind),
        Some(EventKind::RunStarted { .. })
    ) {
        return Err("the trace does not start with run_started".to_string());
    }
    if let Some((index, event)) = events
        .iter()
        .enumerate()
        .find(|(index, event)| event.seq != *index as u64)
    {
        return Err(format!("event {index} has seq {}", event.seq));
    }
    match events.last().map(|event| &event.kind) {
        Some(EventKind::RunFinished {
            outcome: Outcome::Completed,
            reason: Reason::GatePassed,
            delivered: true,
            ..
        }) => Ok(()),
        Some(EventKind::RunFinished {
            outcome,
            reason,
            delivered,
            ..
        }) => Err(format!(
            "the trace ends {outcome}{{{reason}}} (delivered: {delivered})"
        )),
        _ => Err("the trace does not end with run_finished".to_string()),
    }
}

/// Chat Completions for `closed_loop`'s roles: a valid output for each, by the role the
/// request's `response_format` names, after [`MOCK_LATENCY`]. Counts what it answers.
struct MockModel {
    calls: Arc<AtomicUsize>,
}

impl Respond for MockModel {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let (role, prompt) = role_and_prompt(request);
        match answer(&role, &prompt) {
            Some(content) => completion(&content, 400, 60).set_delay(MOCK_LATENCY),
            None => ResponseTemplate::new(400).set_body_json(
                json!({"error": {"message": format!("the mock does not play role {role:?}")}}),
            ),
        }
    }
}

/// The role a Chat Completions request is for (the name of its `response_format`'s
/// schema) and its first message's text.
pub(crate) fn role_and_prompt(request: &Request) -> (String, String) {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let text = |pointer: &str| {
        body.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (
        text("/response_format/json_schema/name"),
        text("/messages/0/content"),
    )
}

/// A Chat Completions answer of `content` (as JSON text) with the given usage.
pub(crate) fn completion(
    content: &Value,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content.to_string()},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    }))
}

/// The output of `role`; an executor repeats the id of the work order in its prompt.
fn answer(role: &str, prompt: &str) -> Option<Value> {
    Some(match role {
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
                .unwrap_or("T-001");
            json!({"task_id": id, "status": "ok", "output": format!("{id} done"),
                   "evidence": [format!("{id}.md")]})
        }
        "evaluator" => json!({
            "relevance": 9, "completeness": 9, "clarity": 9, "usability": 9,
            "on_plan": true, "findings": []
        }),
        "finalizer" => json!({"candidate_id": "c1", "summary": "a brief on heat pumps"}),
        _ => return None,
    })
}

/// No `ask` is on the path the mock drives; one would end its run as an error.
struct NoHumans;

impl HumanChannel for NoHumans {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        Box::pin(async move {
            Err(ProviderError::NoHumanAnswer {
                step: request.step,
                round: request.round,
                attempt: request.attempt,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::workspace_root;

    fn finished(seq: u64, delivered: bool) -> TraceEvent {
        TraceEvent::new(
            seq,
            0,
            1,
            EventKind::RunFinished {
                outcome: Outcome::Completed,
                reason: Reason::GatePassed,
                best: Some("c1".to_string()),
                delivered,
                message: None,
            },
        )
    }

    fn started() -> TraceEvent {
        TraceEvent::new(
            0,
            0,
            0,
            EventKind::RunStarted {
                spec: "closed_loop".to_string(),
                version: "1.0.0".to_string(),
                input: json!({}),
                turn: None,
            },
        )
    }

    #[test]
    fn a_trace_is_complete_from_run_started_to_a_delivered_run_finished() {
        assert_eq!(trace_complete(&[started(), finished(1, true)]), Ok(()));
        assert!(
            trace_complete(&[started(), finished(2, true)]).is_err(),
            "a gap"
        );
        assert!(trace_complete(&[started(), finished(1, false)]).is_err());
        assert!(trace_complete(&[started()]).is_err(), "no run_finished");
        assert!(
            trace_complete(&[finished(0, true)]).is_err(),
            "no run_started"
        );
        assert!(trace_complete(&[]).is_err());
    }

    #[test]
    fn executors_repeat_their_work_order_and_unknown_roles_get_nothing() {
        let answer =
            answer("executor", "...\n## Work order T-002\nGoal: write").unwrap_or_default();
        assert_eq!(answer["task_id"], "T-002");
        assert_eq!(super::answer("judge", ""), None);
    }

    #[test]
    fn the_options_are_passed_on_to_the_release_build() {
        let config = LiveConfig {
            live_runs: 7,
            skip_live: true,
        };
        assert_eq!(config.arguments(), ["--live-runs", "7", "--skip-live"]);
        assert_eq!(LiveConfig::default().arguments(), ["--live-runs", "200"]);
    }

    #[test]
    fn a_few_live_runs_complete_against_the_loopback_mock() {
        let report = live_runs(&workspace_root(), 3).unwrap_or_else(|error| panic!("{error:#}"));
        assert_eq!(report.problems, Vec::<String>::new());
        assert_eq!(report.complete, 3);
        assert_eq!(report.http_calls, 3 * CALLS_PER_RUN, "each call made once");
    }
}
