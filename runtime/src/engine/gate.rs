//! Gate evaluation from data (DESIGN §4 "Gates"): hard and warn rules, weighted-mean score, `pass when`, and the issues raised.
//!
//! A pure function of the gate and an [`Env`]: the scheduler binds `candidate` (or `item`
//! and the `by` role for a per-item check) and calls [`evaluate_gate`]; the result is a
//! value, never an error, because a gate failing is expected control flow. Rules:
//! - A hard rule that is false raises an error-level issue with its code; a warn rule a
//!   warning. A rule that cannot be evaluated (an [`crate::engine::eval::EvalError`]) does not
//!   hold, and its issue carries the error's message.
//! - `score` is the weighted mean of the score rules. A score that cannot be evaluated
//!   counts as 0 (missing evidence never raises a score) and raises its `below` issue.
//!   A score below its threshold raises its `below` issue (error level).
//! - The gate passes only if every hard rule holds and `pass when` holds (with `score`
//!   bound): no average hides a hard failure. Failing only `pass when` raises no issue.

use charter_compiler::graph::{GateIr, NameIr, SeverityIr};
use serde_json::Value;

use crate::engine::eval::{Env, evaluate, evaluate_bool, evaluate_number};
use crate::formats::trace::{
    EventKind, Issue, IssueSeverity, RuleResult, RuleSeverity, ScoreResult,
};

