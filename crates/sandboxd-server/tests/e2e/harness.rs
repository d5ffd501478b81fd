//! A real server on a loopback port with its own data dir, driven over HTTP through the
//! typed client (`sandboxd-client`; its raw calls, since tests send what a client never
//! would). Every container it created is removed when the harness is dropped, even
//! after a failure.
//!
//! The containers are found by the label of the harness's installation id.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use sandboxd_docker::DockerEngine;
use sandboxd_server::config::{TemplateConfig, WarmOnDemandConfig};
use sandboxd_server::{Config, Engines, Server, Service};
use serde_json::{Value, json};
use tempfile::TempDir;

pub const DEBIAN: &str = "sandboxd-local/debian:bookworm";
pub const BUSYBOX: &str = "sandboxd-local/busybox:latest";
/// Debian with IPython, matplotlib, pandas and node: the code interpreter's template.
pub const INTERPRETER: &str = "sandboxd-local/interpreter:bookworm";
pub const KEY: &str = "sbx_test_owner_key_0123456789abcdefghijklmnop";

pub struct TestServer {
    pub url: String,
    pub env_id: String,
    pub project_id: String,
    pub service: Service,
    pub client: reqwest::Client,
    /// The API with the owner key.
    pub api: sandboxd_client::Client,
    /// The engine the server runs on, for tests that look at what it created.
    pub engine: DockerEngine,
    instance: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    data: Option<TempDir>,
}

/// The agent built into sandboxd, installed into the test server's data dir.
pub fn agent_binary(dir: &Path) -> PathBuf {
    sandboxd_agent_embed::install(&dir.join("bin")).expect("the workspace build embeds the agent")
}

fn config(dir: &TempDir, with_agent: bool) -> Config {
    let mut config = Config::new(dir.path().to_path_buf());
    config.agent_binary = with_agent.then(|| agent_binary(dir.path()));
    config.bootstrap_key = Some(KEY.into());
    config.audit_exec = true;
    config
        .templates
        .insert("base".into(), TemplateConfig::image(DEBIAN));
    config
        .templates
        .insert("python".into(), TemplateConfig::image(BUSYBOX));
    config.templates.insert(
        "code-interpreter-v1".into(),
        TemplateConfig::image(INTERPRETER),
    );
    config.reaper_interval_secs = 0.5;
    config.reconcile_interval_secs = 3600.0;
    // Containers are counted exactly here: pools kept for demand only where a test
    // asks for them.
    config.warm_on_demand = WarmOnDemandConfig::OFF;
    // The tests' remote servers are on loopback.
    config.servers.allowed_networks = vec!["127.0.0.0/8".into()];
    if let Ok(runtime) = std::env::var("SANDBOXD_TEST_RUNTIME") {
        config.runtime = Some(runtime);
    }
    config
}

/// The engines as the binary wires them: `engine`, and Docker over SSH for remote
/// servers in the networks the configuration allows.
pub fn engines(config: &Config, engine: DockerEngine) -> Engines {
    let allowed = config
        .servers
        .allowed_networks()
        .expect("the configured networks");
    Engines::local(std::sync::Arc::new(engine)).with_remote(std::sync::Arc::new(
        sandboxd_docker::SshConnector::new(config.agent_binary())
            .expect("the agent")
            .allowing(allowed),
    ))
}

