//! Checks on the `sandbox` blocks of tools and of `mcp` servers started as a process
//! (DESIGN §20): a write outside the project (E019), a process limit of zero (E013), a
//! read-only tool that may write (W013), and a path that is empty or goes through `..`
//! (W014).
//!
//! Paths are checked as written, lexically: the runtime resolves them against the
//! project root (and `~` against the user's home) when it builds the sandbox.

use crate::diagnostics::{Code, Diagnostic};
use crate::syntax::ast::{Effect, Item, Sandbox, SandboxPaths, SpecFile, StringLit, Tool};

/// Checks the sandbox of every tool and `mcp` server of `spec`.
pub fn check(spec: &SpecFile, diagnostics: &mut Vec<Diagnostic>) {
    for item in &spec.items {
        match item {
            Item::Tool(tool) => {
                if let Some(sandbox) = &tool.sandbox {
                    let owner = format!("tool `{}`", tool.name.name);
                    check_sandbox(&owner, sandbox, diagnostics);
                    if let Some(write) = &sandbox.write {
                        read_only_writes(tool, write, diagnostics);
                    }
                }
            }
            Item::Mcp(server) => {
                if let Some(sandbox) = &server.sandbox {
                    let owner = format!("mcp server `{}`", server.name.name);
                    check_sandbox(&owner, sandbox, diagnostics);
                }
            }
            _ => {}
        }
    }
}

/// The checks of one sandbox, whose `owner` is `tool `x`` or `mcp server `x``.
fn check_sandbox(owner: &str, sandbox: &Sandbox, diagnostics: &mut Vec<Diagnostic>) {
    if let Some(read) = &sandbox.read {
        for path in &read.paths {
            if let Some(diagnostic) = unclear_path(owner, "read", path) {
                diagnostics.push(diagnostic);
            }
        }
    }
    if let Some(write) = &sandbox.write {
        for path in &write.paths {
            if let Some(diagnostic) =
                outside_project(owner, path).or_else(|| unclear_path(owner, "write", path))
            {
                diagnostics.push(diagnostic);
            }
        }
    }
    if let Some(processes) = &sandbox.processes
        && processes.value == 0
    {
        diagnostics.push(
            Diagnostic::new(
                Code::E013,
                processes.span,
                format!("{owner} may start no process with `processes: 0`"),
            )
            .with_label("zero processes")
            .with_help(
                "the tool itself is a process: give `processes` a positive count, or remove it \
                 for the default (256)",
            ),
        );
    }
}

/// E019 for a `write` path that is not inside the project.
fn outside_project(owner: &str, path: &StringLit) -> Option<Diagnostic> {
    let value = path.value.as_str();
    let (message, label) = if is_absolute(value) {
        (
            format!("{owner} may write `{value}`, an absolute path outside the project"),
            "absolute path",
        )
    } else if value.starts_with('~') {
        (
            format!("{owner} may write `{value}`, in the user's home outside the project"),
            "in the user's home",
        )
    } else if leaves_project(value) {
        (
            format!("{owner} may write `{value}`, whose `..` leaves the project"),
            "leaves the project",
        )
    } else {
        return None;
    };
    Some(
        Diagnostic::new(Code::E019, path.span, message)
            .with_label(label)
            .with_help(
                "write inside the project (a path relative to its root, such as `out/`), or \
                 let the tool write its own directory (its HOME and TMPDIR, always writable)",
            ),
    )
}

/// W014 for a path that is empty or has a `..` component.
fn unclear_path(owner: &str, key: &str, path: &StringLit) -> Option<Diagnostic> {
    let value = path.value.as_str();
    if value.trim().is_empty() {
        return Some(
            Diagnostic::new(
                Code::W014,
                path.span,
                format!("{owner} has an empty `{key}` path in its sandbox"),
            )
            .with_label("empty path")
            .with_help(format!(
                "an empty path names the whole project: write `\".\"` if that is meant, or \
                 remove it ({})",
                if key == "read" {
                    "the project is readable anyway"
                } else {
                    "the tool may always write its own directory"
                }
            )),
        );
    }
    if !components(value).any(|part| part == "..") {
        return None;
    }
    let help = match normalized(value) {
        Some(plain) if !value.starts_with('~') && !is_absolute(value) => {
            format!("write it without `..`: `\"{plain}\"`")
        }
        _ => "name the directory without `..`: from the project root, from `~`, or absolutely"
            .to_string(),
    };
    Some(
        Diagnostic::new(
            Code::W014,
            path.span,
            format!("{owner} has a `{key}` path `{value}` that goes through `..`"),
        )
        .with_label("`..` in a sandbox path")
        .with_help(help),
    )
}

/// W013: an `effect: read` tool that the sandbox lets write.
fn read_only_writes(tool: &Tool, write: &SandboxPaths, diagnostics: &mut Vec<Diagnostic>) {
    let Some(effect) = &tool.effect else {
        return;
    };
    if effect.effect != Effect::Read || write.paths.is_empty() {
        return;
    }
    diagnostics.push(
        Diagnostic::new(
            Code::W013,
            write.span,
            format!(
                "tool `{}` says `effect: read` but its sandbox lets it write",
                tool.name.name
            ),
        )
        .with_label("grants writes")
        .with_note(effect.span, "the tool says it only reads")
        .with_help(
            "remove `write` from the sandbox (the tool may still write its own directory), or \
             say `effect: write`",
        ),
    );
}

