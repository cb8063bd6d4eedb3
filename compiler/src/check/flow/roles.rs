//! Checks on roles as the flow uses them: static invariants (E010), judges holding a
//! `write` or `external` tool (E011), finalize roles that do not output `Delivery` and
//! finalize steps in a flow with no gate (E012).

use std::collections::BTreeSet;

use super::for_each_root;
use crate::check::Symbols;
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{Effect, GateRule, InvariantKind, Role, StepBody};

/// The role a step calls (`role(...)`, `each ...: role(...)`, `finalize role(...)`).
pub(super) fn step_role(body: &StepBody) -> Option<&str> {
    match body {
        StepBody::Call { role, .. }
        | StepBody::Each { role, .. }
        | StepBody::Finalize { role, .. } => Some(role.name.as_str()),
        StepBody::Gate { .. } | StepBody::Ask { .. } | StepBody::Branch | StepBody::Tool { .. } => {
            None
        }
    }
}

/// How a gate reads a judge's output.
#[derive(Clone, Copy, Debug)]
enum ReadKind {
    /// A path in one of the gate's expressions starts with a step that calls the role.
    Path,
    /// `check GATE by ROLE`.
    CheckBy,
}

/// A judge read by a gate.
#[derive(Clone, Copy, Debug)]
struct Read<'a> {
    gate: &'a str,
    role: &'a str,
    span: Span,
    kind: ReadKind,
}

/// The judges of a spec: roles whose output a gate reads. A gate reading its own subject
/// step (the candidate it judges) does not make that step's role a judge.
#[derive(Debug, Default)]
pub(super) struct Judges<'a> {
    reads: Vec<Read<'a>>,
}

impl<'a> Judges<'a> {
    /// Every judge, sorted, without duplicates.
    pub fn all(&self) -> impl Iterator<Item = &'a str> + use<'a, '_> {
        self.reads
            .iter()
            .map(|read| read.role)
            .collect::<BTreeSet<_>>()
            .into_iter()
    }

    /// The judges `gate` reads, sorted, without duplicates.
    pub fn of_gate(&self, gate: &str) -> impl Iterator<Item = &'a str> + use<'a, '_> {
        self.reads
            .iter()
            .filter(|read| read.gate == gate)
            .map(|read| read.role)
            .collect::<BTreeSet<_>>()
            .into_iter()
    }

    fn first_read(&self, role: &str) -> Option<&Read<'a>> {
        self.reads.iter().find(|read| read.role == role)
    }
}

/// Finds the judges: for every gate, the roles of the steps its expressions read, and the
/// `by` role of every per-item check.
pub(super) fn judges<'a>(symbols: &Symbols<'a>) -> Judges<'a> {
    let mut reads = Vec::new();
    for (gate_name, gate) in &symbols.gates {
        let gate_name: &'a str = gate_name;
        let gate: &'a crate::syntax::ast::Gate = gate;
        let expressions = gate
            .rules
            .iter()
            .map(|rule| match rule {
                GateRule::Check { expr, .. } | GateRule::Score { expr, .. } => expr,
            })
            .chain(std::iter::once(&gate.pass_when));
        for expression in expressions {
            for_each_root(expression, &mut |root, path| {
                if root.name == gate.subject.name {
                    return;
                }
                let Some(step) = symbols.steps.get(root.name.as_str()) else {
                    return;
                };
                let Some(role) = step_role(&step.body)
                    .and_then(|role| symbols.roles.get_key_value(role))
                    .map(|(name, _)| *name)
                else {
                    return;
                };
                reads.push(Read {
                    gate: gate_name,
                    role,
                    span: path.span,
                    kind: ReadKind::Path,
                });
            });
        }
    }
    for step in symbols.steps.values() {
        let StepBody::Each {
            check: Some(check), ..
        } = &step.body
        else {
            continue;
        };
        let Some(by) = &check.by else {
            continue;
        };
        let Some((role, _)) = symbols.roles.get_key_value(by.name.as_str()) else {
            continue;
        };
        reads.push(Read {
            gate: check.gate.name.as_str(),
            role,
            span: by.span,
            kind: ReadKind::CheckBy,
        });
    }
    Judges { reads }
}

pub(super) fn check(symbols: &Symbols<'_>, judges: &Judges<'_>, diagnostics: &mut Vec<Diagnostic>) {
    check_invariants(symbols, diagnostics);
    check_judge_tools(symbols, judges, diagnostics);
    check_finalize_roles(symbols, diagnostics);
    check_finalize_has_gate(symbols, diagnostics);
}

