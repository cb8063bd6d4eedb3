//! Worst-case bounds of a compiled spec: model calls, tokens and wall time per step and in total.
//!
//! The rules (DESIGN §3–4):
//! - a role call makes at most `retry + 1` calls; its wall time is `(retry + 1) * timeout`
//!   plus the backoffs between attempts (`backoff, 2 * backoff, ...`: `backoff * (2^retry - 1)`),
//!   and is unbounded when the role has no `timeout`;
//! - an `each` over a list of at most `M` items makes
//!   `M * (check retries + 1) * (role calls + by calls)` calls (the `by` role's only with
//!   a `by`); its wall time is `waves * (check retries + 1) * (role wall + by wall)` where
//!   `waves = ceil(M / concurrency)`, or `M` when items may depend on each other
//!   (`depends_on`), since a chain runs one item at a time;
//! - `repair.rounds R` allows `R + 1` rounds; the steps a repair reruns (every step on a
//!   path from a `rerun` target, the entry for `replan`, or the gate's subject for an
//!   `ask` arm (approved, it reruns the judged step), to the gate step, both included) run
//!   once per round, every other step once;
//! - a flow with a `when` loop runs at most `budget.steps` steps; a loop closed only
//!   through `ask "…" max N` steps runs each step at most `ΣN + rounds` times (cutting
//!   those steps' transitions leaves no cycle, so every answer or round begins a walk that
//!   visits a step at most once), and the totals are then every step's worst case summed;
//! - the totals are the most expensive path from the entry to a terminal, each measure
//!   (calls, steps, wall time) maximised on its own; a gate or `ask` step makes no call;
//!   an `ask` waits for a person, so its wall time is unbounded;
//! - tokens and cost are unknown: no `models` entry gives a per-call token cap, so only
//!   calls are bounded and `budget.tokens` / `budget.cost` are what cap them.
//!
//! `charter explore` holds every fault variant of the seeds' base goldens to these totals
//! (property P2); `cargo xtask verify`'s `explore` stage runs it on every seed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::{self, Display, Formatter};

use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use serde::Serialize;

use crate::diagnostics::{Code, Diagnostic, Span};
use crate::graph::render::step_body;
use crate::graph::{
    ActionIr, CompiledSpec, ExprIr, NameIr, RoleIr, StepKind, ToolIr, TransitionIr, TypeIr,
};

/// The worst case of a run, per step and in total. `None` in a count or time means
/// unbounded; `None` in tokens means unknown.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bounds {
    pub spec: String,
    /// Rounds a run can take (`repair.rounds + 1`, or 1 without repair).
    pub rounds: u64,
    /// Every step, in flow order.
    pub steps: Vec<StepBounds>,
    /// The whole run's worst case.
    pub total: TotalBounds,
    /// What is unbounded or unknown, and why.
    pub notes: Vec<String>,
}

/// One step's worst case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepBounds {
    pub name: String,
    /// The step's body in Charter syntax.
    pub body: String,
    /// How often the step can run (once per round when a repair reruns it).
    pub runs: Option<u64>,
    /// Model calls of one run of the step.
    pub calls_per_run: Option<u64>,
    /// Wall time of one run of the step, in milliseconds.
    pub wall_ms_per_run: Option<u64>,
    /// `runs * calls_per_run`.
    pub calls: Option<u64>,
    /// `runs * wall_ms_per_run`.
    pub wall_ms: Option<u64>,
    /// Tokens, where a per-call cap is known (never, yet).
    pub tokens: Option<u64>,
    /// For `each` steps: the most items the list can hold.
    pub max_items: Option<u64>,
}

/// The whole run's worst case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TotalBounds {
    pub calls: Option<u64>,
    pub steps: Option<u64>,
    pub wall_ms: Option<u64>,
    pub tokens: Option<u64>,
    pub cost: Option<f64>,
    /// The flow loops: the totals are `budget.steps` times the costliest step, not a path.
    pub looping: bool,
    /// The flow loops only through `ask "…" max N` steps: the totals are the sum of every
    /// step's own worst case, not a path.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub summed: bool,
}

/// Computes the worst case of `spec`.
pub fn compute(spec: &CompiledSpec) -> Bounds {
    Analysis::new(spec).bounds()
}

/// Warnings about a spec whose worst case cannot fit its own budget (W007) or whose
/// fan-out has no upper bound (W008).
pub fn diagnostics(spec: &CompiledSpec) -> Vec<Diagnostic> {
    let analysis = Analysis::new(spec);
    let bounds = analysis.bounds();
    let mut diagnostics: Vec<Diagnostic> = overruns(spec, &bounds.total)
        .into_iter()
        .filter_map(|overrun| over_budget(spec, &bounds.total, overrun))
        .collect();
    diagnostics.extend(
        analysis
            .lists
            .iter()
            .filter_map(|(name, list)| unbounded_fan_out(spec, name, list)),
    );
    diagnostics
}

