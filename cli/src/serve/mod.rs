//! `charter serve [--host H] [--port P] [--token T] [--model ALIAS=PROVIDER:MODEL]... [--show-output] SPEC...`: runs over HTTP (axum), watched live as server-sent events, answered (`ask`) and cancelled by any program, journaled and resumed after a restart (DESIGN §13).

mod graph;
mod guard;
mod restate;
mod runs;
mod sessions;
mod specs;
mod stream;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use serde_json::{Value, json};

use crate::driver::{LiveFlags, PreparedSpec, model_overrides, tool_box, tool_name};
use crate::loader::{compile_whole, display_path, normalize};
use crate::terminal::{Context, Outcome, print_err, print_error};
use runs::{Refusal, Runs, ServedSpec};

/// Serve runs of SPECs over HTTP, with a live event stream.
///
/// Routes: `POST /runs {"spec": NAME, "input": {...}}` starts a run and answers `{"id"}`;
/// `GET /runs/{id}/events` streams its events as server-sent events as they happen (a
/// client that connects late gets the events so far first; `Last-Event-ID` is honoured),
/// each role's output included, ending with `run_finished` and an `answer` event (each event is one JSON object whose `kind` names it, its SSE id its index);
/// `GET /runs/{id}` gives its status and answer; `POST /runs/{id}/answers
/// {"approved": true, "note": "..."}` answers a waiting `ask`; `DELETE /runs/{id}` cancels
/// it; `GET /runs` lists the runs; `GET /runs/{id}/trace.jsonl` downloads its trace. `GET
/// /specs/{name}` tells a spec's request skeleton and gates, `GET /specs/{name}/graph.svg`
/// draws its flow. For a spec with a `session`, `POST /sessions/{id}/turns {"input":
/// "..."}` takes one turn of conversation `id` (as `charter chat`, kept in
/// `.charter/sessions/`) and `GET /sessions/{id}` gives its turns. Runs are journaled in `.charter/runs/<id>/` as with
/// `charter run`, and a run the server was stopped in resumes when it starts again. Keys
/// come from the environment as for `charter run` and never reach a response or a file.
/// The server listens on 127.0.0.1 unless --host says otherwise; any other address needs
/// --token, which every request then gives as `Authorization: Bearer TOKEN` (the page at
/// `/` needs none; open it as `/#token=TOKEN`, and it sends the token itself).
///
/// --tool, --model and --show-output are `charter run`'s: a tool or a model alias applies
/// to each served spec that declares it (and must to one; a --replay spec runs the models
/// its recording names), and each model answer --show-output shows on stderr is named by
/// its run.
///
/// Any web page can send requests to 127.0.0.1, so the server refuses, on every route, a
/// request whose `Host` does not name it (a page whose DNS name was rebound to this
/// machine; give --allow-host NAME for a name of your own) or whose `Origin` is another
/// site's (403), and a `POST` that is not `Content-Type: application/json` (415).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  charter serve specs/seeds/closed_loop.charter --port 8080\n  \
                  curl -s localhost:8080/runs -d '{\"spec\": \"closed_loop\", \"input\": {...}}' -H 'content-type: application/json'\n  \
                  charter serve --replay golden/closed_loop/repair_succeeds    # no model, no key: open http://127.0.0.1:8080/"
)]
pub struct ServeArgs {
    /// The specs a client may run, named in `POST /runs` by their spec name.
    #[arg(value_name = "SPEC", required_unless_present = "replays")]
    pub specs: Vec<PathBuf>,

    /// Serve a recorded scenario's spec with no model and no key: each run of it replays
    /// the recording (its answers, latencies, timeouts and people's answers, in virtual
    /// time), and a run started with no input takes the scenario's; a recorded conversation
    /// (`turns:`) replays turn N of a session from its turn N. Repeatable.
    #[arg(long = "replay", value_name = "SCENARIO_DIR")]
    pub replays: Vec<PathBuf>,

    /// The address to listen on. Anything but a loopback address needs --token.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,

    /// Also answer to requests that name the server NAME in their `Host` header (a DNS
    /// name of this machine). By default only the address it listens on is accepted —
    /// loopback names for a loopback server — so a web page whose name is rebound to this
    /// machine cannot use it. Repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,

    /// The port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,

