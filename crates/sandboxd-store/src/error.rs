//! Errors of the store.

/// A failed store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error")]
    Database(#[from] sqlx::Error),
    #[error("database migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{0}")]
    Conflict(String),
    /// A request named something that does not exist (for this organization).
    #[error("unknown {0}")]
    Unknown(String),
    #[error("cannot access {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
    #[error(
        "this database's secrets were sealed with another master key: every server of an \
         installation needs the master key that made it (SANDBOXD_MASTER_KEY, or the \
         data directory's master.key)"
    )]
    WrongMasterKey,
    #[error("secret could not be sealed or opened")]
    Crypto,
    /// The organization's quota does not allow it.
    #[error(transparent)]
    Quota(#[from] sandboxd_core::quotas::QuotaExceeded),
}

impl StoreError {
    /// The database could not be reached or cannot serve now (connection refused or lost,
    /// no connection free in time, a server shutting down or out of resources, a database
    /// not taking connections): a fault that passes, unlike a query it refused.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Self::Database(
                sqlx::Error::Io(_)
                    | sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::Tls(_)
            )
        ) || matches!(self, Self::Database(sqlx::Error::Database(db)) if db.code().is_some_and(|c| ["08", "53", "55", "57P"].iter().any(|class| c.starts_with(class))))
    }
}
