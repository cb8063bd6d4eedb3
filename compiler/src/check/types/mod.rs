//! Name resolution and typing of expressions, role calls and literals (E002, E003 inside
//! items, E004, E005, E013).
//!
//! Scope rules (DESIGN §2.2), as implemented here:
//! - `request` is the flow's input. Its type is decided by one rule, in order: (1) when the
//!   entry step (the first step of the flow) calls a role and passes bare `request` as
//!   argument `i`, `request` is that role's `i`-th input contract; (2) otherwise, when a
//!   contract named `Request` exists, `request` is a `Request`; (3) otherwise it is unknown
//!   (`any`), so nothing about it is reported.
//! - Every step name is its output: a call step its role's output contract, an `each` step a
//!   list of its role's output, `finalize` a `Delivery`, `ask` an `Answer`, a `gate` step
//!   `{passed: bool, score: float}`.
//! - `candidate` and `best` are `Candidate` records whose `items` are the outputs of the
//!   step the gate is `on` (inside a gate). In a flow step, they are the items of the
//!   evaluated gates (`gate G` steps) whose subject is upstream of the step, when those
//!   agree (`list<any>` when they do not); a step with no such gate upstream (and
//!   invariants) uses the subject of every evaluated gate, when those agree.
//! - `session` (in a spec with a `session` block) is a record of the session's fields plus
//!   `turns: list<{request, answer, role: string?}>` (DESIGN §9.4); `remember` values are
//!   typed in the flow's scope and must fit their field.
//! - `run` is `{round, step_count, tokens, cost, elapsed, answered_by: string?}`; `score` exists only in a gate's
//!   `pass when`; inside a gate used by `each ... check G by R`, `item` is the each role's
//!   output and `R` is R's output. Quantifier variables and the `each` variable are the
//!   element type of the list they range over.

mod expr;
mod items;
pub mod ty;

use std::collections::{BTreeMap, BTreeSet};

pub use expr::BUILTIN_FUNCTIONS;
pub use items::PROVIDERS;
pub use ty::{Bounds, ContractInfo, Contracts, FieldInfo, Ty};

use crate::check::Symbols;
use crate::check::types::expr::{NonValues, Place, Typer};
use crate::check::types::ty::{Mismatch, candidate_fields, number};
use crate::diagnostics::{Code, Diagnostic, Span, did_you_mean};
use crate::syntax::ast::{
    BinaryOp, Expr, ExprKind, FailTarget, Gate, GateRule, Ident, InvariantKind, Item, Next, Role,
    Session, SpecFile, Step, StepBody, Target, UnaryOp,
};

/// How the type of `request` was decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RequestSource {
    /// The entry step passes `request` to a role: its input contract.
    EntryStep { step: String, role: String },
    /// A contract named `Request` exists.
    RequestContract,
    /// Nothing decides it.
    #[default]
    Unknown,
}

/// What a step's name stands for in expressions.
#[derive(Clone, Debug, PartialEq)]
pub struct StepType {
    /// The full type (`list<T>` for `each` steps).
    pub ty: Ty,
    /// The contract of one output (the role's output; `Delivery` for finalize, `Answer` for
    /// ask), if known. `None` for gate steps and unknown roles.
    pub contract: Option<String>,
    /// An `each` step: the name stands for a list of `contract`.
    pub is_list: bool,
}

/// Resolved facts about expressions and calls, for the graph builder.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeFacts {
    /// Every contract with its field types, built-ins included.
    pub contracts: Contracts,
    /// The contract of `request` (the flow's input), when known.
    pub request: Option<String>,
    pub request_source: RequestSource,
    /// Each step's output type, by step name.
    pub steps: BTreeMap<String, StepType>,
    /// Per gate: the contract of its candidate's items (the output of the step it is `on`).
    pub gate_items: BTreeMap<String, Option<String>>,
    /// Per gate: the range of its weighted `score`, when every score rule's range is known.
    pub score_bounds: BTreeMap<String, Bounds>,
    /// Gates used by a per-item `check`, with the `each` step that uses them.
    pub per_item_gates: BTreeMap<String, String>,
    /// Spans of bare names in expressions that are enum variants (not names in scope).
    pub variants: BTreeSet<Span>,
}

impl TypeFacts {
    /// Whether the bare name written at `span` is an enum variant.
    pub fn is_variant(&self, span: Span) -> bool {
        self.variants.contains(&span)
    }
}

