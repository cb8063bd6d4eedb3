//! JSON Schema (draft 2020-12) of contracts, generated from their resolved field types.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::ir::{FieldIr, TypeIr};

/// The `$schema` URI every generated schema declares.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// The schema of contract `name` with fields `fields`, given `all`, which finds any
/// contract's fields by name (to put referenced contracts under `$defs`, transitively).
pub fn contract_schema<'a>(
    name: &str,
    fields: &[FieldIr],
    all: &dyn Fn(&str) -> Option<&'a [FieldIr]>,
) -> Value {
    let mut schema = Map::new();
    schema.insert("$schema".into(), Value::String(DRAFT_2020_12.into()));
    schema.insert("title".into(), Value::String(name.into()));
    for (key, value) in object_schema(fields) {
        schema.insert(key, value);
    }
    let mut referenced = BTreeSet::new();
    let mut pending: Vec<String> = Vec::new();
    collect_refs(fields, &mut pending);
    while let Some(next) = pending.pop() {
        if referenced.insert(next.clone())
            && let Some(next_fields) = all(&next)
        {
            collect_refs(next_fields, &mut pending);
        }
    }
    if !referenced.is_empty() {
        let mut defs = Map::new();
        for reference in referenced {
            let body = all(&reference).map_or_else(
                || json!({}),
                |def_fields| {
                    let mut object = Map::new();
                    object.insert("title".into(), Value::String(reference.clone()));
                    object.extend(object_schema(def_fields));
                    Value::Object(object)
                },
            );
            defs.insert(reference, body);
        }
        schema.insert("$defs".into(), Value::Object(defs));
    }
    Value::Object(schema)
}

/// `type: object`, `properties`, `required` and `additionalProperties: false`.
fn object_schema(fields: &[FieldIr]) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for field in fields {
        let mut property = type_schema(&field.ty);
        if field.optional {
            property = nullable(property);
        }
        if let (Some(default), Value::Object(object)) = (&field.default, &mut property) {
            object.insert("default".into(), default.value.clone());
        }
        if !field.optional && field.default.is_none() {
            required.push(Value::String(field.name.clone()));
        }
        properties.insert(field.name.clone(), property);
    }
    let mut object = Map::new();
    object.insert("type".into(), Value::String("object".into()));
    object.insert("properties".into(), Value::Object(properties));
    object.insert("required".into(), Value::Array(required));
    object.insert("additionalProperties".into(), Value::Bool(false));
    object
}

/// The schema of one type.
pub fn type_schema(ty: &TypeIr) -> Value {
    let mut object = Map::new();
    match ty {
        TypeIr::String => {
            object.insert("type".into(), json!("string"));
        }
        TypeIr::Bool => {
            object.insert("type".into(), json!("boolean"));
        }
        TypeIr::Int { min, max } => {
            object.insert("type".into(), json!("integer"));
            if let Some(min) = min {
                object.insert("minimum".into(), json!(min));
            }
            if let Some(max) = max {
                object.insert("maximum".into(), json!(max));
            }
        }
        TypeIr::Float { min, max } => {
            object.insert("type".into(), json!("number"));
            if let Some(min) = min.and_then(serde_json::Number::from_f64) {
                object.insert("minimum".into(), Value::Number(min));
            }
            if let Some(max) = max.and_then(serde_json::Number::from_f64) {
                object.insert("maximum".into(), Value::Number(max));
            }
        }
        TypeIr::List {
            item,
            min_items,
            max_items,
        } => {
            object.insert("type".into(), json!("array"));
            object.insert("items".into(), type_schema(item));
            if let Some(min) = min_items {
                object.insert("minItems".into(), json!(min));
            }
            if let Some(max) = max_items {
                object.insert("maxItems".into(), json!(max));
            }
        }
        TypeIr::Enum { variants } => {
            object.insert("type".into(), json!("string"));
            object.insert("enum".into(), json!(variants));
        }
        TypeIr::Contract { name } => {
            object.insert("$ref".into(), Value::String(format!("#/$defs/{name}")));
        }
        TypeIr::Optional { inner } => return nullable(type_schema(inner)),
        TypeIr::Any => {}
    }
    Value::Object(object)
}

/// Allows `null` besides what `schema` allows.
fn nullable(schema: Value) -> Value {
    let Value::Object(mut object) = schema else {
        return schema;
    };
    if object.is_empty() {
        return Value::Object(object);
    }
    match object.get("type").cloned() {
        Some(Value::String(ty)) if !object.contains_key("$ref") => {
            object.insert("type".into(), json!([ty, "null"]));
            if let Some(Value::Array(variants)) = object.get_mut("enum") {
                variants.push(Value::Null);
            }
            Value::Object(object)
        }
        _ => json!({ "anyOf": [Value::Object(object), { "type": "null" }] }),
    }
}

fn collect_refs(fields: &[FieldIr], out: &mut Vec<String>) {
    for field in fields {
        collect_type_refs(&field.ty, out);
    }
}

fn collect_type_refs(ty: &TypeIr, out: &mut Vec<String>) {
    match ty {
        TypeIr::Contract { name } => out.push(name.clone()),
        TypeIr::List { item, .. } => collect_type_refs(item, out),
        TypeIr::Optional { inner } => collect_type_refs(inner, out),
        _ => {}
    }
}
