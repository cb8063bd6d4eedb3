//! The work items of an `each` step as a DAG (DESIGN §4 "Each / task DAG"): built from `id`/`depends_on` with petgraph, ready items in id order, failures skipping their dependents.
//!
//! [`WorkDag::build`] takes the list an `each` step ranges over. An item that is a record
//! with a string `id` is known by it; any other item by its 1-based position (`"1"`,
//! `"2"`, ...). `depends_on` (a list of ids, optional) orders the work. A cycle, a
//! dependency on a missing id, or a repeated id is a [`DagError`] (the run ends
//! `failed{step_failed}`).
//!
//! [`WorkDag`] then tracks each item's state: [`WorkDag::ready`] lists the pending items
//! whose dependencies are all done, in id order (the scheduler starts up to
//! `concurrency` of them); [`WorkDag::fail`] marks an item failed and every pending item
//! that depends on it, directly or not, skipped.

use std::collections::BTreeMap;

use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::Dfs;
use serde_json::Value;

/// Why a work list cannot be run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    #[error("work item id `{id}` is used twice")]
    DuplicateId { id: String },
    #[error("work item `{item}` depends on `{missing}`, which is not in the list")]
    MissingDependency { item: String, missing: String },
    #[error("work items depend on each other in a cycle: {}", ids.join(" -> "))]
    Cycle { ids: Vec<String> },
}

/// Where an item is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ItemState {
    Pending,
    Running,
    Done,
    Failed,
    /// Not run because `because` (a dependency, directly or not) failed.
    Skipped {
        because: String,
    },
}

/// The work items of one `each` step and their states.
#[derive(Clone, Debug)]
pub struct WorkDag {
    /// Edges go from a dependency to the item that needs it.
    graph: DiGraph<String, ()>,
    nodes: BTreeMap<String, NodeIndex>,
    items: BTreeMap<String, Value>,
    states: BTreeMap<String, ItemState>,
}

/// The id an item is known by: its `id` field, or its 1-based position.
pub fn item_id(item: &Value, index: usize) -> String {
    match item.get("id") {
        Some(Value::String(id)) => id.clone(),
        _ => (index + 1).to_string(),
    }
}

impl WorkDag {
    /// Builds the DAG of `items`.
    pub fn build(items: &[Value]) -> Result<WorkDag, DagError> {
        let mut graph = DiGraph::new();
        let mut nodes = BTreeMap::new();
        let mut by_id = BTreeMap::new();
        for (index, item) in items.iter().enumerate() {
            let id = item_id(item, index);
            if nodes.contains_key(&id) {
                return Err(DagError::DuplicateId { id });
            }
            nodes.insert(id.clone(), graph.add_node(id.clone()));
            by_id.insert(id, item.clone());
        }
        for (index, item) in items.iter().enumerate() {
            let id = item_id(item, index);
            let dependencies = item
                .get("depends_on")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            for dependency in dependencies {
                let name = match dependency {
                    Value::String(name) => name.clone(),
                    other => other.to_string(),
                };
                let (Some(&from), Some(&to)) = (nodes.get(&name), nodes.get(&id)) else {
                    return Err(DagError::MissingDependency {
                        item: id,
                        missing: name,
                    });
                };
                graph.update_edge(from, to, ());
            }
        }
        if let Err(cycle) = toposort(&graph, None) {
            return Err(DagError::Cycle {
                ids: cycle_through(&graph, cycle.node_id()),
            });
        }
        let states = nodes
            .keys()
            .map(|id| (id.clone(), ItemState::Pending))
            .collect();
        Ok(WorkDag {
            graph,
            nodes,
            items: by_id,
            states,
        })
    }

