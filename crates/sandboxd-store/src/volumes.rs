//! Volumes of organizations: kept per organization and counted against its quota
//! (how many, and the sizes they reserve) inside the write that keeps one; a volume is
//! mounted only while ready, and removed only while no live sandbox mounts it.
//!
//! Migration 0017: name (unique in its project), project, server, `size_mb`, a status
//! `creating`, `ready` or `removing`, and the sandboxes' `volumes` column, their mounts
//! as JSON. `insert_volume` checks the quota (`admit_volume`) and the name in its write
//! transaction; `check_mountable` runs in the write that inserts a sandbox (its volumes
//! ready, of its organization, on its server); `begin_volume_removal` is refused in its
//! transaction while a creating, running or paused sandbox mounts the volume
//! (`volume_users`).

use sandboxd_core::model::Sandbox;
use sandboxd_core::quotas::Quotas;
use sandboxd_core::volumes::{Volume, VolumeMount};
use sqlx::Row as _;

use crate::{Store, StoreError};

/// The volumes of an organization (`$1`), narrowed by what follows.
macro_rules! select_volumes {
    ($rest:literal) => {
        concat!(
            "SELECT volume_id, organization_id, project_id, name, server_id, size_mb, status, \
             created_at \
             FROM volumes WHERE organization_id = $1",
            $rest
        )
    };
}

fn volume(row: &sqlx::any::AnyRow) -> Result<Volume, StoreError> {
    Ok(Volume {
        volume_id: row.try_get("volume_id")?,
        organization_id: row.try_get("organization_id")?,
        project_id: row.try_get("project_id")?,
        name: row.try_get("name")?,
        server_id: row.try_get("server_id")?,
        size_mb: row.try_get("size_mb")?,
        status: row.try_get("status")?,
        created_at: row.try_get("created_at")?,
    })
}

/// Refuses a sandbox whose volumes are not all ready volumes of its organization, on
/// its server.
pub(crate) async fn check_mountable(
    conn: &mut sqlx::AnyConnection,
    sandbox: &Sandbox,
) -> Result<(), StoreError> {
    for id in sandboxd_core::volumes::mounted_ids(&sandbox.volumes) {
        let row = sqlx::query(
            "SELECT status, server_id FROM volumes WHERE volume_id = $1 AND organization_id = $2",
        )
        .bind(&id)
        .bind(&sandbox.organization_id)
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else {
            return Err(StoreError::Unknown(format!("volume {id}")));
        };
        let status: String = row.try_get("status")?;
        if status != "ready" {
            return Err(StoreError::Conflict(format!(
                "volume {id} is {status}: it cannot be mounted"
            )));
        }
        if row.try_get::<Option<String>, _>("server_id")? != sandbox.server_id {
            return Err(StoreError::Conflict(format!(
                "volume {id} lives on another server than the sandbox"
            )));
        }
    }
    Ok(())
}

/// The mounts a sandbox's row holds.
fn mounts_of(row: &sqlx::any::AnyRow) -> Result<Vec<VolumeMount>, StoreError> {
    serde_json::from_str(&row.try_get::<String, _>("volumes")?)
        .map_err(|e| StoreError::Corrupt(format!("sandbox volumes: {e}")))
}

/// The live sandboxes of an organization that mount a volume.
async fn mounted_by(
    conn: &mut sqlx::AnyConnection,
    organization_id: &str,
    volume_id: &str,
) -> Result<Vec<String>, StoreError> {
    // The column is JSON: a match of the quoted id narrows it, the parse decides.
    // A sandbox being created, running or paused holds its volumes mounted.
    let rows = sqlx::query(
        "SELECT sandbox_id, volumes FROM sandboxes WHERE organization_id = $1 \
         AND status IN ('creating', 'running', 'paused') AND volumes LIKE $2 ORDER BY sandbox_id",
    )
    .bind(organization_id)
    .bind(format!("%\"{volume_id}\"%"))
    .fetch_all(&mut *conn)
    .await?;
    let mut ids = Vec::new();
    for row in rows {
        if mounts_of(&row)?.iter().any(|m| m.volume_id == volume_id) {
            ids.push(row.try_get("sandbox_id")?);
        }
    }
    Ok(ids)
}

