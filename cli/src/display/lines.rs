//! One line for each trace event worth showing live, built by the section of the run it belongs to: a step and its model calls, tool calls, work items, a candidate's evaluation, the run's end.

use charter_runtime::formats::trace::{EventKind, Issue, RepairAction, ScoreResult, TraceEvent};

/// One line for the events worth showing live, built by the section of the run the event
/// belongs to: a step and its model calls, tool calls, work items, the evaluation of a
/// candidate, and the run's end. Each kind is named here, so a new kind of event cannot
/// go unshown unnoticed.
pub(super) fn describe(event: &TraceEvent) -> Option<String> {
    let kind = &event.kind;
    match kind {
        // The runtime's phases (`planning`, `evaluating`...) are not the flow's words:
        // the view names the flow's own steps instead, each as it starts.
        EventKind::RunStarted { .. }
        | EventKind::PlanFrozen { .. }
        | EventKind::RunFinished { .. }
        | EventKind::Phase { .. } => None,
        EventKind::StepStarted { .. }
        | EventKind::ModelCall { .. }
        | EventKind::ModelResult { .. }
        | EventKind::ProviderNote { .. }
        | EventKind::Timeout { .. }
        | EventKind::StepError { .. }
        | EventKind::Retry { .. } => step_line(kind),
        EventKind::ToolCall { .. }
        | EventKind::ToolTimeout { .. }
        | EventKind::ToolDenied { .. }
        | EventKind::ContractViolation { .. } => tool_line(kind),
        EventKind::ItemDone { .. } | EventKind::ItemSkipped { .. } => item_line(kind),
        EventKind::Candidate { .. }
        | EventKind::Gate { .. }
        | EventKind::Repair { .. }
        | EventKind::NoProgress { .. }
        | EventKind::RepairStopped { .. }
        | EventKind::Budget { .. } => evaluation_line(kind),
        EventKind::Delivery { .. }
        | EventKind::InvariantViolated { .. }
        | EventKind::Human { .. }
        | EventKind::Session { .. } => ending_line(kind),
    }
}

/// The line of a step's start, a model call and its answer, a timeout or a retry.
fn step_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::StepStarted { role, items, tool } => {
            let role = match (role, tool) {
                (Some(role), _) => format!(" ({role})"),
                (None, Some(tool)) => format!(" (tool {tool})"),
                (None, None) => String::new(),
            };
            match items {
                Some(1) => format!("step{role}: 1 item"),
                Some(items) => format!("step{role}: {items} items"),
                None => format!("step{role}"),
            }
        }
        EventKind::ModelCall { role, model, .. } => format!("call {role} on {model}"),
        EventKind::ModelResult {
            input_tokens,
            output_tokens,
            latency_ms,
            ..
        } => format!(
            "answer in {} ({input_tokens}+{output_tokens} tokens)",
            format_time(*latency_ms)
        ),
        EventKind::ProviderNote { message, .. } => format!("note: {message}"),
        EventKind::Timeout { after_ms } => format!("timeout after {}", format_time(*after_ms)),
        EventKind::StepError { error, to } => format!("FAILED, on_error -> {to}: {error}"),
        EventKind::Retry {
            retry,
            next,
            delay_ms,
            reason,
        } => {
            let retry = serde_json::to_value(retry)
                .ok()
                .and_then(|value| value.as_str().map(str::to_string))
                .unwrap_or_default();
            let what = if retry == "repair" {
                "round"
            } else {
                "attempt"
            };
            format!(
                "retry ({retry}) -> {what} {next} in {}: {reason}",
                format_time(*delay_ms)
            )
        }
        _ => return None,
    };
    Some(line)
}

