//! A bounded history of one sandbox's resource use: a reading every few seconds, the
//! oldest dropped past the bound, so what a sandbox costs the server to remember is
//! fixed whatever it does and however long it lives.
//!
//! The first sample of a sandbox is a baseline only (CPU use is a change between two
//! samples); each later one becomes a reading, its CPU use since the sample before.

use std::collections::VecDeque;

use crate::usage::cpu_percent;

/// How often a running sandbox's use is read.
pub const SAMPLE_EVERY_MS: i64 = 5_000;
/// How many readings a sandbox keeps: an hour of them.
pub const KEPT_READINGS: usize = 720;

/// One reading: CPU used since the sample before (percent of one CPU), memory and
/// processes when it was taken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UsageReading {
    /// Epoch milliseconds.
    pub at_ms: i64,
    pub cpu_percent: f32,
    pub memory_bytes: u64,
    pub pids: u32,
}

/// A sample of a sandbox's counters, as the engine gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedSample {
    pub at_ms: i64,
    pub cpu_ns: u64,
    pub memory_bytes: u64,
    pub pids: u64,
}

/// The readings of one sandbox, oldest first, at most `capacity`.
#[derive(Debug, Clone)]
pub struct UsageHistory {
    readings: VecDeque<UsageReading>,
    capacity: usize,
    /// The sample the next reading's CPU use is counted from.
    last: Option<TimedSample>,
}

impl Default for UsageHistory {
    fn default() -> Self {
        Self::with_capacity(KEPT_READINGS)
    }
}

impl UsageHistory {
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            readings: VecDeque::new(),
            capacity: capacity.max(1),
            last: None,
        }
    }

    /// Takes a sample: the first is the baseline, each later one a reading. A sample
    /// not after the one before (a clock stepped back) only becomes the new baseline.
    pub fn record(&mut self, sample: TimedSample) {
        let before = self.last.replace(sample);
        let Some(before) = before else { return };
        let elapsed_ms = sample.at_ms - before.at_ms;
        if elapsed_ms <= 0 {
            return;
        }
        let Some(percent) = cpu_percent(
            before.cpu_ns,
            sample.cpu_ns,
            elapsed_ms.unsigned_abs().saturating_mul(1_000_000),
        ) else {
            return;
        };
        if self.readings.len() == self.capacity {
            self.readings.pop_front();
        }
        self.readings.push_back(UsageReading {
            at_ms: sample.at_ms,
            cpu_percent: percent as f32,
            memory_bytes: sample.memory_bytes,
            pids: u32::try_from(sample.pids).unwrap_or(u32::MAX),
        });
    }

    /// The readings taken from `from_ms` (included) to `to_ms` (included), oldest first.
    pub fn between(
        &self,
        from_ms: Option<i64>,
        to_ms: Option<i64>,
    ) -> impl Iterator<Item = &UsageReading> {
        self.readings.iter().filter(move |r| {
            from_ms.is_none_or(|from| r.at_ms >= from) && to_ms.is_none_or(|to| r.at_ms <= to)
        })
    }

    pub fn len(&self) -> usize {
        self.readings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.readings.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: i64, cpu_ms: u64) -> TimedSample {
        TimedSample {
            at_ms,
            cpu_ns: cpu_ms * 1_000_000,
            memory_bytes: 1 << 20,
            pids: 3,
        }
    }

    #[test]
    fn the_first_sample_is_a_baseline_and_each_later_one_a_reading() {
        let mut history = UsageHistory::default();
        history.record(sample(10_000, 0));
        assert!(history.is_empty());
        history.record(sample(15_000, 2_500));
        history.record(sample(20_000, 2_500));
        let readings: Vec<_> = history.between(None, None).copied().collect();
        assert_eq!(readings.len(), 2);
        assert_eq!(readings[0].cpu_percent, 50.0, "2.5 s of CPU in 5 s");
        assert_eq!(readings[1].cpu_percent, 0.0);
        assert_eq!((readings[0].memory_bytes, readings[0].pids), (1 << 20, 3));
    }

    #[test]
    fn the_oldest_readings_go_past_the_bound() {
        let mut history = UsageHistory::with_capacity(3);
        for i in 0..10 {
            history.record(sample(i * 5_000, 0));
        }
        assert_eq!(history.len(), 3);
        let times: Vec<_> = history.between(None, None).map(|r| r.at_ms).collect();
        assert_eq!(times, [35_000, 40_000, 45_000]);
    }

    #[test]
    fn a_range_is_inclusive_and_a_clock_stepped_back_adds_nothing() {
        let mut history = UsageHistory::default();
        for at in [0, 5_000, 10_000, 15_000] {
            history.record(sample(at, 0));
        }
        let times = |from, to| -> Vec<i64> { history.between(from, to).map(|r| r.at_ms).collect() };
        assert_eq!(times(Some(5_000), Some(10_000)), [5_000, 10_000]);
        assert_eq!(times(Some(11_000), None), [15_000]);
        assert!(times(None, Some(4_999)).is_empty());
        history.record(sample(12_000, 0));
        assert_eq!(history.len(), 3, "stepped back: a baseline only");
        history.record(sample(17_000, 5_000));
        assert_eq!(
            history
                .between(Some(17_000), None)
                .next()
                .unwrap()
                .cpu_percent,
            100.0
        );
    }
}
