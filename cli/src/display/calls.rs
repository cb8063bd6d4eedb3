//! What `charter run` shows while calls are in flight: a heartbeat line for a call running over 10 s, each tool call as it starts and ends, and with `--show-output` the model's answer, shortened.
//!
//! [`LiveCalls`] is told of calls by the trace (through `LiveDisplay`: `model_call` starts
//! one; its result, timeout, retry or item end ends it) and of tool calls and answers by
//! the runtime's `CallObserver`, which is no part of the trace. A heartbeat thread asks it
//! every half second which calls have run another 10 s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use charter_runtime::engine::provider::{CallKey, CallObserver};

use crate::terminal::print_err;

/// How often a running call is reported.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(10);

/// The most characters of a model's answer shown with `--show-output`.
const ANSWER_EXCERPT: usize = 400;

/// The calls in flight, by step and item.
pub(crate) struct LiveCalls {
    started: Instant,
    show_output: bool,
    calls: Mutex<BTreeMap<String, Running>>,
    stop: AtomicBool,
}

impl std::fmt::Debug for LiveCalls {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LiveCalls")
            .field("running", &self.calls().len())
            .finish()
    }
}

struct Running {
    /// `step[item]#attempt`, as the live view writes a place.
    place: String,
    role: String,
    since: Instant,
    /// Heartbeats shown so far.
    beats: u64,
}

impl LiveCalls {
    pub(crate) fn new(show_output: bool) -> Arc<Self> {
        Arc::new(LiveCalls {
            started: Instant::now(),
            show_output,
            calls: Mutex::new(BTreeMap::new()),
            stop: AtomicBool::new(false),
        })
    }

    fn calls(&self) -> MutexGuard<'_, BTreeMap<String, Running>> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A call of `role` began at `place` (`slot` is its step and item).
    pub(crate) fn call_started(&self, slot: &str, place: &str, role: &str) {
        self.calls().insert(
            slot.to_string(),
            Running {
                place: place.to_string(),
                role: role.to_string(),
                since: Instant::now(),
                beats: 0,
            },
        );
    }

    /// The call at `slot` ended (answered, timed out or failed).
    pub(crate) fn call_ended(&self, slot: &str) {
        self.calls().remove(slot);
    }

    /// Every call ended (the run finished).
    pub(crate) fn all_ended(&self) {
        self.calls().clear();
    }

    /// The heartbeat lines due at `now`: one per call that has run another
    /// [`HEARTBEAT`] since its last line.
    pub(crate) fn beats_due(&self, now: Instant) -> Vec<String> {
        let elapsed = now.saturating_duration_since(self.started).as_millis();
        let mut lines = Vec::new();
        for running in self.calls().values_mut() {
            let running_for = now.saturating_duration_since(running.since);
            let due = running_for.as_secs() / HEARTBEAT.as_secs();
            if due > running.beats {
                running.beats = due;
                lines.push(line(
                    u64::try_from(elapsed).unwrap_or(u64::MAX),
                    &running.place,
                    &format!(
                        "… waiting for {} ({}s so far)",
                        running.role,
                        running_for.as_secs()
                    ),
                ));
            }
        }
        lines
    }

    /// Prints heartbeats from a thread of its own until the returned guard is dropped.
    pub(crate) fn heartbeat(self: &Arc<Self>) -> Heartbeat {
        let calls = self.clone();
        let thread = std::thread::spawn(move || {
            while !calls.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(500));
                for beat in calls.beats_due(Instant::now()) {
                    print_err(&beat);
                }
            }
        });
        Heartbeat {
            calls: self.clone(),
            thread: Some(thread),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// Stops the heartbeat thread when dropped.
pub(crate) struct Heartbeat {
    calls: Arc<LiveCalls>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.calls.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl CallObserver for LiveCalls {
    fn tool_started(&self, key: &CallKey, tool: &str) {
        print_err(&line(self.now_ms(), &place(key), &format!("tool {tool} …")));
    }

    fn tool_finished(&self, key: &CallKey, tool: &str, ok: bool) {
        let how = if ok { "done" } else { "failed" };
        print_err(&line(
            self.now_ms(),
            &place(key),
            &format!("tool {tool} {how}"),
        ));
    }

    fn model_answered(&self, key: &CallKey, answer: &str) {
        if self.show_output {
            print_err(&line(self.now_ms(), &place(key), &answered(answer)));
        }
    }
}

/// `answered: ANSWER` with the answer shortened to one line, as `--show-output` shows it.
pub(crate) fn answered(answer: &str) -> String {
    format!("answered: {}", shorten(answer, ANSWER_EXCERPT))
}

/// `step[item]#attempt`, as the live view writes a place.
pub(crate) fn place(key: &CallKey) -> String {
    let mut place = key.step.clone();
    if let Some(item) = &key.item {
        place.push_str(&format!("[{item}]"));
    }
    place.push_str(&format!("#{}", key.attempt));
    place
}

/// One line of the live view (the layout `LiveDisplay` uses).
pub(crate) fn line(t_ms: u64, place: &str, text: &str) -> String {
    format!("{:>9}  {place:<28} {text}\n", format_seconds(t_ms))
}

fn format_seconds(ms: u64) -> String {
    format!("{}.{:03}s", ms / 1000, ms % 1000)
}

/// `text` on one line, control characters escaped, at most `max` characters (with `…`).
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .flat_map(|c| match c {
            '\n' | '\r' | '\t' => vec![' '],
            c if c.is_control() => c.escape_default().collect(),
            c => vec![c],
        })
        .collect();
    let mut cut: String = flat.chars().take(max).collect();
    if cut.len() < flat.len() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_beats_once_per_ten_seconds_and_not_after_it_ends() {
        let calls = LiveCalls::new(false);
        calls.call_started("write", "write#1", "writer");
        let start = Instant::now();
        assert!(calls.beats_due(start + Duration::from_secs(9)).is_empty());
        let beats = calls.beats_due(start + Duration::from_secs(11));
        assert_eq!(beats.len(), 1);
        assert!(beats[0].contains("write#1") && beats[0].contains("waiting for writer"));
        assert!(calls.beats_due(start + Duration::from_secs(15)).is_empty());
        assert_eq!(calls.beats_due(start + Duration::from_secs(21)).len(), 1);
        calls.call_ended("write");
        assert!(calls.beats_due(start + Duration::from_secs(60)).is_empty());
    }

    #[test]
    fn answers_are_shortened_to_one_line() {
        assert_eq!(shorten("a\nb\u{1b}c", 10), "a b\\u{1b}c");
        assert_eq!(shorten(&"x".repeat(10), 4), "xxxx…");
    }
}
