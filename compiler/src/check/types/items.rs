//! Checks on items that need no expression typing: names items refer to (E002),
//! duplicates inside one item (E003) and literals (E013).

use std::collections::BTreeMap;

use crate::check::Symbols;
use crate::check::types::expr::quoted;
use crate::check::types::ty::number;
use crate::diagnostics::{Code, Diagnostic, Span, did_you_mean};
use crate::names::mcp_tool;
use crate::syntax::ast::{
    Action, Budget, Contract, FailTarget, Gate, GateRule, Ident, Invariant, InvariantKind, Item,
    ModelEntry, ModelParam, ModelRef, Next, RangeLit, Remember, Repair, RepairPattern, Role,
    Session, SpecFile, StepBody, StringLit, Target, Tool, TypeExpr, TypeKind,
};

/// The model providers Charter can call.
pub const PROVIDERS: [&str; 2] = ["openai", "anthropic"];

/// Reports `name` as an unknown `kind`, suggesting the closest of `candidates`.
pub fn unknown<'a>(
    kind: &str,
    name: &Ident,
    candidates: impl IntoIterator<Item = &'a str>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let candidates: Vec<&str> = candidates.into_iter().collect();
    let help = did_you_mean(&name.name, candidates.iter().copied()).unwrap_or_else(|| {
        if candidates.is_empty() {
            format!("no {kind} is defined in this spec")
        } else if candidates.len() <= 8 {
            format!("the {kind}s defined are {}", quoted(&candidates))
        } else {
            format!("define a {kind} named `{}`", name.name)
        }
    });
    diagnostics.push(
        Diagnostic::new(
            Code::E002,
            name.span,
            format!("unknown {kind} `{}`", name.name),
        )
        .with_label(format!("no {kind} of this name"))
        .with_help(help),
    );
}

/// Runs every item-level check.
pub fn check(spec: &SpecFile, symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let mut checker = Items {
        symbols,
        diagnostics,
    };
    for item in &spec.items {
        match item {
            Item::Import(import) => {
                if let Some(role) = &import.role {
                    checker.role(role);
                }
            }
            Item::Models(block) => {
                for entry in &block.entries {
                    checker.model_literal(&entry.target);
                    checker.model_params(entry);
                }
            }
            Item::Rules(_) => {}
            Item::Contract(contract) => checker.contract(contract),
            Item::Tool(tool) => checker.tool(tool),
            // `mcp` servers and the names of their tools: `check::mcp`.
            Item::Mcp(_) => {}
            Item::Role(role) => checker.role(role),
            Item::Gate(gate) => checker.gate(gate),
            Item::Repair(repair) => checker.repair(repair),
            Item::Invariant(invariant) => checker.invariant(invariant),
            Item::Budget(budget) => checker.budget(budget),
            Item::Session(session) => {
                checker.contract(&session.contract);
                checker.session(session);
            }
            Item::Remember(remember) => checker.remember(remember),
            Item::Flow(flow) => {
                for step in &flow.steps {
                    checker.step_names(&step.body, &step.next);
                    if let Some(on_error) = &step.on_error {
                        checker.step_ref(on_error);
                    }
                }
            }
        }
    }
}

struct Items<'s, 'a> {
    symbols: &'s Symbols<'a>,
    diagnostics: &'s mut Vec<Diagnostic>,
}

impl Items<'_, '_> {
    fn contract_ref(&mut self, name: &Ident) {
        if !self.symbols.is_contract(&name.name) {
            let names: Vec<&str> = self.symbols.contract_names().collect();
            unknown("contract", name, names, self.diagnostics);
        }
    }

