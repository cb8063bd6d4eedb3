//! Prompt templates: parsed with minijinja and checked for variables the role does not provide
//! (E014), for filters, tests and loading tags the renderer does not provide (E018), and for
//! included files that could not be read (E016); the files a template includes are checked
//! the same way (their syntax, filters, tests and own includes).

pub(crate) use crate::syntax::template_uses as uses;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use crate::check::Symbols;
use crate::check::types::{ContractInfo, Contracts};
use crate::diagnostics::{Code, Diagnostic, FileId, Sources, Span, did_you_mean};
use crate::names::snake_case;
use crate::render_env;
use crate::syntax::ast::{PromptSource, Role, SpecFile};
use crate::syntax::includes;

/// The variables every role's template sees besides its inputs.
pub const ALWAYS_PROVIDED: [&str; 5] = ["feedback", "rules", "tools", "output_schema", "run"];

/// The variables each role's template uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TemplateFacts {
    /// By role name.
    pub roles: BTreeMap<String, RoleTemplate>,
}

/// What one role's prompt template uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleTemplate {
    /// The file the template text is in (the spec's own file for an inline prompt).
    pub file: Option<FileId>,
    /// Whether the template parsed.
    pub parsed: bool,
    /// The top-level variables it reads (`task`, `feedback`, ...), sorted.
    pub variables: BTreeSet<String>,
    /// The dotted paths it reads (`task.goal`), as minijinja's nested analysis reports them.
    pub paths: BTreeSet<String>,
    /// The variables the role provides: its inputs' snake_case names and [`ALWAYS_PROVIDED`].
    pub provided: Vec<String>,
    /// Every file the template includes, directly or through another included file, by
    /// its template name (`roles/parts/tone.j2`); the variables and paths above include
    /// what these read.
    pub includes: BTreeMap<String, FileId>,
}

pub fn check(
    spec: &SpecFile,
    symbols: &Symbols<'_>,
    contracts: &Contracts,
    sources: &Sources,
    diagnostics: &mut Vec<Diagnostic>,
) -> TemplateFacts {
    // One environment for every role: building one (its filters, tests and globals) and
    // listing its globals for each role was a measurable part of compiling a spec.
    let environment = render_env::environment(str::to_string);
    let globals: BTreeSet<String> = environment
        .globals()
        .map(|(name, _)| name.to_string())
        .collect();
    let templates = Templates {
        environment: &environment,
        globals: &globals,
        includes: &spec.includes,
        reported: RefCell::new(BTreeSet::new()),
    };
    let mut facts = TemplateFacts::default();
    for role in symbols.roles.values() {
        let template = check_role(role, symbols, contracts, &templates, sources, diagnostics);
        unread_meta(role, template.as_ref(), diagnostics);
        if let Some(template) = template {
            facts.roles.insert(role.name.name.clone(), template);
        }
    }
    facts
}

/// W012: a role file's own front-matter key that the role's template never reads as
/// `meta.KEY` (nor reads `meta` whole). A template that did not parse reads nothing
/// knowable, so it gets no warning.
fn unread_meta(role: &Role, template: Option<&RoleTemplate>, diagnostics: &mut Vec<Diagnostic>) {
    if role.meta.is_empty() || template.is_some_and(|template| !template.parsed) {
        return;
    }
    let reads = |key: &str| {
        template.is_some_and(|template| {
            template.paths.iter().any(|path| {
                path == "meta"
                    || path
                        .strip_prefix("meta.")
                        .is_some_and(|rest| rest.split('.').next() == Some(key))
            })
        })
    };
    for entry in &role.meta {
        if reads(&entry.key) {
            continue;
        }
        let known: Vec<&str> = crate::syntax::role_file::KEYS.to_vec();
        let help = match did_you_mean(&entry.key, known.iter().copied()) {
            Some(suggestion) => suggestion,
            None => format!(
                "read it in the template as `{{{{ meta.{} }}}}`, or remove it",
                entry.key
            ),
        };
        diagnostics.push(
            Diagnostic::new(
                Code::W012,
                entry.span,
                format!(
                    "role `{}` never reads its front-matter key `{}`",
                    role.name.name, entry.key
                ),
            )
            .with_label("not a key Charter knows, and not read as `meta`")
            .with_help(help),
        );
    }
}

