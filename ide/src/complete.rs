//! Completion: keywords and the names in scope, a contract's fields after `.`, an `mcp`
//! server's tools after `SERVER.` where a tool is named (those `charter.lock` lists, marked
//! when its allow-list leaves them out), issue codes in `repair`, a tool's
//! properties, an `mcp` server's keys and a sandbox's keys and values, and the variables a
//! role's prompt template may read inside `{{ }}`.

use std::ops::Range;

use charter_compiler::check::Symbols;
use charter_compiler::check::templates::provided_variables;
use charter_compiler::lock::LockedServer;
use charter_compiler::names::snake_case;
use charter_compiler::syntax::ast::{McpServer, Role};

use crate::Analysis;
use crate::index::{Def, field_contract, request_contract, step_contract};
use crate::props::{self, Block};
use crate::scan::{TemplateItem, tag_at, template_items};

/// Keywords of the language, offered where a name is expected.
pub const KEYWORDS: [&str; 72] = [
    "spec",
    "version",
    "import",
    "models",
    "rules",
    "contract",
    "tool",
    "mcp",
    "role",
    "gate",
    "repair",
    "invariant",
    "budget",
    "session",
    "remember",
    "flow",
    "model",
    "prompt",
    "file",
    "input",
    "output",
    "tools",
    "max_tool_calls",
    "timeout",
    "retry",
    "backoff",
    "history",
    "last",
    "tool_choice",
    "retry_after_effects",
    "messages",
    "permit",
    "when",
    "else",
    "on_error",
    "effect",
    "read",
    "write",
    "external",
    "sandbox",
    "network",
    "env",
    "processes",
    "required",
    "hard",
    "warn",
    "score",
    "weight",
    "below",
    "detail",
    "pass",
    "fail",
    "on",
    "rounds",
    "no_progress",
    "rerun",
    "with",
    "feedback",
    "replan",
    "accept",
    "block",
    "ask",
    "each",
    "in",
    "finalize",
    "branch",
    "done",
    "blocked",
    "failed",
    "every",
    "some",
    "count",
];

/// What a completion names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionKind {
    Keyword,
    Contract,
    Field,
    Role,
    Step,
    Gate,
    Rules,
    Tool,
    /// An `mcp` server (its tools follow a `.`).
    Server,
    Model,
    Issue,
    Variable,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub label: String,
    pub kind: CompletionKind,
    pub detail: Option<String>,
}

fn item(label: &str, kind: CompletionKind, detail: Option<String>) -> Completion {
    Completion {
        label: label.to_string(),
        kind,
        detail,
    }
}

/// The identifier around `offset` (empty at a non-word).
pub fn word_at(text: &str, offset: usize) -> Range<usize> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or("");
    let start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| is_word(*c))
        .last()
        .map_or(offset, |(at, _)| at);
    let after = text.get(offset..).unwrap_or("");
    let end = offset + after.find(|c: char| !is_word(c)).unwrap_or(after.len());
    start..end
}

/// The dotted path typed before `offset`: `request.me|` -> (["request"], "me").
fn typed_path(text: &str, offset: usize) -> (Vec<String>, String) {
    let mut segments: Vec<String> = Vec::new();
    let mut end = offset.min(text.len());
    loop {
        let range = word_at(text, end);
        let start = range.start;
        segments.push(text.get(start..end).unwrap_or("").to_string());
        if start > 0 && text.get(start - 1..start) == Some(".") {
            end = start - 1;
        } else {
            break;
        }
    }
    segments.reverse();
    let prefix = segments.pop().unwrap_or_default();
    (segments, prefix)
}

impl Analysis {
    /// What may be written at `offset` of the file at `path`.
    pub fn completions(&self, path: &str, offset: usize) -> Vec<Completion> {
        let (Some(ast), Some(file), Some(text)) =
            (self.ast.as_ref(), self.file_id(path), self.text(path))
        else {
            return keywords();
        };
        let mut ignored = Vec::new();
        let symbols = Symbols::collect(ast, &mut ignored);
        for owner in &self.index.templates {
            if owner.file != file || offset < owner.start || offset > owner.end {
                continue;
            }
            let template = text.get(owner.start..owner.end).unwrap_or("");
            let inner = offset - owner.start;
            if tag_at(template, inner).is_some()
                && let Some(role) = symbols.roles.get(owner.role.as_str())
            {
                return template_completions(role, &symbols, template, inner);
            }
        }
        if file.0 != 0 {
            return Vec::new();
        }
        let (path_before, _) = typed_path(text, offset);
        if let [server] = path_before.as_slice()
            && let Some(server) = symbols.mcp.get(server.as_str())
            && names_a_tool(text, offset)
        {
            return server_tools(server, self.locked_server(&server.name.name));
        }
        if !path_before.is_empty() {
            return self.field_completions(&symbols, text, offset, &path_before);
        }
        if let Some(found) = tool_completions(text, offset) {
            return found;
        }
        if in_block(text, offset, "repair") {
            return self.repair_completions(&symbols);
        }
        let mut found = keywords();
        found.extend(names(&symbols));
        found
    }

