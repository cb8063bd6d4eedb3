//! MCP servers (DESIGN §19), as a client through the official SDK (`rmcp`): a stdio server started as a sandboxed child in its own process group, its handshake bounded in time, every page of its `tools/list` read within bounds, and what it offered kept as a [`LockedServer`] for `charter.lock`.
//!
//! A stdio server is started like any tool process (DESIGN §20): through the sandbox's
//! trampoline, in a process group of its own that is killed when the connection ends, its
//! working directory Charter's (the project). Its stderr is kept (the last
//! [`STDERR_TAIL`] bytes), so a server that will not start is reported with what it said.
//! `initialize` and each `tools/list` page are bounded by the server's timeout; a list is
//! bounded to [`MAX_TOOLS`] tools and [`MAX_PAGES`] pages, and a message to rmcp's line
//! limit (16 MiB), so a server that answers garbage, hangs or floods fails with a sentence
//! instead of holding the run. [`drift`] says how a live offer differs from the lock.

use std::collections::{BTreeMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams};
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use crate::formats::lock::{LockedServer, LockedTool, ServerIdentity};
use crate::world::sandbox::{Grants, Sandbox};

/// The most tools one server's list may hold.
pub const MAX_TOOLS: usize = 10_000;

/// The most pages of `tools/list` read from one server.
pub const MAX_PAGES: usize = 1_000;

/// The bytes of a server's stderr kept for its errors.
pub const STDERR_TAIL: usize = 2_000;

/// The handshake's and each list page's bound when a server declares no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A stdio server: the command (program and arguments) and the variables it gets.
    Command {
        argv: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// A streamable-HTTP server.
    Url {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// One declared server, its secrets read from the environment.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub name: String,
    pub endpoint: Endpoint,
    /// Bounds the handshake, each list page and each call.
    pub timeout: Duration,
    /// What its `sandbox { … }` grants a stdio server.
    pub grants: Grants,
}

/// Why a server could not be used, in a sentence that names it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("MCP server `{server}`: {message}")]
pub struct McpError {
    pub server: String,
    pub message: String,
}

/// A connection to one server, ended (its process group killed) when dropped.
pub struct Connection {
    name: String,
    service: RunningService<RoleClient, ()>,
    timeout: Duration,
    /// The stdio server's process and its sandbox (its directory, its cgroup).
    process: Option<Process>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Connection")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A stdio server's child, killed with its whole group on drop.
struct Process {
    _child: tokio::process::Child,
    group: Option<rustix::process::Pid>,
    _confined: crate::world::sandbox::Confined,
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(group) = self.group {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Connection {
    /// Starts (or, for a URL, reaches) `config`'s server and runs `initialize`, within its
    /// timeout. A stdio server runs in `sandbox`.
    pub async fn open(config: &ServerConfig, sandbox: &Sandbox) -> Result<Connection, McpError> {
        let failed = |message: String| McpError {
            server: config.name.clone(),
            message,
        };
        match &config.endpoint {
            Endpoint::Url { url, .. } => Err(failed(format!(
                "`{url}`: servers over streamable HTTP are not reached by this build yet; start the server over stdio (`command: [...]`)"
            ))),
            Endpoint::Command { argv, env } => {
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let extra: Vec<(&str, &str)> = env
                    .iter()
                    .map(|(name, value)| (name.as_str(), value.as_str()))
                    .collect();
                let mut confined =
                    sandbox
                        .confine(&argv, &config.grants, &extra)
                        .map_err(|error| {
                            failed(format!("cannot start `{}`: {error}", argv.join(" ")))
                        })?;
                let mut command =
                    std::mem::replace(&mut confined.command, tokio::process::Command::new("true"));
                let mut child = command
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|error| {
                        failed(format!("cannot start `{}`: {error}", argv.join(" ")))
                    })?;
                let group = child
                    .id()
                    .and_then(|id| i32::try_from(id).ok())
                    .and_then(rustix::process::Pid::from_raw);
                let tail = Arc::new(Mutex::new(VecDeque::new()));
                if let Some(stderr) = child.stderr.take() {
                    tokio::spawn(keep_tail(stderr, tail.clone()));
                }
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    return Err(failed("its pipes could not be opened".to_string()));
                };
                let process = Process {
                    _child: child,
                    group,
                    _confined: confined,
                };
                let said = || {
                    let bytes: Vec<u8> = tail
                        .lock()
                        .map(|tail| tail.iter().copied().collect())
                        .unwrap_or_default();
                    let text = String::from_utf8_lossy(&bytes).trim().to_string();
                    if text.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; it said: {}",
                            crate::world::escape::block(&text, STDERR_TAIL)
                        )
                    }
                };
                let started = tokio::time::timeout(config.timeout, ().serve((stdout, stdin))).await;
                let service = match started {
                    Ok(Ok(service)) => service,
                    Ok(Err(error)) => {
                        // Give its last words a moment to arrive.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        return Err(failed(format!("`initialize` failed ({error}){}", said())));
                    }
                    Err(_) => {
                        return Err(failed(format!(
                            "no answer to `initialize` within {}{}",
                            crate::formats::scenario::duration_text::format(config.timeout),
                            said()
                        )));
                    }
                };
                Ok(Connection {
                    name: config.name.clone(),
                    service,
                    timeout: config.timeout,
                    process: Some(process),
                })
            }
        }
    }

    /// The protocol version the server agreed to and its name and version.
    pub fn identity(&self) -> (String, ServerIdentity) {
        let info = self.service.peer_info();
        let protocol = info
            .as_ref()
            .and_then(|info| serde_json::to_value(&info.protocol_version).ok())
            .and_then(|value| value.as_str().map(str::to_string))
            .unwrap_or_default();
        let identity = info
            .as_ref()
            .and_then(|info| info.server_info.as_ref())
            .map(|server| ServerIdentity {
                name: server.name.clone(),
                version: server.version.clone(),
            })
            .unwrap_or_default();
        (protocol, identity)
    }

    /// Every tool the server lists, page after page, by name; bounded by [`MAX_TOOLS`],
    /// [`MAX_PAGES`] and the timeout per page.
    pub async fn tools(&self) -> Result<BTreeMap<String, LockedTool>, McpError> {
        let failed = |message: String| McpError {
            server: self.name.clone(),
            message,
        };
        let mut tools = BTreeMap::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor.clone());
            let page = tokio::time::timeout(self.timeout, self.service.list_tools(Some(params)))
                .await
                .map_err(|_| failed("no answer to `tools/list` in time".to_string()))?
                .map_err(|error| failed(format!("`tools/list` failed: {error}")))?;
            for tool in page.tools {
                if tools.len() >= MAX_TOOLS {
                    return Err(failed(format!(
                        "it lists more than {MAX_TOOLS} tools; Charter reads no more"
                    )));
                }
                let name = tool.name.to_string();
                let locked = LockedTool::new(
                    tool.description.map(|text| text.to_string()),
                    Value::Object((*tool.input_schema).clone()),
                    tool.output_schema
                        .map(|schema| Value::Object((*schema).clone())),
                    tool.annotations
                        .and_then(|annotations| serde_json::to_value(annotations).ok()),
                );
                tools.insert(name, locked);
            }
            cursor = page.next_cursor.map(|cursor| cursor.to_string());
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(failed(format!(
            "its `tools/list` went on past {MAX_PAGES} pages; Charter reads no more"
        )))
    }

    /// Ends the session and the server.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// What a tool call answered: its content blocks (as MCP's JSON), its structured content,
