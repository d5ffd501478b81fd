//! `sandboxd-bench`: each scenario is measured through sandboxd's REST API and, as the
//! floor, done directly against the Docker API with bollard (same image, same
//! hardening). The two are interleaved so machine drift hits both; the report gives
//! median, p90 and the ratio of medians, and a JSON line for machines.
#![forbid(unsafe_code)]

mod floor;
mod report;
mod through_api;

use std::time::Duration;

use clap::Parser;

use crate::report::Samples;

/// Benchmark sandboxd against the raw Docker API.
#[derive(Debug, Parser)]
struct Args {
    /// Iterations per scenario (medians of at least 20 are meaningful).
    #[arg(long, default_value_t = 20)]
    iterations: usize,
    /// Image used by both sides.
    #[arg(long, default_value = "sandboxd-local/debian:bookworm")]
    image: String,
    /// Write the JSON report to this file as well.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let api = through_api::Api::start(&args.image).await?;
    let raw = floor::Floor::connect(&args.image).await?;
    let instance = api.instance().to_owned();
    let outcome = run(&args, api, &raw).await;
    // Whatever happened, leave no container behind.
    raw.remove_labelled("sandboxd.bench=true").await;
    raw.remove_labelled(&format!("sandboxd.instance={instance}"))
        .await;
    outcome
}

async fn run(args: &Args, api: through_api::Api, raw: &floor::Floor) -> anyhow::Result<()> {
    let mut create_first = (Samples::default(), Samples::default());
    let mut destroy = (Samples::default(), Samples::default());
    let mut exec_true = (Samples::default(), Samples::default());
    let mut files = (Samples::default(), Samples::default());
    let payload: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();

    // Warm-up: the first create of each side pays one-time costs (image metadata, store).
    let (id, _) = api.create_and_echo().await?;
    api.remove(&id).await?;
    let (id, _) = raw.create_and_echo().await?;
    raw.remove(&id).await?;

    for _ in 0..args.iterations {
        let (sandbox, took) = api.create_and_echo().await?;
        create_first.0.push(took);
        let (container, took) = raw.create_and_echo().await?;
        create_first.1.push(took);

        exec_true.0.push(api.exec_true(&sandbox).await?);
        exec_true.1.push(raw.exec_true(&container).await?);
        files.0.push(api.write_read(&sandbox, &payload).await?);
        files.1.push(raw.write_read(&container, &payload).await?);

        destroy.0.push(api.remove(&sandbox).await?);
        destroy.1.push(raw.remove(&container).await?);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    api.stop().await;

    let rows = [
        report::Row::new("create → first exec output", create_first),
        report::Row::new("exec `true` round trip", exec_true),
        report::Row::new("1 MiB write then read", files),
        report::Row::new("destroy", destroy),
    ];
    let json = report::print(&rows, args.iterations);
    if let Some(path) = &args.json {
        std::fs::write(path, json)?;
    }
    Ok(())
}
