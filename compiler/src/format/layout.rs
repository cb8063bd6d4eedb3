//! Lines: the printer turns the marked tokens and comments of one item into lines of
//! cells; alignment then pads the cells of runs of like lines into columns, and the
//! lines are rendered.

use super::tree::{Key, Mark, Tok, anchor};
use crate::syntax::Rule;

/// A comment of the source, by where it stands on its line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Comment<'a> {
    pub text: &'a str,
    pub start: usize,
    pub end: usize,
    pub place: Place,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// After code, last on its line.
    Trailing,
    /// Alone on its line (or first, before code: then it is moved to a line of its own).
    OwnLine,
    /// A `/* */` between tokens of one line.
    Inline,
}

/// One thing of an item, in source order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event<'a> {
    Tok(Tok<'a>),
    Comment(Comment<'a>),
    /// A part that does not parse, printed as written (`start..end` of the source).
    Verbatim {
        start: usize,
        end: usize,
    },
}

impl Event<'_> {
    pub fn start(&self) -> usize {
        match self {
            Event::Tok(token) => token.start,
            Event::Comment(comment) => comment.start,
            Event::Verbatim { start, .. } => *start,
        }
    }

    pub fn end(&self) -> usize {
        match self {
            Event::Tok(token) => token.end,
            Event::Comment(comment) => comment.end,
            Event::Verbatim { end, .. } => *end,
        }
    }
}

/// How a line is indented.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Indent {
    Fixed(usize),
    /// A continuation of the line at this index: indented from its anchor cell.
    Cont(usize),
}

#[derive(Clone, Debug)]
pub(crate) struct Cell {
    pub text: String,
    /// Spaces at least between the previous cell and this one.
    pub gap: usize,
    /// The token the cell ends with (for the spacing of the next token).
    last: Option<(Rule, Rule)>,
}

#[derive(Clone, Debug)]
pub(crate) struct Line {
    pub indent: Indent,
    pub cells: Vec<Cell>,
    pub comment: Option<String>,
    /// Lines of one block (or the continuation lines of one member) share a group.
    pub group: usize,
    pub depth: usize,
    pub key: Key,
    pub blank_before: bool,
    /// For continuation lines of this line: (cell, extra columns), see [`anchor`].
    pub anchor: (usize, usize),
    /// The column each cell starts at (set by alignment).
    pub starts: Vec<usize>,
}

impl Line {
    fn new(indent: Indent, group: usize, depth: usize, key: Key) -> Line {
        Line {
            indent,
            cells: Vec::new(),
            comment: None,
            group,
            depth,
            key,
            blank_before: false,
            anchor: (0, 4),
            starts: Vec::new(),
        }
    }

    /// True when a cell holds a line break (a `"""` block): such lines are not aligned.
    pub fn multiline(&self) -> bool {
        self.cells.iter().any(|cell| cell.text.contains('\n'))
    }

    fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
}

/// The widest a one-line block may be.
pub(crate) const MAX_WIDTH: usize = 100;

/// Builds the lines of one item.
pub(crate) struct Printer<'s, 'l> {
    pub source: &'s str,
    pub lines: &'l mut Vec<Line>,
    pub next_group: &'l mut usize,
    /// Where the previous event ended (to see the author's line breaks).
    pub prev_end: usize,
    /// Print blocks one member a line even when written on one line.
    pub force_multi: bool,
    /// Set when a block printed on one line cannot stay so.
    pub multi_needed: bool,
    /// Print blocks inside members (a tool's `sandbox { }`) one entry a line.
    pub force_sub_multi: bool,
    /// Set when a block inside a member printed on one line cannot stay so.
    pub sub_multi_needed: bool,
    /// The block inside a member being printed, if any.
    sub: Option<Sub>,
    /// The group of the entries of a block inside a member printed one entry a line.
    sub_group: usize,
    depth: usize,
    one_line: bool,
    block_group: usize,
    first_in_block: bool,
    /// The line of the current member (or item) and the group of its continuation lines.
    main: Option<usize>,
    cont_group: usize,
    /// The line that holds the last token printed.
    last_line: Option<usize>,
    force_break: bool,
    pending: Vec<(Comment<'s>, bool)>,
    one_line_at: Option<usize>,
    /// The members of the one-line block are cells of a table (one-line tools).
    table: bool,
    /// A `/* */` comment last on the current line so far: (line, cell length before it).
    inline_tail: Option<(usize, usize)>,
}

impl<'s, 'l> Printer<'s, 'l> {
    pub fn new(
        source: &'s str,
        lines: &'l mut Vec<Line>,
        next_group: &'l mut usize,
        prev_end: usize,
        force_multi: bool,
    ) -> Printer<'s, 'l> {
        Printer {
            source,
            lines,
            next_group,
            prev_end,
            force_multi,
            multi_needed: false,
            force_sub_multi: false,
            sub_multi_needed: false,
            sub: None,
            sub_group: 0,
            depth: 0,
            one_line: false,
            block_group: 0,
            first_in_block: false,
            main: None,
            cont_group: 0,
            last_line: None,
            force_break: false,
            pending: Vec::new(),
            one_line_at: None,
            table: false,
            inline_tail: None,
        }
    }

