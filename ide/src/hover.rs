//! Hover: what a name stands for (a contract's fields, a role's model, input, output and
//! tools, a step's role and output, a rules block's lines, an MCP tool's description and
//! arguments from `charter.lock`, ...), an issue code's `charter explain` text, and what a
//! tool's property or sandbox key means.

use std::ops::Range;

use charter_compiler::check::Symbols;
use charter_compiler::explain::explain;
use charter_compiler::lock::{LOCK_FILE, LockedServer};
use charter_compiler::syntax::ast::{
    Contract, GateRule, McpServer, ModelRef, PromptSource, RepairPattern, Role, Step, StepBody,
};
use charter_compiler::{Code, FileId, Sources, Span};

use crate::Analysis;
use crate::index::{Def, step_contract};

/// Markdown to show over `range` of the hovered file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hover {
    pub range: Range<usize>,
    pub markdown: String,
}

impl Analysis {
    /// What the word at `offset` of the file at `path` stands for.
    pub fn hover(&self, path: &str, offset: usize) -> Option<Hover> {
        let text = self.text(path)?;
        let word = crate::complete::word_at(text, offset);
        if let Some(code) = Code::parse(text.get(word.clone())?)
            && text.get(word.clone())?.len() == 4
        {
            return Some(Hover {
                range: word,
                markdown: format!("```text\n{}```", explain(code)),
            });
        }
        let Some(occurrence) = self.occurrence_at(path, offset) else {
            return self.keyword_hover(path, text, word);
        };
        let ast = self.ast.as_ref()?;
        let mut ignored = Vec::new();
        let symbols = Symbols::collect(ast, &mut ignored);
        let markdown = describe(&occurrence.def, &symbols, &self.compilation.sources, self)?;
        Some(Hover {
            range: occurrence.span.range(),
            markdown,
        })
    }
}

impl Analysis {
    /// A tool's property, a sandbox key or a network mode, in the spec where it is one.
    fn keyword_hover(&self, path: &str, text: &str, word: Range<usize>) -> Option<Hover> {
        if self.file_id(path)? != FileId(0) {
            return None;
        }
        let place = crate::props::place(text, word.clone())?;
        let markdown = crate::props::describe(text.get(word.clone())?, &place)?;
        Some(Hover {
            range: word,
            markdown,
        })
    }
}

fn code_block(text: &str) -> String {
    format!("```charter\n{}\n```", text.trim_end())
}

fn snippet(sources: &Sources, span: Span) -> String {
    sources.snippet(span).to_string()
}

fn describe(
    def: &Def,
    symbols: &Symbols<'_>,
    sources: &Sources,
    analysis: &Analysis,
) -> Option<String> {
    Some(match def {
        Def::Contract(name) => match symbols.contracts.get(name.as_str()) {
            Some(contract) => code_block(&contract_text(contract, sources)),
            None => format!("built-in contract `{name}`"),
        },
        Def::Field(contract, field) => {
            let found = symbols
                .contracts
                .get(contract.as_str())?
                .fields
                .iter()
                .find(|f| &f.name.name == field)?;
            format!(
                "{}\n\nfield of contract `{contract}`",
                code_block(&snippet(sources, found.span))
            )
        }
        Def::Role(name) => role_text(
            symbols.roles.get(name.as_str())?,
            symbols,
            sources,
            analysis,
        ),
        Def::Step(name) => step_text(
            symbols.steps.get(name.as_str())?,
            symbols,
            sources,
            analysis,
        ),
        Def::Gate(name) => {
            let gate = symbols.gates.get(name.as_str())?;
            code_block(&snippet(sources, gate.span))
        }
        Def::Rules(name) => {
            let rules = symbols.rules.get(name.as_str())?;
            let version = rules
                .version
                .as_ref()
                .map(|v| format!(" version \"{}\"", v.value))
                .unwrap_or_default();
            let lines: Vec<String> = rules
                .lines
                .iter()
                .map(|l| format!("- {}", l.value))
                .collect();
            format!("rules `{name}`{version}\n\n{}", lines.join("\n"))
        }
        Def::Tool(name) => code_block(&snippet(sources, symbols.tools.get(name.as_str())?.span)),
        Def::Mcp(name) => mcp_text(
            symbols.mcp.get(name.as_str())?,
            analysis.locked_server(name),
        ),
        Def::McpTool(server, tool) => {
            let found = symbols.mcp.get(server.as_str())?;
            let locked = analysis.locked_server(server);
            format!(
                "tool `{tool}` of MCP server `{server}`{}\n\n{}",
                locked_tool_text(locked, tool),
                mcp_text(found, locked)
            )
        }
        Def::Model(name) => code_block(&snippet(sources, symbols.models.get(name.as_str())?.span)),
        Def::Invariant(name) => code_block(&snippet(
            sources,
            symbols.invariants.get(name.as_str())?.span,
        )),
        Def::File(path) => format!("`{path}`"),
        Def::GateRule(gate, rule) => {
            let gate = symbols.gates.get(gate.as_str())?;
            let span = gate.rules.iter().find_map(|r| match r {
                GateRule::Check { name, span, .. } | GateRule::Score { name, span, .. }
                    if &name.name == rule =>
                {
                    Some(*span)
                }
                _ => None,
            })?;
            code_block(&snippet(sources, span))
        }
        Def::Issue(code) => issue_text(code, symbols, sources),
    })
}