    /// A token every request must give as `Authorization: Bearer TOKEN` (required when
    /// --host is not a loopback address). Anyone on the machine can read a command line
    /// (`ps`): prefer --token-file or the CHARTER_TOKEN variable.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,

    /// Read the token from FILE (its first line). CHARTER_TOKEN, when set, is the token
    /// when neither --token nor --token-file is given.
    #[arg(long = "token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// How many runs may run at once; a `POST /runs` past it is answered 429 with
    /// `Retry-After` (default: twice the number of cores).
    #[arg(long = "max-runs", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_runs: Option<u32>,

    /// Runs live in Restate, not in this process: each run is started as the workflow
    /// `CharterRun` through the Restate ingress at INGRESS_URL and run by `charter
    /// worker`s (see the README's "Scale out"); this server validates inputs, starts runs
    /// and follows them (events, ask, result) with the same routes and page. Serve the
    /// specs the workers run; no model key is needed here. A run is cancelled in Restate
    /// (`restate invocations cancel`), and conversations are not served this way.
    #[arg(long, value_name = "INGRESS_URL", conflicts_with = "replays")]
    pub restate: Option<String>,

    /// `--tool`, `--model` and `--show-output`, as `charter run` takes them.
    #[command(flatten)]
    pub live: LiveFlags,
}

/// The spec a recorded scenario replays (`--replay DIR`), its recording and its input.
fn replayed_spec(context: Context, dir: &std::path::Path) -> Result<ServedSpec, Outcome> {
    use charter_runtime::formats::scenario::{Cassette, Scenario};
    let shown = display_path(dir);
    let bad = |what: &str, error: String| {
        print_error(
            context,
            &format!(
                "--replay {shown}: {what}: {}",
                charter_runtime::world::escape::one_line(&error, 300)
            ),
        );
        Outcome::Usage
    };
    let scenario = Scenario::read(&dir.join("scenario.yaml"))
        .map_err(|error| bad("bad scenario", error.to_string()))?;
    let cassette = Cassette::read(&dir.join("cassette.yaml"))
        .map_err(|error| bad("bad cassette", error.to_string()))?;
    // A conversation: a run on its own takes its first turn; `POST /sessions/{id}/turns`
    // replays turn after turn.
    let conversation = scenario.turns.is_some();
    let input = scenario
        .turns
        .as_ref()
        .and_then(|turns| turns.first())
        .map_or_else(|| scenario.input.clone(), |turn| turn.input.clone());
    let root = crate::recording::project_root(dir);
    let path = root.join(&scenario.spec);
    let spec_name = display_path(&normalize(&path));
    let text = crate::loader::read_text_in(
        &path,
        &spec_name,
        Some(&crate::loader::project_root_above(&root)),
    )
    .map_err(|error| {
        let reason = match error {
            crate::loader::ReadError::Missing => format!("`{spec_name}` does not exist"),
            crate::loader::ReadError::Other(message) => message,
        };
        bad("cannot read the scenario's spec", reason)
    })?;
    let Some(mut spec) = compile_whole(context, &spec_name, &text, &path, "served") else {
        return Err(Outcome::Failed);
    };
    charter_runtime::engine::models::apply_overrides(&mut spec, &cassette.overrides())
        .map_err(|message| bad("bad cassette", message))?;
    Ok(ServedSpec {
        name: spec.name.clone(),
        path: std::path::absolute(&path).unwrap_or(path),
        spec: Arc::new(spec),
        replay: Some(runs::Replay {
            cassette: Arc::new(cassette),
            input,
            conversation,
        }),
        overrides: std::collections::BTreeMap::new(),
    })
}

/// The most bytes of a request body (a run's input).
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

#[derive(Debug)]
struct Served {
    runs: Arc<Runs>,
    token: Option<String>,
    conversations: sessions::Conversations,
}

