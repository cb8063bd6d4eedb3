//! MCP tools checked offline against the project's `charter.lock` (DESIGN §19): a server
//! the lock does not hold (E023), a tool the locked server does not list (E024), a
//! `permit` reading an argument the tool's `inputSchema` lacks (E025), a lock that cannot
//! be read (E026), a server locked with another command or URL (W016).
//!
//! The lock is read through the `Loader` ([`crate::Loader::load_lock`]), only for a spec
//! that declares an `mcp` server; a loader that knows no project answers
//! [`LockFile::NotChecked`] and these checks are skipped. A name the spec's own declarations
//! already reject (E020, E021, E002) is not checked again here: a tool of an allow-list is
//! checked at its entry in `tools: [...]`, a tool of a `tools: *` server wherever it is
//! named (a role's `tools` and an invariant; a `permit` and `tool_choice` name one of the
//! role's tools).

use serde_json::{Map, Value};

use crate::check::Symbols;
use crate::check::mcp::{allows, parts};
use crate::diagnostics::{Code, Diagnostic, FileId, Sources, Span, did_you_mean};
use crate::lock::{LOCK_FILE, Lock, LockedServer, LockedTool};
use crate::names::mcp_tool;
use crate::syntax::ast::{Expr, ExprKind, Ident, InvariantKind, Item, McpServer, SpecFile};
use crate::syntax::role_file::offset_of;
use crate::{LoadedFile, LockFile};

/// The most tool or argument names a help lists when none is close to the one written.
const NAMES_SHOWN: usize = 8;

/// The project's lock as the checks see it.
#[derive(Clone, Debug, PartialEq)]
pub enum ProjectLock {
    /// Not checked: the spec declares no server, or the loader knows no project.
    NotChecked,
    /// The project has no lock; `display_name` is where it would be.
    Missing { display_name: String },
    /// The lock could not be read: why, at `span` (in the lock when it was read).
    Unreadable { span: Span, reason: String },
    /// The lock, read from `file`.
    Read { lock: Lock, file: FileId },
}

impl ProjectLock {
    /// The lock the loader found, its text added to `sources` so diagnostics can point
    /// into it.
    pub fn read(found: LockFile, sources: &mut Sources) -> ProjectLock {
        match found {
            LockFile::NotChecked => ProjectLock::NotChecked,
            LockFile::Missing { display_name } => ProjectLock::Missing { display_name },
            LockFile::Unreadable {
                display_name,
                reason,
            } => {
                let file = sources.add(display_name, "");
                ProjectLock::Unreadable {
                    span: Span::new(file, 0, 0),
                    reason,
                }
            }
            LockFile::Found(LoadedFile { display_name, text }) => {
                let parsed = Lock::from_yaml(&display_name, &text);
                let file = sources.add(display_name, text.as_str());
                match parsed {
                    Ok(lock) => ProjectLock::Read { lock, file },
                    Err(error) => {
                        let at = error
                            .line
                            .and_then(|line| offset_of(&text, line, error.column.unwrap_or(1)))
                            .unwrap_or(0)
                            .min(text.len());
                        ProjectLock::Unreadable {
                            span: Span::new(file, at, at),
                            reason: error.message,
                        }
                    }
                }
            }
        }
    }

    /// The lock, when it was read.
    pub fn into_lock(self) -> Option<Lock> {
        match self {
            ProjectLock::Read { lock, .. } => Some(lock),
            _ => None,
        }
    }
}

/// Whether `spec` declares an `mcp` server (only then is the lock read).
pub fn declares_servers(spec: &SpecFile) -> bool {
    spec.items.iter().any(|item| matches!(item, Item::Mcp(_)))
}

