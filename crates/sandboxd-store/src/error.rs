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
    #[error("secret could not be sealed or opened")]
    Crypto,
    /// The organization's quota does not allow it.
    #[error(transparent)]
    Quota(#[from] sandboxd_core::quotas::QuotaExceeded),
}
