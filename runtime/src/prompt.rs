//! Prompt rendering: a role's minijinja template with its inputs under their contracts' snake_case names, `feedback`, `rules`, `tools` and `output_schema`.
//!
//! What a template sees (DESIGN §2.2):
//! - each input under the snake_case name of its contract (`Task` -> `task`,
//!   `WorkflowPlan` -> `workflow_plan`), by the compiler's own `snake_case`, so the
//!   names the E014 check accepted are the names rendered;
//! - `feedback`: the issues that sent the role back (a list of `{code, message, ...}`),
//!   or none;
//! - `rules`: the lines of the role's rules blocks, in order. It is a list (`{% for rule
//!   in rules %}`) that prints as one `- line` per line (`{{ rules }}`);
//! - `tools`: the whitelisted tools, each `{name, effect, note, input, output}` (`note` is
//!   the role file's `tool_rules` entry, or none);
//! - `output_schema`: the JSON Schema of the role's output. It prints as indented JSON
//!   (`{{ output_schema }}`) and its fields can be read (`output_schema.required`).
//!
//! Records and lists print as JSON too (`{{ task }}`). Rendering has no autoescaping
//! (prompts are not HTML); an undefined attribute renders as nothing, since optional
//! fields may be absent. A role without a template gets a plain default prompt.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use charter_compiler::check::templates::snake_case;
use charter_compiler::graph::{CompiledSpec, EffectIr, RoleIr};
use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use serde_json::Value;

/// The template given to a role that has none.
pub const DEFAULT_TEMPLATE: &str = "{% for name, value in inputs %}## {{ name }}\n{{ value }}\n\n{% endfor %}\
{% if feedback %}## Issues to fix\n{% for issue in feedback %}- {{ issue.code }}: {{ issue.message }}\n{% endfor %}\n{% endif %}\
{% if rules %}## Rules\n{{ rules }}\n\n{% endif %}\
Reply with one JSON object that matches this schema and nothing else:\n{{ output_schema }}";

/// Why a prompt could not be rendered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    #[error("unknown role `{role}`")]
    UnknownRole { role: String },
    #[error("role `{role}` takes {expected} input(s) ({contracts}) but was given {given}")]
    Inputs {
        role: String,
        expected: usize,
        given: usize,
        contracts: String,
    },
    #[error("cannot render the prompt of role `{role}` ({source_name}): {message}")]
    Template {
        role: String,
        source_name: String,
        message: String,
    },
}

/// Renders the prompt of role `role` of `spec` for `inputs` (one value per input
/// contract of the role, in order) and the optional `feedback`.
pub fn render_prompt(
    spec: &CompiledSpec,
    role: &str,
    inputs: &[Value],
    feedback: Option<&Value>,
) -> Result<String, PromptError> {
    let role_ir = spec
        .roles
        .get(role)
        .ok_or_else(|| PromptError::UnknownRole {
            role: role.to_string(),
        })?;
    if inputs.len() != role_ir.inputs.len() {
        return Err(PromptError::Inputs {
            role: role.to_string(),
            expected: role_ir.inputs.len(),
            given: inputs.len(),
            contracts: role_ir.inputs.join(", "),
        });
    }
    let (template, source_name) = match &role_ir.prompt {
        Some(prompt) => (prompt.template.as_str(), prompt.source.clone()),
        None => (DEFAULT_TEMPLATE, "the default prompt".to_string()),
    };
    let template_error = |error: minijinja::Error| PromptError::Template {
        role: role.to_string(),
        source_name: source_name.clone(),
        message: error_text(&error),
    };

    let environment = cached_environment(&source_name, template).map_err(template_error)?;
    let compiled = environment
        .get_template(&source_name)
        .map_err(template_error)?;

    let mut context = std::collections::BTreeMap::new();
    let mut named_inputs = Vec::new();
    for (contract, value) in role_ir.inputs.iter().zip(inputs) {
        let name = snake_case(contract);
        context.insert(name.clone(), json_value(value));
        named_inputs.push(Value::Array(vec![Value::String(name), value.clone()]));
    }
    context.insert(
        "feedback".to_string(),
        feedback
            .filter(|feedback| !feedback.is_null())
            .map_or(minijinja::Value::from(()), json_value),
    );
    context.insert(
        "rules".to_string(),
        minijinja::Value::from_object(Lines(rules_lines(spec, role_ir))),
    );
    context.insert("tools".to_string(), json_value(&tools(spec, role_ir)));
    let schema = spec
        .contracts
        .get(&role_ir.output)
        .map(|contract| contract.schema.clone())
        .unwrap_or(Value::Null);
    context.insert("output_schema".to_string(), json_value(&schema));
    if role_ir.prompt.is_none() {
        context.insert(
            "inputs".to_string(),
            json_value(&Value::Array(named_inputs)),
        );
    }
    compiled.render(context).map_err(template_error)
}

