//! The first start (organization, owner, project, key) and API key authentication.
//!
//! `check_master_key`: the installation records a check value of its master key, and a
//! start with another key is refused (`WrongMasterKey`). Authentication reads role,
//! grants and scopes in one query; `principal_of_key` reads by key id, uncached, for
//! sessions opened with a token. Keys are made, listed and revoked here.

use sandboxd_core::access::{self, Permissions};
use sandboxd_core::model::{ApiKey, KeyFormat, Principal, Role};
use sandboxd_core::quotas::Quotas;
use sqlx::Row as _;
use sqlx::any::AnyRow;
use subtle::ConstantTimeEq as _;

use crate::ids::random_bytes;
use crate::store::now_ms;
use crate::{Store, StoreError, new_id};

/// Shortest API key accepted at bootstrap.
pub const MIN_BOOTSTRAP_KEY_CHARS: usize = 32;

/// What the first start created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    pub organization_id: String,
    pub project_id: String,
    pub environment_id: String,
    /// The owner key, when this start generated it (it is shown once, never stored).
    pub generated_key: Option<String>,
}

/// What a new key is, besides whose: its name, its narrowing, its expiry (epoch ms)
/// and how its secret is written.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec<'a> {
    pub name: &'a str,
    pub scopes: Option<Permissions>,
    pub expires_at: Option<i64>,
    pub format: KeyFormat,
}

impl<'a> KeySpec<'a> {
    /// A key of everything its user holds, never expiring, in sandboxd's form.
    pub fn named(name: &'a str) -> Self {
        Self {
            name,
            scopes: None,
            expires_at: None,
            format: KeyFormat::Sandboxd,
        }
    }
}

/// A key just created: its record and the secret, shown once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKey {
    pub record: ApiKey,
    pub secret: String,
}

/// `SELECT <every column [`key_row`] reads> FROM api_keys <tail>`, as a static string.
macro_rules! select_keys {
    ($tail:literal) => {
        concat!(
            "SELECT key_id, organization_id, user_id, name, prefix, scopes, created_at, ",
            "expires_at, revoked_at FROM api_keys ",
            $tail
        )
    };
}

