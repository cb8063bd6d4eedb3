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

#[cfg(test)]
mod tests {
    use crate::{NoFiles, compile};

    /// The codes and messages of compiling `text`, as `CODE message` lines.
    fn check(text: &str, expect: &[&str]) {
        let compilation = compile("test.charter", text, &NoFiles);
        let found: Vec<String> = compilation
            .diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.is_error())
            .map(|diagnostic| format!("{} {}", diagnostic.code, diagnostic.message))
            .collect();
        assert_eq!(found, expect, "for:\n{text}");
    }

    const HEAD: &str =
        "spec t version \"1\"\ncontract Request { goal: string }\ncontract Out { ok: bool }\n";

    #[test]
    fn required_role_properties_and_steps() {
        check(
            &format!(
                "{HEAD}models {{ m = \"openai:x\" }}\nrole r {{ model: m prompt: \"\"\"go\"\"\" input: Request }}\nflow {{ a = r(request) -> done }}\n"
            ),
            &["E005 role `r` has no output"],
        );
        check(
            &format!(
                "{HEAD}models {{ m = \"openai:x\" }}\nrole r {{ prompt: \"\"\"go\"\"\" input: Request output: Out }}\nflow {{ a = r(request) -> done }}\n"
            ),
            &["E002 role `r` names no model and there is no `default` model alias"],
        );
        check(
            &format!(
                "{HEAD}models {{ default = \"openai:x\" }}\nrole r {{ prompt: \"\"\"go\"\"\" input: Request output: Out }}\nflow {{ a = r(request) -> done }}\n"
            ),
            &[],
        );
        check(
            &format!("{HEAD}flow {{ }}\n"),
            &["E007 the flow has no steps"],
        );
    }
}
