//! Tests of the flow checks: spec text in, `(code, line)` pairs out, compared with tables.

use crate::check::Symbols;
use crate::diagnostics::{Diagnostic, Sources};
use crate::{Loader, MemoryLoader};

/// The DESIGN §2.1 example, verbatim.
const DESIGN: &str = include_str!("testdata/design.charter");

/// A role file for the example's `import role "roles/creative.md"` (no tools, so the
/// example's `only executor uses publish` holds).
const CREATIVE_ROLE: &str = "---
id: creative
name: Creative writer
description: Writes the creative parts
model: default
input: Task
output: StageResult
rules: [core]
---
Write {{ task.goal }}.
";

fn loader() -> MemoryLoader {
    let mut loader = MemoryLoader::default();
    for prompt in [
        "prompts/planner.md.j2",
        "prompts/reviewer.md.j2",
        "prompts/finalizer.md.j2",
    ] {
        loader
            .files
            .insert(prompt.to_string(), "Do the work.\n".to_string());
    }
    loader
        .files
        .insert("roles/creative.md".to_string(), CREATIVE_ROLE.to_string());
    loader
}

/// Parses `text` (which must parse cleanly) and runs only the flow checks, as if the name
/// checks had passed. Returns the diagnostics and the facts.
fn run(text: &str, loader: &dyn Loader) -> (Vec<Diagnostic>, Sources, super::FlowFacts) {
    let mut sources = Sources::new();
    let file = sources.add("test.charter", text);
    let (spec, syntax) = crate::syntax::parse(file, &mut sources, loader);
    assert!(syntax.is_empty(), "syntax errors: {syntax:#?}\nin:\n{text}");
    let Some(spec) = spec else {
        panic!("no AST for:\n{text}");
    };
    let mut diagnostics = Vec::new();
    let symbols = Symbols::collect(&spec, &mut diagnostics);
    assert!(diagnostics.is_empty(), "duplicates: {diagnostics:#?}");
    let facts = super::check(&spec, &symbols, true, &mut diagnostics);
    crate::diagnostics::sort(&mut diagnostics);
    for diagnostic in &diagnostics {
        assert!(
            !diagnostic.message.ends_with('.'),
            "message ends with a period: {}",
            diagnostic.message
        );
        assert!(
            diagnostic.help.is_some(),
            "no help for {} {}",
            diagnostic.code,
            diagnostic.message
        );
    }
    (diagnostics, sources, facts)
}

/// `(code, line)` of each diagnostic, lines counted from `first_line` (so a case appended
/// to the prelude counts its own lines from 1 and the prelude's lines are 0 or less).
fn codes(diagnostics: &[Diagnostic], sources: &Sources, first_line: i64) -> Vec<(String, i64)> {
    diagnostics
        .iter()
        .map(|diagnostic| {
            let line = diagnostic.primary_span().map_or(0, |span| {
                let (line, _) = sources.line_column(span.file, span.start);
                i64::try_from(line).unwrap_or(i64::MAX)
            });
            (diagnostic.code.to_string(), line - first_line + 1)
        })
        .collect()
}

/// A spec head shared by most cases. Lines are numbered relative to the case that follows
/// (the comments give them). The gate reads step `review` (so `reviewer` is a judge) and
/// emits `NOT_OK` (line -3) and `LOW` (line -2).
const PRELUDE: &str = r#"spec t version "1"
models { default = "openai:gpt-4o-mini" }
contract Request { goal: string }
contract Out { text: string  ok: bool }
contract Review { rating: int(0..=10) }
tool search { input: Request  output: Out  effect: read }
role worker { model: default  prompt: "go"  input: Request  output: Out  tools: [search]  max_tool_calls: 3 }
role reviewer { model: default  prompt: "judge"  input: Candidate  output: Review }
role finalizer { model: default  prompt: "ship"  input: Candidate  output: Delivery }
gate quality on work {
  hard ok: work.ok else NOT_OK                              // -3
  score rating weight 1: review.rating below 5 LOW          // -2
  pass when score >= 6                                      // -1
}
"#;

