//! No-panic tests: the runtime's entry points fed pseudo-random values and mangled files (every result is a value, never a panic).

use charter_compiler::graph::NameIr;
use serde_json::{Map, Value, json};

use crate::engine::eval::{Bindings, evaluate};
use crate::engine::gate::evaluate_gate;
use crate::engine::validate::{Validator, parse_output};
use crate::formats::canonical::{canonical_json, hash_value};
use crate::formats::scenario::Cassette;
use crate::testing::{EXAMPLE_CASSETTE, LOOP_SPEC, compile_spec};

/// A small deterministic generator (no dependency, same sequence on every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn value(&mut self, depth: u32) -> Value {
        let words = [
            "ok",
            "failed",
            "partial",
            "T-1",
            "",
            "sk-AAAAAAAAAAAAAAAAAAAAAAAA",
            "é",
        ];
        let keys = [
            "id",
            "goal",
            "tasks",
            "status",
            "output",
            "relevance",
            "completeness",
            "notes",
            "depends_on",
            "task_id",
            "items",
            "text",
        ];
        let kind = if depth == 0 {
            self.below(5)
        } else {
            self.below(7)
        };
        match kind {
            0 => Value::Null,
            1 => Value::Bool(self.below(2) == 0),
            2 => json!(self.below(25) as i64 - 5),
            3 => json!(self.below(1000) as f64 / 7.0),
            4 => json!(words[self.below(words.len() as u64) as usize]),
            5 => Value::Array((0..self.below(4)).map(|_| self.value(depth - 1)).collect()),
            _ => {
                let mut record = Map::new();
                for _ in 0..self.below(5) {
                    let key = keys[self.below(keys.len() as u64) as usize];
                    record.insert(key.to_string(), self.value(depth - 1));
                }
                Value::Object(record)
            }
        }
    }
}

#[test]
fn validation_evaluation_and_hashing_never_panic() {
    let spec = compile_spec(LOOP_SPEC);
    let validator = Validator::for_spec(&spec);
    let mut random = Lcg(7);
    for _ in 0..400 {
        let value = random.value(4);
        for contract in spec.contracts.keys() {
            let _ = validator.validate(contract, &value);
        }
        let again = canonical_json(&value);
        assert_eq!(
            serde_json::from_str::<Value>(&again)
                .ok()
                .map(|parsed| hash_value(&parsed)),
            Some(hash_value(&value))
        );
        let bindings = Bindings::default()
            .with(NameIr::Candidate, random.value(3))
            .with(NameIr::Step("review".into()), random.value(2))
            .with(NameIr::Request, value.clone());
        for (name, gate) in &spec.gates {
            let evaluation = evaluate_gate(name, gate, &bindings);
            assert!(!evaluation.passed || !evaluation.hard_failure());
            for rule in &gate.rules {
                let _ = evaluate(&rule.expr, &bindings);
            }
        }
    }
}

#[test]
fn mangled_cassettes_and_outputs_are_errors_not_panics() {
    let mut random = Lcg(11);
    let bytes = EXAMPLE_CASSETTE.as_bytes();
    for _ in 0..300 {
        let mut mangled = bytes.to_vec();
        for _ in 0..1 + random.below(4) {
            let at = random.below(mangled.len() as u64) as usize;
            match random.below(3) {
                0 => {
                    mangled.remove(at);
                }
                1 => mangled.insert(at, b"{}[]:,-\"' \n#&*!|>"[random.below(17) as usize]),
                _ => mangled.truncate(at),
            }
        }
        let text = String::from_utf8_lossy(&mangled);
        let _ = Cassette::from_yaml("cassette.yaml", &text);
        let _ = parse_output(&text);
    }
}
