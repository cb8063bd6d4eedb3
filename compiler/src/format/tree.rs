//! The tokens of one item, read off pest's parse tree, each marked with its place in the
//! layout: where an item, a block member or a `when` arm starts, the braces of a block,
//! and where a new column (cell) of an aligned table starts.

use pest::iterators::Pair;

use crate::syntax::Rule;

/// What kind of line a line is, for alignment: only lines of the same key are aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// An item or a block member, by its rule.
    Rule(Rule),
    /// An item whose block is printed on one line.
    OneLine(Rule),
    /// The first line of an item whose block is printed one member a line.
    Open,
    /// The `}` of a block.
    Close,
    /// A comment on a line of its own.
    Comment,
    /// A continuation line of a member (a line break the author put inside it).
    Cont,
    /// A `when`/`else` arm of a step.
    Arm,
    /// Text printed as it was (a part that does not parse).
    Verbatim,
    /// The doc block under the header.
    Doc,
}

/// Where a token sits in the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    None,
    /// The first token of an item or of a block member.
    Member(Key),
    /// The `{` of an item's block.
    Open,
    /// The `}` of an item's block.
    Close,
    /// The first token of a `when`/`else` arm: it starts a line.
    Arm,
    /// The header's doc block: on a line of its own at column 0.
    Doc,
    /// The `{` of a block inside a member (a tool's `sandbox { ... }`, an `mcp` server's
    /// `env: { ... }` and `headers: { ... }`).
    SubOpen,
    /// The first token of an entry of a block inside a member.
    SubMember(Key),
    /// The `}` of a block inside a member.
    SubClose,
}

/// One token of the source.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tok<'a> {
    pub text: &'a str,
    pub start: usize,
    pub end: usize,
    pub rule: Rule,
    pub parent: Rule,
    pub mark: Mark,
    /// Starts a new cell of an aligned table, this many spaces at least after the last.
    pub cell: Option<usize>,
}

/// How the continuation lines of a member are indented: from the start of this cell of
/// its first line, plus this many columns.
pub(crate) fn anchor(kind: Rule) -> (usize, usize) {
    match kind {
        Rule::step | Rule::model_entry => (1, 4),
        Rule::check_rule | Rule::invariant => (1, 2),
        Rule::score_rule => (2, 2),
        _ => (0, 4),
    }
}

/// Items whose body is a `{ }` block of members.
fn is_block_item(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::models
            | Rule::rules_block
            | Rule::contract
            | Rule::tool
            | Rule::mcp
            | Rule::role
            | Rule::gate
            | Rule::repair
            | Rule::budget
            | Rule::session
            | Rule::import
    )
}

/// The tokens of the item `pair`, whose text starts at `offset` in the file.
pub(crate) fn item_tokens<'a>(pair: Pair<'a, Rule>, offset: usize) -> Vec<Tok<'a>> {
    let rule = pair.as_rule();
    let mut out = Vec::new();
    if is_block_item(rule) {
        block_tokens(pair, offset, &mut out);
    } else {
        member_tokens(pair, offset, &mut out);
    }
    if let Some(first) = out.first_mut() {
        first.mark = Mark::Member(Key::Rule(rule));
    }
    out
}

/// The tokens of the header: `spec NAME version "V"` and the doc block.
pub(crate) fn header_tokens<'a>(pair: Pair<'a, Rule>, offset: usize) -> Vec<Tok<'a>> {
    let mut out = Vec::new();
    leaves(pair, Rule::header, offset, &mut out);
    for token in &mut out {
        if token.parent == Rule::doc {
            token.mark = Mark::Doc;
        }
    }
    out
}

/// The tokens of one step of a flow, marked as a member.
pub(crate) fn step_tokens<'a>(pair: Pair<'a, Rule>, offset: usize) -> Vec<Tok<'a>> {
    let mut out = Vec::new();
    member_tokens(pair, offset, &mut out);
    if let Some(first) = out.first_mut() {
        first.mark = Mark::Member(Key::Rule(Rule::step));
    }
    out
}

/// A leaf token of the parse tree `pair` (a keyword, punctuation, name or literal).
pub(crate) fn leaf<'a>(pair: &Pair<'a, Rule>, parent: Rule, offset: usize) -> Tok<'a> {
    let span = pair.as_span();
    Tok {
        text: pair.as_str(),
        start: offset + span.start(),
        end: offset + span.end(),
        rule: pair.as_rule(),
        parent,
        mark: Mark::None,
        cell: None,
    }
}

/// The leaves of `pair`, in order.
fn leaves<'a>(pair: Pair<'a, Rule>, parent: Rule, offset: usize, out: &mut Vec<Tok<'a>>) {
    let rule = pair.as_rule();
    let mut inner = pair.clone().into_inner().peekable();
    if inner.peek().is_none() {
        out.push(leaf(&pair, parent, offset));
        return;
    }
    for child in inner {
        leaves(child, rule, offset, out);
    }
}