/// What `charter.lock` says of `tool`: its description and its arguments (the input
/// schema as pretty JSON, cut to [`SCHEMA_LINES`] lines), or that it does not list it.
fn locked_tool_text(locked: Option<&LockedServer>, tool: &str) -> String {
    let Some(locked) = locked else {
        return format!(
            "\n\nits description and arguments show here once `charter lock` has written {LOCK_FILE}"
        );
    };
    let Some(found) = locked.tools.get(tool) else {
        return format!("\n\n**not listed** by the server in {LOCK_FILE} (E024)");
    };
    let mut text = String::new();
    if let Some(description) = found
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
    {
        text.push_str(&format!("\n\n{}", description.trim()));
    }
    let schema = format!("{:#}", found.input_schema);
    let lines: Vec<&str> = schema.lines().collect();
    let shown: Vec<&str> = lines.iter().take(SCHEMA_LINES).copied().collect();
    let mut block = shown.join("\n");
    if lines.len() > SCHEMA_LINES {
        block.push_str(&format!(
            "\n… {} more lines in {LOCK_FILE}",
            lines.len() - SCHEMA_LINES
        ));
    }
    text.push_str(&format!(
        "\n\narguments (`inputSchema`):\n```json\n{block}\n```"
    ));
    text
}

/// The most lines of a tool's input schema a hover shows.
const SCHEMA_LINES: usize = 40;

/// An `mcp` server as it is reached (its command or URL) and the tools it lets the spec
/// use, with what that means, and what `charter.lock` holds of it.
fn mcp_text(server: &McpServer, locked: Option<&LockedServer>) -> String {
    let quote = |text: &str| format!("{text:?}");
    let mut lines = vec![format!("mcp {} {{", server.name.name)];
    let how = match (&server.command, &server.url) {
        (Some(command), _) => {
            let argv: Vec<String> = command.argv.iter().map(|arg| quote(&arg.value)).collect();
            lines.push(format!("  command: [{}]", argv.join(", ")));
            "started as a process in the project root, spoken to over stdio"
        }
        (None, Some(url)) => {
            lines.push(format!("  url: {}", quote(&url.url.value)));
            "reached over streamable HTTP"
        }
        (None, None) => "neither started nor reached: it needs `command` or `url`",
    };
    let tools = match server.tools.as_ref().map(|tools| tools.only.as_ref()) {
        Some(Some(only)) => {
            lines.push(format!("  tools: [{}]", names(only)));
            format!(
                "the spec may use these tools of it, as `{}.TOOL`",
                server.name.name
            )
        }
        Some(None) => {
            lines.push("  tools: *".to_string());
            format!(
                "the spec may use every tool it lists, as `{}.TOOL` (checked against \
                 {LOCK_FILE})",
                server.name.name
            )
        }
        None => "it lets the spec use no tool yet: it needs `tools`".to_string(),
    };
    lines.push("}".to_string());
    let lock = match locked {
        Some(locked) => format!(
            "\n\n{LOCK_FILE}: {} {}, protocol {}, {} tool{}",
            locked.server.name,
            locked.server.version,
            locked.protocol_version,
            locked.tools.len(),
            if locked.tools.len() == 1 { "" } else { "s" }
        ),
        None => String::new(),
    };
    format!(
        "{}\n\nMCP server, {how}; {tools}{lock}",
        code_block(&lines.join("\n"))
    )
}