/// Runs the name and type checks.
pub fn check(
    spec: &SpecFile,
    symbols: &Symbols<'_>,
    contracts: &Contracts,
    diagnostics: &mut Vec<Diagnostic>,
) -> TypeFacts {
    items::check(spec, symbols, diagnostics);
    let mut facts = TypeFacts::default();
    let mut checker = Checker {
        symbols,
        contracts,
        non_values: non_values(symbols),
        diagnostics,
        variants: BTreeSet::new(),
        steps: BTreeMap::new(),
        request: Ty::Any,
        flow_candidate_items: Ty::Any,
        step_candidates: BTreeMap::new(),
        session: None,
    };
    checker.steps = checker.step_types();
    let (request, request_source) = checker.request();
    checker.request = request.clone();
    checker.session = symbols
        .session
        .map(|session| session_type(session, symbols, &request));
    checker.flow_candidate_items = checker.flow_candidate_items();
    checker.step_candidates = checker.step_candidate_items();

    checker.defaults(spec);
    for role in symbols.roles.values() {
        checker.permits(role);
    }
    let per_item = checker.per_item_gates();
    for gate in symbols.gates.values() {
        let bounds = checker.gate(gate, per_item.get(gate.name.name.as_str()));
        if let Some(bounds) = bounds {
            facts.score_bounds.insert(gate.name.name.clone(), bounds);
        }
        facts.gate_items.insert(
            gate.name.name.clone(),
            checker
                .subject_item(&gate.subject.name)
                .contract_name()
                .map(str::to_string),
        );
    }
    for item in &spec.items {
        if let Item::Invariant(invariant) = item
            && let InvariantKind::Always(expr) = &invariant.kind
        {
            let mut typer = checker.typer(Place::Invariant, checker.flow_candidate_items.clone());
            typer.expect_bool(expr, "an `always` invariant");
        }
    }
    if let Some(flow) = symbols.flow {
        for step in &flow.steps {
            checker.step(step);
        }
    }
    checker.remembers();

    facts.contracts = contracts.clone();
    facts.request = request.contract_name().map(str::to_string);
    facts.request_source = request_source;
    facts.steps = checker
        .steps
        .iter()
        .map(|(name, ty)| ((*name).to_string(), ty.clone()))
        .collect();
    facts.per_item_gates = per_item
        .iter()
        .map(|(gate, info)| ((*gate).to_string(), info.step.to_string()))
        .collect();
    facts.variants = std::mem::take(&mut checker.variants);
    facts
}

fn non_values(symbols: &Symbols<'_>) -> NonValues {
    let mut roles = Vec::new();
    for name in symbols.roles.keys() {
        let step = symbols.steps.values().find(|step| match &step.body {
            StepBody::Call { role, .. }
            | StepBody::Each { role, .. }
            | StepBody::Finalize { role, .. } => role.name == *name,
            _ => false,
        });
        roles.push(((*name).to_string(), step.map(|step| step.name.name.clone())));
    }
    NonValues { roles }
}

/// What a per-item `check G by R` puts in G's scope.
#[derive(Debug)]
struct PerItem<'a> {
    step: &'a str,
    item: Ty,
    by: Option<(&'a str, Ty)>,
}

struct Checker<'s, 'a> {
    symbols: &'s Symbols<'a>,
    contracts: &'s Contracts,
    non_values: NonValues,
    diagnostics: &'s mut Vec<Diagnostic>,
    variants: BTreeSet<Span>,
    steps: BTreeMap<&'a str, StepType>,
    request: Ty,
    flow_candidate_items: Ty,
    step_candidates: BTreeMap<&'a str, Ty>,
    /// The type of `session`, when the spec declares one.
    session: Option<Ty>,
}

/// The type of `session`: the session's fields, and the turns the runtime keeps.
fn session_type(session: &Session, symbols: &Symbols<'_>, request: &Ty) -> Ty {
    let mut fields: Vec<(String, Ty)> = session
        .contract
        .fields
        .iter()
        .map(|field| (field.name.name.clone(), ty::lower(&field.ty, symbols)))
        .collect();
    let turn = Ty::Record {
        name: None,
        fields: vec![
            ("request".to_string(), request.clone()),
            ("answer".to_string(), Ty::Any),
            ("role".to_string(), Ty::optional(Ty::String)),
        ],
    };
    fields.push(("turns".to_string(), Ty::list(turn)));
    Ty::Record {
        name: Some(session.contract.name.name.clone()),
        fields,
    }
}

impl<'s, 'a> Checker<'s, 'a> {
    fn contract_ty(&self, name: &Ident) -> Ty {
        if self.symbols.is_contract(&name.name) {
            Ty::Contract(name.name.clone())
        } else {
            Ty::Any
        }
    }

    fn role_output(&self, role: &str) -> Ty {
        self.symbols
            .roles
            .get(role)
            .and_then(|role| role.output.as_ref())
            .map_or(Ty::Any, |output| self.contract_ty(output))
    }

