//! Charter's compiler: `.charter` text to a checked, compiled flow graph.
//!
//! The pipeline is `syntax` (pest grammar -> AST with spans) -> `check` (names, types,
//! flow rules -> diagnostics and resolved tables) -> `graph` (lowering -> [`CompiledSpec`])
//! -> `bounds` (worst-case calls, tokens and wall time). `format` prints a spec in the
//! canonical layout (`charter fmt`); `names` holds the language's name conventions (a
//! contract's snake_case variable name), shared with the runtime and the editor tooling.
//! The compiler does no I/O of its own: files named by a spec come through the [`Loader`]
//! passed in, and so does the project's `charter.lock` (`lock`), read only for a spec that
//! declares an `mcp` server, whose tools are then checked against it (`check::lock`).
//! `canonical` and `yaml` are the canonical JSON and the YAML reading the lock's format
//! needs, shared with the runtime's file formats.

pub mod bounds;
pub mod canonical;
pub mod check;
pub mod diagnostics;
pub mod explain;
pub mod format;
pub mod graph;
pub mod lock;
pub mod names;
pub mod render;
pub mod render_env;
pub mod syntax;
pub mod yaml;

pub use diagnostics::{Code, Diagnostic, FileId, Severity, Sources, Span};
pub use graph::CompiledSpec;

/// Reads the files a spec names (`import role "..."`, `file("...")`), relative to the spec,
/// and the project's `charter.lock`.
pub trait Loader {
    /// Returns the text of `relative_path` (as written in the spec) and the name to show
    /// for it in diagnostics, or a one-line reason it could not be read.
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String>;

    /// The `charter.lock` at the root of the spec's project (DESIGN §19), asked for only
    /// when the spec declares an `mcp` server. The default knows no project: the spec's MCP
    /// tools are then not checked against a lock ([`LockFile::NotChecked`]).
    fn load_lock(&self) -> LockFile {
        LockFile::NotChecked
    }
}

/// The project's `charter.lock` as a [`Loader`] finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockFile {
    /// The loader knows no project (tests, a lone text, `charter lock` itself, which
    /// writes the lock): MCP tools are checked only against the spec's own allow-lists.
    NotChecked,
    /// The project has no lock; `display_name` is where it would be.
    Missing { display_name: String },
    /// The lock's text.
    Found(LoadedFile),
    /// The lock is there but could not be read: a one-line reason that names it.
    Unreadable {
        display_name: String,
        reason: String,
    },
}

/// A file read by a [`Loader`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedFile {
    /// Shown in diagnostics, e.g. `specs/seeds/prompts/planner.md.j2`.
    pub display_name: String,
    pub text: String,
}

/// A loader that has no files: every `import` and `file(...)` fails to load.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFiles;

impl Loader for NoFiles {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        Err(format!("no file `{relative_path}` is available here"))
    }
}

/// A loader over an in-memory map of relative path -> text (for tests and fuzzing). Its
/// project's lock is the entry `charter.lock`, when it has one; without it, MCP tools are
/// not checked against a lock.
#[derive(Clone, Debug, Default)]
pub struct MemoryLoader {
    pub files: std::collections::BTreeMap<String, String>,
}

impl Loader for MemoryLoader {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        self.files
            .get(relative_path)
            .map(|text| LoadedFile {
                display_name: relative_path.to_string(),
                text: text.clone(),
            })
            .ok_or_else(|| format!("no such file `{relative_path}`"))
    }

    fn load_lock(&self) -> LockFile {
        match self.files.get(lock::LOCK_FILE) {
            Some(text) => LockFile::Found(LoadedFile {
                display_name: lock::LOCK_FILE.to_string(),
                text: text.clone(),
            }),
            None => LockFile::NotChecked,
        }
    }
}

/// The result of compiling one spec: every diagnostic, sorted by position, the sources
/// they point into, and the compiled graph when there was no error.
#[derive(Debug)]
pub struct Compilation {
    pub sources: Sources,
    pub diagnostics: Vec<Diagnostic>,
    pub spec: Option<CompiledSpec>,
    /// The project's `charter.lock` as the checks read it: only for a spec that declares an
    /// `mcp` server (even one with syntax errors), when the loader found a lock that could
    /// be read.
    pub lock: Option<lock::Lock>,
}

impl Compilation {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// The milliseconds of a duration written as the language writes it (`250ms`, `20m`,
/// `4m50s`): one syntax for specs, cassettes and the console. The error says what is wrong
/// and how durations are written.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    syntax::literals::duration_millis(text).map_err(|error| match error.help {
        Some(help) => format!("{}; {help}", error.message),
        None => error.message,
    })
}

/// Compiles the spec `text`, shown in diagnostics as `name`.
pub fn compile(name: &str, text: &str, loader: &dyn Loader) -> Compilation {
    compile_with_syntax(name, text, loader).0
}

/// [`compile`], also returning the syntax tree the parser built (what it could build of a
/// file with syntax errors; `None` when not even the header could be read), for tools
/// that answer questions about the text, such as an editor's language server.
pub fn compile_with_syntax(
    name: &str,
    text: &str,
    loader: &dyn Loader,
) -> (Compilation, Option<syntax::ast::SpecFile>) {
    let mut sources = Sources::new();
    let spec_file = sources.add(name, text);
    let (ast, mut diagnostics) = syntax::parse(spec_file, &mut sources, loader);
    let mut compiled = None;
    // Only a spec that declares an MCP server reads the lock; one with a syntax error too,
    // so the language service knows the servers' tools while a name is half typed.
    let project_lock = match ast.as_ref() {
        Some(ast) if check::lock::declares_servers(ast) => {
            check::lock::ProjectLock::read(loader.load_lock(), &mut sources)
        }
        _ => check::lock::ProjectLock::NotChecked,
    };
    // Checks run only on a file that parsed cleanly: an item the parser had to skip (or a
    // role file it could not read) would otherwise show up again as unknown names.
    let parsed_cleanly = !diagnostics.iter().any(Diagnostic::is_error);
    if let Some(ast) = ast.as_ref().filter(|_| parsed_cleanly) {
        let (checked, check_diagnostics) = check::check_with_lock(ast, &sources, &project_lock);
        diagnostics.extend(check_diagnostics);
        if !diagnostics.iter().any(Diagnostic::is_error) {
            match graph::build(ast, &checked, &sources) {
                Ok(spec) => {
                    diagnostics.extend(bounds::diagnostics(&spec));
                    compiled = Some(spec);
                }
                Err(internal) => diagnostics.push(internal.into_diagnostic(ast.name.span)),
            }
        }
    }
    diagnostics::sort(&mut diagnostics);
    let compilation = Compilation {
        sources,
        diagnostics,
        spec: compiled,
        lock: project_lock.into_lock(),
    };
    (compilation, ast)
}
