//! Tests of exploration on the seed goldens: variants, transient faults, nearest answers, properties.

use std::path::{Path, PathBuf};

use super::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

pub(super) fn loaded(name: &str) -> Loaded {
    let root = root();
    let dir = root.join("golden").join(name);
    match load(&root, &dir) {
        Ok(loaded) => loaded,
        Err(error) => panic!("{name}: {error}"),
    }
}

fn explored(name: &str, depth: u8) -> Exploration {
    let loaded = loaded(name);
    let options = Options {
        depth,
        threads: 1,
        ..Options::default()
    };
    match explore(&loaded, &options, &|_, _| {}) {
        Ok(exploration) => exploration,
        Err(error) => panic!("{name}: {error}"),
    }
}

fn fault_at(loaded: &Loaded, step: &str, item: Option<&str>, kind: FaultKind) -> Fault {
    let call = loaded
        .cassette
        .calls
        .iter()
        .position(|call| call.step == step && call.item.as_deref() == item && call.attempt == 1)
        .unwrap_or_else(|| panic!("no call of {step} {item:?}"));
    Fault {
        site: Site::Call { call },
        kind,
    }
}

pub(super) fn play_faults(loaded: &Loaded, faults: &[Fault], limits: Limits) -> Played {
    let runtime = paused_runtime().unwrap_or_else(|error| panic!("{error}"));
    let cassette = faults::bake(&loaded.spec, &loaded.cassette, faults);
    play(&runtime, loaded, &cassette, limits)
}

pub(super) fn limits(loaded: &Loaded) -> Limits {
    Limits::for_bounds(&charter_compiler::bounds::compute(&loaded.spec))
}

pub(super) fn kinds_of(events: &[TraceEvent], step: &str, item: Option<&str>) -> Vec<String> {
    events
        .iter()
        .filter(|event| event.step.as_deref() == Some(step) && event.item.as_deref() == item)
        .map(|event| {
            let value = serde_json::to_value(&event.kind).unwrap_or_default();
            let kind = value
                .get("kind")
                .and_then(|kind| kind.as_str())
                .unwrap_or("?");
            format!("{kind}@{}", event.attempt.unwrap_or(0))
        })
        .collect()
}

#[test]
fn a_fault_is_transient_the_next_attempt_gets_the_recorded_answer() {
    let loaded = loaded("closed_loop/happy_path");
    let fault = fault_at(&loaded, "execute", Some("T-002"), FaultKind::Timeout);
    let played = play_faults(&loaded, &[fault], limits(&loaded));
    let outcome = match &played.result {
        Ok(Ok(outcome)) => outcome,
        other => panic!("{other:?}"),
    };
    assert_eq!(outcome.termination().to_string(), "completed{gate_passed}");
    let kinds = kinds_of(&played.events, "execute", Some("T-002"));
    assert!(kinds.contains(&"timeout@1".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"model_call@2".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"model_result@2".to_string()), "{kinds:?}");
    // Attempt 2 is not in the recording: it was served the recorded answer of attempt 1.
    let (calls, _) = played.served();
    let second = calls
        .iter()
        .find(|call| {
            call.step == "execute" && call.item.as_deref() == Some("T-002") && call.attempt == 2
        })
        .unwrap_or_else(|| panic!("attempt 2 not served: {calls:?}"));
    let recorded = &loaded.cassette.calls[fault_index(&fault)];
    assert_eq!(second.response, recorded.response);
    let first = calls
        .iter()
        .find(|call| {
            call.step == "execute" && call.item.as_deref() == Some("T-002") && call.attempt == 1
        })
        .unwrap_or_else(|| panic!("attempt 1 not served"));
    assert_eq!(
        first.response, None,
        "the fault itself is served at attempt 1"
    );
}

fn fault_index(fault: &Fault) -> usize {
    match fault.site {
        Site::Call { call } | Site::ToolStep { call } | Site::ToolCall { call, .. } => call,
        Site::Human { human } => human,
    }
}

