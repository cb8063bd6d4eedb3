//! Tests of the language service on the seed specs and small inline specs.
// The tests read the seed specs from disk; the service itself reads nothing.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;

use charter_compiler::{LoadedFile, Loader, MemoryLoader};

use super::*;

/// Reads files relative to one directory, as `charter check` does (tests only).
struct DirLoader(PathBuf);

impl Loader for DirLoader {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        let path = self.0.join(relative_path);
        std::fs::read_to_string(&path)
            .map(|text| LoadedFile {
                display_name: path.display().to_string(),
                text,
            })
            .map_err(|error| error.to_string())
    }
}

fn seeds() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs/seeds")
}

fn seed_path(name: &str) -> String {
    normalize(
        &seeds()
            .join(format!("{name}.charter"))
            .display()
            .to_string(),
    )
}

fn seed(name: &str) -> Analysis {
    seed_with(name, &Documents::new(), None)
}

fn seed_with(name: &str, documents: &Documents, text: Option<&str>) -> Analysis {
    let path = seed_path(name);
    let on_disk = std::fs::read_to_string(&path).expect("the seed spec reads");
    Analysis::new(
        &path,
        text.unwrap_or(&on_disk),
        documents,
        &DirLoader(seeds()),
    )
}

fn template_path(spec: &str, file: &str) -> String {
    normalize(
        &seeds()
            .join(spec)
            .join("prompts")
            .join(file)
            .display()
            .to_string(),
    )
}

/// The offset of the `nth` (0-based) `needle` in `text`, plus `within` bytes.
fn offset_of(text: &str, needle: &str, nth: usize, within: usize) -> usize {
    text.match_indices(needle)
        .nth(nth)
        .map(|(at, _)| at + within)
        .unwrap_or_else(|| panic!("`{needle}` #{nth} is in the text"))
}

fn inline(text: &str) -> Analysis {
    Analysis::new(
        "/p/specs/x.charter",
        text,
        &Documents::new(),
        &MemoryLoader::default(),
    )
}

const SMALL: &str = r#"spec small version "1"
contract Ask { question: string  topic: string? }
contract Reply { text: string }
role answerer {
  model: "openai:gpt-4o-mini"
  prompt: """Answer {{ ask.question }} about {{ ask.topic }}"""
  input: Ask
  output: Delivery
}
flow {
  answer = finalize answerer(request) -> done
}
"#;

#[test]
fn every_seed_spec_checks_clean_and_has_an_index() {
    for name in [
        "agency",
        "auto_agent",
        "closed_loop",
        "lead_agent",
        "mention_roles",
    ] {
        let analysis = seed(name);
        let errors: Vec<_> = analysis
            .diagnostics()
            .into_values()
            .flatten()
            .filter(|d| d.error)
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
        assert!(analysis.index.occurrences.len() > 20, "{name}");
        assert!(!analysis.outline().is_empty(), "{name}");
    }
}

#[test]
fn diagnostics_are_check_s_with_label_and_help_in_the_message() {
    let text = std::fs::read_to_string(seed_path("lead_agent")).expect("reads");
    let broken = text.replacen(
        "check    = checker(create, validate)",
        "check    = chekker(create, validate)",
        1,
    );
    let analysis = seed_with("lead_agent", &Documents::new(), Some(&broken));
    let compiled =
        charter_compiler::compile(&seed_path("lead_agent"), &broken, &DirLoader(seeds()));
    let by_file = analysis.diagnostics();
    let found = &by_file[&seed_path("lead_agent")];
    assert_eq!(found.len(), compiled.diagnostics.len());
    let first = &found[0];
    assert_eq!(first.code, "E002");
    assert!(first.message.starts_with(&compiled.diagnostics[0].message));
    assert!(
        first.message.contains("help: did you mean `checker`?"),
        "{}",
        first.message
    );
    assert_eq!(&broken[first.range.clone()], "chekker");
}

#[test]
fn an_open_template_is_read_before_the_disk_and_its_diagnostics_are_its_own() {
    let template = template_path("lead_agent", "planner.md.j2");
    let on_disk = std::fs::read_to_string(&template).expect("reads");
    let mut documents = Documents::new();
    documents.set(
        &template,
        on_disk.replace("{{ request.message }}", "{{ request.mesage }}"),
    );
    let analysis = seed_with("lead_agent", &documents, None);
    let by_file = analysis.diagnostics();
    let found = by_file
        .get(&template)
        .expect("the template has diagnostics");
    assert_eq!(found[0].code, "E014");
    let text = analysis.text(&template).expect("the open text");
    assert_eq!(&text[found[0].range.clone()], "mesage");
    assert!(!by_file.contains_key(&seed_path("lead_agent")));
}

#[test]
fn hover_on_a_flow_step_shows_its_role_model_input_and_output() {
    let analysis = seed("lead_agent");
    let path = seed_path("lead_agent");
    let text = analysis.text(&path).expect("text");
    let at = offset_of(text, "check    = checker", 0, 1);
    let hover = analysis.hover(&path, at).expect("a hover");
    for expected in [
        "output: `CheckReport`",
        "model: default",
        "input: WorkflowDraft, ValidationReport",
        "output: CheckReport",
        "role checker",
    ] {
        assert!(
            hover.markdown.contains(expected),
            "{expected} in {}",
            hover.markdown
        );
    }
    assert_eq!(&text[hover.range], "check");
}

