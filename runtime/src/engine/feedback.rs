//! The `feedback` a role is sent back with (DESIGN §8.2): why it runs again, the issues with their evidence, what the judges said, its own previous output and a person's answer, as a value and as Markdown.
//!
//! Pure functions: the scheduler decides *when* a role gets feedback (a gate rerun `with
//! feedback`, a stage retry, `replan`, a contract violation, a person's answer) and this
//! module builds *what* it gets. The value is plain JSON:
//! `{reason, round, issues, judges, previous?, human?}`, each issue
//! `{code, severity, gate?, rule, message, detail?, items}`. [`markdown`] is what
//! `{{ feedback }}` prints on its own.
//!
//! When feedback flows, where DESIGN §8 leaves a choice (the scheduler's rules):
//! - A step's pending feedback is taken by its next run and cleared when a new round
//!   starts; only the step a decision names gets it (the steps after it run fresh). A plain
//!   `rerun X` gives none; `rerun X with feedback`, `replan` (to the entry step), a stage
//!   retry, an approved repair `ask` (reason `human`: the gate's issues and the person's
//!   answer), a warning's `rerun` (always with feedback) and an `on_error` route (reason
//!   `error`, one `STEP_FAILED` issue) give it.
//! - `judges` are the outputs, as bound when the gate ran, of the steps the gate's
//!   expressions read ([`steps_read`]); a per-item check adds the `by` role's verdict.
//!   `previous` is the target step's output in the failed round (an item's own output for
//!   an `each` step; `none` for an item that failed).
//! - A retry after a contract violation gets reason `contract`: the violations as
//!   `CONTRACT_VIOLATION` issues, then the issues of the feedback the call already had (a
//!   fix that breaks the format must still fix them); its judges and the person's answer
//!   are kept; `previous` is the broken answer when it parsed as JSON.
//! - After an `ask` step, the role step the flow goes to next gets `feedback.human`
//!   (reason `human` unless it already had feedback), with its own output as `previous`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use charter_compiler::graph::{ExprIr, GateIr, NameIr};
use serde_json::{Map, Value, json};

/// Why a role runs again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A gate failed and the repair table said `rerun X with feedback`.
    Gate,
    /// A per-item check failed and the item is retried (a stage retry).
    Check,
    /// A gate failed and the repair table said `replan`.
    Replan,
    /// A person's answer led here (an `ask` step or a repair `ask` arm).
    Human,
    /// The role's previous answer broke its output contract.
    Contract,
    /// Another step failed and its `on_error -> STEP` led here: the issue is the error.
    Error,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Gate => "gate",
            Reason::Check => "check",
            Reason::Replan => "replan",
            Reason::Human => "human",
            Reason::Contract => "contract",
            Reason::Error => "error",
        }
    }
}

/// The feedback of one role call, before `previous` is chosen for an item.
#[derive(Clone, Debug, PartialEq)]
pub struct Feedback {
    pub reason: Reason,
    /// The round whose result is being fixed.
    pub round: u64,
    /// What failed, with details (see [`issue`]).
    pub issues: Vec<Value>,
    /// In that round, the output of every step the failing gate (or check) read.
    pub judges: BTreeMap<String, Value>,
    /// The role's own output being fixed.
    pub previous: Option<Value>,
    /// The person's `Answer`, when a person's decision led here.
    pub human: Option<Value>,
}

impl Feedback {
    pub fn new(reason: Reason, round: u64) -> Feedback {
        Feedback {
            reason,
            round,
            issues: Vec::new(),
            judges: BTreeMap::new(),
            previous: None,
            human: None,
        }
    }

    /// The same feedback for one work item: only the issues that name this item or no
    /// item (a worker sees nothing of the other items), and `previous` given.
    pub fn for_item(&self, item: &str, previous: Option<Value>) -> Feedback {
        let issues = self
            .issues
            .iter()
            .filter(|issue| match issue.get("items").and_then(Value::as_array) {
                Some(items) if !items.is_empty() => {
                    items.iter().any(|named| named.as_str() == Some(item))
                }
                _ => true,
            })
            .cloned()
            .collect();
        Feedback {
            issues,
            previous,
            ..self.clone()
        }
    }

    /// The value templates see as `feedback`.
    pub fn to_value(&self) -> Value {
        self.clone().into_value()
    }

