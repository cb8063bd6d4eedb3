//! Checks of `mcp` servers and of the `SERVER.TOOL` names of their tools (DESIGN §19): a
//! server declared so that it cannot be reached (E020), a name no server provides (E021),
//! a server named like a `tool` (E022), a tool listed twice (E003), and a server whose
//! tools no role uses (W015). A server's `sandbox` is checked with the tools' (`sandbox`).
//!
//! Here a server's tools are known only through its allow-list: under `tools: *` any TOOL
//! is accepted. What the server really offers is checked against `charter.lock` (`lock`).

use crate::check::Symbols;
use crate::diagnostics::{Code, Diagnostic, Span, did_you_mean};
use crate::names::mcp_tool;
use crate::syntax::ast::{Ident, InvariantKind, McpServer, SecretMap, SecretValue};

/// Runs every check of `mcp` servers and of the tool names that name theirs.
pub fn check(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    for server in symbols.mcp.values() {
        declaration(server, diagnostics);
        if let Some(tool) = symbols.tools.get(server.name.name.as_str()) {
            diagnostics.push(
                Diagnostic::new(
                    Code::E022,
                    server.name.span,
                    format!(
                        "mcp server `{}` has the name of tool `{}`",
                        server.name.name, tool.name.name
                    ),
                )
                .with_label("named like a tool")
                .with_note(tool.name.span, "the tool is declared here")
                .with_help(format!(
                    "rename the server or the tool: `{0}` would name the tool and `{0}.TOOL` a \
                     tool of the server, and `--tool` and `--mcp` name both alike",
                    server.name.name
                )),
            );
        }
    }
    for role in symbols.roles.values() {
        for tool in &role.tools {
            names_a_tool(symbols, tool, diagnostics);
        }
    }
    for invariant in symbols.invariants.values() {
        if let InvariantKind::OnlyUses { tool, .. } = &invariant.kind {
            names_a_tool(symbols, tool, diagnostics);
        }
    }
    unused(symbols, diagnostics);
}

/// The server and tool a `SERVER.TOOL` name stands for, when a server provides it: the
/// server exists and its allow-list holds TOOL (or is `*`).
pub fn resolve<'a>(symbols: &Symbols<'a>, name: &str) -> Option<&'a McpServer> {
    let (server, tool) = mcp_tool(name)?;
    let server = *symbols.mcp.get(server)?;
    allows(server, tool).then_some(server)
}

/// Whether `server` lets the spec use `tool`: its allow-list holds it, or is `*`. A
/// server with no `tools` (E020) allows nothing.
pub fn allows(server: &McpServer, tool: &str) -> bool {
    server.tools.as_ref().is_some_and(|tools| {
        tools
            .only
            .as_ref()
            .is_none_or(|only| only.iter().any(|allowed| allowed.name == tool))
    })
}

/// E021 for a `SERVER.TOOL` name no server provides (a plain name is a `tool`'s, checked
/// with the other names).
fn names_a_tool(symbols: &Symbols<'_>, tool: &Ident, diagnostics: &mut Vec<Diagnostic>) {
    let Some((server_name, tool_name)) = mcp_tool(&tool.name) else {
        return;
    };
    let (server_span, tool_span) = parts(tool, server_name.len());
    let Some(server) = symbols.mcp.get(server_name) else {
        let names: Vec<&str> = symbols.mcp.keys().copied().collect();
        let help = did_you_mean(server_name, names.iter().copied()).unwrap_or_else(|| {
            if names.is_empty() {
                format!(
                    "declare the server: `mcp {server_name} {{ command: [\"...\"]  tools: [{tool_name}] }}`"
                )
            } else {
                let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
                format!("the mcp servers declared are {}", quoted.join(", "))
            }
        });
        diagnostics.push(
            Diagnostic::new(
                Code::E021,
                server_span,
                format!("unknown mcp server `{server_name}` in `{}`", tool.name),
            )
            .with_label("no mcp server of this name")
            .with_help(help),
        );
        return;
    };
    if allows(server, tool_name) {
        return;
    }
    let Some(only) = server.tools.as_ref().and_then(|tools| tools.only.as_ref()) else {
        return; // no `tools` at all: E020 says so at the server
    };
    let allowed: Vec<&str> = only.iter().map(|ident| ident.name.as_str()).collect();
    let add = format!("add `{tool_name}` to `tools: [...]` of `mcp {server_name}`");
    let help = match did_you_mean(tool_name, allowed.iter().copied()) {
        Some(hint) => format!("{hint} Or {add}"),
        None => add,
    };
    let mut diagnostic = Diagnostic::new(
        Code::E021,
        tool_span,
        format!("mcp server `{server_name}` does not let the spec use tool `{tool_name}`"),
    )
    .with_label(format!("not in the allow-list of `{server_name}`"));
    if let Some(tools) = &server.tools {
        diagnostic = diagnostic.with_note(tools.span, "the allow-list");
    }
    diagnostics.push(diagnostic.with_help(help));
}