/// Twice the cores: runs mostly wait on models, but each has a thread and its files.
fn default_max_runs() -> usize {
    2 * std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// The token requests must give: --token, the first line of --token-file, or
/// CHARTER_TOKEN; none (or an empty one) is no token.
fn token(args: &ServeArgs, context: Context) -> Result<Option<String>, Outcome> {
    let token = match (&args.token, &args.token_file) {
        (Some(token), _) => Some(token.clone()),
        (None, Some(path)) => {
            let text = charter_runtime::world::files::read_source(path, None, 64 * 1024).map_err(
                |error| {
                    print_error(context, &error.message(&display_path(path), "."));
                    Outcome::Usage
                },
            )?;
            let text = String::from_utf8_lossy(&text).into_owned();
            Some(text.lines().next().unwrap_or_default().trim().to_string())
        }
        (None, None) => std::env::var("CHARTER_TOKEN").ok(),
    };
    Ok(token.filter(|token| !token.is_empty()))
}

pub fn run(args: &ServeArgs, context: Context) -> anyhow::Result<Outcome> {
    let token = match token(args, context) {
        Ok(token) => token,
        Err(outcome) => return Ok(outcome),
    };
    if !is_loopback(&args.host) && token.is_none() {
        print_error(
            context,
            &format!(
                "--host {} is not a loopback address: anyone who reaches it could start runs \
                 on your keys; give a token with --token-file FILE or CHARTER_TOKEN (clients \
                 send `Authorization: Bearer TOKEN`), or serve on 127.0.0.1",
                args.host
            ),
        );
        return Ok(Outcome::Usage);
    }
    let specs = match served_specs(args, context) {
        Ok(specs) => specs,
        Err(outcome) => return Ok(outcome),
    };
    let sandbox = match args.live.sandbox.sandbox() {
        Ok(sandbox) => sandbox,
        Err(message) => {
            print_error(context, &message);
            return Ok(Outcome::Usage);
        }
    };
    if !args.live.tools.is_empty() {
        crate::driver::warn_of_missing_sandbox(context, &sandbox);
    }
    let mut runs = Runs::new(
        specs,
        PathBuf::from(".charter").join("runs"),
        std::env::vars().collect(),
        (args.live.clone(), sandbox),
        args.max_runs
            .map_or_else(default_max_runs, |max| max as usize),
    );
    if let Some(url) = &args.restate {
        match restate::Front::new(url) {
            Ok(front) => runs.restate = Some(front),
            Err(message) => {
                print_error(context, &message);
                return Ok(Outcome::Usage);
            }
        }
    } else if let Err(outcome) = check_tools_and_keys(args, context, &runs) {
        return Ok(outcome);
    }
    let runs = Arc::new(runs);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(serve(args, context, runs, token))
}

/// The specs to serve: each SPEC compiled, then each --replay scenario's spec. Two specs
/// of one name are refused, since a client names the spec it runs by its name.
fn served_specs(args: &ServeArgs, context: Context) -> Result<Vec<ServedSpec>, Outcome> {
    let overrides = model_overrides(context, &args.live.models)?;
    let mut specs: Vec<ServedSpec> = Vec::new();
    let mut overridden = std::collections::BTreeSet::new();
    for path in &args.specs {
        let PreparedSpec {
            spec,
            shown_path,
            overrides: applied,
        } = PreparedSpec::compile_served(context, path, &overrides)?;
        overridden.extend(applied.keys().cloned());
        if let Some(other) = specs.iter().find(|served| served.name == spec.name) {
            print_error(
                context,
                &format!(
                    "`{shown_path}` and `{}` are both spec `{}`; a client names a spec by its name, so serve one of them",
                    display_path(&other.path),
                    spec.name
                ),
            );
            return Err(Outcome::Usage);
        }
        specs.push(ServedSpec {
            name: spec.name.clone(),
            path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
            spec: Arc::new(spec),
            replay: None,
            overrides: applied,
        });
    }
    for dir in &args.replays {
        let served = replayed_spec(context, dir)?;
        if let Some(other) = specs.iter().find(|other| other.name == served.name) {
            print_error(
                context,
                &format!(
                    "`{}` replays spec `{}`, which `{}` already serves; a client names a spec by its name, so serve it once",
                    display_path(dir),
                    served.name,
                    display_path(&other.path)
                ),
            );
            return Err(Outcome::Usage);
        }
        specs.push(served);
    }
    if let Some(alias) = overrides.keys().find(|alias| !overridden.contains(*alias)) {
        print_error(context, &unused_alias(alias, &specs));
        return Err(Outcome::Usage);
    }
    Ok(specs)
}

/// Why `--model ALIAS=...` is refused when no spec served live defines ALIAS (a `--replay`
/// spec runs the models its recording names).
fn unused_alias(alias: &str, specs: &[ServedSpec]) -> String {
    let known: std::collections::BTreeSet<&str> = specs
        .iter()
        .filter(|served| served.replay.is_none())
        .flat_map(|served| served.spec.models.keys().map(String::as_str))
        .collect();
    if known.is_empty() {
        format!(
            "--model {alias}=...: no spec is served live (a --replay scenario runs the models its recording names)"
        )
    } else {
        format!(
            "--model names alias `{alias}`, which no served spec defines (their aliases: {})",
            known.into_iter().collect::<Vec<_>>().join(", ")
        )
    }
}

/// Refuses, before anything listens, a --tool given wrong or declared by no served spec,
/// a tool box a served spec cannot have, and a key the environment lacks.
fn check_tools_and_keys(args: &ServeArgs, context: Context, runs: &Runs) -> Result<(), Outcome> {
    for given in &args.live.tools {
        let name = tool_name(given).map_err(|message| {
            print_error(context, &message);
            Outcome::Usage
        })?;
        if !runs
            .specs
            .iter()
            .any(|served| served.spec.tools.contains_key(name))
        {
            print_error(
                context,
                &format!("--tool {name}: no spec served declares a tool `{name}`"),
            );
            return Err(Outcome::Usage);
        }
    }
    for served in &runs.specs {
        if let Err(message) = tool_box(
            &served.spec,
            &runs::tools_for(&served.spec, &args.live.tools),
            &runs.sandbox,
        ) {
            print_error(context, &message);
            return Err(Outcome::Usage);
        }
    }
    let missing = runs.missing_keys();
    if !missing.is_empty() {
        for line in missing {
            print_error(context, &line);
        }
        return Err(Outcome::Usage);
    }
    Ok(())
}

async fn serve(
    args: &ServeArgs,
    context: Context,
    runs: Arc<Runs>,
    token: Option<String>,
) -> anyhow::Result<Outcome> {
    let listener = match tokio::net::TcpListener::bind((args.host.as_str(), args.port)).await {
        Ok(listener) => listener,
        Err(error) => {
            print_error(
                context,
                &format!("cannot listen on {}:{}: {error}", args.host, args.port),
            );
            return Ok(Outcome::Usage);
        }
    };
    let address = listener.local_addr()?;
    let names: Vec<&str> = runs
        .specs
        .iter()
        .map(|served| served.name.as_str())
        .collect();
    print_err(&format!(
        "charter serve: listening on http://{address} (spec{}: {}){}\n",
        if names.len() == 1 { "" } else { "s" },
        names.join(", "),
        if token.is_some() {
            "; requests need the bearer token"
        } else {
            ""
        }
    ));
    if let Some(front) = &runs.restate {
        print_err(&format!(
            "charter serve: runs live in Restate at {} (run by `charter worker`s registered there)\n",
            front.ingress
        ));
    }
    for served in &runs.specs {
        for (alias, target) in &served.overrides {
            print_err(&format!(
                "spec {}: model `{alias}` runs on {target} (--model)\n",
                served.name
            ));
        }
    }
    for line in runs.restore() {
        print_err(&format!("{line}\n"));
    }
    let served = Arc::new(Served {
        runs,
        token,
        conversations: sessions::Conversations::default(),
    });
    let router = Router::new()
        .route("/", get(page))
        .route("/runs", post(start_run).get(list_runs))
        .route("/runs/{id}", get(run_status).delete(cancel_run))
        .route("/runs/{id}/events", get(run_events))
        .route("/runs/{id}/answers", post(answer_run))
        .route("/runs/{id}/trace.jsonl", get(run_trace))
        .route("/sessions/{id}", get(sessions::session_turns))
        .route("/sessions/{id}/turns", post(sessions::take_turn))
        .route("/specs/{name}", get(spec_info))
        .route("/specs/{name}/graph.svg", get(spec_graph))
        .layer(axum::middleware::from_fn_with_state(
            served.clone(),
            authorize,
        ))
        .layer(axum::middleware::from_fn_with_state(
            guard::HostPolicy::new(&args.host, &args.allow_hosts),
            guard::guard,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(served);
    axum::serve(listener, router)
        .with_graceful_shutdown(stopped())
        .await?;
    // The runs stay journaled; their tools, each in a process group of its own, end with
    // the server rather than outlive it.
    let killed = charter_runtime::world::tools::kill_running_tools();
    let tools = match killed {
        0 => String::new(),
        1 => "; 1 running tool was stopped".to_string(),
        many => format!("; {many} running tools were stopped"),
    };
    print_err(&format!(
        "charter serve: stopped{tools}; runs that did not end resume when it starts again\n"
    ));
    Ok(Outcome::Clean)
}

/// Ctrl-C or SIGTERM. Runs are not cancelled: their journals keep them for a restart.
async fn stopped() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// `localhost`, `127.0.0.0/8` and `::1`.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Refuses a request without the bearer token (when the server has one). The page at `/`
/// holds nothing of a run and needs none; an event stream may give it as the
/// `charter_token` cookie instead, since a browser's EventSource cannot set a header (the
/// page takes the token from its URL's `#token=` fragment, which no request carries, and
/// sets the cookie `SameSite=Strict`). A token is never taken from a URL: URLs are logged.
async fn authorize(State(served): State<Arc<Served>>, request: Request, next: Next) -> Response {
    if let Some(token) = &served.token
        && request.uri().path() != "/"
    {
        let from_header = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(|given| given.as_bytes().to_vec());
        let from_cookie = (request.method() == axum::http::Method::GET
            && request.uri().path().ends_with("/events"))
        .then(|| token_cookie(request.headers()))
        .flatten();
        let given = from_header.or(from_cookie).unwrap_or_default();
        if !same(&given, token.as_bytes()) {
            let mut response = error(
                StatusCode::UNAUTHORIZED,
                "this server needs `Authorization: Bearer TOKEN` with the token it was started with",
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// The `charter_token` cookie's value, percent-decoded (the page encodes it).
fn token_cookie(headers: &axum::http::HeaderMap) -> Option<Vec<u8>> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .find_map(|pair| pair.trim().strip_prefix("charter_token="))
        .map(percent_decoded)
}

/// `text` with its `%XX` escapes (and `+`) decoded; a broken escape is kept as it is.
fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        let hex = bytes
            .get(index + 1..index + 3)
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u8::from_str_radix(digits, 16).ok());
        match (byte, hex) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                index += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                index += 1;
            }
            _ => {
                out.push(byte);
                index += 1;
            }
        }
    }
    out
}

/// Compares in time that depends only on the lengths.
fn same(given: &[u8], token: &[u8]) -> bool {
    given.len() == token.len()
        && given
            .iter()
            .zip(token)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}

fn no_run(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        &format!(
            "there is no run `{}` (GET /runs lists them)",
            charter_runtime::world::escape::one_line(id, 100)
        ),
    )
}

