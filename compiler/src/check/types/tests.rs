//! Data-driven tests of the name and type checks: spec text in, (code, where) out.

use crate::{MemoryLoader, compile};

/// The DESIGN §2.1 example, verbatim.
pub(crate) const EXAMPLE: &str = r#"
spec closed_loop version "1.0.0"
"""Six roles in a closed loop: plan, execute, evaluate, repair, finalize."""

import role "roles/creative.md"          // a role file: YAML front matter + Markdown body (see 2.3)

models {                                 // "<provider>:<model>"; providers: openai (any
  default = "openai:gpt-4o-mini" price 0.15 / 0.60    // OpenAI-compatible endpoint), anthropic;
  strong  = "anthropic:claude-sonnet-4-5"            // optional USD per 1M input / output tokens
}

rules core version "2026.11" {           // shared rules; content hash frozen into every run
  "Never fabricate a tool result."
  "Never lower a threshold or delete evidence to make a gate pass."
}

contract Request { goal: string  constraints: list<string> = [] }
contract Task {
  id: string
  goal: string
  acceptance: list<string>
  depends_on: list<string> = []          // task ids; an `each` step orders work by these
}
contract Plan { goal: string  tasks: list<Task>(1..=20) }
contract StageResult { task_id: string  status: ok | failed | partial  output: string }
contract Query { text: string }
contract Hits { urls: list<string> }
contract Post { title: string  body: string }
contract Receipt { url: string }
contract Review {
  relevance: int(0..=10)
  completeness: int(0..=10)
  verdict: PASS | FAIL | OPTIMIZE
  notes: string?
}

tool web_search { input: Query  output: Hits  effect: read }     // read | write | external
tool publish    { input: Post   output: Receipt  effect: external }

role planner {
  model: default
  prompt: file("prompts/planner.md.j2")  // minijinja; or an inline """...""" block
  rules: [core]
  input: Request
  output: Plan
  timeout: 2m                            // per model call
  retry: 2 backoff 1s                    // provider retries (transient errors, timeouts, bad format)
}
role executor {
  model: default
  prompt: """
    Carry out exactly this work order. {{ task.goal }}
  """
  input: Task
  output: StageResult
  tools: [web_search, publish]           // whitelist; empty or absent = no tools
  max_tool_calls: 8
  timeout: 15m
  retry: 3 backoff 2s
}
role reviewer  { model: strong  prompt: file("prompts/reviewer.md.j2")  input: Candidate  output: Review }
role finalizer { model: default prompt: file("prompts/finalizer.md.j2") input: Candidate  output: Delivery }

gate quality on execute {               // subject: the outputs of step `execute` this round
  hard all_done:  every r in candidate.items: r.status != failed   else STAGE_FAILED
  hard no_secret: not matches(candidate.text, "sk-[A-Za-z0-9]{20,}") else SECRET_LEAK
  warn has_notes: review.notes != none                               else NO_NOTES
  score relevance    weight 2: review.relevance     below 6 LOW_RELEVANCE
  score completeness weight 1: review.completeness  below 6 INCOMPLETE
  pass when score >= 7.0
}

repair {
  rounds 3                               // repair rounds (not provider or stage retries)
  no_progress 2                          // stop after 2 rounds with the same issues and score
  STAGE_FAILED  -> rerun execute
  LOW_RELEVANCE, INCOMPLETE -> rerun execute with feedback
  SECRET_LEAK   -> block "secret in candidate"
  NO_NOTES      -> accept
}

invariant judges_are_toolless: reviewer has no tools
invariant one_publisher: only executor uses publish
invariant bounded_cost: always run.tokens <= 200000

budget { tokens 500000  cost 2.50  wall 60m  steps 40 }

flow {
  plan    = planner(request)                                -> execute
  execute = each t in plan.tasks: executor(t) concurrency 4  -> review
  review  = reviewer(candidate)                             -> judge
  judge   = gate quality                                    pass -> deliver  fail -> repair
  deliver = finalize finalizer(best)                        -> done
}
"#;

