//! Go to definition, find references and rename: all read the [`Index`](crate::Index) of
//! occurrences, so every place a name is written (spec, role files, templates) moves together.

use std::ops::Range;

use charter_compiler::check::{BUILTIN_CONTRACTS, Symbols};
use charter_compiler::names::snake_case;

use crate::index::{Def, Occurrence, Spelling};
use crate::{Analysis, FileRange};

/// A replacement of `range` in the file at `path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextEdit {
    pub path: String,
    pub range: Range<usize>,
    pub new_text: String,
}

impl Analysis {
    pub(crate) fn occurrence_at(&self, path: &str, offset: usize) -> Option<&Occurrence> {
        let file = self.file_id(path)?;
        self.index.at(file, offset)
    }

    /// Where the name at `offset` is defined: a role, contract, field, step, gate, rules
    /// block, tool or model; a file path jumps to the file; a template variable to the
    /// contract (or field) that feeds it.
    pub fn definition(&self, path: &str, offset: usize) -> Vec<FileRange> {
        let Some(occurrence) = self.occurrence_at(path, offset) else {
            return Vec::new();
        };
        if let Def::File(file) = &occurrence.def {
            return vec![FileRange {
                path: file.clone(),
                range: 0..0,
            }];
        }
        let found: Vec<FileRange> = self
            .index
            .of(&occurrence.def)
            .filter(|found| found.is_def)
            .filter_map(|found| self.file_range(found.span))
            .collect();
        // A tool of a server with `tools: *` is defined by no entry: go to the server.
        if let (true, Def::McpTool(server, _)) = (found.is_empty(), &occurrence.def) {
            let server = Def::Mcp(server.clone());
            return self
                .index
                .of(&server)
                .filter(|found| found.is_def)
                .filter_map(|found| self.file_range(found.span))
                .collect();
        }
        found
    }

    /// Every place the name at `offset` is written, its definitions included or not.
    pub fn references(
        &self,
        path: &str,
        offset: usize,
        include_definition: bool,
    ) -> Vec<FileRange> {
        let Some(occurrence) = self.occurrence_at(path, offset) else {
            return Vec::new();
        };
        self.index
            .of(&occurrence.def)
            .filter(|found| include_definition || !found.is_def)
            .filter_map(|found| self.file_range(found.span))
            .collect()
    }

    /// The range of the renamable name at `offset` and the name, or why it cannot be renamed.
    pub fn prepare_rename(&self, path: &str, offset: usize) -> Result<(FileRange, String), String> {
        let occurrence = self
            .occurrence_at(path, offset)
            .ok_or("no step, role, contract, gate or field here to rename")?;
        let name = renamable(&occurrence.def)?;
        let range = self
            .file_range(occurrence.span)
            .ok_or("the name is in a file this spec did not read")?;
        let shown = match occurrence.spelling {
            Spelling::Plain => name.to_string(),
            Spelling::Snake => snake_case(name),
        };
        if !self.index.of(&occurrence.def).any(|found| found.is_def) {
            return Err(format!("`{name}` is built in and cannot be renamed"));
        }
        Ok((range, shown))
    }

    /// The edits that rename the name at `offset` to `new_name` everywhere it is written
    /// (the spec, its role files and its templates), or why it cannot be renamed.
    pub fn rename(
        &self,
        path: &str,
        offset: usize,
        new_name: &str,
    ) -> Result<Vec<TextEdit>, String> {
        self.prepare_rename(path, offset)?;
        let occurrence = self
            .occurrence_at(path, offset)
            .ok_or("no name here to rename")?;
        let def = occurrence.def.clone();
        let old = renamable(&def)?.to_string();
        // A template reads a contract as its snake_case name: rename by what was written.
        let new_name = match occurrence.spelling {
            Spelling::Snake => self.contract_named_by(&def, new_name),
            Spelling::Plain => new_name.to_string(),
        };
        check_name(&new_name)?;
        if new_name == old {
            return Ok(Vec::new());
        }
        self.check_clash(&def, &new_name)?;
        let mut edits = Vec::new();
        for found in self.index.of(&def) {
            let (expected, replacement) = match found.spelling {
                Spelling::Plain => (old.clone(), new_name.clone()),
                Spelling::Snake => (snake_case(&old), snake_case(&new_name)),
            };
            let written = self.compilation.sources.snippet(found.span);
            let place = self.file_range(found.span).ok_or("a file went missing")?;
            if written != expected {
                let (line, column) = self
                    .compilation
                    .sources
                    .line_column(found.span.file, found.span.start);
                return Err(format!(
                    "`{old}` is written as `{written}` at {}:{line}:{column}; rename it there by hand",
                    place.path
                ));
            }
            edits.push(TextEdit {
                path: place.path,
                range: place.range,
                new_text: replacement,
            });
        }
        edits.sort_by(|a, b| (&a.path, a.range.start).cmp(&(&b.path, b.range.start)));
        edits.dedup();
        Ok(edits)
    }

