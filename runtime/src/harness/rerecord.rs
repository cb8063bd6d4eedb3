//! Adding newly recorded calls to a cassette in place (`charter verify --rerecord --missing-only`, DESIGN §17): the entries a live run added go into the cassette's text, each before the recorded call that followed it in the run, so the entries already there, their comments and layout stay byte for byte.
//!
//! The result must read back as the old cassette with exactly the new calls added, or
//! nothing is returned to write.

use crate::formats::scenario::{CallKey, Cassette, RecordedCall};

/// `text` (the cassette `cassette` was read from) with `added` inserted into its `calls`
/// list, and the cassette that text reads back as. `run_order` is every call key of the
/// run in the order the run made the calls (the recorded ones and the added ones): an
/// added call goes before the first recorded call that came after it in the run, or
/// after the last entry when none did.
pub fn insert_calls(
    text: &str,
    cassette: &Cassette,
    run_order: &[CallKey],
    added: &[RecordedCall],
) -> Result<(String, Cassette), String> {
    let starts = crate::formats::yaml::call_lines(text);
    if starts.is_empty() || starts.len() != cassette.calls.len() {
        return Err(
            "the cassette's `calls` are not a block list of entries, so the new calls cannot \
             be added to it in place"
                .to_string(),
        );
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let line_at = |line: u64| usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX);
    let first = lines
        .get(line_at(starts[0]))
        .ok_or("the cassette's first call is past its end")?;
    let indent = first.len() - first.trim_start_matches(' ').len();
    // Where each added call goes: the 0-based line it is inserted before.
    let end = block_end(&lines, line_at(*starts.last().unwrap_or(&1)));
    let mut inserts: Vec<(usize, String)> = Vec::new();
    for call in added {
        let key = call.key();
        let place = run_order.iter().position(|run| *run == key).unwrap_or(0);
        let before = run_order
            .iter()
            .skip(place + 1)
            .find_map(|later| {
                cassette
                    .calls
                    .iter()
                    .position(|recorded| recorded.key() == *later)
            })
            .and_then(|index| starts.get(index))
            .map_or(end, |line| line_at(*line));
        inserts.push((before, entry_text(call, indent)?));
    }
    let mut out = String::with_capacity(text.len() + 256);
    for (index, line) in lines.iter().enumerate() {
        for (_, entry) in inserts.iter().filter(|(before, _)| *before == index) {
            out.push_str(entry);
        }
        out.push_str(line);
    }
    if !text.is_empty() && !text.ends_with('\n') && inserts.iter().any(|(at, _)| *at >= lines.len())
    {
        out.push('\n');
    }
    for (_, entry) in inserts.iter().filter(|(before, _)| *before >= lines.len()) {
        out.push_str(entry);
    }
    let written = Cassette::from_yaml("cassette.yaml", &out)
        .map_err(|error| format!("the cassette with the new calls does not read back: {error}"))?;
    // The new calls as their text reads back (a latency is kept to the millisecond).
    let entries: String = inserts.iter().map(|(_, entry)| entry.as_str()).collect();
    let added = Cassette::from_yaml(
        "cassette.yaml",
        &format!("version: 1\ncalls:\n{}", strip_indent(&entries, indent)),
    )
    .map_err(|error| format!("a new call does not read back: {error}"))?
    .calls;
    let mut expected: Vec<&RecordedCall> = cassette.calls.iter().chain(&added).collect();
    let mut got: Vec<&RecordedCall> = written.calls.iter().collect();
    expected.sort_by_key(|call| call.key());
    got.sort_by_key(|call| call.key());
    if let Some((want, have)) = expected
        .iter()
        .zip(&got)
        .find(|(want, have)| want != have)
        .map(|(want, have)| (want.key(), have.key()))
        .or_else(|| (expected.len() != got.len()).then(|| (CallKey::new(""), CallKey::new(""))))
    {
        return Err(format!(
            "the cassette with the new calls does not read back as the old one plus them \
             (at {want}, read back {have})"
        ));
    }
    if written.humans != cassette.humans {
        return Err("the cassette's `humans` changed when the new calls were added".to_string());
    }
    Ok((out, written))
}

