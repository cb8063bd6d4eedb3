//! `charter new NAME` (or `charter new .` in an empty directory): scaffold a project — a spec, a prompt, a hand-written scenario whose snapshot the real runtime writes, and a CI workflow — that passes `charter verify` as created.

use std::path::{Path, PathBuf};

use charter_runtime::harness::{HarnessConfig, report, verify_project};
use charter_runtime::world::files::write_atomically;
use clap::Args;

use crate::loader::display_path;
use crate::terminal::{Context, Outcome, print_err, print_error, print_out};

/// Create a new Charter project in the directory NAME: `specs/NAME.charter` (a writer, a
/// reviewer, a gate with bounded repair and a verified delivery), its prompt
/// `specs/prompts/writer.md.j2`, a hand-written scenario under `golden/NAME/` (its
/// `trace.snap` written by replaying it), `request.json` (an input for `charter run`),
/// `.github/workflows/charter.yml` running `charter verify` in CI, and a `.gitignore`.
///
/// NAME is a new directory, or an empty one: `charter new .` makes the project in the
/// current directory, named after it. The project passes `charter verify` as created.
/// NAME's last component names the spec, as a spec identifier (`my-agent` makes
/// `specs/my_agent.charter`). The CI workflow installs charter from the git repository
/// and tag you set at its top (`CHARTER_GIT`, `CHARTER_TAG`), with `--locked`. Exit
/// status: 0 created, 1 the created project did not verify, 2 a name with no letter or a
/// directory that exists and is not empty (nothing is written).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  charter new support_agent && cd support_agent && charter verify\n  mkdir support_agent && cd support_agent && charter new .   # in an empty directory"
)]
pub struct NewArgs {
    /// The directory to create, or an empty one (`.`); its last component names the spec
    /// (`my-agent` -> `my_agent`).
    #[arg(value_name = "NAME")]
    pub name: PathBuf,
}

pub fn run(args: &NewArgs, context: Context) -> anyhow::Result<Outcome> {
    let root = &args.name;
    let name = match spec_name(&directory_name(root)) {
        Ok(name) => name,
        Err(problem) => {
            print_error(context, &problem);
            return Ok(Outcome::Usage);
        }
    };
    if root.exists()
        && (!root.is_dir()
            || std::fs::read_dir(root).map_or(true, |mut entries| entries.next().is_some()))
    {
        print_error(
            context,
            &format!(
                "`{}` already exists and is not an empty directory; nothing was written: \
                 give a new NAME, or run `charter new .` in an empty directory",
                display_path(root)
            ),
        );
        return Ok(Outcome::Usage);
    }
    for (relative, text) in files(&name) {
        let path = root.join(&relative);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| write_atomically(&path, text.as_bytes()));
        if let Err(error) = written {
            print_error(
                context,
                &format!("cannot write `{}`: {error}", display_path(&path)),
            );
            return Ok(Outcome::Failed);
        }
    }
    if let Some(outcome) = snapshot_and_verify(root, context)? {
        return Ok(outcome);
    }
    print_err(&created(root, &name));
    Ok(Outcome::Clean)
}

