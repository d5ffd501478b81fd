//! Density and its curves (`--density 1,50,200,500`): per tier (runc, then gVisor), one
//! `sandboxd serve` process with a warm pool of 2 keeps a growing number of idle
//! sandboxes running; at each level it measures a cold create → first output, a warm
//! claim → first output (other limits and variables under runc; the pool's limits under
//! gVisor, whose process limit is set at start), and `exec true` on an idle sandbox;
//! and what the idle sandboxes cost: the server's resident memory growth, the
//! proportional memory (PSS) of each container's processes (under runc the agent's
//! supervisor and worker) and of its engine shim, the host's memory (MemAvailable)
//! per sandbox, and the share of a CPU each idle sandbox keeps busy. A tier stops growing when the host would keep less than
//! [`KEEP_AVAILABLE_MIB`] free. Cold creates use the `python` template, given the same
//! image and no pool. Then `sandbox.list` and the reaper and reconcile passes
//! over 10,000 rows, in the benchmark's own process.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use crate::child::{ChildServer, Setup};
use crate::report::Samples;

/// Host memory a tier leaves free; it grows no further.
const KEEP_AVAILABLE_MIB: f64 = 4096.0;
/// Creates in flight while a tier grows.
const GROW_CONCURRENCY: usize = 8;
/// Containers whose processes are measured at each level (their mean is reported).
const MEASURED: usize = 40;
/// `exec true` samples per iteration at each level, of each kind: in one sandbox after
/// another (as a client driving one sandbox does), and each in the next idle sandbox
/// (one that has not run anything for a while). The ratio of exec at the top level to
/// exec at one running rests on the figure at one, which moved by a quarter between
/// runs of 18 samples.
const EXECS_PER_ITERATION: usize = 8;
/// How long the idle containers' CPU time is counted at each level.
const IDLE_CPU_WINDOW: Duration = Duration::from_secs(10);
/// Rows of the list and passes figures.
const HISTORY_ROWS: usize = 10_000;

/// One tier: its name and the server settings that make it.
struct Tier {
    name: &'static str,
    /// The most sandboxes it is grown to. Idle gVisor sandboxes (systrap) each keep
    /// about 1 % of a CPU busy on this kind of machine: past about a hundred on 2 cores
    /// the engine itself stops answering in time.
    max: usize,
    env: Vec<(String, String)>,
    /// What a warm claim asks beyond the template.
    claim: Value,
}

fn tiers(image: &str) -> Vec<Tier> {
    let cold = (
        "SANDBOXD_TEMPLATES__PYTHON__IMAGE".to_owned(),
        image.to_owned(),
    );
    // Hundreds of sandboxes of one organization: past the default quotas.
    let quotas = [
        ("SANDBOXD_QUOTAS__RUNNING_SANDBOXES", "100000"),
        ("SANDBOXD_QUOTAS__CPU", "1000000"),
        ("SANDBOXD_QUOTAS__MEMORY_MB", "100000000"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let gvisor = |template: &str| {
        (
            format!("SANDBOXD_TEMPLATES__{template}__ISOLATION"),
            "gvisor".to_owned(),
        )
    };
    vec![
        Tier {
            name: "runc",
            max: usize::MAX,
            env: [vec![cold.clone()], quotas.to_vec()].concat(),
            claim: json!({"cpu": 0.5, "memoryMb": 1024, "pidsLimit": 128, "envVars": "GREETING=hello"}),
        },
        Tier {
            name: "gvisor",
            max: 50,
            env: [
                vec![cold, gvisor("BASE"), gvisor("PYTHON")],
                quotas.to_vec(),
            ]
            .concat(),
            claim: json!({"envVars": "GREETING=hello"}),
        },
    ]
}

/// A number from `/proc/meminfo`, in MiB.
fn meminfo_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Proportional memory of a process, in MiB (0 when it is gone).
fn pss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// A process and all its descendants.
fn tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", all[i]))
            .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default();
        for task in tasks {
            let children = std::fs::read_to_string(task.join("children")).unwrap_or_default();
            all.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
        i += 1;
    }
    all
}

/// The engine shim of each container, by container id.
fn shims() -> std::collections::HashMap<String, u32> {
    let mut found = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if !args
            .first()
            .is_some_and(|a| String::from_utf8_lossy(a).contains("containerd-shim"))
        {
            continue;
        }
        if let Some(i) = args.iter().position(|a| *a == b"-id")
            && let Some(id) = args.get(i + 1)
        {
            found.insert(String::from_utf8_lossy(id).into_owned(), pid);
        }
    }
    found
}

/// A measured container: its main process and its engine shim.
struct Measured {
    init: u32,
    shim: Option<u32>,
}

