//! `charter graph FILE --format mermaid|dot|json`: print a spec's compiled flow graph.

use std::path::PathBuf;

use charter_compiler::{compile, graph, render};
use clap::{Args, ValueEnum};

use crate::loader::{FsLoader, ReadError, collect_specs, display_path, normalize, read_text};
use crate::terminal::{Context, Outcome, count, print_err, print_error, print_out, summary_line};

/// Compile one spec and print its flow graph on stdout: steps, transitions with their
/// conditions, repair edges dashed, terminals.
///
/// Exit status: 0 when the graph is printed (warnings are shown on stderr), 1 when the spec
/// has errors (its diagnostics on stderr, nothing on stdout), 2 on a usage error or input
/// that cannot be read.
#[derive(Debug, Args)]
#[command(after_help = "Example: charter graph specs/seeds/closed_loop.charter --format mermaid")]
pub struct GraphArgs {
    /// The spec file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Output format: a Mermaid flowchart, Graphviz DOT, or the whole compiled spec as JSON.
    #[arg(long, value_name = "FORMAT", value_enum, ignore_case = true, default_value_t = GraphFormat::Mermaid)]
    pub format: GraphFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    Mermaid,
    Dot,
    Json,
}

pub fn run(args: &GraphArgs, context: Context) -> anyhow::Result<Outcome> {
    if args.file.is_dir() {
        print_error(
            context,
            &format!(
                "`{}` is a directory; give one spec file",
                display_path(&args.file)
            ),
        );
        return Ok(Outcome::Usage);
    }
    if let Err(problems) = collect_specs(std::slice::from_ref(&args.file)) {
        for problem in problems {
            print_error(context, &problem);
        }
        return Ok(Outcome::Usage);
    }
    let name = display_path(&normalize(&args.file));
    let text = match read_text(&args.file, &name) {
        Ok(text) => text,
        Err(error) => {
            let message = match error {
                ReadError::Missing => format!("`{name}` does not exist"),
                ReadError::Other(message) => message,
            };
            print_error(context, &message);
            return Ok(Outcome::Usage);
        }
    };
    let compilation = compile(&name, &text, &FsLoader::for_spec(&args.file));
    print_err(&render::text(
        &compilation.diagnostics,
        &compilation.sources,
        context.color,
    ));
    let Some(spec) = compilation
        .spec
        .as_ref()
        .filter(|_| !compilation.has_errors())
    else {
        let errors = compilation
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .count();
        let message = if errors == 0 {
            format!("`{name}` could not be compiled; no graph")
        } else {
            format!("`{name}`: {}; no graph", count(errors, "error"))
        };
        print_err(&summary_line(context, "error", &message));
        return Ok(Outcome::Failed);
    };
    let mut output = match args.format {
        GraphFormat::Mermaid => graph::to_mermaid(spec),
        GraphFormat::Dot => graph::to_dot(spec),
        GraphFormat::Json => serde_json::to_string_pretty(spec)? + "\n",
    };
    if !output.ends_with('\n') {
        output.push('\n');
    }
    print_out(&output)?;
    Ok(Outcome::Clean)
}
