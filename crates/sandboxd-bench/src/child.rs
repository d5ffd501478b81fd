//! `sandboxd serve` as a separate process, as users run it: its latency is not shared
//! with the benchmark's own runtime, and its memory is measured alone.
//!
//! Every scenario goes through the API; its RSS is read.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::http::{Http, KEY};

/// How a server process is set up.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// Whether sandboxes get the in-sandbox agent (else everything goes through the
    /// engine's exec and archive API).
    pub agent: bool,
    /// Warm pool size of the `base` template.
    pub pool: usize,
    /// A PostgreSQL database (shared by replicas, with [`BENCH_MASTER_KEY`]); `None`:
    /// SQLite in the server's data directory.
    pub database: Option<String>,
    /// More of the server's environment (settings), as name and value.
    pub env: Vec<(String, String)>,
}

/// The master key of benchmark servers on PostgreSQL: replicas share it.
pub const BENCH_MASTER_KEY: [u8; 32] = [0x5b; 32];

pub struct ChildServer {
    pub http: Http,
    instance: String,
    child: Child,
    data: tempfile::TempDir,
}

impl ChildServer {
    pub async fn start(
        binary: &std::path::Path,
        image: &str,
        setup: Setup,
    ) -> anyhow::Result<Self> {
        if !binary.is_file() {
            bail!(
                "no server binary at {}: run cargo build --release -p sandboxd",
                binary.display()
            );
        }
        let data = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut command = Command::new(binary);
        if let Some(url) = &setup.database {
            let hex: String = BENCH_MASTER_KEY
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            command
                .env("SANDBOXD_DATABASE_URL", url)
                .env("SANDBOXD_MASTER_KEY", hex);
        }
        let child = command
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(data.path())
            .env("SANDBOXD_BOOTSTRAP_KEY", KEY)
            // The agent built into the server, or none at all.
            .env_remove("SANDBOXD_AGENT_BINARY")
            .env("SANDBOXD_AGENT", setup.agent.to_string())
            .env("SANDBOXD_TEMPLATES__BASE__IMAGE", image)
            .env("SANDBOXD_POOLS__BASE__SIZE", setup.pool.to_string())
            // Cold creates are measured as such: no pool is kept for their demand.
            .env("SANDBOXD_WARM_ON_DEMAND__BUDGET", "0")
            // The benchmark drives one key hard; the per-key limit would measure itself.
            .env("SANDBOXD_RATE_LIMIT_PER_SECOND", "0")
            .env("SANDBOXD_SERVERS__ALLOWED_NETWORKS", "[\"127.0.0.0/8\"]")
            .env("SANDBOXD_LOG", "warn")
            .envs(setup.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut child = child;
        let ready = async {
            let http = Http::connect(format!("http://127.0.0.1:{port}")).await?;
            let store = match &setup.database {
                Some(url) => {
                    let database = sandboxd_store::Database::Postgres { url: url.clone() };
                    sandboxd_store::Store::connect(&database, data.path(), Some(&BENCH_MASTER_KEY))
                        .await?
                }
                None => sandboxd_store::Store::open(data.path()).await?,
            };
            let instance = store.instance_id().await?;
            store.close().await;
            Ok::<_, anyhow::Error>((http, instance))
        }
        .await;
        match ready {
            Ok((http, instance)) => Ok(Self {
                http,
                instance,
                child,
                data,
            }),
            Err(error) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(error)
            }
        }
    }

    /// The server's data directory (its SQLite database).
    pub fn data_dir(&self) -> &std::path::Path {
        self.data.path()
    }

    /// The label value of this server's containers.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Waits until the warm pool has `size` members ready and no removal is running, so
    /// the next measurement competes with no background work.
    pub async fn settle(&self, size: usize) -> anyhow::Result<()> {
        self.settle_pool("isolated", size).await
    }

    /// As [`ChildServer::settle`], for the base template's pool of `network` (one kept
    /// for demand, unless `isolated`).
    pub async fn settle_pool(&self, network: &str, size: usize) -> anyhow::Result<()> {
        self.settle_series(
            &format!(
                "sandboxd_pool_ready{{pool=\"base\",server=\"local\",network=\"{network}\",image=\"template\"}}"
            ),
            size,
        )
        .await
    }

    /// As [`ChildServer::settle`], for the pools of a metric's series
    /// (`sandboxd_pool_ready{…}`).
    pub async fn settle_series(&self, metric: &str, size: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = self.http.metric(metric).await?.unwrap_or(0.0);
            let removing = self
                .http
                .metric("sandboxd_container_removals_pending")
                .await?
                .unwrap_or(0.0);
            if ready >= size as f64 && removing == 0.0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the warm pool did not refill");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Resident and peak memory of the server process, in MiB.
    pub fn memory_mib(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .map_or(f64::NAN, |kib| kib / 1024.0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
