//! `charter chat SPEC [--session ID] [--tool NAME=COMMAND]... [--model ALIAS=PROVIDER:MODEL]... [--record DIR]`: a conversation at the terminal, one turn per line typed, each turn's answer on stdout, the session saved after every turn that answered.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use charter_compiler::CompiledSpec;
use charter_compiler::graph::TypeIr;
use charter_runtime::engine::models::{apply_overrides, parse_override};
use charter_runtime::engine::run::{DeliveryTarget, RunConfig};
use charter_runtime::engine::validate::{validate_request, violations_text};
use charter_runtime::formats::scenario::{Cassette, Recorded, Scenario, TurnInput};
use charter_runtime::formats::trace::{Outcome as RunState, TraceSink};
use charter_runtime::world::providers::LiveSettings;
use charter_runtime::world::record::{Recording, write_recording};
use charter_runtime::world::secrets::{Scrubber, ScrubbingSink, secrets_by_name};
use charter_runtime::world::sessions::{load, save_turn, session_path, validate_id};
use clap::Args;
use serde_json::{Value, json};

use crate::live::LiveCalls;
use crate::loader::{compile_whole, display_path, normalize};
use crate::replay::LiveDisplay;
use crate::run::{
    Fanout, TerminalHumans, outcome_line, roles_called, run_live, scenario_spec, sessions_dir,
    tool_box,
};
use crate::{Context, Outcome, print_err, print_error, summary_line};

/// Talk to a spec: each line typed on stdin is one turn.
///
/// A line becomes the request contract's one string field (the contract's other fields
/// must be optional or have a default); blank lines are skipped and end of input (Ctrl-D)
/// ends the conversation. Each turn runs live like `charter run` (progress on stderr), and
/// its answer is printed on stdout as JSON. For a spec with a `session`, the conversation
/// is kept in `.charter/sessions/ID.json`, saved atomically after every turn that
/// answered; without --session a new id is chosen and shown. Exit status: 0 every turn
/// completed, 3 a turn ended otherwise, 1 an error, 2 a usage error.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter chat specs/seeds/mention_roles.charter --session team\n  > @创意伙伴 想两个漫画创意\n  > 第二个展开讲讲\n  (Ctrl-D ends; `charter chat SPEC --session team` continues later)"
)]
pub struct ChatArgs {
    /// The spec to talk to.
    #[arg(value_name = "SPEC")]
    pub spec: PathBuf,

    /// Continue (or start) the conversation ID, kept in `.charter/sessions/ID.json`. ID is
    /// a plain name (letters, digits, `-`, `_`).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,

    /// A tool as a command, run by `sh -c`: the call's JSON arguments on stdin, one JSON
    /// value on stdout. Repeat for each tool.
    #[arg(long = "tool", value_name = "NAME=COMMAND")]
    pub tools: Vec<String>,

    /// Run model alias ALIAS on PROVIDER:MODEL instead of what the spec's `models` block
    /// says. Repeat for each alias.
    #[arg(long = "model", value_name = "ALIAS=PROVIDER:MODEL")]
    pub models: Vec<String>,

    /// Record the conversation as one scenario (`turns:`) in DIR when it ends; it must
    /// start from a new session.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,

    /// Also show each model answer (shortened) on stderr as it arrives.
    #[arg(long)]
    pub show_output: bool,
}

pub fn run(args: &ChatArgs, context: Context) -> anyhow::Result<Outcome> {
    match chat(args, context) {
        Ok(outcome) | Err(outcome) => Ok(outcome),
    }
}

fn usage(context: Context, message: &str) -> Outcome {
    print_error(context, message);
    Outcome::Usage
}