/// Runs the checks against the lock.
pub fn check(symbols: &Symbols<'_>, project_lock: &ProjectLock, diagnostics: &mut Vec<Diagnostic>) {
    if symbols.mcp.is_empty() {
        return;
    }
    let lock = match project_lock {
        ProjectLock::NotChecked => return,
        ProjectLock::Unreadable { span, reason } => {
            diagnostics.push(
                Diagnostic::new(
                    Code::E026,
                    *span,
                    format!("{LOCK_FILE} cannot be read: {reason}"),
                )
                .with_label("cannot be read")
                .with_help(format!(
                    "run `charter lock` to write {LOCK_FILE} again (it is written by Charter, \
                     not by hand), or restore it from version control"
                )),
            );
            return;
        }
        ProjectLock::Missing { display_name } => {
            for server in reachable(symbols) {
                diagnostics.push(not_locked(
                    server,
                    format!("there is no {LOCK_FILE}"),
                    format!(
                        "`charter lock` starts each declared server, asks what tools it offers and \
                         writes `{display_name}`; commit it, and `charter check` checks the \
                         spec's tools against it"
                    ),
                ));
            }
            return;
        }
        ProjectLock::Read { lock, .. } => lock,
    };
    for server in reachable(symbols) {
        let name = server.name.name.as_str();
        let Some(locked) = lock.servers.get(name) else {
            diagnostics.push(not_locked(
                server,
                format!("not one of the servers in {LOCK_FILE}"),
                format!(
                    "`charter lock` adds `{name}` to {LOCK_FILE} with the tools it offers; commit \
                     the change"
                ),
            ));
            continue;
        };
        moved(server, locked, diagnostics);
        for entry in server
            .tools
            .as_ref()
            .and_then(|tools| tools.only.as_ref())
            .into_iter()
            .flatten()
        {
            if !locked.tools.contains_key(&entry.name) {
                diagnostics.push(unlisted(name, &entry.name, entry.span, locked));
            }
        }
    }
    for role in symbols.roles.values() {
        for tool in &role.tools {
            names_a_tool(symbols, lock, tool, diagnostics);
        }
        for permit in &role.permits {
            if !role.tools.iter().any(|held| held.name == permit.tool.name) {
                continue; // E002
            }
            let Some(locked) = locked_tool(symbols, lock, &permit.tool.name) else {
                continue;
            };
            reads_arguments(
                &permit.condition,
                &permit.tool.name,
                &locked.input_schema,
                diagnostics,
            );
        }
    }
    for invariant in symbols.invariants.values() {
        if let InvariantKind::OnlyUses { tool, .. } = &invariant.kind {
            names_a_tool(symbols, lock, tool, diagnostics);
        }
    }
}

/// The servers declared so that they can be reached (one of `command` and `url`; E020
/// reports the others).
fn reachable<'a>(symbols: &Symbols<'a>) -> Vec<&'a McpServer> {
    symbols
        .mcp
        .values()
        .copied()
        .filter(|server| server.command.is_some() != server.url.is_some())
        .collect()
}

/// E023 at `server`'s name.
fn not_locked(server: &McpServer, label: String, help: String) -> Diagnostic {
    Diagnostic::new(
        Code::E023,
        server.name.span,
        format!(
            "MCP server `{}` is not in {LOCK_FILE}: run `charter lock`",
            server.name.name
        ),
    )
    .with_label(label)
    .with_help(help)
}

/// W016 when the lock was made with another command or URL than the spec declares.
fn moved(server: &McpServer, locked: &LockedServer, diagnostics: &mut Vec<Diagnostic>) {
    let name = &server.name.name;
    let (span, what, declared, was) = if let Some(command) = &server.command {
        let argv: Vec<String> = command
            .argv
            .iter()
            .map(|argument| argument.value.clone())
            .collect();
        if locked.command.as_ref() == Some(&argv) {
            return;
        }
        (
            command.span,
            "command",
            quoted_argv(&argv),
            locked_endpoint(locked),
        )
    } else if let Some(url) = &server.url {
        if locked.url.as_deref() == Some(url.url.value.as_str()) {
            return;
        }
        (
            url.span,
            "url",
            format!("`{}`", url.url.value),
            locked_endpoint(locked),
        )
    } else {
        return;
    };
    diagnostics.push(
        Diagnostic::new(
            Code::W016,
            span,
            format!(
                "{LOCK_FILE} was made with another {what} for MCP server `{name}`: run `charter lock`"
            ),
        )
        .with_label(format!("{LOCK_FILE} has {was}"))
        .with_help(format!(
            "the spec now declares {declared}; `charter lock` asks the server as declared and \
             writes what it offers, so the tools are checked against the server the spec runs"
        )),
    );
}

