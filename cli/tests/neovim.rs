//! `charter lsp` in a real editor: headless Neovim (the Debian `neovim` package, 0.7) opens a copy of the lead_agent seed with one planted error and runs `tests/neovim/lsp_client.lua`, which attaches the server with `vim.lsp.start_client` + `buf_attach_client` and asserts the diagnostic (code, line), a hover, a definition, a completion and a rename.
//!
//! Without Neovim the test says so and passes, except in CI (`CI` set), where it fails:
//! `.ci/run` installs it.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Neovim's path, or `None` (with a note) when it is absent outside CI.
fn neovim() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nvim"))
            .find(|path| path.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "nvim is not installed, and CI must run the editor test (apt-get install neovim)"
        );
        eprintln!("skipped: nvim is not installed (apt-get install neovim); CI runs this test");
    }
    found
}

/// Copies the lead_agent seed (spec, prompts) into `dir` and plants one error: the plan
/// step calls `planer`, a role that does not exist. Returns the spec and the error's line.
fn planted_seed(dir: &Path) -> (PathBuf, usize) {
    let seeds = support::repository().join("specs/seeds");
    support::copy_dir(&seeds.join("lead_agent"), &dir.join("lead_agent"));
    let text = std::fs::read_to_string(seeds.join("lead_agent.charter")).expect("seed spec");
    let (index, line) = text
        .lines()
        .enumerate()
        .find(|(_, line)| line.contains("= planner(request)"))
        .expect("the seed's plan step");
    let planted = text.replacen(line, &line.replacen("planner(", "planer(", 1), 1);
    let spec = dir.join("lead_agent.charter");
    std::fs::write(&spec, planted).expect("write the spec");
    (spec, index + 1)
}

#[test]
fn neovim_shows_diagnostics_hover_definition_completion_and_rename() {
    let Some(nvim) = neovim() else { return };
    let dir = std::env::temp_dir().join(format!("charter-cli-neovim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (spec, line) = planted_seed(&dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/neovim/lsp_client.lua");
    let mut child = Command::new(nvim)
        .args(["--headless", "-u", "NONE", "-i", "NONE", "--noplugin", "-n"])
        .arg("-c")
        .arg(format!("luafile {}", script.display()))
        .env("CHARTER_BIN", env!("CARGO_BIN_EXE_charter"))
        .env("SPEC", &spec)
        .env("PLANTED_LINE", line.to_string())
        .env("PLANTED_CODE", "E002")
        .env("HOME", &dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nvim");
    // A hung editor or server fails the test instead of hanging CI.
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for nvim") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("nvim output");
            panic!(
                "nvim did not finish in 90 s:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("nvim output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        status.success() && stdout.contains("all assertions hold"),
        "the Neovim client failed ({status}):\n{stdout}\n{stderr}"
    );
}