/// Runs the flow checks over `PRELUDE` + `case` and compares `(code, line)` pairs, lines
/// counted from the case's first line.
fn expect(case: &str, expected: &[(&str, i64)]) {
    let case = case.strip_prefix('\n').unwrap_or(case);
    let text = format!("{PRELUDE}{case}");
    let prelude_lines = i64::try_from(PRELUDE.lines().count()).unwrap_or(0);
    let (diagnostics, sources, _) = run(&text, &loader());
    let got = codes(&diagnostics, &sources, prelude_lines + 1);
    let expected: Vec<(String, i64)> = expected
        .iter()
        .map(|(code, line)| ((*code).to_string(), *line))
        .collect();
    assert_eq!(
        got, expected,
        "case:\n{case}\ndiagnostics: {diagnostics:#?}"
    );
}

/// Like [`expect`] for a whole spec (no prelude); lines from 1.
fn expect_spec(text: &str, expected: &[(&str, i64)]) {
    let text = text.strip_prefix('\n').unwrap_or(text);
    let (diagnostics, sources, _) = run(text, &loader());
    let got = codes(&diagnostics, &sources, 1);
    let expected: Vec<(String, i64)> = expected
        .iter()
        .map(|(code, line)| ((*code).to_string(), *line))
        .collect();
    assert_eq!(
        got, expected,
        "spec:\n{text}\ndiagnostics: {diagnostics:#?}"
    );
}

/// The well-formed loop: work, review, a gate with repair, a finalize step.
const GOOD_REPAIR: &str = r#"
repair {
  rounds 2
  NOT_OK -> rerun work
  LOW -> rerun work with feedback
}
"#;

const GOOD_FLOW: &str = r#"
flow {
  work   = worker(request)        -> review
  review = reviewer(work)         -> judge
  judge  = gate quality           pass -> ship  fail -> repair
  ship   = finalize finalizer(best) -> done
}
"#;

#[test]
fn a_well_formed_flow_has_no_diagnostics() {
    expect(&format!("{GOOD_REPAIR}{GOOD_FLOW}"), &[]);
}

#[test]
fn the_design_example_has_no_flow_diagnostics() {
    let (diagnostics, _, facts) = run(DESIGN, &loader());
    assert_eq!(diagnostics, Vec::new());
    assert_eq!(facts.entry.as_deref(), Some("plan"));
    assert_eq!(
        facts.steps,
        ["plan", "execute", "review", "judge", "deliver"]
    );
    assert_eq!(facts.judges, ["reviewer"]);
    let [gate_step] = facts.gate_steps.as_slice() else {
        panic!("one gate step expected: {facts:#?}");
    };
    assert_eq!(
        gate_step,
        &super::GateStepFacts {
            step: "judge".into(),
            gate: "quality".into(),
            subject: "execute".into(),
            judges: vec!["reviewer".into()],
            upstream: vec!["plan".into(), "execute".into(), "review".into()],
            repairs: true,
        }
    );
    let edges: Vec<(&str, &str, usize, bool)> = facts
        .repair_edges
        .iter()
        .map(|edge| {
            (
                edge.gate_step.as_str(),
                edge.target.as_str(),
                edge.codes.len(),
                edge.with_feedback,
            )
        })
        .collect();
    assert_eq!(
        edges,
        [
            ("judge", "execute", 1, false),
            ("judge", "execute", 2, true)
        ]
    );
}

#[test]
fn the_design_example_compiles_without_flow_diagnostics() {
    let compilation = crate::compile("design.charter", DESIGN, &loader());
    let flow_codes = [
        "E006", "E007", "E008", "E009", "E010", "E011", "E012", "E015", "W001", "W002", "W003",
        "W004", "W005", "W006", "W009",
    ];
    let flow_diagnostics: Vec<&Diagnostic> = compilation
        .diagnostics
        .iter()
        .filter(|diagnostic| flow_codes.contains(&diagnostic.code.as_str()))
        .collect();
    assert_eq!(flow_diagnostics, Vec::<&Diagnostic>::new());
}

