//! Charter's runtime: executes a compiled spec (`CompiledSpec`), in four layers that import only downward (see ARCHITECTURE.md, "runtime").
//!
//! - [`formats`]: what is written and read back — canonical JSON, YAML, the trace,
//!   scenarios and cassettes.
//! - [`engine`]: the scheduler (`engine::run`) and its pure policies (gate, repair,
//!   budget, candidate, dag, feedback, session, permit, eval, validate, prompt). It does
//!   no I/O: every effect goes through [`engine::effects`].
//! - [`world`]: the outside world — live providers, tools, recording and replay, files,
//!   secrets, session files — implementing the engine's effects.
//! - On top: [`harness`] (the golden comparison behind `cargo test`, `cargo xtask verify`
//!   and `charter verify`), [`explore`] (fault variants) and [`totals`].

pub use charter_compiler as compiler;

pub mod engine;
pub mod explore;
pub mod formats;
pub mod harness;
pub mod totals;
pub mod world;

#[cfg(test)]
mod testing;

#[cfg(test)]
mod robustness;
