//! The `charter` binary: a thin clap front over the compiler and runtime.
//!
//! The modules form three layers. This file holds the `Cli`, the `Command` enum and the
//! dispatch (`run --fork` goes to `fork.rs`), the exit codes and the table of flags `charter
//! --help` ends with; it is the only module that imports a command module. The shared
//! modules — `terminal` (the context, exit codes and printing), `loader` (specs on disk),
//! `recording` (where runs are kept and how one becomes a scenario), `display` (what a run
//! shows as it goes), `driver` (the one live-run driver), `chat_role`, `stream_rows` and
//! `page` — are imported by commands and never import one. Each command (`check.rs`,
//! `verify/`, `run.rs`, `fork.rs`, `serve/`, …) is a leaf: what two commands share is moved
//! into a shared module, never imported from one command by another; `cargo xtask verify`'s
//! `layers` stage refuses a command importing a command. A flag two commands take means one
//! thing: the unit tests below hold the flag table to the commands clap defines (every row,
//! and every flag on two commands or more), and `cli/tests/flags.rs` holds the README's
//! table to it.

/// mimalloc: a replay allocates and frees many small values (JSON, trace events); it
/// makes `charter verify` and `charter explore` about a third faster than the system
/// allocator (`cargo xtask bench`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The commands, each a leaf.
mod chat;
mod check;
mod completions;
mod eval;
mod explain;
mod explore;
mod fmt;
mod fork;
mod graph;
mod lock;
mod lsp;
mod new;
mod replay;
mod review;
mod run;
mod schema;
mod serve;
mod verify;
mod view;
mod worker;

// What the commands share.
mod chat_role;
mod display;
mod driver;
mod loader;
mod page;
mod recording;
mod stream_rows;
mod terminal;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use terminal::{Context, Outcome, print_error};

/// Charter: a compiler for multi-role LLM agent specs (`.charter` files), their runtime
/// and a replayer of their recorded runs.
#[derive(Debug, Parser)]
#[command(
    name = "charter",
    version,
    about = "Charter: check, graph, explain, run and replay multi-role LLM agent specs (`.charter` files)",
    after_help = AFTER_HELP
)]
pub(crate) struct Cli {
    /// When to colour what is printed: `auto` colours each of stdout and stderr only when
    /// it is a terminal, and nothing when NO_COLOR is set to a non-empty value.
    #[arg(long, value_name = "WHEN", value_enum, default_value_t = ColorChoice::Auto, global = true)]
    color: ColorChoice,

    #[command(subcommand)]
    command: Command,
}

/// The end of `charter --help`: an example, the flags (one meaning in every command that
/// takes them; the README has the same table, and a test holds both to the commands) and
/// the exit status.
const AFTER_HELP: &str = "\
Example: charter check specs/seeds specs/examples

Flags mean one thing in every command that takes them:
  --format FORMAT                  [check, graph, verify]
      what the output is printed as: check and verify human|json, graph mermaid|dot|json
  --deny-warnings                  [check, verify]
      a spec with a compiler warning fails, as one with an error
  -o, --output FILE                [view]
      the file to write
  --out DIR                        [replay, run, view]
      the directory to write into: the delivery (run, replay), the page (view)
  --events FILE                    [replay, run]
      also write every trace event to FILE, one JSON object a line
  --junit FILE                     [eval, verify]
      also write a JUnit XML report to FILE
  --html FILE                      [eval, verify]
      also write a self-contained HTML report to FILE
  --record DIR                     [chat, run]
      record the live run as a scenario in DIR
  --session ID                     [chat, run]
      the conversation kept in .charter/sessions/ID.json
  --tool NAME=COMMAND              [chat, eval, run, serve, worker]
      a tool run as a command: its JSON arguments on stdin, JSON on stdout
  --model ALIAS=PROVIDER:MODEL     [chat, eval, run, serve, verify, worker]
      run a `models` alias on another model
  --show-output                    [chat, run, serve, worker]
      show each model answer, shortened, on stderr as it arrives
  --no-sandbox                     [chat, eval, lock, run, serve, worker]
      run tool commands unsandboxed, with all of your rights
  --require-sandbox                [chat, eval, lock, run, serve, worker]
      refuse to run tools where the machine cannot sandbox them fully
  --check                          [fmt, lock]
      change nothing: exit 1 and show a diff when a spec is not formatted (fmt) or a
      server no longer matches charter.lock (lock)
  --color WHEN                     [every command]
      auto (a terminal, and NO_COLOR unset), always or never
A PATH or DIR left out is the project in the current directory (check, fmt, verify,
review).

