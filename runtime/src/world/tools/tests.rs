//! Unit tests of the tool box and command tools: contracts checked on both sides, every command failure a value.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::testing::compile_spec;

const SPEC: &str = r#"spec t version "1"
contract Request { goal: string }
contract Query { text: string  limit: int(1..=10) = 3 }
contract Hits { urls: list<string> }
contract Essay { text: string }
tool search { input: Query  output: Hits  effect: read }
tool publish { input: Query  output: Hits  effect: external }
role writer { model: "openai:gpt-4o-mini" prompt: """{{ request.goal }}""" input: Request output: Essay tools: [search] max_tool_calls: 2 }
flow {
  write = writer(request) -> done
}
"#;

fn tool_box() -> ToolBox {
    ToolBox::for_spec(&compile_spec(SPEC))
}

async fn run_command(command: &str, args: Value) -> Result<Value, ToolError> {
    let tools = tool_box()
        .with("search", CommandTool::new(command))
        .unwrap_or_else(|error| panic!("{error}"));
    tools.call("search", args).await
}

fn failure_text(result: Result<Value, ToolError>) -> String {
    match result {
        Err(ToolError::Failed(text)) => text,
        other => panic!("expected a tool failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_command_gets_the_arguments_on_stdin_and_answers_on_stdout() {
    // The arguments arrive with their defaults filled in (`limit: 3`).
    let result = run_command(
        r#"printf '{"urls": ["%s"]}' "$(sed 's/"/\\"/g')""#,
        json!({"text": "rust"}),
    )
    .await;
    assert_eq!(
        result,
        Ok(json!({"urls": [r#"{"limit":3,"text":"rust"}"#]}))
    );
    let echoed = run_command(
        r#"cat >/dev/null; echo '{"urls": ["a", "b"]}'"#,
        json!({"text": "q"}),
    )
    .await;
    assert_eq!(echoed, Ok(json!({"urls": ["a", "b"]})));
}

#[tokio::test]
async fn command_failures_are_values_told_to_the_model() {
    let exit =
        failure_text(run_command("echo 'no such index' >&2; exit 3", json!({"text": "q"})).await);
    assert!(
        exit.contains("exit status 3") && exit.contains("no such index"),
        "{exit}"
    );
    let not_json = failure_text(run_command("echo 'hello {'", json!({"text": "q"})).await);
    assert!(not_json.contains("not JSON"), "{not_json}");
    let silent = failure_text(run_command("true", json!({"text": "q"})).await);
    assert!(silent.contains("printed nothing"), "{silent}");
    // A command that never reads its input still gets a clean answer.
    let ignores_stdin = run_command(r#"echo '{"urls": []}'"#, json!({"text": "q"})).await;
    assert_eq!(ignores_stdin, Ok(json!({"urls": []})));
    let missing =
        failure_text(run_command("/nonexistent/charter-tool-xyz", json!({"text": "q"})).await);
    assert!(missing.contains("exit status 127"), "{missing}");
}

#[tokio::test]
async fn arguments_and_results_are_checked_against_the_contracts() {
    let bad_args = run_command(r#"echo '{"urls": []}'"#, json!({"txt": "q"})).await;
    let Err(ToolError::InvalidArguments {
        contract,
        violations,
    }) = bad_args
    else {
        panic!("expected invalid arguments, got {bad_args:?}");
    };
    assert_eq!(contract, "Query");
    let text = violations_text(&violations);
    assert!(text.contains("missing required field `text`"), "{text}");
    assert!(text.contains("did you mean `text`"), "{text}");

    let bad_result = run_command(r#"echo '{"urls": "not a list"}'"#, json!({"text": "q"})).await;
    assert!(
        matches!(&bad_result, Err(ToolError::InvalidResult { contract, .. }) if contract == "Hits"),
        "{bad_result:?}"
    );
    let message = bad_result
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(message.contains("urls: expected list<string>"), "{message}");
}

#[tokio::test]
async fn rust_tools_and_missing_ones() {
    let tools = tool_box()
        .with(
            "search",
            FnTool::new(|args: Value| async move {
                Ok(json!({"urls": [args["text"].clone(), args["limit"].clone()]}))
            }),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    // `limit` is an int, not a string: the result breaks `Hits`.
    assert!(matches!(
        tools.call("search", json!({"text": "q"})).await,
        Err(ToolError::InvalidResult { .. })
    ));
    assert_eq!(
        tools.call("publish", json!({"text": "q"})).await,
        Err(ToolError::Unavailable {
            tool: "publish".into()
        })
    );
    assert_eq!(
        tools.call("nope", json!({})).await,
        Err(ToolError::Unknown {
            tool: "nope".into()
        })
    );
    assert_eq!(tools.unimplemented(), ["publish"]);
    let error = tool_box()
        .with("serch", CommandTool::new("true"))
        .err()
        .map(|error| error.to_string());
    assert_eq!(
        error.as_deref(),
        Some("the spec declares no tool `serch`; did you mean `search`?")
    );
    assert_eq!(
        format!("{tools:?}"),
        r#"ToolBox { declared: ["publish", "search"], implemented: ["search"] }"#
    );
}

#[test]
fn a_definition_carries_the_input_schema_without_its_draft() {
    let tools = tool_box();
    let definition = tools
        .definition("search")
        .unwrap_or_else(|| panic!("no definition"));
    assert_eq!(definition.name, "search");
    assert!(
        definition.description.contains("`Query`"),
        "{}",
        definition.description
    );
    assert!(definition.input_schema.get("$schema").is_none());
    assert_eq!(definition.input_schema["type"], "object");
    assert!(definition.input_schema["properties"].get("text").is_some());
    assert!(tools.definition("nope").is_none());
    let _shared: Arc<dyn Tool> = Arc::new(CommandTool::new("true"));
}

/// A role's tools from an MCP server (`SERVER.TOOL`) have no schema before Charter speaks
/// MCP: no definition is offered to a model, none counts as a declared tool left
/// unimplemented, and a call is an unknown tool's error, never a panic.
#[tokio::test]
async fn tools_of_mcp_servers_are_not_offered_before_charter_speaks_mcp() {
    let spec = compile_spec(
        &SPEC
            .replace("tools: [search]", "tools: [search, files.read_text_file]")
            .replace(
                "flow {",
                "mcp files { command: [\"npx\", \"server\"]  tools: [read_text_file] }\nflow {",
            ),
    );
    let tools = ToolBox::for_spec(&spec);
    assert!(tools.definition("search").is_some());
    assert!(tools.definition("files.read_text_file").is_none());
    assert_eq!(tools.unimplemented(), ["publish", "search"]);
    assert_eq!(
        tools
            .call("files.read_text_file", json!({"path": "data/x"}))
            .await,
        Err(ToolError::Unknown {
            tool: "files.read_text_file".into()
        })
    );
}

#[test]
fn tails_cut_at_character_boundaries() {
    assert_eq!(tail("héllo", 4), "llo");
    assert_eq!(tail("abc", 10), "abc");
    assert_eq!(tail("", 3), "");
}

/// A scratch directory of its own for one test.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-tools-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("{error}"));
    dir
}

/// Whether process `pid` is still running (a zombie waiting for its parent is not).
fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// Waits (up to a minute, polling) for `pid` to stop running; whether it did.
async fn ends(pid: &str) -> bool {
    for _ in 0..600 {
        if !running(pid) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

/// The process id a command wrote to `file`.
fn pid_in(file: &std::path::Path) -> String {
    std::fs::read_to_string(file)
        .unwrap_or_else(|error| panic!("{}: {error}", file.display()))
        .trim()
        .to_string()
}

#[tokio::test]
async fn a_child_left_in_the_background_does_not_hold_the_call_or_outlive_it() {
    let dir = scratch("background");
    let pid_file = dir.join("pid");
    let command = format!(
        r#"sleep 100 & echo $! > '{}'; echo '{{"urls": []}}'"#,
        pid_file.display()
    );
    // On the old code the call waited for the sleep (it held stdout open): 100 s.
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(50),
        run_command(&command, json!({"text": "q"})),
    )
    .await;
    assert_eq!(result, Ok(Ok(json!({"urls": []}))));
    let pid = pid_in(&pid_file);
    assert!(
        ends(&pid).await,
        "the background `sleep` {pid} outlived the call"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_dropped_call_kills_the_whole_process_group() {
    let dir = scratch("dropped");
    let pid_file = dir.join("pid");
    let ready = dir.join("ready");
    let command = format!(
        "sleep 100 & echo $! > '{}'; touch '{}'; wait",
        pid_file.display(),
        ready.display()
    );
    let tools = tool_box()
        .with("search", CommandTool::new(command))
        .unwrap_or_else(|error| panic!("{error}"));
    {
        let call = tools.call("search", json!({"text": "q"}));
        tokio::pin!(call);
        // Run the call until the command has started its child, then drop it (as a
        // timeout or a cancelled run does).
        loop {
            tokio::select! {
                result = &mut call => panic!("the command ended: {result:?}"),
                () = tokio::time::sleep(std::time::Duration::from_millis(20)) => {
                    if ready.exists() {
                        break;
                    }
                }
            }
        }
    }
    let pid = pid_in(&pid_file);
    assert!(
        ends(&pid).await,
        "the `sleep` {pid} outlived its dropped call"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn output_past_the_limit_stops_the_command() {
    // 64 MB at most, should the limit not hold; the limit is 1 KB.
    let tools = tool_box()
        .with(
            "search",
            CommandTool::new("yes | head -c 67108864").with_max_output_bytes(1024),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    let text = failure_text(tools.call("search", json!({"text": "q"})).await);
    assert!(
        text.contains("printed more than the limit of 1 KB"),
        "{text}"
    );
}

const LIMITED: &str = r#"spec t version "1"
contract Request { goal: string }
contract Query { text: string }
contract Hits { urls: list<string> }
tool flaky { input: Query  output: Hits  effect: read  timeout: 15m  retry: 2 backoff 1s }
tool once  { input: Query  output: Hits  effect: read  timeout: 15m }
flow {
  first  = tool flaky({text: request.goal}) -> second
  second = tool once({text: request.goal}) -> done
}
"#;

/// A tool that takes 20 minutes on its first `slow` calls, fails on the next `failing`,
/// then answers; counting every call.
fn scripted(slow: u64, failing: u64, calls: Arc<std::sync::Mutex<u64>>) -> impl Tool {
    FnTool::new(move |_args| {
        let calls = calls.clone();
        async move {
            let call = {
                let mut count = calls
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                *count += 1;
                *count
            };
            if call <= slow {
                tokio::time::sleep(std::time::Duration::from_secs(20 * 60)).await;
            } else if call <= slow + failing {
                return Err(ToolError::Failed(format!("failure {call}")));
            }
            Ok(json!({"urls": [format!("call {call}")]}))
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_limited_call_is_cut_at_its_timeout_and_retried_with_a_doubling_backoff() {
    let calls = Arc::new(std::sync::Mutex::new(0));
    let tools = ToolBox::for_spec(&compile_spec(LIMITED))
        .with("flaky", scripted(1, 1, calls.clone()))
        .unwrap_or_else(|error| panic!("{error}"));
    let started = tokio::time::Instant::now();
    let (result, latency) = tools.call_limited("flaky", json!({"text": "q"})).await;
    // A 15-minute timeout, 1 s, a failure, 2 s, then the answer.
    assert_eq!(result, Ok(json!({"urls": ["call 3"]})));
    assert_eq!(*calls.lock().unwrap_or_else(|p| p.into_inner()), 3);
    assert_eq!(
        started.elapsed(),
        std::time::Duration::from_secs(15 * 60 + 3)
    );
    assert_eq!(
        latency,
        std::time::Duration::ZERO,
        "the last attempt's own time"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_without_retries_reports_its_timeout() {
    let calls = Arc::new(std::sync::Mutex::new(0));
    let tools = ToolBox::for_spec(&compile_spec(LIMITED))
        .with("once", scripted(5, 0, calls.clone()))
        .unwrap_or_else(|error| panic!("{error}"));
    let (result, latency) = tools.call_limited("once", json!({"text": "q"})).await;
    assert_eq!(
        result,
        Err(ToolError::TimedOut {
            tool: "once".into(),
            after_ms: 900_000
        })
    );
    assert_eq!(
        result.map_err(|error| error.to_string()),
        Err("tool `once` timed out after 15m".to_string())
    );
    assert_eq!(latency, std::time::Duration::from_secs(15 * 60));
    assert_eq!(*calls.lock().unwrap_or_else(|p| p.into_inner()), 1);
    // Arguments that break the input contract are not retried.
    let (refused, _) = tools.call_limited("once", json!({"words": 1})).await;
    assert!(matches!(refused, Err(ToolError::InvalidArguments { .. })));
    assert_eq!(*calls.lock().unwrap_or_else(|p| p.into_inner()), 1);
}

/// A command learns who calls it from `CHARTER_ROLE` and `CHARTER_STEP`; with no role (a
/// `tool` step) or no context, the variable is unset (`cli/tests/tools.rs` checks that a
/// value in Charter's own environment is not passed on).
#[tokio::test]
async fn a_command_is_told_the_calling_role_and_step_in_its_environment() {
    let tools = tool_box()
        .with(
            "search",
            CommandTool::new(
                r#"cat >/dev/null; printf '{"urls": ["%s", "%s"]}' "${CHARTER_ROLE-unset}" "${CHARTER_STEP-unset}""#,
            ),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    let args = json!({"text": "q"});
    let by_role = tools
        .call_with(
            &ToolContext::role("writer", "write"),
            "search",
            args.clone(),
        )
        .await;
    assert_eq!(by_role, Ok(json!({"urls": ["writer", "write"]})));
    let by_step = tools
        .call_with(&ToolContext::step("audit"), "search", args.clone())
        .await;
    assert_eq!(by_step, Ok(json!({"urls": ["unset", "audit"]})));
    let (limited, _) = tools
        .call_limited_with(
            &ToolContext::role("critic", "judge"),
            "search",
            args.clone(),
        )
        .await;
    assert_eq!(limited, Ok(json!({"urls": ["critic", "judge"]})));
    assert_eq!(
        tools.call("search", args).await,
        Ok(json!({"urls": ["unset", "unset"]}))
    );
}
