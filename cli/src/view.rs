//! `charter view TRACE [-o FILE | --out DIR]`: a trace (or a served run's stream) written as one self-contained page of its timeline (`page`).

use std::path::{Path, PathBuf};

use charter_runtime::world::files;
use clap::Args;
use serde_json::{Value, json};

use crate::loader::display_path;
use crate::page::{static_page, trace_events, write_page};
use crate::terminal::{Context, Outcome, print_err, print_error};

/// The most bytes of a trace read.
const TRACE_LIMIT: u64 = charter_runtime::world::limits::DEFAULT_MAX_BYTES as u64;

/// Write a trace as one self-contained HTML page: its timeline, one section per phase.
///
/// TRACE is a JSON-lines trace (`charter run --events FILE`, `charter replay --events
/// FILE`, a run directory's `events.jsonl`) or a golden `trace.snap`. The page needs no
/// network: its script and style are inside it.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter replay golden/closed_loop/happy_path --events trace.jsonl && charter view trace.jsonl -o trace.html"
)]
pub struct ViewArgs {
    /// The trace to show.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// The file to write the page to (default: TRACE with `.html` in place of its
    /// extension).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        conflicts_with = "out"
    )]
    pub output: Option<PathBuf>,

    /// The directory to write the page into, named as TRACE is with `.html` in place of
    /// its extension (made when missing). `--out` is a directory for every command; a
    /// file is `-o FILE`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Where the page goes: `-o FILE`, `--out DIR`/`<trace name>.html`, or beside the trace.
/// `--out` given what looks like a file (an existing file, or a name ending in `.html`)
/// is refused, naming `-o`: `--out` was a file for this command once.
fn page_path(args: &ViewArgs) -> Result<PathBuf, String> {
    let beside = args.trace.with_extension("html");
    match (&args.output, &args.out) {
        (Some(file), _) => Ok(file.clone()),
        (None, Some(dir)) => {
            let looks_like_file = dir.is_file()
                || (!dir.is_dir()
                    && dir
                        .extension()
                        .is_some_and(|extension| extension.eq_ignore_ascii_case("html")));
            if looks_like_file {
                return Err(format!(
                    "--out takes a directory (the page is written into it); to write the page to the file `{shown}`, give `-o {shown}`",
                    shown = display_path(dir)
                ));
            }
            let name = beside
                .file_name()
                .map_or_else(|| PathBuf::from("trace.html"), PathBuf::from);
            Ok(dir.join(name))
        }
        (None, None) => Ok(beside),
    }
}

pub fn run(args: &ViewArgs, context: Context) -> anyhow::Result<Outcome> {
    let shown = display_path(&args.trace);
    let text = match files::read_followed(&args.trace, TRACE_LIMIT) {
        Ok(text) => text,
        Err(error) => {
            print_error(context, &format!("cannot read `{shown}`: {error}"));
            return Ok(Outcome::Usage);
        }
    };
    let (events, clock) = served_run_stream(&args.trace).unwrap_or_else(|| {
        let clock = args
            .trace
            .extension()
            .is_some_and(|extension| extension == "snap")
            .then_some("virtual");
        (trace_events(&text), clock)
    });
    if events.is_empty() {
        print_error(
            context,
            &format!(
                "`{shown}` holds no trace events (one JSON object a line, as `--events FILE` writes)"
            ),
        );
        return Ok(Outcome::Usage);
    }
    let out = match page_path(args) {
        Ok(out) => out,
        Err(message) => {
            print_error(context, &message);
            return Ok(Outcome::Usage);
        }
    };
    let status = events
        .iter()
        .rev()
        .find(|event| event["kind"] == "run_finished")
        .and_then(|event| event["outcome"].as_str())
        .unwrap_or("unfinished")
        .to_string();
    let mut scenario = json!({"name": shown, "status": status, "events": events});
    if let Some(clock) = clock {
        scenario["clock"] = json!(clock);
    }
    let page = static_page(&format!("charter trace {shown}"), &[scenario]);
    let made_dir = match &args.out {
        Some(dir) if args.output.is_none() => std::fs::create_dir_all(dir),
        _ => Ok(()),
    };
    if let Err(error) = made_dir.and_then(|()| write_page(&out, &page)) {
        print_error(
            context,
            &format!("cannot write `{}`: {error}", display_path(&out)),
        );
        return Ok(Outcome::Failed);
    }
    print_err(&format!("wrote {}\n", display_path(&out)));
    Ok(Outcome::Clean)
}

/// For the `events.jsonl` of a `charter serve` run directory: the run's event stream
/// beside it (`stream.jsonl`: the trace with each role's output, the questions asked and
/// the answer), and its clock — `wall` for a live run, `virtual` for a replayed one
/// (`None` while it has not ended).
fn served_run_stream(trace: &Path) -> Option<(Vec<Value>, Option<&'static str>)> {
    let dir = trace.parent()?;
    if trace.file_name()? != "events.jsonl" || !dir.join("serve.json").is_file() {
        return None;
    }
    let text = files::read_regular(&dir.join("stream.jsonl"), TRACE_LIMIT).ok()?;
    let events = trace_events(&text);
    let clock = events
        .iter()
        .rev()
        .find(|event| event["kind"] == "answer")
        .and_then(|answer| answer["totals"]["replay"].as_bool())
        .map(|replay| if replay { "virtual" } else { "wall" });
    Some((events, clock))
}
