//! Delivery for the scheduler: the best candidate rebuilt from the stored outputs, written through [`crate::engine::candidate::write_delivery`] and the run's [`Files`] (or checked in memory), re-hashed and compared.
//!
//! The delivered candidate is rebuilt from the stored step outputs, not from the copy the
//! gate saw, so anything that changed them after evaluation (a late overwrite, a `tamper`
//! fault) shows up as a hash difference: `failed{delivery_mismatch}`, never a silent delivery.

use std::path::PathBuf;

use crate::engine::candidate::{Candidate, DELIVERY_FILE, write_delivery};
use crate::engine::effects::Files;

/// Where a delivery whose hash does not match is set aside (it is never left as `delivery.json`).
pub const REJECTED_FILE: &str = "delivery.rejected.json";

/// Where a delivery goes: a directory, or nowhere (the candidate is still rebuilt and
/// re-hashed, so the check is the same).
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

/// What writing and reading back found.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// `delivery.json` for a directory, empty in memory.
    pub path: String,
    pub actual_hash: String,
    pub delivered: Option<Delivered>,
}

/// Delivers `rebuilt` (the candidate as stored now) with `summary`, and compares its
/// hash with `evaluated_hash`. An I/O failure is an error message.
pub fn deliver(
    target: &DeliveryTarget,
    files: &dyn Files,
    rebuilt: &Candidate,
    summary: &str,
    evaluated_hash: &str,
) -> Result<Checked, String> {
    let (path, actual_hash, written) = match target {
        DeliveryTarget::Memory => (String::new(), rebuilt.rehash(), None),
        DeliveryTarget::Directory(directory) => {
            let check = write_delivery(files, directory, rebuilt, summary, evaluated_hash)
                .map_err(|e| e.to_string())?;
            if !check.matches() {
                // Keep the evidence, but never under the name of a delivery.
                let rejected = directory.join(REJECTED_FILE);
                files
                    .rename(&check.path, &rejected)
                    .map_err(|e| format!("cannot set aside the mismatching delivery: {e}"))?;
            }
            (
                DELIVERY_FILE.to_string(),
                check.actual_hash,
                Some(check.path),
            )
        }
    };
    let delivered = (actual_hash == evaluated_hash).then(|| Delivered {
        candidate_id: rebuilt.id.clone(),
        hash: actual_hash.clone(),
        path: written,
    });
    Ok(Checked {
        path,
        actual_hash,
        delivered,
    })
}