#[test]
fn unbounded_loops() {
    // A `when` loop with no budget is E006 at the back edge.
    expect(
        r#"
flow {
  work   = worker(request) -> review
  review = reviewer(work) when review.rating > 5 -> done else -> work
}
"#,
        &[("E006", 3)],
    );
    // `budget.steps` bounds every loop.
    expect(
        r#"
budget { steps 40 }
flow {
  work   = worker(request) -> review
  review = reviewer(work) when review.rating > 5 -> done else -> work
}
"#,
        &[],
    );
    // A budget without `steps` does not.
    expect(
        r#"
budget { tokens 1000 }
flow {
  work   = worker(request) -> review
  review = reviewer(work) when review.rating > 5 -> done else -> work
}
"#,
        &[("E006", 4)],
    );
    // A gate whose `fail` goes straight back (not through repair) loops without bound.
    expect(
        r#"
flow {
  work   = worker(request)          -> review
  review = reviewer(work)           -> judge
  judge  = gate quality             pass -> ship  fail -> work
  ship   = finalize finalizer(best) -> done
}
"#,
        &[("E006", 4)],
    );
    // A self-loop.
    expect(
        r#"
flow {
  work = worker(request) when work.ok -> done else -> work
}
"#,
        &[("E006", 2)],
    );
    // A loop through `fail -> repair` is bounded by `repair.rounds`.
    expect(&format!("{GOOD_REPAIR}{GOOD_FLOW}"), &[]);
}

#[test]
fn unbounded_loop_message_names_the_cycle() {
    let text = format!(
        "{PRELUDE}flow {{\n  work = worker(request) -> review\n  review = reviewer(work) -> work\n}}\n"
    );
    let (diagnostics, _, _) = run(&text, &loader());
    let messages: Vec<&str> = diagnostics
        .iter()
        .map(|diagnostic| diagnostic.message.as_str())
        .collect();
    assert_eq!(
        messages,
        [
            "steps `work` and `review` only lead to each other: no terminal is reachable from them",
            "unbounded loop: `work` -> `review` -> `work`",
        ]
    );
}

#[test]
fn unreachable_steps_and_steps_that_cannot_finish() {
    // A step nothing leads to.
    expect(
        r#"
flow {
  work   = worker(request) -> done
  orphan = worker(request) -> done
}
"#,
        &[("E007", 3)],
    );
    // Two steps that only lead to each other: one E007 for the trap (plus E006 for the
    // loop, which no budget bounds).
    expect(
        r#"
flow {
  start  = worker(request) -> work
  work   = worker(request) -> review
  review = reviewer(work)  -> work
}
"#,
        &[("E007", 3), ("E006", 4)],
    );
    // With a step budget the loop is bounded, but it still never finishes.
    expect(
        r#"
budget { steps 10 }
flow {
  start  = worker(request) -> work
  work   = worker(request) -> review
  review = reviewer(work)  -> work
}
"#,
        &[("E007", 4)],
    );
    // A finalize step reached only when repair ends is reachable.
    expect(
        r#"
repair {
  rounds 2
  NOT_OK, LOW -> rerun work
}
budget { steps 40 }
flow {
  work   = worker(request)          -> review
  review = reviewer(work)           -> judge
  judge  = gate quality             pass -> done  fail -> repair
  ship   = finalize finalizer(best) -> done
}
"#,
        &[],
    );
    // A `when` with one exit finishes.
    expect(
        r#"
budget { steps 10 }
flow {
  work = worker(request) when work.ok -> done else -> work
}
"#,
        &[],
    );
}

#[test]
fn repair_coverage() {
    // `LOW` has no arm: E008 at the code in the gate.
    expect(
        &format!(
            "{}{GOOD_FLOW}",
            "\nrepair {\n  rounds 2\n  NOT_OK -> rerun work\n}\n"
        ),
        &[("E008", -2)],
    );
    // A `_` arm covers everything.
    expect(
        &format!(
            "{}{GOOD_FLOW}",
            "\nrepair {\n  rounds 2\n  NOT_OK -> rerun work\n  _ -> accept\n}\n"
        ),
        &[],
    );
    // `fail -> repair` without a repair block.
    expect(GOOD_FLOW, &[("E008", 4)]);
    // Warn codes need an action too; a gate used only by a per-item check does not.
    expect(
        r#"
gate item_ok on work {
  hard shaped: item.ok else BAD_ITEM
  warn noted: item.text != "" else NO_TEXT
  pass when true
}
gate second on work {
  warn noted: work.text != "" else NO_TEXT_SECOND
  pass when true
}
repair {
  rounds 2
  NOT_OK, LOW -> rerun work
}
flow {
  work   = each t in [request]: worker(t) check item_ok by reviewer retries 1 -> review
  review = reviewer(work)           -> judge
  judge  = gate quality             pass -> again  fail -> repair
  again  = gate second              pass -> ship   fail -> repair
  ship   = finalize finalizer(best) -> done
}
"#,
        &[("E008", 7)],
    );
}

