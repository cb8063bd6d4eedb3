//! End-to-end tests of `charter fmt`: rewriting, `--check` with its diff and exit code,
//! stdin to stdout, the project's specs by default, and a spec that cannot be formatted.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A spec in the canonical layout.
const FORMATTED: &str = r#"spec hello version "1.0.0"

models { default = "openai:gpt-4o-mini" }

contract Request { goal: string }
contract Reply   { text: string }  // what the writer answers

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

/// `FORMATTED` as someone might write it.
const MESSY: &str = r#"spec hello version "1.0.0"

models{default="openai:gpt-4o-mini"}

contract Request{goal:string}
contract Reply { text : string } // what the writer answers

role writer {
    model: default
    prompt: """Answer: {{ request.goal }}"""
    input: Request   output: Reply
}


flow {
  write=writer( request )->done
}
"#;

fn scratch(test: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fmt-tests")
        .join(test);
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(directory.join("specs")).expect("cannot create a scratch directory");
    directory
}

fn charter(directory: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .current_dir(directory)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run charter");
    if let Some(mut input) = child.stdin.take() {
        input
            .write_all(stdin.as_bytes())
            .expect("cannot write stdin");
    }
    child.wait_with_output().expect("cannot run charter")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("cannot read a spec")
}

#[test]
fn the_canonical_layout_is_what_fmt_writes() {
    let directory = scratch("the_canonical_layout_is_what_fmt_writes");
    let spec = directory.join("specs").join("hello.charter");
    std::fs::write(&spec, MESSY).expect("write");
    let output = charter(&directory, &["fmt", "specs/hello.charter"], "");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(read(&spec), FORMATTED);
    assert!(text(&output.stderr).contains("formatted specs/hello.charter"));

    // A second run changes nothing and says nothing.
    let output = charter(&directory, &["fmt"], "");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(text(&output.stderr), "");
    assert_eq!(read(&spec), FORMATTED);
}

#[test]
fn check_changes_nothing_shows_a_diff_and_exits_1() {
    let directory = scratch("check_changes_nothing_shows_a_diff_and_exits_1");
    let messy = directory.join("specs").join("messy.charter");
    let tidy = directory.join("specs").join("tidy.charter");
    std::fs::write(&messy, MESSY).expect("write");
    std::fs::write(&tidy, FORMATTED).expect("write");
    let output = charter(&directory, &["fmt", "--check", "specs"], "");
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(read(&messy), MESSY, "--check must not write");
    let diff = text(&output.stdout);
    assert!(diff.contains("--- specs/messy.charter"), "{diff}");
    assert!(
        diff.contains("\n-contract Request{goal:string}\n"),
        "{diff}"
    );
    assert!(
        diff.contains("\n+contract Request { goal: string }\n"),
        "{diff}"
    );
    assert!(!diff.contains("tidy.charter"), "{diff}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("not formatted: specs/messy.charter"),
        "{stderr}"
    );
    assert!(stderr.contains("1 spec of 2 not formatted"), "{stderr}");

    let output = charter(&directory, &["fmt", "--check", "specs/tidy.charter"], "");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(text(&output.stdout), "");
}

#[test]
fn a_dash_formats_stdin_to_stdout() {
    let directory = scratch("a_dash_formats_stdin_to_stdout");
    let output = charter(&directory, &["fmt", "-"], MESSY);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), FORMATTED);

    let output = charter(&directory, &["fmt", "--check", "-"], MESSY);
    assert_eq!(output.status.code(), Some(1));
    let output = charter(&directory, &["fmt", "--check", "-"], FORMATTED);
    assert_eq!(output.status.code(), Some(0));

    let output = charter(&directory, &["fmt", "-", "specs"], "");
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_spec_that_cannot_be_formatted_is_reported_as_check_reports_it_and_exits_2() {
    let directory =
        scratch("a_spec_that_cannot_be_formatted_is_reported_as_check_reports_it_and_exits_2");
    let broken = directory.join("specs").join("broken.charter");
    let written = "spec broken\ncontract A { x: int }\n";
    std::fs::write(&broken, written).expect("write");
    let output = charter(&directory, &["fmt", "specs"], "");
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(read(&broken), written);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("error[E001]"), "{stderr}");
    assert!(stderr.contains("specs/broken.charter:2:1"), "{stderr}");
    assert!(stderr.contains("cannot be formatted"), "{stderr}");

    // An item with a syntax error is kept as written and the rest is formatted.
    let partly = "spec partly version \"1\"\ncontract A {x:int}\ncontract B { x int }\n";
    let output = charter(&directory, &["fmt", "-"], partly);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        text(&output.stdout),
        "spec partly version \"1\"\ncontract A { x: int }\ncontract B { x int }\n"
    );
}
