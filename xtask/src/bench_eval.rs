//! `cargo xtask bench`, eval section: `charter eval` (the built binary, a process of its own) running 1,000 runs of the three-call `review_loop` example with `--concurrency 32` against a wiremock model on loopback; its runs per second (target ≥ 500) with the machine's load average.
//!
//! The mock answers each role (named by the request's `response_format`) with a valid
//! output at once: the writer writes on the topic of its prompt, the reviewer passes it,
//! the finalizer delivers the candidate its prompt names, so every run is three calls and
//! ends `completed{gate_passed}`. The figure is the eval's own (`N runs in S s`), so the
//! process start and the spec's compile are not in it; the mock's request count checks
//! that every run made exactly its three calls.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::bench_live::{completion, role_and_prompt};
use crate::measure::load_average;

/// The three-call spec the runs execute.
const SPEC: &str = "specs/examples/review_loop.charter";
/// Inputs × repeat = the runs.
const INPUTS: usize = 10;
const REPEAT: usize = 100;
const CONCURRENCY: usize = 32;
const CALLS_PER_RUN: usize = 3;
/// The target: runs per second on two cores.
const TARGET_RUNS_PER_SECOND: f64 = 500.0;

/// Runs the section with the `charter` binary at `charter`; whether it met the target.
pub fn bench_eval(root: &Path, charter: &Path) -> bool {
    match eval_runs(root, charter) {
        Ok(met) => met,
        Err(error) => {
            println!("eval: {error:#}");
            false
        }
    }
}

fn eval_runs(root: &Path, charter: &Path) -> anyhow::Result<bool> {
    let calls = Arc::new(AtomicUsize::new(0));
    let (uri, stop) = serve_mock(calls.clone())?;
    let dir = std::env::temp_dir().join(format!("charter-eval-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let inputs = dir.join("inputs.jsonl");
    let lines: Vec<String> = (1..=INPUTS)
        .map(|topic| json!({"input": {"goal": format!("topic-{topic}")}}).to_string())
        .collect();
    std::fs::write(&inputs, lines.join("\n") + "\n")?;
    let output = Command::new(charter)
        .current_dir(root)
        .args(["eval", SPEC, "--inputs"])
        .arg(&inputs)
        .args([
            "--repeat",
            &REPEAT.to_string(),
            "--concurrency",
            &CONCURRENCY.to_string(),
        ])
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{uri}/v1"))
        .env("OPENAI_API_KEY", "sk-bench-eval")
        .env("NO_COLOR", "1")
        .output()?;
    let _ = std::fs::remove_dir_all(&dir);
    drop(stop);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let runs = INPUTS * REPEAT;
    println!(
        "eval: `charter eval {SPEC} --repeat {REPEAT} --concurrency {CONCURRENCY}` on {INPUTS} inputs ({runs} runs of {CALLS_PER_RUN} calls) against a wiremock model on 127.0.0.1"
    );
    let Some(speed) = stderr.lines().find(|line| line.contains(" runs/s)")) else {
        anyhow::bail!(
            "the eval printed no speed line (exit {:?}):\n{stderr}",
            output.status.code()
        );
    };
    let per_second = runs_per_second(speed).unwrap_or(0.0);
    let answered = calls.load(Ordering::SeqCst);
    println!(
        "  {speed}  (target ≥ {TARGET_RUNS_PER_SECOND:.0} runs/s; load average {})",
        load_average()
    );
    let mut met = output.status.success();
    if !met {
        println!(
            "  ^ the eval did not pass (exit {:?}):\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout)
        );
    }
    if answered != runs * CALLS_PER_RUN {
        println!(
            "  ^ expected {} calls ({CALLS_PER_RUN} per run), the mock answered {answered}",
            runs * CALLS_PER_RUN
        );
        met = false;
    }
    if per_second < TARGET_RUNS_PER_SECOND {
        println!("  ^ under target");
    }
    Ok(met)
}

/// Starts the mock on a thread of its own (one core's worth: a current-thread runtime):
/// its address, and the sender whose drop stops it.
fn serve_mock(
    calls: Arc<AtomicUsize>,
) -> anyhow::Result<(String, tokio::sync::oneshot::Sender<()>)> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (address, started) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("eval bench mock".to_string())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let server = MockServer::builder()
                    .disable_request_recording()
                    .start()
                    .await;
                Mock::given(method("POST"))
                    .respond_with(Model { calls })
                    .mount(&server)
                    .await;
                let _ = address.send(server.uri());
                let _ = stopped.await;
            });
        })?;
    let uri = started
        .recv_timeout(std::time::Duration::from_secs(30))
        .map_err(|_| anyhow::anyhow!("the mock model did not start"))?;
    Ok((uri, stop))
}

/// `1000 runs in 1.52 s (657 runs/s)` -> 657.
fn runs_per_second(line: &str) -> Option<f64> {
    let (_, rest) = line.rsplit_once('(')?;
    rest.split_whitespace().next()?.parse().ok()
}

/// `review_loop`'s three roles, each answering by what its request holds.
struct Model {
    calls: Arc<AtomicUsize>,
}

impl Respond for Model {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let (role, prompt) = role_and_prompt(request);
        let after = |start: &str| {
            prompt
                .split_once(start)
                .and_then(|(_, rest)| rest.split(['.', ' ']).next())
                .unwrap_or_default()
                .to_string()
        };
        let content = match role.as_str() {
            "writer" => {
                let topic = after("post about ");
                json!({"title": format!("On {topic}"), "body": format!("All about {topic}.")})
            }
            "reviewer" => json!({"relevance": 9, "verdict": "PASS", "notes": "on topic"}),
            "finalizer" => {
                json!({"candidate_id": after("Deliver candidate "), "summary": "a post"})
            }
            _ => return ResponseTemplate::new(400),
        };
        completion(&content, 120, 40)
    }
}

/// The `charter` binary beside this xtask binary (the same profile), if it was built.
pub fn charter_beside_xtask() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let charter = me
        .parent()?
        .join(format!("charter{}", std::env::consts::EXE_SUFFIX));
    charter.is_file().then_some(charter)
}

#[cfg(test)]
mod tests {
    use super::runs_per_second;

    #[test]
    fn the_speed_is_read_off_the_eval_s_line() {
        assert_eq!(
            runs_per_second("1000 runs in 1.52 s (657 runs/s)"),
            Some(657.0)
        );
        assert_eq!(runs_per_second("no figure"), None);
    }
}