    /// [`Feedback::to_value`], its parts moved, not copied: a call keeps its feedback as
    /// this value, which its prompts read.
    pub fn into_value(self) -> Value {
        let mut record = Map::new();
        record.insert("reason".into(), json!(self.reason.as_str()));
        record.insert("round".into(), json!(self.round));
        record.insert("issues".into(), Value::Array(self.issues));
        record.insert(
            "judges".into(),
            Value::Object(self.judges.into_iter().collect()),
        );
        record.insert("previous".into(), self.previous.unwrap_or(Value::Null));
        record.insert("human".into(), self.human.unwrap_or(Value::Null));
        Value::Object(record)
    }

    /// The feedback a value of [`Feedback::into_value`] holds (a call's feedback, read
    /// again when the call's answer breaks its contract); `none` for a value that is
    /// not one.
    pub fn from_value(value: &Value) -> Option<Feedback> {
        let reason = match value.get("reason")?.as_str()? {
            "gate" => Reason::Gate,
            "check" => Reason::Check,
            "replan" => Reason::Replan,
            "human" => Reason::Human,
            "contract" => Reason::Contract,
            "error" => Reason::Error,
            _ => return None,
        };
        let present = |name: &str| value.get(name).filter(|part| !part.is_null()).cloned();
        Some(Feedback {
            reason,
            round: value.get("round")?.as_u64()?,
            issues: value.get("issues")?.as_array()?.clone(),
            judges: value
                .get("judges")?
                .as_object()?
                .iter()
                .map(|(step, output)| (step.clone(), output.clone()))
                .collect(),
            previous: present("previous"),
            human: present("human"),
        })
    }

    /// The person's answer in a value of [`Feedback::into_value`], if any.
    pub fn human_in(value: &Value) -> Option<Value> {
        value.get("human").filter(|human| !human.is_null()).cloned()
    }
}

/// The feedback of a retry after the answer broke the output contract: each violation
/// an issue (`CONTRACT_VIOLATION`, rule: the contract), then the issues of the feedback
/// the call already had (a fix that breaks the format still has to fix them); its judges
/// and the person's answer are kept. `previous` is the answer, when it parsed as JSON.
pub fn contract(
    earlier: Option<Feedback>,
    round: u64,
    contract: &str,
    violations: &[crate::engine::validate::Violation],
    previous: Option<Value>,
) -> Feedback {
    let mut feedback = Feedback::new(Reason::Contract, round);
    for violation in violations {
        let message = if violation.path.is_empty() {
            violation.message.clone()
        } else {
            format!("{}: {}", violation.path, violation.message)
        };
        feedback.issues.push(issue(IssueFields {
            code: "CONTRACT_VIOLATION",
            severity: "error",
            gate: None,
            rule: contract,
            message: &message,
            detail: None,
            items: &[],
        }));
    }
    if let Some(earlier) = earlier {
        feedback.round = earlier.round;
        feedback.issues.extend(earlier.issues);
        feedback.judges = earlier.judges;
        feedback.human = earlier.human;
    }
    feedback.previous = previous;
    feedback
}

/// One issue as feedback and the trace carry it.
#[derive(Debug)]
pub struct IssueFields<'a> {
    pub code: &'a str,
    /// `error` or `warn`.
    pub severity: &'a str,
    pub gate: Option<&'a str>,
    pub rule: &'a str,
    pub message: &'a str,
    pub detail: Option<&'a Value>,
    pub items: &'a [String],
}

/// An issue as a JSON record: `{code, severity, gate?, rule, message, detail?, items}`.
pub fn issue(fields: IssueFields<'_>) -> Value {
    let mut record = Map::new();
    record.insert("code".into(), json!(fields.code));
    record.insert("severity".into(), json!(fields.severity));
    if let Some(gate) = fields.gate {
        record.insert("gate".into(), json!(gate));
    }
    record.insert("rule".into(), json!(fields.rule));
    record.insert("message".into(), json!(fields.message));
    if let Some(detail) = fields.detail {
        record.insert("detail".into(), detail.clone());
    }
    record.insert("items".into(), json!(fields.items));
    Value::Object(record)
}

/// The steps whose outputs a gate's expressions read (rules, details, scores and
/// `pass when`): the judges whose outputs a fixer is shown.
pub fn steps_read(gate: &GateIr) -> BTreeSet<String> {
    let mut steps = BTreeSet::new();
    for rule in &gate.rules {
        collect_steps(&rule.expr, &mut steps);
        if let Some(detail) = &rule.detail {
            collect_steps(detail, &mut steps);
        }
    }
    for score in &gate.scores {
        collect_steps(&score.expr, &mut steps);
        if let Some(detail) = score.below.as_ref().and_then(|below| below.detail.as_ref()) {
            collect_steps(detail, &mut steps);
        }
    }
    collect_steps(&gate.pass_when, &mut steps);
    steps
}

