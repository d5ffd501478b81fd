//! Connections to the ports of a running sandbox: a byte stream to `127.0.0.1:<port>`
//! inside it, carried by its agent (so it works for `isolated` sandboxes, which have no
//! interface, and on remote servers, over the agent's connection). A part of the sandbox
//! service; what reaches a port (previews, forwarding) is built on it.

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::model::Principal;
use sandboxd_ports::{ByteStream, ChannelError, RefusalKind};

use crate::executor::NEEDS_AGENT;
use crate::{Service, ServiceError, now_ms};

/// Connections to the ports of sandboxes.
#[derive(Debug, Clone)]
pub struct Ports {
    service: Service,
}

impl Ports {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }

    /// A connection to `port` inside the sandbox, for `caller` (who must be able to use
    /// it). Opening one counts as activity for the sandbox's idle timeout.
    #[tracing::instrument(skip_all, fields(%sandbox_id, port))]
    pub async fn connect(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        port: u16,
    ) -> Result<Box<dyn ByteStream>, ServiceError> {
        if port == 0 {
            return Err(ServiceError::Refused(
                "port must be between 1 and 65535".into(),
            ));
        }
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let executor = self.service.executor(&sandbox).await?;
        let agent = executor.agent_only()?;
        let opened = agent.open_port(port).await;
        if let Err(error) = self.service.store().touch(sandbox_id, now_ms()).await {
            tracing::warn!(%sandbox_id, %error, "could not record the sandbox's activity");
        }
        opened.map_err(port_error)
    }
}

fn port_error(error: ChannelError) -> ServiceError {
    match error {
        ChannelError::Refused(refusal) => match refusal.kind {
            RefusalKind::Unreachable => ServiceError::PortUnreachable(refusal.message),
            RefusalKind::Limit => ServiceError::Unavailable(refusal.message),
            _ => ServiceError::Refused(refusal.message),
        },
        ChannelError::NotSent | ChannelError::NeedsAgent => {
            ServiceError::Unavailable(NEEDS_AGENT.into())
        }
        lost => ServiceError::Agent(Box::new(lost)),
    }
}
