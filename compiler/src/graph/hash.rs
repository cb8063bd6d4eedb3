//! Content hashes that freeze a run: the compiled spec, rules blocks and prompt templates.

use sha2::{Digest, Sha256};

use super::ir::CompiledSpec;

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// The hash of a rules block: SHA-256 of the canonical JSON (sorted keys, no whitespace)
/// `{"lines":[...],"version":"..."|null}`, so neither formatting nor comments around the
/// block change it, while any change of a line, their order or the version does.
pub fn rules_hash(version: Option<&str>, lines: &[String]) -> String {
    let canonical = serde_json::json!({ "lines": lines, "version": version });
    sha256(canonical.to_string().as_bytes())
}

/// The spec's semantic hash (DESIGN §18): SHA-256 of the canonical JSON of the compiled
/// spec, without its doc block, the hashes of the files it read and this hash itself. The
/// IR holds no source position and keeps its tables in sorted maps, so comments, layout
/// and the order of declarations change no byte of it; anything the runtime acts on does.
/// (A prompt template's text is in the IR as its own hash, so a changed prompt still
/// changes this one.)
pub fn semantic_hash(spec: &CompiledSpec) -> String {
    let mut canonical = match serde_json::to_value(spec) {
        Ok(serde_json::Value::Object(fields)) => fields,
        // The IR is plain data: serializing it cannot fail, and it is always an object.
        _ => return sha256(b""),
    };
    for left_out in ["spec_hash", "doc", "source_hashes"] {
        canonical.remove(left_out);
    }
    sha256(serde_json::Value::Object(canonical).to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_empty_text_is_the_known_digest() {
        assert_eq!(
            sha256(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn rules_hash_changes_with_version_lines_and_order() {
        let lines = vec!["a".to_string(), "b".to_string()];
        let reversed = vec!["b".to_string(), "a".to_string()];
        let base = rules_hash(Some("1"), &lines);
        assert_eq!(base, rules_hash(Some("1"), &lines));
        assert_ne!(base, rules_hash(Some("2"), &lines));
        assert_ne!(base, rules_hash(None, &lines));
        assert_ne!(base, rules_hash(Some("1"), &reversed));
        // The canonical form is exactly this JSON text.
        assert_eq!(base, sha256(br#"{"lines":["a","b"],"version":"1"}"#));
    }
}