/// One budget field the worst case exceeds, in the words of its warning.
struct Overrun {
    /// The field of `budget`.
    which: &'static str,
    /// The worst case of that measure.
    worst: String,
    /// The budget's limit.
    limit: String,
    /// Where the field is written, if it is.
    span: Option<Span>,
    /// What the field would need to be.
    raise: String,
}

/// Every budget field the worst case exceeds, in the order the budget lists them.
fn overruns(spec: &CompiledSpec, total: &TotalBounds) -> Vec<Overrun> {
    let mut overruns = Vec::new();
    if let (Some(worst), Some(limit)) = (total.steps, spec.budget.steps)
        && worst > limit
    {
        overruns.push(Overrun {
            which: "steps",
            worst: plural(worst, "step"),
            limit: limit.to_string(),
            span: spec.spans.budget_steps,
            raise: worst.to_string(),
        });
    }
    if let (Some(worst), Some(limit)) = (total.wall_ms, spec.budget.wall_ms)
        && worst > limit
    {
        overruns.push(Overrun {
            which: "wall",
            worst: format_ms(worst),
            limit: format_ms(limit),
            span: spec.spans.budget_wall,
            raise: format_ms(worst),
        });
    }
    if let (Some(worst), Some(limit)) = (total.tokens, spec.budget.tokens)
        && worst > limit
    {
        overruns.push(Overrun {
            which: "tokens",
            worst: plural(worst, "token"),
            limit: limit.to_string(),
            span: spec.spans.budget_tokens,
            raise: worst.to_string(),
        });
    }
    if let (Some(worst), Some(limit)) = (total.cost, spec.budget.cost)
        && worst > limit
    {
        overruns.push(Overrun {
            which: "cost",
            worst: format!("${worst:.2}"),
            limit: format!("${limit:.2}"),
            span: spec.spans.budget_cost,
            raise: format!("{worst:.2}"),
        });
    }
    overruns
}

/// The W007 for one overrun, at the field, else the budget, else the header; `None` when
/// the spec has none of them to point at.
fn over_budget(spec: &CompiledSpec, total: &TotalBounds, overrun: Overrun) -> Option<Diagnostic> {
    let budget_span = spec.spans.budget.or(spec.spans.header);
    let span = overrun.span.or(budget_span)?;
    let calls = total
        .calls
        .map_or("unbounded calls".to_string(), |calls| plural(calls, "call"));
    let Overrun {
        which,
        worst,
        limit,
        raise,
        ..
    } = overrun;
    Some(
        Diagnostic::new(
            Code::W007,
            span,
            format!(
                "the worst case ({calls}, {worst}) exceeds `budget.{which}`; the budget will cut the run"
            ),
        )
        .with_label(format!("`budget.{which}` is {limit}"))
        .with_help(format!(
            "raise `budget.{which}` to at least {raise}, or lower the worst case (`repair.rounds`, `retry`, `retries`, list bounds, `timeout`s)"
        )),
    )
}

/// The W008 for an `each` step whose list has no maximum length; `None` when it has one
/// or the spec has no span to point at.
fn unbounded_fan_out(spec: &CompiledSpec, name: &str, list: &ListFacts) -> Option<Diagnostic> {
    if list.max.is_some() {
        return None;
    }
    let span = spec.spans.steps.get(name).copied().or(spec.spans.header)?;
    let over = spec
        .flow
        .steps
        .get(name)
        .and_then(|node| spec.flow.graph.node_weight(*node))
        .and_then(|step| match &step.kind {
            StepKind::Each { over, .. } => Some(over.to_string()),
            _ => None,
        })
        .unwrap_or_default();
    let mut diagnostic = Diagnostic::new(
        Code::W008,
        span,
        format!("`each` over `{over}` has no upper bound on its items"),
    )
    .with_label("this fan-out is unbounded");
    if let Some(over_span) = spec.spans.each_over.get(name) {
        diagnostic = diagnostic.with_note(*over_span, "this list has no maximum length");
    }
    let example = match &list.ty {
        Some(TypeIr::List {
            item, min_items, ..
        }) => TypeIr::List {
            item: item.clone(),
            min_items: *min_items,
            max_items: Some(20),
        }
        .to_string(),
        _ => "list<Task>(1..=20)".to_string(),
    };
    Some(diagnostic.with_help(match &list.origin {
        Some((contract, field)) => format!(
            "give `{contract}.{field}` a maximum length, e.g. `{example}`, so the worst case is bounded"
        ),
        None => "iterate over a list whose type has a maximum length, e.g. `list<Task>(1..=20)`"
            .to_string(),
    }))
}