    fn step_types(&self) -> BTreeMap<&'a str, StepType> {
        let mut types = BTreeMap::new();
        for (name, step) in &self.symbols.steps {
            let step_type = match &step.body {
                StepBody::Call { role, .. } => {
                    let ty = self.role_output(&role.name);
                    StepType {
                        contract: ty.contract_name().map(str::to_string),
                        ty,
                        is_list: false,
                    }
                }
                StepBody::Each { role, .. } => {
                    let ty = self.role_output(&role.name);
                    StepType {
                        contract: ty.contract_name().map(str::to_string),
                        ty: Ty::list(ty),
                        is_list: true,
                    }
                }
                StepBody::Finalize { .. } => StepType {
                    ty: Ty::Contract("Delivery".to_string()),
                    contract: Some("Delivery".to_string()),
                    is_list: false,
                },
                // A tool step's output is its tool's output contract.
                StepBody::Tool { tool, .. } => {
                    let ty = self
                        .symbols
                        .tools
                        .get(tool.name.as_str())
                        .and_then(|tool| tool.output.as_ref())
                        .map_or(Ty::Any, |output| self.contract_ty(output));
                    StepType {
                        contract: ty.contract_name().map(str::to_string),
                        ty,
                        is_list: false,
                    }
                }
                // A branch calls nothing: it has no output to read.
                StepBody::Branch => StepType {
                    ty: Ty::None,
                    contract: None,
                    is_list: false,
                },
                StepBody::Ask { .. } => StepType {
                    ty: Ty::Contract("Answer".to_string()),
                    contract: Some("Answer".to_string()),
                    is_list: false,
                },
                StepBody::Gate { .. } => StepType {
                    ty: Ty::Record {
                        name: None,
                        fields: vec![
                            ("passed".to_string(), Ty::Bool),
                            ("score".to_string(), Ty::Float(Bounds::UNBOUNDED)),
                        ],
                    },
                    contract: None,
                    is_list: false,
                },
            };
            types.insert(*name, step_type);
        }
        types
    }

    /// The type of `request`, by the rule in the module docs.
    fn request(&self) -> (Ty, RequestSource) {
        let entry = self.symbols.flow.and_then(|flow| flow.steps.first());
        if let Some(entry) = entry {
            let call = match &entry.body {
                StepBody::Call { role, args } | StepBody::Finalize { role, args } => {
                    Some((role, args))
                }
                StepBody::Each { role, args, .. } => Some((role, args)),
                _ => None,
            };
            if let Some((role_name, args)) = call
                && let Some(role) = self.symbols.roles.get(role_name.name.as_str())
            {
                let position = args.iter().position(|arg| match &arg.kind {
                    ExprKind::Path(segments) => {
                        segments.len() == 1
                            && segments
                                .first()
                                .is_some_and(|first| first.name == "request")
                    }
                    _ => false,
                });
                if let Some(input) = position.and_then(|index| role.inputs.get(index))
                    && self.symbols.is_contract(&input.name)
                {
                    return (
                        Ty::Contract(input.name.clone()),
                        RequestSource::EntryStep {
                            step: entry.name.name.clone(),
                            role: role_name.name.clone(),
                        },
                    );
                }
            }
        }
        if self.symbols.contracts.contains_key("Request") {
            return (
                Ty::Contract("Request".to_string()),
                RequestSource::RequestContract,
            );
        }
        (Ty::Any, RequestSource::Unknown)
    }

    /// The type of one item of a candidate whose subject is `step`.
    fn subject_item(&self, step: &str) -> Ty {
        match self.symbols.steps.get(step).map(|step| &step.body) {
            Some(StepBody::Call { role, .. } | StepBody::Each { role, .. }) => {
                self.role_output(&role.name)
            }
            Some(_) => self.steps.get(step).map_or(Ty::Any, |ty| ty.ty.clone()),
            None => Ty::Any,
        }
    }

    /// The items of `candidate` outside a gate: those of the subject of every gate the flow
    /// evaluates, when they agree.
    fn flow_candidate_items(&self) -> Ty {
        let mut evaluated: Vec<&Gate> = self
            .symbols
            .steps
            .values()
            .filter_map(|step| match &step.body {
                StepBody::Gate { gate } => self.symbols.gates.get(gate.name.as_str()).copied(),
                _ => None,
            })
            .collect();
        if evaluated.is_empty() {
            evaluated = self.symbols.gates.values().copied().collect();
        }
        let mut items: Option<Ty> = None;
        for gate in evaluated {
            let ty = self.subject_item(&gate.subject.name);
            match &items {
                None => items = Some(ty),
                Some(previous) if *previous == ty => {}
                Some(_) => return Ty::Any,
            }
        }
        items.unwrap_or(Ty::Any)
    }

    /// Per step: the items of `candidate` in its arguments and conditions. That is the
    /// candidate of the evaluated gates whose subject is upstream of the step, when they
    /// agree (`any` when they do not); with no such gate, [`Self::flow_candidate_items`].
    fn step_candidate_items(&self) -> BTreeMap<&'a str, Ty> {
        let mut successors: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, step) in &self.symbols.steps {
            let mut targets: Vec<&Target> = Vec::new();
            match &step.next {
                Next::Goto(target) => targets.push(target),
                Next::When { arms, otherwise } => {
                    targets.extend(arms.iter().map(|(_, target)| target));
                    targets.extend(otherwise.iter());
                }
                Next::PassFail { pass, fail } => {
                    targets.push(pass);
                    if let FailTarget::Target(target) = fail {
                        targets.push(target);
                    }
                }
            }
            let names = targets
                .into_iter()
                .filter_map(|target| match target {
                    Target::Step(step) => Some(step.name.as_str()),
                    _ => None,
                })
                .chain(step.on_error.iter().map(|on_error| on_error.name.as_str()));
            successors.entry(*name).or_default().extend(names);
        }
        let mut found: BTreeMap<&'a str, Option<Ty>> = BTreeMap::new();
        for step in self.symbols.steps.values() {
            let StepBody::Gate { gate } = &step.body else {
                continue;
            };
            let Some(gate) = self.symbols.gates.get(gate.name.as_str()) else {
                continue;
            };
            let items = self.subject_item(&gate.subject.name);
            // Every step reachable from the subject sees this gate's candidate.
            let mut seen: BTreeSet<&str> = BTreeSet::new();
            let mut pending: Vec<&str> = successors
                .get(gate.subject.name.as_str())
                .cloned()
                .unwrap_or_default();
            while let Some(name) = pending.pop() {
                if !seen.insert(name) {
                    continue;
                }
                if let Some(next) = successors.get(name) {
                    pending.extend(next.iter().copied());
                }
            }
            for name in seen {
                let Some((key, _)) = self.symbols.steps.get_key_value(name) else {
                    continue;
                };
                let slot = found.entry(*key).or_insert_with(|| Some(items.clone()));
                if slot.as_ref().is_some_and(|previous| *previous != items) {
                    *slot = None;
                }
            }
        }
        self.symbols
            .steps
            .keys()
            .map(|name| {
                let items = match found.get(name) {
                    Some(Some(items)) => items.clone(),
                    Some(None) => Ty::Any,
                    None => self.flow_candidate_items.clone(),
                };
                (*name, items)
            })
            .collect()
    }

    fn per_item_gates(&self) -> BTreeMap<&'a str, PerItem<'a>> {
        let mut gates = BTreeMap::new();
        for (name, step) in &self.symbols.steps {
            if let StepBody::Each {
                role,
                check: Some(check),
                ..
            } = &step.body
            {
                let by = check
                    .by
                    .as_ref()
                    .map(|by| (by.name.as_str(), self.role_output(&by.name)));
                gates.entry(check.gate.name.as_str()).or_insert(PerItem {
                    step: name,
                    item: self.role_output(&role.name),
                    by,
                });
            }
        }
        gates
    }

    /// A typer whose scope holds the names every expression sees.
    /// `permit TOOL when EXPR`: TOOL is one of the role's tools, and EXPR is a condition
    /// on `args` (the tool's input contract), `meta` (the role file's own keys) and the
    /// call's inputs under their template names ([`permit_inputs`]).
    fn permits(&mut self, role: &Role) {
        for permit in &role.permits {
            let tool = &permit.tool;
            let args = if role.tools.iter().any(|held| held.name == tool.name) {
                self.symbols
                    .tools
                    .get(tool.name.as_str())
                    .and_then(|definition| definition.input.as_ref())
                    .filter(|input| self.symbols.is_contract(&input.name))
                    .map_or(Ty::Any, |input| Ty::Contract(input.name.clone()))
            } else {
                let names: Vec<&str> = role.tools.iter().map(|held| held.name.as_str()).collect();
                let help = did_you_mean(&tool.name, names.iter().copied()).unwrap_or_else(|| {
                    format!(
                        "add `{}` to the role's `tools`, or remove this rule",
                        tool.name
                    )
                });
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E002,
                        tool.span,
                        format!(
                            "`permit` names `{}`, which is not in the tools of role `{}`",
                            tool.name, role.name.name
                        ),
                    )
                    .with_label("not one of this role's tools")
                    .with_help(help),
                );
                Ty::Any
            };
            let mut typer = self.typer(Place::Default, Ty::Any);
            for (name, contract) in permit_inputs(role) {
                typer.push(&name, Ty::Contract(contract.to_string()));
            }
            typer.push("args", args);
            typer.push("meta", Ty::Any);
            typer.expect_bool(&permit.condition, "a `permit` condition");
        }
    }

    /// Each `remember FIELD = EXPR`: the value must fit the field (unknown fields were
    /// reported by the item checks).
    fn remembers(&mut self) {
        let symbols = self.symbols;
        let Some(session) = symbols.session else {
            return;
        };
        for remember in &symbols.remembers {
            let Some(field) = session
                .contract
                .fields
                .iter()
                .find(|field| field.name.name == remember.field.name)
            else {
                continue;
            };
            let wanted = ty::lower(&field.ty, symbols);
            let items = self.flow_candidate_items.clone();
            let mut typer = self.typer(Place::Flow, items);
            let actual = typer.infer(&remember.value, Some(&wanted));
            typer.expect_fits(
                &actual,
                &wanted,
                remember.value.span,
                &format!("session field `{}`", field.name.name),
            );
        }
    }

    fn typer(&mut self, place: Place, candidate_items: Ty) -> Typer<'_> {
        let mut typer = Typer {
            contracts: self.contracts,
            non_values: &self.non_values,
            diagnostics: self.diagnostics,
            variants: &mut self.variants,
            steps: None,
            scope: Vec::new(),
            place,
            depth: 0,
            too_deep: false,
        };
        if place == Place::Default {
            return typer;
        }
        typer.steps = Some(&self.steps);
        let candidate = Ty::Record {
            name: Some("Candidate".to_string()),
            fields: candidate_fields(candidate_items),
        };
        typer.push("request", self.request.clone());
        typer.push("candidate", candidate.clone());
        typer.push("best", candidate);
        typer.push(
            "run",
            Ty::Record {
                name: None,
                fields: vec![
                    ("round".to_string(), Ty::Int(Bounds::at_least(0.0))),
                    ("step_count".to_string(), Ty::Int(Bounds::at_least(0.0))),
                    ("tokens".to_string(), Ty::Int(Bounds::at_least(0.0))),
                    ("cost".to_string(), Ty::Float(Bounds::at_least(0.0))),
                    ("elapsed".to_string(), Ty::Int(Bounds::at_least(0.0))),
                    ("answered_by".to_string(), Ty::optional(Ty::String)),
                ],
            },
        );
        if let Some(session) = &self.session {
            typer.push("session", session.clone());
        }
        typer
    }

    /// Contract field defaults must fit their field.
    fn defaults(&mut self, spec: &SpecFile) {
        for item in &spec.items {
            let Item::Contract(contract) = item else {
                continue;
            };
            for field in &contract.fields {
                let Some(default) = &field.default else {
                    continue;
                };
                let wanted = ty::lower(&field.ty, self.symbols);
                let mut typer = self.typer(Place::Default, Ty::Any);
                let actual = typer.infer(default, Some(&wanted));
                typer.expect_fits(
                    &actual,
                    &wanted,
                    default.span,
                    &format!("the default of field `{}`", field.name.name),
                );
                let range = wanted
                    .strip_optional()
                    .bounds()
                    .filter(|bounds| bounds.is_known());
                if let (Some(bounds), Some(value)) = (range, literal_number(default))
                    && !bounds.contains(value)
                {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::E013,
                            default.span,
                            format!(
                                "the default `{}` of field `{}` is outside its range {}",
                                number(value),
                                field.name.name,
                                describe_bounds(bounds)
                            ),
                        )
                        .with_label("outside the field's range")
                        .with_help(format!("pick a default within {}", describe_bounds(bounds))),
                    );
                }
            }
        }
    }

    /// Checks a gate's rules and `pass when`; returns the range of its score when known.
    fn gate(&mut self, gate: &Gate, per_item: Option<&PerItem<'_>>) -> Option<Bounds> {
        let items = self.subject_item(&gate.subject.name);
        let mut typer = self.typer(
            Place::Gate {
                pass_when: false,
                per_item: per_item.is_some(),
            },
            items,
        );
        if let Some(per_item) = per_item {
            typer.push("item", per_item.item.clone());
            if let Some((by, ty)) = &per_item.by {
                typer.push(by, ty.clone());
            }
        }
        let mut score: Option<Bounds> = None;
        let mut all_known = true;
        for rule in &gate.rules {
            match rule {
                GateRule::Check { expr, detail, .. } => {
                    typer.expect_bool(expr, "a `hard`/`warn` rule");
                    if let Some(detail) = detail {
                        typer.infer(detail, None);
                    }
                }
                GateRule::Score {
                    name,
                    expr,
                    below,
                    detail,
                    ..
                } => {
                    if let Some(detail) = detail {
                        typer.infer(detail, None);
                    }
                    let ty = typer.expect_number(expr, "a score");
                    let bounds = ty.bounds().unwrap_or_default();
                    if bounds.min.is_some() && bounds.max.is_some() {
                        score = Some(score.map_or(bounds, |score| score.union(bounds)));
                    } else {
                        all_known = false;
                    }
                    if let Some((threshold, _)) = below
                        && bounds.is_known()
                        && !bounds.contains(threshold.value)
                    {
                        typer.diagnostics.push(
                            Diagnostic::new(
                                Code::E013,
                                threshold.span,
                                format!(
                                    "threshold `{}` is outside the range of score `{}`, which is `{ty}`",
                                    number(threshold.value),
                                    name.name
                                ),
                            )
                            .with_label("outside the score's range")
                            .with_note(expr.span, format!("this is `{ty}`"))
                            .with_help(format!(
                                "pick a threshold within {}",
                                describe_bounds(bounds)
                            )),
                        );
                    }
                }
            }
        }
        let score = if all_known { score } else { None };
        typer.place = Place::Gate {
            pass_when: true,
            per_item: per_item.is_some(),
        };
        typer.push("score", Ty::Float(score.unwrap_or_default()));
        typer.expect_bool(&gate.pass_when, "a `pass when` condition");
        if let Some(bounds) = score {
            score_thresholds(&gate.pass_when, bounds, typer.diagnostics);
        }
        score
    }

    fn step(&mut self, step: &Step) {
        let items = self
            .step_candidates
            .get(step.name.name.as_str())
            .cloned()
            .unwrap_or_else(|| self.flow_candidate_items.clone());
        let symbols = self.symbols;
        match &step.body {
            StepBody::Call { role, args } | StepBody::Finalize { role, args } => {
                let mut typer = self.typer(Place::Flow, items);
                call(&mut typer, symbols, role, args, step);
            }
            StepBody::Each {
                var,
                over,
                role,
                args,
                check,
                ..
            } => {
                // `each t in [...]: r(t)`: the list's items are checked against r's input.
                let passes_var = matches!(args.as_slice(), [Expr { kind: ExprKind::Path(segments), .. }]
                    if segments.len() == 1 && segments.first().is_some_and(|first| first.name == var.name));
                let wanted = symbols
                    .roles
                    .get(role.name.as_str())
                    .filter(|role| passes_var && role.inputs.len() == 1)
                    .and_then(|role| role.inputs.first())
                    .filter(|input| symbols.is_contract(&input.name))
                    .map(|input| Ty::list(Ty::Contract(input.name.clone())));
                let mut typer = self.typer(Place::Flow, items);
                let over_ty = typer.infer(over, wanted.as_ref());
                let element = match over_ty.strip_optional().element() {
                    Some(element) => element,
                    None => {
                        typer.diagnostics.push(
                            Diagnostic::new(
                                Code::E004,
                                over.span,
                                format!("`each` ranges over a list, but this is `{over_ty}`"),
                            )
                            .with_label(format!("this is `{over_ty}`"))
                            .with_help("name a list, such as a `list<...>` field of an earlier step's output"),
                        );
                        Ty::Any
                    }
                };
                typer.push(&var.name, element);
                call(&mut typer, symbols, role, args, step);
                typer.pop();
                if let Some(check) = check
                    && let Some(by) = &check.by
                    && let Some(judge) = self.symbols.roles.get(by.name.as_str())
                {
                    let item = self.role_output(&role.name);
                    self.judge_input(judge, by, &item, &role.name);
                }
            }
            StepBody::Ask {
                max: Some(max),
                question,
            } if max.value == 0 => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::E013,
                        max.span,
                        format!("`ask` step `{}` may never ask with `max 0`", step.name.name),
                    )
                    .with_label("zero asks")
                    .with_note(question.span, "the question")
                    .with_help("give `max` a positive count, or remove it"),
                );
            }
            StepBody::Tool { tool, args } => {
                let mut typer = self.typer(Place::Flow, items);
                tool_call(&mut typer, symbols, tool, args, step);
            }
            StepBody::Gate { .. } | StepBody::Ask { .. } | StepBody::Branch => {}
        }
        if let Next::When { arms, .. } = &step.next {
            let when_items = self
                .step_candidates
                .get(step.name.name.as_str())
                .cloned()
                .unwrap_or_else(|| self.flow_candidate_items.clone());
            for (condition, _) in arms {
                let mut typer = self.typer(Place::Flow, when_items.clone());
                typer.expect_bool(condition, "a `when` condition");
            }
        }
    }

    /// A per-item judge must take the item's output.
    fn judge_input(&mut self, judge: &Role, by: &Ident, item: &Ty, each_role: &str) {
        if item.is_any() || judge.inputs.is_empty() {
            return;
        }
        let accepts = judge.inputs.iter().any(|input| {
            input.name == "Candidate"
                || self
                    .contracts
                    .mismatch(item, &self.contract_ty(input))
                    .is_none()
        });
        if !accepts {
            let inputs: Vec<String> = judge
                .inputs
                .iter()
                .map(|input| input.name.clone())
                .collect();
            let mut diagnostic = Diagnostic::new(
                Code::E005,
                by.span,
                format!(
                    "role `{}` judges each `{item}` from `{each_role}`, but takes `{}`",
                    by.name,
                    inputs.join(", ")
                ),
            )
            .with_label(format!("this judge is given a `{item}`"))
            .with_help(format!("make `{}`'s input `{item}`", by.name));
            if let Some(first) = judge.inputs.first() {
                diagnostic = diagnostic.with_note(
                    first.span,
                    format!("`{}`'s input is declared here", by.name),
                );
            }
            self.diagnostics.push(diagnostic);
        }
    }
}