/// The template engine shared by every role's check.
struct Templates<'a> {
    environment: &'a minijinja::Environment<'a>,
    /// The names the environment defines (`range`, `namespace`, ...): not the role's to provide.
    globals: &'a BTreeSet<String>,
    /// The files the templates include, read while parsing ([`SpecFile::includes`]).
    includes: &'a BTreeMap<String, Result<FileId, String>>,
    /// Included files already checked (a piece several roles include is reported once),
    /// and include tags already reported.
    reported: RefCell<BTreeSet<(FileId, usize)>>,
}

/// Where a template's text is and how to map offsets in it back to a source span.
struct TemplateText<'a> {
    text: &'a str,
    /// For a file: the file and the offset of `text` in it. For an inline prompt: the
    /// literal's span, whose original text differs from `text` (escapes, de-indentation).
    location: Location,
}

enum Location {
    File { file: FileId, offset: usize },
    Inline { span: Span },
}

fn template_text<'a>(role: &'a Role, sources: &'a Sources) -> Option<TemplateText<'a>> {
    let prompt = role.prompt.as_ref()?;
    match &prompt.source {
        PromptSource::Inline(literal) => Some(TemplateText {
            text: &literal.value,
            location: Location::Inline { span: literal.span },
        }),
        PromptSource::File { file, .. } => {
            let file = (*file)?;
            let source = sources.get(file)?;
            // A role file's body starts where the parser says (after its front matter).
            let offset = if prompt.span.file == file {
                prompt.span.start as usize
            } else {
                front_matter_end(&source.text)
            };
            Some(TemplateText {
                text: source.text.get(offset..).unwrap_or(""),
                location: Location::File { file, offset },
            })
        }
    }
}

/// Where the body of a Markdown file with YAML front matter starts (0 when there is none).
fn front_matter_end(text: &str) -> usize {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return 0;
    };
    let start = text.len() - rest.len();
    let mut offset = start;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        if line.trim_end() == "---" {
            return offset;
        }
    }
    0
}

impl TemplateText<'_> {
    /// The span of `text[range]` in the source, as close as can be found.
    fn span(&self, sources: &Sources, range: std::ops::Range<usize>, name: &str) -> Span {
        match self.location {
            Location::File { file, offset } => {
                Span::new(file, offset + range.start, offset + range.end)
            }
            Location::Inline { span } => {
                let original = sources.snippet(span);
                let needle = self.text.get(range.clone()).unwrap_or("");
                let found = if needle.is_empty() {
                    None
                } else {
                    find_in_tags(original, name).or_else(|| original.find(needle))
                };
                match found {
                    Some(at) => Span::new(
                        span.file,
                        span.start as usize + at,
                        span.start as usize + at + needle.len().max(1),
                    ),
                    None => span,
                }
            }
        }
    }
}

/// The byte offset of identifier `name` inside a `{{ }}` or `{% %}` tag of `text`.
fn find_in_tags(text: &str, name: &str) -> Option<usize> {
    if name.is_empty() {
        return None;
    }
    let bytes = text.as_bytes();
    let is_ident = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_';
    let mut search_from = 0;
    while let Some(found) = text.get(search_from..).and_then(|rest| rest.find(name)) {
        let at = search_from + found;
        let end = at + name.len();
        search_from = end;
        let before_ok = at == 0
            || bytes
                .get(at - 1)
                .is_none_or(|byte| !is_ident(*byte) && *byte != b'.');
        let after_ok = bytes.get(end).is_none_or(|byte| !is_ident(*byte));
        if !before_ok || !after_ok {
            continue;
        }
        let before = text.get(..at).unwrap_or("");
        let open = before.rfind("{{").max(before.rfind("{%"));
        let close = before.rfind("}}").max(before.rfind("%}"));
        if open.is_some() && open > close {
            return Some(at);
        }
    }
    None
}

