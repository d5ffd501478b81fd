//! Egress of `allowlist` sandboxes: their programs reach the outside only through the
//! proxy the agent offers on their loopback, each connection handed to sandboxd over the
//! agent's channel. This part hands out a sandbox's [`Gate`]: its next proxy connection,
//! and the one way out of it, `Gate::connect`, which checks the host against the
//! sandbox's list as it stands, resolves it here, and connects to an address it may
//! reach. The proxy's HTTP is the server's.
//!
//! `gate` hands out a running `allowlist` sandbox's `Gate` once its agent connects (the
//! hub's `connections()`). `Egress::log` reads a log for `sandbox.egressLog`.

mod counted;
mod dial;
mod gate;
mod log;
mod own;
mod requests;

pub use counted::EGRESS_BYTES;
pub use gate::{EGRESS_DECISIONS, EgressError, Gate, Upstream};
pub use log::EGRESS_LOG_DROPPED;
pub(crate) use log::{EgressBook, Recorder};
pub(crate) use own::OwnHost;

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::egress_log::EgressRecord;
use sandboxd_core::model::{NetworkMode, Principal, SandboxStatus};
use sandboxd_core::validate::EgressLogRead;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::{Service, ServiceError};

/// A read of a sandbox's egress log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressLogPage {
    /// In the order they were written.
    pub entries: Vec<EgressRecord>,
    /// Where the next read starts: the last entry's position, or the read's own.
    pub next: Option<String>,
    /// Whether more entries follow already.
    pub more: bool,
}

/// The egress of `allowlist` sandboxes.
#[derive(Debug, Clone)]
pub struct Egress {
    service: Service,
}

impl Egress {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }

    /// The addresses this server listens and is reached on (its API, its metrics, the
    /// host of the address it advertises): egress never reaches them, nor its
    /// interfaces' addresses, unless `allowed_networks` lists one alone.
    pub async fn set_own_addresses(
        &self,
        listening: Vec<std::net::IpAddr>,
        advertised: Option<&str>,
    ) {
        let mut addresses = listening;
        addresses
            .extend(own::resolved(advertised.and_then(sandboxd_core::egress_own::url_host)).await);
        self.service.inner.own_host.set_configured(addresses);
    }

    /// The ids of sandboxes whose agent connects to this replica from now on, one per
    /// connection: each may need its gate served.
    pub fn connections(&self) -> UnboundedReceiver<String> {
        self.service.agents().connections()
    }

    /// Entries of the egress log of a sandbox the caller may read (any network mode:
    /// only `allowlist` sandboxes have entries), after `read.after`.
    pub async fn log(
        &self,
        caller: &Principal,
        read: &EgressLogRead,
    ) -> Result<EgressLogPage, ServiceError> {
        self.service
            .access()
            .sandbox_for(caller, &read.sandbox_id, SandboxNeed::Read)
            .await?;
        let read_on = self
            .service
            .store()
            .egress_log(&read.sandbox_id, read.after.as_deref(), read.limit + 1)
            .await?;
        let (entries, next, more) =
            crate::journal::page_of(read_on, read.limit, read.after.as_ref(), |entry| {
                &entry.position
            });
        Ok(EgressLogPage {
            entries,
            next,
            more,
        })
    }

    /// The gate of a running `allowlist` sandbox whose agent is connected and hands
    /// over proxy connections; `None` for any other.
    pub async fn gate(&self, sandbox_id: &str) -> Option<Gate> {
        let sandbox = match self.service.store().sandbox(sandbox_id).await {
            Ok(sandbox) => sandbox?,
            Err(error) => {
                tracing::warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "cannot read a sandbox to serve its egress");
                return None;
            }
        };
        let wanted = sandbox.network_mode == NetworkMode::Allowlist
            && matches!(
                sandbox.status,
                SandboxStatus::Running | SandboxStatus::Creating | SandboxStatus::Paused
            );
        if !wanted {
            return None;
        }
        let channel = self.service.agent_channel(sandbox_id)?;
        let credentials = match self.service.store().egress_credentials(sandbox_id).await {
            Ok(credentials) => credentials,
            Err(error) => {
                // Its requests then go without them (and the host refuses them).
                tracing::warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "cannot open a sandbox's egress credentials");
                Vec::new()
            }
        };
        Some(Gate::new(
            self.service.clone(),
            sandbox,
            channel,
            credentials,
        ))
    }
}
