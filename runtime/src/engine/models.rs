//! Which model each alias runs on: `charter run --model ALIAS=PROVIDER:MODEL` overrides, and the models a run used as its recording notes them (so a replay under other models or parameters is stale).

use std::collections::BTreeMap;

use charter_compiler::CompiledSpec;

/// The providers a model can be served by.
pub const PROVIDERS: [&str; 2] = ["openai", "anthropic"];

/// Reads `ALIAS=PROVIDER:MODEL` (the model part may itself hold `:`, as Ollama's
/// `llama3.2:3b` does).
pub fn parse_override(text: &str) -> Result<(String, String), String> {
    let (alias, target) = text
        .split_once('=')
        .map(|(alias, target)| (alias.trim(), target.trim()))
        .ok_or_else(|| format!("--model `{text}` is not ALIAS=PROVIDER:MODEL"))?;
    if alias.is_empty() {
        return Err(format!("--model `{text}` names no alias"));
    }
    check_target(target).map_err(|reason| format!("--model `{text}`: {reason}"))?;
    Ok((alias.to_string(), target.to_string()))
}

fn check_target(target: &str) -> Result<(&str, &str), String> {
    match target.split_once(':') {
        Some((provider, model)) if PROVIDERS.contains(&provider) && !model.trim().is_empty() => {
            Ok((provider, model))
        }
        Some((provider, _)) if !PROVIDERS.contains(&provider) => Err(format!(
            "unknown provider `{provider}` (the providers are {})",
            PROVIDERS.join(", ")
        )),
        _ => Err(format!(
            "`{target}` is not PROVIDER:MODEL (e.g. `openai:qwen2.5:7b`)"
        )),
    }
}

/// Points each alias in `overrides` at its new `provider:model`, in the `models` table and
/// in every role that uses the alias. The alias keeps its parameters; its prices are
/// dropped (they were the old model's), so the run's cost counts nothing for it.
pub fn apply_overrides(
    spec: &mut CompiledSpec,
    overrides: &BTreeMap<String, String>,
) -> Result<(), String> {
    for (alias, target) in overrides {
        let (provider, model) = check_target(target)?;
        let Some(entry) = spec.models.get_mut(alias) else {
            let known: Vec<&str> = spec.models.keys().map(String::as_str).collect();
            return Err(format!(
                "--model names alias `{alias}`, which the spec does not define (its aliases: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        };
        entry.provider = provider.to_string();
        entry.model = model.to_string();
        entry.price_in = None;
        entry.price_out = None;
        for role in spec.roles.values_mut() {
            if role.model.alias.as_deref() == Some(alias.as_str()) {
                role.model.provider = provider.to_string();
                role.model.model = model.to_string();
                role.model.price_in = None;
                role.model.price_out = None;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_are_parsed_and_checked() {
        assert_eq!(
            parse_override("default=openai:llama3.2:3b"),
            Ok(("default".to_string(), "openai:llama3.2:3b".to_string()))
        );
        for bad in [
            "default",
            "=openai:x",
            "default=ollama:x",
            "default=openai:",
        ] {
            assert!(parse_override(bad).is_err(), "{bad} was accepted");
        }
    }
}