Exit status: 0 success; 1 a failure (a spec with errors, a spec not formatted under fmt
--check, a scenario that did not pass, a replay error or unmet `expect`, a run that
stopped on an error, an explore property broken, an eval below --min-pass-rate); 2 a
usage error or input that cannot be read; 3 (run, chat, replay) the run ended in a state
other than completed: below_target, blocked, failed or cancelled (eval: interrupted).
`charter help COMMAND` shows each command's own.";

#[derive(Debug, Subcommand)]
enum Command {
    Check(check::CheckArgs),
    Lock(lock::LockArgs),
    Fmt(fmt::FmtArgs),
    Graph(graph::GraphArgs),
    Explain(explain::ExplainArgs),
    Replay(replay::ReplayArgs),
    Verify(verify::VerifyArgs),
    Review(review::ReviewArgs),
    Run(run::RunArgs),
    Chat(chat::ChatArgs),
    Serve(serve::ServeArgs),
    Worker(worker::WorkerArgs),
    View(view::ViewArgs),
    New(new::NewArgs),
    Completions(completions::CompletionsArgs),
    Schema(schema::SchemaArgs),
    Explore(explore::ExploreArgs),
    Eval(eval::EvalArgs),
    Lsp(lsp::LspArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

fn main() -> ExitCode {
    // A tool's sandbox is applied by this binary started anew (DESIGN §20): first thing,
    // while the process has one thread.
    charter_runtime::world::sandbox::enter_if_asked(&std::env::args_os().collect::<Vec<_>>());
    let cli = parse_args();
    let context = Context {
        color: use_color(cli.color, std::io::stderr().is_terminal()),
        color_out: use_color(cli.color, std::io::stdout().is_terminal()),
        interactive: std::io::stderr().is_terminal(),
    };
    let result = match cli.command {
        Command::Check(args) => check::run(&args, context),
        Command::Lock(args) => lock::run(&args, context),
        Command::Fmt(args) => fmt::run(&args, context),
        Command::Graph(args) => graph::run(&args, context),
        Command::Explain(args) => explain::run(&args, context),
        Command::Replay(args) => replay::run(&args, context),
        Command::Verify(args) => verify::run(&args, context),
        Command::Review(args) => review::run(&args, context),
        Command::Run(args) => run_or_fork(args, context),
        Command::Chat(args) => chat::run(&args, context),
        Command::Serve(args) => serve::run(&args, context),
        Command::Worker(args) => worker::run(&args, context),
        Command::View(args) => view::run(&args, context),
        Command::New(args) => new::run(&args, context),
        Command::Completions(args) => completions::run(&args, Cli::command()),
        Command::Schema(args) => schema::run(&args),
        Command::Explore(args) => explore::run(&args, context),
        Command::Eval(args) => eval::run(&args, context),
        Command::Lsp(args) => lsp::run(&args, context),
    };
    match result {
        Ok(Outcome::Clean) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(1),
        Ok(Outcome::Usage) => ExitCode::from(2),
        Ok(Outcome::NotCompleted) => ExitCode::from(3),
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            print_error(context, &format!("{error:#}"));
            ExitCode::from(2)
        }
    }
}

/// `charter run`, or with `--fork` a fork of a recorded scenario (`fork.rs`), which takes
/// the run's flags it uses.
fn run_or_fork(args: run::RunArgs, context: Context) -> anyhow::Result<Outcome> {
    let Some(scenario) = args.fork else {
        return run::run(&args, context);
    };
    let fork = fork::ForkArgs {
        scenario,
        at: args.at,
        record: args.record,
        force: args.force,
        events: args.events,
        out: args.out,
        live: args.live,
    };
    fork::run(&fork, context)
}

/// Parses the command line. clap's own messages (usage errors, `--help`) follow the same
/// colour choice as ours: `--color` if given (read before clap validates anything else),
/// otherwise a terminal without NO_COLOR.
fn parse_args() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let choice = color_from_args(&args);
    let clap_choice = match choice {
        ColorChoice::Always => clap::ColorChoice::Always,
        ColorChoice::Never => clap::ColorChoice::Never,
        // clap's `auto` checks each stream and NO_COLOR the way `use_color` does.
        ColorChoice::Auto => clap::ColorChoice::Auto,
    };
    let matches = Cli::command().color(clap_choice).get_matches_from(args);
    match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    }
}

