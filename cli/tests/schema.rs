//! The JSON Schemas of `scenario.yaml` and `cassette.yaml` (`editors/vscode/schemas/`, printed by `charter schema`): every golden and the files `charter new` writes validate, and what the loader rejects as a wrong key, type or value, the schema rejects too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use charter_runtime::formats::scenario::{Cassette, Scenario};
use charter_runtime::formats::yaml;
use jsonschema::Validator;
use serde_json::Value;

/// The repository's root (its goldens and `editors/vscode/schemas/`).
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Which file a schema is for: `scenario` or `cassette`.
fn schema_path(name: &str) -> PathBuf {
    repository().join(format!("editors/vscode/schemas/{name}.schema.json"))
}

fn validator(name: &str) -> Validator {
    let path = schema_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let schema: Value =
        serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    jsonschema::draft202012::new(&schema)
        .unwrap_or_else(|error| panic!("{} is no valid schema: {error}", path.display()))
}

/// What the schema finds wrong in the YAML `text` (read as the runtime reads it), one
/// line per error; empty when it validates.
fn schema_errors(validator: &Validator, file: &str, text: &str) -> Vec<String> {
    let value: Value = yaml::from_str(file, text).unwrap_or_else(|error| panic!("{error}"));
    validator
        .iter_errors(&value)
        .map(|error| format!("{file}: at `{}`: {error}", error.instance_path()))
        .collect()
}

/// Every file named `name` under `directory`, sorted.
fn files_named(directory: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(directory)
        .unwrap_or_else(|error| panic!("{}: {error}", directory.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, name));
        } else if path.file_name().is_some_and(|file| file == name) {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// Validates every `scenario.yaml` and `cassette.yaml` under `golden`; returns how many
/// files were checked and every error.
fn validate_goldens(golden: &Path) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut errors = Vec::new();
    for name in ["scenario", "cassette"] {
        let validator = validator(name);
        for path in files_named(golden, &format!("{name}.yaml")) {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            errors.extend(schema_errors(
                &validator,
                &path.display().to_string(),
                &text,
            ));
            checked += 1;
        }
    }
    (checked, errors)
}

