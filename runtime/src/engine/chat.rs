//! The messages of a `messages: chat` role (DESIGN §9.4): its rendered prompt as the system message, the session's turns as a conversation, then the current request.
//!
//! A role file that says `messages: chat` is sent as
//!
//! 1. one system message: the role's rendered template (its identity, rules and tools);
//! 2. for each turn the session keeps (`session.turns`, oldest first), a user message
//!    with the turn's request text as typed (an `@name` kept, so a role can tell whom an
//!    earlier answer came from) and an assistant message with the turn's answer text;
//! 3. the current request text, its leading `@name` stripped, as the last user message.
//!
//! A request's text is the first `string` field of its contract (the checks make sure
//! the role's input has one); an answer's text is the first `string` field of the output
//! contract of the role that gave it, or the answer as JSON when it has none.
//!
//! What is recorded and hashed for such a call is [`ChatMessages::transcript`], every
//! message under a `[system]`, `[user]` or `[assistant]` line, so a cassette's
//! `prompt_hash` covers the whole conversation and `expect_prompt` can look for the
//! history. A role without `messages: chat` is untouched: its prompt is one user message.

use charter_compiler::graph::{CompiledSpec, RoleIr, TypeIr};
use serde_json::Value;

use crate::engine::mention::KnownNames;
use crate::formats::canonical::canonical_json;

/// What a `messages: chat` call sends: a system message, then the conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessages {
    /// The role's rendered template.
    pub system: String,
    /// Alternating user and assistant messages, starting and ending with the user's.
    pub messages: Vec<ChatMessage>,
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    pub speaker: Speaker,
    pub text: String,
}

/// Who a conversation message is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaker {
    User,
    Assistant,
}

impl Speaker {
    /// The name providers use (`user`, `assistant`).
    pub fn as_str(self) -> &'static str {
        match self {
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
        }
    }
}

impl ChatMessages {
    /// The messages of a call of `role` in `spec`: `system` (the rendered prompt), the
    /// turns of `session` (the value templates see as `session`, if the spec keeps one)
    /// and the role's first input as the current request.
    pub fn build(
        spec: &CompiledSpec,
        role: &RoleIr,
        system: String,
        input: Option<&Value>,
        session: Option<&Value>,
    ) -> ChatMessages {
        let mut messages = Vec::new();
        let request_contract = spec
            .request
            .as_deref()
            .or_else(|| role.inputs.first().map(String::as_str));
        let turns = session
            .and_then(|session| session.get("turns"))
            .and_then(Value::as_array);
        for turn in turns.into_iter().flatten() {
            let request = turn.get("request").unwrap_or(&Value::Null);
            messages.push(ChatMessage {
                speaker: Speaker::User,
                text: text_of(spec, request_contract, request),
            });
            let answered_by = turn
                .get("role")
                .and_then(Value::as_str)
                .and_then(|name| spec.roles.get(name));
            let answer = turn.get("answer").unwrap_or(&Value::Null);
            messages.push(ChatMessage {
                speaker: Speaker::Assistant,
                text: text_of(spec, answered_by.map(|role| role.output.as_str()), answer),
            });
        }
        let current = input.unwrap_or(&Value::Null);
        messages.push(ChatMessage {
            speaker: Speaker::User,
            text: KnownNames::of_spec(spec).strip_mention(&text_of(
                spec,
                role.inputs.first().map(String::as_str),
                current,
            )),
        });
        ChatMessages { system, messages }
    }

    /// Every message under a line naming its speaker: what is recorded and hashed as the
    /// call's prompt.
    pub fn transcript(&self) -> String {
        let mut text = format!("[system]\n{}", self.system.trim_end());
        for message in &self.messages {
            text.push_str(&format!(
                "\n\n[{}]\n{}",
                message.speaker.as_str(),
                message.text.trim_end()
            ));
        }
        text
    }
}

/// The text of `value`, a record of `contract`: its first `string` field, else the value
/// itself when it is a string, else its canonical JSON.
fn text_of(spec: &CompiledSpec, contract: Option<&str>, value: &Value) -> String {
    let field = contract
        .and_then(|name| spec.contracts.get(name))
        .and_then(|contract| {
            contract
                .fields
                .iter()
                .find(|field| matches!(field.ty, TypeIr::String))
        });
    if let Some(text) = field.and_then(|field| value.get(&field.name)?.as_str()) {
        return text.to_string();
    }
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => canonical_json(other),
    }
}

#[cfg(test)]
mod tests;
