//! Prompt rendering: a role's minijinja template with its inputs under their contracts' snake_case names, `feedback`, `rules`, `tools` and `output_schema`.
//!
//! What a template sees (DESIGN §2.2):
//! - each input under the snake_case name of its contract (`Task` -> `task`,
//!   `WorkflowPlan` -> `workflow_plan`), by the compiler's own `snake_case`, so the
//!   names the E014 check accepted are the names rendered;
//! - `feedback`: why the role runs again (DESIGN §8.2: `{reason, round, issues, judges,
//!   previous, human}`), or none. `{{ feedback }}` alone prints it as Markdown
//!   ([`crate::engine::feedback::markdown`]); its fields can be read one by one;
//! - `history`: for a role with `history: [steps]`, the earlier runs of those steps
//!   (`[{step, round, visit, output}]`, oldest first);
//! - `run`: `{round, step_count, tokens, cost, elapsed}` when the call was made;
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

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use charter_compiler::graph::{CompiledSpec, EffectIr, RoleIr};
use charter_compiler::names::snake_case;
use minijinja::Environment;
use minijinja::value::{Enumerator, Object, ObjectRepr};
use serde_json::Value;

use crate::engine::mention::KnownNames;

/// The template given to a role that has none.
pub const DEFAULT_TEMPLATE: &str = "{% for name, value in inputs %}## {{ name }}\n{{ value }}\n\n{% endfor %}\
{% if history %}## Earlier runs\n{{ history }}\n\n{% endif %}\
{% if feedback %}{{ feedback }}\n\n{% endif %}\
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

/// What a call adds to a role's template besides its inputs. The values are shared with
/// the template, not copied into it.
#[derive(Clone, Debug, Default)]
pub struct PromptContext {
    /// `feedback` (DESIGN §8.2), or none.
    pub feedback: Option<Arc<Value>>,
    /// `history`, for a role that keeps one.
    pub history: Option<Arc<Value>>,
    /// `run`: `{round, step_count, tokens, cost, elapsed}`.
    pub run: Option<Arc<Value>>,
    /// `session`: the conversation's fields and turns, in a spec that keeps a session.
    pub session: Option<Arc<Value>>,
}

/// Renders the prompt of role `role` of `spec` for `inputs` (one value per input
/// contract of the role, in order) and the optional `feedback`. A run renders through one
/// [`Prompts`], which builds each role's fixed context once.
pub fn render_prompt(
    spec: &CompiledSpec,
    role: &str,
    inputs: &[Value],
    feedback: Option<&Value>,
) -> Result<String, PromptError> {
    Prompts::new(spec).render(role, inputs, feedback)
}

/// The prompts of one spec. What is the same on every call of a role (its compiled
/// template, rules, tools and output schema) is built on the role's first call and shared
/// by the calls after it; only the inputs and the feedback are new each time.
#[derive(Debug)]
pub struct Prompts<'spec> {
    spec: &'spec CompiledSpec,
    /// The spec's role names, for the `strip_mention` filter.
    known_names: Arc<KnownNames>,
    /// Each role's context, with its name (a spec has few roles: a scan beats hashing).
    roles: Vec<(String, RoleContext<'spec>)>,
}

/// A role's fixed template context.
#[derive(Debug)]
struct RoleContext<'spec> {
    ir: &'spec RoleIr,
    environment: Arc<CompiledTemplate>,
    source_name: String,
    /// What the template reads that is the same on every call (shared with the
    /// template's recent renders when they had the same).
    fixed: Arc<Fixed>,
    /// The role file's own front-matter keys (`meta`), when it has any.
    meta: Option<minijinja::Value>,
    rules: minijinja::Value,
    tools: minijinja::Value,
    output_schema: minijinja::Value,
}

/// What a role's template reads that is the same on every call of the role, as data:
/// with equal `Fixed` parts and equal call values, a template renders the same prompt.
#[derive(Debug, PartialEq)]
struct Fixed {
    /// The template's name of each input (`work_order` for `WorkOrder`), in order.
    input_names: Arc<[String]>,
    meta: Option<Arc<Value>>,
    rules: Vec<String>,
    tools: Arc<Value>,
    /// The output contract's JSON Schema (also what the model request carries).
    schema: Arc<Value>,
}

