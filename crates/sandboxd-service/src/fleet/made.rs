//! The remote servers' engines made so far, and what each server has: one slot per
//! server, filled by one caller at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sandboxd_contracts::{Engine, RemoteServer};
use sandboxd_core::api::Resources;
use tokio::sync::OnceCell;

type Slot = Arc<OnceCell<RemoteServer>>;

/// The remote engines made so far, and what each server has.
#[derive(Debug, Default)]
pub(crate) struct Made {
    remote: Mutex<HashMap<String, Slot>>,
    capacities: Mutex<HashMap<String, Resources>>,
    /// When connecting to each server last failed.
    failures: Mutex<HashMap<String, std::time::Instant>>,
}

/// A server that could not be connected is not tried again by placement for this long.
const FAILED_FOR: std::time::Duration = std::time::Duration::from_secs(15);

impl Made {
    /// Whether connecting to the server failed within [`FAILED_FOR`].
    pub(crate) fn failed_recently(&self, server_id: &str) -> bool {
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures
            .get(server_id)
            .is_some_and(|at| at.elapsed() < FAILED_FOR)
    }

    pub(super) fn record_failure(&self, server_id: &str, failed: bool) {
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

    pub(super) fn slot(&self, server_id: &str) -> Slot {
        let mut remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        remote.entry(server_id.to_owned()).or_default().clone()
    }

    /// The engine of a server if it was made.
    pub(crate) fn engine(&self, server_id: &str) -> Option<Arc<dyn Engine>> {
        self.made_server(server_id).map(|server| server.engine)
    }

    /// Every server whose engine was made, with it.
    pub(super) fn made_all(&self) -> Vec<(String, RemoteServer)> {
        let remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        remote
            .iter()
            .filter_map(|(id, slot)| Some((id.clone(), slot.get()?.clone())))
            .collect()
    }

    pub(super) fn made_server(&self, server_id: &str) -> Option<RemoteServer> {
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
