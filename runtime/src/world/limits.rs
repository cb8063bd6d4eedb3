//! Resource limits of a live run (DESIGN §15): how much of an HTTP body, a tool's output or a model's answer is read, how long one request may take, and how long a `Retry-After` may make a run wait.
//!
//! Limits are enforced while reading: a body or an output past its limit stops being read
//! at the limit (the connection is dropped, the tool's process group killed), so an endless
//! answer costs at most the limit in memory.

use std::time::Duration;

/// The default size limit of an HTTP response body, a tool's output and a model's answer.
pub const DEFAULT_MAX_BYTES: usize = 10 * 1024 * 1024;

/// The default longest wait a `Retry-After` header can ask for.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The default total deadline of one HTTP request (connecting, sending, the whole body).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// The default longest a server may send no byte (DESIGN §15): a role with no `timeout`
/// is still bounded on a silent connection.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The resource limits a live provider or a command tool keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes of one HTTP response body (and so of a model's answer).
    pub max_body_bytes: usize,
    /// The most bytes a tool command may print on stdout (stderr is kept to its end).
    pub max_tool_output_bytes: usize,
    /// The longest wait a `Retry-After` is obeyed for; a longer one is cut to this.
    pub max_retry_after: Duration,
    /// The total deadline of one HTTP request, body included.
    pub request_timeout: Duration,
    /// How long a server may send no byte, for a model entry without `idle_timeout`.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: DEFAULT_MAX_BYTES,
            max_tool_output_bytes: DEFAULT_MAX_BYTES,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// `bytes` for a message: `10 MB`, `512 KB`, `300 bytes`.
pub fn describe_bytes(bytes: usize) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MB", bytes / (1024 * 1024))
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_described_in_round_units() {
        assert_eq!(describe_bytes(DEFAULT_MAX_BYTES), "10 MB");
        assert_eq!(describe_bytes(2048), "2 KB");
        assert_eq!(describe_bytes(1000), "1000 bytes");
    }
}
