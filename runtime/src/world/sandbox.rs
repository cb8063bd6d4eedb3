//! Tools in a sandbox (DESIGN §20): every process Charter starts for a tool runs confined — Landlock for files, a user and network namespace for the network, a clean environment, limits on memory, CPU time and processes, a group of its own — and a tool widens it only by what its spec grants.
//!
//! How it is applied: the tool's command is not started directly but through a
//! *trampoline*, the `charter` binary itself started as `charter __sandbox-exec PLAN --
//! sh -c COMMAND`. That fresh process is single-threaded, so it can enter new namespaces;
//! it joins its pids cgroup (as root), sets its limits, enters a user namespace (and a
//! network namespace unless the network is allowed), restricts itself with Landlock
//! (which sets `no_new_privs`) and only then `exec`s the command, which inherits every
//! restriction and cannot undo any of them. All of it through safe library calls
//! (`landlock`, `nix`, `rustix`): the crate forbids `unsafe` code.
//!
//! What a tool may do by default:
//! - read (and run) only `/usr`, `/bin`, `/sbin`, `/lib*`, `/etc`, `/opt`, `/nix/store`
//!   where present, a few devices (`/dev/null`, `/dev/zero`, `/dev/random`,
//!   `/dev/urandom`), its own `/proc/self`, and the project;
//! - write only in its own fresh directory (one per call), which is its `HOME` and
//!   `TMPDIR` and is removed after the call; its working directory stays the directory
//!   Charter runs in (read-only), so a command line like `python3 tools/search.py` works
//!   as it does in a terminal;
//! - no network: a network namespace of its own with no interface up;
//! - an environment of `PATH`, `LANG`, `HOME`, `TMPDIR` and what Charter passes on
//!   (`CHARTER_ROLE`, `CHARTER_STEP`), plus the variables its grant names — never an
//!   `*_API_KEY`, `*_TOKEN` or `*_SECRET` it was not granted;
//! - at most 256 processes at once (`processes: N` widens it) — an `RLIMIT_NPROC` set
//!   inside its user namespace, which binds per sandbox; as root, whom that limit does not
//!   bind, a pids cgroup of its own — 4 GiB of address space, 300 s of CPU time, no core
//!   files.
//!
//! Where the kernel lacks a piece (no Landlock, user namespaces off, no pids cgroup as
//! root, not Linux), [`Support::missing`] names it: the command says so as a warning, or
//! refuses to run under `--require-sandbox`; nothing falls back silently. Landlock can
//! refuse only what its ABI knows (ABI 1 cannot stop a file being truncated; ABI 6 adds
//! signals and abstract sockets): the description of the sandbox in force names the ABI.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use charter_compiler::graph::{NetworkIr, SandboxIr};
use serde::{Deserialize, Serialize};

/// The argument that makes the `charter` binary the trampoline (`charter __sandbox-exec
/// PLAN -- COMMAND...`).
pub const TRAMPOLINE: &str = "__sandbox-exec";

/// The argument that makes the `charter` binary report what this machine can sandbox
/// (`charter __sandbox-probe`, one JSON line of [`Support`]).
pub const PROBE: &str = "__sandbox-probe";

/// The processes a tool may have at once unless its grant says otherwise.
pub const DEFAULT_PROCESSES: u64 = 256;

/// The address space a tool's process may map (`RLIMIT_AS`).
pub const MEMORY_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// The CPU time a tool's process may use (`RLIMIT_CPU`), in seconds.
pub const CPU_SECONDS: u64 = 300;

/// The exit status of a trampoline that could not apply the sandbox (the command never ran).
pub const REFUSED_STATUS: i32 = 126;

/// What a tool may reach over the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// Nothing: a network namespace of its own, no interface up.
    #[default]
    None,
    /// Only its own loopback: a network namespace of its own whose `lo` is up, so it can
    /// talk to servers it starts itself (never the machine's, nor any other host).
    Loopback,
    /// The machine's network, as Charter has it.
    Any,
}

impl std::fmt::Display for Network {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Network::None => "none",
            Network::Loopback => "loopback",
            Network::Any => "any",
        })
    }
}

