//! Name resolution and typing of expressions, role calls and literals (E002, E004, E005, E013).

use crate::check::Symbols;
use crate::diagnostics::Diagnostic;
use crate::syntax::ast::SpecFile;

/// Resolved facts about expressions and calls, for the graph builder.
#[derive(Debug, Default)]
pub struct TypeFacts {}

pub fn check(
    _spec: &SpecFile,
    _symbols: &Symbols<'_>,
    _diagnostics: &mut Vec<Diagnostic>,
) -> TypeFacts {
    TypeFacts::default()
}
