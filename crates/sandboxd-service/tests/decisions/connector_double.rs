//! A recording connector: each remote server is a recording engine of its own, made at
//! its first connection; the connections made are kept in order, and a server can be
//! scripted to be unreachable.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use sandboxd_contracts::{ConnectError, Connector, Probe, RemoteServer, RemoteSpec};

use crate::engine_double::RecordingEngine;

#[derive(Debug, Default)]
pub struct RecordingConnector {
    /// The engine of each server connected so far, by address.
    engines: Mutex<BTreeMap<String, Arc<RecordingEngine>>>,
    /// Addresses of the connections made, in order.
    connects: Mutex<Vec<String>>,
    /// Addresses that cannot be reached.
    pub unreachable: Mutex<BTreeSet<String>>,
}

impl RecordingConnector {
    /// The engine of the server at `address` (made now if it was not yet).
    pub fn engine(&self, address: &str) -> Arc<RecordingEngine> {
        self.engines
            .lock()
            .unwrap()
            .entry(address.into())
            .or_default()
            .clone()
    }

    pub fn connects(&self) -> Vec<String> {
        self.connects.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Connector for RecordingConnector {
    fn check_keys(&self, _: Option<&str>, _: Option<&str>) -> Result<(), ConnectError> {
        Ok(())
    }

    fn fingerprint(&self, host_key: &str) -> Option<String> {
        Some(format!("SHA256:{}", host_key.len()))
    }

    async fn connect(&self, spec: &RemoteSpec) -> Result<RemoteServer, ConnectError> {
        self.connects.lock().unwrap().push(spec.address.clone());
        if self.unreachable.lock().unwrap().contains(&spec.address) {
            return Err(ConnectError::Unreachable("scripted: no route".into()));
        }
        Ok(RemoteServer {
            engine: self.engine(&spec.address),
            agents: None,
            dialer: None,
        })
    }

    async fn probe(&self, _spec: &RemoteSpec) -> Result<Probe, ConnectError> {
        Ok(Probe {
            host_key: "ssh-ed25519 AAAAtest".into(),
            host_key_fingerprint: "SHA256:test".into(),
            api_version: "recording".into(),
            cpus: 8,
            memory_bytes: 16 << 30,
        })
    }
}