fn chat(args: &ChatArgs, context: Context) -> Result<Outcome, Outcome> {
    for given in &args.tools {
        if given
            .split_once('=')
            .is_none_or(|(name, _)| name.trim().is_empty())
        {
            return Err(usage(
                context,
                &format!(
                    "--tool `{given}` is not NAME=COMMAND (e.g. --tool search='python3 search.py')"
                ),
            ));
        }
    }
    if let Some(id) = &args.session {
        validate_id(id).map_err(|error| usage(context, &error.to_string()))?;
    }
    if let Some(record) = &args.record
        && record.join("scenario.yaml").exists()
    {
        return Err(usage(
            context,
            &format!(
                "`{}` already holds a scenario; give another --record directory",
                display_path(record)
            ),
        ));
    }

    let spec_name = display_path(&normalize(&args.spec));
    let text = std::fs::read_to_string(&args.spec)
        .map_err(|error| usage(context, &format!("cannot read `{spec_name}`: {error}")))?;
    let mut spec =
        compile_whole(context, &spec_name, &text, &args.spec, "chat").ok_or(Outcome::Failed)?;
    let mut overrides = std::collections::BTreeMap::new();
    for given in &args.models {
        let (alias, target) = parse_override(given).map_err(|message| usage(context, &message))?;
        overrides.insert(alias, target);
    }
    apply_overrides(&mut spec, &overrides).map_err(|message| usage(context, &message))?;
    let spec = &spec;
    let field = chat_field(spec).map_err(|message| usage(context, &message))?;

    // The conversation: loaded (or new) before any key is needed, so a bad session file
    // is reported first.
    let mut session = match &spec.session {
        Some(_) => {
            let id = args.session.clone().unwrap_or_else(new_session_id);
            let path = session_path(&sessions_dir(), &id)
                .map_err(|error| usage(context, &error.to_string()))?;
            let session = load(&path, spec).map_err(|error| usage(context, &error.to_string()))?;
            if args.record.is_some() && session.turn_count > 0 {
                return Err(usage(
                    context,
                    &format!(
                        "--record starts from a new session, and session {id} already has {} turn(s); give a new --session",
                        session.turn_count
                    ),
                ));
            }
            Some((id, path, session))
        }
        None => {
            if let Some(id) = &args.session {
                return Err(usage(
                    context,
                    &format!(
                        "--session {id}: spec `{}` declares no `session`, so it keeps nothing between turns (add `session NAME keep N {{ ... }}` to the spec)",
                        spec.name
                    ),
                ));
            }
            print_err(&summary_line(
                context,
                "warning",
                &format!(
                    "spec `{}` declares no `session`: each line is a turn on its own, and nothing is kept between them",
                    spec.name
                ),
            ));
            None
        }
    };

    let variables: Vec<(String, String)> = std::env::vars().collect();
    let settings = LiveSettings::from_variables(variables.clone());
    let missing = settings.missing_for(spec);
    if !missing.is_empty() {
        for line in missing {
            print_error(context, &line);
        }
        return Err(Outcome::Usage);
    }
    let tools = Arc::new(tool_box(spec, &args.tools).map_err(|message| usage(context, &message))?);
    let called = roles_called(spec);
    for name in tools.unimplemented() {
        if spec
            .roles
            .iter()
            .filter(|(role, _)| called.contains(role.as_str()))
            .any(|(_, role)| role.tools.iter().any(|tool| tool == name))
        {
            print_err(&summary_line(
                context,
                "warning",
                &format!(
                    "tool `{name}` has no implementation (give it with --tool {name}=COMMAND); its calls will fail"
                ),
            ));
        }
    }
    let providers = settings.providers(tools).map_err(|error| {
        print_error(context, &error.to_string());
        Outcome::Failed
    })?;
    let mut secrets = settings.secrets();
    secrets.extend(secrets_by_name(variables));
    let scrubber = Scrubber::new(secrets.clone());

    match &session {
        Some((id, path, state)) => print_err(&format!(
            "chat {spec_name}: spec {} {}, session {id} ({}, {} turn(s) so far); one message per line, Ctrl-D ends\n",
            spec.name,
            spec.version,
            display_path(path),
            state.turn_count
        )),
        None => print_err(&format!(
            "chat {spec_name}: spec {} {}; one message per line, Ctrl-D ends\n",
            spec.name, spec.version
        )),
    }

    let mut recorded_turns: Vec<TurnInput> = Vec::new();
    let mut recorded = Cassette::new(Recorded {
        overrides: overrides.clone(),
        ..Recorded::from_spec(spec)
    });
    let mut all_completed = true;
    loop {
        // Stdin is locked only while a line is read: an `ask` step of a turn reads its
        // answer from stdin too.
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => {
                print_error(context, &format!("cannot read stdin: {error}"));
                return Err(Outcome::Failed);
            }
        }
        let message = line.trim();
        if message.is_empty() {
            continue;
        }
        let input = match validate_request(spec, &json!({ field.clone(): message })) {
            Ok(input) => input,
            Err(violations) => {
                print_error(
                    context,
                    &format!(
                        "this line is not a request: {}",
                        violations_text(&violations)
                    ),
                );
                all_completed = false;
                continue;
            }
        };
        let turn = session.as_ref().map_or(
            u64::try_from(recorded_turns.len()).unwrap_or(0) + 1,
            |(_, _, state)| state.next_turn(),
        );
        // One recording per turn: each turn's calls are keyed from 1 again.
        let recording = Recording::new(secrets.clone());
        let provider = Arc::new(recording.provider(providers.clone()));
        let humans = recording.humans(TerminalHumans);
        let calls = LiveCalls::new(args.show_output);
        let mut sink = ScrubbingSink::new(
            Fanout(vec![
                Box::new(LiveDisplay::with_calls(calls.clone())) as Box<dyn TraceSink>
            ]),
            scrubber.clone(),
        );
        let config = RunConfig {
            delivery: DeliveryTarget::Memory,
            observer: Some(calls.clone()),
            session: session.as_ref().map(|(_, _, state)| state.clone()),
            ..RunConfig::default()
        };
        let heartbeat = calls.heartbeat();
        let result = run_live(
            spec,
            input.clone(),
            provider,
            &humans,
            config,
            &mut sink,
            &recording,
        );
        drop(heartbeat);
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(error) => {
                print_error(context, &error);
                return Err(Outcome::Failed);
            }
        };
        print_err(&format!("turn {turn}: {}\n", outcome_line(&outcome)));
        crate::print_answer(outcome.answer.as_ref()).map_err(|error| {
            print_error(context, &format!("{error:#}"));
            Outcome::Failed
        })?;
        all_completed &= outcome.outcome == RunState::Completed;
        match (&mut session, &outcome.session) {
            (Some((id, path, state)), Some(next)) => {
                save_turn(path, spec, state.turn_count, next, &scrubber).map_err(|error| {
                    print_error(context, &error.to_string());
                    Outcome::Failed
                })?;
                *state = next.clone();
                print_err(&format!("session {id}: turn {} saved\n", state.turn_count));
            }
            (Some((id, _, _)), None) => print_err(&format!(
                "session {id}: unchanged (the turn did not answer)\n"
            )),
            (None, _) => {}
        }
        if args.record.is_some() {
            let this_turn = u64::try_from(recorded_turns.len()).unwrap_or(0) + 1;
            let cassette = recording.cassette(Recorded::from_spec(spec));
            recorded
                .calls
                .extend(cassette.calls.into_iter().map(|call| {
                    charter_runtime::formats::scenario::RecordedCall {
                        turn: this_turn,
                        ..call
                    }
                }));
            recorded
                .humans
                .extend(cassette.humans.into_iter().map(|human| {
                    charter_runtime::formats::scenario::RecordedHuman {
                        turn: this_turn,
                        ..human
                    }
                }));
            recorded_turns.push(TurnInput {
                input: scrubber.value(&input),
            });
        }
    }

    if let Some(directory) = &args.record {
        if recorded_turns.is_empty() {
            print_err(&summary_line(
                context,
                "warning",
                "no turn was taken, so nothing was recorded",
            ));
        } else {
            record_conversation(spec, &args.spec, directory, recorded_turns, &recorded).map_err(
                |message| {
                    print_error(context, &message);
                    Outcome::Failed
                },
            )?;
        }
    }
    Ok(if all_completed {
        Outcome::Clean
    } else {
        Outcome::NotCompleted
    })
}

