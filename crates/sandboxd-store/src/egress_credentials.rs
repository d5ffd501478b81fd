//! A sandbox's egress credentials, sealed with the master key under the sandbox's id
//! (apart from its environment variables: one cannot be read as the other).
//!
//! Migration 0014: one JSON document sealed under `<sandboxId>/egress-credentials`,
//! deleted when the sandbox is killed or removed.

use sandboxd_core::egress_credentials::EgressCredential;
use sqlx::Row as _;

use crate::{Store, StoreError};

fn context(sandbox_id: &str) -> String {
    format!("{sandbox_id}/egress-credentials")
}

impl Store {
    /// Keeps a sandbox's credentials (replacing any it had).
    pub async fn set_egress_credentials(
        &self,
        sandbox_id: &str,
        credentials: &[EgressCredential],
    ) -> Result<(), StoreError> {
        let plain = serde_json::to_vec(credentials)
            .map_err(|e| StoreError::Corrupt(format!("egress credentials: {e}")))?;
        let sealed = self.secrets.seal(&context(sandbox_id), &plain)?;
        sqlx::query(
            "INSERT INTO egress_credentials (sandbox_id, sealed) VALUES ($1, $2) \
             ON CONFLICT (sandbox_id) DO UPDATE SET sealed = excluded.sealed",
        )
        .bind(sandbox_id)
        .bind(sealed)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A sandbox's credentials, opened (none when it has none).
    pub async fn egress_credentials(
        &self,
        sandbox_id: &str,
    ) -> Result<Vec<EgressCredential>, StoreError> {
        let row = sqlx::query("SELECT sealed FROM egress_credentials WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else {
            return Ok(Vec::new());
        };
        let sealed: Vec<u8> = row.try_get("sealed")?;
        let plain = self.secrets.open(&context(sandbox_id), &sealed)?;
        serde_json::from_slice(&plain)
            .map_err(|e| StoreError::Corrupt(format!("egress credentials: {e}")))
    }

    /// Deletes a sandbox's credentials.
    pub(crate) async fn forget_egress_credentials(
        &self,
        sandbox_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM egress_credentials WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