    fn group(&mut self) -> usize {
        *self.next_group += 1;
        *self.next_group
    }

    /// The line breaks in the source between the previous event and `start`.
    fn breaks_before(&self, start: usize) -> usize {
        self.source
            .get(self.prev_end.min(start)..start)
            .map_or(0, |gap| gap.matches('\n').count())
    }

    pub fn event(&mut self, event: &Event<'s>) {
        let breaks = self.breaks_before(event.start());
        match *event {
            Event::Tok(token) => self.token(token, breaks),
            Event::Comment(comment) => self.comment(comment, breaks),
            Event::Verbatim { start, end } => self.verbatim(start, end, breaks),
        }
        self.prev_end = event.end();
    }

    /// Ends the item: comments still waiting get their lines.
    pub fn finish(&mut self) {
        let (indent, group, depth) = self.member_place();
        self.flush(indent, group, depth, false);
    }

    /// The indentation, group and depth of a member line at the current depth.
    fn member_place(&self) -> (Indent, usize, usize) {
        match self.depth {
            0 => (Indent::Fixed(0), 0, 0),
            1 => (Indent::Fixed(2), self.block_group, 1),
            _ => (Indent::Fixed(4), self.sub_group, 2),
        }
    }

    /// Gives the comments waiting their own lines.
    fn flush(&mut self, indent: Indent, group: usize, depth: usize, mut first: bool) {
        self.settle_inline();
        for (comment, blank) in std::mem::take(&mut self.pending) {
            let mut line = Line::new(indent, group, depth, Key::Comment);
            line.blank_before = blank && !first;
            first = false;
            line.cells.push(Cell {
                text: comment_text(comment.text),
                gap: 0,
                last: None,
            });
            self.lines.push(line);
        }
    }

    /// A line is ending: a `/* */` comment that ended up last on it becomes its trailing
    /// comment (where it will be found the next time).
    fn settle_inline(&mut self) {
        let Some((index, length)) = self.inline_tail.take() else {
            return;
        };
        let Some(line) = self.lines.get_mut(index) else {
            return;
        };
        let Some(cell) = line.cells.last_mut() else {
            return;
        };
        let tail = cell
            .text
            .get(length..)
            .unwrap_or("")
            .trim_start()
            .to_string();
        cell.text.truncate(length);
        line.comment = Some(match line.comment.take() {
            Some(after) => format!("{tail} {after}"),
            None => tail,
        });
    }

    /// Starts a line for a member (or an item) at the current depth.
    fn start_member(&mut self, key: Key, kind: Rule, blank: bool) {
        let (indent, group, depth) = self.member_place();
        let first = self.depth > 0 && self.first_in_block;
        let pending_first = self.pending.first().map(|(_, blank)| *blank);
        self.flush(indent, group, depth, first);
        let mut line = Line::new(indent, group, depth, key);
        line.blank_before = blank && !(first && pending_first.is_none());
        line.anchor = anchor(kind);
        self.lines.push(line);
        let index = self.lines.len() - 1;
        self.main = Some(index);
        self.cont_group = self.group();
        self.first_in_block = false;
        self.force_break = false;
    }

