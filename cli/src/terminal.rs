//! What every command shares about the terminal: the [`Context`] it prints in, the [`Outcome`] that becomes its exit code, and the printing helpers (stdout for output, stderr for messages). Only this crate prints, and only through these.

use std::io::Write;

/// How a command ended; each outcome is one exit code (DESIGN §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 0: no error (warnings allowed unless denied).
    Clean,
    /// 1: a spec has errors.
    Failed,
    /// 2: a usage error or input that cannot be read.
    Usage,
    /// 3: a run ended in a terminal state other than `completed`.
    NotCompleted,
}

/// What every subcommand needs to know about the terminal.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    /// Colour stderr output (diagnostics and summary lines).
    pub color: bool,
    /// Colour stdout output (verify's diffs and table): `always`, or `auto` with stdout a
    /// terminal and no NO_COLOR.
    pub color_out: bool,
    /// stderr is a terminal: progress lines may be drawn and erased there.
    pub interactive: bool,
}

/// The run's answer (the delivery, in a flow that delivers) as JSON on stdout, so a script
/// can read it while progress goes to stderr (DESIGN §9.3).
pub fn print_answer(answer: Option<&serde_json::Value>) -> anyhow::Result<()> {
    match answer {
        Some(answer) => print_out(&format!("{}\n", serde_json::to_string_pretty(answer)?)),
        None => Ok(()),
    }
}

/// Writes command output (graphs, bounds, explanations) to stdout.
pub fn print_out(text: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write to stdout")
}

/// Writes diagnostics and other messages to stderr. A failing stderr has nowhere left
/// to report to, so its errors are ignored.
pub fn print_err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

/// `error: message` on stderr, in the diagnostics' colours when colour is on. A message
/// of several lines (a list of problems) has its later lines indented under the first.
pub fn print_error(context: Context, message: &str) {
    let message = message.trim_end().replace('\n', "\n  ");
    print_err(&summary_line(context, "error", &message));
}

/// A `error: ...` / `warning: ...` line as rustc and cargo write them. The message goes
/// through the one escaping writer for text from files, models and tools
/// (`escape::block`): its control characters are escaped (its line breaks kept) and no
/// line of it can start a GitHub Actions command (`::error ...`).
pub fn summary_line(context: Context, level: &str, message: &str) -> String {
    let message = charter_runtime::world::escape::block(
        message,
        charter_runtime::world::escape::MAX_BLOCK_CHARS,
    );
    if context.color {
        let colour = if level == "error" { "31" } else { "33" };
        format!("\u{1b}[1;{colour}m{level}\u{1b}[0m\u{1b}[1m: {message}\u{1b}[0m\n")
    } else {
        format!("{level}: {message}\n")
    }
}

/// `1 error`, `2 errors`.
pub fn count(number: usize, noun: &str) -> String {
    if number == 1 {
        format!("{number} {noun}")
    } else {
        format!("{number} {noun}s")
    }
}
