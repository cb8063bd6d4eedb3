//! The outline of a spec (its items, with steps nested in the flow, fields in contracts and
//! rules in gates) and the tokens an editor colours it by.

use std::ops::Range;

use charter_compiler::syntax::ast::{GateRule, Item, Role};
use charter_compiler::{FileId, Span};

use crate::Analysis;
use crate::index::{Def, Extra};
use crate::scan::{Lexeme, lex};

/// What an outline entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    Import,
    Models,
    Model,
    Rules,
    Contract,
    Field,
    Tool,
    /// An `mcp` server, with the tools it lets the spec use.
    Mcp,
    Role,
    Gate,
    GateRule,
    Repair,
    Invariant,
    Budget,
    Session,
    Remember,
    Flow,
    Step,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutlineItem {
    pub name: String,
    pub kind: SymbolKind,
    /// The whole item.
    pub range: Range<usize>,
    /// Its name.
    pub selection: Range<usize>,
    pub children: Vec<OutlineItem>,
}

fn entry(name: &str, kind: SymbolKind, whole: Span, name_span: Span) -> OutlineItem {
    // A name written outside its item (an imported role's, in its file) selects the item.
    let selection = if name_span.file == whole.file
        && name_span.start >= whole.start
        && name_span.end <= whole.end
    {
        name_span.range()
    } else {
        whole.start as usize..whole.start as usize
    };
    OutlineItem {
        name: name.to_string(),
        kind,
        range: whole.range(),
        selection,
        children: Vec::new(),
    }
}

/// How a token is coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TokenKind {
    Keyword,
    /// A contract.
    Type,
    /// A role.
    Function,
    /// A step.
    Variable,
    /// A contract's field.
    Property,
    String,
    Number,
    Comment,
    /// An enum variant or issue code.
    EnumMember,
    /// A gate.
    Class,
    /// A tool.
    Method,
    /// A model alias.
    Macro,
    /// A rules block.
    Namespace,
    /// A name bound in an expression (`every i in ...`), or `request`, `candidate`.
    Parameter,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub range: Range<usize>,
    pub kind: TokenKind,
}

impl Analysis {
    /// The items of the spec, as an editor's outline shows them.
    pub fn outline(&self) -> Vec<OutlineItem> {
        let Some(ast) = &self.ast else {
            return Vec::new();
        };
        ast.items.iter().filter_map(outline_item).collect()
    }

    /// The tokens of the file at `path`, in order, none overlapping.
    pub fn tokens(&self, path: &str) -> Vec<Token> {
        let (Some(file), Some(text)) = (self.file_id(path), self.text(path)) else {
            return Vec::new();
        };
        let named = self.named_tokens(file);
        if file != FileId(0) {
            return named;
        }
        let mut tokens = Vec::new();
        for (lexeme, range) in lex(text) {
            let kind = match lexeme {
                Lexeme::Comment => TokenKind::Comment,
                Lexeme::Number => TokenKind::Number,
                Lexeme::String => {
                    split_string(range, &named, &mut tokens);
                    continue;
                }
                Lexeme::Word => match named.iter().find(|t| t.range == range) {
                    Some(token) => token.kind,
                    None if crate::complete::KEYWORDS
                        .contains(&text.get(range.clone()).unwrap_or(""))
                        || matches!(
                            text.get(range.clone()),
                            Some("spec" | "true" | "false" | "none" | "and" | "or" | "not")
                        ) =>
                    {
                        TokenKind::Keyword
                    }
                    None => continue,
                },
            };
            tokens.push(Token { range, kind });
        }
        tokens
    }

    /// The tokens of names the index knows in `file`, sorted.
    fn named_tokens(&self, file: FileId) -> Vec<Token> {
        let mut tokens: Vec<Token> = self
            .index
            .occurrences
            .iter()
            .filter(|o| o.span.file == file)
            .map(|o| Token {
                range: o.span.range(),
                kind: def_kind(&o.def),
            })
            .chain(
                self.index
                    .extras
                    .iter()
                    .filter(|(span, _)| span.file == file)
                    .map(|(span, extra)| Token {
                        range: span.range(),
                        kind: match extra {
                            Extra::Function => TokenKind::Function,
                            Extra::Variant => TokenKind::EnumMember,
                            Extra::Local => TokenKind::Parameter,
                        },
                    }),
            )
            .filter(|token| !token.range.is_empty())
            .collect();
        tokens.sort_by_key(|t| (t.range.start, t.range.end));
        tokens.dedup_by(|later, earlier| later.range.start < earlier.range.end);
        tokens
    }
}

