//! Snapshots of sandboxes: kept per organization, counted against its quota (how many,
//! and the bytes they add to their images) inside the write that keeps one.
//!
//! Migration 0016: the image, its server, the user as `run_as`, workdir, template,
//! `size_bytes`; no environment. Migration 0023: a snapshot with memory's
//! `memory_bytes` (counted with `size_bytes` against the quota) and `memory_key`. Listed by organization, newest first. `admit_snapshot`
//! runs before the commit, `insert_snapshot` checks the quota again with the size in its
//! write transaction; `image_in_use` (a sandbox made from the image is creating, running
//! or paused) holds back a removal.

use sandboxd_core::quotas::Quotas;
use sandboxd_core::snapshots::{KeptMemory, Snapshot};
use sqlx::Row as _;

use crate::{Store, StoreError};

/// The snapshots of an organization (`$1`), narrowed by what follows.
macro_rules! select_snapshots {
    ($rest:literal) => {
        concat!(
            "SELECT snapshot_id, organization_id, project_id, name, sandbox_id, server_id, \
             image, source_image, template, run_as, workdir, size_bytes, created_at, \
             memory_bytes, memory_key FROM snapshots WHERE organization_id = $1",
            $rest
        )
    };
}

fn snapshot(row: &sqlx::any::AnyRow) -> Result<Snapshot, StoreError> {
    Ok(Snapshot {
        snapshot_id: row.try_get("snapshot_id")?,
        organization_id: row.try_get("organization_id")?,
        project_id: row.try_get("project_id")?,
        name: row.try_get("name")?,
        sandbox_id: row.try_get("sandbox_id")?,
        server_id: row.try_get("server_id")?,
        image: row.try_get("image")?,
        source_image: row.try_get("source_image")?,
        template: row.try_get("template")?,
        user: row.try_get("run_as")?,
        workdir: row.try_get("workdir")?,
        size_bytes: row.try_get("size_bytes")?,
        created_at: row.try_get("created_at")?,
        memory: match (
            row.try_get::<Option<i64>, _>("memory_bytes")?,
            row.try_get::<Option<String>, _>("memory_key")?,
        ) {
            (Some(bytes), Some(agent_key)) => Some(KeptMemory { bytes, agent_key }),
            _ => None,
        },
    })
}

/// How many snapshots an organization keeps, and their bytes in all.
async fn kept(
    conn: &mut sqlx::AnyConnection,
    organization_id: &str,
) -> Result<(i64, i64), StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n, \
         CAST(COALESCE(SUM(size_bytes + COALESCE(memory_bytes, 0)), 0) AS BIGINT) AS bytes \
         FROM snapshots \
         WHERE organization_id = $1",
    )
    .bind(organization_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok((row.try_get("n")?, row.try_get("bytes")?))
}

impl Store {
    /// Whether the organization may keep one more snapshot (its size not known yet):
    /// asked before the engine makes the image, so a full quota costs no commit.
    pub async fn admit_snapshot(
        &self,
        organization_id: &str,
        quotas: &Quotas,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        let (count, bytes) = kept(&mut conn, organization_id).await?;
        Ok(quotas.admit_snapshot(count, bytes, 0)?)
    }

    /// Keeps a snapshot, if the organization's quota has room for it.
    pub async fn insert_snapshot(
        &self,
        snapshot: &Snapshot,
        created_by: &str,
        quotas: &Quotas,
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        let (count, bytes) = kept(&mut tx, &snapshot.organization_id).await?;
        let memory_bytes = snapshot.memory.as_ref().map(|m| m.bytes);
        quotas.admit_snapshot(
            count,
            bytes,
            snapshot
                .size_bytes
                .saturating_add(memory_bytes.unwrap_or(0)),
        )?;
        sqlx::query(
            "INSERT INTO snapshots (snapshot_id, organization_id, project_id, name, sandbox_id, \
             server_id, image, source_image, template, run_as, workdir, size_bytes, created_by, \
             created_at, memory_bytes, memory_key) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        )
        .bind(&snapshot.snapshot_id)
        .bind(&snapshot.organization_id)
        .bind(&snapshot.project_id)
        .bind(&snapshot.name)
        .bind(&snapshot.sandbox_id)
        .bind(&snapshot.server_id)
        .bind(&snapshot.image)
        .bind(&snapshot.source_image)
        .bind(&snapshot.template)
        .bind(&snapshot.user)
        .bind(&snapshot.workdir)
        .bind(snapshot.size_bytes)
        .bind(created_by)
        .bind(snapshot.created_at)
        .bind(memory_bytes)
        .bind(snapshot.memory.as_ref().map(|m| m.agent_key.clone()))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A snapshot of the organization's.
    pub async fn snapshot(
        &self,
        organization_id: &str,
        snapshot_id: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        let row = sqlx::query(select_snapshots!(" AND snapshot_id = $2"))
            .bind(organization_id)
            .bind(snapshot_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(snapshot).transpose()
    }

    /// The organization's snapshots, newest first.
    pub async fn snapshots(&self, organization_id: &str) -> Result<Vec<Snapshot>, StoreError> {
        let rows = sqlx::query(select_snapshots!(" ORDER BY created_at DESC, snapshot_id"))
            .bind(organization_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(snapshot).collect()
    }

    /// Whether a sandbox made from this image is being created, runs or is paused.
    pub async fn image_in_use(&self, image: &str) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM sandboxes WHERE image = $1 \
             AND status IN ('creating', 'running', 'paused')",
        )
        .bind(image)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get::<i64, _>("n")? > 0)
    }

    /// Whether a snapshot was taken of a sandbox made from this image (its image is
    /// built on this one's, which the engine keeps while it does).
    pub async fn image_under_snapshot(&self, image: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM snapshots WHERE source_image = $1")
            .bind(image)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>("n")? > 0)
    }

    /// Forgets a snapshot; whether there was one.
    pub async fn delete_snapshot(&self, snapshot_id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM snapshots WHERE snapshot_id = $1")
            .bind(snapshot_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
