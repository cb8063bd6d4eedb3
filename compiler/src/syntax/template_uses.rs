//! What a template asks of its environment beyond variables: the filters (`x | name`,
//! `{% filter name %}`) and tests (`x is name`) it applies, and the tags that load other
//! templates (`include`, `import`, `from`, `extends`), with their byte ranges. minijinja
//! resolves these only when rendering, so the compiler finds them by scanning the text.

use std::ops::Range;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Filter,
    Test,
    /// A tag that loads another template by name: `import`, `from`, `extends`, or an
    /// `include` whose name is not one string literal.
    Load,
    /// `{% include "name" %}`: `name` is the string's content, `range` its range.
    Include,
}

/// One use of a filter, a test or a loading tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Use {
    pub kind: Kind,
    /// The filter's or test's name, or the tag (`include`).
    pub name: String,
    /// The name's range in the template text.
    pub range: Range<usize>,
}

/// The tags that load another template.
const LOADING_TAGS: [&str; 4] = ["include", "import", "from", "extends"];

/// Every filter, test and loading tag in `text`, in order. Text outside `{{ }}` and
/// `{% %}`, comments, string literals and `{% raw %}` blocks are skipped.
pub fn scan(text: &str) -> Vec<Use> {
    let mut uses = Vec::new();
    let mut at = 0;
    while let Some(found) = text.get(at..).and_then(|rest| rest.find('{')) {
        let open = at + found;
        let rest = text.get(open..).unwrap_or("");
        let close = if rest.starts_with("{{") {
            "}}"
        } else if rest.starts_with("{%") {
            "%}"
        } else if rest.starts_with("{#") {
            at = rest.find("#}").map_or(text.len(), |end| open + end + 2);
            continue;
        } else {
            at = open + 1;
            continue;
        };
        let end = scan_tag(text, open + 2, close, &mut uses);
        let tag = text.get(open + 2..end).unwrap_or("");
        at = end + 2;
        if close == "%}" && first_word(tag).0 == "raw" {
            at = end_of_raw(text, at);
        }
    }
    uses
}

/// Scans one tag's body from `start` up to its `close` (outside strings); returns where
/// the close starts (the text's end when it has none).
fn scan_tag(text: &str, start: usize, close: &str, uses: &mut Vec<Use>) -> usize {
    let bytes = text.as_bytes();
    let body_start = start + usize::from(bytes.get(start) == Some(&b'-'));
    if close == "%}" {
        let (word, range) = first_word(text.get(body_start..).unwrap_or(""));
        let range = body_start + range.start..body_start + range.end;
        if word == "include"
            && let Some((name, name_range)) = string_after(text, range.end)
        {
            uses.push(Use {
                kind: Kind::Include,
                name: name.to_string(),
                range: name_range,
            });
        } else if LOADING_TAGS.contains(&word) {
            uses.push(Use {
                kind: Kind::Load,
                name: word.to_string(),
                range: range.clone(),
            });
        } else if word == "filter" {
            pending_name(text, range.end, Kind::Filter, uses);
        }
    }
    let mut at = body_start;
    let mut previous_word: Option<&str> = None;
    while at < bytes.len() {
        if text.get(at..).is_some_and(|rest| rest.starts_with(close)) {
            return at;
        }
        let byte = bytes.get(at).copied().unwrap_or(b' ');
        match byte {
            b'"' | b'\'' => at = end_of_string(bytes, at),
            b'|' => {
                pending_name(text, at + 1, Kind::Filter, uses);
                previous_word = None;
                at += 1;
            }
            _ if is_ident_start(byte) => {
                let end = ident_end(bytes, at);
                let word = text.get(at..end).unwrap_or("");
                if previous_word == Some("is") && word != "not" {
                    uses.push(Use {
                        kind: Kind::Test,
                        name: word.to_string(),
                        range: at..end,
                    });
                }
                if !(previous_word == Some("is") && word == "not") {
                    previous_word = Some(word);
                }
                at = end;
            }
            _ => {
                if !byte.is_ascii_whitespace() {
                    previous_word = None;
                }
                at += 1;
            }
        }
    }
    text.len()
}

/// Records the identifier after optional whitespace at `from`, if any, as a `kind`.
fn pending_name(text: &str, from: usize, kind: Kind, uses: &mut Vec<Use>) {
    let bytes = text.as_bytes();
    let mut at = from;
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    if bytes.get(at).is_some_and(|byte| is_ident_start(*byte)) {
        let end = ident_end(bytes, at);
        uses.push(Use {
            kind,
            name: text.get(at..end).unwrap_or("").to_string(),
            range: at..end,
        });
    }
}

