//! The architecture check behind `cargo xtask layers` and `cargo xtask verify`'s `layers` stage: no file import circle in any crate, the runtime's layers import only downward and its engine does no I/O, and a CLI command is a leaf.
//!
//! Every source file of the runtime, the compiler, the IDE crate, the CLI and xtask is read
//! with a Rust parser (`syn`), so every path is seen whatever its form: `use` trees over
//! many lines, nested groups, renames and globs; `crate::`, `super::` (any number of them)
//! and `self::` paths; child modules (`mod x;`) and names brought in by `use`; and paths in
//! expressions, types, patterns, macro and attribute arguments. Each path is resolved to a
//! FILE: the longest prefix of it that is a module with its own file (`a/b.rs`,
//! `a/b/mod.rs`, or a `#[path]` given by its `mod` item). A path from a file to another is
//! an arrow, except from a module to its own descendants (that is a declaration:
//! `eval/mod.rs` calling `output::print`). A child naming its parent (`super::X`) is an
//! arrow. Code under `#[cfg(test)]`, test-only modules and test files (`tests.rs`,
//! `tests/`) draw none.
//!
//! The rules, each finding naming the file, the line and the path that made the arrow:
//! - no circle of arrows between files, in any crate (each circle is reported once, with
//!   every arrow in it);
//! - the runtime is four layers, lowest first ([`RUNTIME_LAYERS`]): `formats` (canonical
//!   JSON, YAML, the trace, scenarios and cassettes), `engine` (the scheduler and its pure
//!   policies), `world` (providers, tools, recording, replay, files) and the top
//!   (`harness`, `explore`, `totals`); no arrow goes from a lower layer to a higher one, and
//!   a top-level module in no layer is a finding;
//! - the engine names no file, process, network, environment or clock outside
//!   `engine/effects.rs` ([`ENGINE_FORBIDDEN`]);
//! - a top-level module of the CLI is a command ([`CLI_COMMANDS`]) or shared
//!   ([`CLI_SHARED`]); a command imports no other command, a shared module imports no
//!   command (`main.rs` may import anything), and a module in neither table is a finding.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};

/// The CLI's commands: top-level modules of `cli/src` (a file `x.rs` or a folder `x/`)
/// that implement one `charter` command. A command is a leaf: it imports no other command.
pub const CLI_COMMANDS: [&str; 20] = [
    "check",
    "lock",
    "fmt",
    "graph",
    "explain",
    "replay",
    "verify",
    "review",
    "run",
    "fork",
    "chat",
    "serve",
    "worker",
    "view",
    "new",
    "completions",
    "schema",
    "explore",
    "eval",
    "lsp",
];

/// The CLI's shared modules: what several commands use. They import no command.
pub const CLI_SHARED: [&str; 8] = [
    "terminal",
    "loader",
    "recording",
    "display",
    "driver",
    "chat_role",
    "stream_rows",
    "page",
];

/// The runtime's layers, lowest first, and the top-level modules each holds. A top-level
/// module of the runtime missing from this table is a finding too (so a new one is
/// placed on purpose).
pub const RUNTIME_LAYERS: [(&str, &[&str]); 4] = [
    ("formats", &["formats"]),
    ("engine", &["engine"]),
    ("world", &["world"]),
    ("top", &["harness", "explore", "totals"]),
];

/// What the engine may not name outside its side-effect boundary (`engine/effects.rs`):
/// file, process, network and environment access, and tokio's clock and timers. The
/// engine acts on the outside world only through the traits it is given. Each is matched
/// against the segments of every path (`fs::` needs something after `fs`).
pub const ENGINE_FORBIDDEN: [&str; 12] = [
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

/// The crates checked, their sources and the rules beyond "no circle".
pub const CRATES: [(&str, &str, Rules); 5] = [
    ("runtime", "runtime/src", Rules::RuntimeLayers),
    ("compiler", "compiler/src", Rules::NoCircle),
    ("ide", "ide/src", Rules::NoCircle),
    ("cli", "cli/src", Rules::CliCommands),
    ("xtask", "xtask/src", Rules::NoCircle),
];

/// The rules a crate is held to; every crate has no file circle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rules {
    NoCircle,
    /// The runtime: [`RUNTIME_LAYERS`] and [`ENGINE_FORBIDDEN`] too.
    RuntimeLayers,
    /// The CLI: [`CLI_COMMANDS`] and [`CLI_SHARED`] too.
    CliCommands,
}

/// The kind of a finding, for grouping them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    Unreadable,
    Circle,
    RuntimeUnplaced,
    RuntimeUpward,
    EngineEffects,
    CliUnplaced,
    CliCommandImport,
}

impl Rule {
    /// What the rule asks, as a heading.
    pub fn title(self) -> &'static str {
        match self {
            Rule::Unreadable => "files the parser cannot read",
            Rule::Circle => "file import circles",
            Rule::RuntimeUnplaced => "runtime modules in no layer",
            Rule::RuntimeUpward => "runtime arrows from a lower layer to a higher one",
            Rule::EngineEffects => "I/O named by the engine outside engine/effects.rs",
            Rule::CliUnplaced => "CLI modules in neither CLI_COMMANDS nor CLI_SHARED",
            Rule::CliCommandImport => "CLI commands imported by another command or a shared module",
        }
    }
}

/// One thing wrong, as a message naming the file, the line and the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub crate_name: String,
    pub rule: Rule,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// One path from a file to another file of the same crate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrow {
    /// The file the path is in, relative to the crate's `src/`.
    pub from: String,
    /// The file the path resolves to.
    pub to: String,
    pub line: usize,
    /// The path as written (`super::output::Format`, `crate::a::{b}`, `crate::a::B as C`).
    pub path: String,
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

/// The check of every crate in [`CRATES`]. Returns the findings (crate by crate, rule by
/// rule) and how many arrows were read.
pub fn check_workspace(root: &Path) -> Result<(Vec<Finding>, usize), String> {
    let mut findings = Vec::new();
    let mut count = 0;
    for (crate_name, dir, rules) in CRATES {
        let sources =
            read_sources(&root.join(dir)).map_err(|error| format!("cannot read {dir}: {error}"))?;
        let model = CrateModel::read(crate_name, &sources);
        count += model.arrows.len();
        findings.extend(model.findings(rules));
    }
    Ok((findings, count))
}

