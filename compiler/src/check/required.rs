//! Properties lowering needs that no other check asks for: a role's `output`, a model for
//! every role, and at least one flow step (E005, E002, E007).
//!
//! Without these, `graph::build` would meet a role it cannot lower and report an internal
//! error (E000) for what is a mistake in the spec.

use crate::check::Symbols;
use crate::diagnostics::{Code, Diagnostic};

/// Reports roles without an `output`, roles without a model when there is no `default`
/// alias, and an empty flow. Runs after the other checks and skips a role another
/// error already points at (a `finalize` role without output is E012).
pub fn check(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let mut found = Vec::new();
    for role in symbols.roles.values() {
        let pointed_at = diagnostics.iter().any(|diagnostic| {
            diagnostic.is_error()
                && diagnostic
                    .labels
                    .iter()
                    .any(|label| label.span == role.name.span)
        });
        if role.output.is_none() && !pointed_at {
            found.push(
                Diagnostic::new(
                    Code::E005,
                    role.name.span,
                    format!("role `{}` has no output", role.name.name),
                )
                .with_label("this role declares no output contract")
                .with_help("add `output: ContractName` to the role"),
            );
        }
        if role.model.is_none() && !symbols.models.contains_key("default") {
            found.push(
                Diagnostic::new(
                    Code::E002,
                    role.name.span,
                    format!(
                        "role `{}` names no model and there is no `default` model alias",
                        role.name.name
                    ),
                )
                .with_label("this role has no model")
                .with_help(
                    "add `model: ALIAS` to the role, or define `default = \"provider:model\"` in `models`",
                ),
            );
        }
    }
    if let Some(flow) = symbols.flow
        && flow.steps.is_empty()
    {
        found.push(
            Diagnostic::new(Code::E007, flow.span, "the flow has no steps")
                .with_label("no step here, so no terminal can be reached")
                .with_help("add a step, e.g. `run = role(request) -> done`"),
        );
    }
    diagnostics.extend(found);
}