    fn field_completions(
        &self,
        symbols: &Symbols<'_>,
        text: &str,
        offset: usize,
        path: &[String],
    ) -> Vec<Completion> {
        let Some((first, rest)) = path.split_first() else {
            return Vec::new();
        };
        let mut contract = match first.as_str() {
            "request" => request_contract(symbols),
            "session" => symbols.session.map(|s| s.contract.name.name.clone()),
            name => match symbols.steps.get(name) {
                Some(step) => step_contract(symbols, step),
                None => bound_variable(symbols, text, offset, name)
                    .or_else(|| permit_variable(symbols, text, offset, name)),
            },
        };
        for segment in rest {
            contract = contract.and_then(|c| field_contract(symbols, &c, segment));
        }
        contract.map(|c| fields(symbols, &c)).unwrap_or_default()
    }

    fn repair_completions(&self, symbols: &Symbols<'_>) -> Vec<Completion> {
        let mut found: Vec<Completion> = Vec::new();
        for occurrence in &self.index.occurrences {
            if let Def::Issue(code) = &occurrence.def
                && occurrence.is_def
                && !found.iter().any(|c| &c.label == code)
            {
                found.push(item(
                    code,
                    CompletionKind::Issue,
                    Some("issue code".to_string()),
                ));
            }
        }
        for keyword in [
            "rounds",
            "no_progress",
            "rerun",
            "with",
            "feedback",
            "replan",
            "accept",
            "block",
            "fail",
            "ask",
        ] {
            found.push(item(keyword, CompletionKind::Keyword, None));
        }
        for step in symbols.steps.keys() {
            found.push(item(step, CompletionKind::Step, Some("step".to_string())));
        }
        found
    }
}

/// Inside a `tool` block: its properties where a key goes, `required` after `sandbox:`
/// and the effects after `effect:`; inside an `mcp` block: its keys, and `env` as a value
/// of its `env` and `headers` maps; inside a `sandbox { }`: the sandbox's keys, the
/// network modes after `network:` and `true`/`false` after `required:`. `None` elsewhere
/// (and after any other key, where the general completions apply).
fn tool_completions(text: &str, offset: usize) -> Option<Vec<Completion>> {
    let word = word_at(text, offset);
    let place = props::place(text, word.start..offset)?;
    if place.in_list {
        return None;
    }
    let table = |entries: &[(&str, &str)], what: &str| {
        entries
            .iter()
            .map(|(name, detail)| {
                item(
                    name,
                    CompletionKind::Keyword,
                    Some(format!("{what}: {detail}")),
                )
            })
            .collect::<Vec<_>>()
    };
    let words = |words: &[&str]| {
        words
            .iter()
            .map(|word| item(word, CompletionKind::Keyword, None))
            .collect::<Vec<_>>()
    };
    Some(match (place.block, place.after_key.as_deref()) {
        (Block::Tool, None) => table(&props::TOOL_PROPS, "tool property"),
        (Block::Mcp, None) => table(&props::MCP_KEYS, "mcp server"),
        (Block::Tool | Block::Mcp, Some("sandbox")) => words(&["required"]),
        // A map's names are the author's; a value is text or `env("VAR")`.
        (Block::McpMap, None) => Vec::new(),
        (Block::McpMap, Some(_)) => words(&["env"]),
        (Block::Tool, Some("effect")) => words(&["read", "write", "external"]),
        (Block::Sandbox, None) => table(&props::SANDBOX_KEYS, "sandbox"),
        (Block::Sandbox, Some("network")) => table(&props::NETWORK_VALUES, "network"),
        (Block::Sandbox, Some("required")) => words(&["true", "false"]),
        _ => return None,
    })
}

