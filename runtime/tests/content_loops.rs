//! Loops that carry content (DESIGN §8): what a role is shown when it runs again — rule details, the judges' outputs, its previous output, a person's note, its history — and warnings and people that act.
//!
//! Every test reads the prompts the runtime rendered, so a story passes only if the
//! content reached the role that reacts to it.

mod support;

use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use serde_json::json;
use support::{WithPrompts, replay_prompts};

/// A writer judged by a reviewer; `ARMS` is the repair table's arms and `ROUNDS` its rounds.
const SPEC: &str = r#"spec content_loop version "1.0.0"
models { default = "openai:m" }
contract Request { topic: string }
contract Outline { points: list<string>(1..=5) }
contract Draft { text: string  words: int(0..) }
contract Verdict { score: int(0..=10)  problems: list<string> = []  advice: string? }
role outliner {
  prompt: """Outline {{ request.topic }}.{% if feedback %}
{{ feedback }}{% endif %}"""
  input: Request  output: Outline  retry: 1 backoff 1s
}
role writer {
  prompt: """Write about {{ outline.points | join(", ") }}.{% if feedback %}
{{ feedback }}{% endif %}"""
  input: Outline  output: Draft  retry: 1 backoff 1s
}
role reviewer {
  prompt: """Review: {{ draft.text }}{% for h in history %}
earlier {{ h.step }} r{{ h.round }} v{{ h.visit }}: {{ h.output.problems | join("; ") }}{% endfor %}"""
  input: Draft  output: Verdict  history: [review] HISTORY
}
gate quality on draft {
  hard no_problems: len(review.problems) == 0 else HAS_PROBLEMS detail review.problems
  warn short: every d in candidate.items: d.words <= 100 else TOO_LONG detail candidate.items
  score score weight 1: review.score below 6 LOW_SCORE detail review.advice
  pass when score >= 6
}
repair { rounds ROUNDS  ARMS }
flow {
  outline = outliner(request) -> draft
  draft   = writer(outline)   -> review
  review  = reviewer(draft)   -> judge
  judge   = gate quality      pass -> done  fail -> repair
}
"#;

const FIX: &str = "HAS_PROBLEMS, LOW_SCORE -> rerun draft with feedback  TOO_LONG -> accept";

fn compile_text(text: &str) -> CompiledSpec {
    let compilation = compile("spec.charter", text, &MemoryLoader::default());
    assert!(
        !compilation.has_errors(),
        "does not compile: {:#?}\n{text}",
        compilation.diagnostics
    );
    compilation
        .spec
        .unwrap_or_else(|| panic!("no compiled spec"))
}

fn spec_text(rounds: u64, arms: &str, history: &str) -> String {
    SPEC.replace("ROUNDS", &rounds.to_string())
        .replace("ARMS", arms)
        .replace("HISTORY", history)
}

fn spec(rounds: u64, arms: &str, history: &str) -> CompiledSpec {
    compile_text(&spec_text(rounds, arms, history))
}

fn outline(round: u64) -> String {
    format!("  - {{ step: outline, round: {round}, response: {{ points: [heat, cost] }} }}\n")
}

fn draft(round: u64, text: &str, words: u64) -> String {
    format!(
        "  - {{ step: draft, round: {round}, response: {{ text: \"{text}\", words: {words} }} }}\n"
    )
}

fn review(round: u64, score: u64, problems: &[&str], advice: &str) -> String {
    format!(
        "  - {{ step: review, round: {round}, response: {{ score: {score}, problems: {problems:?}, advice: \"{advice}\" }} }}\n"
    )
}

fn run(spec: &CompiledSpec, calls: &str) -> WithPrompts {
    replay_prompts(
        spec,
        r#"{"topic": "heat pumps"}"#,
        &format!("calls:\n{calls}"),
    )
}

