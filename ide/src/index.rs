//! Every name a spec and its templates write, resolved to what it names: the table that
//! hover, go to definition, find references, rename and highlighting read.
//!
//! Built from the syntax tree the parser recovered (so a file with errors still has one)
//! and the checker's [`Symbols`]; expressions' dotted paths are followed through contract
//! fields (`check.issues` -> `CheckReport.issues`, `every i in ...: i.severity` ->
//! `Issue.severity`), as are the paths read in prompt templates: an input is read under
//! its contract's snake_case name (`{{ workflow_draft.version }}` reads input
//! `WorkflowDraft` and its field `version`), `{% for issue in ... %}` binds `issue` to the
//! list's item contract, and `X.step == "NAME"` names a step.

use charter_compiler::check::Symbols;
use charter_compiler::names::{mcp_tool, snake_case};
use charter_compiler::syntax::ast::{
    Action, Contract, Expr, ExprKind, Gate, GateRule, Item, ModelRef, Next, PromptSource,
    RepairPattern, Role, RoleOrigin, SpecFile, Step, StepBody, Target, TypeExpr, TypeKind,
};
use charter_compiler::{FileId, Sources, Span};

use crate::scan::{TemplateItem, template_items};

/// Something a name can stand for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Def {
    Contract(String),
    /// A field of a contract: (contract, field).
    Field(String, String),
    Role(String),
    Step(String),
    Gate(String),
    Rules(String),
    Tool(String),
    /// An `mcp` server.
    Mcp(String),
    /// A tool of an `mcp` server: (server, tool), defined by its allow-list entry.
    McpTool(String, String),
    Model(String),
    /// A role file or prompt template, by its path.
    File(String),
    /// An issue code a gate emits (`else RULE_ERROR`) and `repair` handles.
    Issue(String),
    /// A rule of a gate: (gate, rule).
    GateRule(String, String),
    Invariant(String),
}

/// How a name is written at an occurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Spelling {
    /// As defined.
    Plain,
    /// The snake_case of a contract's name: how a template reads a role's input.
    Snake,
}

/// One place a name is written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Occurrence {
    pub span: Span,
    pub def: Def,
    /// The defining occurrence (an issue code is defined by every gate rule that emits it).
    pub is_def: bool,
    pub spelling: Spelling,
}

/// A role whose prompt template is in `file`, scanned from byte `base` of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateOwner {
    pub role: String,
    pub file: FileId,
    /// The range of the template text in `file` (a whole file, or an inline literal).
    pub start: usize,
    pub end: usize,
}

/// Words that are not names: built-in functions and enum variants, for highlighting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extra {
    Function,
    Variant,
    Local,
}

#[derive(Debug, Default)]
pub struct Index {
    pub occurrences: Vec<Occurrence>,
    pub templates: Vec<TemplateOwner>,
    pub extras: Vec<(Span, Extra)>,
}

impl Index {
    pub fn build(spec: &SpecFile, sources: &Sources) -> Index {
        let mut ignored = Vec::new();
        let symbols = Symbols::collect(spec, &mut ignored);
        let mut builder = Builder {
            symbols: &symbols,
            sources,
            index: Index::default(),
            scope: Vec::new(),
            candidate_items: None,
        };
        builder.items(spec);
        builder.templates();
        let mut index = builder.index;
        index.occurrences.sort();
        index.occurrences.dedup();
        index
    }

    /// The occurrence whose span holds `offset` in `file` (the innermost, when nested).
    pub fn at(&self, file: FileId, offset: usize) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .filter(|occurrence| {
                occurrence.span.file == file
                    && (occurrence.span.start as usize) <= offset
                    && offset <= occurrence.span.end as usize
            })
            .min_by_key(|occurrence| occurrence.span.end - occurrence.span.start)
    }

    pub fn of<'a>(&'a self, def: &'a Def) -> impl Iterator<Item = &'a Occurrence> + 'a {
        self.occurrences
            .iter()
            .filter(move |occurrence| &occurrence.def == def)
    }
}

