//! `charter fmt`: one canonical layout of a `.charter` spec, printed from its parse tree
//! with every comment kept where it was.
//!
//! The file is cut into parts as the parser's driver cuts it: the header, then one item
//! at a time (inside `flow`, one step at a time). Each part's tokens, read off pest's
//! parse tree and marked with their place in the layout (`tree`), and the comments
//! around them become lines of cells (`layout`); runs of like lines are then aligned
//! into columns. A part that does not parse is printed as written, so a file with a
//! syntax error still formats. A last guard compares each printed part with its source,
//! token by token and comment by comment: if they ever differ, the part is printed as
//! written instead, so formatting never loses anything.

mod layout;
mod tree;

#[cfg(test)]
mod tests;

use pest::Parser as _;

use crate::diagnostics::{Code, Diagnostic, FileId, Sources, Span};
use crate::syntax::{self, CharterParser, Rule};
use layout::{Comment, Event, Line, Place, Printer};

/// Why a file could not be formatted at all.
#[derive(Debug)]
pub struct FormatError {
    /// What is wrong, as `charter check` reports it. The spans point into the formatted
    /// text as the only file of a [`Sources`]: render them with
    /// [`FormatError::sources`].
    pub diagnostics: Vec<Diagnostic>,
}

impl FormatError {
    /// A [`Sources`] holding `text` (the text given to [`format`]) under `name`, for
    /// rendering the diagnostics with [`crate::render::text`].
    pub fn sources(name: &str, text: &str) -> Sources {
        let mut sources = Sources::new();
        sources.add(name, text);
        sources
    }
}

/// Formats the spec `text` (DESIGN §14): the canonical layout, comments kept, the
/// compiled spec unchanged. Formatting formatted text changes nothing. Items with a
/// syntax error are kept as written. Fails only when the file cannot be read as a spec
/// at all: the header (`spec NAME version "X"`) does not parse, or a `/*` comment is
/// never closed.
pub fn format(text: &str) -> Result<String, FormatError> {
    let file = FileId(0);
    let blanked = syntax::blank_comments(text);
    if let Some(start) = blanked.open_comment {
        return Err(FormatError {
            diagnostics: vec![
                Diagnostic::new(
                    Code::E001,
                    Span::new(file, start, start + 2),
                    "unterminated `/*` comment",
                )
                .with_label("this comment is never closed")
                .with_help("close it with `*/`"),
            ],
        });
    }
    let header = match CharterParser::parse(Rule::header, &blanked.text) {
        Ok(mut pairs) => pairs.next(),
        Err(error) => {
            return Err(FormatError {
                diagnostics: vec![syntax::errors::syntax_error(&error, file, 0, text)],
            });
        }
    };
    let Some(header) = header else {
        return Ok(text.to_string());
    };
    let mut parts = vec![Part::from_tokens(tree::header_tokens(header, 0))];
    parts.extend(items(&blanked.text));
    attach_comments(&mut parts, text, &blanked.comments);
    let printed = print(text, &parts);
    // A byte-order mark the file opened with stays (an editor that wrote it wants it).
    if text.starts_with('\u{feff}') && !printed.starts_with('\u{feff}') {
        Ok(format!("\u{feff}{printed}"))
    } else {
        Ok(printed)
    }
}

/// How many parts of `text` the last guard printed as written because their layout
/// would have changed their tokens or comments (0 unless the printer has a bug; the
/// corpus tests hold it to 0).
#[doc(hidden)]
pub fn guarded_parts(text: &str) -> usize {
    GUARDED.with(|count| count.set(0));
    let _ = format(text);
    GUARDED.with(std::cell::Cell::get)
}

thread_local! {
    static GUARDED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One part of the file: the header or an item, with the comments that go with it.
struct Part<'a> {
    events: Vec<Event<'a>>,
}

impl<'a> Part<'a> {
    fn from_tokens(tokens: Vec<tree::Tok<'a>>) -> Part<'a> {
        Part {
            events: tokens.into_iter().map(Event::Tok).collect(),
        }
    }

    /// `start..end` of `text` printed as written (the blank lines after it are left to
    /// the gap before the next part).
    fn verbatim(text: &str, start: usize, end: usize) -> Part<'a> {
        Part {
            events: vec![verbatim(text, start, end)],
        }
    }

    fn start(&self) -> usize {
        self.events.first().map_or(0, Event::start)
    }

    fn end(&self) -> usize {
        self.events.last().map_or(0, Event::end)
    }
}

