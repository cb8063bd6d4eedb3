//! The diff of two traces, event by event and field by field (DESIGN §11): a changed score shows as `gate.score: 4.67 -> 4.5`, not as two 600-character JSON lines.
//!
//! Events are aligned by their content without `seq` (an event inserted early would
//! otherwise change every later line), then each changed event is compared field by
//! field; events only one side has are shown whole. The text is plain; `report::colorize`
//! colours it for a terminal.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// The field-level diff of the JSON-lines traces `old` and `new`, under `---`/`+++`
/// headers naming them; empty when they hold the same events.
///
/// Lines: `~ event N (kind, round R, step S, item I)` then `    path: old -> new` per
/// changed field; `- event N: {json}` for an event only `old` has, `+ event N: {json}`
/// for one only `new` has.
pub fn event_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let old_keys: Vec<String> = old_lines.iter().map(|line| without_seq(line)).collect();
    let new_keys: Vec<String> = new_lines.iter().map(|line| without_seq(line)).collect();
    let operations = similar::capture_diff_slices(similar::Algorithm::Myers, &old_keys, &new_keys);
    let mut out = String::new();
    for operation in operations {
        let (tag, old_range, new_range) = operation.as_tag_tuple();
        // Equal: the same events, perhaps renumbered by an insertion before them.
        if tag == similar::DiffTag::Equal {
            continue;
        }
        let (Some(removed), Some(added)) = (old_lines.get(old_range), new_lines.get(new_range))
        else {
            continue;
        };
        // Pair the events of a replaced run one to one where they are of the same kind.
        let paired = removed.len().min(added.len());
        for (before, after) in removed.iter().zip(added.iter()) {
            let (before, after) = (*before, *after);
            match (parse(before), parse(after)) {
                (Some(before_value), Some(after_value))
                    if before_value.get("kind") == after_value.get("kind") =>
                {
                    if before != after {
                        write_changed(&mut out, &before_value, &after_value);
                    }
                }
                _ => {
                    write_whole(&mut out, '-', before);
                    write_whole(&mut out, '+', after);
                }
            }
        }
        for line in removed.iter().skip(paired) {
            write_whole(&mut out, '-', line);
        }
        for line in added.iter().skip(paired) {
            write_whole(&mut out, '+', line);
        }
    }
    if out.is_empty() {
        return out;
    }
    format!("--- {old_name}\n+++ {new_name}\n{out}")
}

/// The line without its `seq` field (the key events are aligned by).
fn without_seq(line: &str) -> String {
    match parse(line) {
        Some(Value::Object(mut fields)) => {
            fields.remove("seq");
            Value::Object(fields).to_string()
        }
        _ => line.to_string(),
    }
}

fn parse(line: &str) -> Option<Value> {
    serde_json::from_str(line).ok()
}

/// `- event 12: {...}` / `+ event 12: {...}`.
fn write_whole(out: &mut String, sign: char, line: &str) {
    let seq = parse(line)
        .and_then(|value| value.get("seq").and_then(Value::as_u64))
        .map(|seq| format!("event {seq}: "))
        .unwrap_or_default();
    let _ = writeln!(out, "{sign} {seq}{line}");
}

/// `~ event 12 (gate, round 1, step judge)` and one line per changed field.
fn write_changed(out: &mut String, before: &Value, after: &Value) {
    let kind = after.get("kind").and_then(Value::as_str).unwrap_or("event");
    let mut place = vec![kind.to_string()];
    if let Some(round) = after.get("round").and_then(Value::as_u64) {
        place.push(format!("round {round}"));
    }
    for field in ["step", "item", "attempt"] {
        if let Some(value) = after.get(field) {
            place.push(format!("{field} {}", plain(value)));
        }
    }
    let seq = match (
        before.get("seq").and_then(Value::as_u64),
        after.get("seq").and_then(Value::as_u64),
    ) {
        (Some(a), Some(b)) if a != b => format!("{a} -> {b}"),
        (_, Some(b)) => b.to_string(),
        (Some(a), None) => a.to_string(),
        (None, None) => "?".to_string(),
    };
    let _ = writeln!(out, "~ event {seq} ({})", place.join(", "));
    let mut changes = Vec::new();
    compare(kind, before, after, &mut changes, true);
    for (path, old, new) in changes {
        let _ = writeln!(out, "    {path}: {old} -> {new}");
    }
}

/// Every leaf that differs, as (path, old, new); the top level's fields are named after
/// the event's kind (`gate.score`); `seq` is left out (it is in the header).
fn compare(
    path: &str,
    before: &Value,
    after: &Value,
    changes: &mut Vec<(String, String, String)>,
    top: bool,
) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = union_keys(a, b);
            for key in keys {
                if top && key == "seq" {
                    continue;
                }
                let child = format!("{path}.{key}");
                match (a.get(&key), b.get(&key)) {
                    (Some(x), Some(y)) => compare(&child, x, y, changes, false),
                    (Some(x), None) => changes.push((child, shown(x), "(none)".to_string())),
                    (None, Some(y)) => changes.push((child, "(none)".to_string(), shown(y))),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                compare(&format!("{path}[{index}]"), x, y, changes, false);
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
    let text = value.to_string();
    if text.chars().count() > 200 {
        format!("{}…", text.chars().take(200).collect::<String>())
    } else {
        text
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
mod tests {
    use super::event_diff;

    #[test]
    fn a_changed_score_is_one_field_line() {
        let old = "{\"seq\":0,\"t_ms\":0,\"round\":0,\"kind\":\"run_started\"}\n{\"seq\":1,\"t_ms\":5,\"round\":1,\"step\":\"judge\",\"kind\":\"gate\",\"score\":4.67,\"passed\":true,\"rules\":[{\"name\":\"a\",\"holds\":true}]}\n";
        let new = "{\"seq\":0,\"t_ms\":0,\"round\":0,\"kind\":\"run_started\"}\n{\"seq\":1,\"t_ms\":5,\"round\":1,\"step\":\"judge\",\"kind\":\"gate\",\"score\":4.5,\"passed\":true,\"rules\":[{\"name\":\"a\",\"holds\":false}]}\n";
        let diff = event_diff(old, new, "old", "new");
        assert_eq!(
            diff,
            "--- old\n+++ new\n~ event 1 (gate, round 1, step judge)\n    gate.rules[0].holds: true -> false\n    gate.score: 4.67 -> 4.5\n"
        );
        assert_eq!(event_diff(old, old, "old", "new"), "");
    }

    #[test]
    fn an_inserted_event_is_one_added_line_not_a_shift_of_every_later_one() {
        let old =
            "{\"seq\":0,\"kind\":\"a\"}\n{\"seq\":1,\"kind\":\"c\"}\n{\"seq\":2,\"kind\":\"d\"}\n";
        let new = "{\"seq\":0,\"kind\":\"a\"}\n{\"seq\":1,\"kind\":\"b\"}\n{\"seq\":2,\"kind\":\"c\"}\n{\"seq\":3,\"kind\":\"d\"}\n";
        let diff = event_diff(old, new, "old", "new");
        assert_eq!(
            diff,
            "--- old\n+++ new\n+ event 1: {\"seq\":1,\"kind\":\"b\"}\n"
        );
    }
}
