//! The addresses of sandboxd's own host that egress refuses: its interfaces' (read from
//! the kernel's tables), and those it listens, advertises and is reached on (the other
//! replicas' too). Read again every few seconds, so that an address added since counts.
//!
//! The addresses are read again every 5 s: the interfaces', and the listen, metrics,
//! advertised and replica addresses the server sets.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandboxd_core::egress_own::{OwnAddresses, local_networks, url_host};

use crate::Service;

/// How long the host's addresses are reused before they are read again.
const FRESH_FOR: Duration = Duration::from_secs(5);
/// How long resolving a replica's address may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// sandboxd's own addresses, as last read.
#[derive(Debug, Default)]
pub(crate) struct OwnHost {
    /// The addresses the server listens and is reached on (its API, its metrics, the
    /// address it advertises), beside its interfaces'.
    configured: Mutex<Vec<IpAddr>>,
    read: Mutex<Option<(Instant, Arc<OwnAddresses>)>>,
    /// Held while the addresses are read again: one reading at a time, the others wait
    /// for it.
    reading: tokio::sync::Mutex<()>,
}

impl OwnHost {
    pub(crate) fn set_configured(&self, addresses: Vec<IpAddr>) {
        *self.configured.lock().unwrap_or_else(|e| e.into_inner()) = addresses;
        *self.read.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The host's addresses now (read again when the last read is stale).
    pub(crate) async fn current(&self, service: &Service) -> Arc<OwnAddresses> {
        if let Some(own) = self.fresh() {
            return own;
        }
        let _reading = self.reading.lock().await;
        if let Some(own) = self.fresh() {
            return own;
        }
        let networks = tokio::task::spawn_blocking(|| {
            let table = |path| std::fs::read_to_string(path).unwrap_or_default();
            local_networks(&table("/proc/net/fib_trie"), &table("/proc/net/if_inet6"))
        })
        .await
        .unwrap_or_default();
        let mut addresses = self
            .configured
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for replica in service.replicas().addresses().await {
            addresses.extend(resolved(url_host(&replica)).await);
        }
        let own = Arc::new(OwnAddresses::new(networks, addresses));
        *self.read.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), own.clone()));
        own
    }
}

impl OwnHost {
    fn fresh(&self) -> Option<Arc<OwnAddresses>> {
        self.read
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(at, _)| at.elapsed() < FRESH_FOR)
            .map(|(_, own)| own.clone())
    }
}

/// The addresses a host (a name or an address) stands for; none when it does not
/// resolve in time.
pub(crate) async fn resolved(host: Option<&str>) -> Vec<IpAddr> {
    let Some(host) = host else {
        return Vec::new();
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return vec![ip];
    }
    match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, 0))).await {
        Ok(Ok(found)) => found.map(|address| address.ip()).collect(),
        _ => Vec::new(),
    }
}
