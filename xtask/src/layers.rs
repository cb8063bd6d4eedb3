//! The architecture check behind `cargo xtask verify`'s `layers` stage: the runtime's layers import only downward, and no crate has an import circle between its modules.
//!
//! The runtime is four layers, lowest first: `formats` (canonical JSON, YAML, the trace,
//! scenarios and cassettes), `engine` (the scheduler and its pure policies), `world`
//! (providers, tools, recording, replay, files) and the top (`harness`, `explore`,
//! `totals`). A module is a layer's direct child (`engine::run`, `formats::trace`) or a
//! top module. Every `crate::…` path in a crate's sources (outside tests) is an arrow
//! from the module the file belongs to, to the module the path names; an arrow from a
//! lower layer to a higher one is refused, and so is any circle of arrows — in the
//! runtime, the compiler and the CLI alike. Each finding names the file, the line and the
//! path that made the arrow.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The runtime's layers, lowest first, and the top-level modules each holds. A top-level
/// module of the runtime missing from this table is a finding too (so a new one is
/// placed on purpose).
pub const RUNTIME_LAYERS: [(&str, &[&str]); 4] = [
    ("formats", &["formats"]),
    ("engine", &["engine"]),
    ("world", &["world"]),
    ("top", &["harness", "explore", "totals"]),
];

/// The layer folders: their direct children are the modules arrows are drawn between.
const LAYER_FOLDERS: [&str; 3] = ["formats", "engine", "world"];

/// Test-only modules at a crate's root: not part of the architecture.
const TEST_MODULES: [&str; 2] = ["testing", "robustness"];

/// One `crate::…` path in a source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrow {
    /// The module the file belongs to (`engine::run`).
    pub from: String,
    /// The module the path names (`world::replay`).
    pub to: String,
    /// The file, relative to the crate's `src/`.
    pub file: String,
    pub line: usize,
    /// The path as written (`crate::world::replay::ReplayProvider`).
    pub path: String,
}

/// What is wrong with a crate's arrows, each as one message naming its `use`.
pub fn check_crate(crate_name: &str, sources: &[(String, String)], layered: bool) -> Vec<String> {
    let arrows: Vec<Arrow> = sources
        .iter()
        .flat_map(|(file, text)| arrows_of(file, text, layered))
        .collect();
    let mut findings = Vec::new();
    if layered {
        findings.extend(unplaced_modules(crate_name, sources));
        findings.extend(upward_arrows(crate_name, &arrows));
        findings.extend(engine_effects(crate_name, sources));
    }
    findings.extend(circles(crate_name, &arrows));
    findings
}

