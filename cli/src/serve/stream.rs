//! The event stream of one served run: every event in order (trace events, each role's output, a pending `ask`, the answer), bounded and scrubbed, kept for clients that connect late and written to `stream.jsonl` in the run directory.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use charter_runtime::engine::provider::{CallKey, CallObserver};
use charter_runtime::formats::trace::{TraceError, TraceEvent, TraceSink};
use charter_runtime::world::escape;
use charter_runtime::world::files::LineFile;
use charter_runtime::world::secrets::Scrubber;
use serde_json::Value;

use crate::stream_rows::{role_output_row, tool_finished_row, tool_started_row};

/// The most characters of a string in an event; longer ones are cut with a note.
pub(crate) const MAX_VALUE_CHARS: usize = 2_000;

/// The most elements of a list in an event; the rest are named by a count.
pub(crate) const MAX_LIST_ITEMS: usize = 100;

/// The events of one run so far, and whether there will be more.
#[derive(Debug)]
pub(crate) struct Stream {
    state: Mutex<State>,
    /// Bumped on every change; event-stream clients wait on it.
    changed: tokio::sync::watch::Sender<u64>,
    scrubber: Scrubber,
}

#[derive(Debug, Default)]
struct State {
    /// Each event as one JSON text.
    events: Vec<Arc<str>>,
    ended: bool,
    file: Option<LineFile>,
}

impl Stream {
    /// An empty stream written to `path` (created or emptied: a resumed run streams again
    /// from its start), or kept only in memory when `path` is `None`.
    pub(crate) fn create(path: Option<&Path>, scrubber: Scrubber) -> std::io::Result<Arc<Self>> {
        let file = path.map(LineFile::create).transpose()?;
        Ok(Arc::new(Stream {
            state: Mutex::new(State {
                file,
                ..State::default()
            }),
            changed: tokio::sync::watch::channel(0).0,
            scrubber,
        }))
    }

    /// The stream of a run that ended, read back from its `stream.jsonl`.
    pub(crate) fn ended(lines: &str, scrubber: Scrubber) -> Arc<Self> {
        let events = lines
            .lines()
            .filter(|line| serde_json::from_str::<Value>(line).is_ok())
            .map(Arc::from)
            .collect();
        Arc::new(Stream {
            state: Mutex::new(State {
                events,
                ended: true,
                file: None,
            }),
            changed: tokio::sync::watch::channel(0).0,
            scrubber,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends `event` (scrubbed, then bounded) and wakes the clients. An event after the
    /// end is dropped.
    /// `event` scrubbed as one line of a trace file (whole, not shortened).
    pub(crate) fn scrubbed(&self, event: &Value) -> String {
        format!("{}\n", self.scrubber.value(event))
    }

    pub(crate) fn push(&self, event: &Value) {
        let event = bounded(&self.scrubber.value(event), MAX_VALUE_CHARS);
        let text = event.to_string();
        {
            let mut state = self.state();
            if state.ended {
                return;
            }
            if let Some(file) = &mut state.file {
                // The stream on disk is for a restart's late clients; a full disk does
                // not stop the run or its live clients.
                let _ = file.append_line(format!("{text}\n").as_bytes());
            }
            state.events.push(Arc::from(text));
        }
        self.changed.send_modify(|count| *count += 1);
    }

    /// No more events will come: `stream.jsonl` is closed (a server that ran ten thousand
    /// runs holds no more files than one that ran none).
    pub(crate) fn end(&self) {
        let mut state = self.state();
        state.ended = true;
        state.file = None;
        drop(state);
        self.changed.send_modify(|count| *count += 1);
    }

    /// How many events there are so far.
    pub(crate) fn len(&self) -> usize {
        self.state().events.len()
    }

    /// The event at `index`, if there is one yet; `Err(())` when there is none and none
    /// will come.
    pub(crate) fn get(&self, index: usize) -> Result<Option<Arc<str>>, ()> {
        let state = self.state();
        match state.events.get(index) {
            Some(event) => Ok(Some(event.clone())),
            None if state.ended => Err(()),
            None => Ok(None),
        }
    }

    /// A receiver told of every change from now on.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// `value` with every string longer than `max` characters cut (with a note of how much
/// was left out; control characters other than line breaks and tabs escaped) and every
/// list longer than [`MAX_LIST_ITEMS`] cut.
pub(crate) fn bounded(value: &Value, max: usize) -> Value {
    match value {
        Value::String(text) if text.chars().count() > max => {
            Value::String(escape::block(text, max))
        }
        Value::Array(items) => {
            let mut kept: Vec<Value> = items
                .iter()
                .take(MAX_LIST_ITEMS)
                .map(|item| bounded(item, max))
                .collect();
            if items.len() > MAX_LIST_ITEMS {
                kept.push(Value::String(format!(
                    "… ({} more not shown)",
                    items.len() - MAX_LIST_ITEMS
                )));
            }
            Value::Array(kept)
        }
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(name, field)| (name.clone(), bounded(field, max)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Puts every trace event on the stream.
#[derive(Debug)]
pub(crate) struct StreamSink(pub(crate) Arc<Stream>);

impl TraceSink for StreamSink {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        let value = serde_json::to_value(event).map_err(TraceError::from)?;
        self.0.push(&value);
        Ok(())
    }
}

/// Puts each role's output on the stream as it arrives (`role_output`), shortened past
/// [`MAX_OUTPUT_CHARS`]; no part of the trace.
#[derive(Debug)]
pub(crate) struct OutputObserver(pub(crate) Arc<Stream>);

impl CallObserver for OutputObserver {
    fn tool_started(&self, key: &CallKey, tool: &str) {
        self.0.push(&tool_started_row(key, tool));
    }

    fn tool_finished(&self, key: &CallKey, tool: &str, ok: bool) {
        self.0.push(&tool_finished_row(key, tool, ok));
    }

    fn model_answered(&self, key: &CallKey, answer: &str) {
        self.0.push(&role_output_row(key, answer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_strings_and_lists_are_cut_and_short_ones_kept() {
        let long = "x".repeat(50);
        let value = json!({"a": long, "b": "short", "c": (0..150).collect::<Vec<_>>()});
        let cut = bounded(&value, 10);
        assert!(
            cut["a"]
                .as_str()
                .is_some_and(|a| a.starts_with("xxxxxxxxxx…"))
        );
        assert_eq!(cut["b"], "short");
        assert_eq!(cut["c"].as_array().map(Vec::len), Some(MAX_LIST_ITEMS + 1));
        assert_eq!(cut["c"][MAX_LIST_ITEMS], "… (50 more not shown)");
    }

    #[test]
    fn a_stream_scrubs_its_events_and_ends() {
        let stream = Stream::create(None, Scrubber::new(["sk-SECRET-1234567".to_string()]))
            .unwrap_or_else(|error| panic!("{error}"));
        stream.push(&json!({"kind": "x", "said": "key sk-SECRET-1234567"}));
        let first = stream
            .get(0)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("no event"));
        assert!(!first.contains("sk-SECRET"), "{first}");
        assert_eq!(stream.get(1), Ok(None));
        stream.end();
        assert_eq!(stream.get(1), Err(()));
        stream.push(&json!({"kind": "late"}));
        assert_eq!(stream.len(), 1);
    }
}
