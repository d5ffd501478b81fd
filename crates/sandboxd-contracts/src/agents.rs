//! The agent host contract: where sandboxes' agents connect to sandboxd. The service
//! listens for a sandbox's agent before its container is made, takes the connections
//! of a remote sandbox's agent forwarded from its server, offers the agent its key
//! again when the container starts again, and lets it go when the sandbox ends; the
//! connected agents' channels come from the same host (`AgentChannels`). The adapter is
//! `sandboxd-agent-host`'s `AgentHub`; the service names only this trait.

use std::sync::Arc;
use std::time::Duration;

use sandboxd_core::plan::AgentMount;
use tokio::sync::mpsc;

use crate::{AgentChannels, ByteStream};

/// Where a sandbox's key file is put and taken away: the local socket directory, or the
/// one on a remote server.
#[async_trait::async_trait]
pub trait KeyHandover: std::fmt::Debug + Send + Sync + 'static {
    /// Puts `key` where the sandbox's agent reads it when it starts.
    async fn offer(&self, key: &str) -> std::io::Result<()>;
    /// Takes the key file away; none there is no error.
    async fn withdraw(&self) -> std::io::Result<()>;
}

/// A sandbox's agent socket could not be set up; the sandbox then runs without it.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct AgentHostError(pub Box<dyn std::error::Error + Send + Sync>);

/// Where sandboxes' agents connect.
#[async_trait::async_trait]
pub trait AgentHost: AgentChannels {
    /// Whether sandboxes get an agent.
    fn enabled(&self) -> bool;
    /// Listens for the agent of a local sandbox about to be created, with its key
    /// offered; what to mount into its container (`None`: no agent).
    fn listen(&self, sandbox_id: &str) -> Result<Option<AgentMount>, AgentHostError>;
    /// Listens for the agent of a local sandbox about to be restored from a checkpoint,
    /// which comes back holding `key` (its source's), until `rekey`; nothing is offered.
    fn listen_restored(
        &self,
        sandbox_id: &str,
        key: &str,
    ) -> Result<Option<AgentMount>, AgentHostError> {
        let _ = (sandbox_id, key);
        Err(AgentHostError("this host cannot restore an agent".into()))
    }
    /// Gives the sandbox's connected agent a new key; the one it had works no more.
    async fn rekey(&self, sandbox_id: &str) -> Result<(), AgentHostError> {
        let _ = sandbox_id;
        Err(AgentHostError(
            "this host cannot give an agent a new key".into(),
        ))
    }
    /// Listens again for a local sandbox's agent after a restart of sandboxd.
    fn restore(&self, sandbox_id: &str);
    /// Takes the agent connections of a sandbox that arrive from elsewhere (a socket on
    /// a remote server), with the binary and socket directory at those paths there.
    fn adopt(
        &self,
        sandbox_id: &str,
        incoming: mpsc::Receiver<Box<dyn ByteStream>>,
        binary: String,
        run_dir: String,
        handover: Arc<dyn KeyHandover>,
    ) -> Result<Option<AgentMount>, AgentHostError>;
    /// The sandbox's agent key (made now if it has none), for a remote server to offer.
    fn key_of(&self, sandbox_id: &str) -> Result<String, AgentHostError>;
    /// Offers the sandbox's key again, for its container about to be started again.
    async fn offer_again(&self, sandbox_id: &str);
    /// Whether the sandbox's agent connections are taken now.
    fn is_listening(&self, sandbox_id: &str) -> bool;
    /// Waits at most `timeout` for the sandbox's agent to connect; its hello when it did.
    async fn wait_connected(
        &self,
        sandbox_id: &str,
        timeout: Duration,
    ) -> Option<sandboxd_agent_protocol::Hello>;
    /// What the sandbox's connected agent said of itself as it connected, when one is.
    fn hello(&self, sandbox_id: &str) -> Option<sandboxd_agent_protocol::Hello>;
    /// The sandboxes listened for.
    fn listened(&self) -> Vec<String>;
    /// Stops taking the sandbox's agent connections, keeping its key.
    fn stop_listening(&self, sandbox_id: &str);
    /// Lets the sandbox's agent go for good: its socket and key.
    fn release(&self, sandbox_id: &str);
    /// The ids of sandboxes whose agent connects from now on, one per connection.
    fn connections(&self) -> mpsc::UnboundedReceiver<String>;
    /// Tells the subscribers of `connections` again that the sandbox's agent is connected.
    fn announce(&self, sandbox_id: &str);
    /// Stops taking connections, at shutdown.
    fn shutdown(&self);
}
