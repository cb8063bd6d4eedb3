//! Conversations over HTTP (DESIGN §13.2): `POST /sessions/{id}/turns {spec?, input, role?}` runs one turn of a `session` spec as `charter chat` does — a served run from the session kept in `.charter/sessions/ID.json`, saved after a turn that answered — and `GET /sessions/{id}` gives the turns.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use charter_runtime::world::sessions::{load, save_turn, session_path};
use serde_json::{Value, json};

use super::runs::{ServedSpec, Turn};
use super::{Served, error};

/// The conversations this server holds: the sessions taking a turn now, and every turn
/// it ran, by session.
#[derive(Debug, Default)]
pub(crate) struct Conversations {
    busy: Mutex<BTreeSet<String>>,
    turns: Mutex<BTreeMap<String, Vec<Value>>>,
}

impl Conversations {
    fn busy(&self) -> MutexGuard<'_, BTreeSet<String>> {
        self.busy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn turns(&self) -> MutexGuard<'_, BTreeMap<String, Vec<Value>>> {
        self.turns
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Holds session `id` for one turn; freed when dropped.
struct Taking<'a>(&'a Conversations, String);

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        self.0.busy().remove(&self.1);
    }
}

/// The session spec a turn names (`spec`), or the one session spec served.
fn conversation_spec<'a>(
    served: &'a Served,
    body: &Value,
) -> Result<&'a ServedSpec, Box<Response>> {
    let sessions: Vec<&ServedSpec> = served
        .runs
        .specs
        .iter()
        .filter(|spec| spec.spec.session.is_some())
        .collect();
    let named = body.get("spec").and_then(Value::as_str);
    let found = match named {
        Some(name) => sessions.iter().find(|spec| spec.name == name),
        None if sessions.len() == 1 => sessions.first(),
        None => None,
    };
    found.copied().ok_or_else(|| {
        let names: Vec<&str> = sessions.iter().map(|spec| spec.name.as_str()).collect();
        let message = match (named, names.is_empty()) {
            (_, true) => "no spec this server runs declares a `session`: it holds no conversation"
                .to_string(),
            (Some(name), false) => format!(
                "`{}` is not a conversation this server holds; give \"spec\" as one of {}",
                charter_runtime::world::escape::one_line(name, 100),
                names.join(", ")
            ),
            (None, false) => format!(
                "give the conversation's spec as \"spec\": one of {}",
                names.join(", ")
            ),
        };
        Box::new(error(StatusCode::NOT_FOUND, &message))
    })
}

/// The turn's input: an object as it is, or a line of text in the request contract's one
/// string field (as `charter chat` takes a typed line), with the body's `role` (a role id
/// or display name, as `/role` takes it in the chat) in the request's `role` field;
/// checked against the contract.
fn turn_input(served: &ServedSpec, body: &Value) -> Result<Value, Box<Response>> {
    let mut input = match body.get("input") {
        Some(Value::String(text)) => {
            let field = crate::chat_role::chat_field(&served.spec)
                .map_err(|message| Box::new(error(StatusCode::UNPROCESSABLE_ENTITY, &message)))?;
            json!({ field: text })
        }
        Some(input) => input.clone(),
        None => {
            return Err(Box::new(error(
                StatusCode::BAD_REQUEST,
                "give the turn's \"input\": a line of text, or the request as an object",
            )));
        }
    };
    match body.get("role") {
        None | Some(Value::Null) => {}
        Some(Value::String(name)) => {
            let role = crate::chat_role::resolve_role(&served.spec, name)
                .map_err(|message| Box::new(error(StatusCode::UNPROCESSABLE_ENTITY, &message)))?;
            if let Some(fields) = input.as_object_mut() {
                fields.insert(
                    crate::chat_role::ROLE_FIELD.to_string(),
                    Value::String(role),
                );
            }
        }
        Some(_) => {
            return Err(Box::new(error(
                StatusCode::BAD_REQUEST,
                "\"role\" is a role's id or display name, or null",
            )));
        }
    }
    charter_runtime::engine::validate::validate_request(&served.spec, &input).map_err(
        |violations| {
            let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
            Box::new(
                (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    Json(json!({
                        "error": "the input does not match the request contract; no turn was taken",
                        "violations": listed,
                    })),
                )
                    .into_response(),
            )
        },
    )
}

