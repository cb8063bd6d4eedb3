//! Canonical JSON (sorted keys, no whitespace) and the `sha256:<hex>` content hashes of candidates, deliveries and locked MCP tools.
//!
//! The canonical form of a value is its JSON text with object keys sorted by their
//! UTF-8 bytes at every depth, no insignificant whitespace, strings escaped as
//! `serde_json` escapes them, and numbers as `serde_json` holds them (integers exactly,
//! floats in their shortest round-trip form). Two values that are equal as JSON data
//! have the same canonical text, whatever the key order they were built or parsed in.
//! The keys are sorted here explicitly, so the form does not depend on whether some
//! crate in the build enables `serde_json`'s `preserve_order`.

use std::io::Write;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical JSON text of `value`.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // Only `serde_json`'s output and ASCII punctuation were written: always UTF-8.
    String::from_utf8(out)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
}

/// `sha256:<hex>` of the canonical JSON of `value`: a candidate's hash.
pub fn hash_value(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    sha256(&out)
}

/// `sha256:<hex>` of `bytes` (the same form as the compiler's spec and prompt hashes).
pub fn sha256(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut text = String::with_capacity("sha256:".len() + 2 * digest.len());
    text.push_str("sha256:");
    for byte in digest {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    text
}

/// Appends the canonical JSON text of `value` to `out`.
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // `Number`'s text is the one `to_string` gives; writing to a `Vec` cannot fail.
        Value::Number(number) => {
            let _ = write!(out, "{number}");
        }
        Value::String(text) => write_string(text, out),
        Value::Array(items) => write_list(items, write_canonical, out),
        Value::Object(record) => {
            let mut entries: Vec<(&String, &Value)> = record.iter().collect();
            entries.sort_by(|(a, _), (b, _)| a.as_bytes().cmp(b.as_bytes()));
            out.push(b'{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
    }
}

/// Appends the JSON list of `items`, each written by `write`.
pub fn write_list<T>(items: &[T], write: impl Fn(&T, &mut Vec<u8>), out: &mut Vec<u8>) {
    out.push(b'[');
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write(item, out);
    }
    out.push(b']');
}

/// Appends `text` as `serde_json` writes a string, escapes and quotes included.
///
/// A string needing no escape is copied whole, checked first as a whole (a loop the
/// compiler turns into vector instructions); only a string holding a quote, a backslash or
/// a control character goes to `serde_json`'s own escaping, so the bytes are the same.
#[inline]
pub fn write_string(text: &str, out: &mut Vec<u8>) {
    let bytes = text.as_bytes();
    // No short cut out of the loop: a fold over every byte is vectorized.
    let plain = bytes.iter().fold(true, |plain, &byte| {
        plain & (byte >= 0x20) & (byte != b'"') & (byte != b'\\')
    });
    if plain {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
    } else {
        // Writing a `&str` into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(input: &str, expected: &str) {
        let value: Value = match serde_json::from_str(input) {
            Ok(value) => value,
            Err(error) => panic!("{input}: {error}"),
        };
        assert_eq!(canonical_json(&value), expected, "{input}");
    }

    #[test]
    fn canonical_text() {
        check(
            r#"{ "b": 1, "a": [ 1, 2.5, -3 ], "c": { "z": null, "y": true } }"#,
            r#"{"a":[1,2.5,-3],"b":1,"c":{"y":true,"z":null}}"#,
        );
        check(
            r#""line\nbreak \"quoted\" é""#,
            r#""line\nbreak \"quoted\" é""#,
        );
        check("[]", "[]");
        check("{}", "{}");
        check("18446744073709551615", "18446744073709551615");
        check("1.0", "1.0");
        check("1e3", "1000.0");
        check(r#"{"é": 1, "z": 2, "A": 3}"#, r#"{"A":3,"z":2,"é":1}"#);
    }

    #[test]
    fn hashes_ignore_key_order_and_whitespace_but_not_content() {
        let a = json!({"id": "c1", "items": [{"x": 1, "y": 2}]});
        let b: Value =
            match serde_json::from_str("{\"items\":[{\"y\":2,\"x\":1}],\n \"id\":\"c1\"}") {
                Ok(value) => value,
                Err(error) => panic!("{error}"),
            };
        assert_eq!(hash_value(&a), hash_value(&b));
        assert_ne!(
            hash_value(&a),
            hash_value(&json!({"id": "c1", "items": [{"x": 1, "y": 3}]}))
        );
        assert!(hash_value(&a).starts_with("sha256:"));
        assert_eq!(hash_value(&a).len(), "sha256:".len() + 64);
    }

    #[test]
    fn sha256_matches_the_compiler() {
        assert_eq!(sha256(b"abc"), crate::graph::hash::sha256(b"abc"));
        assert_eq!(
            sha256(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