/// The prompt files the example names, using what each role provides.
pub(crate) const PROMPTS: [(&str, &str); 4] = [
    (
        "prompts/planner.md.j2",
        "Plan this goal: {{ request.goal }}\n{% for c in request.constraints %}- {{ c }}\n{% endfor %}\nRules: {{ rules }}\n{{ output_schema }}\n",
    ),
    (
        "prompts/reviewer.md.j2",
        "Review candidate {{ candidate.id }}:\n{{ candidate.text }}\n{% if feedback %}{{ feedback }}{% endif %}\n",
    ),
    (
        "prompts/finalizer.md.j2",
        "Summarize {% for item in candidate.items %}{{ item }}{% endfor %}\n",
    ),
    (
        "roles/creative.md",
        "---\nid: creative\nmodel: default\ninput: Task\noutput: StageResult\n---\nWrite {{ task.goal }}\n",
    ),
];

/// The codes this module's checks emit (others' codes are not compared).
const OWN: [&str; 8] = [
    "E002", "E003", "E004", "E005", "E013", "E014", "E018", "W012",
];

/// Compiles `text` with the example's prompt files plus `files`, and returns each
/// diagnostic of our codes as `CODE@snippet` where snippet is the text its primary span
/// covers (in the spec or in a template file), or `CODE@FILE:LINE` when `by_line`.
pub(crate) fn diagnose(text: &str, files: &[(&str, &str)], by_line: bool) -> Vec<String> {
    let mut loader = MemoryLoader::default();
    for (path, content) in PROMPTS.iter().chain(files) {
        loader
            .files
            .insert((*path).to_string(), (*content).to_string());
    }
    let compilation = compile("spec.charter", text, &loader);
    let mut found: Vec<String> = compilation
        .diagnostics
        .iter()
        .filter(|diagnostic| OWN.contains(&diagnostic.code.as_str()))
        .map(|diagnostic| {
            let Some(span) = diagnostic.primary_span() else {
                return format!("{}@?", diagnostic.code);
            };
            if by_line {
                let (line, _) = compilation.sources.line_column(span.file, span.start);
                let name = compilation
                    .sources
                    .get(span.file)
                    .map_or("?", |file| file.name.as_str());
                format!("{}@{name}:{line}", diagnostic.code)
            } else {
                format!(
                    "{}@{}",
                    diagnostic.code,
                    compilation.sources.snippet(span).trim()
                )
            }
        })
        .collect();
    found.sort();
    found
}

/// `check(spec, expected)`: the diagnostics of our codes, as `CODE@FILE:LINE`, sorted.
fn check(text: &str, files: &[(&str, &str)], expected: &[&str]) {
    let found = diagnose(text, files, true);
    let mut expected: Vec<String> = expected.iter().map(|item| (*item).to_string()).collect();
    expected.sort();
    assert_eq!(found, expected, "spec:\n{text}");
}

/// Applies `edits` (first occurrence of each `from` replaced by `to`) to the example and
/// checks the diagnostics of our codes as `CODE@snippet`.
fn check_edit(edits: &[(&str, &str)], expected: &[&str]) {
    check_edit_files(edits, &[], expected);
}

fn check_edit_files(edits: &[(&str, &str)], files: &[(&str, &str)], expected: &[&str]) {
    let mut text = EXAMPLE.to_string();
    for (from, to) in edits {
        assert!(
            text.contains(from),
            "edit target `{from}` is not in the example"
        );
        text = text.replacen(from, to, 1);
    }
    let found = diagnose(&text, files, false);
    let mut expected: Vec<String> = expected.iter().map(|item| (*item).to_string()).collect();
    expected.sort();
    assert_eq!(found, expected, "edits: {edits:?}");
}

/// The full messages of our diagnostics for an edited example (for message tests).
fn messages(edits: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
    let mut text = EXAMPLE.to_string();
    for (from, to) in edits {
        text = text.replacen(from, to, 1);
    }
    let mut loader = MemoryLoader::default();
    for (path, content) in PROMPTS {
        loader.files.insert(path.to_string(), content.to_string());
    }
    compile("spec.charter", &text, &loader)
        .diagnostics
        .into_iter()
        .filter(|diagnostic| OWN.contains(&diagnostic.code.as_str()))
        .map(|diagnostic| (diagnostic.message, diagnostic.help))
        .collect()
}

#[test]
fn the_design_example_is_clean() {
    check_edit(&[], &[]);
}

