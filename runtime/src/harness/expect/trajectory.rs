//! Trajectory checks of `expect` (DESIGN §17): the steps a run took in order (`steps`), how often each tool was called (`tools`), what must never run (`not_called`) and how each gate's last evaluation came out (`gates`).
//!
//! Pure functions over an expectation, a run's trace events and the compiled spec, so a
//! scenario's replay and a live eval line check them the same way. Names are checked
//! against the spec before a run is judged ([`name_problems`]); [`unmet`] then says, for
//! each check the run failed, what was expected and what the run did.

use std::collections::BTreeMap;

use charter_compiler::diagnostics::did_you_mean;
use charter_compiler::graph::CompiledSpec;

use crate::formats::scenario::{CallCount, Expectation, GateExpectation};
use crate::formats::trace::{EventKind, TraceEvent};

/// The most steps a message lists before it cuts the list short.
const MAX_LISTED_STEPS: usize = 40;

/// What the trajectory keys of `expect` name that `spec` does not have (with "did you
/// mean"), and bounds that cannot hold (`min` above `max`, neither given), one message
/// each, in the order the keys are written.
pub fn name_problems(expect: &Expectation, spec: &CompiledSpec) -> Vec<String> {
    let steps = || spec.flow.steps.keys().map(String::as_str);
    // Declared tools and the allow-listed `SERVER.TOOL`s of the spec's MCP servers.
    let tool_names = spec.tool_names();
    let tools = || tool_names.iter().map(String::as_str);
    let gates = || spec.gates.keys().map(String::as_str);
    let mut problems = Vec::new();
    for step in &expect.steps {
        if !spec.flow.steps.contains_key(step) {
            problems.push(unknown("steps", "step", step, &spec.name, steps()));
        }
    }
    for (tool, count) in &expect.tools {
        if !spec.knows_tool(tool) {
            problems.push(unknown("tools", "tool", tool, &spec.name, tools()));
        }
        problems.extend(count_problem(tool, count));
    }
    for name in &expect.not_called {
        if kinds_of(name, spec).is_empty() {
            let all = steps()
                .chain(spec.roles.keys().map(String::as_str))
                .chain(tools());
            let hint = hint(name, all);
            problems.push(format!(
                "`expect.not_called` names `{name}`, which is no step, role or tool of the spec `{}`{hint}",
                spec.name
            ));
        }
    }
    for (gate, expected) in &expect.gates {
        if !spec.gates.contains_key(gate) {
            problems.push(unknown("gates", "gate", gate, &spec.name, gates()));
        }
        problems.extend(gate_problem(gate, expected));
    }
    problems
}

/// `` `expect.KEY` names WHAT `NAME`, which the spec `SPEC` does not have; did you mean ...``
fn unknown<'a>(
    key: &str,
    what: &str,
    name: &str,
    spec: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    let hint = hint(name, candidates);
    format!("`expect.{key}` names {what} `{name}`, which the spec `{spec}` does not have{hint}")
}

/// `; did you mean `x`?` when a candidate is close, else nothing.
fn hint<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    did_you_mean(name, candidates)
        .map(|hint| format!("; {hint}"))
        .unwrap_or_default()
}

/// A `tools` entry whose bounds cannot be checked: neither given, or `min` above `max`.
fn count_problem(tool: &str, count: &CallCount) -> Option<String> {
    match (count.min, count.max) {
        (None, None) => Some(format!(
            "`expect.tools.{tool}` gives neither `min` nor `max` (write e.g. `{{ min: 1 }}`)"
        )),
        (Some(min), Some(max)) if min > max => Some(format!(
            "`expect.tools.{tool}` has `min: {min}` above `max: {max}`, which no run can meet"
        )),
        _ => None,
    }
}

/// A `gates` entry that checks nothing, or whose `min_score` is not a number.
fn gate_problem(gate: &str, expected: &GateExpectation) -> Option<String> {
    match (expected.min_score, expected.passed) {
        (None, None) => Some(format!(
            "`expect.gates.{gate}` gives neither `min_score` nor `passed` (write e.g. `{{ min_score: 7 }}`)"
        )),
        (Some(score), _) if !score.is_finite() => Some(format!(
            "`expect.gates.{gate}` has `min_score: {score}`, which is not a number"
        )),
        _ => None,
    }
}

