//! The diff of two traces, aligned by event key and compared field by field (DESIGN §11, §18): an inserted step shows as its inserted events, a changed score as `gate.score: 4.67 -> 4.5`, and a time shift common to the later events as one line.
//!
//! Events are aligned in two passes, both with `similar`: first by their content without
//! `seq` and `t_ms` (an event inserted early renumbers and delays every later one, and
//! neither makes it another event), then, between two events aligned that way, by their
//! key — the run they belong to (a conversation's trace holds one run per turn), `step`,
//! `round`, `item`, `attempt` and `kind` — so that an event whose fields changed is paired
//! with its old self. The time by which a run of aligned events moved is said once, where
//! it starts; an event moved by that much shows only its other changes. The text is plain;
//! `report::colorize` colours it for a terminal.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// The fields that place an event (besides the run it belongs to), in the order a line
/// names them.
const KEY_FIELDS: [&str; 5] = ["kind", "round", "step", "item", "attempt"];

/// How many characters of an inserted or removed event's own fields a line shows.
const MAX_FIELDS_CHARS: usize = 300;

/// The field-level diff of the JSON-lines traces `old` and `new`, under `---`/`+++`
/// headers naming them; empty when they hold the same events.
///
/// Lines, in trace order:
/// - `+ event N (kind, round R, step S, item I, attempt A, t_ms T): {fields}` for an event
///   only `new` has, `- event N (…): {fields}` for one only `old` has (the event's own
///   fields, without those in the parentheses);
/// - `~ every later event +3 s (t_ms +3000)` where the aligned events start to differ from
///   their old time by a new amount, shared by the events after it;
/// - `~ event N (kind, …)` (`~ event N -> M (…)` when renumbered) and then
///   `    path: old -> new` per changed field, for an aligned event that changed besides
///   its number and the time shift it is under.
pub fn event_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    let old_events = events(old);
    let new_events = events(new);
    let aligned = align(&old_events, &new_events);
    let out = render(&aligned, &old_events, &new_events);
    if out.is_empty() {
        return out;
    }
    format!("--- {old_name}\n+++ {new_name}\n{out}")
}

/// One line of a trace, read.
struct Event<'a> {
    line: &'a str,
    /// The line's JSON object; none for a line that is not one (compared as text).
    fields: Option<Map<String, Value>>,
    /// What aligns it with its old self: the run it is in and its `KEY_FIELDS`.
    key: String,
    /// The key and every field but `seq` and `t_ms`: what an unchanged event keeps.
    content: String,
}

impl Event<'_> {
    fn seq(&self) -> Option<u64> {
        self.fields.as_ref()?.get("seq")?.as_u64()
    }

    fn t_ms(&self) -> Option<i64> {
        self.fields.as_ref()?.get("t_ms")?.as_i64()
    }
}

/// The events of a trace, one per non-empty line. A `run_started` event opens a new run
/// (a conversation's trace is one run per turn, each numbered and timed from 0).
fn events(trace: &str) -> Vec<Event<'_>> {
    let mut run = 0usize;
    let mut events = Vec::new();
    for line in trace.lines().filter(|line| !line.trim().is_empty()) {
        let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(line) else {
            events.push(Event {
                line,
                fields: None,
                key: format!("text {line}"),
                content: format!("text {line}"),
            });
            continue;
        };
        if fields.get("kind").and_then(Value::as_str) == Some("run_started") {
            run += 1;
        }
        let key: Vec<Value> = KEY_FIELDS
            .iter()
            .map(|field| fields.get(*field).cloned().unwrap_or(Value::Null))
            .collect();
        let key = format!("run {run} {}", Value::Array(key));
        let mut rest = fields.clone();
        rest.remove("seq");
        rest.remove("t_ms");
        let content = format!("{key} {}", Value::Object(rest));
        events.push(Event {
            line,
            fields: Some(fields),
            key,
            content,
        });
    }
    events
}

/// How an old and a new event line up: the same event (perhaps changed), or an event
/// only one side has. The indexes are into the old and the new events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aligned {
    Matched(usize, usize),
    Removed(usize),
    Inserted(usize),
}

/// The two traces' events in one sequence, in trace order: aligned first by content, then,
/// between two events of the same content, by key.
fn align(old: &[Event<'_>], new: &[Event<'_>]) -> Vec<Aligned> {
    let old_content: Vec<&str> = old.iter().map(|event| event.content.as_str()).collect();
    let new_content: Vec<&str> = new.iter().map(|event| event.content.as_str()).collect();
    let mut aligned = Vec::with_capacity(old.len().max(new.len()));
    for operation in
        similar::capture_diff_slices(similar::Algorithm::Myers, &old_content, &new_content)
    {
        let (tag, old_range, new_range) = operation.as_tag_tuple();
        if tag == similar::DiffTag::Equal {
            aligned.extend(
                old_range
                    .zip(new_range)
                    .map(|(o, n)| Aligned::Matched(o, n)),
            );
        } else {
            align_by_key(old, new, old_range, new_range, &mut aligned);
        }
    }
    aligned
}

