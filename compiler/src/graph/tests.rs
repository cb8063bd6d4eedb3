//! Tests of lowering, schemas, hashes, rendering and bounds, from spec text.

use super::hash::{rules_hash, semantic_hash, sha256};
use super::*;
use crate::bounds;
use crate::diagnostics::Code;
use crate::{MemoryLoader, compile};

const EXAMPLE: &str = include_str!("testdata/closed_loop.charter");
const BOUNDS: &str = include_str!("testdata/bounds.charter");

const CREATIVE_ROLE: &str = "---
id: creative
name: Creative writer
description: Writes the creative parts
model: default
input: Task
output: StageResult
tools: [web_search]
timeout: 5m
retry: 1 backoff 500ms
rules:
  - core
max_tool_calls: 4
tool_rules:
  web_search: at most twice
---
Write {{ task.goal }}.
";

fn example_loader() -> MemoryLoader {
    let mut loader = MemoryLoader::default();
    for (path, text) in [
        ("prompts/planner.md.j2", "Plan: {{ request.goal }}\n"),
        ("prompts/reviewer.md.j2", "Review {{ candidate.text }}\n"),
        ("prompts/finalizer.md.j2", "Deliver {{ candidate.id }}\n"),
        ("roles/creative.md", CREATIVE_ROLE),
    ] {
        loader.files.insert(path.to_string(), text.to_string());
    }
    loader
}

/// Compiles `text`, failing the test with every diagnostic when it has an error.
fn compiled(text: &str, loader: &MemoryLoader) -> (CompiledSpec, Vec<crate::Diagnostic>) {
    let compilation = compile("test.charter", text, loader);
    let messages: Vec<String> = compilation
        .diagnostics
        .iter()
        .map(|diagnostic| format!("{} {}", diagnostic.code, diagnostic.message))
        .collect();
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => (spec, compilation.diagnostics),
        _ => panic!("the spec does not compile:\n{}", messages.join("\n")),
    }
}

fn example() -> CompiledSpec {
    compiled(EXAMPLE, &example_loader()).0
}

fn step<'a>(spec: &'a CompiledSpec, name: &str) -> &'a StepIr {
    let node = spec.flow.steps.get(name).copied();
    match node.and_then(|node| spec.flow.graph.node_weight(node)) {
        Some(step) => step,
        None => panic!("no step `{name}`"),
    }
}

fn gate_rule<'a>(spec: &'a CompiledSpec, gate: &str, index: usize) -> &'a GateRuleIr {
    match spec.gates.get(gate).and_then(|gate| gate.rules.get(index)) {
        Some(rule) => rule,
        None => panic!("no rule {index} in gate `{gate}`"),
    }
}

/// The spec hash is the compiled spec's (DESIGN §18): comments, layout, the doc block and
/// the order of top-level declarations move it not; a changed rule, prompt or step does.
#[test]
fn the_spec_hash_is_semantic() {
    let loader = example_loader();
    let hash = |text: &str| compiled(text, &loader).0.spec_hash;
    let base = hash(EXAMPLE);
    let commented: String = EXAMPLE
        .lines()
        .map(|line| match line.trim_start() {
            // Lines that open a declaration: a comment after them, more indentation.
            trimmed if trimmed.starts_with("contract ") || trimmed.starts_with("gate ") => {
                format!("\n/* a note */\n\t{trimmed}   // why\n")
            }
            _ => format!("{line}\n"),
        })
        .collect();
    assert_ne!(commented, EXAMPLE);
    assert_eq!(hash(&commented), base, "comments and layout");
    let undocumented = EXAMPLE.replacen("Six roles in a closed loop", "A loop of six roles", 1);
    assert_ne!(undocumented, EXAMPLE);
    assert_eq!(hash(&undocumented), base, "the doc block");
    // Move the first contract to the end of the file: the same spec.
    let start = EXAMPLE.find("\ncontract ").expect("a contract") + 1;
    let end = start + EXAMPLE[start..].find("\n}\n").expect("its end") + 3;
    let moved = format!(
        "{}{}\n{}",
        &EXAMPLE[..start],
        &EXAMPLE[end..],
        &EXAMPLE[start..end]
    );
    assert_eq!(hash(&moved), base, "the order of declarations");
    // What the runtime acts on moves it.
    let changed = EXAMPLE.replacen("version \"", "version \"9", 1);
    assert_ne!(hash(&changed), base, "the spec's version");
    let mut prompt = example_loader();
    prompt.files.insert(
        "prompts/planner.md.j2".into(),
        "Plan this: {{ request.goal }}\n".into(),
    );
    assert_ne!(
        compiled(EXAMPLE, &prompt).0.spec_hash,
        base,
        "a prompt template"
    );
}

#[test]
fn example_header_hashes_and_tables() {
    let spec = example();
    assert_eq!(spec.name, "closed_loop");
    assert_eq!(spec.version, "1.0.0");
    assert_eq!(
        spec.doc.as_deref(),
        Some("Six roles in a closed loop: plan, execute, evaluate, repair, finalize.")
    );
    assert_eq!(spec.spec_hash, semantic_hash(&spec));
    assert_ne!(spec.spec_hash, sha256(EXAMPLE.as_bytes()));
    assert_eq!(
        spec.source_hashes.keys().collect::<Vec<_>>(),
        [
            "prompts/finalizer.md.j2",
            "prompts/planner.md.j2",
            "prompts/reviewer.md.j2",
            "roles/creative.md"
        ]
    );
    assert_eq!(
        spec.source_hashes.get("roles/creative.md"),
        Some(&sha256(CREATIVE_ROLE.as_bytes()))
    );
    let contracts: Vec<&str> = spec.contracts.keys().map(String::as_str).collect();
    assert_eq!(
        contracts,
        [
            "Answer",
            "Candidate",
            "Delivery",
            "Hits",
            "Plan",
            "Post",
            "Query",
            "Receipt",
            "Request",
            "Review",
            "StageResult",
            "Task"
        ]
    );
    assert!(spec.contracts.get("Delivery").is_some_and(|c| c.builtin));
    assert!(spec.contracts.get("Plan").is_some_and(|c| !c.builtin));
    let core = spec.rules.get("core");
    assert_eq!(
        core.map(|rules| rules.hash.clone()),
        core.map(|rules| rules_hash(rules.version.as_deref(), &rules.lines))
    );
    assert_eq!(
        core.and_then(|rules| rules.version.as_deref()),
        Some("2026.11")
    );
    assert_eq!(
        spec.tools.get("publish").map(|tool| tool.effect),
        Some(EffectIr::External)
    );
    assert_eq!(
        spec.models.get("default"),
        Some(&ModelIr {
            provider: "openai".into(),
            model: "gpt-4o-mini".into(),
            price_in: Some(0.15),
            price_out: Some(0.60),
            params: Default::default(),
        })
    );
    assert_eq!(
        spec.budget,
        BudgetIr {
            tokens: Some(500_000),
            cost: Some(2.5),
            wall_ms: Some(3_600_000),
            steps: Some(40),
            on_exhausted: None,
        }
    );
    let repair = spec.repair.as_ref();
    assert_eq!(
        repair.map(|repair| (repair.rounds, repair.no_progress)),
        Some((3, 2))
    );
    assert_eq!(
        repair
            .and_then(|repair| repair.arms.get(1))
            .map(|arm| &arm.action),
        Some(&ActionIr::Rerun {
            step: "execute".into(),
            with_feedback: true
        })
    );
}

