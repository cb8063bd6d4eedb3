//! Lowering: the checked AST and its symbol tables to a [`CompiledSpec`].
//!
//! Lowering runs only on specs the checks accepted, so anything unexpected here is a
//! missing check: it becomes an [`InternalError`] with a message naming what was met,
//! never a panic.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::{DiGraph, NodeIndex};
use serde_json::Value;

use super::InternalError;
use super::hash::{rules_hash, semantic_hash, sha256};
use super::ir::*;
use super::schema::contract_schema;
use crate::check::{Checked, Symbols};
use crate::diagnostics::Sources;
use crate::syntax::ast::{
    Action, BinaryOp, Effect, Expr, ExprKind, FailTarget, Gate, GateRule, InvariantKind,
    ModelParam, ModelRef, Network, Next, NumberLit, OutputMode, Prompt, PromptSource,
    QuantifierKind, RangeLit, RepairPattern, Role, RoleOrigin, Sandbox, SandboxPaths, SecretMap,
    SecretValue, Severity, SpecFile, StepBody, Target, TypeExpr, TypeKind, UnaryOp,
};

type Result<T> = std::result::Result<T, InternalError>;

/// [`PromptIr::source`] of an inline prompt.
pub use crate::syntax::includes::INLINE_SOURCE;

/// The retry count of a role that does not say (DESIGN §4 "Counting").
pub const DEFAULT_RETRY: u64 = 2;
/// The first backoff of a role that does not say, in milliseconds.
pub const DEFAULT_BACKOFF_MS: u64 = 1000;
/// `no_progress` when the repair block does not say.
pub const DEFAULT_NO_PROGRESS: u64 = 2;
/// The concurrency of an `each` step that does not say.
pub const DEFAULT_CONCURRENCY: u64 = 1;
/// The stage retries of a per-item check that does not say.
pub const DEFAULT_CHECK_RETRIES: u64 = 0;

fn internal(message: impl Into<String>) -> InternalError {
    InternalError {
        message: message.into(),
    }
}

/// Lowers `spec` (which the checks accepted) to its compiled graph.
pub fn lower(spec: &SpecFile, checked: &Checked, sources: &Sources) -> Result<CompiledSpec> {
    // The checker reported any duplicates already; collecting again is cheap and gives
    // the same first-definition-wins tables.
    let mut ignored = Vec::new();
    let symbols = Symbols::collect(spec, &mut ignored);
    let lowerer = Lowerer {
        spec,
        symbols: &symbols,
        checked,
        sources,
    };
    lowerer.lower()
}

struct Lowerer<'a, 's> {
    spec: &'a SpecFile,
    symbols: &'s Symbols<'a>,
    checked: &'s Checked,
    sources: &'s Sources,
}

