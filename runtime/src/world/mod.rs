//! The outside world: live providers over HTTP, tools, recording and replay, files, secrets, limits and escaping.
//!
//! This layer implements the engine's side-effect boundary (`engine::effects`): a live
//! call, a recorded call played back, a journal that answers a call already made, the
//! files a run writes. It imports `engine` and `formats`, never `harness` or `explore`.

pub mod escape;
pub mod files;
pub mod fork;
pub mod jsonl;
pub mod limits;
pub mod mcp;
pub mod providers;
pub mod record;
pub mod replay;
pub mod sandbox;
pub mod secrets;
pub mod sessions;
pub mod tools;