/// The events of `old[old_range]` and `new[new_range]`, none of them unchanged, aligned by
/// key: an event of the same key on both sides is one changed event; a removed event comes
/// before an inserted one at the same place.
fn align_by_key(
    old: &[Event<'_>],
    new: &[Event<'_>],
    old_range: std::ops::Range<usize>,
    new_range: std::ops::Range<usize>,
    aligned: &mut Vec<Aligned>,
) {
    let (old_start, new_start) = (old_range.start, new_range.start);
    let old_keys: Vec<&str> = old_range.map(|index| old[index].key.as_str()).collect();
    let new_keys: Vec<&str> = new_range.map(|index| new[index].key.as_str()).collect();
    for operation in similar::capture_diff_slices(similar::Algorithm::Myers, &old_keys, &new_keys) {
        let (tag, old_range, new_range) = operation.as_tag_tuple();
        let old_range = old_start + old_range.start..old_start + old_range.end;
        let new_range = new_start + new_range.start..new_start + new_range.end;
        if tag == similar::DiffTag::Equal {
            aligned.extend(
                old_range
                    .zip(new_range)
                    .map(|(o, n)| Aligned::Matched(o, n)),
            );
        } else {
            aligned.extend(old_range.map(Aligned::Removed));
            aligned.extend(new_range.map(Aligned::Inserted));
        }
    }
}

/// The diff's lines (without the headers) for the aligned events.
fn render(aligned: &[Aligned], old: &[Event<'_>], new: &[Event<'_>]) -> String {
    let shifts = shifts(aligned, old, new);
    let mut shift = 0;
    let mut out = String::new();
    for (position, alignment) in aligned.iter().enumerate() {
        match *alignment {
            Aligned::Removed(index) => write_whole(&mut out, '-', &old[index]),
            Aligned::Inserted(index) => write_whole(&mut out, '+', &new[index]),
            Aligned::Matched(o, n) => {
                if let Some(&started) = shifts.get(&position) {
                    shift = started;
                    write_shift(&mut out, shift);
                }
                let shifted = time_moved(&old[o], &new[n]) == Some(shift);
                write_changed(&mut out, &old[o], &new[n], shifted);
            }
        }
    }
    out
}

/// Where a time shift starts (a position in `aligned`) and by how many milliseconds the
/// events from there on moved. An aligned event starts a shift when it moved by another
/// amount than the shift it is under and the next aligned event (if any) moved by the same
/// amount as it: an event delayed on its own shows its `t_ms` as a changed field instead.
fn shifts(aligned: &[Aligned], old: &[Event<'_>], new: &[Event<'_>]) -> BTreeMap<usize, i64> {
    let moved: Vec<(usize, i64)> = aligned
        .iter()
        .enumerate()
        .filter_map(|(position, alignment)| match *alignment {
            Aligned::Matched(o, n) => Some((position, time_moved(&old[o], &new[n])?)),
            Aligned::Removed(_) | Aligned::Inserted(_) => None,
        })
        .collect();
    let mut shift = 0;
    let mut starts = BTreeMap::new();
    for (index, &(position, delta)) in moved.iter().enumerate() {
        let shared = moved.get(index + 1).is_none_or(|&(_, next)| next == delta);
        if delta != shift && shared {
            starts.insert(position, delta);
            shift = delta;
        }
    }
    starts
}

/// How many milliseconds later the new event happened than the old one.
fn time_moved(old: &Event<'_>, new: &Event<'_>) -> Option<i64> {
    new.t_ms()?.checked_sub(old.t_ms()?)
}

/// `~ every later event +3 s (t_ms +3000)`.
fn write_shift(out: &mut String, shift: i64) {
    if shift == 0 {
        let _ = writeln!(out, "~ every later event at its old time (t_ms +0)");
        return;
    }
    let sign = if shift < 0 { '-' } else { '+' };
    let _ = writeln!(
        out,
        "~ every later event {sign}{} (t_ms {sign}{})",
        duration(shift.unsigned_abs()),
        shift.unsigned_abs()
    );
}

/// Milliseconds as a person reads them: `250 ms`, `3 s`, `1.5 s`, `2 min 30 s`.
fn duration(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms} ms");
    }
    let seconds = |ms: u64| {
        let text = format!("{}.{:03}", ms / 1_000, ms % 1_000);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        format!("{text} s")
    };
    if ms < 60_000 {
        return seconds(ms);
    }
    let minutes = ms / 60_000;
    match ms % 60_000 {
        0 => format!("{minutes} min"),
        rest => format!("{minutes} min {}", seconds(rest)),
    }
}

