//! Reading the `@name` a chat message starts with (DESIGN §9.4): the name is matched against the spec's known role names (ids and role-file display names), longest first, so `@创意伙伴帮我想` finds `创意伙伴` with no separator and keeps the rest whole.
//!
//! The rules, in order:
//! - leading whitespace is skipped; the message must then start with `@` or `＠`;
//! - a known name must follow at once (ASCII letters compared without case); when several
//!   do (`创意` and `创意伙伴`), the longest wins;
//! - a Latin name is not a prefix of a longer word: `@creatives` does not mention
//!   `creative` (a name ending in an ASCII letter, digit or `_` must not be followed by one);
//! - after the name, the separator people type is consumed: spaces (full-width too), then at
//!   most one of `:` `：` `,` `，` `;` `；` `、` `!` `！`, then spaces — or nothing at all;
//! - an `@word` that is no known name is no mention: `mention` is none and `strip_mention`
//!   keeps the text whole, so nothing the person typed is lost.
//!
//! The built-ins `mention` and `strip_mention` (to which the compiler passes the spec's
//! table of role names as a last argument) and the template filter `strip_mention` all
//! read one [`KnownNames`], so the mention a branch routes on is exactly the one the
//! role's prompt strips.

use charter_compiler::CompiledSpec;

/// Punctuation that may follow a name, once, before the message proper.
const SEPARATORS: [char; 9] = [':', '：', ',', '，', ';', '；', '、', '!', '！'];

/// The names a mention may use, longest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownNames {
    names: Vec<String>,
}

/// A mention found at the start of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mention<'names, 'text> {
    /// The known name, as the spec spells it.
    pub name: &'names str,
    /// The message after the mention and its separator.
    pub rest: &'text str,
}

impl KnownNames {
    /// The names given (empty ones dropped, duplicates once), ordered longest first.
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut names: Vec<String> = names
            .into_iter()
            .map(Into::into)
            .filter(|name| !name.is_empty())
            .collect();
        names.sort_by(|a, b| {
            b.chars()
                .count()
                .cmp(&a.chars().count())
                .then_with(|| a.cmp(b))
        });
        names.dedup();
        Self { names }
    }

    /// Every role's id, role-file display name and id as written in `spec`.
    pub fn of_spec(spec: &CompiledSpec) -> Self {
        Self::new(spec.roles.iter().flat_map(|(id, role)| {
            std::iter::once(id.clone())
                .chain(role.display_name.clone())
                .chain(role.written_id.clone())
        }))
    }

    /// The names, longest first.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The mention `text` starts with, or none (see the module's rules).
    pub fn find<'names, 'text>(&'names self, text: &'text str) -> Option<Mention<'names, 'text>> {
        let after_at = text.trim_start().strip_prefix(['@', '＠'])?;
        self.names.iter().find_map(|name| {
            let typed = after_at.get(..name.len())?;
            if !typed.eq_ignore_ascii_case(name) {
                return None;
            }
            let rest = &after_at[name.len()..];
            let joins_a_word = name.chars().next_back().is_some_and(is_word_char)
                && rest.chars().next().is_some_and(is_word_char);
            (!joins_a_word).then(|| Mention {
                name: name.as_str(),
                rest: after_separator(rest),
            })
        })
    }

    /// The known name `text` mentions, as the spec spells it, or none.
    pub fn mention(&self, text: &str) -> Option<&str> {
        self.find(text).map(|mention| mention.name)
    }

    /// `text` without its mention and the separator after it; the text whole when it
    /// mentions no known name.
    pub fn strip_mention(&self, text: &str) -> String {
        self.find(text)
            .map_or(text, |mention| mention.rest)
            .to_string()
    }
}

/// A character that continues a Latin word.
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `rest` without the separator it starts with: spaces, at most one separator mark, spaces.
fn after_separator(rest: &str) -> &str {
    let rest = rest.trim_start();
    rest.strip_prefix(SEPARATORS).map_or(rest, str::trim_start)
}

#[cfg(test)]
mod tests;
