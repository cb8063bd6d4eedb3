//! `charter chat SPEC [--session ID] [--role NAME] [--tool NAME=COMMAND]... [--model ALIAS=PROVIDER:MODEL]... [--record DIR]`: a conversation at the terminal, one turn per line typed, each turn's answer on stdout, the session saved after every turn that answered.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use charter_compiler::CompiledSpec;
use charter_runtime::engine::run::{DeliveryTarget, RunConfig, RunOutcome};
use charter_runtime::engine::session::Session;
use charter_runtime::engine::validate::{validate_request, violations_text};
use charter_runtime::formats::scenario::{
    Cassette, Expectation, Recorded, RecordedCall, RecordedHuman, Scenario, TurnInput,
};
use charter_runtime::formats::trace::Outcome as RunState;
use charter_runtime::harness::record::expectation_of;
use charter_runtime::world::providers::Providers;
use charter_runtime::world::record::Recording;
use charter_runtime::world::sessions::{load, save_turn, session_path, validate_id};
use clap::Args;
use serde_json::{Value, json};

use crate::chat_role::{ChatLine, ROLE_FIELD, chat_field, parse_line, resolve_role, takes_a_role};
use crate::display::outcome_line;
use crate::driver::{
    LiveEnvironment, LiveFlags, LiveRun, PreparedSpec, TerminalRunOptions, tool_name,
};
use crate::loader::display_path;
use crate::recording::{check_record_spec, scenario_spec, sessions_dir, write_recorded};
use crate::terminal::{Context, Outcome, print_err, print_error, summary_line};

/// Talk to a spec: each line typed on stdin is one turn.
///
/// A line becomes the request contract's one string field (the contract's other fields
/// must be optional or have a default); blank lines are skipped and end of input (Ctrl-D)
/// ends the conversation. Each turn runs live like `charter run` (progress on stderr), and
/// its answer is printed on stdout as JSON. For a spec with a `session`, the conversation
/// is kept in `.charter/sessions/ID.json`, saved atomically after every turn that
/// answered; without --session a new id is chosen and shown.
///
/// Who answers: a spec whose request contract has a `role` field (the settings' preset
/// role) takes it from --role at the start and from `/role NAME` typed as a line, which
/// sets it for every following turn (`/role` alone or `/role none` clears it). NAME is a
/// role's id or its role-file display name. An `@name` at the start of a message still
/// picks the role of that one turn, as the spec's flow says. Exit status: 0 every turn
/// completed, 3 a turn ended otherwise (or a line was refused), 1 an error, 2 a usage
/// error.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter chat specs/seeds/mention_roles.charter --session team\n  > @创意伙伴 想两个漫画创意\n  > 第二个展开讲讲\n  > /role talker\n  > 你选哪个？\n  > /role none\n  (Ctrl-D ends; `charter chat SPEC --session team` continues later)"
)]
pub struct ChatArgs {
    /// The spec to talk to.
    #[arg(value_name = "SPEC")]
    pub spec: PathBuf,

    /// Continue (or start) the conversation ID, kept in `.charter/sessions/ID.json`. ID is
    /// a plain name (letters, digits, `-`, `_`).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,

    /// The role that answers each turn from the start: a role id or role-file display
    /// name, filled into the request's `role` field (the settings' preset). `/role NAME`
    /// typed in the chat changes it; `/role` or `/role none` clears it.
    #[arg(long, value_name = "NAME")]
    pub role: Option<String>,

    #[command(flatten)]
    pub live: LiveFlags,