impl<'a> Lowerer<'a, '_> {
    fn lower(&self) -> Result<CompiledSpec> {
        let source_hashes = self.source_hashes();
        let mut spans = SpecSpans {
            header: Some(self.spec.name.span),
            ..SpecSpans::default()
        };
        let budget = self.budget(&mut spans);
        let flow = self.flow(&mut spans)?;
        let mut compiled = CompiledSpec {
            ir_version: IR_VERSION,
            name: self.spec.name.name.clone(),
            version: self.spec.version.value.clone(),
            doc: self.spec.doc.as_ref().map(|doc| doc.value.clone()),
            spec_hash: String::new(),
            request: self.request_contract(),
            source_hashes,
            contracts: self.contracts()?,
            tools: self.tools()?,
            mcp: self.mcp()?,
            models: self.models()?,
            rules: self.rules(),
            roles: self.roles()?,
            gates: self.gates()?,
            repair: self.repair(),
            invariants: self.invariants()?,
            budget,
            flow,
            session: self.session()?,
            spans,
        };
        compiled.spec_hash = semantic_hash(&compiled);
        Ok(compiled)
    }

    /// The session and its `remember` assignments.
    fn session(&self) -> Result<Option<SessionIr>> {
        let Some(session) = self.symbols.session else {
            return Ok(None);
        };
        let mut remember = Vec::new();
        for entry in &self.symbols.remembers {
            remember.push(RememberIr {
                field: entry.field.name.clone(),
                value: self.expr(&entry.value, &mut Scope::default())?,
            });
        }
        Ok(Some(SessionIr {
            contract: session.contract.name.name.clone(),
            keep: session.keep.as_ref().map_or(1, |keep| keep.value),
            remember,
        }))
    }

    /// The contract of `request`, as the checker decided it.
    fn request_contract(&self) -> Option<String> {
        self.checked.types.request.clone()
    }

    // ---- contracts -------------------------------------------------------------------

    fn contracts(&self) -> Result<BTreeMap<String, ContractIr>> {
        let mut fields: BTreeMap<String, (bool, Vec<FieldIr>)> = BTreeMap::new();
        for (name, builtin) in builtin_contracts() {
            fields.insert(name.to_string(), (true, builtin));
        }
        for (name, contract) in &self.symbols.contracts {
            let mut lowered = Vec::new();
            for field in &contract.fields {
                lowered.push(FieldIr {
                    name: field.name.name.clone(),
                    ty: self.field_type(&field.ty)?,
                    optional: field.ty.optional,
                    default: field
                        .default
                        .as_ref()
                        .map(|default| literal_value(default).map(|value| DefaultIr { value }))
                        .transpose()?,
                });
            }
            fields.insert((*name).to_string(), (false, lowered));
        }
        // Schemas are built first, from borrowed fields, so no contract's fields are copied.
        let all = |name: &str| fields.get(name).map(|(_, fields)| fields.as_slice());
        let schemas: Vec<serde_json::Value> = fields
            .iter()
            .map(|(name, (_, own))| contract_schema(name, own, &all))
            .collect();
        Ok(fields
            .into_iter()
            .zip(schemas)
            .map(|((name, (builtin, fields)), schema)| {
                (
                    name,
                    ContractIr {
                        builtin,
                        fields,
                        schema: std::sync::Arc::new(schema),
                    },
                )
            })
            .collect())
    }

    /// A field's type without its own top-level `?` (that is [`FieldIr::optional`]).
    fn field_type(&self, ty: &TypeExpr) -> Result<TypeIr> {
        Ok(match &ty.kind {
            TypeKind::String => TypeIr::String,
            TypeKind::Bool => TypeIr::Bool,
            TypeKind::Int(range) => {
                let (min, max) = int_range(range.as_ref())?;
                TypeIr::Int { min, max }
            }
            TypeKind::Float(range) => {
                let (min, max) = float_range(range.as_ref())?;
                TypeIr::Float { min, max }
            }
            TypeKind::List(item, range) => {
                let (min, max) = int_range(range.as_ref())?;
                let count = |bound: Option<i64>| -> Result<Option<u64>> {
                    bound
                        .map(|value| {
                            u64::try_from(value)
                                .map_err(|_| internal(format!("negative list bound {value}")))
                        })
                        .transpose()
                };
                TypeIr::List {
                    item: Box::new(self.nested_type(item)?),
                    min_items: count(min)?,
                    max_items: count(max)?,
                }
            }
            TypeKind::Enum(variants) => TypeIr::Enum {
                variants: variants
                    .iter()
                    .map(|variant| variant.name.clone())
                    .collect(),
            },
            TypeKind::Named(name) => {
                if !self.symbols.is_contract(&name.name) {
                    return Err(internal(format!("unknown contract `{}`", name.name)));
                }
                TypeIr::Contract {
                    name: name.name.clone(),
                }
            }
        })
    }

    fn nested_type(&self, ty: &TypeExpr) -> Result<TypeIr> {
        let inner = self.field_type(ty)?;
        Ok(if ty.optional {
            TypeIr::Optional {
                inner: Box::new(inner),
            }
        } else {
            inner
        })
    }

    // ---- tools, models, rules ----------------------------------------------------------

    fn tools(&self) -> Result<BTreeMap<String, ToolIr>> {
        let mut tools = BTreeMap::new();
        for (name, tool) in &self.symbols.tools {
            let missing = |what: &str| internal(format!("tool `{name}` has no {what}"));
            let input = tool.input.as_ref().ok_or_else(|| missing("input"))?;
            let output = tool.output.as_ref().ok_or_else(|| missing("output"))?;
            let effect = tool.effect.as_ref().ok_or_else(|| missing("effect"))?;
            tools.insert(
                (*name).to_string(),
                ToolIr {
                    input: input.name.clone(),
                    output: output.name.clone(),
                    effect: match effect.effect {
                        Effect::Read => EffectIr::Read,
                        Effect::Write => EffectIr::Write,
                        Effect::External => EffectIr::External,
                    },
                    timeout_ms: tool.timeout.as_ref().map(|timeout| timeout.millis),
                    retry: tool.retry.as_ref().map_or(0, |retry| retry.count.value),
                    backoff_ms: tool
                        .retry
                        .as_ref()
                        .and_then(|retry| retry.backoff.as_ref())
                        .map_or(0, |backoff| backoff.millis),
                    sandbox: tool.sandbox.as_ref().map(sandbox),
                },
            );
        }
        Ok(tools)
    }

    /// Every `mcp` server: its transport, environment, allow-list, limits and sandbox.
    fn mcp(&self) -> Result<BTreeMap<String, McpServerIr>> {
        let mut servers = BTreeMap::new();
        for (name, server) in &self.symbols.mcp {
            let missing = |what: &str| internal(format!("mcp server `{name}` has no {what}"));
            let transport = match (&server.command, &server.url) {
                (Some(command), None) => McpTransportIr::Command {
                    argv: command.argv.iter().map(|arg| arg.value.clone()).collect(),
                },
                (None, Some(url)) => McpTransportIr::Url {
                    url: url.url.value.trim().to_string(),
                    headers: secrets(server.headers.as_ref()),
                },
                _ => return Err(missing("single `command` or `url`")),
            };
            let tools = server.tools.as_ref().ok_or_else(|| missing("`tools`"))?;
            servers.insert(
                (*name).to_string(),
                McpServerIr {
                    transport,
                    env: secrets(server.env.as_ref()),
                    tools: match &tools.only {
                        None => McpToolsIr::All,
                        Some(only) => {
                            McpToolsIr::Only(only.iter().map(|tool| tool.name.clone()).collect())
                        }
                    },
                    timeout_ms: server.timeout.as_ref().map(|timeout| timeout.millis),
                    retry: server.retry.as_ref().map_or(0, |retry| retry.count.value),
                    backoff_ms: server
                        .retry
                        .as_ref()
                        .and_then(|retry| retry.backoff.as_ref())
                        .map_or(0, |backoff| backoff.millis),
                    sandbox: server.sandbox.as_ref().map(sandbox),
                },
            );
        }
        Ok(servers)
    }

    fn models(&self) -> Result<BTreeMap<String, ModelIr>> {
        let mut models = BTreeMap::new();
        for (alias, entry) in &self.symbols.models {
            let (provider, model) = split_model(&entry.target.value)?;
            models.insert(
                (*alias).to_string(),
                ModelIr {
                    provider,
                    model,
                    price_in: entry.price.as_ref().map(|price| price.input.value),
                    price_out: entry.price.as_ref().map(|price| price.output.value),
                    params: model_params(&entry.params),
                },
            );
        }
        Ok(models)
    }

    fn rules(&self) -> BTreeMap<String, RulesIr> {
        self.symbols
            .rules
            .iter()
            .map(|(name, block)| {
                let version = block.version.as_ref().map(|version| version.value.clone());
                let lines: Vec<String> =
                    block.lines.iter().map(|line| line.value.clone()).collect();
                let hash = rules_hash(version.as_deref(), &lines);
                (
                    (*name).to_string(),
                    RulesIr {
                        version,
                        lines,
                        hash,
                    },
                )
            })
            .collect()
    }

    // ---- roles -------------------------------------------------------------------------

    fn roles(&self) -> Result<BTreeMap<String, RoleIr>> {
        let mut roles = BTreeMap::new();
        for (name, role) in &self.symbols.roles {
            roles.insert((*name).to_string(), self.role(role)?);
        }
        Ok(roles)
    }

    fn role(&self, role: &Role) -> Result<RoleIr> {
        let name = &role.name.name;
        let output = role
            .output
            .as_ref()
            .ok_or_else(|| internal(format!("role `{name}` has no output")))?;
        let (retry, backoff_ms) = match &role.retry {
            Some(retry) => (
                retry.count.value,
                retry
                    .backoff
                    .as_ref()
                    .map_or(DEFAULT_BACKOFF_MS, |backoff| backoff.millis),
            ),
            None => (DEFAULT_RETRY, DEFAULT_BACKOFF_MS),
        };
        Ok(RoleIr {
            model: self.role_model(role)?,
            prompt: role
                .prompt
                .as_ref()
                .map(|prompt| self.prompt(role, prompt))
                .transpose()?,
            rules: role.rules.iter().map(|rule| rule.name.clone()).collect(),
            inputs: role.inputs.iter().map(|input| input.name.clone()).collect(),
            output: output.name.clone(),
            tools: role.tools.iter().map(|tool| tool.name.clone()).collect(),
            max_tool_calls: role.max_tool_calls.as_ref().map(|limit| limit.value),
            timeout_ms: role.timeout.as_ref().map(|timeout| timeout.millis),
            retry,
            backoff_ms,
            tool_rules: role
                .tool_rules
                .iter()
                .map(|rule| (rule.tool.name.clone(), rule.note.value.clone()))
                .collect(),
            display_name: role.display_name.as_ref().map(|lit| lit.value.clone()),
            written_id: role.written_id.as_ref().map(|lit| lit.value.clone()),
            description: role.description.as_ref().map(|lit| lit.value.clone()),
            file: match &role.origin {
                RoleOrigin::Block => None,
                RoleOrigin::File { path } => Some(path.clone()),
            },
            history: role.history.as_ref().map(|history| HistoryIr {
                steps: history.steps.iter().map(|step| step.name.clone()).collect(),
                last: history.last.as_ref().map(|last| last.value),
            }),
            permits: role
                .permits
                .iter()
                .map(|permit| {
                    // A permit sees the call's inputs by their template names, then
                    // `args` and `meta`.
                    let mut locals: Vec<String> = crate::check::types::permit_inputs(role)
                        .into_iter()
                        .map(|(name, _)| name)
                        .collect();
                    locals.extend(["args".to_string(), "meta".to_string()]);
                    let mut scope = Scope {
                        locals,
                        ..Scope::default()
                    };
                    let condition = self.expr(&permit.condition, &mut scope)?;
                    Ok(PermitIr {
                        tool: permit.tool.name.clone(),
                        rule: format!("permit {} when {condition}", permit.tool.name),
                        condition,
                    })
                })
                .collect::<Result<Vec<_>>>()?,
            meta: role
                .meta
                .iter()
                .map(|entry| (entry.key.clone(), entry.value.clone()))
                .collect(),
            tool_choice: match role.tool_choice.as_ref().map(|choice| choice.name.as_str()) {
                None | Some("auto") => ToolChoiceIr::Auto,
                Some("required") => ToolChoiceIr::Required,
                Some(tool) => ToolChoiceIr::Tool(tool.to_string()),
            },
            retry_after_effects: role.retry_after_effects.unwrap_or(false),
            messages: match role.messages.as_ref().map(|mode| mode.name.as_str()) {
                Some("chat") => MessagesIr::Chat,
                _ => MessagesIr::Prompt,
            },
        })
    }

    /// The role's model: its alias (or literal `"provider:model"`), or the `default` alias
    /// when the role names none.
    fn role_model(&self, role: &Role) -> Result<RoleModelIr> {
        let alias_model = |alias: &str| -> Result<RoleModelIr> {
            let entry = self.symbols.models.get(alias).ok_or_else(|| {
                internal(format!(
                    "role `{}` uses model alias `{alias}`, which is not defined",
                    role.name.name
                ))
            })?;
            let (provider, model) = split_model(&entry.target.value)?;
            Ok(RoleModelIr {
                alias: Some(alias.to_string()),
                provider,
                model,
                price_in: entry.price.as_ref().map(|price| price.input.value),
                price_out: entry.price.as_ref().map(|price| price.output.value),
                params: model_params(&entry.params),
            })
        };
        match &role.model {
            Some(ModelRef::Alias(alias)) => alias_model(&alias.name),
            Some(ModelRef::Literal(literal)) => {
                if literal.value.contains(':') {
                    let (provider, model) = split_model(&literal.value)?;
                    Ok(RoleModelIr {
                        alias: None,
                        provider,
                        model,
                        price_in: None,
                        price_out: None,
                        params: ModelParamsIr::default(),
                    })
                } else {
                    alias_model(&literal.value)
                }
            }
            None => alias_model("default"),
        }
    }

    fn prompt(&self, role: &Role, prompt: &Prompt) -> Result<PromptIr> {
        let (template, source_name, inline) = match &prompt.source {
            PromptSource::Inline(literal) => {
                (literal.value.clone(), INLINE_SOURCE.to_string(), true)
            }
            PromptSource::File { path, file } => {
                let file = file.ok_or_else(|| {
                    internal(format!(
                        "the prompt file `{}` of role `{}` was not read",
                        path.value, role.name.name
                    ))
                })?;
                let text = self
                    .sources
                    .get(file)
                    .map(|source| source.text.as_str())
                    .ok_or_else(|| internal(format!("source of `{}` is missing", path.value)))?;
                let is_role_file = matches!(&role.origin, RoleOrigin::File { path: role_path } if *role_path == path.value);
                // A role file's template is its Markdown body: the prompt's span when the
                // parser gave it, else the text after the front matter.
                let template = if is_role_file {
                    if prompt.span.file == file && prompt.span.end > prompt.span.start {
                        self.sources.snippet(prompt.span)
                    } else {
                        strip_front_matter(text)
                    }
                } else {
                    text
                };
                (template.to_string(), path.value.clone(), false)
            }
        };
        let includes: BTreeMap<String, String> = self
            .checked
            .templates
            .roles
            .get(&role.name.name)
            .map(|facts| {
                facts
                    .includes
                    .iter()
                    .filter_map(|(name, file)| {
                        let text = self.sources.get(*file)?.text.clone();
                        Some((name.clone(), text))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let hash = if includes.is_empty() {
            sha256(template.as_bytes())
        } else {
            let canonical = serde_json::json!({ "includes": includes, "template": template });
            sha256(canonical.to_string().as_bytes())
        };
        Ok(PromptIr {
            hash,
            template,
            source: source_name,
            inline,
            includes,
        })
    }

    /// The hash of every file a role reads (role files and prompt templates), whole, by
    /// the path written in the spec: a role file's front matter is part of its hash.
    fn source_hashes(&self) -> BTreeMap<String, String> {
        let mut hashes = BTreeMap::new();
        for role in self.symbols.roles.values() {
            if let Some(Prompt {
                source:
                    PromptSource::File {
                        path,
                        file: Some(file),
                    },
                ..
            }) = &role.prompt
                && let Some(source) = self.sources.get(*file)
            {
                hashes.insert(path.value.clone(), sha256(source.text.as_bytes()));
            }
        }
        // Included files, by their template names (relative to the spec's directory).
        for template in self.checked.templates.roles.values() {
            for (name, file) in &template.includes {
                if let Some(source) = self.sources.get(*file) {
                    hashes.insert(name.clone(), sha256(source.text.as_bytes()));
                }
            }
        }
        hashes
    }

    // ---- gates, repair, invariants, budget -------------------------------------------

    fn gates(&self) -> Result<BTreeMap<String, GateIr>> {
        // Names a gate sees besides the usual ones: `item` and the `by` roles of the
        // per-item checks that use it.
        let mut check_roles: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for step in self.symbols.steps.values() {
            if let StepBody::Each {
                check: Some(check), ..
            } = &step.body
            {
                let roles = check_roles.entry(check.gate.name.as_str()).or_default();
                if let Some(by) = &check.by {
                    roles.insert(by.name.clone());
                }
            }
        }
        let mut gates = BTreeMap::new();
        for (name, gate) in &self.symbols.gates {
            let mut scope = Scope::default();
            if let Some(roles) = check_roles.get(name) {
                scope.item = true;
                scope.by_roles = roles.clone();
            }
            gates.insert((*name).to_string(), self.gate(gate, &mut scope)?);
        }
        Ok(gates)
    }

    fn gate(&self, gate: &Gate, scope: &mut Scope) -> Result<GateIr> {
        let mut rules = Vec::new();
        let mut scores = Vec::new();
        for rule in &gate.rules {
            match rule {
                GateRule::Check {
                    severity,
                    name,
                    expr,
                    code,
                    detail,
                    ..
                } => rules.push(GateRuleIr {
                    name: name.name.clone(),
                    severity: match severity {
                        Severity::Hard => SeverityIr::Hard,
                        Severity::Warn => SeverityIr::Warn,
                    },
                    expr: self.expr(expr, scope)?,
                    code: code.name.clone(),
                    detail: detail
                        .as_ref()
                        .map(|detail| self.expr(detail, scope))
                        .transpose()?,
                }),
                GateRule::Score {
                    name,
                    weight,
                    expr,
                    below,
                    detail,
                    ..
                } => scores.push(ScoreIr {
                    name: name.name.clone(),
                    weight: weight.value,
                    expr: self.expr(expr, scope)?,
                    below: match below {
                        Some((threshold, code)) => Some(BelowIr {
                            threshold: threshold.value,
                            code: code.name.clone(),
                            detail: detail
                                .as_ref()
                                .map(|detail| self.expr(detail, scope))
                                .transpose()?,
                        }),
                        None => None,
                    },
                }),
            }
        }
        Ok(GateIr {
            subject: gate.subject.name.clone(),
            rules,
            scores,
            pass_when: {
                // `score` is in scope only in `pass when`.
                scope.score = true;
                let pass_when = self.expr(&gate.pass_when, scope);
                scope.score = false;
                pass_when?
            },
        })
    }

    fn repair(&self) -> Option<RepairIr> {
        let repair = self.symbols.repair?;
        Some(RepairIr {
            rounds: repair.rounds.value,
            no_progress: repair
                .no_progress
                .as_ref()
                .map_or(DEFAULT_NO_PROGRESS, |limit| limit.value),
            arms: repair
                .arms
                .iter()
                .map(|arm| RepairArmIr {
                    pattern: match &arm.pattern {
                        RepairPattern::Codes(codes) => RepairPatternIr::Codes {
                            codes: codes.iter().map(|code| code.name.clone()).collect(),
                        },
                        RepairPattern::Wildcard(_) => RepairPatternIr::Wildcard,
                    },
                    action: action(&arm.action),
                })
                .collect(),
        })
    }

    fn invariants(&self) -> Result<BTreeMap<String, InvariantIr>> {
        let mut invariants = BTreeMap::new();
        for (name, invariant) in &self.symbols.invariants {
            let lowered = match &invariant.kind {
                InvariantKind::HasNoTools { role } => InvariantIr::HasNoTools {
                    role: role.name.clone(),
                },
                InvariantKind::OnlyUses { role, tool } => InvariantIr::OnlyUses {
                    role: role.name.clone(),
                    tool: tool.name.clone(),
                },
                InvariantKind::Always(expr) => InvariantIr::Always {
                    expr: self.expr(expr, &mut Scope::default())?,
                },
            };
            invariants.insert((*name).to_string(), lowered);
        }
        Ok(invariants)
    }

    /// `{name: id}` for every role: its id, and its role file's display `name`.
    fn role_names(&self) -> serde_json::Value {
        let mut names = serde_json::Map::new();
        for (id, role) in &self.symbols.roles {
            if let Some(display) = &role.display_name {
                names.insert(display.value.clone(), serde_json::json!(id));
            }
        }
        // A role file's id as written (`exp-master`) finds the role it names.
        for (id, role) in &self.symbols.roles {
            if let Some(written) = &role.written_id {
                names.insert(written.value.clone(), serde_json::json!(id));
            }
        }
        // Ids win over display names that happen to equal another role's id.
        for id in self.symbols.roles.keys() {
            names.insert((*id).to_string(), serde_json::json!(id));
        }
        serde_json::Value::Object(names)
    }

    fn budget(&self, spans: &mut SpecSpans) -> BudgetIr {
        let Some(budget) = self.symbols.budget else {
            return BudgetIr::default();
        };
        spans.budget = Some(budget.span);
        spans.budget_tokens = budget.tokens.as_ref().map(|lit| lit.span);
        spans.budget_cost = budget.cost.as_ref().map(|lit| lit.span);
        spans.budget_wall = budget.wall.as_ref().map(|lit| lit.span);
        spans.budget_steps = budget.steps.as_ref().map(|lit| lit.span);
        BudgetIr {
            tokens: budget.tokens.as_ref().map(|lit| lit.value),
            cost: budget.cost.as_ref().map(|lit| lit.value),
            wall_ms: budget.wall.as_ref().map(|lit| lit.millis),
            steps: budget.steps.as_ref().map(|lit| lit.value),
            on_exhausted: budget.on_exhausted.as_ref().map(|step| step.name.clone()),
        }
    }

    // ---- flow --------------------------------------------------------------------------

    fn flow(&self, spans: &mut SpecSpans) -> Result<FlowIr> {
        let flow = self
            .symbols
            .flow
            .ok_or_else(|| internal("the spec has no flow"))?;
        let mut graph: DiGraph<StepIr, TransitionIr> = DiGraph::new();
        let mut steps: BTreeMap<String, NodeIndex> = BTreeMap::new();
        // Step nodes first, in source order (a duplicate step was reported; the first wins).
        let mut ordered = Vec::new();
        for step in &flow.steps {
            let first = self
                .symbols
                .steps
                .get(step.name.name.as_str())
                .is_some_and(|first| std::ptr::eq(*first, step));
            if !first {
                continue;
            }
            spans.steps.insert(step.name.name.clone(), step.span);
            if let StepBody::Each { over, .. } = &step.body {
                spans.each_over.insert(step.name.name.clone(), over.span);
            }
            let mut kind = self.step_kind(&step.body)?;
            if let (
                StepKind::Gate { repair, .. },
                Next::PassFail {
                    fail: FailTarget::Repair(_),
                    ..
                },
            ) = (&mut kind, &step.next)
            {
                *repair = true;
            }
            let node = graph.add_node(StepIr {
                name: step.name.name.clone(),
                kind,
            });
            steps.insert(step.name.name.clone(), node);
            ordered.push((step, node));
        }
        let entry = ordered
            .first()
            .map(|(_, node)| *node)
            .ok_or_else(|| internal("the flow has no steps"))?;
        let mut terminals: BTreeMap<(u8, String), NodeIndex> = BTreeMap::new();
        let mut edges = Edges {
            graph: &mut graph,
            steps: &steps,
            terminals: &mut terminals,
        };
        for (step, node) in &ordered {
            match &step.next {
                Next::Goto(target) => edges.add(*node, target, TransitionIr::Always)?,
                Next::When { arms, otherwise } => {
                    let mut scope = Scope::default();
                    for (condition, target) in arms {
                        let condition = self.expr(condition, &mut scope)?;
                        edges.add(*node, target, TransitionIr::When { condition })?;
                    }
                    if let Some(target) = otherwise {
                        edges.add(*node, target, TransitionIr::Else)?;
                    }
                }
                Next::PassFail { pass, fail } => {
                    edges.add(*node, pass, TransitionIr::Pass)?;
                    match fail {
                        FailTarget::Target(target) => {
                            edges.add(*node, target, TransitionIr::Fail)?;
                        }
                        FailTarget::Repair(_) => {
                            self.repair_edges(&mut edges, step, *node, entry)?
                        }
                    }
                }
            }
            // Last, so that the written transitions keep their order and node indices.
            if let Some(on_error) = &step.on_error {
                edges.add(
                    *node,
                    &Target::Step(on_error.clone()),
                    TransitionIr::OnError,
                )?;
            }
        }
        Ok(FlowIr {
            graph,
            entry,
            steps,
        })
    }

    /// The informational edges of a `fail -> repair` gate step: one per repair arm that
    /// handles a code this gate can emit and whose action goes somewhere.
    fn repair_edges(
        &self,
        edges: &mut Edges<'_>,
        step: &crate::syntax::ast::Step,
        node: NodeIndex,
        entry: NodeIndex,
    ) -> Result<()> {
        let StepBody::Gate { gate } = &step.body else {
            return Err(internal(format!(
                "step `{}` has `fail -> repair` but is not a gate step",
                step.name.name
            )));
        };
        let gate = self
            .symbols
            .gates
            .get(gate.name.as_str())
            .ok_or_else(|| internal(format!("unknown gate `{}`", gate.name)))?;
        let Some(repair) = self.symbols.repair else {
            return Err(internal(format!(
                "step `{}` has `fail -> repair` but the spec has no repair block",
                step.name.name
            )));
        };
        let emitted = ast_gate_codes(gate);
        for (index, arm) in repair.arms.iter().enumerate() {
            let codes: Vec<String> = match &arm.pattern {
                RepairPattern::Codes(codes) => codes
                    .iter()
                    .filter(|code| emitted.contains(code.name.as_str()))
                    .map(|code| code.name.clone())
                    .collect(),
                RepairPattern::Wildcard(_) => vec!["_".to_string()],
            };
            if codes.is_empty() {
                continue;
            }
            let lowered = action(&arm.action);
            let target = match &arm.action {
                Action::Rerun { step, .. } => {
                    EdgeTarget::Node(*edges.steps.get(&step.name).ok_or_else(|| {
                        internal(format!("rerun of unknown step `{}`", step.name))
                    })?)
                }
                Action::Replan(_) => EdgeTarget::Node(entry),
                Action::Block(reason) => EdgeTarget::Blocked(reason.value.clone()),
                Action::Fail(reason) => EdgeTarget::Failed(reason.value.clone()),
                Action::Accept(_) | Action::Ask(_) => continue,
            };
            let to = edges.resolve(target)?;
            edges.graph.add_edge(
                node,
                to,
                TransitionIr::Repair {
                    arm: index,
                    codes,
                    action: lowered,
                },
            );
        }
        Ok(())
    }

    fn step_kind(&self, body: &StepBody) -> Result<StepKind> {
        let mut scope = Scope::default();
        Ok(match body {
            StepBody::Call { role, args } => StepKind::Call {
                role: role.name.clone(),
                args: self.exprs(args, &mut scope)?,
            },
            StepBody::Each {
                var,
                over,
                role,
                args,
                concurrency,
                check,
            } => {
                let over = self.expr(over, &mut scope)?;
                scope.locals.push(var.name.clone());
                let args = self.exprs(args, &mut scope)?;
                StepKind::Each {
                    var: var.name.clone(),
                    over,
                    role: role.name.clone(),
                    args,
                    concurrency: concurrency
                        .as_ref()
                        .map_or(DEFAULT_CONCURRENCY, |limit| limit.value),
                    check: check.as_ref().map(|check| ItemCheckIr {
                        gate: check.gate.name.clone(),
                        by: check.by.as_ref().map(|by| by.name.clone()),
                        retries: check
                            .retries
                            .as_ref()
                            .map_or(DEFAULT_CHECK_RETRIES, |retries| retries.value),
                    }),
                }
            }
            StepBody::Gate { gate } => StepKind::Gate {
                gate: gate.name.clone(),
                repair: false,
            },
            StepBody::Finalize { role, args } => StepKind::Finalize {
                role: role.name.clone(),
                args: self.exprs(args, &mut scope)?,
            },
            StepBody::Branch => StepKind::Branch,
            StepBody::Tool { tool, args } => StepKind::Tool {
                tool: tool.name.clone(),
                args: self.exprs(args, &mut scope)?,
            },
            StepBody::Ask { question, max } => StepKind::Ask {
                question: question.value.clone(),
                max: max.as_ref().map(|max| max.value),
            },
        })
    }

    // ---- expressions -------------------------------------------------------------------

    fn exprs(&self, exprs: &[Expr], scope: &mut Scope) -> Result<Vec<ExprIr>> {
        exprs.iter().map(|expr| self.expr(expr, scope)).collect()
    }

    /// One expression in the IR. One piece: one arm per expression kind, each lowered in
    /// the scope it sees; splitting would scatter the table of kinds.
    fn expr(&self, expr: &Expr, scope: &mut Scope) -> Result<ExprIr> {
        Ok(match &expr.kind {
            ExprKind::Bool(_)
            | ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::None => ExprIr::Literal {
                value: literal_value(expr)?,
            },
            ExprKind::List(items) => ExprIr::List {
                items: self.exprs(items, scope)?,
            },
            ExprKind::Record(fields) => {
                let mut lowered = BTreeMap::new();
                for (key, value) in fields {
                    lowered.insert(key.name.clone(), self.expr(value, scope)?);
                }
                ExprIr::Record { fields: lowered }
            }
            ExprKind::Path(segments) => {
                let Some((first, rest)) = segments.split_first() else {
                    return Err(internal("an empty path"));
                };
                // The checker decided which bare names are variants (from the expected
                // type); a bare name that is not in scope is one too.
                if rest.is_empty() && self.checked.types.is_variant(first.span) {
                    return Ok(ExprIr::Variant {
                        name: first.name.clone(),
                    });
                }
                match self.name(&first.name, scope) {
                    Some(root) => ExprIr::Path {
                        root,
                        fields: rest.iter().map(|field| field.name.clone()).collect(),
                    },
                    None if rest.is_empty() => ExprIr::Variant {
                        name: first.name.clone(),
                    },
                    None => {
                        return Err(internal(format!(
                            "the path `{}` starts with `{}`, which is not in scope",
                            segments
                                .iter()
                                .map(|segment| segment.name.as_str())
                                .collect::<Vec<_>>()
                                .join("."),
                            first.name
                        )));
                    }
                }
            }
            ExprKind::Unary { op, operand } => ExprIr::Unary {
                op: match op {
                    UnaryOp::Not => UnaryOpIr::Not,
                    UnaryOp::Neg => UnaryOpIr::Neg,
                },
                operand: Box::new(self.expr(operand, scope)?),
            },
            ExprKind::Binary { op, lhs, rhs } => ExprIr::Binary {
                op: binary_op(*op),
                lhs: Box::new(self.expr(lhs, scope)?),
                rhs: Box::new(self.expr(rhs, scope)?),
            },
            ExprKind::Call { function, args } => {
                let builtin = match function.name.as_str() {
                    "len" => BuiltinIr::Len,
                    "contains" => BuiltinIr::Contains,
                    "matches" => BuiltinIr::Matches,
                    "sum" => BuiltinIr::Sum,
                    "min" => BuiltinIr::Min,
                    "max" => BuiltinIr::Max,
                    "mention" => BuiltinIr::Mention,
                    "strip_mention" => BuiltinIr::StripMention,
                    "role_named" => BuiltinIr::RoleNamed,
                    other => return Err(internal(format!("unknown function `{other}`"))),
                };
                let mut args = self.exprs(args, scope)?;
                // The known role names travel with the call: `mention` matches them as
                // prefixes, `role_named` looks one up.
                if matches!(
                    builtin,
                    BuiltinIr::Mention | BuiltinIr::StripMention | BuiltinIr::RoleNamed
                ) {
                    args.push(ExprIr::Literal {
                        value: self.role_names(),
                    });
                }
                ExprIr::Call {
                    function: builtin,
                    args,
                }
            }
            ExprKind::Quantifier {
                kind,
                var,
                over,
                body,
            } => {
                let over = self.expr(over, scope)?;
                scope.locals.push(var.name.clone());
                let body = self.expr(body, scope);
                scope.locals.pop();
                ExprIr::Quantifier {
                    quantifier: match kind {
                        QuantifierKind::Every => QuantifierIr::Every,
                        QuantifierKind::Some => QuantifierIr::Some,
                        QuantifierKind::Count => QuantifierIr::Count,
                    },
                    var: var.name.clone(),
                    over: Box::new(over),
                    body: Box::new(body?),
                }
            }
        })
    }

    /// What a bare name refers to: innermost variables first, then `score`, the names of
    /// a per-item check, then the run's names, then step names (the checker's order).
    fn name(&self, name: &str, scope: &Scope) -> Option<NameIr> {
        if scope.locals.iter().any(|local| local == name) {
            return Some(NameIr::Local(name.to_string()));
        }
        if scope.by_roles.contains(name) {
            return Some(NameIr::ByRole(name.to_string()));
        }
        if scope.item && name == "item" {
            return Some(NameIr::Item);
        }
        match name {
            "request" => return Some(NameIr::Request),
            "candidate" => return Some(NameIr::Candidate),
            "best" => return Some(NameIr::Best),
            "run" => return Some(NameIr::Run),
            "session" if self.symbols.session.is_some() => return Some(NameIr::Session),
            "score" if scope.score => return Some(NameIr::Score),
            _ => {}
        }
        self.symbols
            .steps
            .contains_key(name)
            .then(|| NameIr::Step(name.to_string()))
    }
}

/// Names bound around an expression.
#[derive(Default)]
struct Scope {
    /// Quantifier and `each` variables, innermost last.
    locals: Vec<String>,
    /// The `by` roles of per-item checks (gates used by a check only).
    by_roles: BTreeSet<String>,
    /// Whether `item` is bound (gates used by a per-item check).
    item: bool,
    /// Whether `score` is bound (a gate's `pass when`).
    score: bool,
}

/// Adds edges, creating one terminal node per distinct terminal.
struct Edges<'g> {
    graph: &'g mut DiGraph<StepIr, TransitionIr>,
    steps: &'g BTreeMap<String, NodeIndex>,
    terminals: &'g mut BTreeMap<(u8, String), NodeIndex>,
}

enum EdgeTarget {
    Node(NodeIndex),
    Done,
    Blocked(String),
    Failed(String),
}

impl Edges<'_> {
    fn add(&mut self, from: NodeIndex, target: &Target, transition: TransitionIr) -> Result<()> {
        let target = match target {
            Target::Step(name) => {
                EdgeTarget::Node(*self.steps.get(&name.name).ok_or_else(|| {
                    internal(format!("transition to unknown step `{}`", name.name))
                })?)
            }
            Target::Done(_) => EdgeTarget::Done,
            Target::Blocked(reason) => EdgeTarget::Blocked(reason.value.clone()),
            Target::Failed(reason) => EdgeTarget::Failed(reason.value.clone()),
        };
        let to = self.resolve(target)?;
        self.graph.add_edge(from, to, transition);
        Ok(())
    }

    fn resolve(&mut self, target: EdgeTarget) -> Result<NodeIndex> {
        let (key, step) = match target {
            EdgeTarget::Node(node) => return Ok(node),
            EdgeTarget::Done => (
                (0, String::new()),
                StepIr {
                    name: "done".into(),
                    kind: StepKind::Done,
                },
            ),
            EdgeTarget::Blocked(reason) => (
                (1, reason.clone()),
                StepIr {
                    name: "blocked".into(),
                    kind: StepKind::Blocked { reason },
                },
            ),
            EdgeTarget::Failed(reason) => (
                (2, reason.clone()),
                StepIr {
                    name: "failed".into(),
                    kind: StepKind::Failed { reason },
                },
            ),
        };
        if let Some(node) = self.terminals.get(&key) {
            return Ok(*node);
        }
        let node = self.graph.add_node(step);
        self.terminals.insert(key, node);
        Ok(node)
    }
}

fn action(action: &Action) -> ActionIr {
    match action {
        Action::Rerun {
            step,
            with_feedback,
            ..
        } => ActionIr::Rerun {
            step: step.name.clone(),
            with_feedback: *with_feedback,
        },
        Action::Replan(_) => ActionIr::Replan,
        Action::Accept(_) => ActionIr::Accept,
        Action::Block(reason) => ActionIr::Block {
            reason: reason.value.clone(),
        },
        Action::Fail(reason) => ActionIr::Fail {
            reason: reason.value.clone(),
        },
        Action::Ask(question) => ActionIr::Ask {
            question: question.value.clone(),
        },
    }
}

fn binary_op(op: BinaryOp) -> BinaryOpIr {
    match op {
        BinaryOp::Or => BinaryOpIr::Or,
        BinaryOp::And => BinaryOpIr::And,
        BinaryOp::Eq => BinaryOpIr::Eq,
        BinaryOp::Ne => BinaryOpIr::Ne,
        BinaryOp::Lt => BinaryOpIr::Lt,
        BinaryOp::Le => BinaryOpIr::Le,
        BinaryOp::Gt => BinaryOpIr::Gt,
        BinaryOp::Ge => BinaryOpIr::Ge,
        BinaryOp::Add => BinaryOpIr::Add,
        BinaryOp::Sub => BinaryOpIr::Sub,
        BinaryOp::Mul => BinaryOpIr::Mul,
        BinaryOp::Div => BinaryOpIr::Div,
    }
}

/// The codes a gate (as written) can emit.
fn ast_gate_codes(gate: &Gate) -> BTreeSet<&str> {
    gate.rules
        .iter()
        .filter_map(|rule| match rule {
            GateRule::Check { code, .. } => Some(code.name.as_str()),
            GateRule::Score { below, .. } => below.as_ref().map(|(_, code)| code.name.as_str()),
        })
        .collect()
}

/// The JSON value of a literal expression (a field default or a literal operand). A bare
/// name is an enum variant, i.e. its string.
fn literal_value(expr: &Expr) -> Result<Value> {
    Ok(match &expr.kind {
        ExprKind::Bool(value) => Value::Bool(*value),
        ExprKind::Int(value) => Value::from(*value),
        ExprKind::Float(value) => serde_json::Number::from_f64(*value)
            .map(Value::Number)
            .ok_or_else(|| internal(format!("the float literal {value} is not finite")))?,
        ExprKind::Str(value) => Value::String(value.clone()),
        ExprKind::None => Value::Null,
        ExprKind::List(items) => {
            Value::Array(items.iter().map(literal_value).collect::<Result<_>>()?)
        }
        ExprKind::Record(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| Ok((key.name.clone(), literal_value(value)?)))
                .collect::<Result<_>>()?,
        ),
        ExprKind::Path(segments) if segments.len() == 1 => Value::String(
            segments
                .first()
                .map(|name| name.name.clone())
                .unwrap_or_default(),
        ),
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } => match literal_value(operand)? {
            Value::Number(number) => {
                if let Some(negated) = number.as_i64().and_then(i64::checked_neg) {
                    Value::from(negated)
                } else {
                    serde_json::Number::from_f64(-number.as_f64().unwrap_or(0.0))
                        .map(Value::Number)
                        .unwrap_or(Value::Null)
                }
            }
            _ => return Err(internal("`-` applied to a non-number literal")),
        },
        _ => return Err(internal("a default value that is not a literal")),
    })
}