/// The findings as text, grouped by crate and rule under a heading each.
pub fn grouped(findings: &[Finding]) -> String {
    let mut groups: BTreeMap<(&str, Rule), Vec<&Finding>> = BTreeMap::new();
    for finding in findings {
        groups
            .entry((finding.crate_name.as_str(), finding.rule))
            .or_default()
            .push(finding);
    }
    let mut crates: Vec<&str> = Vec::new();
    for finding in findings {
        if !crates.contains(&finding.crate_name.as_str()) {
            crates.push(&finding.crate_name);
        }
    }
    let mut out = String::new();
    for name in crates {
        for ((crate_name, rule), members) in &groups {
            if *crate_name != name {
                continue;
            }
            out.push_str(&format!("{name}: {} ({})\n", rule.title(), members.len()));
            for finding in members {
                for line in finding.message.lines() {
                    out.push_str(&format!("  {line}\n"));
                }
            }
        }
    }
    out
}

/// What is wrong with one crate's sources under `rules`.
pub fn check_crate(crate_name: &str, sources: &[(String, String)], rules: Rules) -> Vec<Finding> {
    CrateModel::read(crate_name, sources).findings(rules)
}

/// Every arrow between the files of one crate (for tests and tools).
pub fn crate_arrows(sources: &[(String, String)]) -> Vec<Arrow> {
    CrateModel::read("crate", sources).arrows
}

/// One crate as the check sees it: its files, their modules, what each file names.
struct CrateModel {
    crate_name: String,
    /// The module of each file that is not test-only (`eval/output.rs` is `eval::output`).
    modules: BTreeMap<String, Vec<String>>,
    /// Every path of every file outside tests, as written, with its line.
    paths: BTreeMap<String, Vec<(usize, Vec<String>)>>,
    arrows: Vec<Arrow>,
    unreadable: Vec<Finding>,
}

impl CrateModel {
    /// Parses every file, finds the module tree from the files' names and their `mod`
    /// items, and resolves every path to a file.
    fn read(crate_name: &str, sources: &[(String, String)]) -> CrateModel {
        let mut parsed = Vec::new();
        let mut unreadable = Vec::new();
        for (file, text) in sources {
            match syn::parse_file(text) {
                Ok(syntax) => parsed.push((file.as_str(), syntax)),
                Err(error) => unreadable.push(Finding {
                    crate_name: crate_name.to_string(),
                    rule: Rule::Unreadable,
                    message: format!(
                        "{crate_name}/src/{file}:{}: cannot be read as Rust: {error}",
                        error.span().start().line
                    ),
                }),
            }
        }
        let tree = ModuleTree::of(&parsed);
        let mut modules = BTreeMap::new();
        let mut paths = BTreeMap::new();
        let mut arrows = Vec::new();
        for (file, syntax) in &parsed {
            let module = tree.module_of(file);
            if tree.is_test_only(&module) {
                continue;
            }
            let reading = PathReader::read(&module, syntax);
            for reference in reading.references {
                let Some(to) = tree.file_of(&reference.target) else {
                    continue;
                };
                let to_module = tree.module_of(to);
                // A file naming itself, or a module naming its own descendants
                // (a declaration), draws no arrow.
                if to == *file || to_module.starts_with(&module) {
                    continue;
                }
                arrows.push(Arrow {
                    from: file.to_string(),
                    to: to.to_string(),
                    line: reference.line,
                    path: reference.path,
                });
            }
            paths.insert(file.to_string(), reading.paths);
            modules.insert(file.to_string(), module);
        }
        arrows.sort_by(|a, b| (&a.from, a.line, &a.to).cmp(&(&b.from, b.line, &b.to)));
        CrateModel {
            crate_name: crate_name.to_string(),
            modules,
            paths,
            arrows,
            unreadable,
        }
    }

    fn findings(&self, rules: Rules) -> Vec<Finding> {
        let mut findings = self.unreadable.clone();
        match rules {
            Rules::NoCircle => {}
            Rules::RuntimeLayers => {
                findings.extend(self.unplaced_runtime_modules());
                findings.extend(self.upward_arrows());
                findings.extend(self.engine_effects());
            }
            Rules::CliCommands => {
                findings.extend(self.unplaced_cli_modules());
                findings.extend(self.command_imports());
            }
        }
        findings.extend(self.circles());
        findings
    }

    fn finding(&self, rule: Rule, message: String) -> Finding {
        Finding {
            crate_name: self.crate_name.clone(),
            rule,
            message,
        }
    }

    /// The arrows grouped by pair of files, each group in line order, the groups by their
    /// first arrow (file, then line).
    fn pairs(&self) -> Vec<((&str, &str), Vec<&Arrow>)> {
        let mut pairs: Vec<_> = self.edges().into_iter().collect();
        pairs.sort_by_key(|((from, _), uses)| (*from, uses[0].line));
        pairs
    }

    /// The arrows grouped by (from, to) file, each group in line order.
    fn edges(&self) -> BTreeMap<(&str, &str), Vec<&Arrow>> {
        let mut edges: BTreeMap<(&str, &str), Vec<&Arrow>> = BTreeMap::new();
        for arrow in &self.arrows {
            edges
                .entry((arrow.from.as_str(), arrow.to.as_str()))
                .or_default()
                .push(arrow);
        }
        edges
    }

    /// `crate/src/file:line: `path`` for the first arrow of an edge, and how many more.
    fn site(&self, uses: &[&Arrow]) -> (String, String) {
        let first = uses[0];
        let more = match uses.len() - 1 {
            0 => String::new(),
            1 => " (and 1 more use in this file)".to_string(),
            more => format!(" (and {more} more uses in this file)"),
        };
        (
            format!(
                "{}/src/{}:{}: `{}`",
                self.crate_name, first.from, first.line, first.path
            ),
            more,
        )
    }

    /// The top-level module of a file (`verify` for `verify/json.rs`), `None` for the root.
    fn top_module(&self, file: &str) -> Option<&str> {
        self.modules
            .get(file)
            .and_then(|module| module.first())
            .map(String::as_str)
    }

    /// The top-level modules of the crate (the root's children with a file).
    fn top_modules(&self) -> BTreeSet<&str> {
        self.modules
            .keys()
            .filter_map(|file| self.top_module(file))
            .collect()
    }

