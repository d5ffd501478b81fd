//! Volumes: what writing to a volume costs against writing to the sandbox's own
//! filesystem (its image's overlay: the floor), 256 MiB at a time and 1,000 small files,
//! each made durable; and a create → first output with a volume mounted against one
//! without, interleaved.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::json;

use crate::http::Http;
use crate::report::{Row, Samples};

/// 256 MiB written and flushed to disk under `$D`.
const BIG: &str = "dd if=/dev/zero of=\"$D/big\" bs=1M count=256 conv=fsync 2>/dev/null";
/// 1,000 files of a few bytes under `$D`, then flushed.
const SMALL: &str =
    "mkdir -p \"$D/small\" && for i in $(seq 1000); do echo $i > \"$D/small/$i\"; done && sync";
/// Where the sandbox mounts its volume; the floor writes under its home.
const MOUNT: &str = "/data";
const HOME: &str = "/home/user/floor";

/// Runs the scenarios `iterations` times on `api` (a server with the agent).
pub async fn run(api: &Http, iterations: usize) -> anyhow::Result<Vec<Row>> {
    let volume = api
        .post("volume.create", json!({"name": "bench-volume"}))
        .await?;
    let volume_id = volume["volumeId"].as_str().context("volumeId")?.to_owned();
    let mounts = json!({"volumes": [{"volumeId": volume_id, "path": MOUNT}]});
    let (sandbox, _) = api.create_with_and_echo(mounts.clone()).await?;
    let mut big = [Samples::default(), Samples::default()];
    let mut small = [Samples::default(), Samples::default()];
    let mut create = [Samples::default(), Samples::default()];
    let outcome = async {
        for _ in 0..iterations {
            for (samples, dir) in big.iter_mut().zip([MOUNT, HOME]) {
                samples.push(timed(api, &sandbox, dir, BIG).await?);
            }
            for (samples, dir) in small.iter_mut().zip([MOUNT, HOME]) {
                samples.push(timed(api, &sandbox, dir, SMALL).await?);
            }
            let (with, took) = api.create_with_and_echo(mounts.clone()).await?;
            create[0].push(took);
            let (without, took) = api.create_and_echo().await?;
            create[1].push(took);
            for id in [&with, &without] {
                api.remove(id).await?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    api.remove(&sandbox).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    api.post("volume.remove", json!({"volumeId": volume_id}))
        .await?;
    outcome?;
    let [bv, bh] = big;
    let [sv, sh] = small;
    let [cv, cn] = create;
    Ok(vec![
        Row::new(
            "write 256 MiB + fsync",
            vec![("volume", bv), ("sandbox's own filesystem (floor)", bh)],
        ),
        Row::new(
            "write 1,000 small files + sync",
            vec![("volume", sv), ("sandbox's own filesystem (floor)", sh)],
        ),
        Row::new(
            "create → first output",
            vec![("with a volume", cv), ("without (floor)", cn)],
        ),
    ])
}

/// How long `script` takes in the sandbox with `D` set to `dir` (emptied first, not
/// timed).
async fn timed(api: &Http, sandbox: &str, dir: &str, script: &str) -> anyhow::Result<Duration> {
    let run = |cmd: String| {
        api.post(
            "sandbox.exec",
            json!({"sandboxId": sandbox, "cmd": cmd, "timeoutMs": 300_000}),
        )
    };
    run(format!("rm -rf {dir}/big {dir}/small; mkdir -p {dir}")).await?;
    let started = Instant::now();
    let out = run(format!("D={dir}; {script}")).await?;
    let took = started.elapsed();
    if out["exitCode"] != 0 {
        bail!("{script} in {dir}: {out}");
    }
    Ok(took)
}
