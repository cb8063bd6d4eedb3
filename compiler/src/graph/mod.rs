//! The compiled graph (IR): what the runtime knows of a spec, lowered from the checked AST.
//!
//! [`build`] lowers an error-free spec to a [`CompiledSpec`] (types in [`ir`]); [`to_mermaid`]
//! and [`to_dot`] draw its flow; `serde_json::to_string_pretty(&compiled)` is the JSON form
//! (deterministic: every map is a `BTreeMap`, every list keeps source order).

pub mod hash;
pub mod ir;
mod lower;
pub mod render;
pub mod schema;

pub use ir::*;
pub use lower::{
    DEFAULT_BACKOFF_MS, DEFAULT_CHECK_RETRIES, DEFAULT_CONCURRENCY, DEFAULT_NO_PROGRESS,
    DEFAULT_RETRY, INLINE_SOURCE,
};

use crate::check::Checked;
use crate::diagnostics::{Code, Diagnostic, Sources, Span};
use crate::syntax::ast::SpecFile;

/// Lowering met something a check should have rejected: a missing check, not a user error.
#[derive(Clone, Debug)]
pub struct InternalError {
    pub message: String,
}

impl InternalError {
    pub fn into_diagnostic(self, span: Span) -> Diagnostic {
        Diagnostic::new(
            Code::E000,
            span,
            format!("internal compiler error: {}", self.message),
        )
        .with_help("this is a bug in charter: a check is missing; please report it with the spec")
    }
}

/// Lowers a checked, error-free spec to its compiled graph. Names are resolved from the
/// symbol tables; from `checked` it takes which bare names are enum variants and the
/// contract of `request`.
pub fn build(
    spec: &SpecFile,
    checked: &Checked,
    sources: &Sources,
) -> Result<CompiledSpec, InternalError> {
    lower::lower(spec, checked, sources)
}

/// The flow graph as a Mermaid flowchart: steps as nodes (gates as rhombi, `ask` as
/// parallelograms, `finalize` as subroutines), transitions labelled with their conditions
/// (`when x`, `else`, `pass`, `fail`), repair edges dashed and labelled with their codes,
/// terminals (`done`, `blocked`, `failed`) in their own shapes and colours. Transitions
/// between the same two nodes are one edge (one condition a line). A `fail -> repair`
/// gate also shows, dashed, what the repair table does off the graph: an `ask` arm's
/// question (approved: its subject runs again; else: `best` is finalized), `accept` arms
/// and repair stopping (rounds exhausted, no progress, no repair action) into the
/// finalize step. Long labels are broken into lines (name, body, options).
pub fn to_mermaid(spec: &CompiledSpec) -> String {
    render::mermaid(spec)
}

/// The flow graph in Graphviz DOT, with the same content as [`to_mermaid`].
pub fn to_dot(spec: &CompiledSpec) -> String {
    render::dot(spec)
}

#[cfg(test)]
mod tests;