/// `POST /runs`: the spec named and the input given (or the replayed scenario's), checked
/// against the request contract, then the run started on a thread of its own.
async fn start_run(State(served): State<Arc<Served>>, body: axum::body::Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(problem) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the body is not JSON ({problem}); send {{\"spec\": NAME, \"input\": {{...}}}}"
                ),
            );
        }
    };
    let spec = match spec_named(&served.runs, &body) {
        Ok(spec) => spec,
        Err((status, message)) => return error(status, &message),
    };
    // A replayed spec's run started with no input takes the scenario's.
    let input = match (body.get("input"), &spec.replay) {
        (Some(input), _) => input.clone(),
        (None, Some(replay)) => replay.input.clone(),
        (None, None) => Value::Null,
    };
    if let Err(violations) = charter_runtime::engine::validate::validate_request(&spec.spec, &input)
    {
        let contract = spec.spec.request.as_deref().unwrap_or("Request");
        let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({
                "error": format!("the input does not match the request contract `{contract}`; nothing was run"),
                "violations": listed,
            })),
        )
            .into_response();
    }
    if !served.runs.try_admit() {
        let mut response = error(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "{} runs are running, as many as this server runs at once (--max-runs); try again when one has ended",
                served.runs.max_runs
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return response;
    }
    let runs = served.runs.clone();
    let spec_name = spec.name.clone();
    let started = tokio::task::spawn_blocking(move || {
        let spec = runs
            .spec(&spec_name)
            .ok_or_else(|| "the spec went".to_string())?;
        runs.start(spec, input)
    })
    .await;
    match started {
        Ok(Ok(id)) => (
            StatusCode::CREATED,
            [(header::LOCATION, format!("/runs/{id}"))],
            Json(json!({"id": id})),
        )
            .into_response(),
        Ok(Err(message)) => {
            served.runs.release();
            error(StatusCode::INTERNAL_SERVER_ERROR, &message)
        }
        Err(problem) => {
            served.runs.release();
            error(StatusCode::INTERNAL_SERVER_ERROR, &problem.to_string())
        }
    }
}

