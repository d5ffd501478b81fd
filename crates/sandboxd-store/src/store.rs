//! Opening the store: the database file, its migrations and the secret box.

use std::path::Path;
use std::str::FromStr as _;
use std::sync::Arc;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AnyPool, Executor as _, SqlSafeStr as _};

use crate::auth_cache::AuthCache;
use crate::row_cache::RowCache;
use crate::{SecretBox, StoreError};

/// The SQLite migrations, in order. Migrations are only ever added, never edited.
pub(crate) const SQLITE_MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "access",
        include_str!("../migrations/sqlite/0002_access.sql"),
    ),
    (
        3,
        "pools",
        include_str!("../migrations/sqlite/0003_pools.sql"),
    ),
    (
        4,
        "servers",
        include_str!("../migrations/sqlite/0004_servers.sql"),
    ),
    (
        5,
        "server pools",
        include_str!("../migrations/sqlite/0005_server_pools.sql"),
    ),
    (
        6,
        "sandbox labels",
        include_str!("../migrations/sqlite/0006_labels.sql"),
    ),
];

/// The persistent state of one sandboxd installation.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) pool: AnyPool,
    pub(crate) secrets: SecretBox,
    /// Callers of recently seen keys; shared by every handle to this store.
    pub(crate) auth: Arc<AuthCache>,
    /// Sandbox rows recently read; shared by every handle to this store.
    pub(crate) rows: Arc<RowCache>,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

impl Store {
    /// Opens (creating when needed) `sandboxd.db` and `master.key` in `data_dir`, and
    /// brings the schema up to date.
    pub async fn open(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_key(data_dir, None).await
    }

    /// As [`Store::open`], with the master key given by configuration instead of the
    /// `master.key` file.
    pub async fn open_with_key(
        data_dir: &Path,
        master: Option<&[u8; 32]>,
    ) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let secrets = match master {
            Some(master) => SecretBox::from_master(master)?,
            None => SecretBox::load_or_create(&data_dir.join("master.key"))?,
        };
        let db = data_dir.join("sandboxd.db");
        // Made private before SQLite opens it: its `-wal` and `-shm` files take the
        // database file's mode when they are created.
        create_private(&db)?;
        let url = format!("sqlite://{}?mode=rwc", db.display());
        let options = AnyConnectOptions::from_str(&url)?;
        let pool = AnyPoolOptions::new()
            .max_connections(8)
            // A connection to a local database file does not go stale; a ping before
            // every query would be one more round trip to the connection's thread.
            .test_before_acquire(false)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute("PRAGMA foreign_keys = ON").await?;
                    conn.execute("PRAGMA busy_timeout = 5000").await?;
                    conn.execute("PRAGMA synchronous = NORMAL").await?;
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        pool.execute("PRAGMA journal_mode = WAL").await?;
        for file in ["sandboxd.db", "sandboxd.db-wal", "sandboxd.db-shm"] {
            restrict_permissions(&data_dir.join(file));
        }
        let migrations = SQLITE_MIGRATIONS
            .iter()
            .map(|(version, name, sql)| {
                Migration::new(
                    *version,
                    (*name).into(),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect();
        Migrator::with_migrations(migrations).run(&pool).await?;
        Ok(Self {
            pool,
            secrets,
            auth: Arc::default(),
            rows: Arc::default(),
        })
    }

    /// The secret box of this installation.
    /// A transaction that writes. It takes SQLite's write lock at `BEGIN` (IMMEDIATE),
    /// so a concurrent writer makes it wait (busy timeout) instead of failing later
    /// with `SQLITE_BUSY_SNAPSHOT` when a read inside it turns into a write.
    pub(crate) async fn write_tx(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }

    pub fn secrets(&self) -> &SecretBox {
        &self.secrets
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The database holds sealed secrets and key hashes only, but nobody else needs to read
/// it, nor its write-ahead log.
fn restrict_permissions(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if path.exists() {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
}

/// Creates `path` empty with mode 0600 unless it exists.
fn create_private(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}