    /// A rename typed on a template's `workflow_draft`: `draft` means contract `Draft`
    /// when written in snake_case; a name already capitalized is taken as it is.
    fn contract_named_by(&self, def: &Def, typed: &str) -> String {
        let _ = def;
        if typed.chars().next().is_some_and(char::is_uppercase) {
            return typed.to_string();
        }
        typed
            .split('_')
            .map(|part| {
                let mut chars = part.chars();
                chars
                    .next()
                    .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                    .unwrap_or_default()
            })
            .collect()
    }

    fn check_clash(&self, def: &Def, new_name: &str) -> Result<(), String> {
        let Some(ast) = &self.ast else {
            return Ok(());
        };
        let mut ignored = Vec::new();
        let symbols = Symbols::collect(ast, &mut ignored);
        let clash = match def {
            Def::Step(_) => symbols.steps.contains_key(new_name).then_some("step"),
            Def::Role(_) => symbols.roles.contains_key(new_name).then_some("role"),
            Def::Gate(_) => symbols.gates.contains_key(new_name).then_some("gate"),
            Def::Contract(_) => (symbols.contracts.contains_key(new_name)
                || BUILTIN_CONTRACTS.contains(&new_name))
            .then_some("contract"),
            Def::Field(contract, _) => symbols
                .contracts
                .get(contract.as_str())
                .is_some_and(|c| c.fields.iter().any(|f| f.name.name == new_name))
                .then_some("field"),
            _ => None,
        };
        match (clash, def) {
            (Some("field"), Def::Field(contract, _)) => Err(format!(
                "contract `{contract}` already has a field `{new_name}`; choose another name"
            )),
            (Some(kind), _) => Err(format!(
                "a {kind} named `{new_name}` already exists; choose another name"
            )),
            (None, _) => Ok(()),
        }
    }
}

/// The current name of a definition that can be renamed.
fn renamable(def: &Def) -> Result<&str, String> {
    match def {
        Def::Step(name) | Def::Role(name) | Def::Contract(name) | Def::Gate(name) => Ok(name),
        Def::Field(_, field) => Ok(field),
        _ => Err("only steps, roles, contracts, gates and fields can be renamed".to_string()),
    }
}

/// A new name must be an identifier and not a keyword of the language.
fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let starts_well = chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_');
    if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "`{name}` is not a valid name: use letters, digits and `_`, starting with a letter"
        ));
    }
    if RESERVED.contains(&name) {
        return Err(format!(
            "`{name}` is a word the language reserves; choose another name"
        ));
    }
    Ok(())
}

/// Words a renamed name may not be: the grammar's reserved words, the words that start an
/// item or a step's body, the flow's terminals and the names every expression sees.
const RESERVED: [&str; 31] = [
    "true",
    "false",
    "none",
    "and",
    "or",
    "not",
    "else",
    "when",
    "import",
    "models",
    "rules",
    "contract",
    "tool",
    "mcp",
    "role",
    "gate",
    "repair",
    "invariant",
    "budget",
    "session",
    "remember",
    "flow",
    "each",
    "finalize",
    "branch",
    "ask",
    "done",
    "blocked",
    "failed",
    "request",
    "candidate",
];