/// The items after the header, as the parser's driver finds them.
fn items(text: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut position = CharterParser::parse(Rule::header, text)
        .ok()
        .and_then(|mut pairs| pairs.next())
        .map_or(0, |header| header.as_span().end());
    loop {
        position = syntax::skip_trivia(text, position);
        let Some(rest) = text.get(position..).filter(|rest| !rest.is_empty()) else {
            break;
        };
        if syntax::starts_with_keyword(rest, "flow") {
            let (part, end) = flow(text, position);
            parts.push(part);
            position = end.max(position + 1);
            continue;
        }
        match CharterParser::parse(syntax::entry_rule(rest), rest) {
            Ok(mut pairs) => {
                let Some(pair) = pairs.next() else {
                    break;
                };
                let end = position + pair.as_span().end();
                parts.push(Part::from_tokens(tree::item_tokens(pair, position)));
                position = end.max(position + 1);
            }
            Err(_) => {
                let resume = syntax::next_item_line(text, position);
                parts.push(Part::verbatim(
                    text,
                    position,
                    resume.max(position + 1).min(text.len()),
                ));
                position = resume.max(position + 1);
            }
        }
    }
    parts
}

/// The flow at `start`, step by step; returns it and where it ends.
fn flow(text: &str, start: usize) -> (Part<'_>, usize) {
    let rest = text.get(start..).unwrap_or("");
    let Ok(opening) = CharterParser::parse(Rule::flow_open, rest) else {
        let end = syntax::next_item_line(text, start)
            .max(start + 1)
            .min(text.len());
        return (Part::verbatim(text, start, end), end);
    };
    let mut events = Vec::new();
    let mut position = start;
    for pair in opening {
        let mark = match pair.as_rule() {
            Rule::lbrace => tree::Mark::Open,
            _ => tree::Mark::Member(tree::Key::Rule(Rule::flow)),
        };
        position = start + pair.as_span().end();
        events.push(Event::Tok(tree::Tok {
            mark,
            ..tree::leaf(&pair, Rule::flow, start)
        }));
    }
    loop {
        position = syntax::skip_trivia(text, position);
        let rest = text.get(position..).unwrap_or("");
        if rest.starts_with('}') {
            let close = CharterParser::parse(Rule::rbrace, rest)
                .ok()
                .and_then(|mut pairs| pairs.next());
            if let Some(close) = close {
                events.push(Event::Tok(tree::Tok {
                    mark: tree::Mark::Close,
                    ..tree::leaf(&close, Rule::flow, position)
                }));
            }
            position += 1;
            break;
        }
        if rest.is_empty() || (syntax::at_line_start(text, position) && syntax::is_item_line(rest))
        {
            break;
        }
        match CharterParser::parse(Rule::step_entry, rest) {
            Ok(mut pairs) => {
                let Some(pair) = pairs.next() else {
                    break;
                };
                let end = position + pair.as_span().end();
                events.extend(
                    tree::step_tokens(pair, position)
                        .into_iter()
                        .map(Event::Tok),
                );
                position = end.max(position + 1);
            }
            Err(_) if !syntax::at_line_start(text, position) => {
                // Moved to a line of its own, the broken step could read as the start of
                // an item and end the flow: the flow is kept as written.
                let end = syntax::next_item_line(text, position)
                    .max(position + 1)
                    .min(text.len());
                return (Part::verbatim(text, start, end), end);
            }
            Err(_) => {
                let resume = syntax::next_step_line(text, position)
                    .max(position + 1)
                    .min(text.len());
                events.push(verbatim(text, position, resume));
                position = resume;
            }
        }
    }
    (Part { events }, position)
}

/// `start..end` of `text` as a part printed as written, its trailing blanks left out.
fn verbatim(text: &str, start: usize, end: usize) -> Event<'static> {
    let written = text.get(start..end).unwrap_or("");
    Event::Verbatim {
        start,
        end: start + written.trim_end().len().max(1).min(written.len()),
    }
}

/// Puts each comment of `text` with its part, in order: inside a part's span it goes
/// there; between parts, a comment on the line where a part ends goes with that part,
/// any other with the part after it (or a last part of its own).
fn attach_comments<'a>(parts: &mut Vec<Part<'a>>, text: &'a str, comments: &[(usize, usize)]) {
    let verbatim: Vec<(usize, usize)> = parts
        .iter()
        .flat_map(|part| part.events.iter())
        .filter_map(|event| match event {
            Event::Verbatim { start, end } => Some((*start, *end)),
            _ => None,
        })
        .collect();
    let mut trailing_part = Part { events: Vec::new() };
    for &(start, end) in comments {
        if verbatim
            .iter()
            .any(|&(from, to)| start >= from && start < to)
        {
            continue;
        }
        let comment = Event::Comment(Comment {
            text: text.get(start..end).unwrap_or(""),
            start,
            end,
            place: place(text, start, end),
        });
        let index = parts.iter().position(|part| part.end() > start);
        let target = match index {
            Some(index) if parts.get(index).is_some_and(|part| part.start() <= start) => index,
            Some(index) => {
                let previous_end = index
                    .checked_sub(1)
                    .and_then(|at| parts.get(at))
                    .map(Part::end);
                match previous_end {
                    Some(end_of_previous)
                        if !text
                            .get(end_of_previous..start)
                            .unwrap_or("\n")
                            .contains('\n') =>
                    {
                        index - 1
                    }
                    _ => index,
                }
            }
            None => {
                let last_end = parts.last().map_or(0, Part::end);
                if !text.get(last_end..start).unwrap_or("\n").contains('\n') && !parts.is_empty() {
                    parts.len() - 1
                } else {
                    trailing_part.events.push(comment);
                    continue;
                }
            }
        };
        if let Some(part) = parts.get_mut(target) {
            let at = part.events.partition_point(|event| event.start() < start);
            part.events.insert(at, comment);
        }
    }
    if !trailing_part.events.is_empty() {
        parts.push(trailing_part);
    }
}

