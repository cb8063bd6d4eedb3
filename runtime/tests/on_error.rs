//! `on_error -> STEP`: a step that fails sends the run to STEP, whose role reads the error in `feedback`; only that step's own failure is caught, and a terminal the flow chose reports `routed{STEP}`.

mod support;

use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use support::{replay, replay_prompts};

const SPEC: &str = r#"spec recovering version "1.0.0"
models { default = "openai:m" }
contract Request { goal: string }
contract Out { ok: bool  text: string }
role worker { prompt: """Work on {{ request.goal }}.""" input: Request output: Out retry: 1 backoff 1s }
role fixer {
  prompt: """Recover. {% if feedback %}{{ feedback }}{% endif %}"""
  input: Request
  output: Out
  retry: 0
}
budget { steps 6 }
flow {
  work    = worker(request)
              when work.ok -> done
              else         -> blocked "the worker gave up"
              on_error -> recover
  recover = fixer(request) -> done
}
"#;

fn spec() -> CompiledSpec {
    let compilation = compile("recovering.charter", SPEC, &MemoryLoader::default());
    assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
    compilation.spec.unwrap_or_else(|| panic!("no spec"))
}

const INPUT: &str = r#"{"goal": "g"}"#;

#[test]
fn a_failed_step_goes_to_its_on_error_step_which_sees_the_error() {
    let replayed = replay_prompts(
        &spec(),
        INPUT,
        "calls:\n  - { step: work, attempt: 1, error: { status: 500, message: \"backend down\" } }\n  \
         - { step: work, attempt: 2, error: { status: 500, message: \"backend down\" } }\n  \
         - { step: recover, response: { ok: true, text: recovered } }\n",
    );
    replayed.replayed.assert_ending("completed{done}");
    let routed = replayed.replayed.of_kind("step_error");
    assert_eq!(routed.len(), 1, "{}", replayed.replayed.jsonl);
    assert_eq!(routed[0]["step"], "work");
    assert_eq!(routed[0]["to"], "recover");
    assert!(
        routed[0]["error"]
            .as_str()
            .is_some_and(|error| error.contains("backend down")),
        "{}",
        routed[0]
    );
    let prompt = replayed.prompt("recover#1 r1");
    assert!(
        prompt.contains("A step failed, and the flow sent its error here."),
        "{prompt}"
    );
    assert!(prompt.contains("**STEP_FAILED** (error"), "{prompt}");
    assert!(prompt.contains("rule `work`"), "{prompt}");
    assert!(prompt.contains("backend down"), "{prompt}");
}

#[test]
fn a_failing_on_error_step_ends_the_run_step_failed_at_that_step() {
    let replayed = replay(
        &spec(),
        INPUT,
        "calls:\n  - { step: work, attempt: 1, error: { status: 500 } }\n  \
         - { step: work, attempt: 2, error: { status: 500 } }\n  \
         - { step: recover, error: { status: 500 } }\n",
    );
    // `recover` has no route of its own: its failure ends the run.
    replayed.assert_ending("failed{step_failed{recover}}");
    assert_eq!(replayed.of_kind("step_error").len(), 1);
}

#[test]
fn a_chosen_terminal_reports_routed_not_step_failed() {
    let replayed = replay(
        &spec(),
        INPUT,
        "calls:\n  - { step: work, response: { ok: false, text: \"no way\" } }\n",
    );
    replayed.assert_ending("blocked{routed{work}}");
    assert!(replayed.of_kind("step_error").is_empty());
    let finished = replayed.of_kind("run_finished");
    assert_eq!(finished[0]["message"], "the worker gave up");
}
