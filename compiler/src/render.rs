//! Rendering diagnostics: rustc-like text (colour only when asked) and JSON.