/// The evaluation of one gate on one subject.
#[derive(Clone, Debug, PartialEq)]
pub struct GateEvaluation {
    pub gate: String,
    /// Hard and warn rules, in source order.
    pub rules: Vec<RuleOutcome>,
    /// Score rules, in source order.
    pub scores: Vec<ScoreOutcome>,
    /// The weighted mean of the scores; `None` when the gate has no score rules.
    pub score: Option<f64>,
    /// Whether `pass when` held.
    pub pass_when: bool,
    /// Why `pass when` could not be evaluated, if it could not.
    pub pass_when_error: Option<String>,
    /// Every hard rule holds and `pass when` holds.
    pub passed: bool,
    /// Issues raised, rules first, then scores, in source order.
    pub issues: Vec<GateIssue>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RuleOutcome {
    pub name: String,
    pub severity: SeverityIr,
    pub code: String,
    pub holds: bool,
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ScoreOutcome {
    pub name: String,
    pub weight: f64,
    /// `None` when the expression could not be evaluated.
    pub value: Option<f64>,
    pub error: Option<String>,
}

/// An issue a gate raised.
#[derive(Clone, Debug, PartialEq)]
pub struct GateIssue {
    pub code: String,
    pub severity: IssueSeverity,
    /// The rule or score that raised it.
    pub rule: String,
    pub message: String,
    /// The value of the rule's `detail` expression (its evidence), when it has one.
    pub detail: Option<Value>,
}

impl GateEvaluation {
    /// The codes of the error-level issues, in order, without repeats (what repair maps).
    pub fn error_codes(&self) -> Vec<String> {
        let mut codes: Vec<String> = Vec::new();
        for issue in &self.issues {
            if issue.severity == IssueSeverity::Error && !codes.contains(&issue.code) {
                codes.push(issue.code.clone());
            }
        }
        codes
    }

    /// Whether any hard rule failed (a candidate with a hard failure is never `best`).
    pub fn hard_failure(&self) -> bool {
        self.rules
            .iter()
            .any(|rule| rule.severity == SeverityIr::Hard && !rule.holds)
    }

    /// The trace event of this evaluation of candidate `candidate` with hash `hash`;
    /// `item` is set on issues of a per-item check.
    pub fn to_event(&self, candidate: &str, hash: &str, item: Option<&str>) -> EventKind {
        EventKind::Gate {
            gate: self.gate.clone(),
            candidate: candidate.to_string(),
            hash: hash.to_string(),
            passed: self.passed,
            score: self.score,
            rules: self
                .rules
                .iter()
                .map(|rule| RuleResult {
                    name: rule.name.clone(),
                    severity: match rule.severity {
                        SeverityIr::Hard => RuleSeverity::Hard,
                        SeverityIr::Warn => RuleSeverity::Warn,
                    },
                    holds: rule.holds,
                    error: rule.error.clone(),
                })
                .collect(),
            scores: self
                .scores
                .iter()
                .map(|score| ScoreResult {
                    name: score.name.clone(),
                    weight: score.weight,
                    value: score.value,
                    error: score.error.clone(),
                })
                .collect(),
            issues: self.trace_issues(item),
        }
    }

    /// The issues as the `gate` event shows them (`item`: the work item of a per-item
    /// check).
    pub fn trace_issues(&self, item: Option<&str>) -> Vec<Issue> {
        self.issues
            .iter()
            .map(|issue| Issue {
                code: issue.code.clone(),
                severity: issue.severity,
                gate: Some(self.gate.clone()),
                rule: issue.rule.clone(),
                message: Some(issue.message.clone()),
                detail: issue.detail.clone(),
                items: item.map(str::to_string).into_iter().collect(),
            })
            .collect()
    }
}

/// The value of a failed rule's `detail` expression. A detail that cannot be evaluated
/// is no evidence: the issue goes without one, and its message says why.
fn evidence(
    detail: Option<&charter_compiler::graph::ExprIr>,
    env: &dyn Env,
    message: String,
) -> (Option<Value>, String) {
    match detail.map(|detail| evaluate(detail, env)) {
        None => (None, message),
        Some(Ok(value)) => (Some(value), message),
        Some(Err(error)) => (
            None,
            format!("{message} (its detail could not be evaluated: {error})"),
        ),
    }
}

/// Evaluates gate `name` in `env` (which binds the gate's subject).
pub fn evaluate_gate(name: &str, gate: &GateIr, env: &dyn Env) -> GateEvaluation {
    let mut issues = Vec::new();
    let mut rules = Vec::new();
    for rule in &gate.rules {
        let (holds, error) = match evaluate_bool(&rule.expr, env) {
            Ok(holds) => (holds, None),
            Err(error) => (false, Some(error.to_string())),
        };
        if !holds {
            let message = match &error {
                Some(error) => format!("rule `{}` could not be evaluated: {error}", rule.name),
                None => format!("rule `{}` does not hold", rule.name),
            };
            let (detail, message) = evidence(rule.detail.as_ref(), env, message);
            issues.push(GateIssue {
                code: rule.code.clone(),
                severity: match rule.severity {
                    SeverityIr::Hard => IssueSeverity::Error,
                    SeverityIr::Warn => IssueSeverity::Warning,
                },
                rule: rule.name.clone(),
                message,
                detail,
            });
        }
        rules.push(RuleOutcome {
            name: rule.name.clone(),
            severity: rule.severity,
            code: rule.code.clone(),
            holds,
            error,
        });
    }

    let mut scores = Vec::new();
    let (mut weighted, mut weights) = (0.0, 0.0);
    for score in &gate.scores {
        let (value, error) = match evaluate_number(&score.expr, env) {
            Ok(value) => (Some(value), None),
            Err(error) => (None, Some(error.to_string())),
        };
        weighted += score.weight * value.unwrap_or(0.0);
        weights += score.weight;
        if let Some(below) = &score.below {
            let message = match (value, &error) {
                (Some(value), _) if value < below.threshold => Some(format!(
                    "score `{}` is {value}, below {}",
                    score.name, below.threshold
                )),
                (None, Some(error)) => Some(format!(
                    "score `{}` could not be evaluated: {error}",
                    score.name
                )),
                _ => None,
            };
            if let Some(message) = message {
                let (detail, message) = evidence(below.detail.as_ref(), env, message);
                issues.push(GateIssue {
                    code: below.code.clone(),
                    severity: IssueSeverity::Error,
                    rule: score.name.clone(),
                    message,
                    detail,
                });
            }
        }
        scores.push(ScoreOutcome {
            name: score.name.clone(),
            weight: score.weight,
            value,
            error,
        });
    }
    let score = (!gate.scores.is_empty() && weights > 0.0).then(|| weighted / weights);

    let with_score = WithScore {
        inner: env,
        score: score
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
    };
    let (pass_when, pass_when_error) = match evaluate_bool(&gate.pass_when, &with_score) {
        Ok(holds) => (holds, None),
        Err(error) => (false, Some(error.to_string())),
    };
    let hard_ok = rules
        .iter()
        .all(|rule| rule.severity != SeverityIr::Hard || rule.holds);
    GateEvaluation {
        gate: name.to_string(),
        rules,
        scores,
        score,
        pass_when,
        pass_when_error,
        passed: hard_ok && pass_when,
        issues,
    }
}

/// `env` with `score` bound.
struct WithScore<'a> {
    inner: &'a dyn Env,
    score: Option<Value>,
}

impl Env for WithScore<'_> {
    fn get(&self, name: &NameIr) -> Option<&Value> {
        match name {
            NameIr::Score => self.score.as_ref(),
            other => self.inner.get(other),
        }
    }
}

#[cfg(test)]
mod tests;