    /// Record the conversation as one scenario (`turns:`) in DIR when it ends, with an
    /// `expect` of how its last turn ended and its `trace.snap`, written only once its
    /// replay ends as the conversation did (`charter verify` passes it); it must start
    /// from a new session.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
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

/// The conversation: the spec, the session and the providers prepared once, then one live
/// run per line typed, and the recording written when the input ends.
fn chat(args: &ChatArgs, context: Context) -> Result<Outcome, Outcome> {
    check_options(args, context)?;
    let prepared = PreparedSpec::compile(context, &args.spec, &args.live.models, "chat")?;
    let spec = &prepared.spec;
    let field = chat_field(spec).map_err(|message| usage(context, &message))?;
    let mut preset = args
        .role
        .as_deref()
        .map(|typed| resolve_role(spec, typed))
        .transpose()
        .map_err(|message| usage(context, &format!("--role: {message}")))?;
    let session = open_chat_session(args, context, spec)?;
    let environment = LiveEnvironment::of_this_process();
    let providers =
        environment.providers_at_terminal(context, spec, &args.live.tools, args.live.sandbox)?;
    announce(&prepared, session.as_ref());
    match &preset {
        Some(role) => print_err(&format!(
            "role {role} is preset for every turn (`/role none` clears it)\n"
        )),
        None if takes_a_role(spec) => {
            print_err("`/role NAME` presets the role that answers the following turns\n");
        }
        None => {}
    }

    let mut conversation = Conversation {
        args,
        context,
        prepared: &prepared,
        environment,
        providers,
        session,
        recorded_turns: Vec::new(),
        last_ending: None,
        recorded: Cassette::new(Recorded {
            overrides: prepared.overrides.clone(),
            ..Recorded::from_spec(spec)
        }),
    };
    let mut all_completed = true;
    while let Some(line) = read_message(context)? {
        let message = match parse_line(&line) {
            ChatLine::Message(message) => message,
            ChatLine::SetRole(typed) => {
                match typed.map(|typed| resolve_role(spec, typed)).transpose() {
                    Ok(role) => {
                        print_err(&match &role {
                            Some(role) => {
                                format!("role {role} is preset for the following turns\n")
                            }
                            None => "role cleared: the spec picks who answers\n".to_string(),
                        });
                        preset = role;
                    }
                    Err(message) => {
                        print_error(context, &format!("/role: {message}"));
                        all_completed = false;
                    }
                }
                continue;
            }
        };
        let mut request = json!({ field.clone(): message });
        if let Some(role) = &preset {
            request[ROLE_FIELD] = json!(role);
        }
        let input = match validate_request(spec, &request) {
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
        all_completed &= conversation.take_turn(input)?;
    }
    conversation.record()?;
    Ok(if all_completed {
        Outcome::Clean
    } else {
        Outcome::NotCompleted
    })
}

/// Usage errors that need no spec: a --tool given wrong, a session id that is not a
/// plain name, a --record directory that holds a scenario already, and a recording of a
/// spec outside the project root of the --record directory.
fn check_options(args: &ChatArgs, context: Context) -> Result<(), Outcome> {
    for given in &args.live.tools {
        tool_name(given).map_err(|message| usage(context, &message))?;
    }
    if let Some(id) = &args.session {
        validate_id(id).map_err(|error| usage(context, &error.to_string()))?;
    }
    if let Some(record) = &args.record {
        if record.join("scenario.yaml").exists() {
            return Err(usage(
                context,
                &format!(
                    "`{}` already holds a scenario; give another --record directory",
                    display_path(record)
                ),
            ));
        }
        check_record_spec(&args.spec, record).map_err(|message| usage(context, &message))?;
    }
    Ok(())
}

/// The session a conversation is kept in: its id, its file and its state so far.
struct ChatSession {
    id: String,
    path: PathBuf,
    state: Session,
}

/// The conversation's session, loaded (or new) before any key is needed, so that a bad
/// session file is reported first. A spec without a `session` keeps nothing between
/// turns: --session is refused for it, and without --session that is warned of.
fn open_chat_session(
    args: &ChatArgs,
    context: Context,
    spec: &CompiledSpec,
) -> Result<Option<ChatSession>, Outcome> {
    if spec.session.is_none() {
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
        return Ok(None);
    }
    let id = args.session.clone().unwrap_or_else(new_session_id);
    let path =
        session_path(&sessions_dir(), &id).map_err(|error| usage(context, &error.to_string()))?;
    let state = load(&path, spec).map_err(|error| usage(context, &error.to_string()))?;
    if args.record.is_some() && state.turn_count > 0 {
        return Err(usage(
            context,
            &format!(
                "--record starts from a new session, and session {id} already has {} turn(s); give a new --session",
                state.turn_count
            ),
        ));
    }
    Ok(Some(ChatSession { id, path, state }))
}

/// The conversation's first line on stderr: the spec, the session and how to end.
fn announce(prepared: &PreparedSpec, session: Option<&ChatSession>) {
    let spec = &prepared.spec;
    let spec_name = &prepared.shown_path;
    match session {
        Some(session) => print_err(&format!(
            "chat {spec_name}: spec {} {}, session {} ({}, {} turn(s) so far); one message per line, Ctrl-D ends\n",
            spec.name,
            spec.version,
            session.id,
            display_path(&session.path),
            session.state.turn_count
        )),
        None => print_err(&format!(
            "chat {spec_name}: spec {} {}; one message per line, Ctrl-D ends\n",
            spec.name, spec.version
        )),
    }
}

/// The next message typed: a line that is not blank, or `None` at the end of input.
/// Stdin is locked only while a line is read, since an `ask` step of a turn reads its
/// answer from stdin too.
fn read_message(context: Context) -> Result<Option<String>, Outcome> {
    loop {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(error) => {
                print_error(context, &format!("cannot read stdin: {error}"));
                return Err(Outcome::Failed);
            }
        }
        let message = line.trim();
        if !message.is_empty() {
            return Ok(Some(message.to_string()));
        }
    }
}

/// A conversation under way: what every turn runs with, and what --record keeps of the
/// turns so far.
struct Conversation<'chat> {
    args: &'chat ChatArgs,
    context: Context,
    prepared: &'chat PreparedSpec,
    environment: LiveEnvironment,
    providers: Providers,
    session: Option<ChatSession>,
    recorded_turns: Vec<TurnInput>,
    /// How the last turn kept for --record ended: the conversation's `expect`.
    last_ending: Option<Expectation>,
    recorded: Cassette,
}

