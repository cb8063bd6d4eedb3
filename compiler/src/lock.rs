//! `charter.lock` (DESIGN §19): what each MCP server a spec declares offered when `charter lock` last asked it — its command or URL, protocol version, name and version, and per tool its description, `inputSchema`, `outputSchema`, annotations and a hash — so `check` and replay need no server and a drift shows in review.
//!
//! The file is YAML at the project root, sorted (servers and tools by name, object keys as
//! written by the canonical form), so the same servers give the same bytes and a change is
//! a small diff. Each tool's `hash` is the SHA-256 of its canonical JSON (description,
//! schemas and annotations), the value a run compares with the live server's.
//!
//! The format lives in the compiler, which reads the lock (text only, through the
//! `Loader`) to check a spec's MCP tools offline (`check::lock`); `charter lock` writes it
//! through the runtime's `formats::lock`, which re-exports this module.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::canonical::hash_value;
use crate::yaml::{self, YamlError};

/// The lock file's name, at the project root.
pub const LOCK_FILE: &str = "charter.lock";

/// The format's version, written first: a newer one is refused rather than misread.
pub const LOCK_VERSION: u32 = 1;

/// Every locked server, by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub version: u32,
    #[serde(default)]
    pub servers: BTreeMap<String, LockedServer>,
}

/// One server as it answered `initialize` and `tools/list`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedServer {
    /// The command a stdio server was started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The URL of a streamable-HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub protocol_version: String,
    /// The server's own name and version (`serverInfo`).
    pub server: ServerIdentity,
    #[serde(default)]
    pub tools: BTreeMap<String, LockedTool>,
}

/// `serverInfo` of `initialize`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerIdentity {
    pub name: String,
    pub version: String,
}

/// One tool as `tools/list` gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedTool {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// `sha256:…` of the tool's canonical JSON (the fields above).
    pub hash: String,
}

impl LockedTool {
    /// A tool with its hash computed from what it holds.
    pub fn new(
        description: Option<String>,
        input_schema: Value,
        output_schema: Option<Value>,
        annotations: Option<Value>,
    ) -> LockedTool {
        let hash = hash_value(&json!({
            "description": description,
            "inputSchema": input_schema,
            "outputSchema": output_schema,
            "annotations": annotations,
        }));
        LockedTool {
            description,
            input_schema,
            output_schema,
            annotations,
            hash,
        }
    }
}

impl Lock {
    /// A lock of `servers`.
    pub fn new(servers: BTreeMap<String, LockedServer>) -> Lock {
        Lock {
            version: LOCK_VERSION,
            servers,
        }
    }

    /// The lock in `text` (the file `file`, for errors with a line and column). A version
    /// this build does not know is refused, at the line that says it.
    pub fn from_yaml(file: &str, text: &str) -> Result<Lock, YamlError> {
        let lock: Lock = yaml::from_str(file, text)?;
        if lock.version != LOCK_VERSION {
            let line = text
                .lines()
                .position(|line| line.starts_with("version:"))
                .and_then(|index| u64::try_from(index + 1).ok());
            return Err(YamlError::at(
                file,
                line,
                line.map(|_| 1),
                format!(
                    "version {} of the lock file is not one this build reads (it reads {LOCK_VERSION}); run `charter lock` again",
                    lock.version
                ),
            ));
        }
        Ok(lock)
    }

    /// The lock as its file holds it: YAML, sorted, with a comment saying what wrote it.
    pub fn to_yaml(&self) -> Result<String, YamlError> {
        let body = yaml::to_string(LOCK_FILE, self)?;
        Ok(format!(
            "# Written by `charter lock`: what each MCP server offered. Review changes; do not edit.\n{body}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock() -> Lock {
        let mut tools = BTreeMap::new();
        tools.insert(
            "echo".to_string(),
            LockedTool::new(
                Some("Echoes back the input".to_string()),
                json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
                None,
                Some(json!({"readOnlyHint": true})),
            ),
        );
        let mut servers = BTreeMap::new();
        servers.insert(
            "everything".to_string(),
            LockedServer {
                command: Some(vec!["npx".into(), "server-everything".into()]),
                url: None,
                protocol_version: "2025-06-18".into(),
                server: ServerIdentity {
                    name: "example-servers/everything".into(),
                    version: "1.0.0".into(),
                },
                tools,
            },
        );
        Lock::new(servers)
    }

    #[test]
    fn a_lock_round_trips_through_its_file() {
        let text = lock().to_yaml().unwrap_or_else(|error| panic!("{error}"));
        assert!(text.starts_with("# Written by `charter lock`"), "{text}");
        let back = Lock::from_yaml(LOCK_FILE, &text).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(back, lock());
        assert_eq!(back.to_yaml().unwrap_or_default(), text);
    }

    #[test]
    fn a_tools_hash_follows_what_it_holds() {
        let a = LockedTool::new(None, json!({"type": "object"}), None, None);
        let b = LockedTool::new(Some("x".into()), json!({"type": "object"}), None, None);
        assert_ne!(a.hash, b.hash);
        assert!(a.hash.starts_with("sha256:"), "{}", a.hash);
    }

    #[test]
    fn a_hand_edit_that_breaks_the_yaml_is_named_by_line() {
        let error = Lock::from_yaml(LOCK_FILE, "version: 1\nservers:\n  x: [unclosed\n")
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(
            error.starts_with("charter.lock:3:"),
            "line and column: {error}"
        );
        let newer = Lock::from_yaml(LOCK_FILE, "version: 9\n")
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(newer.contains("version 9"), "{newer}");
        assert!(newer.starts_with("charter.lock:1:1: "), "{newer}");
    }
}
