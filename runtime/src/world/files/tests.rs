//! Tests of the safe writers: a symlink at the target (or a dangling one) is refused and the canary it points to is untouched, temporary names are not guessable, limits and file kinds hold on reads.

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use super::*;

/// A scratch directory of its own for one test, holding a `canary` file that no write may
/// touch.
fn scratch(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("charter-files-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("run")).unwrap_or_else(|error| panic!("{error}"));
    let canary = dir.join("canary");
    std::fs::write(&canary, "canary").unwrap_or_else(|error| panic!("{error}"));
    (dir, canary)
}

fn canary_intact(canary: &Path) {
    assert_eq!(
        std::fs::read_to_string(canary).ok().as_deref(),
        Some("canary"),
        "the file behind the link was written"
    );
}

#[test]
fn every_writer_refuses_a_symlink_at_its_target() {
    let (dir, canary) = scratch("symlink");
    let link = dir.join("run").join("events.jsonl");
    symlink(&canary, &link).unwrap_or_else(|error| panic!("{error}"));
    for (what, result) in [
        ("atomic", write_atomically(&link, b"trace").map(drop)),
        ("append", open_append(&link).map(drop)),
        ("truncate", create_truncated(&link).map(drop)),
        ("read", read_regular(&link, 100).map(drop)),
    ] {
        let error = result
            .err()
            .unwrap_or_else(|| panic!("{what}: the link was followed"));
        assert!(
            error.to_string().contains("symbolic link"),
            "{what}: {error}"
        );
        canary_intact(&canary);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dangling_symlink_creates_nothing_elsewhere() {
    let (dir, _) = scratch("dangling");
    let outside = dir.join("outside.jsonl");
    let link = dir.join("run").join("calls.jsonl");
    symlink(&outside, &link).unwrap_or_else(|error| panic!("{error}"));
    assert!(open_append(&link).is_err());
    assert!(create_truncated(&link).is_err());
    assert!(write_atomically(&link, b"x").is_err());
    assert!(
        !outside.exists(),
        "a file was created through the dangling link"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_atomic_write_replaces_the_file_and_leaves_no_temporary() {
    let (dir, canary) = scratch("atomic");
    let target = dir.join("run").join("delivery.json");
    // Links planted at the names the old writer used (`.<name>.<pid>.tmp`) are not used.
    let planted = dir
        .join("run")
        .join(format!(".delivery.json.{}.tmp", std::process::id()));
    symlink(&canary, &planted).unwrap_or_else(|error| panic!("{error}"));
    write_atomically(&target, b"first").unwrap_or_else(|error| panic!("{error}"));
    write_atomically(&target, b"second").unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        std::fs::read_to_string(&target).ok().as_deref(),
        Some("second")
    );
    canary_intact(&canary);
    let names: Vec<String> = std::fs::read_dir(dir.join("run"))
        .unwrap_or_else(|error| panic!("{error}"))
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names.len(),
        2,
        "only the target and the planted link: {names:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reads_take_regular_files_within_the_limit() {
    let (dir, canary) = scratch("reads");
    assert_eq!(read_regular(&canary, 6).ok().as_deref(), Some("canary"));
    let too_large = read_regular(&canary, 5)
        .err()
        .map(|error| error.to_string());
    assert!(
        too_large
            .as_deref()
            .is_some_and(|error| error.contains("larger than the limit")),
        "{too_large:?}"
    );
    let directory = read_regular(&dir, 100).err().map(|error| error.to_string());
    assert!(
        directory
            .as_deref()
            .is_some_and(|error| error.contains("not a regular file")),
        "{directory:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A disk that holds `room` bytes: a write past it stores what fits, then fails.
#[derive(Debug, Default)]
struct SmallDisk {
    bytes: Vec<u8>,
    room: usize,
}

impl Write for SmallDisk {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        let free = self.room.saturating_sub(self.bytes.len());
        if free == 0 {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on device",
            ));
        }
        let taken = free.min(buffer.len());
        self.bytes.extend_from_slice(&buffer[..taken]);
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Truncate for SmallDisk {
    fn truncate_to(&mut self, length: u64) -> io::Result<()> {
        self.bytes
            .truncate(usize::try_from(length).unwrap_or(usize::MAX));
        Ok(())
    }
}

#[test]
fn a_full_disk_leaves_no_partial_line() {
    let mut file = LineFile::new(
        SmallDisk {
            bytes: Vec::new(),
            room: 30,
        },
        0,
    );
    file.append_line(b"{\"seq\":0,\"kind\":\"a\"}\n")
        .unwrap_or_else(|error| panic!("{error}"));
    let error = file.append_line(b"{\"seq\":1,\"kind\":\"b\"}\n").err();
    assert_eq!(
        error.map(|error| error.kind()),
        Some(io::ErrorKind::StorageFull)
    );
    assert_eq!(file.file.bytes, b"{\"seq\":0,\"kind\":\"a\"}\n");
    assert_eq!(file.len(), 21);
}

#[test]
fn unique_directories_never_collide() {
    let (dir, _) = scratch("unique");
    let runs = dir.join("runs");
    let made: std::collections::BTreeSet<PathBuf> = (0..200)
        .map(|_| {
            create_unique_dir(&runs, "1700000000000-").unwrap_or_else(|error| panic!("{error}"))
        })
        .collect();
    assert_eq!(made.len(), 200);
    assert!(made.iter().all(|path| path.is_dir()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sources_are_read_only_inside_the_root() {
    let (dir, _) = scratch("sources");
    let root = dir.join("run");
    let outside_file = dir.join("outside.txt");
    std::fs::write(&outside_file, "TOP-SECRET-CONTENT").unwrap_or_else(|error| panic!("{error}"));
    std::fs::write(root.join("inside.md"), "inside").unwrap_or_else(|error| panic!("{error}"));
    symlink(&outside_file, root.join("link.md")).unwrap_or_else(|error| panic!("{error}"));
    let read = |relative: &str| read_source(&root.join(relative), Some(&root), 100);
    assert_eq!(read("inside.md").ok(), Some(b"inside".to_vec()));
    // A link inside the root is the user's own: followed for reading, wherever it leads.
    assert_eq!(read("link.md").ok(), Some(b"TOP-SECRET-CONTENT".to_vec()));
    for outside in [
        "../outside.txt",
        "./../run/../outside.txt",
        "sub/../../outside.txt",
    ] {
        let error = read(outside).err();
        assert!(
            matches!(error, Some(SourceError::Outside)),
            "{outside}: {error:?}"
        );
        let message = error
            .map(|error| error.message(outside, "run"))
            .unwrap_or_default();
        assert!(!message.contains("TOP-SECRET"), "{message}");
    }
    assert!(matches!(
        read_source(&outside_file, Some(&root), 100),
        Err(SourceError::Outside)
    ));
    assert!(matches!(read("missing.md"), Err(SourceError::Missing)));
    assert!(matches!(read("."), Err(SourceError::Directory)));
    let too_large = read_source(&root.join("inside.md"), Some(&root), 3).err();
    assert!(
        matches!(too_large, Some(SourceError::TooLarge { limit: 3 })),
        "{too_large:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_directory_is_held_by_one_holder_at_a_time() {
    let (dir, _) = scratch("lock");
    let first = DirLock::try_hold(&dir).unwrap_or_else(|error| panic!("{error}"));
    assert!(first.is_some());
    // A second open of the lock (as a second server would make) is refused, not blocked.
    let second = DirLock::try_hold(&dir).unwrap_or_else(|error| panic!("{error}"));
    assert!(second.is_none());
    drop(first);
    let third = DirLock::try_hold(&dir).unwrap_or_else(|error| panic!("{error}"));
    assert!(third.is_some(), "a released lock can be taken again");
    // A symlink where the lock file goes is never opened through.
    let (other, canary) = scratch("lock-link");
    let _ = std::fs::remove_file(other.join(LOCK_FILE));
    symlink(&canary, other.join(LOCK_FILE)).unwrap_or_else(|error| panic!("{error}"));
    assert!(DirLock::try_hold(&other).is_err());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}
