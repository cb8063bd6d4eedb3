//! Lowering: pest pairs to AST nodes, with a span (file + byte range) on every node.
//!
//! The grammar guarantees the shape of the pairs, so lowering functions return `None`
//! only when that shape is not what they expect (a compiler bug, reported as E000 by the
//! driver). Problems with the values themselves (bad durations, duplicate properties,
//! unreadable files) are reported here and lowering goes on.

use pest::iterators::{Pair, Pairs};

use super::Rule;
use super::ast::*;
use super::literals::{self, LiteralError};
use super::role_file;
use crate::Loader;
use crate::diagnostics::{Code, Diagnostic, FileId, Sources, Span, did_you_mean};

/// How deep expressions may nest before lowering gives up on them (E001).
const MAX_EXPRESSION_DEPTH: usize = 64;

/// How many operators one expression level may chain (`a + b + ...`) before lowering gives
/// up on it (E001).
const MAX_OPERATORS: usize = 256;

/// How many operators one whole expression may hold, across its levels and brackets. With
/// the nesting bound, this bounds the depth of any expression tree (about this plus
/// twice the nesting depth), so no later pass that walks the tree by recursion (typing,
/// flow checks, graph lowering, serializing, dropping it) can exhaust the stack.
const MAX_TOTAL_OPERATORS: usize = 1024;

/// Lowers the pairs of one item (or the header, or one step) parsed from
/// `text[offset..]`.
pub(crate) struct Lowerer<'a> {
    pub file: FileId,
    /// Where the parsed slice starts in the file: pair positions are relative to it.
    pub offset: usize,
    pub sources: &'a mut Sources,
    pub loader: &'a dyn Loader,
    pub diagnostics: &'a mut Vec<Diagnostic>,
    pub depth: usize,
    /// Operators in the outermost expression being lowered (see [`MAX_TOTAL_OPERATORS`]).
    pub operators: usize,
}

/// True for keyword and punctuation pairs, which carry no value of their own. One piece:
/// the list of the grammar's token rules.
fn is_token(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::lbrace
            | Rule::rbrace
            | Rule::lparen
            | Rule::rparen
            | Rule::lbracket
            | Rule::rbracket
            | Rule::langle
            | Rule::rangle
            | Rule::colon
            | Rule::comma
            | Rule::equals
            | Rule::arrow
            | Rule::slash
            | Rule::question
            | Rule::pipe
            | Rule::dot
            | Rule::dotdot
            | Rule::dotdoteq
            | Rule::kw_spec
            | Rule::kw_version
            | Rule::kw_import
            | Rule::kw_role
            | Rule::kw_models
            | Rule::kw_price
            | Rule::kw_rules
            | Rule::kw_contract
            | Rule::kw_tool
            | Rule::kw_gate
            | Rule::kw_on
            | Rule::kw_repair
            | Rule::kw_invariant
            | Rule::kw_budget
            | Rule::kw_flow
            | Rule::kw_string
            | Rule::kw_bool
            | Rule::kw_int
            | Rule::kw_float
            | Rule::kw_list
            | Rule::kw_input
            | Rule::kw_output
            | Rule::kw_effect
            | Rule::kw_model
            | Rule::kw_prompt
            | Rule::kw_file
            | Rule::kw_tools
            | Rule::kw_max_tool_calls
            | Rule::kw_timeout
            | Rule::kw_retry
            | Rule::kw_backoff
            | Rule::kw_score
            | Rule::kw_weight
            | Rule::kw_below
            | Rule::kw_detail
            | Rule::kw_history
            | Rule::kw_last
            | Rule::kw_max
            | Rule::kw_on_exhausted
            | Rule::kw_branch
            | Rule::kw_permit
            | Rule::kw_session
            | Rule::kw_keep
            | Rule::kw_remember
            | Rule::kw_temperature
            | Rule::kw_top_p
            | Rule::kw_max_tokens
            | Rule::kw_seed
            | Rule::kw_idle_timeout
            | Rule::kw_tool_choice
            | Rule::kw_messages
            | Rule::kw_retry_after_effects
            | Rule::kw_on_error
            | Rule::kw_sandbox
            | Rule::kw_network
            | Rule::kw_env
            | Rule::kw_processes
            | Rule::kw_mcp
            | Rule::kw_command
            | Rule::kw_url
            | Rule::kw_headers
            | Rule::kw_else
            | Rule::kw_pass
            | Rule::kw_when
            | Rule::kw_rounds
            | Rule::kw_no_progress
            | Rule::kw_rerun
            | Rule::kw_feedback
            | Rule::kw_replan
            | Rule::kw_accept
            | Rule::kw_block
            | Rule::kw_fail
            | Rule::kw_ask
            | Rule::kw_has
            | Rule::kw_no
            | Rule::kw_only
            | Rule::kw_uses
            | Rule::kw_always
            | Rule::kw_tokens
            | Rule::kw_cost
            | Rule::kw_wall
            | Rule::kw_steps
            | Rule::kw_each
            | Rule::kw_in
            | Rule::kw_concurrency
            | Rule::kw_check
            | Rule::kw_by
            | Rule::kw_retries
            | Rule::kw_finalize
            | Rule::kw_blocked
            | Rule::kw_failed
            | Rule::kw_or
            | Rule::kw_and
            | Rule::kw_not
    )
}

/// The children of `pair` that carry values (keywords and punctuation skipped).
fn values<'i>(pair: Pair<'i, Rule>) -> impl Iterator<Item = Pair<'i, Rule>> {
    pair.into_inner().filter(|child| !is_token(child.as_rule()))
}

fn is_string(rule: Rule) -> bool {
    matches!(rule, Rule::string | Rule::block_string | Rule::empty_string)
}

