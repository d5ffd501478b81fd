//! Medians, percentiles and the printed report.

use std::time::Duration;

use serde_json::json;

/// Durations of one side of a scenario.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<Duration>);

impl Samples {
    pub fn push(&mut self, took: Duration) {
        self.0.push(took);
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

/// One scenario: sandboxd and the floor.
#[derive(Debug)]
pub struct Row {
    name: &'static str,
    sandboxd: Samples,
    floor: Samples,
}

impl Row {
    pub fn new(name: &'static str, (sandboxd, floor): (Samples, Samples)) -> Self {
        Self {
            name,
            sandboxd,
            floor,
        }
    }
}

/// Prints the table and returns the JSON report.
pub fn print(rows: &[Row], iterations: usize) -> String {
    println!("{iterations} iterations per scenario, interleaved; times in ms");
    println!(
        "{:<28} {:>12} {:>12} {:>12} {:>12} {:>8}",
        "scenario", "sandboxd p50", "sandboxd p90", "docker p50", "docker p90", "ratio"
    );
    let mut out = Vec::new();
    for row in rows {
        let (s50, s90) = (row.sandboxd.percentile(0.5), row.sandboxd.percentile(0.9));
        let (f50, f90) = (row.floor.percentile(0.5), row.floor.percentile(0.9));
        let ratio = s50 / f50;
        println!(
            "{:<28} {s50:>12.2} {s90:>12.2} {f50:>12.2} {f90:>12.2} {ratio:>8.2}",
            row.name
        );
        out.push(json!({
            "scenario": row.name,
            "sandboxd_ms": {"p50": s50, "p90": s90},
            "docker_api_ms": {"p50": f50, "p90": f90},
            "ratio_p50": ratio,
        }));
    }
    let report = json!({"iterations": iterations, "scenarios": out}).to_string();
    println!("{report}");
    report
}
