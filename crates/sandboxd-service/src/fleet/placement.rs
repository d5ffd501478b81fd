//! Placement of a new sandbox whose caller named no server (when placement is on): the
//! candidates are the local engine (unless sandboxes run on remote servers only) and
//! every server the caller may use whose host key is pinned and that is reachable; the
//! choice is `sandboxd_core::placement`'s.
//!
//! The local engine comes with its `Room`, each server with its capacity and what its
//! sandboxes reserve. The choice goes where the most room is left after the sandbox, the
//! scarcer resource deciding; a shortfall is named when nothing fits.

use std::time::Duration;

use sandboxd_contracts::Reachability;
use sandboxd_core::api::Resources;
use sandboxd_core::model::Principal;
use sandboxd_core::placement::{Candidate, choose};
use tracing::debug;

use super::Fleet;
use crate::ServiceError;

/// How long placement waits for a server not connected yet.
const CONNECT_FOR_PLACEMENT: Duration = Duration::from_secs(5);

/// The local engine's room for placement.
#[derive(Debug, Clone, Copy, Default)]
pub struct Room {
    /// Sandboxes run on remote servers only: the local engine is no candidate.
    pub remote_only: bool,
    /// CPUs of the engine's host; `None`: unknown, the local engine is no candidate.
    pub host_cpus: Option<i64>,
    /// Memory of the engine's host, in MiB; `None`: unknown, as above.
    pub host_memory_mb: Option<i64>,
}

impl Fleet {
    /// Where a sandbox wanting `want` goes: `None` for the local engine.
    pub(crate) async fn place(
        &self,
        caller: &Principal,
        want: Resources,
    ) -> Result<Option<String>, ServiceError> {
        let mut candidates = Vec::new();
        let options = &self.room;
        if !options.remote_only
            && let (Some(cpus), Some(memory_mb)) = (options.host_cpus, options.host_memory_mb)
        {
            let (cpu, memory) = self.store.reserved_on(None).await?;
            candidates.push(Candidate {
                server_id: None,
                name: "the local engine".into(),
                capacity: Resources {
                    cpu: cpus as f64,
                    memory_mb,
                },
                reserved: Resources {
                    cpu,
                    memory_mb: memory,
                },
            });
        }
        for server in self.store.servers(&caller.organization_id).await? {
            if server.host_key.is_none() || self.made.failed_recently(&server.server_id) {
                continue;
            }
            if !self.access.server_listed(caller, &server.server_id).await? {
                continue;
            }
            let connected = tokio::time::timeout(
                CONNECT_FOR_PLACEMENT,
                self.engine_of(Some(&server.server_id)),
            )
            .await;
            let engine = match connected {
                Ok(Ok(engine)) => engine,
                _ => {
                    debug!(server_id = %server.server_id, "placement skipped an unreachable server");
                    continue;
                }
            };
            if engine.reachability().await.0 == Reachability::Unreachable {
                continue;
            }
            let learned = self.made.capacity(&server.server_id);
            let capacity = match (server.cpu_capacity, server.memory_mb_capacity, learned) {
                (Some(cpu), Some(memory_mb), _) => Resources { cpu, memory_mb },
                (cpu, memory, Some(engine)) => Resources {
                    cpu: cpu.unwrap_or(engine.cpu),
                    memory_mb: memory.unwrap_or(engine.memory_mb),
                },
                _ => continue,
            };
            let (cpu, memory) = self.store.reserved_on(Some(&server.server_id)).await?;
            candidates.push(Candidate {
                server_id: Some(server.server_id),
                name: server.name,
                capacity,
                reserved: Resources {
                    cpu,
                    memory_mb: memory,
                },
            });
        }
        let chosen = choose(&candidates, want)
            .map_err(|shortfall| ServiceError::Unavailable(shortfall.to_string()))?;
        Ok(chosen.server_id.clone())
    }
}
