//! Forking a recorded run (DESIGN §17, `charter run --fork`): [`Fork`] plays a cassette back up to a step and hands everything from there to live providers, LangGraph's time travel with a recording underneath.
//!
//! **The switch.** A fork point is a step and a round ([`ForkPoint`], `evaluate@2`). The
//! run starts from the beginning on the scenario's input; each model call, `tool` step
//! call and `ask` is, in the order the run makes them:
//!
//! | asked                                                        | answered by             |
//! | ------------------------------------------------------------ | ----------------------- |
//! | before the first call or question of the fork step in its round | the cassette, at once   |
//! | that first call or question, and everything asked after it   | the live provider (or person) |
//!
//! So "before the fork point" is run order, not key order: the first request whose key
//! names the fork step in the fork round flips the switch, once, and from then on the
//! cassette is never asked again (a later round's recorded calls included). A call before
//! the switch that the cassette does not hold fails as a replay's does
//! (`ProviderError::NotRecorded`, naming the closest unused recording): no model is asked
//! for a call the recording should have answered.
//!
//! **Time.** A recorded answer is given at once, as a replay on a paused clock gives it
//! in no wall time; but the fork runs on the real clock (its live part must), so the
//! recorded latency is not slept at all: a role `timeout` or a wall budget counts only
//! the live part. A recorded answer keeps its latency in the response, so a recording of
//! the fork ([`crate::world::record::Recording`] wrapped around a fork's provider) keeps
//! it too; a recorded error or timeout is given at once as well.
//!
//! The cassette's `faults` are not injected: the live part meets the real world.
//!
//! **Missing only.** [`Fork::missing_only`] switches per call instead of once
//! (`charter verify --rerecord --missing-only`, VCR's `new_episodes`): a call, `tool`
//! step call or `ask` whose key the cassette holds is answered by the cassette, one it
//! lacks (a step added to the spec since the recording) goes live, and the next call
//! asks the cassette again.
//!
//! **All live.** [`Fork::all`] asks the live provider for every model call and `tool`
//! step call (`charter verify --rerecord`, VCR's `all`); only the `ask` answers of
//! people come from the cassette, since a person is not a model: a question the
//! cassette holds is answered from it, one it lacks goes to the live human channel.
//!
//! [`Fork`] is a "recorded, then live" provider that any command can wrap around live
//! providers; [`Fork::replayed`] and [`Fork::reached`] say how the run went.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::Value;

use crate::engine::effects::{HumanChannel, Provider};
use crate::engine::provider::{
    BoxFuture, HumanRequest, ModelRequest, ModelResponse, ProviderError, ToolRequest, ToolResponse,
};
use crate::formats::scenario::Cassette;
use crate::world::replay::{ReplayProvider, StalePrompt};
use charter_compiler::CompiledSpec;

/// Where a fork goes live: the first call or question of `step` in `round`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkPoint {
    pub step: String,
    /// The repair round, from 1.
    pub round: u64,
}

impl fmt::Display for ForkPoint {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}@{}", self.step, self.round)
    }
}

impl ForkPoint {
    /// `STEP` (round 1) or `STEP@ROUND`; a step left out or a round that is not a whole
    /// number from 1 is the sentence that says so.
    pub fn parse(text: &str) -> Result<ForkPoint, String> {
        let (step, round) = match text.split_once('@') {
            Some((step, round)) => {
                let round = round
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|round| *round >= 1)
                    .ok_or_else(|| {
                        format!(
                            "--at `{text}`: the round after `@` must be a whole number from 1 \
                             (e.g. --at {}@2)",
                            step.trim()
                        )
                    })?;
                (step.trim(), round)
            }
            None => (text.trim(), 1),
        };
        if step.is_empty() {
            return Err(format!(
                "--at `{text}`: name the step to go live at (e.g. --at evaluate or --at evaluate@2)"
            ));
        }
        Ok(ForkPoint {
            step: step.to_string(),
            round,
        })
    }

    /// Refuses a fork point `spec` has no step for (with "did you mean"), and one the
    /// recording never reaches (naming the steps and rounds it does have).
    pub fn check(&self, spec: &CompiledSpec, cassette: &Cassette) -> Result<(), String> {
        if !spec.flow.steps.contains_key(&self.step) {
            let hint = charter_compiler::diagnostics::did_you_mean(
                &self.step,
                spec.flow.steps.keys().map(String::as_str),
            )
            .map(|hint| format!("; {hint}"))
            .unwrap_or_default();
            let steps: Vec<&str> = spec.flow.steps.keys().map(String::as_str).collect();
            return Err(format!(
                "--at `{}`: spec `{}` has no step `{}`{hint} (its steps: {})",
                self,
                spec.name,
                self.step,
                steps.join(", ")
            ));
        }
        let reached = recorded_points(cassette);
        if reached.contains(self) {
            return Ok(());
        }
        let listed: Vec<String> = reached.iter().map(ToString::to_string).collect();
        Err(format!(
            "--at `{self}`: the recording never reaches step `{}` in round {}; it has {}",
            self.step,
            self.round,
            if listed.is_empty() {
                "no calls at all".to_string()
            } else {
                listed.join(", ")
            }
        ))
    }
}

