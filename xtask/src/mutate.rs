//! Grammar-aware mutations of `.charter` text for the fuzz harness: a forgiving tokenizer
//! that splits any text into Charter-shaped tokens, and token-level edits (delete,
//! duplicate, swap, splice from other specs, insert keywords, punctuation, huge numbers,
//! odd Unicode, unbalanced quotes and braces, deep nesting, truncation).

use crate::rng::Rng;

/// What a token looks like; mutations pick tokens by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    Space,
    Comment,
    Ident,
    Number,
    Str,
    Block,
    Punct,
    Other,
}

/// A token as a byte range of the text it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub start: usize,
    pub end: usize,
}

/// Splits `text` into tokens that cover it exactly (concatenating them gives `text` back).
/// Never fails: anything it does not recognise is a one-character `Other` token.
pub fn tokenize(text: &str) -> Vec<Token> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut position = 0;
    while position < text.len() {
        let rest = text.get(position..).unwrap_or("");
        let Some(first) = rest.chars().next() else {
            break;
        };
        let (kind, length) = if first.is_whitespace() {
            let length = rest
                .char_indices()
                .find(|(_, c)| !c.is_whitespace())
                .map_or(rest.len(), |(index, _)| index);
            (TokenKind::Space, length)
        } else if rest.starts_with("//") {
            (TokenKind::Comment, rest.find('\n').unwrap_or(rest.len()))
        } else if rest.starts_with("/*") {
            let length = rest
                .get(2..)
                .and_then(|tail| tail.find("*/"))
                .map_or(rest.len(), |index| index + 4);
            (TokenKind::Comment, length)
        } else if rest.starts_with("\"\"\"") {
            let length = rest
                .get(3..)
                .and_then(|tail| tail.find("\"\"\""))
                .map_or(rest.len(), |index| index + 6);
            (TokenKind::Block, length)
        } else if first == '"' {
            let mut length = rest.len();
            let mut escaped = false;
            for (index, c) in rest.char_indices().skip(1) {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    length = index + 1;
                    break;
                } else if c == '\n' {
                    length = index;
                    break;
                }
            }
            (TokenKind::Str, length)
        } else if first.is_ascii_alphabetic() || first == '_' {
            let length = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (TokenKind::Ident, length)
        } else if first.is_ascii_digit() {
            let mut length = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if bytes.get(position + length) == Some(&b'.')
                && bytes
                    .get(position + length + 1)
                    .is_some_and(u8::is_ascii_digit)
            {
                length += 1;
                length += rest
                    .get(length..)
                    .and_then(|tail| tail.find(|c: char| !c.is_ascii_digit()))
                    .unwrap_or(rest.len() - length);
            }
            length += rest
                .get(length..)
                .and_then(|tail| tail.find(|c: char| !c.is_ascii_alphabetic()))
                .unwrap_or(rest.len() - length);
            (TokenKind::Number, length)
        } else if let Some(symbol) = ["..=", "..", "->", "==", "!=", "<=", ">="]
            .iter()
            .find(|symbol| rest.starts_with(**symbol))
        {
            (TokenKind::Punct, symbol.len())
        } else if first.is_ascii_punctuation() {
            (TokenKind::Punct, 1)
        } else {
            (TokenKind::Other, first.len_utf8())
        };
        let length = length.max(first.len_utf8());
        tokens.push(Token {
            kind,
            start: position,
            end: position + length,
        });
        position += length;
    }
    tokens
}

const KEYWORDS: &[&str] = &[
    "spec",
    "version",
    "import",
    "role",
    "models",
    "price",
    "rules",
    "contract",
    "tool",
    "input",
    "output",
    "effect",
    "read",
    "write",
    "external",
    "model",
    "prompt",
    "file",
    "tools",
    "max_tool_calls",
    "timeout",
    "retry",
    "backoff",
    "gate",
    "on",
    "hard",
    "warn",
    "score",
    "weight",
    "below",
    "pass",
    "when",
    "else",
    "repair",
    "rounds",
    "no_progress",
    "rerun",
    "with",
    "feedback",
    "replan",
    "accept",
    "block",
    "fail",
    "ask",
    "invariant",
    "has",
    "no",
    "only",
    "uses",
    "always",
    "budget",
    "tokens",
    "cost",
    "wall",
    "steps",
    "flow",
    "each",
    "in",
    "concurrency",
    "check",
    "by",
    "retries",
    "finalize",
    "done",
    "blocked",
    "failed",
    "every",
    "some",
    "count",
    "not",
    "and",
    "or",
    "true",
    "false",
    "none",
    "string",
    "bool",
    "int",
    "float",
    "list",
    "request",
    "candidate",
    "best",
    "run",
    "item",
    "len",
    "contains",
    "matches",
    "sum",
    "min",
    "max",
    "_",
    "Candidate",
    "Delivery",
    "Answer",
    "Request",
];

