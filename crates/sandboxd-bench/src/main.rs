//! `sandboxd-bench`: each scenario is measured through sandboxd's REST API and, as the
//! floor, done directly against the Docker API with bollard (same image, same
//! hardening). The two are interleaved so machine drift hits both; the report gives
//! median, p90 and the ratio of medians, and a JSON line for machines.
//!
//! The modules: `child.rs` and `http.rs` (the server as users run it and call it),
//! `through_api.rs` (a server in this process), `floor.rs` (bollard), `process_start.rs`,
//! `load.rs`, `snapshots.rs`, `volumes.rs`, and the scenarios behind flags: `remote.rs`
//! (`--remote`), `store.rs` (`--postgres`), `density.rs` (`--density`), `demand.rs`
//! (`--demand`), `templates.rs` and `prepared.rs` (`--templates`), `hibernation.rs`
//! (`--hibernation`), `activity.rs` (`--activity`); `report.rs`.
#![forbid(unsafe_code)]

/// The allocator of `sandboxd` itself: the scenarios that run the service in this
/// process (`through_api.rs`) measure it as it runs in the product.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod activity;
mod child;
mod demand;
mod density;
mod floor;
mod hibernation;
mod http;
mod load;
mod prepared;
mod process_start;
mod remote;
mod report;
mod snapshots;
mod store;
mod templates;
mod through_api;
mod volumes;

use std::time::Duration;

use clap::Parser;

use crate::child::{ChildServer, Setup};
use crate::http::Http;
use crate::report::Samples;

/// Members of the warm pool of the warm-create scenario.
pub(crate) const WARM_POOL: usize = 2;
/// Runs of each short scenario per iteration.
const REPEAT: usize = 3;

/// Pause after the creates of an iteration, before its other scenarios.
const QUIET: Duration = Duration::from_millis(500);

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
    /// The `sandboxd` binary, run as separate processes (as users run it) for every
    /// scenario through the API.
    #[arg(long, default_value = "target/release/sandboxd")]
    server_binary: std::path::PathBuf,
    /// Concurrent creates, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "50,100")]
    concurrency: Vec<usize>,
    /// Measure remote servers only (local against a second engine behind OpenSSH, set
    /// up by `scripts/remote-engine.sh up`).
    #[arg(long)]
    remote: bool,
    /// Measure snapshots only: a snapshot of 100 MiB written, a create from it against
    /// a cold create, a fork into 10.
    #[arg(long)]
    snapshots: bool,
    /// Measure hibernation only: a gVisor sandbox holding 256 MiB paused to disk and
    /// resumed to its first command, against the same in memory and the engine's own
    /// checkpoint and restore.
    #[arg(long)]
    hibernation: bool,
    /// Measure the activity timeline only: `exec true` with timelines kept against
    /// without, `sandbox.activity` over 100,000 entries, a terminal printing 100 MiB
    /// recorded against not.
    #[arg(long)]
    activity: bool,
    /// Measure volumes only: writes to a volume against the sandbox's own filesystem,
    /// and a create with a volume against one without.
    #[arg(long)]
    volumes: bool,
    /// Measure templates users build only: a cached rebuild against a first build, a
    /// RUN's line from print to client, and a create from a built template against one
    /// from the configured template it is built on.
    #[arg(long)]
    templates: bool,
    /// Compare the store's backends only: SQLite, PostgreSQL and two replicas on
    /// PostgreSQL, with databases made on this server (`bash scripts/postgres.sh start`
    /// prints one).
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// Measure density only: the curves of create, warm claim and exec latency and of
    /// memory per sandbox at these numbers of idle sandboxes running, per tier (runc,
    /// gVisor), then `sandbox.list` and the passes over 10,000 rows.
    #[arg(long, value_delimiter = ',', value_name = "LEVELS")]
    density: Option<Vec<usize>>,
    /// Measure pools kept for demand only: an `internet` create served by one, against
    /// the same create cold and a configured pool's claim.
    #[arg(long)]
    demand: bool,
    /// Measure `sandbox.list` and the reaper and reconcile passes only, over this many
    /// rows (the last part of `--density`).
    #[arg(long, value_name = "ROWS")]
    history: Option<usize>,
}

