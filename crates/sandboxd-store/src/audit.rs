//! The audit log: appended to, filtered and read newest first in pages.
//!
//! Pages use keyset pagination on `(created_at, audit_id)`.

use sandboxd_core::model::AuditRecord;
use sandboxd_core::validate::AuditSelection;
use sqlx::Row as _;

use crate::ids::ordered_id;
use crate::store::now_ms;
use crate::{Store, StoreError};

/// What an operation records.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEntry<'a> {
    pub organization_id: &'a str,
    pub actor_user_id: Option<&'a str>,
    pub actor_key_id: Option<&'a str>,
    pub action: &'a str,
    pub resource_type: &'a str,
    pub resource_id: &'a str,
    pub resource_name: Option<&'a str>,
    pub metadata: serde_json::Value,
}

/// One page of entries, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditPage {
    pub entries: Vec<AuditRecord>,
    /// Present when more entries follow: `(created_at, audit_id)` of the last one.
    pub next: Option<(i64, String)>,
}

impl Store {
    /// Appends an entry.
    pub async fn audit(&self, entry: NewAuditEntry<'_>) -> Result<(), StoreError> {
        append(&self.pool, entry).await
    }

    /// A page of an organization's entries matching `filter`, newest first. Times are
    /// epoch milliseconds, `from` included, `to` excluded; `after` is the
    /// `(created_at, audit_id)` of the previous page's last entry.
    pub async fn audit_page(
        &self,
        organization_id: &str,
        filter: &AuditSelection,
    ) -> Result<AuditPage, StoreError> {
        let (after_at, after_id) = filter.after.clone().unwrap_or((i64::MAX, String::new()));
        let rows = sqlx::query(
            "SELECT audit_id, organization_id, actor_user_id, actor_key_id, action, \
             resource_type, resource_id, resource_name, metadata, created_at FROM audit_log \
             WHERE organization_id = $1 \
             AND ($2 = '' OR resource_id = $2) AND ($3 = '' OR actor_user_id = $3) \
             AND ($4 = '' OR action = $4) AND created_at >= $5 AND created_at < $6 \
             AND (created_at < $7 OR (created_at = $7 AND ($8 = '' OR audit_id < $8))) \
             ORDER BY created_at DESC, audit_id DESC LIMIT $9",
        )
        .bind(organization_id)
        .bind(filter.resource_id.as_deref().unwrap_or(""))
        .bind(filter.actor_id.as_deref().unwrap_or(""))
        .bind(filter.action.as_deref().unwrap_or(""))
        .bind(filter.from.unwrap_or(i64::MIN))
        .bind(filter.to.unwrap_or(i64::MAX))
        .bind(after_at)
        .bind(after_id)
        .bind(i64::from(filter.limit) + 1)
        .fetch_all(&self.pool)
        .await?;
        let mut entries = rows
            .iter()
            .map(|row| {
                let metadata: String = row.try_get("metadata")?;
                Ok(AuditRecord {
                    audit_id: row.try_get("audit_id")?,
                    organization_id: row.try_get("organization_id")?,
                    actor_user_id: row.try_get("actor_user_id")?,
                    actor_key_id: row.try_get("actor_key_id")?,
                    action: row.try_get("action")?,
                    resource_type: row.try_get("resource_type")?,
                    resource_id: row.try_get("resource_id")?,
                    resource_name: row.try_get("resource_name")?,
                    metadata: serde_json::from_str(&metadata)
                        .map_err(|e| StoreError::Corrupt(format!("audit metadata: {e}")))?,
                    created_at: row.try_get("created_at")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let next = if entries.len() > filter.limit as usize {
            entries.truncate(filter.limit as usize);
            entries.last().map(|e| (e.created_at, e.audit_id.clone()))
        } else {
            None
        };
        Ok(AuditPage { entries, next })
    }
}

/// Appends `entry` through `executor`: the pool, or a transaction whose write it records.
pub(crate) async fn append<'e, E>(executor: E, entry: NewAuditEntry<'_>) -> Result<(), StoreError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let now = now_ms();
    sqlx::query(
        "INSERT INTO audit_log (audit_id, organization_id, actor_user_id, actor_key_id, \
         action, resource_type, resource_id, resource_name, metadata, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(ordered_id(now)?)
    .bind(entry.organization_id)
    .bind(entry.actor_user_id)
    .bind(entry.actor_key_id)
    .bind(entry.action)
    .bind(entry.resource_type)
    .bind(entry.resource_id)
    .bind(entry.resource_name)
    .bind(entry.metadata.to_string())
    .bind(now)
    .execute(executor)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_of_one_millisecond_sort_in_writing_order() {
        let ids: Vec<String> = (0..50)
            .map(|_| crate::ids::ordered_id(42).unwrap())
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
    }
}