    fn unplaced_runtime_modules(&self) -> Vec<Finding> {
        self.top_modules()
            .into_iter()
            .filter(|module| layer_rank(module).is_none())
            .map(|module| {
                self.finding(
                    Rule::RuntimeUnplaced,
                    format!(
                        "{}: module `{module}` is in no layer: move it under formats/, engine/ or world/, or name it in RUNTIME_LAYERS (xtask/src/layers.rs)",
                        self.crate_name
                    ),
                )
            })
            .collect()
    }

    /// Arrows from a lower layer to a higher one, one finding for each pair of files.
    fn upward_arrows(&self) -> Vec<Finding> {
        let mut findings = Vec::new();
        for ((from, to), uses) in self.pairs() {
            let (Some(from_rank), Some(to_rank)) = (
                self.top_module(from).and_then(layer_rank),
                self.top_module(to).and_then(layer_rank),
            ) else {
                continue;
            };
            if to_rank <= from_rank {
                continue;
            }
            let (site, more) = self.site(&uses);
            findings.push(self.finding(
                Rule::RuntimeUpward,
                format!(
                    "{site}: {from} (layer `{}`) imports {to} (layer `{}`); a lower layer never imports a higher one ({}){more}",
                    RUNTIME_LAYERS[from_rank].0,
                    RUNTIME_LAYERS[to_rank].0,
                    RUNTIME_LAYERS.map(|(name, _)| name).join(" < "),
                ),
            ));
        }
        findings
    }

    /// The engine does no I/O: on each line of an engine file other than
    /// `engine/effects.rs`, the first name of [`ENGINE_FORBIDDEN`] one of its paths uses.
    fn engine_effects(&self) -> Vec<Finding> {
        let mut findings = Vec::new();
        for (file, paths) in &self.paths {
            if !file.starts_with("engine/") || file == "engine/effects.rs" {
                continue;
            }
            let mut lines: BTreeMap<usize, Vec<&[String]>> = BTreeMap::new();
            for (line, segments) in paths {
                lines.entry(*line).or_default().push(segments);
            }
            for (line, on_line) in lines {
                let used = ENGINE_FORBIDDEN.iter().find(|name| {
                    on_line
                        .iter()
                        .any(|segments| names_forbidden(segments, name))
                });
                if let Some(name) = used {
                    findings.push(self.finding(
                        Rule::EngineEffects,
                        format!(
                            "{}/src/{file}:{line}: `{name}`: the engine does no I/O; act through the traits of engine::effects (Provider, HumanChannel, Clock, Files, TraceSink)",
                            self.crate_name
                        ),
                    ));
                }
            }
        }
        findings
    }

    fn unplaced_cli_modules(&self) -> Vec<Finding> {
        self.top_modules()
            .into_iter()
            .filter(|module| !CLI_COMMANDS.contains(module) && !CLI_SHARED.contains(module))
            .map(|module| {
                self.finding(
                    Rule::CliUnplaced,
                    format!(
                        "{}: module `{module}` is in neither CLI_COMMANDS nor CLI_SHARED: place it in CLI_COMMANDS or CLI_SHARED (xtask/src/layers.rs)",
                        self.crate_name
                    ),
                )
            })
            .collect()
    }

    /// A command or a shared module importing a command, one finding for each pair of
    /// files.
    fn command_imports(&self) -> Vec<Finding> {
        let mut findings = Vec::new();
        for ((from, to), uses) in self.pairs() {
            let (Some(from_module), Some(to_module)) = (self.top_module(from), self.top_module(to))
            else {
                continue;
            };
            if from_module == to_module || !CLI_COMMANDS.contains(&to_module) {
                continue;
            }
            let (site, more) = self.site(&uses);
            let message = if CLI_COMMANDS.contains(&from_module) {
                format!(
                    "{site}: command `{from_module}` imports command `{to_module}` ({to}); a command is a leaf: move what they share into a shared module (CLI_SHARED){more}"
                )
            } else if CLI_SHARED.contains(&from_module) {
                format!(
                    "{site}: shared module `{from_module}` imports command `{to_module}` ({to}); a shared module never imports a command{more}"
                )
            } else {
                continue;
            };
            findings.push(self.finding(Rule::CliCommandImport, message));
        }
        findings
    }

    /// Each circle of arrows between files, once: every strongly connected set of two or
    /// more files, with the first arrow of each pair of files in it.
    fn circles(&self) -> Vec<Finding> {
        let edges = self.edges();
        let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (from, to) in edges.keys() {
            next.entry(from).or_default().insert(to);
        }
        let mut findings = Vec::new();
        for members in strongly_connected(&next) {
            if members.len() < 2 {
                continue;
            }
            let inside: Vec<(&str, &str)> = edges
                .keys()
                .filter(|(from, to)| members.contains(from) && members.contains(to))
                .copied()
                .collect();
            let crate_name = &self.crate_name;
            let (mut message, order) = match simple_cycle(&members, &inside) {
                Some(cycle) => (
                    format!(
                        "{crate_name}: an import circle: {} -> {}",
                        cycle.join(" -> "),
                        cycle[0]
                    ),
                    (0..cycle.len())
                        .map(|index| (cycle[index], cycle[(index + 1) % cycle.len()]))
                        .collect(),
                ),
                None => {
                    let mut order = inside.clone();
                    order.sort_by_key(|(from, to)| (*from, edges[&(*from, *to)][0].line));
                    (
                        format!(
                            "{crate_name}: an import circle among {} files ({} pairs of files): {}",
                            members.len(),
                            inside.len(),
                            members.iter().copied().collect::<Vec<_>>().join(", ")
                        ),
                        order,
                    )
                }
            };
            for (from, to) in order {
                let first = edges[&(from, to)][0];
                message.push_str(&format!(
                    "\n    {crate_name}/src/{from}:{}: `{}` -> {to}",
                    first.line, first.path
                ));
            }
            findings.push(self.finding(Rule::Circle, message));
        }
        findings
    }
}

