//! The step graph of a flow and the checks that walk it: unbounded loops (E006),
//! unreachable steps and steps that cannot finish (E007), gates whose pass path never
//! finishes (E012).

use std::collections::{BTreeMap, BTreeSet};

use petgraph::Direction;
use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Bfs, EdgeRef, Reversed};

use super::codes::arm_applies;
use super::{cycle_text, name_list, shortest_cycle};
use crate::check::Symbols;
use crate::diagnostics::{Code, Diagnostic, Span, did_you_mean};
use crate::syntax::ast::{Action, FailTarget, Flow, Ident, Next, Step, StepBody, Target};

/// A node of the step graph: a step (by its position in [`StepGraph::steps`]) or the end
/// of the run (every terminal: `done`, `blocked "..."`, `failed "..."`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Node {
    Step(usize),
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EdgeKind {
    /// A written transition: `-> t`, a `when`/`else` arm, `pass -> t`, `fail -> t`.
    Next,
    /// `fail -> repair` to a `rerun` target (or to the entry step for `replan`): bounded
    /// by `repair.rounds`.
    Repair,
    /// `fail -> repair` when repairing ends (rounds or `no_progress` run out, or no issue
    /// has an action): the runtime finalizes `best`, so this leads to every `finalize`
    /// step; to the end of the run when there is none, or when an arm blocks or fails.
    RepairEnd,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Edge {
    pub kind: EdgeKind,
    /// Where the transition is written (the target, or the rerun step of an arm).
    pub span: Span,
}

/// The flow as a graph: node `i` is `steps[i]`, then one node for the end of the run.
#[derive(Debug)]
pub(super) struct StepGraph<'a> {
    /// The steps in flow order (first definitions only).
    pub steps: Vec<&'a Step>,
    pub graph: DiGraph<Node, Edge>,
    /// `graph` without repair edges: the written transitions only (same node indices).
    pub written: DiGraph<Node, Edge>,
    pub end: NodeIndex,
    /// Step name -> node.
    index: BTreeMap<&'a str, NodeIndex>,
    /// For each gate step: the steps with a path of written transitions to it.
    upstream: BTreeMap<NodeIndex, Vec<NodeIndex>>,
    /// Step targets (in transitions and `rerun` arms) that name no step.
    unresolved: Vec<&'a Ident>,
}

impl<'a> StepGraph<'a> {
    /// Builds the graph of the spec's flow; `None` when there is no flow. Stages: the
    /// steps (first definitions), a node for each and one for the end of the run, the
    /// edges out of each step in the order written, then what is read off the graph: the
    /// written transitions alone and each gate step's upstream steps.
    pub fn build(symbols: &Symbols<'a>) -> Option<StepGraph<'a>> {
        let flow = symbols.flow?;
        let steps = first_definitions(symbols, flow);
        let mut graph = DiGraph::new();
        for position in 0..steps.len() {
            graph.add_node(Node::Step(position));
        }
        let end = graph.add_node(Node::End);
        let index = step_index(&steps);
        let finalize_steps = finalize_nodes(&steps);
        let mut unresolved = Vec::new();
        for (position, step) in steps.iter().enumerate() {
            let from = NodeIndex::new(position);
            let edges = step_edges(symbols, step, &index, &finalize_steps, end, &mut unresolved);
            for (to, edge) in edges {
                graph.add_edge(from, to, edge);
            }
        }
        let written = graph.filter_map(
            |_, node| Some(*node),
            |_, edge| (edge.kind == EdgeKind::Next).then_some(*edge),
        );
        let upstream = gate_upstreams(&steps, &written);
        Some(StepGraph {
            steps,
            graph,
            written,
            end,
            index,
            upstream,
            unresolved,
        })
    }

    pub fn step_name(&self, node: NodeIndex) -> Option<&'a str> {
        match self.graph.node_weight(node) {
            Some(Node::Step(position)) => self
                .steps
                .get(*position)
                .map(|step| step.name.name.as_str()),
            _ => None,
        }
    }