/// The line of a tool call: its result, its timeout, its denial, or a broken contract
/// (of a model's output too).
fn tool_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::ToolCall { tool, result, .. } => match result
            .as_object()
            .filter(|object| object.len() == 1)
            .and_then(|object| object.get("error"))
            .and_then(serde_json::Value::as_str)
        {
            Some(error) => format!("tool {tool} FAILED: {error}"),
            None => format!("tool {tool}"),
        },
        EventKind::ToolTimeout {
            tool, timeout_ms, ..
        } => format!(
            "tool {tool} TIMED OUT after {} (its process group killed)",
            charter_runtime::formats::scenario::duration_text::format(
                std::time::Duration::from_millis(*timeout_ms)
            )
        ),
        EventKind::ToolDenied {
            tool,
            rule: Some(rule),
            ..
        } => format!("tool {tool} DENIED by `{rule}`"),
        EventKind::ToolDenied { tool, allowed, .. } => {
            format!("tool {tool} DENIED (allowed: {})", allowed.join(", "))
        }
        EventKind::ContractViolation {
            contract,
            tool,
            violations,
        } => format!(
            "contract violation{} of {contract}: {}",
            tool.as_ref()
                .map(|tool| format!(" (tool {tool})"))
                .unwrap_or_default(),
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        _ => return None,
    };
    Some(line)
}

/// The line of a work item of an `each` step that finished or was skipped.
fn item_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::ItemDone { status, error } => match error {
            Some(error) => format!("item {status:?}: {error}").to_lowercase(),
            None => "item ok".to_string(),
        },
        EventKind::ItemSkipped { because } => format!("item skipped (depends on {because})"),
        _ => return None,
    };
    Some(line)
}

/// The line of a round's candidate, its gate, the repair chosen or stopped, a round
/// without progress, or a budget used up.
fn evaluation_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::Candidate {
            id,
            hash,
            items,
            failed,
            skipped,
        } => format!(
            "candidate {id} {} ({items} items, {} failed, {} skipped)",
            short(hash),
            failed.len(),
            skipped.len()
        ),
        EventKind::Gate {
            gate,
            candidate,
            passed,
            score,
            issues,
            scores,
            ..
        } => {
            let verdict = GateVerdict {
                passed: *passed,
                score: *score,
                scores,
                issues,
            };
            format!(
                "gate {gate} on {candidate}: {}",
                gate_verdict_text(&verdict)
            )
        }
        EventKind::Repair {
            action,
            codes,
            items,
            ..
        } => repair_line(action, codes, items),
        EventKind::NoProgress { rounds, limit } => format!("no progress ({rounds} of {limit})"),
        EventKind::RepairStopped { reason, best } => match best {
            Some(best) => format!("repair stopped ({reason}): the best candidate is {best}"),
            None => format!("repair stopped ({reason}): no candidate passed the hard rules"),
        },
        EventKind::Budget {
            budget,
            used,
            limit,
        } => {
            format!("budget {budget} exhausted ({used} of {limit})")
        }
        _ => return None,
    };
    Some(line)
}

/// What a gate said of a candidate, as `gate_verdict_text` shows it.
struct GateVerdict<'a> {
    passed: bool,
    score: Option<f64>,
    scores: &'a [ScoreResult],
    issues: &'a [Issue],
}

