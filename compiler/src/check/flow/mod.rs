//! Flow rules: loops, reachability, repair coverage, invariants, judges, finalize, task DAGs, what gates read (E006–E012, E015, E017) and warnings.
//!
//! The checks are split by what they look at:
//! - [`graph`]: the step graph (petgraph) and the checks that walk it: unbounded loops
//!   (E006), unreachable steps and steps that cannot finish (E007), a gate whose pass path
//!   never finishes (E012);
//! - [`repair`]: repair coverage and repair arms (E008, E009);
//! - [`codes`]: the issue codes a gate emits and which repair arms apply to it, shared by
//!   the graph, the repair checks, the feedback warnings and the flow facts;
//! - [`roles`]: static invariants (E010), judges holding write/external tools (E011),
//!   finalize roles that do not output `Delivery` and finalize steps in a flow with no
//!   gate (E012);
//! - [`reads`]: gates that read a step that cannot have run before them (E017);
//! - [`feedback`]: roles that can receive feedback but never read it (W010), finalize
//!   roles that never read the candidate's id (W011); run by `check` after the
//!   templates are analysed, on a spec without errors;
//! - [`tasks`]: static work lists whose `depends_on` is missing or cyclic (E015);
//! - [`unused`]: the warnings W001–W006 and W009.
//!
//! Checks that assume a well-formed graph (loops, reachability, repair coverage, unused
//! definitions) run only when the earlier checks found no error; the local ones always run
//! and skip whatever does not resolve, so an unknown name never causes follow-on errors.

mod codes;
pub(crate) mod feedback;
mod graph;
mod reads;
mod repair;
mod roles;
mod tasks;
mod unused;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::check::Symbols;
use crate::diagnostics::{Diagnostic, Span};
use crate::syntax::ast::{Expr, ExprKind, FailTarget, Ident, Next, SpecFile, StepBody};

/// Facts about the flow, for the graph builder. Owned data; step, gate and role names are
/// as written in the spec. Filled as far as the spec allows even when it has errors (the
/// graph builder only runs on a spec without errors, where every name resolves).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowFacts {
    /// The entry step: the first step of the flow (`None` without a flow or steps).
    pub entry: Option<String>,
    /// Every step in flow order (first definitions only).
    pub steps: Vec<String>,
    /// One entry per `gate` step, in flow order.
    pub gate_steps: Vec<GateStepFacts>,
    /// Every judge: a role whose output some gate reads (through a step that calls it) or
    /// that a per-item `check GATE by ROLE` names. Sorted, without duplicates.
    pub judges: Vec<String>,
    /// The repair edges: for each gate step with `fail -> repair` (in flow order), one per
    /// `rerun`/`replan` arm of the `repair` block that applies to its gate (a `_` arm, or
    /// an arm naming a code the gate emits), in arm order.
    pub repair_edges: Vec<RepairEdge>,
}

/// What a `gate` step evaluates and what feeds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateStepFacts {
    /// The `NAME = gate GATE` step.
    pub step: String,
    /// The gate it evaluates.
    pub gate: String,
    /// The gate's subject step (`gate GATE on SUBJECT`): its outputs are the `candidate`.
    pub subject: String,
    /// The roles whose output this gate reads (judges), sorted.
    pub judges: Vec<String>,
    /// The steps that have a path of written transitions (not repair edges) to this step,
    /// in flow order: the steps a `rerun` from this gate may target.
    pub upstream: Vec<String>,
    /// True when the step's failures go to the `repair` block (`fail -> repair`).
    pub repairs: bool,
}

/// A repair edge: when `gate_step` fails with one of `codes`, the repair block reruns
/// `target` (and everything downstream of it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairEdge {
    /// The gate step whose `fail -> repair` leads here.
    pub gate_step: String,
    /// The step rerun: the `rerun` target, or the entry step for `replan`.
    pub target: String,
    /// The issue codes of the arm; empty for the `_` arm.
    pub codes: Vec<String>,
    /// `rerun X with feedback`: the issues are passed to the rerun role as `feedback`.
    pub with_feedback: bool,
    /// The arm is `replan` (rerun the entry step) rather than `rerun`.
    pub replan: bool,
}