#[test]
fn a_rerun_with_feedback_shows_the_fixer_the_evidence_the_judges_and_its_previous_output() {
    let calls = [
        outline(1),
        draft(1, "DRAFT-ONE", 80),
        review(1, 4, &["the intro repeats the title"], "cut the intro"),
        draft(2, "DRAFT-TWO", 70),
        review(2, 8, &[], "fine"),
    ]
    .concat();
    let replay = run(&spec(2, FIX, ""), &calls);
    replay.replayed.assert_ending("completed{gate_passed}");
    let fixer = replay.prompt("draft#1 r2");
    for expected in [
        "## Feedback",
        "**HAS_PROBLEMS** (error, gate `quality`, rule `no_problems`)",
        "the intro repeats the title",
        "**LOW_SCORE** (error, gate `quality`, rule `score`)",
        "cut the intro",
        "### What the judges found",
        "`review`:",
        "### Your previous output",
        "DRAFT-ONE",
    ] {
        assert!(fixer.contains(expected), "{expected:?} not in:\n{fixer}");
    }
    assert!(
        !replay.prompt("draft#1 r1").contains("Feedback"),
        "a first call has no feedback"
    );
    assert!(
        !replay.prompt("review#1 r2").contains("Feedback"),
        "only the rerun step gets the feedback"
    );
    let gate = &replay.replayed.of_kind("gate")[0];
    assert_eq!(
        gate["issues"][0],
        json!({"code": "HAS_PROBLEMS", "severity": "error", "gate": "quality", "rule": "no_problems",
               "message": "rule `no_problems` does not hold", "detail": ["the intro repeats the title"], "items": []})
    );
    assert_eq!(gate["issues"][1]["detail"], "cut the intro");
    // The run's outcome lists every candidate with the score its gate gave it.
    let scores: Vec<(String, Option<f64>)> = replay
        .replayed
        .report()
        .outcome
        .candidates
        .iter()
        .map(|(id, _, score)| (id.clone(), *score))
        .collect();
    assert_eq!(
        scores,
        [("c1".to_string(), Some(4.0)), ("c2".to_string(), Some(8.0))]
    );
}

#[test]
fn a_plain_rerun_is_a_fresh_try_without_feedback() {
    let calls = [
        outline(1),
        draft(1, "DRAFT-ONE", 80),
        review(1, 4, &["too vague"], "be concrete"),
        draft(2, "DRAFT-TWO", 70),
        review(2, 8, &[], "fine"),
    ]
    .concat();
    let replay = run(
        &spec(
            2,
            "HAS_PROBLEMS, LOW_SCORE -> rerun draft  TOO_LONG -> accept",
            "",
        ),
        &calls,
    );
    replay.replayed.assert_ending("completed{gate_passed}");
    assert_eq!(replay.prompt("draft#1 r2"), replay.prompt("draft#1 r1"));
}

#[test]
fn replan_tells_the_planner_why() {
    let calls = [
        outline(1),
        draft(1, "DRAFT-ONE", 80),
        review(
            1,
            3,
            &["off topic: this is about gas boilers"],
            "start over",
        ),
        outline(2),
        draft(2, "DRAFT-TWO", 70),
        review(2, 8, &[], "fine"),
    ]
    .concat();
    let replay = run(
        &spec(
            2,
            "HAS_PROBLEMS, LOW_SCORE -> replan  TOO_LONG -> accept",
            "",
        ),
        &calls,
    );
    replay.replayed.assert_ending("completed{gate_passed}");
    let planner = replay.prompt("outline#1 r2");
    assert!(
        planner.contains("plan again") && planner.contains("off topic: this is about gas boilers"),
        "{planner}"
    );
    assert!(
        planner.contains("\"heat\""),
        "the previous outline: {planner}"
    );
    assert!(
        !replay.prompt("draft#1 r2").contains("Feedback"),
        "the writer after a replan runs fresh"
    );
}

#[test]
fn a_contract_violation_is_retried_with_the_violations_as_feedback() {
    let calls = [
        outline(1),
        "  - { step: draft, attempt: 1, response: { text: \"no count\" } }\n".to_string(),
        "  - { step: draft, attempt: 2, response: { text: \"DRAFT\", words: 10 } }\n".to_string(),
        review(1, 8, &[], "fine"),
    ]
    .concat();
    let replay = run(&spec(2, FIX, ""), &calls);
    replay.replayed.assert_ending("completed{gate_passed}");
    let retry = replay.prompt("draft#2 r1");
    assert!(
        retry.contains("did not match the required output format")
            && retry.contains("**CONTRACT_VIOLATION**")
            && retry.contains("words"),
        "{retry}"
    );
    assert!(retry.contains("\"no count\""), "the broken answer: {retry}");
}

