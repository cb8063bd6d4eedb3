//! Tests of contract validation: values checked against contracts compiled from spec text.

use serde_json::{Value, json};

use super::*;
use crate::testing::compile_spec;

const SPEC: &str = r#"spec t version "1"
contract Request { goal: string  constraints: list<string> = [] }
contract Task { id: string  goal: string  acceptance: list<string>  depends_on: list<string> = [] }
contract Plan { goal: string  tasks: list<Task>(1..=3) }
contract Review {
  relevance: int(0..=10)
  ratio: float(0.0..=1.0)?
  verdict: PASS | FAIL | OPTIMIZE
  notes: string?
  tags: list<string?> = ["x"]
  done: bool = false
}
role planner { model: "openai:m" prompt: """{{ request.goal }}""" input: Request output: Plan }
role reviewer { model: "openai:m" prompt: """{{ plan.goal }}""" input: Plan output: Review }
flow {
  plan = planner(request) -> review
  review = reviewer(plan) -> done
}
"#;

/// Validates `value` against `contract` and checks the violations (`path: message` lines).
fn check(contract: &str, value: Value, expected: &[&str]) {
    let spec = compile_spec(SPEC);
    let validator = Validator::for_spec(&spec);
    let got: Vec<String> = match validator.validate(contract, &value) {
        Ok(_) => Vec::new(),
        Err(violations) => violations.iter().map(Violation::to_string).collect(),
    };
    assert_eq!(got, expected, "{value}");
}

/// Validates `value` and checks the value returned (defaults filled in).
fn check_filled(contract: &str, value: Value, expected: Value) {
    let spec = compile_spec(SPEC);
    let validator = Validator::for_spec(&spec);
    match validator.validate(contract, &value) {
        Ok(filled) => assert_eq!(filled, expected),
        Err(violations) => panic!("unexpected violations: {}", violations_text(&violations)),
    }
    // A value given away is checked the same (and returned as it is when it needs nothing).
    match validator.validate_owned(contract, value) {
        Ok(filled) => assert_eq!(filled, expected),
        Err((violations, _)) => panic!("unexpected violations: {}", violations_text(&violations)),
    }
}

fn task(id: &str) -> Value {
    json!({"id": id, "goal": "g", "acceptance": []})
}

#[test]
fn valid_values_pass() {
    check("Plan", json!({"goal": "g", "tasks": [task("a")]}), &[]);
    check("Review", json!({"relevance": 10, "verdict": "PASS"}), &[]);
    check(
        "Review",
        json!({"relevance": 0, "verdict": "FAIL", "notes": null, "ratio": 1}),
        &[],
    );
    check(
        "Review",
        json!({"relevance": 7.0, "verdict": "FAIL", "tags": [null, "a"]}),
        &[],
    );
}

#[test]
fn every_violation_is_reported_with_its_path() {
    check(
        "Plan",
        json!({"goal": 3, "tasks": [task("a"), {"id": "b", "goal": "g"}, {"id": 7, "goal": "g", "acceptance": ["ok", 1]}]}),
        &[
            "goal: expected string, got int 3",
            "tasks[1].acceptance: missing required field `acceptance` (list<string>)",
            "tasks[2].id: expected string, got int 7",
            "tasks[2].acceptance[1]: expected string, got int 1",
        ],
    );
}

#[test]
fn missing_and_unknown_fields() {
    check(
        "Task",
        json!({"id": "a", "goals": "g", "acceptance": [], "zzz": 1}),
        &[
            "goal: missing required field `goal` (string)",
            "goals: unknown field `goals`; did you mean `goal`?",
            "zzz: unknown field `zzz`; `Task` has `id`, `goal`, `acceptance`, `depends_on`",
        ],
    );
}

#[test]
fn enums_ranges_and_list_bounds() {
    check(
        "Review",
        json!({"relevance": 11, "verdict": "PAS", "ratio": 1.5}),
        &[
            "relevance: expected int(0..=10), got int 11 (out of range)",
            "ratio: expected float(0.0..=1.0), got float 1.5 (out of range)",
            "verdict: expected one of `PASS`, `FAIL`, `OPTIMIZE`, got string \"PAS\"; did you mean `PASS`?",
        ],
    );
    check(
        "Review",
        json!({"relevance": 2.5, "verdict": 1}),
        &[
            "relevance: expected int(0..=10), got float 2.5",
            "verdict: expected PASS | FAIL | OPTIMIZE, got int 1",
        ],
    );
    check(
        "Plan",
        json!({"goal": "g", "tasks": []}),
        &["tasks: expected at least 1 item, got 0"],
    );
    check(
        "Plan",
        json!({"goal": "g", "tasks": [task("a"), task("b"), task("c"), task("d")]}),
        &["tasks: expected at most 3 items, got 4"],
    );
}