/// and whether the server marked it an error (`isError`).
#[derive(Clone, Debug, PartialEq)]
pub struct CallResult {
    pub content: Vec<Value>,
    pub structured: Option<Value>,
    pub is_error: bool,
}

impl CallResult {
    /// The result as a tool's answer: `{content, structuredContent?, isError?}`.
    pub fn to_value(&self) -> Value {
        let mut value = serde_json::json!({ "content": self.content });
        if let Some(structured) = &self.structured {
            value["structuredContent"] = structured.clone();
        }
        if self.is_error {
            value["isError"] = Value::Bool(true);
        }
        value
    }

    /// The text of its text blocks, one after another (what a model reads of an error).
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Where `value` breaks `schema` (JSON Schema), one line each with its path: `at /message:
/// "message" is a required property`. A schema that is not one is a violation too.
pub fn violations(schema: &Value, value: &Value) -> Vec<String> {
    let validator = match jsonschema::validator_for(schema) {
        Ok(validator) => validator,
        Err(error) => return vec![format!("the schema is not a valid JSON Schema: {error}")],
    };
    validator
        .iter_errors(value)
        .map(|error| {
            let path = error.instance_path().to_string();
            let path = if path.is_empty() {
                "/".to_string()
            } else {
                path
            };
            format!("at {path}: {error}")
        })
        .take(20)
        .collect()
}

impl Connection {
    /// Calls `tool` with `args`: the arguments checked against its locked `inputSchema`
    /// first (a violation is an error naming each path, and no call is made), the call
    /// bounded by the server's timeout (dropping it sends `notifications/cancelled`; then
    /// the server's group is killed, so a hung call frees its process), and a
    /// `structuredContent` checked against its `outputSchema`.
    pub async fn call(
        &mut self,
        name: &str,
        locked: &LockedTool,
        args: Value,
    ) -> Result<CallResult, McpError> {
        let failed = |message: String| McpError {
            server: self.name.clone(),
            message,
        };
        let broken = violations(&locked.input_schema, &args);
        if !broken.is_empty() {
            return Err(failed(format!(
                "the arguments of `{name}` do not match its inputSchema, so it was not called:\n{}",
                broken.join("\n")
            )));
        }
        let Value::Object(arguments) = args else {
            return Err(failed(format!(
                "the arguments of `{name}` are not an object"
            )));
        };
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        let answered = tokio::time::timeout(self.timeout, self.service.call_tool(params)).await;
        let result = match answered {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => return Err(failed(format!("`{name}` failed: {error}"))),
            Err(_) => {
                // The dropped request told the server to cancel; a stdio server that
                // still runs it is ended with its group.
                self.process = None;
                return Err(failed(format!(
                    "`{name}` did not answer within {} (cancelled; the server was stopped)",
                    crate::formats::scenario::duration_text::format(self.timeout)
                )));
            }
        };
        let content: Vec<Value> = result
            .content
            .iter()
            .filter_map(|block| serde_json::to_value(block).ok())
            .collect();
        let answer = CallResult {
            content,
            structured: result.structured_content.clone(),
            is_error: result.is_error.unwrap_or(false),
        };
        if let (Some(schema), Some(structured), false) =
            (&locked.output_schema, &answer.structured, answer.is_error)
        {
            let broken = violations(schema, structured);
            if !broken.is_empty() {
                return Err(failed(format!(
                    "the structuredContent of `{name}` does not match its outputSchema:\n{}",
                    broken.join("\n")
                )));
            }
        }
        Ok(answer)
    }