const PUNCTUATION: &[&str] = &[
    "{", "}", "(", ")", "[", "]", ":", ",", "=", "->", "..", "..=", "|", "?", "<", ">", ".", "==",
    "!=", "<=", ">=", "+", "-", "*", "/", "_", "@", "#", "\\", ";",
];

const UNBALANCED: &[&str] = &[
    "\"", "\"\"\"", "{", "}", "(", ")", "[", "]", "/*", "*/", "\"\\", "{{", "}}", "{%", "%}", "{#",
    "<", "'",
];

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "-0",
    "1.5",
    "0.0",
    "1e309",
    "1.7976931348623157e308",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999",
    "-9223372036854775809",
    "9007199254740993",
    "0.000000000000000000001",
    "1.",
    ".5",
    "0ms",
    "1ms",
    "99999999999999999h",
    "18446744073709551615ms",
    "5000000000000000000h",
    "30x",
    "1.5s",
    "2d",
    "1e3s",
    "NaN",
    "inf",
    "0..=0",
    "10..=1",
    "0..1",
    "..",
    "1..",
    "(0..=18446744073709551616)",
    "(..=-1)",
];

const UNICODE: &[&str] = &[
    "é",
    "🦀",
    "\u{202E}",
    "\u{200D}",
    "\u{0301}",
    "\u{0}",
    "\u{FEFF}",
    "\r",
    "\r\n",
    "\t",
    "ﬀ",
    "İ",
    "ß",
    "\u{10FFFF}",
    "日本語",
    "ǅ",
    "\u{2028}",
    "\u{85}",
    "Ⅻ",
    "０１２",
];

/// Mutations stop growing an input past this size (the corpus specs are a few KiB).
const MAX_INPUT: usize = 256 * 1024;

/// Template-specific noise for prompt files and role files.
const TEMPLATE_NOISE: &[&str] = &[
    "{{ undefined_variable }}",
    "{{",
    "}}",
    "{% for x in %}",
    "{% endfor %}",
    "{% if %}",
    "{{ feedback.a.b.c }}",
    "{{ 1 / 0 }}",
    "{% macro m() %}",
    "{% raw %}",
    "{# unclosed",
    "---\n",
    "\n---\n",
    "id: 12\n",
    "tools: [\n",
    "input: [[]]\n",
    "model: {a: b}\n",
    "timeout: 99999999999999999h\n",
    "retry: -1\n",
    "tool_rules:\n  - x\n",
    ": : :\n",
    "&anchor *alias\n",
    "!!binary\n",
];

/// Material for splicing: the corpus texts, tokenized once.
#[derive(Clone, Debug, Default)]
pub struct Donors {
    entries: Vec<(String, Vec<Token>)>,
}

impl Donors {
    pub fn new<'a>(texts: impl IntoIterator<Item = &'a str>) -> Donors {
        Donors {
            entries: texts
                .into_iter()
                .map(|text| (text.to_string(), tokenize(text)))
                .collect(),
        }
    }

    fn pick(&self, rng: &mut Rng) -> Option<(&str, &[Token])> {
        self.entries
            .get(rng.below(self.entries.len()))
            .map(|(text, tokens)| (text.as_str(), tokens.as_slice()))
    }
}

/// One mutated input: the spec text, the files it may read, and how it was made.
#[derive(Clone, Debug)]
pub struct Mutant {
    pub text: String,
    pub files: std::collections::BTreeMap<String, String>,
    pub mutations: Vec<&'static str>,
}