    /// Starts a continuation line of the current member.
    fn start_continuation(&mut self, key: Key) {
        if self.one_line {
            self.multi_needed = true;
        }
        let Some(main) = self.main else {
            let blank = false;
            return self.start_member(key, Rule::header, blank);
        };
        let depth = self.lines.get(main).map_or(0, |line| line.depth) + 1;
        let group = self.cont_group;
        self.flush(Indent::Cont(main), group, depth, true);
        self.lines
            .push(Line::new(Indent::Cont(main), group, depth, key));
        self.force_break = false;
    }

    fn token(&mut self, token: Tok<'s>, breaks: usize) {
        let blank = breaks >= 2;
        if breaks > 0 && self.sub.as_ref().is_some_and(|sub| sub.one_line) {
            self.sub_multi_needed = true;
        }
        match token.mark {
            Mark::Member(key) => {
                if self.depth > 0 && self.one_line {
                    if breaks > 0 {
                        self.multi_needed = true;
                    }
                    let gap = if self.after_comma() { 1 } else { 2 };
                    if self.after_open() {
                        self.append(token);
                    } else if self.table {
                        self.push_cell(token, gap);
                    } else {
                        self.append_after(token, gap);
                    }
                    return;
                }
                let kind = match key {
                    Key::Rule(rule) => rule,
                    _ => Rule::header,
                };
                self.start_member(key, kind, blank);
            }
            Mark::Open => return self.open(token),
            Mark::Close => return self.close(token),
            Mark::SubOpen => return self.sub_open(token),
            Mark::SubClose => return self.sub_close(token),
            Mark::SubMember(key) => {
                if self.sub_member(token, key, breaks) {
                    return;
                }
            }
            Mark::Arm => self.start_continuation(Key::Arm),
            Mark::Doc => {
                self.flush(Indent::Fixed(0), 0, 0, false);
                self.lines.push(Line::new(Indent::Fixed(0), 0, 0, Key::Doc));
                self.main = None;
            }
            Mark::None => {
                if (breaks > 0 || self.force_break)
                    && self.current().is_some_and(|line| !line.is_empty())
                {
                    self.start_continuation(Key::Cont);
                }
            }
        }
        match token.cell {
            Some(gap) if !self.one_line && self.current().is_some_and(|line| !line.is_empty()) => {
                self.push_cell(token, gap);
            }
            _ => self.append(token),
        }
    }

    fn open(&mut self, token: Tok<'s>) {
        self.one_line = !self.force_multi;
        if self.one_line {
            if let Some(main) = self.main
                && let Some(line) = self.lines.get_mut(main)
                && let Key::Rule(rule) = line.key
            {
                line.key = Key::OneLine(rule);
                self.table = rule == Rule::tool;
            }
            self.one_line_at = self.lines.len().checked_sub(1);
            self.push_cell(token, 1);
        } else {
            self.append(token);
            if let Some(main) = self.main
                && let Some(line) = self.lines.get_mut(main)
            {
                line.key = Key::Open;
            }
        }
        self.depth = 1;
        self.block_group = self.group();
        self.first_in_block = true;
        self.force_break = false;
    }

    fn close(&mut self, token: Tok<'s>) {
        if self.one_line {
            if !self.pending.is_empty() || self.breaks_before(token.start) > 0 {
                self.multi_needed = true;
            }
            if self.after_open() {
                if let Some(cell) = self.current_mut().and_then(|line| line.cells.last_mut()) {
                    cell.text.push_str(token.text);
                    cell.last = Some((token.rule, token.parent));
                }
            } else {
                self.append(token);
            }
            if let Some(line) = self.one_line_at.and_then(|at| self.lines.get(at))
                && (line.multiline() || plain_width(line) > MAX_WIDTH)
            {
                self.multi_needed = true;
            }
        } else {
            let (indent, group, depth) = self.member_place();
            self.flush(indent, group, depth, self.first_in_block);
            let mut line = Line::new(Indent::Fixed(0), 0, 0, Key::Close);
            line.cells.push(Cell {
                text: token.text.to_string(),
                gap: 0,
                last: Some((token.rule, token.parent)),
            });
            self.lines.push(line);
            self.last_line = Some(self.lines.len() - 1);
            self.main = Some(self.lines.len() - 1);
            self.cont_group = self.group();
        }
        self.depth = 0;
        self.one_line = false;
        self.force_break = false;
    }