/// The served spec a `POST /runs` body names as `"spec"`, or the status and message that
/// refuse it: no name (400), or a name no spec served has (404, with the closest name).
fn spec_named<'runs>(
    runs: &'runs Runs,
    body: &Value,
) -> Result<&'runs ServedSpec, (StatusCode, String)> {
    let names: Vec<&str> = runs
        .specs
        .iter()
        .map(|served| served.name.as_str())
        .collect();
    let Some(name) = body.get("spec").and_then(Value::as_str) else {
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "give the spec to run as \"spec\": one of {}",
                names.join(", ")
            ),
        ));
    };
    runs.spec(name).ok_or_else(|| {
        let closest = names
            .iter()
            .map(|known| (strsim::levenshtein(name, known), *known))
            .min()
            .filter(|(distance, _)| *distance <= 3)
            .map(|(_, known)| format!(" (did you mean `{known}`?)"))
            .unwrap_or_default();
        (
            StatusCode::NOT_FOUND,
            format!(
                "this server does not run spec `{}`{closest}; it runs {}",
                charter_runtime::world::escape::one_line(name, 100),
                names.join(", ")
            ),
        )
    })
}

/// The live page: start a run, watch it, answer an `ask`, cancel.
async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        crate::page::live_page(),
    )
        .into_response()
}