/// The contract a type names, directly or as a list's items.
pub fn type_contract(ty: &TypeExpr) -> Option<String> {
    match &ty.kind {
        TypeKind::Named(name) => Some(name.name.clone()),
        TypeKind::List(inner, _) => type_contract(inner),
        _ => None,
    }
}

/// The contract a field of `contract` holds (or holds a list of).
pub fn field_contract(symbols: &Symbols<'_>, contract: &str, field: &str) -> Option<String> {
    let contract = symbols.contracts.get(contract)?;
    let field = contract.fields.iter().find(|f| f.name.name == field)?;
    type_contract(&field.ty)
}

/// The contract of a step's output, when it has one.
pub fn step_contract(symbols: &Symbols<'_>, step: &Step) -> Option<String> {
    let role_output = |role: &str| {
        symbols
            .roles
            .get(role)
            .and_then(|role| role.output.as_ref())
            .map(|output| output.name.clone())
    };
    match &step.body {
        StepBody::Call { role, .. } | StepBody::Each { role, .. } => role_output(&role.name),
        StepBody::Finalize { .. } => Some("Delivery".to_string()),
        StepBody::Ask { .. } => Some("Answer".to_string()),
        StepBody::Tool { tool, .. } => symbols
            .tools
            .get(tool.name.as_str())
            .and_then(|tool| tool.output.as_ref())
            .map(|output| output.name.clone()),
        StepBody::Gate { .. } | StepBody::Branch => None,
    }
}

/// The contract `request` holds: the entry step's input passed as `request`, else a
/// contract named `Request` (the checker's rule).
pub fn request_contract(symbols: &Symbols<'_>) -> Option<String> {
    let entry = symbols.flow.and_then(|flow| flow.steps.first());
    if let Some(entry) = entry
        && let StepBody::Call { role, args }
        | StepBody::Finalize { role, args }
        | StepBody::Each { role, args, .. } = &entry.body
        && let Some(role) = symbols.roles.get(role.name.as_str())
    {
        let position = args.iter().position(|arg| {
            matches!(&arg.kind, ExprKind::Path(segments) if segments.len() == 1 && segments[0].name == "request")
        });
        if let Some(input) = position.and_then(|index| role.inputs.get(index))
            && symbols.is_contract(&input.name)
        {
            return Some(input.name.clone());
        }
    }
    symbols
        .contracts
        .contains_key("Request")
        .then(|| "Request".to_string())
}

struct Builder<'s, 'a> {
    symbols: &'s Symbols<'a>,
    sources: &'s Sources,
    index: Index,
    /// Names bound by quantifiers, `each` and permits, with the contract each holds.
    scope: Vec<(String, Option<String>)>,
    /// In a gate: the contract of the items of `candidate`.
    candidate_items: Option<String>,
}

impl Builder<'_, '_> {
    fn add(&mut self, span: Span, def: Def, is_def: bool) {
        self.index.occurrences.push(Occurrence {
            span,
            def,
            is_def,
            spelling: Spelling::Plain,
        });
    }

    /// A tool where a role names one: a `tool`, or `SERVER.TOOL` (the server where its name
    /// is written, the tool where its name is, when the name is written as spelled).
    fn tool_ref(&mut self, ident: &charter_compiler::syntax::ast::Ident) {
        let Some((server, tool)) = mcp_tool(&ident.name) else {
            self.add(ident.span, Def::Tool(ident.name.clone()), false);
            return;
        };
        let span = ident.span;
        let (server_span, tool_span) = if (span.end - span.start) as usize == ident.name.len() {
            let dot = span.start as usize + server.len();
            (
                Span::new(span.file, span.start as usize, dot),
                Span::new(span.file, dot + 1, span.end as usize),
            )
        } else {
            (span, span)
        };
        self.add(server_span, Def::Mcp(server.to_string()), false);
        if tool_span != server_span {
            self.add(
                tool_span,
                Def::McpTool(server.to_string(), tool.to_string()),
                false,
            );
        }
    }

    fn contract_ref(&mut self, ident: &charter_compiler::syntax::ast::Ident) {
        self.add(ident.span, Def::Contract(ident.name.clone()), false);
    }

