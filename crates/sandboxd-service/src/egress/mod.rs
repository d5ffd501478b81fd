//! Egress of `allowlist` sandboxes: their programs reach the outside only through the
//! proxy the agent offers on their loopback, each connection handed to sandboxd over the
//! agent's channel. This part hands out a sandbox's [`Gate`]: its next proxy connection,
//! and the one way out of it, `Gate::connect`, which checks the host against the
//! sandbox's list as it stands, resolves it here, and connects to an address it may
//! reach. The proxy's HTTP is the server's.

mod dial;
mod gate;

pub use gate::{EGRESS_DECISIONS, EgressError, Gate, Upstream};

use sandboxd_core::model::{NetworkMode, SandboxStatus};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::Service;

/// The egress of `allowlist` sandboxes.
#[derive(Debug, Clone)]
pub struct Egress {
    service: Service,
}

impl Egress {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }

    /// The ids of sandboxes whose agent connects to this replica from now on, one per
    /// connection: each may need its gate served.
    pub fn connections(&self) -> UnboundedReceiver<String> {
        self.service.agents().connections()
    }

    /// The gate of a running `allowlist` sandbox whose agent is connected and hands
    /// over proxy connections; `None` for any other.
    pub async fn gate(&self, sandbox_id: &str) -> Option<Gate> {
        let sandbox = match self.service.store().sandbox(sandbox_id).await {
            Ok(sandbox) => sandbox?,
            Err(error) => {
                tracing::warn!(%sandbox_id, %error, "cannot read a sandbox to serve its egress");
                return None;
            }
        };
        let wanted = sandbox.network_mode == NetworkMode::Allowlist
            && matches!(
                sandbox.status,
                SandboxStatus::Running | SandboxStatus::Creating
            );
        if !wanted {
            return None;
        }
        let channel = self.service.agent_channel(sandbox_id)?;
        Some(Gate::new(
            self.service.clone(),
            sandbox_id.to_owned(),
            channel,
        ))
    }
}