/// The local Docker engine, as the binary connects it.
pub async fn local_engine() -> DockerEngine {
    DockerEngine::connect_local()
        .await
        .expect("the local Docker engine answers")
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_on(tempfile::tempdir().expect("temp dir"), true, |_| {}).await
    }

    /// A server with the test configuration changed by `tweak`.
    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start_on(tempfile::tempdir().expect("temp dir"), true, tweak).await
    }

    /// A server whose sandboxes run without the agent, as sandboxes created before the
    /// agent existed do: everything goes through the engine's exec and archive API.
    pub async fn start_without_agent() -> Self {
        Self::start_on(tempfile::tempdir().expect("temp dir"), false, |_| {}).await
    }

    /// A server without the agent, its test configuration changed by `tweak`.
    pub async fn start_without_agent_with(tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start_on(tempfile::tempdir().expect("temp dir"), false, tweak).await
    }

    /// Starts a server again on the data dir of a stopped one; its containers are now
    /// this server's to clean up.
    pub async fn start_in(stopped: StoppedServer) -> Self {
        Self::start_in_with(stopped, |_| {}).await
    }

    /// Starts a server again on the data dir of a stopped one, its configuration
    /// changed by `tweak`.
    pub async fn start_in_with(
        mut stopped: StoppedServer,
        tweak: impl FnOnce(&mut Config),
    ) -> Self {
        stopped.instance.clear();
        Self::start_on(stopped.data.take().expect("data dir"), true, tweak).await
    }

    async fn start_on(data: TempDir, with_agent: bool, tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start_on_engine(local_engine().await, data, with_agent, tweak).await
    }

    /// A server whose sandboxes run on `engine` (an engine of the test's own).
    pub async fn start_with_engine(engine: DockerEngine, tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start_on_engine(engine, tempfile::tempdir().expect("temp dir"), true, tweak).await
    }

    async fn start_on_engine(
        engine: DockerEngine,
        data: TempDir,
        with_agent: bool,
        tweak: impl FnOnce(&mut Config),
    ) -> Self {
        let mut config = config(&data, with_agent);
        tweak(&mut config);
        let engines = engines(&config, engine.clone());
        let server = Server::start(config, engines).await.expect("server starts");
        let service = server.service.clone();
        let instance = service.instance_id().to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = server
                .serve(listener, async {
                    let _ = rx.await;
                })
                .await;
        });
        let client = reqwest::Client::new();
        let api = sandboxd_client::Client::with_http(client.clone(), &url, KEY);
        let mut harness = Self {
            url,
            env_id: String::new(),
            project_id: String::new(),
            service,
            client,
            api,
            engine,
            instance,
            shutdown: Some(tx),
            task: Some(task),
            data: Some(data),
        };
        for _ in 0..200 {
            if harness
                .client
                .get(format!("{}/health", harness.url))
                .send()
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (status, projects) = harness.get("project.all", &[]).await;
        assert_eq!(status, StatusCode::OK, "{projects}");
        harness.project_id = projects[0]["projectId"]
            .as_str()
            .expect("project")
            .to_owned();
        harness.env_id = projects[0]["environments"][0]["environmentId"]
            .as_str()
            .expect("env")
            .to_owned();
        harness
    }

    /// Stops the server gracefully, keeping its data dir and containers.
    pub async fn stop(mut self) -> StoppedServer {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let instance = std::mem::take(&mut self.instance);
        StoppedServer {
            data: self.data.take(),
            instance,
        }
    }

    pub fn docker(&self) -> &bollard::Docker {
        self.engine.client()
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The server's data dir.
    pub fn data_dir(&self) -> &Path {
        self.data.as_ref().expect("data dir").path()
    }

    pub async fn post_with_key(
        &self,
        procedure: &str,
        key: Option<&str>,
        body: Value,
    ) -> (StatusCode, Value) {
        self.api
            .with_key(key.unwrap_or_default())
            .raw_post(procedure, &body)
            .await
            .expect("request")
    }

    pub async fn post(&self, procedure: &str, body: Value) -> (StatusCode, Value) {
        self.post_with_key(procedure, Some(KEY), body).await
    }

    pub async fn get(&self, procedure: &str, query: &[(&str, &str)]) -> (StatusCode, Value) {
        self.get_with_key(procedure, KEY, query).await
    }

    /// `/metrics` as an administrator reads it.
    pub async fn metrics(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.url))
            .header("x-api-key", KEY)
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text")
    }

    pub async fn get_with_key(
        &self,
        procedure: &str,
        key: &str,
        query: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        self.api
            .with_key(key)
            .raw_get(procedure, query)
            .await
            .expect("request")
    }

    /// Creates a sandbox from `body` (environment filled in) and returns its record.
    pub async fn create(&self, mut body: Value) -> Value {
        body["environmentId"] = json!(self.env_id);
        let (status, sandbox) = self.post("sandbox.create", body).await;
        assert_eq!(status, StatusCode::OK, "create failed: {sandbox}");
        assert_eq!(sandbox["status"], "running");
        sandbox
    }

    pub async fn exec(&self, sandbox: &Value, cmd: &str) -> Value {
        let (status, result) = self
            .post(
                "sandbox.exec",
                json!({"sandboxId": sandbox["sandboxId"], "cmd": cmd}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "exec failed: {result}");
        result
    }
}