fn collect_steps(expr: &ExprIr, steps: &mut BTreeSet<String>) {
    match expr {
        ExprIr::Path {
            root: NameIr::Step(step),
            ..
        } => {
            steps.insert(step.clone());
        }
        ExprIr::Path { .. } | ExprIr::Literal { .. } | ExprIr::Variant { .. } => {}
        ExprIr::List { items } => items.iter().for_each(|item| collect_steps(item, steps)),
        ExprIr::Record { fields } => fields
            .values()
            .for_each(|field| collect_steps(field, steps)),
        ExprIr::Unary { operand, .. } => collect_steps(operand, steps),
        ExprIr::Binary { lhs, rhs, .. } => {
            collect_steps(lhs, steps);
            collect_steps(rhs, steps);
        }
        ExprIr::Call { args, .. } => args.iter().for_each(|arg| collect_steps(arg, steps)),
        ExprIr::Quantifier { over, body, .. } => {
            collect_steps(over, steps);
            collect_steps(body, steps);
        }
    }
}

/// What `{{ feedback }}` prints: a readable Markdown block with the issues and their
/// details, each judge's output as indented JSON, the previous output, then the person's
/// answer. `feedback` is the value of [`Feedback::to_value`].
pub fn markdown(feedback: &Value) -> String {
    let mut text = String::new();
    let reason = feedback.get("reason").and_then(Value::as_str).unwrap_or("");
    let round = feedback.get("round").and_then(Value::as_u64).unwrap_or(0);
    let why = match reason {
        "gate" => format!("The result of round {round} did not pass its gate."),
        "check" => format!("The result of round {round} did not pass its check."),
        "replan" => format!(
            "The plan of round {round} led to a result that did not pass its gate; plan again."
        ),
        "human" => "A person answered.".to_string(),
        "contract" => "The previous answer did not match the required output format.".to_string(),
        "error" => "A step failed, and the flow sent its error here.".to_string(),
        _ => String::new(),
    };
    let _ = writeln!(text, "## Feedback\n\n{why}");
    let issues = feedback
        .get("issues")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if !issues.is_empty() {
        text.push_str("\n### Issues to fix\n\n");
        for issue in issues {
            let field = |name: &str| issue.get(name).and_then(Value::as_str).unwrap_or("");
            let _ = write!(text, "- **{}** ({}", field("code"), field("severity"));
            if let Some(gate) = issue.get("gate").and_then(Value::as_str) {
                let _ = write!(text, ", gate `{gate}`");
            }
            let _ = write!(text, ", rule `{}`): {}", field("rule"), field("message"));
            if let Some(items) = issue.get("items").and_then(Value::as_array)
                && !items.is_empty()
            {
                let names: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                let _ = write!(text, " (items: {})", names.join(", "));
            }
            text.push('\n');
            if let Some(detail) = issue.get("detail") {
                let _ = writeln!(text, "  Detail:\n{}", indented_json(detail, "  "));
            }
        }
    }
    if let Some(Value::Object(judges)) = feedback.get("judges")
        && !judges.is_empty()
    {
        text.push_str("\n### What the judges found\n");
        for (step, output) in judges {
            let _ = writeln!(text, "\n`{step}`:\n{}", indented_json(output, ""));
        }
    }
    if let Some(previous) = feedback.get("previous").filter(|value| !value.is_null()) {
        let _ = writeln!(
            text,
            "\n### Your previous output\n\n{}",
            indented_json(previous, "")
        );
    }
    if let Some(human) = feedback.get("human").filter(|value| !value.is_null()) {
        let approved = human.get("approved").and_then(Value::as_bool);
        let verdict = match approved {
            Some(true) => "approved",
            Some(false) => "rejected",
            None => "answered",
        };
        let _ = write!(text, "\n### The person's answer\n\nThe person {verdict}.");
        match human.get("note").and_then(Value::as_str) {
            Some(note) if !note.trim().is_empty() => {
                let _ = writeln!(
                    text,
                    " Their note:\n\n> {}",
                    note.trim().replace('\n', "\n> ")
                );
            }
            _ => text.push('\n'),
        }
    }
    text.trim_end().to_string()
}

/// `value` as indented JSON in a fenced block, every line prefixed with `indent`.
fn indented_json(value: &Value, indent: &str) -> String {
    let json = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let mut text = format!("{indent}```json\n");
    for line in json.lines() {
        let _ = writeln!(text, "{indent}{line}");
    }
    let _ = write!(text, "{indent}```");
    text
}

#[cfg(test)]
mod tests;
