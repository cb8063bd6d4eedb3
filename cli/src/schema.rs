//! `charter schema scenario|cassette`: print the JSON Schema of a golden's `scenario.yaml` or `cassette.yaml` (the files under `editors/vscode/schemas/`, built into the binary), for an editor's YAML support.

use clap::{Args, ValueEnum};

use crate::terminal::{Outcome, print_out};

/// The schema of `scenario.yaml` (`editors/vscode/schemas/scenario.schema.json`).
pub const SCENARIO: &str = include_str!("../../editors/vscode/schemas/scenario.schema.json");

/// The schema of `cassette.yaml` (`editors/vscode/schemas/cassette.schema.json`).
pub const CASSETTE: &str = include_str!("../../editors/vscode/schemas/cassette.schema.json");

/// Print the JSON Schema (draft 2020-12) of a golden's scenario.yaml or cassette.yaml.
///
/// It prints the schema on stdout, exactly as the repository's
/// `editors/vscode/schemas/NAME.schema.json`. An editor's YAML support (the YAML language server
/// of VS Code's YAML extension, Neovim, Helix or Zed) uses it to complete keys, show what
/// each key means on hover, and flag a misspelt or misplaced key before `charter verify`
/// does. Save it in the project and map it to the goldens, in VS Code's settings:
/// `"yaml.schemas": { "schemas/cassette.schema.json": "golden/**/cassette.yaml" }`, or
/// for one file by its first line:
/// `# yaml-language-server: $schema=../../../schemas/cassette.schema.json`.
#[derive(Debug, Args)]
#[command(after_help = "\
Example: mkdir -p schemas && charter schema cassette > schemas/cassette.schema.json
  then, as the first line of golden/SPEC/SCENARIO/cassette.yaml:
  # yaml-language-server: $schema=../../../schemas/cassette.schema.json

Exit status: 0 printed; 2 a NAME other than scenario or cassette.")]
pub struct SchemaArgs {
    /// Which file's schema: scenario or cassette.
    #[arg(value_enum, value_name = "NAME")]
    pub name: SchemaName,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SchemaName {
    /// scenario.yaml: the spec, the input (or a conversation's turns) and `expect`.
    Scenario,
    /// cassette.yaml: the recorded calls, human answers and faults.
    Cassette,
}

impl SchemaName {
    /// The schema's text, exactly as the file under `editors/vscode/schemas/` holds it.
    pub fn text(self) -> &'static str {
        match self {
            SchemaName::Scenario => SCENARIO,
            SchemaName::Cassette => CASSETTE,
        }
    }
}

pub fn run(args: &SchemaArgs) -> anyhow::Result<Outcome> {
    print_out(args.name.text())?;
    Ok(Outcome::Clean)
}
