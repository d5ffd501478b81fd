//! The agent host contract implemented by the hub: each call goes to the hub's method
//! of the same name; a socket that cannot be set up is the contract's error, its cause
//! kept.

use std::sync::Arc;
use std::time::Duration;

use sandboxd_contracts::{AgentHost, AgentHostError, ByteStream, KeyHandover};
use sandboxd_core::plan::AgentMount;
use tokio::sync::mpsc;

use crate::AgentHub;

#[async_trait::async_trait]
impl AgentHost for AgentHub {
    fn enabled(&self) -> bool {
        AgentHub::enabled(self)
    }

    fn listen(&self, sandbox_id: &str) -> Result<Option<AgentMount>, AgentHostError> {
        AgentHub::listen(self, sandbox_id).map_err(|e| AgentHostError(e.into()))
    }

    fn listen_restored(
        &self,
        sandbox_id: &str,
        key: &str,
    ) -> Result<Option<AgentMount>, AgentHostError> {
        AgentHub::listen_restored(self, sandbox_id, key).map_err(|e| AgentHostError(e.into()))
    }

    async fn rekey(&self, sandbox_id: &str) -> Result<(), AgentHostError> {
        AgentHub::rekey(self, sandbox_id)
            .await
            .map_err(|e| AgentHostError(e.into()))
    }

    fn restore(&self, sandbox_id: &str) {
        AgentHub::restore(self, sandbox_id)
    }

    fn adopt(
        &self,
        sandbox_id: &str,
        incoming: mpsc::Receiver<Box<dyn ByteStream>>,
        binary: String,
        run_dir: String,
        handover: Arc<dyn KeyHandover>,
    ) -> Result<Option<AgentMount>, AgentHostError> {
        AgentHub::adopt(self, sandbox_id, incoming, binary, run_dir, handover)
            .map_err(|e| AgentHostError(e.into()))
    }

    fn key_of(&self, sandbox_id: &str) -> Result<String, AgentHostError> {
        AgentHub::key_of(self, sandbox_id).map_err(|e| AgentHostError(e.into()))
    }

    async fn offer_again(&self, sandbox_id: &str) {
        AgentHub::offer_again(self, sandbox_id).await
    }

    fn is_listening(&self, sandbox_id: &str) -> bool {
        AgentHub::is_listening(self, sandbox_id)
    }

    async fn wait_connected(
        &self,
        sandbox_id: &str,
        timeout: Duration,
    ) -> Option<sandboxd_agent_protocol::Hello> {
        AgentHub::wait_connected(self, sandbox_id, timeout)
            .await
            .map(|conn| conn.hello)
    }

    fn hello(&self, sandbox_id: &str) -> Option<sandboxd_agent_protocol::Hello> {
        self.connection(sandbox_id).map(|conn| conn.hello)
    }

    fn listened(&self) -> Vec<String> {
        AgentHub::listened(self)
    }

    fn stop_listening(&self, sandbox_id: &str) {
        AgentHub::stop_listening(self, sandbox_id)
    }

    fn release(&self, sandbox_id: &str) {
        AgentHub::release(self, sandbox_id)
    }

    fn connections(&self) -> mpsc::UnboundedReceiver<String> {
        AgentHub::connections(self)
    }

    fn announce(&self, sandbox_id: &str) {
        AgentHub::announce(self, sandbox_id)
    }

    fn shutdown(&self) {
        AgentHub::shutdown(self)
    }
}
