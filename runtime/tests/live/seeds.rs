//! The four seed agents with a loop, run live against a *reactive* mock model on loopback: the fixing role answers the fixed output only when its request holds the judge's finding, and repeats the broken output otherwise, so a run completes only if the finding reaches the fixer's prompt.
//!
//! Both real providers serve the run (`openai:` roles through `/v1/chat/completions`,
//! `anthropic:` roles through `/v1/messages`); one responder answers both wire formats.
//! Which role is asked is told from the prompt's opening words.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use charter_runtime::compiler::{CompiledSpec, LoadedFile, Loader, compile};
use charter_runtime::engine::effects::HumanChannel;
use charter_runtime::engine::provider::{BoxFuture, HumanRequest, ProviderError};
use charter_runtime::engine::run::{RunConfig, RunOutcome, run};
use charter_runtime::formats::trace::MemorySink;
use charter_runtime::world::providers::anthropic::OUTPUT_TOOL;
use charter_runtime::world::providers::{
    AnthropicConfig, AnthropicProvider, ApiKey, OpenAiConfig, OpenAiProvider, Providers,
};
use charter_runtime::world::tools::ToolBox;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support::SECRET;

/// Reads a seed's files, relative to `specs/seeds`.
struct SeedFiles(String);

impl Loader for SeedFiles {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        std::fs::read_to_string(format!("{}/{relative_path}", self.0))
            .map(|text| LoadedFile {
                display_name: relative_path.to_string(),
                text,
            })
            .map_err(|error| format!("{relative_path}: {error}"))
    }
}

fn seed(name: &str) -> CompiledSpec {
    seed_with(name, None)
}

/// The seed `name`, with one of its prompt templates replaced (`(file, text)`).
fn seed_with(name: &str, replaced: Option<(&str, String)>) -> CompiledSpec {
    let directory = format!("{}/../specs/seeds", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(format!("{directory}/{name}.charter"))
        .unwrap_or_else(|error| panic!("{name}: {error}"));
    struct Patched {
        files: SeedFiles,
        replaced: Option<(String, String)>,
    }
    impl Loader for Patched {
        fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
            match &self.replaced {
                Some((file, text)) if file == relative_path => Ok(LoadedFile {
                    display_name: relative_path.to_string(),
                    text: text.clone(),
                }),
                _ => self.files.load(relative_path),
            }
        }
    }
    let loader = Patched {
        files: SeedFiles(directory),
        replaced: replaced.map(|(file, text)| (file.to_string(), text)),
    };
    let compilation = compile(&format!("{name}.charter"), &text, &loader);
    assert!(
        !compilation.has_errors(),
        "{name} does not compile: {:#?}",
        compilation.diagnostics
    );
    compilation
        .spec
        .unwrap_or_else(|| panic!("{name}: no spec"))
}

/// The seed `name` with `text` taken out of its prompt template `file` (replaced by
/// `instead`): the same agent, blind to what that text showed.
fn without(name: &str, file: &str, text: &str, instead: &str) -> CompiledSpec {
    let path = format!("{}/../specs/seeds/{file}", env!("CARGO_MANIFEST_DIR"));
    let template = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let stripped = template.replace(text, instead);
    assert_ne!(stripped, template, "{file} has no `{text}`");
    seed_with(name, Some((file, stripped)))
}

/// The text a model was given: every message's text, in order.
fn prompt_of(body: &Value) -> String {
    let mut text = String::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        match &message["content"] {
            Value::String(content) => text.push_str(content),
            Value::Array(parts) => {
                for part in parts {
                    if let Some(part) = part["text"].as_str() {
                        text.push_str(part);
                    }
                }
            }
            _ => {}
        }
        text.push('\n');
    }
    text
}

/// What the mock model answers to a request: `answer(prompt, body)`.
type Answer = Box<dyn Fn(&str, &Value) -> Value + Send + Sync>;

