//! Tests of the expression interpreter: expressions compiled from spec text, evaluated over fixed data.

use charter_compiler::graph::{BinaryOpIr, BuiltinIr, ExprIr, NameIr, QuantifierIr, UnaryOpIr};
use serde_json::{Value, json};

use super::*;
use crate::testing::gate_expr;

fn env() -> Bindings {
    Bindings::default()
        .with(
            NameIr::Request,
            json!({
                "goal": "ship it", "n": 3, "ratio": 0.5, "xs": [1, 2, 3],
                "words": ["alpha", "beta"]
            }),
        )
        .with(NameIr::Step("review".into()), json!({"score": 8, "verdict": "PASS"}))
        .with(
            NameIr::Candidate,
            json!({
                "id": "c1", "round": 1, "hash": "sha256:00", "failed": [], "skipped": ["T-3"],
                "items": [{"score": 8, "verdict": "PASS"}, {"score": 3, "verdict": "FAIL", "notes": "thin"}],
                "text": "key sk-ABCDEFGHIJKLMNOPQRSTUVWX here"
            }),
        )
        .with(
            NameIr::Run,
            json!({"round": 1, "step_count": 2, "tokens": 1500, "cost": 0.25, "elapsed": 1000}),
        )
}

/// Compiles `expr` as a gate rule and checks that it evaluates to `expected`.
fn check(expr: &str, expected: bool) {
    let ir = gate_expr(expr);
    match evaluate_bool(&ir, &env()) {
        Ok(value) => assert_eq!(value, expected, "{expr}"),
        Err(error) => panic!("{expr}: unexpected error: {error}"),
    }
}

/// Compiles `expr` as a gate rule and checks that it fails with `message`.
fn check_error(expr: &str, message: &str) {
    let ir = gate_expr(expr);
    match evaluate_bool(&ir, &env()) {
        Ok(value) => panic!("{expr}: expected an error, got {value}"),
        Err(error) => assert_eq!(error.to_string(), message, "{expr}"),
    }
}

#[test]
fn paths_and_comparisons() {
    check("request.goal == \"ship it\"", true);
    check("request.n == 3", true);
    check("request.n != 3", false);
    check("request.n == 3.0", true);
    check("request.ratio < 1", true);
    check("request.n >= 3 and request.n <= 3", true);
    check("request.n > 3", false);
    check("request.goal > \"apple\"", true);
    check("review.score >= 7", true);
    check("run.cost <= 2.5", true);
    check("run.tokens < 1000", false);
}

#[test]
fn missing_optionals_read_as_none() {
    check("request.note == none", true);
    check("request.note != none", false);
    check("request.inner.deep == none", true);
    check("review.notes == none", true);
}

#[test]
fn variants_compare_equal_to_their_strings() {
    check("review.verdict == PASS", true);
    check("review.verdict != FAIL", true);
    check("every r in candidate.items: r.verdict == PASS", false);
    check("some r in candidate.items: r.verdict == FAIL", true);
}

#[test]
fn boolean_operators_short_circuit() {
    check("not (request.n == 3)", false);
    check("request.n == 4 or request.goal == \"ship it\"", true);
    // The right side would divide by zero: it must not be evaluated.
    check("request.n == 4 and request.n / 0 > 1", false);
    check("request.n == 3 or request.n / 0 > 1", true);
    check_error("request.n == 3 and request.n / 0 > 1", "division by zero");
}

#[test]
fn arithmetic() {
    check("request.n + 1 == 4", true);
    check("request.n - 5 == -2", true);
    check("request.n * request.ratio == 1.5", true);
    check("request.n / 2 == 1.5", true);
    check("-request.n == -3", true);
    check_error("request.n / (request.n - 3) > 0", "division by zero");
    check_error("request.ratio / 0.0 > 0", "division by zero");
}

#[test]
fn builtins() {
    check("len(request.words) == 2", true);
    check("len(request.goal) == 7", true);
    check("contains(request.words, \"beta\")", true);
    check("contains(request.words, \"gamma\")", false);
    check("contains(request.xs, 2.0)", true);
    check("contains(request.goal, \"ip\")", true);
    check("matches(candidate.text, \"sk-[A-Za-z0-9]{20,}\")", true);
    check("matches(request.goal, \"^ship\")", true);
    check("matches(request.goal, \"^it\")", false);
    check("sum(request.xs) == 6", true);
    check("min(request.xs) == 1", true);
    check("max(request.xs) == 3", true);
    check("max(request.words) == \"beta\"", true);
    check("len(candidate.skipped) == 1", true);
}

