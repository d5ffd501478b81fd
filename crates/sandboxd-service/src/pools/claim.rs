//! Claiming a warm member for a create: the pool of the create's shape on the engine it
//! goes to hands out its oldest member whose agent is still there; the row is written
//! as `running` while other limits are set and the sandbox's lease is told, and the
//! create goes cold when any of that fails. A create of a shape without a configured
//! pool counts for its pool kept for demand.
//!
//! A claimed `allowlist` member's agent is announced again, so its proxy is served with
//! its row's list. `claim` answers `Claimed::Cold` with the key to count once a cold
//! create of a shape without a configured pool ran (`note_demand`, by the caller's
//! organization).

use std::collections::VecDeque;

use sandboxd_core::model::{Environment, NetworkMode, Principal, Sandbox, SandboxStatus, Server};
use sandboxd_core::pools::{Built, pool_for};
use sandboxd_core::validate::CreateSandbox;
use tracing::{info, warn};

use super::{PoolKey, Pools};
use crate::{Resource, ServiceError, now_ms};

/// What a pool made of a create.
pub(crate) enum Claimed {
    /// Served by a member.
    Warm(Box<Sandbox>),
    /// To be made cold; once it runs, a create of the pool kept for its shape's demand
    /// (none when its shape cannot be pooled, or has a configured pool).
    Cold(Option<PoolKey>),
}

