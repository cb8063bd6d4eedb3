//! The page (DESIGN §13, §11 `--html`): plain HTML, CSS and JS shipped in the binary — the live page `charter serve` serves, and the self-contained pages of traces (`charter view`, `charter verify --html`) — and what the page reads of a spec (its gates). Shared by `view`, `verify` and `serve`.
//!
//! The page is plain files built in with `include_str!`: `timeline.js` (a section per
//! phase, a row per event, a row with more to it opening to its details; every value written
//! with `textContent`, never parsed as HTML), `timeline.css`, `live.html` and `live.js` (the
//! page `charter serve` serves at `/`), and `static.html` (the self-contained page, whose data
//! is JSON in a `<script type="application/json">` with `<`, `>` and `&` written as `\u`
//! escapes, so no value can end the element). A `--html` report carries each scenario's
//! spec's gates (rules and score thresholds) from the same function ([`gates`]) that answers
//! `GET /specs/{name}` for the live page, so a gate row reads each score against its
//! threshold in both.

use std::path::Path;

use charter_compiler::CompiledSpec;
use charter_runtime::world::files;
use serde_json::{Map, Value, json};

const TIMELINE_JS: &str = include_str!("timeline.js");
const TIMELINE_CSS: &str = include_str!("timeline.css");
const LIVE_HTML: &str = include_str!("live.html");
const LIVE_JS: &str = include_str!("live.js");
const STATIC_HTML: &str = include_str!("static.html");

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

/// Each gate's rules (`{name, severity, code}`) and scores (`{name, weight, below?,
/// code?}`): what a gate event's results are read against.
pub(crate) fn gates(spec: &CompiledSpec) -> Value {
    let gates: Map<String, Value> = spec
        .gates
        .iter()
        .map(|(name, gate)| {
            let rules: Vec<Value> = gate
                .rules
                .iter()
                .map(|rule| json!({"name": rule.name, "code": rule.code}))
                .collect();
            let scores: Vec<Value> = gate
                .scores
                .iter()
                .map(|score| {
                    let mut value = json!({"name": score.name, "weight": score.weight});
                    if let Some(below) = &score.below {
                        value["below"] = json!(below.threshold);
                        value["code"] = json!(below.code);
                    }
                    value
                })
                .collect();
            (name.clone(), json!({"rules": rules, "scores": scores}))
        })
        .collect();
    Value::Object(gates)
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
