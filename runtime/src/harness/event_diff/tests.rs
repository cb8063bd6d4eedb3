//! Tests of `event_diff`: seed traces from `golden/` with steps inserted, removed and changed, diffed as `verify` and `review` show them.

use serde_json::{Value, json};

use super::{duration, event_diff};
use crate::harness::snapshot;

const HAPPY_PATH: &str = include_str!("../../../../golden/closed_loop/happy_path/trace.snap");
const REPAIR_SUCCEEDS: &str =
    include_str!("../../../../golden/closed_loop/repair_succeeds/trace.snap");
const CONVERSATION: &str =
    include_str!("../../../../golden/mention_roles/conversation_sticky_creative/trace.snap");

/// The events of a snapshot file.
fn events_of(file: &str) -> Vec<Value> {
    snapshot::contents(file)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a golden trace line is JSON"))
        .collect()
}

/// The trace of `events`, numbered from 0 in each run as the runtime numbers them.
fn trace_of(events: &[Value]) -> String {
    let mut seq = 0;
    let mut out = String::new();
    for event in events {
        if event["kind"] == "run_started" {
            seq = 0;
        }
        let mut event = event.clone();
        event["seq"] = json!(seq);
        seq += 1;
        out.push_str(&event.to_string());
        out.push('\n');
    }
    out
}

/// The index of the first event of `kind` in `step` and `round`.
fn index_of(events: &[Value], kind: &str, step: &str, round: u64) -> usize {
    events
        .iter()
        .position(|event| event["kind"] == kind && event["step"] == step && event["round"] == round)
        .expect("the seed trace has the event")
}

/// Moves every event after `index` in the same run `ms` later.
fn delay_after(events: &mut [Value], index: usize, ms: i64) {
    for event in events.iter_mut().skip(index + 1) {
        if event["kind"] == "run_started" {
            break;
        }
        event["t_ms"] = json!(event["t_ms"].as_i64().unwrap_or(0) + ms);
    }
}

/// A step `facts` of round `round` run by the planner for 3 s: its step_started,
/// model_call and model_result events, starting at `t_ms`.
fn facts_step(round: u64, t_ms: i64) -> Vec<Value> {
    vec![
        json!({"t_ms": t_ms, "round": round, "step": "facts", "kind": "step_started", "role": "planner"}),
        json!({"t_ms": t_ms, "round": round, "step": "facts", "attempt": 1, "kind": "model_call",
               "role": "planner", "model": "anthropic:claude-sonnet-4-5", "prompt_hash": "sha256:ab"}),
        json!({"t_ms": t_ms + 3000, "round": round, "step": "facts", "attempt": 1, "kind": "model_result",
               "role": "planner", "input_tokens": 100, "output_tokens": 50, "latency_ms": 3000}),
    ]
}

/// The lines `facts_step(round, t_ms)` shows as, numbered from `first`, with `sign`.
fn facts_lines(sign: char, first: usize, round: u64, t_ms: i64) -> String {
    format!(
        "{sign} event {} (step_started, round {round}, step facts, t_ms {t_ms}): {{\"role\":\"planner\"}}\n\
         {sign} event {} (model_call, round {round}, step facts, attempt 1, t_ms {t_ms}): {{\"model\":\"anthropic:claude-sonnet-4-5\",\"prompt_hash\":\"sha256:ab\",\"role\":\"planner\"}}\n\
         {sign} event {} (model_result, round {round}, step facts, attempt 1, t_ms {}): {{\"input_tokens\":100,\"latency_ms\":3000,\"output_tokens\":50,\"role\":\"planner\"}}\n",
        first,
        first + 1,
        first + 2,
        t_ms + 3000
    )
}

/// `events` with the `facts` step inserted after the event at `index` (round `round`) and
/// every later event of the run 3 s later.
fn with_facts_after(events: &[Value], index: usize, round: u64) -> (Vec<Value>, i64) {
    let mut events = events.to_vec();
    let at = events[index]["t_ms"].as_i64().unwrap_or(0);
    delay_after(&mut events, index, 3000);
    events.splice(index + 1..index + 1, facts_step(round, at));
    (events, at)
}

