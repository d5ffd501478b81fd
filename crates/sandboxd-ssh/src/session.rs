//! A server's connection over time: made on first use, made again after a cut (with
//! backoff, so an unreachable server costs one attempt per backoff step, not one per
//! request), and its health as the API and `/metrics` report it.

use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tracing::{info, warn};

use crate::{SshError, SshLink, SshStream, SshTarget};

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The first wait after a failed attempt; doubled after each further failure...
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// ...up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(15);
/// A server that was cut off this recently is `degraded` even when connected again.
const DEGRADED_FOR: Duration = Duration::from_secs(60);

/// How a server's connection is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Connected, and not cut off in the last minute.
    Reachable,
    /// Connected, but cut off or failing in the last minute.
    Degraded,
    /// Not connected, and the last attempt failed (or none was made yet).
    Unreachable,
}

impl Health {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reachable => "reachable",
            Self::Degraded => "degraded",
            Self::Unreachable => "unreachable",
        }
    }
}

#[derive(Debug, Default)]
struct State {
    link: Option<SshLink>,
    /// No attempt before this.
    next_attempt: Option<Instant>,
    backoff: Duration,
    last_failure: Option<(Instant, String)>,
}

/// The connection to one server, made again whenever it is lost.
#[derive(Debug)]
pub struct SshSession {
    target: SshTarget,
    state: Mutex<State>,
}

impl SshSession {
    pub fn new(target: SshTarget) -> Self {
        Self {
            target,
            state: Mutex::new(State::default()),
        }
    }

    /// The open connection, making one when there is none and the backoff allows.
    pub async fn link(&self) -> Result<SshLink, SshError> {
        let mut state = self.state.lock().await;
        if let Some(link) = &state.link {
            if !link.is_closed() {
                return Ok(link.clone());
            }
            warn!(address = %self.target.address, port = self.target.port, "SSH connection lost; reconnecting");
            state.link = None;
            state.last_failure = Some((Instant::now(), "connection lost".into()));
        }
        if let Some(next) = state.next_attempt
            && Instant::now() < next
        {
            let reason = state
                .last_failure
                .as_ref()
                .map(|(_, reason)| reason.clone())
                .unwrap_or_default();
            return Err(SshError::Backoff {
                address: self.address(),
                reason,
            });
        }
        match SshLink::connect(&self.target, CONNECT_TIMEOUT).await {
            Ok(link) => {
                if state.last_failure.is_some() {
                    info!(address = %self.address(), "SSH connection made again");
                }
                state.link = Some(link.clone());
                state.next_attempt = None;
                state.backoff = Duration::ZERO;
                Ok(link)
            }
            Err(error) => {
                state.backoff = (state.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
                state.next_attempt = Some(Instant::now() + state.backoff);
                state.last_failure = Some((Instant::now(), error.to_string()));
                Err(error)
            }
        }
    }

    /// A stream to the unix socket at `path` on the server.
    pub async fn open_socket(&self, path: &str) -> Result<SshStream, SshError> {
        self.link().await?.open_socket(path).await
    }

    /// How the connection is doing, without trying to connect.
    pub async fn health(&self) -> Health {
        let state = self.state.lock().await;
        let connected = state.link.as_ref().is_some_and(|link| !link.is_closed());
        let recently_failed = state
            .last_failure
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < DEGRADED_FOR);
        match (connected, recently_failed) {
            (true, false) => Health::Reachable,
            (true, true) => Health::Degraded,
            (false, _) => Health::Unreachable,
        }
    }

    /// Why the last attempt failed, when it did.
    pub async fn last_failure(&self) -> Option<String> {
        let state = self.state.lock().await;
        state
            .last_failure
            .as_ref()
            .map(|(_, reason)| reason.clone())
    }

    fn address(&self) -> String {
        format!("{}:{}", self.target.address, self.target.port)
    }
}
