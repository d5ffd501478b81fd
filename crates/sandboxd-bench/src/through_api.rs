//! The sandboxd side: a real server on a loopback port, driven over HTTP.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sandboxd_server::{Server, ServerConfig};
use serde_json::{Value, json};

const KEY: &str = "sbx_benchmark_key_0123456789abcdefghijklmnopqrstuv";

pub struct Api {
    url: String,
    instance: String,
    env_id: String,
    client: reqwest::Client,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    _data: tempfile::TempDir,
}

impl Api {
    pub async fn start(image: &str) -> anyhow::Result<Self> {
        let data = tempfile::tempdir()?;
        let mut config = ServerConfig::new(data.path().to_path_buf());
        config.bootstrap_key = Some(KEY.into());
        config.template_images.insert("base".into(), image.into());
        let server = Server::start(config).await?;
        let env_id = server
            .bootstrap
            .as_ref()
            .map(|b| b.environment_id.clone())
            .context("fresh data dir bootstraps")?;
        let instance = server.service.instance_id().to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = server
                .serve(listener, async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Self {
            url,
            instance,
            env_id,
            client: reqwest::Client::new(),
            stop,
            task,
            _data: data,
        })
    }

    /// The label value of this server's containers.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }

    async fn post(&self, procedure: &str, body: Value) -> anyhow::Result<Value> {
        let response = self
            .client
            .post(format!("{}/api/{procedure}", self.url))
            .header("x-api-key", KEY)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let value: Value = response.json().await?;
        if !status.is_success() {
            bail!("{procedure} failed with {status}: {value}");
        }
        Ok(value)
    }

    /// Creates a sandbox and runs `echo hi`; the time until the output is back.
    pub async fn create_and_echo(&self) -> anyhow::Result<(String, Duration)> {
        let started = Instant::now();
        let sandbox = self
            .post(
                "sandbox.create",
                json!({"environmentId": self.env_id, "template": "base"}),
            )
            .await?;
        let id = sandbox["sandboxId"]
            .as_str()
            .context("sandboxId")?
            .to_owned();
        let out = self
            .post("sandbox.exec", json!({"sandboxId": id, "cmd": "echo hi"}))
            .await?;
        let took = started.elapsed();
        if out["stdout"] != "hi\n" {
            bail!("unexpected output {out}");
        }
        Ok((id, took))
    }

    pub async fn exec_true(&self, id: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let out = self
            .post("sandbox.exec", json!({"sandboxId": id, "cmd": "true"}))
            .await?;
        let took = started.elapsed();
        if out["exitCode"] != 0 {
            bail!("true failed: {out}");
        }
        Ok(took)
    }

    pub async fn write_read(&self, id: &str, payload: &[u8]) -> anyhow::Result<Duration> {
        let encoded = STANDARD.encode(payload);
        let started = Instant::now();
        self.post(
            "sandbox.writeFile",
            json!({"sandboxId": id, "path": "/tmp/bench.bin", "encoding": "base64", "content": encoded}),
        )
        .await?;
        let response = self
            .client
            .get(format!("{}/api/sandbox.readFile", self.url))
            .query(&[
                ("sandboxId", id),
                ("path", "/tmp/bench.bin"),
                ("encoding", "base64"),
            ])
            .header("x-api-key", KEY)
            .send()
            .await?;
        let value: Value = response.json().await?;
        let took = started.elapsed();
        if value["size"] != payload.len() {
            bail!("read back {value}");
        }
        Ok(took)
    }

    pub async fn remove(&self, id: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.post("sandbox.remove", json!({"sandboxId": id}))
            .await?;
        Ok(started.elapsed())
    }
}