/// Applies one to four random mutations to `text` (and sometimes to one of `files`),
/// drawing spliced material from `donors` (other specs of the corpus).
pub fn mutate(
    rng: &mut Rng,
    text: &str,
    files: &std::collections::BTreeMap<String, String>,
    donors: &Donors,
) -> Mutant {
    let mut mutant = Mutant {
        text: text.to_string(),
        files: files.clone(),
        mutations: Vec::new(),
    };
    // Half the inputs get only mutations that keep the text close to parsing (names,
    // numbers, strings and whole items change), so the checks after the parser get fuzzed
    // too: the compiler only checks a file that parsed cleanly.
    let meaning_only = rng.chance(1, 2);
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        if mutant.text.len() > MAX_INPUT {
            break;
        }
        if !mutant.files.is_empty() && rng.chance(1, 8) {
            let keys: Vec<String> = mutant.files.keys().cloned().collect();
            if let Some(key) = rng.pick(&keys) {
                if rng.chance(1, 6) {
                    mutant.files.remove(key);
                    mutant.mutations.push("drop-file");
                } else if let Some(file) = mutant.files.get_mut(key) {
                    let (changed, name) = mutate_file(rng, file, donors);
                    *file = changed;
                    mutant.mutations.push(name);
                }
            }
            continue;
        }
        let (changed, name) = if meaning_only {
            let solid = solid_tokens(&mutant.text);
            mutate_meaning(rng, &mutant.text, &solid, donors)
        } else {
            mutate_text(rng, &mutant.text, donors)
        };
        mutant.text = changed;
        mutant.mutations.push(name);
    }
    mutant
}

fn mutate_file(rng: &mut Rng, text: &str, donors: &Donors) -> (String, &'static str) {
    if rng.chance(1, 2) {
        let tokens = tokenize(text);
        let at = boundary(rng, text, &tokens);
        let noise = rng.pick(TEMPLATE_NOISE).copied().unwrap_or("{{");
        (splice_at(text, at, at, noise), "file-template-noise")
    } else {
        let (changed, _) = mutate_text(rng, text, donors);
        (changed, "file-token-mutation")
    }
}

/// One token-level mutation of `text`: a quarter of the time one that keeps its meaning
/// close ([`mutate_meaning`]), else one of fifteen kinds drawn at random, at a random
/// (non-space) token.
pub fn mutate_text(rng: &mut Rng, text: &str, donors: &Donors) -> (String, &'static str) {
    let tokens = tokenize(text);
    let solid = solid_tokens(text);
    let Some(&chosen) = rng.pick(&solid) else {
        let noise = rng.pick(KEYWORDS).copied().unwrap_or("spec");
        return (format!("{text}{noise}"), "append-to-empty");
    };
    if rng.chance(1, 4) {
        return mutate_meaning(rng, text, &solid, donors);
    }
    let site = Site {
        text,
        tokens: &tokens,
        solid: &solid,
        chosen,
    };
    match rng.below(16) {
        0 | 1 => delete_tokens(rng, &site),
        2 => duplicate_token(&site),
        3 => swap_tokens(rng, &site),
        4 | 5 => splice_from_corpus(rng, &site, donors),
        6 => insert_keyword(rng, &site),
        7 => insert_punctuation(rng, &site),
        8 => replace_number(rng, &site),
        9 => insert_unicode(rng, &site),
        10 => insert_unbalanced(rng, &site),
        11 => truncate(rng, text),
        12 => replace_same_kind(rng, &site, donors),
        13 => edit_lines(rng, text),
        14 => deep_nesting(rng, &site),
        _ => repeat_token(rng, &site),
    }
}

/// Where a token-level mutation happens: the text, its tokens (with and without spaces)
/// and the token chosen.
struct Site<'a> {
    text: &'a str,
    tokens: &'a [Token],
    solid: &'a [Token],
    chosen: Token,
}

/// Deletes one to three tokens from the chosen one.
fn delete_tokens(rng: &mut Rng, site: &Site) -> (String, &'static str) {
    let chosen = site.chosen;
    let count = 1 + rng.below(3);
    let end = site
        .solid
        .iter()
        .filter(|token| token.start >= chosen.start)
        .nth(count - 1)
        .map_or(chosen.end, |token| token.end);
    (splice_at(site.text, chosen.start, end, ""), "delete-tokens")
}