#[test]
fn repair_arms() {
    // A code no gate emits, and a misspelt one (with "did you mean").
    expect(
        &format!(
            "{}{GOOD_FLOW}",
            "\nrepair {\n  rounds 2\n  NOT_OK, LOW -> rerun work\n  NOPE -> accept\n  LOWW -> accept\n}\n"
        ),
        &[("E009", 4), ("E009", 5)],
    );
    // `rerun` of a step after the gate.
    expect(
        &format!(
            "{}{GOOD_FLOW}",
            "\nrepair {\n  rounds 2\n  NOT_OK -> rerun ship\n  LOW -> rerun review\n}\n"
        ),
        &[("E009", 3)],
    );
    // A repair block no gate step uses.
    expect(
        r#"
repair {
  rounds 2
  NOT_OK, LOW -> rerun work
}
flow {
  work   = worker(request)          -> review
  review = reviewer(work)           -> judge
  judge  = gate quality             pass -> ship  fail -> failed "rejected"
  ship   = finalize finalizer(best) -> done
}
"#,
        &[("E009", 1)],
    );
}

#[test]
fn did_you_mean_for_a_misspelt_repair_code() {
    let text = format!(
        "{PRELUDE}repair {{\n  rounds 2\n  NOT_OK, LOW -> rerun work\n  LOWW -> accept\n}}{GOOD_FLOW}"
    );
    let (diagnostics, _, _) = run(&text, &loader());
    let helps: Vec<Option<&str>> = diagnostics
        .iter()
        .map(|diagnostic| diagnostic.help.as_deref())
        .collect();
    assert_eq!(helps, [Some("did you mean `LOW`?")]);
}

const TOOLS: &str = r#"
spec t version "1"
models { default = "openai:gpt-4o-mini" }
contract Request { goal: string }
contract Out { text: string }
contract Review { rating: int(0..=10) }
tool search { input: Request  output: Out  effect: read }
tool post   { input: Request  output: Out  effect: external }
tool save   { input: Request  output: Out  effect: write }
"#;

#[test]
fn static_invariants() {
    let roles = r#"role worker   { model: default  prompt: "go"  input: Request  output: Out  tools: [search, post]  max_tool_calls: 3 }
role helper   { model: default  prompt: "go"  input: Request  output: Out  tools: [post, save]  max_tool_calls: 3 }
role reviewer { model: default  prompt: "go"  input: Candidate  output: Review  tools: [search]  max_tool_calls: 1 }
invariant one_poster: only worker uses post
invariant toolless: reviewer has no tools
flow {
  work = worker(request) -> done
}
"#;
    // `TOOLS` has 8 lines (its leading newline is stripped): the roles start at line 9.
    expect_spec(&format!("{TOOLS}{roles}"), &[("E010", 10), ("E010", 11)]);
    // Invariants that hold.
    let holding = r#"role worker   { model: default  prompt: "go"  input: Request  output: Out  tools: [search, post, save]  max_tool_calls: 3 }
role reviewer { model: default  prompt: "go"  input: Candidate  output: Review }
invariant one_poster: only worker uses post
invariant toolless: reviewer has no tools
invariant unknown_role_is_skipped: nobody has no tools
flow {
  work = worker(request) -> done
}
"#;
    expect_spec(&format!("{TOOLS}{holding}"), &[]);
}

#[test]
fn judges_may_not_hold_write_or_external_tools() {
    let judged_by_path = r#"role worker   { model: default  prompt: "go"  input: Request  output: Out  tools: [search, post, save]  max_tool_calls: 3 }
role reviewer { model: default  prompt: "go"  input: Candidate  output: Review  tools: [search, post]  max_tool_calls: 3 }
role finalizer { model: default  prompt: "go"  input: Candidate  output: Delivery }
gate quality on work {
  score rating weight 1: review.rating below 5 LOW
  pass when score >= 5
}
repair { rounds 1  LOW -> rerun work }
flow {
  work   = worker(request) -> review
  review = reviewer(work)  -> judge
  judge  = gate quality    pass -> ship  fail -> repair
  ship   = finalize finalizer(best) -> done
}
"#;
    // The reviewer is a judge (the gate reads step `review`); the worker is the subject.
    expect_spec(&format!("{TOOLS}{judged_by_path}"), &[("E011", 10)]);
    let judged_by_check = r#"role worker   { model: default  prompt: "go"  input: Request  output: Out  max_tool_calls: 3 }
role checker  { model: default  prompt: "go"  input: Out  output: Review  tools: [search, save]  max_tool_calls: 3 }
role poster   { model: default  prompt: "go"  input: Request  output: Out  tools: [post]  max_tool_calls: 3 }
gate item_ok on work {
  hard good: checker.rating > 3 else BAD
  pass when true
}
flow {
  work = each t in [request]: worker(t) check item_ok by checker -> send
  send = poster(request) -> done
}
"#;
    expect_spec(&format!("{TOOLS}{judged_by_check}"), &[("E011", 10)]);
}

