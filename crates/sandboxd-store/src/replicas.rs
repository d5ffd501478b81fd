//! The replicas serving one installation, and which of them holds each sandbox's agent
//! connection: a replica without it forwards what needs the agent to the one with it.
//! Each replica records its address with a heartbeat; one whose heartbeat is old is
//! taken as gone, and requests are not forwarded to it.
//!
//! The registry is migration 0008; the holder of a sandbox's agent (`agent_replica`) is
//! set at insert and by `hold_agent`. The queries run on both backends; only replicas on
//! PostgreSQL use them.

use sqlx::Row as _;

use crate::{Store, StoreError};

/// Entries of replicas silent this long are removed by the others' heartbeats.
const FORGOTTEN_AFTER_MS: i64 = 24 * 3600 * 1000;

impl Store {
    /// This replica's id: random per process.
    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    /// Records this replica's address (`url`) and a heartbeat at `now` (epoch ms), and
    /// forgets replicas silent for a day.
    pub async fn heartbeat(&self, url: &str, now: i64) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO replicas (replica_id, url, heartbeat_at) VALUES ($1, $2, $3) \
             ON CONFLICT (replica_id) DO UPDATE SET url = excluded.url, \
             heartbeat_at = excluded.heartbeat_at",
        )
        .bind(self.replica_id())
        .bind(url)
        .bind(now)
        .execute(&self.pool)
        .await?;
        sqlx::query("DELETE FROM replicas WHERE heartbeat_at < $1")
            .bind(now - FORGOTTEN_AFTER_MS)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Takes this replica out of the registry (it is stopping): nothing is forwarded to
    /// it any more.
    pub async fn leave(&self) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM replicas WHERE replica_id = $1")
            .bind(self.replica_id())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The replicas heard from at or after `since` (epoch ms), as id and address.
    pub async fn live_replicas(&self, since: i64) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT replica_id, url FROM replicas WHERE heartbeat_at >= $1 ORDER BY replica_id",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("replica_id")?, row.try_get("url")?)))
            .collect()
    }

    /// Records that this replica holds the sandbox's agent connection now (its agent
    /// connected here: after a restart, or over a remote server's new connection).
    pub async fn hold_agent(&self, sandbox_id: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE sandboxes SET agent_replica = $1 WHERE sandbox_id = $2 \
             AND (agent_replica IS NULL OR agent_replica <> $1)",
        )
        .bind(self.replica_id())
        .bind(sandbox_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The replica that last recorded holding the sandbox's agent connection.
    pub async fn agent_replica(&self, sandbox_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT agent_replica FROM sandboxes WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => row.try_get("agent_replica")?,
            None => None,
        })
    }
}