/// An item with a block: the head, `{`, one member per child, `}`.
fn block_tokens<'a>(pair: Pair<'a, Rule>, offset: usize, out: &mut Vec<Tok<'a>>) {
    let rule = pair.as_rule();
    let mut in_block = false;
    for child in pair.into_inner() {
        match child.as_rule() {
            Rule::import_props => block_tokens(child, offset, out),
            Rule::lbrace if !in_block => {
                in_block = true;
                out.push(Tok {
                    mark: Mark::Open,
                    ..leaf(&child, rule, offset)
                });
            }
            Rule::rbrace if in_block => out.push(Tok {
                mark: Mark::Close,
                ..leaf(&child, rule, offset)
            }),
            Rule::comma => out.push(leaf(&child, rule, offset)),
            member if in_block => {
                let first = out.len();
                member_tokens(child, offset, out);
                if let Some(token) = out.get_mut(first) {
                    token.mark = Mark::Member(Key::Rule(member));
                }
            }
            _ => leaves(child, rule, offset, out),
        }
    }
}

/// A block inside a member (`sandbox { read: [...]  network: any }`, `env: { A: "b" }`): `{`, one entry per
/// child, `}`, marked so the printer can lay it out on one line or one entry a line.
fn nested_block_tokens<'a>(pair: Pair<'a, Rule>, offset: usize, out: &mut Vec<Tok<'a>>) {
    let rule = pair.as_rule();
    for child in pair.into_inner() {
        match child.as_rule() {
            Rule::lbrace => out.push(Tok {
                mark: Mark::SubOpen,
                ..leaf(&child, rule, offset)
            }),
            Rule::rbrace => out.push(Tok {
                mark: Mark::SubClose,
                ..leaf(&child, rule, offset)
            }),
            Rule::comma => out.push(leaf(&child, rule, offset)),
            entry => {
                let first = out.len();
                member_tokens(child, offset, out);
                if let Some(token) = out.get_mut(first) {
                    token.mark = Mark::SubMember(Key::Rule(entry));
                }
            }
        }
    }
}

/// One member (or a one-line item): its leaves, with the cells of its table marked.
fn member_tokens<'a>(pair: Pair<'a, Rule>, offset: usize, out: &mut Vec<Tok<'a>>) {
    let kind = pair.as_rule();
    let mut params_seen = false;
    let mut inner = pair.clone().into_inner().peekable();
    if inner.peek().is_none() {
        out.push(leaf(&pair, kind, offset));
        return;
    }
    for child in inner {
        let first = out.len();
        let child_rule = child.as_rule();
        if child_rule == Rule::when_next {
            for arm in child.into_inner() {
                let arm_first = out.len();
                member_tokens(arm, offset, out);
                if let Some(token) = out.get_mut(arm_first) {
                    token.mark = Mark::Arm;
                }
            }
            continue;
        }
        // A block inside the member: one line if it fits, else one entry a line.
        if matches!(
            child_rule,
            Rule::sandbox_block | Rule::env_map | Rule::header_map
        ) {
            nested_block_tokens(child, offset, out);
            continue;
        }
        // `on_error -> STEP` goes on a line of its own, like a `when` arm.
        if child_rule == Rule::on_error {
            member_tokens(child, offset, out);
            if let Some(token) = out.get_mut(first) {
                token.mark = Mark::Arm;
            }
            continue;
        }
        leaves(child, kind, offset, out);
        let starts_cell = match (kind, child_rule) {
            (Rule::model_entry, Rule::price | Rule::model_param) => {
                !std::mem::replace(&mut params_seen, true)
            }
            (Rule::model_entry | Rule::step, Rule::equals)
            | (Rule::check_rule, Rule::expr | Rule::kw_else)
            | (Rule::score_rule, Rule::kw_weight | Rule::expr | Rule::below)
            | (Rule::repair_arm | Rule::when_arm | Rule::else_arm, Rule::arrow)
            | (Rule::step, Rule::goto | Rule::pass_fail)
            | (Rule::invariant, Rule::only_uses | Rule::always | Rule::has_no_tools) => true,
            _ => false,
        };
        if starts_cell && let Some(token) = out.get_mut(first) {
            token.cell = Some(1);
        }
        // `pass -> a  fail -> b`: two spaces between the two transitions.
        if child_rule == Rule::pass_fail
            && let Some(fail) = out
                .iter_mut()
                .skip(first + 1)
                .find(|token| token.rule == Rule::kw_fail)
        {
            fail.cell = Some(2);
        }
    }
}