/// Reads every `.rs` file under `src` (relative names, sorted), skipping test files.
pub fn read_sources(src: &Path) -> std::io::Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name != "tests") {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|ext| ext == "rs")
                && path.file_name().is_some_and(|name| name != "tests.rs")
            {
                let relative = path
                    .strip_prefix(src)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                files.push((relative, std::fs::read_to_string(&path)?));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The check of the whole workspace: the runtime layered, the compiler and the CLI
/// without circles. Returns the findings and how many arrows were read.
pub fn check_workspace(root: &Path) -> Result<(Vec<String>, usize), String> {
    let mut findings = Vec::new();
    let mut count = 0;
    for (crate_name, dir, layered) in [
        ("runtime", "runtime/src", true),
        ("compiler", "compiler/src", false),
        ("ide", "ide/src", false),
        ("cli", "cli/src", false),
    ] {
        let sources =
            read_sources(&root.join(dir)).map_err(|error| format!("cannot read {dir}: {error}"))?;
        count += sources
            .iter()
            .map(|(file, text)| arrows_of(file, text, layered).len())
            .sum::<usize>();
        findings.extend(check_crate(crate_name, &sources, layered));
    }
    Ok((findings, count))
}

/// The module a file belongs to: `engine/run/step.rs` is `engine::run`, `formats/trace.rs`
/// `formats::trace`, `harness/report.rs` `harness`; `None` for the crate root and
/// test-only modules.
fn module_of(file: &str, layered: bool) -> Option<String> {
    let trimmed = file.trim_end_matches(".rs");
    let mut parts = trimmed.split('/');
    let first = parts.next()?;
    if matches!(first, "lib" | "main") || TEST_MODULES.contains(&first) {
        return None;
    }
    if layered && LAYER_FOLDERS.contains(&first) {
        return match parts.next() {
            None | Some("mod") => Some(first.to_string()),
            Some(second) => Some(format!("{first}::{second}")),
        };
    }
    Some(first.to_string())
}

/// The module a path names: its first segment, or its first two under a layer folder.
fn module_named(path: &str, layered: bool) -> Option<String> {
    let mut segments = path.strip_prefix("crate::")?.split("::");
    let first = segments.next()?;
    if layered && LAYER_FOLDERS.contains(&first) {
        return match segments.next() {
            // A name defined by the layer's own `mod.rs`.
            Some(second) if second.chars().next().is_some_and(char::is_lowercase) => {
                Some(format!("{first}::{second}"))
            }
            _ => Some(first.to_string()),
        };
    }
    Some(first.to_string())
}

/// Every `crate::…` path outside comments, strings and `#[cfg(test)]` modules.
pub fn arrows_of(file: &str, text: &str, layered: bool) -> Vec<Arrow> {
    let Some(from) = module_of(file, layered) else {
        return Vec::new();
    };
    let code = code_only(text);
    let mut arrows = Vec::new();
    for (index, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find("crate::") {
            let before = rest[..start].chars().next_back();
            let tail = &rest[start..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            let path = tail[..end].trim_end_matches(':');
            rest = &tail[end..];
            // `$crate::` in a macro, or `charter_crate::`: not this crate's path.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            if rest.starts_with('{') {
                // `use crate::{a, b}` (or `crate::engine::{run, gate}`) names several modules.
                for name in group_after(rest) {
                    let path = format!("{path}::{name}");
                    push_arrow(&mut arrows, &from, file, index, &path, layered);
                }
                continue;
            }
            push_arrow(&mut arrows, &from, file, index, path, layered);
        }
    }
    arrows
}

fn push_arrow(
    arrows: &mut Vec<Arrow>,
    from: &str,
    file: &str,
    index: usize,
    path: &str,
    layered: bool,
) {
    if let Some(to) = module_named(path, layered)
        && to != from
    {
        arrows.push(Arrow {
            from: from.to_string(),
            to,
            file: file.to_string(),
            line: index + 1,
            path: path.to_string(),
        });
    }
}

/// The names of a `{a::x, b}` group at the start of `rest` (first line only).
fn group_after(rest: &str) -> Vec<String> {
    let Some(inner) = rest.strip_prefix('{') else {
        return Vec::new();
    };
    let inner = inner.split('}').next().unwrap_or("");
    inner
        .split(',')
        .map(|part| part.trim().to_string())
        .filter(|part| !part.is_empty())
        .collect()
}

/// The text with comments, string and char literals blanked and `#[cfg(test)]` items
/// removed, line breaks kept (so line numbers stay).
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        let next = chars.get(index + 1).copied();
        if c == '/' && next == Some('/') {
            while index < chars.len() && chars[index] != '\n' {
                index += 1;
            }
        } else if c == '/' && next == Some('*') {
            index += 2;
            while index < chars.len()
                && !(chars[index] == '*' && chars.get(index + 1) == Some(&'/'))
            {
                if chars[index] == '\n' {
                    out.push('\n');
                }
                index += 1;
            }
            index += 2;
        } else if c == '"'
            || (c == 'r' && (next == Some('"') || next == Some('#')) && raw_start(&chars, index))
        {
            index = skip_string(&chars, index, &mut out);
        } else if c == '\'' && chars.get(index + 2) == Some(&'\'') {
            out.push_str("' '");
            index += 3;
        } else {
            out.push(c);
            index += 1;
        }
    }
    without_test_items(&out)
}

