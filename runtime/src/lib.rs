//! Charter's runtime: executes a compiled spec. Foundations so far: values, expressions, contracts, hashing, file formats, providers, replay, trace and prompts.

pub use charter_compiler as compiler;

pub mod canonical;
pub mod eval;
pub mod trace;
pub mod validate;
pub mod value;

#[cfg(test)]
mod testing;
