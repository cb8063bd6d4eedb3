//! `charter verify --rerecord` alone (VCR's `all`): every model call and `tool` step call of the scenario asked of the live providers again, the recorded answers of people replayed; the report says per call whether the live answer is the recording's (`same`, `changed`, `new`, `not made`), and `--accept` writes the run as a fresh cassette in run order.
//!
//! The fresh cassette is what `charter run --record` writes (`Recording::cassette`),
//! pinned to the spec as it is now, with the cassette's `--model` overrides and those
//! given again; each call keeps the `expect_prompt` its recorded call of the same key
//! had (like `expect`, a person's statement of what the role must see).

use std::fmt::Write as _;

use charter_runtime::formats::scenario::{CallKey, Cassette, Recorded, RecordedCall};
use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};
use charter_runtime::world::fork::Fork;

use super::drift::{drift_rows, drift_table};
use super::{Done, Selected, VerifyArgs, run_live, write_checked};
use crate::driver::LiveEnvironment;

/// How a call of the new run compares with the recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// The recording holds the call under its key, with the same answer.
    Same,
    /// The recording holds the call under its key, with another answer.
    Changed,
    /// The recording has no call under its key.
    New,
    /// A recorded call the new run did not make.
    NotMade,
}

impl Answer {
    fn word(self) -> &'static str {
        match self {
            Answer::Same => "same",
            Answer::Changed => "changed",
            Answer::New => "new",
            Answer::NotMade => "not made",
        }
    }
}

/// Runs `one` fully live; reports the calls and the drift, and writes the new recording
/// with `--accept`.
pub(super) fn rerecord(
    args: &VerifyArgs,
    one: &Selected,
    environment: &LiveEnvironment,
) -> Result<Done, String> {
    let fork = Fork::all(one.cassette.clone());
    let mut recorded = Recorded::from_spec(&one.spec);
    recorded.overrides = one.overrides.clone();
    let mut ran = run_live(one, environment, &fork, recorded)?;
    let answers = compare(&one.cassette, &ran.recorded);
    let drift = drift_rows(&ran.golden, &ran.now);
    let mut done = Done {
        report: describe(one, ran.recorded.calls.len(), &answers),
        changed: !drift.is_empty(),
        not_written: None,
    };
    done.report.push_str(&drift_table(&ran.now, &drift));
    if args.accept {
        keep_expect_prompts(&one.cassette, &mut ran.recorded);
        match accept(args, one, &ran.recorded) {
            Ok(line) => done.report.push_str(&line),
            Err(message) => done.not_written = Some(message),
        }
    }
    Ok(done)
}

/// Each call of `now` in run order with how it compares with `recorded`, then each
/// recorded call `now` did not make.
fn compare(recorded: &Cassette, now: &Cassette) -> Vec<(CallKey, Answer)> {
    let mut answers: Vec<(CallKey, Answer)> = now
        .calls
        .iter()
        .map(|call| {
            let key = call.key();
            let answer = match recorded.calls.iter().find(|old| old.key() == key) {
                None => Answer::New,
                Some(old) if same_answer(old, call) => Answer::Same,
                Some(_) => Answer::Changed,
            };
            (key, answer)
        })
        .collect();
    for old in &recorded.calls {
        let key = old.key();
        if !now.calls.iter().any(|call| call.key() == key) {
            answers.push((key, Answer::NotMade));
        }
    }
    answers
}

/// Whether two calls answered the same: the same output (or error) and the same tool
/// calls; latency, usage and the prompt's hash are not the answer.
fn same_answer(old: &RecordedCall, new: &RecordedCall) -> bool {
    let error = |call: &RecordedCall| {
        call.error
            .as_ref()
            .map(|error| (error.status, error.message.clone()))
    };
    let tools = |call: &RecordedCall| {
        call.tool_calls
            .iter()
            .map(|tool| {
                let error = tool.error.as_ref().map(|error| error.message.clone());
                (
                    tool.tool.clone(),
                    tool.args.clone(),
                    tool.result.clone(),
                    error,
                )
            })
            .collect::<Vec<_>>()
    };
    old.response == new.response
        && old.raw == new.raw
        && old.result == new.result
        && error(old) == error(new)
        && tools(old) == tools(new)
}

