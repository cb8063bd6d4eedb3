//! Tests of the session state: defaults, turns kept, remembered fields, turns kept, remembered fields.

use serde_json::{Map, json};

use super::*;
use crate::testing::compile_spec;

pub(crate) const SPEC: &str = r#"spec chat version "1"
contract Request { text: string }
contract Reply { text: string }
session Chat keep 2 { role: string?  mood: string = "calm"  count: int = 0 }
remember role = run.answered_by
role talker { model: "openai:m" prompt: """{{ request.text }} {{ session.mood }}""" input: Request output: Reply }
flow { talk = talker(request) -> done }
"#;

pub(crate) fn remembered(pairs: &[(&str, serde_json::Value)]) -> Map<String, serde_json::Value> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_string(), value.clone()))
        .collect()
}

#[test]
fn a_new_session_has_the_fields_defaults_and_no_turns() {
    let session = Session::new(&compile_spec(SPEC)).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        session.value(),
        json!({"mood": "calm", "count": 0, "turns": []})
    );
    assert_eq!(session.next_turn(), 1);
}

#[test]
fn a_spec_without_a_session_has_none() {
    let spec = compile_spec(
        r#"spec plain version "1"
contract Request { text: string }
contract Reply { text: string }
role talker { model: "openai:m" prompt: """{{ request.text }}""" input: Request output: Reply }
flow { talk = talker(request) -> done }
"#,
    );
    assert!(matches!(
        Session::new(&spec),
        Err(SessionError::NoSession(_))
    ));
}

#[test]
fn turns_are_kept_up_to_keep_and_remembered_fields_assigned() {
    let spec = compile_spec(SPEC);
    let mut session = Session::new(&spec).unwrap_or_else(|error| panic!("{error}"));
    for (index, text) in ["one", "two", "three"].iter().enumerate() {
        session = session
            .after_turn(
                &spec,
                &json!({"text": text}),
                &json!({"text": format!("re {text}")}),
                Some("talker"),
                &remembered(&[("role", json!("talker")), ("count", json!(index + 1))]),
            )
            .unwrap_or_else(|error| panic!("{error}"));
    }
    assert_eq!(session.turn_count, 3);
    assert_eq!(
        session.value(),
        json!({
            "role": "talker", "mood": "calm", "count": 3,
            "turns": [
                {"request": {"text": "two"}, "answer": {"text": "re two"}, "role": "talker"},
                {"request": {"text": "three"}, "answer": {"text": "re three"}, "role": "talker"},
            ]
        }),
        "keep 2: the oldest turn is dropped"
    );
}

#[test]
fn a_remembered_none_clears_an_optional_field_and_a_bad_value_is_refused() {
    let spec = compile_spec(SPEC);
    let session = Session::new(&spec).unwrap_or_else(|error| panic!("{error}"));
    let session = session
        .after_turn(
            &spec,
            &json!({"text": "a"}),
            &json!({"text": "b"}),
            None,
            &remembered(&[("role", json!("x"))]),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    let cleared = session
        .after_turn(
            &spec,
            &json!({"text": "a"}),
            &json!({"text": "b"}),
            None,
            &remembered(&[("role", json!(null))]),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(cleared.fields.get("role"), None);
    let refused = session.after_turn(
        &spec,
        &json!({"text": "a"}),
        &json!({"text": "b"}),
        None,
        &remembered(&[("count", json!("many"))]),
    );
    assert!(
        refused
            .as_ref()
            .is_err_and(|message| message.contains("count")),
        "{refused:?}"
    );
}