/// What an `each` step's list can hold.
#[derive(Clone, Debug, Default)]
struct ListFacts {
    /// Most items; `None`: no upper bound is known.
    max: Option<u64>,
    /// The contract field whose type the list is, if it is one.
    origin: Option<(String, String)>,
    /// The list's type, when known.
    ty: Option<TypeIr>,
    /// Items may depend on each other (`depends_on`), so they may run one at a time.
    dependent: bool,
}

/// The flow's transitions without its (informational) repair edges, and where they loop.
struct Shape {
    /// Every node's successors, by node index.
    successors: Vec<Vec<usize>>,
    /// A topological order of the nodes; `None`: the flow loops.
    order: Option<Vec<usize>>,
    /// The nodes on or after a loop.
    looping: BTreeSet<usize>,
}

impl Shape {
    fn of(spec: &CompiledSpec) -> Shape {
        let graph = &spec.flow.graph;
        let mut successors: Vec<Vec<usize>> = vec![Vec::new(); graph.node_count()];
        for edge in graph.edge_references() {
            if !matches!(edge.weight(), TransitionIr::Repair { .. })
                && let Some(list) = successors.get_mut(edge.source().index())
            {
                list.push(edge.target().index());
            }
        }
        let order = topological_order(&successors);
        let looping = match &order {
            Some(_) => BTreeSet::new(),
            None => unordered(&successors),
        };
        Shape {
            successors,
            order,
            looping,
        }
    }
}

/// What repair adds to a run.
struct Repairs {
    /// Rounds a run can take (`repair.rounds + 1`, or 1 without a repairing gate).
    rounds: u64,
    /// The steps a repair reruns, by node index.
    rerun: BTreeSet<usize>,
    /// A repairing gate may `ask` a person, so the wall time is unbounded.
    asks: bool,
}

struct Analysis<'s> {
    spec: &'s CompiledSpec,
    /// Facts about the list of every `each` step, by step name.
    lists: BTreeMap<String, ListFacts>,
}

