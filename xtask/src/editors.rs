//! The `editors` stage of `cargo xtask verify` (DESIGN §14): the VS Code extension in
//! `editors/vscode` (`npm ci` when `node_modules` is missing or stale, the TextMate grammar
//! and folding tests, the `.vsix` and what it packs) and the tree-sitter grammar in
//! `editors/tree-sitter-charter` (the committed parser is what `grammar.js` generates,
//! `tree-sitter test`, every spec of `specs/` parses without an error); before them, two
//! checks that need no tool: both grammars know every keyword of `grammar.pest`, and the
//! two highlight fixtures hold the same source.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::corpus::{display_path, find_specs};
use crate::measure::format_duration;

/// The tree-sitter CLI that generates the committed parser; `.ci/run` installs this one
/// (`cargo install tree-sitter-cli --locked --version 0.27.1`).
pub const TREE_SITTER_VERSION: &str = "0.27.1";

/// The parser's ABI version: 14 loads in Neovim 0.9 and later, Helix and Zed.
const TREE_SITTER_ABI: &str = "14";

/// The VS Code extension's directory, from the workspace root.
const VSCODE: &str = "editors/vscode";
/// The tree-sitter grammar's directory, from the workspace root.
const TREE_SITTER: &str = "editors/tree-sitter-charter";
/// Where `npm run package` writes the extension (ignored by git).
const VSIX: &str = "target/editors/charter.vsix";
/// Helix's copy of the highlight query, with its capture names (`helix_query`).
const HELIX_HIGHLIGHTS: &str = "editors/tree-sitter-charter/queries/helix/highlights.scm";
/// The spec directories whose every `.charter` file must parse without an error node.
const PARSED_SPECS: [&str; 3] = ["specs/seeds", "specs/examples", "specs/warnings"];

/// What the stage found: every part passed, one failed, or a tool was missing (a skip
/// outside CI, a failure in CI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    Skipped,
}

/// The stage's status and its one-line note for the summary table.
#[derive(Debug)]
pub struct Outcome {
    pub status: Status,
    pub note: String,
}

/// Runs every part of the stage from the workspace `root`, printing a line per part.
/// `ci`: a missing tool fails the stage instead of skipping its part.
pub fn check(root: &Path, ci: bool) -> Outcome {
    let mut run = Run {
        ci,
        passed: Vec::new(),
        failed: Vec::new(),
        skipped: Vec::new(),
    };
    run.step("keywords", || keyword_problems(root));
    run.step("fixtures", || fixture_problems(root));
    run.step("helix query", || helix_problems(root));
    vscode(root, &mut run);
    tree_sitter(root, &mut run);
    run.outcome()
}

/// Whether this is a CI run (`CI` set, and not to `false` or `0`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"))
}

/// The parts run so far.
struct Run {
    ci: bool,
    passed: Vec<&'static str>,
    failed: Vec<&'static str>,
    skipped: Vec<String>,
}

impl Run {
    /// Runs one part, prints its line (and what went wrong, indented), records it.
    fn step(&mut self, name: &'static str, part: impl FnOnce() -> Result<(), String>) -> bool {
        let started = Instant::now();
        let result = part();
        let time = format_duration(started.elapsed());
        match result {
            Ok(()) => {
                println!("    ok   {name} ({time})");
                self.passed.push(name);
                true
            }
            Err(problem) => {
                println!("    FAIL {name} ({time})");
                for line in problem.lines() {
                    println!("         {line}");
                }
                self.failed.push(name);
                false
            }
        }
    }

    /// A part that cannot run for want of a tool: a failure in CI, else a skip.
    fn missing(&mut self, name: &'static str, why: &str) {
        if self.ci {
            let why = why.to_string();
            self.step(name, || Err(why));
        } else {
            println!("    skip {name}: {why}");
            self.skipped.push(format!("{name}: {why}"));
        }
    }

    fn outcome(self) -> Outcome {
        if !self.failed.is_empty() {
            return Outcome {
                status: Status::Failed,
                note: format!("failed: {}", self.failed.join(", ")),
            };
        }
        if !self.skipped.is_empty() {
            return Outcome {
                status: Status::Skipped,
                note: format!(
                    "{} part(s) passed; skipped {}",
                    self.passed.len(),
                    self.skipped.join("; ")
                ),
            };
        }
        Outcome {
            status: Status::Passed,
            note: format!("{} parts: {}", self.passed.len(), self.passed.join(", ")),
        }
    }
}

