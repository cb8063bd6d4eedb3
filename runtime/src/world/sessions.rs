//! Session files (DESIGN §9.4): `.charter/sessions/ID.json`, which `charter run --session` and `charter chat` load and save.
//!
//! Files go through [`crate::world::files`] (an atomic write that never follows a
//! symlink) and the secrets scrubber; a session id is a plain name, so it can never point
//! outside its directory. The state itself is `engine::session`'s plain value.

use std::path::{Path, PathBuf};

use charter_compiler::CompiledSpec;

use crate::engine::session::{SESSION_VERSION, Session, SessionError};
use crate::world::secrets::Scrubber;

/// The largest session file read (a session keeps at most `keep` turns).
pub const MAX_SESSION_BYTES: u64 = 10 * 1024 * 1024;

/// Checks that `id` is a plain name (no path separator, no `..`, not hidden).
pub fn validate_id(id: &str) -> Result<(), SessionError> {
    let plain = !id.is_empty()
        && id.len() <= 64
        && !id.starts_with(['-', '.'])
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    if plain {
        Ok(())
    } else {
        Err(SessionError::BadId(id.to_string()))
    }
}

/// `DIR/ID.json`, for a valid id.
pub fn session_path(directory: &Path, id: &str) -> Result<PathBuf, SessionError> {
    validate_id(id)?;
    Ok(directory.join(format!("{id}.json")))
}

/// Loads the session at `path` for `spec`, or starts a new one when there is no file.
pub fn load(path: &Path, spec: &CompiledSpec) -> Result<Session, SessionError> {
    let shown = path.display().to_string();
    let read_error = |message: String| SessionError::Read {
        path: shown.clone(),
        message,
    };
    let text = match crate::world::files::read_regular(path, MAX_SESSION_BYTES) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Session::new(spec),
        Err(error) => return Err(read_error(error.to_string())),
    };
    let session: Session =
        serde_json::from_str(&text).map_err(|error| read_error(error.to_string()))?;
    if session.version != SESSION_VERSION {
        return Err(read_error(format!(
            "version {} is not {SESSION_VERSION}",
            session.version
        )));
    }
    if session.spec != spec.name {
        return Err(SessionError::OtherSpec {
            path: shown,
            found: session.spec,
            expected: spec.name.clone(),
        });
    }
    // A spec that gained a field since: defaults fill it in.
    let fresh = Session::new(spec)?;
    let mut fields = fresh.fields;
    fields.extend(session.fields);
    Ok(Session { fields, ..session })
}

/// Saves `next`, the session after a turn that started from turn `started` (the
/// `turn_count` it was loaded with), unless the file has moved on since: two turns of one
/// session run at once must not silently drop one of them.
pub fn save_turn(
    path: &Path,
    spec: &CompiledSpec,
    started: u64,
    next: &Session,
    scrubber: &Scrubber,
) -> Result<(), SessionError> {
    let now = load(path, spec)?;
    if now.turn_count != started {
        return Err(SessionError::MovedOn {
            path: path.display().to_string(),
            found: now.turn_count,
            expected: started,
        });
    }
    save(path, next, scrubber)
}

/// Writes `session` to `path` atomically (creating its directory), secrets scrubbed.
pub fn save(path: &Path, session: &Session, scrubber: &Scrubber) -> Result<(), SessionError> {
    let write_error = |message: String| SessionError::Write {
        path: path.display().to_string(),
        message,
    };
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent).map_err(|error| write_error(error.to_string()))?;
    }
    let value = serde_json::to_value(session).map_err(|error| write_error(error.to_string()))?;
    let text = serde_json::to_string_pretty(&scrubber.value(&value))
        .map_err(|error| write_error(error.to_string()))?
        + "\n";
    crate::world::files::write_atomically(path, text.as_bytes())
        .map_err(|error| write_error(error.to_string()))
}

#[cfg(test)]
mod tests;
