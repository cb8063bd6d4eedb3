//! The spec corpus as tests: every compile-fail case in `specs/invalid/` against its
//! diagnostics snapshot, and every other spec under `specs/` compiling clean.
//!
//! What counts as a compile-fail case (the rule this test enforces):
//! - a file `specs/invalid/<case>.charter`: the case is `<case>`, and files it names are
//!   read relative to `specs/invalid/`, as `charter check` would; its role and prompt files
//!   live in a folder of the same name (`import role "<case>/roles/x.md"`);
//! - a folder `specs/invalid/<case>/` with no `<case>.charter` beside it is a
//!   self-contained case: its spec is `<case>/<case>.charter`, or `<case>/main.charter`
//!   when that does not exist, and files it names are read relative to the folder. A
//!   folder that is neither a case's support folder nor a case is an error.
//!   The folder `specs/invalid/snapshots/` holds the snapshots and is not a case.
//! - a case that declares `mcp` servers is checked against the `charter.lock` in its folder
//!   (the case's own folder, or the support folder named after it), as `charter check`
//!   checks a project against the lock at its root; without one, its MCP tools are checked
//!   only against the spec's allow-lists (the compiler's default, a loader that knows no
//!   project). A warning case (`specs/warnings/<case>.charter`) finds its lock the same
//!   way, in `specs/warnings/<case>/`.
//!
//! Each case must yield at least one error, and its name must start with the lower-case
//! code of its first error (`e006_unbounded_retry_loop`), except
//! `three_independent_errors`, which must yield exactly three errors. Its snapshot
//! (`specs/invalid/snapshots/<case>.snap`) holds the spec's source with line numbers, then
//! the diagnostics rendered as text without colour. `cargo insta review` updates them.
//!
//! Specs outside `specs/invalid/` must compile with no diagnostic at all, except those in
//! `specs/warnings/`, which must yield exactly one diagnostic: the warning whose code
//! starts the file name (`w004_tools_without_limit.charter`). Each warning case has a
//! snapshot too (`specs/warnings/snapshots/<case>.snap`, the same layout).

// Tests may read the fixture corpus; the compiler itself does no I/O (clippy.toml).
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

use charter_compiler::lock::LOCK_FILE;
use charter_compiler::{Code, Compilation, LoadedFile, Loader, LockFile, compile, render};

/// The case that shows the compiler reports every error, not just the first.
const THREE_ERRORS_CASE: &str = "three_independent_errors";