#[test]
fn quantifiers() {
    check("every x in request.xs: x > 0", true);
    check("every x in request.xs: x > 1", false);
    check("some x in request.xs: x > 2", true);
    check("some x in request.xs: x > 3", false);
    check("(count x in request.xs: x >= 2) == 2", true);
    check("(count r in candidate.items: r.notes != none) == 1", true);
    check("every x in candidate.failed: x == \"never\"", true);
    // Nested quantifiers shadow correctly.
    check("every x in request.xs: some y in request.xs: y == x", true);
}

#[test]
fn unbound_names_are_errors() {
    let ir = gate_expr("review.score > 1");
    let error = evaluate_bool(&ir, &Bindings::default());
    assert_eq!(
        error.map_err(|error| error.to_string()),
        Err("`review` has no value here".to_string())
    );
}

fn literal(value: Value) -> ExprIr {
    ExprIr::Literal { value }
}

fn binary(op: BinaryOpIr, lhs: ExprIr, rhs: ExprIr) -> ExprIr {
    ExprIr::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    }
}

fn call(function: BuiltinIr, args: Vec<ExprIr>) -> ExprIr {
    ExprIr::Call { function, args }
}

fn path(root: NameIr, fields: &[&str]) -> ExprIr {
    ExprIr::Path {
        root,
        fields: fields.iter().map(|field| field.to_string()).collect(),
    }
}

/// Evaluates hand-built IR (for results and errors a checked spec cannot produce).
fn value_of(expr: &ExprIr) -> Result<Value, String> {
    evaluate(expr, &env()).map_err(|error| error.to_string())
}

#[test]
fn result_types_of_arithmetic() {
    let cases = [
        (
            binary(BinaryOpIr::Add, literal(json!(1)), literal(json!(2))),
            Ok(json!(3)),
        ),
        (
            binary(BinaryOpIr::Add, literal(json!(1)), literal(json!(0.5))),
            Ok(json!(1.5)),
        ),
        (
            binary(BinaryOpIr::Div, literal(json!(4)), literal(json!(2))),
            Ok(json!(2.0)),
        ),
        (
            binary(BinaryOpIr::Mul, literal(json!(i64::MAX)), literal(json!(2))),
            Err("`*` overflows: the result is too large".to_string()),
        ),
        (
            binary(BinaryOpIr::Mul, literal(json!(1e308)), literal(json!(10.0))),
            Err("`*` overflows: the result is too large".to_string()),
        ),
        (
            ExprIr::Unary {
                op: UnaryOpIr::Neg,
                operand: Box::new(literal(json!(i64::MIN))),
            },
            Err("`-` overflows: the result is too large".to_string()),
        ),
        (
            call(BuiltinIr::Sum, vec![literal(json!([1, 2]))]),
            Ok(json!(3)),
        ),
        (
            call(BuiltinIr::Sum, vec![literal(json!([1, 2.5]))]),
            Ok(json!(3.5)),
        ),
        (call(BuiltinIr::Sum, vec![literal(json!([]))]), Ok(json!(0))),
        (
            call(BuiltinIr::Min, vec![literal(json!([3, 1.5, 2]))]),
            Ok(json!(1.5)),
        ),
        (
            ExprIr::Variant {
                name: "PASS".into(),
            },
            Ok(json!("PASS")),
        ),
        (
            ExprIr::List {
                items: vec![literal(json!(1)), ExprIr::Variant { name: "A".into() }],
            },
            Ok(json!([1, "A"])),
        ),
        (
            ExprIr::Record {
                fields: [
                    ("id".to_string(), literal(json!("a"))),
                    ("n".to_string(), path(NameIr::Request, &["n"])),
                ]
                .into_iter()
                .collect(),
            },
            Ok(json!({"id": "a", "n": 3})),
        ),
        (path(NameIr::Request, &["xs"]), Ok(json!([1, 2, 3]))),
    ];
    for (expr, expected) in cases {
        assert_eq!(value_of(&expr), expected, "{expr:?}");
    }
}

