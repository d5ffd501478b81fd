//! The embedded backend: `sandboxd.db` in the data directory, in WAL mode, private to
//! the server's user.
//!
//! It sets the pragmas of the connection.

use std::path::Path;
use std::str::FromStr as _;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor as _};

use crate::StoreError;

/// Opens (creating when needed) the database of `data_dir`.
pub(crate) async fn connect(data_dir: &Path) -> Result<AnyPool, StoreError> {
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
    Ok(pool)
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
