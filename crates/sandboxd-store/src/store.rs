//! Opening the store: the database (SQLite in the data directory or PostgreSQL), its
//! migrations, the secret box and, on PostgreSQL, the change feed and the duties.
//!
//! `write_tx` serializes write transactions: `BEGIN IMMEDIATE` on SQLite, a transaction
//! advisory lock on PostgreSQL, so the reads that decide a write (quotas, the last owner)
//! see every write committed before, whichever replica made it.

use std::path::Path;
use std::sync::Arc;

use sqlx::AnyPool;

use crate::auth_cache::AuthCache;
use crate::changes::{ChangeFeed, ServerChange};
use crate::database::{Backend, Database};
use crate::leases::Leases;
use crate::row_cache::RowCache;
use crate::{SecretBox, StoreError, migrations, postgres, sqlite};

/// The persistent state of one sandboxd installation.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) pool: AnyPool,
    pub(crate) backend: Backend,
    pub(crate) secrets: SecretBox,
    /// Callers of recently seen keys; shared by every handle to this store.
    pub(crate) auth: Arc<AuthCache>,
    /// Sandbox rows recently read; shared by every handle to this store.
    pub(crate) rows: Arc<RowCache>,
    /// The background duties this replica holds.
    leases: Arc<Leases>,
    /// On PostgreSQL: the changes of other replicas, applied to the caches.
    feed: Option<Arc<ChangeFeed>>,
    /// Changes of remote servers made by other replicas (never sent on SQLite).
    server_changes: tokio::sync::broadcast::Sender<ServerChange>,
    /// This replica's id: random per process; on PostgreSQL also its `application_name`.
    pub(crate) replica_id: Arc<str>,
}

/// Connects to `database` (on PostgreSQL as `origin`) and brings its schema up to date.
async fn open_pool(database: &Database, origin: &str) -> Result<AnyPool, StoreError> {
    sqlx::any::install_default_drivers();
    let pool = match database {
        Database::Sqlite { data_dir } => sqlite::connect(data_dir).await?,
        Database::Postgres { url } => {
            postgres::connect(&postgres::with_origin(url, origin)).await?
        }
    };
    migrations::run(&pool, database.backend()).await?;
    Ok(pool)
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
        let database = Database::Sqlite {
            data_dir: data_dir.to_owned(),
        };
        Self::connect(&database, data_dir, master).await
    }

    /// Opens the store in `database`, brings its schema up to date and checks that the
    /// master key (`master`, else `<data_dir>/master.key`, made when missing) is the one
    /// its secrets were sealed with.
    pub async fn connect(
        database: &Database,
        data_dir: &Path,
        master: Option<&[u8; 32]>,
    ) -> Result<Self, StoreError> {
        let secrets = match master {
            Some(master) => SecretBox::from_master(master)?,
            None => SecretBox::load_or_create(&data_dir.join("master.key"))?,
        };
        let origin = postgres::origin()?;
        let pool = open_pool(database, &origin).await?;
        let (leases, feed) = match database {
            Database::Sqlite { .. } => (Leases::sole(), None),
            Database::Postgres { url } => {
                let url = postgres::with_origin(url, &origin);
                (Leases::postgres(url.clone()), Some((url, origin.clone())))
            }
        };
        let store = Self {
            pool,
            backend: database.backend(),
            secrets,
            auth: Arc::default(),
            rows: Arc::default(),
            leases: Arc::new(leases),
            feed: None,
            server_changes: tokio::sync::broadcast::channel(64).0,
            replica_id: origin.as_str().into(),
        };
        let feed = feed.map(|(url, origin)| {
            Arc::new(ChangeFeed::start(
                url,
                origin,
                store.auth.clone(),
                store.rows.clone(),
                store.server_changes.clone(),
            ))
        });
        let store = Self { feed, ..store };
        store.check_master_key().await?;
        Ok(store)
    }

    /// Connects to `database` and brings its schema up to date (`sandboxd migrate`, and
    /// the first step of every start).
    pub async fn migrate(database: &Database) -> Result<(), StoreError> {
        let pool = open_pool(database, &postgres::origin()?).await?;
        pool.close().await;
        Ok(())
    }

    /// Which SQL this store speaks.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The changes other replicas make to remote servers' records. A receiver that
    /// lags behind has missed some: it must take that as [`ServerChange::All`].
    pub fn server_changes(&self) -> tokio::sync::broadcast::Receiver<ServerChange> {
        self.server_changes.subscribe()
    }

    /// The background duties this replica holds.
    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// Whether the key and row caches serve: always on SQLite; on PostgreSQL while the
    /// change feed listens.
    pub fn caches_on(&self) -> bool {
        !self.auth.is_suspended() && !self.rows.is_suspended()
    }

    /// Whether the database answers, within `within`.
    pub async fn ping(&self, within: std::time::Duration) -> Result<(), StoreError> {
        let probe = sqlx::query("SELECT 1 AS one").fetch_one(&self.pool);
        match tokio::time::timeout(within, probe).await {
            Ok(answer) => answer.map(|_| ()).map_err(StoreError::from),
            Err(_) => Err(StoreError::Conflict(format!(
                "the database did not answer within {} ms",
                within.as_millis()
            ))),
        }
    }

    /// A transaction that writes, serialized with every other such transaction. On
    /// SQLite it takes the write lock at `BEGIN` (IMMEDIATE), so a concurrent writer
    /// waits (busy timeout) instead of failing later with `SQLITE_BUSY_SNAPSHOT` when a
    /// read inside it turns into a write. On PostgreSQL it takes a transaction advisory
    /// lock first: the reads that decide its writes (quotas, the last owner, a name
    /// taken) then see every transaction committed before it, on every replica.
    pub(crate) async fn write_tx(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => {
                let mut tx = self.pool.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(postgres::WRITE_LOCK)
                    .execute(&mut *tx)
                    .await?;
                Ok(tx)
            }
        }
    }

    /// The secret box of this installation.
    pub fn secrets(&self) -> &SecretBox {
        &self.secrets
    }

    /// Closes every connection, letting go of this replica's duties.
    pub async fn close(&self) {
        if let Some(feed) = &self.feed {
            feed.stop();
        }
        self.leases.release().await;
        if self.backend == Backend::Sqlite {
            // The log written into the database file before the last connection goes:
            // a stopped server's `sandboxd.db` is then whole by itself.
            let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&self.pool)
                .await;
        }
        self.pool.close().await;
    }
}
