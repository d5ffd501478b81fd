//! Replicas on one database: where a request that needs a sandbox's agent goes when
//! another replica holds the agent's connection. Each replica records its address and a
//! heartbeat; the replica an agent connects to records that it holds it. A replica
//! without the connection then names the holder, if its heartbeat is recent, and the
//! server forwards the request there. On one server alone (SQLite) nothing is forwarded.
//! `agent_holder` is the live replica to forward a request on a sandbox to, or none to
//! serve it here.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sandboxd_contracts::AgentChannels;
use sandboxd_store::{Backend, Store};
use tracing::{debug, warn};

use super::now_ms;

/// How often a replica records its heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);
/// A replica silent this long is taken as gone: nothing is forwarded to it.
const GONE_AFTER: Duration = Duration::from_secs(10);
/// How long the list of live replicas is reused before it is read again.
const LIVE_FOR: Duration = Duration::from_secs(1);

/// This replica's place among the others. Depends on the store (the registry and who
/// holds which agent) and on the agents connected here.
#[derive(Debug, Clone)]
pub struct Replicas {
    store: Store,
    agents: Arc<dyn sandboxd_contracts::AgentHost>,
    channels: Arc<dyn AgentChannels>,
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Where the other replicas reach this one; unset: it is not registered.
    address: OnceLock<String>,
    /// The replicas heard from lately (id → address), and when that was read.
    live: Mutex<Option<(Instant, Live)>>,
}

/// The replicas heard from lately: id → address.
type Live = Arc<HashMap<String, String>>;

impl Replicas {
    pub(crate) fn new(
        store: Store,
        agents: Arc<dyn sandboxd_contracts::AgentHost>,
        channels: Arc<dyn AgentChannels>,
    ) -> Self {
        Self {
            store,
            agents,
            channels,
            state: Arc::default(),
        }
    }

    /// Whether requests may be forwarded between replicas: on PostgreSQL, once this
    /// replica has an address.
    pub fn replicated(&self) -> bool {
        self.store.backend() == Backend::Postgres && self.state.address.get().is_some()
    }

    /// Registers the address where the other replicas reach this one (its API's base
    /// URL) and records its first heartbeat. On SQLite this does nothing.
    pub async fn register(&self, address: String) {
        if self.store.backend() != Backend::Postgres {
            return;
        }
        let _ = self.state.address.set(address);
        self.heartbeat_once().await;
    }

    /// Records this replica's heartbeat (the loop calls it every [`HEARTBEAT_EVERY`]).
    pub async fn heartbeat_once(&self) {
        let Some(address) = self.state.address.get() else {
            return;
        };
        if let Err(error) = self.store.heartbeat(address, now_ms()).await {
            warn!(error = %sandboxd_core::error::chain(&error), "cannot record this replica's heartbeat");
        }
    }

    /// Takes this replica out of the registry: it is stopping.
    pub async fn leave(&self) {
        if self.state.address.get().is_none() {
            return;
        }
        if let Err(error) = self.store.leave().await {
            warn!(error = %sandboxd_core::error::chain(&error), "cannot take this replica out of the registry");
        }
    }

    /// Records, as agents connect to this replica from now on, that it holds their
    /// connections; the future runs until the hub is dropped. On SQLite it does nothing.
    pub fn record_agent_connections(&self) -> impl Future<Output = ()> + Send + 'static {
        let replicas = self.clone();
        let connected =
            (self.store.backend() == Backend::Postgres).then(|| self.agents.connections());
        async move {
            if let Some(connected) = connected {
                replicas.hold_agents(connected).await;
            }
        }
    }

    async fn hold_agents(&self, mut connected: tokio::sync::mpsc::UnboundedReceiver<String>) {
        let mut batch = Vec::new();
        while connected.recv_many(&mut batch, 256).await > 0 {
            // A sandbox reconnecting in a loop is written once per batch.
            let ids: HashSet<String> = batch.drain(..).collect();
            for sandbox_id in ids {
                if let Err(error) = self.store.hold_agent(&sandbox_id).await {
                    warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "cannot record that this replica holds an agent");
                }
            }
        }
    }

    /// The address of the replica to forward a request on `sandbox_id` that needs its
    /// agent to: `None` to serve it here (this replica holds the agent, the sandbox is
    /// unknown, or its holder is not live).
    pub async fn agent_holder(&self, sandbox_id: &str) -> Option<String> {
        if !self.replicated() || self.channels.channel(sandbox_id).is_some() {
            return None;
        }
        let holder = match self.store.agent_replica(sandbox_id).await {
            Ok(holder) => holder?,
            Err(error) => {
                debug!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "cannot read which replica holds an agent");
                return None;
            }
        };
        if holder == self.store.replica_id() {
            return None;
        }
        self.live_replicas().await.get(&holder).cloned()
    }

    /// The addresses (base URLs) of the replicas heard from lately, this one's among them.
    pub(crate) async fn addresses(&self) -> Vec<String> {
        if self.store.backend() != Backend::Postgres {
            return Vec::new();
        }
        let mut addresses: Vec<String> = self.live_replicas().await.values().cloned().collect();
        addresses.extend(self.state.address.get().cloned());
        addresses
    }

    async fn live_replicas(&self) -> Live {
        let cached = self
            .state
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(read, _)| read.elapsed() < LIVE_FOR)
            .map(|(_, live)| live.clone());
        if let Some(live) = cached {
            return live;
        }
        let since = now_ms() - GONE_AFTER.as_millis() as i64;
        let live: HashMap<String, String> = match self.store.live_replicas(since).await {
            Ok(live) => live.into_iter().collect(),
            Err(error) => {
                debug!(error = %sandboxd_core::error::chain(&error), "cannot read the live replicas");
                HashMap::new()
            }
        };
        let live = Arc::new(live);
        *self.state.live.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), live.clone()));
        live
    }
}