async fn list_runs(State(served): State<Arc<Served>>) -> Response {
    let specs: Vec<&str> = served
        .runs
        .specs
        .iter()
        .map(|served| served.name.as_str())
        .collect();
    let sessions: Vec<&str> = served
        .runs
        .specs
        .iter()
        .filter(|served| served.spec.session.is_some())
        .map(|served| served.name.as_str())
        .collect();
    Json(json!({"specs": specs, "sessions": sessions, "runs": served.runs.list()})).into_response()
}

/// `GET /runs/{id}`: its status (as `GET /runs` lists it) and the input it runs on.
async fn run_status(State(served): State<Arc<Served>>, UrlPath(id): UrlPath<String>) -> Response {
    match served.runs.get(&id) {
        Some(run) => {
            let mut status = run.status();
            status["input"] = run.input.clone();
            Json(status).into_response()
        }
        None => no_run(&id),
    }
}

/// `GET /runs/{id}/trace.jsonl`: the run's trace (its `events.jsonl`) as a download.
async fn run_trace(State(served): State<Arc<Served>>, UrlPath(id): UrlPath<String>) -> Response {
    if served.runs.get(&id).is_none() {
        return no_run(&id);
    }
    let path = served.runs.runs_dir.join(&id).join("events.jsonl");
    let limit = charter_runtime::world::limits::DEFAULT_MAX_BYTES as u64;
    match charter_runtime::world::files::read_regular(&path, limit) {
        Ok(text) => (
            [
                (header::CONTENT_TYPE, "application/x-ndjson".to_string()),
                (
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"trace-{id}.jsonl\""),
                ),
            ],
            text,
        )
            .into_response(),
        Err(problem) => error(
            StatusCode::NOT_FOUND,
            &format!("run `{id}` has no trace to give: {problem}"),
        ),
    }
}

