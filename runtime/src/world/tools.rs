//! Tools a model may call during a role call: the `Tool` trait for Rust hosts, `CommandTool` for any language (JSON on stdin and stdout), and the `ToolBox` that checks arguments and results against the tools' contracts.
//!
//! A live provider hands every tool call the model makes to a [`ToolBox`] (after it
//! refused the tools outside the role's whitelist). The tool box:
//!
//! 1. checks the arguments against the tool's input contract (a violation is reported to
//!    the model, which can correct its call; the tool is not run);
//! 2. runs the tool's implementation;
//! 3. checks the result against the tool's output contract: tool outputs are untrusted
//!    data, and a result that breaks its contract is a tool failure.
//!
//! Every failure is a [`ToolError`] value that the provider gives back to the model as
//! the tool's answer; nothing a tool does can crash a run.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::process::Stdio;
use std::sync::Arc;

use charter_compiler::graph::{CompiledSpec, ContractIr, EffectIr, ToolIr};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::engine::provider::BoxFuture;
use crate::engine::validate::{Validator, Violation, violations_text};
use crate::world::sandbox::{Confined, Grants, Sandbox};

/// A tool implementation: takes the call's arguments (already checked against the tool's
/// input contract) and answers a JSON value (checked against its output contract).
pub trait Tool: Send + Sync {
    fn call(&self, args: Value) -> BoxFuture<'_, Result<Value, ToolError>>;

    /// [`Tool::call`], told who is calling (the role and step, [`ToolContext`]). A tool
    /// that does not care keeps this default, which ignores the context;
    /// [`CommandTool`] passes it to its command as `CHARTER_ROLE` and `CHARTER_STEP`.
    fn call_with(
        &self,
        context: &ToolContext,
        args: Value,
    ) -> BoxFuture<'_, Result<Value, ToolError>> {
        let _ = context;
        self.call(args)
    }

    /// The sandbox the tool's process runs in (DESIGN §20), for its trace events; `None`
    /// for a tool that starts no process (a Rust function) or runs unconfined by choice.
    fn sandbox(&self) -> Option<String> {
        None
    }
}

impl<T: Tool + ?Sized> Tool for Arc<T> {
    fn call(&self, args: Value) -> BoxFuture<'_, Result<Value, ToolError>> {
        (**self).call(args)
    }

    fn call_with(
        &self,
        context: &ToolContext,
        args: Value,
    ) -> BoxFuture<'_, Result<Value, ToolError>> {
        (**self).call_with(context, args)
    }

    fn sandbox(&self) -> Option<String> {
        (**self).sandbox()
    }
}

/// Who calls a tool: the role whose model asked for it (`None` for a `tool` step, which
/// no role makes) and the flow step it runs in (`None` when the tool is called outside a
/// run, as a test or a host may).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolContext {
    pub role: Option<String>,
    pub step: Option<String>,
}

impl ToolContext {
    /// A call made by `role`'s model during step `step`.
    pub fn role(role: impl Into<String>, step: impl Into<String>) -> Self {
        ToolContext {
            role: Some(role.into()),
            step: Some(step.into()),
        }
    }

    /// A call made by a `tool` step (no role).
    pub fn step(step: impl Into<String>) -> Self {
        ToolContext {
            role: None,
            step: Some(step.into()),
        }
    }
}

/// The environment variable a [`CommandTool`] reads the calling role from (unset for a
/// `tool` step).
pub const ROLE_VARIABLE: &str = "CHARTER_ROLE";
/// The environment variable a [`CommandTool`] reads the calling step from.
pub const STEP_VARIABLE: &str = "CHARTER_STEP";

/// Why a tool call gave no usable result. The message is what the model is told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The spec declares no such tool.
    #[error("there is no tool `{tool}`")]
    Unknown { tool: String },
    /// The spec declares the tool but the run was given no implementation for it.
    #[error("tool `{tool}` is not available in this run")]
    Unavailable { tool: String },
    /// The arguments break the tool's input contract (the tool was not run).
    #[error("the arguments break `{contract}`:\n{}", violations_text(violations))]
    InvalidArguments {
        contract: String,
        violations: Vec<Violation>,
    },
    /// The tool answered a value that breaks its output contract.
    #[error(
        "the tool's result breaks `{contract}`:\n{}",
        violations_text(violations)
    )]
    InvalidResult {
        contract: String,
        violations: Vec<Violation>,
    },
    /// The tool itself failed (a command's non-zero exit, output that is not JSON, ...).
    #[error("{0}")]
    Failed(String),
    /// The tool ran past its `timeout` and was stopped (a command's whole process group
    /// killed).
    #[error("tool `{tool}` timed out after {}", crate::formats::scenario::duration_text::format(std::time::Duration::from_millis(*after_ms)))]
    TimedOut { tool: String, after_ms: u64 },
}