/// The steps and rounds a cassette's calls and answers name, each once, in the order
/// the cassette first names them.
pub fn recorded_points(cassette: &Cassette) -> Vec<ForkPoint> {
    let calls = cassette
        .calls
        .iter()
        .map(|call| (call.step.as_str(), call.round));
    let humans = cassette
        .humans
        .iter()
        .map(|human| (human.step.as_str(), human.round));
    let mut points: Vec<ForkPoint> = Vec::new();
    for (step, round) in calls.chain(humans) {
        if !points
            .iter()
            .any(|point| point.step == step && point.round == round)
        {
            points.push(ForkPoint {
                step: step.to_string(),
                round,
            });
        }
    }
    points
}

/// A recorded run played back up to a fork point, then live: see the module
/// documentation. Clones share the switch and the counts.
#[derive(Clone)]
pub struct Fork {
    state: Arc<State>,
}

/// When a call goes live: from a fork point on, or whenever the cassette lacks it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Switch {
    At(ForkPoint),
    Missing,
    All,
}

struct State {
    replay: ReplayProvider,
    switch: Switch,
    live: AtomicBool,
    replayed: AtomicU64,
    asked_live: AtomicU64,
}

impl State {
    /// Whether a model call or `tool` step call of `step` in `round` goes live: all
    /// live, every one does; otherwise as [`State::goes_live`] says.
    fn call_goes_live(&self, step: &str, round: u64, recorded: impl FnOnce() -> bool) -> bool {
        if self.switch == Switch::All {
            self.live.store(true, Ordering::SeqCst);
            return true;
        }
        self.goes_live(step, round, recorded)
    }

    /// Whether a request of `step` in `round` goes live: once the fork point is first
    /// asked for, everything does; missing only (and a question when all live), whatever
    /// `recorded` says the cassette lacks does.
    fn goes_live(&self, step: &str, round: u64, recorded: impl FnOnce() -> bool) -> bool {
        let at = match &self.switch {
            Switch::Missing | Switch::All => {
                let live = !recorded();
                if live {
                    self.live.store(true, Ordering::SeqCst);
                }
                return live;
            }
            Switch::At(at) => at,
        };
        if self.live.load(Ordering::SeqCst) {
            return true;
        }
        if step == at.step && round == at.round {
            self.live.store(true, Ordering::SeqCst);
            return true;
        }
        false
    }

