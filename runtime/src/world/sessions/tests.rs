//! Tests of session files: plain ids, load and save, symlinks, turns that moved on.

use serde_json::{Map, json};

use super::*;
use crate::testing::compile_spec;

use crate::engine::session::tests::{SPEC, remembered};

#[test]
fn session_ids_are_plain_names() {
    for good in ["abc", "chat-1", "A_b-9", &"x".repeat(64)] {
        assert!(validate_id(good).is_ok(), "{good}");
    }
    for bad in [
        "",
        "../escape",
        "a/b",
        "a\\b",
        ".hidden",
        "-flag",
        "a b",
        "é",
        &"x".repeat(65),
    ] {
        assert!(
            matches!(validate_id(bad), Err(SessionError::BadId(_))),
            "{bad:?}"
        );
        assert!(session_path(Path::new("/tmp"), bad).is_err());
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-session-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_saved_session_loads_back_and_a_missing_file_is_a_new_session() {
    let spec = compile_spec(SPEC);
    let dir = temp_dir("roundtrip");
    let path = session_path(&dir.join("sessions"), "s1").unwrap_or_else(|error| panic!("{error}"));
    let fresh = load(&path, &spec).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        fresh,
        Session::new(&spec).unwrap_or_else(|error| panic!("{error}"))
    );
    let next = fresh
        .after_turn(
            &spec,
            &json!({"text": "hi sk-SECRET"}),
            &json!({"text": "hello"}),
            Some("talker"),
            &remembered(&[("role", json!("talker"))]),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    save(&path, &next, &Scrubber::new(["sk-SECRET".to_string()]))
        .unwrap_or_else(|error| panic!("{error}"));
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(!text.contains("sk-SECRET"), "secrets are scrubbed: {text}");
    let loaded = load(&path, &spec).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(loaded.turn_count, 1);
    assert_eq!(loaded.fields.get("role"), Some(&json!("talker")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_session_of_another_spec_or_a_broken_file_is_refused() {
    let spec = compile_spec(SPEC);
    let dir = temp_dir("refused");
    std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("{error}"));
    let other = dir.join("other.json");
    let mut session = Session::new(&spec).unwrap_or_else(|error| panic!("{error}"));
    session.spec = "another".to_string();
    save(&other, &session, &Scrubber::new(Vec::new())).unwrap_or_else(|error| panic!("{error}"));
    assert!(matches!(
        load(&other, &spec),
        Err(SessionError::OtherSpec { .. })
    ));
    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{ not json").unwrap_or_else(|error| panic!("{error}"));
    assert!(matches!(
        load(&broken, &spec),
        Err(SessionError::Read { .. })
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_symlink_at_the_session_file_is_never_written_through() {
    let spec = compile_spec(SPEC);
    let dir = temp_dir("symlink");
    std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("{error}"));
    let canary = dir.join("canary.txt");
    std::fs::write(&canary, "canary").unwrap_or_else(|error| panic!("{error}"));
    let path = dir.join("s.json");
    std::os::unix::fs::symlink(&canary, &path).unwrap_or_else(|error| panic!("{error}"));
    let session = Session::new(&spec).unwrap_or_else(|error| panic!("{error}"));
    assert!(save(&path, &session, &Scrubber::new(Vec::new())).is_err());
    assert_eq!(
        std::fs::read_to_string(&canary).unwrap_or_default(),
        "canary"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_turn_is_not_saved_over_a_session_that_moved_on() {
    let spec = compile_spec(SPEC);
    let dir = temp_dir("moved-on");
    let path = dir.join("s.json");
    let scrubber = Scrubber::new(Vec::new());
    let start = load(&path, &spec).unwrap_or_else(|error| panic!("{error}"));
    let turn = |session: &Session, text: &str| {
        session
            .after_turn(
                &spec,
                &json!({"text": text}),
                &json!({"text": "ok"}),
                None,
                &Map::new(),
            )
            .unwrap_or_else(|error| panic!("{error}"))
    };
    let first = turn(&start, "first");
    save_turn(&path, &spec, start.turn_count, &first, &scrubber)
        .unwrap_or_else(|error| panic!("{error}"));
    // A second turn that also started from the new session, saved after the first.
    let late = turn(&start, "late");
    assert!(matches!(
        save_turn(&path, &spec, start.turn_count, &late, &scrubber),
        Err(SessionError::MovedOn {
            found: 1,
            expected: 0,
            ..
        })
    ));
    let kept = load(&path, &spec).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(kept.turns[0]["request"]["text"], "first");
    let _ = std::fs::remove_dir_all(&dir);
}