/// Checks one role's prompt template in stages: the variables the role provides, whether
/// the template parses, and whether every variable and input field it reads exists. One
/// piece: the stages share the role's variables and the parsed template, each a few lines.
fn check_role(
    role: &Role,
    symbols: &Symbols<'_>,
    contracts: &Contracts,
    templates: &Templates<'_>,
    sources: &Sources,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<RoleTemplate> {
    let template = template_text(role, sources)?;
    let (provided, inputs) = provided_variables(role, symbols);
    let file = match template.location {
        Location::File { file, .. } => Some(file),
        Location::Inline { span } => Some(span.file),
    };
    let mut facts = RoleTemplate {
        file,
        provided: provided.clone(),
        ..RoleTemplate::default()
    };

    let parsed = match templates.environment.template_from_str(template.text) {
        Ok(parsed) => parsed,
        Err(error) => {
            diagnostics.push(parse_error(role, &template, sources, &error));
            return Some(facts);
        }
    };
    facts.parsed = true;
    let name = includes::template_name(role).unwrap_or(crate::syntax::includes::INLINE_SOURCE);
    check_uses(
        role,
        &mut vec![crate::render_env::include_path("", name)],
        &template,
        sources,
        templates,
        &mut facts,
        diagnostics,
    );
    // With an unknown input contract (reported, E002) the names the template may use are
    // guesses; reporting them would only repeat that error.
    let inputs_known = role
        .inputs
        .iter()
        .all(|input| symbols.is_contract(&input.name));
    let scope = Scope {
        role,
        provided: &provided,
        inputs: &inputs,
        inputs_known,
        contracts,
        globals: templates.globals,
        sources,
    };
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let paths = parsed.undeclared_variables(true);
    check_variables(
        &scope,
        &template,
        paths,
        None,
        &mut reported,
        &mut facts,
        diagnostics,
    );
    // What an included file reads is checked the same way, except for names a tag of the
    // role's template or of another included file mentions (a loop variable or a `set`
    // of the includer, which an included file sees).
    let included: Vec<(String, FileId)> = facts
        .includes
        .iter()
        .map(|(name, file)| (name.clone(), *file))
        .collect();
    let root_words = tag_words(template.text);
    let piece_words: Vec<BTreeSet<String>> = included
        .iter()
        .map(|(_, file)| {
            sources
                .get(*file)
                .map(|source| tag_words(&source.text))
                .unwrap_or_default()
        })
        .collect();
    for (index, (_, file)) in included.into_iter().enumerate() {
        let Some(source) = sources.get(file) else {
            continue;
        };
        let Ok(parsed) = templates.environment.template_from_str(&source.text) else {
            continue;
        };
        let piece = TemplateText {
            text: &source.text,
            location: Location::File { file, offset: 0 },
        };
        // The words of the role's template and of every other included file.
        let mut bound = root_words.clone();
        for (other, words) in piece_words.iter().enumerate() {
            if other != index {
                bound.extend(words.iter().cloned());
            }
        }
        let mut reported_here: BTreeSet<String> = BTreeSet::new();
        check_variables(
            &scope,
            &piece,
            parsed.undeclared_variables(true),
            Some(&bound),
            &mut reported_here,
            &mut facts,
            diagnostics,
        );
    }
    Some(facts)
}

/// What a role's template may read, for checking the variables a template reads.
struct Scope<'a> {
    role: &'a Role,
    provided: &'a [String],
    inputs: &'a BTreeMap<String, &'a str>,
    /// With an unknown input contract (reported, E002), reporting names would guess.
    inputs_known: bool,
    contracts: &'a Contracts,
    globals: &'a BTreeSet<String>,
    sources: &'a Sources,
}

/// E014 for each variable `paths` reads that `scope` does not provide (unless `bound`,
/// names an includer may have bound, holds it) and each input field it reads that the
/// input's contract lacks; what is read goes into `facts`.
fn check_variables(
    scope: &Scope<'_>,
    template: &TemplateText<'_>,
    paths: std::collections::HashSet<String>,
    bound: Option<&BTreeSet<String>>,
    reported: &mut BTreeSet<String>,
    facts: &mut RoleTemplate,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut paths: Vec<String> = paths.into_iter().collect();
    paths.sort();
    for path in paths {
        let mut segments = path.split('.');
        let Some(variable) = segments.next() else {
            continue;
        };
        if scope.globals.contains(variable) {
            continue;
        }
        facts.variables.insert(variable.to_string());
        facts.paths.insert(path.clone());
        if !scope.provided.iter().any(|name| name == variable) {
            let maybe_bound = bound.is_some_and(|bound| bound.contains(variable));
            if scope.inputs_known && !maybe_bound && reported.insert(variable.to_string()) {
                diagnostics.push(unprovided(
                    scope.role,
                    template,
                    scope.sources,
                    scope.provided,
                    variable,
                ));
            }
            continue;
        }
        // `task.field`: the field must exist on the input contract.
        let (Some(contract), Some(field)) = (scope.inputs.get(variable), segments.next()) else {
            continue;
        };
        let Some(info) = scope.contracts.get(contract) else {
            continue;
        };
        if info.field(field).is_some() || !reported.insert(format!("{variable}.{field}")) {
            continue;
        }
        let span = locate_path(template, scope.sources, variable, field);
        diagnostics.push(missing_field(
            scope.role, span, contract, info, variable, field,
        ));
    }
}