/// What a `not_called` name is in the spec: any of `step`, `role` and `tool` (a name may
/// be more than one); empty when it is none of them.
fn kinds_of(name: &str, spec: &CompiledSpec) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if spec.flow.steps.contains_key(name) {
        kinds.push("step");
    }
    if spec.roles.contains_key(name) {
        kinds.push("role");
    }
    if spec.knows_tool(name) {
        kinds.push("tool");
    }
    kinds
}

/// A trajectory check a run failed: the `expect` key (`steps`, `tools`, `not_called`,
/// `gates`) and what was expected against what the run did (`expect.steps: ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unmet {
    pub key: &'static str,
    pub message: String,
}

/// The trajectory checks `events` (one run's trace, or a conversation's turns in order)
/// fails, one each, in the order the keys are written; empty when it meets them all.
/// Names the spec lacks are [`name_problems`]' business.
pub fn unmet(expect: &Expectation, events: &[TraceEvent], spec: &CompiledSpec) -> Vec<Unmet> {
    let mut unmet = Vec::new();
    let mut add = |key: &'static str, message: Option<String>| {
        if let Some(message) = message {
            unmet.push(Unmet { key, message });
        }
    };
    add("steps", steps_unmet(&expect.steps, events));
    if !expect.tools.is_empty() {
        let calls = tool_calls(events);
        for (tool, count) in &expect.tools {
            add(
                "tools",
                tool_unmet(tool, count, calls.get(tool.as_str()).copied()),
            );
        }
    }
    for name in &expect.not_called {
        add(
            "not_called",
            not_called_unmet(name, &kinds_of(name, spec), events),
        );
    }
    for (gate, expected) in &expect.gates {
        add("gates", gate_unmet(gate, expected, events));
    }
    unmet
}

/// The steps started in `events`, in order (a step of every round, every turn).
pub fn steps_run(events: &[TraceEvent]) -> Vec<&str> {
    events
        .iter()
        .filter(|event| matches!(event.kind, EventKind::StepStarted { .. }))
        .filter_map(|event| event.step.as_deref())
        .collect()
}

/// Tool calls per tool in `events`: every `tool_call` and `tool_timeout` (a call its
/// timeout cut was still made), from a model's tool use or a `tool` step alike; a
/// `tool_denied` call never ran and does not count.
pub fn tool_calls(events: &[TraceEvent]) -> BTreeMap<&str, u64> {
    let mut calls = BTreeMap::new();
    for event in events {
        if let EventKind::ToolCall { tool, .. } | EventKind::ToolTimeout { tool, .. } = &event.kind
        {
            *calls.entry(tool.as_str()).or_insert(0) += 1;
        }
    }
    calls
}

/// `expect.steps`: whether `expected` is a subsequence of the steps run; if not, which
/// step never ran (after which), with the steps that did.
fn steps_unmet(expected: &[String], events: &[TraceEvent]) -> Option<String> {
    if expected.is_empty() {
        return None;
    }
    let run = steps_run(events);
    let mut position = 0;
    for (index, step) in expected.iter().enumerate() {
        match run[position..].iter().position(|ran| ran == step) {
            Some(found) => position += found + 1,
            None => {
                let missing = match index {
                    0 => format!("`{step}` never ran"),
                    _ if run.contains(&step.as_str()) => format!(
                        "`{step}` never ran after `{}` (it ran only before)",
                        expected[index - 1]
                    ),
                    _ => format!("`{step}` never ran after `{}`", expected[index - 1]),
                };
                return Some(format!(
                    "expect.steps: {missing}; steps run: {}",
                    listed(&run)
                ));
            }
        }
    }
    None
}

/// The steps run, comma-separated, cut after [`MAX_LISTED_STEPS`]; `none` when empty.
fn listed(run: &[&str]) -> String {
    if run.is_empty() {
        return "none".to_string();
    }
    let mut text = run
        .iter()
        .take(MAX_LISTED_STEPS)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if run.len() > MAX_LISTED_STEPS {
        text.push_str(&format!(", … ({} in all)", run.len()));
    }
    text
}

