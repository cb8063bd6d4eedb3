//! The scheduler on generated cassettes: whatever the models answer (valid, malformed, errors, timeouts, missing calls), a replay ends in an outcome or an error, never a panic, and the same cassette gives the same trace.

mod support;

use support::{fixture, replay};

/// A small deterministic generator (no dependency, same numbers everywhere).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        let index = (self.next() as usize) % options.len().max(1);
        options.get(index).copied().unwrap_or("")
    }
}

/// One generated answer of an executor or reviewer call for `item`.
fn answer(rng: &mut Lcg, item: &str, reviewer: bool) -> String {
    let latency = rng.pick(&["0s", "1s", "2s", "20m"]);
    let body = if reviewer {
        match rng.next() % 5 {
            0 => format!("response: {{ task_id: {item}, quality: 9 }}"),
            1 => "response: { task_id: WRONG, quality: 9 }".to_string(),
            2 => format!("response: {{ task_id: {item}, quality: 2 }}"),
            3 => "raw: \"{ not json\"".to_string(),
            _ => format!("error: {{ status: {} }}", rng.pick(&["429", "500", "401"])),
        }
    } else {
        match rng.next() % 6 {
            0 | 1 => format!("response: {{ task_id: {item}, status: ok, text: done }}"),
            2 => format!("response: {{ task_id: {item}, status: failed, text: \"\" }}"),
            3 => "response: { task_id: 7 }".to_string(),
            4 => "raw: \"```json\\n{}\\n```\"".to_string(),
            _ => format!("error: {{ status: {} }}", rng.pick(&["429", "503", "400"])),
        }
    };
    format!("latency: {latency}, {body}")
}

fn cassette(seed: u64) -> String {
    let mut rng = Lcg(seed);
    let mut calls = String::from(
        "calls:\n  - { step: plan, response: { tasks: [ { id: T1, goal: a }, { id: T2, goal: b, depends_on: [T1] }, { id: T3, goal: c } ] } }\n",
    );
    for round in 1..=2 {
        for item in ["T1", "T2", "T3"] {
            for attempt in 1..=4 {
                if rng.next().is_multiple_of(7) {
                    continue; // an unrecorded call
                }
                calls.push_str(&format!(
                    "  - {{ step: work, round: {round}, item: {item}, attempt: {attempt}, {} }}\n",
                    answer(&mut rng, item, false)
                ));
                calls.push_str(&format!(
                    "  - {{ step: work, round: {round}, item: {item}, role: reviewer, attempt: {attempt}, {} }}\n",
                    answer(&mut rng, item, true)
                ));
            }
        }
        let candidate = rng.pick(&["c1", "c2", "c3"]);
        calls.push_str(&format!(
            "  - {{ step: deliver, round: {round}, response: {{ candidate_id: {candidate}, summary: s }} }}\n"
        ));
    }
    let approved = rng.pick(&["true", "false"]);
    calls.push_str(&format!(
        "humans:\n  - {{ step: confirm, answer: {{ approved: {approved} }} }}\n"
    ));
    if rng.next().is_multiple_of(4) {
        calls.push_str("faults:\n  - { tamper: { after: audit, item: T3 } }\n");
    }
    calls
}

#[test]
fn generated_cassettes_end_without_panics_and_replay_identically() {
    let spec = fixture("work_orders");
    let mut endings = std::collections::BTreeSet::new();
    for seed in 0..25 {
        let calls = cassette(seed);
        let first = replay(&spec, r#"{"need": "x"}"#, &calls);
        let second = replay(&spec, r#"{"need": "x"}"#, &calls);
        assert_eq!(first.jsonl, second.jsonl, "seed {seed}:\n{calls}");
        let ending = first.ending();
        let kind = ending.split('{').next().unwrap_or("").to_string();
        endings.insert(kind);
        if let Some(last) = first.values().last()
            && first.result.is_ok()
        {
            assert_eq!(last["kind"], "run_finished", "seed {seed}");
        }
    }
    // The generator reaches several kinds of ending, errors (unrecorded calls) included.
    assert!(endings.len() >= 3, "{endings:?}");
}
