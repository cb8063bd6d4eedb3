//! Pinning each recorded call to the prompt it answered: `verify --accept` writes a
//! `prompt_hash` into every model call of a pinned cassette that lacks one (DESIGN §10, §18).
//!
//! The hashes come from the replay's own trace (each `model_call` event carries the hash
//! of the prompt it sent), so pinning renders and hashes nothing twice. The cassette is
//! edited as text, one field inserted per entry, so its comments and layout stay; the
//! result must read back as the same cassette with those hashes set, or nothing is written.

use std::collections::BTreeMap;

use crate::formats::scenario::{CallKey, Cassette};
use crate::formats::trace::{EventKind, TraceEvent};
use crate::world::replay::StalePrompt;

/// A call's place in a conversation and its key: (turn, key).
pub type TurnKey = (u64, CallKey);

/// The fields that make a call's key; `prompt_hash` goes after them.
const KEY_FIELDS: [&str; 6] = ["turn", "step", "round", "item", "attempt", "role"];

/// The hash of the prompt of every model call in `events`, by turn and call key. A call
/// of a role other than its step's own (the judge of a per-item check) is keyed with
/// that role, as the cassette keys it.
pub fn call_prompt_hashes(events: &[TraceEvent]) -> BTreeMap<TurnKey, String> {
    let mut hashes = BTreeMap::new();
    let mut turn = 1;
    let mut step_roles: BTreeMap<&str, &str> = BTreeMap::new();
    for event in events {
        match &event.kind {
            EventKind::RunStarted { turn: started, .. } => turn = started.unwrap_or(1),
            EventKind::StepStarted {
                role: Some(role), ..
            } => {
                if let Some(step) = &event.step {
                    step_roles.insert(step, role);
                }
            }
            EventKind::ModelCall {
                role, prompt_hash, ..
            } => {
                let Some(step) = &event.step else { continue };
                let own = step_roles.get(&**step).is_some_and(|own| *own == role);
                let key = CallKey {
                    step: step.to_string(),
                    round: event.round,
                    item: event.item.clone(),
                    attempt: event.attempt.unwrap_or(1),
                    role: (!own).then(|| role.clone()),
                };
                hashes.insert((turn, key), prompt_hash.clone());
            }
            _ => {}
        }
    }
    hashes
}

/// How many model calls of `cassette` the run made whose entry has no `prompt_hash` yet.
pub fn unpinned_calls(cassette: &Cassette, hashes: &BTreeMap<TurnKey, String>) -> usize {
    cassette
        .calls
        .iter()
        .filter(|call| call.tool.is_none() && call.prompt_hash.is_none())
        .filter(|call| hashes.contains_key(&(call.turn, call.key())))
        .count()
}

/// `text` (the cassette `cassette` was read from) with a `prompt_hash` inserted into
/// every model call the run made that has none, and the cassette that text reads back
/// as. An entry already pinned keeps its hash (a stale one is reported, never absorbed),
/// unless it is one of `repin`: those get the hash of their prompt now.
pub fn pin_calls(
    text: &str,
    cassette: &Cassette,
    hashes: &BTreeMap<TurnKey, String>,
    repin: &[StalePrompt],
) -> Result<(String, Cassette), String> {
    let lines = crate::formats::yaml::call_lines(text);
    let mut expected = cassette.clone();
    // (the entry's 1-based line, the 0-based index of the next entry's line, the edit)
    let mut edits: Vec<(usize, usize, Edit)> = Vec::new();
    for (index, call) in expected.calls.iter_mut().enumerate() {
        if call.tool.is_some() {
            continue;
        }
        let key = call.key();
        let edit = match &call.prompt_hash {
            None => hashes
                .get(&(call.turn, key))
                .map(|hash| Edit::Insert(hash.clone())),
            Some(old) => repin
                .iter()
                .find(|stale| stale.key == key && stale.recorded == *old)
                .map(|stale| Edit::Replace(old.clone(), stale.now.clone())),
        };
        let Some(edit) = edit else { continue };
        let line = lines
            .get(index)
            .and_then(|line| usize::try_from(*line).ok())
            .ok_or("cannot find the cassette's calls in its text")?;
        let end = lines
            .get(index + 1)
            .and_then(|next| usize::try_from(*next).ok())
            .map_or(usize::MAX, |next| next - 1);
        call.prompt_hash = Some(edit.hash().to_string());
        edits.push((line, end, edit));
    }
    let mut out: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    // From the last entry up, so that an inserted line moves no entry still to edit.
    for (line, end, edit) in edits.iter().rev() {
        match edit {
            Edit::Insert(hash) => insert_hash(&mut out, *line, hash)?,
            Edit::Replace(old, now) => replace_hash(&mut out, *line, *end, old, now)?,
        }
    }
    let pinned: String = out.concat();
    match Cassette::from_yaml(super::CASSETTE_FILE, &pinned) {
        Ok(read) if read == expected => Ok((pinned, expected)),
        _ => Err(
            "cannot write each call's `prompt_hash` so that the cassette reads back the same; \
             add them by hand or re-record it"
                .to_string(),
        ),
    }
}

