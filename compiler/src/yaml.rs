//! The one place Charter reads and writes its YAML files as serde types (through `serde-saphyr`), with errors that name the file and position: `charter.lock` here, the runtime's scenarios and cassettes through its `formats::yaml`.
//!
//! Keeping YAML behind these two functions means the YAML library can be swapped without
//! touching the file-format types. (Role files' front matter is read by `syntax::role_file`,
//! whose errors are diagnostics with spans.) Duplicate keys in a mapping are errors (saphyr's
//! default), so a hand-edited cassette cannot silently shadow an entry.
//!
//! A file is untrusted input: the parser's budget is tighter than saphyr's defaults for
//! anchors, aliases and merge keys and for what aliases may copy, so an expansion bomb of
//! a few hundred bytes stops within milliseconds, and a breach is said in words, not as
//! saphyr's debug text.

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A YAML file that could not be read into its type, or a value that could not be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    /// The file's name as shown to the user.
    pub file: String,
    /// 1-based line and column, when known.
    pub line: Option<u64>,
    pub column: Option<u64>,
    pub message: String,
}

impl fmt::Display for YamlError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(formatter, ":{line}")?;
            if let Some(column) = self.column {
                write!(formatter, ":{column}")?;
            }
        }
        write!(formatter, ": {}", self.message)
    }
}

impl std::error::Error for YamlError {}

impl YamlError {
    /// An error about `file` at an optional position (used for checks made after parsing).
    pub fn at(
        file: &str,
        line: Option<u64>,
        column: Option<u64>,
        message: impl Into<String>,
    ) -> Self {
        YamlError {
            file: file.to_string(),
            line: line.filter(|line| *line > 0),
            column: column.filter(|column| *column > 0),
            message: message.into(),
        }
    }
}

/// Reads `text` (the content of `file`) as a `T`. Booleans are YAML 1.2's only
/// (`true`/`false`): a recorded answer `no`, `y` or `off` stays a string.
pub fn from_str<T: DeserializeOwned>(file: &str, text: &str) -> Result<T, YamlError> {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.budget = Some(budget());
    serde_saphyr::from_str_with_options(text, options).map_err(|error| {
        if is_blank(text) {
            // saphyr would say `1:1: unexpected end of input`.
            return YamlError::at(file, None, None, "the file is empty");
        }
        let location = error.location();
        if let Some(breach) = budget_breach(&error) {
            return YamlError::at(
                file,
                location.map(|location| location.line()),
                location.map(|location| location.column()),
                budget_message(breach),
            );
        }
        let message = error.without_snippet().to_string();
        YamlError::at(
            file,
            location.map(|location| location.line()),
            location.map(|location| location.column()),
            strip_position(&message),
        )
    })
}

/// The most a file (a lock, a scenario, a cassette) may make the parser do. Tighter than
/// saphyr's defaults where only an attack needs more (anchors, aliases and merge keys,
/// which a few hundred bytes can multiply), as generous as its defaults for plain content
/// (a recorded answer may be large).
pub fn budget() -> serde_saphyr::Budget {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_aliases = MAX_ALIASES;
    budget.max_anchors = MAX_ALIASES;
    budget.max_merge_keys = MAX_ALIASES;
    budget.max_recorded_anchor_events = MAX_ANCHOR_COPIES;
    budget.max_recorded_anchor_bytes = 1024 * 1024;
    budget.max_nodes = MAX_NODES;
    budget
}

/// The most anchors, aliases and merge keys in one file.
const MAX_ALIASES: usize = 1_000;
/// The most events the parser may copy for anchors (what aliases replay).
const MAX_ANCHOR_COPIES: usize = 20_000;
/// The most nodes in one file, aliases counted each time they are used.
const MAX_NODES: usize = 250_000;

/// The budget breach under an error's wrappers (an alias's use, a snippet), if any.
fn budget_breach(error: &serde_saphyr::Error) -> Option<&serde_saphyr::budget::BudgetBreach> {
    let mut error = error;
    loop {
        match error {
            serde_saphyr::Error::Budget { breach, .. } => return Some(breach),
            serde_saphyr::Error::AliasError { error: inner, .. }
            | serde_saphyr::Error::WithSnippet { error: inner, .. } => error = inner,
            _ => return None,
        }
    }
}

/// What a budget breach means, in words (saphyr's message is Rust debug text).
fn budget_message(breach: &serde_saphyr::budget::BudgetBreach) -> String {
    use serde_saphyr::budget::BudgetBreach;
    let what = match breach {
        BudgetBreach::Nodes { .. } => {
            format!("more than {MAX_NODES} values (aliases count each time they are used)")
        }
        BudgetBreach::Aliases { .. } => format!("more than {MAX_ALIASES} aliases"),
        BudgetBreach::Anchors { .. } => format!("more than {MAX_ALIASES} anchors"),
        BudgetBreach::MergeKeys { .. } => format!("more than {MAX_ALIASES} merge keys (`<<`)"),
        BudgetBreach::RecordedAnchorEvents { .. } | BudgetBreach::RecordedAnchorBytes { .. } => {
            "anchors that expand too far when their aliases are used".to_string()
        }
        BudgetBreach::AliasAnchorRatio { .. } => {
            "far more aliases than anchors (an expansion bomb)".to_string()
        }
        BudgetBreach::Depth { .. } => "values nested too deeply".to_string(),
        _ => "more than the parser's limits allow".to_string(),
    };
    format!("the file is too large or complex to read: it holds {what}")
}

