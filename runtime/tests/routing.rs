//! Routing without a call (DESIGN §9.1, §9.4): `branch` steps, the built-ins `mention`, `strip_mention` and `role_named` that read an `@name` and find the role it means, and a role file's own keys as `meta` (§9.2).

mod support;

use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use charter_runtime::engine::eval::{mention, strip_mention};
use charter_runtime::engine::mention::KnownNames;
use support::replay_prompts;

const SPEC: &str = r#"spec routing version "1.0.0"
import role "roles/creative.md"
models { default = "openai:m" }
contract Request { text: string }
contract Routing { role: string }
contract Reply { text: string }
role router { prompt: """Who should answer: {{ request.text }}""" input: Request output: Routing }
role business { prompt: """Business: {{ request.text | strip_mention }}""" input: Request output: Reply }
flow {
  pick          = branch
                    when role_named(mention(request.text)) == "creative" -> creative_turn
                    when role_named(mention(request.text)) == "business" -> business_turn
                    else -> route
  route         = router(request) when route.role == "creative" -> creative_turn else -> business_turn
  creative_turn = creative(request) -> done
  business_turn = business(request) -> done
}
"#;

const CREATIVE: &str = "---
id: creative
name: 创意伙伴
model: default
input: Request
output: Reply
workflows: [wf_9, wf_12]
---
Creative: {{ request.text | strip_mention }} ({{ meta.workflows | join(\", \") }})
";

fn spec() -> CompiledSpec {
    let mut loader = MemoryLoader::default();
    loader
        .files
        .insert("roles/creative.md".to_string(), CREATIVE.to_string());
    let compilation = compile("routing.charter", SPEC, &loader);
    assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
    compilation.spec.unwrap_or_else(|| panic!("no spec"))
}

fn turn(text: &str, calls: &str) -> support::WithPrompts {
    replay_prompts(
        &spec(),
        &serde_json::json!({ "text": text }).to_string(),
        &format!("calls:\n{calls}"),
    )
}

#[test]
fn an_explicit_mention_by_display_name_routes_without_calling_the_router() {
    let replay = turn(
        "@创意伙伴 写一个漫画分镜",
        "  - { step: creative_turn, response: { text: 好的 } }\n",
    );
    replay.replayed.assert_ending("completed{done}");
    assert_eq!(replay.prompts.len(), 1, "no router call");
    assert_eq!(
        replay.prompt("creative_turn#1 r1"),
        "Creative: 写一个漫画分镜 (wf_9, wf_12)",
        "the role file's own `workflows` key reaches the template as `meta`"
    );
    assert_eq!(
        replay.replayed.report().outcome.answer,
        Some(serde_json::json!({"text": "好的"}))
    );
}

#[test]
fn a_mention_by_id_ignores_case_and_punctuation() {
    let replay = turn(
        "  @Business: how were sales?",
        "  - { step: business_turn, response: { text: up } }\n",
    );
    replay.replayed.assert_ending("completed{done}");
    assert_eq!(
        replay.prompt("business_turn#1 r1"),
        "Business: how were sales?"
    );
}

#[test]
fn without_a_mention_the_router_decides() {
    let replay = turn(
        "draw me a storyboard",
        "  - { step: route, response: { role: creative } }\n  - { step: creative_turn, response: { text: ok } }\n",
    );
    replay.replayed.assert_ending("completed{done}");
    assert_eq!(replay.prompts.len(), 2);
}

#[test]
fn an_unknown_mention_falls_to_the_router() {
    let replay = turn(
        "@nobody hello",
        "  - { step: route, response: { role: business } }\n  - { step: business_turn, response: { text: hi } }\n",
    );
    replay.replayed.assert_ending("completed{done}");
}

#[test]
fn mention_and_strip_mention_read_the_leading_known_name() {
    let names = KnownNames::of_spec(&spec());
    assert_eq!(
        mention("@creative draw", &names).as_deref(),
        Some("creative")
    );
    assert_eq!(
        mention("  ＠创意伙伴，画一张", &names).as_deref(),
        Some("创意伙伴")
    );
    assert_eq!(
        mention("@创意伙伴画一张", &names).as_deref(),
        Some("创意伙伴")
    );
    assert_eq!(mention("hello @creative", &names), None);
    assert_eq!(mention("@ alone", &names), None);
    assert_eq!(mention("@nobody hi", &names), None);
    assert_eq!(strip_mention("@creative: draw", &names), "draw");
    assert_eq!(strip_mention("  ＠创意伙伴，画一张", &names), "画一张");
    assert_eq!(strip_mention("@创意伙伴画一张", &names), "画一张");
    assert_eq!(strip_mention("@nobody hi", &names), "@nobody hi");
    assert_eq!(strip_mention("no mention", &names), "no mention");
}

/// The seed's report: `@创意伙伴帮我想两个漫画创意` (no space after the name) reaches the
/// creative role, which reads the message without its mention.
#[test]
fn a_chinese_mention_without_a_space_routes_and_is_stripped() {
    let replay = turn(
        "@创意伙伴帮我想两个漫画创意",
        "  - { step: creative_turn, response: { text: 好的 } }\n",
    );
    replay.replayed.assert_ending("completed{done}");
    assert_eq!(
        replay.prompt("creative_turn#1 r1"),
        "Creative: 帮我想两个漫画创意 (wf_9, wf_12)"
    );
}

/// An `@word` that names no role is no mention: the router reads the message whole.
#[test]
fn an_unknown_mention_reaches_the_router_whole() {
    let replay = turn(
        "@nobody 你好",
        "  - { step: route, response: { role: business } }\n  - { step: business_turn, response: { text: hi } }\n",
    );
    replay.replayed.assert_ending("completed{done}");
    assert_eq!(
        replay.prompt("business_turn#1 r1"),
        "Business: @nobody 你好"
    );
}

/// A runner that may call `run_workflow` at most twice, when `permit` holds.
fn runner_spec(permit: &str) -> CompiledSpec {
    let text = format!(
        r#"spec permits version "1.0.0"
models {{ default = "openai:m" }}
contract Request {{ text: string }}
contract Reply {{ text: string }}
contract WorkflowRun {{ workflow_id: string }}
contract RunTicket {{ run_id: string }}
tool run_workflow {{ input: WorkflowRun  output: RunTicket  effect: external }}
role runner {{
  prompt: """Run what {{{{ request.text }}}} asks."""
  input: Request
  output: Reply
  tools: [run_workflow]
  max_tool_calls: 2
  permit run_workflow when {permit}
}}
flow {{ answer = runner(request) -> done }}
"#
    );
    let compilation = compile("permits.charter", &text, &MemoryLoader::default());
    compilation
        .spec
        .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics))
}

/// DESIGN §9.2: a traced tool call whose arguments break a `permit` rule is `tool_denied`
/// naming the rule, like a call outside the whitelist.
#[test]
fn a_call_breaking_a_permit_is_denied_naming_the_rule() {
    let spec = runner_spec(r#"contains(["wf_1", "wf_2"], args.workflow_id)"#);
    let calls = "calls:
  - step: answer
    tool_calls:
      - { tool: run_workflow, args: { workflow_id: wf_9 }, result: { error: refused } }
      - { tool: run_workflow, args: { workflow_id: wf_1 }, result: { run_id: R-1 } }
    response: { text: started wf_1 }
";
    let replay = replay_prompts(&spec, r#"{"text": "run wf_9 then wf_1"}"#, calls);
    replay.replayed.assert_ending("completed{done}");
    let denied = replay.replayed.of_kind("tool_denied");
    assert_eq!(denied.len(), 1, "{}", replay.replayed.jsonl);
    assert_eq!(
        denied[0]["rule"],
        "permit run_workflow when contains([\"wf_1\", \"wf_2\"], args.workflow_id)"
    );
    assert_eq!(replay.replayed.of_kind("tool_call").len(), 1);
}

/// `max_tool_calls N`: the first N calls that run are made; each call after them is
/// `tool_denied` without a rule, and a call a `permit` refused does not count.
#[test]
fn calls_past_max_tool_calls_are_denied_and_refused_calls_do_not_count() {
    let spec = runner_spec(r#"args.workflow_id != "wf_0""#);
    let calls = "calls:
  - step: answer
    tool_calls:
      - { tool: run_workflow, args: { workflow_id: wf_0 }, result: { error: refused } }
      - { tool: run_workflow, args: { workflow_id: wf_1 }, result: { run_id: R-1 } }
      - { tool: run_workflow, args: { workflow_id: wf_2 }, result: { run_id: R-2 } }
      - { tool: run_workflow, args: { workflow_id: wf_3 }, result: { error: not run } }
    response: { text: started wf_1 and wf_2 }
";
    let replay = replay_prompts(&spec, r#"{"text": "run four workflows"}"#, calls);
    replay.replayed.assert_ending("completed{done}");
    let made: Vec<_> = replay
        .replayed
        .of_kind("tool_call")
        .iter()
        .map(|event| event["args"]["workflow_id"].clone())
        .collect();
    assert_eq!(made, ["wf_1", "wf_2"], "{}", replay.replayed.jsonl);
    let denied = replay.replayed.of_kind("tool_denied");
    assert_eq!(denied.len(), 2, "{}", replay.replayed.jsonl);
    // The first was refused by the permit (it names the rule); the last was past the
    // limit (no rule).
    assert!(denied[0]["rule"].is_string(), "{}", replay.replayed.jsonl);
    assert!(
        denied[1].get("rule").is_none_or(serde_json::Value::is_null),
        "{}",
        replay.replayed.jsonl
    );
}
