//! The `charter` binary used the way a demanding new user would: odd inputs, wrong paths,
//! usage errors and colour, each with its exit code and a message that names the path
//! and what to do, and never a panic.

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

fn scratch(test: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("qa-tests")
        .join(test);
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).expect("cannot create a scratch directory");
    directory
}

fn write(directory: &Path, relative: &str, bytes: impl AsRef<[u8]>) {
    let path = directory.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("cannot create a directory");
    }
    std::fs::write(path, bytes).expect("cannot write a test file");
}

fn golden(scenario: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../runtime/tests/fixtures/golden")
        .join(scenario)
}

/// Runs `charter args` in `directory`, without NO_COLOR, and checks it did not panic.
fn charter(directory: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(args)
        .current_dir(directory)
        .env_remove("NO_COLOR")
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("cannot run charter");
    assert!(
        !stderr(&output).contains("panicked"),
        "charter {args:?} panicked:\n{}",
        stderr(&output)
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the exit code and that stderr contains every one of `needles`.
fn expect(output: &Output, code: i32, needles: &[&str]) {
    let text = stderr(output);
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{text}",
        stdout(output)
    );
    for needle in needles {
        assert!(text.contains(needle), "`{needle}` not in stderr:\n{text}");
    }
}

#[test]
fn a_spec_that_is_not_utf8_is_unreadable_input_with_its_position() {
    let directory = scratch("not_utf8");
    write(
        &directory,
        "bin.charter",
        b"spec x version \"1\"\nab\xff\xfe",
    );
    for command in ["check", "graph"] {
        let output = charter(&directory, &[command, "bin.charter"]);
        expect(
            &output,
            2,
            &["error: `bin.charter` is not UTF-8 text (the first bad byte is at 2:3)"],
        );
    }
}

#[test]
fn empty_and_crlf_specs_get_ordinary_diagnostics() {
    let directory = scratch("empty_and_crlf");
    write(&directory, "empty.charter", "");
    let output = charter(&directory, &["check", "empty.charter"]);
    expect(&output, 1, &["error[E001]", "empty.charter:1:1"]);

    let crlf = CLEAN
        .replace("output: Reply", "output: Rply")
        .replace('\n', "\r\n");
    write(&directory, "crlf.charter", crlf);
    let output = charter(&directory, &["check", "crlf.charter"]);
    expect(&output, 1, &["error[E002]", "--> crlf.charter:12:11"]);
    assert!(!stderr(&output).contains('\r'), "{:?}", stderr(&output));
}

#[test]
fn a_spec_given_twice_is_checked_once() {
    let directory = scratch("given_twice");
    write(
        &directory,
        "hello.charter",
        CLEAN.replace("output: Reply", "output: Rply"),
    );
    let absolute = directory.join("hello.charter");
    let absolute = absolute.to_str().expect("a UTF-8 path");
    let output = charter(
        &directory,
        &["check", "hello.charter", "./hello.charter", ".", absolute],
    );
    expect(&output, 1, &[]);
    assert_eq!(stderr(&output).matches("error[E002]").count(), 1);
}

#[cfg(unix)]
#[test]
fn symlink_loops_in_a_directory_walk_end() {
    let directory = scratch("symlink_loops");
    write(&directory, "specs/a/hello.charter", CLEAN);
    std::os::unix::fs::symlink("..", directory.join("specs/a/up")).expect("symlink");
    std::os::unix::fs::symlink("self", directory.join("specs/self")).expect("symlink");
    let output = charter(&directory, &["check", "specs"]);
    expect(&output, 0, &[]);
}

#[test]
fn a_directory_named_like_a_spec_is_not_read_as_one() {
    let directory = scratch("directory_named_like_a_spec");
    std::fs::create_dir_all(directory.join("x.charter")).expect("mkdir");
    let output = charter(&directory, &["check", "x.charter"]);
    expect(&output, 2, &["no `.charter` files found in `x.charter`"]);
    let output = charter(&directory, &["graph", "x.charter"]);
    expect(
        &output,
        2,
        &["`x.charter` is a directory; give one spec file"],
    );
}

#[test]
fn a_prompt_file_that_is_a_directory_or_absolute_says_so() {
    let directory = scratch("prompt_paths");
    std::fs::create_dir_all(directory.join("prompts")).expect("mkdir");
    let text = CLEAN.replace(
        r#"prompt: """Answer: {{ request.goal }}""""#,
        r#"prompt: file("prompts")"#,
    );
    write(&directory, "dir.charter", text);
    let output = charter(&directory, &["check", "dir.charter"]);
    expect(&output, 1, &["`prompts` is a directory, not a file"]);

    let text = CLEAN.replace(
        r#"prompt: """Answer: {{ request.goal }}""""#,
        r#"prompt: file("/etc/hostname")"#,
    );
    write(&directory, "abs.charter", text);
    let output = charter(&directory, &["check", "abs.charter"]);
    expect(
        &output,
        1,
        &[
            "`/etc/hostname` is an absolute path\n",
            "help: the path is relative to the spec file",
        ],
    );
}

#[test]
fn usage_errors_stay_plain_text_with_json_diagnostics() {
    let directory = scratch("usage_with_json");
    let output = charter(
        &directory,
        &["check", "--message-format", "json", "missing.charter"],
    );
    expect(&output, 2, &["error: `missing.charter` does not exist\n"]);
    assert_eq!(stdout(&output), "");
    let help = charter(&directory, &["check", "--help"]);
    assert!(
        stdout(&help).contains("also with `--format json`"),
        "{}",
        stdout(&help)
    );
}

#[test]
fn the_color_option_also_governs_clap_usage_errors() {
    let directory = scratch("clap_colour");
    let always = charter(&directory, &["--color", "always", "frob"]);
    expect(&always, 2, &["\u{1b}["]);
    let equals = charter(&directory, &["--color=always", "check"]);
    expect(&equals, 2, &["\u{1b}["]);
    let never = charter(&directory, &["--color", "never", "frob"]);
    expect(&never, 2, &["error: unrecognized subcommand 'frob'"]);
    assert!(!stderr(&never).contains('\u{1b}'), "{}", stderr(&never));
}

#[test]
fn explain_suggests_the_code_a_short_spelling_means() {
    let directory = scratch("explain_short");
    let output = charter(&directory, &["explain", "6"]);
    expect(
        &output,
        2,
        &["unknown diagnostic code `6`; did you mean `E006`?"],
    );
    let output = charter(&directory, &["explain", "w9"]);
    expect(&output, 2, &["did you mean `W009`?"]);
    let listing = charter(&directory, &["explain"]);
    expect(&listing, 0, &[]);
    assert!(stdout(&listing).contains("Run `charter explain CODE`"));
}

#[test]
fn graph_formats_are_case_insensitive() {
    let directory = scratch("graph_case");
    write(&directory, "hello.charter", CLEAN);
    let output = charter(&directory, &["graph", "hello.charter", "--format", "DOT"]);
    expect(&output, 0, &[]);
    assert!(
        stdout(&output).starts_with("digraph"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn every_help_states_the_exit_codes() {
    let directory = scratch("help_exit_codes");
    for args in [
        &["--help"][..],
        &["check", "--help"],
        &["graph", "--help"],
        &["explain", "--help"],
        &["replay", "--help"],
        &["run", "--help"],
    ] {
        let output = charter(&directory, args);
        expect(&output, 0, &[]);
        assert!(
            stdout(&output).contains("Exit status:"),
            "{args:?}: {}",
            stdout(&output)
        );
        assert!(stdout(&output).contains("Example: charter"), "{args:?}");
    }
    let bare = charter(&directory, &[]);
    expect(&bare, 2, &["Usage: charter"]);
    let version = charter(&directory, &["--version"]);
    expect(&version, 0, &[]);
    assert!(stdout(&version).starts_with("charter "));
}

#[test]
fn replay_paths_that_are_not_scenarios_are_usage_errors() {
    let directory = scratch("replay_usage");
    std::fs::create_dir_all(directory.join("empty")).expect("mkdir");
    write(&directory, "afile", "");
    let passing = golden("review_loop/passing");
    let passing = passing.to_str().expect("a UTF-8 path");
    let scenario_file = format!("{passing}/scenario.yaml");
    let cases: [(&[&str], &str); 6] = [
        (&["missing"], "`missing` does not exist"),
        (
            &["empty"],
            "`empty` is not a scenario directory: it has no `scenario.yaml`",
        ),
        (&[&scenario_file], "is a file; give the scenario directory"),
        (
            &[passing, "--out", "afile"],
            "`--out afile` is not a directory",
        ),
        (
            &[passing, "--out", "afile/sub"],
            "cannot create the `--out` directory `afile/sub`",
        ),
        (
            &[passing, "--events", "empty"],
            "`--events empty` is a directory",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["--color", "never", "replay"];
        all.extend_from_slice(args);
        let output = charter(&directory, &all);
        expect(&output, 2, &[message]);
        assert!(!stderr(&output).contains("outcome:"), "{}", stderr(&output));
    }
    let output = charter(
        &directory,
        &["replay", passing, "--events", "missing/events.jsonl"],
    );
    expect(
        &output,
        2,
        &["cannot write the trace to missing/events.jsonl"],
    );
}

#[test]
fn replay_of_a_cassette_for_another_spec_says_so() {
    let directory = scratch("replay_other_spec");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/fixtures");
    let copy = |from: &Path, to: &str| {
        let text = std::fs::read(from).expect("a fixture");
        write(&directory, to, text);
    };
    copy(&fixtures.join("review_loop.charter"), "review_loop.charter");
    copy(
        &golden("review_loop/passing/scenario.yaml"),
        "golden/review_loop/other/scenario.yaml",
    );
    copy(
        &golden("closed_loop/timeout_then_pass/cassette.yaml"),
        "golden/review_loop/other/cassette.yaml",
    );
    let output = charter(
        &directory,
        &["--color", "never", "replay", "golden/review_loop/other"],
    );
    expect(
        &output,
        1,
        &[
            "warning: stale recording: spec:",
            "error: bad cassette: call {step: plan, round: 1, attempt: 1}: the spec `review_loop` has no step `plan`",
            "note: the cassette was recorded against another version of this spec",
        ],
    );
}

#[test]
fn replay_warns_when_out_holds_an_earlier_delivery() {
    let directory = scratch("replay_stale_delivery");
    let delivered = charter(
        &directory,
        &[
            "replay",
            golden("review_loop/passing")
                .to_str()
                .expect("a UTF-8 path"),
            "--out",
            "out",
        ],
    );
    expect(&delivered, 0, &["to out/delivery.json"]);
    let rejected = charter(
        &directory,
        &[
            "--color",
            "never",
            "replay",
            golden("lead_agent/plan_rejected")
                .to_str()
                .expect("a UTF-8 path"),
            "--out",
            "out",
        ],
    );
    expect(
        &rejected,
        3,
        &["warning: `out/delivery.json` is from an earlier run: this run delivered nothing"],
    );
    let leftovers: Vec<_> = std::fs::read_dir(directory.join("out"))
        .expect("out exists")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(leftovers, ["delivery.json"], "no temporary files are left");
}

#[test]
fn replay_reports_malformed_yaml_with_file_and_line() {
    let directory = scratch("replay_malformed");
    write(
        &directory,
        "golden/x/broken/scenario.yaml",
        "spec: x.charter\ninput: { goal: \"x\"\nexpect: [\n",
    );
    write(&directory, "golden/x/broken/cassette.yaml", "version: 1\n");
    let output = charter(
        &directory,
        &["--color", "never", "replay", "golden/x/broken"],
    );
    expect(
        &output,
        1,
        &["error: bad scenario: golden/x/broken/scenario.yaml:3:"],
    );
}

#[test]
fn replay_of_an_input_that_is_not_the_request_says_where_to_fix_it() {
    let directory = scratch("replay_bad_input");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/fixtures");
    write(
        &directory,
        "review_loop.charter",
        std::fs::read(fixtures.join("review_loop.charter")).expect("a fixture"),
    );
    write(
        &directory,
        "golden/r/bad_input/scenario.yaml",
        "spec: review_loop.charter\ninput: { nope: 1 }\n",
    );
    write(
        &directory,
        "golden/r/bad_input/cassette.yaml",
        std::fs::read(golden("review_loop/passing/cassette.yaml")).expect("a fixture"),
    );
    let output = charter(
        &directory,
        &["--color", "never", "replay", "golden/r/bad_input"],
    );
    expect(
        &output,
        1,
        &[
            "error: the run's input is invalid: goal: missing required field `goal` (string)\n  nope: unknown field",
            "help: `input:` in `golden/r/bad_input/scenario.yaml` must be a `Request`",
        ],
    );
}

#[test]
fn bounds_are_shown_even_when_warnings_are_denied() {
    let specs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/warnings");
    let output = charter(
        &specs,
        &[
            "check",
            "--bounds",
            "--deny-warnings",
            "w007_worst_case_exceeds_budget.charter",
        ],
    );
    expect(&output, 1, &["warning[W007]"]);
    assert!(
        stdout(&output).starts_with("worst case of `notes`"),
        "{}",
        stdout(&output)
    );
}

/// What a file outside the project holds: no output may quote it.
const OUTSIDE_CONTENT: &str = "OUTSIDE-CANARY-CONTENT: not for any output";

/// A project in `directory/project` (it holds `specs/`) beside a file outside it,
/// `directory/outside.md`; the spec `specs/x.charter` is `spec`.
fn confined_project(directory: &Path, spec: &str) -> PathBuf {
    write(directory, "outside.md", OUTSIDE_CONTENT);
    let project = directory.join("project");
    write(&project, "specs/x.charter", spec);
    project
}

fn spec_with_prompt_file(path: &str) -> String {
    format!(
        r#"spec x version "1"
contract Request {{ goal: string }}
contract Reply {{ text: string }}
role writer {{ model: "openai:m" prompt: file("{path}") input: Request output: Reply }}
flow {{
  write = writer(request) -> done
}}
"#
    )
}

#[test]
fn files_a_spec_names_outside_the_project_are_refused_without_quoting_them() {
    let directory = scratch("confined_check");
    let cases = [
        ("a `../` path", spec_with_prompt_file("../../outside.md")),
        (
            "an imported role",
            spec_with_prompt_file("p.md").replace(
                "contract Request",
                "import role \"../../outside.md\"\ncontract Request",
            ),
        ),
    ];
    for (what, spec) in cases {
        let project = confined_project(&directory, &spec);
        let output = charter(&project, &["--color", "never", "check", "specs/x.charter"]);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{what}: {text}");
        assert!(
            text.contains("E016") && text.contains("is outside the project root"),
            "{what}: {text}"
        );
        assert!(!text.contains("OUTSIDE-CANARY"), "{what}: {text}");
    }
    // A symlink inside the project is the user's own (DESIGN §15): followed for reading,
    // wherever it leads.
    let project = confined_project(&directory, &spec_with_prompt_file("link.md"));
    std::os::unix::fs::symlink(directory.join("outside.md"), project.join("specs/link.md"))
        .expect("cannot make a link");
    let output = charter(&project, &["--color", "never", "check", "specs/x.charter"]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(!text.contains("outside the project root"), "{text}");
}

/// DESIGN §15: a monorepo whose `specs/` and `golden/` are links into another tree
/// verifies, and `--input` may be a link; writes still refuse a link in their way.
#[test]
fn a_project_of_links_verifies_and_an_input_may_be_a_link() {
    let directory = scratch("linked_project");
    let real = confined_project(&directory, &spec_with_prompt_file("p.md"));
    write(&real, "specs/p.md", "Write about {{ request.goal }}.");
    write(
        &real,
        "golden/x/s/scenario.yaml",
        "spec: specs/x.charter\ninput: { goal: g }\n",
    );
    write(
        &real,
        "golden/x/s/cassette.yaml",
        "version: 1\ncalls:\n  - { step: write, response: { text: done } }\n",
    );
    let linked = directory.join("linked");
    let _ = std::fs::create_dir_all(&linked);
    for name in ["specs", "golden"] {
        std::os::unix::fs::symlink(real.join(name), linked.join(name)).expect("cannot make a link");
    }
    let output = charter(&linked, &["--color", "never", "verify", "."]);
    let text = format!("{}{}", stdout(&output), stderr(&output));
    assert!(!text.contains("outside the project root"), "{text}");
    assert!(text.contains("x/s"), "{text}");
    // An input that breaks the contract: read through the link, refused before any call.
    write(&real, "input.json", r#"{"goal": 3}"#);
    std::os::unix::fs::symlink(real.join("input.json"), linked.join("in.json"))
        .expect("cannot make a link");
    let output = charter(
        &linked,
        &[
            "--color",
            "never",
            "run",
            "specs/x.charter",
            "--input",
            "in.json",
        ],
    );
    let text = stderr(&output);
    assert!(!text.contains("symbolic link"), "{text}");
    assert!(
        text.contains("does not match the request contract"),
        "{text}"
    );
}

#[test]
fn a_prompt_file_over_the_size_limit_is_refused() {
    let directory = scratch("confined_size");
    let project = confined_project(&directory, &spec_with_prompt_file("big.md"));
    // One byte over 10 MB (the limit), written once; the old reader took it whole.
    write(&project, "specs/big.md", vec![b'a'; 10 * 1024 * 1024 + 1]);
    let output = charter(&project, &["--color", "never", "check", "specs/x.charter"]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("larger than the limit of 10 MB"), "{text}");
}

#[test]
fn a_scenario_spec_outside_the_project_is_refused_without_quoting_it() {
    let directory = scratch("confined_verify");
    let project = confined_project(&directory, &spec_with_prompt_file("p.md"));
    let outside = directory.join("outside.md");
    for spec in ["../outside.md".to_string(), outside.display().to_string()] {
        write(
            &project,
            "golden/x/s/scenario.yaml",
            format!("spec: {spec}\ninput: {{ goal: g }}\n"),
        );
        write(
            &project,
            "golden/x/s/cassette.yaml",
            "version: 1\nrecorded: { spec_hash: \"sha256:x\" }\ncalls: []\n",
        );
        for args in [
            vec!["--color", "never", "verify", "."],
            vec!["--color", "never", "replay", "golden/x/s"],
        ] {
            let output = charter(&project, &args);
            let text = format!("{}{}", stdout(&output), stderr(&output));
            assert_ne!(output.status.code(), Some(0), "{spec} {args:?}: {text}");
            assert!(
                text.contains("outside the project root"),
                "{spec} {args:?}: {text}"
            );
            assert!(!text.contains("OUTSIDE-CANARY"), "{spec} {args:?}: {text}");
        }
    }
}