/// The spans of SERVER and of TOOL in `SERVER.TOOL`, when the name is written as spelled
/// (a role file's may be quoted or spelled otherwise: then both are the whole name).
pub(crate) fn parts(tool: &Ident, server_length: usize) -> (Span, Span) {
    let span = tool.span;
    let written = (span.end - span.start) as usize;
    if written != tool.name.len() {
        return (span, span);
    }
    let start = span.start as usize;
    let dot = start + server_length;
    (
        Span::new(span.file, start, dot),
        Span::new(span.file, dot + 1, span.end as usize),
    )
}

/// E020 for a server that cannot be reached as declared, E003 for a tool listed twice.
///
/// One piece on purpose: it reads as the declaration's checklist in source order (transport,
/// command, url, maps, allow-list), each check a few lines sharing the one `error` builder,
/// so every E020 of a server reads alike; split, each stage would take that builder and the
/// server again for a handful of lines.
fn declaration(server: &McpServer, diagnostics: &mut Vec<Diagnostic>) {
    let name = &server.name.name;
    let error = |span: Span, message: String, label: &str, help: String| {
        Diagnostic::new(Code::E020, span, message)
            .with_label(label)
            .with_help(help)
    };
    match (&server.command, &server.url) {
        (None, None) => diagnostics.push(error(
            server.name.span,
            format!("mcp server `{name}` has neither `command` nor `url`"),
            "how is it reached?",
            "start it with `command: [\"npx\", \"PACKAGE\", ...]` (stdio), or connect to a running \
             one with `url: \"http://HOST/mcp\"`"
                .to_string(),
        )),
        (Some(command), Some(url)) => diagnostics.push(
            Diagnostic::new(
                Code::E020,
                url.span,
                format!("mcp server `{name}` has both `command` and `url`"),
            )
            .with_label("a second way to reach it")
            .with_note(command.span, "started by this command")
            .with_help(
                "keep `command` to start the server, or `url` to connect to one already running",
            ),
        ),
        _ => {}
    }
    if let Some(command) = &server.command {
        match command.argv.first() {
            None => diagnostics.push(error(
                command.span,
                format!("`command` of mcp server `{name}` is empty"),
                "no program to start",
                "give the program and its arguments, e.g. `command: [\"npx\", \
                 \"@modelcontextprotocol/server-filesystem\", \"data\"]`"
                    .to_string(),
            )),
            Some(program) if program.value.trim().is_empty() => diagnostics.push(error(
                program.span,
                format!("`command` of mcp server `{name}` starts with an empty program name"),
                "empty program",
                "the first entry is the program to start (`npx`, `uvx`, a path)".to_string(),
            )),
            Some(_) => {}
        }
        if let Some(headers) = &server.headers {
            diagnostics.push(error(
                headers.span,
                format!("mcp server `{name}` is started with `command` but sets `headers`"),
                "headers go with `url`",
                "a started server is spoken to over stdio: give it settings with `env: { ... }`, \
                 or connect to it with `url` to send headers"
                    .to_string(),
            ));
        }
    }
    if let Some(url) = &server.url {
        let value = url.url.value.trim();
        let scheme = value
            .split_once("://")
            .map(|(scheme, rest)| (scheme.to_ascii_lowercase(), rest));
        let is_http = matches!(&scheme, Some((scheme, rest))
            if (scheme == "http" || scheme == "https") && !rest.is_empty());
        if !is_http {
            diagnostics.push(error(
                url.url.span,
                format!("`url` of mcp server `{name}` is not an `http://` or `https://` address"),
                "not an HTTP address",
                "write the server's streamable HTTP endpoint, e.g. `url: \
                 \"http://127.0.0.1:3001/mcp\"`; a server started as a process takes `command`"
                    .to_string(),
            ));
        }
        if let Some(env) = &server.env {
            diagnostics.push(error(
                env.span,
                format!("mcp server `{name}` is reached by `url` but sets `env`"),
                "`env` goes with `command`",
                "Charter starts no process for a `url` server, so it has no environment to set: \
                 send values with `headers: { ... }`"
                    .to_string(),
            ));
        }
        if let Some(sandbox) = &server.sandbox {
            diagnostics.push(error(
                sandbox.span,
                format!("mcp server `{name}` is reached by `url` but has a `sandbox`"),
                "nothing is started to sandbox",
                "a sandbox bounds a process Charter starts: remove it, or start the server with \
                 `command`"
                    .to_string(),
            ));
        }
    }
    for map in [&server.headers, &server.env].into_iter().flatten() {
        variable_names(name, map, diagnostics);
    }
    let Some(tools) = &server.tools else {
        diagnostics.push(
            Diagnostic::new(
                Code::E020,
                server.name.span,
                format!("mcp server `{name}` has no `tools`"),
            )
            .with_label("which of its tools may the spec use?")
            .with_help(
                "list them, `tools: [read_text_file, list_directory]`, or allow every tool it \
                 lists with `tools: *`",
            ),
        );
        return;
    };
    let mut seen: Vec<&Ident> = Vec::new();
    for tool in tools.only.iter().flatten() {
        if let Some(first) = seen.iter().find(|first| first.name == tool.name) {
            diagnostics.push(
                Diagnostic::new(
                    Code::E003,
                    tool.span,
                    format!(
                        "tool `{}` is listed twice in `tools` of mcp server `{name}`",
                        tool.name
                    ),
                )
                .with_label("listed again here")
                .with_note(first.span, "first listed here")
                .with_help(format!("keep one `{}`", tool.name)),
            );
        } else {
            seen.push(tool);
        }
    }
}

