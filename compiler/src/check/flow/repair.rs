//! Repair coverage and repair arms: every issue code a repaired gate can emit has an action
//! (E008); every arm names codes some gate emits and reruns a step upstream of the gate
//! (E009); the repair block is used by some `fail -> repair` (E009).

use std::collections::BTreeSet;

use petgraph::graph::NodeIndex;

use super::codes::{arm_applies, gate_codes};
use super::graph::StepGraph;
use super::{keyword_span, name_list};
use crate::check::Symbols;
use crate::diagnostics::{Code, Diagnostic, Span, did_you_mean};
use crate::syntax::ast::{Action, FailTarget, Gate, Next, Repair, RepairPattern, Step, StepBody};

/// A gate step whose failures go to the repair block.
struct RepairedStep<'a> {
    step: &'a Step,
    gate: &'a Gate,
    /// The `repair` of `fail -> repair`.
    fail_span: Span,
    /// The steps that lead to this one (the steps a `rerun` may target), in flow order.
    upstream: &'a [NodeIndex],
}

pub(super) fn check(
    symbols: &Symbols<'_>,
    step_graph: &StepGraph<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut repaired = Vec::new();
    let mut fail_spans = Vec::new();
    for (position, step) in step_graph.steps.iter().enumerate() {
        let (StepBody::Gate { gate }, Next::PassFail { fail, .. }) = (&step.body, &step.next)
        else {
            continue;
        };
        let FailTarget::Repair(fail_span) = fail else {
            continue;
        };
        fail_spans.push((*step, *fail_span, gate));
        if let Some(gate) = symbols.gates.get(gate.name.as_str()) {
            let node = NodeIndex::new(position);
            repaired.push(RepairedStep {
                step,
                gate,
                fail_span: *fail_span,
                upstream: step_graph.upstream(node),
            });
        }
    }

    let Some(repair) = symbols.repair else {
        for (step, fail_span, gate) in fail_spans {
            diagnostics.push(
                Diagnostic::new(
                    Code::E008,
                    fail_span,
                    format!(
                        "gate step `{}` sends failures to `repair`, but the spec has no `repair` block",
                        step.name.name
                    ),
                )
                .with_label("no repair block to go to")
                .with_help(format!(
                    "add `repair {{ rounds N ... }}` with an action for each issue code of gate `{}`",
                    gate.name
                )),
            );
        }
        return;
    };

    if fail_spans.is_empty() {
        report_unused(repair, diagnostics);
    }
    check_coverage(repair, &repaired, step_graph, diagnostics);
    check_arm_codes(symbols, repair, diagnostics);
    check_rerun_targets(repair, &repaired, step_graph, diagnostics);
}

/// The spec has a repair block but no flow to use it.
pub(super) fn check_unused_without_flow(repair: &Repair, diagnostics: &mut Vec<Diagnostic>) {
    report_unused(repair, diagnostics);
}

fn report_unused(repair: &Repair, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.push(
        Diagnostic::new(
            Code::E009,
            keyword_span(repair.span, "repair"),
            "the `repair` block is never used",
        )
        .with_label("no gate step has `fail -> repair`")
        .with_help(
            "send a gate step's failures to it (`pass -> ... fail -> repair`), or remove the block",
        ),
    );
}

