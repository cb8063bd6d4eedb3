//! Text from files made safe for a terminal or a CI log (DESIGN §15): control characters escaped, so a value cannot move the cursor, colour the screen or start a workflow command on a line of its own, and long values cut.
//!
//! Every report the harness returns passes through it (`ScenarioReport::escaped`), so
//! the table, the details, JUnit and GitHub annotations show escaped values; the CLI's
//! live display, outcome lines and `error:`/`warning:` lines use it too.

use std::fmt::Write as _;

/// The most characters of a one-line value shown (a message, a name, a path).
pub const MAX_LINE_CHARS: usize = 2_000;

/// The most characters of a block shown (a diff, rendered diagnostics).
pub const MAX_BLOCK_CHARS: usize = 200_000;

/// `text` on one line: every control character (line breaks included) escaped as `\n`,
/// `\t`, `\x1b`, `\u{9b}`..., and cut after `max` characters with a note of how much was
/// left out.
pub fn one_line(text: &str, max: usize) -> String {
    escape(text, max, false)
}

/// `text` keeping its line breaks and tabs, every other control character escaped, cut
/// after `max` characters with a note of how much was left out. A line that would start
/// with `::` (a GitHub Actions workflow command) starts with `\x3a:` instead.
pub fn block(text: &str, max: usize) -> String {
    escape(text, max, true)
}

fn escape(text: &str, max: usize, keep_lines: bool) -> String {
    let mut out = String::with_capacity(text.len().min(max.saturating_mul(4)));
    let mut line_start = true;
    for (shown, (index, c)) in text.char_indices().enumerate() {
        if shown >= max {
            let rest = text.len() - index;
            let _ = write!(out, "… ({rest} more bytes not shown)");
            return out;
        }
        let starts_line = std::mem::replace(&mut line_start, keep_lines && c == '\n');
        match c {
            ':' if starts_line
                && keep_lines
                && text
                    .get(index + 1..)
                    .is_some_and(|rest| rest.starts_with(':')) =>
            {
                out.push_str("\\x3a");
            }
            '\n' | '\t' if keep_lines => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let code = c as u32;
                if code < 0x80 {
                    let _ = write!(out, "\\x{code:02x}");
                } else {
                    let _ = write!(out, "\\u{{{code:x}}}");
                }
            }
            // Bidirectional overrides reorder what a reader sees.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            one_line("sha256:x\n::error::pwned\u{1b}[31m\r", 100),
            "sha256:x\\n::error::pwned\\x1b[31m\\r"
        );
        assert_eq!(block("a\n\tb\u{7}\u{9b}", 100), "a\n\tb\\x07\\u{9b}");
        assert_eq!(
            block("::error::a\n-::b\n::warning::c", 100),
            "\\x3a:error::a\n-::b\n\\x3a:warning::c"
        );
        assert_eq!(one_line("left\u{202e}right", 100), "left\\u{202e}right");
        assert_eq!(one_line("plain ünïcode", 100), "plain ünïcode");
    }

    #[test]
    fn long_values_are_cut_with_a_note() {
        let long = "x".repeat(10_000);
        let cut = one_line(&long, 10);
        assert_eq!(cut, "xxxxxxxxxx… (9990 more bytes not shown)");
        assert_eq!(block("short", 10), "short");
    }
}
