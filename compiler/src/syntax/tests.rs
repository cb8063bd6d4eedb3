//! Parser tests: the DESIGN example, precedence, literals, error recovery, role files and
//! spans. Each test is a table of `check(input, expect)` lines.

use std::fmt::Write as _;

use super::ast::*;
use super::parse;
use crate::diagnostics::{Diagnostic, Sources};
use crate::{Loader, MemoryLoader, NoFiles};

const EXAMPLE: &str = include_str!("testdata/closed_loop.charter");

const CREATIVE_ROLE: &str = "---
id: creative
name: Creative writer
description: Writes the creative parts
model: default
input: Task
output: StageResult
tools: [web_search, publish]
timeout: 5m
retry: 2 backoff 1s
rules:
  - core
max_tool_calls: 4
tool_rules:
  publish: only once, at the end
---
Write {{ task.goal }}.
";

fn example_loader() -> MemoryLoader {
    let mut loader = MemoryLoader::default();
    for prompt in [
        "prompts/planner.md.j2",
        "prompts/reviewer.md.j2",
        "prompts/finalizer.md.j2",
    ] {
        loader.files.insert(
            prompt.to_string(),
            "Do the work: {{ request.goal }}\n".to_string(),
        );
    }
    loader
        .files
        .insert("roles/creative.md".to_string(), CREATIVE_ROLE.to_string());
    loader
}

fn parse_with(text: &str, loader: &dyn Loader) -> (Option<SpecFile>, Vec<Diagnostic>, Sources) {
    let mut sources = Sources::new();
    let file = sources.add("test.charter", text);
    let (spec, diagnostics) = parse(file, &mut sources, loader);
    (spec, diagnostics, sources)
}

/// Diagnostics as `CODE line:column message`, one per line (in the order reported).
fn render(diagnostics: &[Diagnostic], sources: &Sources) -> String {
    let mut out = String::new();
    for diagnostic in diagnostics {
        let (line, column) = diagnostic
            .primary_span()
            .map_or((0, 0), |span| sources.line_column(span.file, span.start));
        let _ = writeln!(
            out,
            "{} {line}:{column} {}",
            diagnostic.code, diagnostic.message
        );
    }
    out
}

/// Parses `input` (a whole spec) and compares its diagnostics with `expect`.
fn check(input: &str, expect: &str) {
    let (_, diagnostics, sources) = parse_with(input, &example_loader());
    let got = render(&diagnostics, &sources);
    assert_eq!(got.trim(), expect.trim(), "input:\n{input}");
}

const HEADER: &str = "spec t version \"1\"\n";

/// Parses `expr` as `invariant i: always EXPR` and compares it, printed as an
/// S-expression, with `expect`.
fn check_expr(expr: &str, expect: &str) {
    let text = format!("{HEADER}invariant i: always {expr}\n");
    let (spec, diagnostics, sources) = parse_with(&text, &NoFiles);
    assert_eq!(render(&diagnostics, &sources), "", "expr: {expr}");
    let got = match spec.as_ref().and_then(|spec| spec.items.first()) {
        Some(Item::Invariant(Invariant {
            kind: InvariantKind::Always(expr),
            ..
        })) => sexpr(expr),
        other => format!("not an always invariant: {other:?}"),
    };
    assert_eq!(got, expect, "expr: {expr}");
}