/// The servers of the latency scenarios.
struct Servers {
    agent: ChildServer,
    engine: ChildServer,
    warm: ChildServer,
    /// In the benchmark's process: the agent channel without HTTP, and the reaper and
    /// reconcile passes.
    inner: through_api::Api,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.remote {
        let rows = remote::run(&args.server_binary, &args.image, args.iterations).await?;
        let json = report::print(&rows, args.iterations);
        if let Some(path) = &args.json {
            std::fs::write(path, json)?;
        }
        return Ok(());
    }
    if let Some(rows) = args.history {
        let history = load::history(&args.image, rows).await?;
        println!("{rows} rows: {history}");
        if let Some(path) = &args.json {
            std::fs::write(path, history.to_string())?;
        }
        return Ok(());
    }
    if let Some(levels) = &args.density {
        let json = density::run(&args, levels).await?;
        if let Some(path) = &args.json {
            std::fs::write(path, json)?;
        }
        return Ok(());
    }
    let raw = floor::Floor::connect(&args.image).await?;
    if args.activity {
        let mut instances = Vec::new();
        let outcome = activity::run(
            &args.server_binary,
            &args.image,
            args.iterations,
            &mut instances,
        )
        .await;
        return report_then_clean(&args, &raw, instances, outcome).await;
    }
    if args.demand {
        let mut instances = Vec::new();
        let outcome = demand::run(&args, &mut instances).await;
        return report_then_clean(&args, &raw, instances, outcome).await;
    }
    if let Some(postgres) = &args.postgres {
        let (rows, figures) = store::run(&args, postgres, &raw).await?;
        let json = load::annotate(report::print(&rows, args.iterations), &figures);
        if let Some(path) = &args.json {
            std::fs::write(path, json)?;
        }
        return Ok(());
    }
    let mut instances = Vec::new();
    let outcome = match start(&args, &mut instances).await {
        Ok(servers) => {
            let outcome = run(&args, &servers, &raw).await;
            servers.inner.stop().await;
            outcome
        }
        Err(error) => Err(error),
    };
    // Whatever happened, leave no container behind.
    raw.remove_labelled("sandboxd.bench=true").await;
    for instance in instances {
        raw.remove_labelled(&format!("sandboxd.instance={instance}"))
            .await;
    }
    outcome
}

/// Removes the containers of the servers a scenario started (`instances`), whatever
/// its outcome, then prints its rows (and writes the JSON report where asked).
async fn report_then_clean(
    args: &Args,
    raw: &floor::Floor,
    instances: Vec<String>,
    outcome: anyhow::Result<Vec<report::Row>>,
) -> anyhow::Result<()> {
    for instance in instances {
        raw.remove_labelled(&format!("sandboxd.instance={instance}"))
            .await;
    }
    let json = report::print(&outcome?, args.iterations);
    if let Some(path) = &args.json {
        std::fs::write(path, json)?;
    }
    Ok(())
}

/// Starts the servers, noting each one's instance as soon as it runs.
async fn start(args: &Args, instances: &mut Vec<String>) -> anyhow::Result<Servers> {
    let mut child = async |setup: Setup| -> anyhow::Result<ChildServer> {
        let server = ChildServer::start(&args.server_binary, &args.image, setup).await?;
        instances.push(server.instance().to_owned());
        Ok(server)
    };
    let agent = child(Setup {
        agent: true,
        pool: 0,
        database: None,
        env: Vec::new(),
    })
    .await?;
    let engine = child(Setup {
        agent: false,
        pool: 0,
        database: None,
        env: Vec::new(),
    })
    .await?;
    let warm = child(Setup {
        agent: true,
        pool: WARM_POOL,
        database: None,
        // Pools kept for demand, as by default: a built template's is made for it (the
        // creates measured here are all of configured pools).
        env: vec![("SANDBOXD_WARM_ON_DEMAND__BUDGET".into(), "8".into())],
    })
    .await?;
    let inner = through_api::Api::start(&args.image).await?;
    instances.push(inner.instance().to_owned());
    Ok(Servers {
        agent,
        engine,
        warm,
        inner,
    })
}