/// What a tool's `sandbox { read, write, network, env, processes }` grants it beyond the
/// defaults, its paths absolute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grants {
    #[serde(default)]
    pub read: Vec<PathBuf>,
    #[serde(default)]
    pub write: Vec<PathBuf>,
    #[serde(default)]
    pub network: Network,
    /// Variables of Charter's environment passed on to the tool.
    #[serde(default)]
    pub env: Vec<String>,
    pub processes: u64,
}

impl Default for Grants {
    fn default() -> Self {
        Grants {
            read: Vec::new(),
            write: Vec::new(),
            network: Network::None,
            env: Vec::new(),
            processes: DEFAULT_PROCESSES,
        }
    }
}

impl Grants {
    /// What a tool's `sandbox { … }` declaration grants (none: the defaults), its paths
    /// resolved: `~` and `~/…` against `home`, a relative path against `project`.
    pub fn of(declared: Option<&SandboxIr>, project: &Path, home: Option<&Path>) -> Grants {
        let Some(declared) = declared else {
            return Grants::default();
        };
        let resolve = |written: &String| -> PathBuf {
            let path = match (written.strip_prefix('~'), home) {
                (Some(rest), Some(home)) => home.join(rest.trim_start_matches('/')),
                _ => project.join(written),
            };
            // Lexically, as the checker reads them: `a/../b` is `b`.
            let mut clean = PathBuf::new();
            for part in path.components() {
                match part {
                    std::path::Component::ParentDir => {
                        clean.pop();
                    }
                    std::path::Component::CurDir => {}
                    other => clean.push(other),
                }
            }
            clean
        };
        Grants {
            read: declared.read.iter().map(resolve).collect(),
            write: declared.write.iter().map(resolve).collect(),
            network: match declared.network {
                NetworkIr::None => Network::None,
                NetworkIr::Loopback => Network::Loopback,
                NetworkIr::Any => Network::Any,
            },
            env: declared.env.clone(),
            processes: declared.processes.unwrap_or(DEFAULT_PROCESSES),
        }
    }
}

/// How hard the sandbox is held (`--require-sandbox`, `--no-sandbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Enforcement {
    /// Sandboxed with every piece the kernel has; a missing piece is a warning.
    #[default]
    Default,
    /// A missing piece is an error: no tool runs.
    Required,
    /// Not sandboxed (`--no-sandbox`): tools run with the user's rights, as commands do in
    /// a terminal.
    Off,
}

/// What this machine can sandbox with, as the trampoline found it ([`PROBE`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Support {
    /// The Landlock ABI the kernel offers (0: none).
    pub landlock_abi: u8,
    /// A user and network namespace could be entered.
    pub namespaces: bool,
    /// Charter runs as root: `RLIMIT_NPROC` does not bind it, so the process limit needs a
    /// pids cgroup.
    pub root: bool,
    /// Where a pids cgroup of a tool's own can be made (as root), if anywhere.
    pub pids_cgroup: Option<PathBuf>,
    /// Why a piece is missing, as the probe saw it.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Support {
    /// The pieces of the sandbox this machine lacks, each named with what it leaves open.
    pub fn missing(&self) -> Vec<String> {
        let mut missing = Vec::new();
        if self.landlock_abi == 0 {
            missing.push(
                "Landlock (the kernel has none, or it is not enabled at boot): tools can read \
                 and write every file the user can"
                    .to_string(),
            );
        }
        if !self.namespaces {
            missing.push(
                "user namespaces (disabled, e.g. kernel.unprivileged_userns_clone=0): tools \
                 keep the network and the process limit is not set"
                    .to_string(),
            );
        }
        if self.root && self.pids_cgroup.is_none() {
            missing.push(
                "a pids cgroup (Charter runs as root, whom RLIMIT_NPROC does not bind, and no \
                 writable pids controller was found): the process limit does not hold"
                    .to_string(),
            );
        }
        missing.extend(self.notes.iter().cloned());
        missing
    }

    /// Probes this process's machine from inside a fresh process: the trampoline's probe
    /// mode (`launcher __sandbox-probe`).
    pub fn probe(launcher: &Path) -> Result<Support, String> {
        let output = std::process::Command::new(launcher)
            .arg(PROBE)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|error| format!("cannot start `{}`: {error}", launcher.display()))?;
        let text = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(text.trim()).map_err(|error| {
            format!(
                "`{} {PROBE}` did not report what it can sandbox ({error}): {}",
                launcher.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            )
        })
    }
}