impl Pools {
    /// Serves `cmd` from a warm pool of the engine it goes to (`server`: a remote one)
    /// when one matches and has a member ready; `built`: the version of the built
    /// template it names.
    pub(crate) async fn claim(
        &self,
        caller: &Principal,
        cmd: &CreateSandbox,
        built: Option<&Built>,
        environment: &Environment,
        server: Option<&Server>,
    ) -> Result<Claimed, ServiceError> {
        let pools = &self.service.inner.pools;
        let Some(matched) = pool_for(cmd, self.service.templates(), built) else {
            return Ok(Claimed::Cold(None));
        };
        let key = PoolKey {
            server_id: server.map(|s| s.server_id.clone()),
            shape: matched.shape,
        };
        // Under gVisor the processes a sandbox may run are its kernel's limit, set as
        // it starts: a create with other limits than its pool's is made cold.
        let runtime = key.runtime(&self.service);
        if matched.update_limits && sandboxd_core::plan::under_gvisor(runtime.as_deref()) {
            return Ok(Claimed::Cold(None));
        }
        // A member less isolated than the floor is never handed out (none is made).
        if self
            .service
            .check_isolation(runtime.as_deref(), key.shape.template.as_deref(), None)
            .is_err()
        {
            return Ok(Claimed::Cold(None));
        }
        let configured = key
            .shape
            .configured_template()
            .is_some_and(|template| match server {
                None => pools.local.contains_key(template),
                Some(server) => server
                    .warm_pools
                    .get(template)
                    .is_some_and(|size| *size > 0),
            });
        let (warm, agent) = loop {
            let (taken, in_force) = {
                let mut state = pools.state();
                let taken = state.ready.get_mut(&key).and_then(VecDeque::pop_front);
                (taken, state.sizes.contains_key(&key))
            };
            let Some(warm) = taken else {
                // Only pools in force are counted: a series per shape ever asked for
                // would grow without bound.
                if in_force {
                    key.count_claim("miss");
                }
                return Ok(Claimed::Cold((!configured).then_some(key)));
            };
            if let Some(agent) = self.service.agent_channel(&warm.sandbox_id) {
                break (warm, agent);
            }
            // Its agent went away: the member is unusable.
            warn!(sandbox_id = %warm.sandbox_id, "discarding a warm sandbox whose agent is gone");
            self.discard_member(warm, key.server_id.as_deref());
        };
        // Other limits than the pool's are written, and the sandbox's lease told to
        // its agent, while the row is (none waits for another); the sandbox is handed
        // out only once all are done, so its first command runs under its own limits,
        // and a server gone right after the claim leaves it its whole timeout and the
        // grace (a member's lease is the grace alone).
        let lease = std::time::Duration::from_millis(cmd.timeout_ms.max(0) as u64)
            + self.service.lease_grace();
        let prepared = async {
            let limits = async {
                if !matched.update_limits {
                    return Ok(());
                }
                warm.engine
                    .update_limits(
                        &warm.container_id,
                        (cmd.cpu * 1e9).round() as i64,
                        cmd.memory_mb * 1024 * 1024,
                        cmd.pids_limit,
                    )
                    .await
                    .map_err(|error| {
                        (
                            "its limits could not be set",
                            sandboxd_core::error::chain(&error),
                        )
                    })
            };
            let leased = async {
                match agent.lease(lease).await {
                    Ok(()) | Err(sandboxd_contracts::ChannelError::NeedsAgent) => Ok(()),
                    Err(error) => Err((
                        "its lease could not be told",
                        sandboxd_core::error::chain(&error),
                    )),
                }
            };
            let (limits, leased) = tokio::join!(limits, leased);
            limits.and(leased)
        };
        key.count_claim("hit");
        if !configured {
            self.note_demand(&key, &caller.organization_id);
        }
        let templates = self.service.templates();
        let template = key.shape.template.as_deref().and_then(|t| templates.get(t));
        let now = now_ms();
        let row = Sandbox {
            name: cmd
                .name
                .clone()
                .unwrap_or_else(|| format!("sandbox-{}", &warm.sandbox_id[..8].to_lowercase())),
            sandbox_id: warm.sandbox_id.clone(),
            organization_id: caller.organization_id.clone(),
            project_id: environment.project_id.clone(),
            environment_id: environment.environment_id.clone(),
            server_id: key.server_id.clone(),
            image: key
                .shape
                .own_image()
                .map(str::to_owned)
                .or_else(|| template.map(|t| t.image.clone()))
                .unwrap_or_default(),
            template: key.shape.template.clone(),
            container_id: Some(warm.container_id.clone()),
            status: SandboxStatus::Running,
            cpu: cmd.cpu,
            memory_mb: cmd.memory_mb,
            pids_limit: cmd.pids_limit,
            timeout_ms: cmd.timeout_ms,
            network_mode: cmd.network_mode,
            workdir: key.shape.workdir(templates).to_owned(),
            user: warm.user.clone(),
            runtime,
            created_at: now,
            expires_at: Some(now + cmd.timeout_ms),
            last_activity_at: Some(now),
            killed_at: None,
            env_per_exec: cmd.env_vars.is_some(),
            labels: cmd.labels.clone(),
            egress: cmd.egress.clone(),
            auto_pause: cmd.auto_pause,
            fixed_timeout: cmd.fixed_timeout,
            paused_timeout_ms: cmd.paused_timeout_ms,
            paused_at: None,
            hibernated_bytes: None,
            volumes: Vec::new(),
        };
        // The row and its audit entry in one write.
        let entry = crate::access::audit_entry(
            &row.organization_id,
            Some(caller),
            "sandbox.create",
            Resource::sandbox(&row),
            crate::sandboxes::created_metadata(&row, true, Some(key.shape.label())),
        );
        let inserted = self.service.store().insert_sandbox_audited(
            &row,
            cmd.env_vars.as_deref(),
            &caller.user_id,
            &self.service.inner.options.quotas,
            entry,
        );
        let (prepared, inserted) = tokio::join!(prepared, inserted);
        pools.state().members.remove(&warm.sandbox_id);
        if let Err(error) = inserted {
            self.discard_member(warm, key.server_id.as_deref());
            return Err(error.into());
        }
        if let Err((reason, error)) = prepared {
            // Not servable warm: the row goes (with a note in the audit log), and the
            // create is made cold.
            warn!(sandbox_id = %warm.sandbox_id, reason, %error, "could not prepare a warm sandbox; creating cold");
            self.discard_member(warm, key.server_id.as_deref());
            self.service
                .access()
                .record(
                    &row.organization_id,
                    Some(caller),
                    "sandbox.remove",
                    Resource::sandbox(&row),
                    // The engine's or agent's own words stay in the server's log.
                    serde_json::json!({"reason": format!("{reason}; made again cold")}),
                )
                .await;
            self.service.store().delete_sandbox(&row.sandbox_id).await?;
            return Ok(Claimed::Cold(None));
        }
        if row.network_mode == NetworkMode::Allowlist {
            // Its agent connected before its row said what to serve it: its egress
            // proxy is looked up again now.
            self.service.agents().announce(&row.sandbox_id);
        }
        info!(sandbox_id = %row.sandbox_id, pool = key.shape.label(), network = row.network_mode.as_str(), server_id = key.server_label(), "sandbox claimed from a warm pool");
        Ok(Claimed::Warm(Box::new(row)))
    }

    /// Counts a create of `key`'s shape (served or made cold) by `organization_id` for
    /// its pool's size.
    pub(crate) fn note_demand(&self, key: &PoolKey, organization_id: &str) {
        self.service
            .inner
            .pools
            .state()
            .demand
            .note(key, &organization_id.to_owned(), now_ms());
    }
}