impl Lowerer<'_> {
    /// The span of `pair`, without the whitespace and comments pest counts in a rule that
    /// ends with an optional part it did not find: the end is that of the last token.
    pub(crate) fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let start = pair.as_span().start();
        let mut end = pair.as_span().end();
        let text = pair.as_str();
        // Comments were blanked to spaces before parsing, so trailing trivia is whitespace.
        let trailing_trivia = text.ends_with(char::is_whitespace);
        if !trailing_trivia {
            return Span::new(self.file, self.offset + start, self.offset + end);
        }
        let mut current = pair.clone();
        while let Some(last) = current.clone().into_inner().next_back() {
            end = last.as_span().end();
            current = last;
        }
        Span::new(self.file, self.offset + start, self.offset + end)
    }

    fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    fn bad_literal(&mut self, span: Span, error: LiteralError) {
        let mut diagnostic = Diagnostic::new(Code::E013, span, error.message);
        if let Some(help) = error.help {
            diagnostic = diagnostic.with_help(help);
        }
        self.report(diagnostic);
    }

    // ---------------------------------------------------------------------------------
    // Leaves.

    pub(crate) fn ident(&self, pair: &Pair<'_, Rule>) -> Ident {
        Ident {
            name: pair.as_str().to_string(),
            span: self.span(pair),
        }
    }

    pub(crate) fn string(&mut self, pair: &Pair<'_, Rule>) -> StringLit {
        let span = self.span(pair);
        let text = pair.as_str();
        let value = match pair.as_rule() {
            Rule::block_string | Rule::doc => literals::dedent_block(text),
            Rule::empty_string => String::new(),
            _ => match literals::unescape(text) {
                Ok(value) => value,
                Err(error) => {
                    self.bad_literal(span, error);
                    text.trim_matches('"').to_string()
                }
            },
        };
        StringLit { value, span }
    }

    fn int(&mut self, pair: &Pair<'_, Rule>) -> Option<IntLit> {
        let span = self.span(pair);
        match literals::integer(pair.as_str()) {
            Ok(value) => Some(IntLit { value, span }),
            Err(error) => {
                self.bad_literal(span, error);
                None
            }
        }
    }

    fn number(&mut self, pair: &Pair<'_, Rule>) -> NumberLit {
        let span = self.span(pair);
        match literals::number(pair.as_str()) {
            Ok((value, is_integer)) => NumberLit {
                value,
                is_integer,
                int: if is_integer {
                    literals::signed_integer(pair.as_str())
                } else {
                    None
                },
                span,
            },
            Err(error) => {
                self.bad_literal(span, error);
                NumberLit {
                    value: 0.0,
                    is_integer: false,
                    int: None,
                    span,
                }
            }
        }
    }

    fn duration(&mut self, pair: &Pair<'_, Rule>) -> Option<DurationLit> {
        let span = self.span(pair);
        match literals::duration_millis(pair.as_str()) {
            Ok(millis) => Some(DurationLit { millis, span }),
            Err(error) => {
                self.bad_literal(span, error);
                None
            }
        }
    }

    /// The names of an `ident_list` or a `tool_list` (whose `SERVER.TOOL` is one name).
    fn ident_list(&self, pair: Pair<'_, Rule>) -> Vec<Ident> {
        values(pair)
            .filter(|child| matches!(child.as_rule(), Rule::ident | Rule::tool_ref))
            .map(|child| self.ident(&child))
            .collect()
    }

    /// Reports a second occurrence of a property (E003) and returns true when `name` was
    /// already seen in `seen`; otherwise records it.
    fn duplicate(
        &mut self,
        seen: &mut Vec<(&'static str, Span)>,
        name: &'static str,
        span: Span,
        owner: &str,
    ) -> bool {
        if let Some((_, first)) = seen.iter().find(|(seen_name, _)| *seen_name == name) {
            let first = *first;
            self.report(
                Diagnostic::new(
                    Code::E003,
                    span,
                    format!("`{name}` is given twice in {owner}"),
                )
                .with_label("given again here")
                .with_note(first, "first given here")
                .with_help(format!("keep one `{name}`")),
            );
            return true;
        }
        seen.push((name, span));
        false
    }

    // ---------------------------------------------------------------------------------
    // Header and items.

    pub(crate) fn header(
        &mut self,
        pair: Pair<'_, Rule>,
    ) -> Option<(Ident, StringLit, Option<StringLit>)> {
        let mut children = values(pair);
        let name = self.ident(&children.next()?);
        let version = self.string(&children.next()?);
        let doc = match children.next() {
            Some(doc) => {
                let block = doc.into_inner().next()?;
                Some(self.string(&block))
            }
            None => None,
        };
        Some((name, version, doc))
    }

    pub(crate) fn item(&mut self, pair: Pair<'_, Rule>) -> Option<Item> {
        Some(match pair.as_rule() {
            Rule::import => Item::Import(self.import(pair)?),
            Rule::models => Item::Models(self.models(pair)?),
            Rule::rules_block => Item::Rules(self.rules_block(pair)?),
            Rule::contract => Item::Contract(self.contract(pair)?),
            Rule::tool => Item::Tool(self.tool(pair)?),
            Rule::mcp => Item::Mcp(self.mcp(pair)?),
            Rule::role => Item::Role(self.role(pair)?),
            Rule::gate => Item::Gate(self.gate(pair)?),
            Rule::repair => Item::Repair(self.repair(pair)?),
            Rule::invariant => Item::Invariant(self.invariant(pair)?),
            Rule::budget => Item::Budget(self.budget(pair)?),
            Rule::session => Item::Session(self.session(pair)?),
            Rule::remember => Item::Remember(self.remember(pair)?),
            Rule::flow => Item::Flow(self.flow(pair)?),
            _ => return None,
        })
    }

    fn import(&mut self, pair: Pair<'_, Rule>) -> Option<Import> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let path = self.string(&children.next()?);
        let mut permits = Vec::new();
        if let Some(props) = children.next() {
            for property in values(props) {
                let property_span = self.span(&property);
                let mut parts = values(property);
                let tool = self.ident(&parts.next()?);
                let condition = self.expr(parts.next()?)?;
                permits.push(Permit {
                    tool,
                    condition,
                    span: property_span,
                });
            }
        }
        let mut role = role_file::load(self.loader, self.sources, self.diagnostics, &path);
        if let Some(role) = &mut role {
            role.permits.extend(permits.iter().cloned());
        }
        Some(Import {
            path,
            role,
            permits,
            span,
        })
    }

    fn session(&mut self, pair: Pair<'_, Rule>) -> Option<Session> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let name = self.ident(&children.next()?);
        let keep = self.int(&children.next()?);
        let fields = self.fields(children)?;
        Some(Session {
            contract: Contract { name, fields, span },
            keep,
            span,
        })
    }

    fn remember(&mut self, pair: Pair<'_, Rule>) -> Option<Remember> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let field = self.ident(&children.next()?);
        let value = self.expr(children.next()?)?;
        Some(Remember { field, value, span })
    }

    fn models(&mut self, pair: Pair<'_, Rule>) -> Option<ModelsBlock> {
        let span = self.span(&pair);
        let mut entries = Vec::new();
        for entry in values(pair) {
            let entry_span = self.span(&entry);
            let mut children = values(entry);
            let alias = self.ident(&children.next()?);
            let target = self.string(&children.next()?);
            let mut price = None;
            let mut params = Vec::new();
            for child in children {
                if child.as_rule() == Rule::price {
                    let price_span = self.span(&child);
                    let mut numbers = values(child);
                    let input = self.number(&numbers.next()?);
                    let output = self.number(&numbers.next()?);
                    price = Some(Price {
                        input,
                        output,
                        span: price_span,
                    });
                } else if let Some(param) = self.model_param(child) {
                    params.push(param);
                }
            }
            entries.push(ModelEntry {
                alias,
                target,
                price,
                params,
                span: entry_span,
            });
        }
        Some(ModelsBlock { entries, span })
    }

    /// One `model_param` of a `models` entry (`temperature 0.2`, `output json_object`).
    fn model_param(&mut self, pair: Pair<'_, Rule>) -> Option<ModelParam> {
        let span = self.span(&pair);
        let mut parts = pair.into_inner();
        let keyword = parts.next()?.as_rule();
        let value = parts.next()?;
        Some(match keyword {
            Rule::kw_temperature => ModelParam::Temperature(self.number(&value)),
            Rule::kw_top_p => ModelParam::TopP(self.number(&value)),
            Rule::kw_max_tokens => ModelParam::MaxTokens(self.int(&value)?),
            Rule::kw_seed => ModelParam::Seed(self.int(&value)?),
            Rule::kw_idle_timeout => ModelParam::IdleTimeout(self.duration(&value)?),
            _ => {
                let mode = match value.into_inner().next()?.as_rule() {
                    Rule::kw_json_object => OutputMode::JsonObject,
                    Rule::kw_prompt => OutputMode::Prompt,
                    _ => OutputMode::JsonSchema,
                };
                ModelParam::Output(mode, span)
            }
        })
    }

    fn rules_block(&mut self, pair: Pair<'_, Rule>) -> Option<RulesBlock> {
        let span = self.span(&pair);
        let mut name = None;
        let mut version = None;
        let mut lines = Vec::new();
        let mut after_version = false;
        for child in pair.into_inner() {
            match child.as_rule() {
                Rule::ident => name = Some(self.ident(&child)),
                Rule::kw_version => after_version = true,
                rule if is_string(rule) => {
                    let lit = self.string(&child);
                    if after_version {
                        version = Some(lit);
                        after_version = false;
                    } else {
                        lines.push(lit);
                    }
                }
                _ => {}
            }
        }
        Some(RulesBlock {
            name: name?,
            version,
            lines,
            span,
        })
    }

    fn contract(&mut self, pair: Pair<'_, Rule>) -> Option<Contract> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let name = self.ident(&children.next()?);
        let fields = self.fields(children)?;
        Some(Contract { name, fields, span })
    }

    /// A contract's (or a session's) fields; a field whose type is bad is left out.
    fn fields<'i>(&mut self, children: impl Iterator<Item = Pair<'i, Rule>>) -> Option<Vec<Field>> {
        let mut fields = Vec::new();
        for field in children {
            let field_span = self.span(&field);
            let mut parts = values(field);
            let field_name = self.ident(&parts.next()?);
            // A bad type was reported; the field is left out rather than the contract.
            let Some(ty) = self.type_expr(parts.next()?) else {
                continue;
            };
            let default = match parts.next() {
                Some(expr) => Some(self.expr(expr)?),
                None => None,
            };
            fields.push(Field {
                name: field_name,
                ty,
                default,
                span: field_span,
            });
        }
        Some(fields)
    }

    fn type_expr(&mut self, pair: Pair<'_, Rule>) -> Option<TypeExpr> {
        let span = self.span(&pair);
        let mut optional = false;
        let mut kind = None;
        for child in pair.into_inner() {
            match child.as_rule() {
                Rule::question => optional = true,
                Rule::string_type => kind = Some(TypeKind::String),
                Rule::bool_type => kind = Some(TypeKind::Bool),
                Rule::int_type => {
                    let range = match values(child).next() {
                        Some(range) => Some(self.range(range)?),
                        None => None,
                    };
                    kind = Some(TypeKind::Int(range));
                }
                Rule::float_type => {
                    let range = match values(child).next() {
                        Some(range) => Some(self.range(range)?),
                        None => None,
                    };
                    kind = Some(TypeKind::Float(range));
                }
                Rule::list_type => {
                    self.depth += 1;
                    if self.depth > MAX_EXPRESSION_DEPTH {
                        let at = self.span(&child);
                        self.too_deep(at);
                        return None;
                    }
                    let mut parts = values(child);
                    let element = self.type_expr(parts.next()?);
                    self.depth -= 1;
                    let range = match parts.next() {
                        Some(range) => Some(self.range(range)?),
                        None => None,
                    };
                    kind = Some(TypeKind::List(Box::new(element?), range));
                }
                Rule::enum_type => {
                    let mut variants: Vec<Ident> =
                        values(child).map(|name| self.ident(&name)).collect();
                    if variants.len() > 1 {
                        kind = Some(TypeKind::Enum(variants));
                    } else {
                        let name = variants.pop()?;
                        if !is_type_name(&name.name) {
                            self.not_a_type(&name);
                            return None;
                        }
                        kind = Some(TypeKind::Named(name));
                    }
                }
                _ => {}
            }
        }
        Some(TypeExpr {
            kind: kind?,
            optional,
            span,
        })
    }

    /// A single lower-case (or otherwise malformed) name where a type was expected.
    fn not_a_type(&mut self, name: &Ident) {
        let builtins = ["string", "bool", "int", "float", "list"];
        let help = did_you_mean(&name.name, builtins).unwrap_or_else(|| {
            "a type is `string`, `bool`, `int`, `float`, `list<T>`, `A | B` or a contract name (which starts with an upper-case letter)".to_string()
        });
        self.report(
            Diagnostic::new(Code::E001, name.span, "expected a type")
                .with_label(format!("`{}` is not a type", name.name))
                .with_help(help),
        );
    }

    fn range(&mut self, pair: Pair<'_, Rule>) -> Option<RangeLit> {
        let span = self.span(&pair);
        let mut min = None;
        let mut max = None;
        let mut inclusive = false;
        for child in pair.into_inner() {
            match child.as_rule() {
                Rule::range_min => min = Some(self.number(&child.into_inner().next()?)),
                Rule::range_max => max = Some(self.number(&child.into_inner().next()?)),
                Rule::dotdoteq => inclusive = true,
                _ => {}
            }
        }
        Some(RangeLit {
            min,
            max,
            inclusive,
            span,
        })
    }

    fn tool(&mut self, pair: Pair<'_, Rule>) -> Option<Tool> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let name = self.ident(&children.next()?);
        let owner = format!("tool `{}`", name.name);
        let mut tool = Tool {
            name,
            input: None,
            output: None,
            effect: None,
            timeout: None,
            retry: None,
            sandbox: None,
            span,
        };
        let mut seen = Vec::new();
        for property in children {
            let property_span = self.span(&property);
            let rule = property.as_rule();
            let key = match rule {
                Rule::tool_input => "input",
                Rule::tool_output => "output",
                Rule::tool_timeout => "timeout",
                Rule::tool_retry => "retry",
                Rule::tool_sandbox => "sandbox",
                _ => "effect",
            };
            if self.duplicate(&mut seen, key, property_span, &owner) {
                continue;
            }
            if rule == Rule::tool_sandbox {
                tool.sandbox = Some(self.sandbox(property, &owner)?);
                continue;
            }
            if rule == Rule::tool_retry {
                let mut parts = values(property);
                let count = self.int(&parts.next()?);
                let backoff = match parts.next() {
                    Some(duration) => self.duration(&duration),
                    None => None,
                };
                tool.retry = count.map(|count| Retry {
                    count,
                    backoff,
                    span: property_span,
                });
                continue;
            }
            let value = values(property).next()?;
            match rule {
                Rule::tool_input => tool.input = Some(self.ident(&value)),
                Rule::tool_output => tool.output = Some(self.ident(&value)),
                Rule::tool_timeout => tool.timeout = self.duration(&value),
                _ => {
                    let value_span = self.span(&value);
                    let effect = match value.into_inner().next()?.as_rule() {
                        Rule::kw_read => Effect::Read,
                        Rule::kw_write => Effect::Write,
                        _ => Effect::External,
                    };
                    tool.effect = Some(EffectLit {
                        effect,
                        span: value_span,
                    });
                }
            }
        }
        Some(tool)
    }

    /// An `mcp NAME { ... }` item: each key at most once (E003); which keys go together
    /// and what their values say is checked later (`check::mcp`).
    fn mcp(&mut self, pair: Pair<'_, Rule>) -> Option<McpServer> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let name = self.ident(&children.next()?);
        let owner = format!("mcp server `{}`", name.name);
        let mut server = McpServer {
            name,
            command: None,
            url: None,
            headers: None,
            env: None,
            tools: None,
            timeout: None,
            retry: None,
            sandbox: None,
            span,
        };
        let mut seen = Vec::new();
        for property in children {
            let property_span = self.span(&property);
            let rule = property.as_rule();
            let key = match rule {
                Rule::mcp_command => "command",
                Rule::mcp_url => "url",
                Rule::mcp_headers => "headers",
                Rule::mcp_env => "env",
                Rule::mcp_tools => "tools",
                Rule::tool_timeout => "timeout",
                Rule::tool_sandbox => "sandbox",
                _ => "retry",
            };
            if self.duplicate(&mut seen, key, property_span, &owner) {
                continue;
            }
            match rule {
                Rule::tool_sandbox => server.sandbox = Some(self.sandbox(property, &owner)?),
                Rule::tool_retry => {
                    let mut parts = values(property);
                    let count = self.int(&parts.next()?);
                    let backoff = match parts.next() {
                        Some(duration) => self.duration(&duration),
                        None => None,
                    };
                    server.retry = count.map(|count| Retry {
                        count,
                        backoff,
                        span: property_span,
                    });
                }
                Rule::tool_timeout => {
                    server.timeout = self.duration(&values(property).next()?);
                }
                Rule::mcp_command => {
                    let list = values(property).next()?;
                    server.command = Some(McpCommand {
                        argv: values(list)
                            .filter(|child| is_string(child.as_rule()))
                            .map(|child| self.string(&child))
                            .collect(),
                        span: property_span,
                    });
                }
                Rule::mcp_url => {
                    let url = self.string(&values(property).next()?);
                    server.url = Some(McpUrl {
                        url,
                        span: property_span,
                    });
                }
                Rule::mcp_tools => {
                    let value = values(property).next()?;
                    let only = (value.as_rule() != Rule::star).then(|| self.ident_list(value));
                    server.tools = Some(McpTools {
                        only,
                        span: property_span,
                    });
                }
                _ => {
                    let map = self.secret_map(property, property_span, &owner, key)?;
                    if rule == Rule::mcp_headers {
                        server.headers = Some(map);
                    } else {
                        server.env = Some(map);
                    }
                }
            }
        }
        Some(server)
    }

    /// The `{ NAME: "text" | env("VAR") ... }` of `headers:` or `env:`. A name given twice
    /// is E003 (header names compared without case, as HTTP does).
    fn secret_map(
        &mut self,
        property: Pair<'_, Rule>,
        span: Span,
        owner: &str,
        key: &str,
    ) -> Option<SecretMap> {
        let headers = property.as_rule() == Rule::mcp_headers;
        let map = values(property).next()?;
        let mut entries: Vec<SecretEntry> = Vec::new();
        for entry in values(map) {
            let entry_span = self.span(&entry);
            let mut parts = values(entry);
            let name = self.ident(&parts.next()?);
            let value = parts.next()?;
            let value = if value.as_rule() == Rule::secret_env {
                SecretValue::Env(self.string(&values(value).next()?))
            } else {
                SecretValue::Text(self.string(&value))
            };
            let same = |other: &SecretEntry| {
                if headers {
                    other.name.name.eq_ignore_ascii_case(&name.name)
                } else {
                    other.name.name == name.name
                }
            };
            if let Some(first) = entries.iter().find(|other| same(other)) {
                self.report(
                    Diagnostic::new(
                        Code::E003,
                        name.span,
                        format!("`{}` is given twice in `{key}` of {owner}", name.name),
                    )
                    .with_label("given again here")
                    .with_note(first.name.span, "first given here")
                    .with_help(format!("keep one `{}`", name.name)),
                );
                continue;
            }
            entries.push(SecretEntry {
                name,
                value,
                span: entry_span,
            });
        }
        Some(SecretMap { entries, span })
    }

    /// A tool's `sandbox { ... }` block, or `sandbox: required`. Each key at most once
    /// (E003); the values are checked later (`check::sandbox`).
    fn sandbox(&mut self, pair: Pair<'_, Rule>, tool: &str) -> Option<Sandbox> {
        let span = self.span(&pair);
        let mut sandbox = Sandbox {
            read: None,
            write: None,
            network: None,
            env: Vec::new(),
            processes: None,
            required: None,
            span,
        };
        let Some(block) = pair
            .clone()
            .into_inner()
            .find(|child| child.as_rule() == Rule::sandbox_block)
        else {
            // `sandbox: required`.
            let word = pair
                .into_inner()
                .find(|child| child.as_rule() == Rule::kw_required)?;
            sandbox.required = Some(BoolLit {
                value: true,
                span: self.span(&word),
            });
            return Some(sandbox);
        };
        let owner = format!("the sandbox of {tool}");
        let mut seen = Vec::new();
        for entry in values(block) {
            let entry_span = self.span(&entry);
            let rule = entry.as_rule();
            let key = match rule {
                Rule::sandbox_read => "read",
                Rule::sandbox_write => "write",
                Rule::sandbox_network => "network",
                Rule::sandbox_env => "env",
                Rule::sandbox_processes => "processes",
                _ => "required",
            };
            if self.duplicate(&mut seen, key, entry_span, &owner) {
                continue;
            }
            // The value: the last child (after the key and the `:`).
            let value = entry.into_inner().last()?;
            match rule {
                Rule::sandbox_read | Rule::sandbox_write => {
                    let paths = SandboxPaths {
                        paths: values(value)
                            .filter(|child| is_string(child.as_rule()))
                            .map(|child| self.string(&child))
                            .collect(),
                        span: entry_span,
                    };
                    if rule == Rule::sandbox_read {
                        sandbox.read = Some(paths);
                    } else {
                        sandbox.write = Some(paths);
                    }
                }
                Rule::sandbox_network => {
                    let network = match value.as_str() {
                        "loopback" => Network::Loopback,
                        "any" => Network::Any,
                        _ => Network::None,
                    };
                    sandbox.network = Some(NetworkLit {
                        network,
                        span: self.span(&value),
                    });
                }
                Rule::sandbox_env => {
                    sandbox.env = values(value)
                        .filter(|child| child.as_rule() == Rule::env_name)
                        .map(|child| self.ident(&child))
                        .collect();
                }
                Rule::sandbox_processes => sandbox.processes = self.int(&value),
                _ => {
                    sandbox.required = Some(BoolLit {
                        value: value.as_str() == "true",
                        span: self.span(&value),
                    });
                }
            }
        }
        Some(sandbox)
    }

    /// A role block. One piece: one arm per role property (each at most once, in any
    /// order); splitting would scatter the table of properties.
    fn role(&mut self, pair: Pair<'_, Rule>) -> Option<Role> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let name = self.ident(&children.next()?);
        let owner = format!("role `{}`", name.name);
        let mut role = Role::empty(name, RoleOrigin::Block, span);
        let mut seen = Vec::new();
        for property in children {
            let property_span = self.span(&property);
            let rule = property.as_rule();
            let key = match rule {
                Rule::prop_model => "model",
                Rule::prop_prompt => "prompt",
                Rule::prop_rules => "rules",
                Rule::prop_input => "input",
                Rule::prop_output => "output",
                Rule::prop_tools => "tools",
                Rule::prop_max_tool_calls => "max_tool_calls",
                Rule::prop_timeout => "timeout",
                Rule::prop_history => "history",
                Rule::prop_tool_choice => "tool_choice",
                Rule::prop_retry_after_effects => "retry_after_effects",
                Rule::prop_messages => "messages",
                Rule::prop_permit => "permit",
                _ => "retry",
            };
            // `permit` is repeatable: one rule per condition.
            if rule != Rule::prop_permit && self.duplicate(&mut seen, key, property_span, &owner) {
                continue;
            }
            match rule {
                Rule::prop_model => {
                    let value = values(property).next()?;
                    role.model = Some(if value.as_rule() == Rule::ident {
                        ModelRef::Alias(self.ident(&value))
                    } else {
                        ModelRef::Literal(self.string(&value))
                    });
                }
                Rule::prop_prompt => {
                    let value = values(property).next()?;
                    let prompt_span = self.span(&value);
                    let source = if value.as_rule() == Rule::prompt_file {
                        let path = self.string(&values(value).next()?);
                        let file = self.load_prompt(&path);
                        PromptSource::File { path, file }
                    } else {
                        PromptSource::Inline(self.string(&value))
                    };
                    role.prompt = Some(Prompt {
                        source,
                        span: prompt_span,
                    });
                }
                Rule::prop_rules => role.rules = self.ident_list(values(property).next()?),
                Rule::prop_tools => role.tools = self.ident_list(values(property).next()?),
                Rule::prop_input => {
                    role.inputs = values(property).map(|name| self.ident(&name)).collect();
                }
                Rule::prop_output => role.output = Some(self.ident(&values(property).next()?)),
                Rule::prop_max_tool_calls => {
                    role.max_tool_calls = self.int(&values(property).next()?);
                }
                Rule::prop_timeout => role.timeout = self.duration(&values(property).next()?),
                Rule::prop_tool_choice => {
                    role.tool_choice = Some(self.ident(&values(property).next()?));
                }
                Rule::prop_retry_after_effects => {
                    role.retry_after_effects = Some(values(property).next()?.as_str() == "true");
                }
                Rule::prop_messages => role.messages = Some(self.ident(&values(property).next()?)),
                Rule::prop_permit => {
                    let mut parts = values(property);
                    let tool = self.ident(&parts.next()?);
                    let condition = self.expr(parts.next()?)?;
                    role.permits.push(Permit {
                        tool,
                        condition,
                        span: property_span,
                    });
                }
                Rule::prop_history => {
                    let mut parts = values(property);
                    let steps = self.ident_list(parts.next()?);
                    let last = match parts.next() {
                        Some(last) => self.int(&values(last).next()?),
                        None => None,
                    };
                    role.history = Some(History {
                        steps,
                        last,
                        span: property_span,
                    });
                }
                _ => {
                    let mut parts = values(property);
                    let count = self.int(&parts.next()?);
                    let backoff = match parts.next() {
                        Some(duration) => self.duration(&duration),
                        None => None,
                    };
                    role.retry = count.map(|count| Retry {
                        count,
                        backoff,
                        span: property_span,
                    });
                }
            }
        }
        Some(role)
    }

    /// Reads a prompt template named by `file("...")` through the loader.
    fn load_prompt(&mut self, path: &StringLit) -> Option<FileId> {
        match self.loader.load(&path.value) {
            Ok(loaded) => Some(self.sources.add(loaded.display_name, loaded.text)),
            Err(reason) => {
                self.report(
                    Diagnostic::new(
                        Code::E016,
                        path.span,
                        format!("cannot read prompt file `{}`", path.value),
                    )
                    .with_label(reason)
                    .with_help("the path is relative to the spec file"),
                );
                None
            }
        }
    }

    fn gate(&mut self, pair: Pair<'_, Rule>) -> Option<Gate> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let name = self.ident(&children.next()?);
        let subject = self.ident(&children.next()?);
        let mut rules = Vec::new();
        let mut pass_when = None;
        for child in children {
            let child_span = self.span(&child);
            match child.as_rule() {
                Rule::check_rule => {
                    let mut parts = child.into_inner();
                    let severity = match parts.next()?.as_rule() {
                        Rule::kw_hard => Severity::Hard,
                        _ => Severity::Warn,
                    };
                    let mut parts = parts.filter(|part| !is_token(part.as_rule()));
                    let name = self.ident(&parts.next()?);
                    let expr = self.expr(parts.next()?)?;
                    let code = self.ident(&parts.next()?);
                    let detail = match parts.next() {
                        Some(detail) => Some(self.expr(values(detail).next()?)?),
                        None => None,
                    };
                    rules.push(GateRule::Check {
                        severity,
                        name,
                        expr,
                        code,
                        detail,
                        span: child_span,
                    });
                }
                Rule::score_rule => {
                    let mut parts = values(child);
                    let name = self.ident(&parts.next()?);
                    let weight = self.number(&parts.next()?);
                    let expr = self.expr(parts.next()?)?;
                    let mut detail = None;
                    let below = match parts.next() {
                        Some(below) => {
                            let mut below_parts = values(below);
                            let threshold = self.number(&below_parts.next()?);
                            let code = self.ident(&below_parts.next()?);
                            if let Some(expr) = below_parts.next() {
                                detail = Some(self.expr(values(expr).next()?)?);
                            }
                            Some((threshold, code))
                        }
                        None => None,
                    };
                    rules.push(GateRule::Score {
                        name,
                        weight,
                        expr,
                        below,
                        detail,
                        span: child_span,
                    });
                }
                Rule::pass_when => pass_when = Some(self.expr(values(child).next()?)?),
                _ => {}
            }
        }
        Some(Gate {
            name,
            subject,
            rules,
            pass_when: pass_when?,
            span,
        })
    }

    fn repair(&mut self, pair: Pair<'_, Rule>) -> Option<Repair> {
        let span = self.span(&pair);
        let mut rounds = None;
        let mut no_progress = None;
        let mut arms = Vec::new();
        for child in values(pair) {
            match child.as_rule() {
                Rule::rounds => rounds = self.int(&values(child).next()?),
                Rule::no_progress => no_progress = self.int(&values(child).next()?),
                Rule::repair_arm => {
                    let arm_span = self.span(&child);
                    let mut parts = values(child);
                    let pattern_pair = parts.next()?;
                    let pattern = if pattern_pair.as_rule() == Rule::wildcard {
                        RepairPattern::Wildcard(self.span(&pattern_pair))
                    } else {
                        RepairPattern::Codes(
                            values(pattern_pair).map(|code| self.ident(&code)).collect(),
                        )
                    };
                    let action = self.action(parts.next()?)?;
                    arms.push(RepairArm {
                        pattern,
                        action,
                        span: arm_span,
                    });
                }
                _ => {}
            }
        }
        let rounds = match rounds {
            Some(rounds) => rounds,
            // `rounds` was there but its value was bad (already reported).
            None => IntLit { value: 0, span },
        };
        Some(Repair {
            rounds,
            no_progress,
            arms,
            span,
        })
    }

    fn action(&mut self, pair: Pair<'_, Rule>) -> Option<Action> {
        let span = self.span(&pair);
        Some(match pair.as_rule() {
            Rule::rerun => {
                let with_feedback = pair
                    .clone()
                    .into_inner()
                    .any(|child| child.as_rule() == Rule::kw_with);
                let step = self.ident(&values(pair).next()?);
                Action::Rerun {
                    step,
                    with_feedback,
                    span,
                }
            }
            Rule::replan => Action::Replan(span),
            Rule::accept => Action::Accept(span),
            Rule::block => Action::Block(self.string(&values(pair).next()?)),
            Rule::fail => Action::Fail(self.string(&values(pair).next()?)),
            Rule::ask => Action::Ask(self.string(&values(pair).next()?)),
            _ => return None,
        })
    }

    fn invariant(&mut self, pair: Pair<'_, Rule>) -> Option<Invariant> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let name = self.ident(&children.next()?);
        let body = children.next()?;
        let kind = match body.as_rule() {
            Rule::has_no_tools => InvariantKind::HasNoTools {
                role: self.ident(&values(body).next()?),
            },
            Rule::only_uses => {
                let mut parts = values(body);
                let role = self.ident(&parts.next()?);
                let tool = self.ident(&parts.next()?);
                InvariantKind::OnlyUses { role, tool }
            }
            _ => InvariantKind::Always(self.expr(values(body).next()?)?),
        };
        Some(Invariant { name, kind, span })
    }

    fn budget(&mut self, pair: Pair<'_, Rule>) -> Option<Budget> {
        let span = self.span(&pair);
        let mut budget = Budget {
            tokens: None,
            cost: None,
            wall: None,
            steps: None,
            on_exhausted: None,
            span,
        };
        let mut seen = Vec::new();
        for entry in values(pair) {
            let entry_span = self.span(&entry);
            let rule = entry.as_rule();
            let key = match rule {
                Rule::budget_tokens => "tokens",
                Rule::budget_cost => "cost",
                Rule::budget_wall => "wall",
                Rule::budget_on_exhausted => "on_exhausted",
                _ => "steps",
            };
            if self.duplicate(&mut seen, key, entry_span, "the budget") {
                continue;
            }
            let value = values(entry).next()?;
            match rule {
                Rule::budget_tokens => budget.tokens = self.int(&value),
                Rule::budget_cost => budget.cost = Some(self.number(&value)),
                Rule::budget_wall => budget.wall = self.duration(&value),
                Rule::budget_on_exhausted => budget.on_exhausted = Some(self.ident(&value)),
                _ => budget.steps = self.int(&value),
            }
        }
        Some(budget)
    }

    fn flow(&mut self, pair: Pair<'_, Rule>) -> Option<Flow> {
        let span = self.span(&pair);
        let mut steps = Vec::new();
        for step in values(pair) {
            steps.push(self.step(step)?);
        }
        Some(Flow { steps, span })
    }

    pub(crate) fn step(&mut self, pair: Pair<'_, Rule>) -> Option<Step> {
        let span = self.span(&pair);
        let mut children = values(pair);
        let name = self.ident(&children.next()?);
        let body = self.step_body(children.next()?)?;
        let next = self.next(children.by_ref())?;
        let on_error = match children.next() {
            Some(on_error) => Some(self.ident(&values(on_error).next()?)),
            None => None,
        };
        Some(Step {
            name,
            body,
            next,
            on_error,
            span,
        })
    }

    fn args(&mut self, pair: Pair<'_, Rule>) -> Option<Vec<Expr>> {
        values(pair).map(|arg| self.expr(arg)).collect()
    }

    fn step_body(&mut self, pair: Pair<'_, Rule>) -> Option<StepBody> {
        Some(match pair.as_rule() {
            Rule::call_body => {
                let mut parts = values(pair);
                let role = self.ident(&parts.next()?);
                let args = self.args(parts.next()?)?;
                StepBody::Call { role, args }
            }
            Rule::each_body => {
                let mut parts = values(pair);
                let var = self.ident(&parts.next()?);
                let over = self.expr(parts.next()?)?;
                let role = self.ident(&parts.next()?);
                let args = self.args(parts.next()?)?;
                let mut concurrency = None;
                let mut check = None;
                for part in parts {
                    match part.as_rule() {
                        Rule::concurrency => concurrency = self.int(&values(part).next()?),
                        Rule::item_check => check = Some(self.item_check(part)?),
                        _ => {}
                    }
                }
                StepBody::Each {
                    var,
                    over,
                    role,
                    args,
                    concurrency,
                    check,
                }
            }
            Rule::gate_body => StepBody::Gate {
                gate: self.ident(&values(pair).next()?),
            },
            Rule::finalize_body => {
                let mut parts = values(pair);
                let role = self.ident(&parts.next()?);
                let args = self.args(parts.next()?)?;
                StepBody::Finalize { role, args }
            }
            Rule::branch_body => StepBody::Branch,
            Rule::tool_body => {
                let mut parts = values(pair);
                let tool = self.ident(&parts.next()?);
                let args = self.args(parts.next()?)?;
                StepBody::Tool { tool, args }
            }
            Rule::ask_body => {
                let mut parts = values(pair);
                let question = self.string(&parts.next()?);
                let max = match parts.next() {
                    Some(max) => self.int(&values(max).next()?),
                    None => None,
                };
                StepBody::Ask { question, max }
            }
            _ => return None,
        })
    }

    fn item_check(&mut self, pair: Pair<'_, Rule>) -> Option<ItemCheck> {
        let span = self.span(&pair);
        let mut gate = None;
        let mut by = None;
        let mut retries = None;
        let mut last_keyword = Rule::kw_check;
        for child in pair.into_inner() {
            match child.as_rule() {
                Rule::kw_check | Rule::kw_by | Rule::kw_retries => last_keyword = child.as_rule(),
                Rule::ident if last_keyword == Rule::kw_check => gate = Some(self.ident(&child)),
                Rule::ident => by = Some(self.ident(&child)),
                Rule::int => retries = self.int(&child),
                _ => {}
            }
        }
        Some(ItemCheck {
            gate: gate?,
            by,
            retries,
            span,
        })
    }

    fn next<'i>(&mut self, mut children: impl Iterator<Item = Pair<'i, Rule>>) -> Option<Next> {
        let pair = children.next()?;
        Some(match pair.as_rule() {
            Rule::goto => Next::Goto(self.target(values(pair).next()?)?),
            Rule::when_next => {
                let mut arms = Vec::new();
                let mut otherwise = None;
                for arm in values(pair) {
                    match arm.as_rule() {
                        Rule::when_arm => {
                            let mut parts = values(arm);
                            let condition = self.expr(parts.next()?)?;
                            let target = self.target(parts.next()?)?;
                            arms.push((condition, target));
                        }
                        _ => otherwise = Some(self.target(values(arm).next()?)?),
                    }
                }
                Next::When { arms, otherwise }
            }
            Rule::pass_fail => {
                let mut parts = values(pair);
                let pass = self.target(parts.next()?)?;
                let fail_pair = parts.next()?;
                let fail = if fail_pair.as_rule() == Rule::repair_target {
                    FailTarget::Repair(self.span(&fail_pair))
                } else {
                    FailTarget::Target(self.target(fail_pair)?)
                };
                Next::PassFail { pass, fail }
            }
            _ => return None,
        })
    }

    fn target(&mut self, pair: Pair<'_, Rule>) -> Option<Target> {
        let inner = pair.into_inner().next()?;
        Some(match inner.as_rule() {
            Rule::kw_done => Target::Done(self.span(&inner)),
            Rule::blocked_target => Target::Blocked(self.string(&values(inner).next()?)),
            Rule::failed_target => Target::Failed(self.string(&values(inner).next()?)),
            _ => Target::Step(self.ident(&inner)),
        })
    }

    // ---------------------------------------------------------------------------------
    // Expressions.

    fn too_deep(&mut self, span: Span) {
        self.report(
            Diagnostic::new(Code::E001, span, "expression nested too deeply")
                .with_label("nesting too deep here")
                .with_help("split the expression into smaller parts"),
        );
    }

    /// Lowers an `expr` pair (a flat sequence of prefix operators, operands and infix
    /// operators) by precedence climbing.
    pub(crate) fn expr(&mut self, pair: Pair<'_, Rule>) -> Option<Expr> {
        if self.depth == 0 {
            self.operators = 0;
        }
        if !self.enter(&pair) {
            return None;
        }
        let mut tokens = pair.into_inner().peekable();
        let expr = self.climb(&mut tokens, 0);
        self.depth -= 1;
        expr
    }

    /// Counts one level of nesting; reports and returns false when it is too deep.
    fn enter(&mut self, pair: &Pair<'_, Rule>) -> bool {
        self.depth += 1;
        if self.depth > MAX_EXPRESSION_DEPTH {
            let span = self.span(pair);
            self.too_deep(span);
            self.depth -= 1;
            return false;
        }
        true
    }

    /// Parses operands and operators from `tokens` while the operators bind at least as
    /// tightly as `min_power`. One piece: the precedence-climbing loop, with the nesting and
    /// size bounds checked as it goes.
    fn climb<'i>(
        &mut self,
        tokens: &mut std::iter::Peekable<Pairs<'i, Rule>>,
        min_power: u8,
    ) -> Option<Expr> {
        let first = tokens.next()?;
        let mut lhs = match first.as_rule() {
            Rule::kw_not | Rule::neg => {
                if tokens.peek().is_none_or(|next| binary_op(next).is_some()) {
                    let span = self.span(&first);
                    self.missing_operand(span, first.as_str());
                    return None;
                }
                if !self.enter(&first) {
                    return None;
                }
                let (op, power) = if first.as_rule() == Rule::kw_not {
                    (UnaryOp::Not, NOT_POWER)
                } else {
                    (UnaryOp::Neg, NEG_POWER)
                };
                let operand = self.climb(tokens, power);
                self.depth -= 1;
                let operand = operand?;
                Expr {
                    span: self.span(&first).to(operand.span),
                    kind: ExprKind::Unary {
                        op,
                        operand: Box::new(operand),
                    },
                }
            }
            _ => self.operand(first.into_inner().next()?)?,
        };
        let mut lhs_is_comparison = false;
        let mut chain_reported = false;
        let mut operators = 0;
        while let Some(operator) = tokens.peek() {
            // A chain of operators becomes a tree as deep as the chain: bound it, so that
            // no later pass (or dropping the tree) recurses too deep.
            operators += 1;
            if operators > MAX_OPERATORS {
                let span = self.span(operator);
                self.report(
                    Diagnostic::new(Code::E001, span, "expression has too many operators")
                        .with_label(format!("operator number {MAX_OPERATORS} + 1"))
                        .with_help("split the expression into smaller parts"),
                );
                return None;
            }
            let op = binary_op(operator)?;
            let power = binding_power(op);
            if power < min_power {
                break;
            }
            self.operators += 1;
            if self.operators > MAX_TOTAL_OPERATORS {
                let span = self.span(operator);
                self.report(
                    Diagnostic::new(Code::E001, span, "expression has too many operators")
                        .with_label(format!("operator number {MAX_TOTAL_OPERATORS} + 1"))
                        .with_help("split the expression into smaller parts"),
                );
                return None;
            }
            let operator_span = self.span(operator);
            let operator_text = operator.as_str().to_string();
            tokens.next();
            if tokens.peek().is_none_or(|next| binary_op(next).is_some()) {
                self.missing_operand(operator_span, &operator_text);
                continue;
            }
            let is_comparison = power == COMPARISON_POWER;
            if is_comparison && lhs_is_comparison && !chain_reported {
                chain_reported = true;
                let first = match &lhs.kind {
                    ExprKind::Binary { rhs, .. } => rhs.span,
                    _ => lhs.span,
                };
                self.report(
                    Diagnostic::new(Code::E001, operator_span, "comparisons cannot be chained")
                        .with_label("second comparison")
                        .with_note(first, "after this comparison")
                        .with_help(
                            "combine them with `and`, e.g. `a < b and b < c`, or add parentheses",
                        ),
                );
            }
            // Left-associative: the right-hand side binds strictly tighter.
            let rhs = self.climb(tokens, power + 1)?;
            lhs_is_comparison = is_comparison;
            lhs = Expr {
                span: lhs.span.to(rhs.span),
                kind: ExprKind::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
            };
        }
        Some(lhs)
    }

    fn missing_operand(&mut self, operator: Span, text: &str) {
        self.report(
            Diagnostic::new(
                Code::E001,
                operator,
                format!("expected an expression after `{text}`"),
            )
            .with_label("nothing follows this operator"),
        );
    }

    /// One operand of an expression. One piece: one arm per operand rule.
    fn operand(&mut self, pair: Pair<'_, Rule>) -> Option<Expr> {
        let span = self.span(&pair);
        let kind = match pair.as_rule() {
            Rule::quantifier => {
                let mut parts = pair.into_inner();
                let kind = match parts.next()?.as_str() {
                    "every" => QuantifierKind::Every,
                    "some" => QuantifierKind::Some,
                    _ => QuantifierKind::Count,
                };
                let mut parts = parts.filter(|part| !is_token(part.as_rule()));
                let var = self.ident(&parts.next()?);
                let over = self.expr(parts.next()?)?;
                let body = self.expr(parts.next()?)?;
                ExprKind::Quantifier {
                    kind,
                    var,
                    over: Box::new(over),
                    body: Box::new(body),
                }
            }
            Rule::paren => {
                let inner = self.expr(values(pair).next()?)?;
                return Some(Expr {
                    kind: inner.kind,
                    span,
                });
            }
            Rule::list_lit => {
                let mut elements = Vec::new();
                for element in values(pair) {
                    elements.push(self.expr(element)?);
                }
                ExprKind::List(elements)
            }
            Rule::record_lit => {
                let mut fields = Vec::new();
                for field in values(pair) {
                    let mut parts = values(field);
                    let key = self.ident(&parts.next()?);
                    let value = self.expr(parts.next()?)?;
                    fields.push((key, value));
                }
                ExprKind::Record(fields)
            }
            Rule::bool_lit => ExprKind::Bool(pair.as_str().starts_with('t')),
            Rule::none_lit => ExprKind::None,
            Rule::number => {
                let text = pair.as_str();
                let literal = self.number(&pair);
                if literal.is_integer {
                    match literals::integer(text)
                        .ok()
                        .and_then(|value| i64::try_from(value).ok())
                    {
                        Some(value) => ExprKind::Int(value),
                        None => {
                            self.report(
                                Diagnostic::new(
                                    Code::E013,
                                    span,
                                    format!("integer `{text}` is too large"),
                                )
                                .with_help("integers in expressions must fit in 64 bits"),
                            );
                            ExprKind::Int(0)
                        }
                    }
                } else {
                    ExprKind::Float(literal.value)
                }
            }
            Rule::string | Rule::block_string | Rule::empty_string => {
                ExprKind::Str(self.string(&pair).value)
            }
            Rule::reference => {
                let mut parts = pair.into_inner().peekable();
                let head = self.ident(&parts.next()?);
                if parts
                    .peek()
                    .is_some_and(|part| part.as_rule() == Rule::args)
                {
                    let args = self.args(parts.next()?)?;
                    ExprKind::Call {
                        function: head,
                        args,
                    }
                } else {
                    let mut path = vec![head];
                    path.extend(
                        parts
                            .filter(|part| part.as_rule() == Rule::bare_name)
                            .map(|part| self.ident(&part)),
                    );
                    ExprKind::Path(path)
                }
            }
            _ => return None,
        };
        Some(Expr { kind, span })
    }
}