    /// The `{` of a block inside a member: on one line with the member when the item is
    /// (or when it may be), else its entries one a line, indented one more level.
    fn sub_open(&mut self, token: Tok<'s>) {
        let one_line = self.one_line || !self.force_sub_multi;
        self.append(token);
        self.sub = Some(Sub {
            one_line,
            line: self.lines.len().saturating_sub(1),
            first: true,
        });
        if !one_line {
            self.depth = 2;
            self.sub_group = self.group();
            self.first_in_block = true;
        }
        self.force_break = false;
    }

    /// The first token of an entry of a block inside a member. Returns true when it was
    /// printed; otherwise a line was started for it and it is still to be printed.
    fn sub_member(&mut self, token: Tok<'s>, key: Key, breaks: usize) -> bool {
        let Some(sub) = self.sub.as_mut() else {
            self.append(token);
            return true;
        };
        if sub.one_line {
            if breaks > 0 && self.one_line {
                self.multi_needed = true;
            }
            if std::mem::replace(&mut sub.first, false) {
                self.append(token);
            } else {
                let gap = if self.after_comma() { 1 } else { 2 };
                self.append_after(token, gap);
            }
            return true;
        }
        let kind = match key {
            Key::Rule(rule) => rule,
            _ => Rule::header,
        };
        self.start_member(key, kind, breaks >= 2);
        false
    }

    /// The `}` of a block inside a member.
    fn sub_close(&mut self, token: Tok<'s>) {
        let Some(sub) = self.sub.take() else {
            return self.append(token);
        };
        self.force_break = false;
        if sub.one_line {
            if !self.pending.is_empty() || self.breaks_before(token.start) > 0 {
                self.sub_multi_needed = true;
                if self.one_line {
                    self.multi_needed = true;
                }
            }
            self.append(token);
            // Inside a block printed one member a line, the member's line must fit.
            if !self.one_line
                && let Some(line) = self.lines.get(sub.line)
                && (line.multiline() || plain_width(line) > MAX_WIDTH)
            {
                self.sub_multi_needed = true;
            }
            return;
        }
        let (indent, group, depth) = self.member_place();
        self.flush(indent, group, depth, self.first_in_block);
        self.depth = 1;
        let mut line = Line::new(Indent::Fixed(2), self.block_group, 1, Key::Close);
        line.cells.push(Cell {
            text: token.text.to_string(),
            gap: 0,
            last: Some((token.rule, token.parent)),
        });
        self.lines.push(line);
        self.last_line = Some(self.lines.len() - 1);
        self.main = Some(self.lines.len() - 1);
        self.cont_group = self.group();
        self.first_in_block = false;
    }

    fn comment(&mut self, comment: Comment<'s>, breaks: usize) {
        if self.one_line {
            self.multi_needed = true;
        }
        if self.sub.as_ref().is_some_and(|sub| sub.one_line) {
            self.sub_multi_needed = true;
        }
        match comment.place {
            Place::Trailing if self.last_line.is_some() && breaks == 0 => {
                let text = comment_text(comment.text);
                if let Some(line) = self.last_line.and_then(|at| self.lines.get_mut(at)) {
                    line.comment = Some(match line.comment.take() {
                        Some(before) => format!("{before} {text}"),
                        None => text,
                    });
                }
                self.force_break = true;
            }
            Place::Inline if breaks == 0 && self.current().is_some_and(|line| !line.is_empty()) => {
                let text = comment.text;
                let index = self.lines.len().saturating_sub(1);
                let tail = self.inline_tail;
                if let Some(cell) = self.lines.last_mut().and_then(|line| line.cells.last_mut()) {
                    if tail.is_none() {
                        self.inline_tail = Some((index, cell.text.len()));
                    }
                    cell.text.push(' ');
                    cell.text.push_str(text);
                    cell.last = None;
                }
            }
            _ => self.pending.push((comment, breaks >= 2)),
        }
    }