/// `+ event 6 (step_started, round 1, step facts, t_ms 3000): {"role":"planner"}`: an event
/// only one side has, its place in parentheses and its other fields after it (cut to
/// `MAX_FIELDS_CHARS`); a line that is no JSON object, whole.
fn write_whole(out: &mut String, sign: char, event: &Event<'_>) {
    let Some(fields) = &event.fields else {
        let _ = writeln!(out, "{sign} {}", event.line);
        return;
    };
    let mut place = place(fields);
    if let Some(t_ms) = event.t_ms() {
        place.push(format!("t_ms {t_ms}"));
    }
    let number = event.seq().map(|seq| format!(" {seq}")).unwrap_or_default();
    let mut own = fields.clone();
    for field in KEY_FIELDS.iter().chain(&["seq", "t_ms"]) {
        own.remove(*field);
    }
    let own = if own.is_empty() {
        String::new()
    } else {
        format!(
            ": {}",
            cut(&Value::Object(own).to_string(), MAX_FIELDS_CHARS)
        )
    };
    let _ = writeln!(out, "{sign} event{number} ({}){own}", place.join(", "));
}

/// `~ event 12 (gate, round 1, step judge)` and one line per changed field, or nothing
/// when only `seq` (and, when `shifted`, `t_ms`) differ.
fn write_changed(out: &mut String, before: &Event<'_>, after: &Event<'_>, shifted: bool) {
    let (Some(old_fields), Some(new_fields)) = (&before.fields, &after.fields) else {
        if before.line != after.line {
            let _ = writeln!(out, "- {}\n+ {}", before.line, after.line);
        }
        return;
    };
    let kind = new_fields
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("event");
    let mut ignored = vec!["seq"];
    if shifted {
        ignored.push("t_ms");
    }
    let mut changes = Vec::new();
    compare_fields(kind, old_fields, new_fields, &ignored, &mut changes);
    if changes.is_empty() {
        return;
    }
    let number = match (before.seq(), after.seq()) {
        (Some(a), Some(b)) if a != b => format!("{a} -> {b}"),
        (_, Some(b)) => b.to_string(),
        (Some(a), None) => a.to_string(),
        (None, None) => "?".to_string(),
    };
    let _ = writeln!(out, "~ event {number} ({})", place(new_fields).join(", "));
    for (path, old, new) in changes {
        let _ = writeln!(out, "    {path}: {old} -> {new}");
    }
}

/// Where an event is: its kind, then `round R`, `step S`, `item I`, `attempt A` for those
/// it has.
fn place(fields: &Map<String, Value>) -> Vec<String> {
    let kind = fields
        .get("kind")
        .map_or_else(|| "event".to_string(), plain);
    let mut place = vec![kind];
    for field in &KEY_FIELDS[1..] {
        if let Some(value) = fields.get(*field) {
            place.push(format!("{field} {}", plain(value)));
        }
    }
    place
}

/// The top-level fields that differ, but those `ignored`, named after the event's kind
/// (`gate.score`), each compared down to its leaves.
fn compare_fields(
    kind: &str,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
    ignored: &[&str],
    changes: &mut Vec<(String, String, String)>,
) {
    for key in union_keys(before, after) {
        if ignored.contains(&key.as_str()) {
            continue;
        }
        let path = format!("{kind}.{key}");
        match (before.get(&key), after.get(&key)) {
            (Some(x), Some(y)) => compare(&path, x, y, changes),
            (Some(x), None) => changes.push((path, shown(x), "(none)".to_string())),
            (None, Some(y)) => changes.push((path, "(none)".to_string(), shown(y))),
            (None, None) => {}
        }
    }
}

/// Every leaf that differs, as (path, old, new).
fn compare(path: &str, before: &Value, after: &Value, changes: &mut Vec<(String, String, String)>) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            for key in union_keys(a, b) {
                let child = format!("{path}.{key}");
                match (a.get(&key), b.get(&key)) {
                    (Some(x), Some(y)) => compare(&child, x, y, changes),
                    (Some(x), None) => changes.push((child, shown(x), "(none)".to_string())),
                    (None, Some(y)) => changes.push((child, "(none)".to_string(), shown(y))),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                compare(&format!("{path}[{index}]"), x, y, changes);
            }
        }
        _ if before != after => changes.push((path.to_string(), shown(before), shown(after))),
        _ => {}
    }
}

fn union_keys(a: &Map<String, Value>, b: &Map<String, Value>) -> Vec<String> {
    let mut keys: Vec<String> = a.keys().cloned().collect();
    for key in b.keys() {
        if !a.contains_key(key) {
            keys.push(key.clone());
        }
    }
    keys
}

/// A value as it reads in a field line: compact JSON, cut to 200 characters.
fn shown(value: &Value) -> String {
    cut(&value.to_string(), 200)
}

/// `text`, cut to `max` characters with `…` when longer.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max).collect::<String>())
    } else {
        text.to_string()
    }
}

/// A string without quotes; anything else as JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