async fn run(args: &Args, servers: &Servers, raw: &floor::Floor) -> anyhow::Result<()> {
    if args.volumes {
        let rows = volumes::run(&servers.agent.http, args.iterations).await?;
        let json = report::print(&rows, args.iterations);
        if let Some(path) = &args.json {
            std::fs::write(path, json)?;
        }
        return Ok(());
    }
    if args.hibernation {
        let rows = hibernation::run(&servers.agent.http, raw, args.iterations).await?;
        let json = report::print(&rows, args.iterations.clamp(1, 5));
        if let Some(path) = &args.json {
            std::fs::write(path, json)?;
        }
        return Ok(());
    }
    if args.templates {
        let mut rows = templates::run(&servers.agent.http, &servers.warm, args.iterations).await?;
        rows.extend(prepared::run(&servers.agent.http, &args.image, args.iterations).await?);
        let json = report::print(&rows, args.iterations);
        if let Some(path) = &args.json {
            std::fs::write(path, json)?;
        }
        return Ok(());
    }
    if args.snapshots {
        let rows = snapshots::run(&servers.agent.http, raw, args.iterations).await?;
        let json = report::print(&rows, args.iterations.clamp(1, 5));
        if let Some(path) = &args.json {
            std::fs::write(path, json)?;
        }
        return Ok(());
    }
    let (agent, engine, warm) = (
        &servers.agent.http,
        &servers.engine.http,
        &servers.warm.http,
    );
    let mut create = [Samples::default(), Samples::default(), Samples::default()];
    let mut exec_true = [Samples::default(), Samples::default(), Samples::default()];
    let mut files = [Samples::default(), Samples::default(), Samples::default()];
    let mut destroy = [Samples::default(), Samples::default(), Samples::default()];
    let mut one = Samples::default();
    let mut pause = [Samples::default(), Samples::default()];
    let mut resume = [Samples::default(), Samples::default()];
    let mut channel = Samples::default();
    let mut host_start = Samples::default();
    let mut first_byte = [Samples::default(), Samples::default(), Samples::default()];
    let payload: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();

    // Warm-up: the first create of each side pays one-time costs (image metadata, store).
    for api in [agent, engine] {
        let (id, _) = api.create_and_echo().await?;
        api.remove(&id).await?;
    }
    let (id, _) = raw.create_and_echo().await?;
    raw.remove(&id).await?;

    let (channel_box, _) = servers.inner.http().create_and_echo().await?;
    for _ in 0..args.iterations {
        let (with_agent, took) = agent.create_and_echo().await?;
        create[0].push(took);
        let (without, took) = engine.create_and_echo().await?;
        create[1].push(took);
        let (container, took) = raw.create_and_echo().await?;
        create[2].push(took);
        // The engine keeps working for a while after a start (the shim, the runtime's
        // exit, events): the remaining scenarios of the iteration are measured on a quiet
        // engine, for every approach alike.
        tokio::time::sleep(QUIET).await;

        let mut agent_socket = agent.stream(&with_agent).await?;
        let mut engine_socket = engine.stream(&without).await?;
        // Agents send commands in bursts: each short scenario runs a few times in a row,
        // every run recorded, so the first one after the pause (idle CPUs waking up)
        // counts as one sample among several, for every approach alike.
        for _ in 0..REPEAT {
            one.push(agent.one(&with_agent).await?);
            first_byte[0].push(Http::first_streamed_byte(&mut agent_socket).await?);
            first_byte[1].push(Http::first_streamed_byte(&mut engine_socket).await?);
            first_byte[2].push(raw.first_output(&container).await?);
            channel.push(servers.inner.agent_channel_true(&channel_box).await?);
            exec_true[0].push(agent.exec_true(&with_agent).await?);
            exec_true[1].push(engine.exec_true(&without).await?);
            exec_true[2].push(raw.exec_true(&container).await?);
            host_start.push(process_start::sh_true().await?);
            files[0].push(agent.write_read(&with_agent, &payload).await?);
            files[1].push(engine.write_read(&without, &payload).await?);
            files[2].push(raw.write_read(&container, &payload).await?);
            let (paused, resumed) = agent.pause_resume(&with_agent).await?;
            pause[0].push(paused);
            resume[0].push(resumed);
            let (paused, resumed) = raw.pause_resume(&container).await?;
            pause[1].push(paused);
            resume[1].push(resumed);
        }
        drop((agent_socket, engine_socket));

        destroy[0].push(agent.remove(&with_agent).await?);
        destroy[1].push(engine.remove(&without).await?);
        destroy[2].push(raw.remove(&container).await?);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    servers.inner.http().remove(&channel_box).await?;

    // Warm pool: each claim measured once the pool is full and nothing runs in the
    // background, and so is its floor (a raw create on a quiet engine).
    let mut warm_create = [Samples::default(), Samples::default(), Samples::default()];
    for _ in 0..args.iterations {
        servers.warm.settle(WARM_POOL).await?;
        let (id, took) = warm.create_and_echo().await?;
        warm_create[0].push(took);
        warm.remove(&id).await?;
        // Other limits than the pool's (applied by an engine update on claim) and
        // environment variables (applied to each command).
        servers.warm.settle(WARM_POOL).await?;
        let (id, took) = warm
            .create_with_and_echo(serde_json::json!({
                "cpu": 0.5, "memoryMb": 1024, "pidsLimit": 128, "envVars": "GREETING=hello",
            }))
            .await?;
        warm_create[1].push(took);
        warm.remove(&id).await?;
        servers.warm.settle(WARM_POOL).await?;
        let (container, took) = raw.create_and_echo().await?;
        warm_create[2].push(took);
        raw.remove(&container).await?;
    }
    let load = load::run(args, &servers.inner, raw).await?;
    let snapshot_rows = snapshots::run(agent, raw, args.iterations).await?;

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
            let [w, limits, r] = warm_create;
            vec![
                ("sandboxd (warm pool)", w),
                ("warm, other limits + env", limits),
                ("Docker API (floor)", r),
            ]
        }),
        report::Row::new("exec `true` round trip", {
            let [a, e, r] = exec_true;
            vec![
                ("sandboxd (agent)", a),
                ("agent channel, no HTTP", channel),
                ("sh -c true on the host", host_start),
                ("sandboxd (engine exec)", e),
                ("Docker API (floor)", r),
            ]
        }),
        report::Row::new("first streamed byte (echo)", named(first_byte)),
        report::Row::new("1 MiB write then read", named(files)),
        report::Row::new("pause", {
            let [s, r] = pause;
            vec![("sandboxd", s), ("Docker API (floor)", r)]
        }),
        report::Row::new("resume", {
            let [s, r] = resume;
            vec![("sandboxd", s), ("Docker API (floor)", r)]
        }),
        report::Row::new("destroy", named(destroy)),
        report::Row::new("sandbox.one (API overhead)", vec![("sandboxd", one)]),
    ];
    let rows: Vec<report::Row> = rows
        .into_iter()
        .chain(snapshot_rows)
        .chain(load.rows)
        .collect();
    let mut json = report::print(&rows, args.iterations);
    json = load::annotate(json, &load.figures);
    if let Some(path) = &args.json {
        std::fs::write(path, json)?;
    }
    Ok(())
}
