//! Tools in a sandbox (DESIGN §20), through `charter run --tool` on a spec whose one step is the tool: on canary files and listeners inside a temp directory only, a tool that reads outside its paths, writes outside its directory, follows a planted symlink, connects to a loopback listener, reads a key from its environment, forks without bound or signals Charter is refused — the run goes on, the trace names the sandbox and the error what was refused — and the same tool with the matching `sandbox` grant succeeds.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// What the probe tool does with its input `{"text": "ACTION ARG"}`: read a file, write
/// one, connect to a port on 127.0.0.1, print a variable, fork N sleepers, read its own
/// status, or signal Charter. It answers `{"text": ...}` or fails with the
/// error on stderr.
const PROBE: &str = r#"
import json, os, socket, sys, time
action, _, arg = json.load(sys.stdin)["text"].partition(" ")
def answer(text):
    print(json.dumps({"text": str(text)}))
    sys.exit(0)
def refused(error):
    print(f"{action} refused: {error}", file=sys.stderr)
    sys.exit(3)
try:
    if action == "read":
        answer(open(arg).read().strip())
    elif action == "write":
        with open(arg, "w") as out:
            out.write("written")
        answer("wrote " + arg)
    elif action == "connect":
        with socket.create_connection(("127.0.0.1", int(arg)), timeout=5) as sock:
            answer(sock.recv(64).decode())
    elif action == "env":
        # Its length, not the value: the trace is scrubbed of secrets anyway.
        value = os.environ.get(arg)
        answer("<unset>" if value is None else f"set, {len(value)} characters")
    elif action == "fork":
        started = 0
        for _ in range(int(arg)):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(3)
                os._exit(0)
            started += 1
        answer(started)
    elif action == "status":
        lines = open("/proc/self/status").read().splitlines()
        answer([line for line in lines if line.startswith("NoNewPrivs")][0])
    elif action == "signal-charter":
        # The shell that runs this is its parent; Charter is the shell's.
        status = open(f"/proc/{os.getppid()}/status").read()
        charter = int([line for line in status.splitlines() if line.startswith("PPid:")][0].split()[1])
        os.kill(charter, 0)
        answer(f"signalled {charter}")
    elif action == "home":
        path = os.path.join(os.environ["HOME"], "scratch.txt")
        with open(path, "w") as out:
            out.write("mine")
        answer(open(path).read())
except OSError as error:
    refused(error)
"#;

/// A project in a fresh temp directory whose spec's one step is the `probe` tool, declared
/// with `grant` (a `sandbox { ... }` property, or nothing), beside an `outside/` directory
/// holding the canary (outside the project).
struct Project {
    root: PathBuf,
    dir: PathBuf,
}

