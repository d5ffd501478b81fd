//! Sandbox rows.
//!
//! Updates are single statements, such as `touch` and `set_egress` (the `egress` column,
//! migration 0011, a JSON array; only a running `allowlist` sandbox's list changes),
//! `pause` and `resume` (migration 0015: `auto_pause`, `paused_timeout_ms`, `paused_at`;
//! a resume admits the sandbox's CPU against the organization's quota in its write
//! transaction). `add_egress` adds an approved host to the list as it stands. A sandbox's
//! `fixed_timeout` (migration 0018) keeps `touch` from moving its `expires_at`: it ends
//! `timeout_ms` after it was made or its timeout last set. `hibernate` pauses a sandbox
//! with its memory on disk (migration 0022: `hibernated_bytes`, the checkpoint's size
//! while it is; a resume clears it, `unhibernate` undoes it on a paused one).

use sandboxd_core::model::{NetworkMode, Sandbox, SandboxStatus};
use sandboxd_core::quotas::{Quotas, Usage};
use sandboxd_core::reconcile::RowState;
use sqlx::Row as _;

use crate::rows::{self, list_sandboxes, select_sandboxes};
use crate::{Store, StoreError};

/// `status IN (…)`: the statuses a row may move to a status from, as
/// [`SandboxStatus::may_become`] says (a test holds them to it). Literals, so each
/// guarded statement is one static string.
macro_rules! moves_to {
    (running) => {
        "status IN ('creating', 'paused')"
    };
    (paused) => {
        "status IN ('running')"
    };
    (error) => {
        "status IN ('creating', 'running', 'paused')"
    };
    (killed) => {
        "status IN ('creating', 'running', 'paused', 'error')"
    };
}

impl Store {
    /// Inserts a new sandbox row with its environment variables sealed, and puts it on
    /// its creator's access list, if the organization's quotas admit it beside the
    /// sandboxes it is creating or running.
    pub async fn insert_sandbox(
        &self,
        sandbox: &Sandbox,
        env_vars: Option<&str>,
        created_by: &str,
        quotas: &Quotas,
    ) -> Result<(), StoreError> {
        self.insert_recorded(sandbox, env_vars, created_by, quotas, None)
            .await
    }

    /// As [`Store::insert_sandbox`], with its audit entry written in the same
    /// transaction (a sandbox that starts running as its row is written: a warm claim).
    pub async fn insert_sandbox_audited(
        &self,
        sandbox: &Sandbox,
        env_vars: Option<&str>,
        created_by: &str,
        quotas: &Quotas,
        entry: crate::NewAuditEntry<'_>,
    ) -> Result<(), StoreError> {
        self.insert_recorded(sandbox, env_vars, created_by, quotas, Some(entry))
            .await
    }

