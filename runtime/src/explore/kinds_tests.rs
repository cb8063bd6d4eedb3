//! Tests of the peers' fault kinds (DESIGN §12): each one's injected effect, and the runtime's reaction to it.

use super::tests::{kinds_of, limits, loaded, play_faults};
use super::*;
use crate::formats::trace::{EventKind, Outcome, Reason};

fn call_at(loaded: &Loaded, step: &str, item: Option<&str>) -> usize {
    loaded
        .cassette
        .calls
        .iter()
        .position(|call| call.step == step && call.item.as_deref() == item && call.attempt == 1)
        .unwrap_or_else(|| panic!("no call of {step} {item:?}"))
}

fn fault(call: usize, kind: FaultKind) -> Fault {
    Fault {
        site: Site::Call { call },
        kind,
    }
}

fn outcome(played: &Played) -> RunOutcome {
    match &played.result {
        Ok(Ok(outcome)) => outcome.clone(),
        other => panic!("{other:?}"),
    }
}

fn trace_text(played: &Played) -> String {
    crate::formats::trace::to_jsonl(&played.events).unwrap_or_default()
}

#[test]
fn a_truncated_answer_is_noted_cut_short_and_re_asked() {
    let loaded = loaded("closed_loop/happy_path");
    let plan = call_at(&loaded, "plan", None);
    let baked = faults::bake(
        &loaded.spec,
        &loaded.cassette,
        &[fault(plan, FaultKind::Truncated)],
    );
    let raw = baked.calls[plan].raw.clone().unwrap_or_default();
    let whole = loaded.cassette.calls[plan]
        .response
        .as_ref()
        .map(serde_json::Value::to_string)
        .unwrap_or_default();
    assert!(whole.starts_with(&raw) && raw.len() < whole.len(), "{raw}");
    let played = play_faults(
        &loaded,
        &[fault(plan, FaultKind::Truncated)],
        limits(&loaded),
    );
    let kinds = kinds_of(&played.events, "plan", None);
    for expected in ["provider_note@1", "contract_violation@1", "model_call@2"] {
        assert!(
            kinds.iter().any(|seen| seen == expected),
            "{expected}: {kinds:?}"
        );
    }
    assert!(trace_text(&played).contains("finish_reason `length`"));
    assert_eq!(outcome(&played).reason, Reason::GatePassed);
}

#[test]
fn a_refusal_is_a_contract_violation_and_re_asked() {
    let loaded = loaded("closed_loop/happy_path");
    let plan = call_at(&loaded, "plan", None);
    let played = play_faults(&loaded, &[fault(plan, FaultKind::Refusal)], limits(&loaded));
    let kinds = kinds_of(&played.events, "plan", None);
    assert!(
        kinds.contains(&"contract_violation@1".to_string()),
        "{kinds:?}"
    );
    assert!(kinds.contains(&"model_call@2".to_string()), "{kinds:?}");
    assert_eq!(outcome(&played).reason, Reason::GatePassed);
}

#[test]
fn auth_and_context_length_are_never_retried_and_fail_the_step() {
    let loaded = loaded("closed_loop/happy_path");
    let plan = call_at(&loaded, "plan", None);
    for (kind, says) in [
        (FaultKind::Auth, "401"),
        (FaultKind::ContextLength, "maximum context length"),
    ] {
        let played = play_faults(&loaded, &[fault(plan, kind)], limits(&loaded));
        let kinds = kinds_of(&played.events, "plan", None);
        // The 429 of the same call is retried (the role has `retry: 2`); these are not.
        assert!(
            !kinds.iter().any(|seen| seen.starts_with("retry@")),
            "{kind}: {kinds:?}"
        );
        assert!(
            !kinds.contains(&"model_call@2".to_string()),
            "{kind}: {kinds:?}"
        );
        let ended = outcome(&played);
        assert_eq!(
            (ended.outcome, ended.reason),
            (
                Outcome::Failed,
                Reason::StepFailed {
                    step: "plan".into()
                }
            ),
            "{kind}"
        );
        assert!(trace_text(&played).contains(says), "{kind}");
    }
    let rate_limited = play_faults(
        &loaded,
        &[fault(plan, FaultKind::RateLimited)],
        limits(&loaded),
    );
    assert!(kinds_of(&rate_limited.events, "plan", None).contains(&"retry@1".to_string()));
}

