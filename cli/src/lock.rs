//! `charter lock [PATH...] [--check]`: start every MCP server the project's specs declare, ask each what it offers (`initialize`, every page of `tools/list`), and write `charter.lock` at the project root — or, with `--check`, say whether the lock still matches (a CI job).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use charter_compiler::CompiledSpec;
use charter_compiler::graph::{McpServerIr, McpTransportIr, SecretOrTextIr};
use charter_runtime::formats::lock::{LOCK_FILE, Lock};
use charter_runtime::world::mcp::{DEFAULT_TIMEOUT, Endpoint, ServerConfig, drift, lock_server};
use charter_runtime::world::sandbox::{Network, Sandbox};
use clap::Args;

use crate::driver::SandboxFlags;
use crate::loader::{
    FsLoader, collect_specs, compile_whole_with, display_path, project_root_above, project_specs,
    read_text,
};
use crate::recording::shown_from_here;
use crate::terminal::{Context, Outcome, count, print_err, print_error, summary_line};

/// Lock the MCP servers the specs declare: start (or reach) each, ask what it offers, and
/// write `charter.lock` at the project root.
///
/// The lock holds, per server, its command or URL, protocol version, name and version, and
/// per tool its description, input and output schemas, annotations and a hash. `charter
/// check` reads it to check tool names and permits offline, replays need no server, and a
/// run refuses a server that no longer matches it. Commit it and review its diffs.
///
/// Each server runs sandboxed as at run time (its `sandbox { … }`), with the network
/// allowed: `charter lock` runs by hand, and a server started through `npx` or `uvx` may
/// need to fetch its package the first time.
///
/// Exit status: 0 the lock was written (or, with --check, matches); 1 a server could not be
/// locked (nothing is written), or with --check the lock differs (the diff is shown) or is
/// missing; 2 a usage error or a spec with errors.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: charter lock                 # every server of the project's specs\n         charter lock --check         # in CI: exit 1 with a diff when a server changed"
)]
pub struct LockArgs {
    /// Spec files or directories (default: the project in the current directory).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Change nothing: exit 1 and show a diff when a server no longer matches the lock.
    #[arg(long)]
    pub check: bool,

    #[command(flatten)]
    pub sandbox: SandboxFlags,
}

pub fn run(args: &LockArgs, context: Context) -> anyhow::Result<Outcome> {
    let servers = match declared_servers(args, context) {
        Ok(servers) => servers,
        Err(outcome) => return Ok(outcome),
    };
    let root = project_root_above(&std::env::current_dir().unwrap_or_default());
    let lock_path = root.join(LOCK_FILE);
    let sandbox = match args.sandbox.sandbox() {
        Ok(sandbox) => sandbox,
        Err(message) => {
            print_error(context, &message);
            return Ok(Outcome::Usage);
        }
    };
    if !servers.is_empty() {
        crate::driver::warn_of_missing_sandbox(context, &sandbox);
    }
    let lock = match lock_all(context, &servers, &sandbox) {
        Ok(lock) => lock,
        Err(outcome) => return Ok(outcome),
    };
    if args.check {
        return check_lock(context, &lock_path, &lock);
    }
    write_lock(context, &lock_path, &lock)
}

/// Every server the specs declare, by name; a name two specs declare differently is a
/// usage error.
fn declared_servers(
    args: &LockArgs,
    context: Context,
) -> Result<BTreeMap<String, McpServerIr>, Outcome> {
    let paths = if args.paths.is_empty() {
        project_specs()
    } else {
        collect_specs(&args.paths)
    };
    let paths = paths.map_err(|problems| {
        for problem in problems {
            print_error(context, &problem);
        }
        Outcome::Usage
    })?;
    let mut servers: BTreeMap<String, (McpServerIr, String)> = BTreeMap::new();
    for path in paths {
        let shown = display_path(&path);
        let text = read_text(&path, &shown).map_err(|error| {
            print_error(context, &format!("cannot read `{shown}`: {error:?}"));
            Outcome::Usage
        })?;
        // The lock is what is being written: the specs are compiled without it.
        let loader = FsLoader::for_spec(&path).without_lock();
        let Some(spec) = compile_whole_with(context, &shown, &text, &loader, "locked") else {
            return Err(Outcome::Usage);
        };
        add_servers(context, &spec, &shown, &mut servers)?;
    }
    Ok(servers
        .into_iter()
        .map(|(name, (server, _))| (name, server))
        .collect())
}

fn add_servers(
    context: Context,
    spec: &CompiledSpec,
    shown: &str,
    servers: &mut BTreeMap<String, (McpServerIr, String)>,
) -> Result<(), Outcome> {
    for (name, server) in &spec.mcp {
        match servers.get(name) {
            Some((known, first)) if known != server => {
                print_error(
                    context,
                    &format!(
                        "MCP server `{name}` is declared differently in `{first}` and `{shown}`; one lock holds one server of a name: give them the same declaration or different names"
                    ),
                );
                return Err(Outcome::Usage);
            }
            Some(_) => {}
            None => {
                servers.insert(name.clone(), (server.clone(), shown.to_string()));
            }
        }
    }
    Ok(())
}

