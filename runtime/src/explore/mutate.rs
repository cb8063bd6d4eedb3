//! What the answer-changing fault kinds write into a recorded answer: JSON cut short (`truncated`, `tool_bad_args`), an earlier answer of the step (`stale`), and a schema-valid but wrong value (`wrong_value`).

use charter_compiler::graph::{CompiledSpec, StepKind, TypeIr};
use serde_json::Value;

use crate::formats::scenario::Cassette;

/// `text` cut at half its characters (at least one gone): what a token limit or a
/// dropped stream leaves of a JSON text.
pub fn cut_short(text: &str) -> String {
    let count = text.chars().count();
    text.chars().take(count / 2).collect()
}

/// The answer the latest earlier call of the same step (and turn) gave, when it differs
/// from what `calls[call]` answered: another item's answer, an earlier round's.
pub fn earlier_answer(cassette: &Cassette, call: usize) -> Option<Value> {
    let this = cassette.calls.get(call)?;
    cassette
        .calls
        .iter()
        .take(call)
        .rev()
        .filter(|other| {
            other.step == this.step && other.turn == this.turn && other.role == this.role
        })
        .filter_map(|other| other.response.clone())
        .find(|answer| Some(answer) != this.response.as_ref())
}

/// What `wrong_value` needs to know of a call beyond its answer.
#[derive(Debug, Default)]
pub struct Context {
    /// The call is a `finalize` step's: its `candidate_id` can name another candidate.
    finalize: bool,
    /// The candidates the run made by the call's round (`c1`, `c2`, ...).
    round: u64,
    /// The call's work item, and another item of the same step.
    item: Option<String>,
    other_item: Option<String>,
}

impl Context {
    /// The context of `cassette.calls[call]` in `spec`.
    pub fn of(spec: &CompiledSpec, cassette: &Cassette, call: usize) -> Context {
        let Some(this) = cassette.calls.get(call) else {
            return Context::default();
        };
        let finalize = spec
            .flow
            .step(&this.step)
            .is_some_and(|(_, step)| matches!(step.kind, StepKind::Finalize { .. }));
        let other_item = this.item.as_ref().and_then(|item| {
            cassette
                .calls
                .iter()
                .filter(|other| other.step == this.step && other.turn == this.turn)
                .filter_map(|other| other.item.clone())
                .filter(|other| other != item)
                .min()
        });
        Context {
            finalize,
            round: this.round,
            item: this.item.clone(),
            other_item,
        }
    }
}

/// Changes one value of `answer` (of contract `contract`) so that it still meets the
/// contract but is wrong: at a `finalize`, `candidate_id` names another candidate (an
/// earlier round's, else the next round's, which does not exist yet); in an item's
/// answer, the item's id becomes another item's; else the first enum is flipped to
/// another variant, or the first yes/no to the other. Returns whether anything changed.
pub fn wrong_value(
    spec: &CompiledSpec,
    contract: &str,
    answer: &mut Value,
    context: &Context,
) -> bool {
    if context.finalize
        && let Some(Value::String(id)) = answer.get_mut("candidate_id")
    {
        let other = if context.round > 1 {
            format!("c{}", context.round - 1)
        } else {
            format!("c{}", context.round.saturating_add(1))
        };
        if *id != other {
            *id = other;
            return true;
        }
    }
    if let (Some(item), Some(other)) = (&context.item, &context.other_item)
        && replace_string(answer, item, other)
    {
        return true;
    }
    flip(
        spec,
        &TypeIr::Contract {
            name: contract.to_string(),
        },
        answer,
        0,
    )
}

/// Replaces every string equal to `from` in `value` by `to`; whether any was.
fn replace_string(value: &mut Value, from: &str, to: &str) -> bool {
    match value {
        Value::String(text) if text == from => {
            *text = to.to_string();
            true
        }
        Value::Array(items) => {
            items
                .iter_mut()
                .map(|item| replace_string(item, from, to))
                .filter(|replaced| *replaced)
                .count()
                > 0
        }
        Value::Object(fields) => {
            fields
                .values_mut()
                .map(|field| replace_string(field, from, to))
                .filter(|replaced| *replaced)
                .count()
                > 0
        }
        _ => false,
    }
}

/// Flips the first enum (to the next variant) or bool of `value`, read as `ty`, in field
/// order; whether one was. Contracts nest at most `depth` 16 deep (a recursive contract).
fn flip(spec: &CompiledSpec, ty: &TypeIr, value: &mut Value, depth: usize) -> bool {
    if depth > 16 {
        return false;
    }
    match (ty, value) {
        (TypeIr::Optional { inner }, value) => flip(spec, inner, value, depth + 1),
        (TypeIr::Bool, Value::Bool(flag)) => {
            *flag = !*flag;
            true
        }
        (TypeIr::Enum { variants }, Value::String(text)) if variants.len() > 1 => {
            let at = variants.iter().position(|variant| variant == text);
            let next = at.map_or(0, |at| (at + 1) % variants.len());
            match variants.get(next) {
                Some(variant) if variant != text => {
                    *text = variant.clone();
                    true
                }
                _ => false,
            }
        }
        (TypeIr::List { item, .. }, Value::Array(items)) => items
            .iter_mut()
            .any(|element| flip(spec, item, element, depth + 1)),
        (TypeIr::Contract { name }, Value::Object(fields)) => {
            let Some(contract) = spec.contracts.get(name) else {
                return false;
            };
            contract.fields.iter().any(|field| {
                fields
                    .get_mut(&field.name)
                    .is_some_and(|value| flip(spec, &field.ty, value, depth + 1))
            })
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_short_leaves_half_the_characters_and_never_splits_one() {
        assert_eq!(cut_short("{\"a\": 1}"), "{\"a\"");
        assert_eq!(cut_short("ééééé"), "éé");
        assert_eq!(cut_short(""), "");
    }

    #[test]
    fn replace_string_reaches_nested_values_only_where_equal() {
        let mut value =
            serde_json::json!({"id": "T-1", "deps": ["T-1", "T-10"], "note": "T-1 done"});
        assert!(replace_string(&mut value, "T-1", "T-2"));
        assert_eq!(
            value,
            serde_json::json!({"id": "T-2", "deps": ["T-2", "T-10"], "note": "T-1 done"})
        );
        assert!(!replace_string(&mut value, "T-9", "T-2"));
    }
}