/// `expect.tools.TOOL`: the count outside its bounds, said with both.
fn tool_unmet(tool: &str, count: &CallCount, made: Option<u64>) -> Option<String> {
    let made = made.unwrap_or(0);
    let below = count.min.is_some_and(|min| made < min);
    let above = count.max.is_some_and(|max| made > max);
    if !below && !above {
        return None;
    }
    let expected = match (count.min, count.max) {
        (Some(min), Some(max)) if min == max => format!("exactly {min}"),
        (Some(min), Some(max)) => format!("between {min} and {max}"),
        (Some(min), None) => format!("at least {min}"),
        (None, Some(max)) => format!("at most {max}"),
        (None, None) => return None,
    };
    Some(format!(
        "expect.tools: `{tool}` was called {made} time{}, expected {expected}",
        if made == 1 { "" } else { "s" }
    ))
}

/// `expect.not_called`: the name ran as each kind it is (step, role, tool); said with
/// where it first ran.
fn not_called_unmet(name: &str, kinds: &[&str], events: &[TraceEvent]) -> Option<String> {
    let ran = |event: &&TraceEvent| {
        kinds.iter().any(|kind| match (*kind, &event.kind) {
            ("step", EventKind::StepStarted { .. }) => event.step.as_deref() == Some(name),
            ("role", EventKind::StepStarted { role, .. }) => role.as_deref() == Some(name),
            ("role", EventKind::ModelCall { role, .. }) => role == name,
            ("tool", EventKind::ToolCall { tool, .. } | EventKind::ToolTimeout { tool, .. }) => {
                tool == name
            }
            _ => false,
        })
    };
    let first = events.iter().find(ran)?;
    let what = match &first.kind {
        EventKind::StepStarted { .. } if kinds.contains(&"step") => "step",
        EventKind::ToolCall { .. } | EventKind::ToolTimeout { .. } => "tool",
        _ => "role",
    };
    let verb = if what == "step" { "ran" } else { "was called" };
    let step = first
        .step
        .as_deref()
        .filter(|step| *step != name)
        .map(|step| format!(" in step `{step}`"))
        .unwrap_or_default();
    Some(format!(
        "expect.not_called: {what} `{name}` {verb}{step} (round {}), expected it never to",
        first.round
    ))
}

/// `expect.gates.GATE`: the gate's last evaluation against the score and verdict asked.
fn gate_unmet(gate: &str, expected: &GateExpectation, events: &[TraceEvent]) -> Option<String> {
    let last = events.iter().rev().find_map(|event| match &event.kind {
        EventKind::Gate {
            gate: name,
            candidate,
            passed,
            score,
            ..
        } if name == gate => Some((candidate, *passed, *score)),
        _ => None,
    });
    let Some((candidate, passed, score)) = last else {
        return Some(format!(
            "expect.gates: gate `{gate}` was never evaluated, expected {}",
            gate_wanted(expected)
        ));
    };
    let score_low = expected
        .min_score
        .is_some_and(|min| score.is_none_or(|score| score < min));
    let verdict_wrong = expected.passed.is_some_and(|wanted| wanted != passed);
    if !score_low && !verdict_wrong {
        return None;
    }
    let score = score.map_or("no score".to_string(), |score| {
        format!("score {}", number(score))
    });
    let verdict = if passed { "passed" } else { "failed" };
    Some(format!(
        "expect.gates: gate `{gate}` {verdict} with {score} on its last evaluation (candidate {candidate}), expected {}",
        gate_wanted(expected)
    ))
}

/// What a `gates` entry asks, in words: `a score of at least 7 and a pass`.
fn gate_wanted(expected: &GateExpectation) -> String {
    let mut wanted = Vec::new();
    if let Some(min) = expected.min_score {
        wanted.push(format!("a score of at least {}", number(min)));
    }
    match expected.passed {
        Some(true) => wanted.push("a pass".to_string()),
        Some(false) => wanted.push("a fail".to_string()),
        None => {}
    }
    wanted.join(" and ")
}

/// A score to two decimals at most, without trailing zeros (`6.67`, `7`).
fn number(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests;
