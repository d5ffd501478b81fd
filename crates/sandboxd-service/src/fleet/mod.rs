//! The engines sandboxes run on: the local one, and one per remote server, connected on
//! first use through the remote-server contract and kept (its connection is made again
//! whenever lost). Where a sandbox is reached is one lookup, `Fleet::reach`: the engine
//! it runs on and its agent's channel, whatever the engine is (local, a remote server,
//! later a cluster). A server's engine is made by one caller at a time; callers for other
//! servers never wait on it.
//!
//! `engine_of(server_id)` makes each server's engine in its own once-cell (`made.rs`); a
//! server whose host key is not pinned is refused before any connection.
//! `offered_runtimes` remembers the runtimes each engine offered (a runtime found is not
//! asked for again; a missing one is). `listen_remote` sets up a remote sandbox's agent
//! socket through the server's `RemoteAgents` and hands its connections to the agent
//! host, which keeps the sandbox's key locally as for a local one; `release_agent` undoes
//! both. `dialer_of` gives a server's `RemoteDialer` for egress. `servers_changed` drops
//! the engines another replica's change made stale.

pub(crate) mod made;
mod placement;

use std::collections::HashMap;
use std::sync::Arc;

use sandboxd_contracts::{
    AgentChannels, AgentHost, Connector, Engine, RemoteAgents, RemoteServer, RemoteSpec,
    SandboxChannel,
};
use sandboxd_core::api::Resources;
use sandboxd_core::model::{Sandbox, Server};
use sandboxd_core::plan::AgentMount;
use sandboxd_store::Store;
use tokio_util::task::TaskTracker;
use tracing::warn;

pub use placement::Room;

use crate::{Access, ServiceError};
use made::Made;

/// The engines sandboxes run on and where a new one goes. Depends on the store (server
/// records and reservations), the access checks (which servers a caller may use), the
/// local engine, the remote-server contract and the agent host (agents of remote sandboxes).
#[derive(Debug, Clone)]
pub struct Fleet {
    store: Store,
    access: Access,
    local: Arc<dyn Engine>,
    connector: Option<Arc<dyn Connector>>,
    agents: Arc<dyn AgentHost>,
    /// The channels of sandboxes whose agent is connected (the agent host's, unless a
    /// test gives its own).
    channels: Arc<dyn AgentChannels>,
    /// Background work the service waits for at shutdown (agents released on servers).
    background: TaskTracker,
    room: Room,
    made: Arc<Made>,
    /// The runtimes each engine offered when last asked (`None`: the local engine).
    runtimes: Arc<std::sync::Mutex<HashMap<Option<String>, Vec<String>>>>,
}

/// Where sandboxes' agents connect, and where their channels come from.
pub(crate) struct Agents {
    pub(crate) host: Arc<dyn AgentHost>,
    pub(crate) channels: Arc<dyn AgentChannels>,
}

/// Where one sandbox is reached.
pub(crate) struct Reach {
    /// The engine it runs on.
    pub(crate) engine: Arc<dyn Engine>,
    /// Its agent's channel, when the agent is connected.
    pub(crate) agent: Option<Arc<dyn SandboxChannel>>,
}

/// How a server is reached, from its record and its opened private key.
pub(crate) fn spec_of(server: &Server, private_key: String) -> RemoteSpec {
    RemoteSpec {
        server_id: server.server_id.clone(),
        address: server.address.clone(),
        port: server.port,
        user: server.user.clone(),
        private_key,
        host_key: server.host_key.clone(),
        docker_socket: server.docker_socket.clone(),
        remote_dir: server.remote_dir.clone(),
    }
}

impl Fleet {
    pub(crate) fn new(
        store: Store,
        access: Access,
        local: Arc<dyn Engine>,
        connector: Option<Arc<dyn Connector>>,
        agents: Agents,
        background: TaskTracker,
        room: Room,
    ) -> Self {
        Self {
            store,
            access,
            local,
            connector,
            agents: agents.host,
            channels: agents.channels,
            background,
            room,
            made: Arc::default(),
            runtimes: Arc::default(),
        }
    }

