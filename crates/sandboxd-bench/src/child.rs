//! `sandboxd serve` as a separate process, so its memory is measured alone.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::through_api::{KEY, agent_binary};

pub struct ChildServer {
    pub url: String,
    pub env_id: String,
    pub client: reqwest::Client,
    child: Child,
    _data: tempfile::TempDir,
}

impl ChildServer {
    pub async fn start(binary: &std::path::Path, image: &str) -> anyhow::Result<Self> {
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
        let child = Command::new(binary)
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(data.path())
            .env("SANDBOXD_BOOTSTRAP_KEY", KEY)
            .env("SANDBOXD_AGENT_BINARY", agent_binary()?)
            .env("SANDBOXD_TEMPLATES__BASE__IMAGE", image)
            .env("SANDBOXD_RATE_LIMIT_PER_SECOND", "0")
            .env("SANDBOXD_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .build()?;
        let url = format!("http://127.0.0.1:{port}");
        let mut server = Self {
            url,
            env_id: String::new(),
            client,
            child,
            _data: data,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let projects: Value = loop {
            if let Ok(response) = server
                .client
                .get(format!("{}/api/project.all", server.url))
                .header("x-api-key", KEY)
                .send()
                .await
            {
                break response.json().await?;
            }
            if Instant::now() > deadline {
                bail!("the server process did not start");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        server.env_id = projects[0]["environments"][0]["environmentId"]
            .as_str()
            .context("environment")?
            .to_owned();
        Ok(server)
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
