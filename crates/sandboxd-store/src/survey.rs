//! A look at a data directory's store from outside the server (`sandboxd reap`,
//! `sandboxd doctor`): read-only, never migrating or writing, beside a running server
//! and when none runs. Without a server (no write-ahead log) nothing is created beside
//! the database; with one, SQLite reads through the server's log and its index, which
//! needs the rights of the server's user.
//!
//! A PostgreSQL database is read as it is. The survey gives the installation id, the
//! local engine's records and the schema version.

use std::path::Path;
use std::str::FromStr as _;

use sandboxd_core::model::SandboxStatus;
use sandboxd_core::reap::{Record, Tracking};
use sqlx::any::AnyConnectOptions;
use sqlx::{Connection as _, Row as _};

use crate::StoreError;
use crate::database::{Backend, Database};
use crate::migrations::known_version;

/// What the store of a data directory holds, as far as the tools outside the server
/// need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    /// The installation's id and its records of sandboxes on the local engine.
    pub tracking: Tracking,
    /// The newest migration applied to the database.
    pub schema_version: i64,
    /// The newest migration this build knows.
    pub known_version: i64,
}

/// Reads the store of `database`; `Ok(None)` when it has none yet.
pub async fn survey(database: &Database) -> Result<Option<Survey>, StoreError> {
    sqlx::any::install_default_drivers();
    let mut conn = match database {
        Database::Sqlite { data_dir } => match open_sqlite(data_dir).await? {
            Some(conn) => conn,
            None => return Ok(None),
        },
        Database::Postgres { url } => {
            let options = AnyConnectOptions::from_str(url)?;
            let mut conn = sqlx::AnyConnection::connect_with(&options).await?;
            let present: bool =
                sqlx::query("SELECT to_regclass('_sqlx_migrations') IS NOT NULL AS present")
                    .fetch_one(&mut conn)
                    .await?
                    .try_get("present")?;
            if !present {
                conn.close().await?;
                return Ok(None);
            }
            conn
        }
    };
    let survey = read(&mut conn, database.backend()).await;
    conn.close().await?;
    survey.map(Some)
}

/// A read-only connection to the SQLite database of `data_dir`, if it has one.
async fn open_sqlite(data_dir: &Path) -> Result<Option<sqlx::AnyConnection>, StoreError> {
    let db = data_dir.join("sandboxd.db");
    if !db.try_exists().map_err(|source| StoreError::Io {
        path: db.display().to_string(),
        source,
    })? {
        return Ok(None);
    }
    // With no write-ahead log the database is all in its file (no server has it open):
    // read it as immutable, so SQLite makes no `-wal` or `-shm` file beside it. With a
    // log, a read must go through it (and its shared-memory index), read-only.
    let wal = data_dir.join("sandboxd.db-wal");
    let immutable = !wal.try_exists().unwrap_or(true);
    let url = format!(
        "sqlite://{}?mode=ro{}",
        db.display(),
        if immutable { "&immutable=1" } else { "" }
    );
    let options = AnyConnectOptions::from_str(&url)?;
    Ok(Some(sqlx::AnyConnection::connect_with(&options).await?))
}

async fn read(conn: &mut sqlx::AnyConnection, backend: Backend) -> Result<Survey, StoreError> {
    let schema_version: Option<i64> =
        sqlx::query("SELECT MAX(version) AS version FROM _sqlx_migrations WHERE success")
            .fetch_one(&mut *conn)
            .await?
            .try_get("version")?;
    let instance_id = sqlx::query("SELECT instance_id FROM installation WHERE singleton = 1")
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| row.try_get::<String, _>("instance_id"))
        .transpose()?;
    let rows = sqlx::query(
        "SELECT sandbox_id, status, container_id, created_at, expires_at FROM sandboxes \
         WHERE server_id IS NULL",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut records = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let status: String = row.try_get("status")?;
        let record = Record {
            status: SandboxStatus::parse(&status)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown sandbox status {status}")))?,
            container_id: row.try_get("container_id")?,
            created_at: row.try_get("created_at")?,
            expires_at: row.try_get("expires_at")?,
        };
        records.insert(row.try_get::<String, _>("sandbox_id")?, record);
    }
    Ok(Survey {
        tracking: Tracking {
            instance_id,
            records,
        },
        schema_version: schema_version.unwrap_or_default(),
        known_version: known_version(backend),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Store;

    fn sqlite(dir: &Path) -> Database {
        Database::Sqlite {
            data_dir: dir.to_owned(),
        }
    }

    #[tokio::test]
    async fn a_directory_without_a_store_has_nothing_to_survey() {
        let dir = tempfile::tempdir().unwrap();
        assert!(survey(&sqlite(dir.path())).await.unwrap().is_none());
        assert!(!dir.path().join("sandboxd.db").exists());
    }

    #[tokio::test]
    async fn a_stopped_store_is_read_without_a_file_made_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let instance = store.instance_id().await.unwrap();
        // The server's last connection closes: SQLite checkpoints its log into the file.
        store.close().await;
        for file in ["sandboxd.db-wal", "sandboxd.db-shm"] {
            let _ = std::fs::remove_file(dir.path().join(file));
        }
        let found = survey(&sqlite(dir.path())).await.unwrap().unwrap();
        assert_eq!(
            found.tracking.instance_id.as_deref(),
            Some(instance.as_str())
        );
        assert!(!dir.path().join("sandboxd.db-wal").exists());
        assert!(!dir.path().join("sandboxd.db-shm").exists());
    }

    #[tokio::test]
    async fn a_survey_sees_the_installation_beside_an_open_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let instance = store.instance_id().await.unwrap();
        let found = survey(&sqlite(dir.path())).await.unwrap().unwrap();
        assert_eq!(
            found.tracking.instance_id.as_deref(),
            Some(instance.as_str())
        );
        assert!(found.tracking.records.is_empty());
        assert_eq!(found.schema_version, found.known_version);
        assert!(found.known_version >= 5);
    }
}
