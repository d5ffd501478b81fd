//! Builds asked for through E2B's API, and the files its SDK uploads for them.
//!
//! Migration 0020. E2B names a build before it says what to build: `insert_e2b_build`
//! keeps the request (bounded per organization; requests whose steps never came go after
//! an hour), `e2b_build_started` records the steps' names once sandboxd's build of the
//! same id began. Uploaded archives are kept per project and hash (`put_e2b_files`),
//! within a bound of bytes per organization (the oldest go first) and a day. Upload
//! URLs carry a token derived from the master key (`e2b_upload_token`), so any replica
//! takes the upload.

use sqlx::Row as _;

use crate::{Store, StoreError};

/// How long a build asked for waits for its steps, ms.
pub const E2B_BUILD_WAITS_MS: i64 = 60 * 60 * 1000;
/// The most builds an organization may have asked for and not started.
pub const MAX_WAITING_E2B_BUILDS: i64 = 32;
/// How long an uploaded archive is kept, ms.
pub const E2B_FILES_KEPT_MS: i64 = 24 * 60 * 60 * 1000;
/// The most bytes of uploaded archives an organization keeps.
pub const MAX_E2B_FILES_BYTES: i64 = 512 << 20;

/// A build asked for through E2B's API.
#[derive(Debug, Clone, PartialEq)]
pub struct E2bBuild {
    pub build_id: String,
    pub template_id: String,
    pub organization_id: String,
    pub project_id: String,
    pub name: String,
    pub cpu: Option<f64>,
    pub memory_mb: Option<i64>,
    pub tags: Vec<String>,
    /// For each of sandboxd's steps (from 1), the E2B step it came from; `None` until
    /// the steps came.
    pub steps: Option<Vec<String>>,
    pub created_by: String,
    pub created_at: i64,
}

pub(crate) fn e2b_build(row: &sqlx::any::AnyRow) -> Result<E2bBuild, StoreError> {
    let json = |column: &str| -> Result<Option<Vec<String>>, StoreError> {
        let text: Option<String> = row.try_get(column)?;
        text.map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("e2b build {column}: {e}")))
    };
    Ok(E2bBuild {
        build_id: row.try_get("build_id")?,
        template_id: row.try_get("template_id")?,
        organization_id: row.try_get("organization_id")?,
        project_id: row.try_get("project_id")?,
        name: row.try_get("name")?,
        cpu: row
            .try_get::<Option<i64>, _>("cpu_milli")?
            .map(|milli| milli as f64 / 1000.0),
        memory_mb: row.try_get("memory_mb")?,
        tags: json("tags")?.unwrap_or_default(),
        steps: json("steps")?,
        created_by: row.try_get("created_by")?,
        created_at: row.try_get("created_at")?,
    })
}