/// Writes the chosen token twice.
fn duplicate_token(site: &Site) -> (String, &'static str) {
    let chosen = site.chosen;
    let piece = slice(site.text, chosen.start, chosen.end);
    (
        splice_at(site.text, chosen.end, chosen.end, &format!(" {piece}")),
        "duplicate-token",
    )
}

/// Swaps the chosen token with another (the text unchanged when they are the same).
fn swap_tokens(rng: &mut Rng, site: &Site) -> (String, &'static str) {
    let (text, chosen) = (site.text, site.chosen);
    let Some(&other) = rng.pick(site.solid) else {
        return (text.to_string(), "swap-tokens");
    };
    let (first, second) = if other.start < chosen.start {
        (other, chosen)
    } else {
        (chosen, other)
    };
    if first.end > second.start || first == second {
        return (text.to_string(), "swap-tokens");
    }
    let result = format!(
        "{}{}{}{}{}",
        slice(text, 0, first.start),
        slice(text, second.start, second.end),
        slice(text, first.end, second.start),
        slice(text, first.start, first.end),
        slice(text, second.end, text.len())
    );
    (result, "swap-tokens")
}

/// Up to 24 tokens of another spec, inserted before the chosen token or replacing up to
/// 24 tokens from it.
fn splice_from_corpus(rng: &mut Rng, site: &Site, donors: &Donors) -> (String, &'static str) {
    let (text, chosen) = (site.text, site.chosen);
    let Some((donor, donor_tokens)) = donors.pick(rng) else {
        return (text.to_string(), "splice");
    };
    let from = rng.below(donor_tokens.len());
    let to = (from + 1 + rng.below(24)).min(donor_tokens.len());
    let (Some(start), Some(end)) = (
        donor_tokens.get(from).map(|token| token.start),
        donor_tokens
            .get(to.saturating_sub(1))
            .map(|token| token.end),
    ) else {
        return (text.to_string(), "splice");
    };
    let piece = slice(donor, start, end);
    let replace = rng.chance(1, 2);
    let stop = if replace {
        site.solid
            .iter()
            .filter(|token| token.start >= chosen.start)
            .nth(rng.below(24))
            .map_or(chosen.end, |token| token.end)
    } else {
        chosen.start
    };
    (
        splice_at(text, chosen.start, stop, piece),
        "splice-from-corpus",
    )
}

/// A keyword between two tokens.
fn insert_keyword(rng: &mut Rng, site: &Site) -> (String, &'static str) {
    let keyword = rng.pick(KEYWORDS).copied().unwrap_or("spec");
    let at = boundary(rng, site.text, site.tokens);
    (
        splice_at(site.text, at, at, &format!(" {keyword} ")),
        "insert-keyword",
    )
}

/// A punctuation mark between two tokens.
fn insert_punctuation(rng: &mut Rng, site: &Site) -> (String, &'static str) {
    let punct = rng.pick(PUNCTUATION).copied().unwrap_or("{");
    let at = boundary(rng, site.text, site.tokens);
    (splice_at(site.text, at, at, punct), "insert-punctuation")
}

/// An odd number (huge, negative, malformed) in place of one of the text's numbers, or
/// between two tokens when it has none.
fn replace_number(rng: &mut Rng, site: &Site) -> (String, &'static str) {
    let text = site.text;
    let number = rng.pick(NUMBERS).copied().unwrap_or("0");
    let numbers: Vec<Token> = site
        .solid
        .iter()
        .copied()
        .filter(|token| token.kind == TokenKind::Number)
        .collect();
    match rng.pick(&numbers) {
        Some(target) => (
            splice_at(text, target.start, target.end, number),
            "replace-number",
        ),
        None => {
            let at = boundary(rng, text, site.tokens);
            (
                splice_at(text, at, at, &format!(" {number} ")),
                "insert-number",
            )
        }
    }
}

/// Odd Unicode inside the chosen token or between two tokens.
fn insert_unicode(rng: &mut Rng, site: &Site) -> (String, &'static str) {
    let (text, chosen) = (site.text, site.chosen);
    let unicode = rng.pick(UNICODE).copied().unwrap_or("é");
    let at = if rng.chance(1, 2) {
        // Inside a token, not only between tokens: identifiers and strings too.
        char_boundary(
            text,
            chosen.start + rng.below(chosen.end - chosen.start + 1),
        )
    } else {
        boundary(rng, text, site.tokens)
    };
    (splice_at(text, at, at, unicode), "insert-unicode")
}