#[test]
fn example_roles_resolve_models_defaults_and_prompts() {
    let spec = example();
    let planner = spec.roles.get("planner");
    assert_eq!(
        planner.map(|role| (
            &role.model.provider[..],
            &role.model.model[..],
            role.model.price_in
        )),
        Some(("openai", "gpt-4o-mini", Some(0.15)))
    );
    assert_eq!(
        planner.map(|role| (role.timeout_ms, role.retry, role.backoff_ms)),
        Some((Some(120_000), 2, 1000))
    );
    let prompt = planner.and_then(|role| role.prompt.as_ref());
    assert_eq!(
        prompt.map(|prompt| (&prompt.template[..], &prompt.source[..], prompt.inline)),
        Some(("Plan: {{ request.goal }}\n", "prompts/planner.md.j2", false))
    );
    assert_eq!(
        prompt.map(|prompt| prompt.hash.clone()),
        Some(sha256(b"Plan: {{ request.goal }}\n"))
    );
    // Defaults: no timeout, `retry: 2 backoff 1s`.
    let reviewer = spec.roles.get("reviewer");
    assert_eq!(
        reviewer.map(|role| (role.timeout_ms, role.retry, role.backoff_ms)),
        Some((None, 2, 1000))
    );
    assert_eq!(
        reviewer.and_then(|role| role.model.alias.as_deref()),
        Some("strong")
    );
    assert_eq!(
        reviewer.map(|role| &role.model.provider[..]),
        Some("anthropic")
    );
    let executor = spec.roles.get("executor");
    assert_eq!(
        executor.map(|role| (role.tools.clone(), role.max_tool_calls)),
        Some((
            vec!["web_search".to_string(), "publish".to_string()],
            Some(8)
        ))
    );
    assert!(
        executor
            .and_then(|role| role.prompt.as_ref())
            .is_some_and(|prompt| prompt.inline
                && prompt.source == "inline"
                && prompt.template.contains("{{ task.goal }}"))
    );
    // A role file: the template is the Markdown body, without the front matter.
    let creative = spec.roles.get("creative");
    assert_eq!(
        creative
            .and_then(|role| role.prompt.as_ref())
            .map(|prompt| &prompt.template[..]),
        Some("Write {{ task.goal }}.\n")
    );
    assert_eq!(
        creative.map(|role| (
            role.file.as_deref(),
            role.display_name.as_deref(),
            role.retry,
            role.backoff_ms,
            role.timeout_ms
        )),
        Some((
            Some("roles/creative.md"),
            Some("Creative writer"),
            1,
            500,
            Some(300_000)
        ))
    );
    assert_eq!(
        creative
            .and_then(|role| role.tool_rules.get("web_search"))
            .map(String::as_str),
        Some("at most twice")
    );
}

#[test]
fn example_gate_expressions_classify_names() {
    let spec = example();
    let all_done = gate_rule(&spec, "quality", 0);
    assert_eq!(
        all_done.expr.to_string(),
        "every r in candidate.items: r.status != failed"
    );
    let ExprIr::Quantifier { over, body, .. } = &all_done.expr else {
        panic!("not a quantifier: {:?}", all_done.expr);
    };
    assert_eq!(
        **over,
        ExprIr::Path {
            root: NameIr::Candidate,
            fields: vec!["items".into()]
        }
    );
    assert_eq!(
        **body,
        ExprIr::Binary {
            op: BinaryOpIr::Ne,
            lhs: Box::new(ExprIr::Path {
                root: NameIr::Local("r".into()),
                fields: vec!["status".into()]
            }),
            rhs: Box::new(ExprIr::Variant {
                name: "failed".into()
            }),
        }
    );
    assert_eq!(
        gate_rule(&spec, "quality", 1).expr.to_string(),
        r#"not matches(candidate.text, "sk-[A-Za-z0-9]{20,}")"#
    );
    let has_notes = gate_rule(&spec, "quality", 2);
    assert_eq!(has_notes.severity, SeverityIr::Warn);
    let ExprIr::Binary { lhs, rhs, .. } = &has_notes.expr else {
        panic!("not a comparison: {:?}", has_notes.expr);
    };
    assert_eq!(
        **lhs,
        ExprIr::Path {
            root: NameIr::Step("review".into()),
            fields: vec!["notes".into()]
        }
    );
    assert_eq!(
        **rhs,
        ExprIr::Literal {
            value: serde_json::Value::Null
        }
    );
    let quality = spec.gates.get("quality");
    assert_eq!(
        quality.map(|gate| gate.pass_when.to_string()),
        Some("score >= 7.0".to_string())
    );
    assert_eq!(
        quality.map(|gate| gate.codes().into_iter().collect::<Vec<_>>()),
        Some(
            [
                "INCOMPLETE",
                "LOW_RELEVANCE",
                "NO_NOTES",
                "SECRET_LEAK",
                "STAGE_FAILED"
            ]
            .map(String::from)
            .to_vec()
        )
    );
    assert_eq!(
        spec.invariants.get("bounded_cost"),
        Some(&InvariantIr::Always {
            expr: ExprIr::Binary {
                op: BinaryOpIr::Le,
                lhs: Box::new(ExprIr::Path {
                    root: NameIr::Run,
                    fields: vec!["tokens".into()]
                }),
                rhs: Box::new(ExprIr::Literal {
                    value: serde_json::json!(200000)
                }),
            }
        })
    );
}

#[test]
fn example_flow_graph() {
    let spec = example();
    let graph = &spec.flow.graph;
    let nodes: Vec<String> = graph.node_weights().map(render::step_label).collect();
    assert_eq!(
        nodes,
        [
            "plan: planner(request)",
            "execute: each t in plan.tasks → executor(t) concurrency 4",
            "review: reviewer(candidate)",
            "judge: gate quality",
            "deliver: finalize finalizer(best)",
            "blocked: secret in candidate",
            "done",
        ]
    );
    assert_eq!(
        graph
            .node_weight(spec.flow.entry)
            .map(|step| &step.name[..]),
        Some("plan")
    );
    assert_eq!(
        step(&spec, "judge").kind,
        StepKind::Gate {
            gate: "quality".into(),
            repair: true
        }
    );
    let edges: Vec<String> = graph
        .edge_indices()
        .filter_map(|edge| {
            let (from, to) = graph.edge_endpoints(edge)?;
            let (label, repair) = render::transition_label(graph.edge_weight(edge)?);
            Some(format!(
                "{} -> {}{}{}",
                graph.node_weight(from)?.name,
                graph.node_weight(to)?.name,
                label.map(|label| format!(" [{label}]")).unwrap_or_default(),
                if repair { " (repair)" } else { "" }
            ))
        })
        .collect();
    assert_eq!(
        edges,
        [
            "plan -> execute",
            "execute -> review",
            "review -> judge",
            "judge -> deliver [pass]",
            "judge -> execute [STAGE_FAILED] (repair)",
            "judge -> execute [LOW_RELEVANCE, INCOMPLETE] (repair)",
            "judge -> blocked [SECRET_LEAK] (repair)",
            "deliver -> done",
        ]
    );
}

#[test]
fn example_json_is_deterministic_and_round_trips() {
    let spec = example();
    let json = serde_json::to_string_pretty(&spec).unwrap_or_default();
    assert_eq!(
        json,
        serde_json::to_string_pretty(&example()).unwrap_or_default()
    );
    let back: CompiledSpec = match serde_json::from_str(&json) {
        Ok(back) => back,
        Err(error) => panic!("the IR does not deserialize: {error}"),
    };
    assert_eq!(
        serde_json::to_string_pretty(&back).unwrap_or_default(),
        json
    );
    insta::assert_snapshot!("closed_loop_ir", json);
}

