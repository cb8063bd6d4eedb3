//! Times the parser on a generated spec of about 10,000 lines (the DESIGN example's items,
//! repeated), or on the spec file given after the run count:
//! `cargo run --release -p charter-compiler --example parse_bench -- [RUNS] [SPEC]`.

// A benchmark may read the spec it is pointed at; the compiler itself does no I/O.
#![allow(clippy::disallowed_methods)]

use charter_compiler::{MemoryLoader, Sources, syntax};

const EXAMPLE: &str = include_str!("../src/syntax/testdata/closed_loop.charter");

fn main() {
    let body_start = EXAMPLE.find("contract Request").unwrap_or(0);
    let body_end = EXAMPLE.find("flow {").unwrap_or(EXAMPLE.len());
    let body = EXAMPLE.get(body_start..body_end).unwrap_or("");
    let mut text = EXAMPLE.get(..body_start).unwrap_or("").to_string();
    let body_lines = body.lines().count().max(1);
    let mut lines = text.lines().count();
    while lines < 10_000 {
        text.push_str(body);
        lines += body_lines;
    }
    text.push_str(EXAMPLE.get(body_end..).unwrap_or(""));
    let mut loader = MemoryLoader::default();
    for prompt in [
        "prompts/planner.md.j2",
        "prompts/reviewer.md.j2",
        "prompts/finalizer.md.j2",
    ] {
        loader
            .files
            .insert(prompt.to_string(), "Do {{ request.goal }}".to_string());
    }
    loader.files.insert(
        "roles/creative.md".to_string(),
        "---\nid: creative\nmodel: default\n---\nWrite.\n".to_string(),
    );
    if let Some(path) = std::env::args().nth(2) {
        match std::fs::read_to_string(&path) {
            Ok(file) => text = file,
            Err(error) => {
                eprintln!("cannot read {path}: {error}");
                return;
            }
        }
        // Read every file the spec names up front, so the timing covers no disk access.
        let directory = std::path::Path::new(&path)
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        for line in text.lines() {
            let named = line
                .split('"')
                .nth(1)
                .filter(|_| line.contains("import role") || line.contains("file("));
            if let Some(relative) = named
                && let Ok(content) = std::fs::read_to_string(directory.join(relative))
            {
                loader.files.insert(relative.to_string(), content);
            }
        }
    }
    let runs: u32 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(10)
        .max(1);
    let mut items = 0;
    let mut diagnostics = 0;
    let start = std::time::Instant::now();
    for _ in 0..runs {
        let mut sources = Sources::new();
        let file = sources.add("bench.charter", text.clone());
        let (spec, found) = syntax::parse(file, &mut sources, &loader);
        items = spec.map_or(0, |spec| spec.items.len());
        diagnostics = found.len();
    }
    let elapsed = start.elapsed() / runs;
    println!(
        "{} lines, {} items, {} diagnostics: {:?} per parse",
        text.lines().count(),
        items,
        diagnostics,
        elapsed
    );
}