/// The VS Code extension: install its packages when needed, test the grammars, package it.
fn vscode(root: &Path, run: &mut Run) {
    let dir = root.join(VSCODE);
    if version_of("node").is_none() || version_of("npm").is_none() {
        run.missing(
            "vscode",
            "node and npm not found (install Node.js 20 or later: apt-get install nodejs npm)",
        );
        return;
    }
    if node_modules_stale(&dir)
        && !run.step("npm ci", || {
            quiet(
                &dir,
                "npm",
                &["ci", "--no-audit", "--no-fund", "--loglevel=error"],
            )
        })
    {
        return;
    }
    run.step("tmgrammar tests", || quiet(&dir, "npm", &["test"]));
    let vsix = root.join(VSIX);
    run.step("vsix", || {
        // A stale package must not pass for a new one.
        let _ = std::fs::remove_file(&vsix);
        quiet(&dir, "npm", &["run", "package"])?;
        vsix_problems(&dir, &vsix)
    });
}

/// `node_modules` is missing, or older than the lock file (npm writes its own copy of the
/// lock, `node_modules/.package-lock.json`, at every install).
fn node_modules_stale(dir: &Path) -> bool {
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|meta| meta.modified());
    match (
        modified(dir.join("node_modules/.package-lock.json")),
        modified(dir.join("package-lock.json")),
    ) {
        (Ok(installed), Ok(locked)) => installed < locked,
        _ => true,
    }
}

/// The `.vsix` holds every file `package.json` names (entry point, grammars, language
/// configurations, schemas), the language client it loads at run time, and no tests or
/// packaging tools.
fn vsix_problems(dir: &Path, vsix: &Path) -> Result<(), String> {
    let bytes = std::fs::read(vsix).map_err(|error| format!("{}: {error}", vsix.display()))?;
    let manifest = std::fs::read_to_string(dir.join("package.json"))
        .map_err(|error| format!("package.json: {error}"))?;
    let mut wanted = packed_files(&manifest)?;
    wanted.push("node_modules/vscode-languageclient/node.js".to_string());
    let holds = |name: &str| {
        let name = format!("extension/{name}");
        bytes
            .windows(name.len())
            .any(|window| window == name.as_bytes())
    };
    let mut problems: Vec<String> = wanted
        .iter()
        .filter(|name| !holds(name))
        .map(|name| format!("{} lacks {name}", vsix.display()))
        .collect();
    for unwanted in [
        "test/",
        "node_modules/@vscode/vsce/",
        "node_modules/vscode-tmgrammar-test/",
    ] {
        if holds(unwanted) {
            problems.push(format!("{} packs {unwanted}", vsix.display()));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("\n")),
    }
}

/// Every file a VS Code `package.json` names: `main`, each grammar's `path`, each
/// language's `configuration`, each `yamlValidation` `url`; without a leading `./`.
pub fn packed_files(manifest: &str) -> Result<Vec<String>, String> {
    let json: serde_json::Value =
        serde_json::from_str(manifest).map_err(|error| format!("package.json: {error}"))?;
    let contributes = &json["contributes"];
    let listed = |list: &str, key: &str| -> Vec<String> {
        contributes[list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|entry| entry[key].as_str().map(str::to_string))
            .collect()
    };
    let mut files: Vec<String> = json["main"]
        .as_str()
        .map(str::to_string)
        .into_iter()
        .collect();
    files.extend(listed("grammars", "path"));
    files.extend(listed("languages", "configuration"));
    files.extend(listed("yamlValidation", "url"));
    Ok(files
        .into_iter()
        .map(|file| file.trim_start_matches("./").to_string())
        .collect())
}

/// The tree-sitter grammar: the committed parser is current, its tests pass, every spec
/// parses.
fn tree_sitter(root: &Path, run: &mut Run) {
    let dir = root.join(TREE_SITTER);
    let install = format!("cargo install tree-sitter-cli --locked --version {TREE_SITTER_VERSION}");
    match version_of("tree-sitter") {
        None => {
            run.missing("tree-sitter", &format!("tree-sitter not found ({install})"));
            return;
        }
        Some(version) if !version.contains(TREE_SITTER_VERSION) => {
            let why = format!(
                "{version} is not {TREE_SITTER_VERSION}, which the parser is generated with ({install})"
            );
            run.missing("tree-sitter", &why);
            return;
        }
        Some(_) => {}
    }
    run.step("parser up to date", || generated_problems(root, &dir));
    run.step("tree-sitter test", || quiet(&dir, "tree-sitter", &["test"]));
    run.step("every spec parses", || parse_problems(root, &dir));
}