/// The last `--color VALUE` / `--color=VALUE` before a `--`; `auto` when absent or invalid
/// (clap reports an invalid value itself).
fn color_from_args(args: &[std::ffi::OsString]) -> ColorChoice {
    let mut choice = ColorChoice::Auto;
    let mut words = args.iter().skip(1).map(|arg| arg.to_string_lossy());
    while let Some(word) = words.next() {
        let value = if word == "--" {
            break;
        } else if word == "--color" {
            words.next().map(|value| value.into_owned())
        } else {
            word.strip_prefix("--color=").map(str::to_string)
        };
        if let Some(value) = value
            && let Ok(parsed) = ColorChoice::from_str(&value, false)
        {
            choice = parsed;
        }
    }
    choice
}

/// Whether to colour a stream that `is_terminal` or not.
fn use_color(choice: ColorChoice, is_terminal: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
            !no_color && is_terminal
        }
    }
}

/// A reader that went away (`charter graph x | head`) is not an error worth reporting.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use clap::CommandFactory;

    /// A flag's row in `charter --help`: its value's name and the commands it lists.
    #[derive(Debug)]
    struct Row {
        value: Option<String>,
        commands: BTreeSet<String>,
    }

    /// The flag rows of the help's table (`  --flag VALUE   [command, ...]`), by long name.
    fn table() -> BTreeMap<String, Row> {
        super::AFTER_HELP
            .lines()
            .filter_map(|line| {
                let row = line.strip_prefix("  ").filter(|row| row.starts_with('-'))?;
                let (flag, rest) = row.split_once('[')?;
                let mut words = flag
                    .split_whitespace()
                    .skip_while(|word| !word.starts_with("--"));
                let long = words.next()?.strip_prefix("--")?.to_string();
                let value = words.next().map(str::to_string);
                let commands = rest.strip_suffix(']')?.split(", ").map(str::to_string);
                Some((
                    long,
                    Row {
                        value,
                        commands: commands.collect(),
                    },
                ))
            })
            .collect()
    }

    /// Each subcommand's arguments that have a long name, by that name.
    fn flags() -> BTreeMap<String, Vec<(String, clap::Arg)>> {
        let mut flags: BTreeMap<String, Vec<(String, clap::Arg)>> = BTreeMap::new();
        for command in super::Cli::command().get_subcommands() {
            for arg in command.get_arguments() {
                if let Some(long) = arg.get_long() {
                    flags
                        .entry(long.to_string())
                        .or_default()
                        .push((command.get_name().to_string(), arg.clone()));
                }
            }
        }
        flags
    }

    #[test]
    fn each_flag_in_the_help_table_is_on_exactly_the_commands_it_lists_with_its_value() {
        let table = table();
        assert!(table.len() >= 10, "the table was not read: {table:?}");
        let flags = flags();
        for (long, row) in &table {
            if row.commands.contains("every command") {
                let cli = super::Cli::command();
                let global = cli.get_arguments().find(|arg| arg.get_long() == Some(long));
                assert!(global.is_some_and(clap::Arg::is_global_set), "--{long}");
                let value = global
                    .and_then(|arg| arg.get_value_names())
                    .and_then(|names| names.first())
                    .map(ToString::to_string);
                assert_eq!(value, row.value, "--{long}");
                continue;
            }
            let on = flags.get(long).map(Vec::as_slice).unwrap_or_default();
            let commands: BTreeSet<String> =
                on.iter().map(|(command, _)| command.clone()).collect();
            assert_eq!(commands, row.commands, "--{long}");
            for (command, arg) in on {
                let value = arg
                    .get_value_names()
                    .and_then(|names| names.first())
                    .map(ToString::to_string);
                let value = value.filter(|_| arg.get_action().takes_values());
                assert_eq!(value, row.value, "charter {command} --{long}");
            }
        }
    }

    #[test]
    fn every_flag_on_more_than_one_command_is_in_the_help_table() {
        let table = table();
        for (long, on) in flags() {
            if on.len() > 1 {
                assert!(
                    table.contains_key(&long),
                    "--{long} is on {on:?} but not in the table"
                );
            }
        }
    }

    #[test]
    fn out_is_a_directory_and_o_a_file_everywhere() {
        for (long, on) in flags() {
            for (command, arg) in on {
                let value = arg
                    .get_value_names()
                    .and_then(|names| names.first())
                    .map(ToString::to_string);
                match long.as_str() {
                    "out" => assert_eq!(value.as_deref(), Some("DIR"), "charter {command}"),
                    "output" => assert_eq!(value.as_deref(), Some("FILE"), "charter {command}"),
                    _ => {}
                }
                if arg.get_short() == Some('o') {
                    assert_eq!(long, "output", "charter {command}: -o is --output FILE");
                }
            }
        }
    }
}
