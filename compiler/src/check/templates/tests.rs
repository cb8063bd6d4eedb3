//! Data-driven tests of prompt template checks (E014, E018).

use crate::check::templates::snake_case;
use crate::check::types::tests::{EXAMPLE, PROMPTS, diagnose};

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

/// The E018 diagnostics of the example with `edits` and `files`: message and help.
fn unavailable(edits: &[(&str, &str)], files: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut text = EXAMPLE.to_string();
    for (from, to) in edits {
        assert!(
            text.contains(from),
            "edit target `{from}` is not in the example"
        );
        text = text.replacen(from, to, 1);
    }
    let mut loader = crate::MemoryLoader::default();
    for (path, content) in PROMPTS.iter().chain(files) {
        loader
            .files
            .insert((*path).to_string(), (*content).to_string());
    }
    crate::compile("spec.charter", &text, &loader)
        .diagnostics
        .into_iter()
        .filter(|diagnostic| diagnostic.code.as_str() == "E018")
        .map(|diagnostic| (diagnostic.message, diagnostic.help.unwrap_or_default()))
        .collect()
}

#[test]
fn unknown_filters_and_tests_are_errors_where_they_are_used() {
    check(
        &[("{{ task.goal }}", "{{ task.goal | to_json }}")],
        &[],
        false,
        &["E018@to_json"],
    );
    check(
        &[(
            "{{ task.goal }}",
            "{% if task.goal is emptyish %}{{ task.goal }}{% endif %}",
        )],
        &[],
        false,
        &["E018@emptyish"],
    );
    let bad = "Plan:\n{{ request.goal }}\n{{ request.constraints | jsonify }}\n";
    check(
        &[],
        &[("prompts/planner.md.j2", bad)],
        true,
        &["E018@prompts/planner.md.j2:3"],
    );

    let found = unavailable(&[("{{ task.goal }}", "{{ task.goal | uper }}")], &[]);
    let [(message, help)] = found.as_slice() else {
        panic!("one E018 expected, got {found:?}");
    };
    assert!(message.contains("filter `uper`"), "{message}");
    assert!(help.starts_with("did you mean `upper`?"), "{help}");
    assert!(
        help.contains("`tojson`") && help.contains("`strip_mention`"),
        "{help}"
    );

    let found = unavailable(
        &[(
            "{{ task.goal }}",
            "{% if task.goal is definde %}x{% endif %}",
        )],
        &[],
    );
    assert!(
        found
            .iter()
            .any(|(message, help)| message.contains("test `definde`")
                && help.starts_with("did you mean `defined`?")),
        "{found:?}"
    );
}

#[test]
fn filters_and_tests_the_renderer_provides_pass() {
    check(
        &[(
            "{{ task.goal }}",
            "{{ task | tojson }} {{ task.goal | upper | strip_mention }} {{ task.acceptance | join(\", \") | default(\"none\") }}{% if task.goal is defined and task.acceptance is not none %}x{% endif %}{% filter lower %}Y{% endfilter %}",
        )],
        &[],
        false,
        &[],
    );
}

#[test]
fn loading_another_template_is_an_error() {
    check(
        &[(
            "{{ task.goal }}",
            "{{ task.goal }}{% include \"shared/rules.md.j2\" %}",
        )],
        &[],
        false,
        &["E018@include"],
    );
    let bad = "Plan:\n{% extends \"base.j2\" %}\n{% from \"m.j2\" import x %}\n";
    check(
        &[],
        &[("prompts/planner.md.j2", bad)],
        true,
        &[
            "E018@prompts/planner.md.j2:2",
            "E018@prompts/planner.md.j2:3",
        ],
    );
    let found = unavailable(
        &[(
            "{{ task.goal }}",
            "{% import \"m.j2\" as m %}{{ task.goal }}",
        )],
        &[],
    );
    let [(message, help)] = found.as_slice() else {
        panic!("one E018 expected, got {found:?}");
    };
    assert!(message.contains("`{% import %}`"), "{message}");
    assert!(help.contains("macro"), "{help}");
}
