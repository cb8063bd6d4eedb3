//! The behaviour drift of a re-recorded scenario against its golden trace (DESIGN §17): how the run ended (outcome, reason, delivered candidate) and what its gates scored, golden → now, as a table of the rows that differ.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use charter_runtime::formats::trace::TraceEvent;
use charter_runtime::world::escape::{MAX_LINE_CHARS, one_line};
use serde_json::Value;

/// What the drift table compares: how the run ended and what its gates scored.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Summary {
    pub outcome: String,
    pub reason: String,
    pub delivered: String,
    /// `gate candidate` → `score` (or `passed`/`failed` for a gate without a score).
    pub gates: BTreeMap<String, String>,
}

/// One row of the drift table: what, golden, now.
pub(super) type Row = (String, String, String);

impl Summary {
    /// The summary of the golden trace snapshot in `dir` (an empty one when it has none).
    pub fn of_golden(dir: &Path) -> Summary {
        let events: Vec<Value> =
            std::fs::read_to_string(dir.join(charter_runtime::harness::SNAPSHOT_FILE))
                .unwrap_or_default()
                .lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect();
        Summary::of(&events)
    }

    /// The summary of a run's events.
    pub fn of_run(events: &[TraceEvent]) -> Summary {
        let events: Vec<Value> = events
            .iter()
            .filter_map(|event| serde_json::to_value(event).ok())
            .collect();
        Summary::of(&events)
    }

    fn of(events: &[Value]) -> Summary {
        let mut summary = Summary::default();
        let text = |event: &Value, field: &str| match event.get(field) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        for event in events {
            match event.get("kind").and_then(Value::as_str) {
                Some("run_finished") => {
                    summary.outcome = text(event, "outcome");
                    summary.reason = text(event, "reason");
                    summary.delivered = match event.get("delivered").and_then(Value::as_bool) {
                        Some(true) => text(event, "best"),
                        _ => "-".to_string(),
                    };
                }
                Some("gate") => {
                    let score = match event.get("score").and_then(Value::as_f64) {
                        Some(score) => format!("{score}"),
                        None => match event.get("passed").and_then(Value::as_bool) {
                            Some(true) => "passed".to_string(),
                            _ => "failed".to_string(),
                        },
                    };
                    let name = format!("gate {} {}", text(event, "gate"), text(event, "candidate"));
                    summary.gates.insert(name, score);
                }
                _ => {}
            }
        }
        summary
    }
}

/// The rows that differ between the golden and now.
pub(super) fn drift_rows(golden: &Summary, now: &Summary) -> Vec<Row> {
    let mut rows = Vec::new();
    for (what, old, new) in [
        ("outcome", &golden.outcome, &now.outcome),
        ("reason", &golden.reason, &now.reason),
        ("delivered", &golden.delivered, &now.delivered),
    ] {
        if old != new {
            rows.push((what.to_string(), old.clone(), new.clone()));
        }
    }
    let names: BTreeSet<&String> = golden.gates.keys().chain(now.gates.keys()).collect();
    let score = |gates: &BTreeMap<String, String>, name: &String| {
        gates.get(name).cloned().unwrap_or_else(|| "-".to_string())
    };
    for name in names {
        let (old, new) = (score(&golden.gates, name), score(&now.gates, name));
        if old != new {
            rows.push((name.clone(), old, new));
        }
    }
    rows
}

/// The drift table (`drift  golden  -> now`, one row per difference), or the one line
/// that says there is none and how the run ended.
pub(super) fn drift_table(now: &Summary, drift: &[Row]) -> String {
    let mut out = String::new();
    if drift.is_empty() {
        let _ = writeln!(
            out,
            "  no drift: {} ({}), delivered {}",
            one_line(&now.outcome, MAX_LINE_CHARS),
            one_line(&now.reason, MAX_LINE_CHARS),
            one_line(&now.delivered, MAX_LINE_CHARS)
        );
        return out;
    }
    let width = drift
        .iter()
        .map(|row| row.0.len())
        .max()
        .unwrap_or(0)
        .max(5);
    let old_width = drift
        .iter()
        .map(|row| row.1.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let _ = writeln!(out, "  {:width$}  {:old_width$}    now", "drift", "golden");
    for (what, old, new) in drift {
        let _ = writeln!(
            out,
            "  {:width$}  {:old_width$} -> {}",
            one_line(what, MAX_LINE_CHARS),
            one_line(old, MAX_LINE_CHARS),
            one_line(new, MAX_LINE_CHARS)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_drift_table_holds_only_what_changed_golden_then_now() {
        let golden = Summary::of(&[
            json!({"kind": "gate", "gate": "quality", "candidate": "c1", "passed": false, "score": 6.5}),
            json!({"kind": "run_finished", "outcome": "completed", "reason": "gate_passed",
                   "best": "c1", "delivered": true}),
        ]);
        let now = Summary::of(&[
            json!({"kind": "gate", "gate": "quality", "candidate": "c1", "passed": true, "score": 8.0}),
            json!({"kind": "run_finished", "outcome": "completed", "reason": "gate_passed",
                   "best": "c2", "delivered": false}),
        ]);
        let rows = drift_rows(&golden, &now);
        assert_eq!(
            rows,
            [
                ("delivered".to_string(), "c1".to_string(), "-".to_string()),
                (
                    "gate quality c1".to_string(),
                    "6.5".to_string(),
                    "8".to_string()
                ),
            ]
        );
        assert!(drift_rows(&now, &now).is_empty());
        let table = drift_table(&now, &rows);
        assert!(
            table.contains("  gate quality c1  6.5    -> 8\n"),
            "{table}"
        );
        assert!(drift_table(&now, &[]).starts_with("  no drift: completed (gate_passed)"));
    }
}