    fn count(&self, live: bool) {
        let counter = if live {
            &self.asked_live
        } else {
            &self.replayed
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

impl fmt::Debug for Fork {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Fork")
            .field("switch", &self.state.switch)
            .field("reached", &self.reached())
            .field("replayed", &self.replayed())
            .finish_non_exhaustive()
    }
}

impl Fork {
    /// A fork of the run `cassette` recorded, live from `at`.
    pub fn new(cassette: impl Into<Arc<Cassette>>, at: ForkPoint) -> Self {
        Fork::build(cassette.into(), Switch::At(at))
    }

    /// A replay of `cassette` that asks the live provider only for what it lacks.
    pub fn missing_only(cassette: impl Into<Arc<Cassette>>) -> Self {
        Fork::build(cassette.into(), Switch::Missing)
    }

    /// A live run of `cassette`'s scenario: every model call and `tool` step call goes
    /// live, and only the questions the cassette answers are answered from it.
    pub fn all(cassette: impl Into<Arc<Cassette>>) -> Self {
        Fork::build(cassette.into(), Switch::All)
    }

    fn build(cassette: Arc<Cassette>, switch: Switch) -> Self {
        Fork {
            state: Arc::new(State {
                replay: ReplayProvider::new(cassette),
                switch,
                live: AtomicBool::new(false),
                replayed: AtomicU64::new(0),
                asked_live: AtomicU64::new(0),
            }),
        }
    }

    /// Where the fork goes live (none for a missing-only replay or an all-live run).
    pub fn at(&self) -> Option<&ForkPoint> {
        match &self.state.switch {
            Switch::At(at) => Some(at),
            Switch::Missing | Switch::All => None,
        }
    }

    /// Whether the run has reached the fork point (and gone live); missing only or all
    /// live, whether any call went live.
    pub fn reached(&self) -> bool {
        self.state.live.load(Ordering::SeqCst)
    }

    /// How many calls and questions the cassette answered.
    pub fn replayed(&self) -> u64 {
        self.state.replayed.load(Ordering::SeqCst)
    }

    /// How many calls and questions went live.
    pub fn asked_live(&self) -> u64 {
        self.state.asked_live.load(Ordering::SeqCst)
    }

    /// The replayed calls whose prompt differs from the one their recorded answer was
    /// given to (the spec or a prompt before the fork point changed since the recording).
    pub fn stale_prompts(&self) -> Vec<StalePrompt> {
        self.state.replay.stale_prompts()
    }

    /// Model calls and `tool` steps: from the cassette before the fork point, from `live`
    /// from it on.
    pub fn provider<P: Provider>(&self, live: P) -> ForkProvider<P> {
        ForkProvider {
            live,
            state: self.state.clone(),
        }
    }

    /// `ask` steps: from the cassette before the fork point, from `live` from it on.
    pub fn humans<H: HumanChannel>(&self, live: H) -> ForkHumans<H> {
        ForkHumans {
            live,
            state: self.state.clone(),
        }
    }
}

/// A [`Fork`]'s provider.
pub struct ForkProvider<P> {
    live: P,
    state: Arc<State>,
}

impl<P> fmt::Debug for ForkProvider<P> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("ForkProvider")
    }
}

impl<P: Provider> Provider for ForkProvider<P> {
    fn tool_sandbox(&self, tool: &str) -> Option<String> {
        self.live.tool_sandbox(tool)
    }

    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        let live = self
            .state
            .call_goes_live(&request.key.step, request.key.round, || {
                self.state.replay.holds(&request.key)
            });
        self.state.count(live);
        if live {
            return self.live.complete(request);
        }
        let (_, outcome) = self.state.replay.start(&request);
        Box::pin(async move { outcome })
    }

    fn run_tool(&self, request: ToolRequest) -> BoxFuture<'_, Result<ToolResponse, ProviderError>> {
        let live = self
            .state
            .call_goes_live(&request.key.step, request.key.round, || {
                self.state.replay.holds(&request.key)
            });
        self.state.count(live);
        if live {
            return self.live.run_tool(request);
        }
        let played = self.state.replay.start_tool(&request);
        Box::pin(async move { played.map(|(_, response)| response) })
    }
}

/// A [`Fork`]'s human channel.
pub struct ForkHumans<H> {
    live: H,
    state: Arc<State>,
}

impl<H> fmt::Debug for ForkHumans<H> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("ForkHumans")
    }
}

impl<H: HumanChannel> HumanChannel for ForkHumans<H> {
    fn ask(&self, request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        let live = self.state.goes_live(&request.step, request.round, || {
            self.state
                .replay
                .holds_human(&request.step, request.round, request.attempt)
        });
        self.state.count(live);
        if live {
            return self.live.ask(request);
        }
        let answer = self
            .state
            .replay
            .human(&request.step, request.round, request.attempt);
        Box::pin(async move { answer })
    }
}

#[cfg(test)]
mod tests;