#[test]
fn a_slow_answer_comes_just_under_the_timeout_and_is_accepted() {
    let loaded = loaded("closed_loop/happy_path");
    let plan = call_at(&loaded, "plan", None);
    let played = play_faults(&loaded, &[fault(plan, FaultKind::Slow)], limits(&loaded));
    // The planner's timeout is 2m: the answer comes at 1m59.999s.
    let latency = played.events.iter().find_map(|event| match &event.kind {
        EventKind::ModelResult { latency_ms, .. } if event.step.as_deref() == Some("plan") => {
            Some(*latency_ms)
        }
        _ => None,
    });
    assert_eq!(latency, Some(119_999));
    let kinds = kinds_of(&played.events, "plan", None);
    assert!(
        !kinds.iter().any(|seen| seen.starts_with("timeout@")),
        "{kinds:?}"
    );
    assert_eq!(outcome(&played).reason, Reason::GatePassed);
}

#[test]
fn a_stale_answer_is_an_earlier_call_of_the_same_step() {
    let loaded = loaded("closed_loop/happy_path");
    let first = call_at(&loaded, "execute", Some("T-001"));
    let second = call_at(&loaded, "execute", Some("T-002"));
    let baked = faults::bake(
        &loaded.spec,
        &loaded.cassette,
        &[fault(second, FaultKind::Stale)],
    );
    assert_eq!(
        baked.calls[second].response,
        loaded.cassette.calls[first].response
    );
    // The first call of a step has nothing earlier: no variant.
    assert!(!faults::changes(
        &loaded.spec,
        &loaded.cassette,
        &[fault(first, FaultKind::Stale)]
    ));
    let played = play_faults(&loaded, &[fault(second, FaultKind::Stale)], limits(&loaded));
    assert!(matches!(played.result, Ok(Ok(_))), "{:?}", played.result);
}

#[test]
fn a_wrong_candidate_id_at_a_finalize_is_re_asked() {
    let loaded = loaded("closed_loop/happy_path");
    let deliver = call_at(&loaded, "deliver", None);
    let baked = faults::bake(
        &loaded.spec,
        &loaded.cassette,
        &[fault(deliver, FaultKind::WrongValue)],
    );
    assert_eq!(
        baked.calls[deliver]
            .response
            .as_ref()
            .and_then(|answer| answer.get("candidate_id")),
        Some(&serde_json::json!("c2"))
    );
    let played = play_faults(
        &loaded,
        &[fault(deliver, FaultKind::WrongValue)],
        limits(&loaded),
    );
    let kinds = kinds_of(&played.events, "deliver", None);
    assert!(
        kinds.contains(&"contract_violation@1".to_string()),
        "{kinds:?}"
    );
    assert!(trace_text(&played).contains("names no candidate"));
    assert_eq!(outcome(&played).reason, Reason::GatePassed);
}

#[test]
fn a_wrong_value_echoes_another_item_or_flips_an_enum_and_stays_valid() {
    let loaded = loaded("closed_loop/happy_path");
    let validator = crate::engine::validate::Validator::for_spec(&loaded.spec);
    let item = call_at(&loaded, "execute", Some("T-001"));
    let baked = faults::bake(
        &loaded.spec,
        &loaded.cassette,
        &[fault(item, FaultKind::WrongValue)],
    );
    let answer = baked.calls[item].response.clone().unwrap_or_default();
    assert_eq!(answer.get("task_id"), Some(&serde_json::json!("T-002")));
    assert!(
        validator.validate("StageResult", &answer).is_ok(),
        "{answer}"
    );
    // An answer with no item: its first enum or yes/no is flipped.
    let evaluate = call_at(&loaded, "evaluate", None);
    let baked = faults::bake(
        &loaded.spec,
        &loaded.cassette,
        &[fault(evaluate, FaultKind::WrongValue)],
    );
    let before = loaded.cassette.calls[evaluate]
        .response
        .clone()
        .unwrap_or_default();
    let after = baked.calls[evaluate].response.clone().unwrap_or_default();
    assert_eq!(before.get("on_plan"), Some(&serde_json::json!(true)));
    assert_eq!(after.get("on_plan"), Some(&serde_json::json!(false)));
}

#[test]
fn an_enum_is_flipped_to_another_variant() {
    let loaded = loaded("closed_loop/happy_path");
    let mut answer =
        serde_json::json!({"task_id": "T-1", "status": "ok", "output": "x", "evidence": []});
    let context = mutate::Context::default();
    assert!(mutate::wrong_value(
        &loaded.spec,
        "StageResult",
        &mut answer,
        &context
    ));
    assert_eq!(answer.get("status"), Some(&serde_json::json!("failed")));
}

fn lead_tool_call(lead: &Loaded) -> Site {
    lead.cassette
        .calls
        .iter()
        .enumerate()
        .find_map(|(index, call)| {
            (!call.tool_calls.is_empty()).then_some(Site::ToolCall {
                call: index,
                tool: 0,
            })
        })
        .unwrap_or_else(|| panic!("no tool call"))
}

