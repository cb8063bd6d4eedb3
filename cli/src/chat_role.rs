//! A conversation's turn as typed, shared by `charter chat` and `serve`'s sessions: the request field a typed line fills (`chat_field`), and the per-turn role (`--role NAME`, `/role NAME` typed in the chat) — a role named by id or role-file display name, filled into the request contract's `role` field (the settings' preset of seed 002) of every following turn.

use charter_compiler::CompiledSpec;
use charter_compiler::graph::TypeIr;
use charter_runtime::compiler::diagnostics::did_you_mean;

/// The request field a preset role goes in.
pub(crate) const ROLE_FIELD: &str = "role";

/// What a line typed in the chat is: a `/role` command or a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ChatLine<'line> {
    /// `/role NAME` (`Some`), or `/role` / `/role none` (`None`: clear the preset).
    SetRole(Option<&'line str>),
    Message(&'line str),
}

/// Reads a typed line: `/role` followed by nothing or by spaces and a name is a command;
/// anything else (`/roles`, `/help`) is a message.
pub(crate) fn parse_line(line: &str) -> ChatLine<'_> {
    let Some(rest) = line.strip_prefix("/role") else {
        return ChatLine::Message(line);
    };
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return ChatLine::Message(line);
    }
    match rest.trim() {
        "" => ChatLine::SetRole(None),
        name if name.eq_ignore_ascii_case("none") => ChatLine::SetRole(None),
        name => ChatLine::SetRole(Some(name)),
    }
}

/// The id of the role `typed` names (its id or role-file display name, ASCII letters in
/// any case, an `@` before it allowed), if the request contract's `role` field takes it.
/// The error says what is wrong: no such field, no such role (with "did you mean"), or a
/// role the field does not take.
pub(crate) fn resolve_role(spec: &CompiledSpec, typed: &str) -> Result<String, String> {
    let accepted = accepted_roles(spec)?;
    let typed = typed.trim_start_matches(['@', '＠']);
    let takes = |id: &str| {
        accepted
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|x| x == id))
    };
    let named = spec.roles.iter().find_map(|(id, role)| {
        let matches = |name: &str| name == typed || name.eq_ignore_ascii_case(typed);
        (matches(id) || role.display_name.as_deref().is_some_and(matches)).then_some(id)
    });
    let choices: Vec<String> = spec
        .roles
        .iter()
        .filter(|(id, _)| takes(id))
        .map(|(id, role)| match &role.display_name {
            Some(name) => format!("{id} ({name})"),
            None => id.clone(),
        })
        .collect();
    match named {
        Some(id) if takes(id) => Ok(id.clone()),
        Some(id) => Err(format!(
            "role `{id}` cannot answer a turn of spec `{}`: its request field `{ROLE_FIELD}` takes {}",
            spec.name,
            choices.join(", ")
        )),
        None => {
            let names = spec
                .roles
                .iter()
                .filter(|(id, _)| takes(id))
                .flat_map(|(id, role)| {
                    std::iter::once(id.as_str()).chain(role.display_name.as_deref())
                });
            let hint =
                did_you_mean(typed, names).map_or_else(String::new, |hint| format!("; {hint}"));
            Err(format!(
                "spec `{}` has no role named `{typed}`{hint} (roles: {})",
                spec.name,
                choices.join(", ")
            ))
        }
    }
}

/// Whether a role can be preset in `spec`: its request contract has a `role` field of role
/// ids or strings.
pub(crate) fn takes_a_role(spec: &CompiledSpec) -> bool {
    accepted_roles(spec).is_ok()
}

/// The role ids the request contract's `role` field takes (`None`: any string).
fn accepted_roles(spec: &CompiledSpec) -> Result<Option<Vec<String>>, String> {
    let field = spec
        .request
        .as_deref()
        .and_then(|name| spec.contracts.get(name))
        .and_then(|contract| {
            contract
                .fields
                .iter()
                .find(|field| field.name == ROLE_FIELD)
        });
    let Some(field) = field else {
        return Err(format!(
            "spec `{}` cannot be told which role answers: its request contract has no `{ROLE_FIELD}` field (add `{ROLE_FIELD}: ROLE_A | ROLE_B?` and route on `request.{ROLE_FIELD}`)",
            spec.name
        ));
    };
    let ty = match &field.ty {
        TypeIr::Optional { inner } => inner.as_ref(),
        other => other,
    };
    match ty {
        TypeIr::Enum { variants } => Ok(Some(variants.clone())),
        TypeIr::String => Ok(None),
        _ => Err(format!(
            "spec `{}`'s request field `{ROLE_FIELD}` is neither a string nor a choice of role ids",
            spec.name
        )),
    }
}

/// The request contract's one string field, which each typed line fills; every other
/// field must be optional or have a default.
pub(crate) fn chat_field(spec: &CompiledSpec) -> Result<String, String> {
    let Some(name) = spec.request.as_deref() else {
        return Err(format!(
            "charter chat needs to know the request contract of spec `{}`: name a contract `Request`, or pass `request` to the first step's role",
            spec.name
        ));
    };
    let Some(contract) = spec.contracts.get(name) else {
        return Err(format!("the request contract `{name}` is not in the spec"));
    };
    let strings: Vec<&str> = contract
        .fields
        .iter()
        .filter(|field| field.ty == TypeIr::String && !field.optional)
        .map(|field| field.name.as_str())
        .collect();
    let [field] = strings.as_slice() else {
        let found = if strings.is_empty() {
            "none".to_string()
        } else {
            strings
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(format!(
            "charter chat types each line into the request contract's one string field, and `{name}` has {} string fields ({found}); give `{name}` exactly one field of type `string` (others may be `string?` or of other types)",
            strings.len()
        ));
    };
    let required: Vec<&str> = contract
        .fields
        .iter()
        .filter(|other| other.name != *field && !other.optional && other.default.is_none())
        .map(|other| other.name.as_str())
        .collect();
    if !required.is_empty() {
        return Err(format!(
            "charter chat fills only `{name}.{field}` from a typed line, but `{name}` also requires {}; make them optional or give them defaults",
            required
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok((*field).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_commands_are_told_from_messages() {
        assert_eq!(
            parse_line("/role 创意伙伴"),
            ChatLine::SetRole(Some("创意伙伴"))
        );
        assert_eq!(
            parse_line("/role   talker "),
            ChatLine::SetRole(Some("talker"))
        );
        assert_eq!(parse_line("/role"), ChatLine::SetRole(None));
        assert_eq!(parse_line("/role none"), ChatLine::SetRole(None));
        assert_eq!(parse_line("/roles"), ChatLine::Message("/roles"));
        assert_eq!(parse_line("hi /role x"), ChatLine::Message("hi /role x"));
    }
}