    /// Every item id, in id order.
    pub fn ids(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// The item with id `id`.
    pub fn item(&self, id: &str) -> Option<&Value> {
        self.items.get(id)
    }

    /// The ids `id` depends on directly, in id order.
    pub fn dependencies(&self, id: &str) -> Vec<String> {
        let Some(&node) = self.nodes.get(id) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = self
            .graph
            .neighbors_directed(node, petgraph::Direction::Incoming)
            .filter_map(|dependency| self.graph.node_weight(dependency).cloned())
            .collect();
        ids.sort();
        ids
    }

    pub fn state(&self, id: &str) -> Option<&ItemState> {
        self.states.get(id)
    }

    /// Pending items whose dependencies are all done, in id order.
    pub fn ready(&self) -> Vec<String> {
        self.states
            .iter()
            .filter(|(_, state)| **state == ItemState::Pending)
            .filter(|(id, _)| {
                self.dependencies(id)
                    .iter()
                    .all(|dependency| self.states.get(dependency) == Some(&ItemState::Done))
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Marks `id` running.
    pub fn start(&mut self, id: &str) {
        self.set(id, ItemState::Running);
    }

    /// Marks `id` done.
    pub fn finish(&mut self, id: &str) {
        self.set(id, ItemState::Done);
    }

    /// Marks `id` pending again (a rerun of the item, with its dependents still pending).
    pub fn reset(&mut self, id: &str) {
        self.set(id, ItemState::Pending);
    }

    /// Marks `id` failed and every pending item downstream of it skipped; returns the
    /// skipped ids, in id order.
    pub fn fail(&mut self, id: &str) -> Vec<String> {
        self.set(id, ItemState::Failed);
        let Some(&start) = self.nodes.get(id) else {
            return Vec::new();
        };
        let mut skipped = Vec::new();
        let mut dfs = Dfs::new(&self.graph, start);
        while let Some(node) = dfs.next(&self.graph) {
            let Some(dependent) = self.graph.node_weight(node) else {
                continue;
            };
            if let Some(state) = self.states.get_mut(dependent)
                && *state == ItemState::Pending
            {
                *state = ItemState::Skipped {
                    because: id.to_string(),
                };
                skipped.push(dependent.clone());
            }
        }
        skipped.sort();
        skipped
    }

    /// No item is pending or running.
    pub fn is_finished(&self) -> bool {
        self.states
            .values()
            .all(|state| !matches!(state, ItemState::Pending | ItemState::Running))
    }

    /// Ids in a state, in id order.
    pub fn ids_where(&self, wanted: impl Fn(&ItemState) -> bool) -> Vec<String> {
        self.states
            .iter()
            .filter(|(_, state)| wanted(state))
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn set(&mut self, id: &str, state: ItemState) {
        if let Some(current) = self.states.get_mut(id) {
            *current = state;
        }
    }
}

/// The ids of a cycle through `node`, starting and ending at the smallest id in it.
fn cycle_through(graph: &DiGraph<String, ()>, node: NodeIndex) -> Vec<String> {
    // Nodes that reach `node` and that `node` reaches form its strongly connected part.
    // Kosaraju's algorithm is iterative in petgraph; Tarjan's recursion could exhaust the
    // stack on a long `depends_on` chain.
    let components = petgraph::algo::kosaraju_scc(graph);
    let component = components
        .into_iter()
        .find(|component| component.contains(&node))
        .unwrap_or_else(|| vec![node]);
    let mut ids: Vec<String> = component
        .iter()
        .filter_map(|index| graph.node_weight(*index).cloned())
        .collect();
    ids.sort();
    if let Some(first) = ids.first().cloned() {
        ids.push(first);
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(id: &str, depends_on: &[&str]) -> Value {
        json!({"id": id, "goal": "g", "depends_on": depends_on})
    }

    fn dag(items: &[Value]) -> WorkDag {
        match WorkDag::build(items) {
            Ok(dag) => dag,
            Err(error) => panic!("{error}"),
        }
    }

    /// `count` items, each depending on the one before it; the first depends on
    /// `first_depends_on`.
    fn chain(count: usize, first_depends_on: &[&str]) -> Vec<Value> {
        (0..count)
            .map(|index| {
                let id = format!("T-{index:05}");
                if index == 0 {
                    task(&id, first_depends_on)
                } else {
                    task(&id, &[&format!("T-{:05}", index - 1)])
                }
            })
            .collect()
    }

    #[test]
    fn a_long_chain_does_not_exhaust_the_stack() {
        let count = 50_000;
        let mut dag = dag(&chain(count, &[]));
        assert_eq!(dag.ready(), ["T-00000"]);
        assert_eq!(dag.fail("T-00000").len(), count - 1);
        assert!(dag.is_finished());

        let last = format!("T-{:05}", count - 1);
        match WorkDag::build(&chain(count, &[&last])) {
            Err(DagError::Cycle { ids }) => {
                assert_eq!(ids.len(), count + 1);
                assert_eq!(ids.first().map(String::as_str), Some("T-00000"));
                assert_eq!(ids.last().map(String::as_str), Some("T-00000"));
            }
            other => panic!("expected a cycle, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn ready_items_come_in_id_order_after_their_dependencies() {
        let mut dag = dag(&[
            task("T-3", &["T-1"]),
            task("T-2", &[]),
            task("T-1", &[]),
            task("T-4", &["T-3", "T-2"]),
        ]);
        assert_eq!(dag.ids(), ["T-1", "T-2", "T-3", "T-4"]);
        assert_eq!(dag.ready(), ["T-1", "T-2"]);
        dag.start("T-1");
        assert_eq!(dag.ready(), ["T-2"]);
        dag.finish("T-1");
        assert_eq!(dag.ready(), ["T-2", "T-3"]);
        dag.finish("T-2");
        dag.finish("T-3");
        assert_eq!(dag.ready(), ["T-4"]);
        assert_eq!(dag.dependencies("T-4"), ["T-2", "T-3"]);
        assert!(!dag.is_finished());
        dag.finish("T-4");
        assert!(dag.is_finished());
        assert_eq!(dag.item("T-2"), Some(&task("T-2", &[])));
    }

    #[test]
    fn a_failure_skips_its_dependents_and_independent_items_go_on() {
        let mut dag = dag(&[
            task("a", &[]),
            task("b", &["a"]),
            task("c", &["b"]),
            task("d", &[]),
        ]);
        dag.start("a");
        assert_eq!(dag.fail("a"), ["b", "c"]);
        assert_eq!(
            dag.state("c"),
            Some(&ItemState::Skipped {
                because: "a".into()
            })
        );
        assert_eq!(dag.ready(), ["d"]);
        dag.finish("d");
        assert!(dag.is_finished());
        assert_eq!(dag.ids_where(|state| *state == ItemState::Failed), ["a"]);
        assert_eq!(
            dag.ids_where(|state| matches!(state, ItemState::Skipped { .. })),
            ["b", "c"]
        );
        dag.reset("a");
        assert_eq!(dag.ready(), ["a"]);
    }

    #[test]
    fn bad_work_lists_are_errors() {
        let cases = [
            (
                vec![
                    task("a", &["b"]),
                    task("b", &["c"]),
                    task("c", &["a"]),
                    task("d", &[]),
                ],
                "work items depend on each other in a cycle: a -> b -> c -> a",
            ),
            (
                vec![task("a", &["a"])],
                "work items depend on each other in a cycle: a -> a",
            ),
            (
                vec![task("a", &["zzz"])],
                "work item `a` depends on `zzz`, which is not in the list",
            ),
            (
                vec![task("a", &[]), task("a", &[])],
                "work item id `a` is used twice",
            ),
        ];
        for (items, expected) in cases {
            let error = WorkDag::build(&items)
                .map(|_| ())
                .map_err(|error| error.to_string());
            assert_eq!(error, Err(expected.to_string()));
        }
    }

    #[test]
    fn items_without_ids_are_known_by_position() {
        let dag = dag(&[json!("first"), json!({"goal": "x"})]);
        assert_eq!(dag.ids(), ["1", "2"]);
        assert_eq!(dag.ready(), ["1", "2"]);
        assert_eq!(item_id(&json!({"id": 7}), 4), "5");
    }
}
