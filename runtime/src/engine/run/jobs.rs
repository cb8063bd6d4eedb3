//! Jobs: ids, tasks and the scheduler's own timed jobs, collecting the messages of one instant in a fixed order (item id, then job), cancellation and dropping in-flight calls.

use std::time::Duration;

use super::*;
use step::{CallFailure, JobBody, spawn_call};

impl Scheduler<'_> {
    pub(super) fn next_job(&mut self) -> u64 {
        self.next_job_id += 1;
        self.last_job = self.next_job_id;
        self.next_job_id
    }

    /// Waits for the next replies and returns every one that arrives at the same instant,
    /// in item id order (then job order). A wall budget that runs out while waiting
    /// stops the run.
    ///
    /// Two kinds of job reply: tasks (calls to a provider that must be waited for) over
    /// the channel, and the scheduler's own jobs (backoff timers, and calls to a provider
    /// that [answers at once](crate::engine::effects::Provider::answer_now)), each due at an
    /// instant. With no task in flight, waiting is one sleep to the next instant due.
    pub(super) async fn wait_batch(
        &mut self,
        owners: &BTreeMap<u64, usize>,
        works: &[Work],
    ) -> Result<Vec<JobMessage>, Halt> {
        self.start_calls();
        let tasks = !self.handles.is_empty();
        if !tasks && self.due.is_empty() {
            return Err(Halt::Error(RunError::Flow(
                "the run waits for a reply, but no call is in flight".to_string(),
            )));
        }
        let due = self.due.iter().map(|(at, _)| *at).min();
        let wake = match (self.wall_deadline, due) {
            (Some(deadline), Some(due)) => Some(deadline.min(due)),
            (deadline, due) => deadline.or(due),
        };
        // Moving the clock on skips every instant in between: only when nothing outside
        // the run could act at one (a cancel is sent by another task).
        let paused = self.run_moves_clock && self.config.cancel.is_none();
        let clock = self.clock.clone();
        let receiver = &mut self.receiver;
        let receive = async move {
            if tasks {
                match wake {
                    Some(wake) => tokio::select! {
                        biased;
                        message = receiver.recv() => message,
                        () = clock.sleep_until(wake) => None,
                    },
                    None => receiver.recv().await,
                }
            } else {
                // No task can send: what comes next is a job of the scheduler's own.
                if let Some(wake) = wake
                    && wake > clock.now()
                {
                    if paused {
                        clock.skip_to(wake).await;
                    } else {
                        clock.idle_until(wake).await;
                    }
                }
                None
            }
        };
        let first = match self.config.cancel.clone() {
            Some(mut cancel) => tokio::select! {
                biased;
                () = cancelled(&mut cancel) => None,
                first = receive => Some(first),
            },
            None => Some(receive.await),
        };
        self.clock_moved();
        let Some(first) = first else {
            return Err(self.cancel_stop());
        };
        let mut batch: Vec<JobMessage> = first.into_iter().collect();
        // Let every task woken at this instant run and report before deciding anything:
        // yielding never advances a paused clock.
        let mut quiet = 0;
        while tasks && quiet < 3 {
            tokio::task::yield_now().await;
            self.clock_moved();
            let mut got = false;
            while let Ok(message) = self.receiver.try_recv() {
                batch.push(message);
                got = true;
            }
            quiet = if got { 0 } else { quiet + 1 };
        }
        if !self.due.is_empty() {
            let now = self.now();
            let (ready, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.due)
                .into_iter()
                .partition(|(at, _)| *at <= now);
            self.due = later;
            batch.extend(ready.into_iter().map(|(_, message)| message));
        }
        if batch.is_empty() {
            self.check_budget()?;
            return Err(self.budget_stop(BudgetKind::Wall));
        }
        batch.sort_by(|a, b| {
            let item = |job: u64| {
                owners
                    .get(&job)
                    .and_then(|index| works.get(*index))
                    .and_then(|work| work.id.clone())
            };
            item(a.job).cmp(&item(b.job)).then(a.job.cmp(&b.job))
        });
        Ok(batch)
    }

    /// The run was cancelled: in-flight calls are dropped.
    /// A journal or trace write failed: the run stops at once, in-flight calls dropped and
    /// no further call made, `failed{journal_unwritable}` (DESIGN §15). A resume after the
    /// disk has room continues from the last entry written.
    pub(super) fn journal_stop(&mut self, message: String) -> Halt {
        self.abort_jobs();
        Halt::Stop(Stop::new(
            Outcome::Failed,
            Reason::JournalUnwritable,
            Some(message),
        ))
    }

    pub(super) fn cancel_stop(&mut self) -> Halt {
        self.abort_jobs();
        Halt::Stop(Stop::new(
            Outcome::Cancelled,
            Reason::Cancelled,
            Some("the run was cancelled".to_string()),
        ))
    }

    pub(super) fn is_cancelled(&self) -> bool {
        self.config
            .cancel
            .as_ref()
            .is_some_and(|cancel| *cancel.borrow())
    }

    pub(super) fn abort_jobs(&mut self) {
        for (_, handle) in std::mem::take(&mut self.handles) {
            handle.abort();
        }
        self.calls.clear();
        self.due.clear();
    }

    /// Runs a job of the scheduler's own: its message arrives `after` from now.
    pub(super) fn run_local(&mut self, job: u64, after: Duration, body: JobBody) {
        let at = self.now() + after;
        self.due.push((at, JobMessage { job, body }));
    }

    /// Wakes the scheduler when the backoff named `key` ends, `after` from now unless the
    /// clock kept its end before ([`crate::engine::effects::Clock::keep_deadline`]).
    pub(super) fn run_backoff(&mut self, job: u64, key: &str, after: Duration) {
        let at = self.now() + after;
        let at = self.clock.keep_deadline(key, at);
        self.due.push((
            at,
            JobMessage {
                job,
                body: JobBody::Wake,
            },
        ));
    }

    /// Starts the calls issued since the last wait, in job order (tasks are first polled
    /// then, in that order): a provider that answers at once gives its answer, due after
    /// the call's latency or at the role's timeout, whichever comes first; any other call
    /// runs as a task.
    fn start_calls(&mut self) {
        for (job, request, timeout_ms) in std::mem::take(&mut self.calls) {
            let Some((latency, outcome)) = self.provider.answer_now(&request) else {
                let handle = spawn_call(
                    self.provider.clone(),
                    self.clock.clone(),
                    request,
                    timeout_ms,
                    job,
                    self.sender.clone(),
                );
                self.handles.insert(job, handle);
                continue;
            };
            let log = request.log.entries();
            let (after, result) = match timeout_ms {
                Some(after_ms) if latency > Duration::from_millis(after_ms) => (
                    Duration::from_millis(after_ms),
                    Err(CallFailure::TimedOut { after_ms }),
                ),
                _ => (latency, outcome.map_err(CallFailure::Provider)),
            };
            self.run_local(job, after, JobBody::Reply(result, log));
        }
    }
}

/// Resolves once `cancel` holds `true` (never, if its sender is gone while it is false).
pub(super) async fn cancelled(cancel: &mut tokio::sync::watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
