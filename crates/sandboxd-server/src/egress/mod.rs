//! The egress proxy of `allowlist` sandboxes, served here: for each sandbox whose agent
//! connects, a few requests wait for its programs' next connections to the proxy
//! (`Gate::next`), and each connection is served by `proxy.rs` on a task of its own.
//!
//! `serve_gates` subscribes before the first reconcile; each sandbox gets four tasks
//! waiting on its gate, replaced when its agent reconnects.

mod client_hello;
mod proxy;
pub mod tls;

use std::collections::HashMap;

use sandboxd_service::{Gate, Service};
use tokio::task::JoinSet;

/// Connections awaited at once per sandbox: a burst of programs connecting is taken
/// without waiting for each hand-over in turn.
const WAITING: usize = 4;

/// Serves the egress proxy of every `allowlist` sandbox whose agent connects from now
/// on; runs until the agent hub is dropped. Subscribed when called, so call it before
/// the first reconcile listens again for agents.
pub fn serve_gates(
    service: &Service,
    tls: tokio_rustls::TlsConnector,
) -> impl Future<Output = ()> + Send + 'static {
    let egress = service.egress();
    let mut connected = egress.connections();
    async move {
        // The accepting tasks of each sandbox's latest agent connection; a reconnected
        // agent's replace its previous one's.
        let mut gates: HashMap<String, JoinSet<()>> = HashMap::new();
        // Gates being looked up (each a read of the store), so that one slow read holds
        // up no other sandbox; each with the number of the connection it is for.
        let mut looking: JoinSet<(String, u64, Option<Gate>)> = JoinSet::new();
        let mut latest: HashMap<String, u64> = HashMap::new();
        let mut count = 0u64;
        loop {
            tokio::select! {
                next = connected.recv() => {
                    let Some(sandbox_id) = next else { return };
                    gates.retain(|_, tasks| {
                        while tasks.try_join_next().is_some() {}
                        !tasks.is_empty()
                    });
                    gates.remove(&sandbox_id);
                    count += 1;
                    latest.insert(sandbox_id.clone(), count);
                    let egress = egress.clone();
                    looking.spawn(async move {
                        let gate = egress.gate(&sandbox_id).await;
                        (sandbox_id, count, gate)
                    });
                }
                Some(found) = looking.join_next() => {
                    let Ok((sandbox_id, number, gate)) = found else { continue };
                    if latest.get(&sandbox_id) != Some(&number) {
                        // A later connection of the same agent is looked up.
                        continue;
                    }
                    latest.remove(&sandbox_id);
                    let Some(gate) = gate else { continue };
                    let mut tasks = JoinSet::new();
                    for _ in 0..WAITING {
                        tasks.spawn(accept(gate.clone(), tls.clone()));
                    }
                    gates.insert(sandbox_id, tasks);
                }
            }
        }
    }
}

/// Takes the sandbox's proxy connections one after another, each served on a task of
/// its own, until its agent's connection ends.
async fn accept(gate: Gate, tls: tokio_rustls::TlsConnector) {
    loop {
        match gate.next().await {
            Ok(stream) => {
                tokio::spawn(proxy::serve(stream, gate.clone(), tls.clone()));
            }
            Err(sandboxd_contracts::ChannelError::Refused(failure)) => {
                tracing::warn!(sandbox_id = gate.sandbox_id(), message = %failure.message, "the sandbox's egress proxy cannot be offered");
                return;
            }
            Err(error) => {
                tracing::debug!(sandbox_id = gate.sandbox_id(), error = %sandboxd_core::error::chain(&error), "the egress gate closed");
                return;
            }
        }
    }
}