/// A tool written as an async closure: `FnTool::new(|args| async move { Ok(args) })`.
pub struct FnTool<F> {
    function: F,
}

impl<F, Fut> FnTool<F>
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    pub fn new(function: F) -> Self {
        FnTool { function }
    }
}

impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    fn call(&self, args: Value) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin((self.function)(args))
    }
}

impl<F> fmt::Debug for FnTool<F> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("FnTool")
    }
}

/// The most of a failing command's stderr given back to the model, in bytes (its end,
/// where the error usually is).
const STDERR_TAIL: usize = 2000;

/// A tool that is a command (`charter run --tool NAME=COMMAND`), in any language.
///
/// The command line is run by `sh -c` (so it may use quoting, pipes and variables, as it
/// would in a terminal), in the current directory and with the current environment, plus
/// who is calling: `CHARTER_ROLE` is the role whose model made the call, unset for a
/// `tool` step (no role calls it), and `CHARTER_STEP` the flow step (both unset when the
/// tool is called outside a run; a value inherited from Charter's own environment is
/// never passed on). It
/// gets the call's arguments as one JSON value on stdin (then stdin is closed) and must
/// print one JSON value on stdout and exit 0. A non-zero exit (with the end of its
/// stderr), output that is not JSON or longer than the limit (10 MB unless
/// [`CommandTool::with_max_output_bytes`] says otherwise), or a command that cannot be
/// started is a [`ToolError::Failed`].
///
/// The command runs in a process group of its own, and the whole group is killed when the
/// command exits (a child it left in the background does not outlive the call, nor keep
/// its stdout open), when its output passes the limit, and when the call is dropped (a
/// timeout, a cancelled run).
#[derive(Clone, Debug)]
pub struct CommandTool {
    command: String,
    max_output_bytes: usize,
    /// The sandbox it runs in, and what its declaration grants (DESIGN §20); `None`: it
    /// runs as commands do in a terminal (a library host, `--no-sandbox`).
    sandbox: Option<(Arc<Sandbox>, Grants)>,
}

impl PartialEq for CommandTool {
    fn eq(&self, other: &Self) -> bool {
        self.command == other.command
            && self.max_output_bytes == other.max_output_bytes
            && self.sandbox.as_ref().map(|(_, grants)| grants)
                == other.sandbox.as_ref().map(|(_, grants)| grants)
    }
}

impl CommandTool {
    pub fn new(command: impl Into<String>) -> Self {
        CommandTool {
            command: command.into(),
            max_output_bytes: crate::world::limits::DEFAULT_MAX_BYTES,
            sandbox: None,
        }
    }

    /// The same command, run in `sandbox` with what `grants` allows beyond its defaults.
    pub fn sandboxed(mut self, sandbox: Arc<Sandbox>, grants: Grants) -> Self {
        self.sandbox = Some((sandbox, grants));
        self
    }

    /// The same command, reading at most `limit` bytes of its stdout.
    pub fn with_max_output_bytes(mut self, limit: usize) -> Self {
        self.max_output_bytes = limit;
        self
    }

    pub fn command(&self) -> &str {
        &self.command
    }

    /// The command made ready to start: through its sandbox when it has one (which holds
    /// the call's directory and cgroup until the call ends), else as a terminal would.
    fn prepare(
        &self,
        context: &ToolContext,
    ) -> Result<(tokio::process::Command, Option<Confined>), ToolError> {
        let caller: Vec<(&str, &str)> = [
            (ROLE_VARIABLE, &context.role),
            (STEP_VARIABLE, &context.step),
        ]
        .into_iter()
        .filter_map(|(variable, value)| Some((variable, value.as_deref()?)))
        .collect();
        if let Some((sandbox, grants)) = &self.sandbox {
            let mut confined = sandbox
                .confine(&["sh", "-c", &self.command], grants, &caller)
                .map_err(|error| {
                    ToolError::Failed(format!("cannot sandbox `{}`: {error}", self.command))
                })?;
            let command =
                std::mem::replace(&mut confined.command, tokio::process::Command::new("true"));
            return Ok((command, Some(confined)));
        }
        let mut command = tokio::process::Command::new("sh");
        command.arg("-c").arg(&self.command).process_group(0);
        for variable in [ROLE_VARIABLE, STEP_VARIABLE] {
            command.env_remove(variable);
        }
        for (variable, value) in caller {
            command.env(variable, value);
        }
        Ok((command, None))
    }