/// How many compiled templates the process keeps before starting over.
const TEMPLATE_CACHE_LIMIT: usize = 1024;

/// Compiled templates by (source name, template text): parsing a template once per
/// process instead of on every call (each environment holds that one template).
type TemplateCache = Mutex<HashMap<(String, String), Arc<Environment<'static>>>>;

/// The environment holding `template` compiled under `source_name`, built once per
/// process; a template that does not compile is not cached.
fn cached_environment(
    source_name: &str,
    template: &str,
) -> Result<Arc<Environment<'static>>, minijinja::Error> {
    static CACHE: OnceLock<TemplateCache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (source_name.to_string(), template.to_string());
    if let Some(environment) = cache.lock().ok().and_then(|cache| cache.get(&key).cloned()) {
        return Ok(environment);
    }
    let mut environment = Environment::new();
    environment.set_auto_escape_callback(|_| AutoEscape::None);
    environment.set_undefined_behavior(UndefinedBehavior::Chainable);
    environment.add_template_owned(key.0.clone(), key.1.clone())?;
    let environment = Arc::new(environment);
    if let Ok(mut cache) = cache.lock() {
        if cache.len() >= TEMPLATE_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, Arc::clone(&environment));
    }
    Ok(environment)
}

/// The lines of the role's rules blocks, in the order the role lists them.
fn rules_lines(spec: &CompiledSpec, role: &RoleIr) -> Vec<String> {
    role.rules
        .iter()
        .filter_map(|name| spec.rules.get(name))
        .flat_map(|rules| rules.lines.iter().cloned())
        .collect()
}

/// The role's whitelisted tools as template data.
fn tools(spec: &CompiledSpec, role: &RoleIr) -> Value {
    let tools = role
        .tools
        .iter()
        .map(|name| {
            let tool = spec.tools.get(name);
            let effect = tool.map(|tool| match tool.effect {
                EffectIr::Read => "read",
                EffectIr::Write => "write",
                EffectIr::External => "external",
            });
            serde_json::json!({
                "name": name,
                "effect": effect,
                "note": role.tool_rules.get(name),
                "input": tool.map(|tool| &tool.input),
                "output": tool.map(|tool| &tool.output),
            })
        })
        .collect();
    Value::Array(tools)
}

/// minijinja's error with its location and cause, on one line each.
fn error_text(error: &minijinja::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A JSON value as template data: records and lists print as JSON and can be read
/// field by field; scalars are plain template values.
fn json_value(value: &Value) -> minijinja::Value {
    match value {
        Value::Object(_) | Value::Array(_) => minijinja::Value::from_object(Json(value.clone())),
        Value::Null => minijinja::Value::from(()),
        Value::Bool(flag) => minijinja::Value::from(*flag),
        Value::String(text) => minijinja::Value::from(text.as_str()),
        Value::Number(number) => {
            if let Some(int) = number.as_i64() {
                minijinja::Value::from(int)
            } else if let Some(int) = number.as_u64() {
                minijinja::Value::from(int)
            } else {
                minijinja::Value::from(number.as_f64().unwrap_or(f64::NAN))
            }
        }
    }
}

/// A JSON record or list seen by a template.
#[derive(Debug)]
struct Json(Value);

impl Object for Json {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.0 {
            Value::Array(_) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        match &self.0 {
            Value::Object(record) => record.get(key.as_str()?).map(json_value),
            Value::Array(items) => items.get(key.as_usize()?).map(json_value),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match &self.0 {
            Value::Object(record) => Enumerator::Values(
                record
                    .keys()
                    .map(|key| minijinja::Value::from(key.as_str()))
                    .collect(),
            ),
            Value::Array(items) => Enumerator::Seq(items.len()),
            _ => Enumerator::Empty,
        }
    }

    fn render(self: &Arc<Self>, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string_pretty(&self.0).map_err(|_| fmt::Error)?;
        formatter.write_str(&text)
    }
}

/// The rules' lines: a list that prints as `- line` per line.
#[derive(Debug)]
struct Lines(Vec<String>);

impl Object for Lines {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        self.0
            .get(key.as_usize()?)
            .map(|line| minijinja::Value::from(line.as_str()))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0.len())
    }

    fn render(self: &Arc<Self>, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, line) in self.0.iter().enumerate() {
            if index > 0 {
                formatter.write_str("\n")?;
            }
            write!(formatter, "- {line}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