    pub fn step(&self, node: NodeIndex) -> Option<&'a Step> {
        match self.graph.node_weight(node) {
            Some(Node::Step(position)) => self.steps.get(*position).copied(),
            _ => None,
        }
    }

    pub fn node_of(&self, name: &str) -> Option<NodeIndex> {
        self.index.get(name).copied()
    }

    /// The steps with a path of written transitions to the gate step `node` (not `node`
    /// itself), in flow order; empty for a step that is not a gate step.
    pub fn upstream(&self, node: NodeIndex) -> &[NodeIndex] {
        self.upstream.get(&node).map_or(&[], Vec::as_slice)
    }

    /// The steps with a path of written transitions to `node` (not `node` itself unless it
    /// is on a loop), in flow order: the steps that can have run before `node` runs.
    pub fn leading_to(&self, node: NodeIndex) -> Vec<NodeIndex> {
        let previous: Vec<NodeIndex> = self
            .written
            .neighbors_directed(node, Direction::Incoming)
            .collect();
        let reached = reverse_reach(&self.written, &previous);
        (0..self.steps.len())
            .filter(|position| reached.get(*position) == Some(&true))
            .map(NodeIndex::new)
            .collect()
    }

    /// Reports step targets that name no step (E002). Only reached when the name checks
    /// passed, so these were not reported yet; the graph checks are skipped when any is.
    pub fn check_targets_resolve(&self, symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
        let names: Vec<&str> = symbols.steps.keys().copied().collect();
        for name in &self.unresolved {
            let mut diagnostic = Diagnostic::new(
                Code::E002,
                name.span,
                format!("unknown step `{}`", name.name),
            )
            .with_label("no step has this name");
            if let Some(help) = did_you_mean(&name.name, names.iter().copied()) {
                diagnostic = diagnostic.with_help(help);
            }
            diagnostics.push(diagnostic);
        }
    }

    /// E006, E007 and the termination part of E012.
    pub fn check(&self, symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
        if self.steps.is_empty() {
            return;
        }
        let bounded_by_budget = symbols.budget.is_some_and(|budget| budget.steps.is_some());
        if !bounded_by_budget {
            self.check_loops(symbols, diagnostics);
        }
        let mut reachable = self.reachable_from_entry();
        // The `on_exhausted` step runs when a budget runs out, wherever the run is.
        if let Some(summary) = symbols
            .budget
            .and_then(|budget| budget.on_exhausted.as_ref())
            && let Some(position) = self
                .steps
                .iter()
                .position(|step| step.name.name == summary.name)
        {
            let mut bfs = Bfs::new(&self.graph, NodeIndex::new(position));
            while let Some(node) = bfs.next(&self.graph) {
                reachable.insert(node);
            }
        }
        self.check_unreachable(&reachable, diagnostics);
        let stuck = self.check_no_terminal(&reachable, diagnostics);
        self.check_gates_finish(&stuck, diagnostics);
    }

    /// E006: every cycle of written transitions (one that uses no repair edge).
    fn check_loops(&self, symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
        // The transitions out of an `ask "…" max N` step are bounded by N.
        let bounded_ask = |node: NodeIndex| {
            self.step(node)
                .is_some_and(|step| matches!(step.body, StepBody::Ask { max: Some(_), .. }))
        };
        let written = &self.written.filter_map(
            |_, node| Some(*node),
            |edge, weight| {
                let (from, _) = self.written.edge_endpoints(edge)?;
                (!bounded_ask(from)).then_some(*weight)
            },
        );
        // Kosaraju, not Tarjan: petgraph's Tarjan recurses once per node of a path, so a
        // long enough chain would overflow the stack; Kosaraju walks with explicit stacks.
        let mut components = kosaraju_scc(written);
        components.sort_by_key(|component| component.iter().min().copied());
        for component in components {
            let members: BTreeSet<NodeIndex> = component.iter().copied().collect();
            let Some(head) = members.first().copied() else {
                continue;
            };
            let Some((path, closing)) = shortest_cycle(written, &members, head) else {
                continue;
            };
            let Some(edge) = written.edge_weight(closing) else {
                continue;
            };
            let names: Vec<&str> = path
                .iter()
                .filter_map(|node| self.step_name(*node))
                .collect();
            let help = if symbols.budget.is_some() {
                "add `steps N` to the `budget` block to bound every loop, route the loop \
                 through `fail -> repair` (bounded by `repair.rounds`), or through an \
                 `ask \"…\" max N`"
            } else {
                "add `budget { steps N }` to bound every loop, route the loop through \
                 `fail -> repair` (bounded by `repair.rounds`), or through an \
                 `ask \"…\" max N`"
            };
            let mut diagnostic = Diagnostic::new(
                Code::E006,
                edge.span,
                format!("unbounded loop: {}", cycle_text(&names)),
            )
            .with_label("this transition closes the loop")
            .with_help(help);
            if let Some(step) = self.step(head) {
                diagnostic = diagnostic.with_note(step.name.span, "the loop starts here");
            }
            diagnostics.push(diagnostic);
        }
    }

    fn reachable_from_entry(&self) -> BTreeSet<NodeIndex> {
        let entry = NodeIndex::new(0);
        let mut bfs = Bfs::new(&self.graph, entry);
        let mut reached = BTreeSet::new();
        while let Some(node) = bfs.next(&self.graph) {
            reached.insert(node);
        }
        reached
    }

    /// E007: steps the entry step never leads to.
    fn check_unreachable(
        &self,
        reachable: &BTreeSet<NodeIndex>,
        diagnostics: &mut Vec<Diagnostic>,
    ) {
        let Some(entry) = self.steps.first() else {
            return;
        };
        for (position, step) in self.steps.iter().enumerate() {
            if reachable.contains(&NodeIndex::new(position)) {
                continue;
            }
            diagnostics.push(
                Diagnostic::new(
                    Code::E007,
                    step.name.span,
                    format!(
                        "step `{}` is unreachable from the entry step `{}`",
                        step.name.name, entry.name.name
                    ),
                )
                .with_label("this step never runs")
                .with_help(format!(
                    "route a transition to it (`-> {}`) from a step that runs, or remove it",
                    step.name.name
                )),
            );
        }
    }

    /// E007: reachable steps from which no terminal can be reached. Reported once per
    /// trap (a group of steps that only lead to each other), not for every step leading
    /// into one. Returns every step that cannot finish.
    fn check_no_terminal(
        &self,
        reachable: &BTreeSet<NodeIndex>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> BTreeSet<NodeIndex> {
        let reversed = Reversed(&self.graph);
        let mut bfs = Bfs::new(reversed, self.end);
        let mut finishing = BTreeSet::new();
        while let Some(node) = bfs.next(reversed) {
            finishing.insert(node);
        }
        let stuck: BTreeSet<NodeIndex> = reachable
            .iter()
            .copied()
            .filter(|node| !finishing.contains(node))
            .collect();
        // Kosaraju, not Tarjan: petgraph's Tarjan recurses once per node of a path, so a
        // long enough chain would overflow the stack; Kosaraju walks with explicit stacks.
        let mut components = kosaraju_scc(&self.graph);
        components.sort_by_key(|component| component.iter().min().copied());
        for component in components {
            let members: BTreeSet<NodeIndex> = component.iter().copied().collect();
            if !members.iter().all(|node| stuck.contains(node)) {
                continue;
            }
            // A trap: no edge leaves the group (everything it leads to is inside it).
            let leaves = members.iter().any(|node| {
                self.graph
                    .edges_directed(*node, Direction::Outgoing)
                    .any(|edge| !members.contains(&edge.target()))
            });
            if leaves {
                continue;
            }
            let Some(head) = members.first().copied() else {
                continue;
            };
            let Some(step) = self.step(head) else {
                continue;
            };
            let names: Vec<&str> = members
                .iter()
                .filter_map(|node| self.step_name(*node))
                .collect();
            let message = if names.len() > 1 {
                format!(
                    "steps {} only lead to each other: no terminal is reachable from them",
                    name_list(names.iter().copied())
                )
            } else {
                format!("no terminal is reachable from step `{}`", step.name.name)
            };
            let mut diagnostic = Diagnostic::new(Code::E007, step.name.span, message)
                .with_label("the run can never finish from here")
                .with_help(
                    "add a transition out to `done`, `blocked \"...\"`, `failed \"...\"` or a \
                     step that reaches one",
                );
            for node in members.iter().skip(1) {
                if let Some(other) = self.step(*node) {
                    diagnostic = diagnostic.with_note(other.name.span, "also part of the trap");
                }
            }
            diagnostics.push(diagnostic);
        }
        stuck
    }

    /// E012: a gate step from whose pass path no written transition reaches a `finalize`
    /// step or a terminal (skipped where E007 already reported the steps as stuck).
    fn check_gates_finish(&self, stuck: &BTreeSet<NodeIndex>, diagnostics: &mut Vec<Diagnostic>) {
        let written = &self.written;
        let mut finish_nodes = vec![self.end];
        finish_nodes.extend(
            self.steps
                .iter()
                .enumerate()
                .filter(|(_, step)| matches!(step.body, StepBody::Finalize { .. }))
                .map(|(position, _)| NodeIndex::new(position)),
        );
        let finishing = reverse_reach(written, &finish_nodes);
        for (position, step) in self.steps.iter().enumerate() {
            let StepBody::Gate { gate } = &step.body else {
                continue;
            };
            let from = NodeIndex::new(position);
            let (starts, span): (Vec<NodeIndex>, Span) = match &step.next {
                Next::PassFail { pass, .. } => match pass {
                    Target::Step(name) => match self.node_of(&name.name) {
                        Some(node) => (vec![node], name.span),
                        None => continue,
                    },
                    Target::Done(_) | Target::Blocked(_) | Target::Failed(_) => continue,
                },
                Next::Goto(target) => (written.neighbors(from).collect(), target.span()),
                Next::When { .. } => (written.neighbors(from).collect(), step.name.span),
            };
            if starts.iter().any(|node| stuck.contains(node)) {
                continue;
            }
            if starts
                .iter()
                .any(|start| finishing.get(start.index()) == Some(&true))
            {
                continue;
            }
            diagnostics.push(
                Diagnostic::new(
                    Code::E012,
                    span,
                    format!(
                        "when gate `{}` passes, the flow reaches neither a `finalize` step nor a terminal",
                        gate.name
                    ),
                )
                .with_label("the pass path starts here and never finishes")
                .with_note(step.name.span, format!("gate step `{}`", step.name.name))
                .with_help(
                    "route `pass ->` to a `finalize` step or to `done` (or a step that reaches one)",
                ),
            );
        }
    }
}

