//! An image without the sandbox's workdir (every image but the project's own has no
//! `/home/user`): create → first output of a sandbox of the base template's user in
//! `/home/user` of such an image, once the image is prepared, against the first create
//! of an image and workdir (the engine makes the workdir, and prepares the image in the
//! background) and against the project's own image, interleaved, cold. The image is the
//! benchmark's image without `/home/user`, made here and removed with what was prepared
//! of it.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::json;

use crate::http::Http;
use crate::report::{Row, Samples};

/// The image without the workdir.
const IMAGE: &str = "sandboxd-bench-nohome:1";
/// The container it is made in.
const MAKER: &str = "sandboxd-bench-nohome-maker";

fn docker(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("docker").args(args).output()?;
    if !out.status.success() {
        bail!(
            "docker {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn make_image(base: &str) -> anyhow::Result<()> {
    let _ = docker(&["rm", "-f", MAKER]);
    docker(&[
        "run",
        "--name",
        MAKER,
        "--entrypoint",
        "rm",
        base,
        "-rf",
        "/home/user",
    ])?;
    docker(&["commit", MAKER, IMAGE])?;
    docker(&["rm", "-f", MAKER])?;
    Ok(())
}

/// The prepared images there are now.
fn prepared() -> Vec<String> {
    docker(&["images", "-q", "--no-trunc", "sandboxd-prepared"])
        .map(|out| out.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Waits until a prepared image more than `before` exists.
async fn wait_prepared(before: &[String]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while prepared().iter().all(|id| before.contains(id)) {
        if Instant::now() > deadline {
            bail!("the image was never prepared");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

pub async fn run(api: &Http, base: &str, iterations: usize) -> anyhow::Result<Vec<Row>> {
    make_image(base).context("making an image without /home/user")?;
    let before = prepared();
    let mut samples = [Samples::default(), Samples::default(), Samples::default()];
    let outcome = async {
        // Its first create prepares it.
        let (first, _) = api.create_with_and_echo(json!({"image": IMAGE})).await?;
        api.remove(&first).await?;
        wait_prepared(&before).await?;
        for iteration in 0..iterations {
            let (id, took) = api.create_with_and_echo(json!({"image": IMAGE})).await?;
            samples[0].push(took);
            api.remove(&id).await?;
            // A workdir it was never prepared for.
            let made = prepared();
            let (id, took) = api
                .create_with_and_echo(json!({"image": IMAGE, "workdir": format!("/w{iteration}")}))
                .await?;
            samples[1].push(took);
            api.remove(&id).await?;
            wait_prepared(&made).await?;
            let (id, took) = api.create_and_echo().await?;
            samples[2].push(took);
            api.remove(&id).await?;
        }
        anyhow::Ok(())
    }
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let made: Vec<String> = prepared()
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect();
    if !made.is_empty() {
        let mut args = vec!["rmi", "-f"];
        args.extend(made.iter().map(String::as_str));
        let _ = docker(&args);
    }
    let _ = docker(&["rmi", IMAGE]);
    outcome?;
    let [ready, first, own] = samples;
    Ok(vec![Row::new(
        "create → first output, an image without /home/user",
        vec![
            ("prepared", ready),
            ("first create of its image and workdir", first),
            ("the project's own image (floor)", own),
        ],
    )])
}
