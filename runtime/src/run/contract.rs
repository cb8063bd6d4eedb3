//! Contract checks of role and tool outputs: the scheduler's adapter over contract validation (defaults filled in, one readable error).
//!
//! A minimal validator of its own until the shared `validate` module lands: JSON records,
//! required fields, types, enums, ranges, list bounds, nested contracts, defaults.

use charter_compiler::CompiledSpec;
use charter_compiler::graph::TypeIr;
use serde_json::{Map, Value};

/// Checks `value` against contract `name` and returns it with defaults filled in, or the
/// first violation as a sentence naming the field path.
pub fn validate(spec: &CompiledSpec, name: &str, value: &Value) -> Result<Value, String> {
    validate_contract(spec, name, value, "", 0)
}

const MAX_DEPTH: usize = 64;

fn validate_contract(
    spec: &CompiledSpec,
    name: &str,
    value: &Value,
    path: &str,
    depth: usize,
) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("{} is nested too deeply", shown(path)));
    }
    let Some(contract) = spec.contracts.get(name) else {
        return Err(format!("unknown contract `{name}`"));
    };
    let Value::Object(fields) = value else {
        return Err(format!(
            "{} must be a `{name}` record, but is {}",
            shown(path),
            crate::value::describe(value)
        ));
    };
    let mut out = Map::new();
    for field in &contract.fields {
        let field_path = join(path, &field.name);
        match fields.get(&field.name) {
            None | Some(Value::Null) if field.optional => {
                out.insert(field.name.clone(), Value::Null);
            }
            None if field.default.is_some() => {
                let default = field.default.as_ref().map(|d| d.value.clone()).unwrap_or_default();
                out.insert(field.name.clone(), default);
            }
            None => return Err(format!("missing required field `{field_path}`")),
            Some(found) => {
                let checked = validate_type(spec, &field.ty, found, &field_path, depth + 1)?;
                out.insert(field.name.clone(), checked);
            }
        }
    }
    if let Some(extra) = fields
        .keys()
        .find(|key| !contract.fields.iter().any(|field| &field.name == *key))
    {
        return Err(format!(
            "unknown field `{}` in a `{name}` record",
            join(path, extra)
        ));
    }
    Ok(Value::Object(out))
}

fn validate_type(
    spec: &CompiledSpec,
    ty: &TypeIr,
    value: &Value,
    path: &str,
    depth: usize,
) -> Result<Value, String> {
    let wrong = |expected: &str| {
        Err(format!(
            "`{path}` must be {expected}, but is {}",
            crate::value::describe(value)
        ))
    };
    match ty {
        TypeIr::Any => Ok(value.clone()),
        TypeIr::String => match value {
            Value::String(_) => Ok(value.clone()),
            _ => wrong("a string"),
        },
        TypeIr::Bool => match value {
            Value::Bool(_) => Ok(value.clone()),
            _ => wrong("a bool"),
        },
        TypeIr::Int { min, max } => {
            let Some(int) = value.as_i64().or_else(|| {
                value
                    .as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            }) else {
                return wrong("an int");
            };
            if min.is_some_and(|min| int < min) || max.is_some_and(|max| int > max) {
                return Err(format!("`{path}` is {int}, outside {}", range(*min, *max)));
            }
            Ok(Value::from(int))
        }
        TypeIr::Float { min, max } => {
            let Some(float) = value.as_f64() else {
                return wrong("a number");
            };
            if min.is_some_and(|min| float < min) || max.is_some_and(|max| float > max) {
                return Err(format!("`{path}` is {float}, outside {}", range(*min, *max)));
            }
            Ok(value.clone())
        }
        TypeIr::List {
            item,
            min_items,
            max_items,
        } => {
            let Value::Array(items) = value else {
                return wrong("a list");
            };
            let count = items.len() as u64;
            if min_items.is_some_and(|min| count < min) || max_items.is_some_and(|max| count > max)
            {
                return Err(format!(
                    "`{path}` has {count} items, outside {}",
                    range(*min_items, *max_items)
                ));
            }
            let mut out = Vec::with_capacity(items.len());
            for (index, element) in items.iter().enumerate() {
                out.push(validate_type(spec, item, element, &format!("{path}[{index}]"), depth + 1)?);
            }
            Ok(Value::Array(out))
        }
        TypeIr::Enum { variants } => match value {
            Value::String(text) if variants.contains(text) => Ok(value.clone()),
            _ => wrong(&format!("one of {}", variants.join(" | "))),
        },
        TypeIr::Contract { name } => validate_contract(spec, name, value, path, depth + 1),
        TypeIr::Optional { inner } => match value {
            Value::Null => Ok(Value::Null),
            _ => validate_type(spec, inner, value, path, depth + 1),
        },
    }
}

fn range<T: std::fmt::Display>(min: Option<T>, max: Option<T>) -> String {
    match (min, max) {
        (Some(min), Some(max)) => format!("{min}..={max}"),
        (Some(min), None) => format!("{min}.."),
        (None, Some(max)) => format!("..={max}"),
        (None, None) => "..".to_string(),
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn shown(path: &str) -> String {
    if path.is_empty() {
        "the output".to_string()
    } else {
        format!("`{path}`")
    }
}
