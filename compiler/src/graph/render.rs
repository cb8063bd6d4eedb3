//! Text forms of the compiled graph: expressions as source, step labels, Mermaid and DOT.

use std::collections::BTreeSet;
use std::fmt::{self, Display, Formatter, Write as _};

use petgraph::graph::NodeIndex;
use petgraph::visit::Bfs;

use super::ir::{
    ActionIr, BinaryOpIr, BuiltinIr, CompiledSpec, ExprIr, GateIr, NameIr, QuantifierIr,
    RepairPatternIr, SeverityIr, StepIr, StepKind, TransitionIr, TypeIr, UnaryOpIr,
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
            NameIr::Session => "session",
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
                BuiltinIr::Mention => "mention",
                BuiltinIr::StripMention => "strip_mention",
                BuiltinIr::RoleNamed => "role_named",
            })?;
            out.write_char('(')?;
            // The lowered table of role names is not part of what was written.
            let shown = match function {
                BuiltinIr::Mention | BuiltinIr::StripMention | BuiltinIr::RoleNamed => {
                    args.get(..1).unwrap_or(args)
                }
                _ => args,
            };
            write_list(shown, out)?;
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
    let (mut body, options) = body_and_options(step);
    for option in options {
        body.push(' ');
        body.push_str(&option);
    }
    body
}

/// A node's body without its options, and the options of an `each` step
/// (`concurrency 3`, `check acceptance by reviewer retries 1`).
fn body_and_options(step: &StepIr) -> (String, Vec<String>) {
    let body = match &step.kind {
        StepKind::Call { role, args } => call(role, args),
        StepKind::Each {
            var,
            over,
            role,
            args,
            concurrency,
            check,
        } => {
            let mut options = Vec::new();
            if *concurrency != 1 {
                options.push(format!("concurrency {concurrency}"));
            }
            if let Some(check) = check {
                let mut option = format!("check {}", check.gate);
                if let Some(by) = &check.by {
                    let _ = write!(option, " by {by}");
                }
                if check.retries > 0 {
                    let _ = write!(option, " retries {}", check.retries);
                }
                options.push(option);
            }
            return (
                format!("each {var} in {over} → {}", call(role, args)),
                options,
            );
        }
        StepKind::Gate { gate, .. } => format!("gate {gate}"),
        StepKind::Branch => "branch".to_string(),
        StepKind::Tool { tool, args } => format!("tool {}", call(tool, args)),
        StepKind::Finalize { role, args } => format!("finalize {}", call(role, args)),
        StepKind::Ask { question, max } => match max {
            Some(max) => format!("ask {} max {max}", quoted(question)),
            None => format!("ask {}", quoted(question)),
        },
        StepKind::Done => "done".to_string(),
        StepKind::Blocked { reason } => format!("blocked: {reason}"),
        StepKind::Failed { reason } => format!("failed: {reason}"),
    };
    (body, Vec::new())
}

/// An edge's label (`None` for an unconditional `->`), and whether it is a repair edge.
pub fn transition_label(transition: &TransitionIr) -> (Option<String>, bool) {
    match transition {
        TransitionIr::Always => (None, false),
        TransitionIr::When { condition } => (Some(format!("when {condition}")), false),
        TransitionIr::Else => (Some("else".to_string()), false),
        TransitionIr::Pass => (Some("pass".to_string()), false),
        TransitionIr::Fail => (Some("fail".to_string()), false),
        TransitionIr::OnError => (Some("on_error".to_string()), true),
        TransitionIr::Repair { codes, .. } => (Some(codes.join(", ")), true),
    }
}

/// The widest line of a node's label, in characters, before it is broken at a space.
const NODE_WIDTH: usize = 40;
/// The widest line of an `ask` node's label: Mermaid fits less text into a parallelogram.
const ASK_WIDTH: usize = 36;
/// The widest line of an edge's label.
const EDGE_WIDTH: usize = 32;
/// Mermaid's `flowchart.wrappingWidth` (px): wide enough that a node line of
/// [`NODE_WIDTH`] characters is not wrapped again (Mermaid's default is 200).
const MERMAID_WRAPPING_WIDTH: u32 = 400;
/// The label of the dashed edge from a repairing gate to the finalize step: when repair
/// stops (`rounds` used up, `no_progress` reached, or no error-level issue has an action:
/// only `pass when` failed, or every issue is `accept`ed), `best` is finalized as
/// `below_target`.
const REPAIR_STOPS: [&str; 3] = ["rounds exhausted", "no progress", "no repair action"];

