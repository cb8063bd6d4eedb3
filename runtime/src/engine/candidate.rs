//! Candidates, the best candidate, and verified delivery (DESIGN §4 "Candidates and delivery").
//!
//! A round's subject outputs form a [`Candidate`] `c<round>` whose hash is the SHA-256 of
//! the canonical JSON of its content: `{items, failed, skipped, artifacts}` (not its id
//! or round, so the same outputs in two rounds have the same hash: that is how a round
//! without progress is recognized). `text` is every item's canonical JSON, one per line,
//! for rules that scan the whole output (`matches(candidate.text, ...)`).
//!
//! [`best_candidate`] picks the highest score among candidates with no hard failure
//! (the earliest on a tie). [`write_delivery`] writes the delivery atomically (a temp
//! file in the same directory, then a rename), reads it back, re-hashes the candidate
//! it holds and compares it with the hash the gate evaluated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::engine::effects::Files;
use crate::formats::canonical::{
    canonical_json, hash_value, sha256, write_canonical, write_list, write_string,
};

/// A round's candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// `c<round>`.
    pub id: String,
    pub round: u64,
    /// The outputs of the items that succeeded, in item id order (one output for a
    /// plain step).
    pub items: Vec<Value>,
    /// Ids of items whose calls failed.
    pub failed: Vec<String>,
    /// Ids of items skipped because a dependency failed.
    pub skipped: Vec<String>,
    /// Files the candidate's tools wrote: path -> content.
    pub artifacts: BTreeMap<String, String>,
    pub text: String,
    pub hash: String,
}

impl Candidate {
    pub fn new(
        round: u64,
        items: Vec<Value>,
        failed: Vec<String>,
        skipped: Vec<String>,
        artifacts: BTreeMap<String, String>,
    ) -> Self {
        let (content, item_texts) = content_json(&items, &failed, &skipped, &artifacts);
        let hash = sha256(&content);
        // Each item's canonical JSON is already in the content, once.
        let mut text = String::new();
        for (index, range) in item_texts.into_iter().enumerate() {
            if index > 0 {
                text.push('\n');
            }
            text.push_str(&String::from_utf8_lossy(
                content.get(range).unwrap_or_default(),
            ));
        }
        Candidate {
            id: format!("c{round}"),
            round,
            items,
            failed,
            skipped,
            artifacts,
            text,
            hash,
        }
    }

    /// The hash of the candidate's content as it is now (differs from `hash` if anything
    /// was changed after the candidate was formed).
    pub fn rehash(&self) -> String {
        content_hash(&self.items, &self.failed, &self.skipped, &self.artifacts)
    }

    /// The candidate as expressions and templates see it:
    /// `{id, round, items, text, hash, failed, skipped}`.
    pub fn to_value(&self) -> Value {
        json!({
            "id": self.id,
            "round": self.round,
            "items": self.items,
            "text": self.text,
            "hash": self.hash,
            "failed": self.failed,
            "skipped": self.skipped,
        })
    }
}

fn content_hash(
    items: &[Value],
    failed: &[String],
    skipped: &[String],
    artifacts: &BTreeMap<String, String>,
) -> String {
    sha256(&content_json(items, failed, skipped, artifacts).0)
}

/// The canonical JSON of `{items, failed, skipped, artifacts}`, written directly (its
/// keys in byte order, and `artifacts`' paths already are: a `BTreeMap` of `String`s),
/// and where in it each item's own canonical JSON is.
fn content_json(
    items: &[Value],
    failed: &[String],
    skipped: &[String],
    artifacts: &BTreeMap<String, String>,
) -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
    let text = |text: &String, out: &mut Vec<u8>| write_string(text, out);
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"artifacts\":{");
    for (index, (path, content)) in artifacts.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_string(path, &mut out);
        out.push(b':');
        write_string(content, &mut out);
    }
    out.extend_from_slice(b"},\"failed\":");
    write_list(failed, text, &mut out);
    out.extend_from_slice(b",\"items\":");
    let mut ranges = Vec::with_capacity(items.len());
    out.push(b'[');
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let start = out.len();
        write_canonical(item, &mut out);
        ranges.push(start..out.len());
    }
    out.push(b']');
    out.extend_from_slice(b",\"skipped\":");
    write_list(skipped, text, &mut out);
    out.push(b'}');
    (out, ranges)
}

