//! The scheduler's view of a gate evaluation: [`crate::engine::gate::evaluate_gate`] plus the work items each issue names, so a rerun can be limited to them.
//!
//! A failing `every VAR in candidate.items: BODY` rule names the items BODY does not hold
//! for; a failing rule that reads `candidate.failed` or `candidate.skipped` names the
//! failed and skipped items. Issues of other rules name no item (a rerun of the whole step).

use std::collections::BTreeMap;

use charter_compiler::graph::{ExprIr, GateIr, NameIr, QuantifierIr};
use serde_json::Value;

use crate::engine::eval::{Bindings, evaluate_bool};
use crate::engine::gate::{GateEvaluation, evaluate_gate};
use crate::formats::trace::{EventKind, IssueSeverity};

/// A gate's evaluation and the items its issues name.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    pub evaluation: GateEvaluation,
    /// Issue code -> the item ids it names (absent or empty: none named).
    pub items: BTreeMap<String, Vec<String>>,
}

impl Judged {
    pub fn passed(&self) -> bool {
        self.evaluation.passed
    }

    pub fn score(&self) -> Option<f64> {
        self.evaluation.score
    }

    pub fn hard_failure(&self) -> bool {
        self.evaluation.hard_failure()
    }

    /// Error-level issue codes, in the gate's order, without repeats.
    pub fn error_codes(&self) -> Vec<String> {
        self.evaluation.error_codes()
    }

    /// Warning-level issue codes, in the gate's order, without repeats.
    pub fn warning_codes(&self) -> Vec<String> {
        let mut codes: Vec<String> = Vec::new();
        for issue in &self.evaluation.issues {
            if issue.severity == IssueSeverity::Warning && !codes.contains(&issue.code) {
                codes.push(issue.code.clone());
            }
        }
        codes
    }

    /// The `gate` event, each issue with the items it names.
    pub fn event(&self, candidate: &str, hash: &str, item: Option<&str>) -> EventKind {
        let mut event = self.evaluation.to_event(candidate, hash, item);
        if let EventKind::Gate { issues, .. } = &mut event {
            self.name_items(issues);
        }
        event
    }

    /// Gives each issue the work items its rule named, where it named any.
    fn name_items(&self, issues: &mut [crate::formats::trace::Issue]) {
        for issue in issues {
            if let Some(named) = self.items.get(&issue.code)
                && !named.is_empty()
            {
                issue.items = named.clone();
            }
        }
    }

    /// The issues as feedback carries them: the `gate` event's issues as JSON,
    /// `{code, severity, gate, rule, message, detail?, items}` (`item`: the work item of a
    /// per-item check), so feedback and the trace show one shape.
    pub fn issues(&self, item: Option<&str>) -> Vec<Value> {
        let mut issues = self.evaluation.trace_issues(item);
        self.name_items(&mut issues);
        issues
            .iter()
            .filter_map(|issue| serde_json::to_value(issue).ok())
            .collect()
    }
}

/// Evaluates gate `name` in `bindings`. `item_ids` are the ids of `candidate.items`, in
/// order; `failed_ids` the candidate's failed and skipped items.
pub fn judge(
    name: &str,
    gate: &GateIr,
    bindings: &Bindings,
    item_ids: &[String],
    failed_ids: &[String],
) -> Judged {
    let evaluation = evaluate_gate(name, gate, bindings);
    let mut items: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (rule, outcome) in gate.rules.iter().zip(&evaluation.rules) {
        if outcome.holds {
            continue;
        }
        let mut named = failing_items(&rule.expr, bindings, item_ids);
        if mentions_failed(&rule.expr) {
            named.extend(failed_ids.iter().cloned());
        }
        let entry = items.entry(rule.code.clone()).or_default();
        entry.extend(named);
        entry.sort();
        entry.dedup();
    }
    Judged { evaluation, items }
}

/// For `every VAR in candidate.items: BODY` (possibly inside `and`/`or`), the ids of the
/// items BODY does not hold for.
fn failing_items(expr: &ExprIr, bindings: &Bindings, item_ids: &[String]) -> Vec<String> {
    match expr {
        ExprIr::Binary { lhs, rhs, .. } => {
            let mut items = failing_items(lhs, bindings, item_ids);
            items.extend(failing_items(rhs, bindings, item_ids));
            items
        }
        ExprIr::Quantifier {
            quantifier: QuantifierIr::Every,
            var,
            over,
            body,
        } if is_candidate_items(over) => {
            let Some(Value::Array(items)) =
                bindings.candidate.as_ref().and_then(|c| c.get("items"))
            else {
                return Vec::new();
            };
            let mut failing = Vec::new();
            for (index, item) in items.iter().enumerate() {
                let mut scope = bindings.clone();
                scope.set(NameIr::Local(var.clone()), item.clone());
                if !evaluate_bool(body, &scope).unwrap_or(false)
                    && let Some(id) = item_ids.get(index)
                {
                    failing.push(id.clone());
                }
            }
            failing
        }
        _ => Vec::new(),
    }
}

fn is_candidate_items(expr: &ExprIr) -> bool {
    matches!(
        expr,
        ExprIr::Path { root: NameIr::Candidate, fields } if fields.len() == 1 && fields.first().is_some_and(|f| f == "items")
    )
}

/// True when `expr` reads `candidate.failed` or `candidate.skipped`.
fn mentions_failed(expr: &ExprIr) -> bool {
    match expr {
        ExprIr::Path {
            root: NameIr::Candidate,
            fields,
        } => fields
            .first()
            .is_some_and(|field| field == "failed" || field == "skipped"),
        ExprIr::Path { .. } | ExprIr::Literal { .. } | ExprIr::Variant { .. } => false,
        ExprIr::List { items } => items.iter().any(mentions_failed),
        ExprIr::Record { fields } => fields.values().any(mentions_failed),
        ExprIr::Unary { operand, .. } => mentions_failed(operand),
        ExprIr::Binary { lhs, rhs, .. } => mentions_failed(lhs) || mentions_failed(rhs),
        ExprIr::Call { args, .. } => args.iter().any(mentions_failed),
        ExprIr::Quantifier { over, body, .. } => mentions_failed(over) || mentions_failed(body),
    }
}
