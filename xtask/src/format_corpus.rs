//! Tests of `charter fmt` over the spec corpus and the fuzz harness's mutants: no panic,
//! formatting is idempotent, a spec that compiles compiles to the same semantic hash, one
//! that does not gives the same diagnostic codes, and every comment is kept, in order.

use std::collections::BTreeSet;

use charter_compiler::format::format;
use charter_compiler::graph::hash::semantic_hash;
use charter_compiler::{Loader, compile};

use crate::corpus::{CorpusSpec, load_corpus, workspace_root};
use crate::fuzz::Corpus;
use crate::rng::Rng;

/// What formatting changed about one spec that it must not, if anything.
fn check(name: &str, text: &str, loader: &dyn Loader) -> Result<(), String> {
    let formatted = match std::panic::catch_unwind(|| format(text)) {
        Err(_) => return Err(format!("{name}: format panicked")),
        // A file that cannot be formatted at all must not compile either.
        Ok(Err(_)) => {
            return if compile(name, text, loader).spec.is_some() {
                Err(format!("{name}: compiles but cannot be formatted"))
            } else {
                Ok(())
            };
        }
        Ok(Ok(formatted)) => formatted,
    };
    if charter_compiler::format::guarded_parts(text) > 0 {
        return Err(format!("{name}: the guard kept a part as written"));
    }
    let again = format(&formatted)
        .map_err(|_| format!("{name}: its formatted text cannot be formatted"))?;
    if again != formatted {
        return Err(format!(
            "{name}: not idempotent\n--- once\n{formatted}\n--- twice\n{again}"
        ));
    }
    if comments(text) != comments(&formatted) {
        return Err(format!("{name}: comments changed\n{formatted}"));
    }
    let before = compile(name, text, loader);
    let after = compile(name, &formatted, loader);
    match (&before.spec, &after.spec) {
        (Some(before), Some(after)) if semantic_hash(before) == semantic_hash(after) => Ok(()),
        (Some(_), _) => Err(format!("{name}: the compiled spec changed\n{formatted}")),
        (None, Some(_)) => Err(format!("{name}: compiles only once formatted")),
        (None, None) => {
            let codes = |compilation: &charter_compiler::Compilation| -> BTreeSet<String> {
                compilation
                    .diagnostics
                    .iter()
                    .map(|diagnostic| format!("{:?}", diagnostic.code))
                    .collect()
            };
            if codes(&before) == codes(&after) {
                Ok(())
            } else {
                Err(format!(
                    "{name}: diagnostic codes changed: {:?} -> {:?}\n{formatted}",
                    codes(&before),
                    codes(&after)
                ))
            }
        }
    }
}

/// The comments of spec text, in order, trailing blanks dropped: `//` to the end of the
/// line and `/* */`, outside strings and `"""` blocks.
fn comments(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(character) = rest.chars().next() {
        let (length, comment) = if rest.starts_with("//") {
            (rest.find('\n').unwrap_or(rest.len()), true)
        } else if rest.starts_with("/*") {
            (
                rest.get(2..)
                    .and_then(|after| after.find("*/"))
                    .map_or(rest.len(), |at| at + 4),
                true,
            )
        } else if rest.starts_with("\"\"\"") {
            (
                rest.get(3..)
                    .and_then(|after| after.find("\"\"\""))
                    .map_or(rest.len(), |at| at + 6),
                false,
            )
        } else if character == '"' {
            let mut escaped = false;
            let end = rest
                .char_indices()
                .skip(1)
                .find(|&(_, c)| {
                    let stop = !escaped && (c == '"' || c == '\n');
                    escaped = !escaped && c == '\\';
                    stop
                })
                .map_or(rest.len(), |(at, c)| at + c.len_utf8());
            (end, false)
        } else {
            (character.len_utf8(), false)
        };
        let (token, after) = rest.split_at(length.min(rest.len()).max(1));
        if comment {
            found.push(token.trim_end().to_string());
        }
        rest = after;
    }
    found
}

fn corpus() -> Vec<CorpusSpec> {
    let root = workspace_root();
    load_corpus(&root.join("specs"), &root)
}

#[test]
fn every_spec_of_the_corpus_formats_idempotently_to_the_same_spec() {
    let specs = corpus();
    assert!(specs.len() > 50, "the corpus is under specs/");
    let failures: Vec<String> = specs
        .iter()
        .filter_map(|spec| check(&spec.name, &spec.text, &spec.loader).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_spec_in_specs_is_formatted() {
    let unformatted: Vec<String> = corpus()
        .into_iter()
        .filter(|spec| format(&spec.text).is_ok_and(|formatted| formatted != spec.text))
        .map(|spec| spec.name)
        .collect();
    assert!(
        unformatted.is_empty(),
        "run `charter fmt specs/`: {unformatted:?}"
    );
}

#[test]
fn mutants_and_generated_specs_format_idempotently_to_the_same_spec() {
    let corpus = Corpus::new(corpus());
    let mut failures = Vec::new();
    for index in 0..400 {
        let input = corpus.input(26, index);
        let loader = charter_compiler::MemoryLoader {
            files: input.mutant.files.clone(),
        };
        let name = format!("mutant {index} of {}", input.origin);
        if let Err(failure) = check(&name, &input.mutant.text, &loader) {
            failures.push(failure);
        }
    }
    let mut rng = Rng::for_item(26, 0);
    for _ in 0..20 {
        let lines = 40 + rng.below(400);
        let seed = rng.below(1_000_000) as u64;
        let generated = crate::generator::generate(crate::generator::GenConfig { lines, seed });
        let name = format!("generated spec {lines} lines, seed {seed}");
        if let Err(failure) = check(
            &name,
            &generated.text,
            &charter_compiler::MemoryLoader::default(),
        ) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_comment_counter_sees_both_kinds_and_skips_strings() {
    let text = "a // one\n\"// not\" /* two */ \"\"\"\n/* no */\n\"\"\" b //three  \n";
    assert_eq!(comments(text), ["// one", "/* two */", "//three"]);
}

#[test]
fn the_whole_spec_of_the_language_guide_is_formatted() {
    let guide = std::fs::read_to_string(workspace_root().join("docs").join("language.md"))
        .expect("docs/language.md");
    let example = guide
        .split("```charter\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/language.md has a ```charter example");
    assert_eq!(
        format(example).ok().as_deref(),
        Some(example),
        "run `charter fmt` on it"
    );
}
