//! `charter check [PATH...]`: compile specs (the project's, by default) and report their diagnostics.

use std::path::PathBuf;

use charter_compiler::{Compilation, Diagnostic, bounds, compile, render};
use clap::{Args, ValueEnum};

use crate::loader::{
    FsLoader, ReadError, collect_specs, display_path, normalize, project_specs, read_text,
};
use crate::terminal::{Context, Outcome, count, print_err, print_error, print_out, summary_line};

/// Compile specs and report every error and warning, like rustc.
///
/// With no PATH, checks the project in the current directory as `charter verify` does:
/// every spec under `specs/` except the compile-fail cases in `specs/invalid/` (every
/// spec under `.` when there is no `specs/`).
///
/// Exit status: 0 when no spec has an error (warnings allowed), 1 when one has, 2 on a
/// usage error or input that cannot be read (a missing path, a file that is not
/// `.charter` or not UTF-8, a directory with no spec). Usage errors are plain
/// `error: ...` lines on stderr, also with `--format json`; JSON lines are
/// diagnostics only. (`--message-format` is the older spelling of `--format`.)
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter check specs/seeds specs/examples --bounds\n         charter check                  # the project here: its specs/"
)]
pub struct CheckArgs {
    /// Spec files, or directories searched recursively for `*.charter` files (default: the
    /// project in the current directory).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// The output format of the diagnostics (on stderr): rustc-like text, or one JSON
    /// object per line. `--message-format` (cargo's name) is the same flag.
    #[arg(
        long = "format",
        visible_alias = "message-format",
        value_name = "FORMAT",
        value_enum,
        ignore_case = true,
        default_value_t = MessageFormat::Human
    )]
    pub message_format: MessageFormat,

    /// For each spec without errors, print its worst case (model calls, tokens, wall time)
    /// on stdout.
    #[arg(long)]
    pub bounds: bool,

    /// Treat warnings as errors (exit 1 when any spec has a warning).
    #[arg(long)]
    pub deny_warnings: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MessageFormat {
    Human,
    Json,
}

/// The diagnostics counted over one spec or many.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    errors: usize,
    warnings: usize,
}

impl Tally {
    fn of(diagnostics: &[Diagnostic]) -> Tally {
        let errors = diagnostics.iter().filter(|d| d.is_error()).count();
        Tally {
            errors,
            warnings: diagnostics.len() - errors,
        }
    }

    fn describe(self) -> String {
        match (self.errors, self.warnings) {
            (0, 0) => "no errors or warnings".to_string(),
            (errors, 0) => count(errors, "error"),
            (0, warnings) => count(warnings, "warning"),
            (errors, warnings) => {
                format!("{}, {}", count(errors, "error"), count(warnings, "warning"))
            }
        }
    }
}

pub fn run(args: &CheckArgs, context: Context) -> anyhow::Result<Outcome> {
    let specs = if args.paths.is_empty() {
        project_specs()
    } else {
        collect_specs(&args.paths)
    };
    let specs = match specs {
        Ok(specs) => specs,
        Err(problems) => {
            for problem in problems {
                print_error(context, &problem);
            }
            return Ok(Outcome::Usage);
        }
    };
    let mut texts = Vec::with_capacity(specs.len());
    let mut unreadable = false;
    for spec in &specs {
        let shown = display_path(&normalize(spec));
        match read_text(spec, &shown) {
            Ok(text) => texts.push((shown, spec, text)),
            Err(error) => {
                unreadable = true;
                let message = match error {
                    ReadError::Missing => format!("`{shown}` does not exist"),
                    ReadError::Other(message) => message,
                };
                print_error(context, &message);
            }
        }
    }
    if unreadable {
        return Ok(Outcome::Usage);
    }

    let mut total = Tally::default();
    let mut failed_specs = 0;
    let mut printed_bounds = false;
    for (name, path, text) in &texts {
        let compilation = compile(name, text, &FsLoader::for_spec(path));
        let tally = Tally::of(&compilation.diagnostics);
        report(args, context, name, &compilation, tally);
        total.errors += tally.errors;
        total.warnings += tally.warnings;
        let failed = tally.errors > 0 || (args.deny_warnings && tally.warnings > 0);
        if failed {
            failed_specs += 1;
        }
        // Bounds are shown for every spec without errors, also when its warnings are
        // denied: W007 is about the bound, and the table is what explains it.
        if args.bounds
            && let Some(spec) = &compilation.spec
            && tally.errors == 0
        {
            let separator = if printed_bounds { "\n" } else { "" };
            print_out(&format!("{separator}{}", bounds::compute(spec)))?;
            printed_bounds = true;
        }
    }

    if args.message_format == MessageFormat::Human && texts.len() > 1 {
        let checked = count(texts.len(), "spec");
        if failed_specs > 0 {
            let message = format!("{failed_specs} of {checked} failed: {}", total.describe());
            print_err(&summary_line(context, "error", &message));
        } else {
            print_err(&format!("checked {checked}: {}\n", total.describe()));
        }
    }
    Ok(if failed_specs > 0 {
        Outcome::Failed
    } else {
        Outcome::Clean
    })
}

/// Prints one spec's diagnostics (stderr) and, in human format, its summary line.
fn report(args: &CheckArgs, context: Context, name: &str, compilation: &Compilation, tally: Tally) {
    match args.message_format {
        MessageFormat::Json => {
            print_err(&render::json(
                &compilation.diagnostics,
                &compilation.sources,
            ));
        }
        MessageFormat::Human => {
            print_err(&render::text(
                &compilation.diagnostics,
                &compilation.sources,
                context.color,
            ));
            let denied = args.deny_warnings && tally.warnings > 0;
            if tally.errors > 0 || denied {
                let message = format!("`{name}`: {}", tally.describe());
                print_err(&summary_line(context, "error", &message));
            } else if tally.warnings > 0 {
                let message = format!("`{name}`: {}", tally.describe());
                print_err(&summary_line(context, "warning", &message));
            }
        }
    }
}