    fn verbatim(&mut self, start: usize, end: usize, breaks: usize) {
        if self.one_line {
            self.multi_needed = true;
        }
        let text = verbatim_text(self.source.get(start..end).unwrap_or(""));
        self.start_member(Key::Verbatim, Rule::header, breaks >= 2);
        if let Some(line) = self.lines.last_mut() {
            line.cells.push(Cell {
                text,
                gap: 0,
                last: None,
            });
        }
        self.last_line = Some(self.lines.len() - 1);
        // Whatever follows a part printed as written starts a line of its own.
        self.force_break = true;
        self.main = None;
    }

    fn current(&self) -> Option<&Line> {
        self.lines.last()
    }

    fn current_mut(&mut self) -> Option<&mut Line> {
        self.lines.last_mut()
    }

    fn after_comma(&self) -> bool {
        self.current()
            .and_then(|line| line.cells.last())
            .is_some_and(|cell| matches!(cell.last, Some((Rule::comma, _))))
    }

    fn after_open(&self) -> bool {
        self.current()
            .and_then(|line| line.cells.last())
            .is_some_and(|cell| matches!(cell.last, Some((Rule::lbrace, _))) && cell.text == "{")
    }

    fn push_cell(&mut self, token: Tok<'s>, gap: usize) {
        self.inline_tail = None;
        if self.current().is_none() {
            self.start_member(Key::Cont, Rule::header, false);
        }
        if let Some(line) = self.lines.last_mut() {
            line.cells.push(Cell {
                text: token.text.to_string(),
                gap,
                last: Some((token.rule, token.parent)),
            });
        }
        self.last_line = Some(self.lines.len() - 1);
    }

    /// Appends `token` to the last cell, `spaces` after it.
    fn append_after(&mut self, token: Tok<'s>, spaces: usize) {
        self.inline_tail = None;
        if let Some(cell) = self.current_mut().and_then(|line| line.cells.last_mut()) {
            cell.text.extend(std::iter::repeat_n(' ', spaces));
            cell.text.push_str(token.text);
            cell.last = Some((token.rule, token.parent));
        } else {
            self.append(token);
        }
    }

