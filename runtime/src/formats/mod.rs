//! The file formats: what Charter writes and reads back — canonical JSON, YAML, the trace, scenarios and cassettes.
//!
//! The lowest layer. Each format has its own versioned serde types, converted by hand from
//! the engine's, so the engine can change without breaking a golden. Nothing here does
//! I/O beyond parsing and printing text, and nothing here imports a layer above it.

pub mod canonical;
pub mod lock;
pub mod scenario;
pub mod trace;
pub mod yaml;
