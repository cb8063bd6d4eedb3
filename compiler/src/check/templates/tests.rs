//! Data-driven tests of prompt template checks (E014, E018).

use crate::check::types::tests::{EXAMPLE, PROMPTS, diagnose};
use crate::names::snake_case;

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
            "{{ task.goal }}{% include shared_rules %}",
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
    assert!(help.contains("include") && help.contains("macro"), "{help}");
}

/// The example's role file with `body`, and `files`, compiled: every diagnostic as
/// `CODE@FILE:LINE`, and the compiled spec when there was no error.
fn with_role_body(
    body: &str,
    files: &[(&str, &str)],
) -> (Vec<String>, Option<crate::CompiledSpec>) {
    let role =
        format!("---\nid: creative\nmodel: default\ninput: Task\noutput: StageResult\n---\n{body}");
    let mut loader = crate::MemoryLoader::default();
    for (path, content) in PROMPTS.iter().chain(files) {
        loader
            .files
            .insert((*path).to_string(), (*content).to_string());
    }
    loader.files.insert("roles/creative.md".to_string(), role);
    let compilation = crate::compile("spec.charter", EXAMPLE, &loader);
    let found = compilation
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.is_error())
        .map(|diagnostic| {
            let Some(span) = diagnostic.primary_span() else {
                return format!("{}@?", diagnostic.code);
            };
            let (line, _) = compilation.sources.line_column(span.file, span.start);
            let name = compilation
                .sources
                .get(span.file)
                .map_or("?", |file| file.name.as_str());
            format!("{}@{name}:{line} {}", diagnostic.code, diagnostic.message)
        })
        .collect();
    (found, compilation.spec)
}

#[test]
fn an_include_is_read_relative_to_the_including_file_and_compiled_in() {
    let (found, spec) = with_role_body(
        "Write {{ task.goal }}\n{% include \"parts/tone.j2\" %}\n",
        &[
            (
                "roles/parts/tone.j2",
                "Be calm about {{ task.id }}.\n{% include '../../shared/sign.j2' %}",
            ),
            ("shared/sign.j2", "-- the team"),
        ],
    );
    assert_eq!(found, Vec::<String>::new());
    let prompt = spec
        .and_then(|spec| spec.roles.get("creative").cloned())
        .and_then(|role| role.prompt)
        .expect("compiled with a prompt");
    assert_eq!(
        prompt.includes.keys().collect::<Vec<_>>(),
        ["roles/parts/tone.j2", "shared/sign.j2"]
    );
    assert_eq!(prompt.includes["shared/sign.j2"], "-- the team");
}

#[test]
fn a_missing_or_escaping_include_is_an_error_at_its_tag() {
    let (found, _) = with_role_body(
        "Write {{ task.goal }}\n\n{% include \"parts/tone.j2\" %}\n",
        &[],
    );
    assert_eq!(
        found,
        [
            "E016@roles/creative.md:9 cannot read `parts/tone.j2`, included by the prompt template of role `creative`"
        ]
    );
    for escape in ["../../outside.txt", "/etc/passwd"] {
        let body = format!("{{% include \"{escape}\" %}}");
        let (found, _) = with_role_body(&body, &[("../outside.txt", "canary")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("E016@roles/creative.md:7"),
            "{found:?}"
        );
    }
}

#[test]
fn an_included_file_is_checked_where_its_text_is() {
    let (found, _) = with_role_body(
        "{% include \"parts/tone.j2\" %}{% include \"parts/tone.j2\" %}",
        &[(
            "roles/parts/tone.j2",
            "Calm.\n{{ task.goal | uper }}\n{% include 'gone.j2' %}",
        )],
    );
    assert_eq!(
        found,
        [
            "E018@roles/parts/tone.j2:2 template of role `creative` uses the filter `uper`, which prompt templates do not provide",
            "E016@roles/parts/tone.j2:3 cannot read `gone.j2`, included by the prompt template of role `creative`",
        ]
    );
    let (found, _) = with_role_body(
        "{% include \"parts/tone.j2\" %}",
        &[("roles/parts/tone.j2", "Calm.\n{% if %}")],
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("E014@roles/parts/tone.j2:2"),
        "{found:?}"
    );
}

#[test]
fn an_included_file_reads_what_the_role_provides_or_its_includer_binds() {
    let (found, _) = with_role_body(
        "{% for rule in task.acceptance %}{% include \"parts/rule.j2\" %}{% endfor %}",
        &[(
            "roles/parts/rule.j2",
            "- {{ rule }} for {{ task.goal }}\n{{ tsk.id }} {{ task.gaol }}",
        )],
    );
    assert_eq!(
        found,
        [
            "E014@roles/parts/rule.j2:2 template of role `creative` uses `tsk`, which the role does not provide",
            "E014@roles/parts/rule.j2:2 template of role `creative` uses `task.gaol`, but `Task` has no field `gaol`",
        ]
    );
}

#[test]
fn a_file_that_includes_its_includer_is_an_error() {
    let (found, _) = with_role_body(
        "{% include \"parts/a.j2\" %}",
        &[
            ("roles/parts/a.j2", "A\n{% include 'b.j2' %}"),
            ("roles/parts/b.j2", "B\n\n{% include 'a.j2' %}"),
        ],
    );
    assert_eq!(
        found,
        [
            "E018@roles/parts/b.j2:3 the prompt template of role `creative` includes itself: `roles/parts/a.j2` -> `roles/parts/b.j2` -> `roles/parts/a.j2`"
        ]
    );
    let (found, _) = with_role_body("{% include \"../roles/creative.md\" %}", &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("includes itself: `roles/creative.md` -> `roles/creative.md`"),
        "{found:?}"
    );
}

#[test]
fn a_changed_included_piece_changes_the_prompt_and_spec_hashes() {
    let hashes = |piece: &str| {
        let (found, spec) = with_role_body(
            "{% include \"parts/tone.j2\" %}",
            &[("roles/parts/tone.j2", piece)],
        );
        assert_eq!(found, Vec::<String>::new());
        let spec = spec.expect("compiles");
        let prompt = spec.roles["creative"].prompt.clone().expect("a prompt");
        (
            prompt.hash,
            spec.spec_hash,
            spec.source_hashes["roles/parts/tone.j2"].clone(),
        )
    };
    let (prompt, spec, source) = hashes("Be calm {{ task.goal }}.");
    let (prompt_after, spec_after, source_after) = hashes("Be brief {{ task.goal }}.");
    assert_ne!(prompt, prompt_after);
    assert_ne!(spec, spec_after);
    assert_ne!(source, source_after);
}