    fn items(&mut self, spec: &SpecFile) {
        for item in &spec.items {
            match item {
                Item::Import(import) => {
                    if let Some(role) = &import.role {
                        let path = self.file_name(role.span.file);
                        self.add(import.path.span, Def::File(path), false);
                        self.role(role);
                    }
                    for permit in &import.permits {
                        self.tool_ref(&permit.tool);
                    }
                }
                Item::Models(block) => {
                    for entry in &block.entries {
                        self.add(entry.alias.span, Def::Model(entry.alias.name.clone()), true);
                    }
                }
                Item::Rules(block) => {
                    self.add(block.name.span, Def::Rules(block.name.name.clone()), true)
                }
                Item::Contract(contract) => self.contract(contract),
                Item::Session(session) => self.contract(&session.contract),
                Item::Tool(tool) => {
                    self.add(tool.name.span, Def::Tool(tool.name.name.clone()), true);
                    for contract in tool.input.iter().chain(&tool.output) {
                        self.contract_ref(contract);
                    }
                }
                Item::Mcp(server) => {
                    let name = server.name.name.clone();
                    self.add(server.name.span, Def::Mcp(name.clone()), true);
                    let allowed = server.tools.iter().flat_map(|tools| tools.only.iter());
                    for tool in allowed.flatten() {
                        self.add(
                            tool.span,
                            Def::McpTool(name.clone(), tool.name.clone()),
                            true,
                        );
                    }
                }
                Item::Role(role) => self.role(role),
                Item::Gate(gate) => self.gate(gate),
                Item::Repair(repair) => self.repair(repair),
                Item::Invariant(invariant) => self.invariant(invariant),
                Item::Budget(budget) => {
                    if let Some(step) = &budget.on_exhausted {
                        self.add(step.span, Def::Step(step.name.clone()), false);
                    }
                }
                Item::Remember(remember) => {
                    if let Some(session) = self.symbols.session {
                        let contract = session.contract.name.name.clone();
                        self.add(
                            remember.field.span,
                            Def::Field(contract, remember.field.name.clone()),
                            false,
                        );
                    }
                    self.expr(&remember.value);
                }
                Item::Flow(flow) => {
                    for step in &flow.steps {
                        self.step(step);
                    }
                }
            }
        }
    }

    fn repair(&mut self, repair: &charter_compiler::syntax::ast::Repair) {
        for arm in &repair.arms {
            if let RepairPattern::Codes(codes) = &arm.pattern {
                for code in codes {
                    self.add(code.span, Def::Issue(code.name.clone()), false);
                }
            }
            if let Action::Rerun { step, .. } = &arm.action {
                self.add(step.span, Def::Step(step.name.clone()), false);
            }
        }
    }

    fn invariant(&mut self, invariant: &charter_compiler::syntax::ast::Invariant) {
        use charter_compiler::syntax::ast::InvariantKind;
        self.add(
            invariant.name.span,
            Def::Invariant(invariant.name.name.clone()),
            true,
        );
        match &invariant.kind {
            InvariantKind::HasNoTools { role } => {
                self.add(role.span, Def::Role(role.name.clone()), false)
            }
            InvariantKind::OnlyUses { role, tool } => {
                self.add(role.span, Def::Role(role.name.clone()), false);
                self.tool_ref(tool);
            }
            InvariantKind::Always(expr) => {
                self.expr(expr);
            }
        }
    }

    fn file_name(&self, file: FileId) -> String {
        self.sources
            .get(file)
            .map(|source| source.name.clone())
            .unwrap_or_default()
    }

    fn contract(&mut self, contract: &Contract) {
        let name = contract.name.name.clone();
        self.add(contract.name.span, Def::Contract(name.clone()), true);
        for field in &contract.fields {
            self.add(
                field.name.span,
                Def::Field(name.clone(), field.name.name.clone()),
                true,
            );
            self.type_expr(&field.ty);
        }
    }