/// Breaks `text` at spaces into lines of at most `width` characters (a longer word stays
/// whole on its own line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut length = 0;
    for word in text.split(' ') {
        let word_length = word.chars().count();
        if length > 0 && length + 1 + word_length > width {
            lines.push(std::mem::take(&mut line));
            length = 0;
        }
        if length > 0 {
            line.push(' ');
            length += 1;
        }
        line.push_str(word);
        length += word_length;
    }
    lines.push(line);
    lines
}

/// `head rest` on one line when it fits, else `head` on its own line and `rest` wrapped.
fn headed(head: &str, rest: &str, width: usize) -> Vec<String> {
    let one = format!("{head} {rest}");
    if one.chars().count() <= width {
        return vec![one];
    }
    let mut lines = vec![head.to_string()];
    lines.extend(wrap(rest, width));
    lines
}

/// A node's label as lines: `name: body` when it fits, else the name on the first line
/// and the body below; an `each` step's options on their own line(s) after the body.
fn node_lines(step: &StepIr) -> Vec<String> {
    match &step.kind {
        StepKind::Done => return vec!["done".to_string()],
        StepKind::Blocked { reason } => return headed("blocked:", reason, NODE_WIDTH),
        StepKind::Failed { reason } => return headed("failed:", reason, NODE_WIDTH),
        _ => {}
    }
    let (body, options) = body_and_options(step);
    let width = match step.kind {
        StepKind::Ask { .. } => ASK_WIDTH,
        _ => NODE_WIDTH,
    };
    let mut lines = headed(&format!("{}:", step.name), &body, width);
    let joined = options.join(" ");
    if joined.chars().count() <= NODE_WIDTH {
        if !joined.is_empty() {
            lines.push(joined);
        }
    } else {
        for option in &options {
            lines.extend(wrap(option, NODE_WIDTH));
        }
    }
    lines
}

/// How a node is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Step,
    Gate,
    Ask,
    Finalize,
    Done,
    Blocked,
    Failed,
}

/// A node of the drawing: a node of the flow graph, or the question of a repair `ask` arm.
struct Node {
    id: String,
    lines: Vec<String>,
    shape: Shape,
    /// Drawn from the repair table (a repair `ask`), not a step of the flow: dashed.
    repair: bool,
}

/// A piece of an edge's label.
enum Part {
    /// A label of its own (`when x`, `else`, `pass`, `NO_NOTES: accept`).
    Text(String),
    /// The issue codes of repair arms; adjacent code lists of one edge are joined.
    Codes(Vec<String>),
}

/// An edge of the drawing: every transition between the same two nodes with the same
/// style, merged (their labels one per line, in the order written).
struct Edge {
    from: String,
    to: String,
    parts: Vec<Part>,
    dashed: bool,
}

impl Edge {
    fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => lines.extend(wrap(text, EDGE_WIDTH)),
                Part::Codes(codes) => lines.extend(wrap(&codes.join(", "), EDGE_WIDTH)),
            }
        }
        lines
    }
}

/// What both formats draw: the flow graph plus what the repair table does that has no edge
/// in it (`ask`, `accept`, and repair stopping), with parallel edges merged.
struct Drawing {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    entry: String,
}

impl Drawing {
    /// Adds an edge, or merges its label into the edge already drawn between the same
    /// two nodes with the same style.
    fn edge(&mut self, from: String, to: String, part: Option<Part>, dashed: bool) {
        let existing = self
            .edges
            .iter_mut()
            .find(|edge| edge.from == from && edge.to == to && edge.dashed == dashed);
        let Some(edge) = existing else {
            self.edges.push(Edge {
                from,
                to,
                parts: part.into_iter().collect(),
                dashed,
            });
            return;
        };
        match (edge.parts.last_mut(), part) {
            (Some(Part::Codes(codes)), Some(Part::Codes(more))) => {
                for code in more {
                    if !codes.contains(&code) {
                        codes.push(code);
                    }
                }
            }
            (_, Some(part)) => edge.parts.push(part),
            (_, None) => {}
        }
    }
}