/// Runs the flow checks over `spec`. `names_clean` is false when earlier checks found
/// errors; the graph-wide checks are skipped then.
pub fn check(
    spec: &SpecFile,
    symbols: &Symbols<'_>,
    names_clean: bool,
    diagnostics: &mut Vec<Diagnostic>,
) -> FlowFacts {
    let _ = spec;
    let judges = roles::judges(symbols);
    roles::check(symbols, &judges, diagnostics);
    tasks::check(symbols, diagnostics);
    unused::check_local(symbols, diagnostics);

    let step_graph = graph::StepGraph::build(symbols);
    if names_clean {
        unused::check_unused(symbols, diagnostics);
        if let Some(step_graph) = &step_graph {
            let before = diagnostics.len();
            step_graph.check_targets_resolve(symbols, diagnostics);
            if diagnostics.len() == before {
                step_graph.check(symbols, diagnostics);
                repair::check(symbols, step_graph, diagnostics);
                reads::check(symbols, step_graph, diagnostics);
            }
        } else if let Some(repair) = symbols.repair {
            repair::check_unused_without_flow(repair, diagnostics);
        }
    }
    facts(symbols, step_graph.as_ref(), &judges)
}

fn facts(
    symbols: &Symbols<'_>,
    step_graph: Option<&graph::StepGraph<'_>>,
    judges: &roles::Judges<'_>,
) -> FlowFacts {
    let Some(step_graph) = step_graph else {
        return FlowFacts::default();
    };
    let name_of = |index: NodeIndex| step_graph.step_name(index).map(str::to_string);
    let mut facts = FlowFacts {
        entry: step_graph.steps.first().map(|step| step.name.name.clone()),
        steps: step_graph
            .steps
            .iter()
            .map(|step| step.name.name.clone())
            .collect(),
        judges: judges.all().map(str::to_string).collect(),
        ..FlowFacts::default()
    };
    for (position, step) in step_graph.steps.iter().enumerate() {
        let StepBody::Gate { gate } = &step.body else {
            continue;
        };
        let repairs = matches!(
            &step.next,
            Next::PassFail {
                fail: FailTarget::Repair(_),
                ..
            }
        );
        let upstream = step_graph.upstream(NodeIndex::new(position));
        facts.gate_steps.push(GateStepFacts {
            step: step.name.name.clone(),
            gate: gate.name.clone(),
            subject: symbols
                .gates
                .get(gate.name.as_str())
                .map(|gate| gate.subject.name.clone())
                .unwrap_or_default(),
            judges: judges
                .of_gate(gate.name.as_str())
                .map(str::to_string)
                .collect(),
            upstream: upstream
                .iter()
                .filter_map(|index| name_of(*index))
                .collect(),
            repairs,
        });
        if let (true, Some(repair)) = (repairs, symbols.repair) {
            let gate = symbols.gates.get(gate.name.as_str()).copied();
            let arms = repair
                .arms
                .iter()
                .filter(|arm| codes::arm_applies(arm, gate));
            for arm in arms {
                let (target, with_feedback, replan) = match &arm.action {
                    crate::syntax::ast::Action::Rerun {
                        step,
                        with_feedback,
                        ..
                    } => (Some(step.name.clone()), *with_feedback, false),
                    crate::syntax::ast::Action::Replan(_) => (facts.entry.clone(), false, true),
                    _ => (None, false, false),
                };
                let Some(target) = target else {
                    continue;
                };
                let codes = match &arm.pattern {
                    crate::syntax::ast::RepairPattern::Codes(codes) => {
                        codes.iter().map(|code| code.name.clone()).collect()
                    }
                    crate::syntax::ast::RepairPattern::Wildcard(_) => Vec::new(),
                };
                facts.repair_edges.push(RepairEdge {
                    gate_step: step.name.name.clone(),
                    target,
                    codes,
                    with_feedback,
                    replan,
                });
            }
        }
    }
    facts
}