/// `"provider:model"` split at its first colon.
fn split_model(target: &str) -> Result<(String, String)> {
    target
        .split_once(':')
        .map(|(provider, model)| (provider.to_string(), model.to_string()))
        .ok_or_else(|| internal(format!("model `{target}` is not `provider:model`")))
}

fn int_range(range: Option<&RangeLit>) -> Result<(Option<i64>, Option<i64>)> {
    let Some(range) = range else {
        return Ok((None, None));
    };
    check_inclusive(range)?;
    let int = |lit: &NumberLit| -> Result<i64> {
        // The exact value parsed from the literal's text, never rounded through f64.
        if let Some(value) = lit.int {
            Ok(value)
        } else {
            Err(internal(format!(
                "the range bound {} is not an integer",
                lit.value
            )))
        }
    };
    Ok((
        range.min.as_ref().map(int).transpose()?,
        range.max.as_ref().map(int).transpose()?,
    ))
}

fn float_range(range: Option<&RangeLit>) -> Result<(Option<f64>, Option<f64>)> {
    let Some(range) = range else {
        return Ok((None, None));
    };
    check_inclusive(range)?;
    Ok((
        range.min.as_ref().map(|lit| lit.value),
        range.max.as_ref().map(|lit| lit.value),
    ))
}

/// `a..b` (an exclusive upper bound) is E013; lowering only sees `..=` or open ends.
fn check_inclusive(range: &RangeLit) -> Result<()> {
    if !range.inclusive && range.max.is_some() {
        return Err(internal("a range with an exclusive upper bound (`a..b`)"));
    }
    Ok(())
}