impl<'spec> Prompts<'spec> {
    pub fn new(spec: &'spec CompiledSpec) -> Self {
        Prompts {
            spec,
            known_names: Arc::new(KnownNames::of_spec(spec)),
            roles: Vec::new(),
        }
    }

    /// Whether `role`'s template reads `run` (or prints its whole context with
    /// `debug()`): only then need a caller build `run` for it. `false` for a role whose
    /// template cannot be built (rendering it says why).
    pub fn reads_run(&mut self, role: &str) -> bool {
        self.role(role)
            .is_ok_and(|context| context.environment.reads_run)
    }

    /// The JSON Schema of `role`'s output contract (`null` when it has none), shared.
    pub fn output_schema(&mut self, role: &str) -> Result<Arc<Value>, PromptError> {
        Ok(Arc::clone(&self.role(role)?.fixed.schema))
    }

    /// Renders `role`'s prompt for `inputs` (one value per input contract of the role, in
    /// order) and the optional `feedback`.
    pub fn render(
        &mut self,
        role: &str,
        inputs: &[Value],
        feedback: Option<&Value>,
    ) -> Result<String, PromptError> {
        let context = PromptContext {
            feedback: feedback.map(|feedback| Arc::new(feedback.clone())),
            ..PromptContext::default()
        };
        self.render_with(role, inputs, &context)
    }

    /// Renders `role`'s prompt for `inputs` with what the call adds (`feedback`,
    /// `history`, `run`).
    pub fn render_with(
        &mut self,
        role: &str,
        inputs: &[Value],
        extra: &PromptContext,
    ) -> Result<String, PromptError> {
        let inputs: Vec<Arc<Value>> = inputs.iter().cloned().map(Arc::new).collect();
        self.render_shared(role, &inputs, extra)
    }

    /// [`Prompts::render_with`] for inputs the caller shares with the template (a call's
    /// inputs, rendered again on each attempt, are not copied).
    pub fn render_shared(
        &mut self,
        role: &str,
        inputs: &[Arc<Value>],
        extra: &PromptContext,
    ) -> Result<String, PromptError> {
        let feedback = extra.feedback.as_ref();
        let context = self.role(role)?;
        let role_ir = context.ir;
        if inputs.len() != role_ir.inputs.len() {
            return Err(PromptError::Inputs {
                role: role.to_string(),
                expected: role_ir.inputs.len(),
                given: inputs.len(),
                contracts: role_ir.inputs.join(", "),
            });
        }
        // A prompt this template rendered lately from the same values is not rendered
        // again (a retry, a second replay of a scenario, an explored variant).
        if let Some(prompt) = context.environment.recall(&context.fixed, inputs, extra) {
            return Ok(prompt);
        }
        let template_error = |error: minijinja::Error| PromptError::Template {
            role: role.to_string(),
            source_name: context.source_name.clone(),
            message: error_text(&error),
        };
        let compiled = context
            .environment
            .environment
            .get_template(&context.source_name)
            .map_err(template_error)?;

        // A role without a template gets the default one, which lists every input.
        let values: Vec<minijinja::Value> = inputs.iter().map(shared_value).collect();
        let listed = role_ir.prompt.is_none().then(|| {
            minijinja::Value::from(
                context
                    .fixed
                    .input_names
                    .iter()
                    .zip(&values)
                    .map(|(name, value)| {
                        minijinja::Value::from(vec![
                            minijinja::Value::from(name.as_str()),
                            value.clone(),
                        ])
                    })
                    .collect::<Vec<_>>(),
            )
        });
        let variables = Variables {
            input_names: Arc::clone(&context.fixed.input_names),
            inputs: values,
            feedback: feedback.filter(|feedback| !feedback.is_null()).map_or(
                minijinja::Value::from(()),
                |feedback| {
                    minijinja::Value::from_object(FeedbackView {
                        fields: Json::root(Arc::clone(feedback)),
                        value: Arc::clone(feedback),
                    })
                },
            ),
            history: extra.history.as_ref().map(shared_value),
            session: extra.session.as_ref().map(shared_value),
            meta: context.meta.clone(),
            run: extra
                .run
                .as_ref()
                .map_or(minijinja::Value::from(()), shared_value),
            rules: context.rules.clone(),
            tools: context.tools.clone(),
            output_schema: context.output_schema.clone(),
            listed,
        };
        let prompt = compiled
            .render(minijinja::Value::from_object(variables))
            .map_err(template_error)?;
        context.environment.remember(Render {
            fixed: Arc::clone(&context.fixed),
            inputs: inputs.to_vec(),
            extra: extra.clone(),
            prompt: prompt.clone(),
        });
        Ok(prompt)
    }

