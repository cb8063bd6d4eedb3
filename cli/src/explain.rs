//! `charter explain CODE`: print what a diagnostic code means, with a wrong and a right example.

use charter_compiler::Code;
use charter_compiler::explain::explain;
use clap::Args;

use crate::{Context, Outcome, print_err, print_error, print_out};

/// Explain a diagnostic code (E001, W004, ...), or list every code when none is given.
#[derive(Debug, Args)]
#[command(after_help = "Example: charter explain E006")]
pub struct ExplainArgs {
    /// The code, as printed in `error[E006]` (case does not matter).
    #[arg(value_name = "CODE")]
    pub code: Option<String>,
}

pub fn run(args: &ExplainArgs, context: Context) -> anyhow::Result<Outcome> {
    let Some(given) = &args.code else {
        print_out(&code_list())?;
        return Ok(Outcome::Clean);
    };
    match Code::parse(given) {
        Some(code) => {
            print_out(explain(code))?;
            Ok(Outcome::Clean)
        }
        None => {
            print_error(context, &format!("unknown diagnostic code `{given}`"));
            print_err(&format!("\nThe codes are:\n{}", code_list()));
            Ok(Outcome::Usage)
        }
    }
}

/// One line per code: the title line of its explanation.
fn code_list() -> String {
    Code::ALL
        .iter()
        .map(|code| {
            let title = explain(*code).lines().next().unwrap_or_default();
            format!("  {title}\n")
        })
        .collect()
}
