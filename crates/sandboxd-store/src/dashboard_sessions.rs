//! Sessions of the web dashboard. A browser signs in with an API key once and then holds
//! only the session's secret, in an HttpOnly cookie. The database keeps a hash of the
//! secret and the key the session acts for; each request reads the key as it stands, so
//! a revoked or expired key signs its sessions out. Mutations also carry a CSRF token
//! derived from the secret, which only pages of the dashboard's own origin can read.
//!
//! Sessions are migration 0009.

use sha2::{Digest as _, Sha256};
use sqlx::Row as _;

use crate::{Store, StoreError};

/// Sessions of one key at most; past it, its oldest go.
pub const MAX_SESSIONS_PER_KEY: i64 = 20;

/// The CSRF token of the session whose secret is `secret`: to be sent back in a header
/// by every mutation made with the session's cookie.
pub fn dashboard_csrf(secret: &str) -> String {
    Sha256::digest(format!("sandboxd dashboard csrf {secret}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Store {
    /// What is kept of a session's secret: a keyed hash under the master key, so the
    /// database alone does not let anyone test a guessed cookie.
    fn session_hash(&self, secret: &str) -> String {
        self.secrets
            .key_hash(&format!("sandboxd dashboard session\0{secret}"))
    }

    /// Opens a session of key `key_id` whose secret is `secret`, until `expires_at`.
    pub async fn open_dashboard_session(
        &self,
        secret: &str,
        key_id: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        sqlx::query("DELETE FROM dashboard_sessions WHERE expires_at <= $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let held: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM dashboard_sessions WHERE key_id = $1")
                .bind(key_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
        if held >= MAX_SESSIONS_PER_KEY {
            sqlx::query(
                "DELETE FROM dashboard_sessions WHERE session_hash IN (SELECT session_hash \
                 FROM dashboard_sessions WHERE key_id = $1 ORDER BY created_at, session_hash \
                 LIMIT $2)",
            )
            .bind(key_id)
            .bind(held - MAX_SESSIONS_PER_KEY + 1)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "INSERT INTO dashboard_sessions (session_hash, key_id, created_at, expires_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(self.session_hash(secret))
        .bind(key_id)
        .bind(now)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The key the session with `secret` acts for, while it has not expired at `now`.
    pub async fn dashboard_session(
        &self,
        secret: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT key_id FROM dashboard_sessions WHERE session_hash = $1 AND expires_at > $2",
        )
        .bind(self.session_hash(secret))
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|row| row.try_get("key_id")).transpose()?)
    }

    /// Ends the session with `secret` (sign-out).
    pub async fn close_dashboard_session(&self, secret: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM dashboard_sessions WHERE session_hash = $1")
            .bind(self.session_hash(secret))
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csrf_token_is_not_the_secret() {
        let token = dashboard_csrf("s");
        assert_ne!(token, "s");
        assert_eq!(token, dashboard_csrf("s"));
        assert_ne!(token, dashboard_csrf("t"));
    }
}
