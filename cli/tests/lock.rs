//! `charter lock` (DESIGN §19) against the real `@modelcontextprotocol/server-everything` over stdio, sandboxed (installed into `target/mcp/` by `.ci/run`; without it the test is skipped, except in CI where it fails): the lock is written with every tool and its schema, `--check` passes, a drift is shown as a diff (exit 1), a server that will not start writes nothing, a project without servers passes `--check`, and `charter check` then checks tool names and permits against the lock offline.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// server-everything's entry point (as `runtime/tests/mcp.rs` installs it). `None`: skip
/// (a failure in CI).
fn everything() -> Option<PathBuf> {
    let prefix = support::repository().join("target/mcp");
    let entry = prefix.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if entry.exists() {
        return Some(entry);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "server-everything is not installed in {} (`.ci/run` installs it)",
        prefix.display()
    );
    eprintln!("skipped: server-everything is not installed");
    None
}

/// A project in a fresh temp directory whose one spec declares `mcp` (a server block).
fn project(name: &str, mcp: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("charter-lock-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("specs")).unwrap_or_else(|error| panic!("{error}"));
    let tools = if mcp.is_empty() {
        ""
    } else {
        "tools: [everything.echo]  max_tool_calls: 2"
    };
    let spec = format!(
        "spec locked version \"1\"\n\
         models {{ default = \"openai:gpt-4o-mini\" }}\n\
         contract Request {{ text: string }}\n\
         contract Reply {{ text: string }}\n\
         {mcp}\n\
         role helper {{ model: default  prompt: \"\"\"Answer {{{{ request.text }}}}\"\"\"  input: Request  output: Reply  {tools} }}\n\
         flow {{ answer = helper(request) -> done }}\n"
    );
    std::fs::write(dir.join("specs/locked.charter"), spec)
        .unwrap_or_else(|error| panic!("{error}"));
    dir
}

fn everything_block(entry: &Path, command: &str) -> String {
    let prefix = support::repository().join("target/mcp");
    format!(
        "mcp everything {{ command: [{command}, \"{}\", \"stdio\"]  tools: [echo]  sandbox {{ read: [\"{}\"] }} }}",
        entry.display(),
        prefix.display()
    )
}

fn charter(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{error}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_lock_holds_every_tool_checks_clean_and_shows_a_drift_as_a_diff() {
    let Some(entry) = everything() else {
        return;
    };
    let dir = project("everything", &everything_block(&entry, "\"node\""));
    let locked = charter(&dir, &["lock"]);
    assert_eq!(locked.status.code(), Some(0), "{}", stderr(&locked));
    assert!(
        stderr(&locked).contains("wrote charter.lock: 1 server,"),
        "{}",
        stderr(&locked)
    );
    let text = std::fs::read_to_string(dir.join("charter.lock")).unwrap_or_default();
    for expected in [
        "everything:",
        "protocol_version:",
        "echo:",
        "input_schema:",
        "message:",
        "hash: sha256:",
    ] {
        assert!(text.contains(expected), "{expected} in {text}");
    }

    let checked = charter(&dir, &["lock", "--check"]);
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
    assert!(stderr(&checked).contains("charter.lock matches every server"));

    // The server "changed": the lock says something else of echo.
    let drifted = text.replacen("Echoes back the input string", "Echoes nothing", 1);
    assert_ne!(drifted, text, "the description was not in the lock: {text}");
    std::fs::write(dir.join("charter.lock"), &drifted).unwrap_or_else(|error| panic!("{error}"));
    let checked = charter(&dir, &["lock", "--check"]);
    assert_eq!(checked.status.code(), Some(1), "{}", stderr(&checked));
    let said = stderr(&checked);
    assert!(
        said.contains("-        description: Echoes nothing"),
        "{said}"
    );
    assert!(
        said.contains("+        description: Echoes back the input string"),
        "{said}"
    );
    assert!(said.contains("no longer matches the servers"), "{said}");
    assert!(
        said.contains("`everything`: tool `echo` changed its description"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("charter.lock")).unwrap_or_default(),
        drifted,
        "--check changes nothing"
    );

    // Edited by hand into YAML that does not parse: named with its line and column.
    std::fs::write(
        dir.join("charter.lock"),
        "version: 1\nservers:\n  everything: [unclosed\n",
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let checked = charter(&dir, &["lock", "--check"]);
    assert_eq!(checked.status.code(), Some(1), "{}", stderr(&checked));
    assert!(
        stderr(&checked).contains("the kept lock cannot be read: charter.lock:3:"),
        "{}",
        stderr(&checked)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_that_will_not_start_is_named_and_nothing_is_written() {
    let dir = project(
        "broken",
        "mcp everything { command: [\"sh\", \"-c\", \"echo 'Error: Cannot find module server.js' >&2; exit 1\"]  tools: [echo] }",
    );
    let locked = charter(&dir, &["lock"]);
    assert_eq!(locked.status.code(), Some(1), "{}", stderr(&locked));
    let said = stderr(&locked);
    assert!(said.contains("MCP server `everything`"), "{said}");
    assert!(said.contains("Cannot find module server.js"), "{said}");
    assert!(said.contains("nothing was written"), "{said}");
    assert!(!dir.join("charter.lock").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_project_without_servers_passes_the_check_and_a_missing_lock_fails_it() {
    let dir = project("none", "");
    let checked = charter(&dir, &["lock", "--check"]);
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
    assert!(stderr(&checked).contains("nothing to lock"));

    let Some(entry) = everything() else {
        return;
    };
    let dir = project("unlocked", &everything_block(&entry, "\"node\""));
    let checked = charter(&dir, &["lock", "--check"]);
    assert_eq!(checked.status.code(), Some(1), "{}", stderr(&checked));
    assert!(stderr(&checked).contains("there is no `charter.lock`: run `charter lock`"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_holds_tool_names_and_permits_to_the_lock() {
    let Some(entry) = everything() else {
        return;
    };
    // Paths without `..` (a sandbox path through `..` is W014).
    let canonical = |path: PathBuf| std::fs::canonicalize(&path).unwrap_or(path);
    let (entry, prefix) = (
        canonical(entry),
        canonical(support::repository().join("target/mcp")),
    );
    let spec = |tools: &str, argument: &str| {
        format!(
            "spec locked version \"1\"\n\
             models {{ default = \"openai:gpt-4o-mini\" }}\n\
             contract Request {{ text: string }}\n\
             contract Reply {{ text: string }}\n\
             mcp everything {{ command: [\"node\", \"{}\", \"stdio\"]  tools: *  sandbox {{ read: [\"{}\"] }} }}\n\
             role helper {{\n\
             \x20 model: default  prompt: \"\"\"Answer {{{{ request.text }}}}\"\"\"  input: Request  output: Reply\n\
             \x20 tools: [{tools}]  max_tool_calls: 2\n\
             \x20 permit everything.echo when len(args.{argument}) < 200\n\
             }}\n\
             flow {{ answer = helper(request) -> done }}\n",
            entry.display(),
            prefix.display()
        )
    };
    let dir = project("checked", "");
    let path = dir.join("specs/locked.charter");
    let write =
        |text: String| std::fs::write(&path, text).unwrap_or_else(|error| panic!("{error}"));

    // Misspelt names: the lock is written all the same (it asks the server, not the roles).
    write(spec("everything.ecko, everything.echo", "mesage"));
    let unlocked = charter(&dir, &["check"]);
    assert_eq!(unlocked.status.code(), Some(1), "{}", stderr(&unlocked));
    assert!(
        stderr(&unlocked).contains(
            "error[E023]: MCP server `everything` is not in charter.lock: run `charter lock`"
        ),
        "{}",
        stderr(&unlocked)
    );
    let locked = charter(&dir, &["lock"]);
    assert_eq!(locked.status.code(), Some(0), "{}", stderr(&locked));

    let checked = charter(&dir, &["check"]);
    let said = stderr(&checked);
    assert_eq!(checked.status.code(), Some(1), "{said}");
    assert!(
        said.contains(
            "error[E024]: MCP server `everything` does not list a tool `ecko` in charter.lock"
        ),
        "{said}"
    );
    assert!(said.contains("help: did you mean `echo`?"), "{said}");
    assert!(
        said.contains("error[E025]: `permit everything.echo` reads `args.mesage`, but the `inputSchema` of `everything.echo` has no property `mesage`"),
        "{said}"
    );
    assert!(said.contains("help: did you mean `message`?"), "{said}");
    assert!(said.contains("--> specs/locked.charter:8:22"), "{said}");
    assert!(said.contains("--> specs/locked.charter:9:35"), "{said}");

    write(spec("everything.echo", "message"));
    let checked = charter(&dir, &["check"]);
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
    assert!(
        !stderr(&checked).contains("warning"),
        "{}",
        stderr(&checked)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
