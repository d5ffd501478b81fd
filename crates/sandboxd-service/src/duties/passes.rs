//! One pass of the reaper, of reconcile and of the agents' bookkeeping. Startup reconcile
//! and periodic reconcile are the same pass.
//!
//! Reconcile (`Duties::reconcile_once`) runs on the local engine, then on each server,
//! skipping and reporting one it cannot reach. The reaper pass also fails the template
//! builds whose runner is gone (still `building` past their time limit).

use sandboxd_core::model::{Expiry, SandboxStatus};
use sandboxd_core::reconcile::{expired, plan_reconcile};
use tracing::{info, warn};

use super::Duties;
use crate::{Resource, ServiceError, now_ms};

/// What a reaper pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReapReport {
    pub killed: Vec<String>,
    /// Sandboxes made with `autoPause` paused at their idle timeout.
    pub paused: Vec<String>,
    /// gVisor sandboxes paused in memory longer than `[pause] to_disk_after_secs`, moved
    /// to disk.
    pub to_disk: Vec<String>,
    pub failed: Vec<String>,
}

/// What a reconcile pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub removed_containers: Vec<String>,
    pub marked_error: Vec<String>,
    /// Sandboxes whose stopped container was started again.
    pub restarted: Vec<String>,
    /// Running sandboxes whose frozen container was thawed.
    pub thawed: Vec<String>,
    /// Servers skipped because they could not be reached.
    pub unreachable_servers: Vec<String>,
}