impl Project {
    /// Where the project `name` and its `outside/` are made.
    fn root_of(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("charter-sandbox-{}-{name}", std::process::id()))
    }

    fn new(name: &str, grant: &str) -> Project {
        let root = Project::root_of(name);
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("project");
        std::fs::create_dir_all(dir.join("specs")).unwrap_or_else(|error| panic!("{error}"));
        std::fs::create_dir_all(root.join("outside")).unwrap_or_else(|error| panic!("{error}"));
        std::fs::write(root.join("outside/canary.txt"), "CANARY-7f3a")
            .unwrap_or_else(|error| panic!("{error}"));
        std::fs::write(dir.join("probe.py"), PROBE).unwrap_or_else(|error| panic!("{error}"));
        let spec = format!(
            "spec sandboxed version \"1\"\n\
             contract Request {{ text: string }}\n\
             contract Out {{ text: string }}\n\
             tool probe {{ input: Request  output: Out  effect: external  {grant} }}\n\
             flow {{ look = tool probe(request) -> done }}\n"
        );
        std::fs::write(dir.join("specs/sandboxed.charter"), spec)
            .unwrap_or_else(|error| panic!("{error}"));
        Project { root, dir }
    }

    fn canary(&self) -> PathBuf {
        self.root.join("outside/canary.txt")
    }

    /// `charter run` of the probe on `action`, with `extra` arguments.
    fn run(&self, action: &str, extra: &[&str]) -> Ran {
        std::fs::write(
            self.dir.join("request.json"),
            json!({ "text": action }).to_string(),
        )
        .unwrap_or_else(|error| panic!("{error}"));
        let _ = std::fs::remove_file(self.dir.join("events.jsonl"));
        let output = Command::new(env!("CARGO_BIN_EXE_charter"))
            .current_dir(&self.dir)
            .args([
                "run",
                "specs/sandboxed.charter",
                "--input",
                "request.json",
                "--events",
                "events.jsonl",
                "--tool",
                "probe=python3 probe.py",
            ])
            .args(extra)
            .env("OPENAI_API_KEY", "sk-canary-key-123")
            .env("MY_SERVICE_TOKEN", "tok-canary-456")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("{error}"));
        let events: Vec<Value> = std::fs::read_to_string(self.dir.join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        Ran { output, events }
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

struct Ran {
    output: Output,
    events: Vec<Value>,
}

impl Ran {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The tool's `tool_call` event.
    fn call(&self) -> &Value {
        self.events
            .iter()
            .find(|event| event["kind"] == "tool_call")
            .unwrap_or_else(|| panic!("no tool_call event: {}", self.stderr()))
    }

    /// What the tool answered (its `text`), when it succeeded.
    fn answered(&self) -> Option<String> {
        self.call()["result"]["text"].as_str().map(str::to_string)
    }

    /// The error the tool's call ended with, as the model (or the step) is told it.
    fn error(&self) -> String {
        self.call()["result"]["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The run went on to its end: the step failed (exit 3), it did not crash.
    fn ended_refused(&self) {
        assert_eq!(self.output.status.code(), Some(3), "{}", self.stderr());
        assert!(
            self.stderr()
                .contains("outcome: failed (step_failed{look})"),
            "{}",
            self.stderr()
        );
    }
}

/// The sandbox of the tool's call, as its trace event names it.
fn sandbox_named(ran: &Ran) -> String {
    ran.call()["sandbox"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_file_outside_the_allowed_paths_is_refused_and_readable_when_granted() {
    let project = Project::new("read", "");
    let ran = project.run(&format!("read {}", project.canary().display()), &[]);
    ran.ended_refused();
    let error = ran.error();
    assert!(
        error.contains("Permission denied") && error.contains("canary.txt"),
        "the error names the refused path: {error}"
    );
    assert!(!error.contains("CANARY-7f3a"), "{error}");
    assert!(
        sandbox_named(&ran).contains("landlock"),
        "{}",
        sandbox_named(&ran)
    );

    let outside = Project::root_of("read-granted").join("outside");
    let granted = Project::new(
        "read-granted",
        &format!("sandbox {{ read: [\"{}\"] }}", outside.display()),
    );
    let ran = granted.run(&format!("read {}", granted.canary().display()), &[]);
    assert_eq!(ran.output.status.code(), Some(0), "{}", ran.stderr());
    assert_eq!(ran.answered().as_deref(), Some("CANARY-7f3a"));
}

#[test]
fn a_symlink_planted_to_a_canary_is_refused() {
    let project = Project::new("symlink", "");
    std::os::unix::fs::symlink(project.canary(), project.dir.join("innocent.txt"))
        .unwrap_or_else(|error| panic!("{error}"));
    let ran = project.run("read innocent.txt", &[]);
    ran.ended_refused();
    assert!(ran.error().contains("Permission denied"), "{}", ran.error());
}

#[test]
fn writes_go_only_to_its_own_directory_unless_granted() {
    let project = Project::new("write", "");
    for target in [
        project.dir.join("written.txt"),
        project.root.join("outside/written.txt"),
    ] {
        let ran = project.run(&format!("write {}", target.display()), &[]);
        ran.ended_refused();
        assert!(ran.error().contains("Permission denied"), "{}", ran.error());
        assert!(!target.exists(), "{} was written", target.display());
    }
    let home = project.run("home", &[]);
    assert_eq!(home.output.status.code(), Some(0), "{}", home.stderr());
    assert_eq!(home.answered().as_deref(), Some("mine"));

    let granted = Project::new("write-granted", "sandbox { write: [\"out\"] }");
    std::fs::create_dir_all(granted.dir.join("out")).unwrap_or_else(|error| panic!("{error}"));
    let target = granted.dir.join("out/report.txt");
    let ran = granted.run(&format!("write {}", target.display()), &[]);
    assert_eq!(ran.output.status.code(), Some(0), "{}", ran.stderr());
    assert_eq!(
        std::fs::read_to_string(&target).unwrap_or_default(),
        "written"
    );
}

/// A listener on loopback that answers `hello` to each connection, for `count` of them.
fn listener(count: usize) -> u16 {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|error| panic!("{error}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|error| panic!("{error}"))
        .port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().take(count).flatten() {
            use std::io::Write;
            let _ = stream.write_all(b"hello");
        }
    });
    port
}

#[test]
fn the_network_is_refused_unless_granted() {
    let port = listener(1);
    let project = Project::new("network", "");
    let ran = project.run(&format!("connect {port}"), &[]);
    ran.ended_refused();
    assert!(
        ran.error().contains("Network is unreachable"),
        "{}",
        ran.error()
    );
    assert!(sandbox_named(&ran).contains("network none"));

    let own_loopback = Project::new("network-loopback", "sandbox { network: loopback }");
    let ran = own_loopback.run(&format!("connect {port}"), &[]);
    ran.ended_refused();
    assert!(
        ran.error().contains("Connection refused"),
        "its own loopback holds no listener of the machine's: {}",
        ran.error()
    );

    let granted = Project::new("network-any", "sandbox { network: any }");
    let ran = granted.run(&format!("connect {port}"), &[]);
    assert_eq!(ran.output.status.code(), Some(0), "{}", ran.stderr());
    assert_eq!(ran.answered().as_deref(), Some("hello"));
}

#[test]
fn keys_in_the_environment_are_not_passed_unless_granted() {
    let project = Project::new("env", "");
    for name in ["OPENAI_API_KEY", "MY_SERVICE_TOKEN"] {
        let ran = project.run(&format!("env {name}"), &[]);
        assert_eq!(ran.output.status.code(), Some(0), "{}", ran.stderr());
        assert_eq!(ran.answered().as_deref(), Some("<unset>"), "{name}");
    }
    let granted = Project::new("env-granted", "sandbox { env: [MY_SERVICE_TOKEN] }");
    let ran = granted.run("env MY_SERVICE_TOKEN", &[]);
    assert_eq!(ran.answered().as_deref(), Some("set, 14 characters"));
    assert!(sandbox_named(&ran).contains("env +MY_SERVICE_TOKEN"));
    let ran = granted.run("env OPENAI_API_KEY", &[]);
    assert_eq!(ran.answered().as_deref(), Some("<unset>"));
}

#[test]
fn a_fork_without_bound_never_has_more_than_the_limit_at_once() {
    let project = Project::new("fork", "sandbox { processes: 16 }");
    let ran = project.run("fork 64", &[]);
    assert_eq!(ran.output.status.code(), Some(0), "{}", ran.stderr());
    let started: usize = ran
        .answered()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| panic!("{}", ran.stderr()));
    // The shell and the interpreter hold two of the sixteen.
    assert!(
        (1..=15).contains(&started),
        "{started} children started at once under a limit of 16"
    );
}

#[test]
fn the_sandbox_is_applied_before_exec_and_the_tool_cannot_reach_charter() {
    let project = Project::new("exec", "");
    let ran = project.run("status", &[]);
    assert_eq!(ran.answered().as_deref(), Some("NoNewPrivs:\t1"));
    let ran = project.run("signal-charter", &[]);
    ran.ended_refused();
    assert!(
        ran.error().contains("Operation not permitted"),
        "{}",
        ran.error()
    );
}

#[test]
fn no_sandbox_runs_the_tool_with_the_users_rights() {
    let project = Project::new("off", "");
    let ran = project.run(
        &format!("read {}", project.canary().display()),
        &["--no-sandbox"],
    );
    assert_eq!(ran.output.status.code(), Some(0), "{}", ran.stderr());
    assert_eq!(ran.answered().as_deref(), Some("CANARY-7f3a"));
    assert_eq!(sandbox_named(&ran), "none (--no-sandbox)");
}

#[test]
fn require_sandbox_runs_where_the_machine_has_every_piece() {
    // On this machine (CI's too) every piece is there; a machine without one refuses
    // (`Support::missing`, unit-tested in the runtime).
    let project = Project::new("required", "");
    let ran = project.run("env HOME", &["--require-sandbox"]);
    assert_eq!(ran.output.status.code(), Some(0), "{}", ran.stderr());
    assert!(
        !ran.stderr()
            .contains("warning: tools run sandboxed only in part")
    );
}

/// The probe mode reports every piece on this machine.
#[test]
fn the_probe_finds_landlock_and_namespaces_here() {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .arg("__sandbox-probe")
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    let support: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    assert!(
        support["landlock_abi"].as_u64().unwrap_or(0) >= 1,
        "{support}"
    );
    assert_eq!(support["namespaces"], true, "{support}");
    if support["root"] == true {
        assert!(support["pids_cgroup"].is_string(), "{support}");
    }
}

#[test]
fn a_tool_that_requires_its_sandbox_is_refused_under_no_sandbox() {
    let project = Project::new("required-off", "sandbox: required");
    let ran = project.run("env HOME", &["--no-sandbox"]);
    assert_eq!(ran.output.status.code(), Some(2), "{}", ran.stderr());
    assert!(
        ran.stderr()
            .contains("tool `probe` must run sandboxed (`sandbox: required` in its declaration)"),
        "{}",
        ran.stderr()
    );
    assert!(ran.events.is_empty(), "nothing ran: {:?}", ran.events);
    let sandboxed = project.run("env HOME", &[]);
    assert_eq!(
        sandboxed.output.status.code(),
        Some(0),
        "{}",
        sandboxed.stderr()
    );
}