impl Store {
    /// Keeps a build asked for; refused past `MAX_WAITING_E2B_BUILDS` waiting in the
    /// organization. Requests that waited past `E2B_BUILD_WAITS_MS` go first. The
    /// template's id is the one of an earlier build of the name in the project, if any
    /// (written into `build`).
    pub async fn insert_e2b_build(&self, build: &mut E2bBuild) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        sqlx::query("DELETE FROM e2b_builds WHERE steps IS NULL AND created_at < $1")
            .bind(build.created_at - E2B_BUILD_WAITS_MS)
            .execute(&mut *tx)
            .await?;
        let waiting: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM e2b_builds WHERE organization_id = $1 AND steps IS NULL",
        )
        .bind(&build.organization_id)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if waiting >= MAX_WAITING_E2B_BUILDS {
            return Err(StoreError::Quota(
                sandboxd_core::quotas::QuotaExceeded::WaitingBuilds {
                    limit: MAX_WAITING_E2B_BUILDS,
                },
            ));
        }
        let earlier = sqlx::query(
            "SELECT template_id FROM template_builds WHERE organization_id = $1 \
             AND project_id = $2 AND name = $3 LIMIT 1",
        )
        .bind(&build.organization_id)
        .bind(&build.project_id)
        .bind(&build.name)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(earlier) = earlier {
            build.template_id = earlier.try_get("template_id")?;
        }
        let tags = serde_json::to_string(&build.tags)
            .map_err(|e| StoreError::Corrupt(format!("e2b build tags: {e}")))?;
        sqlx::query(
            "INSERT INTO e2b_builds (build_id, template_id, organization_id, project_id, name, \
             cpu_milli, memory_mb, tags, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&build.build_id)
        .bind(&build.template_id)
        .bind(&build.organization_id)
        .bind(&build.project_id)
        .bind(&build.name)
        .bind(build.cpu.map(|cpu| (cpu * 1000.0).round() as i64))
        .bind(build.memory_mb)
        .bind(tags)
        .bind(&build.created_by)
        .bind(build.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A build of the organization's asked for through E2B's API.
    pub async fn e2b_build(
        &self,
        organization_id: &str,
        build_id: &str,
    ) -> Result<Option<E2bBuild>, StoreError> {
        let row = sqlx::query(
            "SELECT build_id, template_id, organization_id, project_id, name, cpu_milli, \
             memory_mb, tags, steps, created_by, created_at FROM e2b_builds \
             WHERE organization_id = $1 AND build_id = $2",
        )
        .bind(organization_id)
        .bind(build_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(e2b_build).transpose()
    }

    /// The project of an E2B template: of a build asked for under its id, else of a
    /// template of that id.
    pub async fn e2b_template_project(
        &self,
        organization_id: &str,
        template_id: &str,
    ) -> Result<Option<String>, StoreError> {
        for query in [
            "SELECT project_id FROM e2b_builds WHERE organization_id = $1 AND template_id = $2 LIMIT 1",
            "SELECT project_id FROM template_builds WHERE organization_id = $1 AND template_id = $2 LIMIT 1",
        ] {
            let row = sqlx::query(query)
                .bind(organization_id)
                .bind(template_id)
                .fetch_optional(&self.pool)
                .await?;
            if let Some(row) = row {
                return Ok(Some(row.try_get("project_id")?));
            }
        }
        Ok(None)
    }

    /// Records that a waiting build's steps came, with the E2B step of each of
    /// sandboxd's steps; false when it was not waiting (its steps came already).
    pub async fn e2b_build_started(
        &self,
        build_id: &str,
        steps: &[String],
    ) -> Result<bool, StoreError> {
        let steps = serde_json::to_string(steps)
            .map_err(|e| StoreError::Corrupt(format!("e2b build steps: {e}")))?;
        let done =
            sqlx::query("UPDATE e2b_builds SET steps = $1 WHERE build_id = $2 AND steps IS NULL")
                .bind(steps)
                .bind(build_id)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Puts a waiting build back to waiting (its build could not start).
    pub async fn e2b_build_not_started(&self, build_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE e2b_builds SET steps = NULL WHERE build_id = $1")
            .bind(build_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Whether a project holds the archive of `files_hash`.
    pub async fn has_e2b_files(
        &self,
        project_id: &str,
        files_hash: &str,
    ) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT size FROM e2b_build_files WHERE project_id = $1 AND files_hash = $2",
        )
        .bind(project_id)
        .bind(files_hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    /// Keeps an uploaded archive (replacing one of the same hash); archives past a day
    /// go, and the organization's oldest while it keeps more than
    /// `MAX_E2B_FILES_BYTES`.
    pub async fn put_e2b_files(
        &self,
        organization_id: &str,
        project_id: &str,
        files_hash: &str,
        archive: &[u8],
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        sqlx::query("DELETE FROM e2b_build_files WHERE created_at < $1")
            .bind(now - E2B_FILES_KEPT_MS)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM e2b_build_files WHERE project_id = $1 AND files_hash = $2")
            .bind(project_id)
            .bind(files_hash)
            .execute(&mut *tx)
            .await?;
        let kept = sqlx::query(
            "SELECT project_id, files_hash, size FROM e2b_build_files \
             WHERE organization_id = $1 ORDER BY created_at DESC",
        )
        .bind(organization_id)
        .fetch_all(&mut *tx)
        .await?;
        let mut total = archive.len() as i64;
        for row in kept {
            total += row.try_get::<i64, _>("size")?;
            if total > MAX_E2B_FILES_BYTES {
                sqlx::query(
                    "DELETE FROM e2b_build_files WHERE project_id = $1 AND files_hash = $2",
                )
                .bind(row.try_get::<String, _>("project_id")?)
                .bind(row.try_get::<String, _>("files_hash")?)
                .execute(&mut *tx)
                .await?;
            }
        }
        sqlx::query(
            "INSERT INTO e2b_build_files (project_id, files_hash, organization_id, archive, \
             size, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(project_id)
        .bind(files_hash)
        .bind(organization_id)
        .bind(archive)
        .bind(archive.len() as i64)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The archive of `files_hash` a project holds.
    pub async fn e2b_files(
        &self,
        project_id: &str,
        files_hash: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query(
            "SELECT archive FROM e2b_build_files WHERE project_id = $1 AND files_hash = $2",
        )
        .bind(project_id)
        .bind(files_hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|row| row.try_get("archive")).transpose()?)
    }

    /// The token of an upload URL: who may upload (`key_id`), where, until when.
    pub fn e2b_upload_token(
        &self,
        project_id: &str,
        files_hash: &str,
        key_id: &str,
        expires_s: i64,
    ) -> String {
        let proof = self.secrets.key_hash(&format!(
            "sandboxd e2b upload\0{project_id}\0{files_hash}\0{key_id}\0{expires_s}"
        ));
        format!("{key_id}.{expires_s}.{proof}")
    }

    /// The key an upload token was made for, when it is one of this project and hash
    /// that has not expired at `now_s`.
    pub fn e2b_upload_key(
        &self,
        project_id: &str,
        files_hash: &str,
        token: &str,
        now_s: i64,
    ) -> Option<String> {
        let mut parts = token.splitn(3, '.');
        let (key_id, expires, _) = (parts.next()?, parts.next()?, parts.next()?);
        let expires_s: i64 = expires.parse().ok()?;
        if expires_s < now_s {
            return None;
        }
        let expected = self.e2b_upload_token(project_id, files_hash, key_id, expires_s);
        crate::envd_tokens::same_token(&expected, token).then(|| key_id.to_owned())
    }
}
