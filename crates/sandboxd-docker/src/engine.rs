//! The engine client: one per Docker host, shared by every request.
//!
//! It connects to the local engine, negotiates the API version, and puts a timeout on
//! every call.

use std::future::Future;
use std::time::Duration;

use bollard::Docker;

use sandboxd_contracts::HostResources;

use crate::error::{EngineError, fault};

/// Timeout of a single engine call that is not an exec or a pull.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// bollard's own bound on a request's answer (as for a local engine).
const REQUEST_TIMEOUT_SECS: u64 = 120;

/// A connected Docker engine.
#[derive(Debug, Clone)]
pub struct DockerEngine {
    pub(crate) docker: Docker,
    /// The connection to a remote server's engine; `None` for the local engine.
    pub(crate) session: Option<std::sync::Arc<sandboxd_ssh::SshSession>>,
}

impl DockerEngine {
    /// Connects to the local engine (`DOCKER_HOST` honoured) and negotiates the API version,
    /// so both old (1.41) and new engines are spoken to in their own version.
    pub async fn connect_local() -> Result<Self, EngineError> {
        Self::negotiated(Docker::connect_with_local_defaults().map_err(fault)?, None).await
    }

    /// Connects to the engine listening on the unix socket at `path` (an engine of the
    /// operator's, or of a test's, besides the one `DOCKER_HOST` names).
    pub async fn connect_unix(path: &str) -> Result<Self, EngineError> {
        let docker =
            Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
                .map_err(fault)?;
        Self::negotiated(docker, None).await
    }

    /// The engine behind `docker`, spoken to in the API version it offers.
    async fn negotiated(
        docker: Docker,
        session: Option<std::sync::Arc<sandboxd_ssh::SshSession>>,
    ) -> Result<Self, EngineError> {
        let docker = bounded("negotiate", docker.negotiate_version())
            .await?
            .map_err(fault)?;
        Ok(Self { docker, session })
    }

    /// Connects to the engine of a remote server over its SSH connection (the engine's
    /// socket at `socket` on the server, usually `/var/run/docker.sock`) and negotiates
    /// the API version. Each request is a channel on that one connection.
    pub async fn connect_ssh(
        session: std::sync::Arc<sandboxd_ssh::SshSession>,
        socket: &str,
    ) -> Result<Self, EngineError> {
        Self::connect_ssh_with(session, socket, crate::AnswerCaps::default()).await
    }

    /// [`DockerEngine::connect_ssh`] with other bounds on the engine's answers.
    pub async fn connect_ssh_with(
        session: std::sync::Arc<sandboxd_ssh::SshSession>,
        socket: &str,
        caps: crate::AnswerCaps,
    ) -> Result<Self, EngineError> {
        let docker = crate::ssh_transport::docker_over(
            session.clone(),
            socket,
            REQUEST_TIMEOUT_SECS,
            bollard::API_DEFAULT_VERSION,
            caps,
        )
        .map_err(fault)?;
        Self::negotiated(docker, Some(session)).await
    }

    /// The OCI runtimes the engine offers (`runc`, and `runsc`, `kata-runtime`… when
    /// installed).
    pub(crate) async fn runtimes(&self) -> Result<Vec<String>, EngineError> {
        let info = bounded("info", self.docker.info()).await?.map_err(fault)?;
        let mut names: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
        names.sort();
        Ok(names)
    }

    /// How many CPUs the engine's host has (the most one container may be given).
    pub(crate) async fn host(&self) -> Result<HostResources, EngineError> {
        let info = bounded("info", self.docker.info()).await?.map_err(fault)?;
        Ok(HostResources {
            cpus: info.ncpu.unwrap_or_default(),
            memory_bytes: info.mem_total.unwrap_or_default(),
        })
    }

    /// The API version in use.
    pub(crate) fn api_version(&self) -> String {
        self.docker.client_version().to_string()
    }

    /// The underlying client, for tests and tools that inspect what sandboxd created.
    pub fn client(&self) -> &Docker {
        &self.docker
    }
}

/// Runs an engine call with the default timeout.
pub(crate) async fn bounded<T>(
    call: &'static str,
    future: impl Future<Output = T>,
) -> Result<T, EngineError> {
    tokio::time::timeout(CALL_TIMEOUT, future)
        .await
        .map_err(|_| EngineError::Timeout { call })
}
