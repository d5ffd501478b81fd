//! Exposed ports: which ports of running sandboxes are reachable without a key (by
//! anyone, or with a signed link) and until when. A link's token is derived from the
//! master key and the exposure's nonce, never stored.
//!
//! Migration 0010: exposures are read only while their sandbox runs and deleted when it
//! ends.

use sandboxd_core::ports::{Exposure, MAX_EXPOSED_PORTS};
use sqlx::Row as _;

use crate::{Store, StoreError};

/// The live exposures of a running sandbox (`$1`: now, `$2`: the sandbox), narrowed by
/// what follows.
macro_rules! select_exposures {
    ($rest:literal) => {
        concat!(
            "SELECT e.sandbox_id, e.port, e.public, e.nonce, e.key_id, e.created_at, \
             e.expires_at FROM exposed_ports e JOIN sandboxes s ON s.sandbox_id = e.sandbox_id \
             WHERE s.status IN ('running', 'paused') AND e.expires_at > $1 AND e.sandbox_id = $2",
            $rest
        )
    };
}

fn exposure(row: &sqlx::any::AnyRow) -> Result<Exposure, StoreError> {
    let port: i64 = row.try_get("port")?;
    Ok(Exposure {
        sandbox_id: row.try_get("sandbox_id")?,
        port: u16::try_from(port).map_err(|_| StoreError::Corrupt(format!("port {port}")))?,
        public: row.try_get::<i64, _>("public")? != 0,
        nonce: row.try_get("nonce")?,
        key_id: row.try_get("key_id")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}

impl Store {
    /// Exposes a port of a running sandbox, replacing an earlier exposure of that port
    /// (whose links end with it); whether the sandbox was running. Refused past
    /// [`MAX_EXPOSED_PORTS`] live exposures of one sandbox.
    pub async fn expose_port(&self, exposure: &Exposure, now: i64) -> Result<bool, StoreError> {
        let mut tx = self.write_tx().await?;
        let running = sqlx::query("SELECT status FROM sandboxes WHERE sandbox_id = $1")
            .bind(&exposure.sandbox_id)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get::<String, _>("status"))
            .transpose()?
            .is_some_and(|status| status == "running");
        if !running {
            return Ok(false);
        }
        sqlx::query("DELETE FROM exposed_ports WHERE sandbox_id = $1 AND expires_at <= $2")
            .bind(&exposure.sandbox_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let others: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM exposed_ports WHERE sandbox_id = $1 AND port <> $2",
        )
        .bind(&exposure.sandbox_id)
        .bind(i64::from(exposure.port))
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if usize::try_from(others).unwrap_or(usize::MAX) >= MAX_EXPOSED_PORTS {
            return Err(StoreError::Conflict(format!(
                "a sandbox may have at most {MAX_EXPOSED_PORTS} ports exposed; unexpose one first"
            )));
        }
        sqlx::query(
            "INSERT INTO exposed_ports (sandbox_id, port, public, nonce, key_id, created_at, \
             expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (sandbox_id, port) DO UPDATE SET public = excluded.public, \
             nonce = excluded.nonce, key_id = excluded.key_id, \
             created_at = excluded.created_at, expires_at = excluded.expires_at",
        )
        .bind(&exposure.sandbox_id)
        .bind(i64::from(exposure.port))
        .bind(i64::from(exposure.public))
        .bind(&exposure.nonce)
        .bind(&exposure.key_id)
        .bind(exposure.created_at)
        .bind(exposure.expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The live exposures of a running sandbox, by port.
    pub async fn exposures(&self, sandbox_id: &str, now: i64) -> Result<Vec<Exposure>, StoreError> {
        let rows = sqlx::query(select_exposures!(" ORDER BY e.port"))
            .bind(now)
            .bind(sandbox_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(exposure).collect()
    }

    /// The live exposure of one port of a running sandbox.
    pub async fn exposure(
        &self,
        sandbox_id: &str,
        port: u16,
        now: i64,
    ) -> Result<Option<Exposure>, StoreError> {
        let row = sqlx::query(select_exposures!(" AND e.port = $3"))
            .bind(now)
            .bind(sandbox_id)
            .bind(i64::from(port))
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(exposure).transpose()
    }

    /// Ends the exposure of a port (its links and public access); whether there was one.
    pub async fn unexpose_port(&self, sandbox_id: &str, port: u16) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM exposed_ports WHERE sandbox_id = $1 AND port = $2")
            .bind(sandbox_id)
            .bind(i64::from(port))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Ends every exposure of a sandbox that stopped running.
    pub(crate) async fn forget_ports(&self, sandbox_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM exposed_ports WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The token of an exposure's signed link.
    pub fn link_token(&self, exposure: &Exposure) -> String {
        self.secrets.key_hash(&format!(
            "sandboxd preview link\0{}\0{}\0{}\0{}",
            exposure.sandbox_id, exposure.port, exposure.nonce, exposure.expires_at
        ))
    }

    /// Whether `token` is the token of the exposure's link (compared in constant time).
    pub fn link_valid(&self, exposure: &Exposure, token: &str) -> bool {
        let expected = self.link_token(exposure);
        bool::from(subtle::ConstantTimeEq::ct_eq(
            token.as_bytes(),
            expected.as_bytes(),
        ))
    }
}
