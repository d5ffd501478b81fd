//! The sandboxd side: a real server on a loopback port, driven over HTTP.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sandboxd_server::{Server, ServerConfig};
use serde_json::{Value, json};

pub const KEY: &str = "sbx_benchmark_key_0123456789abcdefghijklmnopqrstuv";

pub struct Api {
    service: sandboxd_server::Service,
    url: String,
    instance: String,
    env_id: String,
    client: reqwest::Client,
    stop: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    _data: tempfile::TempDir,
}

impl Api {
    /// A server with or without the in-sandbox agent (`SANDBOXD_AGENT_BINARY`, or where
    /// `scripts/build-agent.sh` puts it).
    pub async fn start(image: &str, with_agent: bool, pool: usize) -> anyhow::Result<Self> {
        let data = tempfile::tempdir()?;
        let mut config = ServerConfig::new(data.path().to_path_buf());
        config.agent_binary = Some(if with_agent {
            agent_binary()?
        } else {
            std::path::PathBuf::from("/nonexistent")
        });
        config.bootstrap_key = Some(KEY.into());
        config.template_images.insert("base".into(), image.into());
        // The benchmark drives one key hard; the per-key limit would measure itself.
        config.rate_limit_per_second = 0;
        if pool > 0 {
            config.pools.insert("base".into(), pool);
        }
        let server = Server::start(config).await?;
        let env_id = server
            .bootstrap
            .as_ref()
            .map(|b| b.environment_id.clone())
            .context("fresh data dir bootstraps")?;
        let instance = server.service.instance_id().to_owned();
        let service = server.service.clone();
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
            service,
            url,
            instance,
            env_id,
            client: reqwest::Client::new(),
            stop: std::sync::Mutex::new(Some(stop)),
            task: std::sync::Mutex::new(Some(task)),
            _data: data,
        })
    }

    pub fn env_id(&self) -> &str {
        &self.env_id
    }

    /// The service behind the HTTP API, for the in-process scenarios.
    pub fn service(&self) -> &sandboxd_server::Service {
        &self.service
    }

    /// Waits until the warm pool has `size` members ready and no removal is running, so
    /// the next measurement competes with no background work.
    pub async fn settle(&self, size: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.service.pools_ready().get("base").copied().unwrap_or(0) < size
            || self.service.removals_pending() > 0
        {
            if Instant::now() > deadline {
                bail!("the warm pool did not refill");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// The label value of this server's containers.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub async fn stop(&self) {
        if let Some(stop) = self.stop.lock().ok().and_then(|mut s| s.take()) {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.lock().ok().and_then(|mut t| t.take()) {
            let _ = task.await;
        }
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

    /// `true` straight through the sandbox's agent connection: the channel's own round
    /// trip, without HTTP, authentication or the store.
    pub async fn agent_channel_true(&self, id: &str) -> anyhow::Result<Duration> {
        let conn = self
            .service
            .agents()
            .connection(id)
            .context("agent not connected")?;
        let spec = sandboxd_server::agent::AgentExec {
            argv: vec!["true".into()],
            cwd: None,
            env: Vec::new(),
            timeout: Duration::from_secs(10),
            max_output: 1024,
            stream: None,
        };
        let started = Instant::now();
        let (outcome, _) = conn.exec(spec).await?;
        let took = started.elapsed();
        if outcome.exit_code != 0 {
            bail!("true failed through the agent");
        }
        Ok(took)
    }

    /// `sandbox.one`: the cost of HTTP, authentication and one read of the store.
    pub async fn one(&self, id: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let response = self
            .client
            .get(format!("{}/api/sandbox.one", self.url))
            .query(&[("sandboxId", id)])
            .header("x-api-key", KEY)
            .send()
            .await?;
        let ok = response.status().is_success();
        let _ = response.bytes().await?;
        let took = started.elapsed();
        if !ok {
            bail!("sandbox.one failed");
        }
        Ok(took)
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

pub fn agent_binary() -> anyhow::Result<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("SANDBOXD_AGENT_BINARY") {
        return Ok(path.into());
    }
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/agent")
        .join(triple)
        .join("release/sandboxd-agent");
    if !path.is_file() {
        bail!(
            "no agent binary at {}: run scripts/build-agent.sh",
            path.display()
        );
    }
    Ok(path)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl Api {
    /// A streaming exec connection to a sandbox, past its `ready`.
    pub async fn stream(&self, id: &str) -> anyhow::Result<Socket> {
        use futures_util::StreamExt as _;
        use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
        let url = format!(
            "{}/sandbox-exec?sandboxId={id}",
            self.url.replacen("http", "ws", 1)
        );
        let mut request = url.into_client_request()?;
        request.headers_mut().insert("x-api-key", KEY.parse()?);
        let (mut socket, _) = tokio_tungstenite::connect_async(request).await?;
        let ready = socket.next().await.context("closed before ready")??;
        if !ready.to_text()?.contains("ready") {
            bail!("unexpected first message {ready}");
        }
        Ok(socket)
    }

    /// Sends `echo hi` on a streaming connection: the time to the first output message,
    /// then waits for the exit.
    pub async fn first_streamed_byte(socket: &mut Socket) -> anyhow::Result<Duration> {
        use futures_util::{SinkExt as _, StreamExt as _};
        use tokio_tungstenite::tungstenite::Message;
        let started = Instant::now();
        let exec = json!({"type": "exec", "cmd": "echo hi"}).to_string();
        socket.send(Message::Text(exec.into())).await?;
        let mut first = None;
        loop {
            let message = socket.next().await.context("closed")??;
            let value: Value = serde_json::from_str(message.to_text()?)?;
            match value["type"].as_str() {
                Some("stdout") => {
                    first.get_or_insert_with(|| started.elapsed());
                }
                Some("exit") => break,
                _ => bail!("unexpected message {value}"),
            }
        }
        first.context("no output")
    }
}