/// The rank of a runtime top-level module's layer (0 = `formats`), `None` for one in no
/// layer.
fn layer_rank(module: &str) -> Option<usize> {
    RUNTIME_LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// Whether a path's segments hold `name`'s (`std::fs`), in a row; a trailing `::` in
/// `name` (`fs::`) asks for one more segment after them.
fn names_forbidden(segments: &[String], name: &str) -> bool {
    let (name, more) = match name.strip_suffix("::") {
        Some(name) => (name, 1),
        None => (name, 0),
    };
    let wanted: Vec<&str> = name.split("::").collect();
    segments.len() >= wanted.len() + more
        && (0..=segments.len() - wanted.len() - more).any(|start| {
            wanted
                .iter()
                .enumerate()
                .all(|(offset, part)| segments[start + offset] == *part)
        })
}

/// The strongly connected sets of a graph (Tarjan), each sorted, in a stable order.
fn strongly_connected<'a>(next: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<BTreeSet<&'a str>> {
    struct Search<'g, 'a> {
        next: &'g BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        sets: Vec<BTreeSet<&'a str>>,
    }
    impl<'a> Search<'_, 'a> {
        fn visit(&mut self, node: &'a str) {
            let number = self.index.len();
            self.index.insert(node, number);
            self.low.insert(node, number);
            self.stack.push(node);
            self.on_stack.insert(node);
            for &to in self.next.get(node).into_iter().flatten() {
                if !self.index.contains_key(to) {
                    self.visit(to);
                    let low = self.low[node].min(self.low[to]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(to) {
                    let low = self.low[node].min(self.index[to]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut set = BTreeSet::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    set.insert(member);
                    if member == node {
                        break;
                    }
                }
                self.sets.push(set);
            }
        }
    }
    let mut search = Search {
        next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        sets: Vec::new(),
    };
    for &node in next.keys() {
        if !search.index.contains_key(node) {
            search.visit(node);
        }
    }
    search.sets.sort();
    search.sets
}

/// The files of a strongly connected set in circle order, from the first, when its arrows
/// are exactly one circle through all of them.
fn simple_cycle<'a>(
    members: &BTreeSet<&'a str>,
    inside: &[(&'a str, &'a str)],
) -> Option<Vec<&'a str>> {
    if inside.len() != members.len() {
        return None;
    }
    let next: BTreeMap<&str, &str> = inside.iter().copied().collect();
    let start = *members.first()?;
    let mut cycle = vec![start];
    let mut at = *next.get(start)?;
    while at != start {
        if cycle.contains(&at) {
            return None;
        }
        cycle.push(at);
        at = *next.get(at)?;
    }
    (cycle.len() == members.len()).then_some(cycle)
}

/// The crate's modules: which file holds which module, and which are test-only.
struct ModuleTree {
    /// A file's module where a `#[path]` attribute moves it from its name's.
    moved: BTreeMap<String, Vec<String>>,
    /// The file holding each module, the crate root (`lib.rs`, else `main.rs`) as `[]`.
    files: BTreeMap<Vec<String>, String>,
    /// Modules declared under `#[cfg(test)]`.
    test_only: BTreeSet<Vec<String>>,
}

impl ModuleTree {
    fn of(parsed: &[(&str, syn::File)]) -> ModuleTree {
        let mut tree = ModuleTree {
            moved: BTreeMap::new(),
            files: BTreeMap::new(),
            test_only: BTreeSet::new(),
        };
        for (file, syntax) in parsed {
            let module = module_by_name(file);
            tree.declarations(file, &module, &syntax.items, false);
        }
        for (file, _) in parsed {
            let module = tree.module_of(file);
            let is_root_main = module.is_empty() && *file != "lib.rs";
            if is_root_main && tree.files.contains_key(&module) {
                continue;
            }
            tree.files.insert(module, file.to_string());
        }
        tree
    }

    /// Records the `mod` items of `items` (in `module`, of `file`): test-only ones and
    /// `#[path]` ones.
    fn declarations(&mut self, file: &str, module: &[String], items: &[syn::Item], test: bool) {
        for item in items {
            let syn::Item::Mod(declared) = item else {
                continue;
            };
            let mut child = module.to_vec();
            child.push(declared.ident.to_string());
            let test = test || is_test_only(&declared.attrs);
            if test {
                self.test_only.insert(child.clone());
            }
            match &declared.content {
                Some((_, items)) => self.declarations(file, &child, items, test),
                None => {
                    if let Some(path) = path_attribute(&declared.attrs) {
                        let dir = file.rsplit_once('/').map_or("", |(dir, _)| dir);
                        self.moved.insert(normalized(dir, &path), child);
                    }
                }
            }
        }
    }

    fn module_of(&self, file: &str) -> Vec<String> {
        self.moved
            .get(file)
            .cloned()
            .unwrap_or_else(|| module_by_name(file))
    }

    fn is_test_only(&self, module: &[String]) -> bool {
        (1..=module.len()).any(|length| self.test_only.contains(&module[..length]))
    }

    /// The file of the longest prefix of `target` that is a module with a file.
    fn file_of(&self, target: &[String]) -> Option<&str> {
        (0..=target.len())
            .rev()
            .find_map(|length| self.files.get(&target[..length]))
            .map(String::as_str)
    }
}

/// The module a file holds by its name: `eval/output.rs` and `eval/output/mod.rs` are
/// `eval::output`; `lib.rs` and `main.rs` the crate root.
fn module_by_name(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts.last().is_some_and(|last| last == "mod")
        || (parts.len() == 1 && matches!(parts[0].as_str(), "lib" | "main"))
    {
        parts.pop();
    }
    parts
}

/// `dir/path` with `.` and `..` resolved.
fn normalized(dir: &str, path: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|part| !part.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// The value of a `#[path = "…"]` attribute.
fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        syn::Meta::NameValue(pair) if pair.path.is_ident("path") => match &pair.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) => Some(text.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Whether the attributes hold a `#[cfg(…)]` true only under test (`test`,
/// `all(test, …)`, `any(test, test)`).
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| only_under_test(&meta))
    })
}

fn only_under_test(meta: &syn::Meta) -> bool {
    match meta {
        syn::Meta::Path(path) => path.is_ident("test"),
        syn::Meta::List(list) => {
            let Ok(inner) =
                list.parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
            else {
                return false;
            };
            if list.path.is_ident("all") {
                inner.iter().any(only_under_test)
            } else if list.path.is_ident("any") {
                !inner.is_empty() && inner.iter().all(only_under_test)
            } else {
                false
            }
        }
        syn::Meta::NameValue(_) => false,
    }
}

/// The attributes of an item, for `#[cfg(test)]`.
fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(item) => &item.attrs,
        Item::Enum(item) => &item.attrs,
        Item::ExternCrate(item) => &item.attrs,
        Item::Fn(item) => &item.attrs,
        Item::ForeignMod(item) => &item.attrs,
        Item::Impl(item) => &item.attrs,
        Item::Macro(item) => &item.attrs,
        Item::Mod(item) => &item.attrs,
        Item::Static(item) => &item.attrs,
        Item::Struct(item) => &item.attrs,
        Item::Trait(item) => &item.attrs,
        Item::TraitAlias(item) => &item.attrs,
        Item::Type(item) => &item.attrs,
        Item::Union(item) => &item.attrs,
        Item::Use(item) => &item.attrs,
        _ => &[],
    }
}