/// Whether `r` at `index` starts a raw string (`r"`, `r#"`), not an identifier's `r`.
fn raw_start(chars: &[char], index: usize) -> bool {
    let before = index.checked_sub(1).and_then(|before| chars.get(before));
    if before.is_some_and(|c| c.is_alphanumeric() || *c == '_') {
        return false;
    }
    let mut at = index + 1;
    while chars.get(at) == Some(&'#') {
        at += 1;
    }
    chars.get(at) == Some(&'"')
}

/// Skips a string literal (plain or raw) starting at `index`, keeping its line breaks.
fn skip_string(chars: &[char], mut index: usize, out: &mut String) -> usize {
    let mut hashes = 0;
    if chars[index] == 'r' {
        index += 1;
        while chars.get(index) == Some(&'#') {
            hashes += 1;
            index += 1;
        }
    }
    let raw = hashes > 0 || chars.get(index.wrapping_sub(1)) == Some(&'r');
    index += 1;
    out.push_str("\"\"");
    while index < chars.len() {
        let c = chars[index];
        if c == '\n' {
            out.push('\n');
        }
        if c == '\\' && !raw {
            index += 2;
            continue;
        }
        if c == '"' && (0..hashes).all(|offset| chars.get(index + 1 + offset) == Some(&'#')) {
            return index + 1 + hashes;
        }
        index += 1;
    }
    index
}

