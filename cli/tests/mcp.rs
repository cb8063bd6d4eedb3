//! Specs that take tools from MCP servers (DESIGN §19), end to end, before Charter speaks MCP: the example checks clean against the repository's `charter.lock`, prints as a graph and formats; a hand-written scenario that calls `files.read_text_file` replays (its `permit` holds); a live run offers the server's tools to no model and says why.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const EXAMPLE: &str = "specs/examples/mcp_files.charter";

/// What `charter lock` wrote for the example's server (checked against it, offline).
const LOCK: &str = "charter.lock";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn charter(directory: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command
        .current_dir(directory)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

fn output(mut command: Command) -> Output {
    command.output().unwrap_or_else(|error| panic!("{error}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A project holding the example spec and its lock, and a scenario `scen` that reads `path`.
fn project(name: &str, path: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-cli-mcp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(dir.join("specs"));
    let _ = std::fs::create_dir_all(dir.join("scen"));
    let spec = std::fs::read_to_string(repository().join(EXAMPLE)).expect("the example");
    let _ = std::fs::write(dir.join("specs/mcp_files.charter"), spec);
    let lock = std::fs::read_to_string(repository().join(LOCK)).expect("the lock");
    let _ = std::fs::write(dir.join(LOCK), lock);
    let _ = std::fs::write(
        dir.join("scen/scenario.yaml"),
        "spec: specs/mcp_files.charter\n\
         description: the reader reads one file through the MCP filesystem server and answers\n\
         input: { text: \"what do the notes say?\" }\n\
         expect: { outcome: completed, reason: done }\n",
    );
    let _ = std::fs::write(
        dir.join("scen/cassette.yaml"),
        format!(
            "version: 1\n\
             calls:\n\
             \x20 - step: answer\n\
             \x20   response: {{ answer: \"the notes say hello\", sources: [\"{path}\"] }}\n\
             \x20   tool_calls:\n\
             \x20     - {{ tool: files.read_text_file, args: {{ path: \"{path}\" }}, result: {{ content: [ {{ type: text, text: \"hello\" }} ] }} }}\n"
        ),
    );
    dir
}

#[test]
fn the_mcp_example_checks_clean_prints_as_a_graph_and_is_formatted() {
    let root = repository();
    let checked = output(charter(&root, &["check", EXAMPLE]));
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked.stderr));
    assert!(
        !text(&checked.stderr).contains("warning"),
        "{}",
        text(&checked.stderr)
    );
    let formatted = output(charter(&root, &["fmt", "--check", EXAMPLE]));
    assert_eq!(
        formatted.status.code(),
        Some(0),
        "{}",
        text(&formatted.stderr)
    );
    let mermaid = output(charter(&root, &["graph", EXAMPLE]));
    assert_eq!(mermaid.status.code(), Some(0), "{}", text(&mermaid.stderr));
    assert!(text(&mermaid.stdout).contains("answer: reader(request)"));
    let json = output(charter(&root, &["graph", EXAMPLE, "--format", "json"]));
    let spec: Value = serde_json::from_slice(&json.stdout).expect("the compiled spec");
    assert_eq!(
        spec["mcp"]["files"]["command"],
        json!([
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "data"
        ])
    );
    assert_eq!(
        spec["mcp"]["files"]["tools"],
        json!(["read_text_file", "list_directory"])
    );
    assert_eq!(
        spec["roles"]["reader"]["tools"],
        json!(["files.list_directory", "files.read_text_file"])
    );
}

#[test]
fn a_recorded_call_of_an_mcp_tool_replays_and_its_permit_holds() {
    let allowed = project("allowed", "data/notes.md");
    let replayed = output(charter(&allowed, &["replay", "scen"]));
    let stderr = text(&replayed.stderr);
    assert_eq!(replayed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("tool files.read_text_file\n"), "{stderr}");
    assert!(!stderr.contains("DENIED"), "{stderr}");

    // A path the permit refuses: the recorded call is denied by the rule, unrun.
    let refused = project("refused", "/etc/passwd");
    let replayed = output(charter(
        &refused,
        &["replay", "scen", "--events", "events.jsonl"],
    ));
    let stderr = text(&replayed.stderr);
    assert_eq!(replayed.status.code(), Some(0), "{stderr}");
    let events: Vec<Value> = std::fs::read_to_string(refused.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let denied: Vec<&Value> = events
        .iter()
        .filter(|event| event["kind"] == "tool_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{events:?}");
    assert_eq!(denied[0]["tool"], "files.read_text_file");
    assert!(
        denied[0]["rule"]
            .as_str()
            .is_some_and(|rule| rule.starts_with("permit files.read_text_file when")),
        "{:?}",
        denied[0]
    );
    let _ = std::fs::remove_dir_all(&allowed);
    let _ = std::fs::remove_dir_all(&refused);
}

/// A model that answers at once, and keeps the tools each request offered it.
struct Reader {
    offered: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl Respond for Reader {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        if let Ok(mut offered) = self.offered.lock() {
            offered.push(body.get("tools").cloned().unwrap_or(Value::Null));
        }
        let answer = json!({"answer": "no files were read", "sources": []});
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.to_string()},
                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 8}
        }))
    }
}

#[tokio::test]
async fn a_live_run_offers_no_mcp_tool_to_the_model_and_says_why() {
    let offered = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Reader {
            offered: offered.clone(),
        })
        .mount(&server)
        .await;
    let dir = project("live", "data/notes.md");
    let _ = std::fs::write(
        dir.join("request.json"),
        json!({"text": "what do the notes say?"}).to_string(),
    );
    let mut command = charter(
        &dir,
        &["run", "specs/mcp_files.charter", "--input", "request.json"],
    );
    command
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-test");
    let ran = output(command);
    let stderr = text(&ran.stderr);
    assert_eq!(ran.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "MCP server `files` is not connected: this build of charter does not speak MCP yet, so `files.list_directory`, `files.read_text_file` are not offered to the model"
        ),
        "{stderr}"
    );
    let offered = offered
        .lock()
        .map(|offered| offered.clone())
        .unwrap_or_default();
    assert!(!offered.is_empty(), "the model was not called: {stderr}");
    assert!(
        offered.iter().all(Value::is_null),
        "tools were offered: {offered:?}"
    );
    let answer: Value = serde_json::from_slice(&ran.stdout).unwrap_or(Value::Null);
    assert_eq!(answer["answer"], "no files were read");
    let _ = std::fs::remove_dir_all(&dir);
}