/// A path of a file that names a module of its own crate.
struct Reference {
    line: usize,
    path: String,
    /// The path from the crate root (`eval::output::print`).
    target: Vec<String>,
}

/// One leaf of a `use` tree: `crate::a::{b::c as d}` has the leaf `crate::a::b::c`.
struct UseLeaf {
    segments: Vec<String>,
    line: usize,
    /// The name it brings into scope (`d`; `b` for `a::b::{self}`), none for a glob.
    name: Option<String>,
    glob: bool,
    written: String,
}

/// The leaves of a `use` tree under `prefix`.
fn use_leaves(tree: &syn::UseTree, prefix: &[String], leaves: &mut Vec<UseLeaf>) {
    let written = |segments: &[String]| segments.join("::");
    match tree {
        syn::UseTree::Path(path) => {
            let mut prefix = prefix.to_vec();
            prefix.push(path.ident.to_string());
            use_leaves(&path.tree, &prefix, leaves);
        }
        syn::UseTree::Name(name) => {
            let mut segments = prefix.to_vec();
            let ident = name.ident.to_string();
            let written = if ident == "self" {
                format!("{}::{{self}}", written(prefix))
            } else {
                segments.push(ident);
                written(&segments)
            };
            leaves.push(UseLeaf {
                name: segments.last().cloned(),
                segments,
                line: name.ident.span().start().line,
                glob: false,
                written,
            });
        }
        syn::UseTree::Rename(rename) => {
            let mut segments = prefix.to_vec();
            let ident = rename.ident.to_string();
            if ident != "self" {
                segments.push(ident);
            }
            leaves.push(UseLeaf {
                written: format!("{} as {}", written(&segments), rename.rename),
                segments,
                line: rename.ident.span().start().line,
                name: Some(rename.rename.to_string()),
                glob: false,
            });
        }
        syn::UseTree::Glob(glob) => leaves.push(UseLeaf {
            segments: prefix.to_vec(),
            line: glob.star_token.spans[0].start().line,
            name: None,
            glob: true,
            written: format!("{}::*", written(prefix)),
        }),
        syn::UseTree::Group(group) => {
            for item in &group.items {
                use_leaves(item, prefix, leaves);
            }
        }
    }
}

/// What paths mean in one module: its path, its child modules and the names its `use`
/// items bring in.
struct Scope {
    module: Vec<String>,
    children: BTreeSet<String>,
    aliases: BTreeMap<String, Vec<String>>,
}

/// Walks one file's syntax and collects its paths.
struct PathReader {
    scopes: Vec<Scope>,
    references: Vec<Reference>,
    /// Every path as written, with its line (for the engine's I/O check).
    paths: Vec<(usize, Vec<String>)>,
}

impl PathReader {
    fn read(module: &[String], syntax: &syn::File) -> PathReader {
        let mut reader = PathReader {
            scopes: Vec::new(),
            references: Vec::new(),
            paths: Vec::new(),
        };
        reader.enter(module.to_vec(), &syntax.items);
        reader.visit_file(syntax);
        reader
    }

    /// Opens the scope of a module whose items are `items`.
    fn enter(&mut self, module: Vec<String>, items: &[syn::Item]) {
        let children = items
            .iter()
            .filter_map(|item| match item {
                syn::Item::Mod(declared) => Some(declared.ident.to_string()),
                _ => None,
            })
            .collect();
        self.scopes.push(Scope {
            module,
            children,
            aliases: BTreeMap::new(),
        });
        for item in items {
            let syn::Item::Use(used) = item else {
                continue;
            };
            if is_test_only(&used.attrs) || used.leading_colon.is_some() {
                continue;
            }
            let mut leaves = Vec::new();
            use_leaves(&used.tree, &[], &mut leaves);
            for leaf in leaves {
                if leaf.glob {
                    continue;
                }
                if let (Some(name), Some(target)) = (leaf.name, self.absolute(&leaf.segments))
                    && let Some(scope) = self.scopes.last_mut()
                {
                    scope.aliases.insert(name, target);
                }
            }
        }
    }

    /// A path from the crate root for a path as written, if it names this crate.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let scope = self.scopes.last()?;
        let first = segments.first()?;
        let mut base = scope.module.clone();
        let mut rest = segments;
        match first.as_str() {
            "crate" => {
                base.clear();
                rest = &segments[1..];
            }
            "self" | "super" => {
                while let Some(head) = rest.first() {
                    match head.as_str() {
                        "self" => {}
                        "super" => {
                            base.pop()?;
                        }
                        _ => break,
                    }
                    rest = &rest[1..];
                }
                // `self::name` where `name` came in by a `use` of this module.
                if base == scope.module
                    && let Some(target) = rest.first().and_then(|name| scope.aliases.get(name))
                {
                    return Some(target.iter().chain(&rest[1..]).cloned().collect());
                }
            }
            name if scope.children.contains(name) => {}
            name => {
                let target = scope.aliases.get(name)?;
                return Some(target.iter().chain(&segments[1..]).cloned().collect());
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, line: usize, segments: Vec<String>, written: String) {
        if let Some(target) = self.absolute(&segments) {
            self.references.push(Reference {
                line,
                path: written,
                target,
            });
        }
        self.paths.push((line, segments));
    }

    /// Paths in a macro's tokens: runs of `name::name…` not after `$` (as in `$crate`) or
    /// `::`.
    fn read_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let is_colon = |at: usize, spacing: Option<Spacing>| {
            matches!(tokens.get(at), Some(TokenTree::Punct(punct))
                if punct.as_char() == ':' && spacing.is_none_or(|spacing| punct.spacing() == spacing))
        };
        let mut at = 0;
        while at < tokens.len() {
            match &tokens[at] {
                TokenTree::Group(group) => {
                    self.read_tokens(group.stream());
                    at += 1;
                }
                TokenTree::Ident(ident) => {
                    let after_dollar = at > 0
                        && matches!(&tokens[at - 1], TokenTree::Punct(punct) if punct.as_char() == '$');
                    let after_colons = at > 1 && is_colon(at - 2, Some(Spacing::Joint));
                    let mut segments = vec![ident.to_string()];
                    let mut end = at + 1;
                    while is_colon(end, Some(Spacing::Joint))
                        && is_colon(end + 1, None)
                        && let Some(TokenTree::Ident(next)) = tokens.get(end + 2)
                    {
                        segments.push(next.to_string());
                        end += 3;
                    }
                    if !after_dollar && !after_colons && segments.len() > 1 {
                        let written = segments.join("::");
                        self.record(ident.span().start().line, segments, written);
                    }
                    at = end;
                }
                _ => at += 1,
            }
        }
    }
}