    async fn insert_recorded(
        &self,
        sandbox: &Sandbox,
        env_vars: Option<&str>,
        created_by: &str,
        quotas: &Quotas,
        entry: Option<crate::NewAuditEntry<'_>>,
    ) -> Result<(), StoreError> {
        let sealed = env_vars
            .map(|text| self.secrets.seal(&sandbox.sandbox_id, text.as_bytes()))
            .transpose()?;
        let mut tx = self.write_tx().await?;
        // Read inside the write transaction: concurrent creates cannot both fit.
        let usage = organization_usage(&mut tx, &sandbox.organization_id).await?;
        quotas.admit_sandbox(usage, sandbox.cpu, sandbox.memory_mb)?;
        // Its volumes are ready, in the same write as the row: a removal decided before
        // it sees the row, one after it finds the volume gone.
        crate::volumes::check_mountable(&mut tx, sandbox).await?;
        sqlx::query(
            "INSERT INTO sandboxes (sandbox_id, name, organization_id, project_id, environment_id, \
             server_id, image, template, container_id, status, cpu, memory_mb, pids_limit, \
             timeout_ms, network_mode, env_vars, workdir, run_as, runtime, created_by, created_at, \
             expires_at, last_activity_at, killed_at, env_per_exec, labels, agent_replica, egress, \
             auto_pause, paused_timeout_ms, volumes, fixed_timeout) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32)",
        )
        .bind(&sandbox.sandbox_id)
        .bind(&sandbox.name)
        .bind(&sandbox.organization_id)
        .bind(&sandbox.project_id)
        .bind(&sandbox.environment_id)
        .bind(&sandbox.server_id)
        .bind(&sandbox.image)
        .bind(&sandbox.template)
        .bind(&sandbox.container_id)
        .bind(sandbox.status.as_str())
        .bind(sandbox.cpu)
        .bind(sandbox.memory_mb)
        .bind(sandbox.pids_limit)
        .bind(sandbox.timeout_ms)
        .bind(sandbox.network_mode.as_str())
        .bind(sealed)
        .bind(&sandbox.workdir)
        .bind(&sandbox.user)
        .bind(&sandbox.runtime)
        .bind(created_by)
        .bind(sandbox.created_at)
        .bind(sandbox.expires_at)
        .bind(sandbox.last_activity_at)
        .bind(sandbox.killed_at)
        .bind(i64::from(sandbox.env_per_exec))
        .bind(crate::rows::labels_json(&sandbox.labels))
        // The replica that makes a sandbox listens for its agent.
        .bind(self.replica_id())
        .bind(crate::rows::egress_json(&sandbox.egress))
        .bind(rows::auto_pause_column(sandbox.auto_pause))
        .bind(sandbox.paused_timeout_ms)
        .bind(crate::rows::volumes_json(&sandbox.volumes))
        .bind(i64::from(sandbox.fixed_timeout))
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO member_sandboxes (organization_id, user_id, sandbox_id) VALUES ($1, $2, $3)",
        )
        .bind(&sandbox.organization_id)
        .bind(created_by)
        .bind(&sandbox.sandbox_id)
        .execute(&mut *tx)
        .await?;
        if let Some(entry) = entry {
            crate::audit::append(&mut *tx, entry).await?;
        }
        tx.commit().await?;
        // The row as written is the row: the sandbox's next request finds it in memory.
        self.rows.written(sandbox);
        Ok(())
    }

    /// The decrypted `envVars` text of a sandbox, if it has one.
    pub async fn sandbox_env_vars(&self, sandbox_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT env_vars FROM sandboxes WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(sealed) = row
            .map(|r| r.try_get::<Option<Vec<u8>>, _>("env_vars"))
            .transpose()?
            .flatten()
        else {
            return Ok(None);
        };
        let plain = self.secrets.open(sandbox_id, &sealed)?;
        String::from_utf8(plain)
            .map(Some)
            .map_err(|_| StoreError::Corrupt("env vars are not UTF-8".into()))
    }

    /// One sandbox by id; a row read in the last second is answered from memory
    /// (`row_cache.rs`), kept up to date by every write of this store.
    pub async fn sandbox(&self, sandbox_id: &str) -> Result<Option<Sandbox>, StoreError> {
        if let Some(row) = self.rows.get(sandbox_id) {
            return Ok(Some(row));
        }
        let writes = self.rows.writes();
        let row = sqlx::query(select_sandboxes!(self.backend, "WHERE sandbox_id = $1"))
            .bind(sandbox_id)
            .fetch_optional(&self.pool)
            .await?;
        let sandbox = row.as_ref().map(rows::sandbox).transpose()?;
        if let Some(sandbox) = &sandbox {
            self.rows.insert(sandbox, writes);
        }
        Ok(sandbox)
    }

    /// The sandboxes of an environment, newest first.
    pub async fn sandboxes_in_environment(
        &self,
        environment_id: &str,
    ) -> Result<Vec<Sandbox>, StoreError> {
        let found = sqlx::query(list_sandboxes!(self.backend, "WHERE environment_id = $1"))
            .bind(environment_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(rows::newest_first(rows::sandboxes(&found)?))
    }

    /// The sandboxes of a project, newest first.
    pub async fn sandboxes_in_project(&self, project_id: &str) -> Result<Vec<Sandbox>, StoreError> {
        let found = sqlx::query(list_sandboxes!(self.backend, "WHERE project_id = $1"))
            .bind(project_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(rows::newest_first(rows::sandboxes(&found)?))
    }

    /// Records that a sandbox's container runs, if it is still `creating`; returns the
    /// row as it is now (killed meanwhile, it stays killed: the caller removes the
    /// container it made).
    pub async fn mark_running(
        &self,
        sandbox_id: &str,
        container_id: &str,
        user: Option<&str>,
        now: i64,
    ) -> Result<Option<Sandbox>, StoreError> {
        sqlx::query(
            "UPDATE sandboxes SET status = 'running', container_id = $1, run_as = $2, \
             last_activity_at = $3, expires_at = $3 + timeout_ms WHERE sandbox_id = $4 AND \
             status = 'creating'",
        )
        .bind(container_id)
        .bind(user)
        .bind(now)
        .bind(sandbox_id)
        .execute(&self.pool)
        .await?;
        self.rows.changed(sandbox_id);
        self.sandbox(sandbox_id).await
    }

    /// Sets the status of a sandbox if the transition is legal from the status it has
    /// ([`SandboxStatus::may_become`], checked in the same statement); whether it did.
    pub async fn set_status(
        &self,
        sandbox_id: &str,
        status: SandboxStatus,
    ) -> Result<bool, StoreError> {
        let query = match status {
            // Pausing and resuming write their times too: `pause`, `resume`.
            SandboxStatus::Creating | SandboxStatus::Paused => return Ok(false),
            SandboxStatus::Running => concat!(
                "UPDATE sandboxes SET status = 'running' WHERE sandbox_id = $1 AND ",
                moves_to!(running)
            ),
            SandboxStatus::Error => concat!(
                "UPDATE sandboxes SET status = 'error' WHERE sandbox_id = $1 AND ",
                moves_to!(error)
            ),
            SandboxStatus::Killed => concat!(
                "UPDATE sandboxes SET status = 'killed' WHERE sandbox_id = $1 AND ",
                moves_to!(killed)
            ),
        };
        let updated = sqlx::query(query)
            .bind(sandbox_id)
            .execute(&self.pool)
            .await?;
        self.rows.changed(sandbox_id);
        let moved = updated.rows_affected() > 0;
        if moved && status != SandboxStatus::Running {
            self.forget_ports(sandbox_id).await?;
        }
        if moved && status == SandboxStatus::Killed {
            // A killed sandbox never runs again: its secrets go now.
            self.forget_egress_credentials(sandbox_id).await?;
            self.forget_e2b_ports(sandbox_id).await?;
        }
        Ok(moved)
    }

    /// Marks a running sandbox paused at `now`: `expiresAt` becomes the end of its paused
    /// timeout. `None` when it was not running.
    pub async fn pause(&self, sandbox_id: &str, now: i64) -> Result<Option<Sandbox>, StoreError> {
        let updated = sqlx::query(concat!(
            "UPDATE sandboxes SET status = 'paused', paused_at = $1, \
             expires_at = $1 + paused_timeout_ms WHERE sandbox_id = $2 AND ",
            moves_to!(paused)
        ))
        .bind(now)
        .bind(sandbox_id)
        .execute(&self.pool)
        .await?;
        self.reread(sandbox_id, updated.rows_affected()).await
    }

    /// Marks a running or paused sandbox paused with its memory on disk at `now`, its
    /// checkpoint `bytes` large, if the organization's quota of memory on disk admits it
    /// beside its other sandboxes paused to disk (`None`: unchecked, for a restore
    /// undone): a running one's paused timeout starts now, a paused one's goes on.
    /// `None` when it was neither.
    pub async fn hibernate(
        &self,
        sandbox_id: &str,
        now: i64,
        bytes: i64,
        quotas: Option<&Quotas>,
    ) -> Result<Option<Sandbox>, StoreError> {
        let mut tx = self.write_tx().await?;
        if let Some(quotas) = quotas {
            let row = sqlx::query(
                "SELECT organization_id FROM sandboxes WHERE sandbox_id = $1 \
                 AND status IN ('running', 'paused')",
            )
            .bind(sandbox_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else {
                return Ok(None);
            };
            let organization: String = row.try_get("organization_id")?;
            let used: i64 = sqlx::query(
                "SELECT CAST(COALESCE(SUM(hibernated_bytes), 0) AS BIGINT) AS used FROM sandboxes \
                 WHERE organization_id = $1 AND status = 'paused' AND sandbox_id <> $2",
            )
            .bind(&organization)
            .bind(sandbox_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("used")?;
            quotas.admit_hibernation(used, bytes)?;
        }
        let updated = sqlx::query(
            "UPDATE sandboxes SET \
             paused_at = CASE WHEN status = 'paused' THEN paused_at ELSE $1 END, \
             expires_at = CASE WHEN status = 'paused' THEN expires_at \
                          ELSE $1 + paused_timeout_ms END, \
             status = 'paused', hibernated_bytes = $2 \
             WHERE sandbox_id = $3 AND status IN ('running', 'paused')",
        )
        .bind(now)
        .bind(bytes)
        .bind(sandbox_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.reread(sandbox_id, updated.rows_affected()).await
    }

    /// Sets the size of a hibernated sandbox's checkpoint, once it is known (the
    /// hibernation was admitted with an estimate); `None` when it is not paused on disk.
    pub async fn set_hibernated_bytes(
        &self,
        sandbox_id: &str,
        bytes: i64,
    ) -> Result<Option<Sandbox>, StoreError> {
        let updated = sqlx::query(
            "UPDATE sandboxes SET hibernated_bytes = $1 \
             WHERE sandbox_id = $2 AND status = 'paused' AND hibernated_bytes IS NOT NULL",
        )
        .bind(bytes)
        .bind(sandbox_id)
        .execute(&self.pool)
        .await?;
        self.reread(sandbox_id, updated.rows_affected()).await
    }

    /// Marks a paused sandbox's memory as kept in memory again (a hibernation undone);
    /// `None` when it was not paused.
    pub async fn unhibernate(&self, sandbox_id: &str) -> Result<Option<Sandbox>, StoreError> {
        let updated = sqlx::query(
            "UPDATE sandboxes SET hibernated_bytes = NULL \
             WHERE sandbox_id = $1 AND status = 'paused'",
        )
        .bind(sandbox_id)
        .execute(&self.pool)
        .await?;
        self.reread(sandbox_id, updated.rows_affected()).await
    }

    /// Marks a paused sandbox running again at `now`, its idle timeout starting afresh,
    /// if the organization's CPU quota admits it beside the sandboxes it is creating or
    /// running (a paused one holds none; `None`: unchecked, for a pause undone). `None`
    /// when it was not paused.
    pub async fn resume(
        &self,
        sandbox_id: &str,
        now: i64,
        quotas: Option<&Quotas>,
    ) -> Result<Option<Sandbox>, StoreError> {
        let mut tx = self.write_tx().await?;
        let row = sqlx::query(
            "SELECT organization_id, cpu FROM sandboxes WHERE sandbox_id = $1 AND status = 'paused'",
        )
        .bind(sandbox_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        if let Some(quotas) = quotas {
            let organization: String = row.try_get("organization_id")?;
            let usage = organization_usage(&mut tx, &organization).await?;
            quotas.admit_resume(usage, row.try_get("cpu")?)?;
        }
        let updated = sqlx::query(
            "UPDATE sandboxes SET status = 'running', paused_at = NULL, hibernated_bytes = NULL, \
             last_activity_at = $1, expires_at = $1 + timeout_ms \
             WHERE sandbox_id = $2 AND status = 'paused'",
        )
        .bind(now)
        .bind(sandbox_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.reread(sandbox_id, updated.rows_affected()).await
    }

    /// Refreshes the activity of a running sandbox: `expiresAt` becomes now + its timeout.
    pub async fn touch(&self, sandbox_id: &str, now: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE sandboxes SET last_activity_at = $1, \
             expires_at = CASE WHEN fixed_timeout <> 0 THEN expires_at ELSE $1 + timeout_ms END \
             WHERE sandbox_id = $2 AND status = 'running'",
        )
        .bind(now)
        .bind(sandbox_id)
        .execute(&self.pool)
        .await?;
        self.rows.touched(sandbox_id, now);
        Ok(())
    }

    /// Changes the timeout of a running sandbox and extends it from now; `None` when the
    /// sandbox is no longer running.
    pub async fn set_timeout(
        &self,
        sandbox_id: &str,
        timeout_ms: i64,
        now: i64,
    ) -> Result<Option<Sandbox>, StoreError> {
        let updated = sqlx::query(
            "UPDATE sandboxes SET timeout_ms = $1, last_activity_at = $2, expires_at = $2 + $1 \
             WHERE sandbox_id = $3 AND status = 'running'",
        )
        .bind(timeout_ms)
        .bind(now)
        .bind(sandbox_id)
        .execute(&self.pool)
        .await?;
        self.reread(sandbox_id, updated.rows_affected()).await
    }

    /// Names a sandbox that is not over (being made, running or paused) `name`; `None`
    /// when it is over.
    pub async fn rename(
        &self,
        sandbox_id: &str,
        name: &str,
    ) -> Result<Option<Sandbox>, StoreError> {
        let updated = sqlx::query(
            "UPDATE sandboxes SET name = $1 \
             WHERE sandbox_id = $2 AND status IN ('creating', 'running', 'paused')",
        )
        .bind(name)
        .bind(sandbox_id)
        .execute(&self.pool)
        .await?;
        self.reread(sandbox_id, updated.rows_affected()).await
    }

    /// Replaces the egress list `from` of a running `allowlist` sandbox with `allow`;
    /// `None` when it is no longer running (or not in that mode), or its list is no
    /// longer `from` (what was checked against the list is not applied to another).
    pub async fn set_egress(
        &self,
        sandbox_id: &str,
        from: &[String],
        allow: &[String],
    ) -> Result<Option<Sandbox>, StoreError> {
        let updated = sqlx::query(
            "UPDATE sandboxes SET egress = $1 WHERE sandbox_id = $2 AND egress = $3 \
             AND status = 'running' AND network_mode = 'allowlist'",
        )
        .bind(crate::rows::egress_json(allow))
        .bind(sandbox_id)
        .bind(crate::rows::egress_json(from))
        .execute(&self.pool)
        .await?;
        self.reread(sandbox_id, updated.rows_affected()).await
    }

    /// Adds `entry` to the egress list of a running `allowlist` sandbox, without losing
    /// a change made meanwhile by anyone (the list is replaced only if it is still the
    /// one read, else read again); `None` when it is no longer running (or not in that
    /// mode), a conflict when the list cannot take it.
    pub async fn add_egress(
        &self,
        sandbox_id: &str,
        entry: &str,
    ) -> Result<Option<Sandbox>, StoreError> {
        for _ in 0..8 {
            let Some(row) = self.sandbox(sandbox_id).await? else {
                return Ok(None);
            };
            if row.status != SandboxStatus::Running || row.network_mode != NetworkMode::Allowlist {
                return Ok(None);
            }
            let Some(list) = sandboxd_core::egress_requests::approved_list(&row.egress, entry)
                .map_err(StoreError::Conflict)?
            else {
                return Ok(Some(row));
            };
            let updated = sqlx::query(
                "UPDATE sandboxes SET egress = $1 WHERE sandbox_id = $2 AND egress = $3 \
                 AND status = 'running' AND network_mode = 'allowlist'",
            )
            .bind(crate::rows::egress_json(&list))
            .bind(sandbox_id)
            .bind(crate::rows::egress_json(&row.egress))
            .execute(&self.pool)
            .await?;
            // Read again either way: the cached row may have been behind.
            self.rows.changed(sandbox_id);
            if updated.rows_affected() == 1 {
                return self.sandbox(sandbox_id).await;
            }
        }
        Err(StoreError::Conflict(
            "the sandbox's egress list kept changing; retry".into(),
        ))
    }

    /// The row after a single-statement update of it: `None` when the update changed
    /// nothing (the sandbox left the state it applied to).
    async fn reread(&self, sandbox_id: &str, changed: u64) -> Result<Option<Sandbox>, StoreError> {
        self.rows.changed(sandbox_id);
        if changed == 0 {
            return Ok(None);
        }
        self.sandbox(sandbox_id).await
    }

    /// Marks a sandbox killed; returns the updated row.
    pub async fn mark_killed(
        &self,
        sandbox_id: &str,
        now: i64,
    ) -> Result<Option<Sandbox>, StoreError> {
        let updated = sqlx::query(concat!(
            "UPDATE sandboxes SET status = 'killed', killed_at = $1 WHERE sandbox_id = $2 AND ",
            moves_to!(killed)
        ))
        .bind(now)
        .bind(sandbox_id)
        .execute(&self.pool)
        .await?;
        self.rows.changed(sandbox_id);
        if updated.rows_affected() == 0 {
            return Ok(None);
        }
        self.forget_ports(sandbox_id).await?;
        // A killed sandbox never runs again: its secrets go now.
        self.forget_egress_credentials(sandbox_id).await?;
        self.forget_e2b_ports(sandbox_id).await?;
        self.sandbox(sandbox_id).await
    }

    /// How many sandboxes are running on each server (`local` for the local engine).
    pub async fn running_per_server(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT COALESCE(server_id, 'local') AS server, COUNT(*) AS running FROM sandboxes \
             WHERE status = 'running' GROUP BY COALESCE(server_id, 'local') ORDER BY server",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("server")?, row.try_get("running")?)))
            .collect()
    }

    /// Deletes a sandbox row, with its exposed ports and its egress log, requests and
    /// credentials.
    pub async fn delete_sandbox(&self, sandbox_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM sandboxes WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .execute(&self.pool)
            .await?;
        self.rows.changed(sandbox_id);
        self.forget_ports(sandbox_id).await?;
        self.forget_egress_log(sandbox_id).await?;
        self.forget_egress_requests(sandbox_id).await?;
        self.forget_e2b_ports(sandbox_id).await?;
        self.forget_egress_credentials(sandbox_id).await
    }

    /// Running and paused sandboxes whose `expiresAt` has passed.
    pub async fn expired_sandboxes(&self, now: i64) -> Result<Vec<Sandbox>, StoreError> {
        let found = sqlx::query(list_sandboxes!(
            self.backend,
            "WHERE status IN ('running', 'paused') AND expires_at IS NOT NULL AND expires_at <= $1"
        ))
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        rows::sandboxes(&found)
    }

    /// The sandboxes on the local engine under gVisor's runtime paused in memory since
    /// `since` or earlier: those `[pause] to_disk_after` moves to disk.
    pub async fn paused_in_memory_since(&self, since: i64) -> Result<Vec<Sandbox>, StoreError> {
        let found = sqlx::query(list_sandboxes!(
            self.backend,
            "WHERE status = 'paused' AND hibernated_bytes IS NULL AND paused_at <= $1 \
             AND server_id IS NULL AND runtime LIKE '%runsc%'"
        ))
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        rows::sandboxes(&found)
    }

    /// The `creating`, `running` and `paused` rows, as reconcile sees them.
    pub async fn live_rows(&self) -> Result<Vec<RowState>, StoreError> {
        let found = sqlx::query(
            "SELECT sandbox_id, container_id, status, created_at, expires_at FROM sandboxes \
             WHERE status IN ('creating', 'running', 'paused')",
        )
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(row_state).collect()
    }

    /// The `creating`, `running` and `paused` rows of one server (`None`: the local
    /// engine).
    pub async fn live_rows_on(&self, server_id: Option<&str>) -> Result<Vec<RowState>, StoreError> {
        let found = sqlx::query(
            "SELECT sandbox_id, container_id, status, created_at, expires_at FROM sandboxes \
             WHERE status IN ('creating', 'running', 'paused') AND COALESCE(server_id, '') = $1",
        )
        .bind(server_id.unwrap_or(""))
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(row_state).collect()
    }

    /// Marks sandboxes `error`, but only those still `creating`, `running` or `paused`,
    /// so a sandbox killed meanwhile keeps its status.
    pub async fn mark_error(&self, sandbox_ids: &[String]) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        for id in sandbox_ids {
            sqlx::query(concat!(
                "UPDATE sandboxes SET status = 'error' WHERE sandbox_id = $1 AND ",
                moves_to!(error)
            ))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        for id in sandbox_ids {
            self.rows.changed(id);
            self.forget_ports(id).await?;
        }
        Ok(())
    }
}

/// What an organization's sandboxes hold of its quotas, read inside `tx`: every live
/// sandbox counts and holds its memory; a paused one holds no CPU.
async fn organization_usage(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    organization_id: &str,
) -> Result<Usage, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS sandboxes, \
         CAST(COALESCE(SUM(CASE WHEN status = 'paused' THEN 0 ELSE cpu END), 0) AS DOUBLE PRECISION) AS cpu, \
         CAST(COALESCE(SUM(memory_mb), 0) AS BIGINT) AS memory_mb FROM sandboxes \
         WHERE organization_id = $1 AND status IN ('creating', 'running', 'paused')",
    )
    .bind(organization_id)
    .fetch_one(&mut **tx)
    .await?;
    Ok(Usage {
        sandboxes: row.try_get("sandboxes")?,
        cpu: row.try_get("cpu")?,
        memory_mb: row.try_get("memory_mb")?,
    })
}

fn row_state(row: &sqlx::any::AnyRow) -> Result<RowState, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(RowState {
        sandbox_id: row.try_get("sandbox_id")?,
        container_id: row.try_get("container_id")?,
        status: SandboxStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown sandbox status {status}")))?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guards written in SQL are the core's transitions.
    #[test]
    fn the_guards_are_the_legal_transitions() {
        for (next, guard) in [
            (SandboxStatus::Running, moves_to!(running)),
            (SandboxStatus::Paused, moves_to!(paused)),
            (SandboxStatus::Error, moves_to!(error)),
            (SandboxStatus::Killed, moves_to!(killed)),
        ] {
            let from: Vec<String> = SandboxStatus::sources(next)
                .map(|s| format!("'{}'", s.as_str()))
                .collect();
            assert_eq!(guard, format!("status IN ({})", from.join(", ")));
        }
    }
}
