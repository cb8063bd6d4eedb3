//! Reading specs from disk: the filesystem `Loader` the compiler reads imports, prompt
//! files and the project's `charter.lock` through, and the collection of `.charter` files
//! from the paths a user gives.

use std::path::{Component, Path, PathBuf};

use charter_compiler::lock::LOCK_FILE;
use charter_compiler::{CompiledSpec, LoadedFile, Loader, LockFile, compile, render};
use charter_runtime::world::files;

use crate::terminal::{Context, print_err, print_error};

/// The extension of spec files.
pub const SPEC_EXTENSION: &str = "charter";

/// Reads files relative to one spec file's directory. Display names are that directory
/// as the user wrote it joined with the relative path, normalized (`a/b/../c` -> `a/c`),
/// so diagnostics point at paths the user can open.
///
/// Files are read only inside the spec's project root ([`project_root`]), after
/// following symlinks, and only regular files within the size limit; the reason a file
/// is refused quotes nothing of it. The project's lock is `charter.lock` at that root,
/// shown the same way (`specs/x.charter` run from the root shows `charter.lock`).
#[derive(Debug)]
pub struct FsLoader {
    directory: PathBuf,
    root: PathBuf,
    /// Whether the spec's MCP tools are checked against the project's `charter.lock`.
    checks_lock: bool,
}

impl FsLoader {
    /// A loader for the files named by the spec at `spec_path`.
    pub fn for_spec(spec_path: &Path) -> FsLoader {
        FsLoader {
            directory: spec_path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            root: project_root(spec_path),
            checks_lock: true,
        }
    }

    /// The same loader, reading no lock: for `charter lock`, which writes it.
    pub fn without_lock(self) -> FsLoader {
        FsLoader {
            checks_lock: false,
            ..self
        }
    }

    /// `charter.lock` at the project root, as the spec's directory was written joined with
    /// the way up to the root.
    fn lock_display_name(&self) -> String {
        let directory = if self.directory.as_os_str().is_empty() {
            Path::new(".")
        } else {
            self.directory.as_path()
        };
        let absolute = std::path::absolute(directory).unwrap_or_else(|_| directory.to_path_buf());
        match absolute.strip_prefix(&self.root) {
            Ok(below) => {
                let mut path = directory.to_path_buf();
                for _ in below.components() {
                    path.push("..");
                }
                path.push(LOCK_FILE);
                display_path(&normalize(&path))
            }
            Err(_) => display_path(&self.root.join(LOCK_FILE)),
        }
    }
}

/// The project root of the spec at `spec_path`: see [`project_root_above`], from the
/// spec's directory.
pub fn project_root(spec_path: &Path) -> PathBuf {
    let absolute = std::path::absolute(spec_path).unwrap_or_else(|_| spec_path.to_path_buf());
    project_root_above(absolute.parent().unwrap_or(Path::new("/")))
}

/// The project root for files found in `directory`, which files they name must resolve
/// inside: the nearest ancestor (or `directory` itself) that holds a `specs/` directory,
/// else the nearest that holds `golden/`, else `directory` (a lone spec).
pub fn project_root_above(directory: &Path) -> PathBuf {
    let directory = std::path::absolute(directory).unwrap_or_else(|_| directory.to_path_buf());
    let holding = |name: &str| {
        directory
            .ancestors()
            .find(|ancestor| ancestor.join(name).is_dir())
            .map(Path::to_path_buf)
    };
    holding("specs")
        .or_else(|| holding("golden"))
        .unwrap_or(directory)
}

impl Loader for FsLoader {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        let relative = Path::new(relative_path);
        if relative.is_absolute() || relative.has_root() {
            return Err(format!("`{relative_path}` is an absolute path"));
        }
        let path = self.directory.join(relative);
        let display_name = display_path(&normalize(&path));
        match read_text_in(&path, &display_name, Some(&self.root)) {
            Ok(text) => Ok(LoadedFile { display_name, text }),
            Err(ReadError::Missing) => Err(format!("no such file `{display_name}`")),
            Err(ReadError::Other(message)) => Err(message),
        }
    }

    fn load_lock(&self) -> LockFile {
        if !self.checks_lock {
            return LockFile::NotChecked;
        }
        let display_name = self.lock_display_name();
        match read_text_in(&self.root.join(LOCK_FILE), &display_name, Some(&self.root)) {
            Ok(text) => LockFile::Found(LoadedFile { display_name, text }),
            Err(ReadError::Missing) => LockFile::Missing { display_name },
            Err(ReadError::Other(reason)) => LockFile::Unreadable {
                display_name,
                reason,
            },
        }
    }
}