#[test]
fn unknown_names_in_items() {
    check_edit(&[("tasks: list<Task>", "tasks: list<Tsk>")], &["E002@Tsk"]);
    check_edit(&[("input: Query", "input: Qurey")], &["E002@Qurey"]);
    check_edit(&[("input: Request", "input: Requets")], &["E002@Requets"]);
    check_edit(&[("output: Plan", "output: Plna")], &["E002@Plna"]);
    check_edit(&[("model: strong", "model: strnog")], &["E002@strnog"]);
    check_edit(&[("rules: [core]", "rules: [cor]")], &["E002@cor"]);
    check_edit(
        &[(
            "tools: [web_search, publish]",
            "tools: [web_serch, publish]",
        )],
        &["E002@web_serch"],
    );
    check_edit(&[("on execute", "on exec")], &["E002@exec"]);
    check_edit(&[("rerun execute", "rerun exec")], &["E002@exec"]);
    check_edit(
        &[("reviewer has no tools", "reviewr has no tools")],
        &["E002@reviewr"],
    );
    check_edit(&[("uses publish", "uses pubish")], &["E002@pubish"]);
}

#[test]
fn unknown_names_in_the_flow() {
    check_edit(&[("planner(request)", "planer(request)")], &["E002@planer"]);
    check_edit(&[("= gate quality", "= gate qualty")], &["E002@qualty"]);
    check_edit(&[("-> execute", "-> exeucte")], &["E002@exeucte"]);
    check_edit(
        &[("finalize finalizer(best)", "finalize finalizer(bets)")],
        &["E002@bets"],
    );
}

#[test]
fn tool_rules_name_the_roles_tools() {
    let role = "---\nid: creative\nmodel: default\ninput: Task\noutput: StageResult\ntools: [web_search]\ntool_rules:\n  web_search: \"cite sources\"\n  publish: \"never\"\n---\nWrite {{ task.goal }}\n";
    check_edit_files(&[], &[("roles/creative.md", role)], &["E002@publish"]);
}

#[test]
fn role_file_model_literals() {
    let role = "---\nid: creative\nmodel: gemini:pro\ninput: Task\noutput: StageResult\n---\nWrite {{ task.goal }}\n";
    check_edit_files(&[], &[("roles/creative.md", role)], &["E002@gemini"]);
}

#[test]
fn model_literals_name_a_known_provider() {
    check_edit(&[("model: strong", "model: \"anthropic:claude-x\"")], &[]);
    check_edit(
        &[("model: strong", "model: \"gemini:pro\"")],
        &["E002@gemini"],
    );
    check_edit(
        &[("model: strong", "model: \"gpt-4o\"")],
        &["E013@\"gpt-4o\""],
    );
    check_edit(
        &[("\"openai:gpt-4o-mini\"", "\"opneai:gpt-4o-mini\"")],
        &["E002@opneai"],
    );
}

#[test]
fn names_in_expressions() {
    check_edit(
        &[("review.notes != none", "reveiw.notes != none")],
        &["E002@reveiw"],
    );
    check_edit(&[("not matches(", "not matchs(")], &["E002@matchs"]);
    // A role is not a value, except as the `by` judge of a per-item check.
    check_edit(
        &[("review.notes != none", "reviewer.notes != none")],
        &["E002@reviewer"],
    );
    // `score` exists only in `pass when`; `item` only in a per-item gate.
    check_edit(
        &[("review.relevance     below", "score below")],
        &["E002@score"],
    );
    check_edit(
        &[("review.notes != none", "item.notes != none")],
        &["E002@item"],
    );
    // Quantifier variables end with their body.
    check_edit(
        &[("r.status != failed   ", "r.status != failed and true   ")],
        &[],
    );
    check_edit(
        &[("not matches(candidate.text", "not matches(r.output")],
        &["E002@r"],
    );
}

#[test]
fn role_as_value_help_names_the_step() {
    let found = messages(&[("review.notes != none", "reviewer.notes != none")]);
    assert_eq!(found.len(), 1, "{found:?}");
    let help = found
        .first()
        .and_then(|(_, help)| help.clone())
        .unwrap_or_default();
    assert!(
        help.contains("name the step that calls it: `review`"),
        "{help}"
    );
}