/// The name of the directory `root` names: its last component, or, for `.` and `..`
/// (which have none), the name of the directory they are.
fn directory_name(root: &Path) -> String {
    let resolved = match root.file_name() {
        Some(_) => root.to_path_buf(),
        None => std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
    };
    resolved
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes the scenario's snapshot (what the runtime makes of the hand-written cassette,
/// never a copy) and verifies the project; the outcome to end with when it does not pass.
fn snapshot_and_verify(root: &Path, context: Context) -> anyhow::Result<Option<Outcome>> {
    let accepted = verify_project(
        root,
        &HarnessConfig {
            accept: true,
            ..HarnessConfig::default()
        },
    );
    let checked = accepted.and_then(|_| verify_project(root, &HarnessConfig::default()));
    match checked {
        Ok(reports) if reports.iter().all(|report| report.status.passed()) => Ok(None),
        Ok(reports) => {
            print_out(&report::details(&reports))?;
            print_error(
                context,
                "the new project does not verify (this is a bug in charter)",
            );
            Ok(Some(Outcome::Failed))
        }
        Err(error) => {
            print_error(context, &error.to_string());
            Ok(Some(Outcome::Failed))
        }
    }
}

/// What was made, and what to do next (`cd` into it first, unless it is the current
/// directory).
fn created(root: &Path, name: &str) -> String {
    let shown = display_path(root);
    let here = std::fs::canonicalize(root).ok() == std::env::current_dir().ok();
    let cd = if here {
        String::new()
    } else {
        format!("  cd {shown}\n")
    };
    format!(
        "created `{shown}`: specs/{name}.charter, specs/prompts/writer.md.j2, \
         golden/{name}/writer_fixes_review/, request.json and .github/workflows/charter.yml\n\n\
         next:\n{cd}  charter verify                 # replays the scenario, compares its trace\n  \
         charter replay golden/{name}/writer_fixes_review\n  \
         charter run specs/{name}.charter --input request.json --record golden/{name}/live\n\n\
         before CI runs: set CHARTER_GIT and CHARTER_TAG at the top of .github/workflows/charter.yml\n"
    )
}

/// The spec's name for a project directory named `directory`: as it is when it already is
/// a spec identifier (a lower-case letter, then lower-case letters, digits and `_`), else
/// lower-cased with every other character as `_` (`my-agent` -> `my_agent`); an error
/// when nothing of it can name a spec.
fn spec_name(directory: &str) -> Result<String, String> {
    let name: String = directory
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let name = name
        .trim_start_matches(|c: char| !c.is_ascii_lowercase())
        .trim_end_matches('_');
    if name.is_empty() {
        return Err(format!(
            "`{directory}` cannot name a spec: give a directory name with a letter in it \
             (the spec is named after it: lower-case letters, digits and `_`)"
        ));
    }
    Ok(name.to_string())
}

/// The project's files, by path relative to its root.
fn files(name: &str) -> Vec<(PathBuf, String)> {
    let file = |path: &str, text: &str| {
        (
            Path::new(&path.replace("{NAME}", name)).to_path_buf(),
            text.replace("{NAME}", name),
        )
    };
    vec![
        file("specs/{NAME}.charter", SPEC),
        file("specs/prompts/writer.md.j2", WRITER_PROMPT),
        file("golden/{NAME}/writer_fixes_review/scenario.yaml", SCENARIO),
        file("golden/{NAME}/writer_fixes_review/cassette.yaml", CASSETTE),
        file("request.json", REQUEST),
        file(
            ".github/workflows/charter.yml",
            &WORKFLOW.replace("{VERSION}", env!("CARGO_PKG_VERSION")),
        ),
        file(".gitignore", GITIGNORE),
    ]
}

const SPEC: &str = r#"spec {NAME} version "0.1.0"
"""
A writer drafts, a reviewer judges, the gate decides: a draft the reviewer rejects goes
back to the writer with the review as feedback, at most twice; the best draft that was
judged is delivered. Replace the roles, contracts and gate with your agent's own.
"""

models {
  default = "openai:gpt-4o-mini" price 0.15 / 0.60
}

contract Request { goal: string }
contract Draft   { title: string  body: string }
contract Review  { score: int(0..=10)  verdict: PASS | FAIL  notes: string? }

role writer {
  model: default
  prompt: file("prompts/writer.md.j2")
  input: Request
  output: Draft
  timeout: 2m
  retry: 2 backoff 1s
}

role reviewer {
  model: default
  prompt: """Score this draft from 0 to 10 and say PASS or FAIL, with notes on what to fix:

{{ candidate.text }}"""
  input: Candidate
  output: Review
  timeout: 1m
  retry: 1 backoff 1s
}

role finalizer {
  model: default
  prompt: """Deliver candidate {{ candidate.id }} with a one-line summary:

{{ candidate.text }}"""
  input: Candidate
  output: Delivery
  timeout: 1m
  retry: 1 backoff 1s
}

gate quality on write {
  hard approved: review.verdict == PASS else REJECTED detail review.notes
  score quality weight 1: review.score below 6 LOW_QUALITY
  pass when score >= 7
}

repair {
  rounds 2
  no_progress 2
  REJECTED, LOW_QUALITY -> rerun write with feedback
}

budget { tokens 50000  cost 0.50  wall 30m  steps 20 }

flow {
  write   = writer(request)          -> review
  review  = reviewer(candidate)      -> judge
  judge   = gate quality             pass -> deliver  fail -> repair
  deliver = finalize finalizer(best) -> done
}
"#;

const WRITER_PROMPT: &str = r#"Write a short piece on: {{ request.goal }}

Give it a title and a body of a few paragraphs.
{% if feedback %}

Your previous draft was sent back. Fix what the review found:

{{ feedback }}
{% endif %}
"#;

const SCENARIO: &str = r#"spec: specs/{NAME}.charter
description: the reviewer fails the first draft for missing sources; the writer, told why, fixes it; the gate passes and c2 is delivered
input: { goal: "why the sky is blue" }
expect: { outcome: completed, reason: gate_passed, delivered: c2, calls: { write: 2, review: 2, deliver: 1 } }
"#;

const CASSETTE: &str = r#"# Written by hand: what the models answer, keyed by (step, round, item, attempt).
# No `recorded` block: the cassette is unpinned (`charter verify --accept --pin` pins it).
version: 1
calls:
  - { step: write, latency: 3s, usage: { input_tokens: 120, output_tokens: 300 },
      response: { title: "Why the sky is blue", body: "Sunlight scatters off air molecules." } }
  - { step: review, latency: 2s, usage: { input_tokens: 350, output_tokens: 60 },
      response: { score: 4, verdict: FAIL, notes: "name the effect (Rayleigh scattering) and cite a source" } }
  - { step: write, round: 2, latency: 3s, usage: { input_tokens: 420, output_tokens: 340 },
      expect_prompt: { contains: ["Rayleigh scattering"] },
      response: { title: "Why the sky is blue", body: "Rayleigh scattering: shorter wavelengths scatter more (source: NASA)." } }
  - { step: review, round: 2, latency: 2s, usage: { input_tokens: 390, output_tokens: 40 },
      response: { score: 8, verdict: PASS } }
  - { step: deliver, round: 2, latency: 1s, usage: { input_tokens: 300, output_tokens: 30 },
      response: { candidate_id: c2, summary: "why the sky is blue, with its cause and a source" } }
"#;

const REQUEST: &str = "{ \"goal\": \"why the sky is blue\" }\n";

const WORKFLOW: &str = r#"# Replays every scenario under golden/ and compares its trace with trace.snap: offline,
# with no model called and no key needed.
name: charter
on: [push, pull_request]
env:
  # Where CI gets charter from: the git repository your team builds charter from, and
  # the tag to build. Set both: every run then builds the same charter, with the versions
  # its Cargo.lock was tested with (--locked). Until they are set the job stops here and
  # says so. (This project was made by charter {VERSION}.)
  CHARTER_GIT: ""   # e.g. https://github.com/your-org/charter
  CHARTER_TAG: ""   # e.g. v{VERSION}
jobs:
  verify:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: dtolnay/rust-toolchain@stable
      - name: Install charter
        run: |
          if [ -z "$CHARTER_GIT" ] || [ -z "$CHARTER_TAG" ]; then
            echo "::error file=.github/workflows/charter.yml::set CHARTER_GIT and CHARTER_TAG at the top of this file: the git repository and tag charter is installed from"
            exit 1
          fi
          cargo install --locked --git "$CHARTER_GIT" --tag "$CHARTER_TAG" charter
      # The MCP servers the specs declare still offer what charter.lock says (passes when
      # no spec declares one).
      - run: charter lock --check
      - run: charter verify --github --junit report.xml
      - uses: actions/upload-artifact@v4
        if: always()
        with: { name: junit, path: report.xml }
"#;

const GITIGNORE: &str = "# Pending snapshots (`charter review`) and run directories (`charter run`).\n*.snap.new\n.charter/\n";

#[cfg(test)]
mod tests {
    use super::{SPEC, spec_name};

    #[test]
    fn the_spec_of_a_new_project_is_printed_already_formatted() {
        for name in ["my_agent", "a_much_longer_agent_name"] {
            let spec = SPEC.replace("{NAME}", name);
            let formatted = charter_compiler::format::format(&spec)
                .unwrap_or_else(|error| panic!("{:?}", error.diagnostics));
            assert_eq!(
                formatted, spec,
                "`charter fmt` would change the new project's spec"
            );
        }
    }

    #[test]
    fn a_directory_name_becomes_a_spec_identifier() {
        for (directory, spec) in [
            ("support_agent", "support_agent"),
            ("a2", "a2"),
            ("My-Agent", "my_agent"),
            ("2fast", "fast"),
            ("agent-", "agent"),
        ] {
            assert_eq!(spec_name(directory).as_deref(), Ok(spec), "{directory}");
        }
        for bad in ["", "2", "--"] {
            let problem = spec_name(bad).err().unwrap_or_default();
            assert!(problem.contains("cannot name a spec"), "{bad}: {problem}");
        }
    }
}