    /// `messages: chat` sends the first `string` field of the role's first input as the
    /// user's message, so that input must be a contract that has one.
    fn chat_input(&mut self, role: &Role, mode: &Ident) {
        let Some(input) = role.inputs.first() else {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E005,
                    mode.span,
                    format!(
                        "role `{}` has `messages: chat` but no input to send as the user's message",
                        role.name.name
                    ),
                )
                .with_label("needs an input with a `string` field")
                .with_help("give the role an input such as `Request { text: string }`"),
            );
            return;
        };
        let Some(contract) = self.symbols.contracts.get(input.name.as_str()) else {
            return; // an unknown contract is reported where it is named
        };
        let has_text = contract
            .fields
            .iter()
            .any(|field| matches!(field.ty.kind, TypeKind::String));
        if !has_text {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E005,
                    mode.span,
                    format!(
                        "role `{}` has `messages: chat` but its input `{}` has no `string` field \
                         to send as the user's message",
                        role.name.name, input.name
                    ),
                )
                .with_label("the user's message is the input's first `string` field")
                .with_help(format!(
                    "add a field such as `text: string` to `{}`",
                    input.name
                )),
            );
        }
    }

    /// A contract a role file takes by default (`input: Request`, `output: Reply`): when
    /// the spec lacks it, the problem is the missing key, so the message says both.
    fn implied_contract(&mut self, role: &Role, contract: &Ident, key: &str) {
        if self.symbols.is_contract(&contract.name) {
            return;
        }
        self.diagnostics.push(
            Diagnostic::new(
                Code::E002,
                contract.span,
                format!(
                    "role file of `{}` gives no `{key}`, and the spec has no contract `{}` to take instead",
                    role.name.name, contract.name
                ),
            )
            .with_label(format!("no `{key}:` in this front matter"))
            .with_help(format!(
                "add `{key}: ContractName` to the front matter, or declare `contract {}` in the spec",
                contract.name
            )),
        );
    }

    fn contract(&mut self, contract: &Contract) {
        let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
        for field in &contract.fields {
            if let Some(first) = seen.get(field.name.name.as_str()) {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E003,
                        field.name.span,
                        format!(
                            "field `{}` is defined twice in contract `{}`",
                            field.name.name, contract.name.name
                        ),
                    )
                    .with_label("second definition")
                    .with_note(*first, "first defined here")
                    .with_help(format!(
                        "rename or remove one of the two `{}` fields",
                        field.name.name
                    )),
                );
            } else {
                seen.insert(&field.name.name, field.name.span);
            }
            self.type_expr(&field.ty);
        }
    }

    fn type_expr(&mut self, ty: &TypeExpr) {
        match &ty.kind {
            TypeKind::String | TypeKind::Bool => {}
            TypeKind::Int(range) => {
                if let Some(range) = range {
                    self.range(range, "int");
                }
            }
            TypeKind::Float(range) => {
                if let Some(range) = range {
                    self.range(range, "float");
                }
            }
            TypeKind::List(element, range) => {
                self.type_expr(element);
                if let Some(range) = range {
                    self.range(range, "list");
                }
            }
            TypeKind::Enum(variants) => {
                let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
                for variant in variants {
                    if let Some(first) = seen.get(variant.name.as_str()) {
                        self.diagnostics.push(
                            Diagnostic::new(
                                Code::E003,
                                variant.span,
                                format!("variant `{}` is listed twice", variant.name),
                            )
                            .with_label("second time")
                            .with_note(*first, "first listed here")
                            .with_help("remove one of the two"),
                        );
                    } else {
                        seen.insert(&variant.name, variant.span);
                    }
                }
            }
            TypeKind::Named(name) => self.contract_ref(name),
        }
    }

    fn range(&mut self, range: &RangeLit, base: &str) {
        let bounds = [range.min.as_ref(), range.max.as_ref()];
        if !range.inclusive
            && let Some(max) = &range.max
        {
            let suggestion = match &range.min {
                Some(min) if max.is_integer => {
                    format!("`{}..={}`", number(min.value), number(max.value - 1.0))
                }
                Some(min) => format!("`{}..={}`", number(min.value), number(max.value)),
                None => format!("`..={}`", number(max.value - 1.0)),
            };
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E013,
                    range.span,
                    "a range with an exclusive upper bound (`a..b`) is not supported",
                )
                .with_label("exclusive upper bound")
                .with_help(format!(
                    "upper bounds are inclusive: write {suggestion}, or `a..` for no upper bound"
                )),
            );
        }
        if base != "float" {
            for number_lit in bounds.into_iter().flatten() {
                if !number_lit.is_integer || number_lit.value.fract() != 0.0 {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E013,
                            number_lit.span,
                            format!(
                                "a range on `{base}` needs whole numbers, but this is `{}`",
                                number(number_lit.value)
                            ),
                        )
                        .with_label("not a whole number")
                        .with_help(if base == "int" {
                            "use whole-number bounds, or make the field a `float`"
                        } else {
                            "a list's length bounds are whole numbers"
                        }),
                    );
                } else if number_lit.int.is_none() {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E013,
                            number_lit.span,
                            "range bound does not fit a 64-bit integer",
                        )
                        .with_label("too large")
                        .with_help(
                            "bounds run from -9223372036854775808 to 9223372036854775807; \
                             leave the end open (`a..`) for no bound",
                        ),
                    );
                }
            }
        }
        if base == "list" {
            for number_lit in bounds.into_iter().flatten() {
                if number_lit.value < 0.0 {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E013,
                            number_lit.span,
                            format!(
                                "a list length cannot be negative, but this bound is `{}`",
                                number(number_lit.value)
                            ),
                        )
                        .with_label("negative length")
                        .with_help("list length bounds start at 0"),
                    );
                }
            }
        }
        if let (Some(min), Some(max)) = (&range.min, &range.max)
            && min.value > max.value
        {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E013,
                    range.span,
                    format!(
                        "this range is empty: its minimum `{}` is greater than its maximum `{}`",
                        number(min.value),
                        number(max.value)
                    ),
                )
                .with_label("min > max")
                .with_help(format!(
                    "swap the bounds: `{}..={}`",
                    number(max.value),
                    number(min.value)
                )),
            );
        }
    }

    fn tool(&mut self, tool: &Tool) {
        if let Some(input) = &tool.input {
            self.contract_ref(input);
        }
        if let Some(output) = &tool.output {
            self.contract_ref(output);
        }
    }

    /// A `models` entry's parameters: each at most once (E003), each in its range (E013).
    fn model_params(&mut self, entry: &ModelEntry) {
        let mut seen: Vec<&str> = Vec::new();
        for param in &entry.params {
            let (name, span) = match param {
                ModelParam::Temperature(value) => ("temperature", value.span),
                ModelParam::TopP(value) => ("top_p", value.span),
                ModelParam::MaxTokens(value) => ("max_tokens", value.span),
                ModelParam::Seed(value) => ("seed", value.span),
                ModelParam::IdleTimeout(value) => ("idle_timeout", value.span),
                ModelParam::Output(_, span) => ("output", *span),
            };
            if seen.contains(&name) {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E003,
                        span,
                        format!("model `{}` sets `{name}` twice", entry.alias.name),
                    )
                    .with_label("second setting")
                    .with_help("keep one of the two"),
                );
                continue;
            }
            seen.push(name);
            let out_of_range = match param {
                ModelParam::Temperature(value) if !(0.0..=2.0).contains(&value.value) => {
                    Some("`temperature` runs from 0 to 2")
                }
                ModelParam::TopP(value) if !(0.0..=1.0).contains(&value.value) => {
                    Some("`top_p` runs from 0 to 1")
                }
                ModelParam::MaxTokens(value) if value.value == 0 => {
                    Some("`max_tokens` must be at least 1")
                }
                ModelParam::IdleTimeout(value) if value.millis < 1000 => Some(
                    "`idle_timeout` must be at least 1s: a server may take that long to send its first byte",
                ),
                _ => None,
            };
            if let Some(help) = out_of_range {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E013,
                        span,
                        format!("`{name}` of model `{}` is out of range", entry.alias.name),
                    )
                    .with_label("out of range")
                    .with_help(help),
                );
            }
        }
    }

    fn model_literal(&mut self, literal: &StringLit) {
        match literal.value.split_once(':') {
            None => self.diagnostics.push(
                Diagnostic::new(
                    Code::E013,
                    literal.span,
                    format!("model `{}` is not written `provider:model`", literal.value),
                )
                .with_label("no provider")
                .with_help(format!(
                    "write e.g. `\"openai:{0}\"` or `\"anthropic:{0}\"`",
                    literal.value
                )),
            ),
            Some((provider, model)) => {
                if !PROVIDERS.contains(&provider) {
                    let help = did_you_mean(provider, PROVIDERS).unwrap_or_else(|| {
                        "the providers are `openai` and `anthropic`".to_string()
                    });
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E002,
                            provider_span(literal, provider),
                            format!("unknown model provider `{provider}`"),
                        )
                        .with_label("not a provider")
                        .with_help(help),
                    );
                } else if model.trim().is_empty() {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E013,
                            literal.span,
                            format!(
                                "model `{}` names no model after the provider",
                                literal.value
                            ),
                        )
                        .with_label("empty model name")
                        .with_help(format!("write e.g. `\"{provider}:<model-name>\"`")),
                    );
                }
            }
        }
    }

    /// Checks every property of `role` against the spec's names (model, rules, contracts,
    /// messages, tools, history, tool choice, permit rules, summary). One piece: one check per
    /// property, in the order a role block lists them; splitting would scatter the list.
    fn role(&mut self, role: &Role) {
        match &role.model {
            Some(ModelRef::Alias(alias))
                if !self.symbols.models.contains_key(alias.name.as_str()) =>
            {
                let names: Vec<&str> = self.symbols.models.keys().copied().collect();
                unknown("model alias", alias, names, self.diagnostics);
            }
            Some(ModelRef::Literal(literal)) => self.model_literal(literal),
            _ => {}
        }
        if let Some(timeout) = &role.timeout
            && timeout.millis == 0
        {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E013,
                    timeout.span,
                    format!(
                        "role `{}` has a timeout of zero, so every call would time out",
                        role.name.name
                    ),
                )
                .with_label("zero timeout")
                .with_help(
                    "give the role a positive timeout such as `2m`, or remove it for the default",
                ),
            );
        }
        for rules in &role.rules {
            if !self.symbols.rules.contains_key(rules.name.as_str()) {
                let names: Vec<&str> = self.symbols.rules.keys().copied().collect();
                unknown("rules block", rules, names, self.diagnostics);
            }
        }
        for input in &role.inputs {
            if role.implied.input {
                self.implied_contract(role, input, "input");
            } else {
                self.contract_ref(input);
            }
        }
        if let Some(output) = &role.output {
            if role.implied.output {
                self.implied_contract(role, output, "output");
            } else {
                self.contract_ref(output);
            }
        }
        if let Some(mode) = &role.messages
            && mode.name != "chat"
            && mode.name != "prompt"
        {
            let help = did_you_mean(&mode.name, ["chat", "prompt"]).unwrap_or_else(|| {
                "`messages: chat` sends the body as a system message and the session as a \
                 conversation; `messages: prompt` (the default) sends one user message"
                    .to_string()
            });
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E002,
                    mode.span,
                    format!("unknown message layout `{}`", mode.name),
                )
                .with_label("not `chat` or `prompt`")
                .with_help(help),
            );
        }
        if let Some(mode) = role.messages.as_ref().filter(|mode| mode.name == "chat") {
            self.chat_input(role, mode);
        }
        // `SERVER.TOOL` names are checked with the servers (`check::mcp`).
        for tool in role
            .tools
            .iter()
            .filter(|tool| mcp_tool(&tool.name).is_none())
        {
            if !self.symbols.tools.contains_key(tool.name.as_str()) {
                let names: Vec<&str> = self.symbols.tools.keys().copied().collect();
                unknown("tool", tool, names, self.diagnostics);
            }
        }
        if let Some(history) = &role.history {
            for step in &history.steps {
                self.step_ref(step);
            }
            if let Some(last) = history.last.as_ref().filter(|last| last.value == 0) {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E013,
                        last.span,
                        format!("role `{}` keeps no history with `last 0`", role.name.name),
                    )
                    .with_label("zero entries")
                    .with_help("give `last` a positive count, or remove it to keep every entry"),
                );
            }
        }
        if let Some(choice) = &role.tool_choice {
            self.tool_choice(role, choice);
        }
        for rule in &role.tool_rules {
            if !role.tools.iter().any(|tool| tool.name == rule.tool.name) {
                let names: Vec<&str> = role.tools.iter().map(|tool| tool.name.as_str()).collect();
                let help =
                    did_you_mean(&rule.tool.name, names.iter().copied()).unwrap_or_else(|| {
                        format!(
                            "add `{}` to the role's `tools`, or remove this rule",
                            rule.tool.name
                        )
                    });
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E002,
                        rule.tool.span,
                        format!(
                            "`tool_rules` names `{}`, which is not in the tools of role `{}`",
                            rule.tool.name, role.name.name
                        ),
                    )
                    .with_label("not one of this role's tools")
                    .with_help(help),
                );
            }
        }
    }

    /// `on_exhausted STEP`: a step that calls a role without tools (it runs once, whatever
    /// the budget, so nothing it does may have effects or loop on tools).
    fn on_exhausted(&mut self, summary: &Ident) {
        let Some(step) = self.symbols.steps.get(summary.name.as_str()) else {
            self.step_ref(summary);
            return;
        };
        let StepBody::Call { role, .. } = &step.body else {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E005,
                    summary.span,
                    format!(
                        "`on_exhausted` names step `{}`, which does not call a role",
                        summary.name
                    ),
                )
                .with_label("not a role call")
                .with_note(step.name.span, "the step is defined here")
                .with_help("name a step of the form `summarize = summarizer(...)`"),
            );
            return;
        };
        if let Some(role_def) = self.symbols.roles.get(role.name.as_str())
            && let Some(tool) = role_def.tools.first()
        {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E010,
                    summary.span,
                    format!(
                        "`on_exhausted` step `{}` calls role `{}`, which has tools",
                        summary.name, role.name
                    ),
                )
                .with_label("runs once after the budget ran out")
                .with_note(tool.span, "a tool of the role")
                .with_help("give the summary to a role without tools: it runs whatever the budget, so it may only think"),
            );
        }
    }

    /// `tool_choice: auto | required | TOOL`: a named tool must be one of the role's, and
    /// a role without tools cannot be made to call one.
    fn tool_choice(&mut self, role: &Role, choice: &Ident) {
        let names: Vec<&str> = role.tools.iter().map(|tool| tool.name.as_str()).collect();
        if choice.name == "auto" {
            return;
        }
        if names.is_empty() {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E002,
                    choice.span,
                    format!(
                        "role `{}` has no tools, so `tool_choice: {}` cannot be met",
                        role.name.name, choice.name
                    ),
                )
                .with_label("no tool to call")
                .with_help("give the role `tools`, or remove `tool_choice`"),
            );
            return;
        }
        if choice.name == "required" || names.contains(&choice.name.as_str()) {
            return;
        }
        let mut candidates = vec!["auto", "required"];
        candidates.extend(names.iter().copied());
        let help = did_you_mean(&choice.name, candidates.iter().copied()).unwrap_or_else(|| {
            format!(
                "write `auto`, `required` or one of the role's tools: {}",
                quoted(&names)
            )
        });
        self.diagnostics.push(
            Diagnostic::new(
                Code::E002,
                choice.span,
                format!(
                    "`tool_choice` names `{}`, which is not in the tools of role `{}`",
                    choice.name, role.name.name
                ),
            )
            .with_label("not `auto`, `required` or one of this role's tools")
            .with_help(help),
        );
    }

    fn step_ref(&mut self, step: &Ident) {
        if !self.symbols.steps.contains_key(step.name.as_str()) {
            let names: Vec<&str> = self.symbols.steps.keys().copied().collect();
            unknown("step", step, names, self.diagnostics);
        }
    }

    fn role_ref(&mut self, role: &Ident) {
        if !self.symbols.roles.contains_key(role.name.as_str()) {
            let names: Vec<&str> = self.symbols.roles.keys().copied().collect();
            unknown("role", role, names, self.diagnostics);
        }
    }

    fn gate_ref(&mut self, gate: &Ident) {
        if !self.symbols.gates.contains_key(gate.name.as_str()) {
            let names: Vec<&str> = self.symbols.gates.keys().copied().collect();
            unknown("gate", gate, names, self.diagnostics);
        }
    }

    fn gate(&mut self, gate: &Gate) {
        self.step_ref(&gate.subject);
        let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
        for rule in &gate.rules {
            let name = match rule {
                GateRule::Check { name, .. } => name,
                GateRule::Score { name, weight, .. } => {
                    if weight.value <= 0.0 || !weight.value.is_finite() {
                        self.diagnostics.push(
                            Diagnostic::new(
                                Code::E013,
                                weight.span,
                                format!(
                                    "score weight must be greater than 0, but is `{}`",
                                    number(weight.value)
                                ),
                            )
                            .with_label("not a positive weight")
                            .with_help(
                                "give the score a positive weight, or remove the score rule",
                            ),
                        );
                    }
                    name
                }
            };
            if let Some(first) = seen.get(name.name.as_str()) {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E003,
                        name.span,
                        format!(
                            "rule `{}` is defined twice in gate `{}`",
                            name.name, gate.name.name
                        ),
                    )
                    .with_label("second definition")
                    .with_note(*first, "first defined here")
                    .with_help("give each rule of a gate its own name"),
                );
            } else {
                seen.insert(&name.name, name.span);
            }
        }
    }

    fn repair(&mut self, repair: &Repair) {
        let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
        for arm in &repair.arms {
            if let RepairPattern::Codes(codes) = &arm.pattern {
                for code in codes {
                    if let Some(first) = seen.get(code.name.as_str()) {
                        self.diagnostics.push(
                            Diagnostic::new(
                                Code::E003,
                                code.span,
                                format!(
                                    "issue code `{}` has more than one repair action",
                                    code.name
                                ),
                            )
                            .with_label("listed again here")
                            .with_note(*first, "first listed here")
                            .with_help(format!(
                                "list `{}` in one arm only; the first arm would always win",
                                code.name
                            )),
                        );
                    } else {
                        seen.insert(&code.name, code.span);
                    }
                }
            }
            if let Action::Rerun { step, .. } = &arm.action {
                self.step_ref(step);
            }
        }
    }

    fn invariant(&mut self, invariant: &Invariant) {
        match &invariant.kind {
            InvariantKind::HasNoTools { role } => self.role_ref(role),
            InvariantKind::OnlyUses { role, tool } => {
                self.role_ref(role);
                if mcp_tool(&tool.name).is_none()
                    && !self.symbols.tools.contains_key(tool.name.as_str())
                {
                    let names: Vec<&str> = self.symbols.tools.keys().copied().collect();
                    unknown("tool", tool, names, self.diagnostics);
                }
            }
            InvariantKind::Always(_) => {}
        }
    }

    /// A session keeps at least one turn; its fields start empty, so each must be optional
    /// or have a default; `turns` is the runtime's own.
    fn session(&mut self, session: &Session) {
        if let Some(keep) = &session.keep
            && keep.value == 0
        {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E013,
                    keep.span,
                    "a session that keeps 0 turns remembers no conversation",
                )
                .with_label("must be at least 1")
                .with_help("write `keep N` with the number of turns `session.turns` holds"),
            );
        }
        for field in &session.contract.fields {
            if field.name.name == "turns" {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E003,
                        field.name.span,
                        "session field `turns` is kept by the runtime",
                    )
                    .with_label("`session.turns` is the conversation's last turns")
                    .with_help("choose another name for this field"),
                );
            } else if !field.ty.optional && field.default.is_none() {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E004,
                        field.ty.span,
                        format!(
                            "session field `{}` has no value before the first turn",
                            field.name.name
                        ),
                    )
                    .with_label("neither optional nor defaulted")
                    .with_help(format!(
                        "make it optional (`{}: T?`) or give it a default (`= ...`)",
                        field.name.name
                    )),
                );
            }
        }
    }

    /// `remember FIELD = EXPR` names a field of the spec's session, once.
    fn remember(&mut self, remember: &Remember) {
        let Some(session) = self.symbols.session else {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E002,
                    remember.field.span,
                    format!(
                        "`remember {}` needs a session, and this spec declares none",
                        remember.field.name
                    ),
                )
                .with_label("no `session` block")
                .with_help(format!(
                    "declare one: `session Chat keep 20 {{ {}: string? }}`",
                    remember.field.name
                )),
            );
            return;
        };
        let fields: Vec<&str> = session
            .contract
            .fields
            .iter()
            .map(|field| field.name.name.as_str())
            .collect();
        if !fields.contains(&remember.field.name.as_str()) {
            let help = match did_you_mean(&remember.field.name, fields.iter().copied()) {
                Some(help) => help,
                None => format!(
                    "add the field to `session {}`, or remember one of: {}",
                    session.contract.name.name,
                    fields.join(", ")
                ),
            };
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E002,
                    remember.field.span,
                    format!(
                        "session `{}` has no field `{}`",
                        session.contract.name.name, remember.field.name
                    ),
                )
                .with_label("not a session field")
                .with_help(help),
            );
            return;
        }
        if let Some(first) = self
            .symbols
            .remembers
            .iter()
            .find(|other| other.field.name == remember.field.name)
            && first.span != remember.span
        {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E003,
                    remember.field.span,
                    format!(
                        "session field `{}` is remembered twice",
                        remember.field.name
                    ),
                )
                .with_label("second `remember`")
                .with_note(first.field.span, "first remembered here")
                .with_help("keep one `remember` per field"),
            );
        }
    }

    fn budget(&mut self, budget: &Budget) {
        if let Some(summary) = &budget.on_exhausted {
            self.on_exhausted(summary);
        }
        let mut zero = |what: &str, span: Span, value: String| {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::E013,
                    span,
                    format!("budget `{what}` is {value}, so no run could start"),
                )
                .with_label("must be greater than 0")
                .with_help(format!(
                    "raise `{what}`, or remove it to leave it unlimited"
                )),
            );
        };
        if let Some(tokens) = &budget.tokens
            && tokens.value == 0
        {
            zero("tokens", tokens.span, "0".to_string());
        }
        if let Some(cost) = &budget.cost
            && (cost.value <= 0.0 || !cost.value.is_finite())
        {
            zero("cost", cost.span, number(cost.value));
        }
        if let Some(wall) = &budget.wall
            && wall.millis == 0
        {
            zero("wall", wall.span, "0".to_string());
        }
        if let Some(steps) = &budget.steps
            && steps.value == 0
        {
            zero("steps", steps.span, "0".to_string());
        }
    }

    fn target(&mut self, target: &Target) {
        if let Target::Step(step) = target {
            self.step_ref(step);
        }
    }

    /// The names a step refers to outside its expressions (its role is checked with its
    /// arguments).
    fn step_names(&mut self, body: &StepBody, next: &Next) {
        match body {
            StepBody::Gate { gate } => self.gate_ref(gate),
            StepBody::Each {
                check: Some(check), ..
            } => {
                self.gate_ref(&check.gate);
                if let Some(by) = &check.by {
                    self.role_ref(by);
                }
            }
            _ => {}
        }
        match next {
            Next::Goto(target) => self.target(target),
            Next::When { arms, otherwise } => {
                for (_, target) in arms {
                    self.target(target);
                }
                if let Some(target) = otherwise {
                    self.target(target);
                }
            }
            Next::PassFail { pass, fail } => {
                self.target(pass);
                if let FailTarget::Target(target) = fail {
                    self.target(target);
                }
            }
        }
    }
}

/// The span of the provider part of a `"provider:model"` literal, when the literal was
/// written plainly (quoted or, in a role file, bare); otherwise the whole literal.
fn provider_span(literal: &StringLit, provider: &str) -> Span {
    let written = (literal.span.end as usize).saturating_sub(literal.span.start as usize);
    let offset = if written == literal.value.len() + 2 {
        1
    } else if written == literal.value.len() {
        0
    } else {
        return literal.span;
    };
    let start = literal.span.start as usize + offset;
    Span::new(literal.span.file, start, start + provider.len())
}