/// Every identifier inside a `{% %}` tag of `text` (what a loop, `set` or `with` may bind).
fn tag_words(text: &str) -> BTreeSet<String> {
    let mut words = BTreeSet::new();
    let mut rest = text;
    while let Some(open) = rest.find("{%") {
        let after = rest.get(open + 2..).unwrap_or("");
        let close = after.find("%}").unwrap_or(after.len());
        let tag = after.get(..close).unwrap_or("");
        words.extend(
            tag.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|word| !word.is_empty())
                .map(str::to_string),
        );
        rest = after.get(close..).unwrap_or("");
    }
    words
}

/// The filters, tests and loading tags of a template (the last of `chain`, the names
/// from the role's own template down to the included one being checked), and the files it
/// includes, checked in turn (their syntax and uses; their variables are checked by the
/// caller, against the role). A file that includes one of its includers is E018: it
/// would render without end.
fn check_uses(
    role: &Role,
    chain: &mut Vec<String>,
    template: &TemplateText<'_>,
    sources: &Sources,
    templates: &Templates<'_>,
    facts: &mut RoleTemplate,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for found in uses::scan(template.text) {
        if found.kind != uses::Kind::Include {
            if let Some(diagnostic) = unavailable(role, template, sources, templates, &found) {
                diagnostics.push(diagnostic);
            }
            continue;
        }
        let name = chain.last().map_or("", String::as_str);
        let included = includes::resolve(name, &found.name);
        let span = template.span(sources, found.range.clone(), &found.name);
        if chain.contains(&included) {
            if templates
                .reported
                .borrow_mut()
                .insert((span.file, span.start as usize))
            {
                diagnostics.push(include_cycle(role, span, chain, &included));
            }
            continue;
        }
        match templates.includes.get(&included) {
            Some(Ok(file)) => {
                if facts.includes.insert(included.clone(), *file).is_some() {
                    continue;
                }
                let Some(source) = sources.get(*file) else {
                    continue;
                };
                let text = TemplateText {
                    text: &source.text,
                    location: Location::File {
                        file: *file,
                        offset: 0,
                    },
                };
                // A piece several roles include is checked once; what it reads counts
                // for each of them.
                let first = templates.reported.borrow_mut().insert((*file, usize::MAX));
                if let Err(error) = templates.environment.template_from_str(text.text) {
                    if first {
                        diagnostics.push(parse_error(role, &text, sources, &error));
                    }
                    continue;
                }
                let mut quiet = Vec::new();
                chain.push(included);
                check_uses(
                    role,
                    chain,
                    &text,
                    sources,
                    templates,
                    facts,
                    if first { &mut *diagnostics } else { &mut quiet },
                );
                chain.pop();
            }
            Some(Err(reason))
                if templates
                    .reported
                    .borrow_mut()
                    .insert((span.file, span.start as usize)) =>
            {
                diagnostics.push(unreadable_include(role, span, &found.name, reason));
            }
            Some(Err(_)) => {}
            // Every include was read while parsing: nothing to say of one that was not.
            None => {}
        }
    }
}

/// E018 for an include of a template that is already being included (`chain`, from the
/// role's own template).
fn include_cycle(role: &Role, span: Span, chain: &[String], included: &str) -> Diagnostic {
    let mut path: Vec<String> = chain
        .iter()
        .skip_while(|name| *name != included)
        .map(|name| format!("`{name}`"))
        .collect();
    path.push(format!("`{included}`"));
    Diagnostic::new(
        Code::E018,
        span,
        format!(
            "the prompt template of role `{}` includes itself: {}",
            role.name.name,
            path.join(" -> ")
        ),
    )
    .with_label("this include closes the cycle")
    .with_help("move the text both files need into a third file that includes neither")
}

/// E016 for an included file that could not be read, where the `include` names it.
fn unreadable_include(role: &Role, span: Span, written: &str, reason: &str) -> Diagnostic {
    Diagnostic::new(
        Code::E016,
        span,
        format!(
            "cannot read `{written}`, included by the prompt template of role `{}`",
            role.name.name
        ),
    )
    .with_label(reason.to_string())
    .with_help("an included file's path is relative to the template that includes it, and stays inside the spec's directory")
}

