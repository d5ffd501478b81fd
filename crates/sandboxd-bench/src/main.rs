//! `sandboxd-bench`: each scenario is measured through sandboxd's REST API and, as the
//! floor, done directly against the Docker API with bollard (same image, same
//! hardening). The two are interleaved so machine drift hits both; the report gives
//! median, p90 and the ratio of medians, and a JSON line for machines.
#![forbid(unsafe_code)]

mod child;
mod floor;
mod load;
mod report;
mod through_api;

use std::time::Duration;

use clap::Parser;

use crate::report::Samples;

/// Members of the warm pool of the warm-create scenario.
const WARM_POOL: usize = 2;

/// Benchmark sandboxd against the raw Docker API.
#[derive(Debug, Parser)]
pub struct Args {
    /// Iterations per scenario (medians of at least 20 are meaningful).
    #[arg(long, default_value_t = 20)]
    iterations: usize,
    /// Image used by both sides.
    #[arg(long, default_value = "sandboxd-local/debian:bookworm")]
    image: String,
    /// Write the JSON report to this file as well.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// The `sandboxd` binary run as a separate process for the load scenarios
    /// (concurrent creates, server memory, `sandbox.one` throughput).
    #[arg(long, default_value = "target/release/sandboxd")]
    server_binary: std::path::PathBuf,
    /// Concurrent creates, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "50,100")]
    concurrency: Vec<usize>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let agent = through_api::Api::start(&args.image, true, 0).await?;
    let engine = through_api::Api::start(&args.image, false, 0).await?;
    let warm = through_api::Api::start(&args.image, true, WARM_POOL).await?;
    let raw = floor::Floor::connect(&args.image).await?;
    let instances = [
        agent.instance().to_owned(),
        engine.instance().to_owned(),
        warm.instance().to_owned(),
    ];
    let outcome = run(&args, &agent, &engine, &warm, &raw).await;
    agent.stop().await;
    engine.stop().await;
    warm.stop().await;
    // Whatever happened, leave no container behind.
    raw.remove_labelled("sandboxd.bench=true").await;
    for instance in instances {
        raw.remove_labelled(&format!("sandboxd.instance={instance}"))
            .await;
    }
    outcome
}

async fn run(
    args: &Args,
    agent: &through_api::Api,
    engine: &through_api::Api,
    warm: &through_api::Api,
    raw: &floor::Floor,
) -> anyhow::Result<()> {
    let mut create = [Samples::default(), Samples::default(), Samples::default()];
    let mut exec_true = [Samples::default(), Samples::default(), Samples::default()];
    let mut files = [Samples::default(), Samples::default(), Samples::default()];
    let mut destroy = [Samples::default(), Samples::default(), Samples::default()];
    let mut one = Samples::default();
    let mut channel = Samples::default();
    let mut first_byte = [Samples::default(), Samples::default(), Samples::default()];
    let payload: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();

    // Warm-up: the first create of each side pays one-time costs (image metadata, store).
    for api in [agent, engine] {
        let (id, _) = api.create_and_echo().await?;
        api.remove(&id).await?;
    }
    let (id, _) = raw.create_and_echo().await?;
    raw.remove(&id).await?;

    for _ in 0..args.iterations {
        let (with_agent, took) = agent.create_and_echo().await?;
        create[0].push(took);
        let (without, took) = engine.create_and_echo().await?;
        create[1].push(took);
        let (container, took) = raw.create_and_echo().await?;
        create[2].push(took);

        one.push(agent.one(&with_agent).await?);
        let mut socket = agent.stream(&with_agent).await?;
        first_byte[0].push(through_api::Api::first_streamed_byte(&mut socket).await?);
        let mut socket = engine.stream(&without).await?;
        first_byte[1].push(through_api::Api::first_streamed_byte(&mut socket).await?);
        first_byte[2].push(raw.first_output(&container).await?);
        channel.push(agent.agent_channel_true(&with_agent).await?);
        exec_true[0].push(agent.exec_true(&with_agent).await?);
        exec_true[1].push(engine.exec_true(&without).await?);
        exec_true[2].push(raw.exec_true(&container).await?);
        files[0].push(agent.write_read(&with_agent, &payload).await?);
        files[1].push(engine.write_read(&without, &payload).await?);
        files[2].push(raw.write_read(&container, &payload).await?);

        destroy[0].push(agent.remove(&with_agent).await?);
        destroy[1].push(engine.remove(&without).await?);
        destroy[2].push(raw.remove(&container).await?);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Warm pool: each claim measured once the pool is full and nothing runs in the
    // background, and so is its floor (a raw create on a quiet engine).
    let mut warm_create = [Samples::default(), Samples::default()];
    for _ in 0..args.iterations {
        warm.settle(WARM_POOL).await?;
        let (id, took) = warm.create_and_echo().await?;
        warm_create[0].push(took);
        warm.remove(&id).await?;
        warm.settle(WARM_POOL).await?;
        let (container, took) = raw.create_and_echo().await?;
        warm_create[1].push(took);
        raw.remove(&container).await?;
    }
    let load = load::run(args, agent, raw).await?;

    let named = |[a, e, r]: [Samples; 3]| {
        vec![
            ("sandboxd (agent)", a),
            ("sandboxd (engine exec)", e),
            ("Docker API (floor)", r),
        ]
    };
    let rows = [
        report::Row::new("create → first exec output", named(create)),
        report::Row::new("warm create → first output", {
            let [w, r] = warm_create;
            vec![("sandboxd (warm pool)", w), ("Docker API (floor)", r)]
        }),
        report::Row::new("exec `true` round trip", {
            let [a, e, r] = exec_true;
            vec![
                ("sandboxd (agent)", a),
                ("agent channel, no HTTP", channel),
                ("sandboxd (engine exec)", e),
                ("Docker API (floor)", r),
            ]
        }),
        report::Row::new("first streamed byte (echo)", named(first_byte)),
        report::Row::new("1 MiB write then read", named(files)),
        report::Row::new("destroy", named(destroy)),
        report::Row::new("sandbox.one (API overhead)", vec![("sandboxd", one)]),
    ];
    let rows: Vec<report::Row> = rows.into_iter().chain(load.rows).collect();
    let mut json = report::print(&rows, args.iterations);
    json = load::annotate(json, &load.figures);
    if let Some(path) = &args.json {
        std::fs::write(path, json)?;
    }
    Ok(())
}
