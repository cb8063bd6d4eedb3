//! The checks against `charter.lock` (E023–E026, W016), each from a spec and a lock in memory.

use std::cell::Cell;
use std::collections::BTreeMap;

use serde_json::json;

use crate::lock::{LOCK_FILE, Lock, LockedServer, LockedTool, ServerIdentity};
use crate::{Compilation, LoadedFile, Loader, LockFile, MemoryLoader, compile, render};

/// server-everything's `echo` and `add`, and a tool whose argument is an object.
fn everything() -> LockedServer {
    let mut tools = BTreeMap::new();
    tools.insert(
        "echo".to_string(),
        LockedTool::new(
            Some("Echoes back the input string".to_string()),
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"], "additionalProperties": false}),
            None,
            None,
        ),
    );
    tools.insert(
        "add".to_string(),
        LockedTool::new(
            None,
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
            None,
            None,
        ),
    );
    tools.insert(
        "configure".to_string(),
        LockedTool::new(
            None,
            json!({"type": "object", "properties": {
                "options": {"type": "object", "properties": {"depth": {"type": "integer"}}},
                "extra": {"type": "object", "additionalProperties": true, "properties": {"x": {}}},
            }}),
            None,
            None,
        ),
    );
    LockedServer {
        command: Some(vec!["npx".into(), "server-everything".into()]),
        url: None,
        protocol_version: "2025-06-18".into(),
        server: ServerIdentity {
            name: "example-servers/everything".into(),
            version: "1.0.0".into(),
        },
        tools,
    }
}

fn lock_text(servers: &[(&str, LockedServer)]) -> String {
    let servers = servers
        .iter()
        .map(|(name, server)| (name.to_string(), server.clone()))
        .collect();
    Lock::new(servers)
        .to_yaml()
        .unwrap_or_else(|error| panic!("{error}"))
}

const SERVER: &str = r#"mcp everything { command: ["npx", "server-everything"]  tools: * }"#;

/// A spec with the items `items` and one role `r` holding `tools` and the lines `extra`.
fn spec(items: &str, tools: &str, extra: &str) -> String {
    format!(
        r#"spec s version "1"
contract Q {{ text: string }}
{items}
role r {{
  model: "openai:x"  prompt: """{{{{ q.text }}}}"""  input: Q  output: Q  tools: [{tools}]  max_tool_calls: 2
  {extra}
}}
flow {{ a = r(request) -> done }}
"#
    )
}

fn with_lock(text: &str, lock: &str) -> Compilation {
    let mut loader = MemoryLoader::default();
    loader.files.insert(LOCK_FILE.to_string(), lock.to_string());
    compile("s.charter", text, &loader)
}

/// The diagnostics as `CODE snippet`, in order.
fn found(compilation: &Compilation) -> Vec<String> {
    compilation
        .diagnostics
        .iter()
        .map(|diagnostic| {
            let span = diagnostic.primary_span().expect("a span");
            format!("{} {}", diagnostic.code, compilation.sources.snippet(span))
        })
        .collect()
}

fn helps(compilation: &Compilation) -> Vec<String> {
    compilation
        .diagnostics
        .iter()
        .map(|diagnostic| diagnostic.help.clone().unwrap_or_default())
        .collect()
}

fn messages(compilation: &Compilation) -> Vec<String> {
    compilation
        .diagnostics
        .iter()
        .map(|diagnostic| diagnostic.message.clone())
        .collect()
}

/// A loader whose project has no lock, counting how often the lock is asked for.
#[derive(Default)]
struct NoLock {
    asked: Cell<usize>,
}

impl Loader for NoLock {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        Err(format!("no such file `{relative_path}`"))
    }

    fn load_lock(&self) -> LockFile {
        self.asked.set(self.asked.get() + 1);
        LockFile::Missing {
            display_name: "project/charter.lock".to_string(),
        }
    }
}

#[test]
fn tools_the_lock_lists_are_clean_and_the_lock_is_kept() {
    let text = spec(
        SERVER,
        "everything.echo, everything.add",
        "permit everything.echo when len(args.message) < 200 and args.message != \"\"\n  tool_choice: everything.echo",
    );
    let compilation = with_lock(&text, &lock_text(&[("everything", everything())]));
    assert_eq!(found(&compilation), Vec::<String>::new());
    assert!(compilation.spec.is_some());
    let lock = compilation.lock.expect("the lock read");
    assert!(lock.servers["everything"].tools.contains_key("echo"));
}