    /// Whether the server is still there to call (a stdio server stopped after a call that
    /// timed out is not: the next call needs a new connection).
    pub fn is_alive(&self) -> bool {
        self.process.is_some()
    }
}

/// What `config`'s server offers, as `charter.lock` keeps it: started in `sandbox`,
/// asked, and ended.
pub async fn lock_server(
    config: &ServerConfig,
    sandbox: &Sandbox,
) -> Result<LockedServer, McpError> {
    let connection = Connection::open(config, sandbox).await?;
    let (protocol_version, server) = connection.identity();
    let tools = connection.tools().await;
    connection.close().await;
    let (command, url) = match &config.endpoint {
        Endpoint::Command { argv, .. } => (Some(argv.clone()), None),
        Endpoint::Url { url, .. } => (None, Some(url.clone())),
    };
    Ok(LockedServer {
        command,
        url,
        protocol_version,
        server,
        tools: tools?,
    })
}

/// How a server's live offer differs from what the lock kept, one line per difference
/// (a tool new, gone or changed — its description, schemas or annotations —, another name,
/// version or protocol); none when it matches. What a run refuses to start on unless drift
/// is allowed, and what `charter lock --check` summarises under its diff.
pub fn drift(locked: &LockedServer, live: &LockedServer) -> Vec<String> {
    let mut lines = Vec::new();
    if locked.server != live.server {
        lines.push(format!(
            "it is {} {} now, {} {} in the lock",
            live.server.name, live.server.version, locked.server.name, locked.server.version
        ));
    }
    if locked.protocol_version != live.protocol_version {
        lines.push(format!(
            "it speaks protocol {} now, {} in the lock",
            live.protocol_version, locked.protocol_version
        ));
    }
    for (name, tool) in &live.tools {
        match locked.tools.get(name) {
            None => lines.push(format!("tool `{name}` is new")),
            Some(kept) => {
                // By what it holds, not by its hash: a hand edit keeps the old hash.
                let what: Vec<&str> = [
                    ("description", kept.description != tool.description),
                    ("inputSchema", kept.input_schema != tool.input_schema),
                    ("outputSchema", kept.output_schema != tool.output_schema),
                    ("annotations", kept.annotations != tool.annotations),
                ]
                .into_iter()
                .filter_map(|(field, changed)| changed.then_some(field))
                .collect();
                if !what.is_empty() {
                    lines.push(format!("tool `{name}` changed its {}", what.join(", ")));
                }
            }
        }
    }
    for name in locked.tools.keys() {
        if !live.tools.contains_key(name) {
            lines.push(format!("tool `{name}` is gone"));
        }
    }
    lines
}

/// Reads `pipe` to its end, keeping its last [`STDERR_TAIL`] bytes in `tail`.
async fn keep_tail(mut pipe: impl tokio::io::AsyncRead + Unpin, tail: Arc<Mutex<VecDeque<u8>>>) {
    let mut buffer = [0u8; 4096];
    while let Ok(read) = pipe.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        if let Ok(mut tail) = tail.lock() {
            tail.extend(&buffer[..read]);
            let excess = tail.len().saturating_sub(STDERR_TAIL);
            tail.drain(..excess);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn server(tools: &[(&str, &str)]) -> LockedServer {
        LockedServer {
            command: Some(vec!["node".into()]),
            url: None,
            protocol_version: "2025-11-25".into(),
            server: ServerIdentity {
                name: "files".into(),
                version: "1.0.0".into(),
            },
            tools: tools
                .iter()
                .map(|(name, description)| {
                    (
                        name.to_string(),
                        LockedTool::new(
                            Some(description.to_string()),
                            json!({"type": "object"}),
                            None,
                            None,
                        ),
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn drift_names_each_tool_that_is_new_gone_or_changed() {
        let locked = server(&[("read", "Reads a file"), ("list", "Lists a directory")]);
        assert!(drift(&locked, &locked).is_empty());
        let mut live = server(&[("read", "Reads any file"), ("write", "Writes a file")]);
        live.server.version = "2.0.0".into();
        assert_eq!(
            drift(&locked, &live),
            [
                "it is files 2.0.0 now, files 1.0.0 in the lock",
                "tool `read` changed its description",
                "tool `write` is new",
                "tool `list` is gone",
            ]
        );
    }
}