    fn type_expr(&mut self, ty: &TypeExpr) {
        match &ty.kind {
            TypeKind::Named(name) => self.contract_ref(name),
            TypeKind::List(inner, _) => self.type_expr(inner),
            TypeKind::Enum(variants) => {
                for variant in variants {
                    self.index.extras.push((variant.span, Extra::Variant));
                }
            }
            _ => {}
        }
    }

    fn role(&mut self, role: &Role) {
        self.add(role.name.span, Def::Role(role.name.name.clone()), true);
        if let Some(ModelRef::Alias(alias)) = &role.model {
            self.add(alias.span, Def::Model(alias.name.clone()), false);
        }
        if let Some(prompt) = &role.prompt
            && role.origin == RoleOrigin::Block
            && let PromptSource::File {
                path,
                file: Some(file),
            } = &prompt.source
        {
            let name = self.file_name(*file);
            self.add(path.span, Def::File(name), false);
        }
        for rules in &role.rules {
            self.add(rules.span, Def::Rules(rules.name.clone()), false);
        }
        for contract in role.inputs.iter().chain(&role.output) {
            self.contract_ref(contract);
        }
        for tool in &role.tools {
            self.tool_ref(tool);
        }
        for rule in &role.tool_rules {
            self.tool_ref(&rule.tool);
        }
        if let Some(choice) = &role.tool_choice
            && (self.symbols.tools.contains_key(choice.name.as_str())
                || mcp_tool(&choice.name).is_some())
        {
            self.tool_ref(choice);
        }
        if let Some(history) = &role.history {
            for step in &history.steps {
                self.add(step.span, Def::Step(step.name.clone()), false);
            }
        }
        for permit in &role.permits {
            self.tool_ref(&permit.tool);
            let input = self
                .symbols
                .tools
                .get(permit.tool.name.as_str())
                .and_then(|tool| tool.input.as_ref())
                .map(|input| input.name.clone());
            // The call's inputs by their template names (`work_order`), then `args`, `meta`.
            let inputs = charter_compiler::check::types::permit_inputs(role);
            let bound = inputs.len() + 2;
            for (name, contract) in inputs {
                let contract = self
                    .symbols
                    .is_contract(contract)
                    .then(|| contract.to_string());
                self.scope.push((name, contract));
            }
            self.scope.push(("args".to_string(), input));
            self.scope.push(("meta".to_string(), None));
            self.expr(&permit.condition);
            self.scope.truncate(self.scope.len() - bound);
        }
    }

    fn gate(&mut self, gate: &Gate) {
        let name = gate.name.name.clone();
        self.add(gate.name.span, Def::Gate(name.clone()), true);
        self.add(
            gate.subject.span,
            Def::Step(gate.subject.name.clone()),
            false,
        );
        self.candidate_items = self.subject_contract(&gate.subject.name);
        for rule in &gate.rules {
            match rule {
                GateRule::Check {
                    name: rule_name,
                    expr,
                    code,
                    detail,
                    ..
                } => {
                    self.add(
                        rule_name.span,
                        Def::GateRule(name.clone(), rule_name.name.clone()),
                        true,
                    );
                    self.expr(expr);
                    self.add(code.span, Def::Issue(code.name.clone()), true);
                    if let Some(detail) = detail {
                        self.expr(detail);
                    }
                }
                GateRule::Score {
                    name: rule_name,
                    expr,
                    below,
                    detail,
                    ..
                } => {
                    self.add(
                        rule_name.span,
                        Def::GateRule(name.clone(), rule_name.name.clone()),
                        true,
                    );
                    self.expr(expr);
                    if let Some((_, code)) = below {
                        self.add(code.span, Def::Issue(code.name.clone()), true);
                    }
                    if let Some(detail) = detail {
                        self.expr(detail);
                    }
                }
            }
        }
        self.expr(&gate.pass_when);
        self.candidate_items = None;
    }

    fn subject_contract(&self, step: &str) -> Option<String> {
        let step = self.symbols.steps.get(step)?;
        step_contract(self.symbols, step)
    }

