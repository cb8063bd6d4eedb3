//! `charter explain CODE`: print what a diagnostic code means, with a wrong and a right example.

use charter_compiler::Code;
use charter_compiler::explain::explain;
use clap::Args;

use crate::{Context, Outcome, print_err, print_error, print_out};

/// Explain a diagnostic code (E001, W004, ...), or list every code when none is given.
///
/// Exit status: 0 when the code is known (or none was given), 2 for an unknown code (the
/// list of codes follows on stderr).
#[derive(Debug, Args)]
#[command(after_help = "Example: charter explain E006")]
pub struct ExplainArgs {
    /// The code, as printed in `error[E006]` (case does not matter).
    #[arg(value_name = "CODE")]
    pub code: Option<String>,
}

pub fn run(args: &ExplainArgs, context: Context) -> anyhow::Result<Outcome> {
    let Some(given) = &args.code else {
        print_out(&format!(
            "{}\nRun `charter explain CODE` for what a code means, with examples.\n",
            code_list()
        ))?;
        return Ok(Outcome::Clean);
    };
    match Code::parse(given) {
        Some(code) => {
            print_out(explain(code))?;
            Ok(Outcome::Clean)
        }
        None => {
            let hint = padded(given)
                .map(|code| format!("; did you mean `{code}`?"))
                .unwrap_or_default();
            print_error(context, &format!("unknown diagnostic code `{given}`{hint}"));
            print_err(&format!("\nThe codes are:\n{}", code_list()));
            Ok(Outcome::Usage)
        }
    }
}

/// The code a short or over-padded spelling stands for: `6` and `e6` for E006, `w1` for
/// W001, `E0006` for E006 (a letter is assumed to be E when none is given).
fn padded(given: &str) -> Option<Code> {
    let trimmed = given.trim();
    let (letter, digits) = match trimmed.chars().next()? {
        letter @ ('e' | 'E' | 'w' | 'W') => (letter.to_ascii_uppercase(), trimmed.get(1..)?),
        _ => ('E', trimmed),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let number: u32 = digits.parse().ok()?;
    Code::parse(&format!("{letter}{number:03}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_spellings_are_suggested_as_the_full_code() {
        let cases = [
            ("6", Some("E006")),
            ("e6", Some("E006")),
            ("w1", Some("W001")),
            ("E0006", Some("E006")),
            ("E999", None),
            ("x", None),
            ("", None),
            ("W", None),
        ];
        for (given, expected) in cases {
            let found = padded(given).map(|code| code.as_str().to_string());
            assert_eq!(found.as_deref(), expected, "{given}");
        }
    }
}