/// An unbalanced quote, brace or bracket between two tokens.
fn insert_unbalanced(rng: &mut Rng, site: &Site) -> (String, &'static str) {
    let noise = rng.pick(UNBALANCED).copied().unwrap_or("\"");
    let at = boundary(rng, site.text, site.tokens);
    (splice_at(site.text, at, at, noise), "insert-unbalanced")
}

/// The text cut at a random point.
fn truncate(rng: &mut Rng, text: &str) -> (String, &'static str) {
    let at = char_boundary(text, rng.below(text.len() + 1));
    (slice(text, 0, at).to_string(), "truncate")
}

/// Another token of the same kind from the corpus in place of the chosen one: names
/// become unknown, duplicated or misplaced, numbers and strings change meaning.
fn replace_same_kind(rng: &mut Rng, site: &Site, donors: &Donors) -> (String, &'static str) {
    let chosen = site.chosen;
    let mut replacement = "x";
    for _ in 0..8 {
        let Some((donor, donor_tokens)) = donors.pick(rng) else {
            break;
        };
        if let Some(token) = donor_tokens.get(rng.below(donor_tokens.len()))
            && token.kind == chosen.kind
        {
            replacement = slice(donor, token.start, token.end);
            break;
        }
    }
    (
        splice_at(site.text, chosen.start, chosen.end, replacement),
        "replace-same-kind",
    )
}

/// A line duplicated, removed or swapped with another.
fn edit_lines(rng: &mut Rng, text: &str) -> (String, &'static str) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let index = rng.below(lines.len());
    let mut result: Vec<&str> = lines.clone();
    match rng.below(3) {
        0 => {
            if let Some(line) = lines.get(index) {
                result.insert(index, line);
            }
        }
        1 => {
            if index < result.len() {
                result.remove(index);
            }
        }
        _ => {
            let other = rng.below(lines.len());
            if index < result.len() && other < result.len() {
                result.swap(index, other);
            }
        }
    }
    (result.concat(), "edit-lines")
}

/// Deep nesting in place of the chosen token (up to 3000 levels, closed or not): a
/// recursive-descent parser must not overflow its stack.
fn deep_nesting(rng: &mut Rng, site: &Site) -> (String, &'static str) {
    let (open, close) = [
        ("(", ")"),
        ("[", "]"),
        ("{", "}"),
        ("not ", ""),
        ("-", ""),
        ("list<", ">"),
    ]
    .get(rng.below(6))
    .copied()
    .unwrap_or(("(", ")"));
    let depth = 1 + rng.below(3000);
    let closed = rng.chance(1, 2);
    let nested = format!(
        "{}x{}",
        open.repeat(depth),
        if closed {
            close.repeat(depth)
        } else {
            String::new()
        }
    );
    (
        splice_at(site.text, site.chosen.start, site.chosen.end, &nested),
        "deep-nesting",
    )
}

/// A long run of the chosen token: huge lists, many arms, very long identifiers.
fn repeat_token(rng: &mut Rng, site: &Site) -> (String, &'static str) {
    let chosen = site.chosen;
    let piece = slice(site.text, chosen.start, chosen.end);
    // At most about 16 KiB more text, so stacked mutations stay small enough that
    // slowness means a real problem, not a huge input.
    let count = 1 + rng.below(2000).min(16 * 1024 / piece.len().max(1));
    let separator = if chosen.kind == TokenKind::Ident {
        "_"
    } else {
        " "
    };
    let repeated = vec![piece; count].join(separator);
    (
        splice_at(site.text, chosen.start, chosen.end, &repeated),
        "repeat-token",
    )
}

fn solid_tokens(text: &str) -> Vec<Token> {
    tokenize(text)
        .into_iter()
        .filter(|token| token.kind != TokenKind::Space)
        .collect()
}

