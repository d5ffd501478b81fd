//! The engines sandboxes run on: the local one, and one per remote server, connected on
//! first use through the remote-server port and kept (its connection is made again
//! whenever lost). A server's engine is made by one caller at a time; callers for other
//! servers never wait on it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sandboxd_core::api::Resources;
use sandboxd_core::model::Server;
use sandboxd_ports::{Connector, Engine, RemoteSpec};
use tokio::sync::OnceCell;

use super::{Service, ServiceError};

type Slot = Arc<OnceCell<Arc<dyn Engine>>>;

/// The remote engines made so far, and what each server has.
#[derive(Debug, Default)]
pub(crate) struct Fleet {
    remote: Mutex<HashMap<String, Slot>>,
    capacities: Mutex<HashMap<String, Resources>>,
}

impl Fleet {
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
        let remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        remote.get(server_id).and_then(|slot| slot.get().cloned())
    }

    /// Forgets a server's engine (its address or keys changed, or it was removed).
    pub(crate) fn forget(&self, server_id: &str) {
        let mut remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        remote.remove(server_id);
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
        let Some(server_id) = server_id else {
            return Ok(self.engine().clone());
        };
        let slot = self.inner.fleet.slot(server_id);
        let engine = slot
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
                let engine = connector.engine(&spec_of(&server, key)).await?;
                if let (Ok(cpus), Ok(memory)) = (engine.cpus().await, engine.memory_bytes().await) {
                    self.inner.fleet.remember_capacity(
                        server_id,
                        Resources {
                            cpu: cpus as f64,
                            memory_mb: memory / (1024 * 1024),
                        },
                    );
                }
                Ok::<_, ServiceError>(engine)
            })
            .await?;
        Ok(engine.clone())
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