/// `PASS score 0.8 [clarity=0.9 tone=?] issues E1, E2`: the verdict, the score, each
/// score rule's value and the codes of the issues raised.
fn gate_verdict_text(verdict: &GateVerdict<'_>) -> String {
    let scores = verdict
        .scores
        .iter()
        .map(|score| match score.value {
            Some(value) => format!("{}={}", score.name, number(value)),
            None => format!("{}=?", score.name),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut codes: Vec<&str> = verdict
        .issues
        .iter()
        .map(|issue| issue.code.as_str())
        .collect();
    codes.dedup();
    format!(
        "{}{}{}{}",
        if verdict.passed { "PASS" } else { "FAIL" },
        verdict
            .score
            .map(|score| format!(" score {}", number(score)))
            .unwrap_or_default(),
        if scores.is_empty() {
            String::new()
        } else {
            format!(" [{scores}]")
        },
        if codes.is_empty() {
            String::new()
        } else {
            format!(" issues {}", codes.join(", "))
        }
    )
}

/// `repair: rerun STEP items a, b for CODE, CODE`: the action chosen, the items it
/// reruns (none named: all) and the issue codes that led to it.
fn repair_line(action: &RepairAction, codes: &[String], items: &[String]) -> String {
    let action = serde_json::to_value(action)
        .ok()
        .map(|value| {
            let kind = value["kind"].as_str().unwrap_or("?").to_string();
            match value["step"].as_str() {
                Some(step) => format!("{kind} {step}"),
                None => kind,
            }
        })
        .unwrap_or_default();
    let items = if items.is_empty() {
        String::new()
    } else {
        format!(" items {}", items.join(", "))
    };
    format!("repair: {action}{items} for {}", codes.join(", "))
}

/// The line of a delivery (verified or refused), a broken invariant, a person's answer,
/// or a conversation's turn kept in its session.
fn ending_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::Delivery {
            candidate,
            matches,
            expected_hash,
            actual_hash,
            ..
        } => {
            if *matches {
                format!("delivered {candidate}, hash verified")
            } else {
                delivery_refused(candidate, expected_hash, actual_hash)
            }
        }
        EventKind::InvariantViolated { invariant, message } => {
            format!("invariant {invariant} violated: {message}")
        }
        EventKind::Human { question, answer } => format!("asked {question:?}: {answer}"),
        EventKind::Session {
            turn, remembered, ..
        } => {
            let remembered: Vec<String> = remembered
                .iter()
                .map(|(field, value)| format!("{field} = {value}"))
                .collect();
            if remembered.is_empty() {
                format!("turn {turn} kept")
            } else {
                format!("turn {turn} kept; remembered {}", remembered.join(", "))
            }
        }
        _ => return None,
    };
    Some(line)
}

/// A score as people read it: at most two decimals, no trailing zeros.
fn number(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub(super) fn format_time(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{:03}s", ms / 1000, ms % 1000)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// Why a delivery was refused, never quoting an empty hash.
fn delivery_refused(candidate: &str, expected_hash: &str, actual_hash: &str) -> String {
    match (expected_hash.is_empty(), actual_hash.is_empty()) {
        (true, true) => {
            format!("delivery of {candidate} REFUSED: no candidate was evaluated")
        }
        (false, true) => format!(
            "delivery of {candidate} REFUSED: no evaluated candidate is `{candidate}` (the gate evaluated {})",
            short(expected_hash)
        ),
        (true, false) => format!(
            "delivery of {candidate} REFUSED: it was never evaluated (it hashes to {})",
            short(actual_hash)
        ),
        (false, false) => format!(
            "delivery of {candidate} REFUSED: evaluated {}, found {}",
            short(expected_hash),
            short(actual_hash)
        ),
    }
}

fn short(hash: &str) -> &str {
    hash.get(..19).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use super::delivery_refused;

    #[test]
    fn a_refused_delivery_never_quotes_an_empty_hash() {
        for (expected, actual, says) in [
            ("", "", "no candidate was evaluated"),
            (
                "sha256:aaaaaaaaaaaaaaaaaaaa",
                "",
                "no evaluated candidate is `c1`",
            ),
            ("", "sha256:bbbbbbbbbbbbbbbbbbbb", "it was never evaluated"),
            (
                "sha256:aaaaaaaaaaaaaaaaaaaa",
                "sha256:bbbbbbbbbbbbbbbbbbbb",
                "evaluated sha256:aaaaaaaaaaaa, found sha256:bbbbbbbbbbbb",
            ),
        ] {
            let line = delivery_refused("c1", expected, actual);
            assert!(line.contains(says), "{line}");
            assert!(
                !line.contains(", found ,") && !line.ends_with("found "),
                "{line}"
            );
            assert!(
                !line.contains("evaluated ,") && !line.contains("evaluated )"),
                "{line}"
            );
        }
    }
}
