//! A server's connection over time: made on first use, made again after a cut (with
//! backoff, so an unreachable server costs one attempt per backoff step, not one per
//! request), and its health as the API and `/metrics` report it.
//!
//! `SshSession`: the backoff goes from 0.25 s, doubling, to 15 s; `Health` is
//! `reachable`, `degraded` (within a minute of a failure) or `unreachable`.
//! `forward(path, mode)` is kept across reconnections: every new connection asks for the
//! registered forwards again (and gives the sockets their mode, through `files.rs`),
//! delivering to the same receivers.

use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use tokio::sync::{Mutex, mpsc};
use tracing::{info, warn};

use crate::link::Forwards;
use crate::{Forwarded, SshError, SshLink, SshStream, SshTarget};

/// Connections waiting to be taken per forwarded socket; more are refused.
const FORWARD_BACKLOG: usize = 16;

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
    /// The sockets forwarded on this session, with the mode each is given: forwarded
    /// again on every new connection.
    forwarded: BTreeMap<String, Option<u32>>,
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
    forwards: Forwards,
}

impl SshSession {
    pub fn new(target: SshTarget) -> Self {
        Self {
            target,
            state: Mutex::new(State::default()),
            forwards: Forwards::default(),
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
        match SshLink::connect_with(&self.target, CONNECT_TIMEOUT, self.forwards.clone()).await {
            Ok(link) => {
                if state.last_failure.is_some() {
                    info!(address = %self.address(), "SSH connection made again");
                }
                for (path, mode) in &state.forwarded {
                    if let Err(error) = forward_on(&link, path, *mode).await {
                        warn!(path, %error, "a socket could not be forwarded again");
                    }
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

    /// A TCP connection made by the server to `address`.
    pub async fn open_tcp(&self, address: std::net::SocketAddr) -> Result<SshStream, SshError> {
        self.link().await?.open_tcp(address).await
    }

    /// Has the server listen on a unix socket at `path` (its directory must exist), give
    /// it `mode` (the server makes it 0600 for its user), and forward each connection
    /// to it here, now and after every reconnection, until [`SshSession::unforward`].
    pub async fn forward(&self, path: &str, mode: Option<u32>) -> Result<Forwarded, SshError> {
        let link = self.link().await?;
        let (tx, rx) = mpsc::channel(FORWARD_BACKLOG);
        if let Ok(mut forwards) = self.forwards.lock() {
            forwards.insert(path.to_owned(), tx);
        }
        let mut state = self.state.lock().await;
        state.forwarded.insert(path.to_owned(), mode);
        drop(state);
        if let Err(error) = forward_on(&link, path, mode).await {
            self.unforward(path).await;
            return Err(error);
        }
        Ok(rx)
    }

    /// Stops forwarding `path`; the server stops listening on it.
    pub async fn unforward(&self, path: &str) {
        if let Ok(mut forwards) = self.forwards.lock() {
            forwards.remove(path);
        }
        let mut state = self.state.lock().await;
        state.forwarded.remove(path);
        let link = state.link.clone();
        drop(state);
        if let Some(link) = link.filter(|link| !link.is_closed()) {
            link.cancel_forward(path).await;
        }
    }

    /// Runs a command on the server (see [`SshLink::run`]).
    pub async fn run(
        &self,
        command: &str,
        stdin: &[u8],
        max_output: usize,
    ) -> Result<crate::CommandOutput, SshError> {
        self.link().await?.run(command, stdin, max_output).await
    }

    /// Makes a directory on the server (see [`SshLink::make_dir`]).
    pub async fn make_dir(&self, path: &str, mode: u32) -> Result<(), SshError> {
        self.link().await?.make_dir(path, mode).await
    }

    /// Writes a small file on the server (see [`SshLink::put_file`]).
    pub async fn put_file(&self, path: &str, content: &[u8], mode: u32) -> Result<(), SshError> {
        self.link().await?.put_file(path, content, mode).await
    }

    /// Removes a file on the server (see [`SshLink::remove_file`]).
    pub async fn remove_file(&self, path: &str) -> Result<(), SshError> {
        self.link().await?.remove_file(path).await
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

/// Forwards `path` on `link` and gives the socket `mode`.
async fn forward_on(link: &SshLink, path: &str, mode: Option<u32>) -> Result<(), SshError> {
    let path = crate::files::plain(path)?;
    link.request_forward(path).await?;
    if let Some(mode) = mode {
        link.set_mode(path, mode).await?;
    }
    Ok(())
}
