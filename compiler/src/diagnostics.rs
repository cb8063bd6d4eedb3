//! Diagnostics as data: codes, severities, labelled spans and help, plus the source map
//! that spans point into. Rendering lives in `render`; nothing here prints.

use serde::Serialize;

/// Index of a file in [`Sources`]: the spec itself is always `FileId(0)`; imported role
/// files and prompt templates read through the loader come after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FileId(pub u32);

/// A byte range in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span {
            file,
            start: u32::try_from(start).unwrap_or(u32::MAX),
            end: u32::try_from(end).unwrap_or(u32::MAX),
        }
    }

    /// The smallest span covering both (they must be in the same file; otherwise `self`).
    pub fn to(self, other: Span) -> Span {
        if self.file != other.file {
            return self;
        }
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// One source text known to the compiler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// The name shown in diagnostics: the path as the user gave it for the spec, and the
    /// spec's directory joined with the relative path for files it names.
    pub name: String,
    pub text: String,
}

/// Every file a compilation read, indexed by [`FileId`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    files: Vec<SourceFile>,
}

impl Sources {
    pub fn new() -> Sources {
        Sources::default()
    }

    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let id = FileId(u32::try_from(self.files.len()).unwrap_or(u32::MAX));
        self.files.push(SourceFile {
            name: name.into(),
            text: text.into(),
        });
        id
    }

    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(index, file)| (FileId(u32::try_from(index).unwrap_or(u32::MAX)), file))
    }

    /// The text a span covers, or "" when the span does not fit its file.
    pub fn snippet(&self, span: Span) -> &str {
        self.get(span.file)
            .and_then(|file| file.text.get(span.range()))
            .unwrap_or("")
    }

    /// One-based line and column (in characters) of a byte offset.
    pub fn line_column(&self, file: FileId, offset: u32) -> (usize, usize) {
        let Some(source) = self.get(file) else {
            return (1, 1);
        };
        let offset = (offset as usize).min(source.text.len());
        let before = source.text.get(..offset).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |index| index + 1);
        let column = before
            .get(line_start..)
            .map_or(0, |text| text.chars().count())
            + 1;
        (line, column)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// Every diagnostic code the compiler can emit. The codes are stable: tests, users'
/// scripts and `charter explain` rely on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// Internal compiler error: lowering met something a check should have rejected.
    E000,
    /// Syntax error.
    E001,
    /// Unknown name.
    E002,
    /// Duplicate definition.
    E003,
    /// Type error in an expression or argument.
    E004,
    /// Role input/output does not match how the flow calls it.
    E005,
    /// Unbounded loop.
    E006,
    /// Unreachable step, or a step that cannot reach a terminal.
    E007,
    /// Repair not exhaustive.
    E008,
    /// Repair names an issue code no gate emits, or reruns a step not upstream of the gate.
    E009,
    /// Invariant violated statically.
    E010,
    /// A judge role holds a tool with a write or external effect.
    E011,
    /// A finalize role whose output is not Delivery, or a gate with no way to finish.
    E012,
    /// Bad literal: duration, range, weight, threshold.
    E013,
    /// A template references a variable the role does not provide.
    E014,
    /// A static task list whose `depends_on` has a cycle or names a missing task.
    E015,
    /// A file named by `import` or `file(...)` cannot be read or is malformed.
    E016,
    /// A gate reads a step that cannot have run before it.
    E017,
    /// A template uses a filter or test the renderer does not provide, or loads another template.
    E018,
    /// A tool's sandbox grants a write outside the project.
    E019,
    /// An `mcp` server declared so that it cannot be reached: no `command` or `url`, both, an
    /// empty command, a key of the other transport, a URL that is not HTTP, no `tools`.
    E020,
    /// A `SERVER.TOOL` name that no `mcp` server provides: an unknown server, or a tool its
    /// allow-list leaves out.
    E021,
    /// An `mcp` server named like a `tool`.
    E022,
    /// An `mcp` server that `charter.lock` does not hold (or there is no lock).
    E023,
    /// A tool of an `mcp` server that its entry in `charter.lock` does not list.
    E024,
    /// A `permit` on an MCP tool reading an argument the tool's `inputSchema` lacks.
    E025,
    /// `charter.lock` cannot be read (not YAML of the lock's form, a newer version).
    E026,
    /// Unused contract.
    W001,
    /// Unused tool.
    W002,
    /// Unused rules block.
    W003,
    /// A role with tools and no `max_tool_calls`.
    W004,
    /// A score rule with no `below` issue.
    W005,
    /// A gate whose pass condition ignores `score`.
    W006,
    /// The worst case cannot fit the spec's own budget.
    W007,
    /// A fan-out with no upper bound.
    W008,
    /// Unused model alias.
    W009,
    /// A role that can receive feedback whose template never reads `feedback`.
    W010,
    /// A finalize role whose template never reads the candidate's id.
    W011,
    /// A role file's front-matter key Charter does not know, which nothing reads as `meta`.
    W012,
    /// An `effect: read` tool whose sandbox grants writes.
    W013,
    /// A sandbox path that is empty or goes through `..`.
    W014,
    /// An `mcp` server whose tools no role uses.
    W015,
    /// An `mcp` server locked with another command or URL than the spec declares.
    W016,
}

