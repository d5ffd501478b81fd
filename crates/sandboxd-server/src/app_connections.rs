//! Connections to the apps in sandboxes, kept open between preview requests (HTTP/1.1
//! keep-alive toward the app), so that a request after the first goes straight to the
//! app instead of waiting for the agent to dial it. A connection is kept once its
//! answer has been read to the end, for at most [`IDLE_FOR`] (below the keep-alive of
//! common app servers, which close first otherwise), and a sandbox keeps at most
//! [`IDLE_PER_SANDBOX`] (each holds one of its agent's port connections). Kept
//! connections are shared by every caller a preview admitted: who may send a request is
//! decided before a connection is taken, never by the connection.
//!
//! Idle connections are kept by sandbox (16 at most, 4 s at most) and swept by a task of
//! their own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use axum::body::Body;
use hyper::client::conn::http1::SendRequest;

/// How long a connection is kept without a request.
pub const IDLE_FOR: Duration = Duration::from_secs(4);
/// How many idle connections a sandbox keeps, over all its ports.
pub const IDLE_PER_SANDBOX: usize = 16;

/// Idle connections to apps, by sandbox.
#[derive(Debug, Default)]
pub struct AppConnections {
    idle: Mutex<HashMap<String, Vec<Idle>>>,
}

#[derive(Debug)]
struct Idle {
    port: u16,
    sender: SendRequest<Body>,
    since: Instant,
}

impl Idle {
    fn usable(&self, now: Instant) -> bool {
        !self.sender.is_closed()
            && self.sender.is_ready()
            && now.duration_since(self.since) < IDLE_FOR
    }
}

impl AppConnections {
    /// An empty set; on a runtime, a task drops what expired (until the set is dropped).
    pub fn new() -> Arc<Self> {
        let connections = Arc::new(Self::default());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep(Arc::downgrade(&connections)));
        }
        connections
    }

    /// An idle connection to `port` of the sandbox, ready for a request.
    pub fn take(&self, sandbox_id: &str, port: u16) -> Option<SendRequest<Body>> {
        let mut idle = self.lock();
        let kept = idle.get_mut(sandbox_id)?;
        let now = Instant::now();
        kept.retain(|connection| connection.usable(now));
        let found = kept
            .iter()
            .rposition(|connection| connection.port == port)
            .map(|at| kept.remove(at).sender);
        if kept.is_empty() {
            idle.remove(sandbox_id);
        }
        found
    }

    /// Keeps `sender` once the answer it carries has been read to the end (a connection
    /// whose answer is abandoned, or that the app closes, is not kept).
    pub fn keep(self: &Arc<Self>, sandbox_id: &str, port: u16, mut sender: SendRequest<Body>) {
        let this = Arc::downgrade(self);
        let sandbox_id = sandbox_id.to_owned();
        tokio::spawn(async move {
            if sender.ready().await.is_err() {
                return;
            }
            if let Some(this) = this.upgrade() {
                this.put(sandbox_id, port, sender);
            }
        });
    }

    /// How many idle connections are kept (all sandboxes).
    pub fn idle(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    fn put(&self, sandbox_id: String, port: u16, sender: SendRequest<Body>) {
        let mut idle = self.lock();
        let kept = idle.entry(sandbox_id).or_default();
        let now = Instant::now();
        kept.retain(|connection| connection.usable(now));
        if kept.len() >= IDLE_PER_SANDBOX {
            kept.remove(0);
        }
        kept.push(Idle {
            port,
            sender,
            since: now,
        });
    }

    fn expire(&self) {
        let now = Instant::now();
        self.lock().retain(|_, kept| {
            kept.retain(|connection| connection.usable(now));
            !kept.is_empty()
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Idle>>> {
        // A panic under the lock leaves a map that is still whole.
        self.idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

async fn sweep(connections: Weak<AppConnections>) {
    let mut every = tokio::time::interval(IDLE_FOR / 2);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(connections) = connections.upgrade() else {
            return;
        };
        connections.expire();
    }
}
