//! Warnings: unused contracts, tools, rules blocks and model aliases (W001, W002, W003,
//! W009), tools without `max_tool_calls` (W004), scores without `below` (W005), and gates
//! whose pass condition ignores the score (W006).

use std::collections::BTreeSet;

use super::for_each_root;
use crate::check::Symbols;
use crate::diagnostics::{Code, Diagnostic};
use crate::syntax::ast::{GateRule, ModelRef, StepBody, TypeExpr, TypeKind};

/// The warnings that look at one definition at a time (W004, W005, W006).
pub(super) fn check_local(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    for role in symbols.roles.values() {
        if !role.tools.is_empty() && role.max_tool_calls.is_none() {
            diagnostics.push(
                Diagnostic::new(
                    Code::W004,
                    role.name.span,
                    format!(
                        "role `{}` has tools but no `max_tool_calls`",
                        role.name.name
                    ),
                )
                .with_label("its tool calls are unbounded")
                .with_help(
                    "add `max_tool_calls: N` (in the front matter for a role file) to bound the \
                     tool calls of one model call",
                ),
            );
        }
    }
    for gate in symbols.gates.values() {
        let mut score_names = BTreeSet::from(["score"]);
        let mut has_scores = false;
        for rule in &gate.rules {
            if let GateRule::Score {
                name, below: None, ..
            } = rule
            {
                diagnostics.push(
                    Diagnostic::new(
                        Code::W005,
                        name.span,
                        format!("score `{}` has no `below` issue", name.name),
                    )
                    .with_label("a low value here never becomes an issue")
                    .with_help(
                        "add `below T CODE` so a low score becomes an issue that repair can act on",
                    ),
                );
            }
            if let GateRule::Score { name, .. } = rule {
                has_scores = true;
                score_names.insert(name.name.as_str());
            }
        }
        if !has_scores {
            continue;
        }
        let mut mentions_score = false;
        for_each_root(&gate.pass_when, &mut |root, _| {
            mentions_score |= score_names.contains(root.name.as_str());
        });
        if !mentions_score {
            diagnostics.push(
                Diagnostic::new(
                    Code::W006,
                    gate.pass_when.span,
                    format!(
                        "the pass condition of gate `{}` ignores its scores",
                        gate.name.name
                    ),
                )
                .with_label("`score` is not used here")
                .with_help("use `score` or the named scores (e.g. `pass when score >= 7.0`)"),
            );
        }
    }
}

/// The warnings about definitions nothing uses (W001, W002, W003, W009). Only run when
/// names resolve, so a misspelt reference does not make its target look unused.
pub(super) fn check_unused(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    check_contracts(symbols, diagnostics);
    let mut used_tools = BTreeSet::new();
    let mut used_rules = BTreeSet::new();
    let mut used_models = BTreeSet::new();
    for role in symbols.roles.values() {
        used_tools.extend(role.tools.iter().map(|tool| tool.name.as_str()));
        used_rules.extend(role.rules.iter().map(|rules| rules.name.as_str()));
        match &role.model {
            Some(ModelRef::Alias(alias)) => {
                used_models.insert(alias.name.as_str());
            }
            Some(ModelRef::Literal(_)) => {}
            // A role that names no model runs on the `default` alias.
            None => {
                used_models.insert("default");
            }
        }
    }
    // A `tool` step uses its tool without any role.
    for step in symbols.steps.values() {
        if let StepBody::Tool { tool, .. } = &step.body {
            used_tools.insert(tool.name.as_str());
        }
    }
    for (name, tool) in &symbols.tools {
        if !used_tools.contains(name) {
            diagnostics.push(
                Diagnostic::new(
                    Code::W002,
                    tool.name.span,
                    format!("tool `{name}` is never used"),
                )
                .with_label("no role lists it in `tools` and no `tool` step calls it")
                .with_help(format!(
                    "add `{name}` to a role's `tools: [...]`, call it with `STEP = tool {name}(...)`, or remove it"
                )),
            );
        }
    }
    for (name, rules) in &symbols.rules {
        if !used_rules.contains(name) {
            diagnostics.push(
                Diagnostic::new(
                    Code::W003,
                    rules.name.span,
                    format!("rules block `{name}` is never used"),
                )
                .with_label("no role lists it in `rules`")
                .with_help(format!(
                    "add `{name}` to a role's `rules: [...]`, or remove it"
                )),
            );
        }
    }
    for (name, entry) in &symbols.models {
        if !used_models.contains(name) {
            diagnostics.push(
                Diagnostic::new(
                    Code::W009,
                    entry.alias.span,
                    format!("model alias `{name}` is never used"),
                )
                .with_label("no role runs on it")
                .with_help(format!(
                    "set `model: {name}` on a role, or remove the alias"
                )),
            );
        }
    }
}

/// W001: contracts no role or tool takes or gives, directly or through a used contract's
/// fields. Built-in contracts are exempt, and so is `Request`: by convention it is the
/// type of the run's input (`request`) even when no role takes it.
fn check_contracts(symbols: &Symbols<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let mut pending: Vec<&str> = vec!["Request"];
    // The session's fields are read through `session`, never passed to a role.
    pending.extend(
        symbols
            .session
            .map(|session| session.contract.name.name.as_str()),
    );
    for role in symbols.roles.values() {
        pending.extend(role.inputs.iter().map(|input| input.name.as_str()));
        pending.extend(role.output.iter().map(|output| output.name.as_str()));
    }
    for tool in symbols.tools.values() {
        pending.extend(tool.input.iter().map(|input| input.name.as_str()));
        pending.extend(tool.output.iter().map(|output| output.name.as_str()));
    }
    let mut used = BTreeSet::new();
    while let Some(name) = pending.pop() {
        if !used.insert(name) {
            continue;
        }
        if let Some(contract) = symbols.contracts.get(name) {
            for field in &contract.fields {
                named_types(&field.ty, &mut pending);
            }
        }
    }
    for (name, contract) in &symbols.contracts {
        if !used.contains(name) {
            diagnostics.push(
                Diagnostic::new(
                    Code::W001,
                    contract.name.span,
                    format!("contract `{name}` is never used"),
                )
                .with_label("no role, tool or used contract refers to it")
                .with_help(format!(
                    "use `{name}` as a role's or tool's input or output, or remove it"
                )),
            );
        }
    }
}

/// The contract name a type refers to (through lists), if any. A loop rather than
/// recursion, so deeply nested list types cannot overflow the stack.
fn named_types<'t>(ty: &'t TypeExpr, out: &mut Vec<&'t str>) {
    let mut ty = ty;
    loop {
        match &ty.kind {
            TypeKind::Named(name) => {
                out.push(name.name.as_str());
                return;
            }
            TypeKind::List(inner, _) => ty = inner,
            TypeKind::String
            | TypeKind::Bool
            | TypeKind::Int(_)
            | TypeKind::Float(_)
            | TypeKind::Enum(_) => return,
        }
    }
}
