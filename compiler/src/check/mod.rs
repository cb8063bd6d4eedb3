//! Checking: names, types and flow rules over the AST, producing diagnostics and the
//! resolved tables the graph builder lowers from.
//!
//! `check` first collects every definition into [`Symbols`] (reporting duplicates, E003),
//! then runs the name/type checks (`types`, `templates`) and the flow checks (`flow`);
//! last, what lowering needs (`required`), tools' sandboxes (`sandbox`), MCP servers and
//! the `SERVER.TOOL` names of their tools (`mcp`), and those tools against the project's
//! `charter.lock` (`lock`).
//! Checks that assume a well-formed graph (cycles, reachability, repair coverage) run
//! only when the earlier ones found no error.

pub mod flow;
pub mod lock;
pub mod mcp;
pub mod required;
pub mod sandbox;
pub mod templates;
pub mod types;

use std::collections::BTreeMap;

use crate::diagnostics::{Code, Diagnostic, Sources};
use crate::syntax::ast::{
    Budget, Contract, Flow, Gate, Ident, Invariant, Item, McpServer, ModelEntry, Remember, Repair,
    Role, RulesBlock, Session, SpecFile, Step, Tool,
};

/// The names of the built-in contracts, always in scope.
pub const BUILTIN_CONTRACTS: [&str; 3] = ["Candidate", "Delivery", "Answer"];

/// Every definition of a spec by name, one namespace per kind (DESIGN §2.2). When a name
/// is defined twice the first definition wins and the second is reported (E003).
#[derive(Debug, Default)]
pub struct Symbols<'a> {
    pub contracts: BTreeMap<&'a str, &'a Contract>,
    pub tools: BTreeMap<&'a str, &'a Tool>,
    /// Every `mcp` server, whose tools are named `SERVER.TOOL` (DESIGN §19).
    pub mcp: BTreeMap<&'a str, &'a McpServer>,
    pub roles: BTreeMap<&'a str, &'a Role>,
    pub gates: BTreeMap<&'a str, &'a Gate>,
    pub rules: BTreeMap<&'a str, &'a RulesBlock>,
    pub models: BTreeMap<&'a str, &'a ModelEntry>,
    pub steps: BTreeMap<&'a str, &'a Step>,
    pub invariants: BTreeMap<&'a str, &'a Invariant>,
    /// The first `repair`, `budget` and `flow` blocks (a second one is E003).
    pub repair: Option<&'a Repair>,
    pub budget: Option<&'a Budget>,
    pub flow: Option<&'a Flow>,
    /// The first `session` block (a second one is E003); its fields are also a contract.
    pub session: Option<&'a Session>,
    /// Every `remember`, in source order.
    pub remembers: Vec<&'a Remember>,
}

impl<'a> Symbols<'a> {
    /// Collects every definition, reporting duplicates.
    pub fn collect(spec: &'a SpecFile, diagnostics: &mut Vec<Diagnostic>) -> Symbols<'a> {
        let mut symbols = Symbols::default();
        for item in &spec.items {
            match item {
                Item::Import(import) => {
                    if let Some(role) = &import.role {
                        insert(&mut symbols.roles, &role.name, role, "role", diagnostics);
                    }
                }
                Item::Models(block) => {
                    for entry in &block.entries {
                        insert(
                            &mut symbols.models,
                            &entry.alias,
                            entry,
                            "model",
                            diagnostics,
                        );
                    }
                }
                Item::Rules(block) => insert(
                    &mut symbols.rules,
                    &block.name,
                    block,
                    "rules block",
                    diagnostics,
                ),
                Item::Contract(contract) => {
                    if BUILTIN_CONTRACTS.contains(&contract.name.name.as_str()) {
                        diagnostics.push(
                            Diagnostic::new(
                                Code::E003,
                                contract.name.span,
                                format!(
                                    "contract `{}` is built in and cannot be redefined",
                                    contract.name.name
                                ),
                            )
                            .with_label("redefined here")
                            .with_help("choose another name for this contract"),
                        );
                        continue;
                    }
                    insert(
                        &mut symbols.contracts,
                        &contract.name,
                        contract,
                        "contract",
                        diagnostics,
                    )
                }
                Item::Tool(tool) => {
                    insert(&mut symbols.tools, &tool.name, tool, "tool", diagnostics)
                }
                Item::Mcp(server) => insert(
                    &mut symbols.mcp,
                    &server.name,
                    server,
                    "mcp server",
                    diagnostics,
                ),
                Item::Role(role) => {
                    insert(&mut symbols.roles, &role.name, role, "role", diagnostics)
                }
                Item::Gate(gate) => {
                    insert(&mut symbols.gates, &gate.name, gate, "gate", diagnostics)
                }
                Item::Invariant(invariant) => insert(
                    &mut symbols.invariants,
                    &invariant.name,
                    invariant,
                    "invariant",
                    diagnostics,
                ),
                Item::Repair(repair) => {
                    single(
                        &mut symbols.repair,
                        repair,
                        repair.span,
                        "repair",
                        diagnostics,
                    );
                }
                Item::Budget(budget) => {
                    single(
                        &mut symbols.budget,
                        budget,
                        budget.span,
                        "budget",
                        diagnostics,
                    );
                }
                Item::Session(session) => {
                    if single(
                        &mut symbols.session,
                        session,
                        session.span,
                        "session",
                        diagnostics,
                    ) {
                        insert(
                            &mut symbols.contracts,
                            &session.contract.name,
                            &session.contract,
                            "contract",
                            diagnostics,
                        );
                    }
                }
                Item::Remember(remember) => symbols.remembers.push(remember),
                Item::Flow(flow) => {
                    if single(&mut symbols.flow, flow, flow.span, "flow", diagnostics) {
                        for step in &flow.steps {
                            insert(&mut symbols.steps, &step.name, step, "step", diagnostics);
                        }
                    }
                }
            }
        }
        symbols
    }

    pub fn is_contract(&self, name: &str) -> bool {
        self.contracts.contains_key(name) || BUILTIN_CONTRACTS.contains(&name)
    }

    /// Whether `name` names a tool a role may hold: a `tool`, or `SERVER.TOOL` of an `mcp`
    /// server whose allow-list lets the spec use TOOL.
    pub fn knows_tool(&self, name: &str) -> bool {
        self.tools.contains_key(name) || mcp::resolve(self, name).is_some()
    }

    /// Every contract name in scope, built-ins included (for "did you mean").
    pub fn contract_names(&self) -> impl Iterator<Item = &str> {
        self.contracts.keys().copied().chain(BUILTIN_CONTRACTS)
    }
}

fn insert<'a, T>(
    table: &mut BTreeMap<&'a str, &'a T>,
    name: &'a Ident,
    value: &'a T,
    kind: &str,
    diagnostics: &mut Vec<Diagnostic>,
) where
    T: HasNameSpan,
{
    if let Some(first) = table.get(name.name.as_str()) {
        diagnostics.push(
            Diagnostic::new(
                Code::E003,
                name.span,
                format!("{kind} `{}` is defined more than once", name.name),
            )
            .with_label(format!("second definition of `{}`", name.name))
            .with_note(first.name_span(), "first defined here")
            .with_help(format!(
                "rename or remove one of the two definitions of `{}`",
                name.name
            )),
        );
    } else {
        table.insert(name.name.as_str(), value);
    }
}

