//! `charter graph FILE --format mermaid|dot|json`: print a spec's compiled flow graph.

use std::path::PathBuf;

use charter_compiler::{compile, graph, render};
use clap::{Args, ValueEnum};

use crate::loader::{FsLoader, collect_specs, display_path, normalize};
use crate::{Context, Outcome, count, print_err, print_error, print_out, summary_line};

/// Compile one spec and print its flow graph on stdout: steps, transitions with their
/// conditions, repair edges dashed, terminals.
///
/// A spec with errors prints its diagnostics on stderr and exits 1.
#[derive(Debug, Args)]
#[command(after_help = "Example: charter graph specs/seeds/closed_loop.charter --format mermaid")]
pub struct GraphArgs {
    /// The spec file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Output format: a Mermaid flowchart, Graphviz DOT, or the whole compiled spec as JSON.
    #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
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
    let text = match std::fs::read_to_string(&args.file) {
        Ok(text) => text,
        Err(error) => {
            print_error(context, &format!("cannot read `{name}`: {error}"));
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
