//! Text forms of the compiled graph: expressions as source, step labels, Mermaid and DOT.

use std::fmt::{self, Display, Formatter, Write as _};

use petgraph::visit::EdgeRef;

use super::ir::{
    BinaryOpIr, BuiltinIr, CompiledSpec, ExprIr, NameIr, QuantifierIr, StepIr, StepKind,
    TransitionIr, TypeIr, UnaryOpIr,
};

impl Display for ExprIr {
    /// The expression in Charter's own syntax (parenthesized only where needed).
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        write_expr(self, 0, formatter)
    }
}

impl Display for NameIr {
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            NameIr::Request => "request",
            NameIr::Candidate => "candidate",
            NameIr::Best => "best",
            NameIr::Run => "run",
            NameIr::Score => "score",
            NameIr::Item => "item",
            NameIr::Step(name) | NameIr::ByRole(name) | NameIr::Local(name) => name,
        })
    }
}

impl Display for TypeIr {
    /// The type in Charter's syntax (`list<Task>(1..=20)`, `int(0..=10)`, `a | b`, `T?`).
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        fn range<T: Display>(min: Option<T>, max: Option<T>) -> String {
            match (min, max) {
                (None, None) => String::new(),
                (Some(min), None) => format!("({min}..)"),
                (None, Some(max)) => format!("(..={max})"),
                (Some(min), Some(max)) => format!("({min}..={max})"),
            }
        }
        match self {
            TypeIr::String => formatter.write_str("string"),
            TypeIr::Bool => formatter.write_str("bool"),
            TypeIr::Int { min, max } => write!(formatter, "int{}", range(*min, *max)),
            TypeIr::Float { min, max } => write!(formatter, "float{}", range(*min, *max)),
            TypeIr::List {
                item,
                min_items,
                max_items,
            } => write!(formatter, "list<{item}>{}", range(*min_items, *max_items)),
            TypeIr::Enum { variants } => formatter.write_str(&variants.join(" | ")),
            TypeIr::Contract { name } => formatter.write_str(name),
            TypeIr::Optional { inner } => write!(formatter, "{inner}?"),
            TypeIr::Any => formatter.write_str("any"),
        }
    }
}

const PREC_QUANTIFIER: u8 = 0;
const PREC_NOT: u8 = 3;
const PREC_NEG: u8 = 7;
const PREC_ATOM: u8 = 8;

fn binary_prec(op: BinaryOpIr) -> (u8, &'static str) {
    match op {
        BinaryOpIr::Or => (1, "or"),
        BinaryOpIr::And => (2, "and"),
        BinaryOpIr::Eq => (4, "=="),
        BinaryOpIr::Ne => (4, "!="),
        BinaryOpIr::Lt => (4, "<"),
        BinaryOpIr::Le => (4, "<="),
        BinaryOpIr::Gt => (4, ">"),
        BinaryOpIr::Ge => (4, ">="),
        BinaryOpIr::Add => (5, "+"),
        BinaryOpIr::Sub => (5, "-"),
        BinaryOpIr::Mul => (6, "*"),
        BinaryOpIr::Div => (6, "/"),
    }
}

fn expr_prec(expr: &ExprIr) -> u8 {
    match expr {
        ExprIr::Quantifier { .. } => PREC_QUANTIFIER,
        ExprIr::Binary { op, .. } => binary_prec(*op).0,
        ExprIr::Unary {
            op: UnaryOpIr::Not, ..
        } => PREC_NOT,
        ExprIr::Unary {
            op: UnaryOpIr::Neg, ..
        } => PREC_NEG,
        _ => PREC_ATOM,
    }
}

fn write_expr(expr: &ExprIr, min_prec: u8, out: &mut Formatter<'_>) -> fmt::Result {
    let prec = expr_prec(expr);
    let parens = prec < min_prec;
    if parens {
        out.write_char('(')?;
    }
    match expr {
        ExprIr::Literal { value } => write_literal(value, out)?,
        ExprIr::Variant { name } => out.write_str(name)?,
        ExprIr::Path { root, fields } => {
            write!(out, "{root}")?;
            for field in fields {
                write!(out, ".{field}")?;
            }
        }
        ExprIr::List { items } => {
            out.write_char('[')?;
            write_list(items, out)?;
            out.write_char(']')?;
        }
        ExprIr::Record { fields } => {
            out.write_char('{')?;
            for (index, (key, value)) in fields.iter().enumerate() {
                if index > 0 {
                    out.write_str(", ")?;
                }
                write!(out, "{key}: ")?;
                write_expr(value, 0, out)?;
            }
            out.write_char('}')?;
        }
        ExprIr::Unary { op, operand } => {
            match op {
                UnaryOpIr::Not => out.write_str("not ")?,
                UnaryOpIr::Neg => out.write_char('-')?,
            }
            write_expr(operand, prec, out)?;
        }
        ExprIr::Binary { op, lhs, rhs } => {
            let (prec, symbol) = binary_prec(*op);
            // Comparisons do not chain; arithmetic and logic are left-associative.
            let left_min = if prec == 4 { prec + 1 } else { prec };
            write_expr(lhs, left_min, out)?;
            write!(out, " {symbol} ")?;
            write_expr(rhs, prec + 1, out)?;
        }
        ExprIr::Call { function, args } => {
            out.write_str(match function {
                BuiltinIr::Len => "len",
                BuiltinIr::Contains => "contains",
                BuiltinIr::Matches => "matches",
                BuiltinIr::Sum => "sum",
                BuiltinIr::Min => "min",
                BuiltinIr::Max => "max",
            })?;
            out.write_char('(')?;
            write_list(args, out)?;
            out.write_char(')')?;
        }
        ExprIr::Quantifier {
            quantifier,
            var,
            over,
            body,
        } => {
            let word = match quantifier {
                QuantifierIr::Every => "every",
                QuantifierIr::Some => "some",
                QuantifierIr::Count => "count",
            };
            write!(out, "{word} {var} in ")?;
            write_expr(over, PREC_ATOM, out)?;
            out.write_str(": ")?;
            write_expr(body, 0, out)?;
        }
    }
    if parens {
        out.write_char(')')?;
    }
    Ok(())
}