/// E010: `ROLE has no tools` and `only ROLE uses TOOL`, checked against the roles' tools.
fn check_invariants(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    for invariant in symbols.invariants.values() {
        match &invariant.kind {
            InvariantKind::HasNoTools { role } => {
                let Some(definition) = symbols.roles.get(role.name.as_str()) else {
                    continue;
                };
                let Some(first_tool) = definition.tools.first() else {
                    continue;
                };
                diagnostics.push(
                    Diagnostic::new(
                        Code::E010,
                        first_tool.span,
                        format!(
                            "role `{}` has tools, but invariant `{}` says it has none",
                            role.name, invariant.name.name
                        ),
                    )
                    .with_label(format!("`{}` holds a tool here", role.name))
                    .with_note(invariant.span, "the invariant is declared here")
                    .with_help(format!(
                        "remove the tools from `{}`, or drop the invariant",
                        role.name
                    )),
                );
            }
            InvariantKind::OnlyUses { role, tool } => {
                if !symbols.roles.contains_key(role.name.as_str())
                    || !symbols.knows_tool(&tool.name)
                {
                    continue;
                }
                for (other_name, other) in &symbols.roles {
                    if *other_name == role.name.as_str() {
                        continue;
                    }
                    let Some(entry) = other.tools.iter().find(|entry| entry.name == tool.name)
                    else {
                        continue;
                    };
                    diagnostics.push(
                        Diagnostic::new(
                            Code::E010,
                            entry.span,
                            format!(
                                "role `{other_name}` uses tool `{}`, but invariant `{}` allows only `{}` to use it",
                                tool.name, invariant.name.name, role.name
                            ),
                        )
                        .with_label(format!("`{other_name}` may not hold `{}`", tool.name))
                        .with_note(invariant.span, "the invariant is declared here")
                        .with_help(format!(
                            "remove `{}` from `{other_name}`'s tools",
                            tool.name
                        )),
                    );
                }
                // A `tool` step uses the tool with no role at all.
                for step in symbols.steps.values() {
                    let StepBody::Tool { tool: called, .. } = &step.body else {
                        continue;
                    };
                    if called.name != tool.name {
                        continue;
                    }
                    diagnostics.push(
                        Diagnostic::new(
                            Code::E010,
                            called.span,
                            format!(
                                "step `{}` calls tool `{}`, but invariant `{}` allows only `{}` to use it",
                                step.name.name, tool.name, invariant.name.name, role.name
                            ),
                        )
                        .with_label("a `tool` step uses the tool without the role")
                        .with_note(invariant.span, "the invariant is declared here")
                        .with_help(format!(
                            "let `{}` call `{}` in a role step, or drop the invariant",
                            role.name, tool.name
                        )),
                    );
                }
            }
            InvariantKind::Always(_) => {}
        }
    }
}

/// E011: a judge holding a tool whose effect is `write` or `external`.
fn check_judge_tools(
    symbols: &Symbols<'_>,
    judges: &Judges<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for judge in judges.all() {
        let Some(role) = symbols.roles.get(judge) else {
            continue;
        };
        let Some(read) = judges.first_read(judge) else {
            continue;
        };
        for entry in &role.tools {
            let Some(tool) = symbols.tools.get(entry.name.as_str()) else {
                continue;
            };
            let effect = match tool.effect.as_ref().map(|effect| effect.effect) {
                Some(Effect::Write) => "write",
                Some(Effect::External) => "external",
                Some(Effect::Read) | None => continue,
            };
            let note = match read.kind {
                ReadKind::Path => format!("gate `{}` reads `{judge}`'s output here", read.gate),
                ReadKind::CheckBy => {
                    format!(
                        "`{judge}` judges the items of this check (gate `{}`)",
                        read.gate
                    )
                }
            };
            diagnostics.push(
                Diagnostic::new(
                    Code::E011,
                    entry.span,
                    format!(
                        "judge `{judge}` holds tool `{}`, whose effect is `{effect}`",
                        entry.name
                    ),
                )
                .with_label(format!(
                    "a judge may not hold a tool with effect `{effect}`"
                ))
                .with_note(read.span, note)
                .with_help(format!(
                    "a judge must not change what it judges: remove `{}` from `{judge}`'s tools, \
                     or give it a read-only tool",
                    entry.name
                )),
            );
        }
    }
}

/// E012: a `finalize` step whose role does not output `Delivery`.
fn check_finalize_roles(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    for step in symbols.steps.values() {
        let StepBody::Finalize { role, .. } = &step.body else {
            continue;
        };
        let Some(definition) = symbols.roles.get(role.name.as_str()) else {
            continue;
        };
        // An output naming an unknown contract is reported by the name check; saying it
        // is not `Delivery` as well would only repeat that.
        if let Some(output) = &definition.output
            && !symbols.is_contract(&output.name)
        {
            continue;
        }
        diagnostics.extend(finalize_output(role.span, definition));
    }
}

/// E012: a `finalize` step in a flow with no `gate` step. Candidates are formed only for
/// the subject of an evaluated gate, so no candidate could ever be delivered.
fn check_finalize_has_gate(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let Some(flow) = symbols.flow else {
        return;
    };
    if flow
        .steps
        .iter()
        .any(|step| matches!(step.body, StepBody::Gate { .. }))
    {
        return;
    }
    for step in &flow.steps {
        let StepBody::Finalize { role, .. } = &step.body else {
            continue;
        };
        diagnostics.push(
            Diagnostic::new(
                Code::E012,
                role.span,
                format!(
                    "step `{}` finalizes, but the flow has no `gate` step: no candidate is ever evaluated",
                    step.name.name
                ),
            )
            .with_label("finalized here, but no gate ever evaluates a candidate")
            .with_help(format!(
                "evaluate the work with a gate before `{}` (`judge = gate G  pass -> {} fail -> repair`), \
                 or call `{}` as a plain step: a flow without `finalize` answers with its last step's output",
                step.name.name, step.name.name, role.name
            )),
        );
    }
}

fn finalize_output(at: Span, role: &Role) -> Option<Diagnostic> {
    let help = format!(
        "a finalize role outputs the built-in `Delivery` ({{candidate_id, summary}}): set \
         `output: Delivery` on `{}`",
        role.name.name
    );
    match &role.output {
        Some(output) if output.name == "Delivery" => None,
        Some(output) => Some(
            Diagnostic::new(
                Code::E012,
                at,
                format!(
                    "finalize role `{}` outputs `{}`, not `Delivery`",
                    role.name.name, output.name
                ),
            )
            .with_label("finalized here")
            .with_note(output.span, "its output is declared here")
            .with_help(help),
        ),
        None => Some(
            Diagnostic::new(
                Code::E012,
                at,
                format!(
                    "finalize role `{}` has no output; it must output `Delivery`",
                    role.name.name
                ),
            )
            .with_label("finalized here")
            .with_note(role.name.span, "the role is defined here")
            .with_help(help),
        ),
    }
}
