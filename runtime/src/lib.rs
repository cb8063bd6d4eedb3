//! Charter's runtime: executes a compiled spec. Foundations so far: values, expressions, contracts, hashing, file formats, providers, replay, trace and prompts.

pub use charter_compiler as compiler;

pub mod canonical;
pub mod eval;
pub mod provider;
pub mod run;
pub mod scenario;
pub mod trace;
pub mod validate;
pub mod value;
pub mod yaml;

#[cfg(test)]
mod testing;