/// Answers every request with `answer(prompt, body)`, in the wire format of the path
/// asked; an answer with `_tool_call: {name, arguments}` is an OpenAI tool call.
struct Reactive {
    answer: Answer,
    /// How many requests each role got (the role is the answer's `_role`).
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl Respond for Reactive {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let mut answer = (self.answer)(&prompt_of(&body), &body);
        if let Some(role) = answer
            .as_object_mut()
            .and_then(|fields| fields.remove("_role"))
            .and_then(|role| role.as_str().map(str::to_string))
        {
            *self
                .counts
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .entry(role)
                .or_default() += 1;
        }
        if let Some(call) = answer
            .as_object_mut()
            .and_then(|fields| fields.remove("_tool_call"))
        {
            let id = format!("call_{}", body["messages"].as_array().map_or(0, Vec::len));
            return ResponseTemplate::new(200).set_body_json(json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                    "tool_calls": [{"id": id, "type": "function", "function": call}]},
                    "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20}
            }));
        }
        if request.url.path().ends_with("/messages") {
            ResponseTemplate::new(200).set_body_json(json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                "content": [{"type": "tool_use", "id": "toolu_out", "name": OUTPUT_TOOL, "input": answer}],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 100, "output_tokens": 20}
            }))
        } else {
            ResponseTemplate::new(200).set_body_json(json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.to_string()}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20}
            }))
        }
    }
}

/// A person who answers every `ask` with `answer`.
struct Person(Value);

impl HumanChannel for Person {
    fn ask(&self, _request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        let answer = self.0.clone();
        Box::pin(async move { Ok(answer) })
    }
}

/// The spec's tools, with a rule engine for `validate_workflow` (lead_agent's `tool`
/// step) that finds nothing wrong: what the LLM checker finds is each test's story.
fn tool_box(spec: &CompiledSpec) -> Arc<ToolBox> {
    let mut tools = ToolBox::for_spec(spec);
    if spec.tools.contains_key("validate_workflow") {
        tools
            .insert(
                "validate_workflow",
                Arc::new(charter_runtime::world::tools::FnTool::new(|_args| async {
                    Ok(json!({"issues": []}))
                })),
            )
            .unwrap_or_else(|error| panic!("{error}"));
    }
    Arc::new(tools)
}

/// The end of a live run and the requests per role.
struct Live {
    ending: String,
    outcome: Option<RunOutcome>,
    counts: BTreeMap<String, usize>,
    trace: String,
}

/// Runs `spec` on `input` against a reactive mock answering with `answer`.
async fn live(
    spec: &CompiledSpec,
    input: Value,
    person: Value,
    answer: impl Fn(&str) -> Value + Send + Sync + 'static,
) -> Live {
    live_with_body(spec, input, person, move |prompt: &str, _: &Value| {
        answer(prompt)
    })
    .await
}

