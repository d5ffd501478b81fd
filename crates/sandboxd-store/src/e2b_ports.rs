//! The ports on the E2B domain of sandboxes created through E2B's API
//! (`sandboxd_core::e2b::ports`): whether anyone may reach them, the `Host` their apps
//! see, and the key that created the sandbox, which a public port's requests act as.
//! Migration 0024; a sandbox's row goes when it is killed or removed.

use sandboxd_core::e2b::ports::PortSettings;
use sqlx::Row as _;

use crate::{Store, StoreError};

impl Store {
    /// Keeps how the ports of a sandbox just created through E2B's API by key `key_id`
    /// are served.
    pub async fn set_e2b_ports(
        &self,
        sandbox_id: &str,
        key_id: &str,
        settings: &PortSettings,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO e2b_ports (sandbox_id, key_id, public, mask_host) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (sandbox_id) DO UPDATE SET key_id = excluded.key_id, \
             public = excluded.public, mask_host = excluded.mask_host",
        )
        .bind(sandbox_id)
        .bind(key_id)
        .bind(i64::from(settings.public))
        .bind(settings.mask_host.as_deref())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// How a sandbox's ports are served on the E2B domain, with the key that created
    /// it; `None` for a sandbox not created through E2B's API.
    pub async fn e2b_ports(
        &self,
        sandbox_id: &str,
    ) -> Result<Option<(String, PortSettings)>, StoreError> {
        let row =
            sqlx::query("SELECT key_id, public, mask_host FROM e2b_ports WHERE sandbox_id = $1")
                .bind(sandbox_id)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|row| {
            Ok((
                row.try_get("key_id")?,
                PortSettings {
                    public: row.try_get::<i64, _>("public")? != 0,
                    mask_host: row.try_get("mask_host")?,
                },
            ))
        })
        .transpose()
    }

    /// Forgets how a killed sandbox's ports were served.
    pub(crate) async fn forget_e2b_ports(&self, sandbox_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM e2b_ports WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