/// Calls `visit` with the first name of every path in `expr` that is not bound by an
/// enclosing quantifier (`every x in p: ...` binds `x` in its body), left to right.
/// Iterative, so a deeply nested expression cannot overflow the stack.
fn for_each_root<'e>(expr: &'e Expr, visit: &mut dyn FnMut(&'e Ident, &'e Expr)) {
    enum Work<'e> {
        Visit(&'e Expr),
        Bind(&'e str),
        Unbind,
    }
    let mut bound: Vec<&'e str> = Vec::new();
    let mut stack = vec![Work::Visit(expr)];
    while let Some(work) = stack.pop() {
        let expr = match work {
            Work::Visit(expr) => expr,
            Work::Bind(name) => {
                bound.push(name);
                continue;
            }
            Work::Unbind => {
                bound.pop();
                continue;
            }
        };
        match &expr.kind {
            ExprKind::Path(parts) => {
                if let Some(first) = parts.first()
                    && !bound.contains(&first.name.as_str())
                {
                    visit(first, expr);
                }
            }
            ExprKind::List(items) | ExprKind::Call { args: items, .. } => {
                stack.extend(items.iter().rev().map(Work::Visit));
            }
            ExprKind::Record(fields) => {
                stack.extend(fields.iter().rev().map(|(_, value)| Work::Visit(value)));
            }
            ExprKind::Unary { operand, .. } => stack.push(Work::Visit(operand)),
            ExprKind::Binary { lhs, rhs, .. } => {
                stack.push(Work::Visit(rhs));
                stack.push(Work::Visit(lhs));
            }
            ExprKind::Quantifier {
                var, over, body, ..
            } => {
                stack.push(Work::Unbind);
                stack.push(Work::Visit(body));
                stack.push(Work::Bind(var.name.as_str()));
                stack.push(Work::Visit(over));
            }
            ExprKind::Bool(_)
            | ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::None => {}
        }
    }
}

/// The shortest cycle through `head` that stays inside `members`: the nodes from `head`
/// round to the last one before `head`, and the edge that closes the cycle. `None` when
/// `head` is on no such cycle.
fn shortest_cycle<N, E>(
    graph: &DiGraph<N, E>,
    members: &BTreeSet<NodeIndex>,
    head: NodeIndex,
) -> Option<(Vec<NodeIndex>, EdgeIndex)> {
    let mut parent: BTreeMap<NodeIndex, NodeIndex> = BTreeMap::new();
    let mut seen = BTreeSet::from([head]);
    let mut queue = VecDeque::from([head]);
    while let Some(node) = queue.pop_front() {
        let mut edges: Vec<_> = graph.edges(node).collect();
        edges.sort_by_key(|edge| edge.id());
        if let Some(closing) = edges.iter().find(|edge| edge.target() == head) {
            let mut path = vec![node];
            let mut current = node;
            while let Some(previous) = parent.get(&current) {
                path.push(*previous);
                current = *previous;
            }
            path.reverse();
            return Some((path, closing.id()));
        }
        for edge in edges {
            let target = edge.target();
            if members.contains(&target) && seen.insert(target) {
                parent.insert(target, node);
                queue.push_back(target);
            }
        }
    }
    None
}

/// "`a` -> `b` -> `a`" for a cycle given as its nodes from the head round.
fn cycle_text(names: &[&str]) -> String {
    let mut parts: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    if let Some(first) = parts.first().cloned() {
        parts.push(first);
    }
    parts.join(" -> ")
}

/// "`a`, `b` and `c`".
fn name_list<'n>(names: impl IntoIterator<Item = &'n str>) -> String {
    let names: Vec<String> = names.into_iter().map(|name| format!("`{name}`")).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The span of a keyword that starts `span` (e.g. `repair` at the start of the repair
/// block), clamped to `span`.
fn keyword_span(span: Span, keyword: &str) -> Span {
    let length = u32::try_from(keyword.len()).unwrap_or(0);
    Span {
        file: span.file,
        start: span.start,
        end: span.start.saturating_add(length).min(span.end),
    }
}
