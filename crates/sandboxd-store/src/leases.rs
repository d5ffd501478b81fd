//! Which replica runs each background duty (the reaper, reconcile, a server's warm
//! pools). On SQLite there is one server: it holds every duty. On PostgreSQL a duty is a
//! session advisory lock taken on one connection of this replica's own: the lock lasts
//! as long as the connection, so a replica that dies (even by SIGKILL: its socket
//! closes) lets go of every duty at once, and another takes it at its next try.
//!
//! Each try first checks the connection with a round trip: a replica that lost it no
//! longer claims anything, since PostgreSQL released its locks with the session.

use std::collections::HashSet;

use sha2::{Digest as _, Sha256};
use sqlx::postgres::PgConnection;
use sqlx::{Connection as _, Row as _};
use tokio::sync::Mutex;
use tracing::{info, warn};

/// The duties of this replica.
#[derive(Debug)]
pub struct Leases {
    /// `None` on SQLite.
    postgres: Option<Mutex<Held>>,
}

#[derive(Debug)]
struct Held {
    url: String,
    conn: Option<PgConnection>,
    duties: HashSet<String>,
}

/// The advisory lock key of a duty: stable across builds and replicas.
fn lock_key(duty: &str) -> i64 {
    let digest = Sha256::digest(format!("sandboxd duty {duty}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

impl Leases {
    /// Every duty held, always: one server on its own database.
    pub(crate) fn sole() -> Self {
        Self { postgres: None }
    }

    /// Duties taken through advisory locks of the database at `url`.
    pub(crate) fn postgres(url: String) -> Self {
        Self {
            postgres: Some(Mutex::new(Held {
                url,
                conn: None,
                duties: HashSet::new(),
            })),
        }
    }

    /// Whether this replica runs `duty` now: kept if held, taken if free.
    pub async fn hold(&self, duty: &str) -> bool {
        let Some(held) = &self.postgres else {
            return true;
        };
        let mut held = held.lock().await;
        held.hold(duty).await
    }

    /// Lets go of every duty (at a stop, so that another replica takes them at once).
    pub async fn release(&self) {
        if let Some(held) = &self.postgres {
            let mut held = held.lock().await;
            held.duties.clear();
            if let Some(mut conn) = held.conn.take() {
                // Released before the answer comes back, so that another replica's very
                // next try takes them; closing alone lets the server release them a
                // moment later.
                let _ = sqlx::query("SELECT pg_advisory_unlock_all()")
                    .execute(&mut conn)
                    .await;
                let _ = conn.close().await;
            }
        }
    }
}

impl Held {
    async fn hold(&mut self, duty: &str) -> bool {
        if let Some(conn) = &mut self.conn
            && let Err(error) = conn.ping().await
        {
            warn!(%error, "lost the connection holding this replica's duties");
            self.conn = None;
            self.duties.clear();
        }
        if self.conn.is_none() {
            match PgConnection::connect(&self.url).await {
                Ok(conn) => self.conn = Some(conn),
                Err(error) => {
                    warn!(%error, "cannot connect to take duties");
                    return false;
                }
            }
        }
        if self.duties.contains(duty) {
            return true;
        }
        let Some(conn) = &mut self.conn else {
            return false;
        };
        let taken = sqlx::query("SELECT pg_try_advisory_lock($1) AS taken")
            .bind(lock_key(duty))
            .fetch_one(&mut *conn)
            .await
            .and_then(|row| row.try_get::<bool, _>("taken"));
        match taken {
            Ok(true) => {
                info!(duty, "this replica now runs the duty");
                self.duties.insert(duty.to_owned());
                true
            }
            Ok(false) => false,
            Err(error) => {
                warn!(%error, duty, "cannot take a duty");
                self.conn = None;
                self.duties.clear();
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duties_have_distinct_stable_keys() {
        assert_eq!(lock_key("reaper"), lock_key("reaper"));
        assert_ne!(lock_key("reaper"), lock_key("reconcile"));
        assert_ne!(lock_key("pools:local"), lock_key("pools:s1"));
    }

    #[tokio::test]
    async fn a_sole_server_holds_every_duty() {
        let leases = Leases::sole();
        assert!(leases.hold("reaper").await);
        assert!(leases.hold("anything").await);
    }
}