impl Conversation<'_> {
    /// Takes one turn: a live run at the terminal, its answer on stdout, the session
    /// saved, and its calls kept for --record. Whether the turn completed.
    fn take_turn(&mut self, input: Value) -> Result<bool, Outcome> {
        let context = self.context;
        let turn = self.session.as_ref().map_or(
            u64::try_from(self.recorded_turns.len()).unwrap_or(0) + 1,
            |session| session.state.next_turn(),
        );
        // One recording per turn: each turn's calls are keyed from 1 again.
        let recording = Recording::new(self.environment.secrets.clone());
        let config = RunConfig {
            delivery: DeliveryTarget::Memory,
            session: self.session.as_ref().map(|session| session.state.clone()),
            ..RunConfig::default()
        };
        let live_run = LiveRun::at_terminal(
            &self.prepared.spec,
            &self.environment,
            self.providers.clone(),
            &recording,
            TerminalRunOptions {
                show_output: self.args.live.show_output,
                more_sinks: Vec::new(),
                config,
            },
        );
        let outcome = live_run.run(input.clone()).map_err(|error| {
            print_error(context, &error);
            Outcome::Failed
        })?;
        print_err(&format!("turn {turn}: {}\n", outcome_line(&outcome)));
        crate::terminal::print_answer(outcome.answer.as_ref()).map_err(|error| {
            print_error(context, &format!("{error:#}"));
            Outcome::Failed
        })?;
        self.save_session_turn(&outcome)?;
        if self.args.record.is_some() {
            self.keep_for_record(&recording, &input, &outcome);
        }
        Ok(outcome.outcome == RunState::Completed)
    }

    /// Saves the turn to the session (atomically), or says that the session is unchanged
    /// because the turn did not answer.
    fn save_session_turn(&mut self, outcome: &RunOutcome) -> Result<(), Outcome> {
        let Some(session) = &mut self.session else {
            return Ok(());
        };
        let Some(next) = &outcome.session else {
            print_err(&format!(
                "session {}: unchanged (the turn did not answer)\n",
                session.id
            ));
            return Ok(());
        };
        save_turn(
            &session.path,
            &self.prepared.spec,
            session.state.turn_count,
            next,
            &self.environment.scrubber,
        )
        .map_err(|error| {
            print_error(self.context, &error.to_string());
            Outcome::Failed
        })?;
        session.state = next.clone();
        print_err(&format!(
            "session {}: turn {} saved\n",
            session.id, session.state.turn_count
        ));
        Ok(())
    }

    /// Keeps the turn's input, calls and people's answers for --record, each call and
    /// answer marked with the turn it belongs to, and how the turn ended.
    fn keep_for_record(&mut self, recording: &Recording, input: &Value, outcome: &RunOutcome) {
        self.last_ending = Some(expectation_of(outcome));
        let this_turn = u64::try_from(self.recorded_turns.len()).unwrap_or(0) + 1;
        let cassette = recording.cassette(Recorded::from_spec(&self.prepared.spec));
        self.recorded
            .calls
            .extend(cassette.calls.into_iter().map(|call| RecordedCall {
                turn: this_turn,
                ..call
            }));
        self.recorded
            .humans
            .extend(cassette.humans.into_iter().map(|human| RecordedHuman {
                turn: this_turn,
                ..human
            }));
        self.recorded_turns.push(TurnInput {
            input: self.environment.scrubber.value(input),
        });
    }

    /// Writes the conversation as one scenario when --record was given (a warning, and
    /// nothing written, when no turn was taken).
    fn record(self) -> Result<(), Outcome> {
        let Some(directory) = &self.args.record else {
            return Ok(());
        };
        if self.recorded_turns.is_empty() {
            print_err(&summary_line(
                self.context,
                "warning",
                "no turn was taken, so nothing was recorded",
            ));
            return Ok(());
        }
        let count = self.recorded_turns.len();
        let scenario = Scenario {
            spec: scenario_spec(&self.args.spec, directory),
            description: Some(format!(
                "recorded conversation with {} ({count} turn(s))",
                self.prepared.spec.name
            )),
            input: Value::Null,
            turns: Some(self.recorded_turns),
            expect: self.last_ending,
        };
        write_recorded(self.context, directory, scenario, self.recorded)
    }
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