/// The flow's steps in flow order, first definitions only (a step defined twice is
/// reported by the name checks).
fn first_definitions<'a>(symbols: &Symbols<'a>, flow: &'a Flow) -> Vec<&'a Step> {
    flow.steps
        .iter()
        .filter(|step| {
            symbols
                .steps
                .get(step.name.name.as_str())
                .is_some_and(|first| std::ptr::eq(*first, *step))
        })
        .collect()
}

/// Step name -> node: node `i` is `steps[i]`.
fn step_index<'a>(steps: &[&'a Step]) -> BTreeMap<&'a str, NodeIndex> {
    steps
        .iter()
        .enumerate()
        .map(|(position, step)| (step.name.name.as_str(), NodeIndex::new(position)))
        .collect()
}

/// The nodes of the `finalize` steps, in flow order.
fn finalize_nodes(steps: &[&Step]) -> Vec<NodeIndex> {
    steps
        .iter()
        .enumerate()
        .filter(|(_, step)| matches!(step.body, StepBody::Finalize { .. }))
        .map(|(position, _)| NodeIndex::new(position))
        .collect()
}

/// The edges out of `step`, in the order they are written: its `on_error -> STEP` (a
/// transition like the written ones, taken when it fails), then its transitions, a
/// `fail -> repair` through [`repair_edges`]. A target that names no step gets no edge
/// and goes to `unresolved`.
fn step_edges<'a>(
    symbols: &Symbols<'a>,
    step: &'a Step,
    index: &BTreeMap<&str, NodeIndex>,
    finalize_steps: &[NodeIndex],
    end: NodeIndex,
    unresolved: &mut Vec<&'a Ident>,
) -> Vec<(NodeIndex, Edge)> {
    let mut edges = Vec::new();
    if let Some(on_error) = &step.on_error {
        match index.get(on_error.name.as_str()) {
            Some(node) => edges.push((
                *node,
                Edge {
                    kind: EdgeKind::Next,
                    span: on_error.span,
                },
            )),
            None => unresolved.push(on_error),
        }
    }
    match &step.next {
        Next::Goto(target) => edges.extend(target_edge(target, index, end, unresolved)),
        Next::When { arms, otherwise } => {
            for target in arms.iter().map(|(_, target)| target).chain(otherwise) {
                edges.extend(target_edge(target, index, end, unresolved));
            }
        }
        Next::PassFail { pass, fail } => {
            edges.extend(target_edge(pass, index, end, unresolved));
            match fail {
                FailTarget::Target(target) => {
                    edges.extend(target_edge(target, index, end, unresolved));
                }
                FailTarget::Repair(span) => edges.extend(repair_edges(
                    symbols,
                    step,
                    *span,
                    index,
                    finalize_steps,
                    end,
                    unresolved,
                )),
            }
        }
    }
    edges
}