/// `POST /sessions/{id}/turns`: one turn, run to its end; `{session, turn, run, input,
/// outcome, reason, answer?, answered_by?, ...}`.
pub(super) async fn take_turn(
    State(served): State<Arc<Served>>,
    UrlPath(id): UrlPath<String>,
    body: axum::body::Bytes,
) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(problem) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("the body is not JSON ({problem}); send {{\"input\": \"...\"}}"),
            );
        }
    };
    let path = match session_path(&crate::recording::sessions_dir(), &id) {
        Ok(path) => path,
        Err(problem) => return error(StatusCode::BAD_REQUEST, &problem.to_string()),
    };
    let spec = match conversation_spec(&served, &body) {
        Ok(spec) => spec,
        Err(response) => return *response,
    };
    let input = match turn_input(spec, &body) {
        Ok(input) => input,
        Err(response) => return *response,
    };
    if !served.conversations.busy().insert(id.clone()) {
        return error(
            StatusCode::CONFLICT,
            &format!("session {id} is taking a turn; send the next one when it has answered"),
        );
    }
    let _taking = Taking(&served.conversations, id.clone());
    let session = match load(&path, &spec.spec) {
        Ok(session) => session,
        Err(problem) => return error(StatusCode::CONFLICT, &problem.to_string()),
    };
    if !served.runs.try_admit() {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            "as many runs are running as this server runs at once (--max-runs); try again when one has ended",
        );
    }
    let number = session.next_turn();
    let started = session.turn_count;
    let run = match served
        .runs
        .start_turn(spec, input.clone(), Some(Turn { session, number }))
    {
        Ok(run) => run,
        Err(message) => {
            served.runs.release();
            return error(StatusCode::INTERNAL_SERVER_ERROR, &message);
        }
    };
    let result = run.finished().await;
    let mut turn =
        json!({"session": id, "spec": spec.name, "turn": number, "run": run.id, "input": input});
    if let (Some(fields), Some(turn_fields)) = (result.as_object(), turn.as_object_mut()) {
        for (name, value) in fields {
            turn_fields
                .entry(name.clone())
                .or_insert_with(|| value.clone());
        }
    }
    if let Some(next) = run.next_session() {
        if let Err(problem) = save_turn(&path, &spec.spec, started, &next, served.runs.scrubber()) {
            turn["saved"] = json!(false);
            turn["note"] = json!(problem.to_string());
        } else {
            turn["saved"] = json!(true);
        }
    } else {
        turn["saved"] = json!(false);
        turn["note"] = json!("the turn did not answer: the session is unchanged");
    }
    served
        .conversations
        .turns()
        .entry(id)
        .or_default()
        .push(turn.clone());
    Json(turn).into_response()
}

/// `GET /sessions/{id}`: the turns this server ran of the session, or — for a session
/// kept from before — the turns its file keeps (`session ... keep N`).
pub(super) async fn session_turns(
    State(served): State<Arc<Served>>,
    UrlPath(id): UrlPath<String>,
) -> Response {
    let path = match session_path(&crate::recording::sessions_dir(), &id) {
        Ok(path) => path,
        Err(problem) => return error(StatusCode::BAD_REQUEST, &problem.to_string()),
    };
    if let Some(turns) = served.conversations.turns().get(&id) {
        return Json(json!({"session": id, "turns": turns})).into_response();
    }
    for spec in served
        .runs
        .specs
        .iter()
        .filter(|spec| spec.spec.session.is_some())
    {
        if let Ok(session) = load(&path, &spec.spec)
            && session.turn_count > 0
        {
            let first = session.turn_count + 1 - session.turns.len() as u64;
            let turns: Vec<Value> = session
                .turns
                .iter()
                .zip(first..)
                .map(|(kept, number)| {
                    json!({
                        "turn": number,
                        "spec": spec.name,
                        "input": kept.get("request"),
                        "answer": kept.get("answer"),
                        "answered_by": kept.get("role"),
                        "outcome": "completed",
                    })
                })
                .collect();
            return Json(json!({"session": id, "spec": spec.name, "turns": turns})).into_response();
        }
    }
    error(
        StatusCode::NOT_FOUND,
        &format!("there is no session `{id}` (POST /sessions/{id}/turns starts one)"),
    )
}
