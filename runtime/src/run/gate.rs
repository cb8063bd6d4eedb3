//! Gate evaluation from data: hard and warn rules, the weighted-mean score, the pass rule, and the issues they raise.
//!
//! A gate passes only if every hard rule holds and `pass when` holds, so no average
//! hides a hard failure. A rule that cannot be evaluated (an error in its expression)
//! does not hold: a gate never passes on something it could not check.

use charter_compiler::graph::{
    ExprIr, GateIr, NameIr, QuantifierIr, SeverityIr,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::eval::{Bindings, evaluate_bool, evaluate_number};
use crate::trace::{self, EventKind, IssueSeverity, RuleSeverity};

/// How serious an issue is: errors are what repair acts on; warnings are only reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueLevel {
    Error,
    Warning,
}

/// An issue a gate raised.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Issue {
    pub code: String,
    pub level: IssueLevel,
    /// The rule or score that raised it.
    pub rule: String,
    /// True when a hard rule raised it.
    pub hard: bool,
    /// The work items the issue is about (ids), when the rule names them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
}

/// One rule's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleOutcome {
    pub name: String,
    pub severity: &'static str,
    pub held: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One score's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScoreOutcome {
    pub name: String,
    pub weight: f64,
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A gate's evaluation: the event the trace records and what repair decides on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateResult {
    pub gate: String,
    pub rules: Vec<RuleOutcome>,
    pub scores: Vec<ScoreOutcome>,
    /// The weighted mean of the scores (`None` when the gate has none).
    pub score: Option<f64>,
    pub pass_when: bool,
    pub passed: bool,
    pub issues: Vec<Issue>,
}

impl GateResult {
    /// True when a hard rule failed.
    pub fn hard_failed(&self) -> bool {
        self.issues.iter().any(|issue| issue.hard)
    }

    /// The codes of the error-level issues, sorted and deduplicated.
    pub fn error_codes(&self) -> Vec<String> {
        let mut codes: Vec<String> = self
            .issues
            .iter()
            .filter(|issue| issue.level == IssueLevel::Error)
            .map(|issue| issue.code.clone())
            .collect();
        codes.sort();
        codes.dedup();
        codes
    }

    /// The `gate` trace event for this evaluation of `candidate` (a candidate id, or an
    /// item id for a per-item check) whose hash is `hash`. An issue naming several items
    /// is written once per item.
    pub fn event(&self, candidate: &str, hash: &str, item: Option<&str>) -> EventKind {
        let rules = self
            .rules
            .iter()
            .map(|rule| trace::RuleResult {
                name: rule.name.clone(),
                severity: if rule.severity == "hard" {
                    RuleSeverity::Hard
                } else {
                    RuleSeverity::Warn
                },
                holds: rule.held,
                error: rule.error.clone(),
            })
            .collect();
        let scores = self
            .scores
            .iter()
            .map(|score| trace::ScoreResult {
                name: score.name.clone(),
                weight: score.weight,
                value: score.value,
                error: score.error.clone(),
            })
            .collect();
        let mut issues = Vec::new();
        for issue in &self.issues {
            let severity = match issue.level {
                IssueLevel::Error => IssueSeverity::Error,
                IssueLevel::Warning => IssueSeverity::Warning,
            };
            let named: Vec<Option<String>> = if issue.items.is_empty() {
                vec![item.map(str::to_string)]
            } else {
                issue.items.iter().cloned().map(Some).collect()
            };
            for item in named {
                issues.push(trace::Issue {
                    code: issue.code.clone(),
                    severity,
                    rule: issue.rule.clone(),
                    item,
                    message: None,
                });
            }
        }
        EventKind::Gate {
            gate: self.gate.clone(),
            candidate: candidate.to_string(),
            hash: hash.to_string(),
            passed: self.passed,
            score: self.score,
            rules,
            scores,
            issues,
        }
    }

