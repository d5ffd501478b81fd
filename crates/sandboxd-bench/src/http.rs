//! A sandboxd server as its clients see it: a URL, the bootstrap key and environment,
//! and the REST calls of the scenarios (through the typed client, `sandboxd-client`)
//! and their WebSocket ones.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use sandboxd_core::api::{Encoding, ReadFileQuery, SandboxView, WriteFileRequest};
use sandboxd_core::model::SandboxStatus;
use serde_json::{Value, json};

/// The bootstrap key of every server the benchmark starts.
pub const KEY: &str = "sbx_benchmark_key_0123456789abcdefghijklmnopqrstuv";

pub struct Http {
    pub url: String,
    pub env_id: String,
    pub api: sandboxd_client::Client,
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl Http {
    /// Waits until the server at `url` answers, and finds its bootstrap environment.
    pub async fn connect(url: String) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .build()?;
        let api = sandboxd_client::Client::with_http(http, &url, KEY);
        let deadline = Instant::now() + Duration::from_secs(30);
        let projects = loop {
            match api.projects().await {
                Ok(projects) => break projects,
                Err(sandboxd_client::Error::Unreachable(_)) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => bail!("the server at {url} did not start: {error}"),
            }
        };
        let env_id = projects
            .first()
            .and_then(|project| project.environments.first())
            .context("environment")?
            .environment_id
            .clone();
        Ok(Self { url, env_id, api })
    }

    pub async fn post(&self, procedure: &str, body: Value) -> anyhow::Result<Value> {
        self.api
            .call(procedure, &body)
            .await
            .with_context(|| procedure.to_owned())
    }

    pub async fn get(&self, procedure: &str, query: &[(&str, &str)]) -> anyhow::Result<Value> {
        self.api
            .call(procedure, query)
            .await
            .with_context(|| procedure.to_owned())
    }

    /// A GET procedure's body as it arrives, unparsed: the time to its last byte is the
    /// server's, whatever the client then does with it.
    pub async fn get_body(
        &self,
        procedure: &str,
        query: &[(&str, &str)],
    ) -> anyhow::Result<Vec<u8>> {
        let response = reqwest::Client::new()
            .get(format!("{}/api/{procedure}", self.url))
            .header("x-api-key", KEY)
            .query(query)
            .send()
            .await?
            .error_for_status()?;
        Ok(response.bytes().await?.to_vec())
    }

    /// Creates a sandbox and runs `echo hi`; the time until the output is back.
    pub async fn create_and_echo(&self) -> anyhow::Result<(String, Duration)> {
        self.create_with_and_echo(json!({})).await
    }

    /// As [`Http::create_and_echo`], with more fields in the create request.
    pub async fn create_with_and_echo(&self, extra: Value) -> anyhow::Result<(String, Duration)> {
        let mut body = json!({"environmentId": self.env_id, "template": "base"});
        if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
            body.extend(extra);
        }
        let started = Instant::now();
        let sandbox: SandboxView = self.api.call("sandbox.create", &body).await?;
        let out = self.api.run(&sandbox.sandbox_id, "echo hi").await?;
        let took = started.elapsed();
        if out.stdout != "hi\n" {
            bail!("unexpected output {out:?}");
        }
        Ok((sandbox.sandbox_id, took))
    }

    /// `sandbox.one`: the cost of HTTP, authentication and one read of the store.
    pub async fn one(&self, id: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let response = self
            .api
            .request_with("sandbox.one", &[("sandboxId", id)])?
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

    /// `sandbox.pause` then `sandbox.resume`: how long each took.
    pub async fn pause_resume(&self, id: &str) -> anyhow::Result<(Duration, Duration)> {
        let started = Instant::now();
        let paused = self
            .api
            .pause(id, sandboxd_core::model::PauseMemory::Ram)
            .await?;
        let pause = started.elapsed();
        let started = Instant::now();
        let resumed = self.api.resume(id).await?;
        let resume = started.elapsed();
        if paused.status != SandboxStatus::Paused || resumed.status != SandboxStatus::Running {
            bail!("pause → {:?}, resume → {:?}", paused.status, resumed.status);
        }
        Ok((pause, resume))
    }

    pub async fn exec_true(&self, id: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let out = self.api.run(id, "true").await?;
        let took = started.elapsed();
        if out.exit_code != 0 {
            bail!("true failed: {out:?}");
        }
        Ok(took)
    }

    pub async fn write_read(&self, id: &str, payload: &[u8]) -> anyhow::Result<Duration> {
        let encoded = base64_simd::STANDARD.encode_to_string(payload);
        let started = Instant::now();
        let path = "/tmp/bench.bin".to_owned();
        self.api
            .write_file(&WriteFileRequest {
                sandbox_id: id.to_owned(),
                path: path.clone(),
                encoding: Encoding::Base64,
                content: encoded,
                ..WriteFileRequest::default()
            })
            .await?;
        let read = self
            .api
            .read_file(&ReadFileQuery {
                sandbox_id: id.to_owned(),
                path,
                encoding: Encoding::Base64,
            })
            .await?;
        let took = started.elapsed();
        if read.size != payload.len() as u64 {
            bail!("read back {} bytes", read.size);
        }
        Ok(took)
    }

    pub async fn remove(&self, id: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.api.remove(id).await?;
        Ok(started.elapsed())
    }

    /// Requests per second of `path` with `clients` concurrent loops for `seconds`.
    pub async fn throughput(&self, path: &str, clients: usize, seconds: u64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let counts = futures_util::future::join_all((0..clients).map(|_| async {
            let mut done = 0u64;
            while Instant::now() < deadline {
                let ok = self
                    .api
                    .http()
                    .get(format!("{}{path}", self.url))
                    .header("x-api-key", KEY)
                    .send()
                    .await
                    .map(|r| r.status().is_success());
                if let Ok(true) = ok {
                    done += 1;
                }
            }
            done
        }))
        .await;
        counts.iter().sum::<u64>() as f64 / started.elapsed().as_secs_f64()
    }

    /// The value of a metric series, as `/metrics` renders it (`name{labels}`).
    pub async fn metric(&self, series: &str) -> anyhow::Result<Option<f64>> {
        let text = self
            .api
            .http()
            .get(format!("{}/metrics", self.url))
            .header("x-api-key", KEY)
            .send()
            .await?
            .text()
            .await?;
        Ok(text.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.trim().parse().ok()
        }))
    }

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
