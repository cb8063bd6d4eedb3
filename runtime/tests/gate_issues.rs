//! What a gate's issues name (DESIGN §8.1): the items a rule over `candidate.items` fails for, the failed and skipped items a rule reading `candidate.failed` means, none for a rule over anything else; and that only warning-level issues make a passing gate act (§8.5).

mod support;

use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use serde_json::{Value, json};
use support::{Replayed, replay};

/// The `work_orders` fixture with its coverage gate replaced by `gate`, whose issue
/// `codes` rerun the work.
fn with_gate(gate: &str, codes: &str) -> CompiledSpec {
    let path = format!(
        "{}/tests/fixtures/work_orders.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let start = text.find("gate coverage on work {").unwrap_or_default();
    let end = start + text[start..].find("\n}\n").unwrap_or_default() + 3;
    let text = format!("{}{gate}\n{}", &text[..start], &text[end..]).replace(
        "ORDERS_FAILED, ORDER_NOT_OK, LOW_COVERAGE -> rerun work",
        &format!("{codes} -> rerun work"),
    );
    let compilation = compile("work_orders.charter", &text, &MemoryLoader::default());
    assert!(
        !compilation.has_errors(),
        "{:#?}\n{text}",
        compilation.diagnostics
    );
    compilation
        .spec
        .unwrap_or_else(|| panic!("no compiled spec"))
}

const PLAN: &str = r#"calls:
  - { step: plan, response: { tasks: [
      { id: T1, goal: "collect" },
      { id: T2, goal: "summarise", depends_on: [T1] },
      { id: T3, goal: "illustrate" } ] } }
"#;

fn done(item: &str, status: &str) -> String {
    format!(
        "  - {{ step: work, item: {item}, response: {{ task_id: {item}, status: {status}, text: \"{item}\" }} }}\n  \
         - {{ step: work, item: {item}, role: reviewer, response: {{ task_id: {item}, quality: 8 }} }}\n"
    )
}

fn run(spec: &CompiledSpec, calls: &str) -> Replayed {
    replay(
        spec,
        r#"{"need": "a report"}"#,
        &format!("{calls}humans:\n  - {{ step: confirm, answer: {{ approved: true }} }}\n"),
    )
}

/// The items each issue of the first gate event names, by code.
fn items_by_code(replayed: &Replayed) -> Vec<(String, Value)> {
    let gate = replayed
        .of_kind("gate")
        .into_iter()
        .find(|event| event["gate"] == "coverage")
        .unwrap_or_else(|| panic!("no coverage gate event"));
    gate["issues"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|issue| {
            (
                issue["code"].as_str().unwrap_or_default().to_string(),
                issue["items"].clone(),
            )
        })
        .collect()
}

#[test]
fn each_issue_names_the_items_its_rule_fails_for() {
    let spec = with_gate(
        r#"gate coverage on work {
  hard all_done: len(candidate.failed) == 0 and len(candidate.skipped) == 0  else ORDERS_FAILED
  hard all_ok:   (every r in candidate.items: r.status == ok) and len(plan.tasks) > 0  else ORDER_NOT_OK
  hard planned:  every o in plan.tasks: o.goal == "collect"  else ODD_GOAL
  pass when true
}"#,
        "ORDERS_FAILED, ORDER_NOT_OK, ODD_GOAL",
    );
    // T1 fails (T2, after it, is skipped); T3 is done but not ok.
    let calls = format!(
        "{PLAN}  - {{ step: work, item: T1, error: {{ status: 400, message: bad request }} }}\n{}",
        done("T3", "failed")
    );
    let replayed = run(&spec, &calls);
    assert_eq!(
        items_by_code(&replayed),
        [
            ("ORDERS_FAILED".to_string(), json!(["T1", "T2"])),
            ("ORDER_NOT_OK".to_string(), json!(["T3"])),
            ("ODD_GOAL".to_string(), json!([])),
        ],
        "a rule reading `candidate.failed`/`skipped` names those items; one over \
         `candidate.items` (inside `and` too) the items it fails for; one over the plan none"
    );
}

#[test]
fn a_passing_gate_acts_on_its_warnings_only() {
    // The score is below its rule's threshold (an error-level LOW_COVERAGE) while the gate
    // passes: the repair table's LOW_COVERAGE arm is for failing gates, so nothing reruns.
    let spec = with_gate(
        r#"gate coverage on work {
  hard all_ok: every r in candidate.items: r.status == ok  else ORDER_NOT_OK
  score done weight 1: 7 * len(candidate.items) / len(plan.tasks)  below 9 LOW_COVERAGE
  pass when score >= 5
}"#,
        "ORDER_NOT_OK, LOW_COVERAGE",
    );
    let calls = format!(
        "{PLAN}{}{}{}  - {{ step: deliver, response: {{ candidate_id: c1, summary: all }} }}\n",
        done("T1", "ok"),
        done("T2", "ok"),
        done("T3", "ok")
    );
    let replayed = run(&spec, &calls);
    replayed.assert_ending("completed{gate_passed}");
    assert_eq!(
        items_by_code(&replayed),
        [("LOW_COVERAGE".to_string(), json!([]))]
    );
    assert!(
        replayed.of_kind("repair").is_empty(),
        "an error-level issue of a passing gate is not a warning"
    );
}
