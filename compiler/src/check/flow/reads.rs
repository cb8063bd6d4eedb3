//! What a gate may read (E017): only the outputs of steps that can have run before it is
//! evaluated, that is the steps with a path of written transitions to the `gate` step (or,
//! for a per-item `check`, to its `each` step). A gate's subject must be such a step too.

use std::collections::BTreeSet;

use petgraph::graph::NodeIndex;

use super::for_each_root;
use super::graph::StepGraph;
use crate::check::Symbols;
use crate::diagnostics::{Code, Diagnostic};
use crate::syntax::ast::{Expr, Gate, GateRule, Step, StepBody};

/// Names a gate's expressions see that are not steps (they shadow a step of that name).
const GATE_NAMES: [&str; 5] = ["request", "candidate", "best", "run", "score"];

/// Every expression of a gate that is evaluated from data: its rules and their details,
/// scores and `pass when`.
fn gate_expressions(gate: &Gate) -> impl Iterator<Item = &Expr> {
    gate.rules
        .iter()
        .flat_map(|rule| match rule {
            GateRule::Check { expr, detail, .. } | GateRule::Score { expr, detail, .. } => {
                std::iter::once(expr).chain(detail.as_ref())
            }
        })
        .chain(std::iter::once(&gate.pass_when))
}

/// E017 for every `gate` step and every `each` step with a per-item `check`.
pub(super) fn check(
    symbols: &Symbols<'_>,
    step_graph: &StepGraph<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for (position, step) in step_graph.steps.iter().enumerate() {
        let node = NodeIndex::new(position);
        match &step.body {
            StepBody::Gate { gate } => {
                let Some(gate) = symbols.gates.get(gate.name.as_str()) else {
                    continue;
                };
                let before = names(step_graph, step_graph.upstream(node));
                check_subject(step, gate, &before, diagnostics);
                check_reads(symbols, step, gate, &before, &[], diagnostics);
            }
            StepBody::Each {
                check: Some(item_check),
                ..
            } => {
                let Some(gate) = symbols.gates.get(item_check.gate.name.as_str()) else {
                    continue;
                };
                let mut before = names(step_graph, &step_graph.leading_to(node));
                // The step whose items are checked is running: reading it is the check's
                // own business (its items), not a step that has not run.
                before.insert(step.name.name.as_str());
                let mut locals = vec!["item"];
                if let Some(by) = &item_check.by {
                    locals.push(by.name.as_str());
                }
                check_reads(symbols, step, gate, &before, &locals, diagnostics);
            }
            _ => {}
        }
    }
}

fn names<'a>(step_graph: &StepGraph<'a>, nodes: &[NodeIndex]) -> BTreeSet<&'a str> {
    nodes
        .iter()
        .filter_map(|node| step_graph.step_name(*node))
        .collect()
}

/// The subject of a gate evaluated by a `gate` step must run before that step.
fn check_subject(
    step: &Step,
    gate: &Gate,
    before: &BTreeSet<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let subject = gate.subject.name.as_str();
    if before.contains(subject) {
        return;
    }
    diagnostics.push(
        Diagnostic::new(
            Code::E017,
            gate.subject.span,
            format!(
                "gate `{}` judges step `{subject}`, which cannot have run before gate step `{}`",
                gate.name.name, step.name.name
            ),
        )
        .with_label(format!(
            "no path of transitions leads from `{subject}` to `{}`",
            step.name.name
        ))
        .with_note(
            step.name.span,
            format!(
                "gate step `{}` evaluates `{}` here",
                step.name.name, gate.name.name
            ),
        )
        .with_help(format!(
            "judge a step that runs before `{}` (`gate {} on STEP`), or route `{subject}` to `{}`",
            step.name.name, gate.name.name, step.name.name
        )),
    );
}

/// Every step a gate's expressions read must be in `before`.
fn check_reads(
    symbols: &Symbols<'_>,
    step: &Step,
    gate: &Gate,
    before: &BTreeSet<&str>,
    locals: &[&str],
    diagnostics: &mut Vec<Diagnostic>,
) {
    let evaluated_by = match &step.body {
        StepBody::Each { .. } => format!("the per-item check of `{}`", step.name.name),
        _ => format!("gate step `{}`", step.name.name),
    };
    for expression in gate_expressions(gate) {
        for_each_root(expression, &mut |root, _| {
            let name = root.name.as_str();
            if GATE_NAMES.contains(&name)
                || locals.contains(&name)
                || before.contains(name)
                || !symbols.steps.contains_key(name)
            {
                return;
            }
            diagnostics.push(
                Diagnostic::new(
                    Code::E017,
                    root.span,
                    format!(
                        "gate `{}` reads step `{name}`, which cannot have run before {evaluated_by}",
                        gate.name.name
                    ),
                )
                .with_label(format!("`{name}` has no output when the gate is evaluated"))
                .with_note(step.name.span, format!("the gate is evaluated here, by `{}`", step.name.name))
                .with_help(format!(
                    "a gate reads only steps with a path of transitions to where it is evaluated: \
                     read a step that runs before `{}`, or move `{name}` before it in the flow",
                    step.name.name
                )),
            );
        });
    }
}