#[test]
fn a_spec_without_servers_never_asks_for_the_lock() {
    let loader = NoLock::default();
    let text = spec("", "", "").replace("  max_tool_calls: 2", "");
    let compilation = compile("s.charter", &text, &loader);
    assert_eq!(found(&compilation), Vec::<String>::new());
    assert_eq!(loader.asked.get(), 0);
    assert!(compilation.lock.is_none());
}

#[test]
fn no_lock_or_no_entry_for_a_server_is_e023_at_the_server() {
    let loader = NoLock::default();
    let text = spec(SERVER, "everything.echo", "");
    let compilation = compile("s.charter", &text, &loader);
    assert_eq!(found(&compilation), ["E023 everything"]);
    assert_eq!(
        messages(&compilation),
        ["MCP server `everything` is not in charter.lock: run `charter lock`"]
    );
    assert!(helps(&compilation)[0].contains("`project/charter.lock`"));
    assert_eq!(loader.asked.get(), 1);

    let other = spec(
        &format!("{SERVER}\nmcp files {{ url: \"http://127.0.0.1:3001/mcp\"  tools: [read] }}"),
        "everything.echo, files.read",
        "",
    );
    let compilation = with_lock(&other, &lock_text(&[("everything", everything())]));
    assert_eq!(found(&compilation), ["E023 files"]);
}

#[test]
fn a_server_that_cannot_be_reached_as_declared_is_not_looked_up() {
    let text = spec("mcp everything { tools: * }", "everything.echo", "");
    let compilation = compile("s.charter", &text, &NoLock::default());
    assert_eq!(found(&compilation), ["E020 everything"]);
}

#[test]
fn a_tool_the_locked_server_does_not_list_is_e024_with_did_you_mean() {
    let items = format!("{SERVER}\ninvariant one: only r uses everything.ad");
    let text = spec(&items, "everything.ecko, everything.add", "");
    let compilation = with_lock(&text, &lock_text(&[("everything", everything())]));
    assert_eq!(found(&compilation), ["E024 ad", "E024 ecko"]);
    assert_eq!(
        messages(&compilation)[1],
        "MCP server `everything` does not list a tool `ecko` in charter.lock"
    );
    assert_eq!(
        helps(&compilation),
        [
            "did you mean `add`? Or run `charter lock` if the server offers it now",
            "did you mean `echo`? Or run `charter lock` if the server offers it now",
        ]
    );
    let far = with_lock(
        &spec(SERVER, "everything.zzz", ""),
        &lock_text(&[("everything", everything())]),
    );
    assert_eq!(
        helps(&far),
        [
            "the locked server lists `add`, `configure`, `echo`; or run `charter lock` if the server offers it now"
        ]
    );
}

#[test]
fn an_allow_list_entry_the_lock_lacks_is_e024_at_the_entry_only() {
    let items = r#"mcp everything { command: ["npx", "server-everything"]  tools: [echo, ecco] }"#;
    let text = spec(items, "everything.echo, everything.ecco", "");
    let compilation = with_lock(&text, &lock_text(&[("everything", everything())]));
    // Once, at the entry: the role's `everything.ecco` is what the allow-list allows.
    assert_eq!(found(&compilation), ["E024 ecco"]);
    assert_eq!(
        helps(&compilation),
        ["did you mean `echo`? Or run `charter lock` if the server offers it now"]
    );
}