/// Compiles the spec `text` (read from `path`, shown as `name`) for a command that needs
/// it whole. On errors, prints the diagnostics and `` `name` has errors; nothing was
/// {what} ``, and returns `None`.
pub fn compile_whole(
    context: Context,
    name: &str,
    text: &str,
    path: &Path,
    what: &str,
) -> Option<CompiledSpec> {
    compile_whole_with(context, name, text, &FsLoader::for_spec(path), what)
}

/// [`compile_whole`], reading the files the spec names through `loader`.
pub fn compile_whole_with(
    context: Context,
    name: &str,
    text: &str,
    loader: &dyn Loader,
    what: &str,
) -> Option<CompiledSpec> {
    let compilation = compile(name, text, loader);
    if compilation.has_errors() || compilation.spec.is_none() {
        print_err(&render::text(
            &compilation.diagnostics,
            &compilation.sources,
            context.color,
        ));
        print_error(context, &format!("`{name}` has errors; nothing was {what}"));
        return None;
    }
    compilation.spec
}

/// Why a file could not be read as text.
#[derive(Debug)]
pub enum ReadError {
    /// There is nothing at the path.
    Missing,
    /// Anything else, as a one-line message that names the file.
    Other(String),
}

/// Reads a UTF-8 text file, with messages that say what is wrong and name the file as
/// `shown`: a directory, bytes that are not UTF-8 (with the line and column of the first),
/// or the system's reason.
///
/// Only regular files within [`files::MAX_SOURCE_BYTES`] are read.
pub fn read_text(path: &Path, shown: &str) -> Result<String, ReadError> {
    read_text_in(path, shown, None)
}

/// [`read_text`], and when `root` is given, only a file whose path, as written, lies inside
/// it (symbolic links are followed: they are the user's own).
pub fn read_text_in(path: &Path, shown: &str, root: Option<&Path>) -> Result<String, ReadError> {
    let bytes = match files::read_source(path, root, files::MAX_SOURCE_BYTES) {
        Ok(bytes) => bytes,
        Err(files::SourceError::Missing) => return Err(ReadError::Missing),
        Err(error) => {
            let root_shown = root.map(display_path).unwrap_or_default();
            return Err(ReadError::Other(error.message(shown, &root_shown)));
        }
    };
    String::from_utf8(bytes).map_err(|error| {
        let valid = error.as_bytes().get(..error.utf8_error().valid_up_to());
        let before = valid.map(String::from_utf8_lossy).unwrap_or_default();
        let line = before.matches('\n').count() + 1;
        let column = before
            .rsplit('\n')
            .next()
            .map_or(0, |last| last.chars().count())
            + 1;
        ReadError::Other(format!(
            "`{shown}` is not UTF-8 text (the first bad byte is at {line}:{column}); \
             save it as UTF-8"
        ))
    })
}

/// Resolves `.` and `..` components without touching the filesystem; a `..` that climbs
/// above the start of a relative path is kept.
pub fn normalize(path: &Path) -> PathBuf {
    let mut normalized = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                let can_pop = matches!(
                    normalized.components().next_back(),
                    Some(Component::Normal(_))
                );
                if can_pop {
                    normalized.pop();
                } else if !matches!(
                    normalized.components().next_back(),
                    Some(Component::RootDir | Component::Prefix(_))
                ) {
                    normalized.push("..");
                }
            }
            other => normalized.push(other.as_os_str()),
        }
    }
    if normalized.as_os_str().is_empty() {
        normalized.push(".");
    }
    normalized
}

/// A path as shown to the user, with `/` separators on every platform.
pub fn display_path(path: &Path) -> String {
    let shown = path.display().to_string();
    if std::path::MAIN_SEPARATOR == '/' {
        shown
    } else {
        shown.replace(std::path::MAIN_SEPARATOR, "/")
    }
}

/// The specs of the project in the current directory, as `charter verify` compiles them:
/// those under `specs/` but the compile-fail cases in `specs/invalid/`; or, in a directory
/// with no `specs/`, every spec under it.
pub fn project_specs() -> Result<Vec<PathBuf>, Vec<String>> {
    let specs_dir = Path::new("specs");
    if !specs_dir.is_dir() {
        return collect_specs(&[PathBuf::from(".")]);
    }
    let invalid = specs_dir.join("invalid");
    let specs: Vec<PathBuf> = collect_specs(&[specs_dir.to_path_buf()])?
        .into_iter()
        .filter(|spec| !spec.starts_with(&invalid))
        .collect();
    if specs.is_empty() {
        return Err(vec![
            "no `.charter` files found in `specs` but the compile-fail cases of `specs/invalid`"
                .to_string(),
        ]);
    }
    Ok(specs)
}