impl<'s> Analysis<'s> {
    fn new(spec: &'s CompiledSpec) -> Analysis<'s> {
        let mut analysis = Analysis {
            spec,
            lists: BTreeMap::new(),
        };
        for step in spec.flow.graph.node_weights() {
            if let StepKind::Each { over, .. } = &step.kind {
                let facts = analysis.list_facts(over, 0);
                analysis.lists.insert(step.name.clone(), facts);
            }
        }
        analysis
    }

    /// The worst case, worked out in stages: the flow's shape, what repair reruns, what
    /// bounds a loop, each step's cost, and the totals. The notes keep the order in which
    /// the stages find them.
    fn bounds(&self) -> Bounds {
        let spec = self.spec;
        let shape = Shape::of(spec);
        let repairs = self.repairs(&shape.successors);
        let mut notes = repair_notes(&repairs);
        let ask_bounded = self.ask_bound(&shape, repairs.rounds);
        notes.extend(loop_note(&shape, ask_bounded, spec.budget.steps));
        let per_node = self.per_step(&shape, &repairs, ask_bounded, &mut notes);
        let total = self.totals(&shape, &per_node, ask_bounded);
        // An `ask` in a repair waits for a person, whatever path the run takes.
        let total = TotalBounds {
            wall_ms: if repairs.asks { None } else { total.wall_ms },
            ..total
        };
        notes.push(token_note(spec));
        let mut seen = BTreeSet::new();
        notes.retain(|note| seen.insert(note.clone()));
        Bounds {
            spec: spec.name.clone(),
            rounds: repairs.rounds,
            steps: per_node.into_iter().flatten().collect(),
            total,
            notes,
        }
    }

    /// The rounds a run can take and the steps a repair reruns: every step on a path from a
    /// `rerun` or `replan` target, or from the gate's subject for an `ask` arm, to the gate.
    fn repairs(&self, successors: &[Vec<usize>]) -> Repairs {
        let spec = self.spec;
        let graph = &spec.flow.graph;
        let repairing_gates: Vec<NodeIndex> = graph
            .node_indices()
            .filter(|node| {
                matches!(
                    graph.node_weight(*node).map(|step| &step.kind),
                    Some(StepKind::Gate { repair: true, .. })
                )
            })
            .collect();
        let rounds = match (&spec.repair, repairing_gates.is_empty()) {
            (Some(repair), false) => repair.rounds.saturating_add(1),
            _ => 1,
        };
        let asks = spec.repair.as_ref().is_some_and(|repair| {
            repair
                .arms
                .iter()
                .any(|arm| matches!(arm.action, ActionIr::Ask { .. }))
        });
        let mut rerun: BTreeSet<usize> = BTreeSet::new();
        for gate in &repairing_gates {
            let upstream = reaching(successors, gate.index());
            for edge in graph.edges(*gate) {
                if let TransitionIr::Repair {
                    action: ActionIr::Rerun { .. } | ActionIr::Replan,
                    ..
                } = edge.weight()
                {
                    let downstream = reachable(successors, edge.target().index());
                    rerun.extend(downstream.intersection(&upstream).copied());
                }
            }
            // An `ask` arm has no edge: approved, it reruns the gate's subject (the judged
            // step) and everything from it to the gate.
            let subject = match graph.node_weight(*gate).map(|step| &step.kind) {
                Some(StepKind::Gate { gate: name, .. }) => spec
                    .gates
                    .get(name)
                    .and_then(|gate| spec.flow.steps.get(&gate.subject)),
                _ => None,
            };
            if asks && let Some(subject) = subject {
                let downstream = reachable(successors, subject.index());
                rerun.extend(downstream.intersection(&upstream).copied());
            }
        }
        Repairs {
            rounds,
            rerun,
            asks: asks && !repairing_gates.is_empty(),
        }
    }

    /// How often each step of a loop closed only through `ask "…" max N` steps can run, or
    /// `None` when the flow does not loop or loops some other way. Cutting those steps'
    /// transitions leaves no cycle, so a run is stretches of acyclic walks, each begun by
    /// the start, a repair round or one of at most ΣN answers, and visits a step once per
    /// stretch.
    fn ask_bound(&self, shape: &Shape, rounds: u64) -> Option<u64> {
        if shape.looping.is_empty() {
            return None;
        }
        let graph = &self.spec.flow.graph;
        let mut cut = shape.successors.clone();
        let mut answers = 0u64;
        for node in graph.node_indices() {
            if let Some(StepKind::Ask { max: Some(max), .. }) =
                graph.node_weight(node).map(|step| &step.kind)
                && let Some(list) = cut.get_mut(node.index())
            {
                list.clear();
                answers = answers.saturating_add(*max);
            }
        }
        topological_order(&cut)
            .is_some()
            .then(|| answers.saturating_add(rounds))
    }

    /// Every step's worst case, by node index (`None` for terminals), noting what leaves a
    /// step unbounded as it goes.
    fn per_step(
        &self,
        shape: &Shape,
        repairs: &Repairs,
        ask_bounded: Option<u64>,
        notes: &mut Vec<String>,
    ) -> Vec<Option<StepBounds>> {
        let spec = self.spec;
        let graph = &spec.flow.graph;
        let mut per_node: Vec<Option<StepBounds>> = vec![None; graph.node_count()];
        for node in graph.node_indices() {
            let Some(step) = graph.node_weight(node) else {
                continue;
            };
            if step.kind.is_terminal() {
                continue;
            }
            let (calls_per_run, wall_ms_per_run, max_items) =
                self.step_cost(&step.name, &step.kind, notes);
            let runs = if shape.looping.contains(&node.index()) {
                match (ask_bounded, spec.budget.steps) {
                    (Some(runs), Some(steps)) => Some(runs.min(steps)),
                    (Some(runs), None) => Some(runs),
                    (None, steps) => steps,
                }
            } else if repairs.rerun.contains(&node.index()) {
                Some(repairs.rounds)
            } else {
                Some(1)
            };
            if let Some(slot) = per_node.get_mut(node.index()) {
                *slot = Some(StepBounds {
                    name: step.name.clone(),
                    body: step_body(step),
                    runs,
                    calls_per_run,
                    wall_ms_per_run,
                    calls: mul(runs, calls_per_run),
                    wall_ms: mul(runs, wall_ms_per_run),
                    tokens: None,
                    max_items,
                });
            }
        }
        per_node
    }

    /// The whole run's worst case: the most expensive path when the flow does not loop,
    /// every step's own worst case summed when only `ask` limits close its loops, and
    /// otherwise `budget.steps` times the most expensive step.
    fn totals(
        &self,
        shape: &Shape,
        per_node: &[Option<StepBounds>],
        ask_bounded: Option<u64>,
    ) -> TotalBounds {
        match &shape.order {
            Some(order) => {
                let entry = self.spec.flow.entry.index();
                path_totals(order, &shape.successors, entry, per_node)
            }
            None if ask_bounded.is_some() => summed_totals(per_node),
            None => looping_totals(per_node, self.spec.budget.steps),
        }
    }

    /// Calls and wall time of one run of a step, and an `each` step's item bound.
    fn step_cost(
        &self,
        name: &str,
        kind: &StepKind,
        notes: &mut Vec<String>,
    ) -> (Option<u64>, Option<u64>, Option<u64>) {
        match kind {
            StepKind::Call { role, .. } | StepKind::Finalize { role, .. } => {
                let role_ir = self.role(role);
                self.note_timeout(role, role_ir, notes);
                (Some(role_calls(role_ir)), role_wall(role_ir), None)
            }
            StepKind::Each {
                role,
                concurrency,
                check,
                ..
            } => {
                let facts = self.lists.get(name).cloned().unwrap_or_default();
                let role_ir = self.role(role);
                self.note_timeout(role, role_ir, notes);
                let attempts = check
                    .as_ref()
                    .map_or(1, |check| check.retries.saturating_add(1));
                let mut item_calls = role_calls(role_ir);
                let mut item_wall = role_wall(role_ir);
                if let Some(by) = check.as_ref().and_then(|check| check.by.as_ref()) {
                    let by_ir = self.role(by);
                    self.note_timeout(by, by_ir, notes);
                    item_calls = item_calls.saturating_add(role_calls(by_ir));
                    item_wall = add(item_wall, role_wall(by_ir));
                }
                let item_calls = item_calls.saturating_mul(attempts);
                let item_wall = item_wall.map(|wall| wall.saturating_mul(attempts));
                let Some(max) = facts.max else {
                    notes.push(format!(
                        "`{name}` iterates over a list with no upper bound: its calls and wall time are unbounded"
                    ));
                    return (None, None, None);
                };
                let waves = if facts.dependent {
                    notes.push(format!(
                        "`{name}`: items may depend on each other (`depends_on`), so the worst case runs them one at a time ({max} waves)"
                    ));
                    max
                } else {
                    max.div_ceil((*concurrency).max(1))
                };
                (
                    Some(max.saturating_mul(item_calls)),
                    item_wall.map(|wall| wall.saturating_mul(waves)),
                    Some(max),
                )
            }
            StepKind::Gate { .. } | StepKind::Branch => (Some(0), Some(0), None),
            // No model call; the tool's timeout bounds each of its attempts.
            StepKind::Tool { tool, .. } => {
                let tool_ir = self.spec.tools.get(tool);
                if tool_ir.is_some_and(|tool| tool.timeout_ms.is_none()) {
                    notes.push(format!(
                        "tool `{tool}` (step `{name}`) has no `timeout`: its wall time is unbounded"
                    ));
                }
                (Some(0), tool_ir.and_then(tool_wall), None)
            }
            StepKind::Ask { .. } => {
                notes.push(format!(
                    "`{name}` waits for a person: the wall time is unbounded"
                ));
                (Some(0), None, None)
            }
            StepKind::Done | StepKind::Blocked { .. } | StepKind::Failed { .. } => {
                (Some(0), Some(0), None)
            }
        }
    }

    fn role(&self, name: &str) -> Option<&'s RoleIr> {
        self.spec.roles.get(name)
    }

