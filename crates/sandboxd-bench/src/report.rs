//! Medians, percentiles and the printed report.

use std::time::Duration;

use serde_json::json;

/// Durations of one approach to a scenario.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<Duration>);

impl Samples {
    pub fn push(&mut self, took: Duration) {
        self.0.push(took);
    }

    /// The median, in ms.
    pub fn p50(&self) -> f64 {
        self.percentile(0.5)
    }

    fn percentile(&self, p: f64) -> f64 {
        let mut sorted: Vec<f64> = self.0.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        sorted.sort_by(f64::total_cmp);
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = (p * (sorted.len() - 1) as f64).round() as usize;
        sorted[rank.min(sorted.len() - 1)]
    }
}

/// One scenario: each approach's samples; the last one is the floor.
#[derive(Debug)]
pub struct Row {
    name: &'static str,
    approaches: Vec<(&'static str, Samples)>,
}

impl Row {
    pub fn new(name: &'static str, approaches: Vec<(&'static str, Samples)>) -> Self {
        Self { name, approaches }
    }
}

/// Prints the table and returns the JSON report.
pub fn print(rows: &[Row], iterations: usize) -> String {
    println!(
        "{iterations} iterations, approaches interleaved (exec, file and sandbox.one rows: {} runs \
         in a row per iteration); times in ms; ratio = p50 / floor p50",
        crate::REPEAT
    );
    println!(
        "{:<28} {:<26} {:>9} {:>9} {:>7}",
        "scenario", "approach", "p50", "p90", "ratio"
    );
    let mut out = Vec::new();
    for row in rows {
        let floor = row
            .approaches
            .last()
            .map(|(_, s)| s.percentile(0.5))
            .unwrap_or(f64::NAN);
        let mut approaches = Vec::new();
        for (name, samples) in &row.approaches {
            let (p50, p90) = (samples.percentile(0.5), samples.percentile(0.9));
            let ratio = p50 / floor;
            println!(
                "{:<28} {name:<26} {p50:>9.2} {p90:>9.2} {ratio:>7.3}",
                row.name
            );
            approaches.push(
                json!({"approach": name, "p50_ms": p50, "p90_ms": p90, "ratio_to_floor": ratio}),
            );
        }
        out.push(json!({"scenario": row.name, "approaches": approaches}));
    }
    let report = json!({"iterations": iterations, "scenarios": out}).to_string();
    println!("{report}");
    report
}