#[test]
fn invalid_specs_match_their_snapshots() {
    let root = repository_root();
    let invalid = root.join("specs").join("invalid");
    if !invalid.is_dir() {
        return; // No corpus in this checkout yet; `specs_outside_invalid_compile_clean` still runs.
    }
    let cases = invalid_cases(&invalid);
    assert!(!cases.is_empty(), "specs/invalid/ holds no case");

    let mut failures = Vec::new();
    for case in &cases {
        let compilation = compile_file(&root, &case.spec, &case.directory);
        if let Err(problem) = check_expectations(case, &compilation) {
            failures.push(format!("{}: {problem}", case.name));
        }
        let snapshot = snapshot_text(&root, &case.spec, &compilation);
        let name = case.name.clone();
        let outcome = std::panic::catch_unwind(move || {
            insta::with_settings!({
                snapshot_path => "../../specs/invalid/snapshots",
                prepend_module_to_snapshot => false,
                omit_expression => true,
            }, {
                insta::assert_snapshot!(name, snapshot);
            });
        });
        if outcome.is_err() {
            let snapshot = invalid
                .join("snapshots")
                .join(format!("{}.snap", case.name));
            failures.push(if snapshot.is_file() {
                format!("{}: diagnostics differ from the snapshot", case.name)
            } else {
                format!(
                    "{}: no snapshot yet; accept it with `cargo insta review`",
                    case.name
                )
            });
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}

#[test]
fn warning_specs_match_their_snapshots() {
    let root = repository_root();
    let warnings = root.join("specs").join("warnings");
    if !warnings.is_dir() {
        return;
    }
    let mut failures = Vec::new();
    for file in sorted_entries(&warnings) {
        if file
            .extension()
            .is_none_or(|extension| extension != "charter")
        {
            continue;
        }
        let compilation = compile_file(&root, &file, &warnings);
        let snapshot = snapshot_text(&root, &file, &compilation);
        let name = stem(&file);
        let outcome = std::panic::catch_unwind(move || {
            insta::with_settings!({
                snapshot_path => "../../specs/warnings/snapshots",
                prepend_module_to_snapshot => false,
                omit_expression => true,
            }, {
                insta::assert_snapshot!(name, snapshot);
            });
        });
        if outcome.is_err() {
            failures.push(format!(
                "{}: diagnostics differ from the snapshot (or it has none yet); review with `cargo insta review`",
                relative(&root, &file)
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}

#[test]
fn specs_outside_invalid_compile_clean() {
    let root = repository_root();
    let specs = root.join("specs");
    if !specs.is_dir() {
        return;
    }
    let mut files = Vec::new();
    collect_charter_files(&specs, &mut files, &|directory| {
        directory.file_name().is_some_and(|name| name == "invalid")
    });

    let mut failures = Vec::new();
    for file in &files {
        let directory = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let compilation = compile_file(&root, file, &directory);
        let in_warnings = file
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|name| name == "warnings");
        let codes: Vec<Code> = compilation.diagnostics.iter().map(|d| d.code).collect();
        let expected: Vec<Code> = if in_warnings {
            match code_prefix(&stem(file)) {
                Some(code) if code.as_str().starts_with('W') => vec![code],
                _ => {
                    failures.push(format!(
                        "{}: a file in specs/warnings/ must be named after its warning (w004_...)",
                        relative(&root, file)
                    ));
                    continue;
                }
            }
        } else {
            Vec::new()
        };
        if codes != expected {
            failures.push(format!(
                "{}: expected {expected:?}, got:\n{}",
                relative(&root, file),
                render::text(&compilation.diagnostics, &compilation.sources, false)
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}

/// One compile-fail case: its name, its spec file and the directory its files are read from.
#[derive(Debug)]
struct Case {
    name: String,
    spec: PathBuf,
    directory: PathBuf,
}

/// The cases under `invalid`, by the rule in this file's header, sorted by name.
fn invalid_cases(invalid: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    for entry in sorted_entries(invalid) {
        let name = stem(&entry);
        if entry.is_dir() {
            let support_folder = invalid.join(format!("{name}.charter")).is_file();
            if name == "snapshots" || support_folder {
                continue;
            }
            let named = entry.join(format!("{name}.charter"));
            let main = entry.join("main.charter");
            let spec = if named.is_file() { named } else { main };
            assert!(
                spec.is_file(),
                "folder {} is no case's support folder and has neither {name}.charter nor main.charter",
                entry.display()
            );
            cases.push(Case {
                name,
                spec,
                directory: entry,
            });
        } else if entry
            .extension()
            .is_some_and(|extension| extension == "charter")
        {
            cases.push(Case {
                name,
                spec: entry,
                directory: invalid.to_path_buf(),
            });
        }
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    cases
}

/// Checks a case's diagnostics against what its name promises.
fn check_expectations(case: &Case, compilation: &Compilation) -> Result<(), String> {
    let errors: Vec<Code> = compilation
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.is_error())
        .map(|diagnostic| diagnostic.code)
        .collect();
    if case.name == THREE_ERRORS_CASE {
        return match errors.len() {
            3 => Ok(()),
            count => Err(format!(
                "expected exactly 3 errors, got {count}: {errors:?}"
            )),
        };
    }
    let Some(first) = errors.first() else {
        return Err("expected at least one error, got none".to_string());
    };
    let prefix = format!("{}_", first.as_str().to_ascii_lowercase());
    if case.name.starts_with(&prefix) {
        Ok(())
    } else {
        Err(format!(
            "the first error is {first}, so the case name must start with `{prefix}`"
        ))
    }
}

/// The snapshot: the spec's source with line numbers, then its rendered diagnostics.
fn snapshot_text(root: &Path, spec: &Path, compilation: &Compilation) -> String {
    let source = compilation
        .sources
        .get(charter_compiler::FileId(0))
        .map(|file| file.text.as_str())
        .unwrap_or_default();
    let width = source.lines().count().max(1).to_string().len();
    let mut text = format!("{}\n", relative(root, spec));
    for (index, line) in source.lines().enumerate() {
        let number = index + 1;
        text.push_str(format!("{number:>width$} | {line}").trim_end());
        text.push('\n');
    }
    text.push_str("\n---- diagnostics ----\n\n");
    text.push_str(&render::text(
        &compilation.diagnostics,
        &compilation.sources,
        false,
    ));
    text
}

/// Compiles `spec`, shown by its path relative to the repository root, reading the files
/// it names from `directory` and its lock from its case's folder (this file's header).
fn compile_file(root: &Path, spec: &Path, directory: &Path) -> Compilation {
    let text = std::fs::read_to_string(spec)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", spec.display()));
    // The support folder named after the spec, or the case folder the spec is in.
    let support = spec.with_extension("");
    let own_folder = spec
        .parent()
        .filter(|parent| stem(parent) == stem(spec) || stem(spec) == "main");
    let lock = [Some(support.as_path()), own_folder]
        .into_iter()
        .flatten()
        .map(|folder| folder.join(LOCK_FILE))
        .find(|lock| lock.is_file());
    let loader = DirectoryLoader {
        directory: directory.to_path_buf(),
        root: root.to_path_buf(),
        lock,
    };
    compile(&relative(root, spec), &text, &loader)
}

/// Reads files relative to a directory; display names are relative to the repository.
struct DirectoryLoader {
    directory: PathBuf,
    root: PathBuf,
    /// The case's `charter.lock`, when its folder holds one.
    lock: Option<PathBuf>,
}

impl Loader for DirectoryLoader {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        let path = self.directory.join(relative_path);
        let display_name = relative(&self.root, &path);
        std::fs::read_to_string(&path)
            .map(|text| LoadedFile {
                display_name: display_name.clone(),
                text,
            })
            .map_err(|_| format!("no such file `{display_name}`"))
    }

    fn load_lock(&self) -> LockFile {
        let Some(path) = &self.lock else {
            return LockFile::NotChecked;
        };
        let display_name = relative(&self.root, path);
        match std::fs::read_to_string(path) {
            Ok(text) => LockFile::Found(LoadedFile { display_name, text }),
            Err(error) => LockFile::Unreadable {
                reason: format!("cannot read `{display_name}`: {error}"),
                display_name,
            },
        }
    }
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// `path` relative to `root`, with `/` separators and `.`/`..` resolved.
fn relative(root: &Path, path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    let shown = path.strip_prefix(root).unwrap_or(path);
    for component in shown.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir if parts.last().is_some_and(|p| p != "..") => {
                parts.pop();
            }
            other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
        }
    }
    parts.join("/")
}

fn sorted_entries(directory: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(directory)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", directory.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    entries.sort();
    entries
}

/// Every `*.charter` file under `directory`, sorted, skipping directories `skip` selects.
fn collect_charter_files(directory: &Path, files: &mut Vec<PathBuf>, skip: &dyn Fn(&Path) -> bool) {
    for entry in sorted_entries(directory) {
        if entry.is_dir() {
            if !skip(&entry) {
                collect_charter_files(&entry, files, skip);
            }
        } else if entry
            .extension()
            .is_some_and(|extension| extension == "charter")
        {
            files.push(entry);
        }
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The code a file name starts with: `w004_tools_without_limit` -> W004.
fn code_prefix(name: &str) -> Option<Code> {
    Code::parse(name.split('_').next()?)
}