impl Duties {
    /// Acts on every sandbox whose `expiresAt` has passed, carrying on past failures: a
    /// running one made with `autoPause` is paused, any other running one is killed, and
    /// so is a paused one at the end of its paused timeout.
    pub async fn reap_once(&self) -> Result<ReapReport, ServiceError> {
        let now = now_ms();
        let rows = self.service.store().expired_sandboxes(now).await?;
        let mut report = ReapReport::default();
        for sandbox in expired(&rows, now) {
            let id = sandbox.sandbox_id.clone();
            if sandbox.on_expiry() == Expiry::Pause {
                match self.service.sandboxes().pause_idle(sandbox).await {
                    Ok(_) => report.paused.push(id),
                    Err(error) => {
                        warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "reaper could not pause an idle sandbox; it tries again");
                        report.failed.push(id);
                    }
                }
                continue;
            }
            let reason = match sandbox.status {
                SandboxStatus::Paused => "paused timeout",
                _ => "expired",
            };
            match self.service.sandboxes().kill(sandbox.clone()).await {
                Ok(killed) => {
                    self.service
                        .access()
                        .record(
                            &killed.organization_id,
                            None,
                            "sandbox.kill",
                            Resource::sandbox(&killed),
                            serde_json::json!({"reason": reason}),
                        )
                        .await;
                    report.killed.push(id)
                }
                Err(error) => {
                    warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "reaper could not kill an expired sandbox");
                    report.failed.push(id);
                }
            }
        }
        self.hibernate_long_paused(now, &mut report).await?;
        // Builds cut short (sandboxd stopped while they ran): past twice their time
        // limit no runner is left to end them, and they hold their organization's share
        // of builds.
        let margin = self.service.inner.options.builds.timeout * 2;
        let cut = self
            .service
            .store()
            .fail_stale_builds(now - margin.as_millis() as i64, now)
            .await?;
        for build_id in cut {
            warn!(%build_id, "a build still building past its time limit was marked failed");
            if let Err(error) = self
                .service
                .engine()
                .remove_build_containers(&build_id)
                .await
            {
                warn!(%build_id, error = %sandboxd_core::error::chain(&error), "could not remove the containers of a build cut short");
            }
        }
        if !report.killed.is_empty() || !report.paused.is_empty() {
            info!(
                killed = report.killed.len(),
                paused = report.paused.len(),
                "reaper acted on expired sandboxes"
            );
        }
        Ok(report)
    }

    /// Removes from the local engine the build cache's images and the images prepared
    /// for sandboxes that were made longer ago than `[builds] keep_images`, unless a
    /// container uses one; answers their names. A cache image is removed by name: the
    /// layers of a template built on it stay with the template. What is needed again is
    /// made again (a step run, an image prepared).
    pub async fn collect_images_once(&self) -> Result<Vec<String>, ServiceError> {
        let keep = self.service.inner.options.builds.keep_images;
        let before = now_ms() / 1000 - keep.as_secs() as i64;
        let engine = self.service.engine();
        let mut removed = Vec::new();
        for repository in [
            sandboxd_core::template_build::CACHE_REPOSITORY,
            sandboxd_core::prepared_images::PREPARED_REPOSITORY,
        ] {
            for (name, made) in engine.images_of(repository).await? {
                if made > before {
                    continue;
                }
                match engine.remove_image(&name).await {
                    Ok(()) => removed.push(name),
                    Err(sandboxd_contracts::EngineError::Rejected { status: 409, .. }) => {}
                    Err(error) => {
                        warn!(image = %name, error = %sandboxd_core::error::chain(&error), "could not remove an image past its keeping time");
                    }
                }
            }
        }
        if !removed.is_empty() {
            info!(
                removed = removed.len(),
                "images of the build cache and prepared images past their keeping time removed"
            );
        }
        Ok(removed)
    }

    /// Removes the build contexts that expired (an upload that never finished too),
    /// with their chunks; answers how many went.
    pub async fn collect_contexts_once(&self) -> Result<u64, ServiceError> {
        let removed = self
            .service
            .store()
            .remove_expired_template_contexts(now_ms())
            .await?;
        if removed > 0 {
            info!(removed, "expired build contexts removed");
        }
        Ok(removed)
    }

    /// Marks the end of the timelines whose sandbox ended, and forgets those that
    /// ended longer than `[activity] retention` ago; answers how many went.
    pub async fn expire_activity_once(&self) -> Result<u64, ServiceError> {
        let now = now_ms();
        let retention = self.service.timeline().keeping().retention_ms;
        let gone = self
            .service
            .store()
            .expire_activity(now, now.saturating_sub(retention))
            .await?;
        if gone > 0 {
            info!(
                timelines = gone,
                "activity timelines past their retention removed"
            );
        }
        Ok(gone)
    }

    /// Brings rows and containers back in line on the local engine and on every
    /// remote server: orphan or stopped containers removed, rows whose container is gone
    /// (or stuck creating) marked `error`. A server that cannot be reached is skipped
    /// (its sandboxes are not touched) and reported; the next pass catches up.
    pub async fn reconcile_once(&self) -> Result<ReconcileReport, ServiceError> {
        let mut report = self.reconcile_on(None).await?;
        for server in self.service.store().all_servers().await? {
            if server.host_key.is_none() {
                continue;
            }
            match self.reconcile_on(Some(&server.server_id)).await {
                Ok(done) => {
                    report.removed_containers.extend(done.removed_containers);
                    report.marked_error.extend(done.marked_error);
                    report.restarted.extend(done.restarted);
                    report.thawed.extend(done.thawed);
                }
                Err(error) => {
                    warn!(server_id = %server.server_id, error = %sandboxd_core::error::chain(&error), "reconcile skipped an unreachable server");
                    report.unreachable_servers.push(server.server_id);
                }
            }
        }
        Ok(report)
    }

    /// Moves to disk the gVisor sandboxes of the local engine paused in memory for longer
    /// than `[pause] to_disk_after_secs`, when the engine can save memory.
    async fn hibernate_long_paused(
        &self,
        now: i64,
        report: &mut ReapReport,
    ) -> Result<(), ServiceError> {
        let Some(after) = self.service.inner.options.pause_to_disk_after else {
            return Ok(());
        };
        let since = now.saturating_sub(i64::try_from(after.as_millis()).unwrap_or(i64::MAX));
        let rows = self.service.store().paused_in_memory_since(since).await?;
        let rows: Vec<_> = rows
            .into_iter()
            .filter(|row| sandboxd_core::plan::isolation_tier(row.runtime.as_deref()) == "gvisor")
            .collect();
        if rows.is_empty() || !self.service.fleet().local().checkpoints().await {
            return Ok(());
        }
        for row in rows {
            let id = row.sandbox_id.clone();
            match self.service.sandboxes().hibernate_long_paused(&row).await {
                Ok(_) => report.to_disk.push(id),
                Err(error) => {
                    warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "reaper could not move a paused sandbox to disk; it tries again");
                    report.failed.push(id);
                }
            }
        }
        Ok(())
    }

    /// On a replica that does not reconcile: listens again for the agents of the local
    /// engine's running sandboxes whose sockets this replica made (after its restart).
    pub async fn restore_agents_once(&self) -> Result<(), ServiceError> {
        for row in self.service.store().live_rows_on(None).await? {
            if row.status == SandboxStatus::Running
                && !self.service.inner.freezes.agent_held(&row.sandbox_id)
            {
                self.service.agents().restore(&row.sandbox_id);
            }
        }
        Ok(())
    }

    /// Lets go of the agent sockets of sandboxes that ended elsewhere: killed or removed
    /// through another replica, which cannot close this replica's sockets. A sandbox
    /// whose row is killed or in error is let go at once; one whose row is missing (and
    /// that no warm pool owns) only when it was missing at the previous pass too, since a
    /// claimed pool member has its agent before its row.
    pub async fn release_ended_agents_once(&self) -> Result<(), ServiceError> {
        let members = self.service.pools().members();
        let mut missing = std::collections::HashSet::new();
        for sandbox_id in self.service.agents().listened() {
            if members.contains(&sandbox_id) {
                continue;
            }
            match self.service.store().sandbox(&sandbox_id).await? {
                Some(row) if matches!(row.status, SandboxStatus::Killed | SandboxStatus::Error) => {
                    self.service
                        .fleet()
                        .release_agent(&sandbox_id, row.server_id.as_deref());
                }
                Some(_) => {}
                None => {
                    missing.insert(sandbox_id);
                }
            }
        }
        let mut before = self
            .service
            .inner
            .agents_unrecorded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for sandbox_id in missing.intersection(&before) {
            self.service.fleet().release_agent(sandbox_id, None);
        }
        let still: std::collections::HashSet<String> =
            missing.difference(&before).cloned().collect();
        *before = still;
        Ok(())
    }

    /// One reconcile pass on one server's engine (`None`: the local engine).
    pub async fn reconcile_on(
        &self,
        server_id: Option<&str>,
    ) -> Result<ReconcileReport, ServiceError> {
        let engine = self.service.fleet().engine_of(server_id).await?;
        let containers = engine
            .list_sandbox_containers(self.service.instance_id())
            .await?;
        // Rows are read after the containers: a sandbox created in between has its row
        // (creating or running) in the list, so its fresh container is never an orphan.
        let rows = self.service.store().live_rows_on(server_id).await?;
        // Read after the containers too: a member made in between is already known.
        let members = self.service.pools().members();
        let plan = plan_reconcile(&rows, &containers, &members, now_ms());
        let mut report = ReconcileReport::default();
        for container in &plan.remove_containers {
            match engine.remove_container(container).await {
                Ok(()) => report.removed_containers.push(container.clone()),
                Err(error) => {
                    warn!(container_id = %container, error = %sandboxd_core::error::chain(&error), "reconcile could not remove a container")
                }
            }
        }
        self.service.store().mark_error(&plan.mark_error).await?;
        for sandbox_id in &plan.mark_error {
            self.service.fleet().release_agent(sandbox_id, server_id);
        }
        for (sandbox_id, container_id) in &plan.restart {
            let death = sandboxd_contracts::ContainerDeath {
                container_id: container_id.clone(),
                sandbox_id: sandbox_id.clone(),
            };
            match self.service.sandboxes().revive(&death).await {
                Ok(crate::Revival::Restarted) => report.restarted.push(sandbox_id.clone()),
                Ok(_) => {}
                Err(error) => {
                    warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "reconcile could not start a stopped container")
                }
            }
        }
        for (sandbox_id, container_id) in &plan.unpause {
            if self
                .service
                .thaw_if_running(&engine, sandbox_id, container_id)
                .await
            {
                report.thawed.push(sandbox_id.clone());
            }
        }
        // Running and paused sandboxes get their agent socket back after a restart of
        // sandboxd (a paused one's agent connects when it is resumed).
        for row in &rows {
            let kept = matches!(row.status, SandboxStatus::Running | SandboxStatus::Paused);
            // A sandbox whose memory is being saved is listened for once it is saved.
            if !kept
                || plan.mark_error.contains(&row.sandbox_id)
                || self.service.inner.freezes.agent_held(&row.sandbox_id)
            {
                continue;
            }
            match server_id {
                None => self.service.agents().restore(&row.sandbox_id),
                Some(server_id) if !self.service.agents().is_listening(&row.sandbox_id) => {
                    self.service
                        .fleet()
                        .listen_remote(&row.sandbox_id, server_id, false)
                        .await;
                }
                Some(_) => {}
            }
        }
        report.marked_error = plan.mark_error;
        if !plan.remove_containers.is_empty()
            || !report.marked_error.is_empty()
            || !report.restarted.is_empty()
            || !report.thawed.is_empty()
        {
            info!(
                server_id = server_id.unwrap_or("local"),
                removed = report.removed_containers.len(),
                errored = report.marked_error.len(),
                restarted = report.restarted.len(),
                thawed = report.thawed.len(),
                "reconciled sandboxes"
            );
        }
        Ok(report)
    }
}
