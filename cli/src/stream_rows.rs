//! The rows of a run's live stream besides its trace events (each role's output, each tool call as it starts and ends) and what a finished run tells (`result_of`): one shape for a served run (`serve`) and a run in Restate (`worker`).

use charter_runtime::engine::provider::CallKey;
use charter_runtime::engine::run::RunOutcome;
use charter_runtime::world::escape;
use serde_json::{Value, json};

/// The most characters of a role's output in a `role_output` event.
pub(crate) const MAX_OUTPUT_CHARS: usize = 4_000;

/// The kinds of the rows a run's stream has besides its trace events.
pub(crate) const LIVE_ROW_KINDS: [&str; 3] = ["role_output", "tool_started", "tool_finished"];

pub(crate) fn tool_started_row(key: &CallKey, tool: &str) -> Value {
    with_key(key, json!({"kind": "tool_started", "tool": tool}))
}

pub(crate) fn tool_finished_row(key: &CallKey, tool: &str, ok: bool) -> Value {
    with_key(
        key,
        json!({"kind": "tool_finished", "tool": tool, "ok": ok}),
    )
}

/// A role's answer as its stream shows it: as JSON when it is JSON and short, else as
/// text cut past [`MAX_OUTPUT_CHARS`].
pub(crate) fn role_output_row(key: &CallKey, answer: &str) -> Value {
    let output = match serde_json::from_str::<Value>(answer) {
        Ok(value) if answer.chars().count() <= MAX_OUTPUT_CHARS => value,
        _ => Value::String(escape::block(answer, MAX_OUTPUT_CHARS)),
    };
    with_key(key, json!({"kind": "role_output", "output": output}))
}

fn with_key(key: &CallKey, mut event: Value) -> Value {
    event["round"] = json!(key.round);
    event["step"] = json!(key.step);
    if let Some(item) = &key.item {
        event["item"] = json!(item);
    }
    event["attempt"] = json!(key.attempt);
    if let Some(role) = &key.role {
        event["role"] = json!(role);
    }
    event
}

/// What a finished run tells: `{outcome, reason, rounds, message?, best?, delivered?,
/// answer?, answered_by?}` (a served run's, whose page cuts a long answer, and a Restate
/// worker's).
pub(crate) fn result_of(outcome: &RunOutcome) -> Value {
    let mut result = json!({
        "outcome": outcome.outcome.to_string(),
        "reason": outcome.reason.to_string(),
        "rounds": outcome.rounds,
    });
    if let Some(message) = &outcome.message {
        result["message"] = json!(message);
    }
    if let Some(best) = &outcome.best {
        result["best"] = json!(best);
    }
    if let Some(delivered) = &outcome.delivered {
        result["delivered"] =
            json!({"candidate_id": delivered.candidate_id, "hash": delivered.hash});
    }
    if let Some(answer) = &outcome.answer {
        result["answer"] = answer.clone();
    }
    if let Some(role) = &outcome.answered_by {
        result["answered_by"] = json!(role);
    }
    result
}
