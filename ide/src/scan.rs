//! Small scanners over text the compiler gives no positions for: the dotted paths inside a
//! prompt template's `{{ }}` and `{% %}` tags (minijinja reports variables, not where they
//! are), and the lexical tokens of a spec (comments, strings, numbers, words) for
//! highlighting and completion.

use std::ops::Range;

/// A dotted path read in a template tag, `workflow_draft.workflow_id`: each segment with
/// its byte range in the scanned text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagPath {
    pub segments: Vec<(String, Range<usize>)>,
}

/// What a template's tags read, in the order written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateItem {
    Path(TagPath),
    /// `{% for VAR in PATH %}`: VAR holds an item of PATH until the matching `endfor`.
    For {
        var: String,
        over: TagPath,
    },
    EndFor,
    /// `X.step == "NAME"`: a history entry compared with a step's name (the range is the
    /// name inside the quotes).
    StepName {
        name: String,
        range: Range<usize>,
    },
}

const TEMPLATE_KEYWORDS: [&str; 32] = [
    "for",
    "in",
    "if",
    "elif",
    "else",
    "endif",
    "endfor",
    "set",
    "endset",
    "and",
    "or",
    "not",
    "is",
    "true",
    "false",
    "none",
    "True",
    "False",
    "None",
    "loop",
    "macro",
    "endmacro",
    "call",
    "endcall",
    "filter",
    "endfilter",
    "with",
    "endwith",
    "raw",
    "endraw",
    "recursive",
    "as",
];

/// The body ranges of the `{{ }}` and `{% %}` tags of `text` (`{# #}` comments are
/// skipped); a tag left open runs to the end of the text.
pub fn tags(text: &str) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(open) = text.get(at..).and_then(|rest| rest.find('{')) {
        let start = at + open;
        let close = match text.get(start + 1..start + 2) {
            Some("{") => "}}",
            Some("%") => "%}",
            Some("#") => "#}",
            _ => {
                at = start + 1;
                continue;
            }
        };
        let body_start = start + 2;
        let body_end = text
            .get(body_start..)
            .and_then(|rest| rest.find(close))
            .map_or(text.len(), |end| body_start + end);
        if close != "#}" {
            found.push(body_start..body_end);
        }
        at = (body_end + 2).min(text.len());
        if body_end >= text.len() {
            break;
        }
    }
    found
}

/// The tag body that `offset` is inside (or at the end of), if any.
pub fn tag_at(text: &str, offset: usize) -> Option<Range<usize>> {
    tags(text)
        .into_iter()
        .find(|range| range.start <= offset && offset <= range.end)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Dot,
    Str(String),
    Op(String),
    Pipe,
    Other,
}

fn tokenize(text: &str, range: Range<usize>) -> Vec<(Tok, Range<usize>)> {
    let body = text.get(range.clone()).unwrap_or("");
    let mut tokens = Vec::new();
    let mut chars = body.char_indices().peekable();
    while let Some((at, character)) = chars.next() {
        let start = range.start + at;
        if character.is_ascii_alphabetic() || character == '_' {
            let mut end = at + character.len_utf8();
            while let Some((next_at, next)) = chars.peek().copied() {
                if next.is_ascii_alphanumeric() || next == '_' {
                    end = next_at + next.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let word = body.get(at..end).unwrap_or("").to_string();
            tokens.push((Tok::Word(word), start..range.start + end));
        } else if character == '"' || character == '\'' {
            let mut end = body.len();
            let mut escaped = false;
            for (next_at, next) in chars.by_ref() {
                if escaped {
                    escaped = false;
                } else if next == '\\' {
                    escaped = true;
                } else if next == character {
                    end = next_at;
                    break;
                }
            }
            let content = body.get(at + 1..end).unwrap_or("").to_string();
            tokens.push((Tok::Str(content), start + 1..range.start + end));
        } else if character == '.' {
            tokens.push((Tok::Dot, start..start + 1));
        } else if character == '|' {
            tokens.push((Tok::Pipe, start..start + 1));
        } else if matches!(character, '=' | '!') && chars.peek().is_some_and(|(_, c)| *c == '=') {
            chars.next();
            tokens.push((Tok::Op(format!("{character}=")), start..start + 2));
        } else if !character.is_whitespace() {
            tokens.push((Tok::Other, start..start + character.len_utf8()));
        }
    }
    tokens
}

/// Every path, `for` binding and step-name comparison in the tags of `text`.
pub fn template_items(text: &str) -> Vec<TemplateItem> {
    let mut items = Vec::new();
    for range in tags(text) {
        let tokens = tokenize(text, range);
        scan_tag(&tokens, &mut items);
    }
    items
}

fn scan_tag(tokens: &[(Tok, Range<usize>)], items: &mut Vec<TemplateItem>) {
    let word = |index: usize| match tokens.get(index) {
        Some((Tok::Word(word), _)) => Some(word.as_str()),
        _ => None,
    };
    if word(0) == Some("endfor") {
        items.push(TemplateItem::EndFor);
        return;
    }
    let mut index = 0;
    let mut for_var: Option<String> = None;
    if word(0) == Some("for")
        && let Some(var) = word(1)
        && word(2) == Some("in")
    {
        for_var = Some(var.to_string());
        index = 3;
    }
    while index < tokens.len() {
        let previous = index.checked_sub(1).and_then(|at| tokens.get(at));
        let after_filter = matches!(previous, Some((Tok::Pipe, _)))
            || matches!(previous, Some((Tok::Word(word), _)) if word == "is" || word == "not" && index >= 2 && matches!(tokens.get(index - 2), Some((Tok::Word(w), _)) if w == "is"));
        let Some((Tok::Word(first), first_range)) = tokens.get(index) else {
            index += 1;
            continue;
        };
        if after_filter || TEMPLATE_KEYWORDS.contains(&first.as_str()) {
            index += 1;
            continue;
        }
        let mut path = TagPath {
            segments: vec![(first.clone(), first_range.clone())],
        };
        index += 1;
        while let (Some((Tok::Dot, _)), Some((Tok::Word(next), next_range))) =
            (tokens.get(index), tokens.get(index + 1))
        {
            path.segments.push((next.clone(), next_range.clone()));
            index += 2;
        }
        if path.segments.last().is_some_and(|(name, _)| name == "step")
            && path.segments.len() > 1
            && let (Some((Tok::Op(_), _)), Some((Tok::Str(name), range))) =
                (tokens.get(index), tokens.get(index + 1))
        {
            items.push(TemplateItem::StepName {
                name: name.clone(),
                range: range.clone(),
            });
        }
        match for_var.take() {
            Some(var) => items.push(TemplateItem::For { var, over: path }),
            None => items.push(TemplateItem::Path(path)),
        }
    }
}

/// A lexical token of a spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lexeme {
    Comment,
    String,
    Number,
    Word,
}

/// The comments, strings, numbers (with a duration's unit) and words of a spec's text, in
/// order, with their byte ranges. Any text is accepted: an unclosed string or comment
/// runs to the end.
pub fn lex(text: &str) -> Vec<(Lexeme, Range<usize>)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = text.get(at..).unwrap_or("");
        let (kind, length) = if rest.starts_with("//") {
            (Some(Lexeme::Comment), rest.find('\n').unwrap_or(rest.len()))
        } else if rest.starts_with("/*") {
            (
                Some(Lexeme::Comment),
                rest.find("*/").map_or(rest.len(), |end| end + 2),
            )
        } else if rest.starts_with("\"\"\"") {
            let end = rest.get(3..).and_then(|tail| tail.find("\"\"\""));
            (Some(Lexeme::String), end.map_or(rest.len(), |end| end + 6))
        } else if rest.starts_with('"') {
            (Some(Lexeme::String), quoted_length(rest))
        } else if rest.as_bytes()[0].is_ascii_digit() {
            let length = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
                .unwrap_or(rest.len());
            // `1..=5`: the number stops before a range's dots.
            let length = rest
                .get(..length)
                .and_then(|n| n.find(".."))
                .unwrap_or(length);
            (Some(Lexeme::Number), length.max(1))
        } else if rest.as_bytes()[0].is_ascii_alphabetic() || rest.as_bytes()[0] == b'_' {
            let length = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (Some(Lexeme::Word), length)
        } else {
            (None, rest.chars().next().map_or(1, char::len_utf8))
        };
        if let Some(kind) = kind {
            out.push((kind, at..at + length));
        }
        at += length.max(1);
        while at < bytes.len() && !text.is_char_boundary(at) {
            at += 1;
        }
    }
    out
}

