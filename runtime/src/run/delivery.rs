//! Delivery: the candidate and the finalizer's summary written atomically (temp file + rename), read back and re-hashed.
//!
//! The delivered candidate is rebuilt from the stored step outputs, not from the copy
//! the gate saw, so that anything that changed them after evaluation (a late overwrite,
//! a `tamper` fault) shows up as a hash difference: `failed{delivery_mismatch}`, never a
//! silent delivery.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub use crate::canonical::hash_value;

use super::state::{Candidate, CandidateContent};

/// The file a delivery is written to, inside the output directory.
pub const DELIVERY_FILE: &str = "delivery.json";

/// Where a delivery goes: a directory, or memory (the bytes are still serialized and
/// parsed back, so the check is the same).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeliveryTarget {
    Directory(PathBuf),
    Memory,
}

/// A delivery that was written and verified.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivered {
    pub candidate_id: String,
    pub hash: String,
    /// The file written, when delivering to a directory.
    pub path: Option<PathBuf>,
}

/// Why a delivery was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum DeliveryProblem {
    /// The written-and-read-back candidate does not hash to what the gate evaluated.
    Mismatch { expected: String, found: String },
    /// The file could not be written or read back.
    Io(String),
}

/// The delivery document: the candidate as stored now, and the summary.
pub fn document(candidate: &Candidate, content: &CandidateContent, summary: &Value) -> Value {
    json!({
        "candidate": {
            "id": candidate.id,
            "round": candidate.round,
            "evaluated_hash": candidate.hash,
            "items": content.items,
            "failed": content.failed,
            "skipped": content.skipped,
        },
        "summary": summary,
    })
}

/// Writes `document` to `target`, reads it back, and compares the hash of the candidate
/// content read back with `expected_hash`.
pub fn deliver(
    target: &DeliveryTarget,
    candidate_id: &str,
    document: &Value,
    expected_hash: &str,
) -> Result<Delivered, DeliveryProblem> {
    let bytes = serde_json::to_vec_pretty(document).map_err(|e| DeliveryProblem::Io(e.to_string()))?;
    let (read_back, path) = match target {
        DeliveryTarget::Memory => (bytes, None),
        DeliveryTarget::Directory(directory) => {
            let path = write_atomically(directory, &bytes).map_err(DeliveryProblem::Io)?;
            let read = std::fs::read(&path)
                .map_err(|e| DeliveryProblem::Io(format!("cannot read back `{}`: {e}", path.display())))?;
            (read, Some(path))
        }
    };
    let parsed: Value = serde_json::from_slice(&read_back)
        .map_err(|e| DeliveryProblem::Io(format!("the delivery read back is not JSON: {e}")))?;
    let candidate = parsed.get("candidate").cloned().unwrap_or(Value::Null);
    let hashed = json!({
        "items": candidate.get("items").cloned().unwrap_or(Value::Null),
        "failed": candidate.get("failed").cloned().unwrap_or(Value::Null),
        "skipped": candidate.get("skipped").cloned().unwrap_or(Value::Null),
    });
    let found = hash_value(&hashed);
    if found != expected_hash {
        return Err(DeliveryProblem::Mismatch {
            expected: expected_hash.to_string(),
            found,
        });
    }
    Ok(Delivered {
        candidate_id: candidate_id.to_string(),
        hash: found,
        path,
    })
}

/// Writes `bytes` to `directory/delivery.json` through a temporary file in the same
/// directory and a rename, so the file is never seen half-written.
fn write_atomically(directory: &Path, bytes: &[u8]) -> Result<PathBuf, String> {
    std::fs::create_dir_all(directory)
        .map_err(|e| format!("cannot create `{}`: {e}", directory.display()))?;
    let path = directory.join(DELIVERY_FILE);
    let temporary = directory.join(format!(".{DELIVERY_FILE}.tmp"));
    std::fs::write(&temporary, bytes)
        .map_err(|e| format!("cannot write `{}`: {e}", temporary.display()))?;
    std::fs::rename(&temporary, &path).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot rename into `{}`: {e}", path.display())
    })?;
    Ok(path)
}