impl<'ast> Visit<'ast> for PathReader {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // `mod x;` is a declaration; an inline `mod x { … }` is a scope of its own.
        if let Some((_, items)) = &item.content {
            let mut module = self
                .scopes
                .last()
                .map(|scope| scope.module.clone())
                .unwrap_or_default();
            module.push(item.ident.to_string());
            self.enter(module, items);
            for inner in items {
                self.visit_item(inner);
            }
            self.scopes.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if item.leading_colon.is_some() {
            return;
        }
        let mut leaves = Vec::new();
        use_leaves(&item.tree, &[], &mut leaves);
        for leaf in leaves {
            self.record(leaf.line, leaf.segments, leaf.written);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none()
            && let Some(first) = path.segments.first()
        {
            let segments: Vec<String> = path
                .segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect();
            let written = segments.join("::");
            self.record(first.ident.span().start().line, segments, written);
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.read_tokens(mac.tokens.clone());
    }

    // An attribute's arguments may hold code (`#[error("{}", crate::x::y(z))]`): its tokens
    // are read as a macro's. Docs and `#[path = "…"]` are text.
    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if let syn::Meta::List(list) = &attr.meta {
            self.read_tokens(list.tokens.clone());
        }
    }

    // `pub(in crate::x)` names no dependency.

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(item) => &item.attrs,
            syn::ImplItem::Fn(item) => &item.attrs,
            syn::ImplItem::Type(item) => &item.attrs,
            syn::ImplItem::Macro(item) => &item.attrs,
            _ => return visit::visit_impl_item(self, item),
        };
        if !is_test_only(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        let attrs = match item {
            syn::TraitItem::Const(item) => &item.attrs,
            syn::TraitItem::Fn(item) => &item.attrs,
            syn::TraitItem::Type(item) => &item.attrs,
            syn::TraitItem::Macro(item) => &item.attrs,
            _ => return visit::visit_trait_item(self, item),
        };
        if !is_test_only(attrs) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        if !is_test_only(&local.attrs) {
            visit::visit_local(self, local);
        }
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        if !is_test_only(&arm.attrs) {
            visit::visit_arm(self, arm);
        }
    }

    fn visit_field(&mut self, field: &'ast syn::Field) {
        if !is_test_only(&field.attrs) {
            visit::visit_field(self, field);
        }
    }

    fn visit_variant(&mut self, variant: &'ast syn::Variant) {
        if !is_test_only(&variant.attrs) {
            visit::visit_variant(self, variant);
        }
    }
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

    fn messages(crate_name: &str, files: &[(&str, &str)], rules: Rules) -> Vec<String> {
        check_crate(crate_name, &sources(files), rules)
            .into_iter()
            .map(|finding| finding.message)
            .collect()
    }

    /// The arrows of `files` as `from:line -> to (path)`.
    fn arrows(files: &[(&str, &str)]) -> Vec<String> {
        crate_arrows(&sources(files))
            .into_iter()
            .map(|arrow| {
                format!(
                    "{}:{} -> {} ({})",
                    arrow.from, arrow.line, arrow.to, arrow.path
                )
            })
            .collect()
    }

    /// A runtime with one file in each layer for a planted `engine/gate.rs` to name.
    fn runtime_with_gate(gate: &str) -> Vec<String> {
        messages(
            "runtime",
            &[
                (
                    "lib.rs",
                    "//! x\npub mod engine;\npub mod formats;\npub mod world;\n",
                ),
                ("engine/mod.rs", "//! x\npub mod gate;\n"),
                ("engine/gate.rs", gate),
                ("formats/mod.rs", "//! x\npub mod trace;\n"),
                ("formats/trace.rs", "//! x\npub struct TraceEvent;\n"),
                ("world/mod.rs", "//! x\npub mod files;\npub mod replay;\n"),
                ("world/files.rs", "//! x\npub struct Files;\n"),
                ("world/replay.rs", "//! x\npub struct Replayer;\n"),
            ],
            Rules::RuntimeLayers,
        )
    }

    fn upward(line: usize, path: &str, to: &str) -> String {
        format!(
            "runtime/src/engine/gate.rs:{line}: `{path}`: engine/gate.rs (layer `engine`) imports {to} (layer `world`); a lower layer never imports a higher one (formats < engine < world < top)"
        )
    }

    #[test]
    fn a_multi_line_group_is_read_to_its_last_line() {
        let findings = runtime_with_gate(
            "//! x\nuse crate::{\n    formats::trace::TraceEvent,\n    world::replay::Replayer,\n};\n",
        );
        assert_eq!(
            findings,
            [upward(
                4,
                "crate::world::replay::Replayer",
                "world/replay.rs"
            )]
        );
    }

    #[test]
    fn a_nested_group_is_read_at_every_depth() {
        let findings = runtime_with_gate(
            "//! x\nuse crate::{formats::{trace::{self, TraceEvent}}, world::{\n    files::{self as f, Files},\n}};\n",
        );
        assert_eq!(
            findings,
            [upward(3, "crate::world::files as f", "world/files.rs")
                + " (and 1 more use in this file)"]
        );
    }

    #[test]
    fn a_rename_is_read_and_its_new_name_followed() {
        let findings = runtime_with_gate(
            "//! x\nuse crate::world as w;\nfn f() -> w::replay::Replayer { todo!() }\n",
        );
        assert_eq!(
            findings,
            [
                upward(2, "crate::world as w", "world/mod.rs"),
                upward(3, "w::replay::Replayer", "world/replay.rs"),
            ]
        );
    }

    #[test]
    fn a_glob_is_an_arrow_to_its_module() {
        let findings = runtime_with_gate("//! x\nuse crate::world::replay::*;\n");
        assert_eq!(
            findings,
            [upward(2, "crate::world::replay::*", "world/replay.rs")]
        );
    }

