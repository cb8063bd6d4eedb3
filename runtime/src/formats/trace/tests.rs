//! Tests of the trace format: exact JSON lines, round trips of every kind, reasons, sinks.

use serde_json::json;

use super::*;
use crate::world::jsonl::JsonlSink;

fn every_kind() -> Vec<EventKind> {
    vec![
        EventKind::RunStarted {
            spec: "s".into(),
            version: "1".into(),
            input: json!({"goal": "g"}),
            turn: None,
        },
        EventKind::PlanFrozen {
            spec_hash: "sha256:aa".into(),
            rules: [("core".to_string(), "sha256:bb".to_string())]
                .into_iter()
                .collect(),
            prompts: BTreeMap::new(),
        },
        EventKind::StepStarted {
            role: Some("planner".into()),
            items: None,
            tool: None,
        },
        EventKind::StepStarted {
            role: Some("executor".into()),
            items: Some(3),
            tool: None,
        },
        EventKind::ModelCall {
            role: "planner".into(),
            model: "openai:m".into(),
            prompt_hash: "sha256:cc".into(),
        },
        EventKind::ModelResult {
            role: "planner".into(),
            input_tokens: 10,
            output_tokens: 5,
            latency_ms: 2000,
        },
        EventKind::ToolCall {
            tool: "web_search".into(),
            args: json!({"text": "q"}),
            result: json!({"urls": []}),
            sandbox: None,
        },
        EventKind::ToolDenied {
            tool: "publish".into(),
            allowed: vec!["web_search".into()],
            rule: None,
        },
        EventKind::ContractViolation {
            contract: "Plan".into(),
            tool: None,
            violations: vec![Violation {
                path: "tasks".into(),
                message: "expected at least 1 item, got 0".into(),
            }],
        },
        EventKind::Timeout { after_ms: 900_000 },
        EventKind::Retry {
            retry: RetryKind::Stage,
            next: 2,
            delay_ms: 0,
            reason: "check failed".into(),
        },
        EventKind::ItemDone {
            status: ItemStatus::Failed,
            error: Some("retries exhausted".into()),
        },
        EventKind::ItemSkipped {
            because: "T-001".into(),
        },
        EventKind::Candidate {
            id: "c1".into(),
            hash: "sha256:dd".into(),
            items: 2,
            failed: vec!["T-1".into()],
            skipped: vec![],
        },
        EventKind::Gate {
            gate: "quality".into(),
            candidate: "c1".into(),
            hash: "sha256:dd".into(),
            passed: false,
            score: Some(7.5),
            rules: vec![RuleResult {
                name: "all_done".into(),
                severity: RuleSeverity::Hard,
                holds: false,
                error: None,
            }],
            scores: vec![ScoreResult {
                name: "relevance".into(),
                weight: 2.0,
                value: Some(10.0),
                error: None,
            }],
            issues: vec![Issue {
                code: "STAGE_FAILED".into(),
                severity: IssueSeverity::Error,
                gate: Some("quality".into()),
                rule: "all_done".into(),
                message: None,
                detail: Some(serde_json::json!(["T-002"])),
                items: vec!["T-002".into()],
            }],
        },
        EventKind::Repair {
            action: RepairAction::Rerun {
                step: "execute".into(),
                with_feedback: true,
            },
            codes: vec!["LOW_RELEVANCE".into()],
            invalidated: vec!["execute".into(), "review".into()],
            items: vec![],
        },
        EventKind::NoProgress {
            rounds: 2,
            limit: 2,
        },
        EventKind::Budget {
            budget: BudgetKind::Tokens,
            used: Number::from(500_100u64),
            limit: Number::from(500_000u64),
        },
        EventKind::Delivery {
            candidate: "c2".into(),
            path: "out/delivery.json".into(),
            expected_hash: "sha256:1".into(),
            actual_hash: "sha256:2".into(),
            matches: false,
        },
        EventKind::InvariantViolated {
            invariant: "bounded_cost".into(),
            message: "run.tokens <= 200000 is false".into(),
        },
        EventKind::Human {
            question: "Approve?".into(),
            answer: json!({"approved": false}),
        },
        EventKind::RunFinished {
            outcome: Outcome::Failed,
            reason: Reason::BudgetExhausted(BudgetKind::Tokens),
            best: Some("c1".into()),
            delivered: false,
            message: None,
        },
    ]
}

