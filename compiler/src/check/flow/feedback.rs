//! What a role's template must read for the runtime's content to reach the model: roles
//! that can receive feedback but never read `feedback` (W010), and finalize roles that
//! never read the id of the candidate they must name (W011).
//!
//! A role *can receive feedback* (DESIGN §8.2) when it is the role of a step that:
//! - a `rerun X with feedback` arm reruns;
//! - a repair `ask` arm reruns when the person approves (the subject of each gate, used by
//!   a `gate` step, that the arm applies to);
//! - an arm covering a warn-level issue code reruns (warnings that act, §8.5: the rerun
//!   always carries feedback);
//! - runs the items of an `each` step with a per-item `check` (stage retries);
//! - `replan` reruns: the flow's entry step, as the runtime does;
//! - a `when`/`else` transition of an `ask` step leads to (the person's answer).
//!
//! Provider retries after a contract violation are not counted: the runtime tells the
//! model the violations in the retry itself, whether or not the template reads `feedback`.

use std::collections::{BTreeMap, BTreeSet};

use super::codes::arm_applies;
use super::roles::step_role;
use crate::check::Symbols;
use crate::check::templates::TemplateFacts;
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{
    Action, Flow, Gate, GateRule, Next, Repair, RepairArm, RepairPattern, Severity, Step, StepBody,
    Target,
};

/// Why a role can receive feedback, and where the spec says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FeedbackSource {
    /// The role that receives it.
    pub role: String,
    /// Where the reason is written (an arm's action, a `check`, a transition).
    pub span: Span,
    /// The reason, as the note on a W010 says it.
    pub reason: String,
}

/// Every way a role of `symbols` can receive feedback, in source order: from the repair's
/// arms, then from the steps themselves, sorted together by where each is written.
pub(crate) fn sources(symbols: &Symbols<'_>) -> Vec<FeedbackSource> {
    let Some(flow) = symbols.flow else {
        return Vec::new();
    };
    let evaluated = evaluated_gates(symbols, flow);
    let mut found = match symbols.repair {
        Some(repair) => repair_sources(symbols, flow, repair, &evaluated),
        None => Vec::new(),
    };
    found.extend(step_sources(symbols, flow));
    found.sort_by_key(|source| (source.span.file, source.span.start, source.span.end));
    found
}

/// The role a step calls, when the spec defines it (an undefined one is reported elsewhere).
fn role_of_step(symbols: &Symbols<'_>, name: &str) -> Option<String> {
    symbols
        .steps
        .get(name)
        .and_then(|step| step_role(&step.body))
        .filter(|role| symbols.roles.contains_key(role))
        .map(str::to_string)
}

/// A feedback source, when there is a role to receive it.
fn source(role: Option<String>, span: Span, reason: String) -> Option<FeedbackSource> {
    role.map(|role| FeedbackSource { role, span, reason })
}

/// The gates `gate` steps evaluate, in flow order, without duplicates.
fn evaluated_gates<'a>(symbols: &Symbols<'a>, flow: &Flow) -> Vec<&'a Gate> {
    let mut evaluated: Vec<&Gate> = Vec::new();
    for step in &flow.steps {
        if let StepBody::Gate { gate } = &step.body
            && let Some(gate) = symbols.gates.get(gate.name.as_str())
            && !evaluated.iter().any(|seen| std::ptr::eq(*seen, *gate))
        {
            evaluated.push(gate);
        }
    }
    evaluated
}