    fn note_timeout(&self, name: &str, role: Option<&RoleIr>, notes: &mut Vec<String>) {
        if role.is_some_and(|role| role.timeout_ms.is_none()) {
            let note = format!("role `{name}` has no `timeout`: its wall time is unbounded");
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }

    /// The item bound of the list `over`.
    fn list_facts(&self, over: &ExprIr, depth: usize) -> ListFacts {
        if let ExprIr::List { items } = over {
            let dependent = items.iter().any(|item| match item {
                ExprIr::Record { fields } => {
                    fields.get("depends_on").is_some_and(|deps| match deps {
                        ExprIr::List { items } => !items.is_empty(),
                        ExprIr::Literal { value } => {
                            value.as_array().is_none_or(|deps| !deps.is_empty())
                        }
                        _ => true,
                    })
                }
                _ => false,
            });
            return ListFacts {
                max: u64::try_from(items.len()).ok(),
                origin: None,
                dependent,
                ty: None,
            };
        }
        let Some((ty, origin)) = self.type_of(over, depth) else {
            return ListFacts::default();
        };
        match &ty {
            TypeIr::List {
                item, max_items, ..
            } => {
                let dependent = match item.as_ref() {
                    TypeIr::Contract { name } => {
                        self.spec.contracts.get(name).is_some_and(|contract| {
                            contract
                                .fields
                                .iter()
                                .any(|field| field.name == "depends_on")
                        })
                    }
                    _ => false,
                };
                ListFacts {
                    max: *max_items,
                    origin,
                    dependent,
                    ty: Some(ty.clone()),
                }
            }
            _ => ListFacts {
                origin,
                ..ListFacts::default()
            },
        }
    }

    /// The type of a path expression, and the contract field it was last read from.
    fn type_of(&self, expr: &ExprIr, depth: usize) -> Option<(TypeIr, Option<(String, String)>)> {
        let ExprIr::Path { root, fields } = expr else {
            return None;
        };
        let contract = |name: &str| TypeIr::Contract {
            name: name.to_string(),
        };
        let mut ty = match root {
            NameIr::Request => contract(self.spec.request.as_deref().unwrap_or("Request")),
            NameIr::Candidate | NameIr::Best => contract("Candidate"),
            NameIr::Step(name) => self.step_output(name, depth)?,
            _ => return None,
        };
        let mut origin = None;
        for field in fields {
            let TypeIr::Contract { name } = unwrap_optional(&ty) else {
                return None;
            };
            let field_ir = self
                .spec
                .contracts
                .get(name)?
                .fields
                .iter()
                .find(|candidate| candidate.name == *field)?;
            origin = Some((name.clone(), field.clone()));
            ty = field_ir.ty.clone();
        }
        Some((unwrap_optional(&ty).clone(), origin))
    }

    /// The output type of a step (a list for `each` steps).
    fn step_output(&self, name: &str, depth: usize) -> Option<TypeIr> {
        let node = self.spec.flow.steps.get(name)?;
        let step = self.spec.flow.graph.node_weight(*node)?;
        let output = |role: &str| {
            self.spec.roles.get(role).map(|role| TypeIr::Contract {
                name: role.output.clone(),
            })
        };
        match &step.kind {
            StepKind::Call { role, .. } | StepKind::Finalize { role, .. } => output(role),
            StepKind::Ask { .. } => Some(TypeIr::Contract {
                name: "Answer".to_string(),
            }),
            StepKind::Each { role, over, .. } => {
                // A depth limit keeps a (rejected elsewhere) self-referential list finite.
                let max_items = if depth < 16 {
                    self.list_facts(over, depth + 1).max
                } else {
                    None
                };
                Some(TypeIr::List {
                    item: Box::new(output(role)?),
                    min_items: None,
                    max_items,
                })
            }
            _ => None,
        }
    }
}

/// The notes on repair: the rounds it allows, and a person it may wait for.
fn repair_notes(repairs: &Repairs) -> Vec<String> {
    let mut notes = Vec::new();
    if repairs.rounds > 1 {
        notes.push(format!(
            "`repair.rounds {}` allows {} rounds; the steps a repair reruns run once per round",
            repairs.rounds - 1,
            repairs.rounds
        ));
    }
    if repairs.asks {
        notes.push("a repair may `ask` a person: the wall time is unbounded".to_string());
    }
    notes
}

/// The note on what bounds a looping flow: its `ask` limits, `budget.steps`, or nothing.
fn loop_note(shape: &Shape, ask_bounded: Option<u64>, budget_steps: Option<u64>) -> Option<String> {
    if let Some(runs) = ask_bounded {
        Some(format!(
            "the flow loops only through `ask \"…\" max N` steps: each step runs at most {runs} times"
        ))
    } else if !shape.looping.is_empty() {
        Some(match budget_steps {
            Some(steps) => format!(
                "the flow loops through `when` transitions: at most `budget.steps` = {steps} steps run"
            ),
            None => "the flow loops through `when` transitions and has no `budget.steps`: the run is unbounded".to_string(),
        })
    } else {
        None
    }
}

/// The note that tokens and cost are unknown, with the budget that caps them.
fn token_note(spec: &CompiledSpec) -> String {
    let mut note =
        "tokens and cost are unknown: no per-call token cap is known, so only calls are bounded"
            .to_string();
    if let Some(tokens) = spec.budget.tokens {
        note.push_str(&format!("; `budget.tokens` caps the run at {tokens}"));
    }
    if let Some(cost) = spec.budget.cost {
        note.push_str(&format!("; `budget.cost` caps it at ${cost:.2}"));
    }
    note
}

/// Totals of a flow without loops: each measure's most expensive path from the entry.
fn path_totals(
    order: &[usize],
    successors: &[Vec<usize>],
    entry: usize,
    per_node: &[Option<StepBounds>],
) -> TotalBounds {
    let measure = |pick: &dyn Fn(&StepBounds) -> Option<u64>| -> Option<u64> {
        longest_path(order, successors, entry, |node| {
            per_node
                .get(node)
                .and_then(Option::as_ref)
                .map_or(Some(0), pick)
        })
    };
    TotalBounds {
        calls: measure(&|step| step.calls),
        steps: measure(&|step| step.runs),
        wall_ms: measure(&|step| step.wall_ms),
        tokens: None,
        cost: None,
        looping: false,
        summed: false,
    }
}

/// Totals of a flow looping only through `ask` limits: every step runs at most its own
/// number of runs, so the sum bounds any run.
fn summed_totals(per_node: &[Option<StepBounds>]) -> TotalBounds {
    let sum = |pick: &dyn Fn(&StepBounds) -> Option<u64>| -> Option<u64> {
        per_node
            .iter()
            .flatten()
            .map(pick)
            .try_fold(0u64, |sum, value| {
                value.map(|value| sum.saturating_add(value))
            })
    };
    TotalBounds {
        calls: sum(&|step| step.calls),
        steps: sum(&|step| step.runs),
        wall_ms: sum(&|step| step.wall_ms),
        tokens: None,
        cost: None,
        looping: false,
        summed: true,
    }
}

/// Totals of a flow looping through `when` transitions: `budget.steps` runs of the most
/// expensive step.
fn looping_totals(per_node: &[Option<StepBounds>], steps: Option<u64>) -> TotalBounds {
    let most = |pick: &dyn Fn(&StepBounds) -> Option<u64>| -> Option<u64> {
        per_node
            .iter()
            .flatten()
            .map(pick)
            .try_fold(0u64, |most, value| value.map(|value| most.max(value)))
    };
    TotalBounds {
        calls: mul(steps, most(&|step| step.calls_per_run)),
        steps,
        wall_ms: mul(steps, most(&|step| step.wall_ms_per_run)),
        tokens: None,
        cost: None,
        looping: true,
        summed: false,
    }
}

fn unwrap_optional(ty: &TypeIr) -> &TypeIr {
    match ty {
        TypeIr::Optional { inner } => unwrap_optional(inner),
        other => other,
    }
}

/// Calls of one role invocation: the first attempt and its retries.
fn role_calls(role: Option<&RoleIr>) -> u64 {
    role.map_or(1, |role| role.retry.saturating_add(1))
}

/// Wall time of one role invocation: every attempt timing out, with doubling backoffs
/// between them; `None` without a timeout.
fn role_wall(role: Option<&RoleIr>) -> Option<u64> {
    let role = role?;
    let timeout = role.timeout_ms?;
    let attempts = role.retry.saturating_add(1);
    let backoff_factor = u32::try_from(role.retry)
        .ok()
        .and_then(|retry| 2u64.checked_pow(retry))
        .map_or(u64::MAX, |power| power - 1);
    Some(
        timeout
            .saturating_mul(attempts)
            .saturating_add(role.backoff_ms.saturating_mul(backoff_factor)),
    )
}

/// The longest a tool step's call can take: every attempt cut at the tool's `timeout`,
/// with the doubling backoff between them.
fn tool_wall(tool: &ToolIr) -> Option<u64> {
    let timeout = tool.timeout_ms?;
    let attempts = tool.retry.saturating_add(1);
    let backoff_factor = u32::try_from(tool.retry)
        .ok()
        .and_then(|retry| 2u64.checked_pow(retry))
        .map_or(u64::MAX, |power| power - 1);
    Some(
        timeout
            .saturating_mul(attempts)
            .saturating_add(tool.backoff_ms.saturating_mul(backoff_factor)),
    )
}

fn mul(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(0), _) | (_, Some(0)) => Some(0),
        (Some(a), Some(b)) => Some(a.saturating_mul(b)),
        _ => None,
    }
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.saturating_add(b?))
}