/// The content of the string literal after optional whitespace at `from` (with no escape
/// in it: a file name needs none), and its range.
fn string_after(text: &str, from: usize) -> Option<(&str, Range<usize>)> {
    let bytes = text.as_bytes();
    let mut at = from;
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    let quote = *bytes
        .get(at)
        .filter(|byte| **byte == b'"' || **byte == b'\'')?;
    let start = at + 1;
    let end = start + text.get(start..)?.find(char::from(quote))?;
    let name = text.get(start..end)?;
    if name.contains('\\') || name.is_empty() {
        return None;
    }
    Some((name, start..end))
}

/// The first identifier of a tag body and its range in it (empty when there is none).
fn first_word(body: &str) -> (&str, Range<usize>) {
    let bytes = body.as_bytes();
    let start = bytes
        .iter()
        .position(|byte| !byte.is_ascii_whitespace())
        .unwrap_or(body.len());
    let end = ident_end(bytes, start);
    (body.get(start..end).unwrap_or(""), start..end)
}

/// Where the text after `{% raw %}` resumes: after its `{% endraw %}`.
fn end_of_raw(text: &str, from: usize) -> usize {
    let mut at = from;
    while let Some(found) = text.get(at..).and_then(|rest| rest.find("{%")) {
        let open = at + found;
        let body = text.get(open + 2..).unwrap_or("");
        let body = body.strip_prefix('-').unwrap_or(body);
        if first_word(body).0 == "endraw" {
            return text
                .get(open..)
                .and_then(|rest| rest.find("%}"))
                .map_or(text.len(), |end| open + end + 2);
        }
        at = open + 2;
    }
    text.len()
}

fn end_of_string(bytes: &[u8], start: usize) -> usize {
    let quote = bytes.get(start).copied();
    let mut at = start + 1;
    while let Some(byte) = bytes.get(at).copied() {
        if byte == b'\\' {
            at += 2;
            continue;
        }
        at += 1;
        if Some(byte) == quote {
            break;
        }
    }
    at.min(bytes.len())
}

fn is_ident_start(byte: u8) -> bool {
    byte.is_ascii_alphabetic() || byte == b'_'
}

fn ident_end(bytes: &[u8], start: usize) -> usize {
    let mut end = start;
    while bytes
        .get(end)
        .is_some_and(|byte| byte.is_ascii_alphanumeric() || *byte == b'_')
    {
        end += 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<(Kind, String)> {
        scan(text)
            .into_iter()
            .map(|found| (found.kind, found.name))
            .collect()
    }

    #[test]
    fn finds_filters_tests_and_loading_tags_with_their_ranges() {
        let text = "a | b {{ x | tojson(indent=2) |upper }}{% if y is not defined %}{% include \"p.j2\" %}";
        let uses = scan(text);
        let found: Vec<_> = uses
            .iter()
            .map(|found| (found.kind, found.name.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (Kind::Filter, "tojson"),
                (Kind::Filter, "upper"),
                (Kind::Test, "defined"),
                (Kind::Include, "p.j2"),
            ]
        );
        for found in &uses {
            assert_eq!(&text[found.range.clone()], found.name);
        }
    }

    #[test]
    fn an_include_names_its_file_unless_the_name_is_not_a_literal() {
        assert_eq!(
            names(
                "{% include 'a/b.j2' ignore missing %}{%- include name -%}{% import \"m\" as m %}"
            ),
            [
                (Kind::Include, "a/b.j2".to_string()),
                (Kind::Load, "include".to_string()),
                (Kind::Load, "import".to_string()),
            ]
        );
    }

    #[test]
    fn skips_strings_comments_raw_blocks_and_text() {
        let text = "x | y {# {{ a | b }} #}{{ \"a | b\" ~ 'is c' }}{% raw %}{{ a | b }}{% endraw %}{{- z|trim -}}{% filter upper %}t{% endfilter %}";
        assert_eq!(
            names(text),
            [
                (Kind::Filter, "trim".to_string()),
                (Kind::Filter, "upper".to_string())
            ]
        );
    }

    #[test]
    fn an_unclosed_tag_or_string_ends_the_scan() {
        assert_eq!(names("{{ x | lower"), [(Kind::Filter, "lower".to_string())]);
        assert!(names("{{ \"x | lower").is_empty());
        assert!(names("{").is_empty());
    }
}
