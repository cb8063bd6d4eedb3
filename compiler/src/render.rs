//! Rendering diagnostics: rustc-like text (colour only when asked) and JSON.

use crate::diagnostics::{Diagnostic, Sources};

/// Renders diagnostics as rustc-like text; `color` adds ANSI colours.
pub fn text(diagnostics: &[Diagnostic], _sources: &Sources, _color: bool) -> String {
    diagnostics
        .iter()
        .map(|diagnostic| format!("{}[{}]: {}\n", "error", diagnostic.code, diagnostic.message))
        .collect()
}

/// Renders diagnostics as JSON lines, one object per diagnostic.
pub fn json(_diagnostics: &[Diagnostic], _sources: &Sources) -> String {
    String::new()
}