/// The Markdown body of a role file: the text after its `---` front matter, if any.
fn strip_front_matter(text: &str) -> &str {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return text;
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        if line.trim_end() == "---" {
            return rest.get(offset..).unwrap_or("");
        }
    }
    text
}

/// The built-in contracts (DESIGN §2.2).
fn builtin_contracts() -> [(&'static str, Vec<FieldIr>); 3] {
    let field = |name: &str, ty: TypeIr, optional: bool| FieldIr {
        name: name.to_string(),
        ty,
        optional,
        default: None,
    };
    let strings = || TypeIr::List {
        item: Box::new(TypeIr::String),
        min_items: None,
        max_items: None,
    };
    [
        (
            "Answer",
            vec![
                field("approved", TypeIr::Bool, false),
                field("note", TypeIr::String, true),
            ],
        ),
        (
            "Candidate",
            vec![
                field("id", TypeIr::String, false),
                field(
                    "round",
                    TypeIr::Int {
                        min: Some(1),
                        max: None,
                    },
                    false,
                ),
                field(
                    "items",
                    TypeIr::List {
                        item: Box::new(TypeIr::Any),
                        min_items: None,
                        max_items: None,
                    },
                    false,
                ),
                field("text", TypeIr::String, false),
                field("hash", TypeIr::String, false),
                field("failed", strings(), false),
                field("skipped", strings(), false),
            ],
        ),
        (
            "Delivery",
            vec![
                field("candidate_id", TypeIr::String, false),
                field("summary", TypeIr::String, false),
            ],
        ),
    ]
}

/// A `models` entry's parameters as the IR holds them (the checker rejected duplicates).
fn model_params(params: &[ModelParam]) -> ModelParamsIr {
    let mut ir = ModelParamsIr::default();
    for param in params {
        match param {
            ModelParam::Temperature(value) => ir.temperature = Some(value.value),
            ModelParam::TopP(value) => ir.top_p = Some(value.value),
            ModelParam::MaxTokens(value) => ir.max_tokens = Some(value.value),
            ModelParam::Seed(value) => ir.seed = Some(value.value),
            ModelParam::IdleTimeout(value) => ir.idle_timeout_ms = Some(value.millis),
            ModelParam::Output(mode, _) => {
                ir.output = match mode {
                    OutputMode::JsonSchema => OutputModeIr::JsonSchema,
                    OutputMode::JsonObject => OutputModeIr::JsonObject,
                    OutputMode::Prompt => OutputModeIr::Prompt,
                }
            }
        }
    }
    ir
}

/// The entries of an `mcp` server's `env` or `headers`, by name (none when absent).
fn secrets(map: Option<&SecretMap>) -> BTreeMap<String, SecretOrTextIr> {
    map.map_or_else(BTreeMap::new, |map| {
        map.entries
            .iter()
            .map(|entry| {
                let value = match &entry.value {
                    SecretValue::Text(text) => SecretOrTextIr::Text(text.value.clone()),
                    SecretValue::Env(variable) => SecretOrTextIr::Env(variable.value.clone()),
                };
                (entry.name.name.clone(), value)
            })
            .collect()
    })
}

/// A tool's `sandbox` as the runtime reads it: paths and names as written.
fn sandbox(sandbox: &Sandbox) -> SandboxIr {
    let paths = |paths: &Option<SandboxPaths>| {
        paths.as_ref().map_or_else(Vec::new, |paths| {
            paths.paths.iter().map(|path| path.value.clone()).collect()
        })
    };
    SandboxIr {
        read: paths(&sandbox.read),
        write: paths(&sandbox.write),
        network: match sandbox.network.as_ref().map(|network| network.network) {
            None | Some(Network::None) => NetworkIr::None,
            Some(Network::Loopback) => NetworkIr::Loopback,
            Some(Network::Any) => NetworkIr::Any,
        },
        env: sandbox.env.iter().map(|name| name.name.clone()).collect(),
        processes: sandbox.processes.as_ref().map(|processes| processes.value),
        required: sandbox
            .required
            .as_ref()
            .is_some_and(|required| required.value),
    }
}

#[cfg(test)]
mod tests {
    use super::strip_front_matter;

    #[test]
    fn front_matter_is_stripped_from_role_files() {
        assert_eq!(
            strip_front_matter("---\nid: x\n---\nHello {{ a }}\n"),
            "Hello {{ a }}\n"
        );
        assert_eq!(strip_front_matter("no front matter"), "no front matter");
        assert_eq!(
            strip_front_matter("---\nunterminated\n"),
            "---\nunterminated\n"
        );
    }
}