#[test]
fn hover_shows_contracts_rules_issue_codes_and_explain() {
    let analysis = seed("lead_agent");
    let path = seed_path("lead_agent");
    let text = analysis.text(&path).expect("text");
    let contract = analysis
        .hover(&path, offset_of(text, "output: CheckReport", 0, 9))
        .expect("hover");
    assert!(
        contract.markdown.contains("plan_feasible: bool"),
        "{}",
        contract.markdown
    );
    let rules = analysis
        .hover(&path, offset_of(text, "rules: [workflow]", 0, 9))
        .expect("hover");
    assert!(
        rules.markdown.contains("never invent a node kind"),
        "{}",
        rules.markdown
    );
    let issue = analysis
        .hover(&path, offset_of(text, "RULE_ERROR,", 0, 2))
        .expect("hover");
    assert!(
        issue.markdown.contains("hard rules_hold"),
        "{}",
        issue.markdown
    );
    assert!(
        issue.markdown.contains("rerun create with feedback"),
        "{}",
        issue.markdown
    );
    let explained = inline("spec s version \"1\"\n// see E002\n");
    let hover = explained
        .hover("/p/specs/x.charter", 27)
        .expect("hover on E002");
    assert!(
        hover.markdown.contains(
            charter_compiler::explain::explain(charter_compiler::Code::E002)
                .lines()
                .next()
                .expect("a title")
        )
    );
}

#[test]
fn a_field_read_in_a_template_goes_to_the_contract_field() {
    let analysis = seed("lead_agent");
    let template = template_path("lead_agent", "checker.md.j2");
    let text = analysis.text(&template).expect("the template was read");
    let at = offset_of(
        text,
        "workflow_draft.version",
        0,
        "workflow_draft.".len() + 1,
    );
    let targets = analysis.definition(&template, at);
    let spec = seed_path("lead_agent");
    let spec_text = analysis.text(&spec).expect("text");
    assert_eq!(targets.len(), 1);
    assert_eq!(targets[0].path, spec);
    let expected = offset_of(spec_text, "version: int(1..)", 0, 0);
    assert_eq!(targets[0].range, expected..expected + "version".len());
    // The variable itself goes to the contract that feeds it.
    let variable = analysis.definition(&template, offset_of(text, "workflow_draft", 0, 2));
    assert_eq!(&spec_text[variable[0].range.clone()], "WorkflowDraft");
    // A loop variable's field: `issue.severity` over `validation_report.issues`.
    let severity = analysis.definition(&template, offset_of(text, "issue.severity", 0, 7));
    assert_eq!(&spec_text[severity[0].range.clone()], "severity");
    assert!(severity[0].range.start > offset_of(spec_text, "contract Issue", 0, 0));
}

#[test]
fn definition_of_files_steps_fields_in_expressions_and_quantifiers() {
    let analysis = seed("lead_agent");
    let path = seed_path("lead_agent");
    let text = analysis.text(&path).expect("text");
    let file = analysis.definition(&path, offset_of(text, "planner.md.j2", 0, 0));
    assert_eq!(file[0].path, template_path("lead_agent", "planner.md.j2"));
    let step = analysis.definition(&path, offset_of(text, "check.plan_feasible", 0, 1));
    assert_eq!(&text[step[0].range.clone()], "check");
    assert!(step[0].range.start > offset_of(text, "flow {", 0, 0));
    let field = analysis.definition(&path, offset_of(text, "check.plan_feasible", 0, 8));
    assert_eq!(&text[field[0].range.clone()], "plan_feasible");
    let quantified = analysis.definition(&path, offset_of(text, "i.severity != error", 0, 3));
    assert_eq!(&text[quantified[0].range.clone()], "severity");
    let model = analysis.definition(&path, offset_of(text, "model: fast", 0, 8));
    assert_eq!(&text[model[0].range.clone()], "fast");
}

#[test]
fn an_on_error_target_goes_to_its_step() {
    let analysis = seed("auto_agent");
    let path = seed_path("auto_agent");
    let text = analysis.text(&path).expect("text");
    let target = analysis.definition(&path, offset_of(text, "on_error -> analyze", 0, 12));
    assert_eq!(&text[target[0].range.clone()], "analyze");
    assert_eq!(
        target[0].range.start,
        offset_of(text, "  analyze   = analyzer", 0, 2)
    );
}

#[test]
fn references_of_a_contract_include_template_variables() {
    let analysis = seed("lead_agent");
    let path = seed_path("lead_agent");
    let text = analysis.text(&path).expect("text");
    let found = analysis.references(
        &path,
        offset_of(text, "contract WorkflowDraft", 0, 10),
        true,
    );
    let template = template_path("lead_agent", "checker.md.j2");
    assert!(found.iter().any(|r| r.path == template));
    assert!(
        found.iter().filter(|r| r.path == path).count() >= 4,
        "{found:?}"
    );
    let without = analysis.references(
        &path,
        offset_of(text, "contract WorkflowDraft", 0, 10),
        false,
    );
    assert_eq!(without.len() + 1, found.len());
}