#[test]
fn finalize_roles_and_gates_that_never_finish() {
    // A finalize role whose output is not `Delivery`.
    expect(
        r#"
flow {
  work  = worker(request) -> judge
  judge = gate quality    pass -> ship  fail -> done
  ship  = finalize worker(request) -> done
}
"#,
        &[("E012", 4)],
    );
    // A gate whose pass path loops back: the run can only end when repair ends.
    expect(
        r#"
repair {
  rounds 2
  NOT_OK, LOW -> rerun work
}
budget { steps 40 }
flow {
  work   = worker(request)          -> review
  review = reviewer(work)           -> judge
  judge  = gate quality             pass -> work  fail -> repair
  ship   = finalize finalizer(best) -> done
}
"#,
        &[("E012", 9)],
    );
    // A gate that passes to `done` in a flow with no finalize step finishes: that is fine.
    expect(
        r#"
repair {
  rounds 2
  NOT_OK, LOW -> rerun work
}
flow {
  work   = worker(request) -> review
  review = reviewer(work)  -> judge
  judge  = gate quality    pass -> done  fail -> repair
}
"#,
        &[],
    );
    // The pass path may go through other steps before it finalizes.
    expect(
        r#"
repair {
  rounds 2
  NOT_OK, LOW -> rerun work
}
flow {
  work   = worker(request) -> review
  review = reviewer(work)  -> judge
  judge  = gate quality    pass -> after  fail -> repair
  after  = worker(request) when after.ok -> ship else -> failed "not ok"
  ship   = finalize finalizer(best) -> done
}
"#,
        &[],
    );
}

#[test]
fn a_finalize_step_needs_a_gate_step_in_its_flow() {
    expect(
        r#"
flow {
  work = worker(request)          -> ship
  ship = finalize finalizer(best) -> done
}
"#,
        &[("E012", 3)],
    );
    // A per-item check forms no candidate either: only a `gate` step evaluates one.
    expect(
        r#"
flow {
  work = each t in request.goals: worker(t) check quality by reviewer -> ship
  ship = finalize finalizer(best)                                     -> done
}
"#,
        &[("E012", 3)],
    );
}

#[test]
fn gates_read_only_steps_that_ran_before_them() {
    // `review` runs only after the gate: the score rule (line -2) reads it too early.
    expect(
        r#"
flow {
  work   = worker(request) -> judge
  judge  = gate quality    pass -> review  fail -> done
  review = reviewer(work)  -> done
}
"#,
        &[("E017", -2)],
    );
    // On another branch: `review` never leads to `judge`.
    expect(
        r#"
flow {
  work   = worker(request)
             when work.ok -> judge
             else         -> review
  review = reviewer(work)  -> done
  judge  = gate quality    pass -> done  fail -> done
}
"#,
        &[("E017", -2)],
    );
    // The subject itself (line -4) and a rule reading it by name (line -3) after the gate.
    expect(
        r#"
flow {
  review = reviewer(request) -> judge
  judge  = gate quality      pass -> work  fail -> done
  work   = worker(request)   -> done
}
"#,
        &[("E017", -4), ("E017", -3)],
    );
    // A loop through `when` makes the later step upstream: it may have run in a past visit.
    expect(
        r#"
budget { steps 20 }
flow {
  work   = worker(request) -> judge
  judge  = gate quality    pass -> review  fail -> done
  review = reviewer(work)
             when review.rating > 5 -> done
             else                   -> work
}
"#,
        &[],
    );
    // A per-item check: `item` and the `by` role are the check's own names; `review`
    // (line 2) runs after the `each` step, `work` is the step being checked.
    expect(
        r#"
gate per_item on work {
  hard fine: item.ok and work.ok and reviewer.rating > 3 and review.rating > 3 else BAD_ITEM
  pass when true
}
flow {
  work   = each t in request.goals: worker(t) check per_item by reviewer -> review
  review = reviewer(work) -> judge
  judge  = gate quality   pass -> done  fail -> done
}
"#,
        &[("E017", 2)],
    );
}

