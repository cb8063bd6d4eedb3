//! The one way the tool writes files (DESIGN §15): atomic replacement through an exclusive temporary file with an unpredictable name, appends and creations that never follow a symlink, and reads of regular files with a size limit.
//!
//! Every writer — traces, journals, deliveries, recordings, snapshots, run files — goes
//! through this module, so the rules hold everywhere:
//!
//! - a temporary file is created with `O_EXCL` under a random name next to its target
//!   (a link planted at a guessed name cannot redirect the write), then synced and renamed
//!   over the target (a rename replaces a link, never writes through it);
//! - an existing symlink at the target is an error ([`symlink_in_the_way`]), for atomic
//!   writes and for files opened to append or truncate (`O_NOFOLLOW`, which also refuses a
//!   dangling link that would create a file elsewhere);
//! - a file a spec or scenario names is read only inside the project root, after
//!   following symlinks, and only if it is a regular file within a size limit
//!   ([`read_source`]); the errors say why without quoting the file;
//! - a JSON-lines file ([`LineFile`]) gets each line whole or not at all: a write that
//!   fails part way (a full disk) is cut back, so no partial last line is left.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// `O_NOFOLLOW`: opening a path whose last component is a symlink fails (`ELOOP`).
fn no_follow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits().cast_signed()
}

/// The error for a symlink where a file is to be written.
pub fn symlink_in_the_way(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is a symbolic link; it is not written through",
            path.display()
        ),
    )
}

/// An `ELOOP` from an `O_NOFOLLOW` open as the error that says why.
fn explain(path: &Path, error: io::Error) -> io::Error {
    if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        symlink_in_the_way(path)
    } else {
        error
    }
}

/// Fails when `path` is a symlink (dangling or not).
fn refuse_symlink(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_symlink() => Err(symlink_in_the_way(path)),
        _ => Ok(()),
    }
}

/// Replaces `path` with `bytes` atomically: an exclusive temporary file with a random
/// name in the same directory, written and synced, then renamed over `path`. A symlink at
/// `path` is an error; a reader sees the old file or the new one, never half of one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    refuse_symlink(path)?;
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut temporary = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .rand_bytes(12)
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(directory)?;
    temporary.write_all(bytes)?;
    temporary.as_file().sync_all()?;
    // The temporary file is removed if the rename fails (dropped with the error).
    temporary
        .persist(path)
        .map(drop)
        .map_err(|error| error.error)
}

/// Creates a new directory in `parent` (created if needed) named `<prefix><random>`,
/// exclusively: two processes started in the same millisecond never share one.
pub fn create_unique_dir(parent: &Path, prefix: &str) -> io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(parent)?;
    let directory = tempfile::Builder::new()
        .prefix(prefix)
        .rand_bytes(8)
        .permissions(std::fs::Permissions::from_mode(0o755))
        .tempdir_in(parent)?;
    Ok(directory.keep())
}

/// Opens `path` to append to it (and to read it), created if missing; a symlink at
/// `path` is an error.
pub fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .custom_flags(no_follow())
        .open(path)
        .map_err(|error| explain(path, error))
}

/// Creates `path` or truncates it, to write it from the start; a symlink at `path` is an
/// error.
pub fn create_truncated(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .custom_flags(no_follow())
        .open(path)
        .map_err(|error| explain(path, error))
}

/// Reads `path` as text, without following a symlink at it, refusing anything but a
/// regular file and anything over `limit` bytes (read no further than the limit).
pub fn read_regular(path: &Path, limit: u64) -> io::Result<String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(no_follow())
        .open(path)
        .map_err(|error| explain(path, error))?;
    read_limited(file, path, limit)
}

/// Reads an open file as text if it is a regular file of at most `limit` bytes.
pub fn read_limited(file: File, path: &Path, limit: u64) -> io::Result<String> {
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is larger than the limit of {}",
                path.display(),
                crate::world::limits::describe_bytes(usize::try_from(limit).unwrap_or(usize::MAX))
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text", path.display()),
        )
    })
}

/// The most bytes of a spec, a role file, a prompt file or a scenario file read.
pub const MAX_SOURCE_BYTES: u64 = 10 * 1024 * 1024;

/// Why a source file (a spec, an imported role, a prompt file) was not read. No variant
/// holds anything of the file's contents.
#[derive(Debug)]
pub enum SourceError {
    /// Nothing is there.
    Missing,
    /// Its path, as written, leads outside the project root.
    Outside,
    /// A directory.
    Directory,
    /// Not a regular file (a device, a FIFO, a socket).
    NotRegular,
    /// Larger than the limit.
    TooLarge { limit: u64 },
    /// The system's reason.
    Io(io::Error),
}

impl SourceError {
    /// A one-line reason naming the file as `shown` (and the root as `root_shown`).
    pub fn message(&self, shown: &str, root_shown: &str) -> String {
        match self {
            SourceError::Missing => format!("no such file `{shown}`"),
            SourceError::Outside => {
                format!("`{shown}` is outside the project root `{root_shown}`")
            }
            SourceError::Directory => format!("`{shown}` is a directory, not a file"),
            SourceError::NotRegular => format!("`{shown}` is not a regular file"),
            SourceError::TooLarge { limit } => format!(
                "`{shown}` is larger than the limit of {}",
                crate::world::limits::describe_bytes(usize::try_from(*limit).unwrap_or(usize::MAX))
            ),
            SourceError::Io(error) => format!("cannot read `{shown}`: {error}"),
        }
    }
}

