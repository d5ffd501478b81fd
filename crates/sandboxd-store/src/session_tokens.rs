//! Single-use tokens of the WebSockets, for browsers (which cannot set a header on a
//! WebSocket). Only a hash of each token is kept, in the database, so that a token
//! issued by one replica is redeemed by whichever replica the WebSocket reaches. A token
//! names one sandbox and the key it was issued for, and dies after one use or at its
//! expiry.

use sqlx::Row as _;

use crate::{Store, StoreError};

/// Outstanding tokens of one organization at most; past it, its own oldest go.
pub const MAX_TOKENS_PER_ORG: i64 = 1_000;
/// Outstanding tokens at most; past it, the organization holding the most loses its
/// oldest, so one organization cannot push out another's tokens.
const MAX_TOKENS: i64 = 10_000;

impl Store {
    /// What is kept of a token: a keyed hash under the master key.
    fn token_hash(&self, token: &str) -> String {
        self.secrets
            .key_hash(&format!("sandboxd session token\0{token}"))
    }

    /// Keeps `token` for the key `key_id` of `organization_id` on `sandbox_id` until
    /// `expires_at` (epoch ms); expired tokens are dropped, and the oldest when a bound
    /// is reached.
    pub async fn issue_session_token(
        &self,
        token: &str,
        organization_id: &str,
        key_id: &str,
        sandbox_id: &str,
        expires_at: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        sqlx::query("DELETE FROM session_tokens WHERE expires_at <= $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let count = |sql: &'static str| sqlx::query(sql);
        let of_org: i64 =
            count("SELECT COUNT(*) AS n FROM session_tokens WHERE organization_id = $1")
                .bind(organization_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
        let evicting = if of_org >= MAX_TOKENS_PER_ORG {
            Some(organization_id.to_owned())
        } else {
            let all: i64 = count("SELECT COUNT(*) AS n FROM session_tokens")
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
            if all >= MAX_TOKENS {
                sqlx::query(
                    "SELECT organization_id FROM session_tokens GROUP BY organization_id \
                     ORDER BY COUNT(*) DESC, organization_id LIMIT 1",
                )
                .fetch_optional(&mut *tx)
                .await?
                .map(|row| row.try_get("organization_id"))
                .transpose()?
            } else {
                None
            }
        };
        if let Some(evicting) = evicting {
            sqlx::query(
                "DELETE FROM session_tokens WHERE token_hash = (SELECT token_hash FROM \
                 session_tokens WHERE organization_id = $1 ORDER BY expires_at, token_hash LIMIT 1)",
            )
            .bind(&evicting)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "INSERT INTO session_tokens (token_hash, organization_id, key_id, sandbox_id, \
             expires_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(self.token_hash(token))
        .bind(organization_id)
        .bind(key_id)
        .bind(sandbox_id)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Uses up `token`: the id of the key it was issued for, if it is for `sandbox_id`
    /// and not expired at `now`. A token is gone after its first redemption, valid or
    /// not.
    pub async fn redeem_session_token(
        &self,
        token: &str,
        sandbox_id: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "DELETE FROM session_tokens WHERE token_hash = $1 \
             RETURNING key_id, sandbox_id, expires_at",
        )
        .bind(self.token_hash(token))
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let (key_id, issued_for, expires_at): (String, String, i64) = (
            row.try_get("key_id")?,
            row.try_get("sandbox_id")?,
            row.try_get("expires_at")?,
        );
        Ok((issued_for == sandbox_id && expires_at > now).then_some(key_id))
    }

    /// Tokens outstanding for `organization_id` (for tests and diagnosis).
    pub async fn session_tokens_of(&self, organization_id: &str) -> Result<i64, StoreError> {
        Ok(
            sqlx::query("SELECT COUNT(*) AS n FROM session_tokens WHERE organization_id = $1")
                .bind(organization_id)
                .fetch_one(&self.pool)
                .await?
                .try_get("n")?,
        )
    }
}
