//! What several CLI test binaries share: the repository's root, and copying its seed files into a test project.

use std::path::{Path, PathBuf};

/// The repository's root (the seeds and goldens are copied from there).
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Copies one file, making its parent directories.
pub fn copy_file(from: &Path, to: &Path) {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|error| panic!("{error}"));
    }
    std::fs::copy(from, to).unwrap_or_else(|error| panic!("{}: {error}", from.display()));
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|error| panic!("{error}"));
    let entries = std::fs::read_dir(from).unwrap_or_else(|error| panic!("{error}"));
    for entry in entries.flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            copy_file(&path, &target);
        }
    }
}
