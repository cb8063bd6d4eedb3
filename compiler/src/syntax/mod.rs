//! Syntax: the pest grammar and its lowering to the AST, with spans on every node.
//!
//! Parsing never fails outright. The header is parsed first; then items are parsed one
//! at a time (and inside `flow { }`, steps one at a time), so that a syntax error costs
//! only the item or step it is in: the error is reported (E001) and parsing resumes at
//! the next line that starts an item (or a step).
//!
//! After 100 syntax errors parsing stops, with a last note saying so. Expressions are
//! bounded while lowering (`lower.rs`: nesting 64, operators 256 in one chain and 1,024 in
//! all), so no later stage that walks an expression by recursion can exhaust the stack.

pub mod ast;
pub(crate) mod errors;
pub mod includes;
pub(crate) mod literals;
mod lower;
pub(crate) mod role_file;
pub(crate) mod template_uses;

#[cfg(test)]
mod tests;

use pest::Parser as _;

use crate::Loader;
use crate::diagnostics::{Code, Diagnostic, FileId, Sources, Span};

/// The pest parser generated from `grammar.pest`.
#[derive(pest_derive::Parser)]
#[grammar = "syntax/grammar.pest"]
pub(crate) struct CharterParser;

/// After this many syntax errors the driver stops: by then the file is not a spec, and
/// every further error would cost a scan for where to resume.
const MAX_SYNTAX_ERRORS: usize = 100;

/// Words that start an item; a line that starts with one of them is where parsing
/// resumes after a syntax error.
const ITEM_KEYWORDS: [&str; 14] = [
    "import",
    "models",
    "rules",
    "contract",
    "tool",
    "mcp",
    "role",
    "gate",
    "repair",
    "invariant",
    "budget",
    "session",
    "remember",
    "flow",
];

/// Parses the spec in `sources` at `file`, reading imported role files and prompt
/// templates through `loader` (they are added to `sources`). Returns what could be built
/// and every syntax diagnostic; `None` only when not even the header could be read.
pub fn parse(
    file: FileId,
    sources: &mut Sources,
    loader: &dyn Loader,
) -> (Option<ast::SpecFile>, Vec<Diagnostic>) {
    let Blanked {
        text, open_comment, ..
    } = sources
        .get(file)
        .map(|source| blank_comments(&source.text))
        .unwrap_or_default();
    let mut diagnostics = Vec::new();
    if let Some(start) = open_comment {
        diagnostics.push(
            Diagnostic::new(
                Code::E001,
                Span::new(file, start, start + 2),
                "unterminated `/*` comment",
            )
            .with_label("this comment is never closed")
            .with_help("close it with `*/`"),
        );
    }
    let mut spec = Driver {
        text: &text,
        file,
        sources,
        loader,
        diagnostics: &mut diagnostics,
        syntax_errors: 0,
    }
    .run();
    if let Some(spec) = spec.as_mut() {
        includes::load(spec, sources, loader);
    }
    (spec, diagnostics)
}

/// Walks the file item by item, calling pest on each and recovering from errors.
struct Driver<'a> {
    text: &'a str,
    file: FileId,
    sources: &'a mut Sources,
    loader: &'a dyn Loader,
    diagnostics: &'a mut Vec<Diagnostic>,
    /// Syntax errors reported so far (see [`MAX_SYNTAX_ERRORS`]).
    syntax_errors: usize,
}

