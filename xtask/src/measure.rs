//! What xtask's measuring tasks share (bench, the golden library, explore, verify, editors): the median of sorted timings, a duration as text, the machine's load average and the process's peak memory.
//!
//! It imports nothing of xtask, so every task can use it without an import circle.

use std::time::Duration;

/// The middle of `sorted` (zero when empty).
pub fn median(sorted: &[Duration]) -> Duration {
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// `123µs`, `4.56ms`, `1.23s`: a benchmark's timing.
pub fn show(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    if micros < 1_000.0 {
        format!("{micros:.0}µs")
    } else if micros < 1_000_000.0 {
        format!("{:.2}ms", micros / 1_000.0)
    } else {
        format!("{:.2}s", micros / 1_000_000.0)
    }
}

/// `850ms`, `12.3s`, `2m05s`: how long a stage or a task took.
pub fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1_000 {
        format!("{millis}ms")
    } else if millis < 60_000 {
        format!("{:.1}s", duration.as_secs_f64())
    } else {
        format!("{}m{:02}s", millis / 60_000, (millis / 1_000) % 60)
    }
}

/// The 1-, 5- and 15-minute load averages, as `/proc/loadavg` gives them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_string())
}

/// Forgets the process's peak resident set (Linux: `5` to `/proc/self/clear_refs`), so
/// the next `VmHWM` is this section's peak. Returns whether it could.
pub fn reset_peak_memory() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A `/proc/self/status` field in kB (`VmHWM:`, `VmRSS:`), in MiB.
pub fn memory_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Peak resident memory of this process in MB (`VmHWM` in `/proc/self/status`).
pub fn peak_memory_mb() -> Option<f64> {
    memory_mib("VmHWM:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_units() {
        let times = [1, 2, 30].map(Duration::from_micros);
        assert_eq!(median(&times), Duration::from_micros(2));
        assert_eq!(median(&[]), Duration::ZERO);
        assert_eq!(show(Duration::from_micros(250)), "250µs");
        assert_eq!(show(Duration::from_micros(4_560)), "4.56ms");
        assert_eq!(show(Duration::from_millis(1_230)), "1.23s");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(format_duration(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m05s");
    }
}
