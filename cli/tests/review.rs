//! `charter review` in a real terminal (tmux): `charter verify` leaves `trace.snap.new` beside each changed or new snapshot, and review shows each diff and takes `a` (accept), `r` (reject) and `s` (skip) typed at the keyboard; verify also shows its progress there.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::{Duration, Instant};
use support::{copy_dir, repository};

/// A project with the closed_loop seed and three of its scenarios: one whose recorded
/// score changed, two whose snapshots do not exist yet.
fn project(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("review-terminal")
        .join(name);
    let _ = std::fs::remove_dir_all(&root);
    let repo = repository();
    copy_dir(
        &repo.join("specs/seeds/closed_loop"),
        &root.join("specs/seeds/closed_loop"),
    );
    std::fs::copy(
        repo.join("specs/seeds/closed_loop.charter"),
        root.join("specs/seeds/closed_loop.charter"),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    for name in ["happy_path", "malformed_output", "timeout_then_recovery"] {
        copy_dir(
            &repo.join("golden/closed_loop").join(name),
            &root.join("golden/closed_loop").join(name),
        );
    }
    let cassette = root.join("golden/closed_loop/happy_path/cassette.yaml");
    let text = std::fs::read_to_string(&cassette).unwrap_or_default();
    assert!(text.contains("relevance: 9"));
    std::fs::write(&cassette, text.replacen("relevance: 9", "relevance: 7", 1))
        .unwrap_or_else(|error| panic!("{error}"));
    for name in ["malformed_output", "timeout_then_recovery"] {
        std::fs::remove_file(
            root.join("golden/closed_loop")
                .join(name)
                .join("trace.snap"),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    }
    root
}

/// A tmux session running one shell command in a 200x60 terminal; killed when dropped.
struct Terminal {
    name: String,
}

impl Terminal {
    fn start(name: &str, directory: &Path, command: &str) -> Terminal {
        let name = format!("{name}-{}", std::process::id());
        let script = format!(
            "cd '{}' && {command}; echo \"EXIT=$?\"; sleep 600",
            directory.display()
        );
        // The tmux server exits with its last session; a session started while it is
        // exiting fails, so a failed start is tried again.
        let started = (0..5).any(|attempt| {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200));
            }
            Command::new("tmux")
                .args(["new-session", "-d", "-s", &name, "-x", "200", "-y", "60"])
                .arg(&script)
                .env_remove("NO_COLOR")
                .env_remove("TMUX")
                .status()
                .unwrap_or_else(|error| panic!("this test needs tmux on PATH: {error}"))
                .success()
        });
        assert!(started, "tmux new-session failed");
        Terminal { name }
    }

    /// What the terminal shows (its scrollback included).
    fn screen(&self) -> String {
        let output = Command::new("tmux")
            .args(["capture-pane", "-p", "-J", "-S", "-2000", "-t", &self.name])
            .output()
            .unwrap_or_else(|error| panic!("{error}"));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Waits until the screen shows `text` `times` times (bounded, so a hang fails the
    /// test instead of blocking it; no assertion is made on how long it took).
    fn wait_for(&self, text: &str, times: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if screen.matches(text).count() >= times {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the terminal never showed {text:?} {times} time(s):\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &str) {
        let status = Command::new("tmux")
            .args(["send-keys", "-t", &self.name, keys, "Enter"])
            .status()
            .unwrap_or_else(|error| panic!("{error}"));
        assert!(status.success());
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

#[test]
fn verify_leaves_pending_snapshots_and_review_accepts_rejects_and_skips_them_at_the_keyboard() {
    let root = project("review");
    let charter = env!("CARGO_BIN_EXE_charter");
    let scenario = |name: &str, file: &str| root.join("golden/closed_loop").join(name).join(file);
    let snapshot_before = std::fs::read_to_string(scenario("happy_path", "trace.snap"))
        .unwrap_or_else(|error| panic!("{error}"));

    // verify in the terminal: progress, then what failed, with a coloured field diff.
    let verify = Terminal::start("charter-verify", &root, &format!("'{charter}' verify"));
    let screen = verify.wait_for("EXIT=", 1);
    assert!(screen.contains("EXIT=1"), "{screen}");
    assert!(
        screen.contains("    gate.score: 8.666666666666666 -> 8.0"),
        "{screen}"
    );
    assert!(screen.contains("3 scenarios: 2 new, 1 changed"), "{screen}");
    drop(verify);
    assert_eq!(
        std::fs::read_to_string(scenario("happy_path", "trace.snap")).unwrap_or_default(),
        snapshot_before,
        "verify leaves trace.snap alone"
    );
    for name in ["happy_path", "malformed_output", "timeout_then_recovery"] {
        assert!(scenario(name, "trace.snap.new").is_file(), "{name}");
    }
    let pending_happy =
        std::fs::read_to_string(scenario("happy_path", "trace.snap.new")).unwrap_or_default();

    // review: accept the first, reject the second, skip the third.
    let review = Terminal::start("charter-review", &root, &format!("'{charter}' review"));
    let screen = review.wait_for("[a]ccept  [A]ccept all  [r]eject  [s]kip >", 1);
    assert!(
        screen.contains("[1/3] closed_loop/happy_path (changed)"),
        "{screen}"
    );
    assert!(
        screen.contains("    gate.score: 8.666666666666666 -> 8.0"),
        "{screen}"
    );
    review.keys("x");
    review.wait_for("`x`: answer a, A, r or s", 1);
    review.keys("a");
    let screen = review.wait_for("[a]ccept  [A]ccept all  [r]eject  [s]kip >", 3);
    assert!(
        screen.contains("accepted closed_loop/happy_path"),
        "{screen}"
    );
    assert!(
        screen.contains("[2/3] closed_loop/malformed_output (new)"),
        "{screen}"
    );
    assert!(
        screen.contains("+ event 0 (run_started, round 0, t_ms 0): {\"input\":"),
        "{screen}"
    );
    review.keys("r");
    review.wait_for("[3/3] closed_loop/timeout_then_recovery (new)", 1);
    review.keys("s");
    let screen = review.wait_for("EXIT=", 1);
    assert!(
        screen.contains("1 accepted, 1 rejected, 1 skipped"),
        "{screen}"
    );
    assert!(screen.contains("EXIT=1"), "something was skipped: {screen}");
    drop(review);

    assert_eq!(
        std::fs::read_to_string(scenario("happy_path", "trace.snap")).unwrap_or_default(),
        pending_happy,
        "accepted: the pending snapshot became trace.snap"
    );
    assert!(!scenario("happy_path", "trace.snap.new").exists());
    assert!(
        !scenario("malformed_output", "trace.snap.new").exists(),
        "rejected"
    );
    assert!(
        !scenario("malformed_output", "trace.snap").exists(),
        "rejected"
    );
    assert!(
        scenario("timeout_then_recovery", "trace.snap.new").exists(),
        "skipped"
    );

    // What was accepted now passes; verify reports the rest as before.
    let output = Command::new(charter)
        .args(["verify", "--filter", "happy_path"])
        .current_dir(&root)
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn verify_draws_progress_on_a_terminal_and_none_in_a_pipe() {
    let root = project("progress");
    let charter = env!("CARGO_BIN_EXE_charter");
    // `script` gives verify a terminal and passes what it wrote through, bytes as they are.
    let output = Command::new("script")
        .args([
            "-q",
            "-e",
            "-c",
            &format!("'{charter}' verify"),
            "/dev/null",
        ])
        .current_dir(&root)
        .env_remove("NO_COLOR")
        .output()
        .unwrap_or_else(|error| panic!("this test needs util-linux `script`: {error}"));
    let text = String::from_utf8_lossy(&output.stdout);
    for done in [
        "[1/3] closed_loop/",
        "[2/3] closed_loop/",
        "[3/3] closed_loop/",
    ] {
        assert!(
            text.contains(&format!("\r\u{1b}[2K{done}")),
            "{done}: {text:?}"
        );
    }
    let piped = Command::new(charter)
        .arg("verify")
        .current_dir(&root)
        .env_remove("NO_COLOR")
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&piped.stdout),
        String::from_utf8_lossy(&piped.stderr)
    );
    assert!(!all.contains("[1/3]") && !all.contains('\u{1b}'), "{all}");
}

#[test]
fn answering_capital_a_accepts_this_and_everything_after_it() {
    let root = project("accept-all");
    let charter = env!("CARGO_BIN_EXE_charter");
    let mut review = Command::new(charter)
        .arg("review")
        .arg(&root)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{error}"));
    if let Some(mut stdin) = review.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(b"A\n");
    }
    let output = review
        .wait_with_output()
        .unwrap_or_else(|error| panic!("{error}"));
    let shown = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("3 accepted, 0 rejected, 0 skipped"),
        "{shown}"
    );
    let prompts = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        prompts.matches("[A]ccept all").count(),
        1,
        "asked once: {prompts}"
    );
    let verified = Command::new(charter)
        .arg("verify")
        .arg(&root)
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        verified.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
}
