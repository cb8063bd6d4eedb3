//! One meaning per flag across commands (DESIGN §18) and the first minutes of a new user: `check` on the project by default, `view -o FILE` and `--out DIR`, `--message-format` shown, the flags table of `charter --help` and the README, `charter new .`, and the CI workflow `charter new` writes.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::{copy_dir, repository};

/// A small spec with no error; `{EXTRA}` is replaced by more declarations.
const SPEC: &str = r#"spec NAME version "1.0.0"

models { default = "openai:gpt-4o-mini" }

contract Request { goal: string }
contract Reply { text: string }
EXTRA
role writer {
  model: default
  prompt: """Answer: {{ request.goal }}"""
  input: Request
  output: Reply
}

flow {
  write = writer(request) -> done
}
"#;

fn spec(name: &str, extra: &str) -> String {
    SPEC.replace("NAME", name).replace("EXTRA", extra)
}

/// A fresh, empty scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("flags-tests")
        .join(test);
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap_or_else(|error| panic!("{error}"));
    directory
}

fn write(directory: &Path, relative: &str, text: &str) {
    let path = directory.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|error| panic!("{error}"));
    }
    std::fs::write(path, text).unwrap_or_else(|error| panic!("{error}"));
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// `charter ARGS` in `directory`, with NO_COLOR.
fn charter(directory: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .current_dir(directory)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_exit(output: &Output, expected: i32) {
    assert_eq!(
        output.status.code(),
        Some(expected),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
}

#[test]
fn check_with_no_path_checks_the_project_here_as_verify_does() {
    let project = scratch("check_project");
    // A warning (an unused contract) so that the spec checked names itself on stderr.
    write(
        &project,
        "specs/agent.charter",
        &spec("agent", "contract Unused { note: string }"),
    );
    // A compile-fail case, which verify skips too.
    write(&project, "specs/invalid/broken.charter", "spec broken {");
    // A spec outside specs/ is no part of the project's specs.
    write(&project, "notes/other.charter", "not a spec at all");
    let checked = charter(&project, &["check"]);
    assert_exit(&checked, 0);
    let said = stderr(&checked);
    assert!(said.contains("specs/agent.charter"), "{said}");
    assert!(said.contains("W001"), "{said}");
    assert!(
        !said.contains("broken") && !said.contains("other"),
        "{said}"
    );
    let denied = charter(&project, &["check", "--deny-warnings"]);
    assert_exit(&denied, 1);

    // Without specs/, every spec under the directory.
    let loose = scratch("check_loose");
    write(&loose, "a/one.charter", &spec("one", ""));
    write(
        &loose,
        "two.charter",
        &spec("two", "contract Unused { note: string }"),
    );
    let checked = charter(&loose, &["check"]);
    assert_exit(&checked, 0);
    assert!(
        stderr(&checked).contains("checked 2 specs"),
        "{}",
        stderr(&checked)
    );

    // Nothing to check is a usage error that says where it looked.
    let empty = scratch("check_empty");
    let nothing = charter(&empty, &["check"]);
    assert_exit(&nothing, 2);
    assert!(
        stderr(&nothing).contains("no `.charter` files found in `.`"),
        "{}",
        stderr(&nothing)
    );
    let only_invalid = scratch("check_only_invalid");
    write(
        &only_invalid,
        "specs/invalid/broken.charter",
        "spec broken {",
    );
    let nothing = charter(&only_invalid, &["check"]);
    assert_exit(&nothing, 2);
    assert!(
        stderr(&nothing).contains("specs/invalid"),
        "{}",
        stderr(&nothing)
    );
}

#[test]
fn check_shows_message_format_as_the_same_flag_as_format() {
    let directory = scratch("message_format");
    let help = charter(&directory, &["check", "--help"]);
    assert_exit(&help, 0);
    assert!(
        stdout(&help).contains("--format <FORMAT>"),
        "{}",
        stdout(&help)
    );
    assert!(
        stdout(&help).contains("[alias: --message-format]"),
        "{}",
        stdout(&help)
    );
    write(
        &directory,
        "a.charter",
        &spec("a", "contract Unused { note: string }"),
    );
    let by_format = charter(&directory, &["check", "--format", "json", "a.charter"]);
    let by_alias = charter(
        &directory,
        &["check", "--message-format", "json", "a.charter"],
    );
    assert_exit(&by_format, 0);
    assert_eq!(stderr(&by_format), stderr(&by_alias));
    let first: Value = serde_json::from_str(stderr(&by_format).lines().next().unwrap_or_default())
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(first["code"], "W001");
}

/// A scratch directory holding a copy of a golden scenario: its `trace.snap` is a trace.
fn with_trace(test: &str) -> PathBuf {
    let directory = scratch(test);
    copy_dir(
        &repository().join("golden/closed_loop/happy_path"),
        &directory,
    );
    directory
}

fn is_page(path: &Path) -> bool {
    path.is_file() && read(path).starts_with("<!doctype html>")
}

#[test]
fn view_writes_a_file_with_o_and_into_a_directory_with_out() {
    let directory = with_trace("view");
    let short = charter(&directory, &["view", "trace.snap", "-o", "short.html"]);
    assert_exit(&short, 0);
    assert!(is_page(&directory.join("short.html")));
    let long = charter(&directory, &["view", "trace.snap", "--output", "long.html"]);
    assert_exit(&long, 0);
    assert!(is_page(&directory.join("long.html")));

    // --out is a directory, as for run and replay: made when missing, the page named
    // after the trace.
    let into = charter(&directory, &["view", "trace.snap", "--out", "pages/new"]);
    assert_exit(&into, 0);
    assert!(is_page(&directory.join("pages/new/trace.html")));
    assert!(
        stderr(&into).contains("wrote pages/new/trace.html"),
        "{}",
        stderr(&into)
    );

    // --out given a file, as it once took: refused, naming -o, nothing written.
    let file = charter(&directory, &["view", "trace.snap", "--out", "page.html"]);
    assert_exit(&file, 2);
    assert!(
        stderr(&file).contains("--out takes a directory")
            && stderr(&file).contains("give `-o page.html`"),
        "{}",
        stderr(&file)
    );
    assert!(!directory.join("page.html").exists());
    let existing = charter(&directory, &["view", "trace.snap", "--out", "short.html"]);
    assert_exit(&existing, 2);
    let both = charter(
        &directory,
        &["view", "trace.snap", "-o", "a.html", "--out", "d"],
    );
    assert_exit(&both, 2);
    assert!(!directory.join("a.html").exists() && !directory.join("d").exists());
}

/// The flag rows of a table: long flag -> the commands it lists. `charter --help` writes
/// a row as `  --flag VALUE   [a, b]`; the README as `| `--flag VALUE` | meaning | a, b |`.
fn help_rows(help: &str) -> BTreeMap<String, String> {
    help.lines()
        .filter_map(|line| {
            let row = line.strip_prefix("  ").filter(|row| row.starts_with('-'))?;
            let (flag, commands) = row.split_once('[')?;
            Some((
                flag.trim().to_string(),
                commands.trim_end_matches(']').to_string(),
            ))
        })
        .collect()
}

fn readme_rows(readme: &str) -> BTreeMap<String, String> {
    let start = readme
        .find("| flag | meaning | commands |")
        .unwrap_or_else(|| panic!("the README has no flags table"));
    readme[start..]
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| {
            // `\|` is a `|` inside a cell.
            let line = line.replace("\\|", "\u{0}");
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let flag = cells.get(1)?.trim_matches('`').to_string();
            Some((flag, cells.get(3)?.to_string()))
        })
        .collect()
}

#[test]
fn the_readme_has_the_flags_table_of_charter_help() {
    let help = charter(&scratch("help"), &["--help"]);
    assert_exit(&help, 0);
    let from_help = help_rows(&stdout(&help));
    assert!(from_help.len() >= 10, "{}", stdout(&help));
    let from_readme = readme_rows(&read(&repository().join("README.md")));
    assert_eq!(from_readme, from_help);
}

#[test]
fn charter_new_dot_makes_the_project_in_an_empty_directory_named_after_it() {
    let parent = scratch("new_dot");
    let root = parent.join("Desk-Helper");
    std::fs::create_dir_all(&root).unwrap_or_else(|error| panic!("{error}"));
    let made = charter(&root, &["new", "."]);
    assert_exit(&made, 0);
    assert!(root.join("specs/desk_helper.charter").is_file());
    assert!(
        root.join("golden/desk_helper/writer_fixes_review/trace.snap")
            .is_file()
    );
    assert!(!stderr(&made).contains("cd ."), "{}", stderr(&made));
    assert_exit(&charter(&root, &["verify"]), 0);

    // A directory that is not empty is refused, and nothing is written into it.
    let busy = parent.join("busy");
    write(&busy, "notes.txt", "mine");
    let refused = charter(&busy, &["new", "."]);
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("is not an empty directory; nothing was written"),
        "{}",
        stderr(&refused)
    );
    let entries: Vec<_> = std::fs::read_dir(&busy)
        .unwrap_or_else(|error| panic!("{error}"))
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    assert_eq!(entries, ["notes.txt"]);

    // `charter new NAME` still makes a new directory, and says to cd into it.
    let named = charter(&parent, &["new", "other_agent"]);
    assert_exit(&named, 0);
    assert!(
        parent
            .join("other_agent/specs/other_agent.charter")
            .is_file()
    );
    assert!(
        stderr(&named).contains("cd other_agent"),
        "{}",
        stderr(&named)
    );
}