fn single<'a, T>(
    slot: &mut Option<&'a T>,
    value: &'a T,
    span: crate::Span,
    kind: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> bool {
    if slot.is_some() {
        diagnostics.push(
            Diagnostic::new(
                Code::E003,
                span,
                format!("a spec has one `{kind}` block; this is a second"),
            )
            .with_label(format!("second `{kind}` block"))
            .with_help(format!("merge the two `{kind}` blocks into one")),
        );
        false
    } else {
        *slot = Some(value);
        true
    }
}

/// Items that have a defining name.
pub trait HasNameSpan {
    fn name_span(&self) -> crate::Span;
}

macro_rules! name_span {
    ($($ty:ty => $field:ident),* $(,)?) => {
        $(impl HasNameSpan for $ty {
            fn name_span(&self) -> crate::Span {
                self.$field.span
            }
        })*
    };
}

name_span!(
    Contract => name,
    Tool => name,
    McpServer => name,
    Role => name,
    Gate => name,
    RulesBlock => name,
    ModelEntry => alias,
    Step => name,
    Invariant => name,
);

/// What the checker worked out, for the graph builder. Owned data only, so it can outlive
/// the borrow of the AST that produced it.
#[derive(Debug, Default)]
pub struct Checked {
    /// Filled by `types`: resolved facts about expressions and calls.
    pub types: types::TypeFacts,
    /// Filled by `templates`: the variables each role's template uses.
    pub templates: templates::TemplateFacts,
    /// Filled by `flow`: facts about the flow graph (entry step, judges, ...).
    pub flow: flow::FlowFacts,
}

/// Runs every check over `spec`, its MCP tools checked against no lock.
pub fn check(spec: &SpecFile, sources: &Sources) -> (Checked, Vec<Diagnostic>) {
    check_with_lock(spec, sources, &lock::ProjectLock::NotChecked)
}

/// Runs every check over `spec`, its MCP tools checked against `project_lock`.
pub fn check_with_lock(
    spec: &SpecFile,
    sources: &Sources,
    project_lock: &lock::ProjectLock,
) -> (Checked, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let symbols = Symbols::collect(spec, &mut diagnostics);
    // Every contract's resolved fields, built once for the type and template checks.
    let contracts = types::Contracts::build(&symbols);
    let mut checked = Checked {
        types: types::check(spec, &symbols, &contracts, &mut diagnostics),
        templates: templates::check(spec, &symbols, &contracts, sources, &mut diagnostics),
        ..Checked::default()
    };
    let names_clean = !diagnostics.iter().any(Diagnostic::is_error);
    checked.flow = flow::check(spec, &symbols, names_clean, &mut diagnostics);
    if !diagnostics.iter().any(Diagnostic::is_error) {
        flow::feedback::check(&symbols, &checked.templates, &mut diagnostics);
    }
    required::check(&symbols, &mut diagnostics);
    sandbox::check(spec, &mut diagnostics);
    mcp::check(&symbols, &mut diagnostics);
    lock::check(&symbols, project_lock, &mut diagnostics);
    (checked, diagnostics)
}
