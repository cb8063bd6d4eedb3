//! Formatting a spec as `charter fmt` does: the whole document in, one edit out.

use std::ops::Range;

use crate::LineIndex;
use crate::navigate::TextEdit;

/// The edit that puts the spec `text` (the document at `path`) in the canonical layout,
/// or `None` when it already is. A file that cannot be formatted at all (its header does
/// not parse, or a `/*` is never closed) gives the reason, with its line, as `charter fmt`
/// says it.
pub fn format(path: &str, text: &str) -> Result<Option<TextEdit>, String> {
    match charter_compiler::format::format(text) {
        Ok(formatted) if formatted == text => Ok(None),
        Ok(formatted) => Ok(Some(TextEdit {
            path: path.to_string(),
            range: Range {
                start: 0,
                end: text.len(),
            },
            new_text: formatted,
        })),
        Err(error) => {
            let index = LineIndex::new(text);
            let reasons: Vec<String> = error
                .diagnostics
                .iter()
                .map(|diagnostic| match diagnostic.primary_span() {
                    Some(span) => {
                        let line = index.position(span.start as usize).0 + 1;
                        format!("line {line}: {}", diagnostic.message)
                    }
                    None => diagnostic.message.clone(),
                })
                .collect();
            Err(format!("cannot format this file: {}", reasons.join("; ")))
        }
    }
}