/// `tree-sitter generate` into a scratch directory gives exactly the committed `src/`.
fn generated_problems(root: &Path, dir: &Path) -> Result<(), String> {
    let scratch = root.join("target/editors/tree-sitter-src");
    let _ = std::fs::remove_dir_all(&scratch);
    let out = scratch.to_string_lossy().into_owned();
    quiet(
        dir,
        "tree-sitter",
        &["generate", "--abi", TREE_SITTER_ABI, "-o", &out],
    )?;
    let mut stale = Vec::new();
    for generated in files_under(&scratch) {
        let relative = display_path(&generated, &scratch);
        let committed = dir.join("src").join(&relative);
        if std::fs::read(&generated).ok() != std::fs::read(&committed).ok() {
            stale.push(format!("src/{relative}"));
        }
    }
    match stale.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{} differ(s) from what grammar.js generates: run `tree-sitter generate --abi {TREE_SITTER_ABI}` in {TREE_SITTER} (tree-sitter-cli {TREE_SITTER_VERSION}) and commit src/",
            stale.join(", ")
        )),
    }
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => pending.push(path),
                false => files.push(path),
            }
        }
    }
    files
}

/// `tree-sitter parse --quiet` over every spec of [`PARSED_SPECS`]: no ERROR or MISSING node.
fn parse_problems(root: &Path, dir: &Path) -> Result<(), String> {
    let specs: Vec<String> = PARSED_SPECS
        .iter()
        .flat_map(|specs| find_specs(&root.join(specs)))
        .map(|path| path.to_string_lossy().into_owned())
        .collect();
    if specs.is_empty() {
        return Err(format!("no spec found under {}", PARSED_SPECS.join(", ")));
    }
    let mut args = vec!["parse", "--quiet"];
    args.extend(specs.iter().map(String::as_str));
    quiet(dir, "tree-sitter", &args)
}

