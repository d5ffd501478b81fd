//! The real server binary on a free port with its own data dir, for the command-line
//! tests; it is stopped, and the containers it made removed, when dropped.
#![allow(dead_code)]

pub mod browser;
pub mod postgres;

/// A port of loopback free now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const KEY: &str = "sbx_cli_test_key_0123456789abcdefghijklmnop";

/// The output of one command.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `sandboxd ARGS` with `home` as its home and working directory (so no profile
/// of the machine's user is read or written) and `env` set.
pub fn sandboxd(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Ran {
    let output = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("SANDBOXD_URL")
        .env_remove("SANDBOXD_KEY")
        .envs(env.iter().copied())
        .current_dir(home)
        .output()
        .unwrap();
    Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub struct RunningServer {
    pub url: String,
    pub env_id: String,
    /// The first project's id: the volumes made in it carry it.
    project_id: String,
    /// The installation's id, which every container it makes carries (warm pool
    /// members too, which belong to no environment).
    instance: String,
    server: std::process::Child,
    data_dir: PathBuf,
    _data: tempfile::TempDir,
}

impl RunningServer {
    pub async fn start() -> Self {
        Self::start_with_env(&[]).await
    }

    /// A server with extra `SANDBOXD_*` settings in its environment.
    pub async fn start_with_env(env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_owned();
        Self::start_in(dir, None, data_dir, false, env).await
    }

    /// A replica: a server with a data directory of its own on the shared `database`,
    /// logging to `server.log` (`info`).
    pub async fn replica(database: &postgres::TestDatabase, env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_owned();
        let mut all = vec![
            ("SANDBOXD_DATABASE_URL", database.url.as_str()),
            ("SANDBOXD_MASTER_KEY", postgres::MASTER_KEY),
        ];
        all.extend_from_slice(env);
        Self::start_in(dir, None, data_dir, true, &all).await
    }

    /// A server started in `workdir` with `--data-dir relative`, as from a fresh clone.
    pub async fn start_relative(workdir: tempfile::TempDir, relative: &Path) -> Self {
        let cwd = workdir.path().to_owned();
        Self::start_in(workdir, Some(cwd), relative.to_owned(), true, &[]).await
    }

    /// A server logging to `server.log` in its data dir, with `env` set.
    pub async fn start_logged_with(env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_owned();
        Self::start_in(dir, None, data_dir, true, env).await
    }

    /// A server logging everything (`debug`) to `server.log` in its data dir.
    pub async fn start_logged() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_owned();
        Self::start_in(dir, None, data_dir, true, &[]).await
    }

    /// The data dir: the database, the keys, and `server.log` when logged.
    pub fn data_dir(&self) -> PathBuf {
        match self.server_cwd() {
            Some(cwd) if self.data_dir.is_relative() => cwd.join(&self.data_dir),
            _ => self.data_dir.clone(),
        }
    }

    fn server_cwd(&self) -> Option<PathBuf> {
        self.data_dir
            .is_relative()
            .then(|| self._data.path().to_owned())
    }

    /// What the server logged so far (stdout and stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._data.path().join("server.log")).unwrap_or_default()
    }

    async fn start_in(
        dir: tempfile::TempDir,
        cwd: Option<PathBuf>,
        data_dir: PathBuf,
        logged: bool,
        env: &[(&str, &str)],
    ) -> Self {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let (stdout, stderr) = if logged {
            let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
            (Stdio::from(log.try_clone().unwrap()), Stdio::from(log))
        } else {
            (Stdio::null(), Stdio::null())
        };
        let mut command = Command::new(env!("CARGO_BIN_EXE_sandboxd"));
        if let Some(cwd) = &cwd {
            command.current_dir(cwd);
        }
        command.envs(env.iter().copied());
        let server = command
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(&data_dir)
            .env("SANDBOXD_BOOTSTRAP_KEY", KEY)
            // The agent built into the binary, as for any user.
            .env_remove("SANDBOXD_AGENT_BINARY")
            .env(
                "SANDBOXD_TEMPLATES__BASE__IMAGE",
                "sandboxd-local/debian:bookworm",
            )
            .env(
                "SANDBOXD_LOG",
                env.iter()
                    .find(|(k, _)| *k == "SANDBOXD_LOG")
                    .map_or(if logged { "debug" } else { "info" }, |(_, v)| *v),
            )
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut running = Self {
            url,
            env_id: String::new(),
            project_id: String::new(),
            instance: String::new(),
            server,
            data_dir,
            _data: dir,
        };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        let projects: serde_json::Value = loop {
            if let Ok(response) = client
                .get(format!("{}/api/project.all", running.url))
                .header("x-api-key", KEY)
                .send()
                .await
            {
                break response.json().await.unwrap();
            }
            assert!(Instant::now() < deadline, "server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        running.project_id = projects[0]["projectId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        running.env_id = projects[0]["environments"][0]["environmentId"]
            .as_str()
            .unwrap()
            .to_owned();
        running.instance = instance_of(&running.data_dir(), env).await;
        running
    }

    /// `POST /api/<procedure>` with `key`: the status and the JSON answer (`null` when
    /// the answer is not JSON).
    pub async fn post(
        &self,
        key: &str,
        procedure: &str,
        body: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let (status, body) = self.api(key).raw_post(procedure, &body).await.unwrap();
        (status.as_u16(), body)
    }

    /// `GET /api/<path>` (with its query) with `key`, as [`RunningServer::post`].
    pub async fn get(&self, key: &str, path: &str) -> (u16, serde_json::Value) {
        let (status, body) = self.api(key).raw_get(path, &()).await.unwrap();
        (status.as_u16(), body)
    }

    /// The typed client of this server with `key`.
    pub fn api(&self, key: &str) -> sandboxd_client::Client {
        sandboxd_client::Client::new(&self.url, key).unwrap()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.server.id()
    }

    /// Stops the server process (as a crash would); its containers stay until drop.
    pub fn stop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }

    /// Operations served through the agent and through the engine, from `/metrics`.
    pub async fn served(&self) -> (u64, u64) {
        (
            self.metric("sandboxd_operations_served_total{path=\"agent\"}")
                .await,
            self.metric("sandboxd_operations_served_total{path=\"engine\"}")
                .await,
        )
    }

    /// The value of one series of `/metrics` (0 when absent).
    pub async fn metric(&self, series: &str) -> u64 {
        let text = reqwest::Client::new()
            .get(format!("{}/metrics", self.url))
            .header("x-api-key", KEY)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map_or(0, |n| n.trim().parse().unwrap())
    }

    /// Creates a sandbox from the `base` template; returns its id.
    pub async fn create(&self) -> String {
        let request = sandboxd_core::api::CreateSandboxRequest {
            environment_id: self.env_id.clone(),
            template: Some("base".into()),
            ..Default::default()
        };
        self.api(KEY).create(&request).await.unwrap().sandbox_id
    }
}

/// The installation id of the server on `data_dir` and the database `env` names (its
/// own SQLite when none).
async fn instance_of(data_dir: &Path, env: &[(&str, &str)]) -> String {
    let setting = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let master = setting("SANDBOXD_MASTER_KEY").map(|hex| {
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        key
    });
    let database =
        sandboxd_store::Database::from_config(setting("SANDBOXD_DATABASE_URL"), data_dir).unwrap();
    let store = sandboxd_store::Store::connect(&database, data_dir, master.as_ref())
        .await
        .unwrap();
    let instance = store.instance_id().await.unwrap();
    store.close().await;
    instance
}

/// Lists what `docker LIST…` prints (one id per line; each once), then runs
/// `docker REMOVE… <id>` for each, ignoring failures.
fn remove_listed(list: &[&str], remove: &[&str]) {
    let Ok(listed) = Command::new("docker").args(list).output() else {
        return;
    };
    let ids: std::collections::BTreeSet<String> = String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    for id in ids {
        let _ = Command::new("docker").args(remove).arg(&id).output();
    }
}

/// Removes every container listed for all of `filters` by the scripts' removal: it tries
/// a container the engine could not kill at once again, and takes the cgroup directories
/// the engine left of it.
fn remove_containers(filters: &[&str]) {
    let removed = Command::new("bash")
        .args(["-c", r#"source "$0" && remove_containers "$@""#])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/lib/remove-containers.sh"
        ))
        .args(filters)
        .stdout(Stdio::null())
        .status();
    if !matches!(removed, Ok(status) if status.success()) {
        eprintln!("the containers of {filters:?} were not all removed: {removed:?}");
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        // Stopped as an operator would (SIGTERM): the server finishes the warm members
        // it is making and removes its pools. SIGKILL after a bound; what it leaves is
        // removed below.
        if matches!(self.server.try_wait(), Ok(None)) {
            let _ = Command::new("kill")
                .args(["-TERM", &self.server.id().to_string()])
                .output();
        }
        let bound = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while matches!(self.server.try_wait(), Ok(None)) && std::time::Instant::now() < bound {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
        // A failed test shows what its server said last.
        if std::thread::panicking() {
            let log =
                std::fs::read_to_string(self.data_dir().join("server.log")).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(80)..];
            if !tail.is_empty() {
                eprintln!("the server's last log lines:\n{}", tail.join("\n"));
            }
        }
        if self.env_id.is_empty() {
            return;
        }
        let environment = format!("label=sandboxd.environmentId={}", self.env_id);
        // Warm pool members (the pools kept for demand are on by default) belong to no
        // environment: found by the installation and the pool label.
        let instance = format!("label=sandboxd.instance={}", self.instance);
        remove_containers(&[&instance, "label=sandboxd.pool"]);
        remove_containers(&[&environment]);
        // The containers of its template builds' steps.
        let builds = format!("label=sandboxd.buildInstance={}", self.instance);
        remove_containers(&[&builds]);
        // Snapshot images carry the labels of the container they were taken of.
        remove_listed(&["images", "-q", "--filter", &environment], &["rmi", "-f"]);
        // Volumes carry their project's.
        let project = format!("label=sandboxd.projectId={}", self.project_id);
        remove_listed(
            &["volume", "ls", "-q", "--filter", &project],
            &["volume", "rm", "-f"],
        );
    }
}

/// Milliseconds since the epoch, as the server counts them.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