impl Store {
    /// Keeps a new volume in `creating`, if its name is free in its project and
    /// the quota has room for it.
    pub async fn insert_volume(
        &self,
        volume: &Volume,
        created_by: &str,
        quotas: &Quotas,
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(size_mb), 0) AS BIGINT) AS mb FROM volumes \
             WHERE organization_id = $1",
        )
        .bind(&volume.organization_id)
        .fetch_one(&mut *tx)
        .await?;
        quotas.admit_volume(row.try_get("n")?, row.try_get("mb")?, volume.size_mb)?;
        // Unique in its project (whose members see its volumes): a name taken in a
        // project the caller may not see says nothing.
        let taken = sqlx::query(
            "SELECT 1 AS one FROM volumes WHERE organization_id = $1 AND project_id = $2 \
             AND name = $3",
        )
        .bind(&volume.organization_id)
        .bind(&volume.project_id)
        .bind(&volume.name)
        .fetch_optional(&mut *tx)
        .await?;
        if taken.is_some() {
            return Err(StoreError::Conflict(format!(
                "a volume named {} exists in this project",
                volume.name
            )));
        }
        sqlx::query(
            "INSERT INTO volumes (volume_id, organization_id, project_id, name, server_id, \
             size_mb, status, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'creating', $7, $8)",
        )
        .bind(&volume.volume_id)
        .bind(&volume.organization_id)
        .bind(&volume.project_id)
        .bind(&volume.name)
        .bind(&volume.server_id)
        .bind(volume.size_mb)
        .bind(created_by)
        .bind(volume.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Marks a volume being made ready (its engine volume made); false when it is no
    /// longer being made (removed meanwhile).
    pub async fn volume_made(&self, volume_id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE volumes SET status = 'ready' WHERE volume_id = $1 AND status = 'creating'",
        )
        .bind(volume_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Marks a volume `removing`, if no live sandbox mounts it; the sandboxes that do
    /// otherwise. One marked already (a removal cut short) is taken again; one being
    /// made is refused until `made_before` (then it is taken as a make cut short).
    pub async fn begin_volume_removal(
        &self,
        organization_id: &str,
        volume_id: &str,
        made_before: i64,
    ) -> Result<Vec<String>, StoreError> {
        let mut tx = self.write_tx().await?;
        let row = sqlx::query(
            "SELECT status, created_at FROM volumes WHERE volume_id = $1 AND organization_id = $2",
        )
        .bind(volume_id)
        .bind(organization_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::Unknown(format!("volume {volume_id}")))?;
        if row.try_get::<String, _>("status")? == "creating"
            && row.try_get::<i64, _>("created_at")? > made_before
        {
            return Err(StoreError::Conflict(
                "the volume is being made; retry in a moment".into(),
            ));
        }
        let users = mounted_by(&mut tx, organization_id, volume_id).await?;
        if !users.is_empty() {
            return Ok(users);
        }
        let done = sqlx::query(
            "UPDATE volumes SET status = 'removing' WHERE volume_id = $1 AND organization_id = $2",
        )
        .bind(volume_id)
        .bind(organization_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Unknown(format!("volume {volume_id}")));
        }
        tx.commit().await?;
        Ok(Vec::new())
    }

    /// A volume of the organization's.
    pub async fn volume(
        &self,
        organization_id: &str,
        volume_id: &str,
    ) -> Result<Option<Volume>, StoreError> {
        let row = sqlx::query(select_volumes!(" AND volume_id = $2"))
            .bind(organization_id)
            .bind(volume_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(volume).transpose()
    }

    /// The organization's volumes, by name.
    pub async fn volumes(&self, organization_id: &str) -> Result<Vec<Volume>, StoreError> {
        let rows = sqlx::query(select_volumes!(" ORDER BY name"))
            .bind(organization_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(volume).collect()
    }

    /// The live sandboxes of the organization that mount a volume.
    pub async fn volume_users(
        &self,
        organization_id: &str,
        volume_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        mounted_by(&mut conn, organization_id, volume_id).await
    }

    /// The live sandboxes of the organization that mount each volume, by volume id (one
    /// read for a listing of them all).
    pub async fn volume_users_all(
        &self,
        organization_id: &str,
    ) -> Result<std::collections::BTreeMap<String, Vec<String>>, StoreError> {
        let rows = sqlx::query(
            "SELECT sandbox_id, volumes FROM sandboxes WHERE organization_id = $1 \
             AND status IN ('creating', 'running', 'paused') AND volumes <> '[]' \
             ORDER BY sandbox_id",
        )
        .bind(organization_id)
        .fetch_all(&self.pool)
        .await?;
        let mut users: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for row in rows {
            let sandbox_id: String = row.try_get("sandbox_id")?;
            for id in sandboxd_core::volumes::mounted_ids(&mounts_of(&row)?) {
                users.entry(id).or_default().push(sandbox_id.clone());
            }
        }
        Ok(users)
    }

    /// Forgets a volume.
    pub async fn delete_volume(&self, volume_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM volumes WHERE volume_id = $1")
            .bind(volume_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