#[test]
fn every_kind_of_model_fault_shows_in_the_trace() {
    let loaded = loaded("closed_loop/happy_path");
    for (kind, expected) in [
        (FaultKind::Timeout, "timeout@1"),
        (FaultKind::RateLimited, "retry@1"),
        (FaultKind::ServerError, "retry@1"),
        (FaultKind::Malformed, "contract_violation@1"),
        (FaultKind::Contract, "contract_violation@1"),
    ] {
        let fault = fault_at(&loaded, "plan", None, kind);
        let played = play_faults(&loaded, &[fault], limits(&loaded));
        let kinds = kinds_of(&played.events, "plan", None);
        assert!(
            kinds.iter().any(|seen| seen == expected),
            "{kind}: {kinds:?}"
        );
        assert!(
            kinds.contains(&"model_call@2".to_string()),
            "{kind}: {kinds:?}"
        );
    }
}

#[test]
fn a_call_the_recording_lacks_gets_the_nearest_round_of_its_step_and_item() {
    let loaded = loaded("closed_loop/happy_path");
    let provider = provider::ExploreProvider::new(&loaded.cassette, &loaded.cassette, 100);
    let key = crate::engine::provider::CallKey::new("execute")
        .round(3)
        .item("T-001")
        .attempt(2);
    let answer = provider
        .answer_for(&key, false)
        .unwrap_or_else(|| panic!("no answer"));
    assert_eq!((answer.round, answer.attempt), (3, 2));
    assert_eq!(
        answer.response.as_ref().and_then(|r| r.get("task_id")),
        Some(&serde_json::json!("T-001"))
    );
    // Nothing of an item the recording never called.
    let unknown = crate::engine::provider::CallKey::new("execute").item("T-009");
    assert!(provider.answer_for(&unknown, false).is_none());
}

#[test]
fn variants_cover_every_site_and_kind_and_pairs_at_depth_two() {
    let loaded = loaded("lead_agent/happy_path");
    let singles = variants(&loaded.spec, &loaded.cassette, &FaultKind::ALL, 1);
    let sites = faults::sites(&loaded.cassette);
    // Every applicable (site, kind) pair that changes the cassette is one variant.
    for site in &sites {
        for kind in FaultKind::ALL {
            let fault = Fault { site: *site, kind };
            let expected = faults::applies(*site, kind)
                && faults::changes(&loaded.spec, &loaded.cassette, &[fault]);
            assert_eq!(singles.contains(&vec![fault]), expected, "{fault:?}");
        }
    }
    assert!(singles.iter().any(|v| v[0].kind == FaultKind::HumanReject));
    assert!(singles.iter().any(|v| v[0].kind == FaultKind::ToolError));
    let pairs = variants(&loaded.spec, &loaded.cassette, &FaultKind::ALL, 2);
    let n = singles.len();
    let same_site = singles
        .iter()
        .enumerate()
        .flat_map(|(i, a)| {
            singles
                .iter()
                .skip(i + 1)
                .filter(move |b| b[0].site == a[0].site)
        })
        .count();
    assert_eq!(pairs.len(), n + n * (n - 1) / 2 - same_site);
    let only_timeouts = variants(&loaded.spec, &loaded.cassette, &[FaultKind::Timeout], 1);
    assert!(
        only_timeouts
            .iter()
            .all(|v| v[0].kind == FaultKind::Timeout)
    );
    assert!(!only_timeouts.is_empty());
}

#[test]
fn fault_names_parse_with_a_suggestion() {
    assert_eq!(
        faults::parse_kinds("429, timeout,429"),
        Ok(vec![FaultKind::Timeout, FaultKind::RateLimited])
    );
    let error = faults::parse_kinds("timout").err().unwrap_or_default();
    assert!(error.contains("did you mean `timeout`"), "{error}");
    assert!(faults::parse_kinds("").is_err());
}