impl TestServer {
    /// The command lines of the processes in a sandbox's container, as the engine's
    /// `top` shows them.
    pub async fn commands(&self, sandbox: &Value) -> Vec<String> {
        let top = self
            .docker()
            .top_processes(container(sandbox), None)
            .await
            .unwrap();
        top.processes
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| p.last().cloned())
            .collect()
    }

    /// Waits up to 10 s until the sandbox's container is gone from the engine.
    pub async fn wait_container_removed(&self, sandbox: &Value) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self
            .docker()
            .inspect_container(container(sandbox), None)
            .await
            .is_ok()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "container of {} still there",
                id(sandbox)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits up to 10 s until a process of the sandbox runs a command containing `needle`.
    pub async fn wait_running(&self, sandbox: &Value, needle: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let running = self.commands(sandbox).await;
            if running.iter().any(|cmd| cmd.contains(needle)) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{needle} not running: {running:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits up to 10 s until no process of the sandbox matches `gone`.
    pub async fn wait_gone(&self, sandbox: &Value, gone: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left = self.commands(sandbox).await;
            if !left.iter().any(|cmd| gone(cmd)) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still running: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if !self.instance.is_empty() {
            let label = format!("sandboxd.instance={}", self.instance);
            remove_labelled(&label);
            // The containers of its template builds' steps.
            remove_labelled(&format!("sandboxd.buildInstance={}", self.instance));
            // Sandboxes it ran on the test's remote server.
            if crate::remote_host::remote_dir()
                .join("docker.sock")
                .exists()
            {
                remove_labelled_on(Some(&crate::remote_host::remote_docker_host()), &label);
            }
        }
    }
}

/// The data dir of a stopped server; its containers are removed when this is dropped
/// without a restart.
pub struct StoppedServer {
    data: Option<TempDir>,
    instance: String,
}

impl StoppedServer {
    pub fn path(&self) -> &std::path::Path {
        self.data.as_ref().expect("data dir").path()
    }
}

impl Drop for StoppedServer {
    fn drop(&mut self) {
        if !self.instance.is_empty() {
            remove_labelled(&format!("sandboxd.instance={}", self.instance));
        }
    }
}

/// Force-removes every container with `label` through the Docker CLI (works from Drop).
pub fn remove_labelled(label: &str) {
    remove_labelled_on(None, label);
}

/// [`remove_labelled`] on the engine at `host` (a `unix://` address), or the local one.
pub fn remove_labelled_on(host: Option<&str>, label: &str) {
    let docker = || {
        let mut command = std::process::Command::new("docker");
        if let Some(host) = host {
            command.args(["-H", host]);
        }
        command
    };
    // The containers, by the scripts' removal: it tries a container the engine could not
    // kill at once again, and takes the cgroup directories the engine left of it.
    let removed = std::process::Command::new("bash")
        .args(["-c", r#"source "$0" && remove_containers "$1""#])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/lib/remove-containers.sh"
        ))
        .arg(format!("label={label}"))
        .envs(host.map(|host| ("DOCKER_HOST", host)))
        .stdout(std::process::Stdio::null())
        .status();
    if !matches!(removed, Ok(status) if status.success()) {
        eprintln!("the containers labelled {label} were not all removed: {removed:?}");
    }
    // Volumes carry the installation's label too.
    let volumes = docker()
        .args(["volume", "ls", "-q", "--filter", &format!("label={label}")])
        .output();
    if let Ok(out) = volumes {
        let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if !names.is_empty() {
            let _ = docker().args(["volume", "rm", "-f"]).args(&names).output();
        }
    }
    // The memory kept with its snapshots, on the local engine's host.
    if host.is_none() {
        remove_kept_memory(label);
    }
    // Snapshot images carry the installation's label too.
    let images = docker()
        .args(["images", "-q", "--filter", &format!("label={label}")])
        .output();
    if let Ok(out) = images {
        let mut ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        ids.dedup();
        if !ids.is_empty() {
            let _ = docker().arg("rmi").arg("-f").args(&ids).output();
        }
    }
}

/// Removes `<data root>/sandboxd-memory/<snapshot>` for each snapshot image with `label`.
fn remove_kept_memory(label: &str) {
    let text = |args: &[&str]| {
        std::process::Command::new("docker")
            .args(args)
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let root = text(&["info", "-f", "{{.DockerRootDir}}"]);
    if root.is_empty() {
        return;
    }
    let snapshots = text(&[
        "images",
        "--filter",
        &format!("label={label}"),
        "--format",
        "{{.Label \"sandboxd.snapshot\"}}",
    ]);
    for snapshot in snapshots.split_whitespace() {
        if snapshot.bytes().all(|b| b.is_ascii_alphanumeric()) {
            let _ = std::fs::remove_dir_all(
                std::path::Path::new(&root)
                    .join("sandboxd-memory")
                    .join(snapshot),
            );
        }
    }
}

pub fn id(value: &Value) -> &str {
    value["sandboxId"].as_str().expect("sandboxId")
}

pub fn container(value: &Value) -> &str {
    value["containerId"].as_str().expect("containerId")
}

/// A loopback port nothing listens on (it was free a moment ago).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// This process's resident memory, in KiB (the test's server runs in it).
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The peak of this process's memory (KiB) while `work` runs, sampled every 50 ms.
pub async fn peak_while<T>(work: impl std::future::Future<Output = T>) -> (T, u64) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let done = done.clone();
        async move {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib());
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            peak.max(rss_kib())
        }
    });
    let out = work.await;
    done.store(true, Ordering::Relaxed);
    (out, sampler.await.unwrap())
}