#[test]
fn every_golden_scenario_and_cassette_validates() {
    let golden = repository().join("golden");
    let (checked, errors) = validate_goldens(&golden);
    let scenarios = files_named(&golden, "scenario.yaml").len();
    assert!(scenarios > 0, "no scenario under {}", golden.display());
    assert_eq!(checked, 2 * scenarios, "a scenario without its cassette");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn the_files_charter_new_writes_validate() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("schema-tests/new");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap_or_else(|error| panic!("{error}"));
    let made = charter(&root, &["new", "desk"]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let (checked, errors) = validate_goldens(&root.join("desk/golden"));
    assert_eq!(
        checked, 2,
        "charter new writes one scenario and its cassette"
    );
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// A scenario that uses every key of `scenario.yaml`.
const SCENARIO: &str = r#"spec: specs/closed_loop.charter
description: executor times out twice on T-002, third attempt succeeds
input: { goal: "write a post", constraints: [] }
expect:
  outcome: failed
  reason: "step_failed{review}"
  stale: false
  delivered: c2
  answer: { title: "a post" }
  calls: { plan: 1, execute: 3 }
  steps: [plan, execute, judge]
  tools: { web_search: { min: 1, max: 3 }, fetch_source: { max: 0 } }
  not_called: [escalate]
  gates: { quality: { min_score: 7, passed: true } }
"#;

/// A cassette that uses every key of `cassette.yaml`.
const CASSETTE: &str = r#"version: 1
recorded:
  spec_hash: "sha256:abc"
  prompts: { planner: "sha256:def" }
  rules: { house: "sha256:123" }
  rendered: { planner: "Plan: write a post" }
  models: { default: { model: "openai:gpt-4o-mini", temperature: 0.2, top_p: 1, max_tokens: 900, seed: 7, output: tool_call } }
  overrides: { default: "anthropic:claude-haiku" }
calls:
  - { step: plan, response: { goal: "g", tasks: [] }, latency: 2s, prompt_hash: "sha256:0a",
      usage: { input_tokens: 812, output_tokens: 240 }, notes: ["json_schema refused"] }
  - { step: execute, item: T-002, attempt: 1, latency: 20m }
  - { step: execute, item: T-002, attempt: 2, error: { status: 429, message: slow down, retry_after: 1s } }
  - { step: execute, item: T-002, attempt: 3, raw: "not json {" }
  - { step: execute, item: T-002, attempt: 4, response: { task_id: T-002, status: ok, output: "done" },
      tool_calls: [ { tool: web_search, args: { text: "q" }, result: { urls: ["https://a.example"] }, latency: 4m50s },
                    { tool: fetch, args: {}, error: { message: refused } } ] }
  - { step: execute, item: T-001, round: 2, role: judge, latency: 250ms, response: { ok: true } }
  - { turn: 2, step: write, round: 2, expect_prompt: { contains: ["the finding"], not_contains: ["TODO"] }, response: {} }
  - { step: validate, tool: validate_workflow, result: { ok: true } }
  - { step: validate, attempt: 2, tool: validate_workflow, error: { message: crashed } }
  - { step: validate, attempt: 3, tool: validate_workflow, latency: 30s }
humans: [ { step: confirm, answer: { approved: true } }, { turn: 2, step: confirm, round: 2, attempt: 2, answer: { approved: false, note: no } } ]
faults: [ { tamper: { after: judge, item: T-001 } }, { tamper: { after: plan } } ]
"#;

fn scenario_loads(text: &str) -> bool {
    Scenario::from_yaml("scenario.yaml", text).is_ok()
}

fn cassette_loads(text: &str) -> bool {
    Cassette::from_yaml("cassette.yaml", text).is_ok()
}

#[test]
fn files_with_every_key_validate_and_load() {
    let scenario = validator("scenario");
    let cassette = validator("cassette");
    assert!(scenario_loads(SCENARIO));
    assert_eq!(
        schema_errors(&scenario, "scenario.yaml", SCENARIO),
        Vec::<String>::new()
    );
    assert!(
        cassette_loads(CASSETTE),
        "{:?}",
        Cassette::from_yaml("cassette.yaml", CASSETTE)
    );
    assert_eq!(
        schema_errors(&cassette, "cassette.yaml", CASSETTE),
        Vec::<String>::new()
    );
    let conversation =
        "spec: s.charter\nturns:\n  - { input: { text: a } }\n  - { input: { text: b } }\n";
    assert!(scenario_loads(conversation));
    assert_eq!(
        schema_errors(&scenario, "scenario.yaml", conversation),
        Vec::<String>::new()
    );
}

#[test]
fn a_text_written_as_a_number_validates_as_it_loads() {
    // YAML reads `1` as a number, the loader as the text "1": the schema takes both.
    let text = "version: 1\ncalls:\n  - { step: execute, item: 1, raw: 123, notes: [7] }\n  - { step: execute, item: 2, expect_prompt: { contains: [42] }, response: {},\n      tool_calls: [ { tool: fetch, error: { message: 404 } } ] }\nfaults: [ { tamper: { after: execute, item: 1 } } ]\n";
    assert!(
        cassette_loads(text),
        "{:?}",
        Cassette::from_yaml("cassette.yaml", text)
    );
    assert_eq!(
        schema_errors(&validator("cassette"), "cassette.yaml", text),
        Vec::<String>::new()
    );
}

/// `base` with `from` replaced by `to` (which must occur in it, so that no case is
/// vacuous).
fn planted(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "{from:?} is not in the file");
    base.replacen(from, to, 1)
}

#[test]
fn a_wrong_key_type_or_value_in_a_scenario_fails_as_the_loader_does() {
    let validator = validator("scenario");
    let cases = [
        planted(SCENARIO, "expect:", "expct:"),
        planted(SCENARIO, "description:", "descripton:"),
        planted(SCENARIO, "  delivered:", "  deliverd:"),
        planted(SCENARIO, "outcome: failed", "outcome: done"),
        planted(
            SCENARIO,
            "reason: \"step_failed{review}\"",
            "reason: finished",
        ),
        planted(
            SCENARIO,
            "reason: \"step_failed{review}\"",
            "reason: \"budget_exhausted{money}\"",
        ),
        planted(SCENARIO, "stale: false", "stale: maybe"),
        planted(SCENARIO, "execute: 3", "execute: three"),
        planted(SCENARIO, "steps: [plan,", "step: [plan,"),
        planted(SCENARIO, "{ min: 1, max: 3 }", "{ minimum: 1 }"),
        planted(SCENARIO, "{ min: 1, max: 3 }", "{ min: -1 }"),
        planted(SCENARIO, "not_called: [escalate]", "not_called: escalate"),
        planted(SCENARIO, "min_score: 7,", "min_score: high,"),
        planted(SCENARIO, "passed: true }", "passed: true, score: 7 }"),
        planted(SCENARIO, "spec: specs/closed_loop.charter\n", ""),
        planted(SCENARIO, "input:", "inputs:"),
        "spec: s.charter\ninput: { text: a }\nturns: [ { input: { text: b } } ]\n".to_string(),
        "spec: s.charter\nturns: []\n".to_string(),
        "spec: s.charter\nturns: [ { input: {}, answer: {} } ]\n".to_string(),
    ];
    for text in cases {
        assert!(!scenario_loads(&text), "the loader takes:\n{text}");
        assert!(
            !validator.is_valid(&yaml_value(&text)),
            "the schema takes:\n{text}"
        );
    }
}

#[test]
fn a_wrong_key_type_or_value_in_a_cassette_fails_as_the_loader_does() {
    let validator = validator("cassette");
    let cases = [
        planted(CASSETTE, "response: { goal", "respnse: { goal"),
        planted(CASSETTE, "latency: 2s", "latency: 2 seconds"),
        planted(CASSETTE, "latency: 250ms", "latency: 1.5s"),
        planted(CASSETTE, "status: 429", "status: many"),
        planted(CASSETTE, "version: 1", "version: 2"),
        planted(CASSETTE, "version: 1\n", ""),
        planted(CASSETTE, "attempt: 1,", "attempt: 0,"),
        planted(
            CASSETTE,
            "raw: \"not json {\"",
            "raw: \"not json {\", response: {}",
        ),
        planted(
            CASSETTE,
            "usage: { input_tokens: 812,",
            "usage: { input: 812,",
        ),
        planted(CASSETTE, "contains: [\"the finding\"]", "contains: [\"\"]"),
        planted(
            CASSETTE,
            "expect_prompt: {",
            "expect_prompt: { contain: [x], ",
        ),
        planted(
            CASSETTE,
            "tamper: { after: plan }",
            "smash: { after: plan }",
        ),
        planted(CASSETTE, "spec_hash:", "spec_hsh:"),
        planted(CASSETTE, "seed: 7", "sed: 7"),
        planted(CASSETTE, "args: {}", "arguments: {}"),
        planted(
            CASSETTE,
            "answer: { approved: true }",
            "answr: { approved: true }",
        ),
        // The shapes of a `tool` step's call and a model call.
        planted(CASSETTE, "result: { ok: true }", "response: { ok: true }"),
        planted(CASSETTE, "tool: validate_workflow, result", "result"),
        planted(
            CASSETTE,
            "error: { message: crashed }",
            "error: { status: 500 }",
        ),
        planted(
            CASSETTE,
            "error: { status: 429, message: slow down,",
            "error: { message: slow down,",
        ),
    ];
    for text in cases {
        assert!(!cassette_loads(&text), "the loader takes:\n{text}");
        assert!(
            !validator.is_valid(&yaml_value(&text)),
            "the schema takes:\n{text}"
        );
    }
}

fn yaml_value(text: &str) -> Value {
    yaml::from_str("file.yaml", text).unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn every_property_has_a_title_or_description_for_an_editor_to_show() {
    for name in ["scenario", "cassette"] {
        let path = schema_path(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{error}"));
        let schema: Value = serde_json::from_str(&text).unwrap_or_else(|error| panic!("{error}"));
        let mut missing = Vec::new();
        undescribed(&schema, &schema, "", &mut missing);
        assert!(missing.is_empty(), "{name}: no description for {missing:?}");
    }
}

/// The properties under `node` with no `description` of their own or through `$ref`.
fn undescribed(root: &Value, node: &Value, at: &str, missing: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get("properties") {
                for (key, property) in properties {
                    if !described(root, property) {
                        missing.push(format!("{at}/{key}"));
                    }
                }
            }
            for (key, child) in map {
                undescribed(root, child, &format!("{at}/{key}"), missing);
            }
        }
        Value::Array(items) => {
            for child in items {
                undescribed(root, child, at, missing);
            }
        }
        _ => {}
    }
}

/// A property schema `false` (forbidden) needs no description.
fn described(root: &Value, property: &Value) -> bool {
    if property == &Value::Bool(false) || property.get("description").is_some() {
        return true;
    }
    let target = property
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|pointer| pointer.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer));
    target.is_some_and(|target| target.get("description").is_some())
}

/// `charter ARGS` in `directory`, with NO_COLOR.
fn charter(directory: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .current_dir(directory)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    output
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn charter_schema_prints_each_file_byte_for_byte() {
    for name in ["scenario", "cassette"] {
        let printed = charter(&repository(), &["schema", name]);
        assert_eq!(printed.status.code(), Some(0), "{}", stderr(&printed));
        let file = std::fs::read(schema_path(name)).unwrap_or_else(|error| panic!("{error}"));
        assert!(
            printed.stdout == file,
            "charter schema {name} differs from its file"
        );
    }
}

#[test]
fn an_unknown_schema_name_is_a_usage_error_listing_the_names() {
    let refused = charter(&repository(), &["schema", "nope"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(refused.stdout.is_empty());
    let said = stderr(&refused);
    assert!(
        said.contains("nope") && said.contains("scenario") && said.contains("cassette"),
        "{said}"
    );
}

#[test]
fn charter_schema_help_says_what_it_prints_and_how_an_editor_uses_it() {
    let help = charter(&repository(), &["schema", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "JSON Schema",
        "yaml-language-server: $schema=",
        "yaml.schemas",
        "scenario",
        "cassette",
        "Exit status: 0",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }
}