impl Driver<'_> {
    /// Reports a syntax error found at `position`. Returns false, after a last note, when
    /// there have been too many to go on.
    fn syntax_error(&mut self, diagnostic: Diagnostic, position: usize) -> bool {
        self.diagnostics.push(diagnostic);
        self.syntax_errors += 1;
        if self.syntax_errors < MAX_SYNTAX_ERRORS {
            return true;
        }
        let at = position.min(self.text.len());
        self.diagnostics.push(
            Diagnostic::new(
                Code::E001,
                Span::new(self.file, at, at),
                format!("too many syntax errors: parsing stopped after {MAX_SYNTAX_ERRORS}"),
            )
            .with_label("parsing stopped here")
            .with_help("fix the errors above and check again"),
        );
        false
    }

    fn run(mut self) -> Option<ast::SpecFile> {
        let header = match CharterParser::parse(Rule::header, self.text) {
            Ok(mut pairs) => pairs.next()?,
            Err(error) => {
                let mut diagnostic = errors::syntax_error(&error, self.file, 0, self.text);
                if !errors::says_names_are_ascii(&diagnostic) {
                    diagnostic = diagnostic.with_help(
                        "a spec starts with `spec NAME version \"X\"`, e.g. `spec support_bot version \"1.0.0\"`",
                    );
                }
                self.diagnostics.push(diagnostic);
                return None;
            }
        };
        let header_end = header.as_span().end();
        let (name, version, doc) = self.lowerer(0).header(header)?;
        let mut items = Vec::new();
        let mut position = header_end;
        loop {
            position = skip_trivia(self.text, position);
            if position >= self.text.len() {
                break;
            }
            let rest = self.text.get(position..).unwrap_or("");
            if starts_with_keyword(rest, "flow") {
                let (flow, end) = self.flow(position);
                items.push(ast::Item::Flow(flow));
                position = end;
                continue;
            }
            match CharterParser::parse(entry_rule(rest), rest) {
                Ok(mut pairs) => {
                    let Some(pair) = pairs.next() else {
                        break;
                    };
                    let end = position + pair.as_span().end();
                    let item_span = Span::new(self.file, position, end);
                    let reported = self.diagnostics.len();
                    match self.lowerer(position).item(pair) {
                        Some(item) => items.push(item),
                        None => self.internal(item_span, reported),
                    }
                    position = end.max(position + 1);
                }
                Err(error) => {
                    let (resume, depth) = next_item_line_and_depth(self.text, position);
                    let error_at = position + error_offset(&error);
                    if depth > 0 && error_at >= resume && resume < self.text.len() {
                        // The item ran into the next one: its `{` was never closed.
                        let keyword_end = resume
                            + self.text.get(resume..).map_or(0, |rest| {
                                rest.find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                                    .unwrap_or(rest.len())
                            });
                        let item_keyword = rest
                            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                            .next()
                            .unwrap_or("item");
                        let diagnostic = Diagnostic::new(
                            Code::E001,
                            Span::new(self.file, resume, keyword_end),
                            format!("expected `}}` to close `{item_keyword}` before the next item"),
                        )
                        .with_label("the next item starts here")
                        .with_note(
                            Span::new(self.file, position, position + item_keyword.len()),
                            "this item is not closed",
                        );
                        if !self.syntax_error(diagnostic, resume) {
                            break;
                        }
                    } else {
                        let diagnostic =
                            errors::syntax_error(&error, self.file, position, self.text);
                        if !self.syntax_error(diagnostic, resume) {
                            break;
                        }
                    }
                    position = resume;
                }
            }
        }
        let end = self.text.len();
        Some(ast::SpecFile {
            name,
            version,
            doc,
            items,
            span: Span::new(self.file, 0, end),
            includes: std::collections::BTreeMap::new(),
        })
    }

    /// Parses `flow { step* }` starting at `start`, one step at a time. Returns the flow
    /// and the offset after it.
    fn flow(&mut self, start: usize) -> (ast::Flow, usize) {
        let mut steps = Vec::new();
        let rest = self.text.get(start..).unwrap_or("");
        let mut position = match CharterParser::parse(Rule::flow_open, rest) {
            Ok(pairs) => start + pairs.last().map_or(0, |pair| pair.as_span().end()),
            Err(error) => {
                let diagnostic = errors::syntax_error(&error, self.file, start, self.text);
                self.diagnostics.push(diagnostic);
                let end = next_item_line(self.text, start);
                return (
                    ast::Flow {
                        steps,
                        span: Span::new(self.file, start, end),
                    },
                    end,
                );
            }
        };
        loop {
            position = skip_trivia(self.text, position);
            let rest = self.text.get(position..).unwrap_or("");
            if rest.starts_with('}') {
                position += 1;
                break;
            }
            if rest.is_empty() || (at_line_start(self.text, position) && is_item_line(rest)) {
                let at = Span::new(self.file, position, position);
                self.diagnostics.push(
                    Diagnostic::new(Code::E001, at, "expected `}` to close the flow")
                        .with_label(if rest.is_empty() {
                            "the file ends here"
                        } else {
                            "the next item starts here"
                        })
                        .with_note(
                            Span::new(self.file, start, start + 4),
                            "the flow starts here",
                        ),
                );
                break;
            }
            match CharterParser::parse(Rule::step_entry, rest) {
                Ok(mut pairs) => {
                    let Some(pair) = pairs.next() else {
                        break;
                    };
                    let end = position + pair.as_span().end();
                    let step_span = Span::new(self.file, position, end);
                    let reported = self.diagnostics.len();
                    match self.lowerer(position).step(pair) {
                        Some(step) => steps.push(step),
                        None => self.internal(step_span, reported),
                    }
                    position = end.max(position + 1);
                }
                Err(error) => {
                    let diagnostic = errors::syntax_error(&error, self.file, position, self.text);
                    let resume = next_step_line(self.text, position);
                    if !self.syntax_error(diagnostic, resume) {
                        position = self.text.len();
                        break;
                    }
                    position = resume;
                }
            }
        }
        (
            ast::Flow {
                steps,
                span: Span::new(self.file, start, position),
            },
            position,
        )
    }

    fn lowerer(&mut self, offset: usize) -> lower::Lowerer<'_> {
        lower::Lowerer {
            file: self.file,
            offset,
            sources: self.sources,
            loader: self.loader,
            diagnostics: self.diagnostics,
            depth: 0,
            operators: 0,
        }
    }

    /// Reports an internal error for `span` unless lowering it reported something (in the
    /// diagnostics after the first `reported`, so this costs nothing per earlier item).
    fn internal(&mut self, span: Span, reported: usize) {
        // Lowering reports its own problems; this only fires when the parse tree had a
        // shape the lowering did not expect, which is a bug in the compiler.
        let new = self.diagnostics.get(reported..).unwrap_or(&[]);
        if !new.iter().any(|diagnostic| {
            diagnostic
                .primary_span()
                .is_some_and(|at| at.start >= span.start && at.end <= span.end)
        }) {
            self.diagnostics.push(Diagnostic::new(
                Code::E000,
                span,
                "internal error: the parser could not build this item",
            ));
        }
    }
}

