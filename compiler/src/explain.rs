//! `charter explain CODE`: a paragraph on each diagnostic code with a wrong and a right example.

use crate::diagnostics::Code;

/// The explanation of `code`: a paragraph, a wrong example and a right one.
pub fn explain(code: Code) -> &'static str {
    match code {
        _ => "",
    }
}
