//! sandboxd in the benchmark's own process: used where a scenario needs the service
//! itself (the agent channel without HTTP, the reaper and reconcile passes).

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use sandboxd_server::config::TemplateConfig;
use sandboxd_server::{Config, Engines, Server};

use crate::http::{Http, KEY};

pub struct Api {
    service: sandboxd_server::Service,
    http: Http,
    instance: String,
    stop: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    _data: tempfile::TempDir,
}

impl Api {
    /// A server with the in-sandbox agent, serving on a loopback port.
    pub async fn start(image: &str) -> anyhow::Result<Self> {
        let data = tempfile::tempdir()?;
        let mut config = Config::new(data.path().to_path_buf());
        config.agent_binary = Some(sandboxd_agent_embed::install(&data.path().join("bin"))?);
        config.bootstrap_key = Some(KEY.into());
        config
            .templates
            .insert("base".into(), TemplateConfig::image(image));
        // The benchmark drives one key hard; the per-key limit would measure itself.
        config.rate_limit_per_second = 0;
        let engine = sandboxd_docker::DockerEngine::connect_local().await?;
        let server = Server::start(config, Engines::local(std::sync::Arc::new(engine))).await?;
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
            http: Http::connect(url).await?,
            instance,
            stop: std::sync::Mutex::new(Some(stop)),
            task: std::sync::Mutex::new(Some(task)),
            _data: data,
        })
    }

    pub fn http(&self) -> &Http {
        &self.http
    }

    /// The service behind the HTTP API.
    pub fn service(&self) -> &sandboxd_server::Service {
        &self.service
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

    /// `true` straight through the sandbox's agent connection: the channel's own round
    /// trip, without HTTP, authentication or the store.
    pub async fn agent_channel_true(&self, id: &str) -> anyhow::Result<Duration> {
        let channel = self
            .service
            .agents()
            .channel(id)
            .context("agent not connected")?;
        let spec = sandboxd_docker::ExecSpec {
            argv: vec!["true".into()],
            cwd: None,
            env: Vec::new(),
            user: None,
            timeout: Duration::from_secs(10),
            max_output: 1024,
            stream: None,
        };
        let started = Instant::now();
        let outcome = channel.exec(spec).await?;
        let took = started.elapsed();
        if outcome.exit_code != 0 {
            bail!("true failed through the agent");
        }
        Ok(took)
    }
}