/// `["npx", "-y", "pkg"]` as the spec writes it.
fn quoted_argv(argv: &[String]) -> String {
    let quoted: Vec<String> = argv
        .iter()
        .map(|argument| format!("{argument:?}"))
        .collect();
    format!("`[{}]`", quoted.join(", "))
}

/// What the lock says the server was reached by.
fn locked_endpoint(locked: &LockedServer) -> String {
    match (&locked.command, &locked.url) {
        (Some(argv), _) => format!("the command {}", quoted_argv(argv)),
        (None, Some(url)) => format!("the url `{url}`"),
        (None, None) => "neither a command nor a url".to_string(),
    }
}

/// E024 for tool `tool` of `server`, at `span`, which the locked server does not list.
fn unlisted(server: &str, tool: &str, span: Span, locked: &LockedServer) -> Diagnostic {
    let names: Vec<&str> = locked.tools.keys().map(String::as_str).collect();
    let relock = "run `charter lock` if the server offers it now";
    let help = match did_you_mean(tool, names.iter().copied()) {
        Some(hint) => format!("{hint} Or {relock}"),
        None if names.is_empty() => format!("the locked server lists no tool; {relock}"),
        None => format!(
            "the locked server lists {}; or {relock}",
            some_names(&names)
        ),
    };
    Diagnostic::new(
        Code::E024,
        span,
        format!("MCP server `{server}` does not list a tool `{tool}` in {LOCK_FILE}"),
    )
    .with_label(format!("not a tool of `{server}`"))
    .with_help(help)
}

/// Up to [`NAMES_SHOWN`] names, quoted, and how many more there are.
fn some_names(names: &[&str]) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(NAMES_SHOWN)
        .map(|name| format!("`{name}`"))
        .collect();
    let more = names.len().saturating_sub(NAMES_SHOWN);
    if more == 0 {
        shown.join(", ")
    } else {
        format!("{} and {more} more", shown.join(", "))
    }
}

/// E024 for a `SERVER.TOOL` name of a `tools: *` server whose lock entry lacks TOOL.
fn names_a_tool(
    symbols: &Symbols<'_>,
    lock: &Lock,
    tool: &Ident,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Some((server_name, tool_name)) = mcp_tool(&tool.name) else {
        return;
    };
    let Some(server) = symbols.mcp.get(server_name) else {
        return; // E021
    };
    let every_tool = server
        .tools
        .as_ref()
        .is_some_and(|tools| tools.only.is_none());
    if !every_tool {
        return; // an allow-list: its entries are checked, or E020/E021
    }
    let Some(locked) = lock.servers.get(server_name) else {
        return; // E023 at the server
    };
    if locked.tools.contains_key(tool_name) {
        return;
    }
    let (_, tool_span) = parts(tool, server_name.len());
    diagnostics.push(unlisted(server_name, tool_name, tool_span, locked));
}

/// The locked tool a `SERVER.TOOL` name the spec lets a role use stands for.
fn locked_tool<'l>(symbols: &Symbols<'_>, lock: &'l Lock, name: &str) -> Option<&'l LockedTool> {
    let (server_name, tool_name) = mcp_tool(name)?;
    let server = symbols.mcp.get(server_name)?;
    if !allows(server, tool_name) {
        return None;
    }
    lock.servers.get(server_name)?.tools.get(tool_name)
}