    fn step(&mut self, step: &Step) {
        self.add(step.name.span, Def::Step(step.name.name.clone()), true);
        match &step.body {
            StepBody::Call { role, args } | StepBody::Finalize { role, args } => {
                self.add(role.span, Def::Role(role.name.clone()), false);
                self.exprs(args);
            }
            StepBody::Each {
                var,
                over,
                role,
                args,
                check,
                ..
            } => {
                let item = self.expr(over);
                self.add(role.span, Def::Role(role.name.clone()), false);
                self.index.extras.push((var.span, Extra::Local));
                self.scope.push((var.name.clone(), item));
                self.exprs(args);
                self.scope.pop();
                if let Some(check) = check {
                    self.add(check.gate.span, Def::Gate(check.gate.name.clone()), false);
                    if let Some(by) = &check.by {
                        self.add(by.span, Def::Role(by.name.clone()), false);
                    }
                }
            }
            StepBody::Gate { gate } => self.add(gate.span, Def::Gate(gate.name.clone()), false),
            StepBody::Tool { tool, args } => {
                self.add(tool.span, Def::Tool(tool.name.clone()), false);
                self.exprs(args);
            }
            StepBody::Branch | StepBody::Ask { .. } => {}
        }
        match &step.next {
            Next::Goto(target) => self.target(target),
            Next::When { arms, otherwise } => {
                for (condition, target) in arms {
                    self.expr(condition);
                    self.target(target);
                }
                if let Some(target) = otherwise {
                    self.target(target);
                }
            }
            Next::PassFail { pass, fail } => {
                self.target(pass);
                if let charter_compiler::syntax::ast::FailTarget::Target(target) = fail {
                    self.target(target);
                }
            }
        }
        if let Some(on_error) = &step.on_error {
            self.add(on_error.span, Def::Step(on_error.name.clone()), false);
        }
    }

    fn target(&mut self, target: &Target) {
        if let Target::Step(step) = target {
            self.add(step.span, Def::Step(step.name.clone()), false);
        }
    }

    fn exprs(&mut self, exprs: &[Expr]) {
        for expr in exprs {
            self.expr(expr);
        }
    }

    /// Indexes the names in `expr`; returns the contract a path's value holds.
    fn expr(&mut self, expr: &Expr) -> Option<String> {
        match &expr.kind {
            ExprKind::Path(segments) => {
                let names: Vec<(&str, Span)> = segments
                    .iter()
                    .map(|segment| (segment.name.as_str(), segment.span))
                    .collect();
                return self.path(&names);
            }
            ExprKind::List(items) => self.exprs(items),
            ExprKind::Record(entries) => {
                for (_, value) in entries {
                    self.expr(value);
                }
            }
            ExprKind::Unary { operand, .. } => {
                self.expr(operand);
            }
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            ExprKind::Call { function, args } => {
                self.index.extras.push((function.span, Extra::Function));
                self.exprs(args);
            }
            ExprKind::Quantifier {
                var, over, body, ..
            } => {
                let item = self.expr(over);
                self.index.extras.push((var.span, Extra::Local));
                self.scope.push((var.name.clone(), item));
                self.expr(body);
                self.scope.pop();
            }
            _ => {}
        }
        None
    }

    /// Indexes a dotted path read in an expression; returns the contract its value holds.
    fn path(&mut self, segments: &[(&str, Span)]) -> Option<String> {
        let (&(first, first_span), rest) = segments.split_first()?;
        let local = self
            .scope
            .iter()
            .rev()
            .find(|(name, _)| name == first)
            .map(|(_, contract)| contract.clone());
        let mut rest = rest;
        let mut contract = if let Some(contract) = local {
            self.index.extras.push((first_span, Extra::Local));
            contract
        } else if first == "candidate" || first == "best" {
            self.index.extras.push((first_span, Extra::Local));
            match rest.split_first() {
                Some((("items", _), tail)) => {
                    rest = tail;
                    self.candidate_items.clone()
                }
                _ => None,
            }
        } else if first == "request" {
            self.index.extras.push((first_span, Extra::Local));
            request_contract(self.symbols)
        } else if first == "session" {
            self.index.extras.push((first_span, Extra::Local));
            self.symbols
                .session
                .map(|session| session.contract.name.name.clone())
        } else if let Some(step) = self.symbols.steps.get(first) {
            self.add(first_span, Def::Step(first.to_string()), false);
            step_contract(self.symbols, step)
        } else {
            if rest.is_empty() {
                self.index.extras.push((first_span, Extra::Variant));
            }
            None
        };
        for &(segment, span) in rest {
            let Some(current) = contract.take() else {
                break;
            };
            let has_field = self
                .symbols
                .contracts
                .get(current.as_str())
                .is_some_and(|c| c.fields.iter().any(|f| f.name.name == segment));
            if !has_field {
                break;
            }
            self.add(
                span,
                Def::Field(current.clone(), segment.to_string()),
                false,
            );
            contract = field_contract(self.symbols, &current, segment);
        }
        contract
    }