/// Removes each `#[cfg(test)]` item (a `mod x { … }` block or a one-line `mod x;`),
/// keeping its line breaks.
fn without_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(start) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..start]);
        let item = &rest[start..];
        let end = match (item.find('{'), item.find(';')) {
            (Some(open), semicolon) if semicolon.is_none_or(|semicolon| open < semicolon) => {
                let mut depth = 0usize;
                let mut end = item.len();
                for (offset, c) in item[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + offset + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(semicolon)) => semicolon + 1,
            _ => item.len(),
        };
        out.extend(item[..end].chars().filter(|c| *c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// What the engine may not name outside its side-effect boundary (`engine/effects.rs`):
/// file, process, network and environment access, and tokio's clock and timers. The
/// engine acts on the outside world only through the traits it is given.
const ENGINE_FORBIDDEN: [&str; 12] = [
    "std::fs",
    "fs::",
    "std::net",
    "std::process",
    "std::env",
    "tokio::fs",
    "tokio::process",
    "tokio::net",
    "tokio::time::sleep",
    "tokio::time::timeout",
    "Instant::now",
    "reqwest",
];

/// The engine does no I/O: every use of a name in [`ENGINE_FORBIDDEN`] in an engine file
/// other than `engine/effects.rs`, outside tests.
fn engine_effects(crate_name: &str, sources: &[(String, String)]) -> Vec<String> {
    let mut findings = Vec::new();
    for (file, text) in sources {
        if !file.starts_with("engine/") || file == "engine/effects.rs" {
            continue;
        }
        for (index, line) in code_only(text).lines().enumerate() {
            // One finding a line: the first name it uses.
            let used = ENGINE_FORBIDDEN.iter().find(|name| {
                line.match_indices(*name)
                    .any(|(at, _)| !line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
            });
            if let Some(name) = used {
                findings.push(format!(
                    "{crate_name}/src/{file}:{}: `{name}`: the engine does no I/O; act through the traits of engine::effects (Provider, HumanChannel, Clock, Files, TraceSink)",
                    index + 1
                ));
            }
        }
    }
    findings
}

/// The rank of a runtime module's layer (0 = `formats`), or `None` for one in no layer.
fn layer_rank(module: &str) -> Option<usize> {
    let top = module.split("::").next().unwrap_or(module);
    RUNTIME_LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&top))
}

fn layer_name(rank: usize) -> &'static str {
    RUNTIME_LAYERS[rank].0
}

/// Top-level modules of a layered crate that no layer holds.
fn unplaced_modules(crate_name: &str, sources: &[(String, String)]) -> Vec<String> {
    let modules: BTreeSet<String> = sources
        .iter()
        .filter_map(|(file, _)| module_of(file, true))
        .map(|module| module.split("::").next().unwrap_or("").to_string())
        .collect();
    modules
        .into_iter()
        .filter(|module| layer_rank(module).is_none())
        .map(|module| {
            format!(
                "{crate_name}: module `{module}` is in no layer: move it under formats/, engine/ or world/, or name it in RUNTIME_LAYERS (xtask/src/layers.rs)"
            )
        })
        .collect()
}

/// Arrows from a lower layer to a higher one.
fn upward_arrows(crate_name: &str, arrows: &[Arrow]) -> Vec<String> {
    arrows
        .iter()
        .filter_map(|arrow| {
            let from = layer_rank(&arrow.from)?;
            let to = layer_rank(&arrow.to)?;
            (to > from).then(|| {
                format!(
                    "{crate_name}/src/{}:{}: `{}`: {} (layer `{}`) imports {} (layer `{}`); a lower layer never imports a higher one ({})",
                    arrow.file,
                    arrow.line,
                    arrow.path,
                    arrow.from,
                    layer_name(from),
                    arrow.to,
                    layer_name(to),
                    RUNTIME_LAYERS.map(|(name, _)| name).join(" < "),
                )
            })
        })
        .collect()
}

/// Every circle of arrows between modules, each shown as its modules in order and the
/// `use` behind each step.
fn circles(crate_name: &str, arrows: &[Arrow]) -> Vec<String> {
    let mut first_arrow: BTreeMap<(&str, &str), &Arrow> = BTreeMap::new();
    for arrow in arrows {
        first_arrow
            .entry((arrow.from.as_str(), arrow.to.as_str()))
            .or_insert(arrow);
    }
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in first_arrow.keys() {
        edges.entry(from).or_default().insert(to);
    }
    let mut findings = Vec::new();
    let mut reported: BTreeSet<BTreeSet<&str>> = BTreeSet::new();
    for start in edges.keys() {
        if let Some(cycle) = shortest_cycle(&edges, start) {
            let members: BTreeSet<&str> = cycle.iter().copied().collect();
            if !reported.insert(members) {
                continue;
            }
            let mut message = format!(
                "{crate_name}: an import circle: {} -> {}",
                cycle.join(" -> "),
                cycle[0]
            );
            for (index, from) in cycle.iter().enumerate() {
                let to = cycle[(index + 1) % cycle.len()];
                if let Some(arrow) = first_arrow.get(&(*from, to)) {
                    message.push_str(&format!(
                        "\n    {crate_name}/src/{}:{}: `{}`",
                        arrow.file, arrow.line, arrow.path
                    ));
                }
            }
            findings.push(message);
        }
    }
    findings
}

/// The shortest circle through `start` (breadth first), as its modules from `start`.
fn shortest_cycle<'a>(
    edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    start: &'a str,
) -> Option<Vec<&'a str>> {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for next in edges.get(node).into_iter().flatten() {
            if *next == start {
                let mut path = vec![node];
                let mut at = node;
                while at != start {
                    at = parent[at];
                    path.push(at);
                }
                path.reverse();
                return Some(path);
            }
            if !parent.contains_key(next) && *next != start {
                parent.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(files: &[(&str, &str)]) -> Vec<(String, String)> {
        files
            .iter()
            .map(|(file, text)| (file.to_string(), text.to_string()))
            .collect()
    }

    #[test]
    fn an_arrow_from_a_lower_layer_to_a_higher_one_is_named_with_its_use() {
        let findings = check_crate(
            "runtime",
            &sources(&[
                (
                    "engine/run/mod.rs",
                    "//! x\nuse crate::formats::trace::TraceEvent;\nuse crate::world::replay::ReplayProvider;\n",
                ),
                (
                    "world/replay.rs",
                    "//! x\nuse crate::engine::provider::CallKey;\n",
                ),
                ("formats/trace.rs", "//! x\n"),
            ]),
            true,
        );
        assert_eq!(
            findings,
            [
                "runtime/src/engine/run/mod.rs:3: `crate::world::replay::ReplayProvider`: engine::run (layer `engine`) imports world::replay (layer `world`); a lower layer never imports a higher one (formats < engine < world < top)"
            ]
        );
    }

    #[test]
    fn a_circle_is_named_with_the_use_behind_each_step() {
        let findings = check_crate(
            "compiler",
            &sources(&[
                ("check/mod.rs", "//! x\nuse crate::graph::ir::X;\n"),
                ("graph/lower.rs", "//! x\n\nfn f() { crate::check::y(); }\n"),
                ("diagnostics.rs", "//! x\n"),
            ]),
            false,
        );
        assert_eq!(
            findings,
            [
                "compiler: an import circle: check -> graph -> check\n    compiler/src/check/mod.rs:2: `crate::graph::ir::X`\n    compiler/src/graph/lower.rs:3: `crate::check::y`"
            ]
        );
    }

    #[test]
    fn comments_strings_and_test_modules_draw_no_arrow() {
        let text = "//! see [`crate::world::files`]\n/* crate::harness */\nconst A: &str = \"crate::explore\";\nconst B: &str = r#\"crate::explore\"#;\n#[cfg(test)]\nmod tests {\n    use crate::harness::x;\n}\nuse crate::formats::yaml;\n";
        let arrows = arrows_of("engine/gate.rs", text, true);
        assert_eq!(arrows.len(), 1, "{arrows:?}");
        assert_eq!(
            (arrows[0].to.as_str(), arrows[0].line),
            ("formats::yaml", 9)
        );
    }

    #[test]
    fn a_group_import_draws_one_arrow_per_module() {
        let arrows = arrows_of(
            "world/record.rs",
            "use crate::{engine::run, formats::trace::X};\n",
            true,
        );
        let targets: Vec<&str> = arrows.iter().map(|arrow| arrow.to.as_str()).collect();
        assert_eq!(targets, ["engine::run", "formats::trace"]);
    }

    #[test]
    fn the_engine_names_no_file_clock_or_process_outside_its_effects() {
        let findings = check_crate(
            "runtime",
            &sources(&[
                (
                    "engine/run/mod.rs",
                    "//! x\nfn now() { let _ = tokio::time::Instant::now(); }\n#[cfg(test)]\nmod tests { fn t() { std::fs::read(\"x\"); } }\n",
                ),
                (
                    "engine/effects.rs",
                    "//! x\nfn now() { let _ = tokio::time::Instant::now(); }\n",
                ),
                (
                    "engine/candidate.rs",
                    "//! x\nuse std::fs;\nfn f() { let _ = xfs::y; std::fs::read(\"a\"); }\n",
                ),
            ]),
            true,
        );
        assert_eq!(
            findings,
            [
                "runtime/src/engine/run/mod.rs:2: `Instant::now`: the engine does no I/O; act through the traits of engine::effects (Provider, HumanChannel, Clock, Files, TraceSink)",
                "runtime/src/engine/candidate.rs:2: `std::fs`: the engine does no I/O; act through the traits of engine::effects (Provider, HumanChannel, Clock, Files, TraceSink)",
                "runtime/src/engine/candidate.rs:3: `std::fs`: the engine does no I/O; act through the traits of engine::effects (Provider, HumanChannel, Clock, Files, TraceSink)",
            ]
        );
    }

    #[test]
    fn a_top_level_module_in_no_layer_is_a_finding() {
        let findings = check_crate("runtime", &sources(&[("stray.rs", "//! x\n")]), true);
        assert_eq!(findings.len(), 1);
        assert!(
            findings[0].contains("module `stray` is in no layer"),
            "{findings:?}"
        );
    }

    #[test]
    fn the_workspace_keeps_its_layers_and_has_no_circle() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let (findings, arrows) = check_workspace(&root).expect("the workspace's sources read");
        assert!(
            arrows > 100,
            "only {arrows} arrows read: is the parser broken?"
        );
        assert!(findings.is_empty(), "{}", findings.join("\n"));
    }
}
