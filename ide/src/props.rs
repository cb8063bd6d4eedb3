//! The properties of a `tool` block, of an `mcp` server (DESIGN §19) and of their
//! `sandbox { }` (DESIGN §20), for completion and hover: which block the cursor is in,
//! whether it is at a key or after `key:`, and a line on what each key and value means.

use std::ops::Range;

use crate::scan::{Lexeme, lex};

/// A tool's properties, with what each says.
pub const TOOL_PROPS: [(&str, &str); 6] = [
    ("input", "the contract of the tool's arguments"),
    ("output", "the contract of the tool's result (checked)"),
    (
        "effect",
        "`read`, `write` or `external`: what the tool does to the world",
    ),
    (
        "timeout",
        "one call is cut after this long (its process group is killed)",
    ),
    (
        "retry",
        "`retry: N backoff D`: a failed call is run again up to N times",
    ),
    (
        "sandbox",
        "what the tool's processes may reach beyond the default sandbox: `sandbox { read: [...]  write: [...]  network: none | loopback | any  env: [NAME]  processes: N  required: true }`, or `sandbox: required`. By default a tool reads only the system (`/usr`, `/bin`, `/lib*`, `/etc`, `/opt`) and the project, writes only its own per-call directory (its HOME and TMPDIR), has no network, a clean environment and at most 256 processes",
    ),
];

/// An `mcp` server's keys, with what each says.
pub const MCP_KEYS: [(&str, &str); 8] = [
    (
        "command",
        "`[\"npx\", \"PACKAGE\", ...]`: the program and its arguments, started in the project root and spoken to over stdio (or `url`)",
    ),
    (
        "url",
        "`\"http://HOST/mcp\"`: a running server, spoken to over streamable HTTP (or `command`)",
    ),
    (
        "headers",
        "`{ Name: \"text\", Authorization: env(\"TOKEN\") }`: sent with every request to a `url` server; `env(\"VAR\")` is read when the server is used",
    ),
    (
        "env",
        "`{ NAME: \"text\", TOKEN: env(\"TOKEN\") }`: the environment of a started server (with `command`)",
    ),
    (
        "tools",
        "`[read_text_file, ...]`: the tools the spec may use, named `SERVER.TOOL`; `*` for every tool the server lists",
    ),
    (
        "timeout",
        "one call of one of its tools is cut after this long",
    ),
    (
        "retry",
        "`retry: N backoff D`: a failed call is run again up to N times",
    ),
    (
        "sandbox",
        "what a started server may reach beyond the default sandbox, as on a `tool`: `sandbox { read: [...]  network: ... }` or `sandbox: required` (not with `url`)",
    ),
];

/// The keys of a `sandbox { }` block, with what each grants.
pub const SANDBOX_KEYS: [(&str, &str); 6] = [
    (
        "read",
        "more paths the tool may read: relative to the project, `~/...` (your home) or absolute",
    ),
    (
        "write",
        "more paths the tool may write, inside the project (its own directory is always writable)",
    ),
    (
        "network",
        "`none` (the default), `loopback` (this machine only) or `any`",
    ),
    (
        "env",
        "environment variables passed to the tool by name (`[GITHUB_TOKEN]`); it gets only `PATH`, `LANG`, `HOME` otherwise",
    ),
    (
        "processes",
        "how many processes the tool may have at once (default 256)",
    ),
    (
        "required",
        "`true`: where the machine cannot sandbox, the call fails instead of running with a warning",
    ),
];

/// The values of `network:`, with what each allows.
pub const NETWORK_VALUES: [(&str, &str); 3] = [
    ("none", "no network at all (the default)"),
    ("loopback", "only this machine (`127.0.0.1`, `::1`)"),
    ("any", "any address"),
];

/// The block the cursor is in, as far as tools go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// A `tool NAME { }` block, outside its sandbox.
    Tool,
    /// An `mcp NAME { }` block, outside its sandbox and maps.
    Mcp,
    /// The `env: { }` or `headers: { }` of an `mcp` server.
    McpMap,
    /// The `sandbox { }` block of a tool or an `mcp` server.
    Sandbox,
}

/// Where the word at `word` stands: in which block, and after which `key:` (`None`: at a
/// key's place, or inside a `[...]` list when `in_list`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub block: Block,
    pub after_key: Option<String>,
    pub in_list: bool,
}

/// The place of the word at `word` (its range in `text`), when it is inside a tool.
pub fn place(text: &str, word: Range<usize>) -> Option<Place> {
    let before = text.get(..word.start)?;
    let lexemes = lex(before);
    let skipped = |at: usize| {
        lexemes.iter().any(|(kind, range)| {
            matches!(kind, Lexeme::Comment | Lexeme::String) && range.contains(&at)
        })
    };
    let (block, brace) = block(before, &lexemes)?;
    let brackets = |c: char| {
        before
            .char_indices()
            .skip_while(|(at, _)| *at <= brace)
            .filter(|(at, found)| *found == c && !skipped(*at))
            .count()
    };
    let in_list = brackets('[') > brackets(']');
    // The last thing before the word: `:` makes it a value of the key before the `:`.
    let colon = before
        .char_indices()
        .rev()
        .find(|(at, c)| {
            !c.is_whitespace()
                && !lexemes
                    .iter()
                    .any(|(kind, range)| *kind == Lexeme::Comment && range.contains(at))
        })
        .filter(|(_, c)| *c == ':')
        .map(|(at, _)| at);
    let after_key = colon.and_then(|colon| {
        lexemes
            .iter()
            .rev()
            .find(|(kind, range)| *kind == Lexeme::Word && range.end <= colon)
            .and_then(|(_, range)| before.get(range.clone()))
            .map(str::to_string)
    });
    Some(Place {
        block,
        after_key: after_key.filter(|_| !in_list),
        in_list,
    })
}

