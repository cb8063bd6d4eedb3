//! Role files (`import role "roles/x.md"`): YAML front matter between `---` lines, then a
//! Markdown body that is the role's prompt template (DESIGN §2.3).
//!
//! The file is read through the loader and added to the source map, so every value in the
//! resulting [`Role`] has a span inside the role file, and problems (E016 for the file and
//! its front matter, E013 for bad durations) point there.
//!
//! A role file is read as a seed writes one (field report 002): its `tools` are
//! lower-cased, so they match the spec's tool names case-insensitively (`GET_WORKFLOW_LIST` is
//! `get_workflow_list`); its `id` may hold upper-case letters and `-`, and the spec names
//! the role by `spec_name` (lower-case, `-` as `_`: `exp-master` is `exp_master`), while
//! the id as written is kept (`Role::written_id`) so `role_named` finds it too; a missing
//! `input` is `Request` and a missing `output` is `Reply` (`Role::implied`: a spec without
//! that contract is E002 naming the missing key, not an unknown contract). Front-matter
//! keys Charter does not know are the file's own, kept as `meta` for the role's template
//! (W012 for those the template never reads as `meta.KEY`), and `messages: chat | prompt`
//! says how a call is laid out.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::ast::*;
use super::literals;
use crate::Loader;
use crate::diagnostics::{Code, Diagnostic, FileId, Sources, Span, did_you_mean};

/// The front-matter keys Charter knows (others are the file's own, kept as `meta`).
pub(crate) const KEYS: [&str; 15] = [
    "id",
    "name",
    "description",
    "model",
    "input",
    "output",
    "tools",
    "timeout",
    "retry",
    "rules",
    "max_tool_calls",
    "tool_rules",
    "tool_choice",
    "retry_after_effects",
    "messages",
];