/// The edge of a written transition to `target`: to its step, or to the end of the run
/// for a terminal. `None` (with the name added to `unresolved`) when it names no step.
fn target_edge<'a>(
    target: &'a Target,
    index: &BTreeMap<&str, NodeIndex>,
    end: NodeIndex,
    unresolved: &mut Vec<&'a Ident>,
) -> Option<(NodeIndex, Edge)> {
    let node = match target {
        Target::Step(name) => match index.get(name.name.as_str()) {
            Some(node) => *node,
            None => {
                unresolved.push(name);
                return None;
            }
        },
        Target::Done(_) | Target::Blocked(_) | Target::Failed(_) => end,
    };
    Some((
        node,
        Edge {
            kind: EdgeKind::Next,
            span: target.span(),
        },
    ))
}

/// For each gate step: the steps with a path of `written` transitions to it (not the
/// step itself), in flow order.
fn gate_upstreams(
    steps: &[&Step],
    written: &DiGraph<Node, Edge>,
) -> BTreeMap<NodeIndex, Vec<NodeIndex>> {
    steps
        .iter()
        .enumerate()
        .filter(|(_, step)| matches!(step.body, StepBody::Gate { .. }))
        .map(|(position, _)| {
            let node = NodeIndex::new(position);
            let reached = reverse_reach(written, &[node]);
            let found = (0..steps.len())
                .filter(|other| *other != position && reached.get(*other) == Some(&true))
                .map(NodeIndex::new)
                .collect();
            (node, found)
        })
        .collect()
}