#[test]
fn paths_and_comparisons() {
    check_edit(
        &[("review.relevance     below", "review.relevence     below")],
        &["E004@relevence"],
    );
    check_edit(
        &[("r.status != failed", "r.status != faild")],
        &["E004@faild"],
    );
    check_edit(
        &[("r.status != failed", "r.status != \"failed\"")],
        &["E004@r.status != \"failed\""],
    );
    check_edit(
        &[("review.notes != none", "review.relevance == \"high\"")],
        &["E004@review.relevance == \"high\""],
    );
    check_edit(&[("review.notes != none", "review.relevance == 3.5")], &[]);
    check_edit(&[("review.notes != none", "review.verdict == PASS")], &[]);
    check_edit(
        &[("review.notes != none", "review.verdict == PAS")],
        &["E004@PAS"],
    );
    check_edit(
        &[("review.notes != none", "candidate.items.status == none")],
        &["E004@status"],
    );
    check_edit(
        &[(
            "review.notes != none",
            "request.goal != \"\" and run.tokens < 5 and judge.passed",
        )],
        &[],
    );
}

#[test]
fn variant_message_lists_the_enum() {
    let found = messages(&[("r.status != failed", "r.status != DONE")]);
    let (message, _) = found.first().cloned().unwrap_or_default();
    assert_eq!(
        message,
        "`DONE` is not a variant of `ok | failed | partial`"
    );
}

#[test]
fn conditions_must_be_bool_and_scores_numbers() {
    check_edit(
        &[("review.notes != none", "len(candidate.items)")],
        &["E004@len(candidate.items)"],
    );
    check_edit(
        &[("review.relevance     below", "review.notes     below")],
        &["E004@review.notes"],
    );
    check_edit(
        &[("pass when score >= 7.0", "pass when score")],
        &["E004@score"],
    );
    check_edit(
        &[("always run.tokens <= 200000", "always run.tokens")],
        &["E004@run.tokens"],
    );
    check_edit(&[("review.notes != none", "not 3")], &["E004@3"]);
    check_edit(
        &[("review.notes != none", "run.cost + \"x\" > 1")],
        &["E004@\"x\""],
    );
}

#[test]
fn builtin_calls() {
    check_edit(&[("review.notes != none", "len(review.notes) > 0")], &[]);
    check_edit(
        &[("review.notes != none", "len(review.relevance) > 0")],
        &["E004@review.relevance"],
    );
    check_edit(
        &[("review.notes != none", "len(candidate.items, 1) > 0")],
        &["E004@len(candidate.items, 1)"],
    );
    check_edit(
        &[("review.notes != none", "contains(candidate.failed, \"a\")")],
        &[],
    );
    check_edit(
        &[("review.notes != none", "contains(candidate.failed, 3)")],
        &["E004@3"],
    );
    check_edit(
        &[(
            "review.notes != none",
            "contains([PASS, OPTIMIZE], review.verdict)",
        )],
        &[],
    );
    check_edit(
        &[(
            "review.notes != none",
            "contains([PASS, OPTIMISE], review.verdict)",
        )],
        &["E004@OPTIMISE"],
    );
    check_edit(
        &[(
            "review.notes != none",
            "contains([\"a\"], review.relevance)",
        )],
        &["E004@review.relevance"],
    );
    check_edit(
        &[("review.notes != none", "sum(candidate.failed) > 1")],
        &["E004@candidate.failed"],
    );
    check_edit(
        &[("review.notes != none", "min(candidate.failed) == \"a\"")],
        &[],
    );
    check_edit(
        &[(
            "review.notes != none",
            "(count x in candidate.items: x.status == ok) > 1",
        )],
        &[],
    );
    check_edit(
        &[(
            "review.notes != none",
            "matches(candidate.text, candidate.hash)",
        )],
        &["E004@candidate.hash"],
    );
}

#[test]
fn each_and_role_calls() {
    check_edit(
        &[("each t in plan.tasks", "each t in plan.goal")],
        &["E004@plan.goal"],
    );
    check_edit(
        &[("planner(request)", "planner(request, request)")],
        &["E005@request"],
    );
    check_edit(&[("executor(t)", "executor(plan)")], &["E005@plan"]);
    check_edit(
        &[(
            "executor(t)",
            "executor({id: t.id, goal: t.goal, acceptance: []})",
        )],
        &[],
    );
    check_edit(
        &[("executor(t)", "executor({id: t.id, goal: t.goal})")],
        &["E005@{id: t.id, goal: t.goal}"],
    );
    check_edit(
        &[(
            "executor(t)",
            "executor({id: t.id, goal: 3, acceptance: [], extra: 1})",
        )],
        &["E005@{id: t.id, goal: 3, acceptance: [], extra: 1}"],
    );
    check_edit(&[("reviewer(candidate)", "reviewer(plan)")], &["E005@plan"]);
    check_edit(
        &[("finalizer(best)", "finalizer(best, best)")],
        &["E005@best"],
    );
}