/// [`live`], the mock also given each request's body (the messages of a tool loop).
async fn live_with_body(
    spec: &CompiledSpec,
    input: Value,
    person: Value,
    answer: impl Fn(&str, &Value) -> Value + Send + Sync + 'static,
) -> Live {
    let server = MockServer::start().await;
    let counts = Arc::new(Mutex::new(BTreeMap::new()));
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Reactive {
            answer: Box::new(answer),
            counts: counts.clone(),
        })
        .mount(&server)
        .await;
    let tools = tool_box(spec);
    let tools_for_steps = tools.clone();
    let openai = OpenAiProvider::new(
        OpenAiConfig::new(format!("{}/v1", server.uri()), Some(ApiKey::new(SECRET))),
        tools.clone(),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let anthropic = AnthropicProvider::new(
        AnthropicConfig::new(server.uri(), Some(ApiKey::new(SECRET))),
        tools.clone(),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let providers = Arc::new(
        Providers::new()
            .with_tools(tools_for_steps)
            .with("openai", Arc::new(openai))
            .with("anthropic", Arc::new(anthropic)),
    );
    let mut sink = MemorySink::new();
    let result = run(
        spec,
        input,
        charter_runtime::engine::effects::Effects::new(providers, &Person(person), &mut sink)
            .with_files(&charter_runtime::world::files::LocalFiles),
        &RunConfig::default(),
    )
    .await;
    let trace = sink.to_jsonl().unwrap_or_default();
    let counts = counts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    match result {
        Ok(outcome) => Live {
            ending: outcome.termination().to_string(),
            outcome: Some(outcome),
            counts,
            trace,
        },
        Err(error) => Live {
            ending: format!("error: {error}"),
            outcome: None,
            counts,
            trace,
        },
    }
}

/// The candidate id the finalizer's prompt names (`candidate_id` to "cN").
fn named_candidate(prompt: &str) -> String {
    let marker = "`candidate_id` to \"";
    prompt
        .find(marker)
        .map(|start| {
            prompt[start + marker.len()..]
                .chars()
                .take_while(|c| *c != '"')
                .collect()
        })
        .unwrap_or_default()
}

fn with_role(role: &str, mut answer: Value) -> Value {
    if let Some(fields) = answer.as_object_mut() {
        fields.insert("_role".into(), json!(role));
    }
    answer
}

// ---- lead_agent: the checker's issue list reaches the creator ------------------------

const FTP_FINDING: &str = "ftp_upload needs a password";

fn lead_agent_model(prompt: &str) -> Value {
    if prompt.starts_with("You are the lead of a workflow assistant") {
        return with_role(
            "lead",
            json!({"kind": "workflow", "why": "asks for a nightly automation"}),
        );
    }
    if prompt.starts_with("You are the workflow planner") {
        return with_role(
            "planner",
            json!({"goal": "nightly upload", "nodes": [
                {"id": "n1", "kind": "script", "purpose": "build", "next": ["n2"]},
                {"id": "n2", "kind": "ftp_upload", "purpose": "upload", "params": [{"name": "host", "value": "ftp.example.org"}]}
            ]}),
        );
    }
    if prompt.starts_with("You are the workflow creator") {
        // Fixed only when the checker's finding is in the prompt.
        let fixed = prompt.contains(FTP_FINDING);
        return with_role(
            "creator",
            if fixed {
                json!({"workflow_id": "W-7", "version": 2, "node_count": 2, "changes": ["n2: password set"]})
            } else {
                json!({"workflow_id": "W-7", "version": 1, "node_count": 2})
            },
        );
    }
    if prompt.starts_with("You are the workflow checker") {
        let fixed = prompt.contains("version 2");
        let issues = if fixed {
            json!([])
        } else {
            json!([{"severity": "error", "code": "MISSING_PARAM", "node": "n2", "message": FTP_FINDING}])
        };
        return with_role(
            "checker",
            json!({"workflow_id": "W-7", "plan_feasible": true, "issues": issues,
                   "structure": 9, "parameters": if fixed { 9 } else { 4 }, "control_flow": 9}),
        );
    }
    if prompt.starts_with("You are the workflow runner") {
        return with_role(
            "runner",
            json!({"workflow_id": "W-7", "kind": "ok", "detail": "run R-1"}),
        );
    }
    with_role(
        "reporter",
        json!({"candidate_id": named_candidate(prompt), "summary": "built and ran"}),
    )
}

async fn lead_agent(spec: &CompiledSpec) -> Live {
    live(
        spec,
        json!({"message": "every night, build the sales report and upload it"}),
        json!({"approved": true}),
        lead_agent_model,
    )
    .await
}

#[tokio::test]
async fn lead_agent_creator_fixes_what_the_checker_found() {
    let run = lead_agent(&seed("lead_agent")).await;
    assert_eq!(run.ending, "completed{gate_passed}", "{}", run.trace);
    assert_eq!(run.counts.get("creator"), Some(&2), "{:?}", run.counts);
    let delivered = run.outcome.and_then(|outcome| outcome.delivered);
    assert_eq!(delivered.map(|d| d.candidate_id), Some("c2".to_string()));
}

#[tokio::test]
async fn lead_agent_without_feedback_in_the_creator_prompt_never_completes() {
    // The same broken draft every round: repair stops for want of progress.
    const BLIND_ENDING: &str = "failed{no_progress}";
    let blind = without(
        "lead_agent",
        "lead_agent/prompts/creator.md.j2",
        "{{ feedback }}",
        "",
    );
    let run = lead_agent(&blind).await;
    assert_eq!(run.ending, BLIND_ENDING, "{}", run.trace);
}

// ---- closed_loop: the evaluator's findings reach the executor --------------------------

const COP_FINDING: &str = "the COP figures have no source";

fn closed_loop_model(prompt: &str) -> Value {
    if prompt.starts_with("You are the planner") {
        return with_role(
            "planner",
            json!({"goal": "a brief on heat pumps", "success_criteria": ["sources cited"],
                   "tasks": [{"id": "T-001", "goal": "write the brief", "expected_output": "the brief", "acceptance": ["cited"]}]}),
        );
    }
    if prompt.starts_with("You are an executor") {
        let fixed = prompt.contains(COP_FINDING);
        return with_role(
            "executor",
            json!({"task_id": "T-001", "status": "ok",
                   "output": if fixed { "COP 3.5 [source: https://example.org/cop]" } else { "COP 3.5" },
                   "evidence": ["https://example.org/brief"]}),
        );
    }
    if prompt.starts_with("You are the evaluator") {
        let fixed = prompt.contains("[source:");
        let findings = if fixed {
            json!([])
        } else {
            json!([{"code": "UNSOURCED", "severity": "error", "evidence": COP_FINDING, "affects": ["T-001"], "auto_fixable": true}])
        };
        return with_role(
            "evaluator",
            json!({"relevance": 9, "completeness": 9, "clarity": 9, "usability": 9, "on_plan": true, "findings": findings}),
        );
    }
    with_role(
        "finalizer",
        json!({"candidate_id": named_candidate(prompt), "summary": "the brief"}),
    )
}

async fn closed_loop(spec: &CompiledSpec) -> Live {
    live(
        spec,
        json!({"goal": "a one-page brief on heat pumps", "constraints": ["cite sources"]}),
        json!({"approved": false}),
        closed_loop_model,
    )
    .await
}

#[tokio::test]
async fn closed_loop_executor_fixes_the_evaluators_finding() {
    let run = closed_loop(&seed("closed_loop")).await;
    assert_eq!(run.ending, "completed{gate_passed}", "{}", run.trace);
    assert_eq!(run.counts.get("executor"), Some(&2), "{:?}", run.counts);
}

#[tokio::test]
async fn closed_loop_without_feedback_in_the_executor_prompt_never_completes() {
    const BLIND_ENDING: &str = "failed{no_progress}";
    let blind = without(
        "closed_loop",
        "closed_loop/prompts/executor.md.j2",
        "{{ feedback }}",
        "",
    );
    let run = closed_loop(&blind).await;
    assert_eq!(run.ending, BLIND_ENDING, "{}", run.trace);
}

// ---- closed_loop: a finding that names one work order reruns only that order ----------

const OFF_TOPIC: &str = "T-003's glossary defines refrigerator parts";

/// Three independent orders; T-003's executor writes about refrigerators until its
/// prompt holds the evaluator's finding, and the evaluator names the order whose output
/// is off topic in the finding's `affects`. Each executor call counts under its order.
fn closed_loop_three_orders(prompt: &str) -> Value {
    if prompt.starts_with("You are the planner") {
        let order = |id: &str, goal: &str| json!({"id": id, "goal": goal, "expected_output": goal, "acceptance": ["on topic"]});
        return with_role(
            "planner",
            json!({"goal": "a brief on heat pumps", "success_criteria": ["on topic"],
                   "tasks": [order("T-001", "collect sources"), order("T-002", "write the brief"),
                             order("T-003", "write a glossary")]}),
        );
    }
    if prompt.starts_with("You are an executor") {
        let id = ["T-001", "T-002", "T-003"]
            .into_iter()
            .find(|id| prompt.contains(&format!("## Work order {id}")))
            .unwrap_or("T-000");
        let output = if id == "T-003" && !prompt.contains(OFF_TOPIC) {
            "compressor, freezer, crisper".to_string()
        } else {
            format!("{id}: on heat pumps")
        };
        return with_role(
            &format!("executor {id}"),
            json!({"task_id": id, "status": "ok", "output": output, "evidence": ["https://example.org"]}),
        );
    }
    if prompt.starts_with("You are the evaluator") {
        let findings = if prompt.contains("freezer") {
            json!([{"code": "OFF_TOPIC", "severity": "error", "evidence": OFF_TOPIC, "affects": ["T-003"], "auto_fixable": true}])
        } else {
            json!([])
        };
        return with_role(
            "evaluator",
            json!({"relevance": 9, "completeness": 9, "clarity": 9, "usability": 9, "on_plan": true, "findings": findings}),
        );
    }
    with_role(
        "finalizer",
        json!({"candidate_id": named_candidate(prompt), "summary": "the brief"}),
    )
}

#[tokio::test]
async fn closed_loop_reruns_only_the_order_the_finding_names() {
    let run = live(
        &seed("closed_loop"),
        json!({"goal": "a one-page brief on heat pumps"}),
        json!({"approved": false}),
        closed_loop_three_orders,
    )
    .await;
    assert_eq!(run.ending, "completed{gate_passed}", "{}", run.trace);
    let executed: Vec<(&str, usize)> = run
        .counts
        .iter()
        .filter(|(role, _)| role.starts_with("executor"))
        .map(|(role, count)| (role.as_str(), *count))
        .collect();
    assert_eq!(
        executed,
        [
            ("executor T-001", 1),
            ("executor T-002", 1),
            ("executor T-003", 2)
        ],
        "{:?}",
        run.counts
    );
    assert!(
        run.trace.contains(r#""kind":"repair","action":{"kind":"rerun","step":"execute","with_feedback":true},"codes":["OPEN_FINDING"]"#)
            && run.trace.contains(r#""items":["T-003"]"#),
        "{}",
        run.trace
    );
}

// ---- agency: the reviewer's verdict reaches the executor's stage retry -----------------

const CRITERION: &str = "name an owner for every item";

fn agency_model(prompt: &str) -> Value {
    if prompt.starts_with("You are the planner") {
        return with_role(
            "planner",
            json!({"need": "checklist", "tasks": [{"id": "T-001", "kind": "writing", "goal": "a launch checklist", "output_format": "list", "acceptance": [CRITERION]}]}),
        );
    }
    if prompt.starts_with("You are an executor") {
        let fixed = prompt.contains(CRITERION) && prompt.contains("assign the on-call lead");
        return with_role(
            "executor",
            json!({"task_id": "T-001", "status": "completed",
                   "result": if fixed { "1. freeze (owner: on-call lead)" } else { "1. freeze" },
                   "summary": "checklist", "process_notes": "wrote it"}),
        );
    }
    if prompt.starts_with("You are the reviewer") {
        let fixed = prompt.contains("(owner:");
        return with_role(
            "reviewer",
            if fixed {
                json!({"task_id": "T-001", "failed_criteria": [], "quality": 9})
            } else {
                json!({"task_id": "T-001", "failed_criteria": [CRITERION], "suggestion": "assign the on-call lead", "quality": 5})
            },
        );
    }
    agency_delivery(prompt)
}

/// The summarizer, the proofreader and the publisher: a faithful summary, passed and
/// delivered under the candidate the publisher's prompt names.
fn agency_delivery(prompt: &str) -> Value {
    if prompt.starts_with("You are the summarizer") {
        return with_role("summarizer", json!({"text": "the checklist"}));
    }
    if prompt.starts_with("You are the proofreader") {
        return with_role("proofreader", json!({"unsupported": []}));
    }
    let id: String = prompt
        .strip_prefix("You deliver candidate ")
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect()
        })
        .unwrap_or_default();
    with_role(
        "publisher",
        json!({"candidate_id": id, "summary": "the checklist"}),
    )
}

async fn agency(spec: &CompiledSpec) -> Live {
    live(
        spec,
        json!({"need": "a launch checklist", "audience": "ops"}),
        json!({"approved": false}),
        agency_model,
    )
    .await
}

#[tokio::test]
async fn agency_executor_retry_fixes_what_the_reviewer_found() {
    let run = agency(&seed("agency")).await;
    assert_eq!(run.ending, "completed{gate_passed}", "{}", run.trace);
    assert_eq!(run.counts.get("executor"), Some(&2), "{:?}", run.counts);
}

#[tokio::test]
async fn agency_without_feedback_in_the_executor_prompt_never_completes() {
    // The retry repeats the miss, the order fails its check, nothing passes, and the
    // person declines another round.
    const BLIND_ENDING: &str = "blocked{human_rejected}";
    let blind = without(
        "agency",
        "agency/prompts/executor.md.j2",
        "{{ feedback }}",
        "",
    );
    let run = agency(&blind).await;
    assert_eq!(run.ending, BLIND_ENDING, "{}", run.trace);
}

// ---- agency: tools by kind of work order, the refusal reaching the model ---------------

const SEARCH_REFUSED: &str = "permit web_search when work_order.kind == research";

/// A research order and a writing order. Each executor first asks for `web_search`; told
/// it was refused (the request after the refusal holds the rule), it writes the file
/// instead. Counts each tool asked for, and each refusal seen, under the order's kind.
fn agency_tools(prompt: &str, body: &Value) -> Value {
    if prompt.starts_with("You are the planner") {
        return with_role(
            "planner",
            json!({"need": "checklist", "tasks": [
                {"id": "T-001", "kind": "research", "goal": "list the risks", "output_format": "list", "acceptance": ["five risks"]},
                {"id": "T-002", "kind": "writing", "goal": "write the checklist", "output_format": "file", "acceptance": ["a file"]}]}),
        );
    }
    if prompt.starts_with("You are an executor") {
        let (id, kind) = if prompt.contains("## Work order T-001 (research)") {
            ("T-001", "research")
        } else {
            ("T-002", "writing")
        };
        // What the tool loop did so far: the tool messages of this call.
        let tool_messages = body["messages"].as_array().map_or(0, |messages| {
            messages.iter().filter(|m| m["role"] == "tool").count()
        });
        if tool_messages == 0 {
            return tool_call(
                &format!("search by {kind}"),
                "web_search",
                json!({"text": "launch risks"}),
            );
        }
        if tool_messages == 1 && prompt.contains(SEARCH_REFUSED) {
            return tool_call(
                &format!("refused to {kind}"),
                "write_file",
                json!({"path": "checklist.md", "text": "- [ ] rollback"}),
            );
        }
        return with_role(
            &format!("answer by {kind}"),
            json!({"task_id": id, "status": "completed",
                   "result": if kind == "research" { "five risks" } else { "checklist.md" },
                   "summary": "done", "process_notes": "used my kind's tools"}),
        );
    }
    if prompt.starts_with("You are the reviewer") {
        let id = if prompt.contains("## Work order T-001") {
            "T-001"
        } else {
            "T-002"
        };
        return with_role("reviewer", json!({"task_id": id, "quality": 8}));
    }
    agency_delivery(prompt)
}

/// An OpenAI tool call as the assistant's whole answer (with `_role` for the counts).
fn tool_call(role: &str, tool: &str, args: Value) -> Value {
    json!({"_role": role, "_tool_call": {"name": tool, "arguments": args.to_string()}})
}

#[tokio::test]
async fn agency_refuses_a_tool_outside_the_orders_kind_and_the_executor_uses_its_own() {
    let run = live_with_body(
        &seed("agency"),
        json!({"need": "a launch checklist", "audience": "ops"}),
        json!({"approved": false}),
        agency_tools,
    )
    .await;
    assert_eq!(run.ending, "completed{gate_passed}", "{}", run.trace);
    // The research order searched, and was never refused; the writing order's search
    // was refused, the refusal naming the rule reached its next request, and it wrote.
    assert_eq!(
        run.counts.get("search by research"),
        Some(&1),
        "{:?}",
        run.counts
    );
    assert_eq!(
        run.counts.get("refused to research"),
        None,
        "{:?}",
        run.counts
    );
    assert_eq!(
        run.counts.get("search by writing"),
        Some(&1),
        "{:?}",
        run.counts
    );
    assert_eq!(
        run.counts.get("refused to writing"),
        Some(&1),
        "{:?}",
        run.counts
    );
    let denied: Vec<&str> = run
        .trace
        .lines()
        .filter(|line| line.contains(r#""kind":"tool_denied""#))
        .collect();
    assert_eq!(denied.len(), 1, "{}", run.trace);
    assert!(
        denied
            .iter()
            .all(|line| line.contains(r#""item":"T-002""#) && line.contains(SEARCH_REFUSED)),
        "{denied:?}"
    );
    assert!(
        run.trace
            .contains(r#""item":"T-002","attempt":1,"kind":"tool_call","tool":"write_file""#),
        "{}",
        run.trace
    );
}

// ---- auto_agent: the analyzer follows the supervisor's suggestions in its history ------

const SUGGESTION: &str = "search a second database for the third paper";

fn auto_agent_model(prompt: &str) -> Value {
    if prompt.starts_with("You are the task analyzer") {
        let advised = prompt.contains(SUGGESTION);
        return with_role(
            "analyzer",
            json!({"situation": "working", "strategy": if advised { SUGGESTION } else { "search the literature" },
                   "progress": 50, "status": "CONTINUE"}),
        );
    }
    if prompt.starts_with("You are the precision executor") {
        let three = prompt.contains(SUGGESTION);
        return with_role(
            "executor",
            json!({"goal": "papers", "process": "web_search",
                   "result": if three { "three papers" } else { "two papers" }, "self_check": "dates"}),
        );
    }
    if prompt.starts_with("You are the quality supervisor") {
        let three = prompt.contains("three papers");
        return with_role(
            "supervisor",
            if three {
                json!({"score": 90, "verdict": "PASS"})
            } else {
                json!({"score": 40, "verdict": "FAIL", "issues": ["only two papers"], "suggestions": [SUGGESTION]})
            },
        );
    }
    let limit = prompt.contains("step limit");
    with_role(
        "summarizer",
        json!({"answer": "papers", "complete": !limit}),
    )
}

async fn auto_agent(spec: &CompiledSpec) -> Live {
    live(
        spec,
        json!({"goal": "find three recent papers on heat pumps"}),
        json!({"approved": false}),
        auto_agent_model,
    )
    .await
}

#[tokio::test]
async fn auto_agent_analyzer_follows_the_supervisors_suggestion() {
    let run = auto_agent(&seed("auto_agent")).await;
    assert_eq!(run.ending, "completed{done}", "{}", run.trace);
    assert_eq!(
        run.counts.get("supervisor"),
        Some(&2),
        "one FAIL, then PASS: {:?}",
        run.counts
    );
}

#[tokio::test]
async fn auto_agent_without_history_in_the_analyzer_prompt_runs_to_its_step_limit() {
    // The analyzer's section on `history` never renders: nothing of the past reaches it.
    let blind = without(
        "auto_agent",
        "auto_agent/prompts/analyzer.md.j2",
        "{% if history %}",
        "{% if false %}",
    );
    let run = auto_agent(&blind).await;
    // The step limit cut it: the summary is the answer, but the run is not finished work.
    assert_eq!(
        run.ending, "below_target{budget_exhausted{steps}}",
        "{}",
        run.trace
    );
    assert_eq!(run.counts.get("supervisor"), Some(&5), "{:?}", run.counts);
}

// ---- the README's example, as written ---------------------------------------------------

const NOTE: &str = "name one concrete use case";

fn readme_example() -> CompiledSpec {
    let path = format!(
        "{}/../specs/examples/review_loop.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let compilation = compile(
        "review_loop.charter",
        &text,
        &charter_runtime::compiler::MemoryLoader::default(),
    );
    assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
    compilation.spec.unwrap_or_else(|| panic!("no spec"))
}

#[test]
fn the_readme_shows_the_example_spec_as_it_is() {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(format!("{root}/README.md"))
        .unwrap_or_else(|error| panic!("README.md: {error}"));
    let example = std::fs::read_to_string(format!("{root}/specs/examples/review_loop.charter"))
        .unwrap_or_else(|error| panic!("review_loop.charter: {error}"));
    assert!(
        readme.contains(&format!("```\n{example}```")),
        "the README's example differs from specs/examples/review_loop.charter"
    );
}

#[tokio::test]
async fn the_readme_example_reruns_with_the_reviewers_notes_and_delivers_the_named_candidate() {
    let run = live(
        &readme_example(),
        json!({"goal": "heat pumps"}),
        json!({"approved": false}),
        |prompt: &str| {
            if prompt.contains("Write a short post") {
                let fixed = prompt.contains(NOTE);
                return with_role(
                    "writer",
                    json!({"title": "Heat pumps", "body": if fixed { "Heat pumps. A use case: a flat in Oslo." } else { "Heat pumps." }}),
                );
            }
            if prompt.starts_with("Rate this post") {
                let fixed = prompt.contains("A use case:");
                return with_role(
                    "reviewer",
                    if fixed {
                        json!({"relevance": 9, "verdict": "PASS"})
                    } else {
                        json!({"relevance": 5, "verdict": "FAIL", "notes": NOTE})
                    },
                );
            }
            let id: String = prompt
                .strip_prefix("Deliver candidate ")
                .map(|rest| rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect())
                .unwrap_or_default();
            with_role("finalizer", json!({"candidate_id": id, "summary": "a post"}))
        },
    )
    .await;
    assert_eq!(run.ending, "completed{gate_passed}", "{}", run.trace);
    assert_eq!(run.counts.get("writer"), Some(&2), "{:?}", run.counts);
    let delivered = run.outcome.and_then(|outcome| outcome.delivered);
    assert_eq!(delivered.map(|d| d.candidate_id), Some("c2".to_string()));
}

// ---- a conversation with a person records and replays exactly ---------------------------

/// A person who gives `answers` in turn.
struct Sequence(Mutex<std::collections::VecDeque<Value>>);

impl HumanChannel for Sequence {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        let next = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop_front();
        Box::pin(async move {
            next.ok_or(ProviderError::NoHumanAnswer {
                step: request.step,
                round: request.round,
                attempt: request.attempt,
            })
        })
    }
}

#[tokio::test]
async fn a_reject_then_approve_conversation_records_and_replays_exactly() {
    use charter_runtime::formats::scenario::{Cassette, Recorded};
    use charter_runtime::world::record::{Journal, JournalEntry, Recording};

    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Reactive {
            answer: Box::new(|prompt: &str, _: &Value| {
                let mut answer = lead_agent_model(prompt);
                if prompt.starts_with("You are the workflow planner") && prompt.contains("use SFTP")
                {
                    answer["goal"] = json!("nightly upload over SFTP");
                }
                answer
            }),
            counts: Arc::new(Mutex::new(BTreeMap::new())),
        })
        .mount(&server)
        .await;
    let spec = seed("lead_agent");
    let tools = tool_box(&spec);
    let providers: Arc<dyn charter_runtime::engine::effects::Provider> = Arc::new(
        Providers::new()
            .with_tools(tools.clone())
            .with(
                "openai",
                Arc::new(
                    OpenAiProvider::new(
                        OpenAiConfig::new(format!("{}/v1", server.uri()), None),
                        tools.clone(),
                    )
                    .unwrap_or_else(|error| panic!("{error}")),
                ),
            )
            .with(
                "anthropic",
                Arc::new(
                    AnthropicProvider::new(AnthropicConfig::new(server.uri(), None), tools)
                        .unwrap_or_else(|error| panic!("{error}")),
                ),
            ),
    );
    let dir =
        std::env::temp_dir().join(format!("charter-live-conversation-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    let (journal, entries) =
        Journal::open(&dir.join("calls.jsonl")).unwrap_or_else(|error| panic!("{error}"));
    let recording = Recording::journaled(Vec::<String>::new(), journal, entries);
    let person = Sequence(Mutex::new(
        [
            json!({"approved": false, "note": "use SFTP, not plain FTP"}),
            json!({"approved": true}),
        ]
        .into(),
    ));
    let humans = recording.humans(person);
    let input = json!({"message": "every night, build the sales report and upload it"});
    let mut live_sink = MemorySink::new();
    let outcome = run(
        &spec,
        input.clone(),
        charter_runtime::engine::effects::Effects::new(
            Arc::new(recording.provider(providers)),
            &humans,
            &mut live_sink,
        )
        .with_files(&charter_runtime::world::files::LocalFiles),
        &RunConfig::default(),
    )
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(outcome.termination().to_string(), "completed{gate_passed}");

    // The journal keys both answers of `confirm` in round 1 by their attempt.
    let journaled = std::fs::read_to_string(dir.join("calls.jsonl")).unwrap_or_default();
    let humans_keyed: Vec<(String, u64, u64)> = journaled
        .lines()
        .filter_map(|line| serde_json::from_str::<JournalEntry>(line).ok())
        .filter_map(|entry| match entry {
            JournalEntry::Human(human) => Some((human.step, human.round, human.attempt)),
            JournalEntry::Call(_) => None,
        })
        .collect();
    assert_eq!(
        humans_keyed,
        [("confirm".to_string(), 1, 1), ("confirm".to_string(), 1, 2)]
    );
    let _ = std::fs::remove_dir_all(&dir);

    // The cassette replays to the same events, the note reaching the planner again.
    let cassette_text = recording
        .cassette(Recorded::from_spec(&spec))
        .to_yaml()
        .unwrap_or_else(|error| panic!("{error}"));
    let cassette = Cassette::from_yaml("cassette.yaml", &cassette_text)
        .unwrap_or_else(|error| panic!("{error}"));
    let spec_for_replay = spec.clone();
    let (report, replayed) = std::thread::spawn(move || {
        let mut sink = MemorySink::new();
        let report = charter_runtime::world::replay::replay_cassette(
            &spec_for_replay,
            input,
            cassette,
            charter_runtime::engine::run::DeliveryTarget::Memory,
            &mut sink,
        )
        .unwrap_or_else(|error| panic!("{error}"));
        (report, sink.events().to_vec())
    })
    .join()
    .unwrap_or_else(|_| panic!("the replay panicked"));
    assert_eq!(report.outcome.termination(), outcome.termination());
    assert!(
        report.unused_humans.is_empty(),
        "{:?}",
        report.unused_humans
    );
    let timeless = |events: &[charter_runtime::formats::trace::TraceEvent]| -> Vec<Value> {
        events
            .iter()
            .map(|event| {
                let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
                if let Some(fields) = value.as_object_mut() {
                    fields.remove("t_ms");
                }
                value
            })
            .collect()
    };
    assert_eq!(timeless(&replayed), timeless(live_sink.events()));
}
