//! Tests of a fork: parsing and checking `STEP[@ROUND]`, and the switch from the cassette to the live provider at the first request of the fork point, in run order.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::engine::provider::{CallKey, ModelOutput, Usage};
use crate::testing::{EXAMPLE_CASSETTE, LOOP_SPEC, compile_spec};

fn cassette() -> Cassette {
    Cassette::from_yaml("cassette.yaml", EXAMPLE_CASSETTE).unwrap_or_else(|error| panic!("{error}"))
}

fn request(key: CallKey) -> ModelRequest {
    ModelRequest {
        key,
        role: "executor".into(),
        model: "openai:m".into(),
        prompt: "do it".into(),
        chat: None,
        output_schema: std::sync::Arc::new(json!({})),
        tools: vec![],
        max_tool_calls: None,
        previous_error: None,
        settings: Default::default(),
        log: Default::default(),
    }
}

/// A live provider that answers every call with `{"live": STEP}` and notes the keys asked.
#[derive(Default)]
struct Live {
    asked: Mutex<Vec<CallKey>>,
}

impl Provider for &Live {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
        let answer = json!({"live": request.key.step});
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(request.key);
        }
        Box::pin(async move {
            Ok(ModelResponse {
                output: ModelOutput::Json(answer),
                usage: Usage::default(),
                tool_calls: vec![],
                latency: Duration::ZERO,
            })
        })
    }
}

/// A person who always declines.
struct Declines;

impl HumanChannel for Declines {
    fn ask(&self, _request: HumanRequest) -> BoxFuture<'_, Result<Value, ProviderError>> {
        Box::pin(async { Ok(json!({"approved": false})) })
    }
}

fn output(response: Result<ModelResponse, ProviderError>) -> Value {
    match response {
        Ok(ModelResponse {
            output: ModelOutput::Json(value),
            ..
        }) => value,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_fork_point_is_a_step_and_round_one_unless_a_round_follows_an_at_sign() {
    assert_eq!(
        ForkPoint::parse("evaluate"),
        Ok(ForkPoint {
            step: "evaluate".into(),
            round: 1
        })
    );
    assert_eq!(
        ForkPoint::parse("evaluate@3").map(|point| point.to_string()),
        Ok("evaluate@3".to_string())
    );
    for bad in ["evaluate@", "evaluate@0", "evaluate@two", "evaluate@-1"] {
        let error = ForkPoint::parse(bad).err().unwrap_or_default();
        assert!(error.contains("whole number from 1"), "{bad}: {error}");
    }
    let error = ForkPoint::parse("@2").err().unwrap_or_default();
    assert!(error.contains("name the step"), "{error}");
}

#[test]
fn a_step_the_spec_lacks_is_refused_with_did_you_mean() {
    let spec = compile_spec(LOOP_SPEC);
    let error = ForkPoint::parse("reveiw")
        .and_then(|point| point.check(&spec, &cassette()))
        .err()
        .unwrap_or_default();
    assert!(error.contains("has no step `reveiw`"), "{error}");
    assert!(error.contains("did you mean `review`?"), "{error}");
}

#[test]
fn a_point_the_recording_never_reaches_names_the_ones_it_has() {
    let spec = compile_spec(LOOP_SPEC);
    let error = ForkPoint::parse("execute@3")
        .and_then(|point| point.check(&spec, &cassette()))
        .err()
        .unwrap_or_default();
    assert!(
        error.contains("never reaches step `execute` in round 3"),
        "{error}"
    );
    assert!(error.contains("plan@1, execute@1, execute@2"), "{error}");
    let reached = ForkPoint::parse("execute@2").and_then(|point| point.check(&spec, &cassette()));
    assert_eq!(reached, Ok(()));
}

#[tokio::test]
async fn calls_before_the_fork_point_come_from_the_cassette_and_the_rest_go_live() {
    let live = Live::default();
    let fork = Fork::new(
        cassette(),
        ForkPoint::parse("execute@2").unwrap_or_else(|e| panic!("{e}")),
    );
    let provider = fork.provider(&live);
    // Before the fork point: the recording's answer, at once, whatever its latency.
    let plan = output(provider.complete(request(CallKey::new("plan"))).await);
    assert_eq!(plan, json!({"goal": "g", "tasks": []}));
    assert!(!fork.reached());
    // The fork point: live, and everything after it too, recorded or not.
    let key = CallKey::new("execute").item("T-001").round(2).role("judge");
    assert_eq!(
        output(provider.complete(request(key)).await),
        json!({"live": "execute"})
    );
    assert_eq!(
        output(provider.complete(request(CallKey::new("plan"))).await),
        json!({"live": "plan"})
    );
    assert!(fork.reached());
    assert_eq!((fork.replayed(), fork.asked_live()), (1, 2));
    let asked = live
        .asked
        .lock()
        .map(|asked| asked.len())
        .unwrap_or_default();
    assert_eq!(asked, 2, "the call before the fork point asked no model");
}

#[tokio::test]
async fn a_call_before_the_fork_point_the_cassette_lacks_is_not_asked_live() {
    let live = Live::default();
    let fork = Fork::new(
        cassette(),
        ForkPoint::parse("execute@2").unwrap_or_else(|e| panic!("{e}")),
    );
    let provider = fork.provider(&live);
    let missing = provider.complete(request(CallKey::new("review"))).await;
    assert!(
        matches!(missing, Err(ProviderError::NotRecorded { .. })),
        "{missing:?}"
    );
    assert!(
        live.asked
            .lock()
            .map(|asked| asked.is_empty())
            .unwrap_or_default()
    );
}

#[tokio::test]
async fn questions_before_the_fork_point_are_answered_from_the_recording() {
    let fork = Fork::new(
        cassette(),
        ForkPoint::parse("execute@2").unwrap_or_else(|e| panic!("{e}")),
    );
    let humans = fork.humans(Declines);
    let question = |step: &str, round: u64| HumanRequest {
        step: step.into(),
        round,
        attempt: 1,
        question: "ok?".into(),
    };
    let recorded = humans.ask(question("confirm", 1)).await;
    assert_eq!(recorded, Ok(json!({"approved": true})));
    // A question of the fork point goes live, and so does the next.
    assert_eq!(
        humans.ask(question("execute", 2)).await,
        Ok(json!({"approved": false}))
    );
    assert_eq!(
        humans.ask(question("confirm", 1)).await,
        Ok(json!({"approved": false}))
    );
}

#[tokio::test]
async fn all_live_asks_the_provider_for_every_call_and_the_cassette_for_its_answers_of_people() {
    let live = Live::default();
    let fork = Fork::all(cassette());
    let provider = fork.provider(&live);
    // `plan` is recorded, and is asked live all the same.
    assert_eq!(
        output(provider.complete(request(CallKey::new("plan"))).await),
        json!({"live": "plan"})
    );
    let humans = fork.humans(Declines);
    let question = |step: &str| HumanRequest {
        step: step.into(),
        round: 1,
        attempt: 1,
        question: "ok?".into(),
    };
    // A person's recorded answer is replayed; a question the cassette lacks goes live.
    assert_eq!(
        humans.ask(question("confirm")).await,
        Ok(json!({"approved": true}))
    );
    assert_eq!(
        humans.ask(question("review")).await,
        Ok(json!({"approved": false}))
    );
    assert!(fork.reached());
    assert_eq!((fork.replayed(), fork.asked_live()), (1, 2));
    assert_eq!(fork.at(), None);
}
