//! Remote servers: a second Docker engine on this machine behind OpenSSH
//! (`scripts/remote-engine.sh`), measured against the local engine in the same run.
//! Exec round trips: through sandboxd to a local sandbox and to a remote one (both
//! served by the agent, the remote one over the server's one SSH connection), and the
//! transport alone: a Docker exec over the pooled connection against a Docker exec over
//! a new SSH connection per request (the reference's way).
//!
//! Run with `--remote`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bollard::Docker;
use sandboxd_contracts::{Engine, ExecSpec};
use sandboxd_docker::DockerEngine;
use sandboxd_ssh::{HostKey, SshSession, SshTarget};
use serde_json::json;

use crate::child::{ChildServer, Setup};
use crate::report::{Row, Samples};

/// Runs of each short scenario per iteration.
const REPEAT: usize = 3;

/// The second engine and its keys, as the script leaves them.
fn remote_dir() -> std::path::PathBuf {
    std::env::var("SANDBOXD_REMOTE_DIR")
        .unwrap_or_else(|_| "/tmp/sandboxd-remote".into())
        .into()
}

/// An sshd in front of the second engine, stopped when dropped.
struct Sshd(u16);

impl Sshd {
    fn start() -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let status = std::process::Command::new("bash")
            .args(["scripts/remote-engine.sh", "sshd", &port.to_string()])
            .status()?;
        anyhow::ensure!(
            status.success(),
            "no sshd in front of the remote engine: run `bash scripts/remote-engine.sh up` first"
        );
        Ok(Self(port))
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .args(["scripts/remote-engine.sh", "sshd-stop", &self.0.to_string()])
            .status();
    }
}

fn target(port: u16) -> anyhow::Result<SshTarget> {
    let dir = remote_dir();
    let host_key = std::fs::read_to_string(dir.join("host_key.pub"))?;
    Ok(SshTarget {
        address: "127.0.0.1".into(),
        port,
        user: "root".into(),
        private_key: std::fs::read_to_string(dir.join("client_key"))?,
        host_key: Some(HostKey::parse(&host_key).map_err(anyhow::Error::msg)?),
        policy: sandboxd_ssh::AddressPolicy::any(),
    })
}

fn exec_true() -> ExecSpec {
    ExecSpec {
        argv: vec!["true".into()],
        cwd: None,
        env: Vec::new(),
        user: None,
        timeout: Duration::from_secs(10),
        max_output: 4096,
        stream: None,
    }
}

/// Removes what the benchmark made, on the remote engine and on the local one.
async fn remove_made(instance: &str) {
    let socket = remote_dir().join("docker.sock");
    let remote = Docker::connect_with_unix(
        &socket.display().to_string(),
        120,
        bollard::API_DEFAULT_VERSION,
    );
    for docker in [remote, Docker::connect_with_local_defaults()]
        .into_iter()
        .flatten()
    {
        remove_labelled(docker, instance).await;
    }
}

async fn remove_labelled(docker: Docker, instance: &str) {
    let Ok(docker) = docker.negotiate_version().await else {
        return;
    };
    let filters = HashMap::from([("label", vec![format!("sandboxd.instance={instance}")])]);
    let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    if let Ok(list) = docker.list_containers(Some(options)).await {
        for id in list.into_iter().filter_map(|c| c.id) {
            let remove = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
                .force(true)
                .build();
            let _ = docker.remove_container(&id, Some(remove)).await;
        }
    }
}

/// The remote scenarios' rows.
pub async fn run(
    binary: &std::path::Path,
    image: &str,
    iterations: usize,
) -> anyhow::Result<Vec<Row>> {
    let sshd = Sshd::start()?;
    let server = ChildServer::start(
        binary,
        image,
        Setup {
            agent: true,
            pool: 0,
            database: None,
            env: Vec::new(),
        },
    )
    .await?;
    let outcome = measure(&server, sshd.0, iterations).await;
    remove_made(server.instance()).await;
    outcome
}

async fn measure(server: &ChildServer, port: u16, iterations: usize) -> anyhow::Result<Vec<Row>> {
    let api = &server.http;
    let target = target(port)?;
    let created = api
        .post(
            "server.create",
            json!({
                "name": "bench-remote",
                "address": "127.0.0.1",
                "port": port,
                "privateKey": target.private_key,
                "hostKey": target.host_key.as_ref().map(HostKey::to_openssh),
                "remoteDir": remote_dir().join("bench").display().to_string(),
            }),
        )
        .await?;
    let server_id = created["serverId"].as_str().context("serverId")?.to_owned();
    let on_remote = json!({"serverId": server_id});

    // The transport alone, on a container of the remote engine: one pooled connection,
    // and a new connection per exec.
    let pooled = DockerEngine::connect_ssh(
        Arc::new(SshSession::new(target.clone())),
        "/var/run/docker.sock",
    )
    .await?;
    // Warm-up: each side's first create pays one-time costs (the agent's upload).
    let (warm_local, _) = api.create_and_echo().await?;
    let (warm_remote, _) = api.create_with_and_echo(on_remote.clone()).await?;

    let mut create = [Samples::default(), Samples::default()];
    let mut exec = [
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    ];
    let container = container_of(api, &warm_remote).await?;
    for _ in 0..iterations {
        let (local, took) = api.create_and_echo().await?;
        create[0].push(took);
        let (remote, took) = api.create_with_and_echo(on_remote.clone()).await?;
        create[1].push(took);
        tokio::time::sleep(Duration::from_millis(300)).await;
        for run in 0..REPEAT {
            // Alternating which goes first, so neither always follows the heavier
            // transport measurements of the previous run.
            if run % 2 == 0 {
                exec[0].push(api.exec_true(&local).await?);
                exec[1].push(api.exec_true(&remote).await?);
            } else {
                exec[1].push(api.exec_true(&remote).await?);
                exec[0].push(api.exec_true(&local).await?);
            }
            let started = Instant::now();
            let outcome = Engine::exec(&pooled, &container, exec_true()).await?;
            anyhow::ensure!(outcome.exit_code == 0, "true failed");
            exec[2].push(started.elapsed());
            let started = Instant::now();
            let fresh = DockerEngine::connect_ssh(
                Arc::new(SshSession::new(target.clone())),
                "/var/run/docker.sock",
            )
            .await?;
            let outcome = Engine::exec(&fresh, &container, exec_true()).await?;
            anyhow::ensure!(outcome.exit_code == 0, "true failed");
            exec[3].push(started.elapsed());
            drop(fresh);
            // The engine and sshd settle after a connection's end.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        api.remove(&local).await?;
        api.remove(&remote).await?;
    }
    api.remove(&warm_local).await?;
    api.remove(&warm_remote).await?;
    let [local, remote] = create;
    let [local_exec, remote_exec, pooled_exec, fresh_exec] = exec;
    Ok(vec![
        Row::new(
            "remote: create → first output",
            vec![
                ("sandboxd, remote server", remote),
                ("sandboxd, local engine", local),
            ],
        ),
        Row::new(
            "remote: exec `true` round trip",
            vec![
                ("sandboxd (agent), remote server", remote_exec),
                ("Docker exec, pooled SSH connection", pooled_exec),
                ("Docker exec, new SSH connection each", fresh_exec),
                ("sandboxd (agent), local engine", local_exec),
            ],
        ),
    ])
}

/// The container of a sandbox.
async fn container_of(api: &crate::http::Http, sandbox_id: &str) -> anyhow::Result<String> {
    let one = api.get("sandbox.one", &[("sandboxId", sandbox_id)]).await?;
    Ok(one["containerId"]
        .as_str()
        .context("containerId")?
        .to_owned())
}
