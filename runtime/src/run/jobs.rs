//! Jobs: ids, collecting the messages of one instant in a fixed order (item id, then job), cancellation and dropping in-flight calls.

use super::*;

impl Scheduler<'_> {
    pub(super) fn next_job(&mut self) -> u64 {
        self.next_job_id += 1;
        self.last_job = self.next_job_id;
        self.next_job_id
    }

    /// Waits for the next replies and returns every one that arrives at the same instant,
    /// in item id order (then job order). A wall budget that runs out while waiting
    /// stops the run.
    pub(super) async fn wait_batch(
        &mut self,
        owners: &BTreeMap<u64, usize>,
        works: &[Work],
    ) -> Result<Vec<JobMessage>, Halt> {
        let deadline = self.wall_deadline;
        let receiver = &mut self.receiver;
        let receive = async move {
            match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, receiver.recv())
                    .await
                    .ok()
                    .flatten(),
                None => receiver.recv().await,
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
        let Some(first) = first else {
            return Err(self.cancel_stop());
        };
        let mut batch: Vec<JobMessage> = first.into_iter().collect();
        // Let every task woken at this instant run and report before deciding anything:
        // yielding never advances a paused clock.
        let mut quiet = 0;
        while quiet < 3 {
            tokio::task::yield_now().await;
            let mut got = false;
            while let Ok(message) = self.receiver.try_recv() {
                batch.push(message);
                got = true;
            }
            quiet = if got { 0 } else { quiet + 1 };
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