#[test]
fn roles_that_can_receive_feedback() {
    let text = r#"spec t version "1"
contract Request { goal: string }
contract Out { text: string  ok: bool }
contract Review { rating: int(0..=10) }
role planner { model: "openai:x"  prompt: "p"  input: Request  output: Out }
role worker { model: "openai:x"  prompt: "w"  input: Out  output: Out }
role checker { model: "openai:x"  prompt: "c"  input: Out  output: Out }
role stager { model: "openai:x"  prompt: "s"  input: Out  output: Out }
role reviewer { model: "openai:x"  prompt: "r"  input: Candidate  output: Review }
role fixer { model: "openai:x"  prompt: "f"  input: Out  output: Out }
role bystander { model: "openai:x"  prompt: "b"  input: Out  output: Out }
gate quality on work {
  hard ok: work.ok else NOT_OK
  warn noted: check.ok else UNNOTED
  score rating weight 1: review.rating below 5 LOW
  pass when score >= 6
}
gate item_ok on stage {
  hard fine: item.ok else BAD_ITEM
  pass when true
}
repair {
  rounds 2
  NOT_OK -> rerun check
  LOW -> replan
  UNNOTED -> rerun check
  _ -> ask "fix it?"
}
budget { steps 30 }
flow {
  plan    = planner(request)           -> stage
  stage   = each t in [plan]: stager(t) check item_ok -> work
  work    = worker(plan)               -> check
  check   = checker(work)              -> review
  review  = reviewer(work)             -> judge
  judge   = gate quality               pass -> confirm  fail -> repair
  confirm = ask "ok?"
              when confirm.approved -> done
              else                  -> fix
  fix     = fixer(work)                -> other
  other   = bystander(fix)             -> done
}
"#;
    let mut sources = Sources::new();
    let file = sources.add("test.charter", text);
    let (spec, syntax) = crate::syntax::parse(file, &mut sources, &loader());
    assert!(syntax.is_empty(), "syntax errors: {syntax:#?}");
    let spec = spec.expect("parsed");
    let mut diagnostics = Vec::new();
    let symbols = Symbols::collect(&spec, &mut diagnostics);
    let found: Vec<(String, String)> = super::feedback::sources(&symbols)
        .into_iter()
        .map(|source| (source.role, source.reason))
        .collect();
    // In the order the reasons are written: the repair arms, then the flow.
    let expected = [
        (
            "planner",
            "`replan` reruns the entry step `plan` with the reason",
        ),
        (
            "checker",
            "a rerun for the warning `UNNOTED` gives it the gate's issues",
        ),
        (
            "worker",
            "when the person approves, `work` is rerun with the issues of gate `quality` and the person's note",
        ),
        (
            "stager",
            "a stage retry of `stage` gives it the check's issues",
        ),
        (
            "fixer",
            "the answer to `confirm` reaches `fix` as `feedback.human`",
        ),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(role, reason)| ((*role).to_string(), (*reason).to_string()))
        .collect();
    assert_eq!(found, expected);
    // `rerun check` for the error-level NOT_OK alone gives no feedback, and `bystander`
    // (after `fix`, not reached from the `ask` directly) receives none.
    assert!(!found.iter().any(|(role, _)| role == "bystander"));
}

#[test]
fn static_task_lists() {
    // A missing dependency (with "did you mean"), a cycle, and a self-dependency.
    expect(
        r#"
budget { steps 40 }
flow {
  one = each t in [{id: "a", depends_on: ["bb"]}, {id: "b", depends_on: []}]: worker(t) -> two
  two = each t in [
    {id: "a", depends_on: ["b"]},
    {id: "b", depends_on: ["a"]},
    {id: "c", depends_on: ["c"]},
  ]: worker(t) -> done
}
"#,
        &[("E015", 3), ("E015", 6), ("E015", 7)],
    );
    // A list that can be ordered.
    expect(
        r#"
flow {
  one = each t in [{id: "a", depends_on: ["b", "c"]}, {id: "b", depends_on: ["c"]}, {id: "c"}]: worker(t) -> done
}
"#,
        &[],
    );
}

