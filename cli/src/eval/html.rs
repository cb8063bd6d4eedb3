//! `charter eval --html FILE`: the report as one self-contained page (no script, no network): a summary per model set, then each input's pass rate with its interval drawn as a bar, worst first, and why its runs failed.

use std::fmt::Write as _;

use charter_runtime::harness::eval::report::{InputReport, Report, SetReport, Summary};

use super::{interval, percent};

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;color:#1d232a;padding:0 1rem}\
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}\
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #e3e6ea;vertical-align:top}\
th{font-weight:600;color:#57606a}td.num{text-align:right;font-variant-numeric:tabular-nums}\
.pass{color:#1a7f37}.fail{color:#cf222e}.flaky{color:#9a6700}\
.bar{position:relative;width:10rem;height:.7rem;background:#eef1f4;border-radius:.35rem}\
.bar span{position:absolute;top:0;bottom:0;background:#9fd5ad;border-radius:.35rem}\
.bar i{position:absolute;top:-.15rem;bottom:-.15rem;width:2px;background:#1d232a}\
.cards{display:flex;gap:1rem;flex-wrap:wrap}.card{border:1px solid #e3e6ea;border-radius:.5rem;padding:.6rem 1rem;min-width:9rem}\
.card b{display:block;font-size:1.3rem}ul{margin:.2rem 0;padding-left:1.2rem}.muted{color:#57606a}";

/// The page.
pub(crate) fn page(report: &Report) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>charter eval {}</title><style>{STYLE}</style><body><h1>charter eval · {}</h1><p class=\"muted\">{} of {} runs · {} per input and model set</p>",
        escape(&report.spec),
        escape(&report.spec),
        report.ran,
        report.planned,
        report.repeat
    );
    if let Some(stopped) = &report.stopped {
        let _ = write!(
            out,
            "<p class=\"fail\">Stopped early: {}</p>",
            escape(stopped)
        );
    }
    for set in &report.sets {
        set_section(&mut out, set);
    }
    if !report.invalid.is_empty() {
        out.push_str("<h2>Not run: inputs that break the request contract</h2><ul>");
        for invalid in &report.invalid {
            let _ = write!(
                out,
                "<li>line {}: {}</li>",
                invalid.line,
                escape(&invalid.message)
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("</body></html>\n");
    out
}

fn set_section(out: &mut String, set: &SetReport) {
    let overall = &set.overall;
    let _ = write!(out, "<h2>{}</h2><div class=\"cards\">", escape(&set.name));
    let cards = [
        ("pass rate", percent(overall.pass_rate)),
        ("95% interval", interval(overall)),
        ("runs", format!("{} / {}", overall.passed, overall.runs)),
        ("calls", overall.calls.to_string()),
        (
            "tokens",
            format!("{} / {}", overall.input_tokens, overall.output_tokens),
        ),
        ("cost", format!("${:.4}", overall.cost)),
    ];
    for (label, value) in cards {
        let _ = write!(
            out,
            "<div class=\"card\"><span class=\"muted\">{label}</span><b>{}</b></div>",
            escape(&value)
        );
    }
    if let Some(latency) = overall.latency_ms {
        let _ = write!(
            out,
            "<div class=\"card\"><span class=\"muted\">latency p50 / p95</span><b>{} / {} ms</b></div>",
            latency.p50, latency.p95
        );
    }
    out.push_str("</div>");
    for (gate, figures) in &overall.gates {
        let _ = write!(
            out,
            "<p>Gate <b>{}</b>: score mean {:.2}, min {:.2} over {} runs</p>",
            escape(gate),
            figures.mean,
            figures.min,
            figures.runs
        );
    }
    inputs_table(out, set);
}

/// Each input, the lowest pass rate first.
fn inputs_table(out: &mut String, set: &SetReport) {
    let mut inputs: Vec<&InputReport> = set.inputs.iter().collect();
    inputs.sort_by(|a, b| {
        a.summary
            .pass_rate
            .total_cmp(&b.summary.pass_rate)
            .then(a.line.cmp(&b.line))
    });
    out.push_str("<table><tr><th>input</th><th>pass</th><th>rate</th><th>95% interval</th><th>outcomes</th><th>why runs failed</th></tr>");
    for input in inputs {
        let summary = &input.summary;
        let class = if summary.runs == 0 {
            "muted"
        } else if summary.passed == summary.runs {
            "pass"
        } else if summary.passed == 0 {
            "fail"
        } else {
            "flaky"
        };
        let label = match &input.name {
            Some(name) => format!("line {} ({name})", input.line),
            None => format!("line {}", input.line),
        };
        let outcomes: Vec<String> = summary
            .outcomes
            .iter()
            .map(|(ending, count)| format!("{} × {count}", escape(ending)))
            .collect();
        let failures: Vec<String> = input
            .failures
            .iter()
            .map(|failure| format!("<li>{} ({})</li>", escape(&failure.unmet), failure.runs))
            .collect();
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{} / {}</td><td class=\"num {class}\">{}</td><td>{}<span class=\"muted\">{}</span></td><td>{}</td><td><ul>{}</ul></td></tr>",
            escape(&label),
            summary.passed,
            summary.runs,
            percent(summary.pass_rate),
            bar(summary),
            interval(summary),
            outcomes.join("<br>"),
            failures.join("")
        );
    }
    out.push_str("</table>");
}

/// The interval as a bar with the pass rate marked.
fn bar(summary: &Summary) -> String {
    let [low, high] = summary.interval;
    format!(
        "<div class=\"bar\"><span style=\"left:{:.1}%;width:{:.1}%\"></span><i style=\"left:{:.1}%\"></i></div>",
        low * 100.0,
        (high - low) * 100.0,
        summary.pass_rate * 100.0
    )
}

fn escape(text: &str) -> String {
    charter_runtime::harness::report::xml_escape(text)
}
