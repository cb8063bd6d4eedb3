//! The tool sandbox's cost (DESIGN §20): the median start-to-answer time of one tool command run unsandboxed and run through the sandbox (the `charter` binary beside this one as the trampoline), over 200 calls each.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use charter_runtime::world::sandbox::{Enforcement, Grants, Sandbox};
use charter_runtime::world::tools::{CommandTool, Tool};
use serde_json::json;

use crate::measure::{median, show};

/// Calls timed of each kind.
pub const CALLS: usize = 200;

/// The command every call runs: reads its arguments, answers JSON.
const COMMAND: &str = r#"cat >/dev/null; echo '{"ok": true}'"#;

/// Times [`CALLS`] calls of a tool command without the sandbox and through it, with the
/// `charter` binary at `charter` as the trampoline, and prints both medians and the cost.
pub fn bench(root: &Path, charter: &Path) -> Result<(), String> {
    let sandbox = Sandbox::new(
        Enforcement::Default,
        charter.to_path_buf(),
        root.to_path_buf(),
    )?;
    let missing = sandbox.missing();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| error.to_string())?;
    let plain = CommandTool::new(COMMAND);
    let confined = CommandTool::new(COMMAND).sandboxed(Arc::new(sandbox), Grants::default());
    let time = |tool: &CommandTool| -> Result<Vec<Duration>, String> {
        let mut times = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let started = Instant::now();
            runtime
                .block_on(tool.call(json!({})))
                .map_err(|error| error.to_string())?;
            times.push(started.elapsed());
        }
        times.sort();
        Ok(times)
    };
    let unsandboxed = time(&plain)?;
    let sandboxed = time(&confined)?;
    let (plain_median, sandboxed_median) = (median(&unsandboxed), median(&sandboxed));
    println!(
        "{:<46} median {}",
        format!("tool start, unsandboxed ({CALLS} calls)"),
        show(plain_median)
    );
    println!(
        "{:<46} median {}  (+{} for the sandbox: {})",
        format!("tool start, sandboxed ({CALLS} calls)"),
        show(sandboxed_median),
        show(sandboxed_median.saturating_sub(plain_median)),
        confined.sandbox().unwrap_or_default()
    );
    if !missing.is_empty() {
        println!("  this machine lacks {}", missing.join("; "));
    }
    Ok(())
}
