//! Each sandbox's egress log: entries written in order, each write at a new position
//! (so an entry rewritten when its connection ends is read again after it), read in
//! position order from a cursor, and trimmed to the newest entries.
//!
//! Migration 0012: entries upserted by id, each write at a new position
//! (`ids::ordered_id`, as audit ids), trimmed to the newest per sandbox, deleted with the
//! sandbox row.

use sandboxd_core::egress_log::{Decision, EgressRecord};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::ids::ordered_id;
use crate::store::now_ms;
use crate::{Store, StoreError};

fn stored(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn counted(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

fn record(row: &AnyRow) -> Result<EgressRecord, StoreError> {
    let decision: String = row.try_get("decision")?;
    let port: i64 = row.try_get("port")?;
    Ok(EgressRecord {
        entry_id: row.try_get("entry_id")?,
        sandbox_id: row.try_get("sandbox_id")?,
        position: row.try_get("position")?,
        at: row.try_get("at")?,
        host: row.try_get("host")?,
        port: u16::try_from(port)
            .map_err(|_| StoreError::Corrupt(format!("egress log port {port}")))?,
        decision: Decision::parse(&decision)
            .ok_or_else(|| StoreError::Corrupt(format!("egress log decision {decision:?}")))?,
        reason: row.try_get("reason")?,
        address: row.try_get("address")?,
        bytes_out: counted(row.try_get("bytes_out")?),
        bytes_in: counted(row.try_get("bytes_in")?),
        ended_at: row.try_get("ended_at")?,
        unlogged: counted(row.try_get("unlogged")?),
    })
}

impl Store {
    /// Writes `records` in their order, in one transaction, each at a position after
    /// every earlier write of this process (their own `position` is ignored). A record
    /// whose entry exists replaces it.
    pub async fn write_egress_log(&self, records: &[EgressRecord]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for record in records {
            sqlx::query(
                "INSERT INTO egress_log (entry_id, sandbox_id, position, at, host, port, \
                 decision, reason, address, bytes_out, bytes_in, ended_at, unlogged) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
                 ON CONFLICT (entry_id) DO UPDATE SET position = excluded.position, \
                 bytes_out = excluded.bytes_out, bytes_in = excluded.bytes_in, \
                 ended_at = excluded.ended_at",
            )
            .bind(&record.entry_id)
            .bind(&record.sandbox_id)
            .bind(ordered_id(now_ms())?)
            .bind(record.at)
            .bind(&record.host)
            .bind(i64::from(record.port))
            .bind(record.decision.as_str())
            .bind(record.reason.as_deref())
            .bind(record.address.as_deref())
            .bind(stored(record.bytes_out))
            .bind(stored(record.bytes_in))
            .bind(record.ended_at)
            .bind(stored(record.unlogged))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Up to `limit` entries of a sandbox's log after position `after` (from the start
    /// when `None`), in position order.
    pub async fn egress_log(
        &self,
        sandbox_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<EgressRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT entry_id, sandbox_id, position, at, host, port, decision, reason, address, \
             bytes_out, bytes_in, ended_at, unlogged FROM egress_log \
             WHERE sandbox_id = $1 AND position > $2 ORDER BY position LIMIT $3",
        )
        .bind(sandbox_id)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(record).collect()
    }

    /// Keeps the newest `keep` entries of a sandbox's log; returns how many went.
    pub async fn trim_egress_log(&self, sandbox_id: &str, keep: u32) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "DELETE FROM egress_log WHERE sandbox_id = $1 AND position < (SELECT position \
             FROM egress_log WHERE sandbox_id = $1 ORDER BY position DESC LIMIT 1 OFFSET $2)",
        )
        .bind(sandbox_id)
        .bind(i64::from(keep.saturating_sub(1)))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Deletes a sandbox's log.
    pub(crate) async fn forget_egress_log(&self, sandbox_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM egress_log WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