    fn append(&mut self, token: Tok<'s>) {
        self.inline_tail = None;
        if self.current().is_none() {
            self.start_member(Key::Cont, Rule::header, false);
        }
        let Some(line) = self.lines.last_mut() else {
            return;
        };
        match line.cells.last_mut() {
            Some(cell) => {
                if spaced(cell.last, &token) {
                    cell.text.push(' ');
                }
                cell.text.push_str(token.text);
                cell.last = Some((token.rule, token.parent));
            }
            None => line.cells.push(Cell {
                text: token.text.to_string(),
                gap: 0,
                last: Some((token.rule, token.parent)),
            }),
        }
        self.last_line = Some(self.lines.len() - 1);
    }
}

/// A block inside a member being printed.
#[derive(Clone, Copy, Debug)]
struct Sub {
    /// Printed on one line, with its member.
    one_line: bool,
    /// The line its `{` is on.
    line: usize,
    /// No entry printed yet.
    first: bool,
}

/// Whether a space goes between a token `(rule, parent)` (`None`: a comment) and `next`.
fn spaced(previous: Option<(Rule, Rule)>, next: &Tok) -> bool {
    let Some((rule, _)) = previous else {
        return true;
    };
    let tight_before = matches!(
        next.rule,
        Rule::comma
            | Rule::colon
            | Rule::rparen
            | Rule::rbracket
            | Rule::rangle
            | Rule::langle
            | Rule::question
            | Rule::dot
            | Rule::dotdot
            | Rule::dotdoteq
    ) || (next.rule == Rule::lparen
        && matches!(
            next.parent,
            Rule::args | Rule::prompt_file | Rule::range | Rule::secret_env
        ));
    let tight_after = matches!(
        rule,
        Rule::lparen
            | Rule::lbracket
            | Rule::langle
            | Rule::dot
            | Rule::dotdot
            | Rule::dotdoteq
            | Rule::neg
    );
    let empty_braces = rule == Rule::lbrace && next.rule == Rule::rbrace;
    !(tight_before || tight_after || empty_braces)
}

/// A comment as printed: trailing blanks dropped.
fn comment_text(text: &str) -> String {
    text.trim_end().to_string()
}

/// A part printed as written: trailing blanks of each line and trailing empty lines dropped.
fn verbatim_text(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    lines.join("\n").trim_end().to_string()
}

/// The width of a line with its cells one gap apart (no alignment, no comment).
pub(crate) fn plain_width(line: &Line) -> usize {
    let indent = match line.indent {
        Indent::Fixed(columns) => columns,
        Indent::Cont(_) => 0,
    };
    indent
        + line
            .cells
            .iter()
            .enumerate()
            .map(|(index, cell)| cell.text.chars().count() + if index > 0 { cell.gap } else { 0 })
            .sum::<usize>()
}

/// How far right of the others a cell may end and still be aligned with them: a longer
/// one is left out of its column, so one long line does not push the rest to the right.
const OUTLIER: usize = 40;

/// Aligns the lines and renders them.
pub(crate) fn render(lines: &mut [Line]) -> String {
    for line in lines.iter_mut() {
        if let Indent::Fixed(indent) = line.indent {
            natural_starts(line, indent);
        }
    }
    align_cells(lines, false);
    for index in 0..lines.len() {
        let Some(Indent::Cont(main)) = lines.get(index).map(|line| line.indent) else {
            continue;
        };
        let indent = lines.get(main).map_or(4, |main| {
            let (cell, extra) = main.anchor;
            let base = main
                .starts
                .get(cell)
                .copied()
                .unwrap_or_else(|| main.starts.first().copied().unwrap_or(0));
            let extra = if main.starts.get(cell).is_some() {
                extra
            } else {
                4
            };
            base + extra
        });
        if let Some(line) = lines.get_mut(index) {
            natural_starts(line, indent);
        }
    }
    align_cells(lines, true);
    let columns = comment_columns(lines);
    let mut out = String::new();
    for (line, column) in lines.iter().zip(columns) {
        if line.blank_before && !out.is_empty() {
            out.push('\n');
        }
        render_line(&mut out, line, column);
        out.push('\n');
    }
    out
}

fn render_line(out: &mut String, line: &Line, comment_column: usize) {
    let mut column = 0;
    for (cell, start) in line.cells.iter().zip(&line.starts) {
        let pad = start
            .saturating_sub(column)
            .max(if column == 0 { 0 } else { 1 });
        out.extend(std::iter::repeat_n(' ', pad));
        out.push_str(&cell.text);
        column = match cell.text.rfind('\n') {
            Some(at) => cell
                .text
                .get(at + 1..)
                .map_or(0, |rest| rest.chars().count()),
            None => column + pad + cell.text.chars().count(),
        };
    }
    if let Some(comment) = &line.comment {
        let pad = if line.cells.is_empty() {
            comment_column
        } else {
            comment_column.saturating_sub(column).max(2)
        };
        out.extend(std::iter::repeat_n(' ', pad));
        out.push_str(comment);
    }
}

/// The columns of a line's cells, each `gap` after the last.
fn natural_starts(line: &mut Line, indent: usize) {
    let mut starts = Vec::with_capacity(line.cells.len());
    let mut column = indent;
    for (index, cell) in line.cells.iter().enumerate() {
        if index > 0 {
            column += cell.gap;
        }
        starts.push(column);
        column += width(&cell.text);
    }
    line.starts = starts;
}

fn width(text: &str) -> usize {
    text.chars().count()
}

/// The lines of each run of like lines: from `first`, the following lines of the same
/// group and key with no blank line before them; lines deeper than `first` are passed
/// over, anything else ends the run.
fn run(lines: &[Line], first: usize, same: impl Fn(&Line, &Line) -> bool) -> Vec<usize> {
    let Some(head) = lines.get(first) else {
        return Vec::new();
    };
    let mut members = vec![first];
    for (index, line) in lines.iter().enumerate().skip(first + 1) {
        if line.depth > head.depth {
            continue;
        }
        if line.group != head.group || line.blank_before || !same(head, line) {
            break;
        }
        members.push(index);
    }
    members
}

/// The column a cell is padded to in a run: the rightmost end that is not an outlier,
/// one more than [`OUTLIER`] columns right of the median end (the upper median for
/// cells, so of two cells neither is left out; the lower for comments, so one long line
/// does not push a comment far right).
fn target(ends: &[usize], upper: bool) -> usize {
    let mut sorted = ends.to_vec();
    sorted.sort_unstable();
    let middle = if upper {
        sorted.len() / 2
    } else {
        sorted.len().saturating_sub(1) / 2
    };
    let median = sorted.get(middle).copied().unwrap_or(0);
    sorted
        .into_iter()
        .filter(|&end| end <= median + OUTLIER)
        .max()
        .unwrap_or(median)
}

/// Pads the cells of each run of like lines into columns (continuation lines when
/// `continuations`, the others otherwise).
fn align_cells(lines: &mut [Line], continuations: bool) {
    let mut done = vec![false; lines.len()];
    for first in 0..lines.len() {
        let eligible = |line: &Line| {
            matches!(line.indent, Indent::Cont(_)) == continuations
                && !line.multiline()
                && line.key != Key::Comment
                && line.key != Key::Verbatim
        };
        if done.get(first).copied().unwrap_or(true) || !lines.get(first).is_some_and(eligible) {
            continue;
        }
        let members = run(lines, first, |head, line| {
            line.key == head.key && eligible(line)
        });
        for &index in &members {
            if let Some(flag) = done.get_mut(index) {
                *flag = true;
            }
        }
        let columns = members
            .iter()
            .filter_map(|&index| lines.get(index))
            .map(|line| line.cells.len())
            .max()
            .unwrap_or(0);
        for column in 0..columns.saturating_sub(1) {
            align_column(lines, &members, column);
        }
    }
}

fn align_column(lines: &mut [Line], members: &[usize], column: usize) {
    let ends: Vec<(usize, usize)> = members
        .iter()
        .filter_map(|&index| {
            let line = lines.get(index)?;
            line.cells.get(column + 1)?;
            Some((
                index,
                line.starts.get(column)? + width(&line.cells.get(column)?.text),
            ))
        })
        .collect();
    if ends.len() < 2 {
        return;
    }
    let goal = target(&ends.iter().map(|&(_, end)| end).collect::<Vec<_>>(), true);
    for (index, end) in ends {
        let Some(line) = lines.get_mut(index) else {
            continue;
        };
        let gap = line.cells.get(column + 1).map_or(1, |cell| cell.gap);
        let want = if end <= goal { goal + gap } else { end + gap };
        let shift = want.saturating_sub(line.starts.get(column + 1).copied().unwrap_or(want));
        for start in line.starts.iter_mut().skip(column + 1) {
            *start += shift;
        }
    }
}

/// The column each line's trailing comment starts at: aligned over the lines of a
/// paragraph of one block (lines deeper in are passed over).
fn comment_columns(lines: &[Line]) -> Vec<usize> {
    let end_of = |line: &Line| {
        line.starts.last().copied().unwrap_or(0)
            + line.cells.last().map_or(0, |cell| width(&cell.text))
    };
    let mut columns: Vec<usize> = lines.iter().map(|line| end_of(line) + 2).collect();
    let mut done = vec![false; lines.len()];
    for first in 0..lines.len() {
        let Some(head) = lines.get(first) else {
            continue;
        };
        if done.get(first).copied().unwrap_or(true) || head.key == Key::Comment {
            continue;
        }
        // The first and last lines of a block item stand alone.
        let alone = |key: Key| matches!(key, Key::Comment | Key::Open | Key::Close);
        let members = run(lines, first, |head, line| {
            !alone(head.key) && !alone(line.key)
        });
        let commented: Vec<(usize, usize)> = members
            .iter()
            .filter_map(|&index| {
                let line = lines.get(index)?;
                (line.comment.is_some() && !line.multiline()).then(|| (index, end_of(line)))
            })
            .collect();
        for &index in &members {
            if let Some(flag) = done.get_mut(index) {
                *flag = true;
            }
        }
        if commented.is_empty() {
            continue;
        }
        let goal = target(
            &commented.iter().map(|&(_, end)| end).collect::<Vec<_>>(),
            false,
        );
        for (index, end) in commented {
            if let Some(column) = columns.get_mut(index) {
                *column = if end <= goal { goal + 2 } else { end + 2 };
            }
        }
    }
    for (line, column) in lines.iter().zip(columns.iter_mut()) {
        if line.cells.is_empty() || line.key == Key::Comment {
            *column = line.starts.first().copied().unwrap_or(0);
        } else if line.multiline() {
            *column = 0;
        }
    }
    columns
}