fn contract_text(contract: &Contract, sources: &Sources) -> String {
    let mut text = format!("contract {} {{\n", contract.name.name);
    for field in &contract.fields {
        text.push_str(&format!("  {}\n", sources.snippet(field.span).trim()));
    }
    text.push('}');
    text
}

fn names(idents: &[charter_compiler::syntax::ast::Ident]) -> String {
    idents
        .iter()
        .map(|ident| ident.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn role_text(role: &Role, symbols: &Symbols<'_>, sources: &Sources, analysis: &Analysis) -> String {
    let mut lines = vec![format!("role {}", role.name.name)];
    match &role.model {
        Some(ModelRef::Alias(alias)) => {
            let target = symbols
                .models
                .get(alias.name.as_str())
                .map(|entry| format!(" = \"{}\"", entry.target.value))
                .unwrap_or_default();
            lines.push(format!("  model: {}{target}", alias.name));
        }
        Some(ModelRef::Literal(literal)) => lines.push(format!("  model: \"{}\"", literal.value)),
        None => {}
    }
    lines.push(format!("  input: {}", names(&role.inputs)));
    if let Some(output) = &role.output {
        lines.push(format!("  output: {}", output.name));
    }
    if !role.tools.is_empty() {
        lines.push(format!("  tools: [{}]", names(&role.tools)));
    }
    if !role.rules.is_empty() {
        lines.push(format!("  rules: [{}]", names(&role.rules)));
    }
    if let Some(prompt) = &role.prompt
        && let PromptSource::File {
            file: Some(file), ..
        } = &prompt.source
        && let Some(path) = analysis.path_of(*file)
    {
        lines.push(format!("  prompt: {path}"));
    }
    // How the call is laid out changes what the model sees: worth showing when it is said.
    if let Some(messages) = &role.messages {
        lines.push(format!("  messages: {}", messages.name));
    }
    let _ = sources;
    code_block(&lines.join("\n"))
}

fn step_text(step: &Step, symbols: &Symbols<'_>, sources: &Sources, analysis: &Analysis) -> String {
    let body = sources.snippet(step.span);
    let first_line = body.lines().next().unwrap_or("").trim().to_string();
    let mut text = format!("step `{}`\n\n{}", step.name.name, code_block(&first_line));
    if let Some(contract) = step_contract(symbols, step) {
        text.push_str(&format!("\n\noutput: `{contract}`"));
    }
    let role = match &step.body {
        StepBody::Call { role, .. }
        | StepBody::Each { role, .. }
        | StepBody::Finalize { role, .. } => symbols.roles.get(role.name.as_str()),
        _ => None,
    };
    if let Some(role) = role {
        text.push_str(&format!(
            "\n\n{}",
            role_text(role, symbols, sources, analysis)
        ));
    }
    text
}

fn issue_text(code: &str, symbols: &Symbols<'_>, sources: &Sources) -> String {
    let mut text = format!("issue `{code}`");
    for gate in symbols.gates.values() {
        for rule in &gate.rules {
            let (span, emits) = match rule {
                GateRule::Check { code: c, span, .. } => (*span, c.name == code),
                GateRule::Score { below, span, .. } => {
                    (*span, below.as_ref().is_some_and(|(_, c)| c.name == code))
                }
            };
            if emits {
                text.push_str(&format!(
                    "\n\nraised by gate `{}`:\n{}",
                    gate.name.name,
                    code_block(&snippet(sources, span))
                ));
            }
        }
    }
    if let Some(repair) = symbols.repair {
        for arm in &repair.arms {
            if let RepairPattern::Codes(codes) = &arm.pattern
                && codes.iter().any(|c| c.name == code)
            {
                text.push_str(&format!(
                    "\n\nrepaired by:\n{}",
                    code_block(&snippet(sources, arm.span))
                ));
            }
        }
    }
    text
}