    /// `role`'s fixed context, built on first use.
    fn role(&mut self, role: &str) -> Result<&RoleContext<'spec>, PromptError> {
        let index = match self.roles.iter().position(|(name, _)| name == role) {
            Some(index) => index,
            None => {
                let context = self.build_role(role)?;
                self.roles.push((role.to_string(), context));
                self.roles.len() - 1
            }
        };
        self.roles
            .get(index)
            .map(|(_, context)| context)
            .ok_or_else(|| PromptError::UnknownRole {
                role: role.to_string(),
            })
    }

    /// Builds `role`'s fixed context.
    fn build_role(&self, role: &str) -> Result<RoleContext<'spec>, PromptError> {
        let spec = self.spec;
        let role_ir = spec
            .roles
            .get(role)
            .ok_or_else(|| PromptError::UnknownRole {
                role: role.to_string(),
            })?;
        let no_includes = std::collections::BTreeMap::new();
        let (template, source_name, includes) = match &role_ir.prompt {
            Some(prompt) => (
                prompt.template.as_str(),
                prompt.source.clone(),
                &prompt.includes,
            ),
            None => (
                DEFAULT_TEMPLATE,
                "the default prompt".to_string(),
                &no_includes,
            ),
        };
        let environment = cached_environment(&source_name, template, includes, &self.known_names)
            .map_err(|error| PromptError::Template {
            role: role.to_string(),
            source_name: source_name.clone(),
            message: error_text(&error),
        })?;
        let schema = spec.contracts.get(&role_ir.output).map_or_else(
            || Arc::new(Value::Null),
            |contract| Arc::clone(&contract.schema),
        );
        let fixed = environment.adopt(Fixed {
            input_names: role_ir
                .inputs
                .iter()
                .map(|contract| snake_case(contract))
                .collect::<Vec<_>>()
                .into(),
            meta: (!role_ir.meta.is_empty()).then(|| {
                Arc::new(Value::Object(
                    role_ir
                        .meta
                        .iter()
                        .map(|(key, value)| (key.clone(), value.clone()))
                        .collect(),
                ))
            }),
            rules: rules_lines(spec, role_ir),
            tools: Arc::new(tools(spec, role_ir)),
            schema,
        });
        Ok(RoleContext {
            ir: role_ir,
            environment,
            source_name,
            meta: fixed.meta.as_ref().map(shared_value),
            rules: minijinja::Value::from_object(Lines(fixed.rules.clone())),
            tools: shared_value(&fixed.tools),
            output_schema: Json::root(Arc::clone(&fixed.schema)),
            fixed,
        })
    }
}

/// How many compiled templates the process keeps before starting over.
const TEMPLATE_CACHE_LIMIT: usize = 1024;

/// Compiled templates by source name, then template text and included files: parsing a
/// template once per process instead of on every call (each environment holds that one
/// template and what it includes). Looked up by `&str`, so a hit copies nothing.
type TemplateCache = Mutex<HashMap<String, Vec<(String, Includes, Arc<CompiledTemplate>)>>>;