/// The `run:` script of the workflow's step named `name`, and the workflow's `env`.
fn workflow_step(workflow: &str, name: &str) -> (String, BTreeMap<String, String>) {
    let yaml: Value = serde_saphyr::from_str(workflow).unwrap_or_else(|error| panic!("{error}"));
    let steps = yaml["jobs"]["verify"]["steps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let step = steps
        .iter()
        .find(|step| step["name"] == name)
        .unwrap_or_else(|| panic!("no step {name}: {yaml}"));
    let env = yaml["env"]
        .as_object()
        .map(|env| {
            env.iter()
                .map(|(key, value)| (key.clone(), value.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    (step["run"].as_str().unwrap_or_default().to_string(), env)
}

/// Runs `script` with bash, a `cargo` on PATH that writes its arguments to `cargo.args`
/// in `directory`, and `env`.
fn run_install(directory: &Path, script: &str, env: &BTreeMap<String, String>) -> Output {
    let bin = directory.join("bin");
    write(
        &bin,
        "cargo",
        "#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/../cargo.args\"\n",
    );
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(bin.join("cargo"), mode).unwrap_or_else(|error| panic!("{error}"));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .args(["-e", "-c", script])
        .current_dir(directory)
        .env("PATH", path)
        .envs(env)
        .output()
        .unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn the_ci_workflow_installs_charter_locked_from_the_source_the_user_sets() {
    let parent = scratch("workflow");
    assert_exit(&charter(&parent, &["new", "agent"]), 0);
    let workflow = read(&parent.join("agent/.github/workflows/charter.yml"));
    let (script, env) = workflow_step(&workflow, "Install charter");
    assert_eq!(
        env.get("CHARTER_GIT").map(String::as_str),
        Some(""),
        "{workflow}"
    );
    assert_eq!(
        env.get("CHARTER_TAG").map(String::as_str),
        Some(""),
        "{workflow}"
    );
    assert!(
        workflow.contains(&format!("v{}", env!("CARGO_PKG_VERSION"))),
        "the version it was made by, as an example tag: {workflow}"
    );

    // As written, the job stops with an annotation that says what to set.
    let unset = run_install(&parent, &script, &env);
    assert_eq!(unset.status.code(), Some(1), "{}", stderr(&unset));
    assert!(
        stdout(&unset).contains(
            "::error file=.github/workflows/charter.yml::set CHARTER_GIT and CHARTER_TAG"
        ),
        "{}",
        stdout(&unset)
    );
    assert!(!parent.join("cargo.args").exists(), "cargo was not run");

    // Once set, charter is installed from there, with the versions of its Cargo.lock.
    let mut set = env.clone();
    set.insert(
        "CHARTER_GIT".into(),
        "https://git.example/team/charter".into(),
    );
    set.insert("CHARTER_TAG".into(), "v9.9.9".into());
    let installed = run_install(&parent, &script, &set);
    assert_exit(&installed, 0);
    assert_eq!(
        read(&parent.join("cargo.args")).trim(),
        "install --locked --git https://git.example/team/charter --tag v9.9.9 charter"
    );
}

#[test]
fn the_language_docs_example_compiles_with_no_warning() {
    let doc = read(&repository().join("docs/language.md"));
    let start = doc
        .find("```charter\n")
        .unwrap_or_else(|| panic!("docs/language.md has no ```charter example"));
    let example = &doc[start + "```charter\n".len()..];
    let example = &example[..example.find("```").unwrap_or(example.len())];
    let directory = scratch("language_doc");
    write(&directory, "example.charter", example);
    let checked = charter(&directory, &["check", "--deny-warnings", "example.charter"]);
    assert_exit(&checked, 0);
}
