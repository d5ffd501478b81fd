//! A sandbox never outlives its control plane by more than its idle timeout and the
//! lease grace: the server is killed with SIGKILL (nothing is left to reap its
//! sandboxes), and each sandbox's main process ends it once its lease runs out: one the
//! lease pass renewed after a command, and one made just before, which has only the
//! lease it started with. While the server lives, the pass keeps them alive. Pools kept
//! for demand are on (the default): the second is served by the one of its shape, and
//! its lease is the one the claim told it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{KEY, RunningServer};
use serde_json::json;

/// The grace of this test's server, and its sandboxes' timeout (the least allowed).
const GRACE_SECS: u64 = 2;
const TIMEOUT_MS: u64 = 10_000;

fn state(container: &str) -> (bool, i64) {
    let out = std::process::Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{.State.Running}} {{.State.ExitCode}}",
            container,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace();
    (
        parts.next() == Some("true"),
        parts.next().and_then(|c| c.parse().ok()).unwrap_or(-1),
    )
}

async fn create(server: &RunningServer) -> (String, String) {
    let (status, sandbox) = server
        .post(
            KEY,
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base", "timeoutMs": TIMEOUT_MS}),
        )
        .await;
    assert_eq!(status, 200, "{sandbox}");
    (
        sandbox["sandboxId"].as_str().unwrap().to_owned(),
        sandbox["containerId"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_ends_itself_when_its_server_is_gone() {
    let grace = GRACE_SECS.to_string();
    let mut server = RunningServer::start_with_env(&[("SANDBOXD_LEASE_GRACE_SECS", &grace)]).await;
    let (renewed, renewed_container) = create(&server).await;
    // Used now and then for longer than its timeout and grace: the lease pass (every
    // second here) keeps it alive past its first lease.
    let alive_until = Instant::now() + Duration::from_millis(TIMEOUT_MS) + Duration::from_secs(4);
    while Instant::now() < alive_until {
        let (status, ran) = server
            .post(
                KEY,
                "sandbox.exec",
                json!({"sandboxId": renewed, "cmd": "echo up"}),
            )
            .await;
        assert_eq!(status, 200, "{ran}");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // A lease pass after the last command.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, fresh_container) = create(&server).await;

    server.stop();
    let gone = Instant::now();
    let bound = Duration::from_millis(TIMEOUT_MS) + Duration::from_secs(GRACE_SECS);
    let mut ended = [None, None];
    while ended.iter().any(Option::is_none) {
        for (slot, container) in ended.iter_mut().zip([&renewed_container, &fresh_container]) {
            if slot.is_none() && !state(container).0 {
                *slot = Some(gone.elapsed());
            }
        }
        assert!(
            gone.elapsed() < bound + Duration::from_secs(5),
            "a sandbox outlived its server: {ended:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("with the server gone, the sandboxes ended after {ended:?} (bound {bound:?})");
    for (container, after) in [&renewed_container, &fresh_container]
        .into_iter()
        .zip(ended)
    {
        let after = after.unwrap();
        // Not before its lease: the last one it was given ran to its expiry and the grace.
        assert!(
            after > Duration::from_secs(5),
            "{container} ended early: {after:?}"
        );
        assert_eq!(
            state(container),
            (false, 3),
            "{container} ended by its lease"
        );
    }
}