    #[test]
    fn a_self_path_through_a_name_brought_in_is_followed() {
        let findings = runtime_with_gate(
            "//! x\nuse crate::world as w;\nfn f() { self::w::replay::Replayer::new(); }\n",
        );
        assert_eq!(
            findings,
            [
                upward(2, "crate::world as w", "world/mod.rs"),
                upward(3, "self::w::replay::Replayer::new", "world/replay.rs"),
            ]
        );
    }

    #[test]
    fn crate_paths_in_expressions_types_patterns_and_macros_are_arrows() {
        let findings = runtime_with_gate(
            "//! x\nfn f() {\n    let x: crate::world::files::Files = todo!();\n    let _ = crate::world::replay::make(x);\n}\n",
        );
        assert_eq!(
            findings,
            [
                upward(3, "crate::world::files::Files", "world/files.rs"),
                upward(4, "crate::world::replay::make", "world/replay.rs"),
            ]
        );
        let in_pattern_and_macro = runtime_with_gate(
            "//! x\nfn f(x: u8) {\n    if let crate::world::files::Files = x {}\n    println!(\"{}\", crate::world::replay::name());\n}\n",
        );
        assert_eq!(
            in_pattern_and_macro,
            [
                upward(3, "crate::world::files::Files", "world/files.rs"),
                upward(4, "crate::world::replay::name", "world/replay.rs"),
            ]
        );
        let in_an_attribute = runtime_with_gate(
            "//! x\n#[derive(Debug, thiserror::Error)]\npub enum E {\n    #[error(\"{}\", crate::world::replay::name(x))]\n    A { x: u8 },\n}\n",
        );
        assert_eq!(
            in_an_attribute,
            [upward(4, "crate::world::replay::name", "world/replay.rs")]
        );
    }

    #[test]
    fn an_unplaced_runtime_module_is_a_finding() {
        let findings = messages(
            "runtime",
            &[
                ("lib.rs", "//! x\npub mod stray;\npub mod engine;\n"),
                ("stray.rs", "//! x\n"),
                ("engine/mod.rs", "//! x\n"),
            ],
            Rules::RuntimeLayers,
        );
        assert_eq!(
            findings,
            [
                "runtime: module `stray` is in no layer: move it under formats/, engine/ or world/, or name it in RUNTIME_LAYERS (xtask/src/layers.rs)"
            ]
        );
    }