/// A topological order of the nodes, or `None` when there is a cycle.
fn topological_order(successors: &[Vec<usize>]) -> Option<Vec<usize>> {
    let mut indegree = vec![0usize; successors.len()];
    for targets in successors {
        for target in targets {
            if let Some(degree) = indegree.get_mut(*target) {
                *degree += 1;
            }
        }
    }
    let mut queue: VecDeque<usize> = (0..successors.len())
        .filter(|node| indegree.get(*node) == Some(&0))
        .collect();
    let mut order = Vec::with_capacity(successors.len());
    while let Some(node) = queue.pop_front() {
        order.push(node);
        for target in successors.get(node).into_iter().flatten() {
            if let Some(degree) = indegree.get_mut(*target) {
                *degree -= 1;
                if *degree == 0 {
                    queue.push_back(*target);
                }
            }
        }
    }
    (order.len() == successors.len()).then_some(order)
}

/// The nodes a topological sort cannot place: those on or after a cycle.
fn unordered(successors: &[Vec<usize>]) -> BTreeSet<usize> {
    let mut indegree = vec![0usize; successors.len()];
    for targets in successors {
        for target in targets {
            if let Some(degree) = indegree.get_mut(*target) {
                *degree += 1;
            }
        }
    }
    let mut queue: VecDeque<usize> = (0..successors.len())
        .filter(|node| indegree.get(*node) == Some(&0))
        .collect();
    let mut placed = BTreeSet::new();
    while let Some(node) = queue.pop_front() {
        placed.insert(node);
        for target in successors.get(node).into_iter().flatten() {
            if let Some(degree) = indegree.get_mut(*target) {
                *degree -= 1;
                if *degree == 0 {
                    queue.push_back(*target);
                }
            }
        }
    }
    (0..successors.len())
        .filter(|node| !placed.contains(node))
        .collect()
}

