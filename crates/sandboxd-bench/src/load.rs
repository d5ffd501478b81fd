//! Load scenarios: concurrent creates, each followed by an exec, against a separate
//! `sandboxd serve` process (its memory with every sandbox running is its own), that
//! server's `sandbox.one` throughput, and reaper and reconcile passes over 1,000 rows
//! and 100 containers.

use sandboxd_core::quotas::Quotas;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::future::join_all;
use sandboxd_core::model::{NetworkMode, Sandbox, SandboxStatus};
use serde_json::{Value, json};

use crate::Args;
use crate::child::{ChildServer, Setup};
use crate::floor::Floor;
use crate::http::KEY;
use crate::report::{Row, Samples};
use crate::through_api::Api;

/// Rows for the table, and the figures that are not latencies.
pub struct Load {
    pub rows: Vec<Row>,
    pub figures: Value,
}

/// Adds the load figures to the JSON report and prints them.
pub fn annotate(report: String, figures: &Value) -> String {
    println!("load: {figures}");
    match serde_json::from_str::<Value>(&report) {
        Ok(mut value) => {
            value["load"] = figures.clone();
            value.to_string()
        }
        Err(_) => report,
    }
}

pub async fn run(args: &Args, agent: &Api, raw: &Floor) -> anyhow::Result<Load> {
    let server = ChildServer::start(
        &args.server_binary,
        &args.image,
        Setup {
            agent: true,
            pool: 0,
            database: None,
            env: Vec::new(),
        },
    )
    .await?;
    let result = measure(args, &server, raw).await;
    raw.remove_labelled(&format!("sandboxd.instance={}", server.instance()))
        .await;
    let (mut rows, figures) = result?;
    rows.extend(loops(agent, raw).await?);
    Ok(Load { rows, figures })
}

