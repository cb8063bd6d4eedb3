//! Rendering diagnostics: rustc-like text (colour only when asked) and JSON lines.
//!
//! Diagnostics are data (see `diagnostics`); this module is the one place that turns
//! them into something a person or a script reads. Text goes through `codespan-reporting`
//! with its ASCII character set, which gives rustc's look:
//!
//! ```text
//! error[E002]: unknown contract `Pln`
//!   --> spec.charter:12:11
//!    |
//! 12 |   output: Pln
//!    |           ^^^ not defined
//!    |
//!    = help: did you mean `Plan`?
//! ```
//!
//! Both renderers are total: a span that does not fit its file is clamped to it (and to
//! character boundaries) rather than trusted, so no diagnostic can make rendering fail.

use codespan_reporting::diagnostic as codespan;
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor};
use serde::Serialize;

use crate::diagnostics::{Diagnostic, Severity, Sources, Span};

/// Renders diagnostics as rustc-like text, each followed by a blank line; `color` adds
/// ANSI colours (the caller decides: a terminal, and `NO_COLOR` unset).
pub fn text(diagnostics: &[Diagnostic], sources: &Sources, color: bool) -> String {
    let mut files = SimpleFiles::new();
    for (_, file) in sources.files() {
        files.add(visible(&file.name), same_length_visible(&file.text));
    }
    let config = term::Config {
        chars: term::Chars::ascii(),
        ..term::Config::default()
    };
    let mut output = String::new();
    if diagnostics.is_empty() {
        return output;
    }
    let lines = LineIndex::new(sources);
    for diagnostic in diagnostics {
        let converted = to_codespan(diagnostic, sources, &lines);
        let mut buffer = termcolor::Ansi::new(Vec::new());
        let rendered = if color {
            term::emit_to_write_style(&mut buffer, &config, &files, &converted)
                .map(|()| String::from_utf8_lossy(&buffer.into_inner()).into_owned())
        } else {
            term::emit_into_string(&config, &files, &converted)
        };
        match rendered {
            Ok(rendered) => output.push_str(&rendered),
            // Unreachable with clamped spans; still, never lose a diagnostic.
            Err(_) => output.push_str(&format!(
                "{}[{}]: {}\n\n",
                severity_word(diagnostic.severity),
                diagnostic.code,
                diagnostic.message
            )),
        }
    }
    output
}

/// Renders diagnostics as JSON lines, one object per diagnostic, in the order given
/// (the compiler sorts them by position). Lines and columns are one-based; columns count
/// characters; `span` is the primary label's byte range.
pub fn json(diagnostics: &[Diagnostic], sources: &Sources) -> String {
    let mut output = String::new();
    if diagnostics.is_empty() {
        return output;
    }
    let lines = LineIndex::new(sources);
    for diagnostic in diagnostics {
        let primary = diagnostic
            .primary_span()
            .map(|span| clamp(span, sources))
            .and_then(|span| Some((span, sources.get(span.file)?)));
        let location = |span: Span, offset: u32| lines.line_column(span.file, offset);
        let record = JsonDiagnostic {
            code: diagnostic.code.as_str(),
            severity: diagnostic.severity,
            message: &diagnostic.message,
            file: primary.map(|(_, file)| file.name.as_str()),
            line: primary.map(|(span, _)| location(span, span.start).0),
            column: primary.map(|(span, _)| location(span, span.start).1),
            end_line: primary.map(|(span, _)| location(span, span.end).0),
            end_column: primary.map(|(span, _)| location(span, span.end).1),
            span: primary.map(|(span, _)| JsonSpan {
                start: span.start,
                end: span.end,
            }),
            labels: diagnostic
                .labels
                .iter()
                .filter_map(|label| {
                    let span = clamp(label.span, sources);
                    let file = sources.get(span.file)?;
                    let (line, column) = location(span, span.start);
                    Some(JsonLabel {
                        message: &label.message,
                        file: &file.name,
                        line,
                        column,
                        primary: label.primary,
                    })
                })
                .collect(),
            help: diagnostic.help.as_deref(),
        };
        // Serializing plain strings and numbers cannot fail; keep the line count right anyway.
        output.push_str(&serde_json::to_string(&record).unwrap_or_else(|_| "{}".to_string()));
        output.push('\n');
    }
    output
}

/// Line starts of every file, computed once per rendering: [`Sources::line_column`]
/// counts lines from the start of the file, which made many diagnostics quadratic.
struct LineIndex<'a> {
    sources: &'a Sources,
    starts: Vec<Vec<usize>>,
}