#[test]
fn static_work_lists() {
    let list = "[{id: \"a\", goal: \"g\", acceptance: [], depends_on: [\"b\"]}, {id: \"b\", goal: \"h\", acceptance: []}]";
    check_edit(
        &[("each t in plan.tasks", &format!("each t in {list}"))],
        &[],
    );
    check_edit(
        &[(
            "each t in plan.tasks",
            "each t in [{id: \"a\", goal: \"g\", acceptance: []}, {id: \"b\"}]",
        )],
        &["E004@{id: \"b\"}"],
    );
}

#[test]
fn e005_message_names_role_and_types() {
    let found = messages(&[("executor(t)", "executor(plan)")]);
    let (message, _) = found.first().cloned().unwrap_or_default();
    assert_eq!(
        message,
        "role `executor` takes `Task` but this step passes `Plan`"
    );
}

#[test]
fn per_item_checks() {
    let judge = "role judge_task { model: default  prompt: \"{{ stage_result.output }}\"  input: StageResult  output: Review }\ngate task_ok on execute {\n  hard done: item.status != failed and judge_task.relevance > 2 else TASK_BAD\n  pass when true\n}\n";
    check_edit(
        &[
            ("gate quality", &format!("{judge}gate quality")),
            (
                "concurrency 4",
                "concurrency 4 check task_ok by judge_task retries 2",
            ),
        ],
        &[],
    );
    // The judge must accept the item.
    let wrong = judge
        .replace("input: StageResult", "input: Plan")
        .replace("stage_result.output", "plan.goal");
    check_edit(
        &[
            ("gate quality", &format!("{wrong}gate quality")),
            (
                "concurrency 4",
                "concurrency 4 check task_ok by judge_task retries 2",
            ),
        ],
        &["E005@judge_task"],
    );
    check_edit(
        &[
            ("gate quality", &format!("{judge}gate quality")),
            ("concurrency 4", "concurrency 4 check task_okk by judge_tsk"),
        ],
        &[
            "E002@judge_tsk",
            "E002@task_okk",
            "E002@item",
            "E002@judge_task",
        ],
    );
}

#[test]
fn literal_checks() {
    check_edit(
        &[("relevance: int(0..=10)", "relevance: int(10..=0)")],
        &["E013@(10..=0)"],
    );
    check_edit(
        &[("relevance: int(0..=10)", "relevance: int(0..10)")],
        &["E013@(0..10)"],
    );
    check_edit(
        &[("relevance: int(0..=10)", "relevance: int(0.5..=10)")],
        &["E013@0.5"],
    );
    check_edit(
        &[("list<Task>(1..=20)", "list<Task>(-1..=20)")],
        &["E013@-1"],
    );
    check_edit(&[("weight 2", "weight 0")], &["E013@0"]);
    check_edit(
        &[("below 6 LOW_RELEVANCE", "below 11 LOW_RELEVANCE")],
        &["E013@11"],
    );
    check_edit(&[("tokens 500000", "tokens 0")], &["E013@0"]);
    check_edit(&[("timeout: 2m", "timeout: 0s")], &["E013@0s"]);
    check_edit(
        &[("relevance: int(0..=10)", "relevance: int(0..=10) = 11")],
        &["E013@11"],
    );
    check_edit(
        &[("relevance: int(0..=10)", "relevance: int(0..=10) = 4")],
        &[],
    );
    check_edit(&[("cost 2.50", "cost 0")], &["E013@0"]);
    check_edit(
        &[("pass when score >= 7.0", "pass when score >= 12")],
        &["E013@12"],
    );
    check_edit(
        &[(
            "pass when score >= 7.0",
            "pass when score >= 10 and score > -1",
        )],
        &["E013@-1"],
    );
}

