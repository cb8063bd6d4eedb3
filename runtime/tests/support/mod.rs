//! Shared helpers of the scheduler tests: compile a fixture spec, replay a cassette written inline, read the trace, play a recording's calls as tasks.

#![allow(dead_code)]

use std::sync::Arc;

use charter_runtime::compiler::{CompiledSpec, MemoryLoader, compile};
use charter_runtime::engine::effects::Provider;
use charter_runtime::engine::provider::{
    BoxFuture, ModelRequest, ModelResponse, ProviderError, ToolRequest, ToolResponse,
};
use charter_runtime::engine::run::{DeliveryTarget, RunError};
use charter_runtime::formats::scenario::Cassette;
use charter_runtime::formats::trace::{MemorySink, TraceEvent};
use charter_runtime::world::replay::{ReplayProvider, ReplayReport, replay_cassette};
use serde_json::Value;

/// The header every inline cassette starts with.
pub const HEADER: &str = "version: 1\nrecorded: { spec_hash: \"sha256:test\" }\n";

/// Compiles `tests/fixtures/<name>.charter`; panics (fails the test) on any error.
pub fn fixture(name: &str) -> CompiledSpec {
    let path = format!(
        "{}/tests/fixtures/{name}.charter",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let compilation = compile(&format!("{name}.charter"), &text, &MemoryLoader::default());
    assert!(
        !compilation.has_errors(),
        "{name} does not compile: {:#?}",
        compilation.diagnostics
    );
    compilation
        .spec
        .unwrap_or_else(|| panic!("{name}: no compiled spec"))
}

/// Compiles a seed spec, `specs/seeds/<name>.charter`, reading its prompt files.
pub fn seed(name: &str) -> CompiledSpec {
    let directory = format!("{}/../specs/seeds", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(format!("{directory}/{name}.charter"))
        .unwrap_or_else(|error| panic!("{name}: {error}"));
    let loader = SeedFiles { directory };
    let compilation = compile(&format!("{name}.charter"), &text, &loader);
    assert!(
        !compilation.has_errors(),
        "{name} does not compile: {:#?}",
        compilation.diagnostics
    );
    compilation
        .spec
        .unwrap_or_else(|| panic!("{name}: no compiled spec"))
}

/// Reads the files a seed spec names, relative to `specs/seeds`.
struct SeedFiles {
    directory: String,
}

impl charter_runtime::compiler::Loader for SeedFiles {
    fn load(&self, relative_path: &str) -> Result<charter_runtime::compiler::LoadedFile, String> {
        std::fs::read_to_string(format!("{}/{relative_path}", self.directory))
            .map(|text| charter_runtime::compiler::LoadedFile {
                display_name: relative_path.to_string(),
                text,
            })
            .map_err(|error| format!("{relative_path}: {error}"))
    }
}

/// What one replay produced.
#[derive(Debug)]
pub struct Replayed {
    pub result: Result<ReplayReport, RunError>,
    pub events: Vec<TraceEvent>,
    pub jsonl: String,
}

impl Replayed {
    /// The outcome and reason as `outcome{reason}`, or `error: ...`.
    pub fn ending(&self) -> String {
        match &self.result {
            Ok(report) => report.outcome.termination().to_string(),
            Err(error) => format!("error: {error}"),
        }
    }

    /// Asserts the run ended as `expected` (`outcome{reason}`), showing the trace if not.
    #[track_caller]
    pub fn assert_ending(&self, expected: &str) {
        assert_eq!(self.ending(), expected, "{}", self.jsonl);
    }

    pub fn report(&self) -> &ReplayReport {
        match &self.result {
            Ok(report) => report,
            Err(error) => panic!("the replay failed: {error}\n{}", self.jsonl),
        }
    }

    /// The events as JSON values.
    pub fn values(&self) -> Vec<Value> {
        self.events
            .iter()
            .map(|event| serde_json::to_value(event).unwrap_or(Value::Null))
            .collect()
    }

    /// The events of `kind`, as JSON values.
    pub fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.values()
            .into_iter()
            .filter(|event| event["kind"] == kind)
            .collect()
    }

    /// Compact one-line summaries (`kind step item attempt`) of every event, for asserting order.
    pub fn outline(&self) -> Vec<String> {
        self.values()
            .iter()
            .map(|event| {
                let mut line = event["kind"].as_str().unwrap_or("?").to_string();
                for key in ["step", "item"] {
                    if let Some(text) = event[key].as_str() {
                        line.push(' ');
                        line.push_str(text);
                    }
                }
                if let Some(attempt) = event["attempt"].as_u64() {
                    line.push_str(&format!(" #{attempt}"));
                }
                line
            })
            .collect()
    }
}

/// Replays `calls` (cassette YAML after the header) for `spec` on `input` (JSON), in memory.
pub fn replay(spec: &CompiledSpec, input: &str, calls: &str) -> Replayed {
    replay_to(spec, input, calls, DeliveryTarget::Memory)
}

/// Like [`replay`], delivering to `target`.
pub fn replay_to(
    spec: &CompiledSpec,
    input: &str,
    calls: &str,
    target: DeliveryTarget,
) -> Replayed {
    let text = format!("{HEADER}{calls}");
    let cassette = Cassette::from_yaml("cassette.yaml", &text)
        .unwrap_or_else(|error| panic!("bad test cassette: {error}\n{text}"));
    let input: Value =
        serde_json::from_str(input).unwrap_or_else(|error| panic!("bad input: {error}"));
    let mut sink = MemorySink::new();
    let result = replay_cassette(spec, input, cassette, target, &mut sink);
    let jsonl = sink.to_jsonl().unwrap_or_default();
    Replayed {
        result,
        events: sink.into_events(),
        jsonl,
    }
}

/// A replay that also keeps every rendered prompt, by call key (`step[item]#attempt rN`).
pub struct PromptLog {
    replay: std::sync::Arc<charter_runtime::world::replay::ReplayProvider>,
    prompts: std::sync::Mutex<Vec<(String, String)>>,
}

impl charter_runtime::engine::effects::Provider for PromptLog {
    fn complete(
        &self,
        request: charter_runtime::engine::provider::ModelRequest,
    ) -> charter_runtime::engine::provider::BoxFuture<
        '_,
        Result<
            charter_runtime::engine::provider::ModelResponse,
            charter_runtime::engine::provider::ProviderError,
        >,
    > {
        let key = &request.key;
        let name = format!(
            "{}{}{}#{} r{}",
            key.step,
            key.item
                .as_ref()
                .map(|item| format!("[{item}]"))
                .unwrap_or_default(),
            key.role
                .as_ref()
                .map(|role| format!("/{role}"))
                .unwrap_or_default(),
            key.attempt,
            key.round
        );
        self.prompts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((name, request.prompt.clone()));
        self.replay.complete(request)
    }

    fn run_tool(
        &self,
        request: charter_runtime::engine::provider::ToolRequest,
    ) -> charter_runtime::engine::provider::BoxFuture<
        '_,
        Result<
            charter_runtime::engine::provider::ToolResponse,
            charter_runtime::engine::provider::ProviderError,
        >,
    > {
        self.replay.run_tool(request)
    }
}

/// What a replay produced, with the prompt of every call.
pub struct WithPrompts {
    pub replayed: Replayed,
    pub prompts: Vec<(String, String)>,
}

impl WithPrompts {
    /// The prompt of the call named `name` (`step[item]#attempt rN`); fails the test when
    /// there was no such call.
    #[track_caller]
    pub fn prompt(&self, name: &str) -> &str {
        match self.prompts.iter().find(|(key, _)| key == name) {
            Some((_, prompt)) => prompt,
            None => {
                let keys: Vec<&str> = self.prompts.iter().map(|(key, _)| key.as_str()).collect();
                panic!("no call {name}; calls: {keys:?}\n{}", self.replayed.jsonl)
            }
        }
    }
}

/// Like [`replay`], keeping the rendered prompts.
pub fn replay_prompts(spec: &CompiledSpec, input: &str, calls: &str) -> WithPrompts {
    let text = format!("{HEADER}{calls}");
    let cassette = Cassette::from_yaml("cassette.yaml", &text)
        .unwrap_or_else(|error| panic!("bad test cassette: {error}\n{text}"));
    let input: Value =
        serde_json::from_str(input).unwrap_or_else(|error| panic!("bad input: {error}"));
    let config = charter_runtime::engine::run::RunConfig {
        faults: cassette.faults.clone(),
        ..charter_runtime::engine::run::RunConfig::default()
    };
    let replay = std::sync::Arc::new(charter_runtime::world::replay::ReplayProvider::new(
        cassette,
    ));
    let log = std::sync::Arc::new(PromptLog {
        replay: replay.clone(),
        prompts: std::sync::Mutex::new(Vec::new()),
    });
    let mut sink = MemorySink::new();
    let outcome = charter_runtime::engine::run::replay_blocking(
        spec,
        input,
        charter_runtime::engine::effects::Effects::new(log.clone(), replay.as_ref(), &mut sink)
            .with_files(&charter_runtime::world::files::LocalFiles),
        &config,
    );
    let result = outcome.map(|outcome| ReplayReport {
        outcome,
        unused_calls: replay.unused(),
        unused_humans: replay.unused_humans(),
        stale_prompts: replay.stale_prompts(),
        calls_per_step: charter_runtime::harness::expect::calls_per_step(sink.events()),
        trajectory: sink.events().to_vec(),
    });
    let jsonl = sink.to_jsonl().unwrap_or_default();
    let prompts = log
        .prompts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    WithPrompts {
        replayed: Replayed {
            result,
            events: sink.into_events(),
            jsonl,
        },
        prompts,
    }
}

/// A recording that does not answer at once: each call is a task that sleeps its
/// recorded latency, under the role's timeout, as a live call would.
pub struct AsTask(pub Arc<ReplayProvider>);

impl Provider for AsTask {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        self.0.complete(request)
    }

    fn run_tool(&self, request: ToolRequest) -> BoxFuture<'_, Result<ToolResponse, ProviderError>> {
        self.0.run_tool(request)
    }
}
