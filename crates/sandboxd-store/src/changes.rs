//! The changes other replicas commit, heard through PostgreSQL's LISTEN/NOTIFY, so the
//! key and row caches of this replica stay correct when several share a database.
//!
//! Triggers (migration 0007 of PostgreSQL) send `<origin> sandbox <id>` for every write
//! to a sandbox's row, `<origin> server <id>` for every change to a remote server's
//! record (passed on to the service, which drops the engine it made for it) and
//! `<origin> access` for every change to keys, members, users or organizations, at
//! commit. The origin is the writer's `application_name`: this
//! replica's own notices are skipped, its writes having updated its caches already.
//!
//! The caches are suspended (nothing served from them, nothing kept) until the listener
//! is listening and whenever its connection is lost, then resume empty: a notice missed
//! while nobody listened cannot leave a stale entry behind. A connection that dies
//! without a word leaves the caches' own time limits (2 s for keys, 1 s for rows) as the
//! bound.
//!
//! Changes to remote servers go out as `ServerChange`s, on which the server's `loops.rs`
//! has the service drop the engines it made (`Fleet::servers_changed`). The parser of a
//! notice is tested on its own.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::auth_cache::AuthCache;
use crate::row_cache::RowCache;

/// The channel the triggers notify.
pub(crate) const CHANNEL: &str = "sandboxd_changes";

/// What a notice asks of this replica.
#[derive(Debug, PartialEq, Eq)]
enum Notice<'a> {
    /// A sandbox's row changed.
    Sandbox(&'a str),
    /// A remote server's record changed.
    Server(&'a str),
    /// What some caller may do changed.
    Access,
    /// This replica's own change, or nothing this build knows.
    Nothing,
}

/// Reads a notice from its end: the writer's `application_name` may hold spaces.
fn parse<'a>(origin: &str, payload: &'a str) -> Notice<'a> {
    let (from, notice) = if let Some(from) = payload.strip_suffix(" access") {
        (from, Notice::Access)
    } else {
        let mut parts = payload.rsplitn(3, ' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(id), Some("sandbox"), Some(from)) if !id.is_empty() => {
                (from, Notice::Sandbox(id))
            }
            (Some(id), Some("server"), Some(from)) if !id.is_empty() => (from, Notice::Server(id)),
            _ => return Notice::Nothing,
        }
    };
    if from == origin {
        Notice::Nothing
    } else {
        notice
    }
}

/// A change to remote servers made by another replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerChange {
    /// This server's record changed or was removed.
    One(String),
    /// Changes may have been missed (the feed was lost meanwhile): any server may have
    /// changed.
    All,
}

/// The listening task; it ends with the store.
#[derive(Debug)]
pub(crate) struct ChangeFeed {
    task: JoinHandle<()>,
}

impl ChangeFeed {
    /// Suspends both caches and starts listening on `url` (a replica whose
    /// `application_name` is `origin`).
    pub(crate) fn start(
        url: String,
        origin: String,
        auth: Arc<AuthCache>,
        rows: Arc<RowCache>,
        servers: broadcast::Sender<ServerChange>,
    ) -> Self {
        auth.suspend();
        rows.suspend();
        let task = tokio::spawn(async move {
            let mut backoff = Duration::from_millis(100);
            let mut lost = false;
            loop {
                match listen(&url).await {
                    Ok(mut listener) => {
                        backoff = Duration::from_millis(100);
                        auth.resume();
                        rows.resume();
                        if lost {
                            // Changes to servers may have been missed meanwhile.
                            let _ = servers.send(ServerChange::All);
                        }
                        info!("listening for the changes of other replicas");
                        follow(&mut listener, &origin, &auth, &rows, &servers).await;
                        auth.suspend();
                        rows.suspend();
                        lost = true;
                        warn!("lost the change feed; caches are off until it is back");
                    }
                    Err(error) => {
                        lost = true;
                        warn!(%error, "cannot listen for changes; caches stay off");
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        });
        Self { task }
    }

    pub(crate) fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for ChangeFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn listen(url: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect(url).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// Applies notices until the connection is lost.
async fn follow(
    listener: &mut PgListener,
    origin: &str,
    auth: &AuthCache,
    rows: &RowCache,
    servers: &broadcast::Sender<ServerChange>,
) {
    loop {
        let notification = match listener.try_recv().await {
            Ok(Some(notification)) => notification,
            Ok(None) => return,
            Err(error) => {
                debug!(%error, "change feed failed");
                return;
            }
        };
        match parse(origin, notification.payload()) {
            Notice::Sandbox(id) => rows.changed(id),
            Notice::Server(id) => {
                let _ = servers.send(ServerChange::One(id.to_owned()));
            }
            Notice::Access => auth.invalidate(),
            Notice::Nothing => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_of_others_are_read_and_our_own_skipped() {
        assert_eq!(parse("me", "other sandbox abc"), Notice::Sandbox("abc"));
        assert_eq!(parse("me", "other access"), Notice::Access);
        assert_eq!(parse("me", "me sandbox abc"), Notice::Nothing);
        assert_eq!(parse("me", "me access"), Notice::Nothing);
        assert_eq!(parse("me", "a tool sandbox abc"), Notice::Sandbox("abc"));
        assert_eq!(parse("me", "other server s1"), Notice::Server("s1"));
        assert_eq!(parse("me", "me server s1"), Notice::Nothing);
        assert_eq!(parse("me", " access"), Notice::Access);
    }

    #[test]
    fn malformed_notices_ask_nothing() {
        for payload in [
            "",
            "other",
            "other sandbox",
            "other sandbox ",
            "other server ",
            "other bogus x",
            "other access x",
        ] {
            assert_eq!(parse("me", payload), Notice::Nothing, "{payload:?}");
        }
    }
}