/// Where the comment at `start..end` stands on its line.
fn place(text: &str, start: usize, end: usize) -> Place {
    let line_start = text
        .get(..start)
        .and_then(|before| before.rfind('\n'))
        .map_or(0, |at| at + 1);
    let code_before = !text.get(line_start..start).unwrap_or("").trim().is_empty();
    let line_end = text
        .get(end..)
        .and_then(|after| after.find('\n'))
        .map_or(text.len(), |at| end + at);
    let code_after = !text.get(end..line_end).unwrap_or("").trim().is_empty();
    match (code_before, code_after) {
        (true, false) => Place::Trailing,
        (true, true) => Place::Inline,
        (false, _) => Place::OwnLine,
    }
}

/// Prints the parts: each as laid out, or as written when the layout would not keep its
/// tokens and comments.
fn print(text: &str, parts: &[Part]) -> String {
    let mut lines: Vec<Line> = Vec::new();
    let mut groups = 0;
    let mut prev_end = 0;
    for part in parts {
        let mark = lines.len();
        // 0: blocks on one line where written so; 1: the item's block one member a line,
        // blocks inside members still on one line; 2: those one entry a line too.
        let mut level = 0;
        loop {
            let mut printer = Printer::new(text, &mut lines, &mut groups, prev_end, level >= 1);
            printer.force_sub_multi = level >= 2;
            for event in &part.events {
                printer.event(event);
            }
            printer.finish();
            level = match (level, printer.multi_needed, printer.sub_multi_needed) {
                (0, true, _) => 1,
                (0 | 1, _, true) => 2,
                _ => break,
            };
            lines.truncate(mark);
        }
        let source = text.get(part.start()..part.end()).unwrap_or("");
        if lex(&plain(lines.get(mark..).unwrap_or(&[]))) != lex(source) {
            GUARDED.with(|count| count.set(count.get() + 1));
            lines.truncate(mark);
            let mut printer = Printer::new(text, &mut lines, &mut groups, prev_end, true);
            printer.event(&Event::Verbatim {
                start: part.start(),
                end: part.end(),
            });
            printer.finish();
        }
        prev_end = part.end();
    }
    if let Some(first) = lines.first_mut() {
        first.blank_before = false;
    }
    layout::render(&mut lines)
}

/// Lines as text with no alignment: enough to compare their tokens with the source's.
fn plain(lines: &[Line]) -> String {
    let mut out = String::new();
    for line in lines {
        for cell in &line.cells {
            out.push_str(&cell.text);
            out.push(' ');
        }
        if let Some(comment) = &line.comment {
            out.push_str(comment);
        }
        out.push('\n');
    }
    out
}

/// The tokens of spec text for comparison: comments (trailing blanks dropped), strings
/// and `"""` blocks whole, runs of name characters, and every other character alone.
fn lex(text: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(character) = rest.chars().next() {
        let length = if character.is_whitespace() {
            rest.len() - rest.trim_start().len()
        } else if rest.starts_with("//") {
            rest.find('\n').unwrap_or(rest.len())
        } else if rest.starts_with("/*") {
            rest.get(2..)
                .and_then(|after| after.find("*/"))
                .map_or(rest.len(), |at| at + 4)
        } else if rest.starts_with("\"\"\"") {
            rest.get(3..)
                .and_then(|after| after.find("\"\"\""))
                .map_or(rest.len(), |at| at + 6)
        } else if character == '"' {
            string_length(rest)
        } else if character.is_alphanumeric() || character == '_' {
            rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len())
        } else {
            character.len_utf8()
        };
        let mut length = length.max(1).min(rest.len());
        while !rest.is_char_boundary(length) {
            length += 1;
        }
        let (token, after) = rest.split_at(length);
        if !character.is_whitespace() {
            tokens.push(token.trim_end());
        }
        rest = after;
    }
    tokens
}

/// The length of the `"..."` string at the start of `text` (to its closing quote or the
/// end of its line).
fn string_length(text: &str) -> usize {
    let mut escaped = false;
    for (index, character) in text.char_indices().skip(1) {
        match character {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return index + 1,
            '\n' => return index,
            _ => {}
        }
    }
    text.len()
}
