//! The remote-server contract: how the service gets the engine of a server it does not run
//! on (the Docker adapter does it over one SSH connection per server), and what it
//! learns testing one.
//!
//! `Connector::connect` makes a `RemoteServer` from a `RemoteSpec` (its private key never
//! printed): the server's engine (an `Arc<dyn Engine>`), its `RemoteAgents` (the agent
//! sockets there; none when sandboxes run without the agent) and its `RemoteDialer` (TCP
//! connections made from the server's network, for its sandboxes' egress). A connector
//! also probes a server (learning its host key) and checks keys. `Reachability` is what
//! an engine reports of the way to it.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::{Engine, EngineError};

/// A byte stream both ways (an agent's connection, whatever carries it).
pub trait ByteStream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static
{
}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> ByteStream for T {}

/// The agent connections of one sandbox on a remote server, as they arrive.
pub type AgentConnections = mpsc::Receiver<Box<dyn ByteStream>>;

/// Where a sandbox's agent is on its server, and its connections.
#[derive(Debug)]
pub struct RemoteAgent {
    /// The agent binary on the server (mounted read-only into the sandbox).
    pub binary: String,
    /// The sandbox's socket directory on the server (mounted read-only).
    pub run_dir: String,
    pub connections: AgentConnections,
}

/// The sockets of the in-sandbox agents of one remote server: sandboxd puts the agent
/// binary there itself (checked by checksum), and has the server listen on each
/// sandbox's socket and hand its connections back.
#[async_trait::async_trait]
pub trait RemoteAgents: std::fmt::Debug + Send + Sync + 'static {
    /// Listens on the sandbox's agent socket on the server (again, after a restart of
    /// sandboxd). The listening is kept across reconnections of the server. With a key,
    /// its container is about to be created: the key is put in its key file there (see
    /// `sandboxd_agent_protocol::AGENT_KEY_FILE`).
    async fn listen(&self, sandbox_id: &str, key: Option<&str>)
    -> Result<RemoteAgent, EngineError>;

    /// Puts the key in the sandbox's key file on the server (its container is about to
    /// start again).
    async fn offer_key(&self, sandbox_id: &str, key: &str) -> Result<(), EngineError>;

    /// Takes the sandbox's key file away on the server (its agent holds the key).
    async fn withdraw_key(&self, sandbox_id: &str) -> Result<(), EngineError>;

    /// Stops listening for the sandbox and removes its socket directory on the server.
    async fn release(&self, sandbox_id: &str);
}

/// Connections made from a remote server's network: the egress of the sandboxes on it
/// leaves from there.
#[async_trait::async_trait]
pub trait RemoteDialer: std::fmt::Debug + Send + Sync + 'static {
    /// A TCP connection the server makes to `address`.
    async fn dial(&self, address: std::net::SocketAddr)
    -> Result<Box<dyn ByteStream>, EngineError>;
}

/// A remote server as the service drives it: its engine, its agents' sockets, and the
/// connections it makes for its sandboxes.
#[derive(Debug, Clone)]
pub struct RemoteServer {
    pub engine: Arc<dyn Engine>,
    /// `None`: sandboxes on it run without the agent.
    pub agents: Option<Arc<dyn RemoteAgents>>,
    /// `None`: its sandboxes' egress is refused.
    pub dialer: Option<Arc<dyn RemoteDialer>>,
}

/// How sandboxd reaches one remote server.
#[derive(Clone)]
pub struct RemoteSpec {
    pub server_id: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    /// OpenSSH format; never printed.
    pub private_key: String,
    /// The pinned host key; `None`: not pinned yet (only a probe connects then).
    pub host_key: Option<String>,
    pub docker_socket: String,
    pub remote_dir: String,
}

impl std::fmt::Debug for RemoteSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSpec")
            .field("server_id", &self.server_id)
            .field("address", &self.address)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("host_key", &self.host_key)
            .finish_non_exhaustive()
    }
}

/// How an engine's connection is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reachability {
    Reachable,
    /// Connected, but cut off or failing in the last minute.
    Degraded,
    Unreachable,
}

impl Reachability {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reachable => "reachable",
            Self::Degraded => "degraded",
            Self::Unreachable => "unreachable",
        }
    }
}

/// What a probe of a server found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The host key the server presented (`algorithm base64`).
    pub host_key: String,
    pub host_key_fingerprint: String,
    pub api_version: String,
    pub cpus: i64,
    pub memory_bytes: i64,
}

/// Why a remote server's engine cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("hostKey: {0}")]
    HostKey(String),
    #[error("privateKey: {0}")]
    PrivateKey(String),
    /// The server answered, and refused: its host key is not the pinned one, or it
    /// refused the login. The text says which (it names no more than that).
    #[error("{0}")]
    Refused(String),
    /// The server's address is not one this installation connects to.
    #[error("{0}")]
    NotAllowed(String),
    /// The server, its SSH daemon or its engine did not answer as it should; the cause
    /// (a refused connection, a timeout, a cut) is the source, for the log only: what
    /// a tenant is told of the operator's network is this one sentence.
    #[error("the server could not be reached")]
    Unreachable(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Makes the engines of remote servers.
#[async_trait::async_trait]
pub trait Connector: std::fmt::Debug + Send + Sync + 'static {
    /// Checks a host key and a private key (those given), without connecting.
    fn check_keys(
        &self,
        host_key: Option<&str>,
        private_key: Option<&str>,
    ) -> Result<(), ConnectError>;

    /// The fingerprint of a host key (`SHA256:…`), if it is one.
    fn fingerprint(&self, host_key: &str) -> Option<String>;

    /// Refuses an address given as an IP that no connection may be made to (a name is
    /// checked when it is resolved, at each connection).
    fn check_address(&self, address: &str) -> Result<(), ConnectError> {
        let _ = address;
        Ok(())
    }

    /// The engine (and agent sockets) of a remote server: connected now (one that cannot
    /// be reached is an error), connected again whenever its connection is lost.
    async fn connect(&self, spec: &RemoteSpec) -> Result<RemoteServer, ConnectError>;

    /// Connects once, learning the host key when none is pinned (a pinned one is
    /// enforced), and asks the engine what the server has.
    async fn probe(&self, spec: &RemoteSpec) -> Result<Probe, ConnectError>;
}
