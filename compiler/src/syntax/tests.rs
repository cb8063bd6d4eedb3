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
            Item::Role(_) => "role",
            Item::Gate(_) => "gate",
            Item::Repair(_) => "repair",
            Item::Invariant(_) => "invariant",
            Item::Budget(_) => "budget",
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