/// The roles the repair's arms rerun with feedback, arm by arm.
fn repair_sources(
    symbols: &Symbols<'_>,
    flow: &Flow,
    repair: &Repair,
    evaluated: &[&Gate],
) -> Vec<FeedbackSource> {
    let named: BTreeSet<&str> = repair
        .arms
        .iter()
        .flat_map(|arm| match &arm.pattern {
            RepairPattern::Codes(codes) => codes.iter().map(|code| code.name.as_str()).collect(),
            RepairPattern::Wildcard(_) => Vec::new(),
        })
        .collect();
    let warn_codes: BTreeSet<&str> = evaluated
        .iter()
        .flat_map(|gate| &gate.rules)
        .filter_map(|rule| match rule {
            GateRule::Check {
                severity: Severity::Warn,
                code,
                ..
            } => Some(code.name.as_str()),
            _ => None,
        })
        .collect();
    let mut found = Vec::new();
    for arm in &repair.arms {
        // The warn-level codes this arm handles: those it names, or for `_`, those no
        // other arm names.
        let warnings: Vec<&str> = match &arm.pattern {
            RepairPattern::Codes(codes) => codes
                .iter()
                .map(|code| code.name.as_str())
                .filter(|code| warn_codes.contains(code))
                .collect(),
            RepairPattern::Wildcard(_) => warn_codes
                .iter()
                .copied()
                .filter(|code| !named.contains(code))
                .collect(),
        };
        found.extend(arm_sources(symbols, flow, arm, &warnings, evaluated));
    }
    found
}

/// The roles one repair arm reruns with feedback, given the warn-level codes it handles.
fn arm_sources(
    symbols: &Symbols<'_>,
    flow: &Flow,
    arm: &RepairArm,
    warnings: &[&str],
    evaluated: &[&Gate],
) -> Vec<FeedbackSource> {
    let role_of_step = |name: &str| role_of_step(symbols, name);
    match &arm.action {
        Action::Rerun {
            step,
            with_feedback: true,
            span,
        } => source(
            role_of_step(&step.name),
            *span,
            format!(
                "`rerun {} with feedback` gives it the gate's issues",
                step.name
            ),
        )
        .into_iter()
        .collect(),
        Action::Rerun { step, span, .. } if !warnings.is_empty() => source(
            role_of_step(&step.name),
            *span,
            format!(
                "a rerun for the warning `{}` gives it the gate's issues",
                warnings.join("`, `")
            ),
        )
        .into_iter()
        .collect(),
        Action::Ask(question) => evaluated
            .iter()
            .filter(|gate| arm_applies(arm, Some(gate)))
            .filter_map(|gate| {
                source(
                    role_of_step(&gate.subject.name),
                    question.span,
                    format!(
                        "when the person approves, `{}` is rerun with the issues of gate `{}` and the person's note",
                        gate.subject.name, gate.name.name
                    ),
                )
            })
            .collect(),
        Action::Replan(span) => {
            let entry = flow.steps.first().map(|step| step.name.name.as_str());
            source(
                entry.and_then(role_of_step),
                *span,
                format!(
                    "`replan` reruns the entry step `{}` with the reason",
                    entry.unwrap_or_default()
                ),
            )
            .into_iter()
            .collect()
        }
        Action::Rerun { .. } | Action::Accept(_) | Action::Block(_) | Action::Fail(_) => {
            Vec::new()
        }
    }
}

