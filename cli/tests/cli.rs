//! End-to-end tests of the `charter` binary: exit codes, output formats, colour, directory
//! walks and file loading, on specs written to a scratch directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A small spec that compiles with no error and no warning.
const CLEAN: &str = r#"spec hello version "1.0.0"

models { default = "openai:gpt-4o-mini" }

contract Request { goal: string }
contract Reply { text: string }

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

/// `CLEAN` with an unknown contract (E002) on line 12.
fn with_unknown_contract() -> String {
    CLEAN.replace("output: Reply", "output: Rply")
}

/// `CLEAN` plus an unused contract (W001): warnings only.
fn with_unused_contract() -> String {
    CLEAN.replace(
        "contract Reply { text: string }",
        "contract Reply { text: string }\ncontract Unused { note: string }",
    )
}

/// A fresh, empty scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-tests")
        .join(test);
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).expect("cannot create a scratch directory");
    directory
}

fn write(directory: &Path, relative: &str, text: &str) {
    let path = directory.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("cannot create a directory");
    }
    std::fs::write(path, text).expect("cannot write a test file");
}

/// Runs `charter args` in `directory` with a clean colour environment.
fn charter(directory: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .current_dir(directory)
        .env_remove("NO_COLOR")
        .output()
        .expect("cannot run charter")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the exit code, showing the output when it differs.
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
fn clean_spec_exits_0_silently() {
    let directory = scratch("clean_spec_exits_0_silently");
    write(&directory, "hello.charter", CLEAN);
    let output = charter(&directory, &["check", "hello.charter"]);
    assert_exit(&output, 0);
    assert_eq!(stderr(&output), "");
}

#[test]
fn errors_exit_1_with_rustc_like_diagnostics() {
    let directory = scratch("errors_exit_1_with_rustc_like_diagnostics");
    write(&directory, "hello.charter", &with_unknown_contract());
    let output = charter(&directory, &["check", "hello.charter"]);
    assert_exit(&output, 1);
    let text = stderr(&output);
    assert!(text.contains("error[E002]: "), "{text}");
    assert!(text.contains("--> hello.charter:12:11"), "{text}");
    assert!(text.contains("12 |   output: Rply"), "{text}");
    assert!(text.contains("did you mean `Reply`?"), "{text}");
    assert!(text.contains("error: `hello.charter`: 1 error"), "{text}");
}

#[test]
fn syntax_errors_exit_1() {
    let directory = scratch("syntax_errors_exit_1");
    write(
        &directory,
        "broken.charter",
        &CLEAN.replace("version \"1.0.0\"", "\"1.0.0\""),
    );
    let output = charter(&directory, &["check", "broken.charter"]);
    assert_exit(&output, 1);
    assert!(
        stderr(&output).contains("error[E001]"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn warnings_exit_0_unless_denied() {
    let directory = scratch("warnings_exit_0_unless_denied");
    write(&directory, "hello.charter", &with_unused_contract());
    let output = charter(&directory, &["check", "hello.charter"]);
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("warning[W001]"),
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("warning: `hello.charter`: 1 warning"));

    let denied = charter(&directory, &["check", "--deny-warnings", "hello.charter"]);
    assert_exit(&denied, 1);
}

#[test]
fn usage_problems_exit_2() {
    let directory = scratch("usage_problems_exit_2");
    write(&directory, "notes.txt", "not a spec");
    std::fs::create_dir_all(directory.join("empty")).expect("cannot create a directory");
    let cases: [&[&str]; 5] = [
        &["check"],
        &["check", "missing.charter"],
        &["check", "notes.txt"],
        &["check", "empty"],
        &["check", "--message-format", "xml", "notes.txt"],
    ];
    for args in cases {
        let output = charter(&directory, args);
        assert_exit(&output, 2);
        assert!(!stderr(&output).is_empty(), "{args:?} printed no reason");
    }
    let missing = charter(&directory, &["check", "missing.charter"]);
    assert!(stderr(&missing).contains("`missing.charter` does not exist"));
}

#[test]
fn json_diagnostics_have_every_field() {
    let directory = scratch("json_diagnostics_have_every_field");
    write(&directory, "hello.charter", &with_unknown_contract());
    let output = charter(
        &directory,
        &["check", "--message-format", "json", "hello.charter"],
    );
    assert_exit(&output, 1);
    let text = stderr(&output);
    let diagnostics: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let first = diagnostics.first().expect("no diagnostic");
    assert_eq!(first["code"], "E002");
    assert_eq!(first["severity"], "error");
    assert_eq!(first["file"], "hello.charter");
    assert_eq!(first["line"], 12);
    assert_eq!(first["column"], 11);
    assert_eq!(first["end_line"], 12);
    assert_eq!(first["end_column"], 15);
    let start = first["span"]["start"].as_u64().unwrap_or_default() as usize;
    let end = first["span"]["end"].as_u64().unwrap_or_default() as usize;
    assert_eq!(with_unknown_contract().get(start..end), Some("Rply"));
    assert!(first["message"].is_string());
    assert!(first["labels"].is_array());
    assert!(first["help"].is_string());
}

#[test]
fn colour_only_when_asked_and_no_color_respected() {
    let directory = scratch("colour_only_when_asked_and_no_color_respected");
    write(&directory, "hello.charter", &with_unknown_contract());
    let escape = '\u{1b}';

    let piped = charter(&directory, &["check", "hello.charter"]);
    assert!(!stderr(&piped).contains(escape), "colour on a pipe");

    let forced = charter(&directory, &["check", "--color", "always", "hello.charter"]);
    assert!(
        stderr(&forced).contains(escape),
        "no colour with --color always"
    );

    let no_color = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(["check", "hello.charter"])
        .current_dir(&directory)
        .env("NO_COLOR", "1")
        .output()
        .expect("cannot run charter");
    assert!(
        !stderr(&no_color).contains(escape),
        "colour despite NO_COLOR"
    );
    assert_exit(&no_color, 1);
}

#[test]
fn directories_are_walked_recursively_in_sorted_order() {
    let directory = scratch("directories_are_walked_recursively_in_sorted_order");
    write(&directory, "specs/b.charter", &with_unknown_contract());
    write(&directory, "specs/a.charter", CLEAN);
    write(
        &directory,
        "specs/nested/c.charter",
        &with_unknown_contract(),
    );
    write(&directory, "specs/nested/readme.md", "not a spec");
    let output = charter(&directory, &["check", "specs"]);
    assert_exit(&output, 1);
    let text = stderr(&output);
    let b = text.find("--> specs/b.charter:12:11");
    let c = text.find("--> specs/nested/c.charter:12:11");
    assert!(b.is_some() && c.is_some() && b < c, "{text}");
    assert!(!text.contains("a.charter"), "{text}");
    assert!(
        text.contains("error: 2 of 3 specs failed: 2 errors"),
        "{text}"
    );
}

#[test]
fn prompt_files_are_read_relative_to_the_spec() {
    let directory = scratch("prompt_files_are_read_relative_to_the_spec");
    let spec = CLEAN.replace(
        r#"prompt: """Answer: {{ request.goal }}""""#,
        r#"prompt: file("prompts/writer.md.j2")"#,
    );
    write(&directory, "project/hello.charter", &spec);
    write(
        &directory,
        "project/prompts/writer.md.j2",
        "Answer: {{ request.goal }}\n",
    );
    let output = charter(&directory, &["check", "project/hello.charter"]);
    assert_exit(&output, 0);

    std::fs::remove_file(directory.join("project/prompts/writer.md.j2"))
        .expect("cannot remove the prompt");
    let missing = charter(&directory, &["check", "project/hello.charter"]);
    assert_exit(&missing, 1);
    let text = stderr(&missing);
    assert!(text.contains("error[E016]"), "{text}");
    assert!(text.contains("project/prompts/writer.md.j2"), "{text}");
}

#[test]
fn bounds_are_printed_on_stdout() {
    let directory = scratch("bounds_are_printed_on_stdout");
    write(&directory, "hello.charter", CLEAN);
    let output = charter(&directory, &["check", "--bounds", "hello.charter"]);
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("hello"), "{}", stdout(&output));
}

#[test]
fn explain_prints_a_code_and_rejects_unknown_ones() {
    let directory = scratch("explain_prints_a_code_and_rejects_unknown_ones");
    let output = charter(&directory, &["explain", "E006"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(text.starts_with("E006: "), "{text}");
    assert!(text.contains("Wrong:") && text.contains("Right:"), "{text}");

    let lower = charter(&directory, &["explain", "w004"]);
    assert_exit(&lower, 0);

    let unknown = charter(&directory, &["explain", "E999"]);
    assert_exit(&unknown, 2);
    assert!(stderr(&unknown).contains("E016"), "{}", stderr(&unknown));
}

#[test]
fn graph_prints_mermaid_dot_and_json() {
    let directory = scratch("graph_prints_mermaid_dot_and_json");
    write(&directory, "hello.charter", CLEAN);
    let mermaid = charter(
        &directory,
        &["graph", "hello.charter", "--format", "mermaid"],
    );
    assert_exit(&mermaid, 0);
    assert!(
        stdout(&mermaid).starts_with("flowchart"),
        "{}",
        stdout(&mermaid)
    );

    let dot = charter(&directory, &["graph", "hello.charter", "--format", "dot"]);
    assert_exit(&dot, 0);
    assert!(stdout(&dot).starts_with("digraph"), "{}", stdout(&dot));

    let json = charter(&directory, &["graph", "hello.charter", "--format", "json"]);
    assert_exit(&json, 0);
    let value: Result<serde_json::Value, _> = serde_json::from_str(&stdout(&json));
    assert!(value.is_ok(), "{}", stdout(&json));
}

#[test]
fn graph_of_a_broken_spec_exits_1_with_diagnostics() {
    let directory = scratch("graph_of_a_broken_spec_exits_1_with_diagnostics");
    write(&directory, "hello.charter", &with_unknown_contract());
    let output = charter(&directory, &["graph", "hello.charter"]);
    assert_exit(&output, 1);
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("error[E002]"),
        "{}",
        stderr(&output)
    );

    let missing = charter(&directory, &["graph", "missing.charter"]);
    assert_exit(&missing, 2);
}

#[test]
fn every_subcommand_has_help_with_an_example() {
    let directory = scratch("every_subcommand_has_help_with_an_example");
    for subcommand in ["check", "graph", "explain"] {
        let output = charter(&directory, &[subcommand, "--help"]);
        assert_exit(&output, 0);
        assert!(
            stdout(&output).contains(&format!("Example: charter {subcommand}")),
            "{}",
            stdout(&output)
        );
    }
}

/// Issue 28: `{% include %}` reads files relative to the including template, only inside
/// the spec's directory; a path that climbs out of it is a compile error that quotes
/// nothing of what is there (DESIGN §15), and a missing piece names its line.
#[test]
fn included_prompt_pieces_are_read_inside_the_spec_directory_only() {
    let directory = scratch("included_prompt_pieces_are_read_inside_the_spec_directory_only");
    write(&directory, "canary.txt", "CANARY-7f3a {{ request.goal }}");
    write(&directory, "project/secret/canary.txt", "CANARY-inside");
    let spec = CLEAN.replace(
        r#"prompt: """Answer: {{ request.goal }}""""#,
        r#"prompt: file("prompts/writer.md.j2")"#,
    );
    write(&directory, "project/hello.charter", &spec);
    write(
        &directory,
        "project/prompts/writer.md.j2",
        "Answer: {{ request.goal }}\n{% include \"parts/tone.j2\" %}\n",
    );
    write(&directory, "project/prompts/parts/tone.j2", "Be calm.");
    assert_exit(&charter(&directory, &["check", "project/hello.charter"]), 0);

    for escape in [
        "../../canary.txt",
        "parts/../../../canary.txt",
        "/etc/hostname",
    ] {
        write(
            &directory,
            "project/prompts/parts/tone.j2",
            &format!("Be calm.\n{{% include \"{escape}\" %}}"),
        );
        let output = charter(&directory, &["check", "project/hello.charter"]);
        assert_exit(&output, 1);
        let text = stderr(&output);
        assert!(text.contains("error[E016]"), "{escape}: {text}");
        assert!(
            text.contains("project/prompts/parts/tone.j2:2"),
            "{escape}: {text}"
        );
        assert!(!text.contains("CANARY"), "{escape}: {text}");
    }

    write(
        &directory,
        "project/prompts/parts/tone.j2",
        "Be calm.\n{% include \"../../secret/canary.txt\" %}",
    );
    assert_exit(&charter(&directory, &["check", "project/hello.charter"]), 0);
    std::fs::remove_file(directory.join("project/secret/canary.txt"))
        .expect("cannot remove the piece");
    let missing = charter(&directory, &["check", "project/hello.charter"]);
    assert_exit(&missing, 1);
    let text = stderr(&missing);
    assert!(text.contains("error[E016]"), "{text}");
    assert!(text.contains("project/prompts/parts/tone.j2:2"), "{text}");
}
