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

/// `sandbox.metrics`: a reading every 5 s while the sandbox runs, the busy ones among
/// them, narrowed by `from` and `to`; none for a sandbox that ended.
#[tokio::test]
async fn metrics_keep_a_reading_every_few_seconds_while_it_runs() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "python", "cpu": 1, "memoryMb": 256}))
        .await;
    let metrics = |query: Vec<(&'static str, String)>| {
        let server = &server;
        let sandbox = &sandbox;
        async move {
            let mut pairs = vec![("sandboxId", id(sandbox).to_owned())];
            pairs.extend(query);
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            server.get("sandbox.metrics", &pairs).await
        }
    };
    // Before the first pass: one reading, taken now.
    let (status, first) = metrics(vec![]).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["intervalMs"], 5000);
    assert_eq!(first["memoryLimitBytes"], 256 * 1024 * 1024);
    assert!(!first["readings"].as_array().unwrap().is_empty(), "{first}");

    let (status, started) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox), "cmd": "while :; do :; done"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let deadline = Instant::now() + Duration::from_secs(40);
    let kept = loop {
        let (status, kept) = metrics(vec![]).await;
        assert_eq!(status, StatusCode::OK, "{kept}");
        let readings = kept["readings"].as_array().unwrap();
        if readings.len() >= 3
            && readings
                .iter()
                .any(|r| r["cpuPercent"].as_f64().unwrap() > 60.0)
        {
            break kept;
        }
        assert!(Instant::now() < deadline, "no busy readings kept: {kept}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let readings = kept["readings"].as_array().unwrap();
    let times: Vec<&str> = readings
        .iter()
        .map(|r| r["time"].as_str().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "oldest first: {times:?}"
    );
    assert!(
        readings
            .iter()
            .all(|r| r["memoryBytes"].as_u64().unwrap() > 0 && r["pids"].as_u64().unwrap() >= 1),
        "{kept}"
    );

    // From the last one: that one alone (or with one taken since).
    let last = times.last().unwrap().to_string();
    let (status, since) = metrics(vec![("from", last.clone())]).await;
    assert_eq!(status, StatusCode::OK, "{since}");
    assert_eq!(since["readings"][0]["time"], last.as_str(), "{since}");
    let (status, before) = metrics(vec![("to", "2001-01-01T00:00:00Z".into())]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(before["readings"], json!([]), "nothing before it was made");
    let (status, bad) = metrics(vec![("from", "yesterday".into())]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert!(bad.to_string().contains("from"), "{bad}");
    let (status, bad) = metrics(vec![
        ("from", last.clone()),
        ("to", "2001-01-01T00:00:00Z".into()),
    ])
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");

    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = metrics(vec![]).await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "{body}");
}
