//! Data-driven tests of prompt template checks (E014).

use crate::check::templates::snake_case;
use crate::check::types::tests::{EXAMPLE, diagnose};

/// The example with `edits` applied (first occurrence each) and the prompt files
/// overridden by `files`; returns our diagnostics as `CODE@FILE:LINE` or `CODE@snippet`.
fn check(edits: &[(&str, &str)], files: &[(&str, &str)], by_line: bool, expected: &[&str]) {
    let mut text = EXAMPLE.to_string();
    for (from, to) in edits {
        assert!(
            text.contains(from),
            "edit target `{from}` is not in the example"
        );
        text = text.replacen(from, to, 1);
    }
    let found = diagnose(&text, files, by_line);
    let mut expected: Vec<String> = expected.iter().map(|item| (*item).to_string()).collect();
    expected.sort();
    assert_eq!(found, expected, "edits: {edits:?} files: {files:?}");
}

#[test]
fn snake_case_names() {
    for (contract, variable) in [
        ("Task", "task"),
        ("WorkflowPlan", "workflow_plan"),
        ("Candidate", "candidate"),
        ("HTTPRequest", "http_request"),
        ("Plan2Go", "plan2_go"),
        ("Snake_Case", "snake_case"),
        ("ÜberPlanÉtat", "über_plan_état"),
    ] {
        assert_eq!(snake_case(contract), variable);
    }
}

#[test]
fn inline_prompts() {
    check(
        &[("{{ task.goal }}", "{{ tsk.goal }}")],
        &[],
        false,
        &["E014@tsk"],
    );
    check(
        &[("{{ task.goal }}", "{{ task.gaol }}")],
        &[],
        false,
        &["E014@gaol"],
    );
    check(
        &[(
            "{{ task.goal }}",
            "{{ task.goal }} {{ feedback }} {{ rules }} {{ tools }} {{ output_schema }} {% for x in task.acceptance %}{{ x }}{{ loop.index }}{% endfor %} {{ range(3) }}",
        )],
        &[],
        false,
        &[],
    );
    check(
        &[("{{ task.goal }}", "{{ task.goal }")],
        &[],
        true,
        &["E014@spec.charter:52"],
    );
}

#[test]
fn file_prompts() {
    let bad = "Plan:\n{{ request.goal }}\n{{ reqest.goal }}\n";
    check(
        &[],
        &[("prompts/planner.md.j2", bad)],
        true,
        &["E014@prompts/planner.md.j2:3"],
    );
    check(
        &[],
        &[("prompts/planner.md.j2", bad)],
        false,
        &["E014@reqest"],
    );
    let field = "{{ request.constraints }} {{ request.goals }}";
    check(
        &[],
        &[("prompts/planner.md.j2", field)],
        false,
        &["E014@goals"],
    );
    let broken = "ok\n{% if request.goal %}\nno end\n";
    check(
        &[],
        &[("prompts/planner.md.j2", broken)],
        true,
        &["E014@prompts/planner.md.j2:2"],
    );
}

#[test]
fn role_file_body_is_the_template() {
    let role = "---\nid: creative\nmodel: default\ninput: Task\noutput: StageResult\n---\nWrite {{ task.goal }} for {{ request }}\n";
    check(
        &[],
        &[("roles/creative.md", role)],
        true,
        &["E014@roles/creative.md:7"],
    );
}
