//! Tests of prompt rendering: inputs by snake_case contract name, feedback, rules, tools, output schema.

use serde_json::json;

use super::*;
use crate::testing::compile_spec_with;

const SPEC: &str = r#"spec p version "1"
import role "roles/researcher.md"
rules core version "1" {
  "Never fabricate a tool result."
  "Cite your sources."
}
contract WorkflowPlan { goal: string  steps: list<string> }
contract Query { text: string }
contract Hits { urls: list<string> }
contract Report { summary: string  sources: list<string> = [] }
tool web_search { input: Query  output: Hits  effect: read }
role writer {
  model: "openai:m"
  prompt: """
    Goal: {{ workflow_plan.goal }}
    {% for step in workflow_plan.steps %}* {{ step }}
    {% endfor %}{% if feedback %}Fix ({{ feedback.reason }}):{% for issue in feedback.issues %} {{ issue.code }}={{ issue.message }};{% endfor %}
    {% endif %}Rules:
    {{ rules }}
    First rule: {{ rules[0] }}
    Tools:{% for tool in tools %} {{ tool.name }} ({{ tool.effect }}, {{ tool.input }} -> {{ tool.output }}){% endfor %}
    Required: {{ output_schema.required | join(", ") }}
  """
  rules: [core]
  input: WorkflowPlan
  output: Report
  tools: [web_search]
  max_tool_calls: 2
}
role plain { model: "openai:m"  input: WorkflowPlan  output: Report }
flow {
  write = writer(request) -> research
  research = researcher(request) -> again
  again = plain(request) -> done
}
"#;

const RESEARCHER: &str = "---
id: researcher
model: \"openai:m\"
input: WorkflowPlan
output: Report
tools: [web_search]
max_tool_calls: 3
tool_rules:
  web_search: at most twice, in English
---
Plan: {{ workflow_plan }}
{% for tool in tools %}- {{ tool.name }}{% if tool.note %}: {{ tool.note }}{% endif %}
{% endfor %}{% if not feedback %}No feedback.{% endif %}
";

fn spec() -> CompiledSpec {
    compile_spec_with(SPEC, &[("roles/researcher.md", RESEARCHER)])
}

fn plan() -> Value {
    json!({"goal": "ship", "steps": ["build", "test"]})
}

