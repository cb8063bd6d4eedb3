//! `charter fmt [--check] [PATH...]`: print specs in the one canonical layout.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use charter_compiler::format::{FormatError, format};
use charter_compiler::render;
use clap::Args;

use crate::loader::{ReadError, collect_specs, display_path, normalize, read_text};
use crate::terminal::{Context, Outcome, count, print_err, print_error, print_out, summary_line};

/// Format specs: one canonical layout, comments kept, the compiled spec unchanged.
///
/// Rewrites each spec that is not yet formatted (atomically) and names it. The layout:
/// 2-space indentation, one member a line in a block written over several lines (a
/// block written on one line stays so while it fits in 100 columns), single spaces
/// between tokens, at most one blank line in a row, and runs of like lines aligned into
/// columns (the `=` of models and steps, the `->` of transitions and repair arms, gate
/// rules, invariants, one-line tools and contracts, trailing comments). An item with a
/// syntax error is kept as written. `docs/fmt.md` has the rules.
///
/// With no PATH, formats every spec under `specs/` of the project in the current
/// directory (every spec under `.` when there is no `specs/`). `-` reads a spec on stdin
/// and prints it formatted on stdout (for editors).
///
/// Exit status: 0 when every spec is formatted (or was rewritten); 1 with `--check` when
/// one is not; 2 on a usage error, input that cannot be read, or a spec that cannot be
/// formatted at all (its header does not parse, or a `/*` comment is never closed).
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter fmt                       # rewrite the project's specs\n         charter fmt --check specs/         # CI: exit 1 and show a diff when one is not formatted\n         charter fmt - < agent.charter      # an editor: stdin to stdout"
)]
pub struct FmtArgs {
    /// Spec files, directories searched recursively for `*.charter` files, or `-` for
    /// stdin (default: the project in the current directory).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Change nothing: name each spec that is not formatted, with a unified diff on
    /// stdout, and exit 1 if there is one.
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: &FmtArgs, context: Context) -> anyhow::Result<Outcome> {
    if args.paths.iter().any(|path| path == Path::new("-")) {
        if args.paths.len() > 1 {
            print_error(context, "`-` (stdin) cannot be given with other paths");
            return Ok(Outcome::Usage);
        }
        return stdin(args, context);
    }
    let paths = if args.paths.is_empty() {
        let specs = Path::new("specs");
        vec![if specs.is_dir() {
            specs.to_path_buf()
        } else {
            PathBuf::from(".")
        }]
    } else {
        args.paths.clone()
    };
    let specs = match collect_specs(&paths) {
        Ok(specs) => specs,
        Err(problems) => {
            for problem in problems {
                print_error(context, &problem);
            }
            return Ok(Outcome::Usage);
        }
    };
    let mut changed = 0;
    let mut failed = false;
    for spec in &specs {
        let shown = display_path(&normalize(spec));
        let text = match read_text(spec, &shown) {
            Ok(text) => text,
            Err(error) => {
                print_error(
                    context,
                    &match error {
                        ReadError::Missing => format!("`{shown}` does not exist"),
                        ReadError::Other(message) => message,
                    },
                );
                failed = true;
                continue;
            }
        };
        match format(&text) {
            Ok(formatted) if formatted == text => {}
            Ok(formatted) => {
                changed += 1;
                if args.check {
                    print_out(&diff(&shown, &text, &formatted))?;
                    print_err(&format!("not formatted: {shown}\n"));
                } else if let Err(error) =
                    charter_runtime::world::files::write_atomically(spec, formatted.as_bytes())
                {
                    print_error(context, &format!("cannot write `{shown}`: {error}"));
                    failed = true;
                } else {
                    print_err(&format!("formatted {shown}\n"));
                }
            }
            Err(error) => {
                report(context, &shown, &text, &error);
                failed = true;
            }
        }
    }
    if failed {
        return Ok(Outcome::Usage);
    }
    if args.check && changed > 0 {
        let message = format!(
            "{} of {} not formatted: run `charter fmt`",
            count(changed, "spec"),
            specs.len()
        );
        print_err(&summary_line(context, "error", &message));
        return Ok(Outcome::Failed);
    }
    Ok(Outcome::Clean)
}

/// `charter fmt -`: stdin to stdout; with `--check`, only the diff and the exit status.
fn stdin(args: &FmtArgs, context: Context) -> anyhow::Result<Outcome> {
    let mut text = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut text) {
        print_error(context, &format!("cannot read stdin: {error}"));
        return Ok(Outcome::Usage);
    }
    match format(&text) {
        Ok(formatted) if args.check => {
            if formatted == text {
                return Ok(Outcome::Clean);
            }
            print_out(&diff("<stdin>", &text, &formatted))?;
            print_err("not formatted: <stdin>\n");
            Ok(Outcome::Failed)
        }
        Ok(formatted) => {
            print_out(&formatted)?;
            Ok(Outcome::Clean)
        }
        Err(error) => {
            report(context, "<stdin>", &text, &error);
            Ok(Outcome::Usage)
        }
    }
}

/// Shows why a spec cannot be formatted, as `charter check` shows its diagnostics.
fn report(context: Context, shown: &str, text: &str, error: &FormatError) {
    let sources = FormatError::sources(shown, text);
    print_err(&render::text(&error.diagnostics, &sources, context.color));
    let message = format!("`{shown}` cannot be formatted: fix the error above first");
    print_err(&summary_line(context, "error", &message));
}

/// A unified diff of `shown` from its text to its formatted text.
fn diff(shown: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(shown, &format!("{shown} (formatted)"))
        .to_string()
}
