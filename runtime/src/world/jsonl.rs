//! A trace written to a file as JSON lines, one event a line, as it happens (`charter run --events`, the run journal's `stream.jsonl`).

use std::path::{Path, PathBuf};

use crate::formats::trace::{TraceError, TraceEvent, TraceSink};
use crate::world::files::LineFile;

/// Writes each event as one JSON line to a file, flushed per event, so a crashed or
/// cancelled run leaves every event it appended.
/// Each line is written whole or not at all (a write that fails part way, on a full disk,
/// is cut back), and the file is never opened through a symlink.
#[derive(Debug)]
pub struct JsonlSink {
    path: PathBuf,
    file: LineFile,
}

impl JsonlSink {
    /// Creates (or truncates) the file at `path`; a symlink at `path` is an error.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let file = LineFile::create(&path).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(JsonlSink { path, file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl TraceSink for JsonlSink {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        let mut line = Vec::with_capacity(192);
        event.write_json(&mut line)?;
        line.push(b'\n');
        self.file
            .append_line(&line)
            .map_err(|source| TraceError::Io {
                path: self.path.clone(),
                source,
            })
    }
}