#[test]
fn contract_schemas() {
    let spec = example();
    for name in [
        "Plan",
        "Review",
        "Request",
        "StageResult",
        "Candidate",
        "Answer",
    ] {
        let schema = spec
            .contracts
            .get(name)
            .map(|contract| serde_json::to_string_pretty(&contract.schema).unwrap_or_default())
            .unwrap_or_default();
        insta::assert_snapshot!(format!("schema_{name}"), schema);
    }
}

#[test]
fn example_mermaid_and_dot() {
    let spec = example();
    insta::assert_snapshot!("closed_loop_mermaid", to_mermaid(&spec));
    insta::assert_snapshot!("closed_loop_dot", to_dot(&spec));
}

#[test]
fn labels_are_escaped() {
    let text = r##"spec esc version "1"
contract Request { goal: string }
contract Answer2 { ok: bool }
role asker { model: "openai:x" prompt: """q""" input: Request output: Answer2 }
flow {
  first = asker(request)
    when first.ok and request.goal == "a|b<c>\"d\"#1" -> confirm
    else -> failed "bad \"input\" <here>"
  confirm = ask "ship it? <y|n>" -> done
}
"##;
    let (spec, _) = compiled(text, &MemoryLoader::default());
    let mermaid = to_mermaid(&spec);
    assert!(
        mermaid.contains(
            r#"n0 -->|"when first.ok and request.goal<br/>== #quot;a#124;b#lt;c#gt;\#quot;d\#quot;#35;1#quot;"| n1"#
        ),
        "{mermaid}"
    );
    assert!(
        mermaid.contains(r#"n1[/"confirm: ask #quot;ship it? #lt;y#124;n#gt;#quot;"/]"#),
        "{mermaid}"
    );
    assert!(
        mermaid.contains(r#"n2(("failed: bad #quot;input#quot; #lt;here#gt;"))"#),
        "{mermaid}"
    );
    let dot = to_dot(&spec);
    insta::assert_snapshot!("escaped_mermaid", mermaid.clone());
    insta::assert_snapshot!("escaped_dot", dot.clone());
    assert!(
        dot.contains(r#"n2 [label="failed: bad \"input\" <here>", shape=doubleoctagon"#),
        "{dot}"
    );
    assert!(
        dot.contains(r##"label="when first.ok and request.goal\n== \"a|b<c>\\\"d\\\"#1\"""##),
        "{dot}"
    );
}

/// A step's name, runs, calls per run, wall per run, calls and wall time.
type Row<'a> = (
    &'a str,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
);

/// The hand computation for `testdata/bounds.charter`:
///
/// - `plan`: planner `retry 1` -> 2 calls; wall 2 * 10s + backoff 1s = 21s; runs once.
/// - `work`: 5 items (`list<Task>(1..=5)`), no `depends_on`, concurrency 2 -> 3 waves.
///   Per item and attempt: worker 3 calls (`retry 2`) + critic 1 call (`retry 0`) = 4;
///   `retries 1` -> 2 attempts -> 8 calls per item, 40 per run.
///   Per item wall: worker 3 * 30s + backoffs 2s + 4s = 96s; critic 5s; (96 + 5) * 2 = 202s;
///   3 waves -> 606s = 10m 6s per run.
///   `rounds 2` -> 3 rounds, and `rerun work` reruns work, review and decide: 3 runs ->
///   120 calls, 1818s.
/// - `review`: judge default `retry 2 backoff 1s` -> 3 calls; 3 * 20s + 1s + 2s = 63s;
///   3 runs -> 9 calls, 189s.
/// - `decide`: a gate, 0 calls, 3 runs.
/// - `deliver`: closer `retry 0` -> 1 call, 60s, once.
///
/// Total: 2 + 120 + 9 + 0 + 1 = 132 calls; 1 + 3 + 3 + 3 + 1 = 11 steps;
/// 21 + 1818 + 189 + 0 + 60 = 2088s = 34m 48s.
#[test]
fn bounds_match_the_hand_computation() {
    let (spec, diagnostics) = compiled(BOUNDS, &MemoryLoader::default());
    let bounds = bounds::compute(&spec);
    assert_eq!(bounds.rounds, 3);
    let rows: Vec<Row> = bounds
        .steps
        .iter()
        .map(|step| {
            (
                step.name.as_str(),
                step.runs,
                step.calls_per_run,
                step.wall_ms_per_run,
                step.calls,
                step.wall_ms,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "plan",
                Some(1),
                Some(2),
                Some(21_000),
                Some(2),
                Some(21_000)
            ),
            (
                "work",
                Some(3),
                Some(40),
                Some(606_000),
                Some(120),
                Some(1_818_000)
            ),
            (
                "review",
                Some(3),
                Some(3),
                Some(63_000),
                Some(9),
                Some(189_000)
            ),
            ("decide", Some(3), Some(0), Some(0), Some(0), Some(0)),
            (
                "deliver",
                Some(1),
                Some(1),
                Some(60_000),
                Some(1),
                Some(60_000)
            ),
        ]
    );
    assert_eq!(bounds.total.calls, Some(132));
    assert_eq!(bounds.total.steps, Some(11));
    assert_eq!(bounds.total.wall_ms, Some(2_088_000));
    assert_eq!(bounds.total.tokens, None);
    insta::assert_snapshot!("bounds_table", bounds.to_string());

    // Both limits of `budget { steps 10 wall 5m }` are exceeded.
    let warnings: Vec<(Code, String)> = diagnostics
        .iter()
        .map(|diagnostic| (diagnostic.code, diagnostic.message.clone()))
        .collect();
    assert_eq!(
        warnings,
        [
            (
                Code::W007,
                "the worst case (132 calls, 11 steps) exceeds `budget.steps`; the budget will cut the run".to_string()
            ),
            (
                Code::W007,
                "the worst case (132 calls, 34m48s) exceeds `budget.wall`; the budget will cut the run".to_string()
            ),
        ]
    );
    let pointed: Vec<&str> = diagnostics
        .iter()
        .filter_map(|diagnostic| diagnostic.primary_span())
        .map(|span| BOUNDS.get(span.range()).unwrap_or(""))
        .collect();
    assert_eq!(pointed, ["10", "5m"]);
}

#[test]
fn example_bounds() {
    let spec = example();
    let bounds = bounds::compute(&spec);
    // plan 3; execute 20 items * 4 calls * 4 rounds = 320; review 3 * 4 = 12; deliver 3.
    assert_eq!(bounds.total.calls, Some(338));
    // plan 1 + (execute, review, judge) * 4 rounds + deliver 1.
    assert_eq!(bounds.total.steps, Some(14));
    // The reviewer and finalizer have no timeout.
    assert_eq!(bounds.total.wall_ms, None);
    insta::assert_snapshot!("closed_loop_bounds", bounds.to_string());
    assert!(bounds::diagnostics(&spec).is_empty());
}

#[test]
fn unbounded_fan_out_is_w008_at_the_each_step() {
    let text = r#"spec fan version "1"
contract Request { items: list<string> }
contract Out { ok: bool }
role worker { model: "openai:x" prompt: """go""" input: Request output: Out timeout: 1s }
flow {
  work = each x in request.items: worker(request) -> done
}
"#;
    let (spec, diagnostics) = compiled(text, &MemoryLoader::default());
    let found: Vec<(Code, String, &str)> = diagnostics
        .iter()
        .map(|diagnostic| {
            (
                diagnostic.code,
                diagnostic.message.clone(),
                diagnostic
                    .primary_span()
                    .and_then(|span| text.get(span.range()))
                    .unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        found,
        [(
            Code::W008,
            "`each` over `request.items` has no upper bound on its items".to_string(),
            "work = each x in request.items: worker(request) -> done"
        )]
    );
    assert_eq!(
        diagnostics
            .first()
            .and_then(|diagnostic| diagnostic.help.as_deref()),
        Some(
            "give `Request.items` a maximum length, e.g. `list<string>(..=20)`, so the worst case is bounded"
        )
    );
    let bounds = bounds::compute(&spec);
    assert_eq!(bounds.total.calls, None);
    assert_eq!(bounds.total.steps, Some(1));
}

#[test]
fn literal_lists_with_dependencies_run_one_wave_per_item() {
    let text = r#"spec deps version "1"
contract Task { id: string  depends_on: list<string> = [] }
contract Out { ok: bool }
role worker { model: "openai:x" prompt: """go""" input: Task output: Out timeout: 1s retry: 0 }
flow {
  work = each t in [{id: "a", depends_on: []}, {id: "b", depends_on: ["a"]}, {id: "c", depends_on: []}]: worker(t) concurrency 3 -> done
}
"#;
    let (spec, diagnostics) = compiled(text, &MemoryLoader::default());
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let bounds = bounds::compute(&spec);
    // 3 items, 1 call each; `b` depends on `a`, so the worst case is 3 waves of 1s.
    assert_eq!(bounds.total.calls, Some(3));
    assert_eq!(bounds.total.wall_ms, Some(3_000));
}

#[test]
fn when_loops_are_bounded_by_budget_steps() {
    let text = r#"spec looping version "1"
contract Request { goal: string }
contract Out { done: bool }
role worker { model: "openai:x" prompt: """go""" input: Request output: Out timeout: 2s retry: 1 backoff 1s }
budget { steps 6 }
flow {
  work = worker(request) when work.done -> done else -> work
}
"#;
    let (spec, diagnostics) = compiled(text, &MemoryLoader::default());
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    // `when` arms come out in the order written, then `else`.
    let transitions: Vec<String> = spec
        .flow
        .step("work")
        .map(|(node, _)| spec.flow.transitions(node))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(transition, target)| {
            let label = render::transition_label(transition).0.unwrap_or_default();
            Some(format!(
                "{label} -> {}",
                spec.flow.graph.node_weight(target)?.name
            ))
        })
        .collect();
    assert_eq!(transitions, ["when work.done -> done", "else -> work"]);
    let bounds = bounds::compute(&spec);
    insta::assert_snapshot!("loop_bounds", bounds.to_string());
    // 6 steps of at most 2 calls and 2 * 2s + 1s = 5s each.
    assert_eq!(bounds.total.steps, Some(6));
    assert_eq!(bounds.total.calls, Some(12));
    assert_eq!(bounds.total.wall_ms, Some(30_000));
}

#[test]
fn an_on_error_route_is_an_edge_drawn_dashed_and_counted_by_the_bounds() {
    let text = r#"spec recovering version "1"
contract Request { goal: string }
contract Out { done: bool }
role worker { model: "openai:x" prompt: """go""" input: Request output: Out timeout: 2s retry: 1 backoff 1s }
role fixer { model: "openai:x" prompt: """fix {{ feedback }}""" input: Request output: Out timeout: 2s retry: 0 }
budget { steps 5 }
flow {
  work = worker(request) -> done
           on_error -> recover
  recover = fixer(request) when recover.done -> done else -> work
}
"#;
    let (spec, diagnostics) = compiled(text, &MemoryLoader::default());
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let (node, _) = spec.flow.step("work").unwrap_or_else(|| panic!("no work"));
    let transitions: Vec<(TransitionIr, String)> = spec
        .flow
        .transitions(node)
        .into_iter()
        .filter_map(|(transition, target)| {
            Some((
                transition.clone(),
                spec.flow.graph.node_weight(target)?.name.clone(),
            ))
        })
        .collect();
    // The written transition first (the runtime tries them in order), the route last.
    assert_eq!(
        transitions,
        [
            (TransitionIr::Always, "done".to_string()),
            (TransitionIr::OnError, "recover".to_string())
        ]
    );
    let mermaid = to_mermaid(&spec);
    assert!(mermaid.contains(r#"n0 -.->|"on_error"| n1"#), "{mermaid}");
    let dot = to_dot(&spec);
    assert!(
        dot.contains(r#"n0 -> n1 [label="on_error", style=dashed];"#),
        "{dot}"
    );
    // `work` -> `recover` -> `work` loops only through the route: `budget.steps` bounds
    // it, and both steps count as looping (5 steps, each of at most 2 calls).
    let bounds = bounds::compute(&spec);
    assert_eq!(bounds.total.steps, Some(5));
    assert_eq!(bounds.total.calls, Some(10));
}

#[test]
fn per_item_check_names_are_item_and_the_by_role() {
    let (spec, _) = compiled(BOUNDS, &MemoryLoader::default());
    assert_eq!(
        gate_rule(&spec, "item_ok", 0).expr,
        ExprIr::Path {
            root: NameIr::ByRole("critic".into()),
            fields: vec!["good".into()]
        }
    );
    assert_eq!(
        step(&spec, "work").kind,
        StepKind::Each {
            var: "t".into(),
            over: ExprIr::Path {
                root: NameIr::Step("plan".into()),
                fields: vec!["tasks".into()]
            },
            role: "worker".into(),
            args: vec![ExprIr::Path {
                root: NameIr::Local("t".into()),
                fields: vec![]
            }],
            concurrency: 2,
            check: Some(ItemCheckIr {
                gate: "item_ok".into(),
                by: Some("critic".into()),
                retries: 1
            }),
        }
    );
    insta::assert_snapshot!("bounds_mermaid", to_mermaid(&spec));
    insta::assert_snapshot!("bounds_dot", to_dot(&spec));
}

#[test]
fn totals_follow_the_most_expensive_branch() {
    let text = r#"spec branches version "1"
contract Request { goal: string }
contract Out { ok: bool }
role cheap { model: "openai:x" prompt: """go""" input: Request output: Out timeout: 1s retry: 0 }
role dear { model: "openai:x" prompt: """go""" input: Request output: Out timeout: 10s retry: 4 backoff 1s }
flow {
  first = cheap(request) when first.ok -> big else -> small
  big   = dear(request) -> done
  small = cheap(request) -> confirm
  confirm = ask "ok?" -> done
}
"#;
    let (spec, _) = compiled(text, &MemoryLoader::default());
    let bounds = bounds::compute(&spec);
    // Calls: first 1 + big 5 (retry 4) = 6, more than first 1 + small 1.
    assert_eq!(bounds.total.calls, Some(6));
    // Steps: first, small, confirm = 3, more than first, big = 2.
    assert_eq!(bounds.total.steps, Some(3));
    // Wall: the `ask` branch waits for a person, so the worst case is unbounded.
    assert_eq!(bounds.total.wall_ms, None);
    let big = bounds.steps.iter().find(|step| step.name == "big");
    // 5 * 10s + backoffs 1 + 2 + 4 + 8 = 65s.
    assert_eq!(big.and_then(|step| step.wall_ms), Some(65_000));
}

/// A spec whose drawing needs merged edges, repair `ask`/`accept` paths and long labels.
const DRAWN: &str = r#"spec drawn version "1"
contract Request { goal: string  mode: fast | slow | auto }
contract Pick { mode: fast | slow }
contract Out { ok: bool  text: string }
contract Review { score: int(0..=10)  done: bool }
role router { model: "openai:x" prompt: """r""" input: Request output: Pick }
role worker { model: "openai:x" prompt: """w""" input: Request output: Out }
role judge { model: "openai:x" prompt: """j""" input: Candidate output: Review }
role closer { model: "openai:x" prompt: """c""" input: Candidate output: Delivery }
gate quality on work {
  hard finished: review.done else UNFINISHED
  hard has_text: candidate.text != "" else EMPTY
  warn long: review.score > 8 else SHORT
  score s weight 1: review.score below 5 LOW
  pass when score >= 7
}
repair {
  rounds 2
  LOW        -> rerun work with feedback
  UNFINISHED -> ask "The judge says the work is not finished. Let the worker go on with its notes?"
  EMPTY      -> accept
  SHORT      -> ask "never asked: a warn code is not repaired"
}
flow {
  route   = router(request)
              when request.mode == fast -> work
              when route.mode == fast   -> work
              when request.mode == slow -> slow_path
              else                      -> work
  slow_path = worker(request) -> work
  work    = worker(request) -> review
  review  = judge(candidate) -> decide
  decide  = gate quality pass -> deliver fail -> repair
  deliver = finalize closer(best) -> done
}
"#;

#[test]
fn drawing_merges_edges_and_shows_repair_paths() {
    let (spec, _) = compiled(DRAWN, &MemoryLoader::default());
    let mermaid = to_mermaid(&spec);
    let dot = to_dot(&spec);
    // Three transitions from `route` to `work` are one edge, conditions one per line.
    assert!(
        mermaid.contains(
            r#"n0 -->|"when request.mode == fast<br/>when route.mode == fast<br/>else"| n2"#
        ),
        "{mermaid}"
    );
    assert_eq!(mermaid.matches("n0 -->").count(), 2, "{mermaid}");
    assert!(
        dot.contains(
            r#"n0 -> n2 [label="when request.mode == fast\nwhen route.mode == fast\nelse"];"#
        ),
        "{dot}"
    );
    // The `ask` arm of an error-level code: a dashed question node; approved reruns the
    // gate's subject (`work`), else `best` is finalized.
    assert!(
        mermaid.contains(r#"n4 -.->|"UNFINISHED"| n4_ask1"#),
        "{mermaid}"
    );
    assert!(
        mermaid.contains(r#"n4_ask1 -.->|"approved"| n2"#),
        "{mermaid}"
    );
    assert!(mermaid.contains(r#"n4_ask1 -.->|"else"| n5"#), "{mermaid}");
    assert!(mermaid.contains("class n4_ask1 repair"), "{mermaid}");
    // A warn code is never repaired: its `ask` arm draws nothing.
    assert!(!mermaid.contains("never asked"), "{mermaid}");
    // `accept` and repair stopping finalize `best`: one dashed edge to `deliver`.
    assert!(
        mermaid.contains(
            r#"n4 -.->|"EMPTY: accept<br/>rounds exhausted<br/>no progress<br/>no repair action"| n5"#
        ),
        "{mermaid}"
    );
    assert!(
        dot.contains(r#"n4 -> n4_ask1 [label="UNFINISHED", style=dashed];"#),
        "{dot}"
    );
    insta::assert_snapshot!("drawn_mermaid", mermaid);
    insta::assert_snapshot!("drawn_dot", dot);
}

#[test]
fn long_labels_break_into_lines() {
    let text = r#"spec long version "1"
contract Request { goal: string }
contract Task { id: string  goal: string }
contract Plan { tasks: list<Task>(1..=5) }
contract Result { id: string  ok: bool }
contract Verdict { good: bool }
role planner { model: "openai:x" prompt: """p""" input: Request output: Plan }
role a_worker_with_a_long_name { model: "openai:x" prompt: """w""" input: Task output: Result }
role critic { model: "openai:x" prompt: """c""" input: Result output: Verdict }
gate item_ok on work {
  hard good: critic.good else BAD_ITEM
  pass when true
}
flow {
  plan = planner(request) -> work
  work = each t in plan.tasks: a_worker_with_a_long_name(t) concurrency 3 check item_ok by critic retries 2 -> done
}
"#;
    let (spec, _) = compiled(text, &MemoryLoader::default());
    let mermaid = to_mermaid(&spec);
    // The name, the body (broken at a space), then the options.
    assert!(
        mermaid.contains(
            r#"n1["work:<br/>each t in plan.tasks →<br/>a_worker_with_a_long_name(t)<br/>concurrency 3<br/>check item_ok by critic retries 2"]"#
        ),
        "{mermaid}"
    );
    assert!(
        mermaid.contains(r#"n0["plan: planner(request)"]"#),
        "{mermaid}"
    );
    let dot = to_dot(&spec);
    assert!(
        dot.contains(r#"n1 [label="work:\neach t in plan.tasks →\na_worker_with_a_long_name(t)\n"#),
        "{dot}"
    );
}

/// A loop closed only through `ask "…" max 3` (no `budget.steps`): each step runs at most
/// 3 answers + 1 round = 4 times; the totals are the steps' worst cases summed.
#[test]
fn an_ask_with_max_bounds_its_loop() {
    let text = r#"spec asking version "1"
contract Request { topic: string }
contract Outline { points: list<string> }
contract Draft { text: string }
role outliner { model: "openai:m" input: Request output: Outline timeout: 1m retry: 0 }
role writer { model: "openai:m" input: Outline output: Draft timeout: 1m retry: 1 backoff 1s }
flow {
  outline = outliner(request) -> confirm
  confirm = ask "Write it like this?" max 3
              when confirm.approved     -> draft
              when confirm.note != none -> outline
              else                      -> blocked "not confirmed"
  draft   = writer(outline) -> done
}
"#;
    let (spec, diagnostics) = compiled(text, &MemoryLoader::default());
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    let bounds = bounds::compute(&spec);
    let runs: Vec<(&str, Option<u64>, Option<u64>)> = bounds
        .steps
        .iter()
        .map(|step| (step.name.as_str(), step.runs, step.calls))
        .collect();
    assert_eq!(
        runs,
        [
            ("outline", Some(4), Some(4)),
            ("confirm", Some(4), Some(0)),
            ("draft", Some(4), Some(8))
        ]
    );
    assert_eq!(bounds.total.calls, Some(12));
    assert!(bounds.total.summed && !bounds.total.looping);
}

#[test]
fn model_parameters_tool_choice_and_retry_after_effects_lower_to_the_ir() {
    let text = EXAMPLE
        .replace(
            "default = \"openai:gpt-4o-mini\" price 0.15 / 0.60",
            "default = \"openai:gpt-4o-mini\" price 0.15 / 0.60 temperature 0.2 top_p 0.9 max_tokens 800 seed 7 idle_timeout 30s output json_object",
        )
        .replace(
            "  max_tool_calls: 8\n",
            "  max_tool_calls: 8\n  tool_choice: web_search\n  retry_after_effects: true\n",
        );
    let (spec, _) = compiled(&text, &example_loader());
    let params = ModelParamsIr {
        temperature: Some(0.2),
        top_p: Some(0.9),
        max_tokens: Some(800),
        seed: Some(7),
        idle_timeout_ms: Some(30_000),
        output: OutputModeIr::JsonObject,
    };
    assert_eq!(
        spec.models.get("default").map(|model| &model.params),
        Some(&params)
    );
    let executor = spec.roles.get("executor").expect("executor");
    assert_eq!(executor.model.params, params);
    assert_eq!(
        executor.tool_choice,
        ToolChoiceIr::Tool("web_search".into())
    );
    assert!(executor.retry_after_effects);
    let planner = spec.roles.get("planner").expect("planner");
    assert_eq!(planner.tool_choice, ToolChoiceIr::Auto);
    assert!(!planner.retry_after_effects);
}

/// A spec whose gate reads a `tool` step (a rule engine) beside a judge.
const TOOL_STEP: &str = r#"spec tool_step version "1"
contract Request { goal: string }
contract Draft { workflow_id: string  version: int }
contract WorkflowRef { workflow_id: string  version: int }
contract Report { errors: list<string> = [] }
contract Out { ok: bool }
tool validate { input: WorkflowRef  output: Report  effect: read  timeout: 30s  retry: 2 backoff 1s }
tool lint { input: WorkflowRef  output: Report  effect: read }
role maker { model: "openai:x" prompt: """go""" input: Request output: Draft timeout: 10s retry: 0 }
gate valid on make {
  hard no_errors: len(check.errors) == 0 else DESIGN_ERROR detail check.errors
  pass when true
}
repair { rounds 1  DESIGN_ERROR -> rerun make }
flow {
  make  = maker(request) -> check
  check = tool validate({workflow_id: make.workflow_id, version: make.version}) -> judge
  judge = gate valid pass -> lint_it fail -> repair
  lint_it = tool lint({workflow_id: make.workflow_id, version: 1}) -> done
}
"#;

#[test]
fn tool_steps_lower_with_their_tool_limits_and_count_no_model_call() {
    let (spec, diagnostics) = compiled(TOOL_STEP, &MemoryLoader::default());
    // The tools are used by steps only: no W002.
    assert!(
        diagnostics
            .iter()
            .all(|diagnostic| diagnostic.code != Code::W002),
        "{diagnostics:?}"
    );
    let (_, check) = spec.flow.step("check").expect("the step `check`");
    match &check.kind {
        StepKind::Tool { tool, args } => {
            assert_eq!(tool, "validate");
            assert_eq!(args.len(), 1);
        }
        other => panic!("not a tool step: {other:?}"),
    }
    let validate = spec.tools.get("validate").expect("the tool");
    assert_eq!(
        (validate.timeout_ms, validate.retry, validate.backoff_ms),
        (Some(30_000), 2, 1_000)
    );
    let lint = spec.tools.get("lint").expect("the tool");
    assert_eq!((lint.timeout_ms, lint.retry), (None, 0));
    assert_eq!(
        crate::graph::render::step_body(check),
        "tool validate({version: make.version, workflow_id: make.workflow_id})"
    );

    let bounds = bounds::compute(&spec);
    let check = bounds.steps.iter().find(|step| step.name == "check");
    // No model call; 3 attempts of 30 s and the backoffs 1 s + 2 s.
    assert_eq!(check.and_then(|step| step.calls_per_run), Some(0));
    assert_eq!(check.and_then(|step| step.wall_ms_per_run), Some(93_000));
    // `lint` has no timeout: the run's wall time is unbounded, and a note says why.
    assert_eq!(bounds.total.wall_ms, None);
    assert!(
        bounds
            .notes
            .iter()
            .any(|note| note.contains("tool `lint` (step `lint_it`) has no `timeout`")),
        "{:?}",
        bounds.notes
    );
    // Model calls: only `make` (twice: one repair round).
    assert_eq!(bounds.total.calls, Some(2));
    assert!(to_mermaid(&spec).contains("tool validate("));
}

/// A tool's sandbox lowers as written: paths kept, the network mode, env names, the
/// process limit and `required`; a tool without one has none, and the JSON of a tool
/// without a sandbox has no `sandbox` key (older IR and recordings read the same).
#[test]
fn tool_sandboxes_lower_to_the_ir_as_written() {
    let text = TOOL_STEP
        .replace(
            "retry: 2 backoff 1s }",
            "retry: 2 backoff 1s\n  sandbox { read: [\"data/\", \"~/.cache/pages\", \"/opt/x\"]  write: [\"out/\"]  network: loopback  env: [GITHUB_TOKEN, _X1]  processes: 64 } }",
        )
        .replace(
            "tool lint { input: WorkflowRef  output: Report  effect: read }",
            "tool lint { input: WorkflowRef  output: Report  effect: read  sandbox: required }\ntool plain { input: WorkflowRef  output: Report  effect: read  sandbox { network: any } }",
        )
        .replace("effect: read  timeout: 30s", "effect: write  timeout: 30s");
    let (spec, diagnostics) = compiled(&text, &MemoryLoader::default());
    let validate = spec.tools.get("validate").expect("validate");
    assert_eq!(
        validate.sandbox,
        Some(SandboxIr {
            read: vec!["data/".into(), "~/.cache/pages".into(), "/opt/x".into()],
            write: vec!["out/".into()],
            network: NetworkIr::Loopback,
            env: vec!["GITHUB_TOKEN".into(), "_X1".into()],
            processes: Some(64),
            required: false,
        })
    );
    let lint = spec.tools.get("lint").expect("lint");
    assert_eq!(
        lint.sandbox,
        Some(SandboxIr {
            required: true,
            ..SandboxIr::default()
        })
    );
    let json = serde_json::to_value(&spec.tools).expect("json");
    assert_eq!(
        json["lint"]["sandbox"],
        serde_json::json!({ "required": true })
    );
    assert_eq!(
        json["plain"]["sandbox"],
        serde_json::json!({ "network": "any" })
    );
    assert_eq!(json["validate"]["sandbox"]["network"], "loopback");
    // Nothing about the sandboxes (`plain` is unused, W002; `Out` too, W001).
    assert!(
        diagnostics
            .iter()
            .all(|d| matches!(d.code, Code::W001 | Code::W002)),
        "{diagnostics:?}"
    );
    // Without a sandbox: none, and no key in the JSON.
    let (plain, _) = compiled(TOOL_STEP, &MemoryLoader::default());
    let json = serde_json::to_value(&plain.tools).expect("json");
    assert!(plain.tools.values().all(|tool| tool.sandbox.is_none()));
    assert!(json["lint"].get("sandbox").is_none(), "{json}");
    // It reads back.
    let back: std::collections::BTreeMap<String, ToolIr> =
        serde_json::from_value(serde_json::to_value(&spec.tools).expect("json")).expect("read");
    assert_eq!(back, spec.tools);
}

const MCP: &str = r#"spec mcp version "1"
contract Request { goal: string }
contract Out { text: string }
mcp files {
  command: ["npx", "@modelcontextprotocol/server-filesystem", "data"]
  env: { LOG_LEVEL: "warn", TOKEN: env("FILES_TOKEN") }
  tools: [read_text_file, list_directory]
  timeout: 30s  retry: 1 backoff 1s
  sandbox { read: ["data/"]  network: none }
}
mcp search {
  url: " http://127.0.0.1:3001/mcp "
  headers: { Authorization: env("SEARCH_TOKEN"), X-Client: "charter" }
  tools: *
}
role reader {
  model: "openai:x"  prompt: """{{ request.goal }}"""  input: Request  output: Out
  tools: [files.read_text_file, search.web_search]  max_tool_calls: 4
  tool_choice: files.read_text_file
  permit files.read_text_file when matches(args.path, "^data/")
}
invariant only_reader: only reader uses files.read_text_file
flow { read = reader(request) -> done }
"#;

/// `mcp` servers lower to `CompiledSpec.mcp` as written, with the transport's keys at the
/// server's level in JSON and defaults left out; roles, permits, `tool_choice` and
/// invariants keep `SERVER.TOOL` names; a spec without servers has no `mcp` key.
#[test]
fn mcp_servers_lower_to_the_ir_and_read_well_as_json() {
    let (spec, diagnostics) = compiled(MCP, &MemoryLoader::default());
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let files = spec.mcp.get("files").expect("files");
    assert_eq!(
        files,
        &McpServerIr {
            transport: McpTransportIr::Command {
                argv: vec![
                    "npx".into(),
                    "@modelcontextprotocol/server-filesystem".into(),
                    "data".into()
                ],
            },
            env: [
                ("LOG_LEVEL".to_string(), SecretOrTextIr::Text("warn".into())),
                (
                    "TOKEN".to_string(),
                    SecretOrTextIr::Env("FILES_TOKEN".into())
                ),
            ]
            .into_iter()
            .collect(),
            tools: McpToolsIr::Only(vec!["read_text_file".into(), "list_directory".into()]),
            timeout_ms: Some(30_000),
            retry: 1,
            backoff_ms: 1000,
            sandbox: Some(SandboxIr {
                read: vec!["data/".into()],
                ..SandboxIr::default()
            }),
        }
    );
    let json = serde_json::to_value(&spec.mcp).expect("json");
    assert_eq!(
        json,
        serde_json::json!({
            "files": {
                "command": ["npx", "@modelcontextprotocol/server-filesystem", "data"],
                "env": { "LOG_LEVEL": "warn", "TOKEN": { "env": "FILES_TOKEN" } },
                "tools": ["read_text_file", "list_directory"],
                "timeout_ms": 30000,
                "retry": 1,
                "backoff_ms": 1000,
                "sandbox": { "read": ["data/"] }
            },
            "search": {
                "url": "http://127.0.0.1:3001/mcp",
                "headers": { "Authorization": { "env": "SEARCH_TOKEN" }, "X-Client": "charter" },
                "tools": "*"
            }
        })
    );
    let back: std::collections::BTreeMap<String, McpServerIr> =
        serde_json::from_value(json).expect("read");
    assert_eq!(back, spec.mcp);
    assert!(serde_json::from_value::<McpToolsIr>(serde_json::json!("all")).is_err());
    let reader = spec.roles.get("reader").expect("reader");
    assert_eq!(reader.tools, ["files.read_text_file", "search.web_search"]);
    assert_eq!(
        reader.tool_choice,
        ToolChoiceIr::Tool("files.read_text_file".into())
    );
    assert_eq!(
        spec.invariants.get("only_reader"),
        Some(&InvariantIr::OnlyUses {
            role: "reader".into(),
            tool: "files.read_text_file".into()
        })
    );
    assert!(spec.knows_tool("files.read_text_file"));
    assert!(spec.knows_tool("search.anything"));
    assert!(!spec.knows_tool("files.write_file"));
    assert!(!spec.knows_tool("nope.x"));
    assert_eq!(
        spec.tool_names(),
        ["files.read_text_file", "files.list_directory"]
    );
    // The whole spec reads back from its JSON, `mcp` and all.
    let whole = serde_json::to_string(&spec).expect("json");
    let read: CompiledSpec = serde_json::from_str(&whole).expect("read");
    assert_eq!(read.mcp, spec.mcp);
    // Without servers: no `mcp` key, so every other spec's IR and hash are unchanged.
    let plain = example();
    assert!(plain.mcp.is_empty());
    let json = serde_json::to_value(&plain).expect("json");
    assert!(json.get("mcp").is_none());
    assert_eq!(semantic_hash(&plain), plain.spec_hash);
}

/// The console writes durations the way a spec does: what W007 suggests can be pasted.
#[test]
fn console_durations_read_back_as_spec_durations() {
    for ms in [
        0, 1, 999, 1_000, 1_500, 60_000, 90_000, 3_600_000, 7_480_000, 2_088_000,
    ] {
        let text = crate::bounds::format_ms(ms);
        assert_eq!(crate::parse_duration(&text), Ok(ms), "{text}");
        assert!(!text.contains(' '), "{text}");
    }
}

#[test]
fn a_repair_ask_reruns_the_gates_subject_once_per_round() {
    // Approved, an `ask` arm reruns the judged step (the runtime's `start_repair`): with
    // `rounds 1`, `work` and `check` run twice, `plan` and `deliver` once.
    let text = r#"spec asking version "1"
contract Request { goal: string }
contract Plan { goal: string }
contract Work { text: string }
role planner { model: "openai:x" prompt: """go""" input: Request output: Plan timeout: 1s retry: 0 }
role worker { model: "openai:x" prompt: """go {{ feedback }}""" input: Plan output: Work timeout: 2s retry: 0 }
role finalizer { model: "openai:x" prompt: """go {{ candidate.id }}""" input: Candidate output: Delivery timeout: 1s retry: 0 }
gate quality on work {
  hard written: work.text != "" else SHORT
  pass when true
}
repair {
  rounds 1
  SHORT -> ask "Try again?"
}
flow {
  plan    = planner(request) -> work
  work    = worker(plan) -> check
  check   = gate quality pass -> deliver fail -> repair
  deliver = finalize finalizer(best) -> done
}
"#;
    let (spec, diagnostics) = compiled(text, &MemoryLoader::default());
    assert!(
        diagnostics
            .iter()
            .all(|d| d.severity != crate::diagnostics::Severity::Error),
        "{diagnostics:?}"
    );
    let bounds = bounds::compute(&spec);
    let runs: Vec<(String, Option<u64>)> = bounds
        .steps
        .iter()
        .map(|step| (step.name.clone(), step.runs))
        .collect();
    assert_eq!(
        runs,
        [
            ("plan".to_string(), Some(1)),
            ("work".to_string(), Some(2)),
            ("check".to_string(), Some(2)),
            ("deliver".to_string(), Some(1)),
        ]
    );
    assert_eq!(bounds.total.steps, Some(6));
    assert_eq!(bounds.total.calls, Some(4));
}

/// The role file of field report 002, as the report gives it (its YAML indentation, which
/// the report's page lost under `skillRules`, restored), plus `messages: chat`.
const REPORT_002_CREATIVE: &str = include_str!(
    "../../../runtime/tests/fixtures/report_002/specs/mention_roles_as_written/roles/creative.md"
);

const REPORT_002_SPEC: &str = r#"
spec as_written version "1"
import role "roles/creative.md"
import role "roles/exp-master.md"
models { default = "openai:gpt-4o" }
contract Request { text: string }
contract Reply { text: string }
contract WorkflowFilter { keyword: string? }
contract Saved { id: string }
contract Experience { title: string }
contract SearchQuery { query: string }
tool get_workflow_list { input: WorkflowFilter output: Saved effect: read }
tool save_experience { input: Experience output: Saved effect: write }
tool web_search { input: SearchQuery output: Saved effect: read }
flow {
  pick = branch when role_named(mention(request.text)) == "exp_master" -> other else -> answer
  answer = creative(request) -> done
  other = exp_master(request) -> done
}
"#;

fn report_002_loader(creative: &str, exp_master: &str) -> MemoryLoader {
    let mut loader = MemoryLoader::default();
    loader
        .files
        .insert("roles/creative.md".to_string(), creative.to_string());
    loader
        .files
        .insert("roles/exp-master.md".to_string(), exp_master.to_string());
    loader
}

const EXP_MASTER: &str =
    "---\nid: exp-master\nname: 经验大师\ntools: [SAVE_EXPERIENCE]\n---\n# 核心职责\n";

#[test]
fn a_role_file_as_report_002_writes_it_compiles() {
    // Verbatim, without the `messages` line Charter adds: the prompt is one user message.
    let verbatim: String = REPORT_002_CREATIVE
        .lines()
        .filter(|line| !line.starts_with("messages:"))
        .map(|line| format!("{line}\n"))
        .collect();
    let (spec, _) = compiled(REPORT_002_SPEC, &report_002_loader(&verbatim, EXP_MASTER));
    let creative = &spec.roles["creative"];
    assert_eq!(
        creative.tools,
        ["get_workflow_list", "save_experience", "web_search"]
    );
    assert_eq!(creative.inputs, ["Request"]);
    assert_eq!(creative.output, "Reply");
    assert_eq!(creative.messages, MessagesIr::Prompt);
    assert_eq!(
        spec.roles["exp_master"].display_name.as_deref(),
        Some("经验大师")
    );

    let (spec, _) = compiled(
        REPORT_002_SPEC,
        &report_002_loader(REPORT_002_CREATIVE, EXP_MASTER),
    );
    assert_eq!(spec.roles["creative"].messages, MessagesIr::Chat);
    // `role_named` finds a role by the id as written, the spec's name and the display name.
    let json = serde_json::to_string(&spec).unwrap_or_default();
    for name in [
        "\"exp-master\":\"exp_master\"",
        "\"经验大师\":\"exp_master\"",
    ] {
        assert!(json.contains(name), "{name} not in {json}");
    }
}

/// What goes wrong when a role file leaves out what the spec cannot supply.
#[test]
fn implied_contracts_and_message_layouts_are_checked() {
    let check = |spec: &str, creative: &str, expect: &[&str]| {
        let compilation = compile(
            "test.charter",
            spec,
            &report_002_loader(creative, EXP_MASTER),
        );
        let found: Vec<String> = compilation
            .diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.is_error())
            .map(|diagnostic| {
                format!(
                    "{} {} | {}",
                    diagnostic.code,
                    diagnostic.message,
                    diagnostic.help.as_deref().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(found, expect);
    };
    let no_reply = REPORT_002_SPEC.replace("contract Reply { text: string }", "");
    check(
        &no_reply,
        REPORT_002_CREATIVE,
        &[
            "E002 role file of `creative` gives no `output`, and the spec has no contract `Reply` to take instead | add `output: ContractName` to the front matter, or declare `contract Reply` in the spec",
            "E002 role file of `exp_master` gives no `output`, and the spec has no contract `Reply` to take instead | add `output: ContractName` to the front matter, or declare `contract Reply` in the spec",
        ],
    );
    let chatty = REPORT_002_CREATIVE.replace("messages: chat", "messages: chats");
    check(
        REPORT_002_SPEC,
        &chatty,
        &["E002 unknown message layout `chats` | did you mean `chat`?"],
    );
    let numbers = REPORT_002_SPEC
        .replace(
            "contract Request { text: string }",
            "contract Request { n: int }",
        )
        .replace(
            "role_named(mention(request.text)) == \"exp_master\"",
            "request.n == 1",
        );
    check(
        &numbers,
        REPORT_002_CREATIVE,
        &[
            "E005 role `creative` has `messages: chat` but its input `Request` has no `string` field to send as the user's message | add a field such as `text: string` to `Request`",
        ],
    );
}

/// A spec whose role `helper` is `ROLE` (a role block, or nothing when it is imported).
fn helper_spec(role: &str) -> String {
    format!(
        "spec helper version \"1\"\n{role}\nmodels {{ default = \"openai:gpt-4o\" }}\n\
         contract Request {{ text: string }}\ncontract Reply {{ text: string }}\n\
         flow {{ answer = helper(request) -> done }}\n"
    )
}

/// The role `helper` of `spec`, with `roles/helper.md` beside it.
fn helper_role(spec: &str) -> RoleIr {
    let mut loader = MemoryLoader::default();
    loader.files.insert(
        "roles/helper.md".to_string(),
        "---\nid: helper\nmodel: default\ninput: Request\noutput: Reply\nmessages: chat\n---\nYou help.\n"
            .to_string(),
    );
    compiled(spec, &loader).0.roles["helper"].clone()
}

#[test]
fn a_role_block_with_messages_chat_lowers_like_the_role_file_that_says_it() {
    let from_file = helper_role(&helper_spec("import role \"roles/helper.md\""));
    let mut from_block = helper_role(&helper_spec(
        "role helper {\n  model: default\n  prompt: \"You help.\"\n  input: Request\n  output: Reply\n  messages: chat\n}",
    ));
    assert_eq!(from_file.messages, MessagesIr::Chat);
    assert_eq!(from_block.messages, MessagesIr::Chat);
    // Only where the role came from differs: the file's path and its template's origin.
    assert_eq!(from_block.file, None);
    from_block.file = from_file.file.clone();
    from_block.prompt = from_file.prompt.clone();
    assert_eq!(from_block, from_file);

    // `messages: prompt` is the default: the role, and so the spec's hash, is the same as
    // when it says nothing.
    let block = |messages: &str| {
        helper_spec(&format!(
            "role helper {{ model: default  prompt: \"You help.\"  input: Request  output: Reply{messages} }}"
        ))
    };
    let loader = MemoryLoader::default();
    let (silent, _) = compiled(&block(""), &loader);
    let (prompt, _) = compiled(&block("  messages: prompt"), &loader);
    assert_eq!(silent.roles["helper"].messages, MessagesIr::Prompt);
    assert_eq!(silent.roles["helper"], prompt.roles["helper"]);
    assert_eq!(semantic_hash(&silent), semantic_hash(&prompt));
}

/// A role block's `messages:` is checked as a role file's is: the value (E002), an input
/// with a `string` field to send (E005), and said once (E003).
#[test]
fn a_role_blocks_messages_is_checked_like_a_role_files() {
    let check = |messages: &str, request: &str, expect: &[&str]| {
        let spec = helper_spec(&format!(
            "role helper {{ model: default  prompt: \"You help.\"  input: Request  output: Reply  {messages} }}"
        ))
        .replace("contract Request { text: string }", request);
        let compilation = compile("test.charter", &spec, &MemoryLoader::default());
        let found: Vec<String> = compilation
            .diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.is_error())
            .map(|diagnostic| {
                let span = diagnostic.labels.first().map(|label| label.span);
                let at = span.map_or("", |span| &spec[span.start as usize..span.end as usize]);
                format!(
                    "{} {} at `{at}` | {}",
                    diagnostic.code,
                    diagnostic.message,
                    diagnostic.help.as_deref().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(found, expect);
    };
    let text = "contract Request { text: string }";
    check("messages: chat", text, &[]);
    check(
        "messages: chats",
        text,
        &["E002 unknown message layout `chats` at `chats` | did you mean `chat`?"],
    );
    check(
        "messages: chat",
        "contract Request { n: int }",
        &[
            "E005 role `helper` has `messages: chat` but its input `Request` has no `string` field to send as the user's message at `chat` | add a field such as `text: string` to `Request`",
        ],
    );
    let twice = &found_code(&helper_spec(
        "role helper { model: default  prompt: \"You help.\"  input: Request  output: Reply  messages: chat  messages: prompt }",
    ));
    assert_eq!(twice, &["E003"]);
}

/// The codes of the errors of compiling `spec`.
fn found_code(spec: &str) -> Vec<String> {
    compile("test.charter", spec, &MemoryLoader::default())
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.is_error())
        .map(|diagnostic| diagnostic.code.to_string())
        .collect()
}