/// Up to [`MEASURED`] of the sandboxes' containers, looked up once per level.
async fn measured(docker: &bollard::Docker, ids: &[String]) -> Vec<Measured> {
    let shims = shims();
    let mut found = Vec::new();
    for sandbox_id in ids.iter().take(MEASURED) {
        let Ok(info) = docker
            .inspect_container(&format!("sandboxd-{sandbox_id}"), None)
            .await
        else {
            continue;
        };
        let (Some(pid), Some(id)) = (info.state.and_then(|s| s.pid), info.id) else {
            continue;
        };
        found.push(Measured {
            init: pid as u32,
            shim: shims.get(&id).copied(),
        });
    }
    found
}

/// Mean PSS of the containers' process trees and of their shims, in MiB.
fn container_memory(containers: &[Measured]) -> (f64, f64) {
    let tree_total: f64 = containers
        .iter()
        .map(|c| tree(c.init).into_iter().map(pss_mib).sum::<f64>())
        .sum();
    let shim_total: f64 = containers.iter().map(|c| c.shim.map_or(0.0, pss_mib)).sum();
    let n = containers.len().max(1) as f64;
    (tree_total / n, shim_total / n)
}

/// CPU time (user and system, all threads) a process has used, in seconds; 0 when it
/// is gone. `/proc` counts it in ticks of 1/100 s.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) / 100.0,
        _ => 0.0,
    }
}

/// The share of a CPU an idle container keeps busy, in percent: the CPU time of its
/// shim and every process under it (the container's, and under gVisor runsc's sandbox,
/// gofer and stubs) over [`IDLE_CPU_WINDOW`], the mean of up to [`MEASURED`] containers.
async fn idle_cpu_percent(containers: &[Measured]) -> f64 {
    let shims: Vec<u32> = containers.iter().filter_map(|c| c.shim).collect();
    let pids: Vec<u32> = shims.iter().flat_map(|shim| tree(*shim)).collect();
    let n = shims.len();
    let used = |pids: &[u32]| pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>();
    let before = used(&pids);
    tokio::time::sleep(IDLE_CPU_WINDOW).await;
    let after = used(&pids);
    (after - before) / IDLE_CPU_WINDOW.as_secs_f64() / n.max(1) as f64 * 100.0
}

/// Medians of the latencies at one level.
#[derive(Default)]
struct Latencies {
    cold: Samples,
    warm: Samples,
    /// Commands one after another in one sandbox.
    exec: Samples,
    /// Each command in the next idle sandbox.
    exec_spread: Samples,
}

async fn measure(
    server: &ChildServer,
    tier: &Tier,
    idle: &[String],
    iterations: usize,
) -> anyhow::Result<Latencies> {
    let http = &server.http;
    let mut out = Latencies::default();
    for i in 0..iterations {
        server.settle(2).await?;
        let (id, took) = http
            .create_with_and_echo(json!({"template": "python"}))
            .await?;
        out.cold.push(took);
        http.remove(&id).await?;
        server.settle(2).await?;
        let (id, took) = http.create_with_and_echo(tier.claim.clone()).await?;
        out.warm.push(took);
        http.remove(&id).await?;
        server.settle(2).await?;
        let one = &idle[i % idle.len()];
        for _ in 0..EXECS_PER_ITERATION {
            out.exec.push(http.exec_true(one).await?);
        }
        for k in 0..EXECS_PER_ITERATION {
            let next = &idle[(i * EXECS_PER_ITERATION + k) % idle.len()];
            out.exec_spread.push(http.exec_true(next).await?);
        }
    }
    Ok(out)
}

/// Grows `idle` to `level` sandboxes; false when the host's memory would not allow it.
async fn grow(server: &ChildServer, idle: &mut Vec<String>, level: usize) -> anyhow::Result<bool> {
    let http = &server.http;
    while idle.len() < level {
        if meminfo_mib("MemAvailable:") < KEEP_AVAILABLE_MIB {
            return Ok(false);
        }
        let batch = (level - idle.len()).min(GROW_CONCURRENCY * 4);
        let made: Vec<anyhow::Result<Value>> = futures_util::stream::iter(0..batch)
            .map(|_| {
                http.post(
                    "sandbox.create",
                    json!({"environmentId": http.env_id, "template": "python", "timeoutMs": 3_600_000, "memoryMb": 256}),
                )
            })
            .buffer_unordered(GROW_CONCURRENCY)
            .collect()
            .await;
        let mut ids = Vec::new();
        for sandbox in made {
            let sandbox = sandbox?;
            ids.push(
                sandbox["sandboxId"]
                    .as_str()
                    .context("a sandbox id")?
                    .to_owned(),
            );
        }
        // One command in each, as a sandbox in use has run: the exec figures compare a
        // command in a sandbox at each level, not a container's first program start.
        let ran: Vec<anyhow::Result<Duration>> = futures_util::stream::iter(ids.iter())
            .map(|id| http.exec_true(id))
            .buffer_unordered(GROW_CONCURRENCY)
            .collect()
            .await;
        ran.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
        idle.extend(ids);
    }
    Ok(true)
}