fn node_id(node: NodeIndex) -> String {
    format!("n{}", node.index())
}

/// The codes of a gate's error-level issues (hard rules, scores with `below`): the ones
/// the repair table acts on.
fn error_codes(gate: &GateIr) -> BTreeSet<&str> {
    let hard = gate
        .rules
        .iter()
        .filter(|rule| rule.severity == SeverityIr::Hard)
        .map(|rule| rule.code.as_str());
    let below = gate
        .scores
        .iter()
        .filter_map(|score| score.below.as_ref().map(|below| below.code.as_str()));
    hard.chain(below).collect()
}

/// The finalize step `best` goes to when a gate's repair stops: the first one reachable
/// from the gate's `pass` edge, else the first in the flow (as the runtime picks it).
fn finalize_node(spec: &CompiledSpec, gate: NodeIndex) -> Option<NodeIndex> {
    let graph = &spec.flow.graph;
    let is_finalize = |node: NodeIndex| {
        matches!(
            graph.node_weight(node).map(|step| &step.kind),
            Some(StepKind::Finalize { .. })
        )
    };
    let pass = spec
        .flow
        .transitions(gate)
        .into_iter()
        .find(|(transition, _)| **transition == TransitionIr::Pass)
        .map(|(_, target)| target);
    if let Some(start) = pass {
        let mut bfs = Bfs::new(graph, start);
        while let Some(node) = bfs.next(graph) {
            if is_finalize(node) {
                return Some(node);
            }
        }
    }
    graph.node_indices().find(|node| is_finalize(*node))
}