/// E008: a code a repaired gate can emit with no arm (and no `_` arm).
fn check_coverage(
    repair: &Repair,
    repaired: &[RepairedStep<'_>],
    step_graph: &StepGraph<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut covered = BTreeSet::new();
    for arm in &repair.arms {
        match &arm.pattern {
            RepairPattern::Codes(codes) => {
                covered.extend(codes.iter().map(|code| code.name.as_str()));
            }
            RepairPattern::Wildcard(_) => return,
        }
    }
    let mut seen_gates = BTreeSet::new();
    for repaired_step in repaired {
        if !seen_gates.insert(repaired_step.gate.name.name.as_str()) {
            continue;
        }
        let suggestion = rerun_suggestion(repaired_step, step_graph);
        let mut seen_codes = BTreeSet::new();
        for code in gate_codes(repaired_step.gate) {
            if covered.contains(code.name.as_str()) || !seen_codes.insert(code.name.as_str()) {
                continue;
            }
            diagnostics.push(
                Diagnostic::new(
                    Code::E008,
                    code.span,
                    format!(
                        "issue code `{}` of gate `{}` has no repair action",
                        code.name, repaired_step.gate.name.name
                    ),
                )
                .with_label("emitted here")
                .with_note(
                    repaired_step.fail_span,
                    format!("failures of `{}` go to repair here", repaired_step.step.name.name),
                )
                .with_help(format!(
                    "add `{} -> rerun {suggestion}` (or another action) to `repair`, or a `_ -> ...` arm",
                    code.name
                )),
            );
        }
    }
}

/// The step to suggest rerunning for a repaired gate: its subject when that feeds it,
/// else the nearest step that does.
fn rerun_suggestion(repaired_step: &RepairedStep<'_>, step_graph: &StepGraph<'_>) -> String {
    let upstream = repaired_step.upstream;
    let subject = repaired_step.gate.subject.name.as_str();
    if let Some(node) = step_graph.node_of(subject)
        && upstream.contains(&node)
    {
        return subject.to_string();
    }
    upstream
        .last()
        .and_then(|node| step_graph.step_name(*node))
        .unwrap_or("STEP")
        .to_string()
}

/// E009: an arm naming a code no gate emits.
fn check_arm_codes(symbols: &Symbols<'_>, repair: &Repair, diagnostics: &mut Vec<Diagnostic>) {
    let emitted: BTreeSet<&str> = symbols
        .gates
        .values()
        .flat_map(|gate| gate_codes(gate))
        .map(|code| code.name.as_str())
        .collect();
    for arm in &repair.arms {
        let RepairPattern::Codes(codes) = &arm.pattern else {
            continue;
        };
        for code in codes {
            if emitted.contains(code.name.as_str()) {
                continue;
            }
            let help = did_you_mean(&code.name, emitted.iter().copied()).unwrap_or_else(|| {
                format!(
                    "remove `{}` from this arm, or make a gate emit it (`else {}`)",
                    code.name, code.name
                )
            });
            diagnostics.push(
                Diagnostic::new(
                    Code::E009,
                    code.span,
                    format!("no gate emits issue code `{}`", code.name),
                )
                .with_label("this code never occurs")
                .with_help(help),
            );
        }
    }
}

/// E009: `rerun X` where X does not lead to a gate step whose failures this arm repairs.
fn check_rerun_targets(
    repair: &Repair,
    repaired: &[RepairedStep<'_>],
    step_graph: &StepGraph<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for arm in &repair.arms {
        let Action::Rerun { step: target, .. } = &arm.action else {
            continue;
        };
        let Some(target_node) = step_graph.node_of(&target.name) else {
            continue;
        };
        let relevant = repaired
            .iter()
            .filter(|repaired_step| arm_applies(arm, Some(repaired_step.gate)));
        for repaired_step in relevant {
            let upstream = repaired_step.upstream;
            if upstream.contains(&target_node) {
                continue;
            }
            let candidates: Vec<&str> = upstream
                .iter()
                .filter_map(|node| step_graph.step_name(*node))
                .collect();
            let help = if candidates.is_empty() {
                format!(
                    "no step leads to `{}`; rerun a step that runs before it",
                    repaired_step.step.name.name
                )
            } else {
                format!(
                    "rerun a step that leads to `{}`: {}",
                    repaired_step.step.name.name,
                    name_list(candidates.iter().copied())
                )
            };
            diagnostics.push(
                Diagnostic::new(
                    Code::E009,
                    target.span,
                    format!(
                        "`rerun {}` targets a step that is not upstream of gate step `{}`",
                        target.name, repaired_step.step.name.name
                    ),
                )
                .with_label(format!(
                    "`{}` does not lead to `{}`",
                    target.name, repaired_step.step.name.name
                ))
                .with_note(
                    repaired_step.fail_span,
                    format!(
                        "failures of `{}` go to repair here",
                        repaired_step.step.name.name
                    ),
                )
                .with_help(help),
            );
            break;
        }
    }
}