/// Whether the `SERVER.` path typed before `offset` stands where a tool is named: in a
/// `tools: [...]` list, after `permit`, `tool_choice:` or `uses`.
fn names_a_tool(text: &str, offset: usize) -> bool {
    let mut start = word_at(text, offset).start;
    // Back over `SERVER.`: the word before the dot.
    if start > 0 && text.get(start - 1..start) == Some(".") {
        start = word_at(text, start - 1).start;
    }
    let before = text.get(..start).unwrap_or("").trim_end();
    if before.ends_with("permit") || before.ends_with("uses") || before.ends_with("tool_choice:") {
        return true;
    }
    let Some(open) = before.rfind('[') else {
        return false;
    };
    let list = before.get(open + 1..).unwrap_or("");
    !list.contains(']')
        && before
            .get(..open)
            .unwrap_or("")
            .trim_end()
            .strip_suffix(':')
            .is_some_and(|key| key.trim_end().ends_with("tools"))
}

/// The tools of an `mcp` server, after `SERVER.`: its allow-list's entries first, then
/// every other tool its entry in `charter.lock` lists, marked when the allow-list leaves
/// it out. With no lock, the allow-list alone (and nothing under `tools: *`).
fn server_tools(server: &McpServer, locked: Option<&LockedServer>) -> Vec<Completion> {
    let name = &server.name.name;
    let only = server.tools.as_ref().and_then(|tools| tools.only.as_ref());
    let listed = |tool: &str| only.is_some_and(|only| only.iter().any(|entry| entry.name == tool));
    let allowed = |tool: &str| {
        let description = locked
            .and_then(|locked| locked.tools.get(tool))
            .and_then(|locked| locked.description.as_deref())
            .map(summary)
            .unwrap_or_default();
        format!("tool of mcp server `{name}`{description}")
    };
    let mut found: Vec<Completion> = only
        .into_iter()
        .flatten()
        .map(|entry| {
            item(
                &entry.name,
                CompletionKind::Tool,
                Some(allowed(&entry.name)),
            )
        })
        .collect();
    for tool in locked.into_iter().flat_map(|locked| locked.tools.keys()) {
        if listed(tool) {
            continue;
        }
        let detail = if only.is_some() {
            format!("not in the allow-list of mcp server `{name}`: add it to `tools: [...]`")
        } else {
            allowed(tool)
        };
        found.push(item(tool, CompletionKind::Tool, Some(detail)));
    }
    found
}

/// `: ` and the first line of a tool's description, cut to a completion's detail.
fn summary(description: &str) -> String {
    const MOST: usize = 80;
    let line = description.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        return String::new();
    }
    match line.char_indices().nth(MOST) {
        Some((at, _)) => format!(": {}…", line.get(..at).unwrap_or(line)),
        None => format!(": {line}"),
    }
}

/// The contract held by `name` bound before `offset` as `every|some|count NAME in PATH`.
fn bound_variable(symbols: &Symbols<'_>, text: &str, offset: usize, name: &str) -> Option<String> {
    let before = text.get(..offset)?;
    let needle = format!(" {name} in ");
    let at = before.rfind(&needle)? + needle.len();
    let over: String = before
        .get(at..)?
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
        .collect();
    let mut segments = over.split('.');
    let first = segments.next()?;
    let mut contract = match first {
        "request" => request_contract(symbols),
        step => step_contract(symbols, symbols.steps.get(step)?),
    };
    for segment in segments {
        contract = field_contract(symbols, &contract?, segment);
    }
    contract
}

/// In a `permit TOOL when ...` line of a role block: the contract `name` holds there,
/// `args` (the tool's input contract) or one of the role's inputs by its template name
/// (`work_order`). The inputs are read from the block's `input:` line, since a role with
/// a half-typed permit does not parse.
fn permit_variable(symbols: &Symbols<'_>, text: &str, offset: usize, name: &str) -> Option<String> {
    let before = text.get(..offset)?;
    let line = before.rsplit('\n').next()?.trim_start();
    let tool = line.strip_prefix("permit ")?.split_whitespace().next()?;
    if name == "args" {
        return symbols
            .tools
            .get(tool)
            .and_then(|tool| tool.input.as_ref())
            .map(|input| input.name.clone());
    }
    let block = before.get(before.rfind("role ")?..)?;
    let inputs = block
        .lines()
        .map(str::trim_start)
        .find_map(|line| line.strip_prefix("input:"))?;
    inputs
        .split(',')
        .map(|input| {
            input
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
        })
        .find(|contract| symbols.is_contract(contract) && snake_case(contract) == name)
}

fn fields(symbols: &Symbols<'_>, contract: &str) -> Vec<Completion> {
    let Some(found) = symbols.contracts.get(contract) else {
        return Vec::new();
    };
    found
        .fields
        .iter()
        .map(|field| {
            item(
                &field.name.name,
                CompletionKind::Field,
                Some(format!("{contract}.{}", field.name.name)),
            )
        })
        .collect()
}