fn render(role: &str, feedback: Option<&Value>) -> String {
    match render_prompt(&spec(), role, &[plan()], feedback) {
        Ok(text) => text,
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn inline_templates_see_every_variable() {
    let feedback = json!({"reason": "gate", "round": 1, "issues": [{"code": "LOW", "message": "too short"}, {"code": "NO_SOURCES", "message": "cite"}]});
    let text = render("writer", Some(&feedback));
    assert_eq!(
        text,
        "Goal: ship\n* build\n* test\nFix (gate): LOW=too short; NO_SOURCES=cite;\nRules:\n- Never fabricate a tool result.\n- Cite your sources.\nFirst rule: Never fabricate a tool result.\nTools: web_search (read, Query -> Hits)\nRequired: summary"
    );
}

#[test]
fn feedback_is_none_when_absent() {
    let text = render("writer", None);
    assert!(!text.contains("Fix:"), "{text}");
    let null = render("writer", Some(&Value::Null));
    assert_eq!(null, text);
}

#[test]
fn role_files_get_tool_notes_and_records_print_as_json() {
    let text = render("researcher", None);
    assert_eq!(
        text,
        "Plan: {\n  \"goal\": \"ship\",\n  \"steps\": [\n    \"build\",\n    \"test\"\n  ]\n}\n- web_search: at most twice, in English\nNo feedback."
    );
}

#[test]
fn roles_without_a_template_get_the_default_prompt() {
    let text = render(
        "plain",
        Some(
            &json!({"reason": "gate", "round": 1, "issues": [{"code": "LOW", "severity": "error", "rule": "long_enough", "message": "too short"}]}),
        ),
    );
    assert!(
        text.starts_with("## workflow_plan\n{\n  \"goal\": \"ship\""),
        "{text}"
    );
    assert!(
        text.contains("### Issues to fix\n\n- **LOW** (error, rule `long_enough`): too short\n"),
        "{text}"
    );
    assert!(text.contains("Reply with one JSON object that matches this schema and nothing else:\n{\n  \"$schema\""), "{text}");
    assert!(text.contains("\"title\": \"Report\""), "{text}");
}

#[test]
fn feedback_alone_prints_markdown_and_history_and_run_are_data() {
    let spec = compile_spec_with(
        r#"spec h version "1"
contract Req { goal: string }
contract Out { text: string }
role fixer {
  model: "openai:m"
  prompt: """{{ feedback }}|{{ feedback.issues[0].detail.node }}|{% for h in history %}{{ h.step }}#{{ h.round }}.{{ h.visit }}={{ h.output.text }};{% endfor %}|{{ run.round }}"""
  input: Req
  output: Out
  history: [fix] last 2
}
flow { fix = fixer(request) -> done }
"#,
        &[],
    );
    let feedback = crate::engine::feedback::Feedback {
        issues: vec![json!({"code": "BAD", "severity": "error", "rule": "r", "message": "no", "detail": {"node": "upload"}, "items": []})],
        ..crate::engine::feedback::Feedback::new(crate::engine::feedback::Reason::Gate, 1)
    }
    .to_value();
    let history = json!([
        {"step": "fix", "round": 1, "visit": 1, "output": {"text": "a"}},
        {"step": "fix", "round": 2, "visit": 1, "output": {"text": "b"}}
    ]);
    let run = json!({"round": 3, "step_count": 4, "tokens": 0, "cost": 0.0, "elapsed": 0});
    let context = PromptContext {
        feedback: Some(std::sync::Arc::new(feedback)),
        history: Some(std::sync::Arc::new(history)),
        run: Some(std::sync::Arc::new(run)),
        session: None,
    };
    let text = Prompts::new(&spec)
        .render_with("fixer", &[json!({"goal": "g"})], &context)
        .unwrap_or_else(|error| panic!("{error}"));
    let parts: Vec<&str> = text.split('|').collect();
    assert_eq!(parts.len(), 4, "{text}");
    assert!(parts[0].starts_with("## Feedback"), "{text}");
    assert!(parts[0].contains("**BAD** (error, rule `r`): no"), "{text}");
    assert!(parts[0].contains("\"node\": \"upload\""), "{text}");
    assert_eq!(parts[1], "upload");
    assert_eq!(parts[2], "fix#1.1=a;fix#2.1=b;");
    assert_eq!(parts[3], "3");
}

#[test]
fn errors_are_values() {
    let spec = spec();
    let unknown = render_prompt(&spec, "nobody", &[], None).map_err(|error| error.to_string());
    assert_eq!(unknown, Err("unknown role `nobody`".to_string()));
    let inputs = render_prompt(&spec, "writer", &[], None).map_err(|error| error.to_string());
    assert_eq!(
        inputs,
        Err("role `writer` takes 1 input(s) (WorkflowPlan) but was given 0".to_string())
    );
    // A template that fails at render time (a filter on the wrong type).
    let mut broken = spec.clone();
    if let Some(prompt) = broken
        .roles
        .get_mut("writer")
        .and_then(|role| role.prompt.as_mut())
    {
        prompt.template = "{{ workflow_plan.goal | round }}".to_string();
    }
    let error =
        render_prompt(&broken, "writer", &[plan()], None).map_err(|error| error.to_string());
    assert!(
        matches!(&error, Err(text) if text.starts_with("cannot render the prompt of role `writer` (inline):")),
        "{error:?}"
    );
}

#[test]
fn input_names_follow_the_compiler() {
    assert_eq!(snake_case("WorkflowPlan"), "workflow_plan");
    assert_eq!(snake_case("Candidate"), "candidate");
    assert_eq!(snake_case("HTTPRequest"), "http_request");
}

#[test]
fn one_renderer_renders_each_call_from_its_own_inputs() {
    let spec = spec();
    let mut prompts = Prompts::new(&spec);
    let other = json!({"goal": "a second goal", "steps": ["only", "these"]});
    let feedback = json!([{"code": "THIN", "message": "more sources"}]);
    for (inputs, feedback) in [
        (plan(), None),
        (other.clone(), Some(&feedback)),
        (plan(), Some(&feedback)),
        (other, None),
    ] {
        for role in ["writer", "researcher", "plain"] {
            let reused = prompts.render(role, std::slice::from_ref(&inputs), feedback);
            let fresh = render_prompt(&spec, role, std::slice::from_ref(&inputs), feedback);
            assert!(reused.is_ok(), "{reused:?}");
            assert_eq!(reused, fresh, "{role}");
        }
    }
    let schema = prompts.output_schema("writer");
    assert_eq!(
        schema.map(|schema| schema["required"].clone()),
        Ok(json!(["summary"]))
    );
}

#[test]
fn a_template_reads_run_when_it_names_it_or_prints_its_whole_context() {
    let spec = compile_spec_with(
        r#"spec r version "1"
contract Req { goal: string }
contract Out { text: string }
role counts { model: "openai:m"  prompt: """Step {{ run.step_count }}: {{ req.goal }}"""  input: Req  output: Out }
role dumps { model: "openai:m"  prompt: """{{ debug() }}"""  input: Req  output: Out }
role plain { model: "openai:m"  prompt: """{{ req.goal }}"""  input: Req  output: Out }
role shadows { model: "openai:m"  prompt: """{% set run = 1 %}{{ run }}"""  input: Req  output: Out }
role default { model: "openai:m"  input: Req  output: Out }
flow { a = counts(request) -> b  b = dumps(request) -> c  c = plain(request) -> d  d = shadows(request) -> e  e = default(request) -> done }
"#,
        &[],
    );
    let mut prompts = Prompts::new(&spec);
    assert!(prompts.reads_run("counts"));
    assert!(prompts.reads_run("dumps"));
    assert!(!prompts.reads_run("plain"));
    assert!(
        !prompts.reads_run("shadows"),
        "a variable the template sets"
    );
    assert!(
        !prompts.reads_run("default"),
        "the default template lists the inputs"
    );
    assert!(!prompts.reads_run("nobody"), "an unknown role");
}

#[test]
fn debug_prints_every_name_a_template_can_read_and_an_input_is_found_by_its_name() {
    let spec = compile_spec_with(
        r#"spec r version "1"
contract Req { goal: string }
contract Out { text: string }
role dumps { model: "openai:m"  prompt: """{{ debug() }}"""  input: Req  output: Out }
role reads { model: "openai:m"  prompt: """{{ req.goal }}|{{ feedback }}|{{ run }}"""  input: Req  output: Out }
flow { a = dumps(request) -> b  b = reads(request) -> done }
"#,
        &[],
    );
    let mut prompts = Prompts::new(&spec);
    let dumped = prompts.render("dumps", &[json!({"goal": "g"})], None);
    let Ok(dumped) = dumped else {
        panic!("{dumped:?}");
    };
    for name in ["feedback", "output_schema", "req", "rules", "run", "tools"] {
        assert!(
            dumped.contains(&format!("\"{name}\"")),
            "{name} in {dumped}"
        );
    }
    assert!(!dumped.contains("\"inputs\""), "{dumped}");
    assert_eq!(
        prompts.render("reads", &[json!({"goal": "g"})], None),
        Ok("g|None|None".to_string())
    );
}

#[test]
fn a_prompt_is_rendered_again_only_from_other_values() {
    // A template of its own: the renders it keeps are this test's alone.
    let spec_with = |rule: &str| {
        compile_spec_with(
            &format!(
                r#"spec m version "1"
rules house version "1" {{ "{rule}" }}
contract Req {{ goal: string }}
contract Out {{ text: string }}
role w {{
  model: "openai:m"
  prompt: """kept-renders {{{{ req.goal }}}} / {{{{ rules }}}} / {{% if feedback %}}{{{{ feedback.reason }}}}{{% endif %}} / {{{{ run.round }}}}"""
  rules: [house]
  input: Req
  output: Out
}}
flow {{ a = w(request) -> done }}
"#
            ),
            &[],
        )
    };
    let (first, second) = (spec_with("Rule one."), spec_with("Rule two."));
    let goal = |goal: &str| vec![Arc::new(json!({ "goal": goal }))];
    let run = |round: u64| Some(Arc::new(json!({ "round": round })));
    let feedback = |reason: &str| Some(Arc::new(json!({ "reason": reason })));
    let render = |spec: &CompiledSpec, inputs: &[Arc<Value>], extra: &PromptContext| {
        let mut prompts = Prompts::new(spec);
        let prompt = prompts
            .render_shared("w", inputs, extra)
            .unwrap_or_else(|error| panic!("{error}"));
        let (_, context) = prompts.roles.pop().expect("the role's context");
        (prompt, context.fixed, context.environment)
    };
    let plain = PromptContext {
        run: run(1),
        ..PromptContext::default()
    };
    let (prompt, fixed, template) = render(&first, &goal("x"), &plain);
    assert_eq!(prompt, "kept-renders x / - Rule one. /  / 1");
    let kept = |template: &CompiledTemplate| template.renders.lock().map_or(0, |r| r.len());
    assert_eq!(kept(&template), 1);

    // A second run of the same spec on equal values: the render kept is given back, and
    // the run shares its fixed part.
    let (again, fixed_again, _) = render(&first, &goal("x"), &plain);
    assert_eq!(again, prompt);
    assert!(Arc::ptr_eq(&fixed, &fixed_again));
    assert_eq!(
        kept(&template),
        1,
        "given back, not rendered and kept again"
    );

    // Anything else the template reads renders anew: the rules of another spec with the
    // same template, an input, the feedback, `run`.
    let (other_rules, other_fixed, _) = render(&second, &goal("x"), &plain);
    assert_eq!(other_rules, "kept-renders x / - Rule two. /  / 1");
    assert!(!Arc::ptr_eq(&fixed, &other_fixed));
    assert_eq!(
        render(&first, &goal("y"), &plain).0,
        "kept-renders y / - Rule one. /  / 1"
    );
    let with = |reason: &str| PromptContext {
        feedback: feedback(reason),
        ..plain.clone()
    };
    assert_eq!(
        render(&first, &goal("x"), &with("gate")).0,
        "kept-renders x / - Rule one. / gate / 1"
    );
    assert_eq!(
        render(&first, &goal("x"), &with("check")).0,
        "kept-renders x / - Rule one. / check / 1"
    );
    let later = PromptContext {
        run: run(2),
        ..PromptContext::default()
    };
    assert_eq!(
        render(&first, &goal("x"), &later).0,
        "kept-renders x / - Rule one. /  / 2"
    );
    assert_eq!(kept(&template), RENDERS_KEPT, "the oldest are dropped");
    // A very long prompt is not kept.
    let long = "g".repeat(RENDER_KEPT_MAX_BYTES);
    let (long_prompt, _, _) = render(&first, &goal(&long), &plain);
    assert!(long_prompt.len() > RENDER_KEPT_MAX_BYTES);
    let newest = template
        .renders
        .lock()
        .ok()
        .and_then(|renders| renders.front().map(|render| render.prompt.len()));
    assert!(newest.is_some_and(|len| len <= RENDER_KEPT_MAX_BYTES));
    // The first render was dropped: it is rendered again, the same.
    assert_eq!(render(&first, &goal("x"), &plain).0, prompt);
}

#[test]
fn threads_that_render_one_template_each_get_their_own_prompts() {
    let spec = compile_spec_with(
        r#"spec threads version "1"
contract Req { goal: string }
contract Out { text: string }
role w { model: "openai:m"  prompt: """two-threads {{ req.goal }}"""  input: Req  output: Out }
flow { a = w(request) -> done }
"#,
        &[],
    );
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|thread| {
                let spec = &spec;
                scope.spawn(move || {
                    for turn in 0..300 {
                        // Few distinct goals, so kept renders are hit, missed and dropped.
                        let goal = format!("{thread}-{}", turn % 7);
                        let inputs = [Arc::new(json!({ "goal": goal }))];
                        let prompt = Prompts::new(spec)
                            .render_shared("w", &inputs, &PromptContext::default())
                            .unwrap_or_else(|error| panic!("{error}"));
                        assert_eq!(prompt, format!("two-threads {goal}"));
                    }
                })
            })
            .collect();
        for worker in workers {
            assert!(worker.join().is_ok(), "a worker panicked");
        }
    });
}