/// What the trampoline is told to do before it runs the command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Landlock's ABI to restrict with (0: none).
    pub landlock_abi: u8,
    /// Read (and run) only these, besides the directories a program needs.
    pub read: Vec<PathBuf>,
    /// Write (and read) these.
    pub write: Vec<PathBuf>,
    pub network: Network,
    /// Enter a user namespace (and a network one, unless `network` is `any`).
    pub namespaces: bool,
    pub processes: u64,
    /// The pids cgroup to join (as root).
    pub cgroup: Option<PathBuf>,
}

/// The directories every program needs to start and run, read-only.
const SYSTEM_READ: [&str; 11] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/proc",
];

/// The devices a program may read and write.
const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The variables every tool gets from Charter's environment.
const KEPT_VARIABLES: [&str; 3] = ["PATH", "LANG", "LC_ALL"];

/// The tool sandbox of a run: how hard it is held, the program that applies it, the
/// project a tool may read, and what this machine supports.
#[derive(Clone, Debug)]
pub struct Sandbox {
    enforcement: Enforcement,
    launcher: PathBuf,
    project: PathBuf,
    support: Support,
}

/// A tool's command made ready to start sandboxed: the command, what the sandbox in force
/// is (for the trace and the tool's errors), and what is removed when the call ends (its
/// directory, its cgroup).
#[derive(Debug)]
pub struct Confined {
    pub command: tokio::process::Command,
    pub description: String,
    _dir: Option<tempfile::TempDir>,
    _cgroup: Option<Cgroup>,
}

impl Sandbox {
    /// The sandbox of a run whose tools may read `project`, applied by `launcher` (the
    /// `charter` binary). Probes the machine unless `enforcement` is off; under
    /// `Required`, a missing piece is an error naming each.
    pub fn new(
        enforcement: Enforcement,
        launcher: PathBuf,
        project: PathBuf,
    ) -> Result<Sandbox, String> {
        let support = match enforcement {
            Enforcement::Off => Support::default(),
            _ => Support::probe(&launcher)?,
        };
        let sandbox = Sandbox {
            enforcement,
            launcher,
            project,
            support,
        };
        let missing = sandbox.missing();
        if enforcement == Enforcement::Required && !missing.is_empty() {
            return Err(format!(
                "the tool sandbox is required (--require-sandbox) but this machine lacks {}",
                missing.join("; ")
            ));
        }
        Ok(sandbox)
    }

    /// A sandbox that is off (`--no-sandbox`, and the default of a library host).
    pub fn off() -> Sandbox {
        Sandbox {
            enforcement: Enforcement::Off,
            launcher: PathBuf::new(),
            project: PathBuf::new(),
            support: Support::default(),
        }
    }

    pub fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    /// What `declared` (a tool's `sandbox { … }`) grants in this sandbox's project.
    pub fn grants(&self, declared: Option<&SandboxIr>) -> Grants {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Grants::of(declared, &self.project, home.as_deref())
    }

    /// Why `tool`, whose declaration says `sandbox: required`, cannot run here: the
    /// sandbox is off, or this machine lacks a piece. `None`: it can.
    pub fn refuses_required(&self, tool: &str) -> Option<String> {
        if self.enforcement == Enforcement::Off {
            return Some(format!(
                "tool `{tool}` must run sandboxed (`sandbox: required` in its declaration), and --no-sandbox turns the sandbox off"
            ));
        }
        let missing = self.missing();
        (!missing.is_empty()).then(|| {
            format!(
                "tool `{tool}` must run sandboxed (`sandbox: required` in its declaration), and this machine lacks {}",
                missing.join("; ")
            )
        })
    }