/// The edges of a gate step's `fail -> repair` (at `fail_span`): a repair edge to the
/// step each applicable `rerun` arm names (the entry step for `replan`), and the edges
/// taken when repairing ends: to every `finalize` step, and to the end of the run when
/// there is no finalize step or an arm blocks or fails the run.
fn repair_edges<'a>(
    symbols: &Symbols<'a>,
    step: &Step,
    fail_span: Span,
    index: &BTreeMap<&str, NodeIndex>,
    finalize_steps: &[NodeIndex],
    end: NodeIndex,
    unresolved: &mut Vec<&'a Ident>,
) -> Vec<(NodeIndex, Edge)> {
    let gate = match &step.body {
        StepBody::Gate { gate } => symbols.gates.get(gate.name.as_str()).copied(),
        _ => None,
    };
    let arms = symbols
        .repair
        .iter()
        .flat_map(|repair| &repair.arms)
        .filter(|arm| arm_applies(arm, gate));
    let mut edges = Vec::new();
    let mut ends_run = finalize_steps.is_empty();
    for arm in arms {
        let (to, span) = match &arm.action {
            Action::Rerun { step, .. } => match index.get(step.name.as_str()) {
                Some(node) => (*node, step.span),
                None => {
                    unresolved.push(step);
                    continue;
                }
            },
            Action::Replan(span) => (NodeIndex::new(0), *span),
            Action::Block(_) | Action::Fail(_) => {
                ends_run = true;
                continue;
            }
            Action::Accept(_) | Action::Ask(_) => continue,
        };
        edges.push((
            to,
            Edge {
                kind: EdgeKind::Repair,
                span,
            },
        ));
    }
    let ends = finalize_steps
        .iter()
        .copied()
        .chain(ends_run.then_some(end));
    for to in ends {
        edges.push((
            to,
            Edge {
                kind: EdgeKind::RepairEnd,
                span: fail_span,
            },
        ));
    }
    edges
}

/// Which nodes have a path to one of `targets` in `graph` (the targets included), by index.
fn reverse_reach(graph: &DiGraph<Node, Edge>, targets: &[NodeIndex]) -> Vec<bool> {
    let mut reached = vec![false; graph.node_count()];
    let mut stack = Vec::new();
    for target in targets {
        if let Some(flag) = reached.get_mut(target.index()) {
            *flag = true;
            stack.push(*target);
        }
    }
    while let Some(node) = stack.pop() {
        for previous in graph.neighbors_directed(node, Direction::Incoming) {
            if let Some(flag) = reached.get_mut(previous.index())
                && !*flag
            {
                *flag = true;
                stack.push(previous);
            }
        }
    }
    reached
}