async fn run_tier(
    args: &crate::Args,
    tier: &Tier,
    levels: &[usize],
    instances: &mut Vec<String>,
) -> anyhow::Result<Vec<Value>> {
    let server = ChildServer::start(
        &args.server_binary,
        &args.image,
        Setup {
            agent: true,
            pool: 2,
            database: None,
            env: tier.env.clone(),
        },
    )
    .await?;
    instances.push(server.instance().to_owned());
    let docker = bollard::Docker::connect_with_local_defaults()?;
    server.settle(2).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss0 = server.memory_mib().0;
    let available0 = meminfo_mib("MemAvailable:");
    let mut idle = Vec::new();
    let mut points = Vec::new();
    for &level in levels {
        if level > tier.max {
            println!("{}: not grown past {} sandboxes", tier.name, tier.max);
            break;
        }
        let started = Instant::now();
        if !grow(&server, &mut idle, level).await? {
            println!(
                "{}: stopped at {} sandboxes, the host keeping {KEEP_AVAILABLE_MIB} MiB free",
                tier.name,
                idle.len()
            );
            break;
        }
        let grew = started.elapsed();
        // Let the engine finish what the starts left it.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let n = idle.len() as f64;
        let rss = server.memory_mib().0;
        let available = meminfo_mib("MemAvailable:");
        let containers = measured(&docker, &idle).await;
        let (tree, shim) = container_memory(&containers);
        let idle_cpu = idle_cpu_percent(&containers).await;
        let latencies = measure(&server, tier, &idle, args.iterations).await?;
        let (_, listed) = {
            let started = Instant::now();
            let listed = server
                .http
                .get("sandbox.list", &[("environmentId", &server.http.env_id)])
                .await?;
            (listed, started.elapsed())
        };
        let point = json!({
            "tier": tier.name,
            "running": idle.len(),
            "grow_s": grew.as_secs_f64(),
            "cold_create_first_output_ms": latencies.cold.p50(),
            "warm_claim_first_output_ms": latencies.warm.p50(),
            "exec_true_ms": latencies.exec.p50(),
            "exec_true_spread_ms": latencies.exec_spread.p50(),
            "server_rss_mib": rss,
            "server_rss_growth_per_sandbox_mib": (rss - rss0) / n,
            "container_processes_pss_mib": tree,
            "shim_pss_mib": shim,
            "host_memory_per_sandbox_mib": (available0 - available) / n,
            "idle_cpu_percent_per_sandbox": idle_cpu,
            "list_ms": listed.as_secs_f64() * 1000.0,
        });
        println!(
            "{:<7} {:>5} running: cold {:>7.1} ms, warm {:>5.2} ms, exec {:>5.2} ms (spread {:>5.2}); per sandbox: server {:.3} MiB, container processes {:.2} MiB (PSS), shim {:.2} MiB, host {:.1} MiB; idle CPU {:.2} %",
            tier.name,
            idle.len(),
            latencies.cold.p50(),
            latencies.warm.p50(),
            latencies.exec.p50(),
            latencies.exec_spread.p50(),
            (rss - rss0) / n,
            tree,
            shim,
            (available0 - available) / n,
            idle_cpu,
        );
        points.push(point);
    }
    if let (Some(first), Some(last)) = (points.first(), points.last())
        && points.len() > 1
    {
        let ratio = |field: &str| {
            last[field].as_f64().unwrap_or(f64::NAN) / first[field].as_f64().unwrap_or(f64::NAN)
        };
        println!(
            "{}: exec at {} running / exec at {}: {:.2}x in one sandbox, {:.2}x spread",
            tier.name,
            last["running"],
            first["running"],
            ratio("exec_true_ms"),
            ratio("exec_true_spread_ms"),
        );
    }
    let removed: Vec<anyhow::Result<Duration>> = futures_util::stream::iter(idle.iter())
        .map(|id| server.http.remove(id))
        .buffer_unordered(GROW_CONCURRENCY)
        .collect()
        .await;
    removed.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    Ok(points)
}

/// Runs every tier at `levels`, then the 10,000-row figures; prints the curves and
/// returns the JSON report. Every container made is removed, even on failure.
pub async fn run(args: &crate::Args, levels: &[usize]) -> anyhow::Result<String> {
    let mut instances = Vec::new();
    let mut points = Vec::new();
    let mut outcome = Ok(());
    for tier in tiers(&args.image) {
        match run_tier(args, &tier, levels, &mut instances).await {
            Ok(mut tier_points) => points.append(&mut tier_points),
            Err(error) => {
                outcome = Err(error.context(tier.name));
                break;
            }
        }
    }
    let floor = crate::floor::Floor::connect(&args.image).await?;
    for instance in &instances {
        floor
            .remove_labelled(&format!("sandboxd.instance={instance}"))
            .await;
    }
    outcome?;
    let history = crate::load::history(&args.image, HISTORY_ROWS).await?;
    println!("{HISTORY_ROWS} rows: {history}");
    Ok(json!({"curves": points, "history": history}).to_string())
}