#[test]
fn renaming_a_step_edits_flow_repair_history_and_templates() {
    let analysis = seed("auto_agent");
    let path = seed_path("auto_agent");
    let text = analysis.text(&path).expect("text");
    let at = offset_of(text, "execute   = executor", 0, 0);
    let (range, name) = analysis.prepare_rename(&path, at).expect("renamable");
    assert_eq!(name, "execute");
    assert_eq!(&text[range.range], "execute");
    let edits = analysis.rename(&path, at, "run_task").expect("renamed");
    assert!(edits.iter().all(|e| e.new_text == "run_task"));
    let in_spec: Vec<&TextEdit> = edits.iter().filter(|e| e.path == path).collect();
    // The definition, two targets, one read and the `history:` lists of three roles.
    assert_eq!(in_spec.len(), 7, "{in_spec:?}");
    for edit in &in_spec {
        assert_eq!(&text[edit.range.clone()], "execute");
    }
    let history_line = offset_of(text, "history: [execute", 0, 10);
    assert!(in_spec.iter().any(|e| e.range.start == history_line));
    let templates: std::collections::BTreeSet<&str> = edits
        .iter()
        .filter(|e| e.path != path)
        .map(|e| e.path.as_str())
        .collect();
    assert!(
        templates.contains(template_path("auto_agent", "summarizer.md.j2").as_str()),
        "{templates:?}"
    );
    // Applying the edits leaves a spec that still checks clean.
    let mut documents = Documents::new();
    let mut files: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for edit in edits.iter().rev() {
        let file = files
            .entry(edit.path.clone())
            .or_insert_with(|| analysis.text(&edit.path).expect("read").to_string());
        file.replace_range(edit.range.clone(), &edit.new_text);
    }
    for (file, content) in &files {
        documents.set(file, content.clone());
    }
    let renamed = seed_with("auto_agent", &documents, Some(&files[&path]));
    let errors: Vec<_> = renamed
        .diagnostics()
        .into_values()
        .flatten()
        .filter(|d| d.error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn rename_rejects_bad_and_clashing_names_and_renames_contracts_in_templates() {
    let analysis = seed("lead_agent");
    let path = seed_path("lead_agent");
    let text = analysis.text(&path).expect("text");
    let step = offset_of(text, "check    = checker", 0, 0);
    assert!(
        analysis
            .rename(&path, step, "2x")
            .expect_err("rejected")
            .contains("not a valid name")
    );
    assert!(
        analysis
            .rename(&path, step, "plan")
            .expect_err("rejected")
            .contains("a step named `plan` already exists")
    );
    assert!(
        analysis
            .rename(&path, step, "when")
            .expect_err("rejected")
            .contains("reserves")
    );
    let tool = offset_of(text, "tool get_workflow", 0, 6);
    assert!(analysis.prepare_rename(&path, tool).is_err());
    let contract = offset_of(text, "contract WorkflowDraft", 0, 10);
    let edits = analysis.rename(&path, contract, "Draft").expect("renamed");
    let template = template_path("lead_agent", "checker.md.j2");
    assert!(
        edits
            .iter()
            .any(|e| e.path == template && e.new_text == "draft")
    );
    assert!(
        edits
            .iter()
            .any(|e| e.path == path && e.new_text == "Draft")
    );
    let field = offset_of(text, "plan_feasible: bool", 0, 0);
    assert!(
        analysis
            .rename(&path, field, "issues")
            .expect_err("rejected")
            .contains("already has a field")
    );
}

#[test]
fn completion_after_request_dot_lists_the_request_fields() {
    let text = std::fs::read_to_string(seed_path("lead_agent")).expect("reads");
    let typed = text.replacen("planner(request)", "planner(request.)", 1);
    let analysis = seed_with("lead_agent", &Documents::new(), Some(&typed));
    let at = offset_of(&typed, "request.)", 0, "request.".len());
    let labels: Vec<String> = analysis
        .completions(&seed_path("lead_agent"), at)
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert_eq!(labels, ["message"]);
    // After a step, its output's fields; in a quantifier, the item's.
    let path = seed_path("lead_agent");
    let clean = seed("lead_agent");
    let source = clean.text(&path).expect("text");
    let fields: Vec<String> = clean
        .completions(&path, offset_of(source, "check.plan_feasible", 0, 6))
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert!(
        fields.contains(&"plan_feasible".to_string()) && fields.contains(&"issues".to_string())
    );
    let item: Vec<String> = clean
        .completions(&path, offset_of(source, "i.severity != error", 0, 2))
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert!(item.contains(&"severity".to_string()), "{item:?}");
}

#[test]
fn a_roles_messages_is_completed_and_shown_on_hover() {
    let text = SMALL.replace("  input: Ask\n", "  input: Ask\n  messages: chat\n");
    let analysis = inline(&text);
    let path = "/p/specs/x.charter";
    let hover = analysis
        .hover(path, offset_of(&text, "role answerer", 0, 6))
        .expect("a hover");
    assert!(
        hover.markdown.contains("  messages: chat"),
        "{}",
        hover.markdown
    );
    let offered: Vec<String> = analysis
        .completions(path, offset_of(&text, "  messages", 0, 2))
        .into_iter()
        .map(|completion| completion.label)
        .collect();
    assert!(offered.contains(&"messages".to_string()), "{offered:?}");
    for property in ["tool_choice", "retry_after_effects", "history", "permit"] {
        assert!(
            offered.contains(&property.to_string()),
            "{property}: {offered:?}"
        );
    }
    // A role that does not say it shows no layout.
    let plain = inline(SMALL)
        .hover(path, offset_of(SMALL, "role answerer", 0, 6))
        .expect("a hover");
    assert!(!plain.markdown.contains("messages"), "{}", plain.markdown);
}

#[test]
fn completion_offers_names_keywords_issue_codes_and_template_variables() {
    let analysis = seed("lead_agent");
    let path = seed_path("lead_agent");
    let text = analysis.text(&path).expect("text");
    let general: Vec<String> = analysis
        .completions(&path, offset_of(text, "flow {", 0, 0))
        .into_iter()
        .map(|c| c.label)
        .collect();
    for expected in [
        "checker",
        "WorkflowDraft",
        "validity",
        "get_workflow",
        "contract",
        "fast",
    ] {
        assert!(general.contains(&expected.to_string()), "{expected}");
    }
    let repair: Vec<String> = analysis
        .completions(&path, offset_of(text, "WRONG_WORKFLOW  ->", 0, 0))
        .into_iter()
        .map(|c| c.label)
        .collect();
    for expected in ["RULE_ERROR", "DESIGN_WARNING", "WEAK_CONTROL_FLOW"] {
        assert!(
            repair.contains(&expected.to_string()),
            "{expected} in {repair:?}"
        );
    }
    let template = template_path("lead_agent", "checker.md.j2");
    let template_text = analysis.text(&template).expect("text");
    let variables: Vec<String> = analysis
        .completions(
            &template,
            offset_of(template_text, "{{ workflow_draft.workflow_id", 0, 3),
        )
        .into_iter()
        .map(|c| c.label)
        .collect();
    for expected in [
        "workflow_draft",
        "validation_report",
        "feedback",
        "rules",
        "output_schema",
    ] {
        assert!(
            variables.contains(&expected.to_string()),
            "{expected} in {variables:?}"
        );
    }
    let fields: Vec<String> = analysis
        .completions(
            &template,
            offset_of(
                template_text,
                "{{ workflow_draft.workflow_id",
                0,
                3 + "workflow_draft.".len(),
            ),
        )
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert!(fields.contains(&"node_count".to_string()), "{fields:?}");
    // An inline prompt's tag.
    let small = inline(SMALL);
    let at = offset_of(SMALL, "ask.question", 0, 4);
    let inline_fields: Vec<String> = small
        .completions("/p/specs/x.charter", at)
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert_eq!(inline_fields, ["question", "topic"]);
}

#[test]
fn outline_nests_steps_fields_and_gate_rules() {
    let analysis = seed("lead_agent");
    let outline = analysis.outline();
    let flow = outline
        .iter()
        .find(|i| i.kind == SymbolKind::Flow)
        .expect("a flow");
    assert_eq!(
        flow.children.first().map(|s| s.name.as_str()),
        Some("intent")
    );
    assert_eq!(flow.children.len(), 11);
    let gate = outline
        .iter()
        .find(|i| i.name == "validity")
        .expect("the gate");
    assert_eq!(gate.children.len(), 9);
    let contract = outline
        .iter()
        .find(|i| i.name == "Issue")
        .expect("a contract");
    let names: Vec<&str> = contract.children.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["severity", "code", "node", "message"]);
    for item in &outline {
        assert!(
            item.range.start <= item.selection.start && item.selection.end <= item.range.end,
            "{item:?}"
        );
    }
}

#[test]
fn tokens_colour_names_by_what_they_are() {
    let analysis = seed("lead_agent");
    let path = seed_path("lead_agent");
    let text = analysis.text(&path).expect("text");
    let tokens = analysis.tokens(&path);
    let kind_at = |needle: &str, within: usize| {
        let at = offset_of(text, needle, 0, within);
        tokens.iter().find(|t| t.range.start == at).map(|t| t.kind)
    };
    assert_eq!(kind_at("contract Request", 0), Some(TokenKind::Keyword));
    assert_eq!(kind_at("contract Request", 9), Some(TokenKind::Type));
    assert_eq!(kind_at("check    = checker", 11), Some(TokenKind::Function));
    assert_eq!(kind_at("check    = checker", 0), Some(TokenKind::Variable));
    assert_eq!(kind_at("check.plan_feasible", 6), Some(TokenKind::Property));
    assert_eq!(kind_at("// a node kind", 0), Some(TokenKind::Comment));
    assert_eq!(kind_at("price 3.00", 6), Some(TokenKind::Number));
    for pair in tokens.windows(2) {
        assert!(pair[0].range.end <= pair[1].range.start, "{pair:?}");
    }
}

#[test]
fn no_feature_panics_on_any_prefix_of_a_seed_spec() {
    let path = seed_path("lead_agent");
    let text = std::fs::read_to_string(&path).expect("reads");
    let mut cut = 0;
    while cut < text.len() {
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        let prefix = &text[..cut];
        let analysis = Analysis::new(&path, prefix, &Documents::new(), &DirLoader(seeds()));
        for offset in [0, cut / 2, cut] {
            let _ = analysis.hover(&path, offset);
            let _ = analysis.definition(&path, offset);
            let _ = analysis.references(&path, offset, true);
            let _ = analysis.completions(&path, offset);
            let _ = analysis.rename(&path, offset, "x");
        }
        let _ = analysis.outline();
        let _ = analysis.tokens(&path);
        let _ = analysis.diagnostics();
        cut += 97;
    }
}

#[test]
fn renaming_a_step_edits_the_repair_table_and_gate_subject() {
    let analysis = seed("closed_loop");
    let path = seed_path("closed_loop");
    let text = analysis.text(&path).expect("text");
    let at = offset_of(text, "execute  = each", 0, 0);
    let edits = analysis.rename(&path, at, "work").expect("renamed");
    for needle in [
        "rerun execute with",
        "-> rerun execute\n",
        "gate quality on execute",
    ] {
        let start = offset_of(
            text,
            needle,
            0,
            needle.find("execute").expect("in the needle"),
        );
        assert!(edits.iter().any(|e| e.range.start == start), "{needle}");
    }
}

#[test]
fn imported_role_files_are_navigable_and_their_names_resolve() {
    let analysis = seed("mention_roles");
    let path = seed_path("mention_roles");
    let text = analysis.text(&path).expect("text");
    let role_file = normalize(
        &seeds()
            .join("mention_roles/roles/talker.md")
            .display()
            .to_string(),
    );
    let jump = analysis.definition(
        &path,
        offset_of(text, "mention_roles/roles/talker.md", 0, 3),
    );
    assert_eq!(
        jump,
        [FileRange {
            path: role_file.clone(),
            range: 0..0
        }]
    );
    // A flow that calls `talker` goes to its `id` in the role file, whose text is CJK.
    let role_text = analysis.text(&role_file).expect("the role file was read");
    let defined = analysis.definition(&role_file, offset_of(role_text, "id: talker", 0, 5));
    assert_eq!(defined.len(), 1);
    assert_eq!(&role_text[defined[0].range.clone()], "talker");
    let callers = analysis.references(&role_file, offset_of(role_text, "id: talker", 0, 5), false);
    assert!(
        !callers.is_empty() && callers.iter().all(|place| place.path == path),
        "{callers:?}"
    );
    // The role file's tool list names a tool of the spec.
    let tool = analysis.definition(&role_file, offset_of(role_text, "- web_search", 0, 3));
    assert_eq!(
        tool.first().map(|place| place.path.as_str()),
        Some(path.as_str())
    );
    // Hover on the role in its file shows the model and contracts; positions convert
    // through the CJK text before them.
    let hover = analysis
        .hover(&role_file, offset_of(role_text, "id: talker", 0, 5))
        .expect("hover");
    assert!(
        hover.markdown.contains("output: Reply"),
        "{}",
        hover.markdown
    );
    let index = LineIndex::new(role_text);
    let model = offset_of(role_text, "model: default", 0, 0);
    assert_eq!(
        index.offset(index.position(model).0, index.position(model).1),
        model
    );
}

#[test]
fn a_permit_completes_and_hovers_the_work_item_it_reads() {
    let path = seed_path("agency");
    let analysis = seed("agency");
    let source = analysis.text(&path).expect("text");
    // After `work_order.` in a permit: the work order's fields.
    let at = offset_of(
        source,
        "work_order.kind == research",
        0,
        "work_order.".len(),
    );
    let fields: Vec<String> = analysis
        .completions(&path, at)
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert!(
        fields.contains(&"kind".to_string()) && fields.contains(&"acceptance".to_string()),
        "{fields:?}"
    );
    // After `args.`: the tool's input fields.
    let typed = source.replacen(
        "permit web_search when work_order.kind",
        "permit web_search when args. and work_order.kind",
        1,
    );
    let edited = seed_with("agency", &Documents::new(), Some(&typed));
    let at = offset_of(&typed, "args. and", 0, "args.".len());
    let labels: Vec<String> = edited
        .completions(&path, at)
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert_eq!(labels, ["text"]);
    // Hovering `kind` shows the WorkOrder field.
    let hover = analysis
        .hover(
            &path,
            offset_of(
                source,
                "work_order.kind == research",
                0,
                "work_order.".len() + 1,
            ),
        )
        .expect("a hover");
    assert!(hover.markdown.contains("kind"), "{}", hover.markdown);
}

#[test]
fn a_tools_sandbox_is_completed_and_explained_on_hover() {
    let text = r#"spec s version "1"
contract Url { url: string }
contract Page { text: string }
tool fetch {
  input: Url
  output: Page
  effect: read
  sandbox { read: ["data/"]  network: loopback  env: [GITHUB_TOKEN]  processes: 8 }
  timeout: 30s
}
tool lint { input: Url  output: Page  effect: read  sandbox: required }
flow { a = tool fetch(request) -> done }
"#;
    let analysis = inline(text);
    let path = "/p/specs/x.charter";
    let labels = |offset: usize| -> Vec<String> {
        analysis
            .completions(path, offset)
            .into_iter()
            .map(|completion| completion.label)
            .collect()
    };
    // A key of the tool: its properties, `sandbox` among them.
    let tool_keys = labels(offset_of(text, "  timeout", 0, 2));
    assert_eq!(
        tool_keys,
        ["input", "output", "effect", "timeout", "retry", "sandbox"]
    );
    assert_eq!(labels(offset_of(text, "sandbox {", 0, 3)), tool_keys);
    // A key of the sandbox, typed or half-typed.
    let sandbox_keys = ["read", "write", "network", "env", "processes", "required"];
    assert_eq!(labels(offset_of(text, "network:", 0, 0)), sandbox_keys);
    assert_eq!(labels(offset_of(text, "processes", 0, 4)), sandbox_keys);
    // Values after `network:`, `sandbox:` and `effect:`.
    assert_eq!(
        labels(offset_of(text, "loopback", 0, 2)),
        ["none", "loopback", "any"]
    );
    assert_eq!(
        labels(offset_of(text, "sandbox: required", 0, 9)),
        ["required"]
    );
    assert_eq!(
        labels(offset_of(text, "effect: read", 0, 8)),
        ["read", "write", "external"]
    );
    // Inside a list, and at a value of another key, the general completions.
    assert!(labels(offset_of(text, "GITHUB_TOKEN", 0, 0)).contains(&"Url".to_string()));
    assert!(labels(offset_of(text, "input: Url", 0, 7)).contains(&"Url".to_string()));
    // Half-typed: the sandbox's keys in a block that does not parse yet.
    let typing = text.replace("  timeout: 30s\n", "  sandbox { net");
    let at = offset_of(&typing, "{ net", 0, 5);
    let half: Vec<String> = inline(&typing)
        .completions(path, at)
        .into_iter()
        .map(|completion| completion.label)
        .collect();
    assert!(half.contains(&"network".to_string()), "{half:?}");

    let hover = |needle: &str, nth: usize, within: usize| {
        analysis
            .hover(path, offset_of(text, needle, nth, within))
            .map(|hover| hover.markdown)
    };
    let sandbox = hover("sandbox {", 0, 1).expect("a hover on `sandbox`");
    assert!(sandbox.contains("256 processes"), "{sandbox}");
    assert!(
        hover("network:", 0, 1).is_some_and(|text| text.contains("`loopback`")),
        "network"
    );
    assert!(
        hover("loopback", 0, 1).is_some_and(|text| text.contains("only this machine")),
        "loopback"
    );
    assert!(
        hover("env:", 0, 0).is_some_and(|text| text.contains("environment variables")),
        "env"
    );
    assert!(
        hover("sandbox: required", 0, 10).is_some_and(|text| text.contains("fails")),
        "required"
    );
    // `read` is a sandbox key in the block, an effect outside it (no hover there).
    assert!(hover("read: [", 0, 0).is_some_and(|text| text.contains("may read")));
    assert_eq!(hover("effect: read", 0, 9), None);
}

const MCP: &str = r#"spec s version "1"
contract Ask { path: string }
contract Reply { text: string }
mcp files {
  command: ["npx", "@modelcontextprotocol/server-filesystem", "data"]
  env: { LOG_LEVEL: "warn" }
  tools: [read_text_file, list_directory]
  timeout: 30s
  sandbox { read: ["data/"] }
}
mcp search { url: "http://127.0.0.1:3001/mcp"  tools: * }
role reader {
  model: "openai:gpt-4o-mini"
  prompt: """Read {{ ask.path }}"""
  input: Ask
  output: Reply
  tools: [files.read_text_file, search.web_search]
  max_tool_calls: 4
  permit files.read_text_file when len(args.path) < 200
}
invariant one_reader: only reader uses files.read_text_file
flow { read = reader(request) -> done }
"#;

#[test]
fn mcp_servers_complete_hover_and_lead_to_their_definition() {
    let analysis = inline(MCP);
    let path = "/p/specs/x.charter";
    assert!(
        analysis.diagnostics().is_empty(),
        "{:?}",
        analysis.diagnostics()
    );
    let labels = |text: &str, offset: usize| -> Vec<String> {
        inline(text)
            .completions(path, offset)
            .into_iter()
            .map(|completion| completion.label)
            .collect()
    };
    // The server's keys where a key goes, `required` after `sandbox:`, `env` as a map value.
    let keys = [
        "command", "url", "headers", "env", "tools", "timeout", "retry", "sandbox",
    ];
    assert_eq!(labels(MCP, offset_of(MCP, "  timeout: 30s", 0, 2)), keys);
    assert_eq!(labels(MCP, offset_of(MCP, "  tools: *", 0, 2)), keys);
    assert_eq!(labels(MCP, offset_of(MCP, "LOG_LEVEL: \"", 0, 11)), ["env"]);
    assert_eq!(
        labels(MCP, offset_of(MCP, "read: [\"data", 0, 0)),
        ["read", "write", "network", "env", "processes", "required"]
    );
    // `SERVER.` then its allow-listed tools, where a tool is named; none under `tools: *`.
    let tools = ["read_text_file", "list_directory"];
    assert_eq!(
        labels(MCP, offset_of(MCP, "files.read_text_file, search", 0, 6)),
        tools
    );
    assert_eq!(labels(MCP, offset_of(MCP, "permit files.", 0, 13)), tools);
    assert_eq!(labels(MCP, offset_of(MCP, "uses files.", 0, 11)), tools);
    let typing = MCP.replace("search.web_search]", "search.web_search, files.]");
    assert_eq!(labels(&typing, offset_of(&typing, "files.]", 0, 6)), tools);
    let typing = MCP.replace("search.web_search]", "search.]");
    assert_eq!(
        labels(&typing, offset_of(&typing, "search.]", 0, 7)),
        Vec::<String>::new()
    );
    // The servers are offered with the other names.
    let names = analysis.completions(path, offset_of(MCP, "files.read_text_file, search", 0, 0));
    assert!(
        names
            .iter()
            .any(|c| c.label == "files" && c.kind == CompletionKind::Server),
        "{names:?}"
    );

    // Hover: a server shows how it is reached and its allow-list; a key says what it means.
    let hover = |needle: &str, nth: usize, within: usize| {
        analysis
            .hover(path, offset_of(MCP, needle, nth, within))
            .map(|hover| hover.markdown)
            .unwrap_or_default()
    };
    let server = hover("files.read_text_file, search", 0, 2);
    assert!(
        server
            .contains("command: [\"npx\", \"@modelcontextprotocol/server-filesystem\", \"data\"]")
            && server.contains("tools: [read_text_file, list_directory]")
            && server.contains("stdio"),
        "{server}"
    );
    let tool = hover("files.read_text_file, search", 0, 8);
    assert!(
        tool.starts_with("tool `read_text_file` of MCP server `files`"),
        "{tool}"
    );
    let web = hover("search.web_search", 0, 2);
    assert!(
        web.contains("url: \"http://127.0.0.1:3001/mcp\"") && web.contains("tools: *"),
        "{web}"
    );
    assert!(hover("command:", 0, 2).contains("stdio"));
    assert!(hover("  tools: [read", 0, 3).contains("`SERVER.TOOL`"));

    // Go to definition: the server part to `mcp files`, the tool part to its allow-list
    // entry, and under `tools: *` to the server.
    let definition = |needle: &str, nth: usize, within: usize| -> Vec<(usize, usize)> {
        analysis
            .definition(path, offset_of(MCP, needle, nth, within))
            .into_iter()
            .map(|found| (found.range.start, found.range.end))
            .collect()
    };
    let files = offset_of(MCP, "mcp files", 0, 4);
    assert_eq!(
        definition("files.read_text_file, search", 0, 1),
        [(files, files + 5)]
    );
    let entry = offset_of(MCP, "read_text_file, list", 0, 0);
    assert_eq!(
        definition("files.read_text_file, search", 0, 9),
        [(entry, entry + 14)]
    );
    assert_eq!(
        definition("uses files.read_text_file", 0, 14),
        [(entry, entry + 14)]
    );
    assert_eq!(definition("permit files", 0, 8), [(files, files + 5)]);
    let search = offset_of(MCP, "mcp search", 0, 4);
    assert_eq!(
        definition("search.web_search", 0, 10),
        [(search, search + 6)]
    );
    // Every place the server is written, and the outline shows it with its tools.
    let references = analysis.references(path, offset_of(MCP, "mcp files", 0, 5), true);
    assert_eq!(references.len(), 4, "{references:?}");
    let outline = analysis.outline();
    let server = outline
        .iter()
        .find(|item| item.name == "files")
        .expect("the server in the outline");
    assert_eq!(server.kind, SymbolKind::Mcp);
    let children: Vec<&str> = server.children.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(children, ["files.read_text_file", "files.list_directory"]);
}

#[test]
fn no_feature_panics_on_any_prefix_of_a_spec_with_mcp_servers() {
    let path = "/p/specs/x.charter";
    for cut in (0..MCP.len()).step_by(5) {
        let prefix = &MCP[..cut];
        let analysis = inline(prefix);
        for offset in [0, cut / 2, cut.saturating_sub(1), cut] {
            let _ = analysis.hover(path, offset);
            let _ = analysis.definition(path, offset);
            let _ = analysis.references(path, offset, true);
            let _ = analysis.completions(path, offset);
            let _ = analysis.rename(path, offset, "x");
        }
        let _ = analysis.outline();
        let _ = analysis.tokens(path);
        let _ = analysis.diagnostics();
    }
}

/// What `charter lock` would write for [`MCP`]'s servers (the hashes are not checked here).
fn mcp_lock(extra_properties: usize) -> String {
    let many: String = (0..extra_properties)
        .map(|index| format!("            p{index:03}:\n              type: string\n"))
        .collect();
    format!(
        r#"version: 1
servers:
  files:
    command:
    - npx
    - "@modelcontextprotocol/server-filesystem"
    - data
    protocol_version: "2025-11-25"
    server:
      name: secure-filesystem-server
      version: "0.2.0"
    tools:
      list_directory:
        description: List the entries of a directory.
        input_schema:
          properties:
            path:
              type: string
          type: object
        hash: sha256:1
      read_text_file:
        description: |-
          Read the complete contents of a file from the file system as text.
          Use 'head' or 'tail' for part of it.
        input_schema:
          properties:
            head:
              type: number
{many}            path:
              type: string
          required:
          - path
          type: object
        hash: sha256:2
      write_file:
        description: Create or overwrite a file.
        input_schema:
          properties:
            content:
              type: string
            path:
              type: string
          type: object
        hash: sha256:3
  search:
    url: http://127.0.0.1:3001/mcp
    protocol_version: "2025-11-25"
    server:
      name: search
      version: "1.0.0"
    tools:
      fetch_page:
        input_schema:
          type: object
        hash: sha256:4
      web_search:
        description: Search the web.
        input_schema:
          properties:
            query:
              type: string
          type: object
        hash: sha256:5
"#
    )
}

fn with_lock(text: &str, lock: &str) -> Analysis {
    let mut loader = MemoryLoader::default();
    loader
        .files
        .insert("charter.lock".to_string(), lock.to_string());
    Analysis::new("/p/specs/x.charter", text, &Documents::new(), &loader)
}

#[test]
fn mcp_tools_complete_and_hover_from_the_lock() {
    let path = "/p/specs/x.charter";
    let analysis = with_lock(MCP, &mcp_lock(0));
    assert!(
        analysis.diagnostics().is_empty(),
        "{:?}",
        analysis.diagnostics()
    );
    let completions = |analysis: &Analysis, text: &str, needle: &str, within: usize| {
        analysis
            .completions(path, offset_of(text, needle, 0, within))
            .into_iter()
            .map(|completion| (completion.label, completion.detail.unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    // An allow-list: its entries first, then the lock's other tools, marked.
    let files = completions(&analysis, MCP, "files.read_text_file, search", 6);
    let labels: Vec<&str> = files.iter().map(|(label, _)| label.as_str()).collect();
    assert_eq!(labels, ["read_text_file", "list_directory", "write_file"]);
    assert_eq!(
        files[0].1,
        "tool of mcp server `files`: Read the complete contents of a file from the file system as text."
    );
    assert_eq!(
        files[2].1,
        "not in the allow-list of mcp server `files`: add it to `tools: [...]`"
    );
    // `tools: *`: every tool the lock lists, while the name is half typed (a syntax error).
    let typing = MCP.replace("search.web_search]", "search.]");
    let search = completions(&with_lock(&typing, &mcp_lock(0)), &typing, "search.]", 7);
    assert_eq!(
        search,
        [
            (
                "fetch_page".to_string(),
                "tool of mcp server `search`".to_string()
            ),
            (
                "web_search".to_string(),
                "tool of mcp server `search`: Search the web.".to_string()
            ),
        ]
    );

    // Hover: the tool's description and arguments; the server's locked identity.
    let hover = |analysis: &Analysis, needle: &str, within: usize| {
        analysis
            .hover(path, offset_of(MCP, needle, 0, within))
            .map(|hover| hover.markdown)
            .unwrap_or_default()
    };
    let tool = hover(&analysis, "files.read_text_file, search", 8);
    assert!(
        tool.starts_with("tool `read_text_file` of MCP server `files`\n\nRead the complete contents of a file from the file system as text.\nUse 'head' or 'tail' for part of it.\n\narguments (`inputSchema`):\n```json\n{"),
        "{tool}"
    );
    assert!(tool.contains("\"path\": {"), "{tool}");
    let server = hover(&analysis, "files.read_text_file, search", 2);
    assert!(
        server.ends_with(
            "charter.lock: secure-filesystem-server 0.2.0, protocol 2025-11-25, 3 tools"
        ),
        "{server}"
    );
    let web = hover(&analysis, "search.web_search", 9);
    assert!(web.contains("Search the web."), "{web}");

    // A large schema is cut; a tool the lock does not list says so; no lock, no arguments.
    let large = hover(
        &with_lock(MCP, &mcp_lock(200)),
        "files.read_text_file, search",
        8,
    );
    assert!(large.contains("more lines in charter.lock"), "{large}");
    let schema_lines = large
        .lines()
        .skip_while(|line| *line != "```json")
        .skip(1)
        .take_while(|line| *line != "```")
        .count();
    assert_eq!(schema_lines, 41, "{large}");
    let unlisted = mcp_lock(0).replace("      web_search:", "      web_searching:");
    let web = hover(&with_lock(MCP, &unlisted), "search.web_search", 9);
    assert!(
        web.contains("**not listed** by the server in charter.lock"),
        "{web}"
    );
    let unlocked = hover(&inline(MCP), "files.read_text_file, search", 8);
    assert!(
        unlocked.contains("once `charter lock` has written charter.lock"),
        "{unlocked}"
    );
    assert!(!unlocked.contains("```json"), "{unlocked}");
}

#[test]
fn an_open_lock_is_read_before_the_disk_and_a_broken_one_is_a_diagnostic() {
    let path = "/p/specs/x.charter";
    let mut loader = MemoryLoader::default();
    loader.files.insert("charter.lock".to_string(), mcp_lock(0));
    let mut documents = Documents::new();
    documents.set(
        "charter.lock",
        mcp_lock(0).replace("      write_file:", "      write_text_file:"),
    );
    let analysis = Analysis::new(path, MCP, &documents, &loader);
    let labels: Vec<String> = analysis
        .completions(path, offset_of(MCP, "files.read_text_file, search", 0, 6))
        .into_iter()
        .map(|completion| completion.label)
        .collect();
    assert_eq!(
        labels,
        ["read_text_file", "list_directory", "write_text_file"]
    );
    assert!(analysis.files().contains(&"charter.lock".to_string()));

    documents.set("charter.lock", "version: 1\nservers: [\n".to_string());
    let analysis = Analysis::new(path, MCP, &documents, &loader);
    let diagnostics = analysis.diagnostics();
    let in_lock = diagnostics.get("charter.lock").cloned().unwrap_or_default();
    assert_eq!(in_lock.len(), 1, "{diagnostics:?}");
    assert_eq!(in_lock[0].code, "E026");
    // The service still answers, as with no lock.
    assert_eq!(
        analysis
            .completions(path, offset_of(MCP, "files.read_text_file, search", 0, 6))
            .len(),
        2
    );
}