/// Locks every server in turn (each reported as it ends); nothing when one fails.
fn lock_all(
    context: Context,
    servers: &BTreeMap<String, McpServerIr>,
    sandbox: &Arc<Sandbox>,
) -> Result<Lock, Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            print_error(context, &format!("cannot start the async runtime: {error}"));
            Outcome::Failed
        })?;
    let mut locked = BTreeMap::new();
    let mut failed = false;
    for (name, server) in servers {
        let config = match server_config(name, server, sandbox) {
            Ok(config) => config,
            Err(message) => {
                print_error(context, &message);
                failed = true;
                continue;
            }
        };
        print_err(&format!(
            "locking `{name}` ({})…\n",
            where_it_is(&config.endpoint)
        ));
        match runtime.block_on(lock_server(&config, sandbox)) {
            Ok(server) => {
                print_err(&format!(
                    "  {} {} ({}), protocol {}: {}\n",
                    server.server.name,
                    server.server.version,
                    name,
                    server.protocol_version,
                    count(server.tools.len(), "tool")
                ));
                locked.insert(name.clone(), server);
            }
            Err(error) => {
                print_error(context, &error.to_string());
                failed = true;
            }
        }
    }
    if failed {
        print_error(
            context,
            &format!(
                "nothing was written: every server must answer for `{LOCK_FILE}` to be written"
            ),
        );
        return Err(Outcome::Failed);
    }
    Ok(Lock::new(locked))
}

/// How a declared server is started or reached, its `env("…")` values read now. The
/// network is allowed while locking (a first `npx` fetches its package).
fn server_config(
    name: &str,
    server: &McpServerIr,
    sandbox: &Sandbox,
) -> Result<ServerConfig, String> {
    let read = |pairs: &BTreeMap<String, SecretOrTextIr>| -> Result<Vec<(String, String)>, String> {
        pairs
            .iter()
            .map(|(key, value)| match value {
                SecretOrTextIr::Text(text) => Ok((key.clone(), text.clone())),
                SecretOrTextIr::Env(variable) => std::env::var(variable)
                    .map(|value| (key.clone(), value))
                    .map_err(|_| {
                        format!(
                            "MCP server `{name}`: `{key}` is read from the environment variable {variable}, which is not set"
                        )
                    }),
            })
            .collect()
    };
    let endpoint = match &server.transport {
        McpTransportIr::Command { argv } => Endpoint::Command {
            argv: argv.clone(),
            env: read(&server.env)?,
        },
        McpTransportIr::Url { url, headers } => Endpoint::Url {
            url: url.clone(),
            headers: read(headers)?,
        },
    };
    let mut grants = sandbox.grants(server.sandbox.as_ref());
    grants.network = Network::Any;
    Ok(ServerConfig {
        name: name.to_string(),
        endpoint,
        timeout: server
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        grants,
    })
}

/// `npx @modelcontextprotocol/server-filesystem data` or the URL, for the progress line.
fn where_it_is(endpoint: &Endpoint) -> String {
    match endpoint {
        Endpoint::Command { argv, .. } => argv.join(" "),
        Endpoint::Url { url, .. } => url.clone(),
    }
}

/// Writes the lock atomically and says what it holds.
fn write_lock(context: Context, path: &Path, lock: &Lock) -> anyhow::Result<Outcome> {
    let text = match lock.to_yaml() {
        Ok(text) => text,
        Err(error) => {
            print_error(context, &error.to_string());
            return Ok(Outcome::Failed);
        }
    };
    if let Err(error) = charter_runtime::world::files::write_atomically(path, text.as_bytes()) {
        print_error(
            context,
            &format!("cannot write `{}`: {error}", shown_from_here(path)),
        );
        return Ok(Outcome::Failed);
    }
    let tools: usize = lock.servers.values().map(|server| server.tools.len()).sum();
    print_err(&format!(
        "wrote {}: {}, {}\n",
        shown_from_here(path),
        count(lock.servers.len(), "server"),
        count(tools, "tool")
    ));
    Ok(Outcome::Clean)
}

/// `--check`: the lock on disk against what the servers offer now, as a diff.
fn check_lock(context: Context, path: &Path, lock: &Lock) -> anyhow::Result<Outcome> {
    let now = match lock.to_yaml() {
        Ok(text) => text,
        Err(error) => {
            print_error(context, &error.to_string());
            return Ok(Outcome::Failed);
        }
    };
    let kept = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(_) if lock.servers.is_empty() => {
            print_err("no MCP server is declared: nothing to lock\n");
            return Ok(Outcome::Clean);
        }
        Err(_) => {
            print_error(
                context,
                &format!(
                    "there is no `{}`: run `charter lock` and commit it",
                    shown_from_here(path)
                ),
            );
            return Ok(Outcome::Failed);
        }
    };
    if kept == now {
        print_err(&format!("{} matches every server\n", shown_from_here(path)));
        return Ok(Outcome::Clean);
    }
    match Lock::from_yaml(LOCK_FILE, &kept) {
        Ok(kept_lock) => {
            for (name, live) in &lock.servers {
                match kept_lock.servers.get(name) {
                    Some(locked) => {
                        for line in drift(locked, live) {
                            print_err(&format!("`{name}`: {line}\n"));
                        }
                    }
                    None => print_err(&format!("`{name}`: not in the lock\n")),
                }
            }
            for name in kept_lock.servers.keys() {
                if !lock.servers.contains_key(name) {
                    print_err(&format!("`{name}`: in the lock, but no spec declares it\n"));
                }
            }
        }
        Err(error) => print_err(&summary_line(
            context,
            "error",
            &format!("the kept lock cannot be read: {error}"),
        )),
    }
    let diff = similar::TextDiff::from_lines(&kept, &now)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{} (kept)", shown_from_here(path)),
            "the servers now",
        )
        .to_string();
    print_err(&diff);
    print_err(&summary_line(
        context,
        "error",
        &format!(
            "{} no longer matches the servers: review the diff above, then run `charter lock` and commit it",
            shown_from_here(path)
        ),
    ));
    Ok(Outcome::Failed)
}