/// The files a template includes, by template name.
type Includes = std::collections::BTreeMap<String, String>;

/// The process's compiled templates.
static TEMPLATES: OnceLock<TemplateCache> = OnceLock::new();

/// Forgets the renders every compiled template keeps, so that the next render of each
/// is made afresh (what `cargo xtask bench` times as a first replay).
pub fn forget_renders() {
    let Some(cache) = TEMPLATES.get() else {
        return;
    };
    if let Ok(cache) = cache.lock() {
        for (_, _, compiled) in cache.values().flatten() {
            if let Ok(mut renders) = compiled.renders.lock() {
                renders.clear();
            }
        }
    }
}

/// One template, compiled alone in its environment, and what it reads of the context.
#[derive(Debug)]
struct CompiledTemplate {
    /// The role names its `strip_mention` filter matches.
    names: KnownNames,
    environment: Environment<'static>,
    /// The template names `run`, or calls `debug()`, which prints every variable.
    reads_run: bool,
    /// Its last renders, newest first.
    renders: Mutex<VecDeque<Render>>,
}

/// How many renders each template keeps (a loop's calls of one role differ by their
/// feedback and inputs, so one is too few).
const RENDERS_KEPT: usize = 4;

/// A prompt longer than this is not kept (nor the inputs it was rendered from): the
/// memory a process's kept renders hold stays small.
const RENDER_KEPT_MAX_BYTES: usize = 64 * 1024;

/// A prompt a template rendered, and everything it was rendered from besides the
/// template: a render reads nothing else (no clock, no randomness), so the same values
/// give the same prompt.
#[derive(Debug)]
struct Render {
    fixed: Arc<Fixed>,
    inputs: Vec<Arc<Value>>,
    extra: PromptContext,
    prompt: String,
}

impl CompiledTemplate {
    /// The prompt rendered lately from `fixed`, `inputs` and `extra`, if any. Renders
    /// kept by a template another thread is using are not waited for: the caller renders.
    fn recall(
        &self,
        fixed: &Arc<Fixed>,
        inputs: &[Arc<Value>],
        extra: &PromptContext,
    ) -> Option<String> {
        let renders = self.renders.try_lock().ok()?;
        renders
            .iter()
            .find(|render| {
                // One `Fixed` per template and value ([`CompiledTemplate::adopt`]): the
                // pointer decides.
                Arc::ptr_eq(&render.fixed, fixed)
                    && render.inputs.len() == inputs.len()
                    && render.inputs.iter().zip(inputs).all(|(a, b)| same(a, b))
                    && same_option(&render.extra.feedback, &extra.feedback)
                    && same_option(&render.extra.history, &extra.history)
                    && same_option(&render.extra.run, &extra.run)
                    && same_option(&render.extra.session, &extra.session)
            })
            .map(|render| render.prompt.clone())
    }

    /// Keeps `render`, dropping the oldest past [`RENDERS_KEPT`] (not while another
    /// thread uses the template's renders: no render waits for one).
    fn remember(&self, render: Render) {
        if render.prompt.len() > RENDER_KEPT_MAX_BYTES {
            return;
        }
        if let Ok(mut renders) = self.renders.try_lock() {
            renders.truncate(RENDERS_KEPT - 1);
            renders.push_front(render);
        }
    }

    /// `fixed` as shared by this template's renders when one was made from the same (so
    /// [`CompiledTemplate::recall`] compares pointers); otherwise `fixed` itself.
    fn adopt(&self, fixed: Fixed) -> Arc<Fixed> {
        let known = self.renders.lock().ok().and_then(|renders| {
            renders
                .iter()
                .find(|render| *render.fixed == fixed)
                .map(|render| Arc::clone(&render.fixed))
        });
        known.unwrap_or_else(|| Arc::new(fixed))
    }
}

/// Two shared values are the same: one value, or equal ones.
fn same(a: &Arc<Value>, b: &Arc<Value>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

fn same_option(a: &Option<Arc<Value>>, b: &Option<Arc<Value>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same(a, b),
        _ => false,
    }
}