/// True when `offset` is inside the braces of a `KEYWORD {` block.
fn in_block(text: &str, offset: usize, keyword: &str) -> bool {
    let before = text.get(..offset).unwrap_or("");
    let mut search = before.len();
    while let Some(at) = before.get(..search).and_then(|b| b.rfind(keyword)) {
        search = at;
        let starts_line = before
            .get(..at)
            .is_none_or(|b| b.trim_end_matches([' ', '\t']).ends_with('\n') || b.is_empty());
        let after = before.get(at + keyword.len()..).unwrap_or("");
        if starts_line && after.trim_start().starts_with('{') {
            let opened = after.matches('{').count();
            let closed = after.matches('}').count();
            return opened > closed;
        }
    }
    false
}

fn keywords() -> Vec<Completion> {
    KEYWORDS
        .iter()
        .map(|k| item(k, CompletionKind::Keyword, None))
        .collect()
}

fn names(symbols: &Symbols<'_>) -> Vec<Completion> {
    let mut found = Vec::new();
    let mut add = |names: Vec<&str>, kind: CompletionKind, what: &str| {
        for name in names {
            found.push(item(name, kind, Some(what.to_string())));
        }
    };
    add(
        symbols.contract_names().collect(),
        CompletionKind::Contract,
        "contract",
    );
    add(
        symbols.roles.keys().copied().collect(),
        CompletionKind::Role,
        "role",
    );
    add(
        symbols.steps.keys().copied().collect(),
        CompletionKind::Step,
        "step",
    );
    add(
        symbols.gates.keys().copied().collect(),
        CompletionKind::Gate,
        "gate",
    );
    add(
        symbols.tools.keys().copied().collect(),
        CompletionKind::Tool,
        "tool",
    );
    add(
        symbols.mcp.keys().copied().collect(),
        CompletionKind::Server,
        "mcp server: its tools are `SERVER.TOOL`",
    );
    add(
        symbols.models.keys().copied().collect(),
        CompletionKind::Model,
        "model",
    );
    add(
        symbols.rules.keys().copied().collect(),
        CompletionKind::Rules,
        "rules block",
    );
    add(
        vec!["request", "candidate", "best"],
        CompletionKind::Variable,
        "value",
    );
    found
}

/// Inside a template tag: after `x.`, the fields of what `x` holds; else every variable
/// the role provides (as the checker decides: its inputs, what every template sees,
/// `history`, `meta`, `session`) and the loop variables in scope.
fn template_completions(
    role: &Role,
    symbols: &Symbols<'_>,
    template: &str,
    offset: usize,
) -> Vec<Completion> {
    let mut loops: Vec<(String, Option<String>)> = Vec::new();
    let input_contract = |name: &str| {
        role.inputs
            .iter()
            .find(|input| snake_case(&input.name) == name)
            .map(|input| input.name.clone())
    };
    let resolve = |loops: &[(String, Option<String>)], segments: &[&str]| -> Option<String> {
        let (first, rest) = segments.split_first()?;
        let mut contract = match loops.iter().rev().find(|(v, _)| v == first) {
            Some((_, contract)) => contract.clone(),
            None if *first == "session" => symbols.session.map(|s| s.contract.name.name.clone()),
            None => input_contract(first),
        };
        for segment in rest {
            contract = field_contract(symbols, &contract?, segment);
        }
        contract
    };
    for found in template_items(template.get(..offset).unwrap_or("")) {
        match found {
            TemplateItem::For { var, over } => {
                let segments: Vec<&str> = over.segments.iter().map(|(s, _)| s.as_str()).collect();
                let contract = resolve(&loops, &segments);
                loops.push((var, contract));
            }
            TemplateItem::EndFor => {
                loops.pop();
            }
            _ => {}
        }
    }
    let (path, _) = typed_path(template, offset);
    if !path.is_empty() {
        let segments: Vec<&str> = path.iter().map(String::as_str).collect();
        return resolve(&loops, &segments)
            .map(|c| fields(symbols, &c))
            .unwrap_or_default();
    }
    let (provided, inputs) = provided_variables(role, symbols);
    let mut variables: Vec<(String, String)> = provided
        .into_iter()
        .map(|name| {
            let detail = match inputs.get(&name) {
                Some(contract) => format!("input `{contract}`"),
                None => "provided by charter".to_string(),
            };
            (name, detail)
        })
        .collect();
    for (var, _) in &loops {
        variables.push((var.clone(), "loop variable".to_string()));
    }
    variables
        .into_iter()
        .map(|(name, detail)| item(&name, CompletionKind::Variable, Some(detail)))
        .collect()
}