#[test]
fn events_serialize_with_the_header_first_and_kind_fields_after() {
    let event = TraceEvent::new(
        7,
        1200,
        1,
        EventKind::Retry {
            retry: RetryKind::Provider,
            next: 2,
            delay_ms: 1000,
            reason: "timeout".into(),
        },
    )
    .with_step("execute")
    .with_item("T-002")
    .with_attempt(1);
    assert_eq!(
        event.to_json_line().ok(),
        Some(r#"{"seq":7,"t_ms":1200,"round":1,"step":"execute","item":"T-002","attempt":1,"kind":"retry","retry":"provider","next":2,"delay_ms":1000,"reason":"timeout"}"#.to_string())
    );
    let finished = TraceEvent::new(
        9,
        5,
        2,
        EventKind::RunFinished {
            outcome: Outcome::Failed,
            reason: Reason::DeliveryMismatch,
            best: None,
            delivered: false,
            message: None,
        },
    );
    assert_eq!(
        finished.to_json_line().ok(),
        Some(r#"{"seq":9,"t_ms":5,"round":2,"kind":"run_finished","outcome":"failed","reason":"delivery_mismatch","delivered":false}"#.to_string())
    );
}

#[test]
fn every_kind_round_trips_through_jsonl() {
    let events: Vec<TraceEvent> = every_kind()
        .into_iter()
        .enumerate()
        .map(|(seq, kind)| TraceEvent::new(seq as u64, seq as u64 * 10, 1, kind).with_step("s"))
        .collect();
    let text = match to_jsonl(&events) {
        Ok(text) => text,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(text.lines().count(), events.len());
    match from_jsonl(&text) {
        Ok(parsed) => assert_eq!(parsed, events),
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn reasons_display_and_parse() {
    let cases = [
        (Reason::GatePassed, "gate_passed"),
        (Reason::MaxRounds, "max_rounds"),
        (Reason::NoProgress, "no_progress"),
        (
            Reason::BudgetExhausted(BudgetKind::Tokens),
            "budget_exhausted{tokens}",
        ),
        (
            Reason::BudgetExhausted(BudgetKind::Cost),
            "budget_exhausted{cost}",
        ),
        (
            Reason::BudgetExhausted(BudgetKind::Wall),
            "budget_exhausted{wall}",
        ),
        (
            Reason::BudgetExhausted(BudgetKind::Steps),
            "budget_exhausted{steps}",
        ),
        (
            Reason::HardGate {
                code: "SECRET_LEAK".into(),
            },
            "hard_gate{SECRET_LEAK}",
        ),
        (Reason::DeliveryMismatch, "delivery_mismatch"),
        (
            Reason::Invariant {
                name: "bounded_cost".into(),
            },
            "invariant{bounded_cost}",
        ),
        (
            Reason::StepFailed {
                step: "execute".into(),
            },
            "step_failed{execute}",
        ),
        (
            Reason::Routed {
                step: "execute".into(),
            },
            "routed{execute}",
        ),
        (Reason::HumanRejected, "human_rejected"),
        (Reason::NoRepairAction, "no_repair_action"),
        (Reason::Cancelled, "cancelled"),
    ];
    for (reason, text) in cases {
        assert_eq!(reason.to_string(), text);
        assert_eq!(text.parse::<Reason>(), Ok(reason.clone()));
        assert_eq!(
            serde_json::to_string(&reason).ok(),
            Some(format!("\"{text}\""))
        );
    }
    for bad in [
        "",
        "gate_passed{x}",
        "budget_exhausted{money}",
        "hard_gate{}",
        "hard_gate{A",
        "oops",
        "step_failed{a}}",
    ] {
        assert!(bad.parse::<Reason>().is_err(), "{bad}");
    }
}

#[test]
fn terminations_display_and_parse() {
    let termination = Termination {
        outcome: Outcome::Failed,
        reason: Reason::DeliveryMismatch,
    };
    assert_eq!(termination.to_string(), "failed{delivery_mismatch}");
    let nested = Termination {
        outcome: Outcome::Failed,
        reason: Reason::BudgetExhausted(BudgetKind::Wall),
    };
    assert_eq!(nested.to_string(), "failed{budget_exhausted{wall}}");
    assert_eq!(
        "failed{budget_exhausted{wall}}".parse::<Termination>(),
        Ok(nested)
    );
    assert_eq!(
        "below_target{max_rounds}"
            .parse::<Termination>()
            .map(|t| t.outcome),
        Ok(Outcome::BelowTarget)
    );
    assert!("done{gate_passed}".parse::<Termination>().is_err());
    for outcome in Outcome::ALL {
        assert_eq!(outcome.to_string().parse::<Outcome>(), Ok(outcome));
    }
}

#[test]
fn sinks_append_in_order() {
    let events: Vec<TraceEvent> = every_kind()
        .into_iter()
        .take(3)
        .enumerate()
        .map(|(seq, kind)| TraceEvent::new(seq as u64, 0, 0, kind))
        .collect();
    let path =
        std::env::temp_dir().join(format!("charter-trace-test-{}.jsonl", std::process::id()));
    let mut memory = MemorySink::new();
    {
        let file = match JsonlSink::create(&path) {
            Ok(file) => file,
            Err(error) => panic!("{error}"),
        };
        let mut tee = Tee(&mut memory, file);
        for event in &events {
            if let Err(error) = tee.append(event) {
                panic!("{error}");
            }
            // Flushed per event: the file already holds every appended line.
            let written = std::fs::read_to_string(&path).unwrap_or_default();
            assert_eq!(written.lines().count() as u64, event.seq + 1);
        }
    }
    assert_eq!(memory.events(), events.as_slice());
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    assert_eq!(Some(written), memory.to_jsonl().ok());
}

#[test]
fn a_sink_that_cannot_be_created_says_where() {
    let error = JsonlSink::create("/nonexistent-dir/charter/trace.jsonl");
    let message = error.map(|_| ()).map_err(|error| error.to_string());
    assert!(
        matches!(&message, Err(text) if text.starts_with("cannot write the trace to /nonexistent-dir/charter/trace.jsonl:")),
        "{message:?}"
    );
}

#[test]
fn the_line_writer_writes_what_serde_writes_for_every_kind() {
    for (n, kind) in every_kind().into_iter().enumerate() {
        let bare = TraceEvent::new(n as u64, 10 * n as u64, 1, kind);
        let full = bare
            .clone()
            .with_step("execute \"quoted\" é")
            .with_item("T-1\n")
            .with_attempt(u64::MAX);
        for event in [bare, full] {
            let serde = serde_json::to_string(&event).ok();
            assert!(serde.is_some());
            assert_eq!(event.to_json_line().ok(), serde);
        }
    }
}

#[test]
fn a_reason_without_its_argument_says_to_quote_it() {
    let error = "step_failed"
        .parse::<Reason>()
        .map_err(|error| error.to_string())
        .err()
        .unwrap_or_default();
    assert!(
        error.ends_with(
            "; `step_failed` takes an argument in braces: quote it in YAML, e.g. `reason: \"step_failed{review}\"` (an unquoted `{` starts a mapping)"
        ),
        "{error}"
    );
    let other = "gate_pased"
        .parse::<Reason>()
        .map_err(|error| error.to_string());
    assert!(
        other
            .as_ref()
            .is_err_and(|error| !error.contains("quote it")),
        "{other:?}"
    );
}