/// Whether `text` holds nothing but blank lines and comments.
fn is_blank(text: &str) -> bool {
    text.lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#')
    })
}

/// Writes `value` as YAML.
pub fn to_string<T: Serialize>(file: &str, value: &T) -> Result<String, YamlError> {
    serde_saphyr::to_string(value)
        .map_err(|error| YamlError::at(file, None, None, error.to_string()))
}

/// Drops a trailing ` at line L, column C` from saphyr's message: the position is
/// shown once, in front, as `file:L:C`.
fn strip_position(message: &str) -> String {
    let first_line = message.lines().next().unwrap_or(message);
    // Advice addressed to a programmer using saphyr, not to someone editing the file.
    let first_line = first_line
        .split(", set DuplicateKeyPolicy")
        .next()
        .unwrap_or(first_line);
    match first_line.rfind(" at line ") {
        Some(index) => first_line
            .get(..index)
            .unwrap_or(first_line)
            .trim_end_matches(',')
            .to_string(),
        None => first_line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        name: String,
        count: u32,
    }

    #[test]
    fn reads_and_writes() {
        let sample: Result<Sample, _> = from_str("x.yaml", "name: a\ncount: 2\n");
        assert_eq!(
            sample,
            Ok(Sample {
                name: "a".into(),
                count: 2
            })
        );
        let text = to_string(
            "x.yaml",
            &Sample {
                name: "b".into(),
                count: 3,
            },
        );
        assert_eq!(text, Ok("name: b\ncount: 3\n".to_string()));
    }

    #[test]
    fn only_yaml_1_2_booleans_are_booleans() {
        let value: Result<serde_json::Value, _> =
            from_str("x.yaml", "a: n\nb: yes\nc: off\nd: true\ne: ~\n");
        assert_eq!(
            value,
            Ok(serde_json::json!({"a": "n", "b": "yes", "c": "off", "d": true, "e": null}))
        );
    }

    #[test]
    fn an_empty_file_says_so() {
        for text in ["", "\n  \n", "# only a comment\n"] {
            let error: Result<Sample, _> = from_str("cassette.yaml", text);
            match error {
                Ok(value) => panic!("{text:?} parsed as {value:?}"),
                Err(error) => assert_eq!(error.to_string(), "cassette.yaml: the file is empty"),
            }
        }
    }

    #[test]
    fn errors_name_the_file_and_position() {
        let cases = [
            ("name: a\ncount: many\n", "x.yaml:2:"),
            ("name: a\ncount: 1\nextra: 2\n", "x.yaml:3:"),
            (
                "name: a\nname: b\ncount: 1\n",
                "x.yaml:2:1: duplicate mapping key: name",
            ),
            ("name: [unclosed\n", "x.yaml:"),
        ];
        for (text, prefix) in cases {
            let error: Result<Sample, _> = from_str("x.yaml", text);
            match error {
                Ok(value) => panic!("{text:?} parsed as {value:?}"),
                Err(error) => {
                    let shown = error.to_string();
                    assert!(shown.starts_with(prefix), "{text:?}: {shown}");
                    assert!(!shown.contains('\n'), "{text:?}: {shown}");
                    assert!(!shown.contains("DuplicateKeyPolicy"), "{text:?}: {shown}");
                }
            }
        }
    }

    /// A few hundred bytes of anchors whose aliases multiply by 8 per level.
    fn alias_bomb() -> String {
        let mut bomb = String::from("a0: &a0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6}\n");
        for level in 1..12 {
            let previous = format!("*a{}", level - 1);
            let list = [previous.as_str(); 8].join(", ");
            bomb.push_str(&format!("a{level}: &a{level} [{list}]\n"));
        }
        bomb
    }

    /// The same with merge keys.
    fn merge_bomb() -> String {
        let mut bomb = String::from("m0: &m0 {k0: 1, k1: 2, k2: 3, k3: 4}\n");
        for level in 1..12 {
            let previous = format!("*m{}", level - 1);
            let list = [previous.as_str(); 4].join(", ");
            bomb.push_str(&format!(
                "m{level}: &m{level} {{<<: [{list}], x{level}: [{list}]}}\n"
            ));
        }
        bomb
    }

    #[test]
    fn expansion_bombs_stop_early_with_a_plain_message() {
        for bomb in [alias_bomb(), merge_bomb()] {
            let error = from_str::<serde_json::Value>("bomb.yaml", &bomb).err();
            let message = error.map(|error| error.to_string()).unwrap_or_default();
            // Stopped by the anchor budget (saphyr's default stopped it only at 250,000
            // nodes, after a few hundred milliseconds and ~100 MB), in words.
            assert!(
                message.contains(
                    "the file is too large or complex to read: it holds anchors that expand too far"
                ),
                "{message}"
            );
            assert!(
                !message.contains('{') && !message.contains("(used"),
                "{message}"
            );
        }
    }

    #[test]
    fn ordinary_anchors_and_merge_keys_still_read() {
        let text = "base: &base {a: 1, b: 2}\nitems:\n".to_string()
            + &(0..90)
                .map(|index| format!("  - {{<<: *base, c: {index}}}\n"))
                .collect::<String>();
        let value = from_str::<serde_json::Value>("ok.yaml", &text);
        assert_eq!(
            value
                .ok()
                .and_then(|value| value["items"].as_array().map(Vec::len)),
            Some(90)
        );
    }
}