    /// The pieces this machine lacks (none when the sandbox is off).
    pub fn missing(&self) -> Vec<String> {
        match self.enforcement {
            Enforcement::Off => Vec::new(),
            _ => self.support.missing(),
        }
    }

    /// `argv` (a program and its arguments) as a command that runs confined by `grants`,
    /// with a clean environment plus `extra` (Charter's own variables for the tool). The
    /// command has its own process group; its working directory is Charter's.
    pub fn confine(
        &self,
        argv: &[&str],
        grants: &Grants,
        extra: &[(&str, &str)],
    ) -> Result<Confined, String> {
        let Some((program, args)) = argv.split_first() else {
            return Err("no command to run".to_string());
        };
        if self.enforcement == Enforcement::Off {
            let mut command = tokio::process::Command::new(program);
            command.args(args).process_group(0);
            for (name, value) in extra {
                command.env(name, value);
            }
            return Ok(Confined {
                command,
                description: "none (--no-sandbox)".to_string(),
                _dir: None,
                _cgroup: None,
            });
        }
        let dir = tempfile::Builder::new()
            .prefix("charter-tool-")
            .tempdir()
            .map_err(|error| format!("cannot make the tool's directory: {error}"))?;
        let cgroup = match (&self.support.pids_cgroup, self.support.root) {
            (Some(parent), true) => Some(Cgroup::make(parent, grants.processes)?),
            _ => None,
        };
        let mut read = vec![self.project.clone()];
        read.extend(grants.read.iter().cloned());
        let mut write = vec![dir.path().to_path_buf()];
        write.extend(grants.write.iter().cloned());
        let plan = Plan {
            landlock_abi: self.support.landlock_abi,
            read,
            write,
            network: grants.network,
            namespaces: self.support.namespaces,
            processes: grants.processes,
            cgroup: cgroup.as_ref().map(|cgroup| cgroup.path.clone()),
        };
        let plan_json = serde_json::to_string(&plan).map_err(|error| error.to_string())?;
        let mut command = tokio::process::Command::new(&self.launcher);
        command
            .arg(TRAMPOLINE)
            .arg(plan_json)
            .arg("--")
            .arg(program)
            .args(args)
            .process_group(0)
            .env_clear();
        for name in KEPT_VARIABLES
            .iter()
            .copied()
            .chain(grants.env.iter().map(String::as_str))
        {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.env("HOME", dir.path()).env("TMPDIR", dir.path());
        for (name, value) in extra {
            command.env(name, value);
        }
        let description = self.describe(grants);
        Ok(Confined {
            command,
            description,
            _dir: Some(dir),
            _cgroup: cgroup,
        })
    }

    /// What `grants` come to here, for a trace event and a tool's error: `landlock v7,
    /// network none, 256 processes, env +GITHUB_TOKEN, writes its own directory, out/`.
    pub fn describe(&self, grants: &Grants) -> String {
        if self.enforcement == Enforcement::Off {
            return "none (--no-sandbox)".to_string();
        }
        let mut parts = Vec::new();
        match self.support.landlock_abi {
            0 => parts.push("files unrestricted (no Landlock)".to_string()),
            abi => parts.push(format!("landlock v{abi}")),
        }
        if self.support.namespaces || grants.network == Network::Any {
            parts.push(format!("network {}", grants.network));
        } else {
            parts.push("network any (no user namespaces)".to_string());
        }
        parts.push(format!("{} processes", grants.processes));
        if !grants.env.is_empty() {
            parts.push(format!("env +{}", grants.env.join(" +")));
        }
        let mut writes = vec!["its own directory".to_string()];
        writes.extend(grants.write.iter().map(|path| path.display().to_string()));
        parts.push(format!("writes {}", writes.join(", ")));
        if !grants.read.is_empty() {
            let reads: Vec<String> = grants
                .read
                .iter()
                .map(|path| path.display().to_string())
                .collect();
            parts.push(format!("reads +{}", reads.join(", ")));
        }
        parts.join(", ")
    }
}

/// A pids cgroup of one tool call (as root), removed when the call ends.
#[derive(Debug)]
struct Cgroup {
    path: PathBuf,
}

impl Cgroup {
    fn make(parent: &Path, processes: u64) -> Result<Cgroup, String> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = parent.join(format!("charter-{}-{number}", std::process::id()));
        std::fs::create_dir(&path)
            .and_then(|()| std::fs::write(path.join("pids.max"), processes.to_string()))
            .map_err(|error| format!("cannot make the pids cgroup {}: {error}", path.display()))?;
        Ok(Cgroup { path })
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // The group is killed before this (the call's process group ends with it); a
        // cgroup is removed once its last process has gone, which may take a moment.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// The trampoline's and the probe's entry: when `args` (the process's, program first)
/// ask for one of them, runs it and never returns; otherwise returns. Called first thing
/// in `charter`'s `main`, while the process has one thread.
pub fn enter_if_asked(args: &[OsString]) {
    match args.get(1).and_then(|arg| arg.to_str()) {
        Some(TRAMPOLINE) => {
            let error = trampoline(&args[2..]);
            eprintln!("charter: the tool sandbox could not be applied: {error}");
            std::process::exit(REFUSED_STATUS);
        }
        Some(PROBE) => {
            let support = probe_here();
            println!("{}", serde_json::to_string(&support).unwrap_or_default());
            std::process::exit(0);
        }
        _ => {}
    }
}

/// `PLAN -- PROGRAM ARGS...`: applies the plan to this process, then becomes the program.
/// Returns only on an error.
fn trampoline(args: &[OsString]) -> String {
    let Some(plan) = args.first().and_then(|plan| plan.to_str()) else {
        return "no plan".to_string();
    };
    let plan: Plan = match serde_json::from_str(plan) {
        Ok(plan) => plan,
        Err(error) => return format!("a bad plan: {error}"),
    };
    let Some(program) = args
        .get(2)
        .filter(|_| args.get(1).is_some_and(|dash| dash == "--"))
    else {
        return "no command after `--`".to_string();
    };
    if let Err(error) = confine_this_process(&plan) {
        return error;
    }
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new(program).args(&args[3..]).exec();
    format!("cannot run `{}`: {error}", program.to_string_lossy())
}

/// The plan, applied to this process in the order each step needs: the cgroup and the
/// limits while it may still set them, the namespaces, then Landlock last (it forbids
/// what the steps before it do).
fn confine_this_process(plan: &Plan) -> Result<(), String> {
    if let Some(cgroup) = &plan.cgroup {
        std::fs::write(cgroup.join("cgroup.procs"), "0")
            .map_err(|error| format!("cannot join the pids cgroup: {error}"))?;
    }
    set_limit(rustix::process::Resource::As, MEMORY_BYTES)?;
    set_limit(rustix::process::Resource::Cpu, CPU_SECONDS)?;
    set_limit(rustix::process::Resource::Core, 0)?;
    if plan.namespaces {
        enter_namespaces(plan.network)?;
    }
    // Inside its own user namespace the limit counts this sandbox's processes only (as
    // root it does not bind: the cgroup above does).
    set_limit(rustix::process::Resource::Nproc, plan.processes)?;
    if plan.landlock_abi > 0 {
        restrict_files(plan)?;
    }
    Ok(())
}

fn set_limit(resource: rustix::process::Resource, value: u64) -> Result<(), String> {
    let limit = rustix::process::Rlimit {
        current: Some(value),
        maximum: Some(value),
    };
    rustix::process::setrlimit(resource, limit)
        .map_err(|error| format!("cannot limit {resource:?} to {value}: {error}"))
}

/// A user namespace (the same uid and gid inside), and a network namespace of its own
/// unless the network is allowed; with `loopback`, its `lo` up.
fn enter_namespaces(network: Network) -> Result<(), String> {
    use nix::sched::{CloneFlags, unshare};
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if network != Network::Any {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|error| format!("cannot enter a user namespace: {error}"))?;
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|error| format!("cannot write {file}: {error}"))
    };
    // The same ids inside; with `loopback`, root inside (its own namespaces' root only,
    // mapped to the user outside), which bringing `lo` up through `ip` needs.
    let (inner_uid, inner_gid) = match network {
        Network::Loopback => (0, 0),
        _ => (uid, gid),
    };
    write("/proc/self/setgroups", "deny".to_string())?;
    write("/proc/self/uid_map", format!("{inner_uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{inner_gid} {gid} 1\n"))?;
    if network == Network::Loopback {
        loopback_up()?;
    }
    Ok(())
}