#[test]
fn nulls_and_wrong_shapes() {
    check(
        "Review",
        json!({"relevance": null, "verdict": "PASS", "done": null}),
        &[
            "relevance: expected int(0..=10), got none (this field is not optional)",
            "done: expected bool, got none (this field is not optional)",
        ],
    );
    check(
        "Plan",
        json!([1, 2]),
        &["$: expected a `Plan` record, got a list of 2"],
    );
    check(
        "Plan",
        json!({"goal": "g", "tasks": "none"}),
        &["tasks: expected list<Task>(1..=3), got string \"none\""],
    );
    check("Nope", json!({}), &["$: unknown contract `Nope`"]);
}

#[test]
fn defaults_are_filled_in_and_ints_normalized() {
    check_filled(
        "Task",
        json!({"id": "a", "goal": "g", "acceptance": []}),
        json!({"id": "a", "goal": "g", "acceptance": [], "depends_on": []}),
    );
    check_filled(
        "Review",
        json!({"relevance": 7.0, "verdict": "PASS", "notes": null}),
        json!({"relevance": 7, "verdict": "PASS", "notes": null, "tags": ["x"], "done": false}),
    );
    // Nested records get their defaults too.
    check_filled(
        "Plan",
        json!({"goal": "g", "tasks": [task("a")]}),
        json!({"goal": "g", "tasks": [{"id": "a", "goal": "g", "acceptance": [], "depends_on": []}]}),
    );
    // Only the second item needs its default: the first is kept as it was, in its place.
    let full = json!({"id": "a", "goal": "g", "acceptance": [], "depends_on": ["z"]});
    check_filled(
        "Plan",
        json!({"goal": "g", "tasks": [full.clone(), task("b"), full.clone()]}),
        json!({"goal": "g", "tasks": [
            full.clone(),
            {"id": "b", "goal": "g", "acceptance": [], "depends_on": []},
            full.clone(),
        ]}),
    );
    // A value that needs nothing filled in comes back equal.
    let whole = json!({"relevance": 3, "verdict": "FAIL", "tags": [], "done": true});
    check_filled("Review", whole.clone(), whole);
}

#[test]
fn a_value_given_away_comes_back_with_its_violations_as_it_was_given() {
    let spec = compile_spec(SPEC);
    let validator = Validator::for_spec(&spec);
    let given = json!({"relevance": 7.0, "verdict": "MAYBE"});
    match validator.validate_owned("Review", given.clone()) {
        Ok(filled) => panic!("MAYBE is no verdict, yet it passed as {filled}"),
        Err((violations, answer)) => {
            assert_eq!(answer, given, "not normalized, nothing filled in");
            assert_eq!(violations.len(), 1, "{violations:?}");
        }
    }
}

#[test]
fn builtin_contracts_validate() {
    check(
        "Delivery",
        json!({"candidate_id": "c1", "summary": "s"}),
        &[],
    );
    check("Answer", json!({"approved": true}), &[]);
    check(
        "Answer",
        json!({"approved": "yes"}),
        &["approved: expected bool, got string \"yes\""],
    );
}

#[test]
fn model_output_is_parsed_leniently_but_only_as_json() {
    assert_eq!(parse_output(" {\"a\": 1} \n"), Ok(json!({"a": 1})));
    assert_eq!(
        parse_output("```json\n{\"a\": 1}\n```"),
        Ok(json!({"a": 1}))
    );
    assert_eq!(parse_output("```\n[1]\n```"), Ok(json!([1])));
    let error = parse_output("not json {");
    assert_eq!(
        error.map_err(|violation| violation.to_string()),
        Err("$: the output is not valid JSON: expected ident at line 1 column 2".to_string())
    );
}

#[test]
fn type_texts() {
    let spec = compile_spec(SPEC);
    let texts: Vec<String> = match spec.contracts.get("Review") {
        Some(review) => review
            .fields
            .iter()
            .map(|field| type_text(&field.ty))
            .collect(),
        None => panic!("no Review"),
    };
    assert_eq!(
        texts,
        [
            "int(0..=10)",
            "float(0.0..=1.0)",
            "PASS | FAIL | OPTIMIZE",
            "string",
            "list<string?>",
            "bool"
        ]
    );
}

#[test]
fn a_run_input_is_checked_against_the_request_contract_with_defaults_filled() {
    // The request contract is the entry role's input, whatever its name.
    let spec = compile_spec(
        r#"spec t version "1"
contract Order { item: string  count: int(1..) = 1 }
contract Receipt { id: string }
role clerk { model: "openai:m" prompt: """{{ order.item }}""" input: Order output: Receipt }
flow { take = clerk(request) -> done }
"#,
    );
    assert_eq!(spec.request.as_deref(), Some("Order"));
    assert_eq!(
        validate_request(&spec, &json!({"item": "tea"})),
        Ok(json!({"item": "tea", "count": 1}))
    );
    let violations: Vec<String> = validate_request(&spec, &json!({"item": 3, "count": 0}))
        .err()
        .unwrap_or_default()
        .iter()
        .map(Violation::to_string)
        .collect();
    assert_eq!(violations.len(), 2, "{violations:?}");
    assert!(violations[0].starts_with("item: "), "{violations:?}");
    assert!(violations[1].starts_with("count: "), "{violations:?}");
}