    /// Whether the engine of `server_id` offers the runtime `wanted`: `Ok(None)` when it
    /// does, else what it offers. A runtime found once is not asked for again (asking is
    /// a `docker info`, slow on a busy engine); one missing is asked for each time, so a
    /// runtime registered since is found.
    pub(crate) async fn offered_runtimes(
        &self,
        server_id: Option<&str>,
        engine: &Arc<dyn Engine>,
        wanted: &str,
    ) -> Result<Option<Vec<String>>, ServiceError> {
        let key = server_id.map(str::to_owned);
        let known = |runtimes: &HashMap<Option<String>, Vec<String>>| {
            runtimes
                .get(&key)
                .is_some_and(|offered| offered.iter().any(|name| name == wanted))
        };
        if self.runtimes.lock().is_ok_and(|runtimes| known(&runtimes)) {
            return Ok(None);
        }
        let offered = engine.runtimes().await?;
        let found = offered.iter().any(|name| name == wanted);
        if let Ok(mut runtimes) = self.runtimes.lock() {
            runtimes.insert(key, offered.clone());
        }
        Ok((!found).then_some(offered))
    }

    /// Where `sandbox` is reached: the engine it runs on and its agent's channel.
    pub(crate) async fn reach(&self, sandbox: &Sandbox) -> Result<Reach, ServiceError> {
        Ok(Reach {
            engine: self.engine_of(sandbox.server_id.as_deref()).await?,
            agent: self.agent_channel(&sandbox.sandbox_id),
        })
    }

    /// The channel of the sandbox's agent, when it is connected (wherever it runs: a
    /// remote sandbox's agent connects through its server's forward).
    pub(crate) fn agent_channel(&self, sandbox_id: &str) -> Option<Arc<dyn SandboxChannel>> {
        self.channels.channel(sandbox_id)
    }

    /// The local engine.
    pub fn local(&self) -> &Arc<dyn Engine> {
        &self.local
    }

    /// The remote engines made so far.
    pub(crate) fn made(&self) -> &Made {
        &self.made
    }

    /// The engine a sandbox on `server_id` runs on (`None`: the local engine).
    pub(crate) async fn engine_of(
        &self,
        server_id: Option<&str>,
    ) -> Result<Arc<dyn Engine>, ServiceError> {
        match server_id {
            None => Ok(self.local.clone()),
            Some(server_id) => Ok(self.remote_server(server_id).await?.engine),
        }
    }

    /// A remote server's engine and agent sockets, connected on first use.
    async fn remote_server(&self, server_id: &str) -> Result<RemoteServer, ServiceError> {
        let slot = self.made.slot(server_id);
        let server = slot
            .get_or_try_init(|| async {
                let connector = self.connector()?;
                let server = self
                    .store
                    .server_by_id(server_id)
                    .await?
                    .ok_or(ServiceError::NotFound("server"))?;
                if server.host_key.is_none() {
                    return Err(host_key_not_pinned());
                }
                let key = self.store.server_private_key(server_id).await?;
                let remote = connector.connect(&spec_of(&server, key)).await?;
                let engine = &remote.engine;
                if let Ok(host) = engine.host().await {
                    self.made.remember_capacity(
                        server_id,
                        Resources {
                            cpu: host.cpus as f64,
                            memory_mb: host.memory_bytes / (1024 * 1024),
                        },
                    );
                }
                Ok::<_, ServiceError>(remote)
            })
            .await;
        self.made.record_failure(server_id, server.is_err());
        Ok(server?.clone())
    }

    /// What makes connections from a remote server's network (its sandboxes' egress).
    pub(crate) async fn dialer_of(
        &self,
        server_id: &str,
    ) -> Result<Arc<dyn sandboxd_contracts::RemoteDialer>, ServiceError> {
        self.remote_server(server_id).await?.dialer.ok_or_else(|| {
            ServiceError::Unavailable("the sandbox's server makes no connections for it".into())
        })
    }