#[test]
fn runtime_type_errors_are_readable() {
    let cases = [
        (
            binary(BinaryOpIr::Lt, literal(json!("a")), literal(json!(1))),
            "cannot order string \"a\" and int 1",
        ),
        (
            binary(BinaryOpIr::Ge, literal(Value::Null), literal(json!(7))),
            "cannot order none and int 7",
        ),
        (
            binary(BinaryOpIr::And, literal(json!(1)), literal(json!(true))),
            "an operand of `and` must be a bool, but is int 1",
        ),
        (
            binary(BinaryOpIr::Add, literal(json!("a")), literal(json!(1))),
            "an operand of `+` must be a number, but is string \"a\"",
        ),
        (
            call(BuiltinIr::Len, vec![literal(json!(3))]),
            "the argument of `len` must be a list or a string, but is int 3",
        ),
        (
            call(BuiltinIr::Len, vec![]),
            "`len` takes 1 argument(s) but is given 0",
        ),
        (
            call(BuiltinIr::Max, vec![literal(json!([]))]),
            "`max` of an empty list",
        ),
        (
            call(BuiltinIr::Min, vec![literal(json!([1, "a"]))]),
            "cannot order string \"a\" and int 1",
        ),
        (
            call(BuiltinIr::Sum, vec![literal(json!(["a"]))]),
            "an element of `sum`'s list must be a number, but is string \"a\"",
        ),
        (
            call(
                BuiltinIr::Contains,
                vec![literal(Value::Null), literal(json!(1))],
            ),
            "the first argument of `contains` must be a list or a string, but is none",
        ),
        (
            call(
                BuiltinIr::Matches,
                vec![literal(json!("x")), literal(json!("("))],
            ),
            "invalid pattern \"(\" for `matches`: regex parse error:\n    (\n    ^\nerror: unclosed group",
        ),
        (
            path(NameIr::Request, &["goal", "x"]),
            "`request.goal` is string \"ship it\", which has no field `x`",
        ),
        (path(NameIr::Item, &["status"]), "`item` has no value here"),
        (
            ExprIr::Quantifier {
                quantifier: QuantifierIr::Every,
                var: "x".into(),
                over: Box::new(path(NameIr::Request, &["goal"])),
                body: Box::new(literal(json!(true))),
            },
            "the list of `every` must be a list, but is string \"ship it\"",
        ),
        (
            ExprIr::Quantifier {
                quantifier: QuantifierIr::Count,
                var: "x".into(),
                over: Box::new(path(NameIr::Request, &["xs"])),
                body: Box::new(path(NameIr::Local("x".into()), &[])),
            },
            "the body of `count` must be a bool, but is int 1",
        ),
    ];
    for (expr, expected) in cases {
        assert_eq!(value_of(&expr), Err(expected.to_string()), "{expr:?}");
    }
}

#[test]
fn each_variables_come_from_the_env_and_quantifiers_shadow_them() {
    let mut bindings = env();
    bindings.set(NameIr::Local("x".into()), json!(100));
    let outer = path(NameIr::Local("x".into()), &[]);
    assert_eq!(evaluate(&outer, &bindings), Ok(json!(100)));
    let shadowed = ExprIr::Quantifier {
        quantifier: QuantifierIr::Every,
        var: "x".into(),
        over: Box::new(path(NameIr::Request, &["xs"])),
        body: Box::new(binary(BinaryOpIr::Lt, outer.clone(), literal(json!(10)))),
    };
    assert_eq!(evaluate(&shadowed, &bindings), Ok(json!(true)));
}

#[test]
fn scores_are_numbers() {
    let ir = path(NameIr::Step("review".into()), &["score"]);
    assert_eq!(evaluate_number(&ir, &env()), Ok(8.0));
    let text = path(NameIr::Request, &["goal"]);
    assert_eq!(
        evaluate_number(&text, &env()).map_err(|error| error.to_string()),
        Err("the score must be a number, but is string \"ship it\"".to_string())
    );
}

#[test]
fn mentions_finds_a_name_at_any_depth() {
    let run = NameIr::Run;
    for (expr, reads) in [
        ("run.tokens <= 5000", true),
        ("review.score >= 7 and not (run.round > 2)", true),
        ("sum([1, run.step_count]) == 2", true),
        ("some x in request.xs: x > run.round", true),
        ("review.score >= 7", false),
        ("every x in request.xs: x > 1", false),
    ] {
        assert_eq!(mentions(&gate_expr(expr), &run), reads, "{expr}");
    }
}

#[test]
fn a_shared_name_is_not_copied() {
    let bindings = env();
    let plan = path(NameIr::Step("review".into()), &[]);
    let shared = evaluate_shared(&plan, &bindings).unwrap_or_default();
    assert!(
        bindings
            .steps
            .get("review")
            .is_some_and(|step| Arc::ptr_eq(step, &shared)),
        "a bare step name is the step's output itself"
    );
    let field = path(NameIr::Step("review".into()), &["score"]);
    assert_eq!(evaluate_shared(&field, &bindings).as_deref(), Ok(&json!(8)));
}