/// `GET /specs/{name}/graph.svg`: the spec's flow laid out as SVG, each step marked
/// `data-step="NAME"`.
async fn spec_graph(State(served): State<Arc<Served>>, UrlPath(name): UrlPath<String>) -> Response {
    let spec = match spec_named(&served.runs, &json!({"spec": name})) {
        Ok(spec) => spec.spec.clone(),
        Err((status, message)) => return error(status, &message),
    };
    match tokio::task::spawn_blocking(move || graph::flow_svg(&spec)).await {
        Ok(Ok(svg)) => (
            [
                (header::CONTENT_TYPE, "image/svg+xml"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            svg,
        )
            .into_response(),
        Ok(Err(message)) => error(StatusCode::INTERNAL_SERVER_ERROR, &message),
        Err(problem) => error(StatusCode::INTERNAL_SERVER_ERROR, &problem.to_string()),
    }
}

/// `GET /specs/{name}`: what the page starts a run of it from (the input box's skeleton,
/// its gates' thresholds).
async fn spec_info(State(served): State<Arc<Served>>, UrlPath(name): UrlPath<String>) -> Response {
    match spec_named(&served.runs, &json!({"spec": name})) {
        Ok(spec) => Json(specs::spec_info(spec)).into_response(),
        Err((status, message)) => error(status, &message),
    }
}

async fn cancel_run(State(served): State<Arc<Served>>, UrlPath(id): UrlPath<String>) -> Response {
    let Some(run) = served.runs.get(&id) else {
        return no_run(&id);
    };
    match run.cancel() {
        Ok(()) => (StatusCode::ACCEPTED, Json(run.status())).into_response(),
        Err(Refusal::Remote) => error(
            StatusCode::CONFLICT,
            &format!(
                "the run lives in Restate, which cancels it: `restate invocations cancel` (or its admin API) on workflow CharterRun/{id}"
            ),
        ),
        Err(_) => error(
            StatusCode::CONFLICT,
            "the run has ended; there is nothing to cancel",
        ),
    }
}

async fn answer_run(
    State(served): State<Arc<Served>>,
    UrlPath(id): UrlPath<String>,
    body: axum::body::Bytes,
) -> Response {
    let Some(run) = served.runs.get(&id) else {
        return no_run(&id);
    };
    let answer: Value = match serde_json::from_slice(&body) {
        Ok(answer) => answer,
        Err(problem) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the body is not JSON ({problem}); send {{\"approved\": true|false, \"note\": \"...\"}}"
                ),
            );
        }
    };
    if !answer.get("approved").is_some_and(Value::is_boolean)
        || answer.get("note").is_some_and(|note| !note.is_string())
    {
        return error(
            StatusCode::BAD_REQUEST,
            "an answer is {\"approved\": true|false} with an optional \"note\": \"...\"",
        );
    }
    match run.answer(answer) {
        Ok(()) => Json(run.status()).into_response(),
        Err(Refusal::Ended) => error(
            StatusCode::CONFLICT,
            "the run has ended; there is nothing to answer",
        ),
        Err(Refusal::NoQuestion | Refusal::Remote) => error(
            StatusCode::CONFLICT,
            "the run is not waiting for an answer (its status says when it is)",
        ),
    }
}

/// The run's events as server-sent events: from the one after `Last-Event-ID` (or the
/// first), then each as it happens, until the run ends.
async fn run_events(
    State(served): State<Arc<Served>>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let Some(run) = served.runs.get(&id) else {
        return no_run(&id);
    };
    let from = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<usize>().ok())
        .map_or(0, |last| last.saturating_add(1));
    let stream = run.stream.clone();
    let changes = stream.subscribe();
    let events = futures_util::stream::unfold(
        (stream, changes, from),
        |(stream, mut changes, next)| async move {
            loop {
                changes.borrow_and_update();
                match stream.get(next) {
                    Ok(Some(event)) => {
                        // Unnamed (`message`) events: a browser's EventSource sees every one;
                        // the kind is in the data.
                        let sse = Event::default().id(next.to_string()).data(event.as_ref());
                        return Some((
                            Ok::<Event, std::convert::Infallible>(sse),
                            (stream, changes, next + 1),
                        ));
                    }
                    Ok(None) => {
                        if changes.changed().await.is_err() {
                            return None;
                        }
                    }
                    Err(()) => return None,
                }
            }
        },
    );
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_told_apart() {
        for host in ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["0.0.0.0", "192.168.1.5", "example.com", "::"] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn query_tokens_are_percent_decoded() {
        assert_eq!(percent_decoded("a%2Fb%3d+c"), b"a/b= c");
        assert_eq!(percent_decoded("100%"), b"100%");
        assert_eq!(percent_decoded("%zz"), b"%zz");
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abd", b"abc"));
        assert!(!same(b"ab", b"abc"));
        assert!(!same(b"", b"abc"));
    }
}