/// Any YAML value; spans of nested values are not kept (the value's key line is used).
/// Floats are only ever reported as the wrong type, so their values are unread.
#[derive(Debug)]
enum Yaml {
    Null,
    Bool(bool),
    Int(i64),
    Float(#[allow(dead_code)] f64),
    Str(String),
    List(Vec<Yaml>),
    Map(BTreeMap<String, Yaml>),
}

// Written by hand rather than derived with `#[serde(untagged)]`, which buffers every value
// and retries each variant in turn: several times slower on every role file.
impl<'de> Deserialize<'de> for Yaml {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Yaml, D::Error> {
        deserializer.deserialize_any(YamlVisitor)
    }
}

struct YamlVisitor;

impl<'de> serde::de::Visitor<'de> for YamlVisitor {
    type Value = Yaml;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a YAML value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Yaml, E> {
        Ok(Yaml::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Yaml, E> {
        Ok(Yaml::Int(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Yaml, E> {
        Ok(i64::try_from(value).map_or(Yaml::Float(value as f64), Yaml::Int))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Yaml, E> {
        Ok(Yaml::Float(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Yaml, E> {
        Ok(Yaml::Str(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Yaml, E> {
        Ok(Yaml::Str(value))
    }

    fn visit_unit<E>(self) -> Result<Yaml, E> {
        Ok(Yaml::Null)
    }

    fn visit_none<E>(self) -> Result<Yaml, E> {
        Ok(Yaml::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Yaml, D::Error> {
        Yaml::deserialize(deserializer)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Yaml, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Yaml::List(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Yaml, A::Error> {
        let mut entries = BTreeMap::new();
        while let Some((key, value)) = map.next_entry::<String, Yaml>()? {
            entries.insert(key, value);
        }
        Ok(Yaml::Map(entries))
    }
}

impl Yaml {
    /// The value as JSON (what a template and a `permit` see as `meta.KEY`).
    fn to_json(&self) -> serde_json::Value {
        match self {
            Yaml::Null => serde_json::Value::Null,
            Yaml::Bool(flag) => serde_json::Value::Bool(*flag),
            Yaml::Int(int) => serde_json::Value::from(*int),
            Yaml::Float(float) => serde_json::Number::from_f64(*float)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Yaml::Str(text) => serde_json::Value::from(text.as_str()),
            Yaml::List(items) => {
                serde_json::Value::Array(items.iter().map(Yaml::to_json).collect())
            }
            Yaml::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(key, value)| (key.clone(), value.to_json()))
                    .collect(),
            ),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Yaml::Null => "nothing",
            Yaml::Bool(_) => "a boolean",
            Yaml::Int(_) => "an integer",
            Yaml::Float(_) => "a number",
            Yaml::Str(_) => "a string",
            Yaml::List(_) => "a list",
            Yaml::Map(_) => "a map",
        }
    }
}

/// Reads and parses the role file named by `path` (an `import role` string). Returns
/// `None` after reporting when the file cannot be read or its front matter is malformed.
pub(crate) fn load(
    loader: &dyn Loader,
    sources: &mut Sources,
    diagnostics: &mut Vec<Diagnostic>,
    path: &StringLit,
) -> Option<Role> {
    let loaded = match loader.load(&path.value) {
        Ok(loaded) => loaded,
        Err(reason) => {
            diagnostics.push(
                Diagnostic::new(
                    Code::E016,
                    path.span,
                    format!("cannot read role file `{}`", path.value),
                )
                .with_label(reason)
                .with_help("the path is relative to the spec file"),
            );
            return None;
        }
    };
    let file = sources.add(loaded.display_name, loaded.text);
    // The text is read where `sources` keeps it, not copied.
    let text = sources.get(file).map_or("", |source| source.text.as_str());
    let mut reader = RoleFile {
        file,
        text,
        path,
        diagnostics,
    };
    reader.role()
}

struct RoleFile<'a> {
    file: FileId,
    text: &'a str,
    /// The import's path string in the spec.
    path: &'a StringLit,
    diagnostics: &'a mut Vec<Diagnostic>,
}

/// Where the front matter and the body are in a role file.
struct Layout {
    /// Byte range of the YAML between the `---` lines.
    yaml: std::ops::Range<usize>,
    /// Byte offset where the Markdown body starts.
    body: usize,
}

impl RoleFile<'_> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start, end)
    }

    fn error(&mut self, span: Span, message: impl Into<String>, help: Option<String>) {
        let mut diagnostic = Diagnostic::new(Code::E016, span, message);
        if let Some(help) = help {
            diagnostic = diagnostic.with_help(help);
        }
        self.diagnostics.push(diagnostic);
    }

    fn layout(&self) -> Option<Layout> {
        let text = self.text;
        let start = text.strip_prefix('\u{feff}').map_or(0, |_| 3);
        let first_end = text
            .get(start..)?
            .find('\n')
            .map_or(text.len(), |i| start + i + 1);
        if text.get(start..first_end)?.trim_end() != "---" {
            return None;
        }
        let mut line_start = first_end;
        while line_start < text.len() {
            let line_end = text
                .get(line_start..)?
                .find('\n')
                .map_or(text.len(), |i| line_start + i + 1);
            let line = text.get(line_start..line_end)?.trim_end();
            if line == "---" || line == "..." {
                return Some(Layout {
                    yaml: first_end..line_start,
                    body: line_end,
                });
            }
            line_start = line_end;
        }
        None
    }

    /// Reads the role in stages: find the front matter, parse it, keep the file's own
    /// keys, read the `id`, then the known keys, then point the prompt at the body.
    fn role(&mut self) -> Option<Role> {
        let Some(layout) = self.layout() else {
            self.no_front_matter();
            return None;
        };
        let front = Front {
            values: self.front_matter(&layout)?,
            yaml: layout.yaml.clone(),
            text: self.text,
        };
        let meta = self.meta(&front);
        let name = self.id(&front)?;
        let whole = self.span(0, self.text.len());
        let mut role = Role::empty(
            name,
            RoleOrigin::File {
                path: self.path.value.clone(),
            },
            whole,
        );
        if let Some(Yaml::Str(written)) = front.values.get("id").map(|spanned| &spanned.value)
            && *written != role.name.name
        {
            role.written_id = Some(StringLit {
                value: written.clone(),
                span: role.name.span,
            });
        }
        self.known_keys(&front, &mut role);
        self.implied_contracts(&front, &mut role);
        role.meta = meta;
        role.prompt = Some(self.body(&layout));
        Some(role)
    }

    /// E016 for a file that does not start with front matter, at its first line.
    fn no_front_matter(&mut self) {
        let at = self.span(0, self.text.find('\n').unwrap_or(self.text.len()).min(3));
        self.error(
            at,
            format!("role file `{}` has no front matter", self.path.value),
            Some(
                "a role file starts with YAML front matter between `---` lines, then the prompt"
                    .to_string(),
            ),
        );
    }

    /// The front matter's keys and values; `None` (reported, E016) when it is not a YAML
    /// map. An empty front matter is an empty map, for the missing `id` to report.
    fn front_matter(
        &mut self,
        layout: &Layout,
    ) -> Option<BTreeMap<String, serde_saphyr::Spanned<Yaml>>> {
        let yaml_text = self.text.get(layout.yaml.clone()).unwrap_or("");
        if yaml_text.trim().is_empty() {
            return Some(BTreeMap::new());
        }
        match serde_saphyr::from_str_with_options(yaml_text, front_matter_options()) {
            Ok(values) => Some(values),
            Err(error) => {
                let at = error
                    .location()
                    .and_then(|location| offset_of(yaml_text, location.line(), location.column()))
                    .map_or(layout.yaml.start, |offset| {
                        (layout.yaml.start + offset).min(layout.yaml.end)
                    });
                let reason = if is_budget_breach(&error) {
                    "it is too large or complex to read (anchors, aliases and merge keys \
                     count each time they are used)"
                        .to_string()
                } else {
                    yaml_reason(&error.to_string())
                };
                let span = self.span(at, at);
                self.error(
                    span,
                    format!("malformed front matter in role file: {reason}"),
                    Some("the front matter must be a YAML map of role properties".to_string()),
                );
                None
            }
        }
    }

    /// Keys of the file's own (a seed's `workflows`, `skillRules`): kept as `meta.KEY`
    /// (DESIGN §9.2); the checks warn (W012) about those the role never reads.
    fn meta(&self, front: &Front<'_>) -> Vec<MetaEntry> {
        let mut meta = Vec::new();
        for (key, spanned) in &front.values {
            if !KEYS.contains(&key.as_str()) {
                meta.push(MetaEntry {
                    key: key.clone(),
                    value: spanned.value.to_json(),
                    span: self.span_of_key(front, key),
                });
            }
        }
        meta
    }

    /// The role's name from `id`; `None` (reported, E016) when it is missing, not a
    /// string or not a valid name, since a role without a name cannot be referred to.
    fn id(&mut self, front: &Front<'_>) -> Option<Ident> {
        let id_span = self.value_span(front, "id");
        match front.values.get("id").map(|spanned| &spanned.value) {
            Some(Yaml::Str(id)) if is_ident(&spec_name(id)) => Some(Ident {
                name: spec_name(id),
                span: id_span,
            }),
            Some(Yaml::Str(id)) => {
                self.error(
                    id_span,
                    format!("role id `{id}` is not a valid name"),
                    Some(
                        "role ids are names of letters, digits, `_` and `-` that start with a \
                         letter or `_` (`exp-master` is `exp_master` in the spec)"
                            .to_string(),
                    ),
                );
                None
            }
            Some(other) => {
                self.error(
                    id_span,
                    format!("role `id` must be a string, found {}", other.kind()),
                    None,
                );
                None
            }
            None => {
                let span = self.span(front.yaml.start, front.yaml.start);
                self.error(
                    span,
                    "role file has no `id`".to_string(),
                    Some("add `id: role_name` to the front matter".to_string()),
                );
                None
            }
        }
    }

    /// Reads every key Charter knows besides `id` into `role`, in a fixed order so the
    /// problems they have are reported in that order.
    fn known_keys(&mut self, front: &Front<'_>, role: &mut Role) {
        role.display_name = self.string(front, "name");
        role.description = self.string(front, "description");
        if let Some(model) = self.string(front, "model") {
            role.model = Some(if is_ident(&model.value) {
                ModelRef::Alias(Ident {
                    name: model.value,
                    span: model.span,
                })
            } else {
                ModelRef::Literal(model)
            });
        }
        role.inputs = self.names(front, "input");
        role.output = self.names(front, "output").into_iter().next();
        // Tool names match the spec's case-insensitively: a seed's `GET_WORKFLOW_LIST` is
        // the spec's `get_workflow_list` (spec tool names are always lower-case).
        role.tools = self
            .names(front, "tools")
            .into_iter()
            .map(lower_case_name)
            .collect();
        role.rules = self.names(front, "rules");
        if let Some(timeout) = self.string(front, "timeout") {
            role.timeout = self.duration(&timeout.value, timeout.span);
        }
        role.max_tool_calls = self.int(front, "max_tool_calls");
        role.retry = self.retry(front);
        role.tool_rules = self.tool_rules(front);
        for rule in &mut role.tool_rules {
            rule.tool.name = rule.tool.name.to_ascii_lowercase();
        }
        role.messages = self.string(front, "messages").map(|mode| Ident {
            name: mode.value,
            span: mode.span,
        });
        role.tool_choice = self.string(front, "tool_choice").map(|choice| Ident {
            // A tool's name, matched like `tools` (or `auto`, `required`).
            name: choice.value.to_ascii_lowercase(),
            span: choice.span,
        });
        role.retry_after_effects = match front.values.get("retry_after_effects") {
            Some(spanned) => match &spanned.value {
                Yaml::Bool(value) => Some(*value),
                other => {
                    self.wrong_type(front, "retry_after_effects", "`true` or `false`", other);
                    None
                }
            },
            None => None,
        };
    }

    /// A role file may leave out its contracts (a seed's role file names none): without
    /// `input` it takes `Request`, the request contract, and without `output` it answers
    /// `Reply`. The spec declares both; the checks say so when it does not.
    fn implied_contracts(&self, front: &Front<'_>, role: &mut Role) {
        let at = self.value_span(front, "id");
        if !front.values.contains_key("input") {
            role.implied.input = true;
            role.inputs = vec![Ident {
                name: "Request".to_string(),
                span: at,
            }];
        }
        if !front.values.contains_key("output") {
            role.implied.output = true;
            role.output = Some(Ident {
                name: "Reply".to_string(),
                span: at,
            });
        }
    }

    /// The prompt: the Markdown body after the front matter, read later as a template.
    fn body(&self, layout: &Layout) -> Prompt {
        let body_span = self.span(layout.body.min(self.text.len()), self.text.len());
        Prompt {
            source: PromptSource::File {
                path: StringLit {
                    value: self.path.value.clone(),
                    span: self.path.span,
                },
                file: Some(self.file),
            },
            span: body_span,
        }
    }

    /// The span of `key:` at the start of a line of the front matter.
    fn span_of_key(&self, front: &Front<'_>, key: &str) -> Span {
        match front.key_line(key) {
            Some(start) => self.span(start, start + key.len()),
            None => self.span(front.yaml.start, front.yaml.start),
        }
    }

    /// The span of the value of `key`: from saphyr's location when it has one, else the
    /// rest of the key's line.
    fn value_span(&self, front: &Front<'_>, key: &str) -> Span {
        if let Some(spanned) = front.values.get(key) {
            let span = spanned.referenced.span();
            if let (Some(offset), Some(length)) = (span.byte_offset(), span.byte_len()) {
                let start = front.yaml.start + usize::try_from(offset).unwrap_or(0);
                let end = start + usize::try_from(length).unwrap_or(0);
                if end <= front.yaml.end && end > start {
                    return self.span(start, end);
                }
            }
        }
        match front.key_line(key) {
            Some(start) => {
                let line_end = self
                    .text
                    .get(start..)
                    .and_then(|rest| rest.find('\n'))
                    .map_or(self.text.len(), |i| start + i);
                let value_start = (start + key.len() + 1).min(line_end);
                let line = self.text.get(value_start..line_end).unwrap_or("");
                let trimmed = line.trim();
                if trimmed.is_empty() {
                    return self.span(start, start + key.len());
                }
                let lead = line.len() - line.trim_start().len();
                self.span(value_start + lead, value_start + lead + trimmed.len())
            }
            None => self.span(front.yaml.start, front.yaml.start),
        }
    }

    /// Where `needle` occurs within the value of `key` (for items of a list), falling back
    /// to the whole value.
    fn item_span(&self, front: &Front<'_>, key: &str, needle: &str) -> Span {
        let whole = self.value_span(front, key);
        let region_start = front.key_line(key).unwrap_or(whole.start as usize);
        let region_end = front.next_key_line(region_start).min(front.yaml.end);
        if let Some(index) = self
            .text
            .get(region_start..region_end)
            .and_then(|region| find_word(region, needle))
        {
            let start = region_start + index;
            return self.span(start, start + needle.len());
        }
        whole
    }

    fn wrong_type(&mut self, front: &Front<'_>, key: &str, expected: &str, found: &Yaml) {
        let span = self.value_span(front, key);
        self.error(
            span,
            format!("`{key}` must be {expected}, found {}", found.kind()),
            None,
        );
    }

    fn string(&mut self, front: &Front<'_>, key: &str) -> Option<StringLit> {
        let value = &front.values.get(key)?.value;
        match value {
            Yaml::Str(text) => Some(StringLit {
                value: text.clone(),
                span: self.value_span(front, key),
            }),
            Yaml::Int(number) => Some(StringLit {
                value: number.to_string(),
                span: self.value_span(front, key),
            }),
            Yaml::Null => None,
            other => {
                self.wrong_type(front, key, "a string", other);
                None
            }
        }
    }

    /// A name or a list of names (`input: Task` or `input: [Task, Plan]`).
    fn names(&mut self, front: &Front<'_>, key: &str) -> Vec<Ident> {
        let Some(spanned) = front.values.get(key) else {
            return Vec::new();
        };
        match &spanned.value {
            Yaml::Str(name) => vec![Ident {
                name: name.clone(),
                span: self.value_span(front, key),
            }],
            Yaml::Null => Vec::new(),
            Yaml::List(items) => {
                let mut names = Vec::new();
                for item in items {
                    match item {
                        Yaml::Str(name) => names.push(Ident {
                            name: name.clone(),
                            span: self.item_span(front, key, name),
                        }),
                        other => {
                            let span = self.value_span(front, key);
                            self.error(
                                span,
                                format!("`{key}` must list names, found {}", other.kind()),
                                None,
                            );
                        }
                    }
                }
                names
            }
            other => {
                self.wrong_type(front, key, "a name or a list of names", other);
                Vec::new()
            }
        }
    }

    fn int(&mut self, front: &Front<'_>, key: &str) -> Option<IntLit> {
        let value = &front.values.get(key)?.value;
        match value {
            Yaml::Int(number) if *number >= 0 => Some(IntLit {
                value: number.unsigned_abs(),
                span: self.value_span(front, key),
            }),
            other => {
                self.wrong_type(front, key, "a non-negative integer", other);
                None
            }
        }
    }

    fn duration(&mut self, text: &str, span: Span) -> Option<DurationLit> {
        match literals::duration_millis(text.trim()) {
            Ok(millis) => Some(DurationLit { millis, span }),
            Err(error) => {
                let mut diagnostic = Diagnostic::new(Code::E013, span, error.message);
                if let Some(help) = error.help {
                    diagnostic = diagnostic.with_help(help);
                }
                self.diagnostics.push(diagnostic);
                None
            }
        }
    }

    /// `retry: 2`, `retry: "2 backoff 1s"` or `retry: {count: 2, backoff: 1s}`.
    fn retry(&mut self, front: &Front<'_>) -> Option<Retry> {
        let value = &front.values.get("retry")?.value;
        let span = self.value_span(front, "retry");
        let bad = |this: &mut Self, found: &str| {
            this.error(
                span,
                format!("`retry` must be a count, `\"N backoff D\"` or `{{count, backoff}}`, found {found}"),
                Some("e.g. `retry: 2 backoff 1s`".to_string()),
            );
        };
        match value {
            Yaml::Int(count) if *count >= 0 => Some(Retry {
                count: IntLit {
                    value: count.unsigned_abs(),
                    span,
                },
                backoff: None,
                span,
            }),
            Yaml::Str(text) => {
                let mut words = text.split_whitespace();
                let count = words.next().and_then(|word| word.parse::<u64>().ok());
                let backoff_word = match (words.next(), words.next(), words.next()) {
                    (None, _, _) => None,
                    (Some("backoff"), Some(duration), None) => Some(Some(duration)),
                    _ => Some(None),
                };
                match (count, backoff_word) {
                    (Some(count), None) => Some(Retry {
                        count: IntLit { value: count, span },
                        backoff: None,
                        span,
                    }),
                    (Some(count), Some(Some(duration))) => Some(Retry {
                        count: IntLit { value: count, span },
                        backoff: self.duration(duration, span),
                        span,
                    }),
                    _ => {
                        bad(self, &format!("`{text}`"));
                        None
                    }
                }
            }
            Yaml::Map(map) => {
                let count = match map.get("count") {
                    Some(Yaml::Int(count)) if *count >= 0 => count.unsigned_abs(),
                    _ => {
                        bad(self, "a map without a `count`");
                        return None;
                    }
                };
                let backoff = match map.get("backoff") {
                    None | Some(Yaml::Null) => None,
                    Some(Yaml::Str(duration)) => self.duration(duration, span),
                    Some(other) => {
                        bad(self, &format!("a backoff that is {}", other.kind()));
                        None
                    }
                };
                if let Some(extra) = map.keys().find(|key| *key != "count" && *key != "backoff") {
                    let help = did_you_mean(extra, ["count", "backoff"]);
                    self.error(span, format!("unknown key `{extra}` in `retry`"), help);
                }
                Some(Retry {
                    count: IntLit { value: count, span },
                    backoff,
                    span,
                })
            }
            other => {
                bad(self, other.kind());
                None
            }
        }
    }

    fn tool_rules(&mut self, front: &Front<'_>) -> Vec<ToolRule> {
        let Some(spanned) = front.values.get("tool_rules") else {
            return Vec::new();
        };
        match &spanned.value {
            Yaml::Map(map) => {
                let mut rules = Vec::new();
                for (tool, note) in map {
                    let tool_span = self.item_span(front, "tool_rules", tool);
                    match note {
                        Yaml::Str(note) => rules.push(ToolRule {
                            tool: Ident {
                                name: tool.clone(),
                                span: tool_span,
                            },
                            note: StringLit {
                                value: note.clone(),
                                span: tool_span,
                            },
                        }),
                        other => self.error(
                            tool_span,
                            format!(
                                "the note for tool `{tool}` must be a string, found {}",
                                other.kind()
                            ),
                            None,
                        ),
                    }
                }
                rules
            }
            Yaml::Null => Vec::new(),
            other => {
                self.wrong_type(front, "tool_rules", "a map of tool name to note", other);
                Vec::new()
            }
        }
    }
}

/// The parsed front matter and where it is.
struct Front<'a> {
    values: BTreeMap<String, serde_saphyr::Spanned<Yaml>>,
    yaml: std::ops::Range<usize>,
    text: &'a str,
}

impl Front<'_> {
    /// Offset of `key:` at the start of a line of the front matter.
    fn key_line(&self, key: &str) -> Option<usize> {
        let region = self.text.get(self.yaml.clone())?;
        let mut line_start = 0;
        for line in region.split_inclusive('\n') {
            if let Some(after) = line.strip_prefix(key)
                && after.trim_start_matches([' ', '\t']).starts_with(':')
            {
                return Some(self.yaml.start + line_start);
            }
            line_start += line.len();
        }
        None
    }

    /// The start of the next top-level key line after `from` (or the end of the YAML).
    fn next_key_line(&self, from: usize) -> usize {
        let Some(region) = self.text.get(from..self.yaml.end) else {
            return self.yaml.end;
        };
        let mut offset = 0;
        for (index, line) in region.split_inclusive('\n').enumerate() {
            if index > 0
                && line
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            {
                return from + offset;
            }
            offset += line.len();
        }
        self.yaml.end
    }
}

/// The byte offset of one-based `line` and `column` (in characters) in `text`.
pub(crate) fn offset_of(text: &str, line: u64, column: u64) -> Option<usize> {
    let line = usize::try_from(line).ok()?.checked_sub(1)?;
    let column = usize::try_from(column).ok()?.saturating_sub(1);
    let mut line_start = 0;
    for _ in 0..line {
        line_start += text.get(line_start..)?.find('\n')? + 1;
    }
    let rest = text.get(line_start..)?;
    let line_text = rest.split('\n').next().unwrap_or("");
    let within = line_text
        .char_indices()
        .nth(column)
        .map_or(line_text.len(), |(index, _)| index);
    Some(line_start + within)
}

/// Front matter is a small map: a parser budget far below saphyr's defaults, so a few
/// hundred bytes of anchors, aliases or merge keys cannot make it expand for seconds.
fn front_matter_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_aliases = 100;
    budget.max_anchors = 100;
    budget.max_merge_keys = 100;
    budget.max_recorded_anchor_events = 10_000;
    budget.max_recorded_anchor_bytes = 1024 * 1024;
    budget.max_nodes = 50_000;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// Whether `error` (under its wrappers) is a parser budget breach.
fn is_budget_breach(error: &serde_saphyr::Error) -> bool {
    let mut error = error;
    loop {
        match error {
            serde_saphyr::Error::Budget { .. } => return true,
            serde_saphyr::Error::AliasError { error: inner, .. }
            | serde_saphyr::Error::WithSnippet { error: inner, .. } => error = inner,
            _ => return false,
        }
    }
}

/// saphyr's message without its `error: line N column M: ` prefix (the diagnostic says
/// where) and without the snippet lines after it.
fn yaml_reason(message: &str) -> String {
    let first = message.lines().next().unwrap_or("").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let without_position = match first.strip_prefix("line ") {
        Some(rest) => rest.split_once(": ").map_or(first, |(_, reason)| reason),
        None => first,
    };
    without_position.to_string()
}

/// The byte index of `needle` in `haystack` as a whole word.
fn find_word(haystack: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    haystack
        .match_indices(needle)
        .map(|(index, _)| index)
        .find(|&index| {
            let before = haystack.get(..index).and_then(|s| s.chars().next_back());
            let after = haystack
                .get(index + needle.len()..)
                .and_then(|s| s.chars().next());
            !before.is_some_and(is_word) && !after.is_some_and(is_word)
        })
}

/// The spec's name for a role file's `id`: lower-case, each `-` as `_` (`exp-master` is
/// `exp_master`), so a seed's ids are usable as written.
pub(crate) fn spec_name(id: &str) -> String {
    id.to_ascii_lowercase().replace('-', "_")
}

/// A role file's name of a spec item (a tool), lower-cased: spec names are lower-case, so
/// this is a case-insensitive match. A name that is not ASCII is left for the checks.
fn lower_case_name(name: Ident) -> Ident {
    Ident {
        name: name.name.to_ascii_lowercase(),
        span: name.span,
    }
}

/// `[a-z_][a-z0-9_]*`
pub(crate) fn is_ident(text: &str) -> bool {
    let mut bytes = text.bytes();
    bytes
        .next()
        .is_some_and(|first| first.is_ascii_lowercase() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
}