/// Reads the file at `path` as bytes, if it lies inside `root` when a root is given, is a
/// regular file, and holds at most `limit` bytes (DESIGN §15). Confinement is lexical: the
/// path as written — no absolute path outside the root, no `..` that climbs above it —
/// not where symbolic links lead. Links are the user's own and are followed, as cargo,
/// git and insta follow them: a monorepo whose `specs/` is a link works.
pub fn read_source(path: &Path, root: Option<&Path>, limit: u64) -> Result<Vec<u8>, SourceError> {
    if let Some(root) = root
        && !lexical(path).starts_with(lexical(root))
    {
        return Err(SourceError::Outside);
    }
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Err(SourceError::Missing),
        Err(error) => return Err(SourceError::Io(error)),
    };
    if metadata.is_dir() {
        return Err(SourceError::Directory);
    }
    if !metadata.is_file() {
        return Err(SourceError::NotRegular);
    }
    let file = File::open(path).map_err(SourceError::Io)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(SourceError::Io)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(SourceError::TooLarge { limit });
    }
    Ok(bytes)
}

/// Reads a file the user named (a command-line path: `--input`, a trace to view) as text,
/// following symbolic links, refusing anything but a regular file and anything over
/// `limit` bytes. Files the tool wrote itself are read back with [`read_regular`].
pub fn read_followed(path: &Path, limit: u64) -> io::Result<String> {
    let file = File::open(path)?;
    read_limited(file, path, limit)
}

/// `path` made absolute, with `.` and `..` resolved by its components alone (no link is
/// followed): what the path says, for confinement.
fn lexical(path: &Path) -> std::path::PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = std::path::PathBuf::new();
    for component in absolute.components() {
        match component {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A file cut back to a length, with its write position there (so a failed write can be
/// undone).
pub trait Truncate {
    fn truncate_to(&mut self, length: u64) -> io::Result<()>;
}

impl Truncate for File {
    fn truncate_to(&mut self, length: u64) -> io::Result<()> {
        self.set_len(length)?;
        self.seek(SeekFrom::Start(length)).map(drop)
    }
}

/// A file of lines, each appended whole or not at all: when a write fails part way (a
/// full disk, a quota), what it wrote is cut off again, so the file never ends in a
/// partial line.
#[derive(Debug)]
pub struct LineFile<F = File> {
    file: F,
    length: u64,
}

impl LineFile<File> {
    /// `path` created or emptied (a symlink at `path` is an error).
    pub fn create(path: &Path) -> io::Result<Self> {
        Ok(LineFile::new(create_truncated(path)?, 0))
    }

    /// An open file whose first `length` bytes are kept (anything after them is cut).
    pub fn resume(mut file: File, length: u64) -> io::Result<Self> {
        file.truncate_to(length)?;
        Ok(LineFile::new(file, length))
    }

    /// Syncs the file's data to disk.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

impl<F: Write + Truncate> LineFile<F> {
    /// A line file over `file`, which holds `length` bytes of whole lines.
    pub fn new(file: F, length: u64) -> Self {
        LineFile { file, length }
    }

    /// Appends `line` (which ends with its newline) and flushes it; on a failure, cuts the
    /// file back to where it was and returns the error.
    pub fn append_line(&mut self, line: &[u8]) -> io::Result<()> {
        match self.file.write_all(line).and_then(|()| self.file.flush()) {
            Ok(()) => {
                self.length += u64::try_from(line.len()).unwrap_or(u64::MAX);
                Ok(())
            }
            Err(error) => {
                let _ = self.file.truncate_to(self.length);
                Err(error)
            }
        }
    }

    /// The bytes of whole lines written.
    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }
}

/// The name of the lock file in a run directory.
pub const LOCK_FILE: &str = "lock";

/// A run directory held by this process while it runs the run in it (DESIGN §13.3): an
/// exclusive `flock` on `DIR/lock`, released when this is dropped or the process ends
/// (even by `kill -9`), so two servers in one directory, or a server and `charter run
/// --resume`, never run one run twice.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock of `dir` (creating its lock file), or `None` when another process
    /// — or another open of it in this one — holds it. Never waits.
    pub fn try_hold(dir: &Path) -> io::Result<Option<DirLock>> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(no_follow())
            .open(&path)
            .map_err(|error| explain(&path, error))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(DirLock { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}

/// The run's files on this machine's file system ([`crate::engine::effects::Files`]):
/// atomic writes, reads that never follow a symlink.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalFiles;

impl crate::engine::effects::Files for LocalFiles {
    fn create_dir_all(&self, directory: &Path) -> io::Result<()> {
        std::fs::create_dir_all(directory)
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        write_atomically(path, bytes)
    }

    fn read(&self, path: &Path, limit: u64) -> io::Result<String> {
        read_regular(path, limit)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
}

#[cfg(test)]
mod tests;