#[test]
fn an_inserted_step_is_its_inserted_events_and_one_line_for_the_later_times() {
    let old = events_of(HAPPY_PATH);
    let plan_done = index_of(&old, "model_result", "plan", 1);
    let (new, at) = with_facts_after(&old, plan_done, 1);
    let diff = event_diff(&trace_of(&old), &trace_of(&new), "old", "new");
    let expected = format!(
        "--- old\n+++ new\n{}~ every later event +3 s (t_ms +3000)\n",
        facts_lines('+', plan_done + 1, 1, at)
    );
    assert_eq!(diff, expected);
}

#[test]
fn a_removed_step_is_its_removed_events_and_one_line_for_the_later_times() {
    let new = events_of(HAPPY_PATH);
    let plan_done = index_of(&new, "model_result", "plan", 1);
    let (old, at) = with_facts_after(&new, plan_done, 1);
    let diff = event_diff(&trace_of(&old), &trace_of(&new), "old", "new");
    let expected = format!(
        "--- old\n+++ new\n{}~ every later event -3 s (t_ms -3000)\n",
        facts_lines('-', plan_done + 1, 1, at)
    );
    assert_eq!(diff, expected);
}

#[test]
fn a_changed_score_is_one_field_line_under_the_time_shift_it_shares() {
    // The evaluator takes 2 s longer and the gate scores lower: the later events move 2 s,
    // said once; the gate shows only its score.
    let old = events_of(HAPPY_PATH);
    let mut new = old.clone();
    let evaluated = index_of(&new, "model_result", "evaluate", 1);
    let latency = new[evaluated]["latency_ms"].as_i64().unwrap_or(0);
    new[evaluated]["latency_ms"] = json!(latency + 2000);
    delay_after(&mut new, evaluated - 1, 2000);
    let gate = index_of(&new, "gate", "judge", 1);
    let score = new[gate]["score"].clone();
    new[gate]["score"] = json!(8.0);
    let diff = event_diff(&trace_of(&old), &trace_of(&new), "old", "new");
    let expected = format!(
        "--- old\n+++ new\n~ every later event +2 s (t_ms +2000)\n\
         ~ event {evaluated} (model_result, round 1, step evaluate, attempt 1)\n    model_result.latency_ms: {latency} -> {}\n\
         ~ event {gate} (gate, round 1, step judge)\n    gate.score: {score} -> 8.0\n",
        latency + 2000
    );
    assert_eq!(diff, expected);
}

#[test]
fn a_step_inserted_in_every_round_of_a_repair_loop_is_aligned_round_by_round() {
    // `execute` runs in rounds 1 and 2 with the same items and attempts: a step inserted
    // after it in both rounds shows twice, each round's events under their own shift.
    let old = events_of(REPAIR_SUCCEEDS);
    let first = index_of(&old, "candidate", "execute", 1);
    let (new, first_at) = with_facts_after(&old, first, 1);
    let second = index_of(&new, "candidate", "execute", 2);
    let (new, second_at) = with_facts_after(&new, second, 2);
    let diff = event_diff(&trace_of(&old), &trace_of(&new), "old", "new");
    let expected = format!(
        "--- old\n+++ new\n{}~ every later event +3 s (t_ms +3000)\n{}~ every later event +6 s (t_ms +6000)\n",
        facts_lines('+', first + 1, 1, first_at),
        facts_lines('+', second + 1, 2, second_at)
    );
    assert_eq!(diff, expected);
}