/// Checks a role call's arguments against the role's inputs (E002 for an unknown role,
/// E005 for a mismatch).
fn call(
    typer: &mut Typer<'_>,
    symbols: &Symbols<'_>,
    role_name: &Ident,
    args: &[Expr],
    step: &Step,
) {
    let Some(role) = symbols.roles.get(role_name.name.as_str()) else {
        let names: Vec<&str> = symbols.roles.keys().copied().collect();
        items::unknown("role", role_name, names, typer.diagnostics);
        for arg in args {
            typer.infer(arg, None);
        }
        return;
    };
    let inputs: Vec<(&Ident, Ty)> = role
        .inputs
        .iter()
        .map(|input| {
            let ty = if symbols.is_contract(&input.name) {
                Ty::Contract(input.name.clone())
            } else {
                Ty::Any
            };
            (input, ty)
        })
        .collect();
    let takes = if inputs.is_empty() {
        "no input".to_string()
    } else {
        inputs
            .iter()
            .map(|(input, _)| format!("`{}`", input.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if args.len() != inputs.len() {
        let mut diagnostic = Diagnostic::new(
            Code::E005,
            step_call_span(role_name, args, inputs.len()),
            format!(
                "role `{}` takes {} ({takes}) but step `{}` passes {}",
                role.name.name,
                plural(inputs.len(), "input"),
                step.name.name,
                plural(args.len(), "argument")
            ),
        )
        .with_label(if args.len() > inputs.len() {
            "more arguments than inputs".to_string()
        } else {
            "arguments missing".to_string()
        })
        .with_help(format!(
            "pass one argument per input of `{}`, in order",
            role.name.name
        ));
        if let Some((first, _)) = inputs.first() {
            diagnostic = diagnostic.with_note(
                first.span,
                format!("`{}`'s input is declared here", role.name.name),
            );
        }
        typer.diagnostics.push(diagnostic);
        for arg in args {
            typer.infer(arg, None);
        }
        return;
    }
    for (arg, (input, wanted)) in args.iter().zip(&inputs) {
        let actual = typer.infer(arg, Some(wanted));
        let mismatch = typer.contracts.mismatch(&actual, wanted);
        let Some(mismatch) = mismatch else {
            continue;
        };
        typer.diagnostics.push(input_mismatch(
            &format!("role `{}`", role.name.name),
            &format!("`{}`", role.name.name),
            &role.name.name,
            input,
            arg,
            &actual,
            mismatch,
        ));
    }
}

/// `NAME = tool TOOL(arg)` (DESIGN §9.1): the tool is declared, and the one argument fits
/// its input contract (E005).
fn tool_call(
    typer: &mut Typer<'_>,
    symbols: &Symbols<'_>,
    tool_name: &Ident,
    args: &[Expr],
    step: &Step,
) {
    let Some(tool) = symbols.tools.get(tool_name.name.as_str()) else {
        let names: Vec<&str> = symbols.tools.keys().copied().collect();
        items::unknown("tool", tool_name, names, typer.diagnostics);
        for arg in args {
            typer.infer(arg, None);
        }
        return;
    };
    let Some(input) = tool.input.as_ref() else {
        for arg in args {
            typer.infer(arg, None);
        }
        return;
    };
    let wanted = if symbols.is_contract(&input.name) {
        Ty::Contract(input.name.clone())
    } else {
        Ty::Any
    };
    let [arg] = args else {
        typer.diagnostics.push(
            Diagnostic::new(
                Code::E005,
                step_call_span(tool_name, args, 1),
                format!(
                    "tool `{}` takes one `{}` but step `{}` passes {}",
                    tool.name.name,
                    input.name,
                    step.name.name,
                    plural(args.len(), "argument")
                ),
            )
            .with_label(if args.len() > 1 {
                "more arguments than the tool takes".to_string()
            } else {
                "argument missing".to_string()
            })
            .with_note(
                input.span,
                format!("`{}`'s input is declared here", tool.name.name),
            )
            .with_help(format!(
                "pass one `{}` record, such as an earlier step's output",
                input.name
            )),
        );
        for arg in args {
            typer.infer(arg, None);
        }
        return;
    };
    let actual = typer.infer(arg, Some(&wanted));
    let Some(mismatch) = typer.contracts.mismatch(&actual, &wanted) else {
        return;
    };
    typer.diagnostics.push(input_mismatch(
        &format!("tool `{}`", tool.name.name),
        &format!("tool `{}`", tool.name.name),
        &tool.name.name,
        input,
        arg,
        &actual,
        mismatch,
    ));
}

/// E005 for an argument that does not fit the input contract `input` of `callee` (`role
/// `x`` or `tool `x``; `owner` is how the help names it, `name` its bare name).
fn input_mismatch(
    callee: &str,
    owner: &str,
    name: &str,
    input: &Ident,
    arg: &Expr,
    actual: &Ty,
    mismatch: Mismatch,
) -> Diagnostic {
    let diagnostic = match mismatch {
        Mismatch::Plain => Diagnostic::new(
            Code::E005,
            arg.span,
            format!(
                "{callee} takes `{}` but this step passes `{actual}`",
                input.name
            ),
        )
        .with_label(format!("this is `{actual}`"))
        .with_help(format!(
            "pass a `{}` here, or change the `input:` of {owner}",
            input.name
        )),
        Mismatch::Fields(reasons) => Diagnostic::new(
            Code::E005,
            arg.span,
            format!(
                "{callee} takes `{}` but this record does not fit it: {}",
                input.name,
                reasons.join(", ")
            ),
        )
        .with_label(format!("not a `{}`", input.name))
        .with_help(format!("give exactly the fields of `{}`", input.name)),
    };
    diagnostic.with_note(input.span, format!("`{name}`'s input is declared here"))
}

/// Where an argument-count mismatch shows: the extra arguments, or the role name when
/// arguments are missing.
fn step_call_span(role: &Ident, args: &[Expr], inputs: usize) -> Span {
    let mut extra = args.iter().skip(inputs);
    match extra.next() {
        Some(first) => extra.fold(first.span, |span, arg| span.to(arg.span)),
        None => role.span,
    }
}

fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

fn describe_bounds(bounds: Bounds) -> String {
    format!(
        "`{}`",
        bounds
            .to_string()
            .trim_start_matches('(')
            .trim_end_matches(')')
    )
}

/// `score OP literal` (either way round) with the literal outside the score's range.
fn score_thresholds(expr: &Expr, bounds: Bounds, diagnostics: &mut Vec<Diagnostic>) {
    match &expr.kind {
        ExprKind::Binary { op, lhs, rhs } => {
            let comparison = matches!(
                op,
                BinaryOp::Lt
                    | BinaryOp::Le
                    | BinaryOp::Gt
                    | BinaryOp::Ge
                    | BinaryOp::Eq
                    | BinaryOp::Ne
            );
            if comparison {
                for (side, other) in [(lhs, rhs), (rhs, lhs)] {
                    let is_score = matches!(&side.kind, ExprKind::Path(segments)
                        if segments.len() == 1 && segments.first().is_some_and(|first| first.name == "score"));
                    let value = literal_number(other);
                    if is_score
                        && let Some(value) = value
                        && !bounds.contains(value)
                    {
                        diagnostics.push(
                            Diagnostic::new(
                                Code::E013,
                                other.span,
                                format!(
                                    "`score` is always within {}, so comparing it with `{}` is constant",
                                    describe_bounds(bounds),
                                    number(value)
                                ),
                            )
                            .with_label("outside the score's range")
                            .with_help(format!(
                                "pick a threshold within {}; `score` is the weighted mean of the gate's scores",
                                describe_bounds(bounds)
                            )),
                        );
                    }
                }
            }
            score_thresholds(lhs, bounds, diagnostics);
            score_thresholds(rhs, bounds, diagnostics);
        }
        ExprKind::Unary { operand, .. } => score_thresholds(operand, bounds, diagnostics),
        _ => {}
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// The value of a number literal, possibly negated.
fn literal_number(expr: &Expr) -> Option<f64> {
    match &expr.kind {
        ExprKind::Int(value) => Some(*value as f64),
        ExprKind::Float(value) => Some(*value),
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } => literal_number(operand).map(|value| -value),
        _ => None,
    }
}

/// The role inputs a `permit` condition sees, as its template does: each input contract
/// under its snake_case name (`WorkOrder` -> `work_order`), in the role's order. In an
/// `each` step that is the work item the call works on. `args` and `meta` keep their
/// meaning: an input whose name would be one of them is not bound.
pub fn permit_inputs(role: &Role) -> Vec<(String, &str)> {
    let mut inputs: Vec<(String, &str)> = Vec::new();
    for input in &role.inputs {
        let name = crate::names::snake_case(&input.name);
        if name != "args" && name != "meta" && !inputs.iter().any(|(seen, _)| *seen == name) {
            inputs.push((name, input.name.as_str()));
        }
    }
    inputs
}
