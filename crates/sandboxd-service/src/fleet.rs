//! The engines sandboxes run on: the local one, and one per remote server, connected on
//! first use through the remote-server port and kept (its connection is made again
//! whenever lost). A server's engine is made by one caller at a time; callers for other
//! servers never wait on it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sandboxd_core::api::Resources;
use sandboxd_core::model::Server;
use sandboxd_core::plan::AgentMount;
use sandboxd_ports::{Connector, Engine, RemoteAgents, RemoteServer, RemoteSpec};
use tokio::sync::OnceCell;
use tracing::warn;

use super::{Service, ServiceError};

type Slot = Arc<OnceCell<RemoteServer>>;

/// The remote engines made so far, and what each server has.
#[derive(Debug, Default)]
pub(crate) struct Fleet {
    remote: Mutex<HashMap<String, Slot>>,
    capacities: Mutex<HashMap<String, Resources>>,
    /// When connecting to each server last failed.
    failures: Mutex<HashMap<String, std::time::Instant>>,
}

/// A server that could not be connected is not tried again by placement for this long.
const FAILED_FOR: std::time::Duration = std::time::Duration::from_secs(15);

impl Fleet {
    /// Whether connecting to the server failed within [`FAILED_FOR`].
    pub(crate) fn failed_recently(&self, server_id: &str) -> bool {
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures
            .get(server_id)
            .is_some_and(|at| at.elapsed() < FAILED_FOR)
    }

    fn record_failure(&self, server_id: &str, failed: bool) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failed {
            failures.insert(server_id.to_owned(), std::time::Instant::now());
        } else {
            failures.remove(server_id);
        }
    }

    /// What a server's engine reported it has.
    pub(crate) fn capacity(&self, server_id: &str) -> Option<Resources> {
        let capacities = self.capacities.lock().unwrap_or_else(|e| e.into_inner());
        capacities.get(server_id).copied()
    }

    pub(crate) fn remember_capacity(&self, server_id: &str, resources: Resources) {
        let mut capacities = self.capacities.lock().unwrap_or_else(|e| e.into_inner());
        capacities.insert(server_id.to_owned(), resources);
    }

    fn slot(&self, server_id: &str) -> Slot {
        let mut remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        remote.entry(server_id.to_owned()).or_default().clone()
    }

    /// The engine of a server if it was made.
    pub(crate) fn made(&self, server_id: &str) -> Option<Arc<dyn Engine>> {
        self.made_server(server_id).map(|server| server.engine)
    }

    /// Every server whose engine was made, with it.
    fn made_all(&self) -> Vec<(String, RemoteServer)> {
        let remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        remote
            .iter()
            .filter_map(|(id, slot)| Some((id.clone(), slot.get()?.clone())))
            .collect()
    }

    fn made_server(&self, server_id: &str) -> Option<RemoteServer> {
        let remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        remote.get(server_id).and_then(|slot| slot.get().cloned())
    }

    /// Forgets a server's engine (its address or keys changed, or it was removed).
    pub(crate) fn forget(&self, server_id: &str) {
        let mut remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        remote.remove(server_id);
    }

    /// Forgets every server's engine.
    pub(crate) fn forget_all(&self) {
        let mut remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        remote.clear();
    }
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

impl Service {
    /// The engine a sandbox on `server_id` runs on (`None`: the local engine).
    pub(crate) async fn engine_of(
        &self,
        server_id: Option<&str>,
    ) -> Result<Arc<dyn Engine>, ServiceError> {
        match server_id {
            None => Ok(self.engine().clone()),
            Some(server_id) => Ok(self.remote_server(server_id).await?.engine),
        }
    }

    /// A remote server's engine and agent sockets, connected on first use.
    async fn remote_server(&self, server_id: &str) -> Result<RemoteServer, ServiceError> {
        let slot = self.inner.fleet.slot(server_id);
        let server = slot
            .get_or_try_init(|| async {
                let connector = self.connector()?;
                let server = self
                    .store()
                    .server_by_id(server_id)
                    .await?
                    .ok_or(ServiceError::NotFound("server"))?;
                if server.host_key.is_none() {
                    return Err(host_key_not_pinned());
                }
                let key = self.store().server_private_key(server_id).await?;
                let remote = connector.connect(&spec_of(&server, key)).await?;
                let engine = &remote.engine;
                if let Ok(host) = engine.host().await {
                    self.inner.fleet.remember_capacity(
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
        self.inner.fleet.record_failure(server_id, server.is_err());
        Ok(server?.clone())
    }

    /// Listens for the agent of a sandbox on a remote server; `None` (logged) when the
    /// sandbox runs without it.
    pub(crate) async fn listen_remote(
        &self,
        sandbox_id: &str,
        server_id: &str,
    ) -> Option<AgentMount> {
        if !self.agents().enabled() {
            return None;
        }
        let agents: Arc<dyn RemoteAgents> = match self.remote_server(server_id).await {
            Ok(server) => server.agents?,
            Err(error) => {
                warn!(%sandbox_id, %error, "sandbox runs without its agent");
                return None;
            }
        };
        let remote = match agents.listen(sandbox_id).await {
            Ok(remote) => remote,
            Err(error) => {
                warn!(%sandbox_id, %error, "sandbox runs without its agent");
                return None;
            }
        };
        match self.agents().adopt(
            sandbox_id,
            remote.connections,
            remote.binary,
            remote.run_dir,
        ) {
            Ok(mount) => mount,
            Err(error) => {
                warn!(%sandbox_id, %error, "sandbox runs without its agent");
                agents.release(sandbox_id).await;
                None
            }
        }
    }

    /// Stops taking a sandbox's agent connections, here and on its server.
    pub(crate) fn release_agent(&self, sandbox_id: &str, server_id: Option<&str>) {
        self.agents().release(sandbox_id);
        let Some(agents) = server_id
            .and_then(|id| self.inner.fleet.made_server(id))
            .and_then(|server| server.agents)
        else {
            return;
        };
        let sandbox_id = sandbox_id.to_owned();
        self.inner.removals.spawn(async move {
            agents.release(&sandbox_id).await;
        });
    }

    /// Drops the engines another replica's change to servers made stale: the next use
    /// connects again from the record as it is now.
    pub fn servers_changed(&self, change: &sandboxd_store::ServerChange) {
        match change {
            sandboxd_store::ServerChange::One(server_id) => self.inner.fleet.forget(server_id),
            sandboxd_store::ServerChange::All => self.inner.fleet.forget_all(),
        }
    }

    /// The engines of the servers connected since start.
    pub fn remote_engines(&self) -> Vec<(String, Arc<dyn Engine>)> {
        self.inner
            .fleet
            .made_all()
            .into_iter()
            .map(|(id, server)| (id, server.engine))
            .collect()
    }

    /// How the connection to each server connected since start is doing (servers never
    /// used are not listed).
    pub async fn servers_health(&self) -> Vec<(String, sandboxd_ports::Reachability)> {
        let mut health = Vec::new();
        for (server_id, server) in self.inner.fleet.made_all() {
            health.push((server_id, server.engine.reachability().await.0));
        }
        health
    }

    /// The remote-server port; without one, this installation runs local sandboxes only.
    pub(crate) fn connector(&self) -> Result<&Arc<dyn Connector>, ServiceError> {
        self.inner
            .options
            .remote
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