#[test]
fn repeated_keys_align_by_content_and_each_turn_of_a_conversation_on_its_own() {
    // Turn 1's model call takes 2 s longer and makes one more tool call, traced before
    // the one it made before (same step, round, attempt and kind). Turns 2 and 3, whose
    // events have the keys of turn 1's, do not change.
    let old = events_of(CONVERSATION);
    let mut new = old.clone();
    let result = index_of(&new, "model_result", "creative_turn", 1);
    new[result]["latency_ms"] = json!(9000);
    delay_after(&mut new, result - 1, 2000);
    let tool_call = json!({"t_ms": 9000, "round": 1, "step": "creative_turn", "attempt": 1,
        "kind": "tool_call", "tool": "get_workflow_list", "args": {"keyword": "四格"}, "result": {"workflows": []}});
    new.insert(result + 1, tool_call);
    let diff = event_diff(&trace_of(&old), &trace_of(&new), "old", "new");
    let expected = format!(
        "--- old\n+++ new\n~ every later event +2 s (t_ms +2000)\n\
         ~ event {result} (model_result, round 1, step creative_turn, attempt 1)\n    model_result.latency_ms: 7000 -> 9000\n\
         + event {} (tool_call, round 1, step creative_turn, attempt 1, t_ms 9000): {{\"args\":{{\"keyword\":\"四格\"}},\"result\":{{\"workflows\":[]}},\"tool\":\"get_workflow_list\"}}\n\
         ~ every later event at its old time (t_ms +0)\n",
        result + 1
    );
    assert_eq!(old[result]["t_ms"], 7000, "the seed's call takes 7 s");
    assert_eq!(diff, expected);
}

#[test]
fn an_event_delayed_on_its_own_shows_its_time_as_a_field() {
    let old = "{\"seq\":0,\"t_ms\":0,\"round\":0,\"kind\":\"run_started\"}\n{\"seq\":1,\"t_ms\":5,\"round\":1,\"step\":\"a\",\"kind\":\"step_started\"}\n{\"seq\":2,\"t_ms\":5,\"round\":1,\"step\":\"b\",\"kind\":\"step_started\"}\n";
    let new = "{\"seq\":0,\"t_ms\":0,\"round\":0,\"kind\":\"run_started\"}\n{\"seq\":1,\"t_ms\":9,\"round\":1,\"step\":\"a\",\"kind\":\"step_started\"}\n{\"seq\":2,\"t_ms\":5,\"round\":1,\"step\":\"b\",\"kind\":\"step_started\"}\n";
    assert_eq!(
        event_diff(old, new, "old", "new"),
        "--- old\n+++ new\n~ event 1 (step_started, round 1, step a)\n    step_started.t_ms: 5 -> 9\n"
    );
}

#[test]
fn a_changed_score_is_one_field_line() {
    let old = "{\"seq\":0,\"t_ms\":0,\"round\":0,\"kind\":\"run_started\"}\n{\"seq\":1,\"t_ms\":5,\"round\":1,\"step\":\"judge\",\"kind\":\"gate\",\"score\":4.67,\"passed\":true,\"rules\":[{\"name\":\"a\",\"holds\":true}]}\n";
    let new = "{\"seq\":0,\"t_ms\":0,\"round\":0,\"kind\":\"run_started\"}\n{\"seq\":1,\"t_ms\":5,\"round\":1,\"step\":\"judge\",\"kind\":\"gate\",\"score\":4.5,\"passed\":true,\"rules\":[{\"name\":\"a\",\"holds\":false}]}\n";
    let diff = event_diff(old, new, "old", "new");
    assert_eq!(
        diff,
        "--- old\n+++ new\n~ event 1 (gate, round 1, step judge)\n    gate.rules[0].holds: true -> false\n    gate.score: 4.67 -> 4.5\n"
    );
    assert_eq!(event_diff(old, old, "old", "new"), "");
}

#[test]
fn lines_that_are_not_events_are_compared_as_text() {
    let diff = event_diff(
        "a\n{\"seq\":0,\"kind\":\"x\"}\n",
        "b\n{\"seq\":0,\"kind\":\"x\"}\n",
        "old",
        "new",
    );
    assert_eq!(diff, "--- old\n+++ new\n- a\n+ b\n");
}

#[test]
fn durations_read_as_a_person_says_them() {
    for (ms, shown) in [
        (250, "250 ms"),
        (3000, "3 s"),
        (1500, "1.5 s"),
        (60_000, "1 min"),
        (150_250, "2 min 30.25 s"),
    ] {
        assert_eq!(duration(ms), shown);
    }
}