#[test]
fn filters_the_compiler_allows_render_tojson_among_them() {
    let spec = compile_spec_with(
        r#"spec p version "1"
contract WorkflowPlan { goal: string  steps: list<string> }
contract Report { summary: string }
role writer {
  model: "openai:m"
  prompt: """
    Plan: {{ workflow_plan | tojson }}
    Steps: {{ workflow_plan.steps | tojson(indent=2) }}
    Goal: {{ workflow_plan.goal | upper }}{% if workflow_plan.goal is string %} (text){% endif %}
  """
  input: WorkflowPlan
  output: Report
}
flow { write = writer(request) -> done }
"#,
        &[],
    );
    let text = match render_prompt(&spec, "writer", &[plan()], None) {
        Ok(text) => text,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(
        text,
        "Plan: {\"goal\": \"ship\", \"steps\": [\"build\", \"test\"]}\nSteps: [\n  \"build\",\n  \"test\"\n]\nGoal: SHIP (text)"
    );
}

/// `{% include %}` renders the included files in place, each resolved relative to the
/// template that includes it; a changed piece renders anew (the template cache is keyed
/// by what the template includes, not only its own text).
#[test]
fn included_files_render_in_place_relative_to_their_includer() {
    let spec_text = r#"spec p version "1"
import role "roles/caller.md"
contract Ask { text: string }
contract Reply { text: string }
role inline { model: "openai:m"  prompt: """Hi {% include "shared/sign.j2" %}"""  input: Ask  output: Reply }
flow {
  first = caller(request) -> second
  second = inline(request) -> done
}
"#;
    let caller = "---\nid: caller\nmodel: \"openai:m\"\ninput: Ask\noutput: Reply\n---\nAsk: {{ ask.text }}\n{% include \"parts/tone.j2\" %}";
    let render = |tone: &str| {
        let spec = compile_spec_with(
            spec_text,
            &[
                ("roles/caller.md", caller),
                ("roles/parts/tone.j2", tone),
                ("shared/sign.j2", "from {{ ask.text | upper }}"),
            ],
        );
        let input = [json!({"text": "why"})];
        (
            render_prompt(&spec, "caller", &input, None).map_err(|error| error.to_string()),
            render_prompt(&spec, "inline", &input, None).map_err(|error| error.to_string()),
        )
    };
    let tone = "Be calm. {% include \"../../shared/sign.j2\" %}";
    assert_eq!(
        render(tone),
        (
            Ok("Ask: why\nBe calm. from WHY".to_string()),
            Ok("Hi from WHY".to_string())
        )
    );
    let (changed, _) = render("Be brief.");
    assert_eq!(changed, Ok("Ask: why\nBe brief.".to_string()));
}