/// The spec files named by `paths`: files as given (they must end in `.charter`), and
/// every `*.charter` file under a directory, recursively, in sorted order. Each file is
/// listed once, at its first mention. Problems (a missing path, a file of another kind,
/// a directory with no spec) are returned all together, one line each.
pub fn collect_specs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Vec<String>> {
    let mut specs = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        let shown = display_path(path);
        match std::fs::metadata(path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                problems.push(format!("`{shown}` does not exist"));
            }
            Err(error) => problems.push(format!("cannot read `{shown}`: {error}")),
            Ok(metadata) if metadata.is_dir() => {
                let before = specs.len();
                if let Err(error) = walk(path, &mut specs) {
                    problems.push(format!("cannot read directory `{shown}`: {error}"));
                } else if specs.len() == before {
                    problems.push(format!("no `.{SPEC_EXTENSION}` files found in `{shown}`"));
                }
            }
            Ok(_) if is_spec(path) => specs.push(path.clone()),
            Ok(_) => problems.push(format!("`{shown}` is not a `.{SPEC_EXTENSION}` file")),
        }
    }
    // The same file under two spellings (`a.charter`, `./a.charter`, an absolute path, a
    // symbolic link) is one spec.
    let mut seen = std::collections::BTreeSet::new();
    specs.retain(|spec| {
        seen.insert(std::fs::canonicalize(spec).unwrap_or_else(|_| normalize(spec)))
    });
    if problems.is_empty() {
        Ok(specs)
    } else {
        Err(problems)
    }
}

fn is_spec(path: &Path) -> bool {
    path.extension()
        .is_some_and(|extension| extension == SPEC_EXTENSION)
}

/// Adds every spec file under `directory`, depth first in sorted order. Symbolic links
/// to directories are not followed (no cycles); links to files are.
fn walk(directory: &Path, specs: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries = std::fs::read_dir(directory)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    entries.sort();
    for entry in entries {
        let link = std::fs::symlink_metadata(&entry)?;
        if link.is_dir() {
            walk(&entry, specs)?;
        } else if is_spec(&entry) && std::fs::metadata(&entry).is_ok_and(|meta| meta.is_file()) {
            specs.push(entry);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_dots_lexically() {
        let cases = [
            ("specs/seeds/./prompts/p.md", "specs/seeds/prompts/p.md"),
            ("specs/seeds/../shared/p.md", "specs/shared/p.md"),
            ("../p.md", "../p.md"),
            ("a/../../p.md", "../p.md"),
            ("a/..", "."),
            ("/a/../../p.md", "/p.md"),
        ];
        for (input, expected) in cases {
            assert_eq!(
                display_path(&normalize(Path::new(input))),
                expected,
                "{input}"
            );
        }
    }

    #[test]
    fn loader_refuses_absolute_paths() {
        let loader = FsLoader::for_spec(Path::new("specs/x.charter"));
        let error = loader.load("/etc/hosts").err().unwrap_or_default();
        assert!(error.contains("absolute path"), "{error}");
    }

    #[test]
    fn read_text_names_the_first_byte_that_is_not_utf8() {
        let directory = std::env::temp_dir().join(format!("charter-loader-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&directory);
        let path = directory.join("bad.charter");
        let _ = std::fs::write(&path, b"spec x\nab\xffc");
        let error = match read_text(&path, "bad.charter") {
            Err(ReadError::Other(message)) => message,
            other => format!("{other:?}"),
        };
        let _ = std::fs::remove_dir_all(&directory);
        assert_eq!(
            error,
            "`bad.charter` is not UTF-8 text (the first bad byte is at 2:3); save it as UTF-8"
        );
    }

    #[test]
    fn the_lock_is_shown_from_the_spec_directory_up_to_the_project_root() {
        let directory =
            std::env::temp_dir().join(format!("charter-lock-name-{}", std::process::id()));
        let _ = std::fs::create_dir_all(directory.join("specs/deep"));
        let spec = directory.join("specs/deep/x.charter");
        let loader = FsLoader::for_spec(&spec);
        let expected = display_path(&directory.join("charter.lock"));
        assert_eq!(
            loader.load_lock(),
            LockFile::Missing {
                display_name: expected.clone()
            }
        );
        let _ = std::fs::write(directory.join("charter.lock"), "version: 1\n");
        match loader.load_lock() {
            LockFile::Found(found) => {
                assert_eq!(found.display_name, expected);
                assert_eq!(found.text, "version: 1\n");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            FsLoader::for_spec(&spec).without_lock().load_lock(),
            LockFile::NotChecked
        );
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn loader_names_missing_files_from_the_spec_directory() {
        let loader = FsLoader::for_spec(Path::new("no/such/dir/x.charter"));
        let error = loader.load("../prompts/p.md").err().unwrap_or_default();
        assert_eq!(error, "no such file `no/such/prompts/p.md`");
    }
}