/// The roles steps themselves give feedback to: an `each` step's role through its
/// per-item `check`, and the role steps an `ask` step's answer leads to.
fn step_sources(symbols: &Symbols<'_>, flow: &Flow) -> Vec<FeedbackSource> {
    let mut found = Vec::new();
    for step in &flow.steps {
        match &step.body {
            StepBody::Each {
                role,
                check: Some(check),
                ..
            } => found.extend(source(
                symbols
                    .roles
                    .contains_key(role.name.as_str())
                    .then(|| role.name.clone()),
                check.span,
                format!(
                    "a stage retry of `{}` gives it the check's issues",
                    step.name.name
                ),
            )),
            StepBody::Ask { .. } => {
                for target in ask_targets(step) {
                    if let Target::Step(name) = target {
                        found.extend(source(
                            role_of_step(symbols, &name.name),
                            name.span,
                            format!(
                                "the answer to `{}` reaches `{}` as `feedback.human`",
                                step.name.name, name.name
                            ),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// The targets of an `ask` step's transitions: whichever is taken, the role step it leads
/// to is the next to run and sees the answer.
fn ask_targets(step: &Step) -> Vec<&Target> {
    match &step.next {
        Next::When { arms, otherwise } => arms
            .iter()
            .map(|(_, target)| target)
            .chain(otherwise.as_ref())
            .collect(),
        Next::Goto(target) => vec![target],
        Next::PassFail { .. } => Vec::new(),
    }
}

/// W010 and W011.
pub(crate) fn check(
    symbols: &Symbols<'_>,
    templates: &TemplateFacts,
    diagnostics: &mut Vec<Diagnostic>,
) {
    check_feedback_read(symbols, templates, diagnostics);
    check_candidate_id_read(symbols, templates, diagnostics);
}

/// W010: a role that can receive feedback whose template never reads `feedback`.
fn check_feedback_read(
    symbols: &Symbols<'_>,
    templates: &TemplateFacts,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut by_role: BTreeMap<&str, Vec<&FeedbackSource>> = BTreeMap::new();
    let found = sources(symbols);
    for source in &found {
        by_role
            .entry(source.role.as_str())
            .or_default()
            .push(source);
    }
    for (role_name, reasons) in by_role {
        let (Some(role), Some(template)) =
            (symbols.roles.get(role_name), templates.roles.get(role_name))
        else {
            continue;
        };
        if !template.parsed || template.variables.contains("feedback") {
            continue;
        }
        let mut diagnostic = Diagnostic::new(
            Code::W010,
            role.name.span,
            format!("role `{role_name}` can receive feedback, but its template never reads `feedback`"),
        )
        .with_label("this role's prompt ignores why it runs again")
        .with_help(format!(
            "read it in `{role_name}`'s template, e.g. `{{% if feedback %}}{{{{ feedback }}}}{{% endif %}}` \
             (it is none on a first call); otherwise the model gets the same prompt and repeats its answer"
        ));
        let mut noted = BTreeSet::new();
        for reason in reasons {
            if noted.insert((reason.span, reason.reason.as_str())) {
                diagnostic = diagnostic.with_note(reason.span, reason.reason.clone());
            }
        }
        diagnostics.push(diagnostic);
    }
}

/// W011: a `finalize` role whose template never reads the candidate's id.
fn check_candidate_id_read(
    symbols: &Symbols<'_>,
    templates: &TemplateFacts,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut reported = BTreeSet::new();
    let Some(flow) = symbols.flow else {
        return;
    };
    for step in &flow.steps {
        let StepBody::Finalize { role: called, .. } = &step.body else {
            continue;
        };
        let (Some(role), Some(template)) = (
            symbols.roles.get(called.name.as_str()),
            templates.roles.get(called.name.as_str()),
        ) else {
            continue;
        };
        if !template.parsed
            || reads_candidate_id(template)
            || !reported.insert(called.name.as_str())
        {
            continue;
        }
        diagnostics.push(
            Diagnostic::new(
                Code::W011,
                role.name.span,
                format!(
                    "finalize role `{}` never reads `candidate.id`, so the model cannot name the candidate it delivers",
                    called.name
                ),
            )
            .with_label("its template never reads the candidate's id")
            .with_note(called.span, format!("step `{}` finalizes with it", step.name.name))
            .with_help(format!(
                "tell the model the id in `{}`'s template, e.g. `Set candidate_id to \"{{{{ candidate.id }}}}\"`; \
                 a delivery naming another candidate is refused",
                called.name
            )),
        );
    }
}

/// Whether a template reads the id of the candidate it delivers: `candidate.id` or
/// `best.id`, or the whole `candidate` / `best` (whose rendering holds the id).
fn reads_candidate_id(template: &crate::check::templates::RoleTemplate) -> bool {
    ["candidate", "best"].iter().any(|name| {
        template.paths.contains(*name) || template.paths.contains(&format!("{name}.id"))
    })
}