/// The scenario's first lines: how many calls were made and how many answers differ from
/// the recording, then each call and how it compares.
fn describe(one: &Selected, made: usize, answers: &[(CallKey, Answer)]) -> String {
    let count = |wanted: Answer| answers.iter().filter(|(_, got)| *got == wanted).count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {made} call(s) asked live; against the recording {} same, {} changed, {} new, {} not made",
        one_line(&one.reference.id(), MAX_LINE_CHARS),
        count(Answer::Same),
        count(Answer::Changed),
        count(Answer::New),
        count(Answer::NotMade),
    );
    for (key, answer) in answers {
        let _ = writeln!(
            out,
            "  {:8}  {}",
            answer.word(),
            one_line(&key.to_string(), MAX_LINE_CHARS)
        );
    }
    out
}

/// Gives each call of `new` the `expect_prompt` of the recorded call of its key.
fn keep_expect_prompts(recorded: &Cassette, new: &mut Cassette) {
    for call in &mut new.calls {
        let key = call.key();
        if let Some(old) = recorded.calls.iter().find(|old| old.key() == key) {
            call.expect_prompt.clone_from(&old.expect_prompt);
        }
    }
}

/// Writes `cassette` as the scenario's new recording with its trace snapshot, once the
/// scenario with it verifies (see [`write_checked`]).
fn accept(args: &VerifyArgs, one: &Selected, cassette: &Cassette) -> Result<String, String> {
    let text = cassette
        .to_yaml()
        .map_err(|error| format!("nothing was written: {error}"))?;
    write_checked(args, one, &text)?;
    Ok(format!(
        "  wrote {} ({} call(s), in run order) and its trace.snap; scenario.yaml is kept as written\n",
        one_line(&one.reference.shown("cassette.yaml"), MAX_LINE_CHARS),
        cassette.calls.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cassette(text: &str) -> Cassette {
        Cassette::from_yaml("cassette.yaml", text).unwrap_or_else(|error| panic!("{error}"))
    }

    #[test]
    fn each_call_is_the_same_changed_new_or_not_made_by_its_key() {
        let old = cassette(
            "version: 1\ncalls:\n\
             - { step: plan, latency: 3s, response: { goal: g } }\n\
             - { step: work, response: { done: false } }\n\
             - { step: check, response: { ok: true } }\n",
        );
        let new = cassette(
            "version: 1\ncalls:\n\
             - { step: plan, latency: 20ms, response: { goal: g } }\n\
             - { step: work, response: { done: true } }\n\
             - { step: outline, response: { parts: 2 } }\n",
        );
        let words: Vec<(String, &str)> = compare(&old, &new)
            .into_iter()
            .map(|(key, answer)| (key.step.clone(), answer.word()))
            .collect();
        assert_eq!(
            words,
            [
                ("plan".to_string(), "same"),
                ("work".to_string(), "changed"),
                ("outline".to_string(), "new"),
                ("check".to_string(), "not made"),
            ]
        );
    }

    #[test]
    fn a_recorded_expect_prompt_stays_with_the_call_of_its_key() {
        let old = cassette(
            "version: 1\ncalls:\n\
             - { step: work, response: { done: false }, expect_prompt: { contains: [brief] } }\n",
        );
        let mut new = cassette(
            "version: 1\ncalls:\n- { step: plan, response: {} }\n- { step: work, response: { done: true } }\n",
        );
        keep_expect_prompts(&old, &mut new);
        assert_eq!(new.calls[0].expect_prompt, None);
        assert_eq!(new.calls[1].expect_prompt, old.calls[0].expect_prompt);
    }
}
