//! `trace.snap` files in insta's snapshot format (a YAML metadata header between `---` lines, then the contents), and atomic writes.
//!
//! The format is insta's so that `cargo insta review` can show and accept the pending
//! `trace.snap.new` files the harness writes; the contents are compared as insta compares
//! them (trailing whitespace at the end and `\r\n` ignored).

use std::path::{Path, PathBuf};

/// The number of lines before the contents of a snapshot file (its header).
pub fn header_lines(file: &str) -> u64 {
    let mut lines = file.lines();
    if lines.next() != Some("---") {
        return 0;
    }
    match lines.position(|line| line == "---") {
        Some(index) => index as u64 + 2,
        None => 0,
    }
}

/// A snapshot file: the header insta writes, then `contents` and a final newline.
pub fn render(source: &str, description: Option<&str>, contents: &str) -> String {
    let mut out = String::from("---\n");
    out.push_str(&format!("source: {}\n", yaml_scalar(source)));
    if let Some(description) = description {
        out.push_str(&format!("description: {}\n", yaml_scalar(description)));
    }
    out.push_str("expression: trace\n---\n");
    out.push_str(contents.trim_end());
    out.push('\n');
    out
}

/// The contents of a snapshot file (everything after the header), normalized as insta
/// compares: line endings `\n`, no trailing whitespace at the end. A file without a
/// header is all contents.
pub fn contents(file: &str) -> String {
    let file = file.replace("\r\n", "\n");
    let body = match file.strip_prefix("---\n") {
        Some(rest) => match rest.find("\n---\n") {
            Some(end) => rest.get(end + 5..).unwrap_or(""),
            None if rest.starts_with("---\n") => rest.get(4..).unwrap_or(""),
            None => rest,
        },
        None => file.as_str(),
    };
    body.trim_end().to_string()
}

/// `trace.snap` -> `trace.snap.new` (insta's pending snapshot).
pub fn pending_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".new");
    PathBuf::from(name)
}

/// A pending snapshot (`trace.snap.new`) under a project's `golden/`, waiting for review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// `<spec>/<scenario>`.
    pub id: String,
    /// The snapshot it would replace (it may not exist yet).
    pub snapshot: PathBuf,
    /// The `trace.snap.new` file.
    pub pending: PathBuf,
}

/// Every `golden/<spec>/<scenario>/trace.snap.new` under `root`, in id order.
pub fn pending_snapshots(root: &Path) -> Result<Vec<Pending>, super::HarnessError> {
    let mut found = Vec::new();
    for scenario in super::discover(root)? {
        let snapshot = scenario.dir.join(super::SNAPSHOT_FILE);
        let pending = pending_path(&snapshot);
        if pending.is_file() {
            found.push(Pending {
                id: scenario.id(),
                snapshot,
                pending,
            });
        }
    }
    Ok(found)
}

/// The contents (trace lines) of the snapshot and of the pending one; an absent
/// snapshot reads as empty.
pub fn pending_contents(pending: &Pending) -> std::io::Result<(String, String)> {
    let limit = crate::world::files::MAX_SOURCE_BYTES;
    let new = crate::world::files::read_regular(&pending.pending, limit)?;
    let old = if pending.snapshot.exists() {
        contents(&crate::world::files::read_regular(
            &pending.snapshot,
            limit,
        )?)
    } else {
        String::new()
    };
    Ok((old, contents(&new)))
}

/// Accepts a pending snapshot: its text becomes `trace.snap` (written atomically), and
/// the pending file is removed.
pub fn accept_pending(pending: &Pending) -> std::io::Result<()> {
    let text =
        crate::world::files::read_regular(&pending.pending, crate::world::files::MAX_SOURCE_BYTES)?;
    write_atomically(&pending.snapshot, &text)?;
    std::fs::remove_file(&pending.pending)
}

/// Rejects a pending snapshot: the pending file is removed, `trace.snap` stays.
pub fn reject_pending(pending: &Pending) -> std::io::Result<()> {
    std::fs::remove_file(&pending.pending)
}

/// Writes `text` to `path` through [`crate::world::files::write_atomically`] (an exclusive
/// temporary file and a rename; a symlink at `path` is an error), so the file is never
/// seen half-written.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    crate::world::files::write_atomically(path, text.as_bytes())
}

/// A YAML scalar as insta's emitter writes it: plain unless plain could be misread (empty,
/// edge spaces, an indicator first, a flow or comment character, a boolean, null or number),
/// else double-quoted. Matching insta byte for byte means `cargo insta accept` rewrites no
/// header; the JSON escaping used for quoted strings is valid YAML.
fn yaml_scalar(text: &str) -> String {
    const WORDS: [&str; 22] = [
        "yes", "Yes", "YES", "no", "No", "NO", "True", "TRUE", "true", "False", "FALSE", "false",
        "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~",
    ];
    let quoted = text.is_empty()
        || text.starts_with(' ')
        || text.ends_with(' ')
        || text.starts_with(['&', '*', '?', '|', '-', '<', '>', '=', '!', '%', '@', '.'])
        || text.starts_with("0x")
        || text.contains(|c: char| {
            matches!(
                c,
                ':' | '{' | '}' | '[' | ']' | ',' | '#' | '`' | '"' | '\'' | '\\'
                    | '\0'..='\x06'
                    | '\t'
                    | '\n'
                    | '\r'
                    | '\x0e'..='\x1a'
                    | '\x1c'..='\x1f'
            )
        })
        || WORDS.contains(&text)
        || text.parse::<i64>().is_ok()
        || text.parse::<f64>().is_ok();
    if quoted {
        // serde_json escapes as insta does, except that insta also escapes DEL.
        serde_json::to_string(text)
            .unwrap_or_default()
            .replace('\x7f', "\\u007f")
    } else {
        text.to_string()
    }
}
