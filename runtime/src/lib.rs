//! Charter's runtime: executes a compiled spec (`CompiledSpec`) over small foundations: values and expressions, contracts, hashes, file formats, providers and replay, the trace, prompts and the repair policies.
//!
//! Modules, each with a small API (see ARCHITECTURE.md, "runtime"):
//! - [`value`]: the language's rules for JSON values (numbers, equality, ordering).
//! - [`eval`]: `evaluate(expr, env)` interprets an `ExprIr` over an [`eval::Env`].
//! - [`validate`]: `Validator::validate(contract, value)` lists every contract violation.
//! - [`canonical`]: canonical JSON and `sha256:<hex>` hashes.
//! - [`scenario`]: `scenario.yaml` and `cassette.yaml` (DESIGN §5), read through [`yaml`].
//! - [`provider`]: the `Provider` trait (one async call) and `HumanChannel`.
//! - [`replay`]: `ReplayProvider`, a provider over a cassette on tokio's clock.
//! - [`providers`]: the live `openai` and `anthropic` providers over HTTP, and `Providers`,
//!   which routes a call by its model's provider.
//! - [`record`]: `Recording` wraps a live provider and human channel and writes a cassette.
//! - [`secrets`]: `Scrubber` and `ScrubbingSink` keep secret values out of cassettes and traces.
//! - [`escape`]: text from files made safe for a terminal or a CI log.
//! - [`files`]: every file write (atomic, exclusive temporary files, no symlink followed)
//!   and bounded reads of regular files.
//! - [`limits`]: the size and time limits of live runs (bodies, tool outputs, `Retry-After`).
//! - [`tools`]: the `Tool` trait, `CommandTool` (JSON over stdin/stdout) and `ToolBox`.
//! - [`trace`]: trace events, `TraceSink`, and the terminal outcome and reason.
//! - [`prompt`]: `render_prompt(spec, role, inputs, feedback)` with minijinja.
//! - [`harness`]: the golden comparison of recorded scenarios (`cargo test`, `cargo xtask
//!   verify` and `charter verify` all use it).
//! - Policies and mechanics: [`gate`], [`repair`], [`dag`], [`candidate`], [`budget`].

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