/// The innermost open `{` of `before`, when it is a tool's, an `mcp` server's, or one of
/// their blocks', and where.
fn block(before: &str, lexemes: &[(Lexeme, Range<usize>)]) -> Option<(Block, usize)> {
    let mut open: Vec<usize> = Vec::new();
    let mut skip = lexemes
        .iter()
        .filter(|(kind, _)| matches!(kind, Lexeme::Comment | Lexeme::String))
        .peekable();
    for (at, c) in before.char_indices() {
        while skip.peek().is_some_and(|(_, range)| range.end <= at) {
            skip.next();
        }
        if skip.peek().is_some_and(|(_, range)| range.contains(&at)) {
            continue;
        }
        match c {
            '{' => open.push(at),
            '}' => {
                open.pop();
            }
            _ => {}
        }
    }
    let brace = *open.last()?;
    let words: Vec<&str> = lexemes
        .iter()
        .filter(|(kind, range)| *kind == Lexeme::Word && range.end <= brace)
        .filter_map(|(_, range)| before.get(range.clone()))
        .collect();
    match words.as_slice() {
        [.., "sandbox"] if open.len() >= 2 => Some((Block::Sandbox, brace)),
        [.., "tool", _] if open.len() == 1 => Some((Block::Tool, brace)),
        [.., "mcp", _] if open.len() == 1 => Some((Block::Mcp, brace)),
        [.., "env" | "headers"] if open.len() >= 2 => Some((Block::McpMap, brace)),
        _ => None,
    }
}

/// What `word` means at `place`, when it is a tool property, an `mcp` server's key, a
/// sandbox key or a network mode written there.
pub fn describe(word: &str, place: &Place) -> Option<String> {
    let find = |table: &[(&str, &str)]| {
        table
            .iter()
            .find(|(name, _)| *name == word)
            .map(|(_, what)| what.to_string())
    };
    if place.in_list {
        return None;
    }
    match (place.block, place.after_key.as_deref()) {
        (Block::Tool, None) => find(&TOOL_PROPS).map(|what| format!("`{word}` (tool): {what}")),
        (Block::Mcp, None) => find(&MCP_KEYS).map(|what| format!("`{word}` (mcp server): {what}")),
        (Block::Tool | Block::Mcp, Some("sandbox")) if word == "required" => Some(
            "`sandbox: required`: the default sandbox, and a call fails where the machine \
             cannot sandbox it instead of running with a warning"
                .to_string(),
        ),
        (Block::Sandbox, None) => {
            find(&SANDBOX_KEYS).map(|what| format!("`{word}` (sandbox): {what}"))
        }
        (Block::Sandbox, Some("network")) => {
            find(&NETWORK_VALUES).map(|what| format!("`network: {word}`: {what}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, needle: &str) -> Option<Place> {
        let start = text.rfind(needle).expect("the needle");
        place(text, start..start + needle.len())
    }

    #[test]
    fn the_block_and_key_are_found_past_strings_and_comments() {
        let text = "tool t {\n  input: A  // { not a block\n  sandbox { read: [\"}\"]  network: loopback  env: [X] }\n  timeout: 3s\n}\nrole r { model: m }\n";
        let sandbox = |after: Option<&str>, in_list: bool| {
            Some(Place {
                block: Block::Sandbox,
                after_key: after.map(str::to_string),
                in_list,
            })
        };
        assert_eq!(at(text, "loopback"), sandbox(Some("network"), false));
        assert_eq!(at(text, "env"), sandbox(None, false));
        assert_eq!(at(text, "X"), sandbox(None, true));
        assert_eq!(
            at(text, "timeout"),
            Some(Place {
                block: Block::Tool,
                after_key: None,
                in_list: false,
            })
        );
        assert_eq!(at(text, "model"), None);
        let text = "mcp files {\n  command: [\"npx\"]\n  env: { A: env(\"B\") }\n  sandbox { network: any }\n  tools: *\n}\n";
        let mcp = |block: Block, after: Option<&str>| {
            Some(Place {
                block,
                after_key: after.map(str::to_string),
                in_list: false,
            })
        };
        assert_eq!(at(text, "tools"), mcp(Block::Mcp, None));
        assert_eq!(at(text, "A"), mcp(Block::McpMap, None));
        assert_eq!(at(text, "any"), mcp(Block::Sandbox, Some("network")));
        assert_eq!(place("sandbox {", 0..0), None);
    }
}