#[test]
fn warnings() {
    let spec = r#"
spec t version "1"
models {
  default = "openai:gpt-4o-mini"
  spare   = "openai:gpt-4o"
}
rules core { "be exact" }
rules spare_rules { "unused" }
contract Request { goal: string  item: Inner }
contract Inner { text: string }
contract Orphan { text: string }
contract Review { rating: int(0..=10) }
tool search { input: Request  output: Request  effect: read }
tool idle   { input: Request  output: Request  effect: read }
role worker   { prompt: "go"  rules: [core]  input: Request  output: Request  tools: [search] }
role reviewer { model: default  prompt: "judge"  input: Candidate  output: Review }
gate quality on work {
  score rating weight 1: review.rating
  pass when review.rating > 5
}
gate plain on work {
  hard ok: work.goal != "" else EMPTY
  pass when true
}
flow {
  work   = worker(request) -> review
  review = reviewer(work)  -> done
}
"#;
    expect_spec(
        spec,
        &[
            ("W009", 4),
            ("W003", 7),
            ("W001", 10),
            ("W002", 13),
            ("W004", 14),
            ("W005", 17),
            ("W006", 18),
        ],
    );
}

#[test]
fn request_is_the_run_input_and_never_unused() {
    expect_spec(
        r#"
spec t version "1"
contract Request { goal: string  note: Note }
contract Note { text: string }
contract Out { ok: bool }
role worker { model: "openai:x"  prompt: "go"  input: Out  output: Out }
flow {
  work = worker(request) -> done
}
"#,
        &[],
    );
}

#[test]
fn facts_for_the_graph_builder() {
    let text = format!("{PRELUDE}{GOOD_REPAIR}{GOOD_FLOW}");
    let (_, _, facts) = run(&text, &loader());
    assert_eq!(facts.entry.as_deref(), Some("work"));
    assert_eq!(facts.steps, ["work", "review", "judge", "ship"]);
    assert_eq!(facts.judges, ["reviewer"]);
    let upstream: Vec<&str> = facts
        .gate_steps
        .iter()
        .flat_map(|gate_step| gate_step.upstream.iter().map(String::as_str))
        .collect();
    assert_eq!(upstream, ["work", "review"]);
    assert_eq!(facts.repair_edges.len(), 2);
}

#[test]
fn unknown_names_cause_no_flow_errors() {
    // The name check reports unknown names; with `names_clean` false the graph checks are
    // skipped and the local checks skip what does not resolve.
    let text = format!(
        "{PRELUDE}{}",
        r#"invariant x: ghost has no tools
invariant y: only ghost uses search
flow {
  work   = wroker(request) -> reveiw
  review = reviewer(work)  -> judge
  judge  = gate qualty      pass -> ship  fail -> repair
  ship   = finalize finaliser(best) -> done
}
"#
    );
    let mut sources = Sources::new();
    let file = sources.add("test.charter", text.as_str());
    let (spec, _) = crate::syntax::parse(file, &mut sources, &loader());
    let Some(spec) = spec else {
        panic!("no AST");
    };
    let mut diagnostics = Vec::new();
    let symbols = Symbols::collect(&spec, &mut diagnostics);
    super::check(&spec, &symbols, false, &mut diagnostics);
    assert_eq!(diagnostics, Vec::new());
}

#[test]
fn a_misspelt_finalize_output_is_left_to_the_name_check() {
    expect(
        r#"
role closer { model: default  prompt: "ship"  input: Candidate  output: Delivry }
flow {
  work  = worker(request) -> judge
  judge = gate quality    pass -> ship  fail -> done
  ship  = finalize closer(best) -> done
}
"#,
        &[],
    );
}

#[test]
fn unresolved_targets_are_reported_when_no_earlier_check_did() {
    expect(
        r#"
flow {
  work = worker(request) -> wrok
}
"#,
        &[("E002", 2)],
    );
}