/// What pinning does to one call entry.
enum Edit {
    /// Writes the `prompt_hash` the entry lacks.
    Insert(String),
    /// Replaces the entry's stale `prompt_hash` (old, now).
    Replace(String, String),
}

impl Edit {
    fn hash(&self) -> &str {
        match self {
            Edit::Insert(hash) | Edit::Replace(_, hash) => hash,
        }
    }
}

/// Replaces `old` by `now` in the first of the lines from 1-based `line` up to (not
/// including) 0-based `end` that holds it: the entry's own `prompt_hash`.
fn replace_hash(
    lines: &mut [String],
    line: usize,
    end: usize,
    old: &str,
    now: &str,
) -> Result<(), String> {
    let start = line.saturating_sub(1);
    let found = lines
        .get_mut(start..end.max(start + 1).min(lines.len()))
        .and_then(|entry| entry.iter_mut().find(|text| text.contains(old)))
        .ok_or_else(|| format!("cannot find the `prompt_hash` of the call at line {line}"))?;
    *found = found.replacen(old, now, 1);
    Ok(())
}

/// Inserts `prompt_hash: "HASH"` after the key fields of the call entry at 1-based `line`:
/// inside `{ ... }` for an entry in flow style, as a line of its own for a block mapping.
fn insert_hash(lines: &mut Vec<String>, line: usize, hash: &str) -> Result<(), String> {
    let index = line.checked_sub(1).ok_or("a call entry at line 0")?;
    let entry = lines
        .get(index)
        .ok_or_else(|| format!("no line {line} in the cassette"))?;
    let field = format!("prompt_hash: \"{hash}\"");
    if let Some(open) = entry.find('{') {
        let at = after_key_fields(entry, open + 1);
        let rest = entry[at..].trim_start();
        let inserted = if rest.starts_with('}') {
            format!("{}, {field} {}", entry[..at].trim_end(), rest)
        } else {
            format!("{} {field}, {}", entry[..at].trim_end(), rest)
        };
        lines[index] = inserted;
        return Ok(());
    }
    let dash = entry
        .find("- ")
        .ok_or_else(|| format!("line {line} is no list entry"))?;
    let indent = dash + 2;
    let mut last = index;
    while let Some(next) = lines.get(last + 1) {
        let key = next.get(indent..).and_then(|rest| rest.split(':').next());
        let at_entry_level = next.len() > indent
            && next[..indent].chars().all(|c| c == ' ')
            && !next[indent..].starts_with(' ');
        if at_entry_level && key.is_some_and(|key| KEY_FIELDS.contains(&key.trim())) {
            last += 1;
        } else {
            break;
        }
    }
    lines.insert(last + 1, format!("{}{field}\n", " ".repeat(indent)));
    Ok(())
}

/// The byte offset in `entry`, from `start` (just after `{`), past the leading
/// `key: value,` pairs whose key is one of the call's key fields (at the closing `}` when
/// the entry holds nothing else).
fn after_key_fields(entry: &str, start: usize) -> usize {
    let mut at = start;
    loop {
        let rest = &entry[at..];
        let skipped = rest.len() - rest.trim_start().len();
        let Some((key, value)) = rest[skipped..].split_once(':') else {
            return at;
        };
        if !KEY_FIELDS.contains(&key.trim()) {
            return at;
        }
        let value_at = at + skipped + key.len() + 1;
        match value_end(value) {
            // Past the key, its colon, the value and its comma.
            Some((end, ',')) => at = value_at + end + 1,
            Some((end, _)) => return value_at + end,
            None => return at,
        }
    }
}

