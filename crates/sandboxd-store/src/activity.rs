//! Each sandbox's activity timeline: entries written in order, each write at a new
//! position (a command written again when it ends is read again after), read in
//! position order from a cursor or as the newest, trimmed oldest first to a number of
//! entries and bytes, and kept after the sandbox's row for a retention.
//!
//! Migration 0025: `activity` (the entries, their JSON in `body`),
//! `activity_sandboxes` (each sandbox's organization, entries dropped, when it ended)
//! and `recordings` (terminal sessions as asciicast, in chunks).

use sandboxd_core::activity::{ActivityEntry, ActivityKind, ActivityRecord};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::ids::ordered_id;
use crate::store::now_ms;
use crate::{Store, StoreError};

fn record(row: &AnyRow) -> Result<ActivityRecord, StoreError> {
    let body: String = row.try_get("body")?;
    let entry: ActivityEntry = serde_json::from_str(&body)
        .map_err(|error| StoreError::Corrupt(format!("activity entry: {error}")))?;
    Ok(ActivityRecord {
        entry_id: row.try_get("entry_id")?,
        sandbox_id: row.try_get("sandbox_id")?,
        organization_id: String::new(),
        position: row.try_get("position")?,
        at: row.try_get("at")?,
        entry,
    })
}

/// Which end of a timeline a read starts from.
#[derive(Debug, Clone, Copy)]
enum Read<'a> {
    /// The entries after a position ("" for the oldest), oldest first.
    After(&'a str),
    /// The newest, newest first.
    Newest,
}

