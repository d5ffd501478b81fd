//! Build contexts streamed as a tar (`template.context`), kept so that any replica's
//! build reads them.
//!
//! Migration 0021. An upload is begun (`begin_template_context`: refused while the
//! organization keeps its most bytes of contexts), its contents written in chunks as
//! they come (`put_template_context_chunk`), and made ready with its index
//! (`finish_template_context`, which counts the bytes again, so two uploads at once do
//! not pass the bound together). A context is read while ready and unexpired
//! (`template_context`, then each chunk); expired contexts go with their chunks
//! (`remove_expired_template_contexts`, and before each new upload).

use sandboxd_core::quotas::QuotaExceeded;
use sqlx::Row as _;

use crate::{Store, StoreError};

/// A context upload begun.
#[derive(Debug, Clone)]
pub struct NewTemplateContext {
    pub context_id: String,
    pub organization_id: String,
    pub project_id: String,
    pub created_by: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// A ready context.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateContext {
    pub context_id: String,
    pub organization_id: String,
    pub project_id: String,
    pub files: i64,
    pub bytes: i64,
    pub chunks: i64,
    /// What `sandboxd_core::template_build::ContextIndex` serializes to.
    pub index_json: String,
    pub expires_at: i64,
}

/// What a finished upload holds.
#[derive(Debug, Clone)]
pub struct ContextContents {
    pub files: i64,
    pub bytes: i64,
    pub chunks: i64,
    pub index_json: String,
}

fn mib(bytes: i64) -> i64 {
    (bytes + (1 << 20) - 1) >> 20
}

impl Store {
    /// Begins an upload: removes the expired contexts, then answers how many bytes the
    /// organization may still keep (refused when none, under `limit_bytes` of ready
    /// contexts in all).
    pub async fn begin_template_context(
        &self,
        context: &NewTemplateContext,
        limit_bytes: i64,
    ) -> Result<i64, StoreError> {
        self.remove_expired_template_contexts(context.created_at)
            .await?;
        let mut tx = self.write_tx().await?;
        let used = kept_bytes(&mut tx, &context.organization_id, context.created_at).await?;
        if used >= limit_bytes {
            return Err(StoreError::Quota(QuotaExceeded::Contexts {
                limit: mib(limit_bytes),
                used: mib(used),
            }));
        }
        sqlx::query(
            "INSERT INTO template_contexts (context_id, organization_id, project_id, \
             created_by, ready, files, bytes, chunks, index_json, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, 0, 0, 0, 0, NULL, $5, $6)",
        )
        .bind(&context.context_id)
        .bind(&context.organization_id)
        .bind(&context.project_id)
        .bind(&context.created_by)
        .bind(context.created_at)
        .bind(context.expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(limit_bytes - used)
    }

    /// Keeps one chunk of an upload's contents.
    pub async fn put_template_context_chunk(
        &self,
        context_id: &str,
        seq: i64,
        data: &[u8],
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO template_context_chunks (context_id, seq, data) VALUES ($1, $2, $3)",
        )
        .bind(context_id)
        .bind(seq)
        .bind(data)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Makes an upload's context ready; refused, and the context removed, when the
    /// organization's ready contexts and this one would pass `limit_bytes`.
    pub async fn finish_template_context(
        &self,
        organization_id: &str,
        context_id: &str,
        contents: &ContextContents,
        limit_bytes: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        let used = kept_bytes(&mut tx, organization_id, now).await?;
        if used + contents.bytes > limit_bytes {
            drop(tx);
            self.remove_template_context(context_id).await?;
            return Err(StoreError::Quota(QuotaExceeded::Contexts {
                limit: mib(limit_bytes),
                used: mib(used),
            }));
        }
        let updated = sqlx::query(
            "UPDATE template_contexts SET ready = 1, files = $1, bytes = $2, chunks = $3, \
             index_json = $4 WHERE context_id = $5 AND organization_id = $6",
        )
        .bind(contents.files)
        .bind(contents.bytes)
        .bind(contents.chunks)
        .bind(&contents.index_json)
        .bind(context_id)
        .bind(organization_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if updated == 0 {
            // It expired (and went) while it was uploaded.
            return Err(StoreError::Unknown("build context".into()));
        }
        Ok(())
    }

    /// Removes a context and its chunks.
    pub async fn remove_template_context(&self, context_id: &str) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        sqlx::query("DELETE FROM template_context_chunks WHERE context_id = $1")
            .bind(context_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM template_contexts WHERE context_id = $1")
            .bind(context_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A ready context of the organization that has not expired at `now`.
    pub async fn template_context(
        &self,
        organization_id: &str,
        context_id: &str,
        now: i64,
    ) -> Result<Option<TemplateContext>, StoreError> {
        let row = sqlx::query(
            "SELECT context_id, organization_id, project_id, files, bytes, chunks, index_json, \
             expires_at FROM template_contexts WHERE context_id = $1 AND organization_id = $2 \
             AND ready = 1 AND expires_at > $3",
        )
        .bind(context_id)
        .bind(organization_id)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(TemplateContext {
                context_id: row.try_get("context_id")?,
                organization_id: row.try_get("organization_id")?,
                project_id: row.try_get("project_id")?,
                files: row.try_get("files")?,
                bytes: row.try_get("bytes")?,
                chunks: row.try_get("chunks")?,
                index_json: row
                    .try_get::<Option<String>, _>("index_json")?
                    .ok_or_else(|| StoreError::Corrupt("a ready context has no index".into()))?,
                expires_at: row.try_get("expires_at")?,
            })
        })
        .transpose()
    }

    /// One chunk of a context's contents.
    pub async fn template_context_chunk(
        &self,
        context_id: &str,
        seq: i64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query(
            "SELECT data FROM template_context_chunks WHERE context_id = $1 AND seq = $2",
        )
        .bind(context_id)
        .bind(seq)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|row| row.try_get("data")).transpose()?)
    }

    /// Removes every context expired at `now` (ready or not), with its chunks; answers
    /// how many went.
    pub async fn remove_expired_template_contexts(&self, now: i64) -> Result<u64, StoreError> {
        let expired: Vec<String> =
            sqlx::query("SELECT context_id FROM template_contexts WHERE expires_at <= $1")
                .bind(now)
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(|row| row.try_get("context_id"))
                .collect::<Result<_, _>>()?;
        for context_id in &expired {
            self.remove_template_context(context_id).await?;
        }
        Ok(expired.len() as u64)
    }
}

/// The bytes of the organization's ready contexts that have not expired at `now`.
async fn kept_bytes(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    organization_id: &str,
    now: i64,
) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS used FROM template_contexts \
         WHERE organization_id = $1 AND ready = 1 AND expires_at > $2",
    )
    .bind(organization_id)
    .bind(now)
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get("used")?)
}