#[test]
fn a_warning_with_a_rerun_arm_consumes_a_round_with_feedback_before_the_pass_edge() {
    let calls = [
        outline(1),
        draft(1, "LONG", 900),
        review(1, 8, &[], "fine"),
        draft(2, "SHORT", 90),
        review(2, 8, &[], "fine"),
    ]
    .concat();
    let arms = "HAS_PROBLEMS, LOW_SCORE -> rerun draft with feedback  TOO_LONG -> rerun draft";
    let replay = run(&spec(2, arms, ""), &calls);
    replay.replayed.assert_ending("completed{gate_passed}");
    let gates = replay.replayed.of_kind("gate");
    assert_eq!(
        gates[0]["passed"], true,
        "the first round passed, with a warning"
    );
    assert_eq!(gates[0]["issues"][0]["severity"], "warn");
    let fixer = replay.prompt("draft#1 r2");
    assert!(
        fixer.contains("**TOO_LONG** (warn") && fixer.contains("900"),
        "a warning's rerun always gets its feedback: {fixer}"
    );
}

#[test]
fn a_warning_never_blocks_by_itself_once_rounds_run_out() {
    let calls = [
        outline(1),
        draft(1, "LONG", 900),
        review(1, 8, &[], "fine"),
        draft(2, "STILL LONG", 800),
        review(2, 8, &[], "fine"),
    ]
    .concat();
    let arms = "HAS_PROBLEMS, LOW_SCORE -> rerun draft with feedback  TOO_LONG -> rerun draft";
    let replay = run(&spec(1, arms, ""), &calls);
    replay.replayed.assert_ending("completed{gate_passed}");
    assert_eq!(replay.replayed.report().outcome.rounds, 2);
}

#[test]
fn a_warning_with_a_block_arm_blocks() {
    let calls = [outline(1), draft(1, "LONG", 900), review(1, 8, &[], "fine")].concat();
    let arms = "HAS_PROBLEMS, LOW_SCORE -> rerun draft with feedback  TOO_LONG -> block \"too long to publish\"";
    let replay = run(&spec(1, arms, ""), &calls);
    replay
        .replayed
        .assert_ending("blocked{hard_gate{TOO_LONG}}");
}

const ASK_ARMS: &str =
    "HAS_PROBLEMS, LOW_SCORE -> rerun draft with feedback  TOO_LONG -> ask \"Shorten it?\"";

#[test]
fn a_warning_ask_approved_reruns_the_judged_step_with_the_note() {
    let calls = [
        outline(1),
        draft(1, "LONG", 900),
        review(1, 8, &[], "fine"),
        draft(2, "SHORT", 90),
        review(2, 8, &[], "fine"),
        "humans:\n  - { step: judge, answer: { approved: true, note: \"keep the cost table\" } }\n"
            .to_string(),
    ]
    .concat();
    let replay = run(&spec(2, ASK_ARMS, ""), &calls);
    replay.replayed.assert_ending("completed{gate_passed}");
    let fixer = replay.prompt("draft#1 r2");
    assert!(
        fixer.contains("A person answered")
            && fixer.contains("TOO_LONG")
            && fixer.contains("> keep the cost table"),
        "{fixer}"
    );
}

#[test]
fn a_warning_ask_declined_goes_on_along_the_pass_edge() {
    let calls = [
        outline(1),
        draft(1, "LONG", 900),
        review(1, 8, &[], "fine"),
        "humans:\n  - { step: judge, answer: { approved: false } }\n".to_string(),
    ]
    .concat();
    let replay = run(&spec(2, ASK_ARMS, ""), &calls);
    replay.replayed.assert_ending("completed{gate_passed}");
    assert_eq!(replay.replayed.report().outcome.rounds, 1);
}

#[test]
fn an_error_ask_declined_blocks_the_run() {
    let calls = [
        outline(1),
        draft(1, "BAD", 90),
        review(1, 8, &["wrong numbers"], "fine"),
        "humans:\n  - { step: judge, answer: { approved: false } }\n".to_string(),
    ]
    .concat();
    let arms = "HAS_PROBLEMS -> ask \"Fix it?\"  LOW_SCORE -> rerun draft  TOO_LONG -> accept";
    let replay = run(&spec(2, arms, ""), &calls);
    replay.replayed.assert_ending("blocked{human_rejected}");
}

