//! Charter's runtime: executes a compiled spec (the scheduler, providers and replay land here).

pub use charter_compiler as compiler;