/// Binding powers, loosest first. `not` takes a comparison (or anything tighter) as its
/// operand; unary minus takes only an operand or another unary minus.
const NOT_POWER: u8 = 3;
const COMPARISON_POWER: u8 = 4;
const NEG_POWER: u8 = 7;

fn binding_power(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Or => 1,
        BinaryOp::And => 2,
        BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
            COMPARISON_POWER
        }
        BinaryOp::Add | BinaryOp::Sub => 5,
        BinaryOp::Mul | BinaryOp::Div => 6,
    }
}

fn binary_op(pair: &Pair<'_, Rule>) -> Option<BinaryOp> {
    if !matches!(
        pair.as_rule(),
        Rule::kw_or | Rule::kw_and | Rule::cmp_op | Rule::add_op | Rule::mul_op
    ) {
        return None;
    }
    Some(match (pair.as_rule(), pair.as_str()) {
        (Rule::kw_or, _) => BinaryOp::Or,
        (Rule::kw_and, _) => BinaryOp::And,
        (_, "==") => BinaryOp::Eq,
        (_, "!=") => BinaryOp::Ne,
        (_, "<") => BinaryOp::Lt,
        (_, "<=") => BinaryOp::Le,
        (_, ">") => BinaryOp::Gt,
        (_, ">=") => BinaryOp::Ge,
        (_, "+") => BinaryOp::Add,
        (_, "-") => BinaryOp::Sub,
        (_, "*") => BinaryOp::Mul,
        (_, "/") => BinaryOp::Div,
        _ => return None,
    })
}

/// `[A-Z][A-Za-z0-9]*`
fn is_type_name(text: &str) -> bool {
    let mut bytes = text.bytes();
    bytes.next().is_some_and(|first| first.is_ascii_uppercase())
        && bytes.all(|byte| byte.is_ascii_alphanumeric())
}