/// A string, split around the names inside it (an inline prompt's template variables).
fn split_string(range: Range<usize>, named: &[Token], tokens: &mut Vec<Token>) {
    let mut at = range.start;
    for inner in named
        .iter()
        .filter(|t| t.range.start >= range.start && t.range.end <= range.end)
    {
        if inner.range.start > at {
            tokens.push(Token {
                range: at..inner.range.start,
                kind: TokenKind::String,
            });
        }
        tokens.push(inner.clone());
        at = inner.range.end;
    }
    if at < range.end {
        tokens.push(Token {
            range: at..range.end,
            kind: TokenKind::String,
        });
    }
}

fn def_kind(def: &Def) -> TokenKind {
    match def {
        Def::Contract(_) => TokenKind::Type,
        Def::Field(..) | Def::GateRule(..) => TokenKind::Property,
        Def::Role(_) => TokenKind::Function,
        Def::Step(_) => TokenKind::Variable,
        Def::Gate(_) | Def::Invariant(_) => TokenKind::Class,
        Def::Rules(_) => TokenKind::Namespace,
        Def::Tool(_) | Def::McpTool(..) => TokenKind::Method,
        Def::Mcp(_) => TokenKind::Namespace,
        Def::Model(_) => TokenKind::Macro,
        Def::File(_) => TokenKind::String,
        Def::Issue(_) => TokenKind::EnumMember,
    }
}

fn role_entry(role: &Role, whole: Span) -> OutlineItem {
    entry(&role.name.name, SymbolKind::Role, whole, role.name.span)
}

fn outline_item(item: &Item) -> Option<OutlineItem> {
    Some(match item {
        Item::Import(import) => match &import.role {
            Some(role) => role_entry(role, import.span),
            None => entry(
                &import.path.value,
                SymbolKind::Import,
                import.span,
                import.path.span,
            ),
        },
        Item::Models(block) => {
            let mut models = entry("models", SymbolKind::Models, block.span, block.span);
            models.selection = block.span.start as usize..block.span.start as usize + 6;
            models.children = block
                .entries
                .iter()
                .map(|e| entry(&e.alias.name, SymbolKind::Model, e.span, e.alias.span))
                .collect();
            models
        }
        Item::Rules(block) => entry(
            &block.name.name,
            SymbolKind::Rules,
            block.span,
            block.name.span,
        ),
        Item::Contract(contract) => contract_entry(contract, SymbolKind::Contract),
        Item::Session(session) => contract_entry(&session.contract, SymbolKind::Session),
        Item::Tool(tool) => entry(&tool.name.name, SymbolKind::Tool, tool.span, tool.name.span),
        Item::Mcp(server) => {
            let name = &server.name.name;
            let mut found = entry(name, SymbolKind::Mcp, server.span, server.name.span);
            let allowed = server.tools.iter().flat_map(|tools| tools.only.iter());
            found.children = allowed
                .flatten()
                .map(|tool| {
                    entry(
                        &format!("{name}.{}", tool.name),
                        SymbolKind::Tool,
                        tool.span,
                        tool.span,
                    )
                })
                .collect();
            found
        }
        Item::Role(role) => role_entry(role, role.span),
        Item::Gate(gate) => {
            let mut found = entry(&gate.name.name, SymbolKind::Gate, gate.span, gate.name.span);
            found.children = gate
                .rules
                .iter()
                .map(|rule| match rule {
                    GateRule::Check { name, span, .. } | GateRule::Score { name, span, .. } => {
                        entry(&name.name, SymbolKind::GateRule, *span, name.span)
                    }
                })
                .collect();
            found
        }
        Item::Repair(repair) => keyword_entry("repair", SymbolKind::Repair, repair.span),
        Item::Invariant(invariant) => entry(
            &invariant.name.name,
            SymbolKind::Invariant,
            invariant.span,
            invariant.name.span,
        ),
        Item::Budget(budget) => keyword_entry("budget", SymbolKind::Budget, budget.span),
        Item::Remember(remember) => entry(
            &format!("remember {}", remember.field.name),
            SymbolKind::Remember,
            remember.span,
            remember.field.span,
        ),
        Item::Flow(flow) => {
            let mut found = keyword_entry("flow", SymbolKind::Flow, flow.span);
            found.children = flow
                .steps
                .iter()
                .map(|step| entry(&step.name.name, SymbolKind::Step, step.span, step.name.span))
                .collect();
            found
        }
    })
}

fn keyword_entry(name: &str, kind: SymbolKind, span: Span) -> OutlineItem {
    let mut found = entry(name, kind, span, span);
    found.selection =
        span.start as usize..(span.start as usize + name.len()).min(span.end as usize);
    found
}

fn contract_entry(
    contract: &charter_compiler::syntax::ast::Contract,
    kind: SymbolKind,
) -> OutlineItem {
    let mut found = entry(&contract.name.name, kind, contract.span, contract.name.span);
    found.children = contract
        .fields
        .iter()
        .map(|f| entry(&f.name.name, SymbolKind::Field, f.span, f.name.span))
        .collect();
    found
}