impl<'a> LineIndex<'a> {
    fn new(sources: &'a Sources) -> LineIndex<'a> {
        let starts = sources
            .files()
            .map(|(_, file)| {
                std::iter::once(0)
                    .chain(file.text.match_indices('\n').map(|(index, _)| index + 1))
                    .collect()
            })
            .collect();
        LineIndex { sources, starts }
    }

    /// The length in bytes of the line that holds `offset` (0 for an unknown file).
    fn line_length(&self, file: crate::diagnostics::FileId, offset: u32) -> usize {
        let (Some(source), Some(starts)) =
            (self.sources.get(file), self.starts.get(file.0 as usize))
        else {
            return 0;
        };
        let offset = offset as usize;
        let line = starts.partition_point(|&start| start <= offset).max(1);
        let start = starts.get(line - 1).copied().unwrap_or(0);
        let end = starts.get(line).copied().unwrap_or(source.text.len());
        end.saturating_sub(start)
    }

    /// The same as [`Sources::line_column`]: one-based line and column (in characters).
    fn line_column(&self, file: crate::diagnostics::FileId, offset: u32) -> (usize, usize) {
        let (Some(source), Some(starts)) =
            (self.sources.get(file), self.starts.get(file.0 as usize))
        else {
            return (1, 1);
        };
        let offset = (offset as usize).min(source.text.len());
        if source.text.get(..offset).is_none() {
            return (1, 1);
        }
        let line = starts.partition_point(|&start| start <= offset).max(1);
        let line_start = starts.get(line - 1).copied().unwrap_or(0);
        let column = source
            .text
            .get(line_start..offset)
            .map_or(0, |text| text.chars().count())
            + 1;
        (line, column)
    }
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    code: &'a str,
    severity: Severity,
    message: &'a str,
    file: Option<&'a str>,
    line: Option<usize>,
    column: Option<usize>,
    end_line: Option<usize>,
    end_column: Option<usize>,
    span: Option<JsonSpan>,
    labels: Vec<JsonLabel<'a>>,
    help: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonSpan {
    start: u32,
    end: u32,
}

#[derive(Serialize)]
struct JsonLabel<'a> {
    message: &'a str,
    file: &'a str,
    line: usize,
    column: usize,
    primary: bool,
}

fn severity_word(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// Source lines longer than this (in bytes) are not shown: codespan prints and measures
/// the whole line for every label on it, which on a megabyte-long line made rendering
/// many diagnostics take minutes. Such a label is given as a note with its position.
const MAX_SHOWN_LINE: usize = 1_000;

/// Converts one diagnostic to codespan's type; labels in unknown files are dropped and
/// spans are clamped to their file.
fn to_codespan(
    diagnostic: &Diagnostic,
    sources: &Sources,
    lines: &LineIndex<'_>,
) -> codespan::Diagnostic<usize> {
    let base = match diagnostic.severity {
        Severity::Error => codespan::Diagnostic::error(),
        Severity::Warning => codespan::Diagnostic::warning(),
    };
    let too_long = |span: Span| {
        lines.line_length(span.file, span.start) > MAX_SHOWN_LINE
            || lines.line_length(span.file, span.end) > MAX_SHOWN_LINE
    };
    let mut notes: Vec<String> = Vec::new();
    let labels = diagnostic
        .labels
        .iter()
        .filter(|label| sources.get(label.span.file).is_some())
        .filter(|label| {
            let span = clamp(label.span, sources);
            if !too_long(span) {
                return true;
            }
            let name = sources.get(span.file).map_or("", |file| file.name.as_str());
            let (line, column) = lines.line_column(span.file, span.start);
            notes.push(format!(
                "{}: {name}:{line}:{column}: {} (the line is too long to show)",
                if label.primary { "at" } else { "see" },
                visible(&label.message)
            ));
            false
        })
        .map(|label| {
            let span = clamp(label.span, sources);
            let style = if label.primary {
                codespan::LabelStyle::Primary
            } else {
                codespan::LabelStyle::Secondary
            };
            codespan::Label::new(style, span.file.0 as usize, span.range())
                .with_message(visible(&label.message))
        })
        .collect();
    notes.extend(
        diagnostic
            .help
            .iter()
            .map(|help| format!("help: {}", visible(help))),
    );
    base.with_code(diagnostic.code.as_str())
        .with_message(visible(&diagnostic.message))
        .with_labels(labels)
        .with_notes(notes)
}

/// Control characters (an escape sequence, a NUL) written as escapes (`\u{1b}`), so that
/// a message quoting a spec's text shows them and cannot drive the terminal. Tabs and line
/// breaks are kept.
fn visible(text: &str) -> String {
    if !text.chars().any(is_hidden_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if is_hidden_control(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A source text with its control characters replaced by characters of the same UTF-8
/// length (`?` for ASCII ones, `¿` for the two-byte C1 ones), so the source lines shown
/// cannot drive the terminal while every byte offset still points where it did.
fn same_length_visible(text: &str) -> String {
    if !text.chars().any(is_hidden_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| match c {
            c if !is_hidden_control(c) => c,
            c if c.len_utf8() == 1 => '?',
            _ => '\u{bf}',
        })
        .collect()
}

fn is_hidden_control(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

/// `span` limited to its file's text and moved back onto character boundaries, with
/// `start <= end`. A span in an unknown file is returned unchanged.
fn clamp(span: Span, sources: &Sources) -> Span {
    let Some(file) = sources.get(span.file) else {
        return span;
    };
    let text = file.text.as_str();
    let boundary = |offset: u32| {
        let mut offset = (offset as usize).min(text.len());
        while offset > 0 && !text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    };
    let start = boundary(span.start);
    let end = boundary(span.end).max(start);
    Span::new(span.file, start, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::{Code, FileId};

    fn sources() -> Sources {
        let mut sources = Sources::new();
        sources.add(
            "spec.charter",
            "spec demo version \"1\"\nrole planner {\n  output: Pln\n}\n",
        );
        sources
    }

    fn unknown_contract() -> Diagnostic {
        Diagnostic::new(
            Code::E002,
            Span::new(FileId(0), 47, 50),
            "unknown contract `Pln`",
        )
        .with_label("not defined")
        .with_note(Span::new(FileId(0), 27, 34), "in this role")
        .with_help("did you mean `Plan`?")
    }

    #[test]
    fn text_reads_like_rustc() {
        let rendered = text(&[unknown_contract()], &sources(), false);
        let expected = "\
error[E002]: unknown contract `Pln`
  --> spec.charter:3:11
  |
2 | role planner {
  |      ------- in this role
3 |   output: Pln
  |           ^^^ not defined
  |
  = help: did you mean `Plan`?

";
        assert_eq!(rendered, expected);
    }

    #[test]
    fn text_colours_only_when_asked() {
        let plain = text(&[unknown_contract()], &sources(), false);
        let coloured = text(&[unknown_contract()], &sources(), true);
        assert!(!plain.contains('\u{1b}'));
        assert!(coloured.contains('\u{1b}'));
    }

    #[test]
    fn warnings_are_labelled_as_warnings() {
        let warning = Diagnostic::new(Code::W001, Span::new(FileId(0), 5, 9), "unused contract");
        let rendered = text(&[warning], &sources(), false);
        assert!(rendered.starts_with("warning[W001]: unused contract\n"));
    }

    #[test]
    fn spans_outside_the_file_do_not_break_rendering() {
        let odd = Diagnostic::new(Code::E001, Span::new(FileId(0), 500, 400), "odd span");
        let missing = Diagnostic::new(Code::E016, Span::new(FileId(9), 0, 3), "no such file");
        let diagnostics = [odd, missing];
        let rendered = text(&diagnostics, &sources(), false);
        assert!(rendered.contains("error[E001]: odd span"));
        assert!(rendered.contains("error[E016]: no such file"));
        assert_eq!(json(&diagnostics, &sources()).lines().count(), 2);
    }

    #[test]
    fn control_characters_are_shown_not_sent_to_the_terminal() {
        let mut sources = Sources::new();
        sources.add("x.charter", "spec x\u{1b}[31m \u{85}rest\u{0}\n");
        let diagnostic = Diagnostic::new(
            Code::E001,
            Span::new(FileId(0), 17, 18),
            "unexpected `\u{0}`",
        )
        .with_label("unexpected `\u{1b}`")
        .with_help("remove `\u{7f}`");
        let rendered = text(&[diagnostic], &sources, false);
        assert!(
            !rendered.chars().any(|c| c.is_control() && c != '\n'),
            "{rendered:?}"
        );
        assert!(
            rendered.contains("error[E001]: unexpected `\\u{0}`"),
            "{rendered}"
        );
        assert!(
            rendered.contains("1 | spec x?[31m \u{bf}rest?\n"),
            "{rendered}"
        );
        assert!(rendered.contains("^ unexpected `\\u{1b}`"), "{rendered}");
        assert!(rendered.contains("= help: remove `\\u{7f}`"), "{rendered}");
    }

    #[test]
    fn json_has_one_object_per_diagnostic() {
        let rendered = json(&[unknown_contract()], &sources());
        let value: serde_json::Value =
            serde_json::from_str(rendered.trim_end()).unwrap_or_default();
        assert_eq!(value["code"], "E002");
        assert_eq!(value["severity"], "error");
        assert_eq!(value["message"], "unknown contract `Pln`");
        assert_eq!(value["file"], "spec.charter");
        assert_eq!(value["line"], 3);
        assert_eq!(value["column"], 11);
        assert_eq!(value["end_line"], 3);
        assert_eq!(value["end_column"], 14);
        assert_eq!(value["span"]["start"], 47);
        assert_eq!(value["span"]["end"], 50);
        assert_eq!(value["labels"][0]["primary"], true);
        assert_eq!(value["labels"][1]["message"], "in this role");
        assert_eq!(value["labels"][1]["line"], 2);
        assert_eq!(value["help"], "did you mean `Plan`?");
    }
}