    #[test]
    fn the_engine_names_no_file_clock_or_process_outside_its_effects() {
        let findings = messages(
            "runtime",
            &[
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
                    "//! x\nuse std::fs;\nfn f() { let _ = xfs::y; std::fs::read(\"a\"); }\nuse tokio::{\n    time::sleep,\n};\n",
                ),
            ],
            Rules::RuntimeLayers,
        );
        let effect = |file: &str, line: usize, name: &str| {
            format!(
                "runtime/src/engine/{file}:{line}: `{name}`: the engine does no I/O; act through the traits of engine::effects (Provider, HumanChannel, Clock, Files, TraceSink)"
            )
        };
        assert_eq!(
            findings,
            [
                effect("candidate.rs", 2, "std::fs"),
                effect("candidate.rs", 3, "std::fs"),
                effect("candidate.rs", 5, "tokio::time::sleep"),
                effect("run/mod.rs", 2, "Instant::now"),
            ]
        );
    }

    #[test]
    fn super_paths_make_a_circle_between_sibling_files() {
        let findings = messages(
            "cli",
            &[
                ("eval/mod.rs", "//! x\nmod html;\nmod output;\n"),
                ("eval/html.rs", "//! x\nuse super::output::Format;\n"),
                (
                    "eval/output.rs",
                    "//! x\n\nfn f() { super::html::render(); }\n",
                ),
            ],
            Rules::NoCircle,
        );
        assert_eq!(
            findings,
            [
                "cli: an import circle: eval/html.rs -> eval/output.rs -> eval/html.rs\n    cli/src/eval/html.rs:2: `super::output::Format` -> eval/output.rs\n    cli/src/eval/output.rs:3: `super::html::render` -> eval/html.rs"
            ]
        );
    }

    #[test]
    fn super_super_paths_reach_a_cousin() {
        let findings = messages(
            "compiler",
            &[
                ("check/mod.rs", "//! x\nmod flow;\nmod types;\n"),
                ("check/flow/mod.rs", "//! x\nmod graph;\n"),
                (
                    "check/flow/graph.rs",
                    "//! x\nuse super::super::types::Type;\n",
                ),
                (
                    "check/types.rs",
                    "//! x\nuse crate::check::flow::graph::Graph;\n",
                ),
            ],
            Rules::NoCircle,
        );
        assert_eq!(
            findings,
            [
                "compiler: an import circle: check/flow/graph.rs -> check/types.rs -> check/flow/graph.rs\n    compiler/src/check/flow/graph.rs:2: `super::super::types::Type` -> check/types.rs\n    compiler/src/check/types.rs:2: `crate::check::flow::graph::Graph` -> check/flow/graph.rs"
            ]
        );
    }

    #[test]
    fn a_three_file_circle_is_reported_once() {
        let findings = messages(
            "xtask",
            &[
                ("lib.rs", "//! x\npub mod a;\npub mod b;\npub mod c;\n"),
                ("a.rs", "//! x\nuse crate::b::B;\n"),
                ("b.rs", "//! x\nfn f() -> crate::c::C { todo!() }\n"),
                ("c.rs", "//! x\n\n\nuse crate::a;\n"),
            ],
            Rules::NoCircle,
        );
        assert_eq!(
            findings,
            [
                "xtask: an import circle: a.rs -> b.rs -> c.rs -> a.rs\n    xtask/src/a.rs:2: `crate::b::B` -> b.rs\n    xtask/src/b.rs:2: `crate::c::C` -> c.rs\n    xtask/src/c.rs:4: `crate::a` -> a.rs"
            ]
        );
    }

    #[test]
    fn overlapping_circles_are_one_finding_with_every_arrow() {
        let findings = messages(
            "xtask",
            &[
                ("a.rs", "//! x\nuse crate::b::B;\nuse crate::c::C;\n"),
                ("b.rs", "//! x\nuse crate::a::A;\n"),
                ("c.rs", "//! x\nuse crate::a::A;\n"),
            ],
            Rules::NoCircle,
        );
        assert_eq!(
            findings,
            [
                "xtask: an import circle among 3 files (4 pairs of files): a.rs, b.rs, c.rs\n    xtask/src/a.rs:2: `crate::b::B` -> b.rs\n    xtask/src/a.rs:3: `crate::c::C` -> c.rs\n    xtask/src/b.rs:2: `crate::a::A` -> a.rs\n    xtask/src/c.rs:2: `crate::a::A` -> a.rs"
            ]
        );
    }

    #[test]
    fn a_child_naming_its_parent_is_an_arrow_but_a_parent_naming_its_child_is_not() {
        let found = arrows(&[
            ("main.rs", "//! x\nmod eval;\nfn main() { eval::run(); }\n"),
            (
                "eval/mod.rs",
                "//! x\nmod output;\nuse self::output::print;\npub fn run() { output::print(); crate::eval::output::print(); }\n",
            ),
            (
                "eval/output.rs",
                "//! x\npub fn print() { super::run(); }\n",
            ),
        ]);
        assert_eq!(found, ["eval/output.rs:2 -> eval/mod.rs (super::run)"]);
    }

    #[test]
    fn test_code_draws_no_arrow() {
        let found = arrows(&[
            (
                "lib.rs",
                "//! x\nmod a;\nmod b;\n#[cfg(test)]\nmod testing;\n",
            ),
            (
                "a.rs",
                "//! see [`crate::b`] and crate::b in a comment\nconst A: &str = \"crate::b::B\";\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n#[cfg(all(test, unix))]\nuse crate::b::C;\n#[cfg(test)]\nfn helper() { crate::b::f(); }\npub(in crate::a) struct S;\n",
            ),
            ("b.rs", "//! x\n"),
            ("testing.rs", "//! x\nuse crate::a::S;\nuse crate::b::C;\n"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_path_attribute_moves_a_module_to_its_file() {
        let found = arrows(&[
            (
                "lib.rs",
                "//! x\n#[path = \"gen.rs\"]\npub mod generator;\npub mod fuzz;\n",
            ),
            ("gen.rs", "//! x\n"),
            ("fuzz.rs", "//! x\nuse crate::generator::generate;\n"),
        ]);
        assert_eq!(found, ["fuzz.rs:2 -> gen.rs (crate::generator::generate)"]);
    }

    #[test]
    fn a_command_importing_a_command_is_a_finding() {
        let findings = messages(
            "cli",
            &[
                (
                    "main.rs",
                    "//! x\nmod run;\nmod fork;\nmod driver;\nfn main() { run::go(); fork::go(); }\n",
                ),
                (
                    "run.rs",
                    "//! x\nuse crate::driver::Driver;\nuse crate::fork::{\n    go,\n    Fork,\n};\n",
                ),
                ("fork.rs", "//! x\npub fn go() {}\n"),
                ("driver.rs", "//! x\n"),
            ],
            Rules::CliCommands,
        );
        assert_eq!(
            findings,
            [
                "cli/src/run.rs:4: `crate::fork::go`: command `run` imports command `fork` (fork.rs); a command is a leaf: move what they share into a shared module (CLI_SHARED) (and 1 more use in this file)"
            ]
        );
    }

    #[test]
    fn a_shared_module_importing_a_command_is_a_finding() {
        let findings = messages(
            "cli",
            &[
                ("main.rs", "//! x\nmod serve;\nmod driver;\n"),
                ("serve/mod.rs", "//! x\nmod runs;\n"),
                ("serve/runs.rs", "//! x\npub struct Runs;\n"),
                (
                    "driver.rs",
                    "//! x\nfn f(runs: &crate::serve::runs::Runs) {}\n",
                ),
            ],
            Rules::CliCommands,
        );
        assert_eq!(
            findings,
            [
                "cli/src/driver.rs:2: `crate::serve::runs::Runs`: shared module `driver` imports command `serve` (serve/runs.rs); a shared module never imports a command"
            ]
        );
    }

    #[test]
    fn an_unplaced_cli_module_is_a_finding() {
        let findings = messages(
            "cli",
            &[
                ("main.rs", "//! x\nmod live;\nmod run;\n"),
                ("live/mod.rs", "//! x\n"),
                ("run.rs", "//! x\n"),
            ],
            Rules::CliCommands,
        );
        assert_eq!(
            findings,
            [
                "cli: module `live` is in neither CLI_COMMANDS nor CLI_SHARED: place it in CLI_COMMANDS or CLI_SHARED (xtask/src/layers.rs)"
            ]
        );
    }

    #[test]
    fn a_clean_tree_gives_no_finding() {
        let files = [
            (
                "main.rs",
                "//! x\nmod run;\nmod fork;\nmod driver;\nmod loader;\nfn main() { run::go(); fork::go(); }\n",
            ),
            (
                "run.rs",
                "//! x\nuse crate::{driver::Driver, loader};\npub fn go() { loader::load(); }\n",
            ),
            (
                "fork.rs",
                "//! x\nuse crate::driver::{self, Driver};\npub fn go() {}\n",
            ),
            (
                "driver.rs",
                "//! x\nuse crate::loader::load;\npub struct Driver;\n",
            ),
            ("loader.rs", "//! x\npub fn load() {}\n"),
        ];
        assert_eq!(
            messages("cli", &files, Rules::CliCommands),
            Vec::<String>::new()
        );
        assert_eq!(
            arrows(&files),
            [
                "driver.rs:2 -> loader.rs (crate::loader::load)",
                "fork.rs:2 -> driver.rs (crate::driver::{self})",
                "fork.rs:2 -> driver.rs (crate::driver::Driver)",
                "run.rs:2 -> driver.rs (crate::driver::Driver)",
                "run.rs:2 -> loader.rs (crate::loader)",
                "run.rs:3 -> loader.rs (loader::load)",
            ]
        );
    }

    #[test]
    fn an_unreadable_file_is_a_finding() {
        let findings = messages("ide", &[("a.rs", "//! x\nfn f( {\n")], Rules::NoCircle);
        assert_eq!(findings.len(), 1);
        assert!(findings[0].starts_with("ide/src/a.rs:"), "{findings:?}");
    }

    #[test]
    fn every_crate_keeps_the_rules() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let (findings, arrows) = check_workspace(&root).expect("the workspace's sources read");
        assert!(
            arrows > 500,
            "only {arrows} arrows read: is the parser broken?"
        );
        assert!(
            findings.is_empty(),
            "{}",
            findings
                .iter()
                .map(|finding| finding.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
