//! Hibernation: a gVisor sandbox holding 256 MiB of touched memory paused to disk and
//! resumed to its first command, against the same sandbox paused and resumed in memory,
//! and against the engine's own checkpoint and start from it of a gVisor container
//! holding the same memory (the floor), interleaved; and the same sandbox forked with its
//! memory into 1 and into 10 (to the first command in every fork), against a fork of its
//! files into 1 and the engine's checkpoint and start.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::json;

use crate::floor::Floor;
use crate::http::Http;
use crate::report::{Row, Samples};

/// A process that holds 256 MiB of memory it touched, with bytes that do not compress,
/// until it is killed.
pub(crate) const HOLD_256_MIB: &str =
    "import os, time\nb = bytearray(os.urandom(1 << 20)) * 256\nwhile True: time.sleep(1)";

/// Runs the scenarios `iterations` times (at most 5) on `api` (a server with the agent)
/// and `raw`.
pub async fn run(api: &Http, raw: &Floor, iterations: usize) -> anyhow::Result<Vec<Row>> {
    let mut hibernate = [Samples::default(), Samples::default(), Samples::default()];
    let mut resume = [Samples::default(), Samples::default(), Samples::default()];
    let mut fork = [
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    ];
    for _ in 0..iterations.clamp(1, 5) {
        let (id, _) = api
            .create_with_and_echo(
                json!({"isolation": "gvisor", "memoryMb": 1024, "timeoutMs": 600_000}),
            )
            .await?;
        api.post(
            "sandbox.processStart",
            json!({"sandboxId": id, "cmd": format!("python3 -c '{HOLD_256_MIB}'")}),
        )
        .await?;
        holding(api, &id).await?;
        let container = raw.create_gvisor_holding(HOLD_256_MIB).await?;

        // In memory, on the same sandbox.
        let started = Instant::now();
        api.post("sandbox.pause", json!({"sandboxId": id, "memory": "ram"}))
            .await?;
        hibernate[1].push(started.elapsed());
        resume[1].push(resumed_to_first_command(api, &id).await?);

        let started = Instant::now();
        let paused = api
            .post("sandbox.pause", json!({"sandboxId": id, "memory": "disk"}))
            .await?;
        hibernate[0].push(started.elapsed());
        if paused["pausedTo"] != "disk" {
            bail!("not paused to disk: {paused}");
        }
        resume[0].push(resumed_to_first_command(api, &id).await?);

        let (saved, restored) = raw.checkpoint_and_restore(&container).await?;
        hibernate[2].push(saved);
        resume[2].push(restored);
        fork[3].push(saved + restored);

        fork[0].push(forked(api, &id, 1, true).await?);
        fork[1].push(forked(api, &id, 10, true).await?);
        fork[2].push(forked(api, &id, 1, false).await?);

        api.remove(&id).await?;
        raw.remove(&container).await?;
    }
    let [disk, ram, engine] = hibernate;
    let [from_disk, from_ram, from_engine] = resume;
    let [one, ten, files, engine_both] = fork;
    Ok(vec![
        Row::new(
            "fork 256 MiB → first command in each",
            vec![
                ("sandboxd with memory into 1", one),
                ("sandboxd with memory into 10", ten),
                ("sandboxd files only into 1", files),
                ("engine checkpoint + start", engine_both),
            ],
        ),
        Row::new(
            "pause 256 MiB",
            vec![
                ("sandboxd to disk", disk),
                ("sandboxd in memory", ram),
                ("engine checkpoint", engine),
            ],
        ),
        Row::new(
            "resume → first command",
            vec![
                ("sandboxd from disk", from_disk),
                ("sandboxd from memory", from_ram),
                ("engine start + exec", from_engine),
            ],
        ),
    ])
}

/// `sandbox.fork` into `count` (with memory or files only), then `true` run in each
/// fork: the time until the last exit came back. The forks and their snapshot go.
async fn forked(api: &Http, id: &str, count: u32, memory: bool) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let answer = api
        .post(
            "sandbox.fork",
            json!({"sandboxId": id, "count": count, "memory": memory}),
        )
        .await?;
    let forks: Vec<String> = answer["sandboxes"]
        .as_array()
        .context("sandboxes")?
        .iter()
        .filter_map(|s| s["sandboxId"].as_str().map(str::to_owned))
        .collect();
    let firsts = forks
        .iter()
        .map(|fork| api.post("sandbox.exec", json!({"sandboxId": fork, "cmd": "true"})));
    for out in futures_util::future::join_all(firsts).await {
        let out = out?;
        if out["exitCode"] != 0 {
            bail!("true failed in a fork: {out}");
        }
    }
    let took = started.elapsed();
    for fork in &forks {
        api.remove(fork).await?;
    }
    api.post(
        "snapshot.remove",
        json!({"snapshotId": answer["snapshot"]["snapshotId"]}),
    )
    .await?;
    Ok(took)
}

/// Waits until the sandbox's memory in use passes 256 MiB.
async fn holding(api: &Http, id: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = api.get("sandbox.stats", &[("sandboxId", id)]).await?;
        let bytes = stats["memoryBytes"].as_u64().context("memoryBytes")?;
        if bytes >= 256 << 20 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the sandbox holds only {bytes} bytes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `sandbox.resume`, then `true` run in it: the time until its exit came back.
async fn resumed_to_first_command(api: &Http, id: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    api.post("sandbox.resume", json!({"sandboxId": id})).await?;
    let out = api
        .post("sandbox.exec", json!({"sandboxId": id, "cmd": "true"}))
        .await?;
    let took = started.elapsed();
    if out["exitCode"] != 0 {
        bail!("true failed after the resume: {out}");
    }
    Ok(took)
}
