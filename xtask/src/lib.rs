//! The repository's own automation behind `cargo xtask`: the CI gate (`verify`, whose
//! editor-support stage is `editors` and architecture check `layers`), the never-panics
//! fuzz harness (`fuzz`, `mutate`), the benchmark (`bench`), the generator of large valid
//! specs they share (`gen`), and the mutation measurement of the runtime's tests
//! (`mutants`).

pub mod bench;
pub mod bench_eval;
pub mod bench_live;
pub mod bench_replay;
pub mod bench_sandbox;
pub mod corpus;
pub mod editors;
pub mod explore;
#[cfg(test)]
mod format_corpus;
pub mod fuzz;
// `gen` is a reserved word in edition 2024, so the module is named after what it does.
#[path = "gen.rs"]
pub mod generator;
pub mod golden;
pub mod layers;
pub mod measure;
pub mod mutants;
pub mod mutate;
pub mod rng;
pub mod verify;