    /// Indexes the paths read by every role's prompt template.
    fn templates(&mut self) {
        for role in self.symbols.roles.values() {
            let Some(prompt) = &role.prompt else {
                continue;
            };
            let (file, start, end) = match &prompt.source {
                PromptSource::Inline(literal) => (
                    literal.span.file,
                    literal.span.start as usize,
                    literal.span.end as usize,
                ),
                PromptSource::File {
                    file: Some(file), ..
                } => {
                    let length = self.sources.get(*file).map_or(0, |s| s.text.len());
                    (*file, 0, length)
                }
                PromptSource::File { file: None, .. } => continue,
            };
            self.index.templates.push(TemplateOwner {
                role: role.name.name.clone(),
                file,
                start,
                end,
            });
            self.template(role, file, start, end);
        }
    }

    fn template(&mut self, role: &Role, file: FileId, start: usize, end: usize) {
        let Some(text) = self
            .sources
            .get(file)
            .and_then(|source| source.text.get(start..end))
        else {
            return;
        };
        let span =
            |range: std::ops::Range<usize>| Span::new(file, start + range.start, start + range.end);
        let mut loops: Vec<(String, Option<String>)> = Vec::new();
        for item in template_items(text) {
            match item {
                TemplateItem::Path(path) => {
                    self.template_path(role, &loops, &path, &span);
                }
                TemplateItem::For { var, over } => {
                    let item = self.template_path(role, &loops, &over, &span);
                    loops.push((var, item));
                }
                TemplateItem::EndFor => {
                    loops.pop();
                }
                TemplateItem::StepName { name, range } => {
                    if self.symbols.steps.contains_key(name.as_str()) {
                        self.add(span(range), Def::Step(name), false);
                    }
                }
            }
        }
    }

    fn template_path(
        &mut self,
        role: &Role,
        loops: &[(String, Option<String>)],
        path: &crate::scan::TagPath,
        span: &dyn Fn(std::ops::Range<usize>) -> Span,
    ) -> Option<String> {
        let ((first, first_range), rest) = path.segments.split_first()?;
        let mut contract = if let Some((_, contract)) = loops.iter().rev().find(|(v, _)| v == first)
        {
            contract.clone()
        } else if let Some(input) = role
            .inputs
            .iter()
            .find(|input| snake_case(&input.name) == *first)
        {
            self.index.occurrences.push(Occurrence {
                span: span(first_range.clone()),
                def: Def::Contract(input.name.clone()),
                is_def: false,
                spelling: Spelling::Snake,
            });
            Some(input.name.clone())
        } else if first == "session" {
            self.symbols
                .session
                .map(|session| session.contract.name.name.clone())
        } else {
            None
        };
        for (segment, range) in rest {
            let current = contract.take()?;
            let has_field = self
                .symbols
                .contracts
                .get(current.as_str())
                .is_some_and(|c| c.fields.iter().any(|f| &f.name.name == segment));
            if !has_field {
                return None;
            }
            self.add(
                span(range.clone()),
                Def::Field(current.clone(), segment.clone()),
                false,
            );
            contract = field_contract(self.symbols, &current, segment);
        }
        contract
    }
}
