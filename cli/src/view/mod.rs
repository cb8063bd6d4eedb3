//! The timeline view (DESIGN §13, §11 `--html`): plain HTML, CSS and JS shipped in the binary — the live page of `charter serve`, and self-contained pages of traces (`charter view TRACE`, `charter verify --html`).

use std::path::{Path, PathBuf};

use charter_runtime::world::files;
use clap::Args;
use serde_json::{Value, json};

use crate::loader::display_path;
use crate::{Context, Outcome, print_err, print_error};

const TIMELINE_JS: &str = include_str!("timeline.js");
const TIMELINE_CSS: &str = include_str!("timeline.css");
const LIVE_HTML: &str = include_str!("live.html");
const LIVE_JS: &str = include_str!("live.js");
const STATIC_HTML: &str = include_str!("static.html");

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

/// Writes `page` to `path` atomically (nothing half-written).
pub(crate) fn write_page(path: &Path, page: &str) -> std::io::Result<()> {
    files::write_atomically(path, page.as_bytes())
}

/// The trace events in `text`: every line that is a JSON object (the header of a
/// `trace.snap` and anything else skipped).
pub(crate) fn trace_events(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|line| line.trim_start().starts_with('{'))
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|value| value.get("kind").is_some())
        .collect()
}

/// The page `charter serve` serves at `/`.
pub(crate) fn live_page() -> String {
    LIVE_HTML
        .replacen("/*CSS*/", TIMELINE_CSS, 1)
        .replacen("/*JS*/", TIMELINE_JS, 1)
        .replacen("/*LIVE*/", LIVE_JS, 1)
}

/// A self-contained page showing `scenarios` (`{name, status, message?, diff?,
/// events}`), each with its timeline.
pub(crate) fn static_page(title: &str, scenarios: &[Value]) -> String {
    report_page(title, &json!({}), scenarios)
}

/// [`static_page`] with `meta` (`{generated_ms?, commit?}`) shown above the scenarios;
/// a page of several scenarios opens on a summary table of them, failures first.
pub(crate) fn report_page(title: &str, meta: &Value, scenarios: &[Value]) -> String {
    let data = script_json(&json!({"meta": meta, "scenarios": scenarios}));
    // The data goes in last, so nothing in it is taken for a placeholder.
    STATIC_HTML
        .replace("/*TITLE*/", &html_text(title))
        .replacen("/*CSS*/", TIMELINE_CSS, 1)
        .replacen("/*JS*/", TIMELINE_JS, 1)
        .replacen("/*DATA*/", &data, 1)
}

/// `value` as JSON that cannot end the `<script>` element it is in (nor open a comment
/// or a CDATA section): `<`, `>` and `&` are written as `\u` escapes, which JSON reads
/// back the same.
fn script_json(value: &Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// `text` safe as HTML text.
fn html_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_close_its_script_and_reads_back_the_same() {
        let value = json!({"text": "</script><script>alert(1)</script> & <!-- \u{2028}"});
        let embedded = script_json(&value);
        assert!(
            !embedded.contains('<') && !embedded.contains('>'),
            "{embedded}"
        );
        let back: Value = serde_json::from_str(&embedded).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(back, value);
    }

    #[test]
    fn a_static_page_holds_its_script_style_and_data_and_no_placeholder() {
        let page = static_page(
            "a <title>",
            &[
                json!({"name": "s", "status": "passed", "events": [{"kind": "run_started", "spec": "/*JS*/"}]}),
            ],
        );
        assert!(page.contains("function charterTimeline"));
        assert!(page.contains("section.phase"));
        assert!(page.contains("a &lt;title&gt;"));
        assert!(
            page.contains("\"spec\":\"/*JS*/\""),
            "data is not rewritten"
        );
        assert!(!page.contains("/*CSS*/") && !page.contains("/*DATA*/"));
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "no network"
        );
    }

    #[test]
    fn trace_events_skip_a_snapshot_header() {
        let text = "---\nsource: x\n---\n{\"seq\":0,\"kind\":\"run_started\"}\nnot json\n{\"seq\":1,\"kind\":\"run_finished\"}\n";
        assert_eq!(trace_events(text).len(), 2);
    }
}