#[test]
fn duplicates_inside_items() {
    check_edit(
        &[(
            "contract Query { text: string }",
            "contract Query { text: string  text: string }",
        )],
        &["E003@text"],
    );
    check_edit(&[("warn has_notes", "warn all_done")], &["E003@all_done"]);
    check_edit(
        &[(
            "NO_NOTES      -> accept",
            "NO_NOTES, STAGE_FAILED -> accept",
        )],
        &["E003@STAGE_FAILED"],
    );
    check_edit(
        &[(
            "executor(t)",
            "executor({id: t.id, goal: t.goal, acceptance: [], id: \"x\"})",
        )],
        &["E003@id"],
    );
}

#[test]
fn field_defaults_fit_their_field() {
    check_edit(
        &[(
            "constraints: list<string> = []",
            "constraints: list<string> = [1]",
        )],
        &["E004@[1]"],
    );
    check_edit(
        &[(
            "status: ok | failed | partial",
            "status: ok | failed | partial = ok",
        )],
        &[],
    );
    check_edit(
        &[(
            "status: ok | failed | partial",
            "status: ok | failed | partial = done",
        )],
        &["E004@done"],
    );
}

#[test]
fn request_is_the_entry_roles_input() {
    check_edit(&[("review.notes != none", "request.goal != \"\"")], &[]);
    check_edit(
        &[("review.notes != none", "request.gaol != \"\"")],
        &["E004@gaol"],
    );
}

#[test]
fn steps_have_their_outputs_types() {
    // A finalize step is a Delivery, an ask step an Answer, an each step a list.
    check_edit(
        &[(
            "invariant bounded_cost: always run.tokens <= 200000",
            "invariant bounded_cost: always run.tokens <= 200000 and deliver.summary != \"\" and len(execute) > 0 and execute.x == 1",
        )],
        &["E004@x"],
    );
}

#[test]
fn small_specs_by_line() {
    let spec = "spec s version \"1\"\ncontract A { x: int(0..=3)  y: Nope }\nrole r { model: \"x:y\"  input: A  output: A  tools: [t] }\nflow {\n  a = r(request)  -> b\n}\n";
    check(
        spec,
        &[],
        &[
            "E002@spec.charter:2",
            "E002@spec.charter:3",
            "E002@spec.charter:3",
            "E002@spec.charter:5",
        ],
    );
}

#[test]
fn candidate_in_the_flow_is_the_upstream_gates() {
    let spec = r#"spec s version "1"
contract Request { goal: string }
contract A { a: string }
contract B { b: string }
contract V { ok: bool }
role ra { model: "openai:x" input: Request output: A }
role rb { model: "openai:x" input: Request output: B }
role fin { model: "openai:x" input: Candidate output: Delivery }
gate ga on first { hard h: true else X  pass when true }
gate gb on second { hard h: true else Y  pass when true }
repair { rounds 1  X, Y -> rerun first }
flow {
  first = ra(request) -> g1
  g1 = gate ga pass -> second fail -> repair
  second = rb(request) when every x in candidate.items: x.b == "" -> g2 else -> g2
  g2 = gate gb pass -> deliver fail -> repair
  deliver = finalize fin(best) when every x in candidate.items: x.zzz == "" -> done else -> done
}
"#;
    check(spec, &[], &["E004@spec.charter:15"]);
}

#[test]
fn no_panic_on_odd_input() {
    for text in [
        "",
        "spec s version \"1\"",
        "spec s version \"1\"\nflow { a = x() -> a }",
        "spec s version \"1\"\ncontract A { a: A? b: list<A>(..=0) }\nrole r { input: A output: A }\nflow { a = r({a: {a: none}, b: [[]]}) -> done }",
        "spec s version \"1\"\ngate g on z { score s weight -1: 1 + \"a\" below 99 X pass when score > 5 } ",
    ] {
        let _ = diagnose(text, &[], true);
    }
    // Deeply nested expressions are checked without exhausting the stack.
    let deep = format!(
        "review.notes != none and {}true{}",
        "not (".repeat(400),
        ")".repeat(400)
    );
    let _ = diagnose(
        &EXAMPLE.replacen("review.notes != none", &deep, 1),
        &[],
        false,
    );
    // Every prefix of the example, and the example with one token dropped, must not panic.
    let mut cut = 0;
    while cut < EXAMPLE.len() {
        if let Some(prefix) = EXAMPLE.get(..cut) {
            let _ = diagnose(prefix, &[], false);
        }
        cut += 31;
    }
    let words: Vec<&str> = EXAMPLE.split(' ').collect();
    for skip in (0..words.len()).step_by(11) {
        let text: Vec<&str> = words
            .iter()
            .enumerate()
            .filter(|(index, _)| *index != skip)
            .map(|(_, word)| *word)
            .collect();
        let _ = diagnose(&text.join(" "), &[], false);
    }
}