    /// The issues as the `feedback` a rerun role's template gets: `[{code, severity, rule, items?}]`.
    pub fn feedback(&self) -> Value {
        serde_json::to_value(&self.issues).unwrap_or(Value::Null)
    }

    /// The evaluation as a JSON value (the gate step's output).
    pub fn value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| json!({ "gate": self.gate }))
    }
}

/// Evaluates `gate` in `bindings`. `item_ids` are the ids of `candidate.items`, in order,
/// so that a failing `every r in candidate.items: ...` can name the items it failed on;
/// `failed_ids` are the candidate's failed and skipped items, named by a failing rule that
/// reads `candidate.failed` or `candidate.skipped`.
pub fn evaluate_gate(
    name: &str,
    gate: &GateIr,
    bindings: &Bindings,
    item_ids: &[String],
    failed_ids: &[String],
) -> GateResult {
    let mut rules = Vec::new();
    let mut issues = Vec::new();
    let mut hard_ok = true;
    for rule in &gate.rules {
        let (held, error) = match evaluate_bool(&rule.expr, bindings) {
            Ok(held) => (held, None),
            Err(error) => (false, Some(error.to_string())),
        };
        let hard = rule.severity == SeverityIr::Hard;
        if !held {
            if hard {
                hard_ok = false;
            }
            let mut items = failing_items(&rule.expr, bindings, item_ids);
            if mentions_failed(&rule.expr) {
                items.extend(failed_ids.iter().cloned());
            }
            items.sort();
            items.dedup();
            issues.push(Issue {
                code: rule.code.clone(),
                level: if hard {
                    IssueLevel::Error
                } else {
                    IssueLevel::Warning
                },
                rule: rule.name.clone(),
                hard,
                items,
            });
        }
        rules.push(RuleOutcome {
            name: rule.name.clone(),
            severity: if hard { "hard" } else { "warn" },
            held,
            error,
        });
    }

    let mut scores = Vec::new();
    let mut weighted = 0.0;
    let mut weights = 0.0;
    for score in &gate.scores {
        let (value, error) = match evaluate_number(&score.expr, bindings) {
            Ok(value) if value.is_finite() => (Some(value), None),
            Ok(_) => (None, Some("the score is not a finite number".to_string())),
            Err(error) => (None, Some(error.to_string())),
        };
        // A score that cannot be computed counts as 0: a gate never passes on a
        // dimension it could not measure.
        weighted += score.weight * value.unwrap_or(0.0);
        weights += score.weight;
        if let Some(below) = &score.below
            && value.is_none_or(|value| value < below.threshold)
        {
            issues.push(Issue {
                code: below.code.clone(),
                level: IssueLevel::Error,
                rule: score.name.clone(),
                hard: false,
                items: Vec::new(),
            });
        }
        scores.push(ScoreOutcome {
            name: score.name.clone(),
            weight: score.weight,
            value,
            error,
        });
    }
    let score = (weights > 0.0).then(|| round_score(weighted / weights));

    let mut scope = bindings.clone();
    scope.set(
        NameIr::Score,
        score.map_or(Value::Null, |score| json!(score)),
    );
    let pass_when = evaluate_bool(&gate.pass_when, &scope).unwrap_or(false);
    GateResult {
        gate: name.to_string(),
        rules,
        scores,
        score,
        pass_when,
        passed: hard_ok && pass_when,
        issues,
    }
}

/// Rounds a score to 6 decimals so that traces do not carry float noise.
fn round_score(score: f64) -> f64 {
    (score * 1_000_000.0).round() / 1_000_000.0
}

/// For `every VAR in candidate.items: BODY` (possibly inside `and`), the ids of the
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
            let Some(Value::Array(items)) = bindings.candidate.as_ref().and_then(|c| c.get("items"))
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
    matches!(expr, ExprIr::Path { root: NameIr::Candidate, fields } if fields.first().is_some_and(|f| f == "items") && fields.len() == 1)
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