/// Brings up `lo` in this process's own network namespace, through the `ip` program when
/// the machine has one (`iproute2`).
fn loopback_up() -> Result<(), String> {
    let status = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .iter()
        .find(|path| Path::new(path).is_file())
        .ok_or("network: loopback needs the `ip` program (iproute2) to bring up `lo`")?;
    let result = std::process::Command::new(status)
        .args(["link", "set", "lo", "up"])
        .status()
        .map_err(|error| format!("cannot run `ip link set lo up`: {error}"))?;
    if result.success() {
        Ok(())
    } else {
        Err(format!("`ip link set lo up` ended with {result}"))
    }
}

/// Restricts this process and its children to the plan's files with Landlock.
fn restrict_files(plan: &Plan) -> Result<(), String> {
    use landlock::{
        ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
    };
    let abi = abi_of(plan.landlock_abi);
    let failed = |error: &dyn std::fmt::Display| format!("Landlock: {error}");
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(|error| failed(&error))?;
    if abi >= ABI::V6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|error| failed(&error))?;
    }
    let read = AccessFs::from_read(abi);
    let mut rules: Vec<(&Path, landlock::BitFlags<AccessFs>)> = Vec::new();
    rules.extend(SYSTEM_READ.iter().map(|path| (Path::new(path), read)));
    let device = AccessFs::ReadFile | AccessFs::WriteFile;
    rules.extend(DEVICES.iter().map(|path| (Path::new(path), device)));
    rules.extend(plan.read.iter().map(|path| (path.as_path(), read)));
    let all = AccessFs::from_all(abi);
    rules.extend(plan.write.iter().map(|path| (path.as_path(), all)));
    let mut created = ruleset.create().map_err(|error| failed(&error))?;
    for (path, access) in rules {
        // A path that does not exist here (`/lib32`, a granted directory not made yet)
        // grants nothing.
        let Ok(fd) = PathFd::new(path) else {
            continue;
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|error| failed(&error))?;
    }
    created.restrict_self().map_err(|error| failed(&error))?;
    Ok(())
}

