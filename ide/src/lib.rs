//! Charter's language service: what an editor asks about a spec (diagnostics, hover, go to
//! definition, references, rename, completion, outline, highlighting, formatting), answered
//! from the compiler's syntax tree, tables and diagnostics.
//!
//! Pure: no I/O and no protocol types. The caller gives the texts of the open documents
//! ([`Documents`]) and a [`Loader`] for the files on disk; an [`Analysis`] of one spec
//! reads the open text of a file before the disk's, so editing a prompt template re-checks
//! the spec that imports it. Files are named by path strings (the spec's path joined with
//! what it imports, normalized), and positions are byte offsets; [`LineIndex`] converts
//! them to the protocol's lines and UTF-16 columns.
//!
//! Every feature answers on any text, half-typed included: a test runs them all on every
//! prefix of a seed spec, and `cargo xtask bench` times the analysis of each seed as the
//! language server makes it on every edit.

mod complete;
mod format;
mod hover;
mod index;
mod line_index;
mod navigate;
mod outline;
mod props;
mod scan;

use std::collections::BTreeMap;
use std::ops::Range;

use charter_compiler::lock::LockedServer;
use charter_compiler::syntax::ast::SpecFile;
use charter_compiler::{
    Compilation, Diagnostic, FileId, LoadedFile, Loader, LockFile, Severity, Span,
    compile_with_syntax,
};

pub use complete::{Completion, CompletionKind};
pub use format::format;
pub use hover::Hover;
pub use index::{Def, Index};
pub use line_index::LineIndex;
pub use navigate::TextEdit;
pub use outline::{OutlineItem, SymbolKind, Token, TokenKind};

/// The texts of the documents open in the editor, by path.
#[derive(Clone, Debug, Default)]
pub struct Documents {
    texts: BTreeMap<String, String>,
}

impl Documents {
    pub fn new() -> Documents {
        Documents::default()
    }

    pub fn set(&mut self, path: &str, text: String) {
        self.texts.insert(path.to_string(), text);
    }

    pub fn remove(&mut self, path: &str) {
        self.texts.remove(path);
    }

    pub fn get(&self, path: &str) -> Option<&str> {
        self.texts.get(path).map(String::as_str)
    }

    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.texts.keys().map(String::as_str)
    }
}

/// A range of bytes in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRange {
    pub path: String,
    pub range: Range<usize>,
}

/// One diagnostic as an editor shows it: `charter check`'s message with its primary
/// label and help folded in, and its secondary labels as related places.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditorDiagnostic {
    pub range: Range<usize>,
    pub code: String,
    pub error: bool,
    pub message: String,
    pub related: Vec<(FileRange, String)>,
}

/// Normalizes a path lexically: `a/./b/../c` -> `a/c` (as `charter check` shows paths).
pub fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|last| *last != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// The files a spec names, read from the open documents first, then through `disk`; the
/// project's `charter.lock` where `disk` finds it, its open text first.
struct Overlay<'a> {
    directory: String,
    documents: &'a Documents,
    disk: &'a dyn Loader,
}

impl Loader for Overlay<'_> {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        let joined = if self.directory.is_empty() || relative_path.starts_with('/') {
            relative_path.to_string()
        } else {
            format!("{}/{relative_path}", self.directory)
        };
        let path = normalize(&joined);
        if !relative_path.starts_with('/')
            && let Some(text) = self.documents.get(&path)
        {
            return Ok(LoadedFile {
                display_name: path,
                text: text.to_string(),
            });
        }
        self.disk.load(relative_path).map(|loaded| LoadedFile {
            display_name: path,
            text: loaded.text,
        })
    }

    fn load_lock(&self) -> LockFile {
        let found = self.disk.load_lock();
        let display_name = match &found {
            LockFile::NotChecked => return found,
            LockFile::Missing { display_name } | LockFile::Unreadable { display_name, .. } => {
                display_name
            }
            LockFile::Found(loaded) => &loaded.display_name,
        };
        let path = normalize(display_name);
        match self.documents.get(&path) {
            Some(text) => LockFile::Found(LoadedFile {
                display_name: path,
                text: text.to_string(),
            }),
            None => found,
        }
    }
}