/// The 0-based line after the `calls` list whose last entry starts at line `last`: the
/// next top-level key, or the end of the text.
fn block_end(lines: &[&str], last: usize) -> usize {
    lines
        .iter()
        .enumerate()
        .skip(last + 1)
        .find(|(_, line)| {
            line.chars()
                .next()
                .is_some_and(|first| !matches!(first, ' ' | '\t' | '#' | '-' | '\n' | '\r'))
        })
        .map_or(lines.len(), |(index, _)| index)
}

/// `text` with `indent` spaces taken off the start of each line.
fn strip_indent(text: &str, indent: usize) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let spaces = line.len() - line.trim_start_matches(' ').len();
            line.get(spaces.min(indent)..).unwrap_or(line)
        })
        .collect()
}

/// `call` as one entry of a block list whose dashes stand at column `indent`.
fn entry_text(call: &RecordedCall, indent: usize) -> Result<String, String> {
    #[derive(serde::Serialize)]
    struct Calls<'a> {
        calls: [&'a RecordedCall; 1],
    }
    let yaml = crate::formats::yaml::to_string("cassette.yaml", &Calls { calls: [call] })
        .map_err(|error| error.to_string())?;
    let body: Vec<&str> = yaml.lines().skip(1).collect();
    let own = body
        .first()
        .map_or(0, |line| line.len() - line.trim_start_matches(' ').len());
    let pad = " ".repeat(indent);
    let mut text = String::new();
    for line in body {
        let line = line.get(own..).unwrap_or(line.trim_start());
        if !line.is_empty() {
            text.push_str(&pad);
        }
        text.push_str(line);
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(step: &str, text: &str) -> RecordedCall {
        let yaml =
            format!("version: 1\ncalls:\n  - {{ step: {step}, response: {{ text: {text} }} }}\n");
        let cassette = Cassette::from_yaml("c", &yaml).expect("a call");
        cassette.calls.into_iter().next().expect("one call")
    }

    #[test]
    fn an_added_call_goes_before_the_recorded_call_that_followed_it() {
        let text = "version: 1\n# kept\ncalls:\n  - { step: plan, response: { text: p } }   # why\n  - step: work\n    response:\n      text: w\n";
        let cassette = Cassette::from_yaml("c", text).expect("cassette");
        let outline = call("outline", "o");
        let order = [
            cassette.calls[0].key(),
            outline.key(),
            cassette.calls[1].key(),
        ];
        let (out, written) =
            insert_calls(text, &cassette, &order, std::slice::from_ref(&outline)).expect("added");
        assert!(out.starts_with(
            "version: 1\n# kept\ncalls:\n  - { step: plan, response: { text: p } }   # why\n  - "
        ));
        assert!(out.ends_with("  - step: work\n    response:\n      text: w\n"));
        let steps: Vec<&str> = written
            .calls
            .iter()
            .map(|call| call.step.as_str())
            .collect();
        assert_eq!(steps, ["plan", "outline", "work"]);
    }

    #[test]
    fn an_added_call_last_in_the_run_goes_after_the_list_and_before_the_next_key() {
        let text = "version: 1\ncalls:\n- step: plan\n  response: { text: p }\nhumans: []\n";
        let cassette = Cassette::from_yaml("c", text).expect("cassette");
        let done = call("done", "d");
        let order = [cassette.calls[0].key(), done.key()];
        let (out, written) =
            insert_calls(text, &cassette, &order, std::slice::from_ref(&done)).expect("added");
        assert!(out.starts_with("version: 1\ncalls:\n- step: plan\n  response: { text: p }\n- "));
        assert!(out.ends_with("humans: []\n"));
        assert_eq!(written.calls.len(), 2);
    }
}
