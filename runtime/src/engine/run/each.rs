//! Work items: the `each` step's task DAG (petgraph) with concurrency, context isolation, per-item checks with stage retries, partial success and skipped dependents — and the same driver for a single role call.
//!
//! Ready items start in id order up to `concurrency`. Each worker gets its own item and the
//! outputs of its dependencies, nothing else. Replies that arrive at the same instant are
//! applied in item id order, so a replay's trace does not depend on task wake order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use charter_compiler::graph::{ItemCheckIr, NameIr};
use serde_json::{Map, Value};

use super::gate::judge;
use super::state::{ItemRecord, ItemStatus};
use super::step::{CallUnit, CallUpdate, JobBody};
use super::{Halt, Scheduler, Stop};
use crate::engine::dag::WorkDag;
use crate::formats::canonical::hash_value;
use crate::formats::trace::{self, EventKind, Outcome, Reason, RetryKind};

/// Where a work item stands.
#[derive(Clone, Debug)]
pub enum WorkState {
    /// Not started (dependencies pending, or no free slot).
    Waiting,
    /// The step's role is being called (provider retries included).
    Exec(CallUnit),
    /// The per-item check's judge is being called on `output`.
    Judge { unit: CallUnit, output: Value },
    /// Finished.
    Settled(ItemStatus),
}

/// One work item.
#[derive(Clone, Debug)]
pub struct Work {
    /// The item id (`None` for a single role call).
    pub id: Option<String>,
    /// The item value (the `each` variable).
    pub value: Value,
    pub depends_on: Vec<String>,
    /// The role's inputs for this item (shared with each call's prompt).
    pub inputs: Vec<Arc<Value>>,
    pub state: WorkState,
    pub stage_retries_used: u64,
    /// The feedback this item runs with (a repair, a person's answer), for every call.
    /// As its prompts see it ([`crate::engine::feedback::Feedback::into_value`]).
    pub feedback: Option<Arc<Value>>,
    /// The outputs of the item's dependencies, by id (set when the item starts).
    pub context: Map<String, Value>,
}

impl Work {
    fn running(&self) -> bool {
        matches!(self.state, WorkState::Exec(_) | WorkState::Judge { .. })
    }
}

/// The work items of an `each` over `list`, in id order, with their dependencies (built
/// and checked by [`WorkDag::build`]: a cycle, a repeated id or a missing dependency is an
/// error message).
pub fn build_items(list: &[Value]) -> Result<Vec<(String, Value, Vec<String>)>, String> {
    let dag = WorkDag::build(list).map_err(|error| error.to_string())?;
    Ok(dag
        .ids()
        .into_iter()
        .map(|id| {
            let value = dag.item(&id).cloned().unwrap_or(Value::Null);
            let depends_on = dag.dependencies(&id);
            (id, value, depends_on)
        })
        .collect())
}