fn sexpr(expr: &Expr) -> String {
    let list = |items: &[Expr]| items.iter().map(sexpr).collect::<Vec<_>>().join(" ");
    match &expr.kind {
        ExprKind::Bool(value) => value.to_string(),
        ExprKind::Int(value) => value.to_string(),
        ExprKind::Float(value) => format!("{value:?}"),
        ExprKind::Str(value) => format!("{value:?}"),
        ExprKind::None => "none".to_string(),
        ExprKind::List(items) => format!("[{}]", list(items)),
        ExprKind::Record(fields) => format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(key, value)| format!("{}: {}", key.name, sexpr(value)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ExprKind::Path(parts) => parts
            .iter()
            .map(|part| part.name.as_str())
            .collect::<Vec<_>>()
            .join("."),
        ExprKind::Unary { op, operand } => {
            let op = match op {
                UnaryOp::Not => "not",
                UnaryOp::Neg => "neg",
            };
            format!("({op} {})", sexpr(operand))
        }
        ExprKind::Binary { op, lhs, rhs } => {
            let op = match op {
                BinaryOp::Or => "or",
                BinaryOp::And => "and",
                BinaryOp::Eq => "==",
                BinaryOp::Ne => "!=",
                BinaryOp::Lt => "<",
                BinaryOp::Le => "<=",
                BinaryOp::Gt => ">",
                BinaryOp::Ge => ">=",
                BinaryOp::Add => "+",
                BinaryOp::Sub => "-",
                BinaryOp::Mul => "*",
                BinaryOp::Div => "/",
            };
            format!("({op} {} {})", sexpr(lhs), sexpr(rhs))
        }
        ExprKind::Call { function, args } => format!("({} {})", function.name, list(args)),
        ExprKind::Quantifier {
            kind,
            var,
            over,
            body,
        } => {
            let kind = match kind {
                QuantifierKind::Every => "every",
                QuantifierKind::Some => "some",
                QuantifierKind::Count => "count",
            };
            format!("({kind} {} {} {})", var.name, sexpr(over), sexpr(body))
        }
    }
}

fn example() -> SpecFile {
    let (spec, diagnostics, sources) = parse_with(EXAMPLE, &example_loader());
    assert_eq!(render(&diagnostics, &sources), "");
    spec.unwrap_or_else(|| SpecFile {
        name: Ident {
            name: String::new(),
            span: crate::Span::new(crate::FileId(0), 0, 0),
        },
        version: StringLit {
            value: String::new(),
            span: crate::Span::new(crate::FileId(0), 0, 0),
        },
        doc: None,
        items: Vec::new(),
        span: crate::Span::new(crate::FileId(0), 0, 0),
        includes: std::collections::BTreeMap::new(),
    })
}

#[test]
fn design_example_parses_clean() {
    let spec = example();
    assert_eq!(spec.name.name, "closed_loop");
    assert_eq!(spec.version.value, "1.0.0");
    assert_eq!(
        spec.doc.map(|doc| doc.value).as_deref(),
        Some("Six roles in a closed loop: plan, execute, evaluate, repair, finalize.")
    );
    let kinds: Vec<&str> = spec
        .items
        .iter()
        .map(|item| match item {
            Item::Import(_) => "import",
            Item::Models(_) => "models",
            Item::Rules(_) => "rules",
            Item::Contract(_) => "contract",
            Item::Tool(_) => "tool",
            Item::Mcp(_) => "mcp",
            Item::Role(_) => "role",
            Item::Gate(_) => "gate",
            Item::Repair(_) => "repair",
            Item::Invariant(_) => "invariant",
            Item::Budget(_) => "budget",
            Item::Session(_) => "session",
            Item::Remember(_) => "remember",
            Item::Flow(_) => "flow",
        })
        .collect();
    assert_eq!(
        kinds.join(" "),
        "import models rules contract contract contract contract contract contract contract \
         contract contract tool tool role role role role gate repair invariant invariant \
         invariant budget flow"
    );
}

#[test]
fn precedence() {
    check_expr(
        "a or b and not c == d + e * f",
        "(or a (and b (not (== c (+ d (* e f))))))",
    );
    check_expr("a and b or c and d", "(or (and a b) (and c d))");
    check_expr("a - b - c", "(- (- a b) c)");
    check_expr("a / b * c", "(* (/ a b) c)");
    check_expr("-a * -2", "(* (neg a) (neg 2))");
    check_expr("- -a", "(neg (neg a))");
    check_expr("not not a", "(not (not a))");
    check_expr("(a or b) and c", "(and (or a b) c)");
    check_expr("a.b.c >= 7.0", "(>= a.b.c 7.0)");
    check_expr("run.tokens <= 200000", "(<= run.tokens 200000)");
    check_expr("x != none", "(!= x none)");
    check_expr("r.status != failed", "(!= r.status failed)");
    check_expr("review.verdict == PASS", "(== review.verdict PASS)");
    check_expr("a == b and c < d", "(and (== a b) (< c d))");
    check_expr("1 + 2 * 3 - 4 / 2", "(- (+ 1 (* 2 3)) (/ 4 2))");
    check_expr("a//comment\n + b", "(+ a b)");
    check_expr("a /* c */ / b", "(/ a b)");
}

#[test]
fn literals_and_calls() {
    check_expr("true or false", "(or true false)");
    check_expr("[1, 2.5, \"x\", none,]", "[1 2.5 \"x\" none]");
    check_expr("[]", "[]");
    check_expr("len(x) > 0", "(> (len x) 0)");
    check_expr("contains(a.b, \"q\")", "(contains a.b \"q\")");
    check_expr(
        "matches(candidate.text, \"sk-[A-Za-z0-9]{20,}\")",
        "(matches candidate.text \"sk-[A-Za-z0-9]{20,}\")",
    );
    check_expr("max()", "(max )");
    check_expr("unknown_fn(1)", "(unknown_fn 1)");
    check_expr(
        "{id: \"a\", depends_on: [\"b\"],}",
        "{id: \"a\", depends_on: [\"b\"]}",
    );
    check_expr("{}", "{}");
    check_expr(
        "[{id: \"a\", goal: \"g\"}, {id: \"b\", goal: \"h\"}]",
        "[{id: \"a\", goal: \"g\"} {id: \"b\", goal: \"h\"}]",
    );
    check_expr("\"a\\\"b\\\\c\\n\\u{41}\"", "\"a\\\"b\\\\c\\nA\"");
    check_expr("1_000", "1000");
    check_expr("1e3", "1000.0");
    check_expr("\"\"", "\"\"");
}

#[test]
fn keywords_are_not_prefixes_of_names() {
    check_expr("done_x and notes or order", "(or (and done_x notes) order)");
    check_expr("nothing == none_left", "(== nothing none_left)");
    check_expr("every_x.count", "every_x.count");
    check_expr("true_value", "true_value");
    check_expr("count > 3", "(> count 3)");
    check_expr("inner.in_x", "inner.in_x");
}

#[test]
fn quantifier_bodies_extend_right() {
    check_expr(
        "every r in candidate.items: r.status != failed",
        "(every r candidate.items (!= r.status failed))",
    );
    check_expr(
        "some x in xs: x > 1 and x < 5",
        "(some x xs (and (> x 1) (< x 5)))",
    );
    check_expr(
        "a and every x in xs: x.ok or b",
        "(and a (every x xs (or x.ok b)))",
    );
    check_expr("(count x in xs: x.ok) >= 3", "(>= (count x xs x.ok) 3)");
    check_expr(
        "not every x in xs: some y in x.items: y == 1",
        "(not (every x xs (some y x.items (== y 1))))",
    );
    check_expr("every x in [1, 2]: x > 0", "(every x [1 2] (> x 0))");
}

#[test]
fn comparisons_do_not_chain() {
    check(
        &format!("{HEADER}invariant i: always a == b == c\n"),
        "E001 2:28 comparisons cannot be chained",
    );
}

#[test]
fn durations() {
    let budget = |wall: &str| format!("{HEADER}budget {{ wall {wall} }}\n");
    check(&budget("250ms"), "");
    check(&budget("30s"), "");
    check(&budget("15m"), "");
    check(&budget("2h"), "");
    check(&budget("3d"), "E013 2:15 unknown duration unit `d`");
    check(&budget("30"), "E013 2:15 duration `30` has no unit");
    check(&budget("1.5s"), "E013 2:15 fractional duration `1.5s`");
    check(
        &budget("99999999999999999999h"),
        "E013 2:15 duration `99999999999999999999h` is too large",
    );
    let (spec, diagnostics, _) = parse_with(&budget("3x"), &NoFiles);
    assert_eq!(
        diagnostics.first().and_then(|d| d.help.clone()).as_deref(),
        Some(super::literals::DURATION_UNITS_HELP)
    );
    assert!(spec.is_some());
    let (spec, _, _) = parse_with(
        &format!("{HEADER}role r {{ timeout: 15m retry: 2 backoff 250ms }}\n"),
        &NoFiles,
    );
    match spec.as_ref().and_then(|spec| spec.items.first()) {
        Some(Item::Role(role)) => {
            assert_eq!(role.timeout.as_ref().map(|t| t.millis), Some(900_000));
            let retry = role
                .retry
                .as_ref()
                .map(|r| (r.count.value, r.backoff.as_ref().map(|b| b.millis)));
            assert_eq!(retry, Some((2, Some(250))));
        }
        other => panic!("not a role: {other:?}"),
    }
}

/// The value of the prompt of the first role in `text`.
fn first_prompt(text: &str) -> String {
    let (spec, diagnostics, sources) = parse_with(text, &NoFiles);
    assert_eq!(render(&diagnostics, &sources), "");
    match spec.as_ref().and_then(|spec| spec.items.first()) {
        Some(Item::Role(Role {
            prompt:
                Some(Prompt {
                    source: PromptSource::Inline(lit),
                    ..
                }),
            ..
        })) => lit.value.clone(),
        other => format!("no inline prompt: {other:?}"),
    }
}

#[test]
fn triple_quoted_blocks_are_dedented() {
    let role = |prompt: &str| format!("{HEADER}role r {{\n  prompt: {prompt}\n}}\n");
    assert_eq!(
        first_prompt(&role("\"\"\"\n    Carry out {{ task.goal }}\n  \"\"\"")),
        "Carry out {{ task.goal }}"
    );
    assert_eq!(
        first_prompt(&role("\"\"\"\n    One\n      two\n\n    three\n  \"\"\"")),
        "One\n  two\n\nthree"
    );
    assert_eq!(first_prompt(&role("\"\"\"inline\"\"\"")), "inline");
    assert_eq!(first_prompt(&role("\"\"\"\"\"\"")), "");
    assert_eq!(
        first_prompt(&role("\"plain \\\"quoted\\\"\"")),
        "plain \"quoted\""
    );
    assert_eq!(first_prompt(&role("\"\"")), "");
    // The DESIGN example's executor prompt.
    let spec = example();
    let executor = spec.items.iter().find_map(|item| match item {
        Item::Role(role) if role.name.name == "executor" => Some(role),
        _ => None,
    });
    let prompt = executor.and_then(|role| match &role.prompt {
        Some(Prompt {
            source: PromptSource::Inline(lit),
            ..
        }) => Some(lit.value.as_str()),
        _ => None,
    });
    assert_eq!(
        prompt,
        Some("Carry out exactly this work order. {{ task.goal }}")
    );
}

#[test]
fn bad_strings() {
    check(
        &format!("{HEADER}rules r {{ \"a \\q b\" }}\n"),
        "E013 2:11 unknown escape `\\q`",
    );
    check(
        &format!("{HEADER}rules r {{ \"unclosed }}\nrole x {{}}\n"),
        "E001 2:11 unterminated string",
    );
}

#[test]
fn error_recovery_per_item() {
    // Three independent syntax errors in three items: three E001s, and the good items
    // between them are still parsed.
    let text = format!(
        "{HEADER}\
contract A {{ x: strng? }}
contract B {{ y: string }}
role r {{
  model: default
  timeout 2m
}}
tool t {{ input: B output: B effect: read }}
gate g on s {{
  hard h: x == else CODE
  pass when true
}}
budget {{ steps 4 }}
"
    );
    check(
        &text,
        "
E001 2:17 expected a type
E001 6:11 expected `:`
E001 10:13 expected an expression after `==`
",
    );
    let (spec, _, _) = parse_with(&text, &NoFiles);
    let names: Vec<String> = spec
        .map(|spec| spec.items)
        .unwrap_or_default()
        .iter()
        .map(|item| match item {
            Item::Contract(contract) => format!("contract {}", contract.name.name),
            Item::Tool(tool) => format!("tool {}", tool.name.name),
            Item::Gate(gate) => format!("gate {} {}", gate.name.name, gate.rules.len()),
            Item::Budget(_) => "budget".to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    // A field with a bad type is left out but its contract is kept; a rule whose
    // expression lacks an operand keeps what came before the operator.
    assert_eq!(
        names,
        ["contract A", "contract B", "tool t", "gate g 1", "budget"]
    );
}

#[test]
fn error_recovery_in_flow() {
    let text = format!(
        "{HEADER}\
flow {{
  a = r(request) => b
  b = r(a) -> c
  c = gate q pass -> done fail ->
  d = ask \"ok?\" -> done
}}
budget {{ steps 4 }}
"
    );
    check(
        &text,
        "
E001 3:18 expected one of `->`, `pass`, `when`
E001 6:3 expected `repair` or a target
",
    );
    let (spec, _, _) = parse_with(&text, &NoFiles);
    let summary: Vec<String> = spec
        .map(|spec| spec.items)
        .unwrap_or_default()
        .iter()
        .map(|item| match item {
            Item::Flow(flow) => format!(
                "flow {}",
                flow.steps
                    .iter()
                    .map(|step| step.name.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Item::Budget(_) => "budget".to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(summary, ["flow b d", "budget"]);
}

#[test]
fn unclosed_blocks() {
    check(
        &format!("{HEADER}contract A {{ x: string\nrole r {{ model: m }}\n"),
        "E001 3:1 expected `}` to close `contract` before the next item",
    );
    check(
        &format!("{HEADER}flow {{\n  a = r(x) -> done\nbudget {{ steps 2 }}\n"),
        "E001 4:1 expected `}` to close the flow",
    );
    check(
        &format!("{HEADER}flow {{\n  a = r(x) -> done\n"),
        "E001 4:1 expected `}` to close the flow",
    );
}

#[test]
fn comments() {
    check(
        &format!(
            "{HEADER}// a comment with \"quotes\" and role x {{\n/* block\n contract X {{ */ budget {{ steps 1 }} // end\n"
        ),
        "",
    );
    check(
        &format!("{HEADER}rules r {{ \"http://example.com /* not a comment */\" }}\n"),
        "",
    );
    let (spec, _, _) = parse_with(
        &format!("{HEADER}rules r {{ \"http://example.com /* x */\" }}\n"),
        &NoFiles,
    );
    match spec.as_ref().and_then(|spec| spec.items.first()) {
        Some(Item::Rules(rules)) => assert_eq!(
            rules.lines.first().map(|line| line.value.as_str()),
            Some("http://example.com /* x */")
        ),
        other => panic!("not rules: {other:?}"),
    }
    check(
        &format!("{HEADER}budget {{ steps 1 }}\n/* never closed\nrole x {{}}\n"),
        "E001 3:1 unterminated `/*` comment",
    );
    check(&format!("{HEADER}role r {{ model: m // ü 😀\n}}\n"), "");
}

#[test]
fn header_errors() {
    check("", "E001 1:1 expected `spec`");
    check("spec X version \"1\"", "E001 1:6 expected a name");
    check("spec x \"1\"", "E001 1:8 expected `version`");
    let (spec, _, _) = parse_with("spec x", &NoFiles);
    assert!(spec.is_none());
    check("spec x version \"1\"\n\"\"\"doc\"\"\"\n", "");
}

#[test]
fn helpful_messages() {
    let help = |text: &str| {
        let (_, diagnostics, _) = parse_with(text, &NoFiles);
        diagnostics
            .first()
            .map(|d| format!("{}: {}", d.message, d.help.clone().unwrap_or_default()))
            .unwrap_or_default()
    };
    assert_eq!(
        help(&format!("{HEADER}role Planner {{}}\n")),
        "expected a name: names of roles, steps, tools, gates, rules and models are lower-case (`[a-z_][a-z0-9_]*`)"
    );
    assert_eq!(
        help(&format!("{HEADER}contract request {{}}\n")),
        "expected a contract name: contract names start with an upper-case letter, e.g. `Request`"
    );
    assert_eq!(
        help(&format!("{HEADER}role r {{ timout: 2m }}\n")),
        "expected one of `rules`, `input`, `output`, `model`, `prompt`, `tools`, `max_tool_calls`, `timeout`, `retry`, `history`, `permit`, `tool_choice`, `messages`, `retry_after_effects`, `}`: did you mean `timeout`?"
    );
    assert!(
        help(&format!("{HEADER}role r {{ mesages: chat }}\n"))
            .ends_with("did you mean `messages`?"),
        "every role property is offered"
    );
    assert_eq!(
        help(&format!("{HEADER}tool t {{ input: A  sandbx {{}} }}\n")),
        "expected one of `,`, `input`, `output`, `effect`, `timeout`, `retry`, `sandbox`, `}`: did you mean `sandbox`?"
    );
    assert!(
        help(&format!("{HEADER}tool t {{ sandbox {{ netwrk: any }} }}\n"))
            .ends_with("did you mean `network`?"),
        "every sandbox key is offered"
    );
    assert_eq!(
        help(&format!("{HEADER}mcp m {{ comand: [\"x\"] }}\n")),
        "expected one of `tools`, `timeout`, `retry`, `sandbox`, `env`, `command`, `url`, `headers`, `}`: did you mean `command`?"
    );
    assert!(
        help(&format!(
            "{HEADER}mcp m {{ url: \"http://a\", header: {{}} }}\n"
        ))
        .ends_with("did you mean `headers`?"),
        "every mcp key is offered"
    );
    assert_eq!(
        help(&format!(
            "{HEADER}flow {{\n  a = r(x) -> b\n  b = gate g pas -> done fail -> repair\n}}\n"
        )),
        "expected one of `->`, `pass`, `when`: did you mean `pass`?"
    );
    assert_eq!(
        help(&format!("{HEADER}contract\n")),
        "expected a contract name: "
    );
    assert_eq!(
        help(&format!("{HEADER}widget x {{}}\n")),
        "expected an item: an item starts with `import`, `models`, `rules`, `contract`, `tool`, `mcp`, `role`, `gate`, `repair`, `invariant`, `budget`, `session`, `remember` or `flow`"
    );
}

#[test]
fn non_ascii_names_say_names_are_ascii() {
    for (text, letter) in [
        ("spec héllo_ü version \"1\"\n".to_string(), 'é'),
        (format!("{HEADER}role rôle {{}}\n"), 'ô'),
        (format!("{HEADER}role été {{}}\n"), 'é'),
        (format!("{HEADER}contract Ünit {{}}\n"), 'Ü'),
    ] {
        let (_, diagnostics, _) = parse_with(&text, &NoFiles);
        let help = diagnostics.first().and_then(|d| d.help.clone());
        assert_eq!(
            help.as_deref(),
            Some(
                format!("names are ASCII (`[a-z_][a-z0-9_]*`): `{letter}` cannot be part of one")
                    .as_str()
            ),
            "{text}: {diagnostics:?}"
        );
    }
}

/// The contract fields of `contract C { FIELDS }`, each as `name: type`.
fn check_types(fields: &str, expect: &str) {
    let text = format!("{HEADER}contract C {{ {fields} }}\n");
    let (spec, diagnostics, sources) = parse_with(&text, &NoFiles);
    assert_eq!(render(&diagnostics, &sources), "", "fields: {fields}");
    let got = match spec.as_ref().and_then(|spec| spec.items.first()) {
        Some(Item::Contract(contract)) => contract
            .fields
            .iter()
            .map(|field| {
                let default = field
                    .default
                    .as_ref()
                    .map(|expr| format!(" = {}", sexpr(expr)))
                    .unwrap_or_default();
                format!("{}: {}{default}", field.name.name, type_string(&field.ty))
            })
            .collect::<Vec<_>>()
            .join("; "),
        other => format!("not a contract: {other:?}"),
    };
    assert_eq!(got, expect, "fields: {fields}");
}

fn type_string(ty: &TypeExpr) -> String {
    let range = |range: &Option<RangeLit>| match range {
        None => String::new(),
        Some(range) => format!(
            "({}{}{})",
            range
                .min
                .as_ref()
                .map(|n| n.value.to_string())
                .unwrap_or_default(),
            if range.inclusive { "..=" } else { ".." },
            range
                .max
                .as_ref()
                .map(|n| n.value.to_string())
                .unwrap_or_default(),
        ),
    };
    let base = match &ty.kind {
        TypeKind::String => "string".to_string(),
        TypeKind::Bool => "bool".to_string(),
        TypeKind::Int(r) => format!("int{}", range(r)),
        TypeKind::Float(r) => format!("float{}", range(r)),
        TypeKind::List(element, r) => format!("list<{}>{}", type_string(element), range(r)),
        TypeKind::Enum(variants) => variants
            .iter()
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>()
            .join("|"),
        TypeKind::Named(name) => name.name.clone(),
    };
    if ty.optional {
        format!("{base}?")
    } else {
        base
    }
}

#[test]
fn type_forms() {
    check_types("a: string b: bool", "a: string; b: bool");
    check_types("a: int(1..=20) b: int(1..)", "a: int(1..=20); b: int(1..)");
    check_types("a: int(..=5) b: int(0..10)", "a: int(..=5); b: int(0..10)");
    check_types("a: float(-1.5..=1.5)", "a: float(-1.5..=1.5)");
    check_types("a: list<list<Task>>", "a: list<list<Task>>");
    check_types("a: list<Task>(1..=20)?", "a: list<Task>(1..=20)?");
    check_types("a: ok | failed | partial", "a: ok|failed|partial");
    check_types("a: PASS | FAIL | OPTIMIZE?", "a: PASS|FAIL|OPTIMIZE?");
    check_types("a: string | int", "a: string|int");
    check_types("a: Plan?, b: string?", "a: Plan?; b: string?");
    check_types(
        "a: list<string> = [] b: int = 3 c: string? = none d: string = \"x\"",
        "a: list<string> = []; b: int = 3; c: string? = none; d: string = \"x\"",
    );
    check_types("a: int = -1", "a: int = (neg 1)");
    check_types("", "");
    check(
        &format!("{HEADER}contract C {{ a: strng }}\n"),
        "E001 2:17 expected a type",
    );
    check(&format!("{HEADER}contract C {{ a: int(1..=) }}\n"), "");
}

#[test]
fn duplicate_properties() {
    check(
        &format!("{HEADER}role r {{\n  timeout: 2m\n  model: m\n  timeout: 3m\n}}\n"),
        "E003 5:3 `timeout` is given twice in role `r`",
    );
    let (_, diagnostics, sources) = parse_with(
        &format!("{HEADER}role r {{\n  timeout: 2m\n  timeout: 3m\n}}\n"),
        &NoFiles,
    );
    let note = diagnostics
        .first()
        .and_then(|d| d.labels.iter().find(|label| !label.primary))
        .map(|label| sources.snippet(label.span));
    assert_eq!(note, Some("timeout: 2m"));
    check(
        &format!("{HEADER}tool t {{ effect: read effect: write }}\n"),
        "E003 2:23 `effect` is given twice in tool `t`",
    );
    check(
        &format!("{HEADER}budget {{ steps 1 steps 2 }}\n"),
        "E003 2:18 `steps` is given twice in the budget",
    );
}

#[test]
fn items_in_detail() {
    let spec = example();
    let mut seen = Vec::new();
    for item in &spec.items {
        match item {
            Item::Models(models) => {
                let entries: Vec<String> = models.entries.iter().map(model_string).collect();
                seen.push(format!("models {}", entries.join(", ")));
            }
            Item::Rules(rules) => seen.push(format!(
                "rules {} {:?} {}",
                rules.name.name,
                rules.version.as_ref().map(|v| v.value.as_str()),
                rules.lines.len()
            )),
            Item::Tool(tool) => seen.push(format!(
                "tool {} {:?} {:?} {:?}",
                tool.name.name,
                tool.input.as_ref().map(|i| i.name.as_str()),
                tool.output.as_ref().map(|i| i.name.as_str()),
                tool.effect.as_ref().map(|e| e.effect)
            )),
            Item::Role(role) if role.name.name == "planner" => seen.push(format!(
                "role planner model={:?} rules={:?} inputs={:?} timeout={:?} retry={:?}",
                role.model.as_ref().map(|m| match m {
                    ModelRef::Alias(alias) => alias.name.clone(),
                    ModelRef::Literal(lit) => lit.value.clone(),
                }),
                role.rules
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>(),
                role.inputs
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>(),
                role.timeout.as_ref().map(|t| t.millis),
                role.retry
                    .as_ref()
                    .map(|r| (r.count.value, r.backoff.as_ref().map(|b| b.millis))),
            )),
            Item::Gate(gate) => {
                let rules: Vec<String> = gate.rules.iter().map(gate_rule_string).collect();
                seen.push(format!(
                    "gate {} on {}: {} | pass {}",
                    gate.name.name,
                    gate.subject.name,
                    rules.join(" | "),
                    sexpr(&gate.pass_when)
                ));
            }
            Item::Repair(repair) => {
                let arms: Vec<String> = repair.arms.iter().map(repair_arm_string).collect();
                seen.push(format!(
                    "repair {} {:?}: {}",
                    repair.rounds.value,
                    repair.no_progress.as_ref().map(|n| n.value),
                    arms.join("; ")
                ));
            }
            Item::Invariant(invariant) => seen.push(format!(
                "invariant {}: {}",
                invariant.name.name,
                match &invariant.kind {
                    InvariantKind::HasNoTools { role } => format!("{} has no tools", role.name),
                    InvariantKind::OnlyUses { role, tool } =>
                        format!("only {} uses {}", role.name, tool.name),
                    InvariantKind::Always(expr) => format!("always {}", sexpr(expr)),
                }
            )),
            Item::Budget(budget) => seen.push(format!(
                "budget {:?} {:?} {:?} {:?}",
                budget.tokens.as_ref().map(|t| t.value),
                budget.cost.as_ref().map(|t| t.value),
                budget.wall.as_ref().map(|t| t.millis),
                budget.steps.as_ref().map(|t| t.value),
            )),
            Item::Flow(flow) => {
                for step in &flow.steps {
                    seen.push(format!("step {}", step_string(step)));
                }
            }
            _ => {}
        }
    }
    let expect = r#"
models default=openai:gpt-4o-mini 0.15/0.6, strong=anthropic:claude-sonnet-4-5
rules core Some("2026.11") 2
tool web_search Some("Query") Some("Hits") Some(Read)
tool publish Some("Post") Some("Receipt") Some(External)
role planner model=Some("default") rules=["core"] inputs=["Request"] timeout=Some(120000) retry=Some((2, Some(1000)))
gate quality on execute: Hard all_done (every r candidate.items (!= r.status failed)) STAGE_FAILED | Hard no_secret (not (matches candidate.text "sk-[A-Za-z0-9]{20,}")) SECRET_LEAK | Warn has_notes (!= review.notes none) NO_NOTES | score relevance 2 review.relevance Some((6.0, "LOW_RELEVANCE")) | score completeness 1 review.completeness Some((6.0, "INCOMPLETE")) | pass (>= score 7.0)
repair 3 Some(2): STAGE_FAILED -> rerun execute false; LOW_RELEVANCE,INCOMPLETE -> rerun execute true; SECRET_LEAK -> block "secret in candidate"; NO_NOTES -> accept
invariant judges_are_toolless: reviewer has no tools
invariant one_publisher: only executor uses publish
invariant bounded_cost: always (<= run.tokens 200000)
budget Some(500000) Some(2.5) Some(3600000) Some(40)
step plan = planner(request) -> execute
step execute = each t in plan.tasks: executor(t) concurrency Some(4) check None -> review
step review = reviewer(candidate) -> judge
step judge = gate quality pass -> deliver fail -> repair
step deliver = finalize finalizer(best) -> done
"#;
    assert_eq!(seen.join("\n"), expect.trim());
}

/// A `models` entry as `alias=target` with its price (`input/output`) when it has one.
fn model_string(entry: &ModelEntry) -> String {
    format!(
        "{}={}{}",
        entry.alias.name,
        entry.target.value,
        entry
            .price
            .as_ref()
            .map(|p| format!(" {}/{}", p.input.value, p.output.value))
            .unwrap_or_default()
    )
}

/// A gate rule: a check as `SEVERITY name expr CODE`, a score as `score name weight expr
/// below`.
fn gate_rule_string(rule: &GateRule) -> String {
    match rule {
        GateRule::Check {
            severity,
            name,
            expr,
            code,
            ..
        } => format!("{severity:?} {} {} {}", name.name, sexpr(expr), code.name),
        GateRule::Score {
            name,
            weight,
            expr,
            below,
            ..
        } => format!(
            "score {} {} {} {:?}",
            name.name,
            weight.value,
            sexpr(expr),
            below.as_ref().map(|(n, c)| (n.value, c.name.clone()))
        ),
    }
}

/// A repair arm as `CODES -> action` (`_` for the wildcard).
fn repair_arm_string(arm: &RepairArm) -> String {
    let pattern = match &arm.pattern {
        RepairPattern::Codes(codes) => codes
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(","),
        RepairPattern::Wildcard(_) => "_".to_string(),
    };
    let action = match &arm.action {
        Action::Rerun {
            step,
            with_feedback,
            ..
        } => format!("rerun {} {with_feedback}", step.name),
        Action::Replan(_) => "replan".to_string(),
        Action::Accept(_) => "accept".to_string(),
        Action::Block(s) => format!("block {:?}", s.value),
        Action::Fail(s) => format!("fail {:?}", s.value),
        Action::Ask(s) => format!("ask {:?}", s.value),
    };
    format!("{pattern} -> {action}")
}

fn target_string(target: &Target) -> String {
    match target {
        Target::Step(name) => name.name.clone(),
        Target::Done(_) => "done".to_string(),
        Target::Blocked(s) => format!("blocked {:?}", s.value),
        Target::Failed(s) => format!("failed {:?}", s.value),
    }
}

fn step_string(step: &Step) -> String {
    let args = |args: &[Expr]| args.iter().map(sexpr).collect::<Vec<_>>().join(", ");
    let body = match &step.body {
        StepBody::Call { role, args: a } => format!("{}({})", role.name, args(a)),
        StepBody::Each {
            var,
            over,
            role,
            args: a,
            concurrency,
            check,
        } => format!(
            "each {} in {}: {}({}) concurrency {:?} check {:?}",
            var.name,
            sexpr(over),
            role.name,
            args(a),
            concurrency.as_ref().map(|c| c.value),
            check.as_ref().map(|c| (
                c.gate.name.clone(),
                c.by.as_ref().map(|b| b.name.clone()),
                c.retries.as_ref().map(|r| r.value)
            ))
        ),
        StepBody::Gate { gate } => format!("gate {}", gate.name),
        StepBody::Finalize { role, args: a } => format!("finalize {}({})", role.name, args(a)),
        StepBody::Ask { question, .. } => format!("ask {:?}", question.value),
        StepBody::Branch => "branch".to_string(),
        StepBody::Tool { tool, args: a } => format!("tool {}({})", tool.name, args(a)),
    };
    let next = match &step.next {
        Next::Goto(target) => format!("-> {}", target_string(target)),
        Next::When { arms, otherwise } => {
            let mut text = arms
                .iter()
                .map(|(condition, target)| {
                    format!("when {} -> {}", sexpr(condition), target_string(target))
                })
                .collect::<Vec<_>>()
                .join(" ");
            if let Some(otherwise) = otherwise {
                text.push_str(&format!(" else -> {}", target_string(otherwise)));
            }
            text
        }
        Next::PassFail { pass, fail } => format!(
            "pass -> {} fail -> {}",
            target_string(pass),
            match fail {
                FailTarget::Target(target) => target_string(target),
                FailTarget::Repair(_) => "repair".to_string(),
            }
        ),
    };
    let on_error = step
        .on_error
        .as_ref()
        .map(|step| format!(" on_error -> {}", step.name))
        .unwrap_or_default();
    format!("{} = {body} {next}{on_error}", step.name.name)
}

/// Parses `flow { STEP }` and compares the step, printed back, with `expect`.
fn check_step(step: &str, expect: &str) {
    let text = format!("{HEADER}flow {{\n  {step}\n}}\n");
    let (spec, diagnostics, sources) = parse_with(&text, &NoFiles);
    assert_eq!(render(&diagnostics, &sources), "", "step: {step}");
    let got = match spec.as_ref().and_then(|spec| spec.items.first()) {
        Some(Item::Flow(flow)) => flow
            .steps
            .iter()
            .map(step_string)
            .collect::<Vec<_>>()
            .join("\n"),
        other => format!("not a flow: {other:?}"),
    };
    assert_eq!(got, expect, "step: {step}");
}

#[test]
fn step_forms() {
    check_step("a = r(x, y.z) -> b", "a = r(x, y.z) -> b");
    check_step("a = r() -> done", "a = r() -> done");
    check_step(
        "a = each t in plan.tasks: w(t) concurrency 4 check g by judge retries 2 -> b",
        "a = each t in plan.tasks: w(t) concurrency Some(4) check Some((\"g\", Some(\"judge\"), Some(2))) -> b",
    );
    check_step(
        "a = each t in [{id: \"x\", depends_on: []}]: w(t) check g -> b",
        "a = each t in [{id: \"x\", depends_on: []}]: w(t) concurrency None check Some((\"g\", None, None)) -> b",
    );
    check_step(
        "gate = gate quality pass -> done fail -> repair",
        "gate = gate quality pass -> done fail -> repair",
    );
    check_step(
        "j = gate q pass -> done fail -> blocked \"no\"",
        "j = gate q pass -> done fail -> blocked \"no\"",
    );
    check_step(
        "d = finalize f(best) -> done",
        "d = finalize f(best) -> done",
    );
    check_step(
        "h = ask \"ship it?\" when h.approved -> done else -> failed \"rejected\"",
        "h = ask \"ship it?\" when h.approved -> done else -> failed \"rejected\"",
    );
    check_step(
        "s = r(x) when s.n > 3 -> a when s.n > 1 -> b",
        "s = r(x) when (> s.n 3) -> a when (> s.n 1) -> b",
    );
    check_step(
        "a = r(x) -> b\n  b = each(x) -> done",
        "a = r(x) -> b\nb = each(x) -> done",
    );
    check_step("ask = ask(x) -> done", "ask = ask(x) -> done");
    check_step("a = r(x) -> b on_error -> c", "a = r(x) -> b on_error -> c");
    check_step(
        "a = r(x) when a.ok -> b else -> failed \"no\" on_error -> c\n  on_error = r(a) -> done",
        "a = r(x) when a.ok -> b else -> failed \"no\" on_error -> c\non_error = r(a) -> done",
    );
    check_step(
        "a = r(x) -> b  b = r(a) -> c",
        "a = r(x) -> b\nb = r(a) -> c",
    );
}

#[test]
fn other_items() {
    check(
        &format!(
            "{HEADER}import role \"nope.md\"\nrepair {{ rounds 1 _ -> replan }}\nrepair {{ rounds 2 A, B -> fail \"x\" _ -> ask \"y\" }}\n"
        ),
        "E016 2:13 cannot read role file `nope.md`",
    );
    check(
        &format!("{HEADER}models {{ a = \"x:y\" price 1 / 2, b = \"p:q\" }}\n"),
        "",
    );
    check(
        &format!("{HEADER}models {{ a = \"x:y\" price 1 }}\n"),
        "E001 2:28 expected `/`",
    );
    check(
        &format!(
            "{HEADER}role r {{ model: \"openai:gpt-4o\", input: A, B, output: C, tools: [], max_tool_calls: 3 }}\n"
        ),
        "",
    );
    check(
        &format!("{HEADER}role r {{ prompt: file(\"missing.j2\") }}\n"),
        "E016 2:23 cannot read prompt file `missing.j2`",
    );
}

/// Parses `import role "r.md"` with `role_text` as the file; returns the role (if any) and
/// the diagnostics, rendered with positions in whichever file they point into.
fn import_role(role_text: &str) -> (Option<Role>, String, Sources) {
    let mut loader = MemoryLoader::default();
    loader
        .files
        .insert("r.md".to_string(), role_text.to_string());
    let text = format!("{HEADER}import role \"r.md\"\n");
    let (spec, diagnostics, sources) = parse_with(&text, &loader);
    let role = match spec.and_then(|spec| spec.items.into_iter().next()) {
        Some(Item::Import(import)) => import.role,
        _ => None,
    };
    let mut rendered = String::new();
    for diagnostic in &diagnostics {
        let span = diagnostic.primary_span();
        let (line, column) = span.map_or((0, 0), |span| sources.line_column(span.file, span.start));
        let file = span
            .and_then(|span| sources.get(span.file))
            .map_or("?", |file| file.name.as_str());
        let _ = writeln!(
            rendered,
            "{} {file}:{line}:{column} {}",
            diagnostic.code, diagnostic.message
        );
    }
    (role, rendered, sources)
}

fn check_role_file(role_text: &str, expect: &str) {
    let (_, got, _) = import_role(role_text);
    assert_eq!(got.trim(), expect.trim(), "role file:\n{role_text}");
}

#[test]
fn role_files() {
    let (role, diagnostics, sources) = import_role(CREATIVE_ROLE);
    assert_eq!(diagnostics, "");
    let Some(role) = role else {
        panic!("no role");
    };
    assert_eq!(role.name.name, "creative");
    assert_eq!(sources.snippet(role.name.span), "creative");
    assert_eq!(
        role.origin,
        RoleOrigin::File {
            path: "r.md".to_string()
        }
    );
    assert_eq!(
        role.display_name.as_ref().map(|n| n.value.as_str()),
        Some("Creative writer")
    );
    assert_eq!(
        role.description.as_ref().map(|n| sources.snippet(n.span)),
        Some("Writes the creative parts")
    );
    match &role.model {
        Some(ModelRef::Alias(alias)) => assert_eq!(sources.snippet(alias.span), "default"),
        other => panic!("model: {other:?}"),
    }
    let names = |idents: &[Ident]| {
        idents
            .iter()
            .map(|i| format!("{}@{}", i.name, sources.snippet(i.span)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(names(&role.inputs), "Task@Task");
    assert_eq!(
        role.output.as_ref().map(|o| o.name.as_str()),
        Some("StageResult")
    );
    assert_eq!(names(&role.tools), "web_search@web_search publish@publish");
    assert_eq!(names(&role.rules), "core@core");
    assert_eq!(role.timeout.as_ref().map(|t| t.millis), Some(300_000));
    assert_eq!(
        role.retry
            .as_ref()
            .map(|r| (r.count.value, r.backoff.as_ref().map(|b| b.millis))),
        Some((2, Some(1000)))
    );
    assert_eq!(role.max_tool_calls.as_ref().map(|m| m.value), Some(4));
    assert_eq!(
        role.tool_rules
            .iter()
            .map(|rule| format!("{}: {}", rule.tool.name, rule.note.value))
            .collect::<Vec<_>>(),
        ["publish: only once, at the end"]
    );
    match &role.prompt {
        Some(Prompt {
            source:
                PromptSource::File {
                    path,
                    file: Some(file),
                },
            span,
        }) => {
            assert_eq!(path.value, "r.md");
            assert_eq!(*file, span.file);
            assert_eq!(sources.snippet(*span), "Write {{ task.goal }}.\n");
        }
        other => panic!("prompt: {other:?}"),
    }

    // Other shapes of the same properties.
    let (role, diagnostics, _) = import_role(
        "---\nid: r\nmodel: \"openai:gpt-4o\"\ninput: [Task, Plan]\nretry: {count: 3, backoff: 2s}\n---\n",
    );
    assert_eq!(diagnostics, "");
    let role = role.expect("role");
    assert!(matches!(role.model, Some(ModelRef::Literal(ref lit)) if lit.value == "openai:gpt-4o"));
    assert_eq!(role.inputs.len(), 2);
    assert_eq!(
        role.retry
            .as_ref()
            .map(|r| (r.count.value, r.backoff.as_ref().map(|b| b.millis))),
        Some((3, Some(2000)))
    );
    let (role, diagnostics, _) = import_role("---\nid: r\nretry: 4\n---\nbody");
    assert_eq!(diagnostics, "");
    assert_eq!(role.and_then(|r| r.retry).map(|r| r.count.value), Some(4));
}

#[test]
fn malformed_role_files() {
    check_role_file(
        "no front matter",
        "E016 r.md:1:1 role file `r.md` has no front matter",
    );
    check_role_file(
        "---\nid: r\nnever closed\n",
        "E016 r.md:1:1 role file `r.md` has no front matter",
    );
    check_role_file("---\nname: x\n---\n", "E016 r.md:2:1 role file has no `id`");
    check_role_file(
        "---\nid: 1st planner\n---\n",
        "E016 r.md:2:5 role id `1st planner` is not a valid name",
    );
    // A key Charter does not know is the file's own (`meta`); the checks warn (W012)
    // when the role never reads it, with "did you mean `tools`?".
    check_role_file("---\nid: r\ntoolz: [a]\n---\n", "");
    check_role_file(
        "---\nid: r\ntimeout: 3 days\n---\n",
        "E013 r.md:3:10 unknown duration unit `days`",
    );
    check_role_file(
        "---\nid: r\ntools: {a: 1}\n---\n",
        "E016 r.md:3:8 `tools` must be a name or a list of names, found a map",
    );
    check_role_file(
        "---\nid: r\nmax_tool_calls: many\n---\n",
        "E016 r.md:3:17 `max_tool_calls` must be a non-negative integer, found a string",
    );
    check_role_file(
        "---\nid: r\nretry: often\n---\n",
        "E016 r.md:3:8 `retry` must be a count, `\"N backoff D\"` or `{count, backoff}`, found `often`",
    );
    check_role_file(
        "---\nid: r\ntools: [a, b\nmodel: m\n---\n",
        "E016 r.md:4:6 malformed front matter in role file: illegal placement of ':' indicator",
    );
    let (_, diagnostics, _) = import_role("---\n- a\n- b\n---\n");
    assert!(
        diagnostics.contains("malformed front matter"),
        "{diagnostics}"
    );
    // An alias bomb (each level 8 copies of the last) stops early, said in words.
    let mut bomb = String::from("---\nid: r\nx0: &x0 {a: 1, b: 2, c: 3}\n");
    for level in 1..10 {
        let previous = format!("*x{}", level - 1);
        let list = [previous.as_str(); 8].join(", ");
        bomb.push_str(&format!("x{level}: &x{level} [{list}]\n"));
    }
    bomb.push_str("---\n");
    let (_, diagnostics, _) = import_role(&bomb);
    assert!(
        diagnostics
            .contains("malformed front matter in role file: it is too large or complex to read"),
        "{diagnostics}"
    );
}

#[test]
fn spans_point_at_the_right_text() {
    let (spec, _, sources) = parse_with(EXAMPLE, &example_loader());
    let spec = spec.expect("spec");
    let snippet = |span| sources.snippet(span).to_string();
    assert_eq!(snippet(spec.name.span), "closed_loop");
    assert_eq!(snippet(spec.version.span), "\"1.0.0\"");
    let mut found = Vec::new();
    for item in &spec.items {
        match item {
            Item::Import(import) => found.push(snippet(import.span)),
            Item::Contract(contract) if contract.name.name == "Plan" => {
                found.push(snippet(contract.span));
                for field in &contract.fields {
                    found.push(snippet(field.span));
                    found.push(snippet(field.ty.span));
                    if let TypeKind::List(element, Some(range)) = &field.ty.kind {
                        found.push(snippet(element.span));
                        found.push(snippet(range.span));
                    }
                }
            }
            Item::Role(role) if role.name.name == "planner" => {
                found.push(snippet(role.name.span));
                if let Some(timeout) = &role.timeout {
                    found.push(snippet(timeout.span));
                }
                if let Some(Prompt {
                    source: PromptSource::File { path, .. },
                    span,
                }) = &role.prompt
                {
                    found.push(snippet(*span));
                    found.push(snippet(path.span));
                }
            }
            Item::Gate(gate) => {
                if let Some(GateRule::Check {
                    expr, code, span, ..
                }) = gate.rules.first()
                {
                    found.push(snippet(*span));
                    found.push(snippet(expr.span));
                    found.push(snippet(code.span));
                    if let ExprKind::Quantifier { over, body, .. } = &expr.kind {
                        found.push(snippet(over.span));
                        found.push(snippet(body.span));
                    }
                }
                found.push(snippet(gate.pass_when.span));
            }
            Item::Flow(flow) => {
                if let Some(step) = flow.steps.get(1) {
                    found.push(snippet(step.span));
                    found.push(snippet(step.name.span));
                    if let Next::Goto(target) = &step.next {
                        found.push(snippet(target.span()));
                    }
                }
                if let Some(Step {
                    next:
                        Next::PassFail {
                            fail: FailTarget::Repair(span),
                            ..
                        },
                    ..
                }) = flow.steps.get(3)
                {
                    found.push(snippet(*span));
                }
            }
            _ => {}
        }
    }
    let expect = [
        "import role \"roles/creative.md\"",
        "contract Plan { goal: string  tasks: list<Task>(1..=20) }",
        "goal: string",
        "string",
        "tasks: list<Task>(1..=20)",
        "list<Task>(1..=20)",
        "Task",
        "(1..=20)",
        "planner",
        "2m",
        "file(\"prompts/planner.md.j2\")",
        "\"prompts/planner.md.j2\"",
        "hard all_done:  every r in candidate.items: r.status != failed   else STAGE_FAILED",
        "every r in candidate.items: r.status != failed",
        "STAGE_FAILED",
        "candidate.items",
        "r.status != failed",
        "score >= 7.0",
        "execute = each t in plan.tasks: executor(t) concurrency 4  -> review",
        "execute",
        "review",
        "repair",
    ];
    assert_eq!(found, expect);
}

#[test]
fn line_endings_and_byte_order_mark() {
    let crlf = EXAMPLE.replace('\n', "\r\n");
    let (spec, diagnostics, sources) = parse_with(&crlf, &example_loader());
    assert_eq!(render(&diagnostics, &sources), "");
    let spec = spec.expect("spec");
    assert_eq!(spec.items.len(), example().items.len());
    let executor_prompt = spec.items.iter().find_map(|item| match item {
        Item::Role(Role {
            prompt:
                Some(Prompt {
                    source: PromptSource::Inline(lit),
                    ..
                }),
            ..
        }) => Some(lit.value.clone()),
        _ => None,
    });
    assert_eq!(
        executor_prompt.as_deref(),
        Some("Carry out exactly this work order. {{ task.goal }}")
    );
    let with_bom = format!("\u{feff}{EXAMPLE}");
    let (spec, diagnostics, sources) = parse_with(&with_bom, &example_loader());
    assert_eq!(render(&diagnostics, &sources), "");
    assert_eq!(
        spec.map(|spec| sources.snippet(spec.name.span).to_string())
            .as_deref(),
        Some("closed_loop")
    );
}

#[test]
fn truncations_never_panic() {
    let boundaries: Vec<usize> = (0..=EXAMPLE.len())
        .filter(|&index| EXAMPLE.is_char_boundary(index))
        .collect();
    // Every prefix is parsed; the work is split over a few threads to keep the suite quick.
    let chunk = boundaries.len().div_ceil(4).max(1);
    std::thread::scope(|scope| {
        for ends in boundaries.chunks(chunk) {
            scope.spawn(move || {
                // The files are not truncated, so they are left out (reading the role
                // file's YAML would double the time of this test in a debug build).
                for &end in ends {
                    let text = EXAMPLE.get(..end).unwrap_or("");
                    let (spec, diagnostics, _) = parse_with(text, &NoFiles);
                    // Every prefix either parses or says why not.
                    assert!(
                        spec.is_some() || !diagnostics.is_empty(),
                        "prefix of {end} bytes gave nothing"
                    );
                }
            });
        }
    });
}

#[test]
fn strange_inputs_never_panic() {
    let deep = format!(
        "{HEADER}invariant i: always {}a{}\n",
        "(".repeat(500),
        ")".repeat(500)
    );
    let (_, diagnostics, _) = parse_with(&deep, &NoFiles);
    assert!(diagnostics.iter().any(|d| d.code == crate::Code::E001));
    let deep_list = format!(
        "{HEADER}contract C {{ a: {}string{} }}\n",
        "list<".repeat(300),
        ">".repeat(300)
    );
    let (_, diagnostics, _) = parse_with(&deep_list, &NoFiles);
    assert!(diagnostics.iter().any(|d| d.code == crate::Code::E001));
    let long_chain = format!("{HEADER}invariant i: always a{}\n", " + a".repeat(20_000));
    check(&long_chain, "E001 2:1047 expression has too many operators");
    let many_prefixes = format!("{HEADER}invariant i: always {}a\n", "not ".repeat(20_000));
    let (_, diagnostics, _) = parse_with(&many_prefixes, &NoFiles);
    assert!(diagnostics.iter().any(|d| d.code == crate::Code::E001));
    let long_list = format!("{HEADER}invariant i: always [{}]\n", "1, ".repeat(20_000));
    check(&long_list, "");
    for text in [
        "spec",
        "spec x version \"1\" \"\"\"",
        "spec x version \"1\"\n\"\"\"unclosed doc",
        "spec x version \"1\"\nrole r { prompt: \"\"\"\n never closed\n",
        "spec x version \"1\"\n/* unclosed comment",
        "spec x version \"1\"\nflow {",
        "spec x version \"1\"\nflow",
        "spec x version \"1\"\nflow { a = ",
        "spec x version \"1\"\nrules r { \"\\u{ffffffff}\" }",
        "spec é version \"1\"",
        "spec x version \"1\"\nrole é { }\ncontract ü {}",
        "\u{feff}spec x version \"1\"",
        "spec x version \"1\"\nbudget { tokens 99999999999999999999999 }",
        "spec x version \"1\"\ninvariant i: always 99999999999999999999999",
        "spec x version \"1\"\ninvariant i: always 1e999",
    ] {
        let _ = parse_with(text, &example_loader());
    }
}

#[test]
fn common_mistakes() {
    let cases = [
        (
            "flow {\n  a = planner request -> done\n}",
            "E001 3:15 expected `(`",
        ),
        (
            "flow {\n  a = planner(request)\n}",
            "E001 4:1 expected one of `->`, `pass`, `when`",
        ),
        ("role r { model default }", "E001 2:16 expected `:`"),
        ("role r { tools: [a b] }", "E001 2:20 expected `,` or `]`"),
        (
            "contract A { x: list<string }",
            "E001 2:29 expected `>` or `?`",
        ),
        ("contract A { x string }", "E001 2:16 expected `:`"),
        (
            "gate g on s { hard x: a > 1 }",
            "E001 2:29 expected `else` or an operator",
        ),
        (
            "gate g on s { hard x: a > 1 else low pass when true }",
            "E001 2:34 expected an issue code",
        ),
        ("repair { 3 }", "E001 2:10 expected `rounds`"),
        (
            "repair { rounds 3 X -> rerun }",
            "E001 2:30 expected a name",
        ),
        ("invariant i: r has tools", "E001 2:20 expected `no`"),
        (
            "budget { tokens 10 money 3 }",
            "E001 2:20 expected one of `,`, `tokens`, `cost`, `wall`, `steps`, `on_exhausted`, `}`",
        ),
        ("models { a: \"x\" }", "E001 2:11 expected `=`"),
        (
            "tool t { input: Q effect: delete }",
            "E001 2:27 expected `read`, `write` or `external`",
        ),
        (
            "tool t { input: Q sandbox { raed: [\"x\"] } }",
            "E001 2:29 expected one of `read`, `write`, `network`, `env`, `processes`, `required`, `}`",
        ),
        (
            "tool t { input: Q sandbox { network: lan } }",
            "E001 2:38 expected `none`, `loopback` or `any`",
        ),
        (
            "tool t { input: Q sandbox { read: \"x\" } }",
            "E001 2:35 expected `[`",
        ),
        (
            "tool t { input: Q sandbox: true }",
            "E001 2:28 expected `required`",
        ),
        (
            "mcp m { tools: [files.read] }",
            "E001 2:22 expected `,` or `]`",
        ),
        (
            "mcp m { url: \"http://a\"  headers: { Authorization: env(TOKEN) } }",
            "E001 2:56 expected a string",
        ),
        ("mcp m { command: \"npx x\" }", "E001 2:18 expected `[`"),
        ("mcp m { tools: all }", "E001 2:16 expected `[` or `*`"),
        (
            "role r { tools: [files. read] }",
            "E001 2:23 expected `,` or `]`",
        ),
        (
            "flow {\n  a = each t in xs: w(t) -> b\n  b = gate q pass -> done\n}",
            "E001 5:1 expected `fail`",
        ),
        (
            "rules r { \"a\" b }",
            "E001 2:15 expected one of a string, `,`, `}`",
        ),
        ("import \"x.md\"", "E001 2:8 expected `role`"),
        (
            "invariant i: always a ==",
            "E001 2:23 expected an expression after `==`",
        ),
        (
            "invariant i: always a and not",
            "E001 2:27 expected an expression after `not`",
        ),
        (
            "invariant i: always a + * b",
            "E001 2:23 expected an expression after `+`",
        ),
        ("invariant i: always not", "E001 3:1 expected an expression"),
        (
            "invariant i: always [1, 2",
            "E001 3:1 expected one of `,`, `]`, an operator",
        ),
    ];
    for (body, expect) in cases {
        check(&format!("{HEADER}{body}\n"), expect);
    }
}

#[test]
fn details_history_and_ask_max_parse() {
    let text = r#"spec s version "1"
contract Request { goal: string }
contract Out { text: string  problems: list<string> = []  score: int(0..=10) }
role writer {
  model: "openai:m"
  input: Request
  output: Out
  history: [write, review] last 3
}
gate quality on write {
  hard clean: len(review.problems) == 0 else DIRTY detail review.problems
  warn short: len(write.text) < 100 else LONG detail { length: len(write.text) }
  score score weight 1: review.score below 6 LOW detail review.problems
  pass when score >= 6
}
flow {
  write   = writer(request) -> review
  review  = writer(request) -> confirm
  confirm = ask "Go on?" max 2 when confirm.approved -> judge else -> write
  judge   = gate quality pass -> done fail -> failed "no"
}
"#;
    let (spec, diagnostics, sources) = parse_with(text, &MemoryLoader::default());
    assert_eq!(render(&diagnostics, &sources), "");
    let Some(spec) = spec else { panic!("no spec") };
    let mut seen = Vec::new();
    for item in &spec.items {
        match item {
            Item::Role(role) => {
                let history = role.history.as_ref().map(|history| {
                    let steps: Vec<&str> = history.steps.iter().map(|s| s.name.as_str()).collect();
                    (steps, history.last.as_ref().map(|last| last.value))
                });
                seen.push(format!("{history:?}"));
            }
            Item::Gate(gate) => {
                for rule in &gate.rules {
                    let detail = match rule {
                        GateRule::Check { detail, .. } | GateRule::Score { detail, .. } => {
                            detail.as_ref().map(sexpr)
                        }
                    };
                    seen.push(format!("{detail:?}"));
                }
            }
            Item::Flow(flow) => {
                for step in &flow.steps {
                    if let StepBody::Ask { question, max } = &step.body {
                        seen.push(format!(
                            "{} {:?}",
                            question.value,
                            max.as_ref().map(|m| m.value)
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    assert_eq!(
        seen,
        [
            r#"Some((["write", "review"], Some(3)))"#,
            r#"Some("review.problems")"#,
            r#"Some("{length: (len write.text)}")"#,
            r#"Some("review.problems")"#,
            "Go on? Some(2)",
        ]
    );
}

#[test]
fn session_remember_and_permits_on_an_import_parse() {
    let text = format!(
        "{HEADER}import role \"roles/creative.md\" {{ permit web_search when args.q != \"\" }}\n\
         session Chat keep 20 {{ role: string?  mood: string = \"calm\" }}\n\
         remember role = run.answered_by\n"
    );
    let (spec, diagnostics, _) = parse_with(&text, &example_loader());
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    let spec = spec.unwrap_or_else(|| panic!("no spec"));
    let mut items = spec.items.iter();
    let Some(Item::Import(import)) = items.next() else {
        panic!("not an import");
    };
    assert_eq!(import.permits.len(), 1);
    assert_eq!(
        import.role.as_ref().map(|role| role.permits.len()),
        Some(1),
        "the import's permits are the role's"
    );
    let Some(Item::Session(session)) = items.next() else {
        panic!("not a session");
    };
    assert_eq!(session.contract.name.name, "Chat");
    assert_eq!(session.keep.as_ref().map(|keep| keep.value), Some(20));
    assert_eq!(session.contract.fields.len(), 2);
    let Some(Item::Remember(remember)) = items.next() else {
        panic!("not a remember");
    };
    assert_eq!(remember.field.name, "role");
}

#[test]
fn a_session_without_keep_says_what_was_expected() {
    check(
        &format!("{HEADER}session Chat {{ role: string? }}\n"),
        "E001 2:14 expected `keep`",
    );
}

/// Field report 002 writes role files with upper-case tool names, hyphenated ids and no
/// contracts: tools match the spec's case-insensitively, `exp-master` is `exp_master`
/// (the id as written is kept for `role_named`), and the contracts are implied.
#[test]
fn role_files_as_seed_002_writes_them() {
    let (role, diagnostics, sources) = import_role(
        "---\nid: exp-master\ntools:\n- GET_WORKFLOW_LIST\n- Save_Experience\ntool_choice: GET_WORKFLOW_LIST\nmessages: chat\n---\nbody\n",
    );
    assert_eq!(diagnostics, "");
    let role = role.expect("role");
    assert_eq!(role.name.name, "exp_master");
    assert_eq!(sources.snippet(role.name.span), "exp-master");
    assert_eq!(
        role.written_id.as_ref().map(|id| id.value.as_str()),
        Some("exp-master")
    );
    let tools: Vec<String> = role
        .tools
        .iter()
        .map(|tool| format!("{}@{}", tool.name, sources.snippet(tool.span)))
        .collect();
    assert_eq!(
        tools,
        [
            "get_workflow_list@GET_WORKFLOW_LIST",
            "save_experience@Save_Experience"
        ]
    );
    assert_eq!(
        role.implied,
        ImpliedContracts {
            input: true,
            output: true
        }
    );
    assert_eq!(role.inputs[0].name, "Request");
    assert_eq!(role.output.as_ref().map(|o| o.name.as_str()), Some("Reply"));
    assert_eq!(
        role.messages.as_ref().map(|m| m.name.as_str()),
        Some("chat")
    );
    assert_eq!(
        role.tool_choice.as_ref().map(|choice| choice.name.as_str()),
        Some("get_workflow_list")
    );

    // An id that is already a name keeps no written form; given contracts are not implied.
    let (role, diagnostics, _) =
        import_role("---\nid: Creative\ninput: Task\noutput: Plan\n---\nbody\n");
    assert_eq!(diagnostics, "");
    let role = role.expect("role");
    assert_eq!(role.name.name, "creative");
    assert_eq!(
        role.written_id.as_ref().map(|id| id.value.as_str()),
        Some("Creative")
    );
    assert_eq!(role.implied, ImpliedContracts::default());
    let (role, _, _) = import_role("---\nid: creative\n---\nbody\n");
    assert_eq!(role.and_then(|role| role.written_id), None);
}