/// Writes the conversation as one scenario in `directory`.
fn record_conversation(
    spec: &CompiledSpec,
    spec_path: &Path,
    directory: &Path,
    turns: Vec<TurnInput>,
    cassette: &Cassette,
) -> Result<(), String> {
    let count = turns.len();
    let scenario = Scenario {
        spec: scenario_spec(spec_path, directory),
        description: Some(format!(
            "recorded conversation with {} ({count} turn(s))",
            spec.name
        )),
        input: Value::Null,
        turns: Some(turns),
        expect: None,
    };
    write_recording(directory, &scenario, cassette).map_err(|error| error.to_string())?;
    print_err(&format!("recorded to {}\n", display_path(directory)));
    Ok(())
}

/// The request contract's one string field, which each typed line fills; every other
/// field must be optional or have a default.
fn chat_field(spec: &CompiledSpec) -> Result<String, String> {
    let Some(name) = spec.request.as_deref() else {
        return Err(format!(
            "charter chat needs to know the request contract of spec `{}`: name a contract `Request`, or pass `request` to the first step's role",
            spec.name
        ));
    };
    let Some(contract) = spec.contracts.get(name) else {
        return Err(format!("the request contract `{name}` is not in the spec"));
    };
    let strings: Vec<&str> = contract
        .fields
        .iter()
        .filter(|field| field.ty == TypeIr::String && !field.optional)
        .map(|field| field.name.as_str())
        .collect();
    let [field] = strings.as_slice() else {
        let found = if strings.is_empty() {
            "none".to_string()
        } else {
            strings
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(format!(
            "charter chat types each line into the request contract's one string field, and `{name}` has {} string fields ({found}); give `{name}` exactly one field of type `string` (others may be `string?` or of other types)",
            strings.len()
        ));
    };
    let required: Vec<&str> = contract
        .fields
        .iter()
        .filter(|other| other.name != *field && !other.optional && other.default.is_none())
        .map(|other| other.name.as_str())
        .collect();
    if !required.is_empty() {
        return Err(format!(
            "charter chat fills only `{name}.{field}` from a typed line, but `{name}` also requires {}; make them optional or give them defaults",
            required
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok((*field).to_string())
}

/// `chat-<milliseconds>-<pid>`: a plain name no other chat started now can take.
fn new_session_id() -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| since.as_millis())
        .unwrap_or_default();
    format!("chat-{millis}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(request: &str) -> CompiledSpec {
        let text = format!(
            r#"spec t version "1"
contract Request {{ {request} }}
contract Reply {{ text: string }}
role talker {{ model: "openai:m" prompt: """hi""" input: Request output: Reply }}
flow {{ talk = talker(request) -> done }}
"#
        );
        let compilation = charter_compiler::compile(
            "t.charter",
            &text,
            &charter_compiler::MemoryLoader::default(),
        );
        compilation
            .spec
            .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics))
    }

    #[test]
    fn a_line_fills_the_one_string_field() {
        assert_eq!(
            chat_field(&spec("text: string  role: a | b?  n: int = 1")),
            Ok("text".to_string())
        );
    }

    #[test]
    fn a_request_without_exactly_one_string_field_is_refused_saying_why() {
        let none = chat_field(&spec("n: int = 1")).err().unwrap_or_default();
        assert!(none.contains("0 string fields (none)"), "{none}");
        let two = chat_field(&spec("a: string  b: string"))
            .err()
            .unwrap_or_default();
        assert!(two.contains("2 string fields (`a`, `b`)"), "{two}");
        let required = chat_field(&spec("text: string  n: int"))
            .err()
            .unwrap_or_default();
        assert!(required.contains("also requires `n`"), "{required}");
    }

    #[test]
    fn new_session_ids_are_valid() {
        assert!(validate_id(&new_session_id()).is_ok());
    }
}