/// What this process's machine supports, tried for real (this process is the fresh
/// single-threaded probe, which exits after it: entering namespaces and restricting itself
/// are its own business). The cgroup first, Landlock last: each step limits the next.
fn probe_here() -> Support {
    let root = rustix::process::getuid().is_root();
    let mut notes = Vec::new();
    let pids_cgroup = if root { pids_cgroup() } else { None };
    let namespaces = match enter_namespaces(Network::None) {
        Ok(()) => true,
        Err(error) => {
            if !error.contains("user namespace") {
                notes.push(format!("user namespaces: {error}"));
            }
            false
        }
    };
    Support {
        landlock_abi: landlock_abi(),
        namespaces,
        root,
        pids_cgroup,
        notes,
    }
}

/// The Landlock ABI the kernel offers and this build knows (0: none), as restricting this
/// process (with a ruleset that denies nothing yet) reports it.
fn landlock_abi() -> u8 {
    use landlock::{ABI, Access, AccessFs, LandlockStatus, Ruleset, RulesetAttr};
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| ruleset.restrict_self());
    match status.map(|status| status.landlock) {
        Ok(LandlockStatus::Available { effective_abi, .. }) => abi_number(effective_abi),
        _ => 0,
    }
}

/// The ABI's number (`ABI::V7` is 7).
fn abi_number(abi: landlock::ABI) -> u8 {
    use landlock::ABI;
    [
        ABI::V1,
        ABI::V2,
        ABI::V3,
        ABI::V4,
        ABI::V5,
        ABI::V6,
        ABI::V7,
    ]
    .iter()
    .rposition(|known| abi >= *known)
    .map_or(0, |index| u8::try_from(index + 1).unwrap_or(0))
}

