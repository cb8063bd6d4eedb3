//! The eval report's statistics: a pass rate's 95% Wilson score interval and latency percentiles (nearest rank).

/// The normal quantile of a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The 95% Wilson score interval of `passed` successes in `runs` trials, as `(low, high)`;
/// `(0, 1)` when there were no runs. Unlike the normal approximation it stays inside
/// [0, 1] and is honest at 0 or `runs` successes, which small evals often show.
pub fn wilson_interval(passed: u64, runs: u64) -> (f64, f64) {
    if runs == 0 {
        return (0.0, 1.0);
    }
    let n = runs as f64;
    let p = passed as f64 / n;
    let z2 = Z95 * Z95;
    let centre = p + z2 / (2.0 * n);
    let spread = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let denominator = 1.0 + z2 / n;
    let low = ((centre - spread) / denominator).max(0.0);
    let high = ((centre + spread) / denominator).min(1.0);
    (low, high)
}

/// The `q`-th percentile (0 < q ≤ 100) of `sorted` by nearest rank: the smallest value
/// with at least q% of the values at or below it; `None` for no values.
pub fn percentile(sorted: &[u64], q: u32) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (u64::from(q) * sorted.len() as u64).div_ceil(100).max(1);
    let index = usize::try_from(rank - 1).unwrap_or(usize::MAX);
    sorted.get(index.min(sorted.len() - 1)).copied()
}