#[test]
fn bad_tool_arguments_are_not_run_and_the_model_is_told() {
    let lead = loaded("lead_agent/happy_path");
    let site = lead_tool_call(&lead);
    let played = play_faults(
        &lead,
        &[Fault {
            site,
            kind: FaultKind::ToolBadArgs,
        }],
        limits(&lead),
    );
    let told = played.events.iter().find_map(|event| match &event.kind {
        EventKind::ToolCall { args, result, .. } => Some((args.clone(), result.to_string())),
        _ => None,
    });
    let (args, result) = told.unwrap_or_else(|| panic!("no tool call traced"));
    assert!(args.is_string(), "{args}");
    assert!(result.contains("are not valid JSON"), "{result}");
    assert!(
        result.contains("call it again with one JSON object"),
        "{result}"
    );
    assert!(matches!(played.result, Ok(Ok(_))), "{:?}", played.result);
}

#[test]
fn an_ask_nobody_answers_blocks_the_run_saying_so() {
    let lead = loaded("lead_agent/happy_path");
    let site = Site::Human { human: 0 };
    let played = play_faults(
        &lead,
        &[Fault {
            site,
            kind: FaultKind::HumanTimeout,
        }],
        limits(&lead),
    );
    let ended = outcome(&played);
    assert_eq!(
        (ended.outcome, ended.reason.clone()),
        (Outcome::Blocked, Reason::HumanRejected)
    );
    assert!(
        ended.message.as_deref().is_some_and(
            |message| message.contains("nobody answered the question of step `confirm`")
        ),
        "{ended:?}"
    );
    // Nothing after the question ran: no delivery without the answer.
    assert!(
        !played
            .events
            .iter()
            .any(|event| matches!(event.kind, EventKind::Delivery { .. }))
    );
}

#[test]
fn depth_three_adds_every_three_faults_at_three_sites() {
    let lead = loaded("mention_roles/explicit_business");
    let kinds = [FaultKind::Timeout, FaultKind::ToolError, FaultKind::Auth];
    let singles = singles(&lead.spec, &lead.cassette, &kinds);
    let two = variants(&lead.spec, &lead.cassette, &kinds, 2);
    let three = variants(&lead.spec, &lead.cassette, &kinds, 3);
    let triples: Vec<_> = three.iter().filter(|faults| faults.len() == 3).collect();
    assert_eq!(three.len(), two.len() + triples.len());
    for triple in &triples {
        let mut sites: Vec<Site> = triple.iter().map(|fault| fault.site).collect();
        sites.dedup();
        assert_eq!(sites.len(), 3, "{triple:?}");
    }
    // Two sites here: no three faults at three different sites.
    assert_eq!(faults::sites(&lead.cassette).len(), 2);
    assert!(triples.is_empty());
    assert!(singles.len() > 2);
    let closed = loaded("closed_loop/happy_path");
    let three = variants(&closed.spec, &closed.cassette, &kinds, 3);
    assert!(three.iter().any(|faults| faults.len() == 3));
}

#[test]
fn a_sample_is_drawn_again_by_the_same_seed() {
    let lead = loaded("lead_agent/happy_path");
    let all = FaultKind::ALL;
    let (full, space) = sampled_variants(&lead.spec, &lead.cassette, &all, 2, None, 1);
    assert_eq!(full.len(), space);
    let (one, space_one) = sampled_variants(&lead.spec, &lead.cassette, &all, 2, Some(50), 7);
    let (again, _) = sampled_variants(&lead.spec, &lead.cassette, &all, 2, Some(50), 7);
    let (other, _) = sampled_variants(&lead.spec, &lead.cassette, &all, 2, Some(50), 8);
    assert_eq!(space_one, space);
    assert_eq!(one.len(), 50);
    assert_eq!(one, again);
    assert_ne!(one, other);
    // A sample keeps the order of the whole and holds only its variants.
    let positions: Vec<usize> = one
        .iter()
        .map(|faults| {
            full.iter()
                .position(|whole| whole == faults)
                .unwrap_or(usize::MAX)
        })
        .collect();
    assert!(
        positions.windows(2).all(|pair| pair[0] < pair[1]),
        "{positions:?}"
    );
    // A sample larger than the space is the space.
    let (whole, _) = sampled_variants(&lead.spec, &lead.cassette, &all, 1, Some(100_000), 7);
    assert_eq!(whole, variants(&lead.spec, &lead.cassette, &all, 1));
}

#[test]
fn every_kind_has_a_name_that_parses_and_an_effect() {
    for kind in FaultKind::ALL {
        assert_eq!(kind.name().parse::<FaultKind>(), Ok(kind));
        assert!(kind.effect().len() > 20, "{kind}");
    }
    let error = faults::parse_kinds("tool_timout").err().unwrap_or_default();
    assert!(error.contains("did you mean `tool_timeout`"), "{error}");
}