/// E025 for each `args.X…` in `condition` that names a property `schema` does not have.
fn reads_arguments(
    condition: &Expr,
    tool: &str,
    schema: &Value,
    diagnostics: &mut Vec<Diagnostic>,
) {
    match &condition.kind {
        ExprKind::Path(segments) => {
            if segments.first().is_some_and(|first| first.name == "args") {
                argument_path(segments, tool, schema, diagnostics);
            }
        }
        ExprKind::List(items) => {
            for item in items {
                reads_arguments(item, tool, schema, diagnostics);
            }
        }
        ExprKind::Record(entries) => {
            for (_, value) in entries {
                reads_arguments(value, tool, schema, diagnostics);
            }
        }
        ExprKind::Unary { operand, .. } => reads_arguments(operand, tool, schema, diagnostics),
        ExprKind::Binary { lhs, rhs, .. } => {
            reads_arguments(lhs, tool, schema, diagnostics);
            reads_arguments(rhs, tool, schema, diagnostics);
        }
        ExprKind::Call { args, .. } => {
            for arg in args {
                reads_arguments(arg, tool, schema, diagnostics);
            }
        }
        ExprKind::Quantifier {
            var, over, body, ..
        } => {
            reads_arguments(over, tool, schema, diagnostics);
            if var.name != "args" {
                reads_arguments(body, tool, schema, diagnostics);
            }
        }
        ExprKind::Bool(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::None => {}
    }
}

/// E025 for the first segment after `args` that the schema, followed down the path, does
/// not declare; a level whose properties are open (or unknown) ends the check.
fn argument_path(
    segments: &[Ident],
    tool: &str,
    schema: &Value,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut schema = schema;
    for (depth, segment) in segments.iter().enumerate().skip(1) {
        let Some(properties) = closed_properties(schema) else {
            return;
        };
        if let Some(next) = properties.get(&segment.name) {
            schema = next;
            continue;
        }
        let Some(first) = segments.first() else {
            return;
        };
        let read: Vec<&str> = segments
            .iter()
            .take(depth + 1)
            .map(|ident| ident.name.as_str())
            .collect();
        let parent = read
            .get(..depth)
            .map(|parent| parent.join("."))
            .unwrap_or_default();
        let names: Vec<&str> = properties.keys().map(String::as_str).collect();
        let help = match did_you_mean(&segment.name, names.iter().copied()) {
            Some(hint) => hint,
            None if names.is_empty() => format!("`{parent}` has no properties"),
            None => format!("the properties of `{parent}` are {}", some_names(&names)),
        };
        let where_ = if depth == 1 {
            format!("the `inputSchema` of `{tool}`")
        } else {
            format!("`{parent}` in the `inputSchema` of `{tool}`")
        };
        diagnostics.push(
            Diagnostic::new(
                Code::E025,
                first.span.to(segment.span),
                format!(
                    "`permit {tool}` reads `{}`, but {where_} has no property `{}`",
                    read.join("."),
                    segment.name
                ),
            )
            .with_label(format!("no argument `{}`", segment.name))
            .with_help(help),
        );
        return;
    }
}

/// The properties of an object schema that allows no others: `properties` without
/// `additionalProperties: true` (or a schema), `patternProperties`, or a combinator or
/// reference that could add more. `None`: any name may be there.
fn closed_properties(schema: &Value) -> Option<&Map<String, Value>> {
    let schema = schema.as_object()?;
    let open = ["patternProperties", "anyOf", "oneOf", "allOf", "$ref", "if"]
        .iter()
        .any(|key| schema.contains_key(*key))
        || schema
            .get("additionalProperties")
            .is_some_and(|additional| additional != &Value::Bool(false));
    if open {
        return None;
    }
    schema.get("properties")?.as_object()
}

#[cfg(test)]
mod tests;
