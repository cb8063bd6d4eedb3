//! Conversation state kept between turns (DESIGN §9.4): a spec's `session` fields, the last `keep` turns, and the next state after a turn.
//!
//! A [`Session`] is a plain value: the scheduler reads it as `session` and, after a turn
//! that answered, returns the next one ([`Session::after_turn`]: the turn appended, the
//! oldest dropped past `keep`, the `remember` values assigned). Its file is read and
//! written by `world::sessions`.

use charter_compiler::CompiledSpec;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::engine::validate::{Validator, violations_text};

/// The session file's format version.
pub const SESSION_VERSION: u32 = 1;

/// One conversation's state between turns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// The format version ([`SESSION_VERSION`]).
    pub version: u32,
    /// The spec the session belongs to (a session of another spec is refused).
    pub spec: String,
    /// How many turns have been taken (`session.turns` keeps only the last `keep`).
    pub turn_count: u64,
    /// The session contract's fields, defaults filled in.
    pub fields: Map<String, Value>,
    /// The last `keep` turns, oldest first: `{request, answer, role?}`.
    pub turns: Vec<Value>,
}

/// Why a session cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "session id `{0}` is not a plain name: use letters, digits, `-` and `_` (at most 64, not starting with `-` or `.`)"
    )]
    BadId(String),
    #[error("spec `{0}` declares no `session`, so it keeps nothing between turns")]
    NoSession(String),
    #[error("cannot read session file {path}: {message}")]
    Read { path: String, message: String },
    #[error("session file {path} belongs to spec `{found}`, not `{expected}`")]
    OtherSpec {
        path: String,
        found: String,
        expected: String,
    },
    #[error("cannot write session file {path}: {message}")]
    Write { path: String, message: String },
    #[error(
        "session file {path} moved on while this turn ran (it is at turn {found}, this turn followed turn {expected}): another turn of the session was saved meanwhile, so this one is not"
    )]
    MovedOn {
        path: String,
        found: u64,
        expected: u64,
    },
}

impl Session {
    /// A new conversation for `spec`: the session fields' defaults, no turns.
    pub fn new(spec: &CompiledSpec) -> Result<Session, SessionError> {
        let Some(session) = &spec.session else {
            return Err(SessionError::NoSession(spec.name.clone()));
        };
        let fields = Validator::for_spec(spec)
            .validate(&session.contract, &json!({}))
            .ok()
            .and_then(|value| match value {
                Value::Object(fields) => Some(fields),
                _ => None,
            })
            .unwrap_or_default();
        Ok(Session {
            version: SESSION_VERSION,
            spec: spec.name.clone(),
            turn_count: 0,
            fields,
            turns: Vec::new(),
        })
    }

    /// What expressions and templates read as `session`: the fields plus `turns`.
    pub fn value(&self) -> Value {
        let mut value = self.fields.clone();
        value.insert("turns".to_string(), Value::Array(self.turns.clone()));
        Value::Object(value)
    }

    /// The number of the next turn (1 for a new session).
    pub fn next_turn(&self) -> u64 {
        self.turn_count + 1
    }

    /// The session after a turn that answered: the turn appended (the oldest dropped past
    /// `keep`), and each remembered field assigned (a value that does not fit its field is
    /// refused with the violations, and nothing changes).
    pub fn after_turn(
        &self,
        spec: &CompiledSpec,
        request: &Value,
        answer: &Value,
        role: Option<&str>,
        remembered: &Map<String, Value>,
    ) -> Result<Session, String> {
        let Some(session) = &spec.session else {
            return Err(format!("spec `{}` declares no session", spec.name));
        };
        let mut fields = self.fields.clone();
        for (field, value) in remembered {
            if value.is_null() {
                fields.remove(field);
            } else {
                fields.insert(field.clone(), value.clone());
            }
        }
        let fields =
            match Validator::for_spec(spec).validate(&session.contract, &Value::Object(fields)) {
                Ok(Value::Object(fields)) => fields,
                Ok(_) => Map::new(),
                Err(violations) => {
                    return Err(format!(
                        "the remembered values do not fit session `{}`: {}",
                        session.contract,
                        violations_text(&violations)
                    ));
                }
            };
        let mut turn = Map::new();
        turn.insert("request".to_string(), request.clone());
        turn.insert("answer".to_string(), answer.clone());
        if let Some(role) = role {
            turn.insert("role".to_string(), Value::String(role.to_string()));
        }
        let mut turns = self.turns.clone();
        turns.push(Value::Object(turn));
        let keep = usize::try_from(session.keep).unwrap_or(usize::MAX);
        if turns.len() > keep {
            turns.drain(..turns.len() - keep);
        }
        Ok(Session {
            version: SESSION_VERSION,
            spec: self.spec.clone(),
            turn_count: self.turn_count + 1,
            fields,
            turns,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