/// Every node reachable from `start`, itself included.
fn reachable(successors: &[Vec<usize>], start: usize) -> BTreeSet<usize> {
    let mut seen = BTreeSet::from([start]);
    let mut stack = vec![start];
    while let Some(node) = stack.pop() {
        for target in successors.get(node).into_iter().flatten() {
            if seen.insert(*target) {
                stack.push(*target);
            }
        }
    }
    seen
}

/// Every node from which `goal` is reachable, itself included.
fn reaching(successors: &[Vec<usize>], goal: usize) -> BTreeSet<usize> {
    let mut predecessors: Vec<Vec<usize>> = vec![Vec::new(); successors.len()];
    for (node, targets) in successors.iter().enumerate() {
        for target in targets {
            if let Some(list) = predecessors.get_mut(*target) {
                list.push(node);
            }
        }
    }
    reachable(&predecessors, goal)
}

/// The largest sum of `weight` along a path from `entry` (`None` weights are unbounded).
fn longest_path(
    order: &[usize],
    successors: &[Vec<usize>],
    entry: usize,
    weight: impl Fn(usize) -> Option<u64>,
) -> Option<u64> {
    // best[node] = the most expensive path from node to a sink; filled in reverse order.
    let mut best: Vec<Option<u64>> = vec![Some(0); successors.len()];
    for node in order.iter().rev() {
        let mut tail = Some(0u64);
        for target in successors.get(*node).into_iter().flatten() {
            let candidate = best.get(*target).copied().flatten();
            tail = match (tail, candidate) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
        if let Some(slot) = best.get_mut(*node) {
            *slot = add(weight(*node), tail);
        }
    }
    best.get(entry).copied().flatten()
}

fn plural(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// `2h4m40s`, `1s500ms`, `0s`: written as a spec writes durations (one syntax for the
/// spec, the cassette and the console), so a value the console suggests can be pasted.
pub fn format_ms(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_string();
    }
    let mut parts = Vec::new();
    let hours = ms / 3_600_000;
    let minutes = ms / 60_000 % 60;
    let seconds = ms / 1000 % 60;
    let millis = ms % 1000;
    if hours > 0 {
        parts.push(format!("{hours}h"));
    }
    if minutes > 0 {
        parts.push(format!("{minutes}m"));
    }
    if seconds > 0 {
        parts.push(format!("{seconds}s"));
    }
    if millis > 0 {
        parts.push(format!("{millis}ms"));
    }
    parts.concat()
}

fn count_text(value: Option<u64>) -> String {
    value.map_or_else(|| "unbounded".to_string(), |value| value.to_string())
}

fn wall_text(value: Option<u64>) -> String {
    value.map_or_else(|| "unbounded".to_string(), format_ms)
}

impl Display for Bounds {
    /// A table: one row per step (runs, calls and wall time per run and in all, tokens),
    /// the totals, then notes on what is unbounded or unknown.
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        let rounds = if self.rounds == 1 {
            "1 round".to_string()
        } else {
            format!("{} rounds", self.rounds)
        };
        writeln!(formatter, "worst case of `{}` ({rounds})", self.spec)?;
        writeln!(formatter)?;
        let header = [
            "step",
            "body",
            "runs",
            "calls/run",
            "wall/run",
            "calls",
            "wall",
            "tokens",
        ];
        let mut rows: Vec<[String; 8]> = self
            .steps
            .iter()
            .map(|step| {
                [
                    step.name.clone(),
                    step.body.clone(),
                    count_text(step.runs),
                    count_text(step.calls_per_run),
                    wall_text(step.wall_ms_per_run),
                    count_text(step.calls),
                    wall_text(step.wall_ms),
                    step.tokens
                        .map_or_else(|| "unknown".to_string(), |tokens| tokens.to_string()),
                ]
            })
            .collect();
        rows.push([
            "total".to_string(),
            if self.total.looping {
                "(`budget.steps` × the costliest step)".to_string()
            } else if self.total.summed {
                "(every step's worst case, summed)".to_string()
            } else {
                "(the most expensive path)".to_string()
            },
            self.total
                .steps
                .map_or_else(|| "unbounded".to_string(), |steps| plural(steps, "step")),
            String::new(),
            String::new(),
            count_text(self.total.calls),
            wall_text(self.total.wall_ms),
            self.total
                .tokens
                .map_or_else(|| "unknown".to_string(), |tokens| tokens.to_string()),
        ]);
        let mut widths = header.map(|title| title.chars().count());
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let write_row = |cells: &[String], formatter: &mut Formatter<'_>| -> fmt::Result {
            let mut line = String::new();
            for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
                let pad = width.saturating_sub(cell.chars().count());
                if index > 0 {
                    line.push_str("  ");
                }
                // Text columns align left, numbers right.
                if index < 2 {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
            }
            writeln!(formatter, "{}", line.trim_end())
        };
        write_row(&header.map(String::from), formatter)?;
        let total_row = rows.len().saturating_sub(1);
        for (index, row) in rows.iter().enumerate() {
            if index == total_row {
                let rule: Vec<String> = widths.iter().map(|width| "-".repeat(*width)).collect();
                writeln!(formatter, "{}", rule.join("  "))?;
            }
            write_row(row, formatter)?;
        }
        if !self.notes.is_empty() {
            writeln!(formatter)?;
            writeln!(formatter, "notes:")?;
            for note in &self.notes {
                writeln!(formatter, "- {note}")?;
            }
        }
        Ok(())
    }
}