fn write_list(items: &[ExprIr], out: &mut Formatter<'_>) -> fmt::Result {
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.write_str(", ")?;
        }
        write_expr(item, 0, out)?;
    }
    Ok(())
}

fn write_literal(value: &serde_json::Value, out: &mut Formatter<'_>) -> fmt::Result {
    match value {
        serde_json::Value::Null => out.write_str("none"),
        serde_json::Value::String(text) => write_string(text, out),
        serde_json::Value::Array(items) => {
            out.write_char('[')?;
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.write_str(", ")?;
                }
                write_literal(item, out)?;
            }
            out.write_char(']')
        }
        other => write!(out, "{other}"),
    }
}

fn write_string(text: &str, out: &mut impl fmt::Write) -> fmt::Result {
    out.write_char('"')?;
    for character in text.chars() {
        match character {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\t' => out.write_str("\\t")?,
            '\r' => out.write_str("\\r")?,
            other => out.write_char(other)?,
        }
    }
    out.write_char('"')
}

fn quoted(text: &str) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = write_string(text, &mut out);
    out
}

fn call(role: &str, args: &[ExprIr]) -> String {
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    format!("{role}({})", args.join(", "))
}

/// A node's label: `name: body` for steps, `done` / `blocked: reason` / `failed: reason`
/// for terminals.
pub fn step_label(step: &StepIr) -> String {
    if step.kind.is_terminal() {
        step_body(step)
    } else {
        format!("{}: {}", step.name, step_body(step))
    }
}

/// What a node does, in Charter's syntax (`each t in plan.tasks → executor(t)`).
pub fn step_body(step: &StepIr) -> String {
    match &step.kind {
        StepKind::Call { role, args } => call(role, args),
        StepKind::Each {
            var,
            over,
            role,
            args,
            concurrency,
            check,
        } => {
            let mut label = format!("each {var} in {over} → {}", call(role, args));
            if *concurrency != 1 {
                let _ = write!(label, " concurrency {concurrency}");
            }
            if let Some(check) = check {
                let _ = write!(label, " check {}", check.gate);
                if let Some(by) = &check.by {
                    let _ = write!(label, " by {by}");
                }
                if check.retries > 0 {
                    let _ = write!(label, " retries {}", check.retries);
                }
            }
            label
        }
        StepKind::Gate { gate, .. } => format!("gate {gate}"),
        StepKind::Finalize { role, args } => format!("finalize {}", call(role, args)),
        StepKind::Ask { question } => format!("ask {}", quoted(question)),
        StepKind::Done => "done".to_string(),
        StepKind::Blocked { reason } => format!("blocked: {reason}"),
        StepKind::Failed { reason } => format!("failed: {reason}"),
    }
}

/// An edge's label (`None` for an unconditional `->`), and whether it is a repair edge.
pub fn transition_label(transition: &TransitionIr) -> (Option<String>, bool) {
    match transition {
        TransitionIr::Always => (None, false),
        TransitionIr::When { condition } => (Some(format!("when {condition}")), false),
        TransitionIr::Else => (Some("else".to_string()), false),
        TransitionIr::Pass => (Some("pass".to_string()), false),
        TransitionIr::Fail => (Some("fail".to_string()), false),
        TransitionIr::Repair { codes, .. } => (Some(codes.join(", ")), true),
    }
}

/// Mermaid's entity escapes inside a `"..."` label (`#quot;` and friends), and no newlines.
fn mermaid_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '&' => out.push_str("#amp;"),
            '|' => out.push_str("#124;"),
            '`' => out.push_str("#96;"),
            '\n' | '\r' => out.push(' '),
            other => out.push(other),
        }
    }
    out
}

/// DOT's escapes inside a `"..."` string.
fn dot_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' | '\r' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out
}