#[test]
fn a_permit_reading_an_argument_the_schema_lacks_is_e025() {
    let text = spec(
        SERVER,
        "everything.echo, everything.configure",
        "permit everything.echo when len(args.mesage) < 200 and (every m in [args.message]: m != \"\")\n  permit everything.configure when args.options.dept > 2 and args.option == none and args.extra.anything == 1 and args.options.depth < 9",
    );
    let compilation = with_lock(&text, &lock_text(&[("everything", everything())]));
    assert_eq!(
        found(&compilation),
        [
            "E025 args.mesage",
            "E025 args.options.dept",
            "E025 args.option"
        ]
    );
    assert_eq!(
        messages(&compilation),
        [
            "`permit everything.echo` reads `args.mesage`, but the `inputSchema` of `everything.echo` has no property `mesage`",
            "`permit everything.configure` reads `args.options.dept`, but `args.options` in the `inputSchema` of `everything.configure` has no property `dept`",
            "`permit everything.configure` reads `args.option`, but the `inputSchema` of `everything.configure` has no property `option`",
        ]
    );
    assert_eq!(
        helps(&compilation),
        [
            "did you mean `message`?",
            "did you mean `depth`?",
            "did you mean `options`?"
        ]
    );
}

#[test]
fn a_schema_listing_properties_is_closed_unless_it_allows_more() {
    // `add`'s schema does not say `additionalProperties: false` but lists its properties:
    // a name it does not list is still a misspelling.
    let text = spec(
        SERVER,
        "everything.add",
        "permit everything.add when args.c == 1",
    );
    let compilation = with_lock(&text, &lock_text(&[("everything", everything())]));
    assert_eq!(found(&compilation), ["E025 args.c"]);
    assert_eq!(
        helps(&compilation),
        ["the properties of `args` are `a`, `b`"]
    );

    let mut open = everything();
    if let Some(tool) = open.tools.get_mut("add") {
        tool.input_schema =
            json!({"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {}}});
    }
    let compilation = with_lock(&text, &lock_text(&[("everything", open)]));
    assert_eq!(found(&compilation), Vec::<String>::new());
}

#[test]
fn a_lock_that_cannot_be_read_is_e026_at_its_line_and_column() {
    let text = spec(SERVER, "everything.echo", "");
    let broken = "version: 1\nservers:\n  everything: [unclosed\n";
    let compilation = with_lock(&text, broken);
    assert_eq!(
        found(&compilation)
            .iter()
            .map(|found| &found[..4])
            .collect::<Vec<_>>(),
        ["E026"]
    );
    let shown = render::text(&compilation.diagnostics, &compilation.sources, false);
    assert!(shown.contains("charter.lock:3:"), "{shown}");
    assert!(shown.contains("charter.lock cannot be read: "), "{shown}");

    let newer = with_lock(&text, "version: 9\nservers: {}\n");
    let shown = render::text(&newer.diagnostics, &newer.sources, false);
    assert!(shown.contains("charter.lock:1:1"), "{shown}");
    assert!(shown.contains("version 9 of the lock file"), "{shown}");

    struct Unreadable;
    impl Loader for Unreadable {
        fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
            Err(relative_path.to_string())
        }
        fn load_lock(&self) -> LockFile {
            LockFile::Unreadable {
                display_name: "charter.lock".to_string(),
                reason: "`charter.lock` is a directory".to_string(),
            }
        }
    }
    let compilation = compile("s.charter", &text, &Unreadable);
    assert_eq!(
        messages(&compilation),
        ["charter.lock cannot be read: `charter.lock` is a directory"]
    );
}

#[test]
fn a_server_locked_with_another_command_or_url_is_w016() {
    let moved = SERVER.replace("server-everything\"", "server-everything@2\"");
    let compilation = with_lock(
        &spec(&moved, "everything.echo", ""),
        &lock_text(&[("everything", everything())]),
    );
    assert_eq!(
        found(&compilation),
        ["W016 command: [\"npx\", \"server-everything@2\"]"]
    );
    assert_eq!(
        messages(&compilation),
        [
            "charter.lock was made with another command for MCP server `everything`: run `charter lock`"
        ]
    );
    assert!(compilation.spec.is_some(), "a warning");

    let url = "mcp everything { url: \"http://127.0.0.1:3001/mcp\"  tools: * }";
    let compilation = with_lock(
        &spec(url, "everything.echo", ""),
        &lock_text(&[("everything", everything())]),
    );
    assert_eq!(
        found(&compilation),
        ["W016 url: \"http://127.0.0.1:3001/mcp\""]
    );
    let label = &compilation.diagnostics[0].labels[0].message;
    assert_eq!(
        label,
        "charter.lock has the command `[\"npx\", \"server-everything\"]`"
    );
}