/// E020 for an `env("...")` that names no environment variable.
fn variable_names(server: &str, map: &SecretMap, diagnostics: &mut Vec<Diagnostic>) {
    for entry in &map.entries {
        let SecretValue::Env(variable) = &entry.value else {
            continue;
        };
        let valid = variable
            .value
            .chars()
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
            && variable
                .value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid {
            continue;
        }
        diagnostics.push(
            Diagnostic::new(
                Code::E020,
                variable.span,
                format!(
                    "`{}` of mcp server `{server}` reads `env(\"{}\")`, which is not an \
                     environment variable name",
                    entry.name.name, variable.value
                ),
            )
            .with_label("not a variable name")
            .with_help(
                "name the variable as the shell does (`[A-Za-z_][A-Za-z0-9_]*`), e.g. \
                 `env(\"SEARCH_TOKEN\")`; its value is read when the server is used, never \
                 written in the spec",
            ),
        );
    }
}

/// W015 for a server none of whose tools a role holds.
fn unused(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    for (name, server) in &symbols.mcp {
        let used = symbols.roles.values().any(|role| {
            role.tools
                .iter()
                .any(|tool| mcp_tool(&tool.name).is_some_and(|(server, _)| server == *name))
        });
        if used {
            continue;
        }
        let example = server
            .tools
            .as_ref()
            .and_then(|tools| tools.only.as_ref())
            .and_then(|only| only.first())
            .map_or("TOOL", |tool| tool.name.as_str());
        diagnostics.push(
            Diagnostic::new(
                Code::W015,
                server.name.span,
                format!("mcp server `{name}` is declared but no role uses its tools"),
            )
            .with_label(format!("no role lists a `{name}.TOOL` in `tools`"))
            .with_help(format!(
                "add `{name}.{example}` to a role's `tools: [...]`, or remove the server"
            )),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::{MemoryLoader, compile};

    /// A spec with the items `items` and one role `r` holding `tools`.
    fn spec(items: &str, tools: &str) -> String {
        format!(
            r#"spec s version "1"
contract Q {{ text: string }}
{items}
role r {{ model: "openai:x"  prompt: """{{{{ q.text }}}}"""  input: Q  output: Q  tools: [{tools}]  max_tool_calls: 2 }}
flow {{ a = r(request) -> done }}
"#
        )
    }

    /// The diagnostics of `text` as `CODE snippet`, in order.
    fn found(text: &str) -> Vec<String> {
        let compilation = compile("s.charter", text, &MemoryLoader::default());
        compilation
            .diagnostics
            .iter()
            .map(|diagnostic| {
                let span = diagnostic.primary_span().expect("a span");
                format!("{} {}", diagnostic.code, compilation.sources.snippet(span))
            })
            .collect()
    }

    fn help(text: &str) -> Vec<String> {
        let compilation = compile("s.charter", text, &MemoryLoader::default());
        compilation
            .diagnostics
            .iter()
            .map(|diagnostic| diagnostic.help.clone().unwrap_or_default())
            .collect()
    }

    const FILES: &str = r#"mcp files {
  command: ["npx", "@modelcontextprotocol/server-filesystem", "data"]
  env: { LOG_LEVEL: "warn", TOKEN: env("FILES_TOKEN") }
  tools: [read_text_file, list_directory]
  timeout: 30s  retry: 1 backoff 1s
  sandbox { read: ["data/"]  network: none }
}
mcp search {
  url: "http://127.0.0.1:3001/mcp"
  headers: { Authorization: env("SEARCH_TOKEN"), X-Client: "charter" }
  tools: *
}"#;

    #[test]
    fn servers_and_their_tools_are_clean() {
        assert_eq!(
            found(&spec(
                FILES,
                "files.read_text_file, files.list_directory, search.anything"
            )),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_unknown_server_or_a_tool_outside_the_allow_list_is_e021() {
        let text = spec(
            FILES,
            "filez.read_text_file, files.read_file, files.write_file, search.x",
        );
        assert_eq!(
            found(&text),
            ["E021 filez", "E021 read_file", "E021 write_file"]
        );
        assert_eq!(
            help(&text),
            [
                "did you mean `files`?",
                "did you mean `read_text_file`? Or add `read_file` to `tools: [...]` of `mcp files`",
                "add `write_file` to `tools: [...]` of `mcp files`",
            ]
        );
        assert_eq!(
            help(&spec("", "files.read")),
            ["declare the server: `mcp files { command: [\"...\"]  tools: [read] }`"]
        );
    }

    #[test]
    fn only_uses_names_mcp_tools_too() {
        let items = format!(
            "{FILES}\ninvariant one: only r uses files.list\ninvariant two: only r uses search.y"
        );
        assert_eq!(
            found(&spec(&items, "files.read_text_file, search.x")),
            ["E021 list"]
        );
    }

    #[test]
    fn how_a_server_is_reached_is_checked() {
        let cases = [
            ("mcp m { tools: * }", "E020 m"),
            (
                "mcp m { command: [\"x\"]  url: \"http://a/mcp\"  tools: * }",
                "E020 url: \"http://a/mcp\"",
            ),
            ("mcp m { command: []  tools: * }", "E020 command: []"),
            ("mcp m { command: [\"\", \"a\"]  tools: * }", "E020 \"\""),
            (
                "mcp m { command: [\"x\"]  headers: { A: \"b\" }  tools: * }",
                "E020 headers: { A: \"b\" }",
            ),
            (
                "mcp m { url: \"http://a/mcp\"  env: { A: \"b\" }  tools: * }",
                "E020 env: { A: \"b\" }",
            ),
            (
                "mcp m { url: \"ftp://a/mcp\"  tools: * }",
                "E020 \"ftp://a/mcp\"",
            ),
            ("mcp m { url: \"http://\"  tools: * }", "E020 \"http://\""),
            (
                "mcp m { url: \"127.0.0.1:3001\"  tools: * }",
                "E020 \"127.0.0.1:3001\"",
            ),
            (
                "mcp m { url: \"https://a/mcp\"  sandbox: required  tools: * }",
                "E020 sandbox: required",
            ),
            ("mcp m { command: [\"x\"] }", "E020 m"),
            (
                "mcp m { command: [\"x\"]  env: { A: env(\"1X\") }  tools: * }",
                "E020 \"1X\"",
            ),
        ];
        for (item, expected) in cases {
            assert_eq!(found(&spec(item, "m.t")), [expected], "{item}");
        }
        assert_eq!(
            found(&spec("mcp m { URL: \"https://a/mcp\"  tools: * }", "m.t"))
                .first()
                .map(String::as_str),
            Some("E001 URL")
        );
    }

    #[test]
    fn keys_and_entries_given_twice_are_e003() {
        let item = "mcp m { command: [\"x\"]  tools: [a]  tools: *  timeout: 1s  timeout: 2s }";
        assert_eq!(
            found(&spec(item, "m.a")),
            ["E003 tools: *", "E003 timeout: 2s"]
        );
        let item = "mcp m { command: [\"x\"]  tools: [a, b, a] }";
        assert_eq!(found(&spec(item, "m.a, m.b")), ["E003 a"]);
        let item = "mcp m { url: \"http://a\"  headers: { X-A: \"1\", x-a: \"2\" }  tools: * }";
        assert_eq!(found(&spec(item, "m.a")), ["E003 x-a"]);
        let item =
            "mcp m { command: [\"x\"]  env: { A: \"1\", a: \"2\", A: env(\"B\") }  tools: * }";
        assert_eq!(found(&spec(item, "m.a")), ["E003 A"]);
    }

    #[test]
    fn a_server_named_like_a_tool_is_e022() {
        let items = "contract R { text: string }\ntool files { input: Q  output: R  effect: read }\nmcp files { command: [\"x\"]  tools: * }";
        assert_eq!(found(&spec(items, "files, files.x")), ["E022 files"]);
    }

    #[test]
    fn a_server_no_role_uses_is_w015() {
        assert_eq!(found(&spec(FILES, "search.x")), ["W015 files"]);
        assert_eq!(
            help(&spec(FILES, "search.x")),
            ["add `files.read_text_file` to a role's `tools: [...]`, or remove the server"]
        );
    }

    #[test]
    fn a_permit_on_an_mcp_tool_reads_any_argument() {
        let text = spec(FILES, "files.read_text_file, search.x")
            .replace(
                "max_tool_calls: 2",
                "max_tool_calls: 2\n  permit files.read_text_file when matches(args.path, \"^data/\") and len(args.path) < 200 and args.depth.x != 3\n  permit search.x when q.text != \"\" and args.anything == none\n  tool_choice: files.read_text_file",
            );
        assert_eq!(found(&text), Vec::<String>::new());
        let text = text.replace("permit search.x", "permit search.y");
        assert_eq!(found(&text), ["E002 search.y"]);
    }

    #[test]
    fn a_sandbox_on_a_server_is_checked_as_a_tools() {
        let item =
            "mcp m { command: [\"x\"]  tools: *  sandbox { write: [\"/tmp\"]  processes: 0 } }";
        assert_eq!(found(&spec(item, "m.t")), ["E019 \"/tmp\"", "E013 0"]);
    }
}
