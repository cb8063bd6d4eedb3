//! Flow rules: loops, reachability, repair coverage, invariants, judges, finalize, task DAGs (E006–E012, E015) and warnings.

use crate::check::Symbols;
use crate::diagnostics::Diagnostic;
use crate::syntax::ast::SpecFile;

/// Facts about the flow graph, for the graph builder.
#[derive(Debug, Default)]
pub struct FlowFacts {}

pub fn check(
    _spec: &SpecFile,
    _symbols: &Symbols<'_>,
    _names_clean: bool,
    _diagnostics: &mut Vec<Diagnostic>,
) -> FlowFacts {
    FlowFacts::default()
}