/// The flow graph as a Mermaid flowchart (see [`super::to_mermaid`]).
pub fn mermaid(spec: &CompiledSpec) -> String {
    let graph = &spec.flow.graph;
    let mut out = String::from("flowchart TD\n");
    let _ = writeln!(
        out,
        "  %% {} {}",
        mermaid_text(&spec.name),
        mermaid_text(&spec.version)
    );
    for node in graph.node_indices() {
        let Some(step) = graph.node_weight(node) else {
            continue;
        };
        let label = mermaid_text(&step_label(step));
        let id = node.index();
        let shape = match &step.kind {
            StepKind::Gate { .. } => format!("n{id}{{\"{label}\"}}"),
            StepKind::Ask { .. } => format!("n{id}[/\"{label}\"/]"),
            StepKind::Finalize { .. } => format!("n{id}[[\"{label}\"]]"),
            StepKind::Done => format!("n{id}([\"{label}\"])"),
            StepKind::Blocked { .. } => format!("n{id}{{{{\"{label}\"}}}}"),
            StepKind::Failed { .. } => format!("n{id}((\"{label}\"))"),
            StepKind::Call { .. } | StepKind::Each { .. } => format!("n{id}[\"{label}\"]"),
        };
        let _ = writeln!(out, "  {shape}");
    }
    for edge in graph.edge_references() {
        let (label, repair) = transition_label(edge.weight());
        let arrow = if repair { "-.->" } else { "-->" };
        let from = edge.source().index();
        let to = edge.target().index();
        match label {
            Some(label) => {
                let _ = writeln!(out, "  n{from} {arrow}|\"{}\"| n{to}", mermaid_text(&label));
            }
            None => {
                let _ = writeln!(out, "  n{from} {arrow} n{to}");
            }
        }
    }
    let _ = writeln!(out, "  class n{} entry", spec.flow.entry.index());
    let mut classes: [(&str, Vec<String>); 3] =
        [("done", vec![]), ("blocked", vec![]), ("failed", vec![])];
    for node in graph.node_indices() {
        let class = match graph.node_weight(node).map(|step| &step.kind) {
            Some(StepKind::Done) => 0,
            Some(StepKind::Blocked { .. }) => 1,
            Some(StepKind::Failed { .. }) => 2,
            _ => continue,
        };
        if let Some((_, nodes)) = classes.get_mut(class) {
            nodes.push(format!("n{}", node.index()));
        }
    }
    out.push_str("  classDef entry stroke-width:3px\n");
    out.push_str("  classDef done fill:#d4f7d4,stroke:#2e7d32\n");
    out.push_str("  classDef blocked fill:#fff3cd,stroke:#b26a00\n");
    out.push_str("  classDef failed fill:#f8d7da,stroke:#b00020\n");
    for (class, nodes) in classes {
        if !nodes.is_empty() {
            let _ = writeln!(out, "  class {} {class}", nodes.join(","));
        }
    }
    out
}

/// The flow graph in Graphviz DOT (see [`super::to_dot`]).
pub fn dot(spec: &CompiledSpec) -> String {
    let graph = &spec.flow.graph;
    let mut out = format!("digraph \"{}\" {{\n", dot_text(&spec.name));
    out.push_str("  rankdir=TB;\n");
    out.push_str("  node [shape=box, fontname=\"Helvetica\"];\n");
    out.push_str("  edge [fontname=\"Helvetica\"];\n");
    for node in graph.node_indices() {
        let Some(step) = graph.node_weight(node) else {
            continue;
        };
        let label = dot_text(&step_label(step));
        let attributes = match &step.kind {
            StepKind::Gate { .. } => ", shape=diamond",
            StepKind::Ask { .. } => ", shape=parallelogram",
            StepKind::Finalize { .. } => ", shape=box, peripheries=2",
            StepKind::Done => ", shape=doublecircle, style=filled, fillcolor=\"#d4f7d4\"",
            StepKind::Blocked { .. } => ", shape=octagon, style=filled, fillcolor=\"#fff3cd\"",
            StepKind::Failed { .. } => ", shape=doubleoctagon, style=filled, fillcolor=\"#f8d7da\"",
            StepKind::Call { .. } | StepKind::Each { .. } => "",
        };
        let entry = if node == spec.flow.entry {
            ", penwidth=2"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  n{} [label=\"{label}\"{attributes}{entry}];",
            node.index()
        );
    }
    for edge in graph.edge_references() {
        let (label, repair) = transition_label(edge.weight());
        let mut attributes = Vec::new();
        if let Some(label) = label {
            attributes.push(format!("label=\"{}\"", dot_text(&label)));
        }
        if repair {
            attributes.push("style=dashed".to_string());
        }
        let attributes = if attributes.is_empty() {
            String::new()
        } else {
            format!(" [{}]", attributes.join(", "))
        };
        let _ = writeln!(
            out,
            "  n{} -> n{}{attributes};",
            edge.source().index(),
            edge.target().index()
        );
    }
    out.push_str("}\n");
    out
}
