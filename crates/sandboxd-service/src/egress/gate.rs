//! One `allowlist` sandbox's way out: the connections its programs make to the proxy,
//! and what each may reach. The sandbox's list is read as it stands for every
//! connection (the store answers from a row at most a second old, and at once after a
//! change made here), so a `setEgress` holds for the next connection.

use std::net::SocketAddr;
use std::sync::Arc;

use sandboxd_core::egress::{self, Policy, Refusal};
use sandboxd_core::model::{NetworkMode, SandboxStatus};
use sandboxd_ports::{ByteStream, ChannelError, SandboxChannel};

use super::dial;
use crate::Service;

/// Counter of egress decisions (`decision` = `allowed` | `refused`).
pub const EGRESS_DECISIONS: &str = "sandboxd_egress_decisions_total";

/// A sandbox's proxy connections and what they may reach. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Gate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    service: Service,
    sandbox_id: String,
    channel: Arc<dyn SandboxChannel>,
}

/// A connection made for the sandbox, and the address it went to.
pub struct Upstream {
    pub stream: Box<dyn ByteStream>,
    pub address: SocketAddr,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// Why no connection was made for the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    /// The policy or the address rules refuse it.
    #[error("{0}")]
    Refused(Refusal),
    /// Allowed, but nothing answered.
    #[error("cannot connect: {0}")]
    Unreachable(String),
    /// The sandbox no longer runs in `allowlist` mode (killed, or its row is gone).
    #[error("the sandbox is not running")]
    Gone,
}

impl Gate {
    pub(super) fn new(
        service: Service,
        sandbox_id: String,
        channel: Arc<dyn SandboxChannel>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                service,
                sandbox_id,
                channel,
            }),
        }
    }

    pub fn sandbox_id(&self) -> &str {
        &self.inner.sandbox_id
    }

    /// The next connection a program in the sandbox makes to the proxy, once one
    /// arrives; an error once the agent's connection is gone (the gate is done).
    pub async fn next(&self) -> Result<Box<dyn ByteStream>, ChannelError> {
        self.inner.channel.accept_egress().await
    }

    /// A connection to `host` on `port` for the sandbox, if its list allows the host
    /// (named, never an address) and the host resolves to an address sandboxes may
    /// reach; made to that address.
    pub async fn connect(&self, host: &str, port: u16) -> Result<Upstream, EgressError> {
        let decided = self.decide(host, port).await;
        let decision = if decided.is_ok() {
            "allowed"
        } else {
            "refused"
        };
        metrics::counter!(EGRESS_DECISIONS, "decision" => decision).increment(1);
        match &decided {
            Ok(upstream) => tracing::debug!(
                sandbox_id = %self.inner.sandbox_id, host, port, address = %upstream.address,
                "egress allowed"
            ),
            Err(why) => tracing::debug!(
                sandbox_id = %self.inner.sandbox_id, host, port, %why, "egress refused"
            ),
        }
        decided
    }

    async fn decide(&self, host: &str, port: u16) -> Result<Upstream, EgressError> {
        let name = egress::name_of(host).map_err(EgressError::Refused)?;
        let (policy, remote) = self.policy().await?;
        if !policy.permits(&name, port) {
            return Err(EgressError::Refused(Refusal::NotAllowed));
        }
        if remote {
            // Its traffic must leave from its own server, never from this one's network.
            return Err(EgressError::Unreachable(
                "egress of a sandbox on a remote server is not served yet".into(),
            ));
        }
        let operator = &self.inner.service.inner.options.egress;
        let addresses = dial::resolve(&name, port, operator)
            .await
            .map_err(EgressError::Refused)?;
        let (stream, address) = dial::connect(&addresses, port)
            .await
            .map_err(EgressError::Unreachable)?;
        Ok(Upstream {
            stream: Box::new(stream),
            address,
        })
    }

    /// The sandbox's list as it stands, and whether it runs on a remote server.
    async fn policy(&self) -> Result<(Policy, bool), EgressError> {
        let row = self
            .inner
            .service
            .store()
            .sandbox(&self.inner.sandbox_id)
            .await
            .map_err(|error| EgressError::Unreachable(format!("cannot read the sandbox: {error}")))?
            .ok_or(EgressError::Gone)?;
        if row.network_mode != NetworkMode::Allowlist || row.status != SandboxStatus::Running {
            return Err(EgressError::Gone);
        }
        // A list the store kept was checked when it was set; an entry that no longer
        // reads allows nothing.
        let policy = Policy::parse(&row.egress).unwrap_or_default();
        Ok((policy, row.server_id.is_some()))
    }
}