/// Every line-prefix and every one-line deletion of the example, checked with
/// `names_clean` both ways: the flow checks must never panic.
#[test]
fn never_panics_on_mangled_specs() {
    let lines: Vec<&str> = DESIGN.lines().collect();
    let mut inputs = Vec::new();
    for cut in 0..=lines.len() {
        inputs.push(
            lines
                .iter()
                .take(cut)
                .copied()
                .collect::<Vec<_>>()
                .join("\n"),
        );
        inputs.push(
            lines
                .iter()
                .enumerate()
                .filter(|(index, _)| *index != cut)
                .map(|(_, line)| *line)
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    let loader = loader();
    for input in &inputs {
        for names_clean in [true, false] {
            let mut sources = Sources::new();
            let file = sources.add("test.charter", input.as_str());
            let (spec, _) = crate::syntax::parse(file, &mut sources, &loader);
            if let Some(spec) = spec {
                let mut diagnostics = Vec::new();
                let symbols = Symbols::collect(&spec, &mut diagnostics);
                super::check(&spec, &symbols, names_clean, &mut diagnostics);
            }
        }
    }
}

/// The expression walk is iterative: a very deep expression does not overflow the stack.
#[test]
fn deep_expressions_do_not_overflow() {
    use crate::diagnostics::{FileId, Span};
    use crate::syntax::ast::{BinaryOp, Expr, ExprKind, Ident};
    let span = Span::new(FileId(0), 0, 0);
    let path = |name: &str| Expr {
        kind: ExprKind::Path(vec![Ident {
            name: name.to_string(),
            span,
        }]),
        span,
    };
    let mut expr = path("first");
    for _ in 0..200_000 {
        expr = Expr {
            kind: ExprKind::Binary {
                op: BinaryOp::Lt,
                lhs: Box::new(expr),
                rhs: Box::new(path("next")),
            },
            span,
        };
    }
    let mut roots = 0usize;
    super::for_each_root(&expr, &mut |_, _| roots += 1);
    assert_eq!(roots, 200_001);
    // Dropping a 200,000-deep box chain recurses; leak it instead (this is a test).
    std::mem::forget(expr);
}

/// The codes `compile` reports for a small spec whose writer and finalizer templates are
/// given: a writer rerun with feedback, a finalizer after a gate.
fn template_warnings(writer: &str, finalizer: &str) -> Vec<String> {
    let text = format!(
        r#"spec t version "1"
contract Request {{ goal: string }}
contract Draft {{ text: string }}
contract Review {{ rating: int(0..=10) }}
role writer {{ model: "openai:x"  prompt: """{writer}"""  input: Request  output: Draft }}
role critic {{ model: "openai:x"  prompt: """{{{{ candidate.text }}}}"""  input: Candidate  output: Review }}
role publisher {{ model: "openai:x"  prompt: """{finalizer}"""  input: Candidate  output: Delivery }}
gate quality on write {{
  score rating weight 1: review.rating below 6 LOW
  pass when score >= 6
}}
repair {{ rounds 1  LOW -> rerun write with feedback }}
flow {{
  write   = writer(request)          -> review
  review  = critic(candidate)        -> judge
  judge   = gate quality             pass -> deliver  fail -> repair
  deliver = finalize publisher(best) -> done
}}
"#
    );
    let compilation = crate::compile("t.charter", &text, &crate::NoFiles);
    compilation
        .diagnostics
        .iter()
        .map(|diagnostic| diagnostic.code.to_string())
        .collect()
}

#[test]
fn w010_and_w011_follow_what_the_templates_read() {
    let reads_id = "Deliver {{ candidate.id }}";
    let reads_feedback = "{{ request.goal }}{% if feedback %} Fix: {{ feedback }}{% endif %}";
    assert_eq!(
        template_warnings(reads_feedback, reads_id),
        Vec::<String>::new()
    );
    // A field of `feedback` is a read of it too.
    assert_eq!(
        template_warnings(
            "{% for i in feedback.issues %}{{ i.message }}{% endfor %}",
            reads_id
        ),
        Vec::<String>::new()
    );
    assert_eq!(template_warnings("{{ request.goal }}", reads_id), ["W010"]);
    // The whole candidate, rendered, holds its id.
    assert_eq!(
        template_warnings(reads_feedback, "{{ candidate | tojson }}"),
        Vec::<String>::new()
    );
    assert_eq!(
        template_warnings(
            reads_feedback,
            "{% for r in candidate.items %}{{ r }}{% endfor %}"
        ),
        ["W011"]
    );
    // A template that does not parse is E014's; no warning is guessed from it.
    assert_eq!(template_warnings("{{ request.goal", reads_id), ["E014"]);
}
