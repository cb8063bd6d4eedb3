//! The spec corpus on disk: finding the workspace and its `specs/`, and a file-system
//! [`Loader`] that resolves a spec's `import`/`file(...)` paths against its directory and
//! finds a case's `charter.lock` in its folder (as `compiler/tests/invalid.rs` does).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use charter_compiler::lock::LOCK_FILE;
use charter_compiler::{LoadedFile, Loader, LockFile, MemoryLoader};

/// The workspace root: the parent of this crate's manifest directory.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map_or_else(|| manifest.to_path_buf(), Path::to_path_buf)
}

/// Every `*.charter` file under `dir`, recursively, sorted by path. A missing directory
/// gives an empty list.
pub fn find_specs(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    collect_specs(dir, &mut found);
    found.sort();
    found
}

fn collect_specs(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // Symbolic links to directories are not followed (no cycles).
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir());
        if is_dir {
            collect_specs(&path, found);
        } else if path
            .extension()
            .is_some_and(|extension| extension == "charter")
        {
            found.push(path);
        }
    }
}

/// `path` relative to `base` with `/` separators, for display and filtering.
pub fn display_path(path: &Path, base: &Path) -> String {
    let relative = path.strip_prefix(base).unwrap_or(path);
    relative
        .components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Reads the files a spec names from disk, relative to the spec's directory, and keeps
/// what it read so repeated compilations (the benchmark) do not time the disk and the fuzz
/// harness can turn it into a [`MemoryLoader`].
#[derive(Debug)]
pub struct FsLoader {
    /// The spec's directory on disk.
    dir: PathBuf,
    /// The spec's directory as shown in diagnostics (e.g. `specs/seeds`).
    display_dir: String,
    /// The case's `charter.lock` on disk and as shown, when its folder holds one: the
    /// folder named after the spec beside it, or the case folder the spec is in.
    lock: Option<(PathBuf, String)>,
    cache: RefCell<BTreeMap<String, Result<LoadedFile, String>>>,
}

impl FsLoader {
    /// A loader for the spec at `spec_path`, whose diagnostics name it `spec_display`.
    pub fn for_spec(spec_path: &Path, spec_display: &str) -> FsLoader {
        let dir = spec_path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let display_dir = spec_display
            .rsplit_once('/')
            .map_or_else(String::new, |(dir, _)| dir.to_string());
        let stem = |path: &Path| path.file_stem().map(|stem| stem.to_os_string());
        let support = spec_path.with_extension("");
        let own_folder = Some(dir.as_path()).filter(|folder| {
            stem(folder) == stem(spec_path) || stem(spec_path).is_some_and(|stem| stem == "main")
        });
        let lock = [Some(support.as_path()), own_folder]
            .into_iter()
            .flatten()
            .map(|folder| folder.join(LOCK_FILE))
            .find(|lock| lock.is_file())
            .map(|path| {
                let shown = path
                    .strip_prefix(&dir)
                    .map(|below| normalize(&Path::new(&display_dir).join(below)))
                    .unwrap_or_else(|_| path.display().to_string());
                (path, shown)
            });
        FsLoader {
            dir,
            display_dir,
            lock,
            cache: RefCell::new(BTreeMap::new()),
        }
    }

    /// The files read successfully so far, keyed by the relative path the spec wrote (the
    /// lock, when read, as `charter.lock`, where a [`MemoryLoader`] finds it).
    pub fn to_memory_loader(&self) -> MemoryLoader {
        let files = self
            .cache
            .borrow()
            .iter()
            .filter_map(|(path, loaded)| {
                loaded
                    .as_ref()
                    .ok()
                    .map(|file| (path.clone(), file.text.clone()))
            })
            .collect();
        MemoryLoader { files }
    }

    /// Reads like `charter check` does (cli/src/loader.rs): absolute paths are refused and
    /// display names are normalized, so verify prints the diagnostics a user would see.
    fn read(&self, relative_path: &str) -> Result<LoadedFile, String> {
        let relative = Path::new(relative_path);
        if relative.is_absolute() || relative.has_root() {
            return Err(format!(
                "`{relative_path}` is an absolute path; paths are relative to the spec file"
            ));
        }
        let path = self.dir.join(relative);
        let display_name = normalize(&Path::new(&self.display_dir).join(relative));
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(LoadedFile { display_name, text }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Err(format!("no such file `{display_name}`"))
            }
            Err(error) => Err(format!("cannot read `{display_name}`: {error}")),
        }
    }
}

/// Resolves `.` and `..` without touching the file system and joins with `/`; a `..` that
/// climbs above the start of a relative path is kept.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.last().is_some_and(|last| last != "..") {
                    parts.pop();
                } else {
                    parts.push("..".to_string());
                }
            }
            other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
        }
    }
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

impl Loader for FsLoader {
    fn load(&self, relative_path: &str) -> Result<LoadedFile, String> {
        if let Some(cached) = self.cache.borrow().get(relative_path) {
            return cached.clone();
        }
        let loaded = self.read(relative_path);
        self.cache
            .borrow_mut()
            .insert(relative_path.to_string(), loaded.clone());
        loaded
    }

    fn load_lock(&self) -> LockFile {
        let Some((path, display_name)) = &self.lock else {
            return LockFile::NotChecked;
        };
        let read = match std::fs::read_to_string(path) {
            Ok(text) => Ok(LoadedFile {
                display_name: display_name.clone(),
                text,
            }),
            Err(error) => Err(format!("cannot read `{display_name}`: {error}")),
        };
        self.cache
            .borrow_mut()
            .insert(LOCK_FILE.to_string(), read.clone());
        match read {
            Ok(loaded) => LockFile::Found(loaded),
            Err(reason) => LockFile::Unreadable {
                display_name: display_name.clone(),
                reason,
            },
        }
    }
}

/// One spec of the corpus in memory: its display path, text, and the files it reads.
#[derive(Clone, Debug)]
pub struct CorpusSpec {
    pub name: String,
    pub text: String,
    pub loader: MemoryLoader,
}

/// Loads every spec under `specs_dir` (including the compile-fail cases: they are good
/// mutation material) with the files each one reads, learnt by compiling it once.
pub fn load_corpus(specs_dir: &Path, root: &Path) -> Vec<CorpusSpec> {
    find_specs(specs_dir)
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let name = display_path(&path, root);
            let loader = FsLoader::for_spec(&path, &name);
            // A spec that panics the compiler still joins the corpus; the harness reports it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                charter_compiler::compile(&name, &text, &loader)
            }));
            Some(CorpusSpec {
                name,
                text,
                loader: loader.to_memory_loader(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_loader_resolves_against_the_spec_directory() {
        let root = workspace_root();
        let spec = root.join("xtask").join("Cargo.toml");
        let loader = FsLoader::for_spec(&spec, "xtask/Cargo.toml");
        let loaded = loader.load("src/rng.rs").expect("xtask/src/rng.rs exists");
        assert_eq!(loaded.display_name, "xtask/src/rng.rs");
        assert!(loaded.text.starts_with("//!"));
        assert!(loader.load("no/such/file").is_err());
        assert!(loader.load("/etc/hostname").is_err());
        assert_eq!(
            loader
                .load("../xtask/src/rng.rs")
                .map(|file| file.display_name),
            Ok("xtask/src/rng.rs".to_string())
        );
        assert_eq!(loader.to_memory_loader().files.len(), 2);
    }

    #[test]
    fn display_paths_use_forward_slashes() {
        let root = Path::new("/repo");
        assert_eq!(
            display_path(Path::new("/repo/specs/seeds/a.charter"), root),
            "specs/seeds/a.charter"
        );
    }
}