#[test]
fn the_seed_base_scenarios_keep_every_property() {
    for name in [
        "closed_loop/happy_path",
        "lead_agent/happy_path",
        "agency/all_orders_pass",
        "auto_agent/pass_first_time",
    ] {
        let exploration = explored(name, 1);
        assert!(exploration.variants.len() > 5, "{name}");
        assert!(
            !exploration.any_violation(),
            "{name}: {:?}",
            exploration.violations().collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_repair_ask_rerun_stays_within_the_bounds() {
    // The person approves a retry: `work` and `audit` run twice. The worst case used to
    // count them once (an `ask` arm has no edge in the flow graph), so this recording
    // itself, and every variant of it, broke P2 with 6 steps over a worst case of 4. Now
    // `rounds 2` allows three rounds of work, audit, summarize, proofread and vet, plus
    // plan and deliver: 17.
    let exploration = explored("agency/person_approves_retry", 1);
    assert_eq!(exploration.bounds.total.steps, Some(17));
    assert!(
        !exploration.any_violation(),
        "{:?} {:?}",
        exploration.base_violations,
        exploration.violations().collect::<Vec<_>>()
    );
}

#[test]
fn outcome_changes_are_counted_against_the_base() {
    let exploration = explored("workflow_runner/rule_engine_sends_back", 1);
    let rows = exploration.rows();
    let total: usize = rows.values().map(|row| row[0]).sum();
    assert_eq!(total, exploration.variants.len());
    let changes = exploration.changes();
    let changed: usize = rows.values().map(|row| row[2]).sum();
    assert_eq!(changes.values().map(Vec::len).sum::<usize>(), changed);
    assert!(
        changed > 0,
        "a 429 on the operator's only attempt fails the step"
    );
}

/// The properties, each shown to catch what it is for on a real run's trace.
mod properties_catch {
    use super::*;
    use crate::formats::trace::EventKind;

    fn base(name: &str) -> (Loaded, RunOutcome, Vec<TraceEvent>) {
        let loaded = loaded(name);
        let played = play_faults(&loaded, &[], limits(&loaded));
        match played.result {
            Ok(Ok(outcome)) => (loaded, outcome, played.events),
            other => panic!("{other:?}"),
        }
    }

    fn properties(violations: &[Violation]) -> Vec<Property> {
        violations
            .iter()
            .map(|violation| violation.property)
            .collect()
    }

    #[test]
    fn nothing_on_the_base() {
        let (loaded, outcome, events) = base("closed_loop/happy_path");
        let bounds = charter_compiler::bounds::compute(&loaded.spec);
        assert_eq!(
            properties::check(&loaded.spec, &bounds, &outcome, &events),
            []
        );
    }

    #[test]
    fn p2_more_calls_or_steps_than_the_worst_case() {
        let (loaded, outcome, events) = base("closed_loop/happy_path");
        let mut bounds = charter_compiler::bounds::compute(&loaded.spec);
        bounds.total.calls = Some(4);
        bounds.total.steps = Some(2);
        bounds.total.wall_ms = Some(1_000);
        let violations = properties::check(&loaded.spec, &bounds, &outcome, &events);
        assert_eq!(properties(&violations), [Property::P2; 3], "{violations:?}");
        assert!(
            violations[0].message.starts_with("5 model calls"),
            "{violations:?}"
        );
    }

    #[test]
    fn p3_a_delivery_whose_gate_failed_a_hard_rule() {
        let (loaded, outcome, mut events) = base("closed_loop/happy_path");
        for event in &mut events {
            if let EventKind::Gate { rules, .. } = &mut event.kind {
                for rule in rules.iter_mut() {
                    rule.holds = false;
                }
            }
        }
        let bounds = charter_compiler::bounds::compute(&loaded.spec);
        let violations = properties::check(&loaded.spec, &bounds, &outcome, &events);
        assert_eq!(properties(&violations), [Property::P3], "{violations:?}");
    }

    #[test]
    fn p4_a_call_after_the_tokens_ran_out() {
        let (loaded, outcome, events) = base("closed_loop/happy_path");
        let mut spec = (*loaded.spec).clone();
        spec.budget.tokens = Some(2_000);
        let bounds = charter_compiler::bounds::compute(&spec);
        let violations = properties::check(&spec, &bounds, &outcome, &events);
        assert!(
            properties(&violations).contains(&Property::P4),
            "{violations:?}"
        );
        assert!(
            violations
                .iter()
                .any(|v| v.message.contains("`budget.tokens` ran out"))
        );
    }

    #[test]
    fn p5_a_broken_invariant() {
        let (loaded, outcome, mut events) = base("closed_loop/happy_path");
        let mut broken = events[events.len() - 2].clone();
        broken.kind = EventKind::InvariantViolated {
            invariant: "x".to_string(),
            message: "false".to_string(),
        };
        events.insert(events.len() - 1, broken);
        let bounds = charter_compiler::bounds::compute(&loaded.spec);
        let violations = properties::check(&loaded.spec, &bounds, &outcome, &events);
        assert_eq!(properties(&violations), [Property::P5], "{violations:?}");
    }

    #[test]
    fn p1_a_run_past_the_call_limit_or_the_virtual_time_limit() {
        let loaded = loaded("closed_loop/happy_path");
        let bounds = charter_compiler::bounds::compute(&loaded.spec);
        let tight = Limits {
            calls: 2,
            virtual_time: Duration::from_secs(3_600),
        };
        let played = play_faults(&loaded, &[], tight);
        let (ending, violations) = judge(&loaded, &bounds, tight, &played);
        assert_eq!(ending, Ending::Broken);
        assert!(
            violations[0].message.contains("more than 2 model calls"),
            "{violations:?}"
        );
        let short = Limits {
            calls: 100,
            virtual_time: Duration::from_secs(10),
        };
        let played = play_faults(&loaded, &[], short);
        let (ending, violations) = judge(&loaded, &bounds, short, &played);
        assert_eq!(ending, Ending::Broken);
        assert!(
            violations[0].message.contains("did not end within"),
            "{violations:?}"
        );
    }

    #[test]
    fn p5_on_a_seed_whose_invariant_a_fault_breaks() {
        let exploration = explored("closed_loop/invariant_tokens", 1);
        assert!(exploration.any_violation());
        assert!(exploration.violations().all(|variant| {
            variant
                .violations
                .iter()
                .any(|v| v.property == Property::P5)
        }));
    }
}

#[test]
fn saved_scenarios_replay_to_what_they_expect_with_the_ordinary_replay() {
    let loaded = loaded("lead_agent/happy_path");
    let exploration = explored("lead_agent/happy_path", 1);
    let changes = exploration.changes().len();
    assert!(changes > 0);
    let temp = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
    let saved =
        save::save(&loaded, &exploration, temp.path()).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        saved.len(),
        changes,
        "one per distinct outcome change (no violation)"
    );
    for scenario in &saved {
        // Read back from disk: a scenario, a cassette and a trace the harness can check.
        let again = load(&loaded.root, &scenario.dir).unwrap_or_else(|error| panic!("{error}"));
        let expect = again.scenario.expect.clone().unwrap_or_default();
        let replayed = crate::harness::replay_scenario(
            &again.spec,
            &again.scenario,
            &std::sync::Arc::new(again.cassette.clone()),
            &again.root,
        )
        .unwrap_or_else(|failure| panic!("{}", failure.error));
        assert_eq!(Some(replayed.outcome.outcome), expect.outcome);
        assert_eq!(Some(replayed.outcome.reason.clone()), expect.reason);
        assert_eq!(
            scenario.replayed,
            replayed.outcome.termination().to_string()
        );
        assert!(
            replayed.unused_calls.is_empty(),
            "{:?}",
            replayed.unused_calls
        );
        let snap = std::fs::read_to_string(scenario.dir.join("trace.snap")).unwrap_or_default();
        assert_eq!(
            crate::harness::snapshot::contents(&snap),
            replayed.trace.trim_end()
        );
        assert_eq!(scenario.faults.len(), 1);
    }
}

#[test]
fn a_pair_is_shrunk_to_the_one_fault_that_changes_the_outcome() {
    let loaded = loaded("lead_agent/happy_path");
    let exploration = explored("lead_agent/happy_path", 2);
    let chosen = save::chosen(&loaded, &exploration);
    assert!(!chosen.is_empty());
    // Every outcome change a pair reaches, a single fault reaches too here.
    assert!(
        chosen.iter().all(|(_, faults)| faults.len() == 1),
        "{chosen:?}"
    );
    // A pair whose outcome no single fault gives stays a pair: none in this scenario, so
    // check the shrinker keeps a pair when neither half reproduces.
    let pair = exploration
        .variants
        .iter()
        .find(|variant| variant.faults.len() == 2)
        .unwrap_or_else(|| panic!("no pair"));
    let kept = save::shrink(pair, |_| false);
    assert_eq!(kept.len(), 2);
}

#[test]
fn tool_faults_show_in_the_trace() {
    // A tool call inside a model call: its error or its timeout is what the model was told.
    let lead = loaded("lead_agent/happy_path");
    let (call, tool) = lead
        .cassette
        .calls
        .iter()
        .enumerate()
        .find_map(|(index, call)| (!call.tool_calls.is_empty()).then_some((index, 0)))
        .unwrap_or_else(|| panic!("no tool call"));
    let site = Site::ToolCall { call, tool };
    let error = play_faults(
        &lead,
        &[Fault {
            site,
            kind: FaultKind::ToolError,
        }],
        limits(&lead),
    );
    let results: Vec<String> = error
        .events
        .iter()
        .filter_map(|event| match &event.kind {
            crate::formats::trace::EventKind::ToolCall { result, .. } => Some(result.to_string()),
            _ => None,
        })
        .collect();
    assert!(
        results
            .iter()
            .any(|result| result.contains("the tool failed (explore fault)")),
        "{results:?}"
    );
    // A tool with a `timeout` (start_workflow, 1m): cut, it is traced as `tool_timeout`.
    let timed = lead
        .cassette
        .calls
        .iter()
        .enumerate()
        .find_map(|(index, call)| {
            call.tool_calls
                .iter()
                .position(|tool| {
                    lead.spec
                        .tools
                        .get(&tool.tool)
                        .is_some_and(|tool| tool.timeout_ms.is_some())
                })
                .map(|tool| Site::ToolCall { call: index, tool })
        })
        .unwrap_or_else(|| panic!("no tool call with a timeout"));
    let timeout = play_faults(
        &lead,
        &[Fault {
            site: timed,
            kind: FaultKind::ToolTimeout,
        }],
        limits(&lead),
    );
    assert!(timeout.events.iter().any(|event| matches!(
        event.kind,
        crate::formats::trace::EventKind::ToolTimeout { .. }
    )));
    // A `tool` step's call: its error reaches the flow.
    let runner = loaded("workflow_runner/rule_engine_sends_back");
    let call = runner
        .cassette
        .calls
        .iter()
        .position(|call| call.tool.is_some())
        .unwrap_or_else(|| panic!("no tool step"));
    let played = play_faults(
        &runner,
        &[Fault {
            site: Site::ToolStep { call },
            kind: FaultKind::ToolError,
        }],
        limits(&runner),
    );
    let text = crate::formats::trace::to_jsonl(&played.events).unwrap_or_default();
    assert!(text.contains("the tool failed (explore fault)"), "{text}");
}

#[test]
fn a_conversation_is_explored_turn_by_turn() {
    let loaded = loaded("mention_roles/conversation_sticky_creative");
    let exploration = explored("mention_roles/conversation_sticky_creative", 1);
    assert!(
        !exploration.any_violation(),
        "{:?}",
        exploration.base_violations
    );
    assert_eq!(exploration.base.to_string(), "completed{done}");
    // A fault in turn 2 shows in turn 2's run, and turn 3 still runs after it.
    let call = loaded
        .cassette
        .calls
        .iter()
        .position(|call| call.turn == 2)
        .unwrap_or_else(|| panic!("no call in turn 2"));
    let fault = Fault {
        site: Site::Call { call },
        kind: FaultKind::Timeout,
    };
    assert!(
        fault
            .describe(&loaded.cassette)
            .starts_with("timeout at turn 2 {step:")
    );
    let played = play_faults(&loaded, &[fault], limits(&loaded));
    assert_eq!(played.turns.len(), 3);
    let second = played.turns[1].1.clone();
    assert!(
        played.events[second]
            .iter()
            .any(|event| matches!(event.kind, crate::formats::trace::EventKind::Timeout { .. }))
    );
    let (calls, _) = played.served();
    assert!(calls.iter().any(|call| call.turn == 3));
}
