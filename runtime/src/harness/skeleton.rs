//! The cassette entry to add for a call the cassette lacks (DESIGN §18): its key and a
//! skeleton response built from the output contract of the role (or tool) it calls, as a
//! line of YAML that can be pasted under `calls:`.

use charter_compiler::CompiledSpec;
use charter_compiler::graph::StepKind;
use serde_json::Value;

use crate::formats::scenario::CallKey;

/// How deep a skeleton follows nested contracts before it writes `{}`: contracts may
/// refer to themselves.
const MAX_DEPTH: usize = 8;

/// The entry for the call `key` of `turn` (1 outside a conversation), with the contract
/// its response follows, or `None` when the step calls nothing the spec knows.
pub fn missing_entry(spec: &CompiledSpec, key: &CallKey, turn: u64) -> Option<(String, String)> {
    let (_, step) = spec.flow.step(&key.step)?;
    let (field, contract, tool) = match (&step.kind, &key.role) {
        (StepKind::Tool { tool, .. }, _) => {
            ("result", &spec.tools.get(tool)?.output, Some(tool.as_str()))
        }
        (_, Some(judge)) => ("response", &spec.roles.get(judge)?.output, None),
        (
            StepKind::Call { role, .. }
            | StepKind::Each { role, .. }
            | StepKind::Finalize { role, .. },
            None,
        ) => ("response", &spec.roles.get(role)?.output, None),
        _ => return None,
    };
    let schema = &spec.contracts.get(contract)?.schema;
    let skeleton = skeleton(schema, schema, 0);
    let mut fields = Vec::new();
    if turn != 1 {
        fields.push(format!("turn: {turn}"));
    }
    fields.push(format!("step: {}", scalar(&key.step)));
    if key.round != 1 {
        fields.push(format!("round: {}", key.round));
    }
    if let Some(item) = &key.item {
        fields.push(format!("item: {}", scalar(item)));
    }
    if key.attempt != 1 {
        fields.push(format!("attempt: {}", key.attempt));
    }
    if let Some(role) = &key.role {
        fields.push(format!("role: {}", scalar(role)));
    }
    if let Some(tool) = tool {
        fields.push(format!("tool: {}", scalar(tool)));
    }
    fields.push(format!("{field}: {skeleton}"));
    Some((format!("  - {{ {} }}", fields.join(", ")), contract.clone()))
}

/// A value of `schema` (a contract's JSON Schema; `root` holds its `$defs`) with every
/// required field in the contract's order, as YAML flow text: strings `TODO`, numbers
/// their minimum or 0, the first of an enum, lists as short as allowed.
fn skeleton(schema: &Value, root: &Value, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return "{}".into();
    }
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or_default();
        return match root.get("$defs").and_then(|defs| defs.get(name)) {
            Some(target) => skeleton(target, root, depth + 1),
            None => "{}".into(),
        };
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|values| values.first())
    {
        return plain(first);
    }
    for alternatives in ["anyOf", "oneOf"] {
        if let Some(first) = schema
            .get(alternatives)
            .and_then(Value::as_array)
            .and_then(|options| options.first())
        {
            return skeleton(first, root, depth + 1);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::Array(kinds)) => kinds.iter().find(|kind| *kind != "null"),
        other => other,
    };
    match kind.and_then(Value::as_str) {
        Some("object") => object(schema, root, depth),
        Some("array") => {
            let least = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = schema.get("items").cloned().unwrap_or(Value::Null);
            let one = skeleton(&item, root, depth + 1);
            let items: Vec<&str> = (0..least.min(3)).map(|_| one.as_str()).collect();
            format!("[{}]", items.join(", "))
        }
        Some("integer") => schema.get("minimum").map_or("0".into(), plain),
        Some("number") => schema.get("minimum").map_or("0.0".into(), plain),
        Some("boolean") => "false".into(),
        Some("string") => "TODO".into(),
        _ => "null".into(),
    }
}

/// An object with every required property of `schema`, in the order the schema lists them.
fn object(schema: &Value, root: &Value, depth: usize) -> String {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    let fields: Vec<String> = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|name| {
            let property = properties
                .and_then(|properties| properties.get(name))
                .unwrap_or(&Value::Null);
            format!("{}: {}", scalar(name), skeleton(property, root, depth + 1))
        })
        .collect();
    if fields.is_empty() {
        "{}".into()
    } else {
        format!("{{ {} }}", fields.join(", "))
    }
}

/// A scalar JSON value as YAML: strings through [`scalar`], the rest as JSON writes them.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => scalar(text),
        other => other.to_string(),
    }
}

/// `text` plain when YAML reads it back as the same string, else double-quoted.
fn scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && text.chars().next().is_some_and(char::is_alphabetic)
        && !matches!(
            text.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain {
        text.to_string()
    } else {
        Value::String(text.to_string()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::scenario::Cassette;

    const SPEC: &str = r#"spec s version "1"
models { default = "openai:m" }
contract Request { goal: string }
contract Fact { text: string  weight: int(1..=5)  kind: a | b }
contract Facts { summary: string  facts: list<Fact>(1..=3)  sure: bool  note: string? }
role fact_finder { input: Request  output: Facts  prompt: "Find facts on {{ request.goal }}" }
flow { facts = fact_finder(request) -> done }
"#;

    #[test]
    fn the_entry_is_the_key_and_a_response_of_the_contract_that_reads_back() {
        let spec = crate::testing::compile_spec(SPEC);
        let mut key = CallKey::new("facts");
        key.attempt = 2;
        let (entry, contract) = missing_entry(&spec, &key, 1).expect("an entry");
        assert_eq!(contract, "Facts");
        assert_eq!(
            entry,
            "  - { step: facts, attempt: 2, response: { summary: TODO, facts: [{ text: TODO, weight: 1, kind: a }], sure: false } }"
        );
        let cassette =
            Cassette::from_yaml("cassette.yaml", &format!("version: 1\ncalls:\n{entry}\n"))
                .expect("the entry reads back");
        let response = cassette.calls[0].response.clone().unwrap_or_default();
        assert_eq!(response["facts"][0]["weight"], 1);
        assert!(
            spec.contracts["Facts"].schema.is_object(),
            "the contract has a schema"
        );
    }

    #[test]
    fn a_step_the_spec_lacks_has_no_entry_and_odd_text_is_quoted() {
        let spec = crate::testing::compile_spec(SPEC);
        assert_eq!(missing_entry(&spec, &CallKey::new("nowhere"), 1), None);
        assert_eq!(scalar("T-001"), "T-001");
        assert_eq!(scalar("yes"), "\"yes\"");
        assert_eq!(scalar("a: b"), "\"a: b\"");
        assert_eq!(scalar("1x"), "\"1x\"");
    }
}