/// A mutation that usually still parses: a name, number or string replaced by another of
/// the corpus, or a whole item deleted, duplicated, swapped or brought in from another spec.
fn mutate_meaning(
    rng: &mut Rng,
    text: &str,
    solid: &[Token],
    donors: &Donors,
) -> (String, &'static str) {
    let kind = match rng.below(5) {
        0 | 1 => TokenKind::Ident,
        2 => TokenKind::Number,
        3 => TokenKind::Str,
        _ => return mutate_items(rng, text, donors),
    };
    let candidates: Vec<Token> = solid
        .iter()
        .copied()
        .filter(|token| token.kind == kind && !is_keyword(slice(text, token.start, token.end)))
        .collect();
    let Some(target) = rng.pick(&candidates).copied() else {
        return mutate_items(rng, text, donors);
    };
    // The replacement has the target's shape (a contract name for a contract name, a
    // duration for a duration, a closed string for a string): the grammar tells them apart.
    let target_shape = shape(slice(text, target.start, target.end));
    let same_shape = |piece: &str| !is_keyword(piece) && shape(piece) == target_shape;
    // Mostly a name of this very spec (a known name in the wrong place), else the corpus's.
    let replacement = if rng.chance(2, 3) {
        (0..8).find_map(|_| {
            let token = rng.pick(&candidates)?;
            let piece = slice(text, token.start, token.end);
            same_shape(piece).then(|| piece.to_string())
        })
    } else {
        (0..8).find_map(|_| {
            let (donor, tokens) = donors.pick(rng)?;
            let token = tokens.get(rng.below(tokens.len()))?;
            let piece = slice(donor, token.start, token.end);
            (token.kind == kind && same_shape(piece)).then(|| piece.to_string())
        })
    };
    let replacement = match (replacement, kind) {
        (Some(replacement), _) => replacement,
        (None, TokenKind::Number) => rng.pick(NUMBERS).copied().unwrap_or("0").to_string(),
        (None, _) => "renamed".to_string(),
    };
    let name = match kind {
        TokenKind::Ident => "rename",
        TokenKind::Number => "renumber",
        _ => "restring",
    };
    (
        splice_at(text, target.start, target.end, &replacement),
        name,
    )
}

/// What a token looks like to the grammar, coarsely.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// `Review`
    Camel,
    /// `LOW_RELEVANCE`, `PASS`
    Upper,
    /// `planner`
    Lower,
    Integer,
    Float,
    /// `30s`
    Duration,
    /// `"..."`, closed
    String,
    Other,
}

fn shape(piece: &str) -> Shape {
    let mut chars = piece.chars();
    match chars.next() {
        Some(first) if first.is_ascii_uppercase() => {
            if piece.chars().any(|c| c.is_ascii_lowercase()) {
                Shape::Camel
            } else {
                Shape::Upper
            }
        }
        Some(first) if first.is_ascii_lowercase() || first == '_' => Shape::Lower,
        Some(first) if first.is_ascii_digit() => {
            if piece.chars().any(|c| c.is_ascii_alphabetic()) {
                Shape::Duration
            } else if piece.contains('.') {
                Shape::Float
            } else {
                Shape::Integer
            }
        }
        Some('"') if piece.len() >= 2 && piece.ends_with('"') && !piece.starts_with("\"\"\"") => {
            Shape::String
        }
        _ => Shape::Other,
    }
}

fn is_keyword(word: &str) -> bool {
    KEYWORDS.contains(&word)
}

/// Top-level items: a new item starts at a line that begins with a letter (`contract`,
/// `role`, `flow`, ...). The first chunk is everything before the second item.
fn split_items(text: &str) -> Vec<&str> {
    let mut starts = vec![0];
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if offset > 0 && line.starts_with(|c: char| c.is_ascii_alphabetic()) {
            starts.push(offset);
        }
        offset += line.len();
    }
    starts.push(text.len());
    starts
        .windows(2)
        .filter_map(|pair| match pair {
            [start, end] => text.get(*start..*end),
            _ => None,
        })
        .collect()
}

fn mutate_items(rng: &mut Rng, text: &str, donors: &Donors) -> (String, &'static str) {
    let mut items = split_items(text);
    if items.len() < 2 {
        return (text.to_string(), "items");
    }
    let index = 1 + rng.below(items.len() - 1);
    let name = match rng.below(4) {
        0 => {
            items.remove(index);
            "delete-item"
        }
        1 => {
            if let Some(item) = items.get(index).copied() {
                items.insert(index, item);
            }
            "duplicate-item"
        }
        2 => {
            let other = 1 + rng.below(items.len() - 1);
            items.swap(index, other);
            "swap-items"
        }
        _ => {
            let donor_item = donors.pick(rng).and_then(|(donor, _)| {
                let donor_items = split_items(donor);
                donor_items
                    .get(1 + rng.below(donor_items.len().max(2) - 1))
                    .copied()
            });
            if let Some(item) = donor_item {
                items.insert(index, item);
            }
            "import-item"
        }
    };
    let mut result: String = items.concat();
    if !result.ends_with('\n') {
        result.push('\n');
    }
    (result, name)
}

