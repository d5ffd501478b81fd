//! Resource use between two samples of a container's counters.
//!
//! `cpu_percent`: CPU use between two readings of a container's CPU-time counter.

/// CPU used between two samples, in percent of one CPU (200 is two CPUs kept busy):
/// CPU time `before_ns` then `after_ns`, taken `elapsed_ns` apart. `None` when the
/// samples are too close to say (under a millisecond apart). A counter that went back
/// (the container restarted) counts as none used.
pub fn cpu_percent(before_ns: u64, after_ns: u64, elapsed_ns: u64) -> Option<f64> {
    if elapsed_ns < 1_000_000 {
        return None;
    }
    let used = after_ns.saturating_sub(before_ns) as f64;
    Some((used / elapsed_ns as f64 * 100.0 * 10.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_percent_is_of_one_cpu_and_never_negative() {
        assert_eq!(cpu_percent(0, 500_000_000, 1_000_000_000), Some(50.0));
        assert_eq!(cpu_percent(0, 2_000_000_000, 1_000_000_000), Some(200.0));
        assert_eq!(cpu_percent(10, 5, 1_000_000_000), Some(0.0), "restarted");
        assert_eq!(cpu_percent(0, 1, 10), None, "too close");
        assert_eq!(cpu_percent(0, 123_456, 1_000_000_000), Some(0.0));
        assert_eq!(cpu_percent(0, 12_345_678, 1_000_000_000), Some(1.2));
    }
}
