//! The repair decision for the scheduler: [`crate::engine::repair::decide_repair`] (strongest action, most upstream rerun) plus the items a rerun is limited to.
//!
//! A rerun of step X is limited to the items its issues name (and their dependents) when
//! every issue that asks for that rerun names items; one issue naming none reruns the
//! whole step.

use std::collections::BTreeMap;

use charter_compiler::graph::{ActionIr, RepairIr};

use super::gate::Judged;
use crate::engine::repair::{RepairDecision, action_for, decide_repair};

/// What the repair table decides for a failed gate.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// `block "reason"`: stop as `blocked`; `code` is the issue that asked for it.
    Block { reason: String, code: String },
    /// `fail "reason"`: stop as `failed`.
    Fail { reason: String, code: String },
    /// `ask "question"`: a person decides whether to go on repairing.
    Ask {
        question: String,
        codes: Vec<String>,
    },
    /// `replan`: run the flow again from its entry step.
    Replan { codes: Vec<String> },
    /// `rerun STEP`, limited to `items` (and their dependents) when not empty.
    Rerun {
        step: String,
        with_feedback: bool,
        items: Vec<String>,
        codes: Vec<String>,
    },
    /// No error-level issue maps to an action.
    NoAction,
}

/// The repair table as a policy.
#[derive(Clone, Copy, Debug)]
pub struct RepairPolicy<'a> {
    pub table: &'a RepairIr,
    /// The flow's steps ranked upstream first ([`crate::engine::repair::flow_order`]).
    pub order: &'a BTreeMap<&'a str, usize>,
}

impl RepairPolicy<'_> {
    /// Decides what to do about a failed gate's evaluation (its error-level issues).
    pub fn decide(&self, judged: &Judged) -> Decision {
        self.decide_codes(judged, &judged.error_codes())
    }

    /// Decides what the arms of `issue_codes` (the error-level issues of a failed gate, or
    /// the warnings of a passed one) call for.
    pub fn decide_codes(&self, judged: &Judged, issue_codes: &[String]) -> Decision {
        let (action, codes) = match decide_repair(self.table, issue_codes, self.order) {
            RepairDecision::NoAction => return Decision::NoAction,
            RepairDecision::Act { action, codes } => (action, codes),
        };
        let first = codes.first().cloned().unwrap_or_default();
        match action {
            ActionIr::Block { reason } => Decision::Block {
                reason,
                code: first,
            },
            ActionIr::Fail { reason } => Decision::Fail {
                reason,
                code: first,
            },
            ActionIr::Ask { question } => Decision::Ask { question, codes },
            ActionIr::Replan => Decision::Replan { codes },
            ActionIr::Accept => Decision::NoAction,
            ActionIr::Rerun {
                step,
                with_feedback,
            } => {
                let mine: Vec<&String> = codes
                    .iter()
                    .filter(|code| {
                        matches!(action_for(self.table, code), Some(ActionIr::Rerun { step: s, .. }) if *s == step)
                    })
                    .collect();
                let named: Vec<Option<&Vec<String>>> = mine
                    .iter()
                    .map(|code| judged.items.get(*code).filter(|items| !items.is_empty()))
                    .collect();
                let items = if named.is_empty() || named.iter().any(Option::is_none) {
                    Vec::new()
                } else {
                    let mut items: Vec<String> =
                        named.into_iter().flatten().flatten().cloned().collect();
                    items.sort();
                    items.dedup();
                    items
                };
                Decision::Rerun {
                    step,
                    with_feedback,
                    items,
                    codes,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {

    use charter_compiler::graph::NameIr;
    use charter_compiler::{MemoryLoader, compile};
    use serde_json::json;

    use super::*;
    use crate::engine::eval::Bindings;
    use crate::engine::run::gate::judge;

    const SPEC: &str = r#"spec t version "1"
contract Request { goal: string }
contract Plan { tasks: list<Order> }
contract Order { id: string  depends_on: list<string> = [] }
contract Out { id: string  status: ok | failed  text: string }
contract Review { score: int(0..=10) }
role planner { model: "openai:m"  prompt: """p"""  input: Request  output: Plan }
role worker { model: "openai:m"  prompt: """w"""  input: Order  output: Out }
role judge_role { model: "openai:m"  prompt: """j"""  input: Candidate  output: Review }
role fin { model: "openai:m"  prompt: """f"""  input: Candidate  output: Delivery }
gate g on work {
  hard all_done: len(candidate.failed) == 0 and len(candidate.skipped) == 0 else FAILED
  hard all_ok:   every r in candidate.items: r.status == ok                  else NOT_OK
  hard short:    every r in candidate.items: len(r.text) < 10                else TOO_LONG
  score quality weight 1: review.score below 6 LOW
  pass when score >= 6
}
repair {
  rounds 2
  FAILED, NOT_OK -> rerun work
  TOO_LONG       -> rerun work with feedback
  LOW            -> replan
}
flow {
  plan = planner(request) -> work
  work = each t in plan.tasks: worker(t) -> review
  review = judge_role(candidate) -> check
  check = gate g pass -> deliver fail -> repair
  deliver = finalize fin(best) -> done
}
"#;

    fn decide(items: serde_json::Value, failed: &[&str], score: i64) -> Decision {
        let compilation = compile("t.charter", SPEC, &MemoryLoader::default());
        let spec = compilation
            .spec
            .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
        let gate = spec.gates.get("g").unwrap_or_else(|| panic!("no gate"));
        let ids: Vec<String> = items
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|item| item["id"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default();
        let failed: Vec<String> = failed.iter().map(|id| id.to_string()).collect();
        let mut bindings = Bindings::default();
        bindings.set(
            NameIr::Candidate,
            json!({"items": items, "failed": failed, "skipped": [], "text": "", "id": "c1", "round": 1, "hash": ""}),
        );
        bindings.set(NameIr::Step("review".to_string()), json!({"score": score}));
        let judged = judge("g", gate, &bindings, &ids, &failed);
        let order = crate::engine::repair::flow_order(&spec.flow);
        let policy = RepairPolicy {
            table: spec.repair.as_ref().unwrap_or_else(|| panic!("no repair")),
            order: &order,
        };
        policy.decide(&judged)
    }

    fn rerun_items(decision: &Decision) -> (String, bool, Vec<String>) {
        match decision {
            Decision::Rerun {
                step,
                with_feedback,
                items,
                ..
            } => (step.clone(), *with_feedback, items.clone()),
            other => panic!("not a rerun: {other:?}"),
        }
    }

    #[test]
    fn a_rerun_names_the_items_its_issues_name() {
        let items = json!([
            {"id": "A", "status": "ok", "text": "short"},
            {"id": "B", "status": "failed", "text": "short"},
            {"id": "C", "status": "ok", "text": "far too long a text"},
        ]);
        let decision = decide(items, &["D"], 8);
        assert_eq!(
            rerun_items(&decision),
            (
                "work".to_string(),
                true,
                vec!["B".to_string(), "C".to_string(), "D".to_string()]
            )
        );
    }

    #[test]
    fn the_strongest_action_wins_over_reruns() {
        let items = json!([{"id": "A", "status": "failed", "text": "x"}]);
        assert!(matches!(decide(items, &[], 2), Decision::Replan { .. }));
    }

    #[test]
    fn a_passing_candidate_asks_for_nothing() {
        let items = json!([{"id": "A", "status": "ok", "text": "x"}]);
        assert_eq!(decide(items, &[], 8), Decision::NoAction);
    }
}
