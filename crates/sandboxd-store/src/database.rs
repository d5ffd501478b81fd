//! Where the store lives: the embedded SQLite file of a data directory, or a PostgreSQL
//! database named by a URL. A URL may carry a password, so it is never printed whole.
//!
//! `Database` is the data directory's SQLite file or a `postgres://` URL, which is never
//! printed with its user, password or parameters.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::StoreError;

/// The database of an installation.
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    /// `sandboxd.db` in the data directory (the default: one server, nothing to run).
    Sqlite { data_dir: PathBuf },
    /// A PostgreSQL database, shared by every replica of the installation.
    Postgres { url: String },
}

/// Which SQL the store speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Database {
    /// The database a configuration names: `url` when given (only `postgres://` and
    /// `postgresql://` URLs), else SQLite in `data_dir`.
    pub fn from_config(url: Option<&str>, data_dir: &Path) -> Result<Self, StoreError> {
        let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) else {
            return Ok(Self::Sqlite {
                data_dir: data_dir.to_owned(),
            });
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres {
                url: url.to_owned(),
            });
        }
        Err(StoreError::Conflict(format!(
            "the database URL {} is not a postgres:// URL (SQLite needs no URL: it is the \
             default, in the data directory)",
            redact(url)
        )))
    }

    pub fn backend(&self) -> Backend {
        match self {
            Self::Sqlite { .. } => Backend::Sqlite,
            Self::Postgres { .. } => Backend::Postgres,
        }
    }

    /// The database for logs and errors: the SQLite file, or the PostgreSQL server and
    /// database without user, password or parameters.
    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite { data_dir } => data_dir.join("sandboxd.db").display().to_string(),
            Self::Postgres { url } => redact(url),
        }
    }
}

impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// `scheme://user:password@host:port/db?params` as `scheme://host:port/db`.
fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let host = authority.rsplit('@').next().unwrap_or_default();
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_url_is_sqlite_in_the_data_directory() {
        let db = Database::from_config(None, Path::new("/data")).unwrap();
        assert_eq!(db.backend(), Backend::Sqlite);
        assert_eq!(db.describe(), "/data/sandboxd.db");
        let blank = Database::from_config(Some("  "), Path::new("/data")).unwrap();
        assert_eq!(blank.backend(), Backend::Sqlite);
    }

    #[test]
    fn postgres_urls_are_accepted_and_never_printed_with_their_secrets() {
        for url in [
            "postgres://app:s3cret@db.example:5433/sandboxd?sslmode=require&password=s3cret",
            "postgresql://app:s3cret@db.example:5433/sandboxd",
        ] {
            let db = Database::from_config(Some(url), Path::new("/data")).unwrap();
            assert_eq!(db.backend(), Backend::Postgres);
            let shown = format!("{} {db:?}", db.describe());
            assert!(
                !shown.contains("s3cret") && !shown.contains("app"),
                "{shown}"
            );
            assert!(shown.contains("db.example:5433/sandboxd"), "{shown}");
        }
    }

    #[test]
    fn other_urls_are_refused_without_their_secrets() {
        let error = Database::from_config(Some("mysql://u:s3cret@h/db"), Path::new("/d"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("mysql://h/db"), "{error}");
        assert!(!error.contains("s3cret"), "{error}");
    }
}
