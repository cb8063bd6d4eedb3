//! Tests of the `messages: chat` layout: the turns as a conversation and the transcript that is hashed.

use serde_json::json;

use charter_compiler::{MemoryLoader, compile};

use super::*;

/// Compiles `text` with `files` beside it, failing the test on any error.
fn compile_spec(text: &str, files: &[(&str, &str)]) -> CompiledSpec {
    let mut loader = MemoryLoader::default();
    for (path, content) in files {
        loader
            .files
            .insert((*path).to_string(), (*content).to_string());
    }
    let compilation = compile("chat.charter", text, &loader);
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => spec,
        _ => panic!("does not compile: {:?}", compilation.diagnostics),
    }
}

const SPEC: &str = r#"
spec chat version "1"
import role "roles/helper.md"
models { default = "openai:gpt-4o" }
contract Request { text: string  role: string? }
contract Reply { text: string  notes: list<string> = [] }
session Chat keep 5 { role: string? }
remember role = run.answered_by
flow { answer = helper(request) -> done }
"#;

fn spec() -> CompiledSpec {
    compile_spec(
        SPEC,
        &[(
            "roles/helper.md",
            "---\nid: helper\nmessages: chat\n---\nYou help.\n",
        )],
    )
}

#[test]
fn turns_become_alternating_messages_and_the_request_comes_last_without_its_mention() {
    let spec = spec();
    let session = json!({"role": "helper", "turns": [
        {"request": {"text": "@helper first"}, "answer": {"text": "one", "notes": []}, "role": "helper"},
        {"request": {"text": "second"}, "answer": {"text": "two"}, "role": "gone"},
    ]});
    let chat = ChatMessages::build(
        &spec,
        &spec.roles["helper"],
        "You help.\n".to_string(),
        Some(&json!({"text": "@helper third"})),
        Some(&session),
    );
    let speakers: Vec<(&str, &str)> = chat
        .messages
        .iter()
        .map(|message| (message.speaker.as_str(), message.text.as_str()))
        .collect();
    // A role the spec no longer has: its answer's first string field is not known, so the
    // answer is shown as JSON.
    assert_eq!(
        speakers,
        [
            ("user", "@helper first"),
            ("assistant", "one"),
            ("user", "second"),
            ("assistant", r#"{"text":"two"}"#),
            ("user", "third"),
        ]
    );
    assert_eq!(
        chat.transcript(),
        "[system]\nYou help.\n\n[user]\n@helper first\n\n[assistant]\none\n\n[user]\nsecond\n\n[assistant]\n{\"text\":\"two\"}\n\n[user]\nthird"
    );
}

#[test]
fn without_a_session_there_is_only_the_current_message() {
    let spec = spec();
    let chat = ChatMessages::build(
        &spec,
        &spec.roles["helper"],
        "S".to_string(),
        Some(&json!({"text": "hi"})),
        None,
    );
    assert_eq!(chat.transcript(), "[system]\nS\n\n[user]\nhi");
}