/// Runs `program args` in `dir` with its output captured: shown only when it fails.
fn quiet(dir: &Path, program: &str, args: &[&str]) -> Result<(), String> {
    let shown = format!(
        "{program} {}",
        args.iter().take(4).copied().collect::<Vec<_>>().join(" ")
    );
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|error| format!("cannot run {program}: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines.get(lines.len().saturating_sub(60)..).unwrap_or(&[]);
    Err(format!(
        "`{shown}` failed ({}):\n{}",
        output.status,
        tail.join("\n")
    ))
}

/// `program --version`'s first line, or `None` when it cannot run.
fn version_of(program: &str) -> Option<String> {
    let output = Command::new(program).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    output
        .status
        .success()
        .then(|| text.lines().next().unwrap_or_default().trim().to_string())
}

/// Every keyword of the compiler's grammar (`kw_NAME = @{ "word" ... }`) is a keyword of
/// the TextMate grammar, of the tree-sitter grammar and of its highlight query.
fn keyword_problems(root: &Path) -> Result<(), String> {
    let read = |path: &str| {
        std::fs::read_to_string(root.join(path)).map_err(|error| format!("{path}: {error}"))
    };
    let pest = read("compiler/src/syntax/grammar.pest")?;
    let keywords = pest_keywords(&pest);
    if keywords.is_empty() {
        return Err("no kw_* rule found in compiler/src/syntax/grammar.pest".to_string());
    }
    let textmate = textmate_keywords(&read(&format!(
        "{VSCODE}/syntaxes/charter.tmLanguage.json"
    ))?)?;
    let tree_sitter = grammar_json_strings(&read(&format!("{TREE_SITTER}/src/grammar.json"))?)?;
    let highlights = read(&format!("{TREE_SITTER}/queries/highlights.scm"))?;
    let mut problems = Vec::new();
    for keyword in &keywords {
        if !textmate.contains(keyword) {
            problems.push(format!(
                "`{keyword}` is not a keyword of {VSCODE}/syntaxes/charter.tmLanguage.json"
            ));
        }
        if !tree_sitter.contains(keyword) {
            problems.push(format!("`{keyword}` is not in {TREE_SITTER}/grammar.js"));
        }
        // Type names, effects and `branch` are highlighted as whole nodes (`primitive_type`,
        // `effect`, `branch`), not as a quoted keyword.
        let as_node = matches!(
            keyword.as_str(),
            "string" | "bool" | "int" | "float" | "read" | "write" | "external" | "branch"
        );
        if !as_node && !highlights.contains(&format!("\"{keyword}\"")) {
            problems.push(format!(
                "`{keyword}` is not highlighted by {TREE_SITTER}/queries/highlights.scm"
            ));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("\n")),
    }
}

/// The words of the `kw_*` rules of `grammar.pest`.
pub fn pest_keywords(pest: &str) -> Vec<String> {
    pest.lines()
        .filter_map(|line| line.trim_start().strip_prefix("kw_"))
        .filter_map(|rest| rest.split_once("@{"))
        .filter_map(|(_, body)| body.split('"').nth(1))
        .map(str::to_string)
        .collect()
}

/// The words of the TextMate grammar's keyword alternations: every `(a|b|c)` group of
/// plain words in a `match` of its `keywords` and `property-keyword` rules.
pub fn textmate_keywords(grammar: &str) -> Result<BTreeSet<String>, String> {
    let json: serde_json::Value =
        serde_json::from_str(grammar).map_err(|error| format!("TextMate grammar: {error}"))?;
    let repository = &json["repository"];
    let mut patterns: Vec<&serde_json::Value> = repository["keywords"]["patterns"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    patterns.push(&repository["property-keyword"]);
    let mut words = BTreeSet::new();
    for regex in patterns
        .iter()
        .filter_map(|pattern| pattern["match"].as_str())
    {
        for group in regex
            .split('(')
            .skip(1)
            .filter_map(|part| part.split(')').next())
        {
            if group
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == '|')
            {
                words.extend(group.split('|').map(str::to_string));
            }
        }
    }
    Ok(words)
}

/// Every literal string of a tree-sitter `grammar.json` (its keywords and punctuation).
pub fn grammar_json_strings(grammar: &str) -> Result<BTreeSet<String>, String> {
    fn walk(value: &serde_json::Value, found: &mut BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) => {
                if map.get("type").and_then(|kind| kind.as_str()) == Some("STRING")
                    && let Some(text) = map.get("value").and_then(|text| text.as_str())
                {
                    found.insert(text.to_string());
                }
                map.values().for_each(|inner| walk(inner, found));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|inner| walk(inner, found)),
            _ => {}
        }
    }
    let json: serde_json::Value =
        serde_json::from_str(grammar).map_err(|error| format!("grammar.json: {error}"))?;
    let mut found = BTreeSet::new();
    walk(&json["rules"], &mut found);
    Ok(found)
}

/// Capture names that Helix spells otherwise than Neovim, Zed and the tree-sitter CLI.
const HELIX_NAMES: [(&str, &str); 7] = [
    ("number", "constant.numeric"),
    ("boolean", "constant.builtin.boolean"),
    ("module", "namespace"),
    ("property", "variable.other.member"),
    ("string.escape", "constant.character.escape"),
    ("type.definition", "type"),
    ("function.call", "function"),
];