/// The variables a role's template may read, in the order the help lists them (its
/// inputs, then what every template sees, then what the role or spec adds), and the
/// contract each input variable holds, for checking the fields read from it.
pub fn provided_variables<'r>(
    role: &'r Role,
    symbols: &Symbols<'_>,
) -> (Vec<String>, BTreeMap<String, &'r str>) {
    let mut provided: Vec<String> = Vec::new();
    let mut inputs: BTreeMap<String, &str> = BTreeMap::new();
    for input in &role.inputs {
        let variable = snake_case(&input.name);
        if symbols.is_contract(&input.name) {
            inputs.insert(variable.clone(), input.name.as_str());
        }
        provided.push(variable);
    }
    provided.extend(ALWAYS_PROVIDED.iter().map(|name| (*name).to_string()));
    if role.history.is_some() {
        provided.push("history".to_string());
    }
    if !role.meta.is_empty() {
        provided.push("meta".to_string());
    }
    if symbols.session.is_some() {
        provided.push("session".to_string());
    }
    (provided, inputs)
}

/// E014 for a template that does not parse, pointing at the error's range or, when
/// minijinja gives none, at its whole line.
fn parse_error(
    role: &Role,
    template: &TemplateText<'_>,
    sources: &Sources,
    error: &minijinja::Error,
) -> Diagnostic {
    let detail = error.detail().unwrap_or("syntax error").to_string();
    // The line in the file (a role file's body starts after its front matter); an
    // inline prompt is de-indented, so its lines are not the spec's: the span says where.
    let line = match (&template.location, error.line()) {
        (Location::File { file, offset }, Some(line)) => {
            let before = sources
                .get(*file)
                .and_then(|source| source.text.get(..*offset))
                .map_or(0, |text| text.matches('\n').count());
            format!(" (line {})", line + before)
        }
        _ => String::new(),
    };
    let range = error.range().unwrap_or(0..0);
    let mut span = template.span(sources, range.clone(), "");
    if range.is_empty()
        && let (Location::File { file, offset }, Some(line)) = (&template.location, error.line())
    {
        let start = line_start(template.text, line);
        let end = template
            .text
            .get(start..)
            .and_then(|rest| rest.find('\n'))
            .map_or(template.text.len(), |at| start + at);
        span = Span::new(*file, offset + start, offset + end);
    }
    Diagnostic::new(
        Code::E014,
        span,
        format!(
            "prompt template of `{}` does not parse: {detail}{line}",
            role.name.name
        ),
    )
    .with_label("template syntax error")
    .with_help("fix the minijinja syntax; `{{ x }}` prints, `{% if x %}...{% endif %}` branches")
}

/// E018 for a filter or test the rendering environment does not provide, or a tag that
/// loads another template in a way prompt templates do not support (`import`, `from`,
/// `extends`, an `include` not named by one string).
fn unavailable(
    role: &Role,
    template: &TemplateText<'_>,
    sources: &Sources,
    templates: &Templates<'_>,
    found: &uses::Use,
) -> Option<Diagnostic> {
    let name = found.name.as_str();
    let (what, known, label): (&str, &[&str], &str) = match found.kind {
        uses::Kind::Filter if !render_env::has_filter(templates.environment, name) => {
            ("filter", &render_env::FILTERS, "unknown filter")
        }
        uses::Kind::Test if !render_env::has_test(templates.environment, name) => {
            ("test", &render_env::TESTS, "unknown test")
        }
        uses::Kind::Load if name == "include" => {
            let span = template.span(sources, found.range.clone(), name);
            return Some(
                Diagnostic::new(
                    Code::E018,
                    span,
                    format!(
                        "template of role `{}` includes a file it does not name with one string",
                        role.name.name
                    ),
                )
                .with_label("the included file must be known when the spec is compiled")
                .with_help("name the file as a string, relative to this template: `{% include \"parts/tone.j2\" %}`"),
            );
        }
        uses::Kind::Load => {
            let span = template.span(sources, found.range.clone(), name);
            return Some(
                Diagnostic::new(
                    Code::E018,
                    span,
                    format!(
                        "template of role `{}` uses `{{% {name} %}}`, which prompt templates do not support",
                        role.name.name
                    ),
                )
                .with_label("not supported in prompt templates")
                .with_help("share text between templates with `{% include \"file\" %}`, or define a `{% macro %}` in the template that uses it"),
            );
        }
        _ => return None,
    };
    let span = template.span(sources, found.range.clone(), name);
    let listed = known
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let help = match did_you_mean(name, known.iter().copied()) {
        Some(suggestion) => {
            format!("{suggestion} the {what}s a prompt template may use are {listed}")
        }
        None => format!("the {what}s a prompt template may use are {listed}"),
    };
    Some(
        Diagnostic::new(
            Code::E018,
            span,
            format!(
                "template of role `{}` uses the {what} `{name}`, which prompt templates do not provide",
                role.name.name
            ),
        )
        .with_label(label)
        .with_help(help),
    )
}