/// The crate's ABI numbered `number` (the newest it knows past that).
fn abi_of(number: u8) -> landlock::ABI {
    use landlock::ABI;
    match number {
        0 | 1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    }
}

/// A writable pids controller to make a tool's cgroup in: cgroup v2's own cgroup (when
/// `pids` is among its controllers), else v1's pids hierarchy.
fn pids_cgroup() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut candidates = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|name| name == "pids") {
            candidates.push(Path::new("/sys/fs/cgroup/pids").join(path));
        } else if controllers.is_empty() {
            let unified = Path::new("/sys/fs/cgroup").join(path);
            let has_pids = std::fs::read_to_string(unified.join("cgroup.controllers"))
                .is_ok_and(|list| list.split_whitespace().any(|name| name == "pids"));
            if has_pids {
                candidates.push(unified);
            }
        }
    }
    candidates.into_iter().find(|dir| {
        let probe = dir.join(format!("charter-probe-{}", std::process::id()));
        let made = std::fs::create_dir(&probe).is_ok();
        let usable = made && probe.join("pids.max").is_file();
        if made {
            let _ = std::fs::remove_dir(&probe);
        }
        usable
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_without_a_piece_names_it() {
        let support = Support {
            landlock_abi: 0,
            namespaces: false,
            root: true,
            pids_cgroup: None,
            notes: Vec::new(),
        };
        let missing = support.missing().join("\n");
        assert!(missing.contains("Landlock"), "{missing}");
        assert!(missing.contains("user namespaces"), "{missing}");
        assert!(missing.contains("pids cgroup"), "{missing}");
        let full = Support {
            landlock_abi: 7,
            namespaces: true,
            root: false,
            pids_cgroup: None,
            notes: Vec::new(),
        };
        assert!(full.missing().is_empty());
    }

    #[test]
    fn declared_paths_are_resolved_against_the_project_and_home() {
        let declared = SandboxIr {
            read: vec![
                "data/".into(),
                "~/.cache/pages".into(),
                "/opt/models".into(),
            ],
            write: vec!["out/../out/reports".into()],
            network: NetworkIr::Loopback,
            env: vec!["GITHUB_TOKEN".into()],
            processes: Some(64),
            required: false,
        };
        let grants = Grants::of(
            Some(&declared),
            Path::new("/work/project"),
            Some(Path::new("/home/ada")),
        );
        assert_eq!(
            grants.read,
            [
                PathBuf::from("/work/project/data"),
                PathBuf::from("/home/ada/.cache/pages"),
                PathBuf::from("/opt/models"),
            ]
        );
        assert_eq!(grants.write, [PathBuf::from("/work/project/out/reports")]);
        assert_eq!(grants.network, Network::Loopback);
        assert_eq!(grants.processes, 64);
        assert_eq!(Grants::of(None, Path::new("/p"), None), Grants::default());
    }

    #[test]
    fn a_sandbox_that_is_off_runs_the_command_as_it_is() {
        let sandbox = Sandbox::off();
        let confined = sandbox
            .confine(&["sh", "-c", "true"], &Grants::default(), &[])
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(confined.command.as_std().get_program(), "sh");
        assert!(confined.description.contains("--no-sandbox"));
    }

    #[test]
    fn the_trampoline_refuses_a_bad_plan_or_no_command() {
        assert!(trampoline(&["{".into()]).contains("bad plan"));
        let plan = serde_json::to_string(&Plan {
            landlock_abi: 0,
            read: Vec::new(),
            write: Vec::new(),
            network: Network::Any,
            namespaces: false,
            processes: 10,
            cgroup: None,
        })
        .unwrap_or_default();
        assert!(trampoline(&[plan.into()]).contains("no command"));
    }
}