/// The flow graph, then for every `fail -> repair` gate step what its repair arms do that
/// the graph has no edge for: an `ask` arm as a dashed question node (approved: the gate's
/// subject runs again with feedback; else `best` is finalized), an `accept` arm and repair
/// stopping as dashed edges to the finalize step. One piece: the repair arms are drawn
/// onto the nodes the graph part numbered, in the one `Drawing` both fill.
fn drawing(spec: &CompiledSpec) -> Drawing {
    let graph = &spec.flow.graph;
    let mut drawing = Drawing {
        nodes: Vec::new(),
        edges: Vec::new(),
        entry: node_id(spec.flow.entry),
    };
    for node in graph.node_indices() {
        let Some(step) = graph.node_weight(node) else {
            continue;
        };
        let shape = match &step.kind {
            StepKind::Gate { .. } | StepKind::Branch => Shape::Gate,
            StepKind::Ask { .. } => Shape::Ask,
            StepKind::Finalize { .. } => Shape::Finalize,
            StepKind::Done => Shape::Done,
            StepKind::Blocked { .. } => Shape::Blocked,
            StepKind::Failed { .. } => Shape::Failed,
            StepKind::Call { .. } | StepKind::Each { .. } | StepKind::Tool { .. } => Shape::Step,
        };
        drawing.nodes.push(Node {
            id: node_id(node),
            lines: node_lines(step),
            shape,
            repair: false,
        });
    }
    for node in graph.node_indices() {
        for (transition, target) in spec.flow.transitions(node) {
            let part = match transition {
                TransitionIr::Repair { codes, .. } => Some(Part::Codes(codes.clone())),
                other => transition_label(other).0.map(Part::Text),
            };
            let dashed = matches!(
                transition,
                TransitionIr::Repair { .. } | TransitionIr::OnError
            );
            drawing.edge(node_id(node), node_id(target), part, dashed);
        }
    }
    let Some(repair) = &spec.repair else {
        return drawing;
    };
    for node in graph.node_indices() {
        let Some(StepKind::Gate { gate, repair: true }) =
            graph.node_weight(node).map(|step| &step.kind)
        else {
            continue;
        };
        let Some(gate) = spec.gates.get(gate) else {
            continue;
        };
        // Only error-level issues are repaired: a `warn` code's arm never acts.
        let errors = error_codes(gate);
        let finalize = finalize_node(spec, node).map(node_id);
        let subject = spec.flow.steps.get(&gate.subject).copied().map(node_id);
        let mut named: BTreeSet<&str> = BTreeSet::new();
        for (index, arm) in repair.arms.iter().enumerate() {
            let codes: Vec<String> = match &arm.pattern {
                RepairPatternIr::Codes { codes } => {
                    named.extend(codes.iter().map(String::as_str));
                    codes
                        .iter()
                        .filter(|code| errors.contains(code.as_str()))
                        .cloned()
                        .collect()
                }
                RepairPatternIr::Wildcard if errors.iter().any(|code| !named.contains(code)) => {
                    vec!["_".to_string()]
                }
                RepairPatternIr::Wildcard => Vec::new(),
            };
            if codes.is_empty() {
                continue;
            }
            match &arm.action {
                ActionIr::Ask { question } => {
                    let id = format!("{}_ask{index}", node_id(node));
                    let mut lines = vec!["repair: ask".to_string()];
                    lines.extend(wrap(&quoted(question), ASK_WIDTH));
                    drawing.nodes.push(Node {
                        id: id.clone(),
                        lines,
                        shape: Shape::Ask,
                        repair: true,
                    });
                    drawing.edge(node_id(node), id.clone(), Some(Part::Codes(codes)), true);
                    if let Some(subject) = &subject {
                        let approved = Part::Text("approved".to_string());
                        drawing.edge(id.clone(), subject.clone(), Some(approved), true);
                    }
                    if let Some(finalize) = &finalize {
                        let otherwise = Part::Text("else".to_string());
                        drawing.edge(id, finalize.clone(), Some(otherwise), true);
                    }
                }
                ActionIr::Accept => {
                    if let Some(finalize) = &finalize {
                        let label = Part::Text(format!("{}: accept", codes.join(", ")));
                        drawing.edge(node_id(node), finalize.clone(), Some(label), true);
                    }
                }
                ActionIr::Rerun { .. }
                | ActionIr::Replan
                | ActionIr::Block { .. }
                | ActionIr::Fail { .. } => {}
            }
        }
        if let Some(finalize) = finalize {
            for stop in REPAIR_STOPS {
                let label = Part::Text(stop.to_string());
                drawing.edge(node_id(node), finalize.clone(), Some(label), true);
            }
        }
    }
    drawing
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

/// Label lines for Mermaid: each escaped, joined with `<br/>`.
fn mermaid_lines(lines: &[String]) -> String {
    let lines: Vec<String> = lines.iter().map(|line| mermaid_text(line)).collect();
    lines.join("<br/>")
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

/// Label lines for DOT: each escaped, joined with `\n` (centred lines).
fn dot_lines(lines: &[String]) -> String {
    let lines: Vec<String> = lines.iter().map(|line| dot_text(line)).collect();
    lines.join("\\n")
}

/// The flow graph as a Mermaid flowchart (see [`super::to_mermaid`]).
pub fn mermaid(spec: &CompiledSpec) -> String {
    let drawing = drawing(spec);
    let mut out = String::from("flowchart TD\n");
    let _ = writeln!(
        out,
        "  %%{{init: {{\"flowchart\": {{\"wrappingWidth\": {MERMAID_WRAPPING_WIDTH}}}}}}}%%"
    );
    let _ = writeln!(
        out,
        "  %% {} {}",
        mermaid_text(&spec.name),
        mermaid_text(&spec.version)
    );
    for node in &drawing.nodes {
        let label = mermaid_lines(&node.lines);
        let id = &node.id;
        let shape = match node.shape {
            Shape::Gate => format!("{id}{{\"{label}\"}}"),
            Shape::Ask => format!("{id}[/\"{label}\"/]"),
            Shape::Finalize => format!("{id}[[\"{label}\"]]"),
            Shape::Done => format!("{id}([\"{label}\"])"),
            Shape::Blocked => format!("{id}{{{{\"{label}\"}}}}"),
            Shape::Failed => format!("{id}((\"{label}\"))"),
            Shape::Step => format!("{id}[\"{label}\"]"),
        };
        let _ = writeln!(out, "  {shape}");
    }
    for edge in &drawing.edges {
        let arrow = if edge.dashed { "-.->" } else { "-->" };
        let (from, to) = (&edge.from, &edge.to);
        let lines = edge.lines();
        if lines.is_empty() {
            let _ = writeln!(out, "  {from} {arrow} {to}");
        } else {
            let label = mermaid_lines(&lines);
            let _ = writeln!(out, "  {from} {arrow}|\"{label}\"| {to}");
        }
    }
    let _ = writeln!(out, "  class {} entry", drawing.entry);
    out.push_str("  classDef entry stroke-width:3px\n");
    out.push_str("  classDef done fill:#d4f7d4,stroke:#2e7d32\n");
    out.push_str("  classDef blocked fill:#fff3cd,stroke:#b26a00\n");
    out.push_str("  classDef failed fill:#f8d7da,stroke:#b00020\n");
    for (class, wanted) in [
        ("done", Shape::Done),
        ("blocked", Shape::Blocked),
        ("failed", Shape::Failed),
    ] {
        let nodes: Vec<&str> = drawing
            .nodes
            .iter()
            .filter(|node| node.shape == wanted)
            .map(|node| node.id.as_str())
            .collect();
        if !nodes.is_empty() {
            let _ = writeln!(out, "  class {} {class}", nodes.join(","));
        }
    }
    let repair: Vec<&str> = drawing
        .nodes
        .iter()
        .filter(|node| node.repair)
        .map(|node| node.id.as_str())
        .collect();
    if !repair.is_empty() {
        out.push_str("  classDef repair stroke-dasharray:5 4\n");
        let _ = writeln!(out, "  class {} repair", repair.join(","));
    }
    out
}

/// A fixed size (`width`, `height` in inches) for a DOT polygon node: Graphviz fits a
/// label into a polygon with a generous margin (a parallelogram twice the label's width,
/// an octagon one and a half), which makes a multi-line label very wide. The size allows
/// 0.1 in a character (Helvetica 14 averages 0.095) and 0.24 in a line, plus the
/// slanted sides: `slant` times the height on the two sides together.
fn polygon_size(lines: &[String], slant: f64) -> String {
    let chars = lines
        .iter()
        .map(|line| line.chars().count())
        .max()
        .unwrap_or(0);
    let height = 0.3 + 0.24 * lines.len() as f64;
    let width = 0.1 * chars as f64 + slant * height + 0.35;
    format!("fixedsize=true, width={width:.2}, height={height:.2}")
}

/// The flow graph in Graphviz DOT (see [`super::to_dot`]).
pub fn dot(spec: &CompiledSpec) -> String {
    let drawing = drawing(spec);
    let mut out = format!("digraph \"{}\" {{\n", dot_text(&spec.name));
    out.push_str("  rankdir=TB;\n");
    out.push_str("  node [shape=box, fontname=\"Helvetica\"];\n");
    out.push_str("  edge [fontname=\"Helvetica\"];\n");
    for node in &drawing.nodes {
        let label = dot_lines(&node.lines);
        let attributes = match node.shape {
            Shape::Gate => ", shape=diamond".to_string(),
            Shape::Ask => {
                let style = if node.repair { ", style=dashed" } else { "" };
                let size = polygon_size(&node.lines, 0.8);
                format!(", shape=parallelogram{style}, {size}")
            }
            Shape::Finalize => ", shape=box, peripheries=2".to_string(),
            Shape::Done => ", shape=doublecircle, style=filled, fillcolor=\"#d4f7d4\"".to_string(),
            Shape::Blocked => format!(
                ", shape=octagon, style=filled, fillcolor=\"#fff3cd\", {}",
                polygon_size(&node.lines, 0.6)
            ),
            Shape::Failed => format!(
                ", shape=doubleoctagon, style=filled, fillcolor=\"#f8d7da\", {}",
                polygon_size(&node.lines, 0.7)
            ),
            Shape::Step => String::new(),
        };
        let entry = if node.id == drawing.entry {
            ", penwidth=2"
        } else {
            ""
        };
        let _ = writeln!(out, "  {} [label=\"{label}\"{attributes}{entry}];", node.id);
    }
    for edge in &drawing.edges {
        let mut attributes = Vec::new();
        let lines = edge.lines();
        if !lines.is_empty() {
            attributes.push(format!("label=\"{}\"", dot_lines(&lines)));
        }
        if edge.dashed {
            attributes.push("style=dashed".to_string());
        }
        let attributes = if attributes.is_empty() {
            String::new()
        } else {
            format!(" [{}]", attributes.join(", "))
        };
        let _ = writeln!(out, "  {} -> {}{attributes};", edge.from, edge.to);
    }
    out.push_str("}\n");
    out
}