#[test]
fn history_shows_earlier_runs_oldest_first_and_last_n_keeps_the_newest() {
    let calls = [
        outline(1),
        draft(1, "ONE", 90),
        review(1, 4, &["p1"], "a"),
        draft(2, "TWO", 90),
        review(2, 4, &["p2"], "b"),
        draft(3, "THREE", 90),
        review(3, 8, &[], "c"),
    ]
    .concat();
    let all = run(&spec(2, FIX, ""), &calls);
    all.replayed.assert_ending("completed{gate_passed}");
    assert!(
        !all.prompt("review#1 r1").contains("earlier"),
        "nothing before the first run"
    );
    assert!(
        all.prompt("review#1 r3")
            .ends_with("earlier review r1 v1: p1\nearlier review r2 v1: p2"),
        "{}",
        all.prompt("review#1 r3")
    );
    let last = run(&spec(2, FIX, "last 1"), &calls);
    assert!(
        last.prompt("review#1 r3")
            .ends_with("Review: THREE\nearlier review r2 v1: p2"),
        "{}",
        last.prompt("review#1 r3")
    );
}

/// A person confirms the outline; a note on a rejection goes back to the outliner.
const ASK_SPEC: &str = r#"spec asking version "1.0.0"
models { default = "openai:m" }
contract Request { topic: string }
contract Outline { points: list<string>(1..=5) }
contract Draft { text: string }
role outliner {
  prompt: """Outline {{ request.topic }}.{% if feedback %}
{{ feedback }}{% endif %}"""
  input: Request  output: Outline
}
role writer {
  prompt: """Write {{ outline.points | join(", ") }}.{% if feedback %} Note: {{ feedback.human.note }}{% endif %} Step {{ run.step_count }}."""
  input: Outline  output: Draft
}
flow {
  outline = outliner(request)                         -> confirm
  confirm = ask "Write it like this?" max 2
              when confirm.approved     -> draft
              when confirm.note != none -> outline
              else                      -> blocked "not confirmed"
  draft   = writer(outline)                           -> done
}
"#;