/// One spec compiled as `charter check` compiles it, with the index of its names.
#[derive(Debug)]
pub struct Analysis {
    compilation: Compilation,
    ast: Option<SpecFile>,
    index: Index,
}

impl Analysis {
    /// Compiles the spec at `path` with text `text`; the files it names are read from
    /// `documents` when open there, else through `disk` (relative to the spec, as
    /// `charter check` reads them).
    pub fn new(path: &str, text: &str, documents: &Documents, disk: &dyn Loader) -> Analysis {
        let path = normalize(path);
        let directory = match path.rfind('/') {
            Some(0) => "/".to_string(),
            Some(at) => path[..at].to_string(),
            None => String::new(),
        };
        let overlay = Overlay {
            directory,
            documents,
            disk,
        };
        let (compilation, ast) = compile_with_syntax(&path, text, &overlay);
        let index = ast
            .as_ref()
            .map(|ast| Index::build(ast, &compilation.sources))
            .unwrap_or_default();
        Analysis {
            compilation,
            ast,
            index,
        }
    }

    /// The spec's own path.
    pub fn spec_path(&self) -> &str {
        self.path_of(FileId(0)).unwrap_or("")
    }

    /// Every file the compilation read: the spec, then its role files and templates.
    pub fn files(&self) -> Vec<String> {
        self.compilation
            .sources
            .files()
            .map(|(_, file)| file.name.clone())
            .collect()
    }

    /// The text of a file the compilation read.
    pub fn text(&self, path: &str) -> Option<&str> {
        let id = self.file_id(path)?;
        self.compilation
            .sources
            .get(id)
            .map(|file| file.text.as_str())
    }

    pub fn compilation(&self) -> &Compilation {
        &self.compilation
    }

    /// What `charter.lock` holds of the server `name`, when the spec declares servers and
    /// the project's lock could be read.
    pub(crate) fn locked_server(&self, name: &str) -> Option<&LockedServer> {
        self.compilation.lock.as_ref()?.servers.get(name)
    }

    pub(crate) fn file_id(&self, path: &str) -> Option<FileId> {
        self.compilation
            .sources
            .files()
            .find(|(_, file)| file.name == path)
            .map(|(id, _)| id)
    }

    pub(crate) fn path_of(&self, file: FileId) -> Option<&str> {
        self.compilation
            .sources
            .get(file)
            .map(|file| file.name.as_str())
    }

    pub(crate) fn file_range(&self, span: Span) -> Option<FileRange> {
        Some(FileRange {
            path: self.path_of(span.file)?.to_string(),
            range: span.range(),
        })
    }

    /// `charter check`'s diagnostics, by the file each one points into.
    pub fn diagnostics(&self) -> BTreeMap<String, Vec<EditorDiagnostic>> {
        let mut by_file: BTreeMap<String, Vec<EditorDiagnostic>> = BTreeMap::new();
        for diagnostic in &self.compilation.diagnostics {
            let Some(span) = diagnostic.primary_span() else {
                continue;
            };
            let Some(path) = self.path_of(span.file) else {
                continue;
            };
            by_file
                .entry(path.to_string())
                .or_default()
                .push(self.editor_diagnostic(diagnostic, span));
        }
        by_file
    }

    fn editor_diagnostic(&self, diagnostic: &Diagnostic, span: Span) -> EditorDiagnostic {
        let mut message = diagnostic.message.clone();
        let mut related = Vec::new();
        for label in &diagnostic.labels {
            if label.primary {
                if !label.message.is_empty() {
                    message.push_str(&format!("\n{}", label.message));
                }
            } else if let Some(place) = self.file_range(label.span) {
                related.push((place, label.message.clone()));
            }
        }
        if let Some(help) = &diagnostic.help {
            message.push_str(&format!("\nhelp: {help}"));
        }
        EditorDiagnostic {
            range: span.range(),
            code: diagnostic.code.as_str().to_string(),
            error: diagnostic.severity == Severity::Error,
            message,
            related,
        }
    }
}

#[cfg(test)]
mod tests;
