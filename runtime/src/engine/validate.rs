//! Contract validation: checks a JSON value against a contract's resolved types and lists every violation, with defaults filled in.
//!
//! This validates from the IR's `TypeIr` directly rather than through the contract's
//! exported JSON Schema and the `jsonschema` crate: the types are already resolved, so
//! a walk over them is short; it fills in field defaults (a JSON Schema validator does
//! not); and every message is ours: exact, in the language's own terms (`int(0..=10)`,
//! `ok | failed`) and with "did you mean" for misspelt fields, because these messages are
//! what a model gets back when its output violates a contract. The generated schema and
//! this walk come from the same `TypeIr`, so they agree by construction.
//!
//! Paths are written `tasks[2].id` (the root itself is `$`).

use std::collections::BTreeMap;

use charter_compiler::diagnostics::did_you_mean;
use charter_compiler::graph::{CompiledSpec, ContractIr, TypeIr};
use serde_json::{Map, Value};

use crate::engine::value::{Num, describe};

pub use crate::formats::trace::Violation;

/// The violations as the text given back to a model: one `path: message` per line.
pub fn violations_text(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(Violation::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks a run's input against the spec's request contract (the contract of `request`,
/// `CompiledSpec::request`) before anything runs. On success returns the input with its
/// defaults filled in; a spec whose request contract nothing decides takes any input.
pub fn validate_request(spec: &CompiledSpec, input: &Value) -> Result<Value, Vec<Violation>> {
    validate_request_owned(spec, input.clone())
}

/// [`validate_request`] for an input the caller gives away: one that needs nothing filled
/// in is not copied.
pub fn validate_request_owned(spec: &CompiledSpec, input: Value) -> Result<Value, Vec<Violation>> {
    match spec
        .request
        .as_deref()
        .filter(|contract| spec.contracts.contains_key(*contract))
    {
        Some(contract) => Validator::for_spec(spec)
            .validate_owned(contract, input)
            .map_err(|(violations, _)| violations),
        None => Ok(input),
    }
}

/// Validates values against the contracts of one compiled spec.
#[derive(Clone, Copy, Debug)]
pub struct Validator<'a> {
    contracts: &'a BTreeMap<String, ContractIr>,
}

impl<'a> Validator<'a> {
    pub fn new(contracts: &'a BTreeMap<String, ContractIr>) -> Self {
        Validator { contracts }
    }

    pub fn for_spec(spec: &'a CompiledSpec) -> Self {
        Validator::new(&spec.contracts)
    }

    /// Checks `value` against contract `contract`. On success returns the value with
    /// every absent defaulted field filled in (optional fields without a default stay
    /// absent); otherwise every violation found, in document order.
    pub fn validate(&self, contract: &str, value: &Value) -> Result<Value, Vec<Violation>> {
        self.walk(|walk| walk.contract(contract, value, &Path::root()))
            .map(|filled| filled.unwrap_or_else(|| value.clone()))
    }

    /// [`Validator::validate`] for a value the caller gives away (a model's answer): a
    /// value that needs nothing filled in is returned as it is, not copied. On violations
    /// the value comes back too, as given.
    pub fn validate_owned(
        &self,
        contract: &str,
        value: Value,
    ) -> Result<Value, (Vec<Violation>, Value)> {
        match self.walk(|walk| walk.contract(contract, &value, &Path::root())) {
            Ok(filled) => Ok(filled.unwrap_or(value)),
            Err(violations) => Err((violations, value)),
        }
    }

    /// Checks `value` against any resolved type (a tool's output, a list of items, ...).
    pub fn validate_type(&self, ty: &TypeIr, value: &Value) -> Result<Value, Vec<Violation>> {
        self.walk(|walk| walk.check(ty, value, &Path::root()))
            .map(|filled| filled.unwrap_or_else(|| value.clone()))
    }

    /// Runs `check`; its value (none: the value checked, as it is) or the violations.
    fn walk(
        &self,
        check: impl FnOnce(&mut Walk<'_>) -> Option<Value>,
    ) -> Result<Option<Value>, Vec<Violation>> {
        let mut walk = Walk {
            contracts: self.contracts,
            violations: Vec::new(),
        };
        let filled = check(&mut walk);
        if walk.violations.is_empty() {
            Ok(filled)
        } else {
            Err(walk.violations)
        }
    }
}

/// Parses a model's text output as JSON. Surrounding whitespace and one Markdown code
/// fence (```` ```json ... ``` ````) are tolerated; anything else that is not JSON is a
/// violation at `$`.
pub fn parse_output(text: &str) -> Result<Value, Violation> {
    let trimmed = text.trim();
    let body = trimmed
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
        .map(|inner| {
            // Drop the info string (`json`) on the fence's first line.
            let inner = inner.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
            inner.trim()
        })
        .unwrap_or(trimmed);
    serde_json::from_str(body).map_err(|error| Violation {
        path: "$".to_string(),
        message: format!("the output is not valid JSON: {error}"),
    })
}

/// How a type is written in a spec, for messages: `int(0..=10)`, `list<Task>(1..=20)`,
/// `ok | failed`, `string?`.
pub fn type_text(ty: &TypeIr) -> String {
    fn range(min: Option<String>, max: Option<String>) -> String {
        match (min, max) {
            (None, None) => String::new(),
            (Some(min), None) => format!("({min}..)"),
            (None, Some(max)) => format!("(..={max})"),
            (Some(min), Some(max)) => format!("({min}..={max})"),
        }
    }
    match ty {
        TypeIr::String => "string".into(),
        TypeIr::Bool => "bool".into(),
        TypeIr::Int { min, max } => format!(
            "int{}",
            range(
                min.map(|min| min.to_string()),
                max.map(|max| max.to_string())
            )
        ),
        // Floats keep their decimal point (`0.0..=1.0`), as a spec writes them.
        TypeIr::Float { min, max } => format!(
            "float{}",
            range(
                min.map(|min| format!("{min:?}")),
                max.map(|max| format!("{max:?}"))
            )
        ),
        TypeIr::List {
            item,
            min_items,
            max_items,
        } => format!(
            "list<{}>{}",
            type_text(item),
            range(
                min_items.map(|min| min.to_string()),
                max_items.map(|max| max.to_string())
            )
        ),
        TypeIr::Enum { variants } => variants.join(" | "),
        TypeIr::Contract { name } => name.clone(),
        TypeIr::Optional { inner } => format!("{}?", type_text(inner)),
        TypeIr::Any => "any".into(),
    }
}

/// A path being walked: `tasks[2].id`. Each step borrows the one before it, so the text
/// is written only for a violation.
#[derive(Clone, Copy)]
enum Path<'p> {
    Root,
    Field(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl<'p> Path<'p> {
    fn root() -> Self {
        Path::Root
    }

    fn text(&self) -> String {
        let mut text = String::new();
        self.write(&mut text);
        if text.is_empty() {
            "$".to_string()
        } else {
            text
        }
    }

    fn write(&self, text: &mut String) {
        match self {
            Path::Root => {}
            Path::Field(parent, name) => {
                parent.write(text);
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(name);
            }
            Path::Index(parent, index) => {
                parent.write(text);
                text.push('[');
                text.push_str(&index.to_string());
                text.push(']');
            }
        }
    }

    fn field(&'p self, name: &'p str) -> Path<'p> {
        Path::Field(self, name)
    }

    fn index(&'p self, index: usize) -> Path<'p> {
        Path::Index(self, index)
    }
}

struct Walk<'a> {
    contracts: &'a BTreeMap<String, ContractIr>,
    violations: Vec<Violation>,
}

impl Walk<'_> {
    fn report(&mut self, path: &Path, message: String) {
        self.violations.push(Violation {
            path: path.text(),
            message,
        });
    }

    fn mismatch(&mut self, path: &Path, ty: &TypeIr, value: &Value) {
        let expected = type_text(ty);
        let message = match value {
            Value::Null => format!("expected {expected}, got none (this field is not optional)"),
            other => format!("expected {expected}, got {}", describe(other)),
        };
        self.report(path, message);
    }

    /// Checks `value` against `ty`: the value with defaults filled in, or none when that
    /// is the value as it is (most answers need nothing filled in, and are not copied).
    /// What it gives back for a value with violations is of no use. One piece: one arm per
    /// contract type.
    fn check(&mut self, ty: &TypeIr, value: &Value, path: &Path) -> Option<Value> {
        match ty {
            TypeIr::Any => None,
            TypeIr::Optional { inner } => {
                if value.is_null() {
                    None
                } else {
                    self.check(inner, value, path)
                }
            }
            TypeIr::String => {
                if !value.is_string() {
                    self.mismatch(path, ty, value);
                }
                None
            }
            TypeIr::Bool => {
                if !value.is_boolean() {
                    self.mismatch(path, ty, value);
                }
                None
            }
            TypeIr::Int { min, max } => self.int(ty, *min, *max, value, path),
            TypeIr::Float { min, max } => {
                let Some(number) = Num::from_value(value) else {
                    self.mismatch(path, ty, value);
                    return None;
                };
                let number = number.as_f64();
                let below = min.is_some_and(|min| number < min);
                let above = max.is_some_and(|max| number > max);
                if below || above {
                    self.report(
                        path,
                        format!(
                            "expected {}, got {} (out of range)",
                            type_text(ty),
                            describe(value)
                        ),
                    );
                }
                None
            }
            TypeIr::Enum { variants } => {
                match value {
                    Value::String(text) if variants.iter().any(|variant| variant == text) => {}
                    Value::String(text) => {
                        let mut message = format!(
                            "expected one of {}, got {}",
                            variants
                                .iter()
                                .map(|variant| format!("`{variant}`"))
                                .collect::<Vec<_>>()
                                .join(", "),
                            describe(value)
                        );
                        if let Some(hint) = did_you_mean(text, variants.iter().map(String::as_str))
                        {
                            message.push_str("; ");
                            message.push_str(&hint);
                        }
                        self.report(path, message);
                    }
                    other => self.mismatch(path, ty, other),
                }
                None
            }
            TypeIr::List {
                item,
                min_items,
                max_items,
            } => {
                let Value::Array(items) = value else {
                    self.mismatch(path, ty, value);
                    return None;
                };
                let count = items.len() as u64;
                if let Some(min) = min_items.filter(|min| count < *min) {
                    self.report(
                        path,
                        format!("expected at least {min} item{}, got {count}", plural(min)),
                    );
                }
                if let Some(max) = max_items.filter(|max| count > *max) {
                    self.report(
                        path,
                        format!("expected at most {max} item{}, got {count}", plural(max)),
                    );
                }
                let mut filled: Option<Vec<Value>> = None;
                for (index, element) in items.iter().enumerate() {
                    let checked = self.check(item, element, &path.index(index));
                    match (checked, &mut filled) {
                        (Some(checked), Some(filled)) => filled.push(checked),
                        (Some(checked), None) => {
                            // The first item that changes: the ones before it as they are.
                            let mut so_far = Vec::with_capacity(items.len());
                            so_far.extend(items.iter().take(index).cloned());
                            so_far.push(checked);
                            filled = Some(so_far);
                        }
                        (None, Some(filled)) => filled.push(element.clone()),
                        (None, None) => {}
                    }
                }
                filled.map(Value::Array)
            }
            TypeIr::Contract { name } => self.contract(name, value, path),
        }
    }

    fn int(
        &mut self,
        ty: &TypeIr,
        min: Option<i64>,
        max: Option<i64>,
        value: &Value,
        path: &Path,
    ) -> Option<Value> {
        // A float with no fractional part (`7.0`) is accepted as the int it equals, as
        // JSON Schema's `integer` does, and normalized to an int.
        let int = match Num::from_value(value) {
            Some(Num::Int(int)) => int,
            Some(Num::Float(float))
                if float.fract() == 0.0 && float.abs() < 9_007_199_254_740_992.0 =>
            {
                float as i64
            }
            _ => {
                self.mismatch(path, ty, value);
                return None;
            }
        };
        let below = min.is_some_and(|min| int < min);
        let above = max.is_some_and(|max| int > max);
        if below || above {
            self.report(
                path,
                format!(
                    "expected {}, got {} (out of range)",
                    type_text(ty),
                    describe(value)
                ),
            );
        }
        let normal = Value::from(int);
        (normal != *value).then_some(normal)
    }

    fn contract(&mut self, name: &str, value: &Value, path: &Path) -> Option<Value> {
        let Some(contract) = self.contracts.get(name) else {
            self.report(path, format!("unknown contract `{name}`"));
            return None;
        };
        let Value::Object(record) = value else {
            self.report(
                path,
                format!("expected a `{name}` record, got {}", describe(value)),
            );
            return None;
        };
        // Copied only once a field changes or a default is filled in; a field the record
        // does not know is a violation, so the copy need not drop it.
        let mut filled: Option<Map<String, Value>> = None;
        for field in &contract.fields {
            let field_path = path.field(&field.name);
            match record.get(&field.name) {
                Some(Value::Null) if field.optional => {}
                Some(field_value) => {
                    if let Some(checked) = self.check(&field.ty, field_value, &field_path) {
                        filled
                            .get_or_insert_with(|| record.clone())
                            .insert(field.name.clone(), checked);
                    }
                }
                None => {
                    if let Some(default) = &field.default {
                        filled
                            .get_or_insert_with(|| record.clone())
                            .insert(field.name.clone(), default.value.clone());
                    } else if !field.optional {
                        self.report(
                            &field_path,
                            format!(
                                "missing required field `{}` ({})",
                                field.name,
                                type_text(&field.ty)
                            ),
                        );
                    }
                }
            }
        }
        for key in record.keys() {
            if contract.fields.iter().any(|field| &field.name == key) {
                continue;
            }
            let names = contract.fields.iter().map(|field| field.name.as_str());
            let hint = did_you_mean(key, names.clone()).unwrap_or_else(|| {
                let known: Vec<String> = names.map(|name| format!("`{name}`")).collect();
                if known.is_empty() {
                    format!("`{name}` has no fields")
                } else {
                    format!("`{name}` has {}", known.join(", "))
                }
            });
            self.report(&path.field(key), format!("unknown field `{key}`; {hint}"));
        }
        filled.map(Value::Object)
    }
}

fn plural(count: u64) -> &'static str {
    if count == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests;
