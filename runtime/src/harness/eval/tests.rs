//! Tests of the eval's inputs file, its statistics and its report.

use std::collections::BTreeMap;

use serde_json::json;

use super::report::{Plan, build};
use super::stats::{percentile, wilson_interval};
use super::{EvalLine, RunResult, parse_inputs};
use crate::totals::RunTotals;

#[test]
fn every_line_is_read_with_its_number_and_blank_lines_are_skipped() {
    let text = "{\"input\": {\"goal\": \"a\"}}\n\n{\"input\": {\"goal\": \"b\"}, \"expect\": {\"outcome\": \"failed\", \"steps\": [\"write\"]}, \"name\": \"bad\", \"answers\": [{\"approved\": true}]}\n";
    let lines = parse_inputs(text).unwrap_or_else(|errors| panic!("{errors:?}"));
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].line, 1);
    assert_eq!(lines[1].line, 3);
    assert_eq!(lines[1].label(), "line 3 (bad)");
    assert_eq!(lines[1].expect.steps, vec!["write".to_string()]);
    assert_eq!(lines[1].answers, vec![json!({"approved": true})]);
}

#[test]
fn each_bad_line_is_named_with_why_and_the_others_are_still_read() {
    let text = "[1, 2]\n{\"input\": {}, \"expect\": {\"stesp\": [\"x\"]}}\n{\"inptu\": {}}\nnot json\n{\"expect\": {}}\n{\"input\": {}, \"expect\": {\"outcome\": \"finished\"}}\n";
    let errors = parse_inputs(text).expect_err("every line but none is wrong");
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 6, "{shown:#?}");
    assert!(
        shown[0].starts_with("line 1: is a list, not an object"),
        "{shown:#?}"
    );
    assert!(
        shown[1].starts_with("line 2: unknown key `expect.stesp`; did you mean `steps`?"),
        "{shown:#?}"
    );
    assert!(
        shown[2].starts_with("line 3: unknown key `inptu`; did you mean `input`?"),
        "{shown:#?}"
    );
    assert!(shown[3].starts_with("line 4: not JSON"), "{shown:#?}");
    assert!(shown[4].starts_with("line 5: has no `input`"), "{shown:#?}");
    assert!(shown[5].starts_with("line 6: `expect`:"), "{shown:#?}");
}

#[test]
fn the_wilson_interval_matches_published_values() {
    let close = |(low, high): (f64, f64), (want_low, want_high): (f64, f64)| {
        assert!(
            (low - want_low).abs() < 1e-9 && (high - want_high).abs() < 1e-9,
            "({low}, {high}) is not ({want_low}, {want_high})"
        );
    };
    close(wilson_interval(0, 10), (0.0, 0.277_532_799_862_889_2));
    close(
        wilson_interval(5, 10),
        (0.236_593_090_512_564, 0.763_406_909_487_436),
    );
    close(
        wilson_interval(35, 50),
        (0.562_496_495_355_466, 0.808_964_464_991_190_6),
    );
    close(wilson_interval(0, 0), (0.0, 1.0));
    let (_, high) = wilson_interval(10, 10);
    assert!((high - 1.0).abs() < 1e-12);
}

#[test]
fn percentiles_are_by_nearest_rank() {
    let values: Vec<u64> = (1..=20).collect();
    assert_eq!(percentile(&values, 50), Some(10));
    assert_eq!(percentile(&values, 95), Some(19));
    assert_eq!(percentile(&[7], 95), Some(7));
    assert_eq!(percentile(&[], 50), None);
}

fn run(line: usize, repeat: usize, passed: bool, cost: f64, score: f64) -> RunResult {
    RunResult {
        line,
        repeat,
        set: 0,
        passed,
        ending: if passed {
            "completed{done}"
        } else {
            "failed{max_rounds}"
        }
        .to_string(),
        unmet: if passed {
            Vec::new()
        } else {
            vec!["outcome completed, got failed".to_string()]
        },
        gates: BTreeMap::from([("quality".to_string(), score)]),
        totals: RunTotals {
            calls: 3,
            input_tokens: 10,
            output_tokens: 5,
            cost,
            unpriced: false,
            t_ms: 0,
        },
        latency_ms: None,
    }
}

fn line(number: usize) -> EvalLine {
    EvalLine {
        line: number,
        name: None,
        input: json!({}),
        expect: Default::default(),
        answers: Vec::new(),
    }
}

#[test]
fn the_report_is_the_same_whatever_order_the_runs_finished_in() {
    let lines = [line(1), line(2)];
    let sets = [("spec models".to_string(), BTreeMap::new())];
    let mut runs = vec![
        run(1, 1, true, 0.1, 8.0),
        run(1, 2, false, 0.2, 3.0),
        run(1, 3, true, 0.000_3, 9.5),
        run(2, 1, true, 0.7, 7.0),
        run(2, 2, true, 1e-9, 7.25),
    ];
    let plan = || Plan {
        spec: "review_loop",
        repeat: 3,
        lines: &lines,
        invalid: Vec::new(),
        sets: &sets,
        stopped: None,
    };
    let first = build(plan(), &runs);
    runs.reverse();
    runs.swap(0, 3);
    let second = build(plan(), &runs);
    assert_eq!(
        serde_json::to_string(&first).ok(),
        serde_json::to_string(&second).ok()
    );
    let set = &first.sets[0];
    assert_eq!((set.overall.passed, set.overall.runs), (4, 5));
    assert_eq!(set.flaky, vec![1]);
    assert_eq!(set.inputs[0].failures[0].runs, 1);
    assert_eq!(set.overall.gates["quality"].min, 3.0);
    assert_eq!(first.planned, 6);
    assert_eq!(first.ran, 5);
}
