//! The remote-server contract for Docker: the engine of a server reached over one SSH
//! connection (`sandboxd-ssh`), each engine request a channel to its socket.
//!
//! `SshConnector` implements `Connector`: `connect` refuses a server without a pinned
//! host key and one that cannot be reached, and hands back a `RemoteServer`: a
//! `DockerEngine` that reports its connection's health, `SshAgents` (`remote_agents.rs`;
//! none when sandboxes run without the agent) and a dialer for egress
//! (`SshSession::open_tcp`, a direct-tcpip channel). `probe` learns an unpinned host key
//! (or enforces the pinned one) and asks the engine for its CPUs and memory.

use std::sync::Arc;
use std::time::Duration;

use sandboxd_contracts::{ConnectError, Connector, Probe, RemoteAgents, RemoteServer, RemoteSpec};
use sandboxd_core::networks::AllowedNetworks;
use sandboxd_ssh::{AddressPolicy, HostKey, SshLink, SshSession, SshTarget};

use crate::engine::DockerEngine;
use crate::remote_agents::{AgentBinary, SshAgents};

/// How long a probe's connection may take.
const PROBE_CONNECT: Duration = Duration::from_secs(10);

/// Makes Docker engines of remote servers over SSH, with the agent sandboxes get there.
#[derive(Debug, Clone, Default)]
pub struct SshConnector {
    agent: Option<AgentBinary>,
    allowed: Arc<AllowedNetworks>,
}

impl SshConnector {
    /// Sandboxes on remote servers get the static agent at `agent` (read now), put on
    /// each server by sandboxd; `None`: they run without it. Servers are reached at
    /// public addresses only until [`SshConnector::allowing`] says otherwise.
    pub fn new(agent: Option<&std::path::Path>) -> std::io::Result<Self> {
        Ok(Self {
            agent: agent.map(AgentBinary::read).transpose()?,
            allowed: Arc::default(),
        })
    }

    /// Servers may also be reached in the operator's `allowed` networks.
    pub fn allowing(self, allowed: AllowedNetworks) -> Self {
        Self {
            allowed: Arc::new(allowed),
            ..self
        }
    }

    fn target(&self, spec: &RemoteSpec) -> Result<SshTarget, ConnectError> {
        let allowed = self.allowed.clone();
        target(spec, AddressPolicy::new(move |ip| allowed.permits(ip)))
    }
}

fn target(spec: &RemoteSpec, policy: AddressPolicy) -> Result<SshTarget, ConnectError> {
    let host_key = spec
        .host_key
        .as_deref()
        .map(HostKey::parse)
        .transpose()
        .map_err(ConnectError::HostKey)?;
    Ok(SshTarget {
        address: spec.address.clone(),
        port: spec.port,
        user: spec.user.clone(),
        private_key: spec.private_key.clone(),
        host_key,
        policy,
    })
}

/// What a failed connection is to the service: what the tenant may be told (a key it
/// gave that does not fit, an address the policy refuses), or only that the server
/// could not be reached, the cause kept for the log.
fn unreachable(error: sandboxd_ssh::SshError) -> ConnectError {
    use sandboxd_ssh::SshError as E;
    match error {
        E::PrivateKey(message) => ConnectError::PrivateKey(message),
        E::AddressRefused { .. } => ConnectError::NotAllowed(
            "the server's address is not one this installation connects to (the operator's \
             [servers] allowed_networks)"
                .into(),
        ),
        refused
        @ (E::HostKeyMismatch { .. } | E::HostKeyUnknown { .. } | E::AuthRefused { .. }) => {
            ConnectError::Refused(refused.to_string())
        }
        other => ConnectError::Unreachable(Box::new(other)),
    }
}

#[async_trait::async_trait]
impl Connector for SshConnector {
    fn check_keys(
        &self,
        host_key: Option<&str>,
        private_key: Option<&str>,
    ) -> Result<(), ConnectError> {
        if let Some(key) = host_key {
            HostKey::parse(key).map_err(ConnectError::HostKey)?;
        }
        match private_key {
            Some(key) => sandboxd_ssh::check_private_key(key).map_err(ConnectError::PrivateKey),
            None => Ok(()),
        }
    }

    fn fingerprint(&self, host_key: &str) -> Option<String> {
        HostKey::parse(host_key).ok().map(|key| key.fingerprint())
    }

    fn check_address(&self, address: &str) -> Result<(), ConnectError> {
        match address.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
            Ok(ip) if !self.allowed.permits(ip) => {
                Err(unreachable(sandboxd_ssh::SshError::AddressRefused {
                    address: address.to_owned(),
                }))
            }
            _ => Ok(()),
        }
    }

    async fn connect(&self, spec: &RemoteSpec) -> Result<RemoteServer, ConnectError> {
        let target = self.target(spec)?;
        if target.host_key.is_none() {
            return Err(ConnectError::HostKey(
                "no host key is pinned: learn it with server.test, or give it".into(),
            ));
        }
        let session = Arc::new(SshSession::new(target));
        // The first connection is made here, so an unreachable server is an error now.
        session.link().await.map_err(unreachable)?;
        let engine = DockerEngine::connect_ssh(session.clone(), &spec.docker_socket).await?;
        let agents = self.agent.clone().map(|binary| {
            Arc::new(SshAgents::new(
                session.clone(),
                spec.remote_dir.clone(),
                binary,
            )) as Arc<dyn RemoteAgents>
        });
        Ok(RemoteServer {
            engine: Arc::new(engine),
            agents,
            dialer: Some(Arc::new(SshDialer { session })),
        })
    }

    async fn probe(&self, spec: &RemoteSpec) -> Result<Probe, ConnectError> {
        let mut target = self.target(spec)?;
        let host_key = match &target.host_key {
            Some(key) => key.clone(),
            None => {
                let link = SshLink::learn(&target, PROBE_CONNECT)
                    .await
                    .map_err(unreachable)?;
                link.host_key().clone()
            }
        };
        target.host_key = Some(host_key.clone());
        let session = Arc::new(SshSession::new(target));
        session.link().await.map_err(unreachable)?;
        let engine = DockerEngine::connect_ssh(session, &spec.docker_socket).await?;
        let host = engine.host().await?;
        Ok(Probe {
            host_key: host_key.to_openssh(),
            host_key_fingerprint: host_key.fingerprint(),
            api_version: engine.api_version(),
            cpus: host.cpus,
            memory_bytes: host.memory_bytes,
        })
    }
}

/// The connections a remote server makes for its sandboxes' egress: direct-tcpip
/// channels over the server's pooled SSH connection.
#[derive(Debug)]
struct SshDialer {
    session: Arc<SshSession>,
}

#[async_trait::async_trait]
impl sandboxd_contracts::RemoteDialer for SshDialer {
    async fn dial(
        &self,
        address: std::net::SocketAddr,
    ) -> Result<Box<dyn sandboxd_contracts::ByteStream>, sandboxd_contracts::EngineError> {
        let stream = self
            .session
            .open_tcp(address)
            .await
            .map_err(|error| sandboxd_contracts::EngineError::Unreachable(Box::new(error)))?;
        Ok(Box::new(stream))
    }
}
