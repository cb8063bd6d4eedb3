//! What the page needs to know of a served spec before it runs it (`GET /specs/{name}`): the request contract as a skeleton input to fill in (or the replayed scenario's input), each gate's rules and score thresholds, and whether it is a conversation.

use charter_compiler::CompiledSpec;
use charter_compiler::graph::{ContractIr, TypeIr};
use serde_json::{Map, Value, json};

use super::runs::ServedSpec;
use crate::page::gates;

/// How deep a skeleton follows contracts inside contracts (a contract that names itself
/// stops there).
const MAX_DEPTH: usize = 8;

/// `{name, request, input, replay, session, gates}`: `input` is what the page's input box
/// starts from.
pub(crate) fn spec_info(served: &ServedSpec) -> Value {
    let spec = &served.spec;
    let input = served
        .replay
        .as_ref()
        .map_or_else(|| request_skeleton(spec), |replay| replay.input.clone());
    json!({
        "name": served.name,
        "version": spec.version,
        "request": spec.request,
        "input": input,
        "replay": served.replay.is_some(),
        "session": spec.session.is_some(),
        "gates": gates(spec),
    })
}

/// An input with every required field of the request contract (one without a default
/// and not optional), each an empty value of its type; `{}` when nothing decides the
/// request.
pub(crate) fn request_skeleton(spec: &CompiledSpec) -> Value {
    spec.request
        .as_deref()
        .and_then(|name| spec.contracts.get(name))
        .map_or_else(
            || json!({}),
            |contract| contract_skeleton(spec, contract, 0),
        )
}

fn contract_skeleton(spec: &CompiledSpec, contract: &ContractIr, depth: usize) -> Value {
    let fields: Map<String, Value> = contract
        .fields
        .iter()
        .filter(|field| !field.optional && field.default.is_none())
        .map(|field| (field.name.clone(), type_skeleton(spec, &field.ty, depth)))
        .collect();
    Value::Object(fields)
}

fn type_skeleton(spec: &CompiledSpec, ty: &TypeIr, depth: usize) -> Value {
    match ty {
        TypeIr::String => json!(""),
        TypeIr::Bool => json!(false),
        TypeIr::Int { min, max } => json!(min.unwrap_or_else(|| max.map_or(0, |max| max.min(0)))),
        TypeIr::Float { min, max } => {
            json!(min.unwrap_or_else(|| max.map_or(0.0, |max| max.min(0.0))))
        }
        TypeIr::List {
            item, min_items, ..
        } => {
            let count = usize::try_from(min_items.unwrap_or(0)).unwrap_or(0).min(3);
            Value::Array(
                (0..count)
                    .map(|_| type_skeleton(spec, item, depth))
                    .collect(),
            )
        }
        TypeIr::Enum { variants } => variants.first().map_or(Value::Null, |first| json!(first)),
        TypeIr::Contract { name } => match spec.contracts.get(name) {
            Some(contract) if depth < MAX_DEPTH => contract_skeleton(spec, contract, depth + 1),
            _ => json!({}),
        },
        TypeIr::Optional { .. } | TypeIr::Any => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(text: &str) -> CompiledSpec {
        let compilation = charter_compiler::compile(
            "t.charter",
            text,
            &charter_compiler::MemoryLoader::default(),
        );
        compilation
            .spec
            .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics))
    }

    #[test]
    fn a_skeleton_has_every_required_field_and_no_defaulted_one() {
        let spec = compiled(
            "spec t version \"1\"\n\
             contract Item { id: string  n: int(2..) }\n\
             contract Request { goal: string  mode: fast | slow  items: list<Item>(1..)  inputs: list<string> = []  note: string? }\n\
             contract Out { text: string }\n\
             role writer { model: \"openai:m\" prompt: \"\"\"hi\"\"\" input: Request output: Out }\n\
             flow { write = writer(request) -> done }\n",
        );
        assert_eq!(
            request_skeleton(&spec),
            json!({"goal": "", "mode": "fast", "items": [{"id": "", "n": 2}]})
        );
    }
}