fn counted(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

impl Store {
    /// Writes `records` in their order, in one transaction, each at a position after
    /// every earlier write of this process (their own `position` is ignored). A record
    /// whose entry exists replaces it.
    pub async fn write_activity(&self, records: &[ActivityRecord]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for record in records {
            let body = serde_json::to_string(&record.entry)
                .map_err(|error| StoreError::Corrupt(format!("activity entry: {error}")))?;
            sqlx::query(
                "INSERT INTO activity_sandboxes (sandbox_id, organization_id, dropped) \
                 VALUES ($1, $2, 0) ON CONFLICT (sandbox_id) DO NOTHING",
            )
            .bind(&record.sandbox_id)
            .bind(&record.organization_id)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO activity (entry_id, sandbox_id, position, at, kind, bytes, body) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (entry_id) DO UPDATE SET position = excluded.position, \
                 kind = excluded.kind, bytes = excluded.bytes, body = excluded.body",
            )
            .bind(&record.entry_id)
            .bind(&record.sandbox_id)
            .bind(ordered_id(now_ms())?)
            .bind(record.at)
            .bind(record.entry.kind().as_str())
            .bind(i64::try_from(body.len()).unwrap_or(i64::MAX))
            .bind(&body)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Up to `limit` entries of a sandbox's timeline of `kinds` (all when empty) after
    /// position `after` (from the start when `None`), in position order.
    pub async fn activity(
        &self,
        sandbox_id: &str,
        after: Option<&str>,
        kinds: &[ActivityKind],
        limit: u32,
    ) -> Result<Vec<ActivityRecord>, StoreError> {
        self.activity_read(sandbox_id, kinds, limit, Read::After(after.unwrap_or("")))
            .await
    }

    /// The newest `limit` entries of a sandbox's timeline of `kinds` (all when empty), in
    /// position order.
    pub async fn latest_activity(
        &self,
        sandbox_id: &str,
        kinds: &[ActivityKind],
        limit: u32,
    ) -> Result<Vec<ActivityRecord>, StoreError> {
        let mut records = self
            .activity_read(sandbox_id, kinds, limit, Read::Newest)
            .await?;
        records.reverse();
        Ok(records)
    }

    /// Each kind asked for is read on its own index range (a kind with no entry costs
    /// nothing, however long the timeline), the reads merged in `read`'s order.
    async fn activity_read(
        &self,
        sandbox_id: &str,
        kinds: &[ActivityKind],
        limit: u32,
        read: Read<'_>,
    ) -> Result<Vec<ActivityRecord>, StoreError> {
        let kinds: Vec<Option<&str>> = if kinds.is_empty() {
            vec![None]
        } else {
            kinds.iter().map(|kind| Some(kind.as_str())).collect()
        };
        let mut records = Vec::new();
        for kind in kinds {
            let query = match (read, kind) {
                (Read::After(_), None) => sqlx::query(
                    "SELECT entry_id, sandbox_id, position, at, body FROM activity \
                     WHERE sandbox_id = $1 AND position > $2 ORDER BY position LIMIT $3",
                ),
                (Read::After(_), Some(_)) => sqlx::query(
                    "SELECT entry_id, sandbox_id, position, at, body FROM activity \
                     WHERE sandbox_id = $1 AND position > $2 AND kind = $4 \
                     ORDER BY position LIMIT $3",
                ),
                (Read::Newest, None) => sqlx::query(
                    "SELECT entry_id, sandbox_id, position, at, body FROM activity \
                     WHERE sandbox_id = $1 AND $2 = '' ORDER BY position DESC LIMIT $3",
                ),
                (Read::Newest, Some(_)) => sqlx::query(
                    "SELECT entry_id, sandbox_id, position, at, body FROM activity \
                     WHERE sandbox_id = $1 AND $2 = '' AND kind = $4 \
                     ORDER BY position DESC LIMIT $3",
                ),
            };
            let after = match read {
                Read::After(after) => after,
                Read::Newest => "",
            };
            let mut query = query.bind(sandbox_id).bind(after).bind(i64::from(limit));
            if let Some(kind) = kind {
                query = query.bind(kind);
            }
            for row in query.fetch_all(&self.pool).await? {
                records.push(record(&row)?);
            }
        }
        records.sort_by(|a, b| a.position.cmp(&b.position));
        if matches!(read, Read::Newest) {
            records.reverse();
        }
        records.truncate(limit as usize);
        Ok(records)
    }

    /// The organization of a sandbox that has a timeline (its row may be gone).
    pub async fn activity_organization(
        &self,
        sandbox_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let row =
            sqlx::query("SELECT organization_id FROM activity_sandboxes WHERE sandbox_id = $1")
                .bind(sandbox_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|row| row.try_get("organization_id")).transpose()?)
    }

    /// Entries of a sandbox trimmed from its timeline or never written.
    pub async fn activity_dropped(&self, sandbox_id: &str) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT dropped FROM activity_sandboxes WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => counted(row.try_get("dropped")?),
            None => 0,
        })
    }

    /// Counts `count` entries of a sandbox dropped.
    pub async fn count_activity_dropped(
        &self,
        sandbox_id: &str,
        organization_id: &str,
        count: u64,
    ) -> Result<(), StoreError> {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        sqlx::query(
            "INSERT INTO activity_sandboxes (sandbox_id, organization_id, dropped) \
             VALUES ($1, $2, $3) ON CONFLICT (sandbox_id) \
             DO UPDATE SET dropped = activity_sandboxes.dropped + excluded.dropped",
        )
        .bind(sandbox_id)
        .bind(organization_id)
        .bind(count)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Keeps the newest entries of a sandbox's timeline that are at most `entries` in
    /// number and `bytes` in size together; counts those that went as dropped and
    /// returns how many.
    pub async fn trim_activity(
        &self,
        sandbox_id: &str,
        entries: u32,
        bytes: u64,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "DELETE FROM activity WHERE entry_id IN (SELECT entry_id FROM (SELECT entry_id, \
             ROW_NUMBER() OVER (ORDER BY position DESC) AS newer, \
             SUM(bytes) OVER (ORDER BY position DESC) AS total \
             FROM activity WHERE sandbox_id = $1) AS ranked WHERE newer > $2 OR total > $3)",
        )
        .bind(sandbox_id)
        .bind(i64::from(entries))
        .bind(i64::try_from(bytes).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await?;
        let trimmed = done.rows_affected();
        if trimmed > 0 {
            sqlx::query(
                "UPDATE activity_sandboxes SET dropped = dropped + $2 WHERE sandbox_id = $1",
            )
            .bind(sandbox_id)
            .bind(i64::try_from(trimmed).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await?;
        }
        Ok(trimmed)
    }

    /// Marks `now` as the end of the timelines whose sandbox is no longer live (killed,
    /// failed or removed), then forgets those that ended before `ended_before`: their
    /// entries and their row. Returns how many timelines went.
    pub async fn expire_activity(&self, now: i64, ended_before: i64) -> Result<u64, StoreError> {
        sqlx::query(
            "UPDATE activity_sandboxes SET ended_at = $1 WHERE ended_at IS NULL \
             AND sandbox_id NOT IN (SELECT sandbox_id FROM sandboxes \
             WHERE status IN ('creating', 'running', 'paused'))",
        )
        .bind(now)
        .execute(&self.pool)
        .await?;
        // A sandbox revived from `error` has its timeline back.
        sqlx::query(
            "UPDATE activity_sandboxes SET ended_at = NULL WHERE ended_at IS NOT NULL \
             AND sandbox_id IN (SELECT sandbox_id FROM sandboxes \
             WHERE status IN ('creating', 'running', 'paused'))",
        )
        .execute(&self.pool)
        .await?;
        let mut tx = self.pool.begin().await?;
        for table in [
            "DELETE FROM activity WHERE sandbox_id IN (SELECT sandbox_id FROM \
             activity_sandboxes WHERE ended_at < $1)",
            "DELETE FROM recordings WHERE sandbox_id IN (SELECT sandbox_id FROM \
             activity_sandboxes WHERE ended_at < $1)",
        ] {
            sqlx::query(table)
                .bind(ended_before)
                .execute(&mut *tx)
                .await?;
        }
        let gone = sqlx::query("DELETE FROM activity_sandboxes WHERE ended_at < $1")
            .bind(ended_before)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(gone.rows_affected())
    }
}

impl Store {
    /// Appends chunk `seq` of a terminal session's recording.
    pub async fn append_recording(
        &self,
        (sandbox_id, terminal_id): (&str, &str),
        seq: u32,
        body: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO recordings (sandbox_id, terminal_id, seq, bytes, body) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(sandbox_id)
        .bind(terminal_id)
        .bind(i64::from(seq))
        .bind(i64::try_from(body.len()).unwrap_or(i64::MAX))
        .bind(body)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A terminal session's recording, its chunks in order; `None` when it has none.
    pub async fn recording(
        &self,
        sandbox_id: &str,
        terminal_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT body FROM recordings WHERE sandbox_id = $1 AND terminal_id = $2 ORDER BY seq",
        )
        .bind(sandbox_id)
        .bind(terminal_id)
        .fetch_all(&self.pool)
        .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut cast = String::new();
        for row in &rows {
            cast.push_str(&row.try_get::<String, _>("body")?);
        }
        Ok(Some(cast))
    }

    /// Bytes of recordings a sandbox holds.
    pub async fn recorded_bytes(&self, sandbox_id: &str) -> Result<u64, StoreError> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS total FROM recordings \
             WHERE sandbox_id = $1",
        )
        .bind(sandbox_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(counted(row.try_get("total")?))
    }
}