/// The concurrent creates and the throughput figures of one server process.
async fn measure(
    args: &Args,
    server: &ChildServer,
    raw: &Floor,
) -> anyhow::Result<(Vec<Row>, Value)> {
    let mut rows = Vec::new();
    let mut figures = serde_json::Map::new();
    let (idle_rss, _) = server.memory_mib();
    figures.insert("server_rss_idle_mib".into(), json!(idle_rss));
    for &n in &args.concurrency {
        let started = Instant::now();
        let results = join_all((0..n).map(|_| server.http.create_and_echo())).await;
        let wall = started.elapsed();
        let (rss, peak) = server.memory_mib();
        let mut ours = Samples::default();
        let mut ids = Vec::new();
        let mut errors = Vec::new();
        for result in results {
            match result {
                Ok((id, took)) => {
                    ours.push(took);
                    ids.push(id);
                }
                Err(error) => errors.push(error.to_string()),
            }
        }
        if n == *args.concurrency.iter().max().unwrap_or(&n) {
            let one_path = format!(
                "/api/sandbox.one?sandboxId={}",
                ids.first().map_or("", String::as_str)
            );
            let one = server.http.throughput(&one_path, 32, 3).await;
            let health = server.http.throughput("/health", 32, 3).await;
            figures.insert("sandbox_one_rps".into(), json!(one.round()));
            figures.insert("health_rps".into(), json!(health.round()));
        }
        join_all(ids.iter().map(|id| server.http.remove(id))).await;
        let floor_started = Instant::now();
        let floor_results = join_all((0..n).map(|_| raw.create_and_echo())).await;
        let floor_wall = floor_started.elapsed();
        let mut floor = Samples::default();
        let mut floor_errors = 0;
        let mut containers = Vec::new();
        for result in floor_results {
            match result {
                Ok((id, took)) => {
                    floor.push(took);
                    containers.push(id);
                }
                Err(_) => floor_errors += 1,
            }
        }
        join_all(containers.iter().map(|id| raw.remove(id))).await;
        figures.insert(
            format!("concurrent_{n}"),
            json!({
                "errors": errors.len(),
                "first_errors": errors.iter().take(3).collect::<Vec<_>>(),
                "wall_ms": wall.as_secs_f64() * 1000.0,
                "server_rss_mib_all_running": rss,
                "server_peak_rss_mib": peak,
                "floor_errors": floor_errors,
                "floor_wall_ms": floor_wall.as_secs_f64() * 1000.0,
            }),
        );
        rows.push(Row::new(
            if n >= 100 {
                "100 concurrent create+exec"
            } else {
                "50 concurrent create+exec"
            },
            vec![("sandboxd (process)", ours), ("Docker API (floor)", floor)],
        ));
        // Let the background removals finish before the next scenario.
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    Ok((rows, Value::Object(figures)))
}

/// Reaper and reconcile passes with 100 running sandboxes and 900 killed rows.
async fn loops(agent: &Api, raw: &Floor) -> anyhow::Result<Vec<Row>> {
    let created = join_all((0..100).map(|_| agent.http().create_and_echo())).await;
    let ids: Vec<String> = created
        .into_iter()
        .filter_map(|r| r.ok().map(|(id, _)| id))
        .collect();
    insert_history(agent, 900).await?;
    let label = format!("sandboxd.instance={}", agent.instance());
    let (mut reap, mut reconcile, mut list) =
        (Samples::default(), Samples::default(), Samples::default());
    for _ in 0..10 {
        let started = Instant::now();
        agent.service().duties().reap_once().await?;
        reap.push(started.elapsed());
        let started = Instant::now();
        let report = agent.service().duties().reconcile_once().await?;
        reconcile.push(started.elapsed());
        anyhow::ensure!(
            report.removed_containers.is_empty(),
            "reconcile removed live containers"
        );
        let (count, took) = raw.list_labelled(&label).await?;
        anyhow::ensure!(count >= ids.len(), "listed {count} containers");
        list.push(took);
    }
    join_all(ids.iter().map(|id| agent.http().remove(id))).await;
    Ok(vec![
        Row::new(
            "reconcile, 1000 rows/100 ctrs",
            vec![
                ("sandboxd reconcile pass", reconcile),
                ("Docker API list (floor)", list.clone()),
            ],
        ),
        Row::new(
            "reaper, 1000 rows/100 ctrs",
            vec![
                ("sandboxd reaper pass", reap),
                ("Docker API list (floor)", list),
            ],
        ),
    ])
}

/// Writes `rows` killed sandboxes (history) into the environment of `agent`'s key.
async fn insert_history(agent: &Api, rows: usize) -> anyhow::Result<()> {
    let store = agent.service().store();
    let caller = store.authenticate(KEY).await?.context("bench key")?;
    let environment = store
        .environment(&caller.organization_id, &agent.http().env_id)
        .await?
        .context("environment")?;
    for _ in 0..rows {
        let row = Sandbox {
            sandbox_id: sandboxd_store::new_id()?,
            name: "bench-history".into(),
            organization_id: caller.organization_id.clone(),
            project_id: environment.project_id.clone(),
            environment_id: environment.environment_id.clone(),
            server_id: None,
            image: "bench".into(),
            template: None,
            container_id: None,
            status: SandboxStatus::Killed,
            cpu: 1.0,
            memory_mb: 512,
            pids_limit: 256,
            timeout_ms: 300_000,
            network_mode: NetworkMode::Isolated,
            workdir: "/".into(),
            user: None,
            runtime: None,
            created_at: 0,
            expires_at: None,
            last_activity_at: None,
            killed_at: Some(0),
            env_per_exec: false,
            labels: Default::default(),
            egress: Vec::new(),
            auto_pause: None,
            fixed_timeout: false,
            paused_timeout_ms: sandboxd_core::limits::DEFAULT_PAUSED_TIMEOUT_MS,
            paused_at: None,
            hibernated_bytes: None,
            volumes: Vec::new(),
        };
        store
            .insert_sandbox(&row, None, &caller.user_id, &Quotas::unlimited())
            .await?;
    }
    Ok(())
}

/// `sandbox.list` of an environment holding `rows` sandboxes, and the reaper and
/// reconcile passes over them (in the benchmark's process), p50 of 20 each, in ms.
pub async fn history(image: &str, rows: usize) -> anyhow::Result<Value> {
    let agent = Api::start(image).await?;
    insert_history(&agent, rows).await?;
    let (mut list, mut body, mut reap, mut reconcile) = (
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    );
    let query = [("environmentId", agent.http().env_id.as_str())];
    for _ in 0..20 {
        let started = Instant::now();
        let bytes = agent.http().get_body("sandbox.list", &query).await?;
        body.push(started.elapsed());
        let started = Instant::now();
        let listed = agent.http().get("sandbox.list", &query).await?;
        list.push(started.elapsed());
        anyhow::ensure!(
            listed.as_array().map_or(0, Vec::len) >= rows && bytes.len() > rows,
            "sandbox.list gave fewer rows than written"
        );
        let started = Instant::now();
        agent.service().duties().reap_once().await?;
        reap.push(started.elapsed());
        let started = Instant::now();
        agent.service().duties().reconcile_once().await?;
        reconcile.push(started.elapsed());
    }
    agent.stop().await;
    Ok(json!({
        "rows": rows,
        "list_ms": list.p50(),
        "list_body_ms": body.p50(),
        "reaper_pass_ms": reap.p50(),
        "reconcile_pass_ms": reconcile.p50(),
    }))
}