fn key_row(row: &AnyRow) -> Result<ApiKey, StoreError> {
    let scopes: Option<String> = row.try_get("scopes")?;
    Ok(ApiKey {
        key_id: row.try_get("key_id")?,
        organization_id: row.try_get("organization_id")?,
        user_id: row.try_get("user_id")?,
        name: row.try_get("name")?,
        prefix: row.try_get("prefix")?,
        scopes: scopes.as_deref().map(Permissions::from_text),
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

fn generate_key(format: KeyFormat) -> Result<String, StoreError> {
    let mut bytes = [0u8; 32];
    random_bytes(&mut bytes)?;
    Ok(format.write(&bytes))
}

/// The listed prefix of a bootstrap key given by configuration.
pub const CONFIGURED_PREFIX: &str = "(configured)";

/// A key with its member, what a caller is made of, selected by `$where`.
macro_rules! principal_select {
    ($where:literal) => {
        concat!(
            "SELECT k.key_id, k.key_hash, k.expires_at, k.revoked_at, k.scopes, \
             m.organization_id, m.user_id, m.role, m.permissions \
             FROM api_keys k JOIN members m \
             ON m.organization_id = k.organization_id AND m.user_id = k.user_id ",
            $where
        )
    };
}

/// The caller a row of `principal_select!` describes; `None` when its key is revoked or
/// expired.
fn principal_of(row: &AnyRow) -> Result<Option<Principal>, StoreError> {
    let revoked: Option<i64> = row.try_get("revoked_at")?;
    let expires: Option<i64> = row.try_get("expires_at")?;
    if revoked.is_some() || expires.is_some_and(|at| at <= now_ms()) {
        return Ok(None);
    }
    let role: String = row.try_get("role")?;
    let role =
        Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("unknown role {role}")))?;
    let grants: String = row.try_get("permissions")?;
    let scopes: Option<String> = row.try_get("scopes")?;
    let key_scopes = scopes.as_deref().map(Permissions::from_text);
    Ok(Some(Principal {
        user_id: row.try_get("user_id")?,
        organization_id: row.try_get("organization_id")?,
        role,
        key_id: row.try_get("key_id")?,
        permissions: access::effective(role, Permissions::from_text(&grants), key_scopes),
        key_scopes,
        key_expires_at: expires,
    }))
}

impl Store {
    /// Records the master key's check value on first start and compares it at every
    /// later one: a server (or a replica) given another master key than the one that
    /// sealed this database's secrets would fail every API key and secret.
    pub(crate) async fn check_master_key(&self) -> Result<(), StoreError> {
        let check = self.secrets.key_hash("sandboxd master key check");
        let mut tx = self.write_tx().await?;
        let existing = sqlx::query("SELECT key_check FROM installation WHERE singleton = 1")
            .fetch_optional(&mut *tx)
            .await?;
        match existing {
            None => {
                sqlx::query(
                    "INSERT INTO installation (singleton, instance_id, created_at, key_check) \
                     VALUES (1, $1, $2, $3)",
                )
                .bind(new_id()?)
                .bind(now_ms())
                .bind(&check)
                .execute(&mut *tx)
                .await?;
            }
            Some(row) => match row.try_get::<Option<String>, _>("key_check")? {
                Some(stored) if stored == check => return Ok(()),
                Some(_) => return Err(StoreError::WrongMasterKey),
                None => {
                    sqlx::query("UPDATE installation SET key_check = $1 WHERE singleton = 1")
                        .bind(&check)
                        .execute(&mut *tx)
                        .await?;
                }
            },
        }
        tx.commit().await?;
        Ok(())
    }

    /// The id of this installation, created on first use. Containers are labelled with it.
    pub async fn instance_id(&self) -> Result<String, StoreError> {
        let mut tx = self.write_tx().await?;
        let existing = sqlx::query("SELECT instance_id FROM installation WHERE singleton = 1")
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(row) = existing {
            return Ok(row.try_get("instance_id")?);
        }
        let id = new_id()?;
        sqlx::query(
            "INSERT INTO installation (singleton, instance_id, created_at) VALUES (1, $1, $2)",
        )
        .bind(&id)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// On an empty store, creates an organization, its owner, a project `default` with an
    /// environment `production`, and an owner API key: `bootstrap_key` when given (32+
    /// characters), else a generated one. `Ok(None)` when the store was not empty.
    pub async fn bootstrap(
        &self,
        bootstrap_key: Option<&str>,
    ) -> Result<Option<Bootstrap>, StoreError> {
        if let Some(key) = bootstrap_key
            && key.chars().count() < MIN_BOOTSTRAP_KEY_CHARS
        {
            return Err(StoreError::Conflict(format!(
                "the bootstrap key must be at least {MIN_BOOTSTRAP_KEY_CHARS} characters"
            )));
        }
        let mut tx = self.write_tx().await?;
        let any = sqlx::query("SELECT 1 AS one FROM organizations LIMIT 1")
            .fetch_optional(&mut *tx)
            .await?;
        if any.is_some() {
            return Ok(None);
        }
        let now = now_ms();
        let (org, user, key_id) = (new_id()?, new_id()?, new_id()?);
        // A configured key is the operator's own text: none of it is listed.
        let (token, generated, prefix) = match bootstrap_key {
            Some(key) => (key.to_owned(), None, CONFIGURED_PREFIX.to_owned()),
            None => {
                let key = generate_key(KeyFormat::Sandboxd)?;
                let prefix = key.chars().take(8).collect();
                (key.clone(), Some(key), prefix)
            }
        };
        sqlx::query("INSERT INTO organizations (organization_id, name, created_at) VALUES ($1, 'default', $2)")
            .bind(&org)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO users (user_id, name, created_at) VALUES ($1, 'owner', $2)")
            .bind(&user)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO members (organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)")
            .bind(&org)
            .bind(&user)
            .bind(Role::Owner.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO api_keys (key_id, organization_id, user_id, name, prefix, key_hash, created_at) \
             VALUES ($1, $2, $3, 'owner', $4, $5, $6)",
        )
        .bind(&key_id)
        .bind(&org)
        .bind(&user)
        .bind(prefix)
        .bind(self.secrets.key_hash(&token))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let (project, environments) = self.create_project(&org, "default", None).await?;
        let environment_id = environments
            .first()
            .map(|e| e.environment_id.clone())
            .ok_or_else(|| StoreError::Corrupt("project created without environment".into()))?;
        Ok(Some(Bootstrap {
            organization_id: org,
            project_id: project.project_id,
            environment_id,
            generated_key: generated,
        }))
    }

    /// The caller an API key belongs to; `None` for an unknown, revoked or expired key.
    /// A key seen in the last two seconds is answered from memory (`auth_cache.rs`):
    /// revocations and member changes made through this store empty that memory.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Principal>, StoreError> {
        if token.is_empty() || token.len() > 512 {
            return Ok(None);
        }
        let hash = self.secrets.key_hash(token);
        if let Some(principal) = self.auth.get(&hash, now_ms()) {
            return Ok(Some(principal));
        }
        let generation = self.auth.generation();
        let row = sqlx::query(principal_select!("WHERE k.key_hash = $1"))
            .bind(&hash)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let stored: String = row.try_get("key_hash")?;
        if !bool::from(stored.as_bytes().ct_eq(hash.as_bytes())) {
            return Ok(None);
        }
        let Some(principal) = principal_of(&row)? else {
            return Ok(None);
        };
        self.auth.insert(
            hash,
            principal.clone(),
            principal.key_expires_at,
            generation,
        );
        Ok(Some(principal))
    }

    /// The caller of the key `key_id` as it stands now (read from the database, never
    /// from memory); `None` when the key is unknown, revoked or expired, or its member
    /// was removed. Sessions opened with a token check their key through this.
    pub async fn principal_of_key(&self, key_id: &str) -> Result<Option<Principal>, StoreError> {
        let row = sqlx::query(principal_select!("WHERE k.key_id = $1"))
            .bind(key_id)
            .fetch_optional(&self.pool)
            .await?;
        match row {
            Some(row) => principal_of(&row),
            None => Ok(None),
        }
    }

    /// Creates a key for a member; the secret is in the result and nowhere else.
    pub async fn create_key(
        &self,
        organization_id: &str,
        user_id: &str,
        spec: KeySpec<'_>,
        quotas: &Quotas,
    ) -> Result<NewKey, StoreError> {
        let mut tx = self.write_tx().await?;
        // Counted inside the write transaction: concurrent creations cannot both pass.
        let usable: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM api_keys WHERE organization_id = $1 AND user_id = $2 \
             AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $3)",
        )
        .bind(organization_id)
        .bind(user_id)
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await?;
        quotas.admit_key(usable)?;
        let key = self
            .insert_key(&mut tx, organization_id, user_id, spec)
            .await?;
        tx.commit().await?;
        Ok(key)
    }

    pub(crate) async fn insert_key(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        organization_id: &str,
        user_id: &str,
        spec: KeySpec<'_>,
    ) -> Result<NewKey, StoreError> {
        let KeySpec {
            name,
            scopes,
            expires_at,
            format,
        } = spec;
        let secret = generate_key(format)?;
        let record = ApiKey {
            key_id: new_id()?,
            organization_id: organization_id.to_owned(),
            user_id: user_id.to_owned(),
            name: name.to_owned(),
            prefix: secret.chars().take(8).collect(),
            scopes,
            created_at: now_ms(),
            expires_at,
            revoked_at: None,
        };
        sqlx::query(
            "INSERT INTO api_keys (key_id, organization_id, user_id, name, prefix, key_hash,              scopes, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&record.key_id)
        .bind(organization_id)
        .bind(user_id)
        .bind(name)
        .bind(&record.prefix)
        .bind(self.secrets.key_hash(&secret))
        .bind(scopes.map(Permissions::to_text))
        .bind(record.created_at)
        .bind(expires_at)
        .execute(&mut **tx)
        .await?;
        Ok(NewKey { record, secret })
    }

    /// The keys of an organization, of one user when `user_id` is given, newest first.
    pub async fn keys(
        &self,
        organization_id: &str,
        user_id: Option<&str>,
    ) -> Result<Vec<ApiKey>, StoreError> {
        let rows = sqlx::query(select_keys!(
            "WHERE organization_id = $1 AND ($2 = '' OR user_id = $2) \
                 ORDER BY created_at DESC, key_id"
        ))
        .bind(organization_id)
        .bind(user_id.unwrap_or(""))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(key_row).collect()
    }

    /// One key of an organization.
    pub async fn key(
        &self,
        organization_id: &str,
        key_id: &str,
    ) -> Result<Option<ApiKey>, StoreError> {
        let row = sqlx::query(select_keys!("WHERE organization_id = $1 AND key_id = $2"))
            .bind(organization_id)
            .bind(key_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(key_row).transpose()
    }

    /// Revokes a key (at once: the next request with it is refused). Revoking twice
    /// keeps the first time.
    pub async fn revoke_key(
        &self,
        organization_id: &str,
        key_id: &str,
    ) -> Result<Option<ApiKey>, StoreError> {
        sqlx::query(
            "UPDATE api_keys SET revoked_at = $1 \
             WHERE organization_id = $2 AND key_id = $3 AND revoked_at IS NULL",
        )
        .bind(now_ms())
        .bind(organization_id)
        .bind(key_id)
        .execute(&self.pool)
        .await?;
        self.auth.invalidate();
        self.key(organization_id, key_id).await
    }
}
