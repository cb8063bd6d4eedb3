//! Static work lists: `each t in [{id: "a", depends_on: ["b"]}, ...]` whose `depends_on`
//! names a missing id or forms a cycle (E015).

use std::collections::{BTreeMap, BTreeSet};

use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};

use super::{cycle_text, shortest_cycle};
use crate::check::Symbols;
use crate::diagnostics::{Code, Diagnostic, Span, did_you_mean};
use crate::syntax::ast::{Expr, ExprKind, StepBody};

/// One record of a static work list.
struct Task<'e> {
    id: &'e str,
    /// Each `depends_on` entry that is a string: its value and where it is written.
    depends_on: Vec<(&'e str, Span)>,
}

pub(super) fn check(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let Some(flow) = symbols.flow else {
        return;
    };
    for step in &flow.steps {
        if let StepBody::Each { over, .. } = &step.body {
            check_list(over, diagnostics);
        }
    }
}

/// The task records of a list literal; records without a string `id` are skipped (the
/// type check reports them).
fn tasks(list: &Expr) -> Vec<Task<'_>> {
    let ExprKind::List(items) = &list.kind else {
        return Vec::new();
    };
    let mut tasks = Vec::new();
    for item in items {
        let ExprKind::Record(fields) = &item.kind else {
            continue;
        };
        let field = |name: &str| {
            fields
                .iter()
                .find(|(key, _)| key.name == name)
                .map(|(_, value)| value)
        };
        let Some(ExprKind::Str(id)) = field("id").map(|value| &value.kind) else {
            continue;
        };
        let depends_on = match field("depends_on").map(|value| &value.kind) {
            Some(ExprKind::List(entries)) => entries
                .iter()
                .filter_map(|entry| match &entry.kind {
                    ExprKind::Str(dependency) => Some((dependency.as_str(), entry.span)),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        tasks.push(Task {
            id: id.as_str(),
            depends_on,
        });
    }
    tasks
}

fn check_list(list: &Expr, diagnostics: &mut Vec<Diagnostic>) {
    let tasks = tasks(list);
    if tasks.is_empty() {
        return;
    }
    let mut graph: DiGraph<&str, Span> = DiGraph::new();
    let mut index: BTreeMap<&str, NodeIndex> = BTreeMap::new();
    for task in &tasks {
        if !index.contains_key(task.id) {
            index.insert(task.id, graph.add_node(task.id));
        }
    }
    let mut seen_tasks = BTreeSet::new();
    for task in &tasks {
        // A repeated id is the type check's to report; its dependencies are ignored here.
        if !seen_tasks.insert(task.id) {
            continue;
        }
        let Some(from) = index.get(task.id).copied() else {
            continue;
        };
        for (dependency, span) in &task.depends_on {
            match index.get(dependency) {
                Some(to) => {
                    graph.add_edge(from, *to, *span);
                }
                None => {
                    let help = match did_you_mean(dependency, index.keys().copied()) {
                        Some(suggestion) => format!(
                            "{suggestion} (or add a task with id `{dependency}` to the list)"
                        ),
                        None => "name the `id` of a task in this list, or remove the \
                                     dependency"
                            .to_string(),
                    };
                    diagnostics.push(
                        Diagnostic::new(
                            Code::E015,
                            *span,
                            format!(
                                "task `{}` depends on `{dependency}`, which is not in the list",
                                task.id
                            ),
                        )
                        .with_label("no task has this id")
                        .with_help(help),
                    );
                }
            }
        }
    }
    // Kosaraju, not Tarjan: petgraph's Tarjan recurses once per node of a path, so a
    // long enough chain would overflow the stack; Kosaraju walks with explicit stacks.
    let mut components = kosaraju_scc(&graph);
    components.sort_by_key(|component| component.iter().min().copied());
    for component in components {
        let members: BTreeSet<NodeIndex> = component.iter().copied().collect();
        let Some(head) = members.first().copied() else {
            continue;
        };
        let Some((path, closing)) = shortest_cycle(&graph, &members, head) else {
            continue;
        };
        let Some(span) = graph.edge_weight(closing).copied() else {
            continue;
        };
        let names: Vec<&str> = path
            .iter()
            .filter_map(|node| graph.node_weight(*node).copied())
            .collect();
        let message = match names.as_slice() {
            [only] => format!("task `{only}` depends on itself"),
            _ => format!("task dependencies form a cycle: {}", cycle_text(&names)),
        };
        diagnostics.push(
            Diagnostic::new(Code::E015, span, message)
                .with_label("this dependency closes the cycle")
                .with_help("remove one of the dependencies so the tasks can be ordered"),
        );
    }
}