impl Code {
    pub const ALL: [Code; 43] = [
        Code::E000,
        Code::E001,
        Code::E002,
        Code::E003,
        Code::E004,
        Code::E005,
        Code::E006,
        Code::E007,
        Code::E008,
        Code::E009,
        Code::E010,
        Code::E011,
        Code::E012,
        Code::E013,
        Code::E014,
        Code::E015,
        Code::E016,
        Code::E017,
        Code::E018,
        Code::E019,
        Code::E020,
        Code::E021,
        Code::E022,
        Code::E023,
        Code::E024,
        Code::E025,
        Code::E026,
        Code::W001,
        Code::W002,
        Code::W003,
        Code::W004,
        Code::W005,
        Code::W006,
        Code::W007,
        Code::W008,
        Code::W009,
        Code::W010,
        Code::W011,
        Code::W012,
        Code::W013,
        Code::W014,
        Code::W015,
        Code::W016,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Code::E000 => "E000",
            Code::E001 => "E001",
            Code::E002 => "E002",
            Code::E003 => "E003",
            Code::E004 => "E004",
            Code::E005 => "E005",
            Code::E006 => "E006",
            Code::E007 => "E007",
            Code::E008 => "E008",
            Code::E009 => "E009",
            Code::E010 => "E010",
            Code::E011 => "E011",
            Code::E012 => "E012",
            Code::E013 => "E013",
            Code::E014 => "E014",
            Code::E015 => "E015",
            Code::E016 => "E016",
            Code::E017 => "E017",
            Code::E018 => "E018",
            Code::E019 => "E019",
            Code::E020 => "E020",
            Code::E021 => "E021",
            Code::E022 => "E022",
            Code::E023 => "E023",
            Code::E024 => "E024",
            Code::E025 => "E025",
            Code::E026 => "E026",
            Code::W001 => "W001",
            Code::W002 => "W002",
            Code::W003 => "W003",
            Code::W004 => "W004",
            Code::W005 => "W005",
            Code::W006 => "W006",
            Code::W007 => "W007",
            Code::W008 => "W008",
            Code::W009 => "W009",
            Code::W010 => "W010",
            Code::W011 => "W011",
            Code::W012 => "W012",
            Code::W013 => "W013",
            Code::W014 => "W014",
            Code::W015 => "W015",
            Code::W016 => "W016",
        }
    }

    pub fn parse(text: &str) -> Option<Code> {
        let upper = text.trim().to_ascii_uppercase();
        Code::ALL.into_iter().find(|code| code.as_str() == upper)
    }

    pub fn severity(self) -> Severity {
        if self.as_str().starts_with('W') {
            Severity::Warning
        } else {
            Severity::Error
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A labelled span: the primary label says what is wrong where; secondary ones give context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
    pub primary: bool,
}

/// One problem found in a spec. Messages start lower-case, have no trailing period, and
/// name the problem; `help` names the fix when one is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub labels: Vec<Label>,
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic of `code`'s severity with a primary label at `span`.
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity: code.severity(),
            message: message.into(),
            labels: vec![Label {
                span,
                message: String::new(),
                primary: true,
            }],
            help: None,
        }
    }

    /// Sets the primary label's text.
    pub fn with_label(mut self, message: impl Into<String>) -> Diagnostic {
        if let Some(label) = self.labels.iter_mut().find(|label| label.primary) {
            label.message = message.into();
        }
        self
    }

    /// Adds a secondary label.
    pub fn with_note(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label {
            span,
            message: message.into(),
            primary: false,
        });
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// The primary span (the first label's when none is marked primary).
    pub fn primary_span(&self) -> Option<Span> {
        self.labels
            .iter()
            .find(|label| label.primary)
            .or_else(|| self.labels.first())
            .map(|label| label.span)
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics by position (file, start), then code, and drops exact duplicates.
pub fn sort(diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.sort_by(|a, b| {
        let key_a = a
            .primary_span()
            .map(|span| (span.file, span.start, span.end));
        let key_b = b
            .primary_span()
            .map(|span| (span.file, span.start, span.end));
        key_a
            .cmp(&key_b)
            .then(a.code.cmp(&b.code))
            .then(a.message.cmp(&b.message))
    });
    diagnostics.dedup();
}

/// "did you mean `x`?" for the closest of `candidates` to `name`, if any is close enough.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        if candidate == name {
            continue;
        }
        let score = strsim::jaro_winkler(name, candidate);
        if score >= 0.8 && best.is_none_or(|(best_score, _)| score > best_score) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, candidate)| format!("did you mean `{candidate}`?"))
}