/// E014 for a variable the role does not provide, with help naming what it does provide.
fn unprovided(
    role: &Role,
    template: &TemplateText<'_>,
    sources: &Sources,
    provided: &[String],
    variable: &str,
) -> Diagnostic {
    let span = locate(template, sources, variable);
    let provided_list = provided
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut diagnostic = Diagnostic::new(
        Code::E014,
        span,
        format!(
            "template of role `{}` uses `{variable}`, which the role does not provide",
            role.name.name
        ),
    )
    .with_label("not provided to this template");
    let suggestion = did_you_mean(variable, provided.iter().map(String::as_str));
    diagnostic = diagnostic.with_help(match suggestion {
        _ if variable == "session" => "`session` exists in a spec that keeps one between turns: declare `session Chat keep 20 { FIELD: TYPE? }`".to_string(),
        _ if variable == "history" => format!(
            "add `history: [STEP, ...]` to role `{}` to give its template the earlier outputs of those steps",
            role.name.name
        ),
        Some(suggestion) => format!("{suggestion} the role provides {provided_list}"),
        None => format!(
            "the role provides {provided_list}; add an input contract to `{}` to provide more",
            role.name.name
        ),
    });
    if let Some(first) = role.inputs.first() {
        diagnostic = diagnostic.with_note(first.span, "the role's inputs are declared here");
    }
    diagnostic
}

/// E014 for `variable.field` where `contract`, the input's contract, has no such field.
fn missing_field(
    role: &Role,
    span: Span,
    contract: &str,
    info: &ContractInfo,
    variable: &str,
    field: &str,
) -> Diagnostic {
    let names: Vec<&str> = info
        .fields
        .iter()
        .map(|field| field.name.as_str())
        .collect();
    let help = did_you_mean(field, names.iter().copied()).unwrap_or_else(|| {
        format!(
            "`{contract}` has {}",
            names
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    });
    let mut diagnostic = Diagnostic::new(
        Code::E014,
        span,
        format!(
            "template of role `{}` uses `{variable}.{field}`, but `{contract}` has no field `{field}`",
            role.name.name
        ),
    )
    .with_label("no such field")
    .with_help(help);
    if let Some(contract_span) = info.span {
        diagnostic = diagnostic.with_note(contract_span, format!("`{contract}` is defined here"));
    }
    diagnostic
}

fn line_start(text: &str, line: usize) -> usize {
    if line <= 1 {
        return 0;
    }
    text.match_indices('\n')
        .nth(line - 2)
        .map_or(0, |(at, _)| at + 1)
}

/// The span of variable `name` in the template.
fn locate(template: &TemplateText<'_>, sources: &Sources, name: &str) -> Span {
    match template.location {
        Location::File { .. } => match find_in_tags(template.text, name) {
            Some(at) => template.span(sources, at..at + name.len(), name),
            None => template.span(sources, 0..0, name),
        },
        Location::Inline { span } => {
            let original = sources.snippet(span);
            match find_in_tags(original, name) {
                Some(at) => Span::new(
                    span.file,
                    span.start as usize + at,
                    span.start as usize + at + name.len(),
                ),
                None => span,
            }
        }
    }
}

/// The span of `variable.field` in the template (the field part), or of the variable.
fn locate_path(
    template: &TemplateText<'_>,
    sources: &Sources,
    variable: &str,
    field: &str,
) -> Span {
    let dotted = format!("{variable}.{field}");
    let (text, base) = match template.location {
        Location::File { file, offset } => (template.text, Span::new(file, offset, offset)),
        Location::Inline { span } => (sources.snippet(span), span),
    };
    match find_in_tags(text, &dotted) {
        Some(at) => {
            let start = base.start as usize + at + variable.len() + 1;
            Span::new(base.file, start, start + field.len())
        }
        None => locate(template, sources, variable),
    }
}

#[cfg(test)]
mod tests;
