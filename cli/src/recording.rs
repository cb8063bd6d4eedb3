//! Where runs are kept and how a run becomes a scenario: the project root a scenario or a recording lies in, a scenario's spec compiled from it, a `--record` spec checked against it, a recorded run written as a scenario (checked by replaying it first), and the sessions directory. Shared by `run`, `chat`, `fork`, `replay`, `eval`, `serve` and `verify`.

use std::path::{Path, PathBuf};

use charter_compiler::CompiledSpec;
use charter_runtime::formats::scenario::{Cassette, Scenario};
use charter_runtime::harness::record::{NewScenario, RecordingError, write_scenario};
use charter_runtime::harness::report::{colorize, details};

use crate::loader::{
    ReadError, compile_whole, display_path, normalize, project_root_above, read_text_in,
};
use crate::terminal::{Context, Outcome, print_err, print_error};

/// Writes a recorded run (or conversation) as the scenario in `directory`: staged,
/// checked by the harness as `charter verify` checks it, then `scenario.yaml`,
/// `cassette.yaml` and `trace.snap` written atomically. A recording that does not replay
/// as the run went writes nothing and says what its replay did instead.
pub(crate) fn write_recorded(
    context: Context,
    directory: &Path,
    scenario: Scenario,
    cassette: Cassette,
) -> Result<(), Outcome> {
    let root = recording_root(directory);
    let written = write_scenario(&NewScenario {
        root: &root,
        dir: directory,
        scenario,
        cassette,
    });
    match written {
        Ok(written) => {
            let report = &written.report;
            let ending = match (&report.outcome, &report.reason) {
                (Some(outcome), Some(reason)) => format!("; it replays to {outcome} ({reason})"),
                _ => String::new(),
            };
            print_err(&format!(
                "recorded to {} (scenario.yaml, cassette.yaml, trace.snap){ending}\n",
                shown_from_here(directory)
            ));
            Ok(())
        }
        Err(RecordingError::Check(report)) => {
            print_error(
                context,
                &format!(
                    "cannot record to `{}`: the recording does not replay as the run went, so nothing was written there",
                    shown_from_here(directory)
                ),
            );
            let details = details(std::slice::from_ref(&*report));
            print_err(&if context.color {
                colorize(&details)
            } else {
                details
            });
            Err(Outcome::Failed)
        }
        Err(error) => {
            print_error(
                context,
                &format!("cannot record to `{}`: {error}", shown_from_here(directory)),
            );
            Err(Outcome::Failed)
        }
    }
}

/// The directory sessions are kept in, relative to where `charter` runs.
pub(crate) fn sessions_dir() -> PathBuf {
    PathBuf::from(".charter").join("sessions")
}

/// `path` as shown to the user: relative to the current directory when it lies inside
/// it (a run keeps its --record directory absolute), as it is otherwise.
pub(crate) fn shown_from_here(path: &Path) -> String {
    let current = std::env::current_dir().unwrap_or_default();
    match normalize(&absolute(path)).strip_prefix(normalize(&current)) {
        Ok(inside) if inside.as_os_str().is_empty() => ".".to_string(),
        Ok(inside) => display_path(inside),
        Err(_) => display_path(path),
    }
}

/// The project root of a recording into `record_dir`: the directory holding the
/// `golden/` it lies under, or the current directory when it is not under one.
pub(crate) fn recording_root(record_dir: &Path) -> PathBuf {
    let record_dir = absolute(record_dir);
    record_dir
        .ancestors()
        .find(|ancestor| ancestor.file_name().is_some_and(|name| name == "golden"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Refuses, before anything runs, a recording into `record_dir` of a spec outside its
/// project root ([`recording_root`]): `charter verify` reads only specs inside the
/// project, so the scenario could never be checked.
pub(crate) fn check_record_spec(spec: &Path, record_dir: &Path) -> Result<(), String> {
    let root = recording_root(record_dir);
    if normalize(&absolute(spec)).starts_with(normalize(&root)) {
        return Ok(());
    }
    Err(format!(
        "--record `{}`: the spec `{}` is outside the project root `{}` (the directory holding \
         the `golden/` the recording goes in, else the current directory), where `charter \
         verify` could not read it; record into `golden/<spec>/<scenario>` of the spec's project",
        shown_from_here(record_dir),
        shown_from_here(spec),
        shown_from_here(&root)
    ))
}

/// The spec's path as a scenario in `record_dir` names it: relative to the project root
/// ([`recording_root`]), as `charter verify` and `charter replay` read it; absolute only
/// for a spec outside that root.
pub(crate) fn scenario_spec(spec: &Path, record_dir: &Path) -> String {
    let spec = absolute(spec);
    let root = recording_root(record_dir);
    normalize(&spec)
        .strip_prefix(normalize(&root))
        .map_or(spec.clone(), Path::to_path_buf)
        .to_string_lossy()
        .replace('\\', "/")
}

/// The spec of the scenario in `scenario_dir`, read inside its project and compiled
/// whole (`what` ends the message of a spec with errors: `nothing was {what}`), and its
/// path.
pub(crate) fn compile_scenario_spec(
    context: Context,
    scenario_dir: &Path,
    scenario: &Scenario,
    what: &str,
) -> Result<(CompiledSpec, PathBuf), Outcome> {
    let root = project_root(scenario_dir);
    let spec_path = root.join(&scenario.spec);
    let spec_name = display_path(&normalize(&spec_path));
    let text = read_text_in(&spec_path, &spec_name, Some(&project_root_above(&root))).map_err(
        |error| {
            let reason = match error {
                ReadError::Missing => format!("`{spec_name}` does not exist"),
                ReadError::Other(message) => message,
            };
            print_error(
                context,
                &format!(
                    "cannot read the scenario's spec: {reason} (`spec:` in scenario.yaml is \
                     relative to `{}`, the directory that holds golden/)",
                    display_path(&root)
                ),
            );
            Outcome::Failed
        },
    )?;
    let Some(spec) = compile_whole(context, &spec_name, &text, &spec_path, what) else {
        return Err(Outcome::Failed);
    };
    Ok((spec, spec_path))
}

/// The directory that holds `golden/` above the scenario; the current directory when
/// the scenario is not under a `golden/` directory.
pub(crate) fn project_root(scenario: &Path) -> PathBuf {
    let absolute = std::path::absolute(scenario).unwrap_or_else(|_| scenario.to_path_buf());
    absolute
        .ancestors()
        .find(|ancestor| ancestor.file_name().is_some_and(|name| name == "golden"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `path` made absolute against the current directory (as it is when that fails).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
