//! Tests of the feedback value and its Markdown: item filtering, contract retries, and what `{{ feedback }}` prints.

use serde_json::json;

use super::*;
use crate::engine::validate::Violation;

fn gate_feedback() -> Feedback {
    let mut feedback = Feedback::new(Reason::Gate, 2);
    feedback.issues = vec![
        issue(IssueFields {
            code: "DESIGN_ERROR",
            severity: "error",
            gate: Some("validity"),
            rule: "no_errors",
            message: "rule `no_errors` does not hold",
            detail: Some(&json!([{"node": "upload", "message": "ftp_upload needs a password"}])),
            items: &[],
        }),
        issue(IssueFields {
            code: "STAGE_FAILED",
            severity: "error",
            gate: Some("quality"),
            rule: "all_done",
            message: "rule `all_done` does not hold",
            detail: None,
            items: &["T-002".to_string()],
        }),
    ];
    feedback
        .judges
        .insert("check".into(), json!({"issues": [{"severity": "error"}]}));
    feedback
}

#[test]
fn the_value_has_every_field_the_design_names() {
    let value = gate_feedback().to_value();
    for field in ["reason", "round", "issues", "judges", "previous", "human"] {
        assert!(value.get(field).is_some(), "missing {field} in {value}");
    }
    assert_eq!(value["reason"], "gate");
    assert_eq!(value["round"], 2);
    assert_eq!(value["issues"][0]["detail"][0]["node"], "upload");
    assert_eq!(value["issues"][1]["items"], json!(["T-002"]));
}

#[test]
fn an_item_sees_its_own_issues_and_those_naming_no_item() {
    let feedback = gate_feedback();
    let own = feedback.for_item("T-002", Some(json!({"output": "old"})));
    assert_eq!(own.issues.len(), 2);
    assert_eq!(own.previous, Some(json!({"output": "old"})));
    let other = feedback.for_item("T-001", None);
    let codes: Vec<&str> = other
        .issues
        .iter()
        .filter_map(|issue| issue["code"].as_str())
        .collect();
    assert_eq!(codes, ["DESIGN_ERROR"]);
}

#[test]
fn a_contract_retry_keeps_what_the_call_was_fixing() {
    let violations = vec![Violation {
        path: "tasks[0].id".into(),
        message: "missing field".into(),
    }];
    let mut earlier = gate_feedback();
    earlier.human = Some(json!({"approved": true, "note": "be brief"}));
    let feedback = contract(
        Some(earlier),
        3,
        "Plan",
        &violations,
        Some(json!({"tasks": [{}]})),
    );
    assert_eq!(feedback.reason, Reason::Contract);
    assert_eq!(feedback.round, 2, "the round being fixed is kept");
    assert_eq!(feedback.issues.len(), 3);
    assert_eq!(feedback.issues[0]["code"], "CONTRACT_VIOLATION");
    assert_eq!(feedback.issues[0]["message"], "tasks[0].id: missing field");
    assert!(feedback.judges.contains_key("check"));
    assert_eq!(
        feedback.human,
        Some(json!({"approved": true, "note": "be brief"}))
    );
    assert_eq!(feedback.previous, Some(json!({"tasks": [{}]})));
}

#[test]
fn markdown_shows_issues_details_judges_previous_and_the_note() {
    let mut feedback = gate_feedback();
    feedback.previous = Some(json!({"workflow_id": "wf-1"}));
    feedback.human = Some(json!({"approved": false, "note": "use sftp"}));
    let text = markdown(&feedback.to_value());
    for expected in [
        "## Feedback",
        "round 2 did not pass its gate",
        "**DESIGN_ERROR** (error, gate `validity`, rule `no_errors`)",
        "ftp_upload needs a password",
        "(items: T-002)",
        "### What the judges found",
        "`check`:",
        "### Your previous output",
        "\"workflow_id\": \"wf-1\"",
        "The person rejected. Their note:",
        "> use sftp",
    ] {
        assert!(text.contains(expected), "{expected:?} not in:\n{text}");
    }
}

#[test]
fn markdown_of_a_bare_human_answer_has_no_empty_sections() {
    let mut feedback = Feedback::new(Reason::Human, 1);
    feedback.human = Some(json!({"approved": true}));
    let text = markdown(&feedback.to_value());
    assert!(!text.contains("Issues"), "{text}");
    assert!(!text.contains("judges"), "{text}");
    assert!(text.ends_with("The person approved."), "{text}");
}

#[test]
fn the_value_a_call_keeps_gives_its_feedback_back() {
    let mut feedback = gate_feedback();
    feedback.previous = Some(json!({"output": "old"}));
    feedback.human = Some(json!({"decision": "revise", "note": "shorter"}));
    let value = feedback.clone().into_value();
    assert_eq!(value, feedback.to_value());
    assert_eq!(Feedback::from_value(&value), Some(feedback.clone()));
    assert_eq!(Feedback::human_in(&value), feedback.human);
    // Without `previous` and `human` (written as none): none again.
    let bare = gate_feedback();
    assert_eq!(Feedback::from_value(&bare.clone().into_value()), Some(bare));
    for reason in [
        Reason::Check,
        Reason::Replan,
        Reason::Human,
        Reason::Contract,
    ] {
        let given = Feedback::new(reason, 1);
        assert_eq!(
            Feedback::from_value(&given.clone().into_value()),
            Some(given)
        );
    }
    assert_eq!(Feedback::human_in(&gate_feedback().into_value()), None);
    assert_eq!(Feedback::from_value(&json!({"reason": "gate"})), None);
    assert_eq!(Feedback::from_value(&json!("feedback")), None);
}