    /// Listens for the agent of a sandbox on a remote server; `None` (logged) when the
    /// sandbox runs without it. `offer`: its container is about to be created, and its
    /// key is put there for its agent (not when listening again after a restart).
    pub(crate) async fn listen_remote(
        &self,
        sandbox_id: &str,
        server_id: &str,
        offer: bool,
    ) -> Option<AgentMount> {
        if !self.agents.enabled() {
            return None;
        }
        let agents: Arc<dyn RemoteAgents> = match self.remote_server(server_id).await {
            Ok(server) => server.agents?,
            Err(error) => {
                warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "sandbox runs without its agent");
                return None;
            }
        };
        let key = match offer.then(|| self.agents.key_of(sandbox_id)).transpose() {
            Ok(key) => key,
            Err(error) => {
                warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "sandbox runs without its agent");
                return None;
            }
        };
        let remote = match agents.listen(sandbox_id, key.as_deref()).await {
            Ok(remote) => remote,
            Err(error) => {
                warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "sandbox runs without its agent");
                return None;
            }
        };
        let handover = Arc::new(RemoteHandover {
            agents: agents.clone(),
            sandbox_id: sandbox_id.to_owned(),
            pending: std::sync::atomic::AtomicBool::new(true),
        });
        match self.agents.adopt(
            sandbox_id,
            remote.connections,
            remote.binary,
            remote.run_dir,
            handover,
        ) {
            Ok(mount) => mount,
            Err(error) => {
                warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "sandbox runs without its agent");
                agents.release(sandbox_id).await;
                None
            }
        }
    }

    /// Stops taking a sandbox's agent connections, here and on its server.
    pub(crate) fn release_agent(&self, sandbox_id: &str, server_id: Option<&str>) {
        self.agents.release(sandbox_id);
        let Some(agents) = server_id
            .and_then(|id| self.made.made_server(id))
            .and_then(|server| server.agents)
        else {
            return;
        };
        let sandbox_id = sandbox_id.to_owned();
        self.background.spawn(async move {
            agents.release(&sandbox_id).await;
        });
    }

    /// Drops the engines another replica's change to servers made stale: the next use
    /// connects again from the record as it is now.
    pub fn servers_changed(&self, change: &sandboxd_store::ServerChange) {
        match change {
            sandboxd_store::ServerChange::One(server_id) => {
                self.made.forget(server_id);
                if let Ok(mut runtimes) = self.runtimes.lock() {
                    runtimes.remove(&Some(server_id.clone()));
                }
            }
            sandboxd_store::ServerChange::All => {
                self.made.forget_all();
                if let Ok(mut runtimes) = self.runtimes.lock() {
                    runtimes.retain(|server, _| server.is_none());
                }
            }
        }
    }

    /// The engines of the servers connected since start.
    pub fn remote_engines(&self) -> Vec<(String, Arc<dyn Engine>)> {
        self.made
            .made_all()
            .into_iter()
            .map(|(id, server)| (id, server.engine))
            .collect()
    }

    /// How the connection to each server connected since start is doing (servers never
    /// used are not listed).
    pub async fn servers_health(&self) -> Vec<(String, sandboxd_contracts::Reachability)> {
        let mut health = Vec::new();
        for (server_id, server) in self.made.made_all() {
            health.push((server_id, server.engine.reachability().await.0));
        }
        health
    }

    /// The remote-server contract; without one, this installation runs local sandboxes only.
    pub(crate) fn connector(&self) -> Result<&Arc<dyn Connector>, ServiceError> {
        self.connector
            .as_ref()
            .ok_or_else(|| ServiceError::Unavailable("remote servers are not enabled here".into()))
    }
}

pub(crate) fn host_key_not_pinned() -> ServiceError {
    ServiceError::Conflict(
        "the server's host key is not pinned yet: run server.test (it learns and pins it) or set hostKey"
            .into(),
    )
}

/// The key file of a sandbox on a remote server. Taking it away costs a command over
/// the server's connection, so it is done only when a key may be there: after an offer,
/// and once after listening began (sandboxd may have stopped between an offer and its
/// agent's hello).
#[derive(Debug)]
struct RemoteHandover {
    agents: Arc<dyn RemoteAgents>,
    sandbox_id: String,
    pending: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl sandboxd_contracts::KeyHandover for RemoteHandover {
    async fn offer(&self, key: &str) -> std::io::Result<()> {
        self.pending
            .store(true, std::sync::atomic::Ordering::Release);
        self.agents
            .offer_key(&self.sandbox_id, key)
            .await
            .map_err(std::io::Error::other)
    }

    async fn withdraw(&self) -> std::io::Result<()> {
        if !self.pending.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        self.agents
            .withdraw_key(&self.sandbox_id)
            .await
            .map_err(std::io::Error::other)?;
        self.pending
            .store(false, std::sync::atomic::Ordering::Release);
        Ok(())
    }
}