/// The index of the best of `candidates`, given as `(score, hard_failure)` in the order
/// they were formed: the highest score with no hard failure, the earliest on a tie; a
/// candidate without a score ranks below any score. `None` when every one failed hard.
pub fn best_candidate(candidates: &[(Option<f64>, bool)]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (index, (score, hard_failure)) in candidates.iter().enumerate() {
        if *hard_failure {
            continue;
        }
        let score = score.unwrap_or(f64::NEG_INFINITY);
        if best.is_none_or(|(_, best_score)| score > best_score) {
            best = Some((index, score));
        }
    }
    best.map(|(index, _)| index)
}

/// What [`write_delivery`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryCheck {
    pub path: PathBuf,
    /// The hash the gate evaluated.
    pub expected_hash: String,
    /// The hash of the candidate content read back from the file.
    pub actual_hash: String,
}

impl DeliveryCheck {
    pub fn matches(&self) -> bool {
        self.expected_hash == self.actual_hash
    }
}

/// The delivery could not be written or read back.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("cannot write the delivery to {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the delivery read back from {path} is not what was written: {message}")]
    Unreadable { path: PathBuf, message: String },
}

/// The file name of the delivery in the output directory.
pub const DELIVERY_FILE: &str = "delivery.json";

/// Writes `{candidate, summary}` to `<dir>/delivery.json` through `files` (whole or not
/// at all), reads it back and compares the hash of the candidate content in it with `evaluated_hash`.
pub fn write_delivery(
    files: &dyn Files,
    dir: &Path,
    candidate: &Candidate,
    summary: &str,
    evaluated_hash: &str,
) -> Result<DeliveryCheck, DeliveryError> {
    let path = dir.join(DELIVERY_FILE);
    let io_error = |source| DeliveryError::Io {
        path: path.clone(),
        source,
    };
    files.create_dir_all(dir).map_err(io_error)?;
    let document = json!({
        "candidate": {
            "id": candidate.id,
            "round": candidate.round,
            "items": candidate.items,
            "failed": candidate.failed,
            "skipped": candidate.skipped,
            "artifacts": candidate.artifacts,
        },
        "summary": summary,
    });
    let mut text = canonical_json(&document);
    text.push('\n');
    files.write(&path, text.as_bytes()).map_err(io_error)?;
    // Read back as written: never through a symlink, and no more than was written.
    let text = files.read(&path, text.len() as u64).map_err(io_error)?;
    let unreadable = |message: String| DeliveryError::Unreadable {
        path: path.clone(),
        message,
    };
    let read: Value = serde_json::from_str(&text).map_err(|error| unreadable(error.to_string()))?;
    let part = |name: &str| read.get("candidate").and_then(|c| c.get(name)).cloned();
    let (Some(items), Some(failed), Some(skipped), Some(artifacts)) = (
        part("items"),
        part("failed"),
        part("skipped"),
        part("artifacts"),
    ) else {
        return Err(unreadable("the candidate is incomplete".to_string()));
    };
    let actual_hash = hash_value(&json!({
        "items": items,
        "failed": failed,
        "skipped": skipped,
        "artifacts": artifacts,
    }));
    Ok(DeliveryCheck {
        path,
        expected_hash: evaluated_hash.to_string(),
        actual_hash,
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn candidate(round: u64, outputs: &[&str]) -> Candidate {
        let items = outputs
            .iter()
            .map(|output| json!({"task_id": "T", "output": output}))
            .collect();
        Candidate::new(round, items, vec![], vec!["T-9".into()], BTreeMap::new())
    }

    /// The hash written directly is the hash of the content's canonical JSON.
    #[test]
    fn the_content_hash_is_the_hash_of_the_canonical_content_and_the_text_its_items() {
        let contents = [
            (vec![], vec![], vec![], BTreeMap::new()),
            (
                vec![
                    json!({"z": 1, "a": [true, null, 2.5]}),
                    json!("line\nbreak \"q\" é"),
                ],
                vec!["T-2".to_string()],
                vec!["T-3".to_string(), "T-é".to_string()],
                BTreeMap::from([
                    ("b/é.md".to_string(), "tab\there".to_string()),
                    ("a.md".to_string(), "\u{1}".to_string()),
                    ("B.md".to_string(), String::new()),
                ]),
            ),
        ];
        for (items, failed, skipped, artifacts) in contents {
            let expected = hash_value(&json!({
                "items": items,
                "failed": failed,
                "skipped": skipped,
                "artifacts": artifacts,
            }));
            assert_eq!(
                content_hash(&items, &failed, &skipped, &artifacts),
                expected
            );
            let text = items
                .iter()
                .map(canonical_json)
                .collect::<Vec<_>>()
                .join("\n");
            let candidate = Candidate::new(1, items, failed, skipped, artifacts);
            assert_eq!(candidate.hash, expected);
            assert_eq!(candidate.text, text);
        }
    }

    #[test]
    fn hashes_cover_content_not_identity() {
        let first = candidate(1, &["a", "b"]);
        let again = candidate(2, &["a", "b"]);
        assert_eq!(first.id, "c1");
        assert_eq!(again.id, "c2");
        assert_eq!(
            first.hash, again.hash,
            "same outputs, same hash, whatever the round"
        );
        assert_ne!(first.hash, candidate(1, &["a", "c"]).hash);
        let mut with_artifact = first.clone();
        with_artifact
            .artifacts
            .insert("out/post.md".into(), "text".into());
        assert_ne!(with_artifact.rehash(), first.hash);
        assert_eq!(first.rehash(), first.hash);
        assert_eq!(
            first.text,
            "{\"output\":\"a\",\"task_id\":\"T\"}\n{\"output\":\"b\",\"task_id\":\"T\"}"
        );
        let value = first.to_value();
        assert_eq!(value["id"], "c1");
        assert_eq!(value["skipped"], json!(["T-9"]));
        assert_eq!(value["hash"], json!(first.hash));
    }

    #[test]
    fn the_best_is_the_highest_score_without_a_hard_failure() {
        assert_eq!(
            best_candidate(&[
                (Some(6.0), false),
                (Some(9.0), true),
                (Some(7.0), false),
                (Some(5.0), false)
            ]),
            Some(2)
        );
        assert_eq!(
            best_candidate(&[(Some(7.0), false), (Some(7.0), false)]),
            Some(0)
        );
        assert_eq!(
            best_candidate(&[(None, false), (Some(1.0), false)]),
            Some(1)
        );
        assert_eq!(best_candidate(&[(None, false)]), Some(0));
        assert_eq!(best_candidate(&[(Some(10.0), true)]), None);
        assert_eq!(best_candidate(&[]), None);
    }

    fn temp_dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("charter-delivery-{name}-{}", std::process::id()))
    }

    #[test]
    fn a_delivery_is_written_read_back_and_verified() {
        let dir = temp_dir("ok");
        let best = candidate(2, &["a"]);
        let check = write_delivery(
            &crate::world::files::LocalFiles,
            &dir,
            &best,
            "all done",
            &best.hash,
        );
        let written = fs::read_to_string(dir.join(DELIVERY_FILE));
        let _ = fs::remove_dir_all(&dir);
        match check {
            Ok(check) => {
                assert!(check.matches(), "{check:?}");
                assert_eq!(check.path, dir.join(DELIVERY_FILE));
            }
            Err(error) => panic!("{error}"),
        }
        let written = written.unwrap_or_default();
        assert!(
            written.starts_with("{\"candidate\":{\"artifacts\":{},\"failed\":[],\"id\":\"c2\""),
            "{written}"
        );
        assert!(
            written.ends_with("\"summary\":\"all done\"}\n"),
            "{written}"
        );
    }

    #[test]
    fn a_candidate_changed_after_evaluation_does_not_match() {
        let dir = temp_dir("tampered");
        let evaluated = candidate(1, &["a"]);
        let mut tampered = evaluated.clone();
        tampered.items = vec![json!({"task_id": "T", "output": "overwritten late"})];
        let check = write_delivery(
            &crate::world::files::LocalFiles,
            &dir,
            &tampered,
            "s",
            &evaluated.hash,
        );
        let _ = fs::remove_dir_all(&dir);
        match check {
            Ok(check) => {
                assert!(!check.matches());
                assert_eq!(check.expected_hash, evaluated.hash);
                assert_eq!(check.actual_hash, tampered.rehash());
            }
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn an_unwritable_directory_is_an_error() {
        let result = write_delivery(
            &crate::world::files::LocalFiles,
            Path::new("/proc/charter-cannot-write-here"),
            &candidate(1, &[]),
            "s",
            "h",
        );
        assert!(
            matches!(result, Err(DeliveryError::Io { .. })),
            "{result:?}"
        );
    }
}
