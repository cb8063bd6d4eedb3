//! The files prompt templates include (`{% include "piece.j2" %}`), read through the spec's loader while parsing, as `file(...)` prompts are, so that the checks and the lowering do no I/O.
//!
//! An include names a file relative to the template that includes it
//! ([`render_env::include_path`]); every file reached is read once, whichever role's
//! template (or which included piece) names it, and recorded in [`SpecFile::includes`]
//! with the reason when it could not be read. The template check reports those where the
//! `include` tag is (E016), and looks into what was read.

use crate::Loader;
use crate::diagnostics::{FileId, Sources};
use crate::render_env::include_path;
use crate::syntax::ast::{Item, PromptSource, Role, SpecFile};
use crate::syntax::template_uses as uses;

/// [`crate::graph::PromptIr::source`] of an inline prompt.
pub const INLINE_SOURCE: &str = "inline";

/// The most files the templates of one spec may include, all roles together: a bound on
/// what a spec can make the compiler read.
pub const MAX_INCLUDED_FILES: usize = 256;

/// Reads every file the templates of `spec`'s roles include, transitively, into
/// `sources`, and records each in `spec.includes` by its template name.
pub fn load(spec: &mut SpecFile, sources: &mut Sources, loader: &dyn Loader) {
    // (the including template's name, its text)
    let mut pending: Vec<(String, String)> = roles(spec)
        .filter_map(|role| template(role, sources))
        .collect();
    while let Some((parent, text)) = pending.pop() {
        for found in uses::scan(&text) {
            if found.kind != uses::Kind::Include {
                continue;
            }
            let name = resolve(&parent, &found.name);
            if spec.includes.contains_key(&name) {
                continue;
            }
            let read = if spec.includes.len() >= MAX_INCLUDED_FILES {
                Err(format!(
                    "the templates of this spec include more than {MAX_INCLUDED_FILES} files"
                ))
            } else {
                read(&found.name, &name, loader)
            };
            let read = read.map(|loaded| {
                pending.push((name.clone(), loaded.text.clone()));
                sources.add(loaded.display_name, loaded.text)
            });
            spec.includes.insert(name, read);
        }
    }
}

/// The template name `{% include "written" %}` in template `parent` reads: relative to
/// `parent`'s directory, or `written` itself when it is absolute (which is refused).
pub fn resolve(parent: &str, written: &str) -> String {
    if written.starts_with('/') {
        written.to_string()
    } else {
        include_path(parent, written)
    }
}

/// The name a role's own template has for its includes: its file's path as the spec
/// writes it, or [`INLINE_SOURCE`] (in the spec's directory) for an inline prompt.
pub fn template_name(role: &Role) -> Option<&str> {
    match &role.prompt.as_ref()?.source {
        PromptSource::Inline(_) => Some(INLINE_SOURCE),
        PromptSource::File { path, .. } => Some(&path.value),
    }
}

/// Reads included file `name` (written `written`): only inside the spec's directory, by
/// the path's text (the loader also keeps it inside the project).
fn read(written: &str, name: &str, loader: &dyn Loader) -> Result<crate::LoadedFile, String> {
    if written.starts_with('/') {
        return Err(format!("`{written}` is an absolute path"));
    }
    if name == ".." || name.starts_with("../") {
        return Err(format!(
            "`{written}` leads to `{name}`, outside the spec's directory"
        ));
    }
    loader.load(name)
}

fn roles(spec: &SpecFile) -> impl Iterator<Item = &Role> {
    spec.items.iter().filter_map(|item| match item {
        Item::Role(role) => Some(role),
        Item::Import(import) => import.role.as_ref(),
        _ => None,
    })
}

/// A role's template name and text: a role file's body, a prompt file whole, or the
/// inline block.
fn template(role: &Role, sources: &Sources) -> Option<(String, String)> {
    let prompt = role.prompt.as_ref()?;
    let name = template_name(role)?.to_string();
    let text = match &prompt.source {
        PromptSource::Inline(literal) => literal.value.clone(),
        PromptSource::File { file, .. } => {
            let file: FileId = (*file)?;
            if prompt.span.file == file {
                sources.snippet(prompt.span).to_string()
            } else {
                sources.get(file)?.text.clone()
            }
        }
    };
    Some((name, text))
}
