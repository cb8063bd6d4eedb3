//! Test helpers shared by the runtime's unit tests: compile spec text to the IR.

use charter_compiler::graph::{CompiledSpec, ExprIr};
use charter_compiler::{MemoryLoader, compile};

/// Compiles `text` (no imported files), failing the test with every diagnostic on an error.
pub fn compile_spec(text: &str) -> CompiledSpec {
    let compilation = compile("test.charter", text, &MemoryLoader::default());
    let messages: Vec<String> = compilation
        .diagnostics
        .iter()
        .map(|diagnostic| format!("{} {}", diagnostic.code, diagnostic.message))
        .collect();
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => spec,
        _ => panic!("the spec does not compile:\n{}", messages.join("\n")),
    }
}

/// A small spec whose gate `g` has one hard rule `EXPR`, for expression tests. In scope:
/// `request: Request`, `review: Review` (the step the gate judges), `candidate`, `best`,
/// `run`.
pub const EXPR_SPEC: &str = r#"spec t version "1"
contract Request { goal: string  n: int  ratio: float  xs: list<int>  words: list<string>  note: string?  inner: Inner? }
contract Inner { deep: string? }
contract Review { score: int(0..=10)  verdict: PASS | FAIL  notes: string? }
role reviewer { model: "openai:gpt-4o-mini" prompt: """{{ request.goal }}""" input: Request output: Review }
role finalizer { model: "openai:gpt-4o-mini" prompt: """{{ candidate.id }}""" input: Candidate output: Delivery }
gate g on review {
  hard r: EXPR else CODE_R
  score s weight 1: review.score below 5 LOW
  pass when score >= 0
}
flow {
  review = reviewer(request) -> judge
  judge = gate g pass -> deliver fail -> failed "no"
  deliver = finalize finalizer(best) -> done
}
"#;

/// The IR of `expr`, written as the hard rule of [`EXPR_SPEC`]'s gate.
pub fn gate_expr(expr: &str) -> ExprIr {
    let spec = compile_spec(&EXPR_SPEC.replace("EXPR", expr));
    match spec.gates.get("g").and_then(|gate| gate.rules.first()) {
        Some(rule) => rule.expr.clone(),
        None => panic!("the test spec has no gate rule"),
    }
}

/// The example of DESIGN §5, with its elisions filled in.
pub const EXAMPLE_CASSETTE: &str = r#"version: 1
recorded: { spec_hash: "sha256:abc", prompts: { planner: "sha256:def" } }
calls:                       # keyed by (step, round, item, attempt), never by order
  - { step: plan, response: { goal: "g", tasks: [] }, latency: 2s,
      usage: { input_tokens: 812, output_tokens: 240 } }
  - { step: execute, item: T-002, attempt: 1, latency: 20m }          # no response: timed out
  - { step: execute, item: T-002, attempt: 2, error: { status: 429 } }
  - { step: execute, item: T-002, attempt: 3, raw: "not json {" }     # malformed output
  - { step: execute, item: T-002, attempt: 4, response: { task_id: T-002, status: ok, output: "done" },
      tool_calls: [ { tool: web_search, args: { text: "q" }, result: { urls: ["https://a.example"] } } ] }
  - { step: execute, item: T-001, round: 2, role: judge, latency: 250ms, response: { ok: true } }
humans: [ { step: confirm, answer: { approved: true } } ]
faults: [ { tamper: { after: judge, item: T-001 } } ]
"#;

/// Compiles `text` with the given files available to `import` and `file(...)`.
pub fn compile_spec_with(text: &str, files: &[(&str, &str)]) -> CompiledSpec {
    let mut loader = MemoryLoader::default();
    for (path, content) in files {
        loader.files.insert(path.to_string(), content.to_string());
    }
    let compilation = compile("test.charter", text, &loader);
    let messages: Vec<String> = compilation
        .diagnostics
        .iter()
        .map(|diagnostic| format!("{} {}", diagnostic.code, diagnostic.message))
        .collect();
    match compilation.spec {
        Some(spec) if !compilation.has_errors() => spec,
        _ => panic!("the spec does not compile:\n{}", messages.join("\n")),
    }
}

/// A closed loop like DESIGN §2.1's, with inline prompts: plan, an `each` over the
/// plan's tasks, a review, a gate with hard, warn and score rules, repair, finalize.
pub const LOOP_SPEC: &str = r#"spec closed_loop version "1"
contract Request { goal: string }
contract Task { id: string  goal: string  depends_on: list<string> = [] }
contract Plan { goal: string  tasks: list<Task>(1..=5) }
contract StageResult { task_id: string  status: ok | failed | partial  output: string }
contract Review { relevance: int(0..=10)  completeness: int(0..=10)  notes: string? }
role planner { model: "openai:m" prompt: """{{ request.goal }}""" input: Request output: Plan }
role executor { model: "openai:m" prompt: """{{ task.goal }}""" input: Task output: StageResult }
role reviewer { model: "openai:m" prompt: """{{ candidate.id }}""" input: Candidate output: Review }
role finalizer { model: "openai:m" prompt: """{{ candidate.id }}""" input: Candidate output: Delivery }
gate quality on execute {
  hard all_done:  every r in candidate.items: r.status != failed   else STAGE_FAILED
  hard no_secret: not matches(candidate.text, "sk-[A-Za-z0-9]{20,}") else SECRET_LEAK
  warn has_notes: review.notes != none                               else NO_NOTES
  score relevance    weight 2: review.relevance     below 6 LOW_RELEVANCE
  score completeness weight 1: review.completeness  below 6 INCOMPLETE
  pass when score >= 7.0
}
repair {
  rounds 3
  STAGE_FAILED -> rerun execute
  LOW_RELEVANCE, INCOMPLETE -> rerun execute with feedback
  SECRET_LEAK -> block "secret in candidate"
  NO_NOTES -> accept
}
flow {
  plan    = planner(request)                                -> execute
  execute = each t in plan.tasks: executor(t) concurrency 4  -> review
  review  = reviewer(candidate)                             -> judge
  judge   = gate quality                                    pass -> deliver  fail -> repair
  deliver = finalize finalizer(best)                        -> done
}
"#;
