//! Writing a recorded live run as a scenario that `charter verify` passes right after (DESIGN §18): `scenario.yaml` with the `expect` of what happened, `cassette.yaml` with its `recorded` block, and `trace.snap`, all produced and checked by the harness's own check.
//!
//! [`write_scenario`] stages the scenario and its cassette in a directory of its own and
//! runs [`super::verify_scenario`] on them three times, as `charter verify` would run it:
//! 1. as it stands: nothing may be wrong but the snapshot that does not exist yet (a
//!    replay that does not reach the live run's outcome, a call it does not make, a call
//!    whose prompt is not the one recorded, hashes other than the spec's now);
//! 2. accepting, as `verify --accept` does: the trace snapshot is written and the
//!    cassette's `recorded.rendered` prompts are filled in by the harness's own code, so
//!    both are byte for byte what `verify --accept` would write;
//! 3. as it stands again: the scenario must pass.
//!
//! Only then are the three files written into the scenario directory, each atomically
//! (a temporary file, then a rename), the scenario last; a pending `trace.snap.new` left
//! there by an earlier check is removed. A check that fails writes nothing and returns
//! the failing report, whose problems say what the replay did instead.
//!
//! [`write_failure`] writes a run that missed its `expect` (`charter eval
//! --save-failures`) the same way, but the scenario it writes must replay to that miss and
//! to nothing else; [`write_added_calls`] writes a cassette with calls added to it.

use std::path::{Path, PathBuf};

use super::{
    CASSETTE_FILE, HarnessConfig, ProblemKind, SCENARIO_FILE, SNAPSHOT_FILE, ScenarioRef,
    ScenarioReport, SpecCache, Status, read_scenario, snapshot, verify_scenario,
};
use crate::engine::run::RunOutcome;
use crate::formats::scenario::{Cassette, Expectation, LoadError, Scenario};
use crate::world::files;

/// A recorded run to write as a scenario.
#[derive(Clone, Debug)]
pub struct NewScenario<'a> {
    /// The project root: the directory that holds `golden/`, which `scenario.spec` is
    /// relative to and `charter verify` runs in.
    pub root: &'a Path,
    /// The scenario directory to write, normally `<root>/golden/<spec>/<scenario>/`.
    pub dir: &'a Path,
    pub scenario: Scenario,
    pub cassette: Cassette,
}

/// What was written.
#[derive(Clone, Debug)]
pub struct Written {
    /// The check of the scenario as written: it passed.
    pub report: ScenarioReport,
}

/// Why a recording was not written.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("cannot write {path}: {message}")]
    Io { path: String, message: String },
    #[error(transparent)]
    Format(#[from] LoadError),
    /// The harness's check of the recording failed: the report holds its problems.
    #[error("the recording does not replay as the run went")]
    Check(Box<ScenarioReport>),
}

/// What a run did, as a scenario's `expect`: its outcome, its reason and the candidate
/// it delivered, if any.
pub fn expectation_of(outcome: &RunOutcome) -> Expectation {
    Expectation {
        outcome: Some(outcome.outcome),
        reason: Some(outcome.reason.clone()),
        delivered: outcome
            .delivered
            .as_ref()
            .map(|delivered| delivered.candidate_id.clone()),
        ..Expectation::default()
    }
}

/// Stages `new`, checks it as `charter verify` does (see the module documentation) and
/// writes `scenario.yaml`, `cassette.yaml` and `trace.snap` into `new.dir`. Nothing is
/// written there when the check fails.
pub fn write_scenario(new: &NewScenario<'_>) -> Result<Written, RecordingError> {
    let mut staged = Staged::new(
        new.root,
        new.dir,
        &new.scenario.to_yaml()?,
        &new.cassette.to_yaml()?,
    )?;
    let mut before = staged.check(false);
    // The snapshot is missing: that is what is written next, not a problem.
    before
        .problems
        .retain(|problem| problem.kind != ProblemKind::NewSnapshot);
    if !before.problems.is_empty() {
        before.status = super::status_of(&before);
        return Err(RecordingError::Check(Box::new(before)));
    }
    let accepted = staged.check(true);
    if !accepted.problems.is_empty() {
        return Err(RecordingError::Check(Box::new(accepted)));
    }
    let after = staged.check(false);
    if after.status != Status::Pass {
        return Err(RecordingError::Check(Box::new(after)));
    }
    staged.staging.install(new.dir)?;
    Ok(Written { report: after })
}

/// Writes a run that failed its expectation (`charter eval --save-failures`) as a
/// scenario that replays to that failure: staged, accepted as `charter verify --accept`
/// does (the trace snapshot of what happened, the `recorded` block), then checked as it
/// stands, where the only problems may be `expect`'s (what should have happened did
/// not). The report of that check is returned: its problems are the failure. Nothing is
/// written into `new.dir` when the replay fails in any other way (or passes).
pub fn write_failure(new: &NewScenario<'_>) -> Result<Written, RecordingError> {
    let mut staged = Staged::new(
        new.root,
        new.dir,
        &new.scenario.to_yaml()?,
        &new.cassette.to_yaml()?,
    )?;
    let accepted = staged.check(true);
    if accepted
        .problems
        .iter()
        .any(|problem| problem.kind != ProblemKind::Expect)
    {
        return Err(RecordingError::Check(Box::new(accepted)));
    }
    let after = staged.check(false);
    let only_expect = after
        .problems
        .iter()
        .all(|problem| problem.kind == ProblemKind::Expect);
    if after.status != Status::Failed || !only_expect {
        return Err(RecordingError::Check(Box::new(after)));
    }
    staged.staging.install(new.dir)?;
    Ok(Written { report: after })
}

