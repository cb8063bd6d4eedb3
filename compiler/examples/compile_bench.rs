//! Times the whole compiler (`compile`) on a spec file, for profiling one stage at a time:
//! `cargo run --release -p charter-compiler --example compile_bench -- RUNS SPEC`.
//! The files the spec names are read up front, so the timing covers no disk access; run it
//! under `valgrind --tool=callgrind` for instruction counts that a busy machine cannot skew.

// A benchmark may read the spec it is pointed at; the compiler itself does no I/O.
#![allow(clippy::disallowed_methods)]

use charter_compiler::MemoryLoader;

fn main() {
    let runs: u32 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(10)
        .max(1);
    let Some(path) = std::env::args().nth(2) else {
        eprintln!("usage: compile_bench RUNS SPEC");
        return;
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("cannot read {path}: {error}");
            return;
        }
    };
    let directory = std::path::Path::new(&path)
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let mut loader = MemoryLoader::default();
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
    let mut times = Vec::new();
    let mut diagnostics = 0;
    for _ in 0..runs {
        let start = std::time::Instant::now();
        let compilation = std::hint::black_box(charter_compiler::compile(&path, &text, &loader));
        times.push(start.elapsed());
        diagnostics = compilation.diagnostics.len();
    }
    times.sort();
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    let min = times.first().copied().unwrap_or_default();
    println!(
        "{path}: {} lines, {diagnostics} diagnostics: median {median:?}, min {min:?} over {runs} runs",
        text.lines().count()
    );
}