/// The rule to parse the item at the start of `rest` with, from its first word.
pub(crate) fn entry_rule(rest: &str) -> Rule {
    let word_length = rest
        .bytes()
        .take_while(|byte| byte.is_ascii_alphanumeric() || *byte == b'_')
        .count();
    match rest.get(..word_length).unwrap_or("") {
        "import" => Rule::import_entry,
        "models" => Rule::models_entry,
        "rules" => Rule::rules_entry,
        "contract" => Rule::contract_entry,
        "tool" => Rule::tool_entry,
        "mcp" => Rule::mcp_entry,
        "role" => Rule::role_entry,
        "gate" => Rule::gate_entry,
        "repair" => Rule::repair_entry,
        "invariant" => Rule::invariant_entry,
        "budget" => Rule::budget_entry_point,
        "session" => Rule::session_entry,
        "remember" => Rule::remember_entry,
        _ => Rule::item_entry,
    }
}

/// The offset of a pest error in the text that was parsed.
fn error_offset(error: &pest::error::Error<Rule>) -> usize {
    match error.location {
        pest::error::InputLocation::Pos(position) => position,
        pest::error::InputLocation::Span((start, _)) => start,
    }
}

/// Where a scan of spec text is: in code, a string, a `"""` block or a comment (shared by
/// `blank_comments` and `following_lines`).
#[derive(Clone, Copy, PartialEq)]
enum State {
    Code,
    Str,
    Block,
    LineComment,
    BlockComment,
}

/// Spec text with its comments blanked out (see [`blank_comments`]).
#[derive(Default)]
pub(crate) struct Blanked {
    /// The text with every comment replaced by spaces (line breaks kept).
    pub text: String,
    /// Where an unclosed `/*` starts.
    pub open_comment: Option<usize>,
    /// The byte range of each comment, in order (`//` up to its line break).
    pub comments: Vec<(usize, usize)>,
}

/// `text` with every `//` and `/* */` comment replaced by spaces (line breaks kept), so
/// that the grammar need not match comments and every byte offset stays the same.
/// Strings and `"""` blocks are left alone. A pipeline over one [`Blanker`]: skip a
/// byte-order mark, then copy runs of bytes that cannot change the state and feed each
/// byte that can through the state machine, then close whatever comment is still open.
pub(crate) fn blank_comments(text: &str) -> Blanked {
    let mut blanker = Blanker::new(text);
    blanker.skip_byte_order_mark();
    while let Some(&byte) = blanker.bytes.get(blanker.index) {
        if !blanker.copy_run() {
            blanker.step(byte);
        }
    }
    blanker.finish()
}