/// Stages the scenario in `dir` with its `scenario.yaml` as it is and `cassette_text` as
/// its cassette (calls added to it by `verify --rerecord --missing-only`, or the fresh
/// recording of `verify --rerecord`), accepts it as
/// `charter verify --accept` does (the `recorded` block and the trace snapshot), checks
/// it passes as it then stands, and only then writes `cassette.yaml` and `trace.snap`
/// into `dir`. Nothing is written there when the check fails.
pub fn write_added_calls(
    root: &Path,
    dir: &Path,
    cassette_text: &str,
) -> Result<Written, RecordingError> {
    let scenario_text =
        std::fs::read_to_string(dir.join(SCENARIO_FILE)).map_err(|error| RecordingError::Io {
            path: dir.join(SCENARIO_FILE).display().to_string(),
            message: error.to_string(),
        })?;
    let mut staged = Staged::new(root, dir, &scenario_text, cassette_text)?;
    staged.check(true);
    let after = staged.check(false);
    if after.status != Status::Pass {
        return Err(RecordingError::Check(Box::new(after)));
    }
    staged.staging.install(dir)?;
    Ok(Written { report: after })
}

/// A scenario staged in a directory of its own, named as it will be in `dir`, checked
/// there as `charter verify` checks it.
struct Staged<'a> {
    root: &'a Path,
    staging: Staging,
    reference: ScenarioRef,
    specs: SpecCache,
}

impl<'a> Staged<'a> {
    fn new(
        root: &'a Path,
        dir: &Path,
        scenario_text: &str,
        cassette_text: &str,
    ) -> Result<Self, RecordingError> {
        let staging = Staging::create()?;
        staging.write(SCENARIO_FILE, scenario_text)?;
        staging.write(CASSETTE_FILE, cassette_text)?;
        let reference = ScenarioRef {
            spec: file_name(dir.parent()),
            name: file_name(Some(dir)),
            dir: staging.dir.clone(),
        };
        Ok(Staged {
            root,
            staging,
            reference,
            specs: SpecCache::new(),
        })
    }

    /// The staged scenario checked (`accept`: as `charter verify --accept` does).
    fn check(&mut self, accept: bool) -> ScenarioReport {
        let config = HarnessConfig {
            accept,
            pin: false,
            repin: false,
            filter: None,
            partition: None,
            pending_snapshots: false,
            determinism: true,
        };
        let file = read_scenario(&self.reference);
        verify_scenario(self.root, &self.reference, &file, &config, &mut self.specs).escaped()
    }
}

/// The last component of `path`, or `recorded` for a path without one.
fn file_name(path: Option<&Path>) -> String {
    path.and_then(Path::file_name).map_or_else(
        || "recorded".to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// A temporary directory the scenario is written and checked in, removed when dropped.
struct Staging {
    dir: PathBuf,
}

impl Staging {
    fn create() -> Result<Staging, RecordingError> {
        let parent = std::env::temp_dir();
        files::create_unique_dir(&parent, "charter-recording-")
            .map(|dir| Staging { dir })
            .map_err(|error| RecordingError::Io {
                path: parent.display().to_string(),
                message: error.to_string(),
            })
    }

    fn write(&self, file: &str, text: &str) -> Result<(), RecordingError> {
        write_file(&self.dir.join(file), text)
    }

    /// Writes the staged files into `dir` (created if needed), the snapshot first and the
    /// scenario last, so `dir` is a scenario only once its cassette and snapshot are
    /// there; removes a pending snapshot an earlier check left in `dir`.
    fn install(&self, dir: &Path) -> Result<(), RecordingError> {
        std::fs::create_dir_all(dir).map_err(|error| RecordingError::Io {
            path: dir.display().to_string(),
            message: error.to_string(),
        })?;
        for file in [SNAPSHOT_FILE, CASSETTE_FILE, SCENARIO_FILE] {
            let staged = self.dir.join(file);
            let text = std::fs::read_to_string(&staged).map_err(|error| RecordingError::Io {
                path: staged.display().to_string(),
                message: error.to_string(),
            })?;
            write_file(&dir.join(file), &text)?;
        }
        let pending = snapshot::pending_path(&dir.join(SNAPSHOT_FILE));
        match std::fs::remove_file(&pending) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(RecordingError::Io {
                path: pending.display().to_string(),
                message: error.to_string(),
            }),
            _ => Ok(()),
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes `text` to `path` atomically (a symlink at `path` is refused).
fn write_file(path: &Path, text: &str) -> Result<(), RecordingError> {
    files::write_atomically(path, text.as_bytes()).map_err(|error| RecordingError::Io {
        path: path.display().to_string(),
        message: error.to_string(),
    })
}

#[cfg(test)]
mod tests;
