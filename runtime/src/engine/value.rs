//! Run-time values: `serde_json::Value` with the language's rules for numbers, equality, ordering and display.
//!
//! Every value the runtime handles (requests, role outputs, candidates, gate inputs) is a
//! plain `serde_json::Value`. This module holds the few rules the language adds on top:
//! an `int` and a `float` are both numbers and compare by value (`1 == 1.0`), `none` is
//! JSON `null`, an enum variant is its name as a string, and values are described in
//! messages by their language type name (`int`, `string`, `list`, `record`, ...).

use std::cmp::Ordering;

use serde_json::{Number, Value};

/// A number taken out of a JSON value: an integer when JSON holds one that fits `i64`,
/// otherwise a float.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    /// The number in `value`, if it is one. Integers beyond `i64` become floats.
    pub fn from_value(value: &Value) -> Option<Num> {
        let Value::Number(number) = value else {
            return None;
        };
        match number.as_i64() {
            Some(int) => Some(Num::Int(int)),
            None => number.as_f64().map(Num::Float),
        }
    }

    /// The number as a float (exact for every `int` up to 2^53).
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(int) => int as f64,
            Num::Float(float) => float,
        }
    }

    /// The number as a JSON value; `None` for a float that JSON cannot hold (NaN, infinite).
    pub fn to_value(self) -> Option<Value> {
        match self {
            Num::Int(int) => Some(Value::Number(Number::from(int))),
            Num::Float(float) => Number::from_f64(float).map(Value::Number),
        }
    }

    /// Numeric comparison across `int` and `float`.
    pub fn compare(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            (a, b) => a.as_f64().partial_cmp(&b.as_f64()),
        }
    }
}

/// The language's name for the type of `value`: `none`, `bool`, `int`, `float`,
/// `string`, `list` or `record`.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "none",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_i64() || number.is_u64() => "int",
        Value::Number(_) => "float",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "record",
    }
}

/// Equality as the language defines it: numbers compare by value across `int` and
/// `float`, lists element-wise, records key by key; everything else structurally.
pub fn values_equal(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Number(_), Value::Number(_)) => {
            match (Num::from_value(left), Num::from_value(right)) {
                (Some(a), Some(b)) => a.compare(b) == Some(Ordering::Equal),
                _ => left == right,
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| values_equal(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, x)| b.get(key).is_some_and(|y| values_equal(x, y)))
        }
        _ => left == right,
    }
}

/// Ordering as `<`, `<=`, `>`, `>=` define it: numbers with numbers, strings with strings
/// (by Unicode code point). `None` when the two cannot be ordered.
pub fn compare_values(left: &Value, right: &Value) -> Option<Ordering> {
    match (left, right) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => Num::from_value(left)?.compare(Num::from_value(right)?),
    }
}

/// A short description of a value for messages: its type and, for scalars and small
/// values, its JSON text (`int 11`, `string "pass"`, `none`, `list of 3`).
pub fn describe(value: &Value) -> String {
    const LIMIT: usize = 40;
    match value {
        Value::Null => "none".to_string(),
        Value::Array(items) => format!("a list of {}", items.len()),
        Value::Object(_) => "a record".to_string(),
        _ => {
            let text = value.to_string();
            let shown = if text.chars().count() > LIMIT {
                let cut: String = text.chars().take(LIMIT).collect();
                format!("{cut}...")
            } else {
                text
            };
            format!("{} {shown}", type_name(value))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_across_int_and_float() {
        let cases = [
            (json!(1), json!(1.0), true),
            (json!(1), json!(1.5), false),
            (json!([1, 2.0]), json!([1.0, 2]), true),
            (json!({"a": 3}), json!({"a": 3.0}), true),
            (json!({"a": 3}), json!({"a": 3, "b": 1}), false),
            (json!("x"), json!("x"), true),
            (json!(null), json!(null), true),
            (json!(null), json!(0), false),
            (json!(u64::MAX), json!(u64::MAX), true),
        ];
        for (left, right, expected) in cases {
            assert_eq!(values_equal(&left, &right), expected, "{left} == {right}");
        }
    }

    #[test]
    fn ordering_is_defined_for_numbers_and_strings_only() {
        assert_eq!(compare_values(&json!(2), &json!(2.5)), Some(Ordering::Less));
        assert_eq!(
            compare_values(&json!("b"), &json!("a")),
            Some(Ordering::Greater)
        );
        assert_eq!(compare_values(&json!(1), &json!("1")), None);
        assert_eq!(compare_values(&json!(null), &json!(1)), None);
        assert_eq!(compare_values(&json!(true), &json!(false)), None);
    }

    #[test]
    fn type_names_and_descriptions() {
        assert_eq!(type_name(&json!(3)), "int");
        assert_eq!(type_name(&json!(3.5)), "float");
        assert_eq!(type_name(&json!({})), "record");
        assert_eq!(describe(&json!(11)), "int 11");
        assert_eq!(describe(&json!("pass")), "string \"pass\"");
        assert_eq!(describe(&json!([1, 2, 3])), "a list of 3");
        assert_eq!(describe(&json!(null)), "none");
        let long = "x".repeat(100);
        assert!(describe(&json!(long)).ends_with("..."));
    }

    #[test]
    fn nums_round_trip() {
        assert_eq!(Num::from_value(&json!(7)), Some(Num::Int(7)));
        assert_eq!(Num::from_value(&json!(7.5)), Some(Num::Float(7.5)));
        assert_eq!(Num::from_value(&json!("7")), None);
        assert_eq!(Num::Float(f64::NAN).to_value(), None);
        assert_eq!(Num::Int(-2).to_value(), Some(json!(-2)));
    }
}