/// The highlight query with Helix's capture names: every `@name` of [`HELIX_NAMES`]
/// renamed (predicates name captures the same way, so they follow), the rest unchanged.
pub fn helix_query(query: &str) -> String {
    let mut out = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(at) = rest.find('@') {
        let (before, from_at) = rest.split_at(at);
        out.push_str(before);
        let name_len = from_at[1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
            .unwrap_or(from_at.len() - 1);
        let name = &from_at[1..=name_len];
        let renamed = HELIX_NAMES
            .iter()
            .find(|(from, _)| *from == name)
            .map_or(name, |(_, to)| to);
        out.push('@');
        out.push_str(renamed);
        rest = &from_at[1 + name_len..];
    }
    out.push_str(rest);
    out
}

/// `queries/helix/highlights.scm` is `helix_query` of `queries/highlights.scm`, under a
/// header saying so. With `write`, (re)writes it instead of failing.
pub fn helix_file(root: &Path, write: bool) -> Result<(), String> {
    let source = format!("{TREE_SITTER}/queries/highlights.scm");
    let query = std::fs::read_to_string(root.join(&source))
        .map_err(|error| format!("{source}: {error}"))?;
    let wanted = format!(
        "; Generated from ../highlights.scm by `cargo xtask editors --write`: the same query\n\
         ; with Helix's capture names. Edit ../highlights.scm, not this file.\n\n{}",
        helix_query(&query)
    );
    let path = root.join(HELIX_HIGHLIGHTS);
    if std::fs::read_to_string(&path).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(());
    }
    if !write {
        return Err(format!(
            "{HELIX_HIGHLIGHTS} is not {source} with Helix's capture names: run `cargo xtask editors --write`"
        ));
    }
    let dir = path.parent().unwrap_or(root);
    std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let scratch = path.with_extension("scm.tmp");
    std::fs::write(&scratch, &wanted)
        .and_then(|()| std::fs::rename(&scratch, &path))
        .map_err(|error| format!("{HELIX_HIGHLIGHTS}: {error}"))
}

fn helix_problems(root: &Path) -> Result<(), String> {
    helix_file(root, false)
}

/// Each tree-sitter highlight fixture (`test/highlight/NAME`) has a TextMate twin
/// (`editors/vscode/test/NAME`) with the same source: only the assertion lines differ.
fn fixture_problems(root: &Path) -> Result<(), String> {
    let highlight = root.join(TREE_SITTER).join("test/highlight");
    let fixtures = files_under(&highlight);
    if fixtures.is_empty() {
        return Err(format!("no fixture under {}", highlight.display()));
    }
    let mut problems = Vec::new();
    for fixture in fixtures {
        let name = display_path(&fixture, &highlight);
        let twin = root.join(VSCODE).join("test").join(&name);
        let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
        if let Some(line) = first_source_difference(&read(&fixture), &read(&twin)) {
            problems.push(format!(
                "{TREE_SITTER}/test/highlight/{name} and {VSCODE}/test/{name} differ in source line {line}"
            ));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("\n")),
    }
}