/// A scan of spec text for [`blank_comments`]: the text, what has been written of the
/// result so far, and where the scan is.
struct Blanker<'t> {
    text: &'t str,
    bytes: &'t [u8],
    /// The result so far: one byte for each byte scanned.
    out: Vec<u8>,
    /// The byte range of each comment closed so far.
    comments: Vec<(usize, usize)>,
    state: State,
    /// The next byte to scan.
    index: usize,
    /// Where the current (or last) comment starts.
    comment_start: usize,
}

impl<'t> Blanker<'t> {
    fn new(text: &'t str) -> Blanker<'t> {
        Blanker {
            text,
            bytes: text.as_bytes(),
            out: Vec::with_capacity(text.len()),
            comments: Vec::new(),
            state: State::Code,
            index: 0,
            comment_start: 0,
        }
    }

    /// A byte-order mark is not part of the spec: three spaces keep the offsets.
    fn skip_byte_order_mark(&mut self) {
        if self.text.starts_with('\u{feff}') {
            self.out.extend_from_slice(b"   ");
            self.index = 3;
        }
    }

    /// Copies (or blanks, in a comment) the bytes from `index` that cannot change the
    /// state, a run at a time. False when the byte at `index` is one that can: it goes
    /// through [`Blanker::step`].
    fn copy_run(&mut self) -> bool {
        let state = self.state;
        let stops = |byte: &u8| match state {
            State::Code => matches!(byte, b'"' | b'/'),
            State::Str => matches!(byte, b'\\' | b'"' | b'\n'),
            State::Block => *byte == b'"',
            State::LineComment => *byte == b'\n',
            State::BlockComment => matches!(byte, b'*' | b'\n'),
        };
        let run = self
            .bytes
            .get(self.index..)
            .and_then(|rest| rest.iter().position(stops))
            .unwrap_or(self.bytes.len() - self.index);
        if run == 0 {
            return false;
        }
        match state {
            State::Code | State::Str | State::Block => {
                let copied = self.bytes.get(self.index..self.index + run);
                self.out.extend_from_slice(copied.unwrap_or(&[]));
            }
            State::LineComment | State::BlockComment => {
                self.out.resize(self.out.len() + run, b' ');
            }
        }
        self.index += run;
        true
    }

    /// Feeds `byte`, the one at `index`, through the state machine and moves past what
    /// it used (with the bytes after it that belong to the same token).
    fn step(&mut self, byte: u8) {
        let next = self.bytes.get(self.index + 1).copied();
        let triple = self.bytes.get(self.index..self.index + 3) == Some(b"\"\"\"".as_slice());
        let used = match self.state {
            State::Code => self.in_code(byte, next, triple),
            State::Str => self.in_string(byte, next),
            State::Block => self.in_block(byte, triple),
            State::LineComment => self.in_line_comment(byte),
            State::BlockComment => self.in_block_comment(byte, next),
        };
        self.index += used;
    }

    /// In code: a `"""` opens a block, a `"` a string, `//` or `/*` a comment. Returns
    /// how many bytes were used.
    fn in_code(&mut self, byte: u8, next: Option<u8>, triple: bool) -> usize {
        if triple {
            self.out.extend_from_slice(b"\"\"\"");
            self.state = State::Block;
            return 3;
        }
        match (byte, next) {
            (b'"', _) => self.state = State::Str,
            (b'/', Some(b'/')) => {
                self.comment_start = self.index;
                self.state = State::LineComment;
            }
            (b'/', Some(b'*')) => {
                self.comment_start = self.index;
                self.out.extend_from_slice(b"  ");
                self.state = State::BlockComment;
                return 2;
            }
            _ => {}
        }
        self.out.push(if self.state == State::LineComment {
            b' '
        } else {
            byte
        });
        1
    }

    /// In a string: an escape is copied whole; a `"` or a line break ends it. Returns how
    /// many bytes were used.
    fn in_string(&mut self, byte: u8, next: Option<u8>) -> usize {
        self.out.push(byte);
        match byte {
            b'\\' => {
                if let Some(escaped) = next {
                    self.out.push(escaped);
                    return 2;
                }
            }
            b'"' | b'\n' => self.state = State::Code,
            _ => {}
        }
        1
    }

    /// In a `"""` block: only `"""` ends it. Returns how many bytes were used.
    fn in_block(&mut self, byte: u8, triple: bool) -> usize {
        if triple {
            self.out.extend_from_slice(b"\"\"\"");
            self.state = State::Code;
            return 3;
        }
        self.out.push(byte);
        1
    }

    /// In a `//` comment: blanked up to the line break, which ends it. Returns how many
    /// bytes were used.
    fn in_line_comment(&mut self, byte: u8) -> usize {
        if byte == b'\n' {
            self.comments.push((self.comment_start, self.index));
            self.out.push(b'\n');
            self.state = State::Code;
        } else {
            self.out.push(b' ');
        }
        1
    }

    /// In a `/* */` comment: blanked (line breaks kept) up to and with its `*/`. Returns
    /// how many bytes were used.
    fn in_block_comment(&mut self, byte: u8, next: Option<u8>) -> usize {
        if byte == b'*' && next == Some(b'/') {
            self.out.extend_from_slice(b"  ");
            self.comments.push((self.comment_start, self.index + 2));
            self.state = State::Code;
            return 2;
        }
        self.out.push(if byte == b'\n' { b'\n' } else { b' ' });
        1
    }

    /// The result: a comment still open at the end runs to the end of the text (and an
    /// open `/*` is reported by the caller).
    fn finish(mut self) -> Blanked {
        let open_comment = (self.state == State::BlockComment).then_some(self.comment_start);
        if matches!(self.state, State::LineComment | State::BlockComment) {
            self.comments.push((self.comment_start, self.bytes.len()));
        }
        // Only ASCII bytes inside comments were replaced, and every other byte was copied,
        // so the result is valid UTF-8; fall back to the original text if it somehow is
        // not.
        Blanked {
            text: String::from_utf8(self.out).unwrap_or_else(|_| self.text.to_string()),
            open_comment,
            comments: self.comments,
        }
    }
}

/// Skips whitespace (Unicode `White_Space`, as the grammar's `WHITESPACE`) and comments
/// from `position`.
pub(crate) fn skip_trivia(text: &str, mut position: usize) -> usize {
    let bytes = text.as_bytes();
    loop {
        if let Some(character) = text.get(position..).and_then(|rest| rest.chars().next())
            && character.is_whitespace()
        {
            position += character.len_utf8();
            continue;
        }
        match bytes.get(position) {
            Some(b'/') if bytes.get(position + 1) == Some(&b'/') => {
                while let Some(&byte) = bytes.get(position) {
                    if byte == b'\n' {
                        break;
                    }
                    position += 1;
                }
            }
            Some(b'/') if bytes.get(position + 1) == Some(&b'*') => {
                match text.get(position + 2..).and_then(|rest| rest.find("*/")) {
                    Some(index) => position += 2 + index + 2,
                    None => return text.len(),
                }
            }
            _ => return position,
        }
    }
}

/// True when `rest` starts with `keyword` as a whole word.
pub(crate) fn starts_with_keyword(rest: &str, keyword: &str) -> bool {
    rest.strip_prefix(keyword).is_some_and(|after| {
        !after
            .bytes()
            .next()
            .is_some_and(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
    })
}

/// True when `position` is preceded on its line only by spaces and tabs.
pub(crate) fn at_line_start(text: &str, position: usize) -> bool {
    text.as_bytes()
        .get(..position)
        .unwrap_or(&[])
        .iter()
        .rev()
        .take_while(|&&byte| byte != b'\n')
        .all(|&byte| byte == b' ' || byte == b'\t')
}

/// True when `line` (already stripped of its indentation) starts an item: an item
/// keyword followed by something other than `:` or `=` (so role properties such as
/// `rules: [core]` and steps such as `gate = gate quality` do not count).
pub(crate) fn is_item_line(line: &str) -> bool {
    ITEM_KEYWORDS.iter().any(|keyword| {
        starts_with_keyword(line, keyword)
            && !line
                .get(keyword.len()..)
                .unwrap_or("")
                .trim_start_matches([' ', '\t'])
                .starts_with([':', '=', '\n', '\r', ','])
    })
}

/// True when `line` (stripped of its indentation) looks like the start of a step:
/// `name =` (but not `name ==`).
fn is_step_line(line: &str) -> bool {
    let name_length = line
        .bytes()
        .take_while(|byte| byte.is_ascii_alphanumeric() || *byte == b'_')
        .count();
    if name_length == 0 {
        return false;
    }
    let after = line
        .get(name_length..)
        .unwrap_or("")
        .trim_start_matches([' ', '\t']);
    after.starts_with('=') && !after.starts_with("==")
}

/// The start of each line after the one containing `position` that does not begin inside
/// a string, a `"""` block or a `/* */` comment, with its indentation skipped, as (offset
/// of the first non-blank character, rest of the text, brace depth at that point counted
/// from `position`).
fn following_lines(text: &str, position: usize) -> impl Iterator<Item = (usize, &str, i64)> {
    let bytes = text.as_bytes();
    let mut cursor = position;
    let mut state = State::Code;
    let mut depth: i64 = 0;
    std::iter::from_fn(move || {
        while let Some(&byte) = bytes.get(cursor) {
            let next = bytes.get(cursor + 1).copied();
            let triple = bytes.get(cursor..cursor + 3) == Some(b"\"\"\"".as_slice());
            cursor += 1;
            match (state, byte) {
                (State::Code, b'"') if triple => {
                    state = State::Block;
                    cursor += 2;
                }
                (State::Code, b'"') => state = State::Str,
                (State::Code, b'/') if next == Some(b'/') => state = State::LineComment,
                (State::Code, b'/') if next == Some(b'*') => {
                    state = State::BlockComment;
                    cursor += 1;
                }
                (State::Code, b'{') => depth += 1,
                (State::Code, b'}') => depth -= 1,
                (State::Str, b'\\') => cursor += 1,
                (State::Str, b'"') => state = State::Code,
                (State::Block, b'"')
                    if bytes.get(cursor - 1..cursor + 2) == Some(b"\"\"\"".as_slice()) =>
                {
                    state = State::Code;
                    cursor += 2;
                }
                (State::BlockComment, b'*') if next == Some(b'/') => {
                    state = State::Code;
                    cursor += 1;
                }
                _ => {}
            }
            if byte == b'\n' && matches!(state, State::Code | State::Str | State::LineComment) {
                // A plain string cannot span lines: an unterminated one ends here.
                state = State::Code;
                let mut start = cursor;
                while matches!(bytes.get(start), Some(b' ' | b'\t')) {
                    start += 1;
                }
                return Some((start, text.get(start..).unwrap_or(""), depth));
            }
        }
        None
    })
}

/// Like [`following_lines`] but ignoring strings and comments: used when the aware scan
/// finds nothing (an unterminated `"""` block would otherwise swallow the whole file).
fn following_raw_lines(text: &str, position: usize) -> impl Iterator<Item = (usize, &str)> {
    let bytes = text.as_bytes();
    let mut cursor = position;
    std::iter::from_fn(move || {
        let newline = text.get(cursor..)?.find('\n')?;
        let mut start = cursor + newline + 1;
        cursor = start;
        while matches!(bytes.get(start), Some(b' ' | b'\t')) {
            start += 1;
        }
        Some((start, text.get(start..).unwrap_or("")))
    })
}

/// Where to resume after a syntax error in the item starting at `position`: the next
/// line that starts an item, or the end of the file.
pub(crate) fn next_item_line(text: &str, position: usize) -> usize {
    next_item_line_and_depth(text, position).0
}

/// [`next_item_line`] and the number of `{` not closed between `position` and it.
fn next_item_line_and_depth(text: &str, position: usize) -> (usize, i64) {
    following_lines(text, position)
        .find(|(_, line, _)| is_item_line(line))
        .map(|(start, _, depth)| (start, depth))
        .or_else(|| {
            following_raw_lines(text, position)
                .find(|(_, line)| is_item_line(line))
                .map(|(start, _)| (start, 0))
        })
        .unwrap_or((text.len(), 0))
}

/// Where to resume after a syntax error in the step starting at `position`: the next
/// line that starts a step, closes the flow or starts an item.
pub(crate) fn next_step_line(text: &str, position: usize) -> usize {
    let resumes = |line: &str| is_step_line(line) || line.starts_with('}') || is_item_line(line);
    following_lines(text, position)
        .find(|(_, line, _)| resumes(line))
        .map(|(start, _, _)| start)
        .or_else(|| {
            following_raw_lines(text, position)
                .find(|(_, line)| resumes(line))
                .map(|(start, _)| start)
        })
        .unwrap_or(text.len())
}
