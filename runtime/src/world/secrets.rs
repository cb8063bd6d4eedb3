//! Keeping secrets out of everything written: `Scrubber` replaces known secret values with `<redacted>` in text and JSON, `ScrubbingSink` applies it to every trace event, `secrets_by_name` picks the secret values out of the variables the CLI passes in.
//!
//! The providers never put their key into what they return (see `providers::ApiKey`),
//! but a model, a server or a tool command can still echo a secret it saw; a cassette
//! (`record::Recording`) and a trace (`ScrubbingSink`) scrub every string before it is
//! kept.

use std::fmt;

use serde_json::Value;

use crate::formats::trace::{TraceError, TraceEvent, TraceSink};

/// The shortest variable value [`secrets_by_name`] takes for a secret.
pub const MIN_SECRET_LEN: usize = 8;

/// What a secret is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Replaces each of a set of secret values with [`REDACTED`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Scrubber {
    /// Longest first, so a secret that contains another is replaced whole.
    secrets: Vec<String>,
}

impl Scrubber {
    /// A scrubber for `secrets` (empty strings are ignored).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|secret| !secret.is_empty())
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Scrubber { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Whether `text` holds any of the secrets.
    pub fn finds_in(&self, text: &str) -> bool {
        self.secrets
            .iter()
            .any(|secret| text.contains(secret.as_str()))
    }

    /// `text` with every secret replaced.
    pub fn text(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    /// `value` with every secret replaced in every string (and object key).
    pub fn value(&self, value: &Value) -> Value {
        self.walk(value, true)
    }

    /// `value` with every secret replaced in every string, object keys left as they are.
    pub fn values_only(&self, value: &Value) -> Value {
        self.walk(value, false)
    }

    fn walk(&self, value: &Value, keys: bool) -> Value {
        match value {
            Value::String(text) => Value::String(self.text(text)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| self.walk(item, keys)).collect())
            }
            Value::Object(object) => Value::Object(
                object
                    .iter()
                    .map(|(key, value)| {
                        let key = if keys { self.text(key) } else { key.clone() };
                        (key, self.walk(value, keys))
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// By hand: shows how many secrets, never which.
impl fmt::Debug for Scrubber {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "Scrubber({} secrets)", self.secrets.len())
    }
}

/// The values among `variables` (name, value pairs, e.g. `std::env::vars()`) that are
/// secrets by name: names ending in `_KEY`, `_TOKEN` or `_SECRET`, in any case (so
/// `OPENAI_API_KEY`, `GITHUB_TOKEN`). The library reads no environment: the CLI passes it
/// in and gives the result, with the providers' keys, to a [`Scrubber`]. Values shorter
/// than [`MIN_SECRET_LEN`] are left out: `SOME_KEY=1` is a setting, not a secret, and
/// scrubbing every `1` would mangle the trace.
pub fn secrets_by_name(variables: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    variables
        .into_iter()
        .filter(|(name, value)| {
            let name = name.to_ascii_uppercase();
            value.chars().count() >= MIN_SECRET_LEN
                && ["_KEY", "_TOKEN", "_SECRET"]
                    .iter()
                    .any(|suffix| name.ends_with(suffix))
        })
        .map(|(_, value)| value)
        .collect()
}

/// A trace sink that scrubs every event before `inner` gets it.
#[derive(Debug)]
pub struct ScrubbingSink<S> {
    inner: S,
    scrubber: Scrubber,
}

impl<S: TraceSink> ScrubbingSink<S> {
    pub fn new(inner: S, scrubber: Scrubber) -> Self {
        ScrubbingSink { inner, scrubber }
    }

    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: TraceSink> TraceSink for ScrubbingSink<S> {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        if self.scrubber.is_empty() {
            return self.inner.append(event);
        }
        let value = serde_json::to_value(event)?;
        if !self.scrubber.finds_in(&value.to_string()) {
            return self.inner.append(event);
        }
        // A secret that is also one of the event's own field names (a short key such as
        // `x` for a local server is in `next`) would break the event: then only the
        // values are scrubbed.
        let scrubbed: TraceEvent = match serde_json::from_value(self.scrubber.value(&value)) {
            Ok(event) => event,
            Err(_) => serde_json::from_value(self.scrubber.values_only(&value))?,
        };
        self.inner.append(&scrubbed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::formats::trace::{EventKind, MemorySink, RetryKind};

    #[test]
    fn secrets_are_replaced_longest_first_everywhere() {
        let scrubber = Scrubber::new(["abc".to_string(), "abcdef".to_string(), String::new()]);
        assert_eq!(scrubber.text("x abcdef y abc"), "x <redacted> y <redacted>");
        assert_eq!(
            scrubber.value(&json!({"abc": ["abcdef", 1, {"k": "zabc"}]})),
            json!({"<redacted>": ["<redacted>", 1, {"k": "z<redacted>"}]})
        );
        assert_eq!(format!("{scrubber:?}"), "Scrubber(2 secrets)");
        assert!(Scrubber::new([String::new()]).is_empty());
    }

    #[test]
    fn a_secret_that_is_part_of_a_field_name_leaves_the_event_whole() {
        // A local server's dummy key `x` is inside the field name `next`.
        let mut sink = ScrubbingSink::new(MemorySink::new(), Scrubber::new(["x".to_string()]));
        let event = TraceEvent::new(
            0,
            0,
            1,
            EventKind::Retry {
                retry: RetryKind::Provider,
                next: 2,
                delay_ms: 0,
                reason: "x marks the spot".into(),
            },
        );
        sink.append(&event)
            .unwrap_or_else(|error| panic!("the event is written: {error}"));
        let written = serde_json::to_value(&sink.into_inner().events()[0])
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(written["next"], 2);
        assert_eq!(written["reason"], "<redacted> marks the spot");
    }

    #[test]
    fn secrets_are_found_by_variable_name() {
        let variables = [
            ("OPENAI_API_KEY", "sk-1-long-enough"),
            ("GITHUB_TOKEN", "ghp-2-long-enough"),
            ("my_secret", "s3-long-enough"),
            ("EMPTY_KEY", ""),
            ("RETRY_KEY", "1"),
            ("KEYBOARD", "qwerty"),
            ("PATH", "/usr/bin"),
            ("TOKENIZER", "bpe"),
        ]
        .map(|(name, value)| (name.to_string(), value.to_string()));
        assert_eq!(
            secrets_by_name(variables),
            ["sk-1-long-enough", "ghp-2-long-enough", "s3-long-enough"]
        );
    }

    #[test]
    fn trace_events_are_scrubbed_before_they_are_written() {
        let mut sink = ScrubbingSink::new(MemorySink::new(), Scrubber::new(["sk-9".to_string()]));
        let leaky = TraceEvent::new(
            0,
            0,
            1,
            EventKind::ToolCall {
                tool: "env".into(),
                args: json!({}),
                result: json!({"OPENAI_API_KEY": "sk-9"}),
                sandbox: None,
            },
        );
        let clean = TraceEvent::new(
            1,
            0,
            1,
            EventKind::ToolDenied {
                tool: "x".into(),
                allowed: vec![],
                rule: None,
            },
        );
        for event in [&leaky, &clean] {
            sink.append(event).unwrap_or_else(|error| panic!("{error}"));
        }
        let written = sink.into_inner();
        let text = serde_json::to_string(written.events()).unwrap_or_default();
        assert!(!text.contains("sk-9"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
        assert_eq!(written.events()[1], clean);
    }
}
