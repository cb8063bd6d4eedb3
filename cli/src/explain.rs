//! `charter explain CODE`: print what a diagnostic code means, with a wrong and a right example; `charter explain explore`: the fault kinds of `charter explore` and what each is expected to do.

use charter_compiler::Code;
use charter_compiler::explain::explain;
use clap::Args;

use crate::terminal::{Context, Outcome, print_err, print_error, print_out};

/// Explain a diagnostic code (E001, W004, ...), or list every code when none is given;
/// `charter explain explore` lists the fault kinds of `charter explore` and the effect
/// each is expected to have.
///
/// Exit status: 0 when the code or topic is known (or none was given), 2 for an unknown
/// code (the list of codes follows on stderr).
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter explain E006\nAnd: charter explain explore (the fault kinds of `charter explore`)"
)]
pub struct ExplainArgs {
    /// The code, as printed in `error[E006]` (case does not matter), or `explore`.
    #[arg(value_name = "CODE")]
    pub code: Option<String>,
}

pub fn run(args: &ExplainArgs, context: Context) -> anyhow::Result<Outcome> {
    let Some(given) = &args.code else {
        print_out(&format!(
            "{}\nRun `charter explain CODE` for what a code means, with examples, and `charter explain explore` for the fault kinds of `charter explore`.\n",
            code_list()
        ))?;
        return Ok(Outcome::Clean);
    };
    if given.trim().eq_ignore_ascii_case("explore") {
        print_out(&explore_kinds())?;
        return Ok(Outcome::Clean);
    }
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

/// `charter explain explore`: what a fault of each kind does to a recorded scenario, and
/// what the run is expected to do about it.
fn explore_kinds() -> String {
    use charter_runtime::explore::FaultKind;
    let mut text = String::from(
        "charter explore: the fault kinds\n\n\
         Each kind is injected as the live provider, tool or person would surface it, at one \
         recorded call, tool call or answer (a transient fault: the next attempt gets the \
         recorded answer). Every variant must still end in a terminal state with a reason (P1), \
         stay within `check --bounds` (P2), deliver only what passed its gate (P3), keep its \
         budget (P4) and every invariant (P5).\n\n",
    );
    for kind in FaultKind::ALL {
        let name = kind.name();
        text.push_str(&format!("  {name}\n      {}\n", kind.effect()));
    }
    text.push_str(
        "\n--depth 2 and 3 combine faults at two and three places; --sample N runs N of them \
         drawn with --seed (the same seed, the same variants).\n\
         Example: charter explore golden/closed_loop/happy_path --depth 2 --faults truncated,stale\n",
    );
    text
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
    fn explore_names_every_fault_kind_with_its_effect() {
        let text = explore_kinds();
        for kind in charter_runtime::explore::FaultKind::ALL {
            let line = format!("  {}\n      {}\n", kind.name(), kind.effect());
            assert!(text.contains(&line), "{kind}: {text}");
        }
    }

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