fn quoted_length(rest: &str) -> usize {
    let mut escaped = false;
    for (at, character) in rest.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if character == '\\' {
            escaped = true;
        } else if character == '"' {
            return at + 1;
        } else if character == '\n' {
            return at;
        }
    }
    rest.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(text: &str) -> Vec<String> {
        template_items(text)
            .into_iter()
            .filter_map(|item| match item {
                TemplateItem::Path(path) | TemplateItem::For { over: path, .. } => Some(
                    path.segments
                        .iter()
                        .map(|(name, _)| name.as_str())
                        .collect::<Vec<_>>()
                        .join("."),
                ),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn template_paths_skip_filters_tests_keywords_and_comments() {
        let text = "{{ a.b | join(\", \") }} {# c.d #} {% if e is defined and not f.g %}{% for x in h.i %}{{ x.j }}{% endfor %}";
        assert_eq!(paths(text), ["a.b", "e", "f.g", "h.i", "x.j"]);
        let (_, range) = &template_items(text)
            .into_iter()
            .find_map(|item| match item {
                TemplateItem::Path(path) => Some(path),
                _ => None,
            })
            .expect("a path")
            .segments[1];
        assert_eq!(&text[range.clone()], "b");
    }

    #[test]
    fn a_step_name_compared_in_a_template_is_found() {
        let text = "{% if last and last.step == \"execute\" %}";
        let found = template_items(text);
        let range = found
            .iter()
            .find_map(|item| match item {
                TemplateItem::StepName { name, range } if name == "execute" => Some(range.clone()),
                _ => None,
            })
            .expect("the step name");
        assert_eq!(&text[range], "execute");
    }

    #[test]
    fn unclosed_tags_and_strings_do_not_panic() {
        for text in [
            "{{",
            "{{ a.",
            "{% for",
            "\"abc",
            "{{ 'x",
            "{",
            "é{{é.é}}",
            "/* x",
        ] {
            let _ = template_items(text);
            let _ = lex(text);
            let _ = tag_at(text, text.len());
        }
        assert_eq!(tag_at("ab {{ req", 9), Some(5..9));
    }

    #[test]
    fn lexing_a_spec_finds_comments_strings_numbers_and_words() {
        let text = "a = \"x\" // c\n  timeout: 2m 1..=5 \"\"\"\nq\"\"\"";
        let kinds: Vec<(Lexeme, &str)> = lex(text)
            .into_iter()
            .map(|(kind, range)| (kind, &text[range]))
            .collect();
        assert_eq!(
            kinds,
            [
                (Lexeme::Word, "a"),
                (Lexeme::String, "\"x\""),
                (Lexeme::Comment, "// c"),
                (Lexeme::Word, "timeout"),
                (Lexeme::Number, "2m"),
                (Lexeme::Number, "1"),
                (Lexeme::Number, "5"),
                (Lexeme::String, "\"\"\"\nq\"\"\""),
            ]
        );
    }
}
