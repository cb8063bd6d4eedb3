//! Canonical JSON (sorted keys, no whitespace) and the `sha256:<hex>` content hashes of candidates and deliveries: the compiler's (`charter_compiler::canonical`), which also hashes the tools of `charter.lock`.
//!
//! One implementation for both crates, so a hash the compiler computes and one the runtime
//! computes agree by construction. What is the runtime's alone is that a value it writes
//! and reads back re-hashes the same: it builds `serde_json` with `float_roundtrip`.

pub use charter_compiler::canonical::{
    canonical_json, hash_value, sha256, write_canonical, write_list, write_string,
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn floats_survive_a_write_and_read_back() {
        // A delivery is written as canonical JSON and re-hashed after reading it back:
        // every float must parse to the same bits (serde_json's `float_roundtrip`).
        for numerator in 1..200u32 {
            let value = json!({"x": f64::from(numerator) / 7.0, "y": f64::from(numerator) * 0.1});
            let text = canonical_json(&value);
            let parsed: Value = serde_json::from_str(&text).unwrap_or_default();
            assert_eq!(hash_value(&parsed), hash_value(&value), "{text}");
        }
    }
}
