//! `sandbox.stats`: a running sandbox's CPU, memory and processes from the engine, which
//! move with what runs in it; a sandbox that does not run has none.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, id};

async fn stats(server: &TestServer, sandbox: &Value) -> Value {
    let (status, stats) = server
        .get("sandbox.stats", &[("sandboxId", id(sandbox))])
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    stats
}

#[tokio::test]
async fn stats_follow_what_runs_in_the_sandbox() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "python", "cpu": 1, "memoryMb": 256, "pidsLimit": 64}))
        .await;
    let idle = stats(&server, &sandbox).await;
    assert_eq!(idle["sandboxId"], id(&sandbox));
    assert!(idle["cpuPercent"].as_f64().unwrap() < 50.0, "{idle}");
    assert_eq!(idle["cpuLimit"], 1.0);
    assert_eq!(idle["memoryLimitBytes"], 256 * 1024 * 1024);
    assert_eq!(idle["pidsLimit"], 64);
    let idle_pids = idle["pids"].as_u64().unwrap();
    assert!(idle_pids >= 1, "{idle}");
    assert!(idle["memoryBytes"].as_u64().unwrap() > 0, "{idle}");

    // A busy loop and 64 MiB held: CPU near one CPU, memory up, one more process.
    let (status, started) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox), "cmd": "head -c 67108864 /dev/zero | tail -c 67108864 >/dev/null & while :; do :; done"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let busy = loop {
        let now = stats(&server, &sandbox).await;
        if now["cpuPercent"].as_f64().unwrap() > 60.0 {
            break now;
        }
        assert!(Instant::now() < deadline, "CPU never rose: {now}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(
        busy["cpuPercent"].as_f64().unwrap() <= 130.0,
        "within 1 CPU: {busy}"
    );
    assert!(busy["pids"].as_u64().unwrap() > idle_pids, "{busy}");
    assert!(
        busy["cpuTimeMs"].as_u64().unwrap() > idle["cpuTimeMs"].as_u64().unwrap(),
        "{busy}"
    );

    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = server
        .get("sandbox.stats", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "{body}");
    let (status, _) = server
        .get("sandbox.stats", &[("sandboxId", "doesNotExist0000000000")])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