/// An absolute path: `/x`, `\x`, or a drive letter `C:`.
fn is_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    path.starts_with('/')
        || path.starts_with('\\')
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
}

/// The components of a path, `/` and `\` both separators, empty ones and `.` left out.
fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split(['/', '\\'])
        .filter(|part| !part.is_empty() && *part != ".")
}

/// The relative `path` with its `..` resolved, or `None` when a `..` climbs above where
/// it starts (an empty result is `.`).
fn normalized(path: &str) -> Option<String> {
    let mut kept: Vec<&str> = Vec::new();
    for part in components(path) {
        if part == ".." {
            kept.pop()?;
        } else {
            kept.push(part);
        }
    }
    if kept.is_empty() {
        return Some(".".to_string());
    }
    let mut joined = kept.join("/");
    if path.ends_with('/') {
        joined.push('/');
    }
    Some(joined)
}

/// Whether the relative `path` climbs out of the directory it starts from.
fn leaves_project(path: &str) -> bool {
    normalized(path).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemoryLoader, compile};

    /// A spec whose one tool has `effect: EFFECT` and the properties `props`.
    fn spec(effect: &str, props: &str) -> String {
        format!(
            r#"spec s version "1"
contract Url {{ url: string }}
contract Page {{ text: string }}
tool fetch {{ input: Url  output: Page  effect: {effect}  {props} }}
role r {{ model: "openai:x"  prompt: """{{{{ url.url }}}}"""  input: Url  output: Page  tools: [fetch]  max_tool_calls: 2 }}
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

    #[test]
    fn a_sandbox_inside_the_project_is_clean() {
        let props = r#"sandbox { read: ["data/", "~/.cache/pages", "/opt/models"]  write: ["out/", "./tmp", "a/b/"]  network: any  env: [GITHUB_TOKEN]  processes: 64  required: true }"#;
        assert_eq!(found(&spec("write", props)), Vec::<String>::new());
        assert_eq!(
            found(&spec("read", "sandbox: required")),
            Vec::<String>::new()
        );
        // A `write: []` grants nothing: a read tool may say it.
        assert_eq!(
            found(&spec("read", "sandbox { write: [] }")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_write_outside_the_project_is_an_error() {
        let props = r#"sandbox { write: ["/tmp/out", "~/.cache", "../shared", "out/../../x", "out/../ok"] }"#;
        assert_eq!(
            found(&spec("write", props)),
            [
                "E019 \"/tmp/out\"",
                "E019 \"~/.cache\"",
                "E019 \"../shared\"",
                "E019 \"out/../../x\"",
                "W014 \"out/../ok\"",
            ]
        );
    }

    #[test]
    fn zero_processes_is_a_bad_literal() {
        assert_eq!(found(&spec("read", "sandbox { processes: 0 }")), ["E013 0"]);
    }

    #[test]
    fn a_read_only_tool_that_may_write_is_a_warning() {
        let diagnostics = found(&spec("read", r#"sandbox { write: ["out/"] }"#));
        assert_eq!(diagnostics, ["W013 write: [\"out/\"]"]);
        assert_eq!(
            found(&spec("external", r#"sandbox { write: ["out/"] }"#)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn empty_and_dotted_paths_are_warnings() {
        let props = r#"sandbox { read: ["", "data/../index", "~/../x", ".."] }"#;
        assert_eq!(
            found(&spec("read", props)),
            [
                "W014 \"\"",
                "W014 \"data/../index\"",
                "W014 \"~/../x\"",
                "W014 \"..\"",
            ]
        );
        let compilation = compile(
            "s.charter",
            &spec("read", r#"sandbox { read: ["data/../index/"] }"#),
            &MemoryLoader::default(),
        );
        let help = compilation.diagnostics.first().and_then(|d| d.help.clone());
        assert_eq!(help.as_deref(), Some("write it without `..`: `\"index/\"`"));
    }

    #[test]
    fn a_key_given_twice_is_e003() {
        let props = r#"sandbox { network: none, network: any }"#;
        assert_eq!(found(&spec("read", props)), ["E003 network: any"]);
        let props = r#"sandbox: required  sandbox { env: [A] }"#;
        assert_eq!(found(&spec("read", props)), ["E003 sandbox { env: [A] }"]);
    }

    #[test]
    fn paths_are_normalized_lexically() {
        assert_eq!(normalized("out/../data/").as_deref(), Some("data/"));
        assert_eq!(normalized("./a/./b").as_deref(), Some("a/b"));
        assert_eq!(normalized("a/..").as_deref(), Some("."));
        assert_eq!(normalized("a/../.."), None);
        assert!(leaves_project("../shared"));
        assert!(leaves_project("out/../../x"));
        assert!(!leaves_project("out/../x"));
        assert!(!leaves_project("..x/y"));
    }

    #[test]
    fn absolute_paths_are_recognized() {
        assert!(is_absolute("/tmp"));
        assert!(is_absolute("C:\\out"));
        assert!(is_absolute("\\\\server\\share"));
        assert!(!is_absolute("out/"));
        assert!(!is_absolute("~/x"));
    }
}
