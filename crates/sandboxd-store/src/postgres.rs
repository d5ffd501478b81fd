//! The shared backend: a PostgreSQL database that several replicas use at once. Each
//! replica connects under its own `application_name` (its origin), which the change
//! triggers put into their notices.
//!
//! The `application_name` is random; it is the replica's origin.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

use crate::StoreError;
use crate::ids::random_bytes;

/// The transaction advisory lock every write transaction takes ("sand").
pub(crate) const WRITE_LOCK: i64 = 0x7361_6e64;

/// A new origin: `sandboxd-` and 16 hex digits, well within PostgreSQL's 63 bytes.
pub(crate) fn origin() -> Result<String, StoreError> {
    let mut bytes = [0u8; 8];
    random_bytes(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sandboxd-{hex}"))
}

/// `url` with `application_name` set to `origin` (a later parameter wins over an
/// earlier one of the operator's).
pub(crate) fn with_origin(url: &str, origin: &str) -> String {
    let (base, fragment) = url.split_once('#').unwrap_or((url, ""));
    let joiner = if base.contains('?') { '&' } else { '?' };
    let mut out = format!("{base}{joiner}application_name={origin}");
    if !fragment.is_empty() {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// Connects the pool; the first connection is made at once, so a wrong URL or an
/// unreachable server fails the start.
pub(crate) async fn connect(url: &str) -> Result<AnyPool, StoreError> {
    let options = AnyConnectOptions::from_str(url)?;
    let pool = AnyPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        // A connection idle for a while may have been closed by the server or a proxy.
        .idle_timeout(Duration::from_secs(300))
        .connect_with(options)
        .await?;
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origin_is_appended_as_the_last_parameter() {
        assert_eq!(
            with_origin("postgres://h/db", "sandboxd-1"),
            "postgres://h/db?application_name=sandboxd-1"
        );
        assert_eq!(
            with_origin(
                "postgres://h/db?sslmode=disable&application_name=x",
                "sandboxd-1"
            ),
            "postgres://h/db?sslmode=disable&application_name=x&application_name=sandboxd-1"
        );
    }

    #[test]
    fn origins_differ_and_fit() {
        let (a, b) = (origin().unwrap(), origin().unwrap());
        assert_ne!(a, b);
        assert!(a.len() <= 63 && a.starts_with("sandboxd-"));
    }
}
