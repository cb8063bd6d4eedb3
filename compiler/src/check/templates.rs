//! Prompt templates: parsed with minijinja and checked for variables the role does not provide (E014).

use crate::check::Symbols;
use crate::diagnostics::{Diagnostic, Sources};
use crate::syntax::ast::SpecFile;

/// The variables each role's template uses.
#[derive(Debug, Default)]
pub struct TemplateFacts {}

pub fn check(
    _spec: &SpecFile,
    _symbols: &Symbols<'_>,
    _sources: &Sources,
    _diagnostics: &mut Vec<Diagnostic>,
) -> TemplateFacts {
    TemplateFacts::default()
}