impl Scheduler<'_> {
    /// Runs `works` to completion: starts ready items in order up to `concurrency`,
    /// applies replies in item id order, runs checks and stage retries, and skips the
    /// dependents of failed items.
    pub(super) async fn drive(
        &mut self,
        step: &str,
        role: &str,
        works: &mut [Work],
        concurrency: u64,
        check: Option<&ItemCheckIr>,
    ) -> Result<(), Halt> {
        let concurrency = concurrency.max(1) as usize;
        // Which work each job belongs to.
        let mut owners: BTreeMap<u64, usize> = BTreeMap::new();
        loop {
            self.skip_dependents(step, works)?;
            let mut running = works.iter().filter(|work| work.running()).count();
            for index in 0..works.len() {
                if running >= concurrency {
                    break;
                }
                let ready = works.get(index).is_some_and(|work| {
                    matches!(work.state, WorkState::Waiting)
                        && work.depends_on.iter().all(|dependency| {
                            works.iter().any(|other| {
                                other.id.as_deref() == Some(dependency.as_str())
                                    && matches!(
                                        other.state,
                                        WorkState::Settled(ItemStatus::Done(_))
                                    )
                            })
                        })
                });
                if !ready {
                    continue;
                }
                let context = dependency_outputs(works, index);
                let Some(work) = works.get_mut(index) else {
                    continue;
                };
                let mut unit = CallUnit::new(step, work.id.as_deref(), role, work.inputs.clone());
                unit.feedback = work.feedback.clone();
                unit.context = context.clone();
                work.context = context;
                let job = self.issue_attempt(&mut unit)?;
                owners.insert(job, index);
                work.state = WorkState::Exec(unit);
                running += 1;
            }
            if running == 0 {
                return Ok(());
            }
            let batch = self.wait_batch(&owners, works).await?;
            for message in batch {
                let Some(index) = owners.remove(&message.job) else {
                    continue;
                };
                self.handles.remove(&message.job);
                let new_job = self.apply(step, works, index, message.body, check).await?;
                if let Some(job) = new_job {
                    owners.insert(job, index);
                }
            }
            self.after_batch()?;
        }
    }

    /// Applies one job's message to work `index`; returns the job that now runs for it.
    async fn apply(
        &mut self,
        step: &str,
        works: &mut [Work],
        index: usize,
        body: JobBody,
        check: Option<&ItemCheckIr>,
    ) -> Result<Option<u64>, Halt> {
        let Some(work) = works.get_mut(index) else {
            return Ok(None);
        };
        let state = std::mem::replace(&mut work.state, WorkState::Waiting);
        let (mut unit, judging) = match state {
            WorkState::Exec(unit) => (unit, None),
            WorkState::Judge { unit, output } => (unit, Some(output)),
            other => {
                work.state = other;
                return Ok(None);
            }
        };
        let update = match body {
            JobBody::Wake => {
                let job = self.issue_attempt(&mut unit)?;
                work.state = match judging {
                    None => WorkState::Exec(unit),
                    Some(output) => WorkState::Judge { unit, output },
                };
                return Ok(Some(job));
            }
            JobBody::Reply(result, log) => self.on_reply(&mut unit, result, log)?,
        };
        if judging.is_none() && matches!(update, CallUpdate::Output(_)) {
            // The files the successful attempt wrote belong to the item's output.
            let item = work.id.clone().unwrap_or_default();
            let files = self
                .state
                .artifacts
                .entry((step.to_string(), self.state.round))
                .or_default();
            if unit.artifacts.is_empty() {
                files.remove(&item);
            } else {
                files.insert(item, unit.artifacts.clone());
            }
        }
        let job = match update {
            CallUpdate::Retrying => {
                work.state = match judging {
                    None => WorkState::Exec(unit),
                    Some(output) => WorkState::Judge { unit, output },
                };
                // The timer job was registered by `on_reply` as the newest job.
                return Ok(Some(self.last_job));
            }
            CallUpdate::Failed(reason) => {
                let reason = if judging.is_some() {
                    format!("the check's judge failed: {reason}")
                } else {
                    reason
                };
                self.settle(step, work, ItemStatus::Failed(reason))?;
                None
            }
            CallUpdate::Output(output) => match (judging, check) {
                (None, None) => {
                    self.settle(step, work, ItemStatus::Done(output))?;
                    None
                }
                (None, Some(check)) => match &check.by {
                    Some(by) => {
                        let inputs = self.judge_inputs(by, &work.value, &output);
                        let mut judge = CallUnit::new(
                            step,
                            work.id.as_deref(),
                            by,
                            inputs.into_iter().map(Arc::new).collect(),
                        );
                        judge.key_role = Some(by.clone());
                        let job = self.issue_attempt(&mut judge)?;
                        work.state = WorkState::Judge {
                            unit: judge,
                            output,
                        };
                        Some(job)
                    }
                    None => self.run_check(step, work, check, output, None)?,
                },
                (Some(item_output), Some(check)) => {
                    self.run_check(step, work, check, item_output, Some(output))?
                }
                (Some(item_output), None) => {
                    self.settle(step, work, ItemStatus::Done(item_output))?;
                    None
                }
            },
        };
        Ok(job)
    }

    /// Evaluates the per-item check on `output` (with the judge's `verdict`): passes,
    /// retries the item with the check's issues as feedback, or fails it.
    fn run_check(
        &mut self,
        step: &str,
        work: &mut Work,
        check: &ItemCheckIr,
        output: Value,
        verdict: Option<Value>,
    ) -> Result<Option<u64>, Halt> {
        let spec = self.spec;
        let Some(gate) = spec.gates.get(&check.gate) else {
            return Err(Halt::Error(super::RunError::Flow(format!(
                "unknown check gate `{}`",
                check.gate
            ))));
        };
        let mut bindings = self.bindings();
        bindings.set(NameIr::Item, output.clone());
        if let (Some(by), Some(verdict)) = (&check.by, verdict) {
            bindings.set(NameIr::ByRole(by.clone()), verdict);
        }
        let result = judge(&check.gate, gate, &bindings, &[], &[]);
        let item_id = work.id.clone().unwrap_or_default();
        let mut feedback = crate::engine::feedback::Feedback::new(
            crate::engine::feedback::Reason::Check,
            self.state.round,
        );
        feedback.issues = result.issues(work.id.as_deref());
        feedback.judges = self.judges_of(gate, &bindings);
        if let Some(by) = &check.by
            && let Some(verdict) =
                crate::engine::eval::Env::get(&bindings, &NameIr::ByRole(by.clone()))
        {
            feedback.judges.insert(by.clone(), verdict.clone());
        }
        feedback.previous = Some(output.clone());
        feedback.human = work
            .feedback
            .as_deref()
            .and_then(crate::engine::feedback::Feedback::human_in);
        let event = result.event(&item_id, &hash_value(&output), Some(&item_id));
        self.emit_item(step, work.id.as_deref(), event)?;
        if result.passed() {
            self.settle(step, work, ItemStatus::Done(output))?;
            return Ok(None);
        }
        if work.stage_retries_used >= check.retries {
            let reason = format!(
                "failed check `{}`: {}",
                check.gate,
                result.error_codes().join(", ")
            );
            self.settle(step, work, ItemStatus::Failed(reason))?;
            return Ok(None);
        }
        work.stage_retries_used += 1;
        let role = self.step_role(step);
        let next = self
            .state
            .attempts
            .get(&(step.to_string(), self.state.round, work.id.clone(), None))
            .copied()
            .unwrap_or(0)
            + 1;
        self.emit_item(
            step,
            work.id.as_deref(),
            EventKind::Retry {
                retry: RetryKind::Stage,
                next,
                delay_ms: 0,
                reason: format!(
                    "check `{}` failed: {} (stage retry {} of {})",
                    check.gate,
                    result.error_codes().join(", "),
                    work.stage_retries_used,
                    check.retries
                ),
            },
        )?;
        let mut unit = CallUnit::new(step, work.id.as_deref(), &role, work.inputs.clone());
        unit.feedback = Some(Arc::new(feedback.into_value()));
        unit.context = work.context.clone();
        let job = self.issue_attempt(&mut unit)?;
        work.state = WorkState::Exec(unit);
        Ok(Some(job))
    }

    /// The judge's inputs by contract: the item where the judge takes the item's
    /// contract, the output where it takes the output's; by position otherwise.
    fn judge_inputs(&self, by: &str, item: &Value, output: &Value) -> Vec<Value> {
        let spec = self.spec;
        let Some(judge) = spec.roles.get(by) else {
            return vec![item.clone(), output.clone()];
        };
        let step_role = self
            .current_role
            .as_deref()
            .and_then(|role| spec.roles.get(role));
        judge
            .inputs
            .iter()
            .enumerate()
            .map(|(position, contract)| {
                let is_output = step_role.is_some_and(|role| &role.output == contract);
                let is_input = step_role.is_some_and(|role| role.inputs.contains(contract));
                if is_output {
                    output.clone()
                } else if is_input || position == 0 {
                    item.clone()
                } else {
                    output.clone()
                }
            })
            .collect()
    }

    /// Settles a work item, writing its event first.
    fn settle(&mut self, step: &str, work: &mut Work, status: ItemStatus) -> Result<(), Halt> {
        if work.id.is_some() {
            let event = match &status {
                ItemStatus::Done(_) => Some(EventKind::ItemDone {
                    status: trace::ItemStatus::Ok,
                    error: None,
                }),
                ItemStatus::Failed(reason) => Some(EventKind::ItemDone {
                    status: trace::ItemStatus::Failed,
                    error: Some(reason.clone()),
                }),
                ItemStatus::Skipped(_) => None,
            };
            if let Some(event) = event {
                self.emit_item(step, work.id.as_deref(), event)?;
            }
        }
        work.state = WorkState::Settled(status);
        Ok(())
    }

    /// Marks every waiting item with a failed or skipped dependency as skipped, until
    /// nothing changes.
    fn skip_dependents(&mut self, step: &str, works: &mut [Work]) -> Result<(), Halt> {
        loop {
            let unsettled: BTreeSet<String> = works
                .iter()
                .filter(|work| {
                    matches!(
                        work.state,
                        WorkState::Settled(ItemStatus::Failed(_) | ItemStatus::Skipped(_))
                    )
                })
                .filter_map(|work| work.id.clone())
                .collect();
            let mut changed = false;
            for work in works.iter_mut() {
                if !matches!(work.state, WorkState::Waiting) {
                    continue;
                }
                if let Some(dependency) = work
                    .depends_on
                    .iter()
                    .find(|dependency| unsettled.contains(*dependency))
                    .cloned()
                {
                    self.emit_item(
                        step,
                        work.id.as_deref(),
                        EventKind::ItemSkipped {
                            because: dependency.clone(),
                        },
                    )?;
                    work.state = WorkState::Settled(ItemStatus::Skipped(dependency));
                    changed = true;
                }
            }
            if !changed {
                return Ok(());
            }
        }
    }

    /// Turns settled works into the step's item records.
    pub(super) fn records(works: &[Work]) -> Vec<ItemRecord> {
        works
            .iter()
            .map(|work| ItemRecord {
                id: work.id.clone().unwrap_or_default(),
                value: work.value.clone(),
                depends_on: work.depends_on.clone(),
                status: match &work.state {
                    WorkState::Settled(status) => status.clone(),
                    _ => ItemStatus::Failed("did not finish".to_string()),
                },
            })
            .collect()
    }

    /// A step's role name, for stage retries.
    fn step_role(&self, _step: &str) -> String {
        self.current_role.clone().unwrap_or_default()
    }

    /// Stops the run because an `each` step cannot form its DAG.
    pub(super) fn dag_failure(&mut self, step: &str, message: String) -> Halt {
        Halt::Stop(Stop {
            outcome: Outcome::Failed,
            reason: Reason::StepFailed {
                step: step.to_string(),
            },
            message: Some(message),
        })
    }
}

/// The outputs of work `index`'s dependencies, by item id.
fn dependency_outputs(works: &[Work], index: usize) -> Map<String, Value> {
    let mut context = Map::new();
    let Some(work) = works.get(index) else {
        return context;
    };
    for dependency in &work.depends_on {
        if let Some(WorkState::Settled(ItemStatus::Done(output))) = works
            .iter()
            .find(|other| other.id.as_deref() == Some(dependency.as_str()))
            .map(|other| &other.state)
        {
            context.insert(dependency.clone(), output.clone());
        }
    }
    context
}