fn ask_run(humans: &str, outlines: u64) -> WithPrompts {
    let mut calls = String::from("calls:\n");
    for attempt in 1..=outlines {
        calls.push_str(&format!(
            "  - {{ step: outline, attempt: {attempt}, response: {{ points: [p{attempt}] }} }}\n"
        ));
    }
    calls.push_str("  - { step: draft, response: { text: done } }\n");
    calls.push_str("humans:\n");
    calls.push_str(humans);
    replay_prompts(&compile_text(ASK_SPEC), r#"{"topic": "t"}"#, &calls)
}

#[test]
fn a_note_on_a_rejection_reaches_the_planner_and_the_answers_are_keyed_by_attempt() {
    let replay = ask_run(
        "  - { step: confirm, answer: { approved: false, note: \"add a cost section\" } }\n  \
         - { step: confirm, attempt: 2, answer: { approved: true, note: \"short please\" } }\n",
        2,
    );
    replay.replayed.assert_ending("completed{done}");
    let planner = replay.prompt("outline#2 r1");
    assert!(
        planner.contains("The person rejected. Their note:")
            && planner.contains("> add a cost section"),
        "{planner}"
    );
    assert!(
        planner.contains("\"p1\""),
        "the previous outline: {planner}"
    );
    assert_eq!(
        replay.prompt("draft#1 r1"),
        "Write p2. Note: short please Step 5.",
        "the role after the ask sees the person's note, and `run`"
    );
    assert!(replay.replayed.report().unused_humans.is_empty());
}

#[test]
fn ask_max_stops_a_loop_of_rejections() {
    let replay = ask_run(
        "  - { step: confirm, answer: { approved: false, note: \"again\" } }\n  \
         - { step: confirm, attempt: 2, answer: { approved: false, note: \"and again\" } }\n",
        2,
    );
    replay.replayed.assert_ending("blocked{human_rejected}");
    let finished = replay.replayed.of_kind("run_finished");
    assert_eq!(
        finished[0]["message"],
        "step `confirm` was answered no 2 times, its limit (`max 2`)"
    );
}

#[test]
fn a_rejection_without_a_note_takes_the_else_arm() {
    let replay = ask_run("  - { step: confirm, answer: { approved: false } }\n", 1);
    replay.replayed.assert_ending("blocked{human_rejected}");
    assert_eq!(replay.prompts.len(), 1, "no role runs after the rejection");
}

/// Work orders checked one by one by a reviewer, with a stage retry.
const CHECK_SPEC: &str = r#"spec checked version "1.0.0"
models { default = "openai:m" }
contract Request { topic: string }
contract Order { id: string  goal: string }
contract Plan { orders: list<Order>(1..=3) }
contract Result { order_id: string  text: string }
contract Review { failed: list<string> = []  suggestion: string? }
role planner { prompt: """Plan {{ request.topic }}.""" input: Request  output: Plan }
role worker {
  prompt: """Do {{ order.goal }}.{% if feedback %}
{{ feedback }}{% endif %}"""
  input: Order  output: Result
}
role checker { prompt: """Check {{ result.text }} for {{ order.goal }}.""" input: Order, Result  output: Review }
role closer { prompt: """Deliver {{ candidate.id }}.""" input: Candidate  output: Delivery }
gate accepted on work {
  hard criteria: len(checker.failed) == 0 else CRITERIA_FAILED detail { failed: checker.failed, suggestion: checker.suggestion }
  pass when true
}
gate all on work {
  hard done: len(candidate.failed) == 0 else ORDERS_FAILED
  pass when true
}
repair { rounds 1  ORDERS_FAILED -> rerun work }
flow {
  plan    = planner(request)                                             -> work
  work    = each o in plan.orders: worker(o) check accepted by checker retries 1 -> judge
  judge   = gate all                                                     pass -> deliver  fail -> repair
  deliver = finalize closer(best)                                        -> done
}
"#;

#[test]
fn a_stage_retry_shows_the_worker_the_checkers_verdict_on_its_own_item() {
    let calls = "calls:
  - { step: plan, response: { orders: [ { id: A, goal: alpha }, { id: B, goal: beta } ] } }
  - { step: work, item: A, attempt: 1, response: { order_id: A, text: ALPHA-ONE } }
  - { step: work, item: A, attempt: 1, role: checker, response: { failed: [\"cite the source\"], suggestion: \"add the URL\" } }
  - { step: work, item: A, attempt: 2, response: { order_id: A, text: ALPHA-TWO } }
  - { step: work, item: A, attempt: 2, role: checker, response: { failed: [] } }
  - { step: work, item: B, attempt: 1, response: { order_id: B, text: BETA } }
  - { step: work, item: B, attempt: 1, role: checker, response: { failed: [] } }
  - { step: deliver, response: { candidate_id: c1, summary: both } }
";
    let replay = replay_prompts(&compile_text(CHECK_SPEC), r#"{"topic": "t"}"#, calls);
    replay.replayed.assert_ending("completed{gate_passed}");
    let retry = replay.prompt("work[A]#2 r1");
    for expected in [
        "did not pass its check",
        "**CRITERIA_FAILED** (error, gate `accepted`, rule `criteria`)",
        "cite the source",
        "add the URL",
        "`checker`:",
        "ALPHA-ONE",
    ] {
        assert!(retry.contains(expected), "{expected:?} not in:\n{retry}");
    }
    assert!(
        !replay.prompt("work[B]#1 r1").contains("Feedback"),
        "the other item runs without feedback"
    );
}

/// [`SPEC`] with a noter after a passing gate; the reviewer and the noter see whole outputs.
fn spec_with_noter(rounds: u64) -> CompiledSpec {
    let text = spec_text(rounds, FIX, "")
        .replace("Review: {{ draft.text }}", "Review: {{ draft }}")
        .replace(
            "judge   = gate quality      pass -> done",
            "judge   = gate quality      pass -> note",
        )
        .replace(
            "flow {",
            "contract Note { text: string }\nrole noter {\n  prompt: \"Draft: {{ draft }} Review: {{ verdict }}\"\n  input: Draft, Verdict  output: Note\n}\nflow {",
        )
        .replace(
            "fail -> repair\n}",
            "fail -> repair\n  note    = noter(draft, review) -> done\n}",
        );
    compile_text(&text)
}

#[test]
fn a_late_overwrite_alters_only_the_candidate_and_only_after_its_gate() {
    // The tamper fires once, after `judge`, on the gate's subject only: the step after
    // the gate sees the overwritten draft and an untouched review; the reviewer, before
    // the gate, saw the draft as written.
    let calls = [
        outline(1),
        draft(1, "DRAFT-ONE", 80),
        review(1, 8, &[], "fine"),
        "  - { step: note, response: { text: noted } }\n".to_string(),
        "faults:\n  - { tamper: { after: judge } }\n".to_string(),
    ]
    .concat();
    let replay = run(&spec_with_noter(1), &calls);
    replay.replayed.assert_ending("completed{gate_passed}");
    assert!(
        !replay.prompt("review#1 r1").contains("tampered_after"),
        "nothing is altered before the gate it names"
    );
    let note = replay.prompt("note#1 r1");
    let (draft, review) = note
        .split_once("Review:")
        .unwrap_or_else(|| panic!("no review in:\n{note}"));
    assert!(
        draft.contains("tampered_after") && draft.contains("DRAFT-ONE"),
        "the candidate was overwritten after `judge`: {note}"
    );
    assert!(
        review.contains("fine") && !review.contains("tampered_after"),
        "the judge's output is not the gate's subject: {note}"
    );
}

#[test]
fn a_late_overwrite_fires_once_even_when_its_gate_runs_again() {
    let calls = [
        outline(1),
        draft(1, "DRAFT-ONE", 80),
        review(1, 4, &["too vague"], "be concrete"),
        draft(2, "DRAFT-TWO", 70),
        review(2, 8, &[], "fine"),
        "  - { step: note, round: 2, response: { text: noted } }\n".to_string(),
        "faults:\n  - { tamper: { after: judge } }\n".to_string(),
    ]
    .concat();
    let replay = run(&spec_with_noter(2), &calls);
    replay.replayed.assert_ending("completed{gate_passed}");
    let note = replay.prompt("note#1 r2");
    assert!(
        note.contains("DRAFT-TWO") && !note.contains("tampered_after"),
        "the second pass of `judge` fires nothing: {note}"
    );
}

/// A run that starts by asking a person.
const ASK_FIRST: &str = r#"spec ask_first version "1.0.0"
models { default = "openai:m" }
contract Request { topic: string }
contract Draft { text: string }
role writer {
  prompt: "Write {{ request.topic }}."
  input: Request  output: Draft
}
flow {
  confirm = ask "Write about it?"  when confirm.approved -> draft  else -> blocked "not confirmed"
  draft   = writer(request)        -> done
}
"#;

#[test]
fn a_run_that_opens_with_a_question_is_planning_while_it_asks() {
    let replay = replay_prompts(
        &compile_text(ASK_FIRST),
        r#"{"topic": "t"}"#,
        "calls:\n  - { step: draft, response: { text: done } }\nhumans:\n  - { step: confirm, answer: { approved: true } }\n",
    );
    replay.replayed.assert_ending("completed{done}");
    let phases: Vec<String> = replay
        .replayed
        .of_kind("phase")
        .iter()
        .map(|event| format!("{}->{}", event["from"], event["to"]).replace('"', ""))
        .collect();
    assert_eq!(
        phases,
        ["received->planning", "planning->executing"],
        "the question is asked while planning; the writer then executes"
    );
}

/// A call's argument that reads `run` gets the run as it is when the call starts (the
/// scheduler builds `run` only for the expressions and templates that read it).
#[test]
fn an_argument_reading_run_sees_the_run_so_far() {
    let spec = compile_text(
        r#"spec ticking version "1.0.0"
models { default = "openai:m" }
contract Request { topic: string }
contract Tick { steps: int  topic: string }
contract Draft { text: string }
role first { prompt: """Start {{ request.topic }}."""  input: Request  output: Draft }
role counter { prompt: """{{ tick.topic }} after {{ tick.steps }} steps."""  input: Tick  output: Draft }
flow {
  start = first(request)                                            -> count
  count = counter({ steps: run.step_count, topic: request.topic })  -> done
}
"#,
    );
    let calls = "calls:
  - { step: start, response: { text: a } }
  - { step: count, response: { text: b } }
";
    let replay = replay_prompts(&spec, r#"{"topic": "t"}"#, calls);
    replay.replayed.assert_ending("completed{done}");
    assert_eq!(replay.prompt("count#1 r1"), "t after 2 steps.");
}