    async fn run(&self, context: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let (mut command, confined) = self.prepare(context)?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| {
                ToolError::Failed(format!("cannot start `{}`: {error}", self.command))
            })?;
        // Kills the whole group when the call ends, however it ends.
        let group = ProcessGroup::of(child.id());
        let input = args.to_string();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        // Write stdin while reading stdout: a command that prints before it has read all
        // of its input must not block on a full pipe.
        let write = async move {
            if let Some(mut stdin) = stdin {
                // A command that does not read its input closes the pipe early; that is
                // its business, so a write error is not a failure.
                let _ = stdin.write_all(input.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
        };
        let limit = self.max_output_bytes;
        let read_stdout = async {
            let read = read_at_most(stdout, limit).await;
            if matches!(read, Ok((_, true))) {
                // Past the limit: stop the command rather than let it block on the pipe.
                group.kill();
            }
            read
        };
        let read_stderr = read_at_most(stderr, limit);
        let exit = async {
            let status = child.wait().await;
            // Whatever the command left behind holds its pipes open: end it, so reading
            // them ends now rather than when the last of them exits.
            group.kill();
            status
        };
        let ((), status, stdout, stderr) = tokio::join!(write, exit, read_stdout, read_stderr);
        let could_not_run = |error: std::io::Error| {
            ToolError::Failed(format!("`{}` could not be run: {error}", self.command))
        };
        let (stdout, stdout_cut) = stdout.map_err(could_not_run)?;
        if stdout_cut {
            return Err(ToolError::Failed(format!(
                "`{}` printed more than the limit of {}",
                self.command,
                crate::world::limits::describe_bytes(limit)
            )));
        }
        let status = status.map_err(could_not_run)?;
        let (stderr, _) = stderr.map_err(could_not_run)?;
        if !status.success() {
            let stderr = String::from_utf8_lossy(&stderr);
            let stderr = stderr.trim();
            let tail = tail(stderr, STDERR_TAIL);
            let status = match status.code() {
                Some(code) => format!("exit status {code}"),
                None => "a signal".to_string(),
            };
            let sandboxed = match &confined {
                Some(confined) => format!(
                    " (it ran sandboxed: {}; an access the sandbox refused is named in its \
                     message — grant it in the tool's `sandbox {{ … }}`)",
                    confined.description
                ),
                None => String::new(),
            };
            return Err(ToolError::Failed(if tail.is_empty() {
                format!("`{}` ended with {status}{sandboxed}", self.command)
            } else {
                format!("`{}` ended with {status}: {tail}{sandboxed}", self.command)
            }));
        }
        let stdout = String::from_utf8_lossy(&stdout);
        if stdout.trim().is_empty() {
            return Err(ToolError::Failed(format!(
                "`{}` printed nothing (a tool must print one JSON value)",
                self.command
            )));
        }
        serde_json::from_str(stdout.trim()).map_err(|error| {
            ToolError::Failed(format!(
                "`{}` printed something that is not JSON: {error}",
                self.command
            ))
        })
    }
}

/// Reads `pipe` to its end or to `limit` bytes, whichever comes first; `true` when there
/// was more than `limit` (the rest is not read).
async fn read_at_most(
    pipe: Option<impl tokio::io::AsyncRead + Unpin>,
    limit: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let mut bytes = Vec::new();
    let Some(pipe) = pipe else {
        return Ok((bytes, false));
    };
    let most = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    pipe.take(most).read_to_end(&mut bytes).await?;
    let cut = bytes.len() > limit;
    bytes.truncate(limit);
    Ok((bytes, cut))
}

/// The process groups of the tool commands running now in this process (their leaders'
/// ids), so that a server that stops can end them: a tool runs in a group of its own, which
/// would otherwise outlive the server.
static RUNNING: std::sync::Mutex<std::collections::BTreeSet<i32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

fn running() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<i32>> {
    RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Kills the process group of every tool command running now (`charter serve` stopping:
/// its runs resume from their journals when it starts again, and no tool of theirs goes
/// on meanwhile). Returns how many groups it killed.
pub fn kill_running_tools() -> usize {
    let leaders = std::mem::take(&mut *running());
    for leader in &leaders {
        if let Some(leader) = rustix::process::Pid::from_raw(*leader) {
            let _ = rustix::process::kill_process_group(leader, rustix::process::Signal::KILL);
        }
    }
    leaders.len()
}

/// A tool command's process group, killed (`SIGKILL` to the group) on [`kill`] and on
/// drop, so no process the command started outlives its call; while it runs it is listed
/// for [`kill_running_tools`].
///
/// [`kill`]: ProcessGroup::kill
struct ProcessGroup {
    leader: Option<rustix::process::Pid>,
}

impl ProcessGroup {
    /// The group led by the process `id` (the command was started with `process_group(0)`).
    fn of(id: Option<u32>) -> Self {
        let leader = id
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(leader) = leader {
            running().insert(leader.as_raw_nonzero().get());
        }
        ProcessGroup { leader }
    }

    fn kill(&self) {
        if let Some(leader) = self.leader {
            // The group may be gone already (every member exited): nothing to do then.
            let _ = rustix::process::kill_process_group(leader, rustix::process::Signal::KILL);
            running().remove(&leader.as_raw_nonzero().get());
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Tool for CommandTool {
    fn call(&self, args: Value) -> BoxFuture<'_, Result<Value, ToolError>> {
        self.call_with(&ToolContext::default(), args)
    }

    fn call_with(
        &self,
        context: &ToolContext,
        args: Value,
    ) -> BoxFuture<'_, Result<Value, ToolError>> {
        let context = context.clone();
        Box::pin(async move { self.run(&context, args).await })
    }

    fn sandbox(&self) -> Option<String> {
        let (sandbox, grants) = self.sandbox.as_ref()?;
        Some(sandbox.describe(grants))
    }
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text.get(start..).unwrap_or_default()
}

/// What a model is told about a tool: its name, a description and the JSON Schema of its
/// arguments (the input contract's schema).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// The tools of one run: the spec's tool declarations (their contracts) and the
/// implementations the host gave for them.
#[derive(Clone, Default)]
pub struct ToolBox {
    contracts: BTreeMap<String, ContractIr>,
    declared: BTreeMap<String, ToolIr>,
    implementations: BTreeMap<String, Arc<dyn Tool>>,
}

/// An implementation was given for a tool the spec does not declare.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the spec declares no tool `{tool}`{}", hint.as_ref().map(|hint| format!("; {hint}")).unwrap_or_default())]
pub struct UndeclaredTool {
    pub tool: String,
    /// "did you mean ..." when a declared tool has a close name.
    pub hint: Option<String>,
}

impl ToolBox {
    /// No tools at all (a provider for roles without tools).
    pub fn empty() -> Self {
        ToolBox::default()
    }

    /// The tools `spec` declares, none implemented yet.
    pub fn for_spec(spec: &CompiledSpec) -> Self {
        ToolBox {
            contracts: spec.contracts.clone(),
            declared: spec.tools.clone(),
            implementations: BTreeMap::new(),
        }
    }

    /// Gives tool `name` its implementation (replacing an earlier one).
    pub fn insert(&mut self, name: &str, tool: Arc<dyn Tool>) -> Result<(), UndeclaredTool> {
        if !self.declared.contains_key(name) {
            return Err(UndeclaredTool {
                tool: name.to_string(),
                hint: charter_compiler::diagnostics::did_you_mean(
                    name,
                    self.declared.keys().map(String::as_str),
                ),
            });
        }
        self.implementations.insert(name.to_string(), tool);
        Ok(())
    }

    /// [`ToolBox::insert`], builder style.
    pub fn with(mut self, name: &str, tool: impl Tool + 'static) -> Result<Self, UndeclaredTool> {
        self.insert(name, Arc::new(tool))?;
        Ok(self)
    }

    /// The sandbox the tool `name` runs in, if its implementation starts a process in one.
    pub fn sandbox_of(&self, name: &str) -> Option<String> {
        self.implementations.get(name)?.sandbox()
    }

    /// The declared tools that have no implementation, in name order (a host may warn, or
    /// refuse to start a run whose roles use one).
    pub fn unimplemented(&self) -> Vec<&str> {
        self.declared
            .keys()
            .filter(|name| !self.implementations.contains_key(*name))
            .map(String::as_str)
            .collect()
    }

    /// What the model is told about tool `name`, if the spec declares it.
    pub fn definition(&self, name: &str) -> Option<ToolDefinition> {
        let tool = self.declared.get(name)?;
        let mut input_schema = self
            .contracts
            .get(&tool.input)
            .map(|contract| (*contract.schema).clone())
            .unwrap_or_else(|| serde_json::json!({"type": "object"}));
        strip_schema_keyword(&mut input_schema);
        let effect = match tool.effect {
            EffectIr::Read => "reads",
            EffectIr::Write => "writes",
            EffectIr::External => "acts on the outside world",
        };
        Some(ToolDefinition {
            name: name.to_string(),
            description: format!(
                "The `{name}` tool ({effect}): takes a `{}` record and answers a `{}` record.",
                tool.input, tool.output
            ),
            input_schema,
        })
    }

    /// Runs tool `name` on `args` within its declared limits (DESIGN §9.2): each attempt
    /// is cut at the tool's `timeout` (dropping it kills a command's process group), and
    /// a failed or timed-out attempt is run again up to `retry` times, after a backoff
    /// that doubles. Arguments that break the input contract are not retried. Returns the
    /// last attempt's result and how long that attempt ran.
    pub async fn call_limited(
        &self,
        name: &str,
        args: Value,
    ) -> (Result<Value, ToolError>, std::time::Duration) {
        self.call_limited_with(&ToolContext::default(), name, args)
            .await
    }

    /// [`ToolBox::call_limited`], telling the tool who calls it.
    pub async fn call_limited_with(
        &self,
        context: &ToolContext,
        name: &str,
        args: Value,
    ) -> (Result<Value, ToolError>, std::time::Duration) {
        let (timeout, retry, backoff_ms) = self.declared.get(name).map_or((None, 0, 0), |tool| {
            (tool.timeout_ms, tool.retry, tool.backoff_ms)
        });
        let mut attempt = 0u64;
        loop {
            let started = tokio::time::Instant::now();
            let result = match timeout {
                Some(timeout_ms) => {
                    match tokio::time::timeout(
                        std::time::Duration::from_millis(timeout_ms),
                        self.call_with(context, name, args.clone()),
                    )
                    .await
                    {
                        Ok(result) => result,
                        Err(_) => Err(ToolError::TimedOut {
                            tool: name.to_string(),
                            after_ms: timeout_ms,
                        }),
                    }
                }
                None => self.call_with(context, name, args.clone()).await,
            };
            let latency = started.elapsed();
            let retriable = matches!(
                result,
                Err(ToolError::Failed(_)
                    | ToolError::TimedOut { .. }
                    | ToolError::InvalidResult { .. })
            );
            if !retriable || attempt >= retry {
                return (result, latency);
            }
            attempt += 1;
            let delay = backoff_ms.saturating_mul(
                1u64.checked_shl(u32::try_from(attempt - 1).unwrap_or(u32::MAX))
                    .unwrap_or(u64::MAX),
            );
            if delay > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            }
        }
    }

    /// Runs tool `name` on `args` once, with no limits: checks the arguments, runs the
    /// tool, checks the result.
    pub async fn call(&self, name: &str, args: Value) -> Result<Value, ToolError> {
        self.call_with(&ToolContext::default(), name, args).await
    }

    /// [`ToolBox::call`], telling the tool who calls it ([`Tool::call_with`]).
    pub async fn call_with(
        &self,
        context: &ToolContext,
        name: &str,
        args: Value,
    ) -> Result<Value, ToolError> {
        let Some(tool) = self.declared.get(name) else {
            return Err(ToolError::Unknown {
                tool: name.to_string(),
            });
        };
        let Some(implementation) = self.implementations.get(name) else {
            return Err(ToolError::Unavailable {
                tool: name.to_string(),
            });
        };
        let validator = Validator::new(&self.contracts);
        let args = validator
            .validate(&tool.input, &args)
            .map_err(|violations| ToolError::InvalidArguments {
                contract: tool.input.clone(),
                violations,
            })?;
        let result = implementation.call_with(context, args).await?;
        validator
            .validate(&tool.output, &result)
            .map_err(|violations| ToolError::InvalidResult {
                contract: tool.output.clone(),
                violations,
            })
    }
}

impl fmt::Debug for ToolBox {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("ToolBox")
            .field("declared", &self.declared.keys().collect::<Vec<_>>())
            .field(
                "implemented",
                &self.implementations.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Drops the `$schema` keyword from a schema given to a model: the draft is implied, and
/// some OpenAI-compatible servers reject the keyword.
pub(crate) fn strip_schema_keyword(schema: &mut Value) {
    if let Value::Object(object) = schema {
        object.remove("$schema");
    }
}

#[cfg(test)]
mod tests;
