//! `charter completions SHELL`: print a completion script for bash, zsh, fish, elvish or PowerShell (clap_complete), generated from the same `Cli` the binary parses.

use clap::Args;
use clap_complete::Shell;

use crate::terminal::{Outcome, print_out};

/// Print shell completions for charter on stdout.
///
/// Install them where your shell looks (make the directory first: a new account has
/// none of them), e.g. for bash
/// `mkdir -p ~/.local/share/bash-completion/completions && charter completions bash > ~/.local/share/bash-completion/completions/charter`,
/// for zsh `mkdir -p ~/.zfunc && charter completions zsh > ~/.zfunc/_charter` (with
/// `fpath+=~/.zfunc` before `compinit` in `~/.zshrc`), or for fish
/// `mkdir -p ~/.config/fish/completions && charter completions fish > ~/.config/fish/completions/charter.fish`.
/// A new shell picks them up.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: mkdir -p ~/.local/share/bash-completion/completions && charter completions bash > ~/.local/share/bash-completion/completions/charter"
)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

/// Prints the completion script of `command` (the whole `charter` command line, which
/// `main` hands over) for the shell asked for.
pub fn run(args: &CompletionsArgs, mut command: clap::Command) -> anyhow::Result<Outcome> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "charter", &mut script);
    print_out(&String::from_utf8_lossy(&script))?;
    Ok(Outcome::Clean)
}