/// The first source line (1-based, assertion lines left out) where `a` and `b` differ, or
/// `None` when their sources are the same. An assertion line is a `//` comment whose text
/// starts with `^` or `<-` (the form both test tools read).
pub fn first_source_difference(a: &str, b: &str) -> Option<usize> {
    let source = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|line| {
                let Some(rest) = line.trim_start().strip_prefix("//") else {
                    return true;
                };
                let rest = rest.trim_start();
                !(rest.starts_with('^') || rest.starts_with("<-"))
            })
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (source(a), source(b));
    if a.is_empty() && b.is_empty() {
        return Some(1);
    }
    (0..a.len().max(b.len()))
        .find(|&index| a.get(index) != b.get(index))
        .map(|index| index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pest_keywords_reads_each_kw_rule() {
        let pest = "ident = @{ ASCII_ALPHA }\nkw_spec        = @{ \"spec\" ~ !ident_char }\n\
                    kw_max_tool_calls = @{ \"max_tool_calls\" ~ !ident_char }\n";
        assert_eq!(pest_keywords(pest), ["spec", "max_tool_calls"]);
    }

    #[test]
    fn textmate_keywords_reads_word_alternations_only() {
        let grammar = r#"{"repository": {
            "keywords": {"patterns": [{"match": "(?<![.\\w])\\b(spec|role)\\b"}, {"match": "[A-Z](x)"}]},
            "property-keyword": {"match": "\\b(model|max_tool_calls)\\s*(?=:)"}}}"#;
        let words = textmate_keywords(grammar).expect("a valid grammar");
        let expected: BTreeSet<String> = ["spec", "role", "x", "model", "max_tool_calls"]
            .map(String::from)
            .into();
        assert_eq!(words, expected);
    }

    #[test]
    fn grammar_json_strings_finds_nested_strings() {
        let grammar = r#"{"rules": {"a": {"type": "SEQ", "members": [
            {"type": "STRING", "value": "flow"}, {"type": "PATTERN", "value": "x+"},
            {"type": "CHOICE", "members": [{"type": "STRING", "value": "done"}]}]}}}"#;
        let strings = grammar_json_strings(grammar).expect("a valid grammar.json");
        assert_eq!(strings, ["done", "flow"].map(String::from).into());
    }

    #[test]
    fn packed_files_lists_what_package_json_names() {
        let manifest = r#"{"main": "./src/extension.js", "contributes": {
            "languages": [{"id": "a", "configuration": "./lang.json"}, {"id": "b"}],
            "grammars": [{"path": "./syntaxes/a.json"}],
            "yamlValidation": [{"fileMatch": "x", "url": "./schemas/s.json"}]}}"#;
        assert_eq!(
            packed_files(manifest).expect("a valid package.json"),
            [
                "src/extension.js",
                "syntaxes/a.json",
                "lang.json",
                "schemas/s.json"
            ]
        );
    }

    #[test]
    fn fixtures_with_the_same_source_and_other_assertions_agree() {
        let textmate =
            "spec s version \"1\"\n// <---- storage.type.spec.charter\n//   ^^ x\nflow {}\n";
        let tree_sitter = "spec s version \"1\"\n// <- keyword\n  //   ^ module\nflow {}\n";
        assert_eq!(first_source_difference(textmate, tree_sitter), None);
    }

    #[test]
    fn fixtures_that_differ_in_source_are_found() {
        let a = "spec s version \"1\"\n// ^ keyword\n// a comment\nflow {}\n";
        assert_eq!(
            first_source_difference(a, "spec s version \"1\"\nflow {}\n"),
            Some(2)
        );
        assert_eq!(first_source_difference(a, ""), Some(1));
        assert_eq!(first_source_difference("", ""), Some(1));
    }

    /// A fresh scratch directory under the system's temporary one.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-editors-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    }

    #[test]
    fn vsix_problems_names_a_missing_file_and_a_packed_test() {
        let dir = scratch("vsix");
        let manifest = r#"{"main": "./src/extension.js", "contributes": {"grammars": [{"path": "./syntaxes/a.json"}]}}"#;
        std::fs::write(dir.join("package.json"), manifest).expect("package.json");
        let vsix = dir.join("x.vsix");
        let complete = "extension/src/extension.js extension/syntaxes/a.json \
                        extension/node_modules/vscode-languageclient/node.js";
        std::fs::write(&vsix, complete).expect("vsix");
        assert_eq!(vsix_problems(&dir, &vsix), Ok(()));
        std::fs::write(
            &vsix,
            "extension/src/extension.js extension/test/x.js \
                               extension/node_modules/vscode-languageclient/node.js",
        )
        .expect("vsix");
        let problems = vsix_problems(&dir, &vsix).expect_err("two problems");
        assert!(problems.contains("lacks syntaxes/a.json"), "{problems}");
        assert!(problems.contains("packs test/"), "{problems}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn node_modules_is_stale_when_missing_or_older_than_the_lock() {
        let dir = scratch("stale");
        std::fs::write(dir.join("package-lock.json"), "{}").expect("lock");
        assert!(node_modules_stale(&dir));
        std::fs::create_dir_all(dir.join("node_modules")).expect("node_modules");
        std::fs::write(dir.join("node_modules/.package-lock.json"), "{}").expect("installed");
        let lock = std::fs::File::options()
            .write(true)
            .open(dir.join("package-lock.json"))
            .expect("lock");
        let now = std::time::SystemTime::now();
        lock.set_modified(now - std::time::Duration::from_secs(60))
            .expect("mtime");
        assert!(!node_modules_stale(&dir));
        lock.set_modified(now + std::time::Duration::from_secs(60))
            .expect("mtime");
        assert!(node_modules_stale(&dir));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn helix_query_renames_only_whole_capture_names() {
        let query = "(number) @number\n(x) @numbers\n((identifier) @property (#eq? @property \"a\"))\n(y) @string.escape.more @keyword";
        assert_eq!(
            helix_query(query),
            "(number) @constant.numeric\n(x) @numbers\n((identifier) @variable.other.member (#eq? @variable.other.member \"a\"))\n(y) @string.escape.more @keyword"
        );
    }

    #[test]
    fn the_repository_grammars_know_every_keyword_and_fixtures_agree() {
        let root = crate::corpus::workspace_root();
        assert_eq!(keyword_problems(&root), Ok(()));
        assert_eq!(fixture_problems(&root), Ok(()));
        assert_eq!(helix_problems(&root), Ok(()));
    }
}
