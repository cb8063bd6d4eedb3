//! YAML in the runtime: scenarios and cassettes read and written through the compiler's `yaml` module (the one place Charter parses its YAML files, with errors that name the file and position), and the runtime's own forms: block and quoted text, the lines of a cassette's calls.

pub use charter_compiler::yaml::{YamlError, from_str, to_string};

use charter_compiler::yaml::budget;
use serde::Serialize;

/// Text written as a YAML block literal (`|`), line breaks kept, so long multi-line text
/// (a rendered prompt) stays readable in a file a person reviews.
#[derive(Clone, Copy, Debug)]
pub struct BlockText<'a>(pub &'a str);

impl Serialize for BlockText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serde_saphyr::LitStr(self.0).serialize(serializer)
    }
}

/// Text written double-quoted (`"step_failed{review}"`), so that a value holding YAML's
/// flow indicators (`{`, `}`) reads back the same when a person copies it into a flow
/// mapping (`expect: { reason: ... }`), where a plain scalar could not hold them.
#[derive(Clone, Copy, Debug)]
pub struct QuotedText<'a>(pub &'a str);

impl Serialize for QuotedText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serde_saphyr::DoubleQuoted(self.0).serialize(serializer)
    }
}

/// The 1-based line of each entry of a cassette's `calls` (for messages that point into
/// the file); empty when the file does not parse.
pub fn call_lines(text: &str) -> Vec<u64> {
    #[derive(serde::Deserialize)]
    struct Calls {
        #[serde(default)]
        calls: Vec<serde_saphyr::Spanned<serde_json::Value>>,
    }
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget());
    serde_saphyr::from_str_with_options::<Calls>(text, options)
        .map(|calls| {
            calls
                .calls
                .iter()
                .map(|entry| entry.referenced.line())
                .collect()
        })
        .unwrap_or_default()
}