/// The environment holding `template` (and the files it includes) compiled under `source_name`, its `strip_mention`
/// filter matching `names`, built once per process; a template that does not compile is
/// not cached.
fn cached_environment(
    source_name: &str,
    template: &str,
    includes: &Includes,
    known: &Arc<KnownNames>,
) -> Result<Arc<CompiledTemplate>, minijinja::Error> {
    let cache = TEMPLATES.get_or_init(|| Mutex::new(HashMap::new()));
    let found = cache.lock().ok().and_then(|cache| {
        cache.get(source_name).and_then(|versions| {
            versions
                .iter()
                .find(|(text, included, compiled)| {
                    text == template && included == includes && compiled.names == **known
                })
                .map(|(_, _, compiled)| Arc::clone(compiled))
        })
    });
    if let Some(compiled) = found {
        return Ok(compiled);
    }
    // The compiler checks templates against this same environment (E018).
    let filter_names = Arc::clone(known);
    let mut environment = charter_compiler::render_env::environment(move |text: &str| {
        filter_names.strip_mention(text)
    });
    // Included files first: compiling the template looks nothing up, but rendering does.
    charter_compiler::render_env::add_includes(
        &mut environment,
        includes
            .iter()
            .map(|(name, text)| (name.clone(), text.clone())),
    )?;
    environment.add_template_owned(source_name.to_string(), template.to_string())?;
    // What the template reads, and what the files it includes read.
    let mut variables = environment
        .get_template(source_name)?
        .undeclared_variables(false);
    for name in includes.keys() {
        variables.extend(environment.get_template(name)?.undeclared_variables(false));
    }
    let compiled = Arc::new(CompiledTemplate {
        names: KnownNames::clone(known),
        environment,
        reads_run: variables.contains("run") || variables.contains("debug"),
        renders: Mutex::new(VecDeque::with_capacity(RENDERS_KEPT)),
    });
    if let Ok(mut cache) = cache.lock() {
        if cache.values().map(Vec::len).sum::<usize>() >= TEMPLATE_CACHE_LIMIT {
            cache.clear();
        }
        cache.entry(source_name.to_string()).or_default().push((
            template.to_string(),
            includes.clone(),
            Arc::clone(&compiled),
        ));
    }
    Ok(compiled)
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

/// A shared JSON value as template data: records and lists print as JSON and are read
/// in place, field by field, not copied; scalars are plain template values.
fn shared_value(value: &Arc<Value>) -> minijinja::Value {
    match &**value {
        Value::Object(_) | Value::Array(_) => Json::root(Arc::clone(value)),
        scalar => scalar_value(scalar),
    }
}

/// A JSON scalar as a template value (records and lists are [`Json`] objects).
fn scalar_value(value: &Value) -> minijinja::Value {
    match value {
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
        Value::Null | Value::Object(_) | Value::Array(_) => minijinja::Value::from(()),
    }
}

/// One step from a record or list to a part of it.
#[derive(Clone, Debug)]
enum PathStep {
    Field(String),
    Index(usize),
}

/// A JSON record or list seen by a template: a place inside a shared document, so reading
/// `plan.tasks[2].goal` copies nothing but the final string. Its JSON text is made once.
#[derive(Debug)]
struct Json {
    root: Arc<Value>,
    path: Vec<PathStep>,
    text: OnceLock<String>,
}

impl Json {
    fn root(root: Arc<Value>) -> minijinja::Value {
        minijinja::Value::from_object(Json {
            root,
            path: Vec::new(),
            text: OnceLock::new(),
        })
    }

    /// The value this object stands for.
    fn value(&self) -> &Value {
        let mut value = &*self.root;
        for step in &self.path {
            value = match (value, step) {
                (Value::Object(record), PathStep::Field(key)) => {
                    record.get(key).unwrap_or(&Value::Null)
                }
                (Value::Array(items), PathStep::Index(index)) => {
                    items.get(*index).unwrap_or(&Value::Null)
                }
                _ => &Value::Null,
            };
        }
        value
    }

    /// The part at `step`: a scalar as a plain value, a record or list as a [`Json`]
    /// sharing this document.
    fn child(&self, value: &Value, step: PathStep) -> minijinja::Value {
        match value {
            Value::Object(_) | Value::Array(_) => {
                let mut path = self.path.clone();
                path.push(step);
                minijinja::Value::from_object(Json {
                    root: Arc::clone(&self.root),
                    path,
                    text: OnceLock::new(),
                })
            }
            scalar => scalar_value(scalar),
        }
    }
}

impl Object for Json {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.value() {
            Value::Array(_) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        match self.value() {
            Value::Object(record) => {
                let name = key.as_str()?;
                let value = record.get(name)?;
                Some(self.child(value, PathStep::Field(name.to_string())))
            }
            Value::Array(items) => {
                let index = key.as_usize()?;
                let value = items.get(index)?;
                Some(self.child(value, PathStep::Index(index)))
            }
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.value() {
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
        if let Some(text) = self.text.get() {
            return formatter.write_str(text);
        }
        let text = serde_json::to_string_pretty(self.value()).map_err(|_| fmt::Error)?;
        formatter.write_str(self.text.get_or_init(|| text))
    }
}

/// `feedback` as a template sees it: its fields can be read like any record, and on its
/// own it prints as Markdown.
#[derive(Debug)]
struct FeedbackView {
    fields: minijinja::Value,
    value: Arc<Value>,
}

impl Object for FeedbackView {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        self.fields
            .get_item(key)
            .ok()
            .filter(|value| !value.is_undefined())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match &*self.value {
            Value::Object(record) => Enumerator::Values(
                record
                    .keys()
                    .map(|key| minijinja::Value::from(key.as_str()))
                    .collect(),
            ),
            _ => Enumerator::Empty,
        }
    }

    fn render(self: &Arc<Self>, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&crate::engine::feedback::markdown(&self.value))
    }
}

/// What a template sees at its top level: each input under its name, then what the call
/// adds, each of which hides an input of the same name. Looked up by name, so a render
/// builds no map of its variables.
#[derive(Debug)]
struct Variables {
    input_names: Arc<[String]>,
    inputs: Vec<minijinja::Value>,
    feedback: minijinja::Value,
    history: Option<minijinja::Value>,
    session: Option<minijinja::Value>,
    meta: Option<minijinja::Value>,
    run: minijinja::Value,
    rules: minijinja::Value,
    tools: minijinja::Value,
    output_schema: minijinja::Value,
    /// `inputs`, `[[name, value], ...]`, for the default template only.
    listed: Option<minijinja::Value>,
}

impl Variables {
    fn get(&self, name: &str) -> Option<&minijinja::Value> {
        match name {
            "feedback" => Some(&self.feedback),
            "run" => Some(&self.run),
            "rules" => Some(&self.rules),
            "tools" => Some(&self.tools),
            "output_schema" => Some(&self.output_schema),
            "history" if self.history.is_some() => self.history.as_ref(),
            "session" if self.session.is_some() => self.session.as_ref(),
            "meta" if self.meta.is_some() => self.meta.as_ref(),
            "inputs" if self.listed.is_some() => self.listed.as_ref(),
            _ => self
                .input_names
                .iter()
                .rposition(|input| input == name)
                .and_then(|index| self.inputs.get(index)),
        }
    }
}

impl Object for Variables {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        self.get(key.as_str()?).cloned()
    }

    /// The names in order (as `debug()` prints them), each once.
    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut names: Vec<&str> = ["feedback", "run", "rules", "tools", "output_schema"]
            .into_iter()
            .chain(self.history.as_ref().map(|_| "history"))
            .chain(self.session.as_ref().map(|_| "session"))
            .chain(self.meta.as_ref().map(|_| "meta"))
            .chain(self.listed.as_ref().map(|_| "inputs"))
            .chain(self.input_names.iter().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        Enumerator::Values(names.into_iter().map(minijinja::Value::from).collect())
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