/// The offset of the `,` or `}` that ends a plain or quoted scalar `value`, and which.
fn value_end(value: &str) -> Option<(usize, char)> {
    let trimmed = value.trim_start();
    let lead = value.len() - trimmed.len();
    let body_end = match trimmed.chars().next() {
        Some(quote @ ('"' | '\'')) => lead + 1 + trimmed[1..].find(quote)? + 1,
        _ => lead,
    };
    let end = body_end + value[body_end..].find([',', '}', '{', '['])?;
    match value[end..].chars().next() {
        Some(found @ (',' | '}')) => Some((end, found)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(keys: &[(&str, Option<&str>, Option<&str>)]) -> BTreeMap<TurnKey, String> {
        keys.iter()
            .map(|(step, item, role)| {
                let mut key = CallKey::new(*step);
                key.item = item.map(str::to_string);
                key.role = role.map(str::to_string);
                ((1, key), format!("sha256:{step}"))
            })
            .collect()
    }

    #[test]
    fn flow_and_block_entries_get_their_hash_after_the_key_fields() {
        let text = "version: 1\n# kept\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan, response: { goal: g } }   # why\n  - step: work\n    item: \"T, 1\"\n    response:\n      text: t\n  - { step: work, item: \"T, 1\", role: judge, attempt: 1 }\n  - { step: check, tool: lint, result: {} }\n";
        let cassette = Cassette::from_yaml("cassette.yaml", text).expect("reads");
        let (pinned, read) = pin_calls(
            text,
            &cassette,
            &hashes(&[
                ("plan", None, None),
                ("work", Some("T, 1"), None),
                ("work", Some("T, 1"), Some("judge")),
            ]),
            &[],
        )
        .expect("pins");
        assert_eq!(
            pinned,
            "version: 1\n# kept\nrecorded: { spec_hash: x }\ncalls:\n  - { step: plan, prompt_hash: \"sha256:plan\", response: { goal: g } }   # why\n  - step: work\n    item: \"T, 1\"\n    prompt_hash: \"sha256:work\"\n    response:\n      text: t\n  - { step: work, item: \"T, 1\", role: judge, attempt: 1, prompt_hash: \"sha256:work\" }\n  - { step: check, tool: lint, result: {} }\n"
        );
        assert_eq!(unpinned_calls(&read, &hashes(&[("plan", None, None)])), 0);
    }

    #[test]
    fn a_call_already_pinned_or_not_made_is_left_alone() {
        let text = "version: 1\ncalls:\n  - { step: plan, prompt_hash: \"sha256:old\", response: {} }\n  - { step: late, response: {} }\n";
        let cassette = Cassette::from_yaml("cassette.yaml", text).expect("reads");
        let made = hashes(&[("plan", None, None)]);
        assert_eq!(unpinned_calls(&cassette, &made), 0);
        let (pinned, _) = pin_calls(text, &cassette, &made, &[]).expect("pins");
        assert_eq!(pinned, text);
        // Asked to (`charter review`), a stale pin takes the hash of the prompt now.
        let stale = StalePrompt {
            key: CallKey::new("plan"),
            role: "planner".into(),
            recorded: "sha256:old".into(),
            now: "sha256:now".into(),
            prompt: String::new(),
        };
        let (repinned, read) = pin_calls(text, &cassette, &made, &[stale]).expect("re-pins");
        assert_eq!(repinned, text.replace("sha256:old", "sha256:now"));
        assert_eq!(read.calls[0].prompt_hash.as_deref(), Some("sha256:now"));
    }

    #[test]
    fn the_hashes_of_a_trace_are_keyed_as_the_cassette_keys_them() {
        let started = |step: &str, role: &str| {
            TraceEvent::new(
                0,
                0,
                1,
                EventKind::StepStarted {
                    role: Some(role.into()),
                    items: None,
                    tool: None,
                },
            )
            .with_step(step)
        };
        let call = |step: &str, role: &str, hash: &str| {
            TraceEvent::new(
                0,
                0,
                1,
                EventKind::ModelCall {
                    role: role.into(),
                    model: "m".into(),
                    prompt_hash: hash.into(),
                },
            )
            .with_step(step)
            .with_item("T-1")
            .with_attempt(2)
        };
        let events = [
            started("work", "executor"),
            call("work", "executor", "sha256:a"),
            call("work", "reviewer", "sha256:b"),
        ];
        let found = call_prompt_hashes(&events);
        let mut own = CallKey::new("work");
        own.item = Some("T-1".into());
        own.attempt = 2;
        let mut judge = own.clone();
        judge.role = Some("reviewer".into());
        assert_eq!(found.get(&(1, own)).map(String::as_str), Some("sha256:a"));
        assert_eq!(found.get(&(1, judge)).map(String::as_str), Some("sha256:b"));
    }
}
