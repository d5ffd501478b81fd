//! Snapshots: the snapshot of a sandbox that wrote 100 MiB, a create from it against a
//! cold create of its template, and a fork into 10; beside the engine's own commit and
//! creates (the floor), interleaved.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::StreamExt as _;
use serde_json::json;

use crate::floor::Floor;
use crate::http::Http;
use crate::report::{Row, Samples};

/// What each source sandbox writes before its snapshot.
const WRITE: &str = "head -c 104857600 /dev/urandom > /home/user/big";
/// Sandboxes a fork makes.
const FORKS: usize = 10;
/// Creates the floor runs at once for its fork (as sandboxd does).
const AT_ONCE: usize = 4;

/// Runs the scenarios `iterations` times (at most 5: each writes and commits 100 MiB
/// twice) on `api` (a server with the agent) and `raw`.
pub async fn run(api: &Http, raw: &Floor, iterations: usize) -> anyhow::Result<Vec<Row>> {
    let mut snapshot = [Samples::default(), Samples::default()];
    let mut create = [Samples::default(), Samples::default(), Samples::default()];
    let mut fork = [Samples::default(), Samples::default()];
    for _ in 0..iterations.clamp(1, 5) {
        // The sandbox and the container, each with 100 MiB written.
        let (source, _) = api.create_and_echo().await?;
        api.post(
            "sandbox.exec",
            json!({"sandboxId": source, "cmd": WRITE, "timeoutMs": 120_000}),
        )
        .await?;
        let (container, _) = raw.create_and_echo().await?;
        raw.shell(&container, WRITE).await?;

        let started = Instant::now();
        let taken = api
            .post("sandbox.snapshot", json!({"sandboxId": source}))
            .await?;
        snapshot[0].push(started.elapsed());
        let snap = taken["snapshotId"]
            .as_str()
            .context("snapshotId")?
            .to_owned();
        let (image, took) = raw.commit(&container).await?;
        snapshot[1].push(took);

        let (made, took) = api
            .create_with_and_echo(json!({"template": null, "snapshotId": snap}))
            .await?;
        create[0].push(took);
        let (cold, took) = api.create_and_echo().await?;
        create[1].push(took);
        let (from_image, took) = raw.create_from_and_echo(&image).await?;
        create[2].push(took);
        for id in [&made, &cold] {
            api.remove(id).await?;
        }
        raw.remove(&from_image).await?;

        let started = Instant::now();
        let forked = api
            .post("sandbox.fork", json!({"sandboxId": source, "count": FORKS}))
            .await?;
        fork[0].push(started.elapsed());
        let (forked_image, took) = raw_fork(raw, &container).await?;
        fork[1].push(took);
        for sandbox in forked["sandboxes"].as_array().context("sandboxes")? {
            api.remove(sandbox["sandboxId"].as_str().context("sandboxId")?)
                .await?;
        }
        api.remove(&source).await?;
        raw.remove(&container).await?;
        for snapshot in [
            snap.as_str(),
            forked["snapshot"]["snapshotId"]
                .as_str()
                .unwrap_or_default(),
        ] {
            api.post("snapshot.remove", json!({"snapshotId": snapshot}))
                .await?;
        }
        for image in [image, forked_image] {
            raw.remove_image(&image).await?;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let [s, r] = snapshot;
    let [c, t, f] = create;
    let [k, g] = fork;
    Ok(vec![
        Row::new(
            "snapshot (100 MiB written)",
            vec![("sandboxd", s), ("Docker commit (floor)", r)],
        ),
        Row::new(
            "create from snapshot → output",
            vec![
                ("sandboxd (snapshot)", c),
                ("sandboxd (cold template)", t),
                ("Docker API (floor)", f),
            ],
        ),
        Row::new(
            "fork into 10",
            vec![("sandboxd", k), ("commit + 10 creates (floor)", g)],
        ),
    ])
}

/// The floor of a fork: a commit of the container, then 10 containers of the image,
/// started and answering, 4 at once; the image and how long it all took. The
/// containers are removed.
async fn raw_fork(raw: &Floor, container: &str) -> anyhow::Result<(String, Duration)> {
    let started = Instant::now();
    let (image, _) = raw.commit(container).await?;
    let made: Vec<anyhow::Result<(String, Duration)>> =
        futures_util::stream::iter((0..FORKS).map(|_| raw.create_from_and_echo(&image)))
            .buffer_unordered(AT_ONCE)
            .collect()
            .await;
    let took = started.elapsed();
    for outcome in made {
        raw.remove(&outcome?.0).await?;
    }
    Ok((image, took))
}
