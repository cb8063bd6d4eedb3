//! `charter.lock` (DESIGN §19): the compiler's format (`charter_compiler::lock`), which `check` reads to check MCP tools offline and `charter lock` writes through here.

pub use charter_compiler::lock::{
    LOCK_FILE, LOCK_VERSION, Lock, LockedServer, LockedTool, ServerIdentity,
};