/// DESIGN §9.2: a role file's own keys are `meta`; one the role never reads is W012 (with
/// "did you mean" for a misspelt known key), one it reads as `meta.KEY` is fine.
#[test]
fn role_file_keys_of_its_own_are_meta() {
    let read = "---\nid: creative\nmodel: default\ninput: Task\noutput: StageResult\nworkflows: [wf_1]\n---\nWrite {{ task.goal }} with {{ meta.workflows | join(\", \") }}\n";
    check_edit_files(&[], &[("roles/creative.md", read)], &[]);
    let unread = "---\nid: creative\nmodel: default\ninput: Task\noutput: StageResult\ntoolz: [web_search]\n---\nWrite {{ task.goal }}\n";
    check_edit_files(&[], &[("roles/creative.md", unread)], &["W012@toolz"]);
    let mut loader = MemoryLoader::default();
    for (path, content) in PROMPTS.iter().chain(&[("roles/creative.md", unread)]) {
        loader
            .files
            .insert((*path).to_string(), (*content).to_string());
    }
    let compilation = compile("spec.charter", EXAMPLE, &loader);
    let help = compilation
        .diagnostics
        .iter()
        .find(|diagnostic| diagnostic.code.as_str() == "W012")
        .and_then(|diagnostic| diagnostic.help.clone());
    assert_eq!(help.as_deref(), Some("did you mean `tools`?"));
    let meta_elsewhere = "---\nid: creative\nmodel: default\ninput: Task\noutput: StageResult\n---\nWrite {{ meta.workflows }}\n";
    check_edit_files(
        &[],
        &[("roles/creative.md", meta_elsewhere)],
        &["E014@meta"],
    );
}

#[test]
fn a_permit_reads_the_calls_input_by_its_template_name() {
    let permit = |condition: &str| {
        (
            "  max_tool_calls: 8\n",
            format!("  max_tool_calls: 8\n  permit web_search when {condition}\n"),
        )
    };
    // The executor's input `Task` is `task`, typed by its contract.
    let (from, to) = permit("contains(task.acceptance, args.text)");
    check_edit(&[(from, to.as_str())], &[]);
    let (from, to) = permit("task.goal == args.text and len(task.depends_on) == 0");
    check_edit(&[(from, to.as_str())], &[]);
    // A field the contract lacks, with did-you-mean; a wrong type; `item` is not the name.
    let (from, to) = permit("task.gaol == args.text");
    check_edit(&[(from, to.as_str())], &["E004@gaol"]);
    let (from, to) = permit("task.acceptance == 3");
    check_edit(&[(from, to.as_str())], &["E004@task.acceptance == 3"]);
    let (from, to) = permit("item.goal == args.text");
    check_edit(&[(from, to.as_str())], &["E002@item"]);
    let text = EXAMPLE.replacen(from, &to, 1);
    let mut loader = MemoryLoader::default();
    for (path, content) in PROMPTS {
        loader.files.insert(path.to_string(), content.to_string());
    }
    let helps: Vec<String> = compile("spec.charter", &text, &loader)
        .diagnostics
        .into_iter()
        .filter_map(|diagnostic| diagnostic.help)
        .collect();
    assert!(
        helps
            .iter()
            .any(|help| help.contains("`task` (in an `each` step, the work item)")),
        "{helps:?}"
    );
    let (from, to) = permit("task.gaol == args.text");
    let text = EXAMPLE.replacen(from, &to, 1);
    let helps: Vec<String> = compile("spec.charter", &text, &loader)
        .diagnostics
        .into_iter()
        .filter_map(|diagnostic| diagnostic.help)
        .collect();
    assert!(
        helps.iter().any(|help| help.contains("`goal`")),
        "{helps:?}"
    );
}