/// A random token boundary (or the end of the text).
fn boundary(rng: &mut Rng, text: &str, tokens: &[Token]) -> usize {
    let index = rng.below(tokens.len() + 1);
    tokens.get(index).map_or(text.len(), |token| token.start)
}

/// The largest char boundary not after `at`.
fn char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn slice(text: &str, start: usize, end: usize) -> &str {
    text.get(start..end).unwrap_or("")
}

fn splice_at(text: &str, start: usize, end: usize, insert: &str) -> String {
    let start = char_boundary(text, start);
    let end = char_boundary(text, end.max(start));
    format!(
        "{}{insert}{}",
        slice(text, 0, start),
        slice(text, end, text.len())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(TokenKind, &str)> {
        tokenize(text)
            .into_iter()
            .filter(|token| token.kind != TokenKind::Space)
            .map(|token| (token.kind, slice(text, token.start, token.end)))
            .collect()
    }

    #[test]
    fn tokens_cover_the_text_exactly() {
        for text in [
            "spec a version \"1\" // c\n role x { timeout: 250ms retry: 2 backoff 1.5s }",
            "\"unterminated\n\"\"\"block \"\"\" é🦀 /* open",
            "range(0..=10) a->b x==y \"esc\\\"aped\"",
            "",
        ] {
            let joined: String = tokenize(text)
                .iter()
                .map(|token| slice(text, token.start, token.end))
                .collect();
            assert_eq!(joined, text);
        }
    }

    #[test]
    fn tokenizer_knows_charter_shapes() {
        use TokenKind::*;
        assert_eq!(
            kinds("int(0..=10) 250ms \"a\\\"b\" \"\"\"x\"\"\" -> // note"),
            vec![
                (Ident, "int"),
                (Punct, "("),
                (Number, "0"),
                (Punct, "..="),
                (Number, "10"),
                (Punct, ")"),
                (Number, "250ms"),
                (Str, "\"a\\\"b\""),
                (Block, "\"\"\"x\"\"\""),
                (Punct, "->"),
                (Comment, "// note"),
            ]
        );
    }

    #[test]
    fn shapes_tell_grammar_classes_apart() {
        assert_eq!(shape("Review"), Shape::Camel);
        assert_eq!(shape("LOW_RELEVANCE"), Shape::Upper);
        assert_eq!(shape("planner"), Shape::Lower);
        assert_eq!(shape("30s"), Shape::Duration);
        assert_eq!(shape("1.5"), Shape::Float);
        assert_eq!(shape("12"), Shape::Integer);
        assert_eq!(shape("\"a\""), Shape::String);
        assert_eq!(shape("\"open"), Shape::Other);
    }

    #[test]
    fn items_split_at_top_level_lines() {
        let text = "spec a version \"1\"\n\ncontract A {\n  x: int\n}\nflow {\n  s = r(request) -> done\n}\n";
        let items = split_items(text);
        assert_eq!(items.concat(), text);
        assert_eq!(items.len(), 3);
        assert!(
            items
                .get(1)
                .is_some_and(|item| item.starts_with("contract A"))
        );
    }

    #[test]
    fn mutations_are_deterministic_and_valid_utf8() {
        let text = "spec a version \"1\"\ncontract A { x: int(0..=5) }\n";
        let donors = Donors::new([text, "flow { s = r(request) -> done }"]);
        let files = std::collections::BTreeMap::from([("p.md".to_string(), "{{ a }}".to_string())]);
        for seed in 0..500 {
            let first = mutate(&mut Rng::new(seed), text, &files, &donors);
            let second = mutate(&mut Rng::new(seed), text, &files, &donors);
            assert_eq!(first.text, second.text);
            assert!(!first.mutations.is_empty());
            assert!(first.text.len() < MAX_INPUT + 64 * 1024);
        }
    }
}
