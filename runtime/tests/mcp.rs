//! MCP servers as the client sees them (DESIGN §19), against the real `@modelcontextprotocol/server-everything` over stdio (installed into `target/mcp/` by `.ci/run`; without it the test is skipped, except in CI where it fails): its identity and every page of its tools; calls checked against the locked input and output schemas and bounded in time; and servers that will not start, hang in `initialize` or answer garbage, each refused in bounded time with a sentence.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use charter_runtime::world::mcp::{Connection, Endpoint, ServerConfig, lock_server};
use charter_runtime::world::sandbox::{Grants, Sandbox};

/// The package and version the test runs (and `.ci/run` installs).
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// server-everything's entry point, installed into `target/mcp/` if npm can. `None`:
/// skip (a failure in CI).
fn everything() -> Option<PathBuf> {
    let prefix = repository().join("target/mcp");
    let entry = prefix.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.exists() {
        let _ = std::fs::create_dir_all(&prefix);
        let _ = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(EVERYTHING)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
    if entry.exists() {
        return Some(entry);
    }
    let install = format!(
        "npm install --no-audit --no-fund --prefix {} {EVERYTHING}",
        prefix.display()
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "server-everything is not installed: {install}"
    );
    eprintln!("skipped: server-everything is not installed ({install})");
    None
}

fn config(name: &str, argv: &[&str], timeout: Duration) -> ServerConfig {
    ServerConfig {
        name: name.to_string(),
        endpoint: Endpoint::Command {
            argv: argv.iter().map(ToString::to_string).collect(),
            env: Vec::new(),
        },
        timeout,
        grants: Grants::default(),
    }
}

#[tokio::test]
async fn server_everything_is_locked_with_every_tool_and_its_schema() {
    let Some(entry) = everything() else {
        return;
    };
    let entry = entry.to_string_lossy().into_owned();
    let server = config(
        "everything",
        &["node", &entry, "stdio"],
        Duration::from_secs(30),
    );
    let locked = lock_server(&server, &Sandbox::off())
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(!locked.protocol_version.is_empty());
    assert!(
        locked.server.name.contains("everything"),
        "{:?}",
        locked.server
    );
    let echo = locked
        .tools
        .get("echo")
        .unwrap_or_else(|| panic!("no echo in {:?}", locked.tools.keys()));
    assert_eq!(
        echo.input_schema["type"], "object",
        "{:?}",
        echo.input_schema
    );
    assert!(echo.input_schema["properties"]["message"].is_object());
    assert!(echo.hash.starts_with("sha256:"));
    assert!(locked.tools.len() >= 5, "{:?}", locked.tools.keys());
    assert_eq!(locked.command.as_deref().map(<[String]>::len), Some(3));
}

#[tokio::test]
async fn a_server_that_will_not_start_is_named_with_what_it_said() {
    let server = config(
        "broken",
        &[
            "sh",
            "-c",
            "echo 'cannot find module ./dist/index.js' >&2; exit 1",
        ],
        Duration::from_secs(10),
    );
    let error = Connection::open(&server, &Sandbox::off())
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(error.starts_with("MCP server `broken`:"), "{error}");
    assert!(error.contains("cannot find module"), "{error}");
}

#[tokio::test]
async fn a_server_that_hangs_or_answers_garbage_is_refused_in_bounded_time() {
    for (name, script) in [
        ("hangs", "cat >/dev/null"),
        (
            "garbage",
            "cat >/dev/null & while true; do echo 'not json at all'; sleep 0.1; done",
        ),
    ] {
        let server = config(name, &["sh", "-c", script], Duration::from_secs(2));
        let started = Instant::now();
        let error = Connection::open(&server, &Sandbox::off())
            .await
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(error.contains(&format!("`{name}`")), "{error}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name}: {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn calls_are_checked_against_the_locked_schemas_and_bounded_in_time() {
    let Some(entry) = everything() else {
        return;
    };
    let entry = entry.to_string_lossy().into_owned();
    let server = config(
        "everything",
        &["node", &entry, "stdio"],
        Duration::from_secs(3),
    );
    let mut connection = Connection::open(&server, &Sandbox::off())
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let tools = connection
        .tools()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let tool = |name: &str| {
        tools
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {:?}", tools.keys()))
    };

    let echoed = connection
        .call(
            "echo",
            &tool("echo"),
            json!({"message": "hello from charter"}),
        )
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(!echoed.is_error);
    assert!(echoed.text().contains("hello from charter"), "{echoed:?}");

    // Arguments that break the inputSchema: refused before the call, each violation with
    // its path.
    let refused = connection
        .call("echo", &tool("echo"), json!({"message": 7}))
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(
        refused.contains("do not match its inputSchema"),
        "{refused}"
    );
    assert!(refused.contains("at /message:"), "{refused}");

    // structuredContent, checked against the outputSchema.
    let weather = connection
        .call(
            "get-structured-content",
            &tool("get-structured-content"),
            json!({"location": "Chicago"}),
        )
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        weather
            .structured
            .as_ref()
            .map(|value| value["temperature"].clone()),
        Some(json!(36))
    );
    // The same answer against an outputSchema it breaks is a tool error.
    let mut strict = tool("get-structured-content");
    strict.output_schema = Some(json!({"type": "object", "required": ["wind"]}));
    let broken = connection
        .call(
            "get-structured-content",
            &strict,
            json!({"location": "Chicago"}),
        )
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(
        broken.contains("does not match its outputSchema"),
        "{broken}"
    );

    // A call that runs past the server's timeout is cancelled and the server stopped.
    let started = Instant::now();
    let slow = connection
        .call(
            "trigger-long-running-operation",
            &tool("trigger-long-running-operation"),
            json!({"duration": 30, "steps": 3}),
        )
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(slow.contains("did not answer within 3s"), "{slow}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(!connection.is_alive());
}
