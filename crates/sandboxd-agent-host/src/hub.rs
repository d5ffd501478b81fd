//! Per-sandbox sockets. sandboxd creates a directory per sandbox, listens on a socket in
//! it and mounts the directory read-only into the sandbox; the agent connects out to it.
//! The sandbox can neither write into the directory nor make sandboxd connect anywhere:
//! sandboxd only ever accepts on a socket it created. Any process in the sandbox can
//! connect, but only the agent holds the sandbox's agent key (a random 256-bit value
//! kept beside the directory, `<id>.key`, and handed to the agent as its container
//! starts: see [`crate::handover`]): a connection without it is refused.
//!
//! The hub keeps the accept policy and restores the sockets after a restart. A sandbox's
//! connections come from its local socket or, with `adopt`, from any source of byte
//! streams: a remote server's forwarded socket. `connections()` names each sandbox whose
//! agent connects, for the replica registry and the egress proxy, any number subscribing;
//! `announce` names one again (a claimed warm member). A socket path too long for a
//! socket address is bound through `/proc/self/fd/<n>/` of its directory (`bind`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandboxd_core::plan::AgentMount;
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::conn::{self, AgentConn, AgentStream, ByteStream};
use super::handover::{KeyHandover, LocalHandover};
use tokio::sync::mpsc;

const SOCKET_NAME: &str = "agent.sock";

#[derive(Debug)]
struct Slot {
    conn: watch::Receiver<Option<AgentConn>>,
    task: JoinHandle<()>,
    handover: Arc<dyn KeyHandover>,
    key: SlotKey,
}

/// The key a sandbox's next agent connection must present (replaced by a rekey).
type SlotKey = Arc<Mutex<Arc<str>>>;

impl Drop for Slot {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The agent sockets of every sandbox of this server.
#[derive(Debug, Clone)]
pub struct AgentHub {
    inner: Arc<HubInner>,
}

#[derive(Debug)]
struct HubInner {
    root: PathBuf,
    binary: Option<PathBuf>,
    op_timeout: Duration,
    slots: Mutex<HashMap<String, Slot>>,
    /// Where the ids of sandboxes whose agent connected are sent: one sender per
    /// subscriber.
    connected: Subscribers,
}

/// Errors of socket setup; a sandbox then runs without its agent.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the agent socket in {path}")]
pub struct HubError {
    path: String,
    #[source]
    source: std::io::Error,
}

impl AgentHub {
    /// A hub keeping sockets under `root`, mounting `binary` (a static agent) into
    /// sandboxes; without a binary, sandboxes run without the agent and every operation
    /// takes the engine's exec path.
    pub fn new(root: PathBuf, binary: Option<PathBuf>, op_timeout: Duration) -> Self {
        Self {
            inner: Arc::new(HubInner {
                root,
                binary,
                op_timeout,
                slots: Mutex::new(HashMap::new()),
                connected: Subscribers::default(),
            }),
        }
    }

    /// The ids of sandboxes whose agent connects from now on, one per connection (the
    /// replica records that it holds them; the egress proxy serves their programs).
    /// Each call subscribes anew; a dropped receiver is forgotten.
    pub fn connections(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut connected) = self.inner.connected.lock() {
            connected.push(tx);
        }
        rx
    }

    /// Tells the subscribers again that a sandbox's agent is connected (it connected
    /// before its sandbox's record said what to serve it: a warm pool's member, now
    /// claimed).
    pub fn announce(&self, sandbox_id: &str) {
        announce(&self.inner.connected, sandbox_id);
    }

    /// Whether sandboxes get an agent.
    pub fn enabled(&self) -> bool {
        self.inner.binary.is_some()
    }

    fn dir(&self, sandbox_id: &str) -> PathBuf {
        self.inner.root.join(sandbox_id)
    }

    /// Outside the directory mounted into the sandbox.
    fn key_path(&self, sandbox_id: &str) -> PathBuf {
        self.inner.root.join(format!("{sandbox_id}.key"))
    }

    /// Creates the sandbox's socket and starts accepting on it, with the key offered to
    /// the agent of the container about to be created; returns what to mount.
    pub fn listen(&self, sandbox_id: &str) -> Result<Option<AgentMount>, HubError> {
        self.listen_local(sandbox_id, true)
    }

    /// Creates the socket of a sandbox about to be restored from a checkpoint, whose
    /// agent comes back holding `key`, the key of the sandbox it was saved from: that
    /// key is taken until `rekey` replaces it, and none is offered (the sandbox's code
    /// runs from its first instant).
    pub fn listen_restored(
        &self,
        sandbox_id: &str,
        key: &str,
    ) -> Result<Option<AgentMount>, HubError> {
        self.root_made()?;
        write_key(&self.key_path(sandbox_id), key).map_err(|source| HubError {
            path: self.inner.root.display().to_string(),
            source,
        })?;
        self.listen_local(sandbox_id, false)
    }

    /// Gives the sandbox's connected agent a new key, which its later connections must
    /// present; the one it had works no more. Fails, keeping the old key, when no agent
    /// is connected or it does not take the key.
    pub async fn rekey(&self, sandbox_id: &str) -> Result<(), RekeyError> {
        let (conn, slot_key) = {
            let slots = self
                .inner
                .slots
                .lock()
                .map_err(|_| RekeyError::NotConnected)?;
            let slot = slots.get(sandbox_id).ok_or(RekeyError::NotConnected)?;
            let conn = slot.conn.borrow().clone().filter(AgentConn::is_open);
            (conn.ok_or(RekeyError::NotConnected)?, slot.key.clone())
        };
        if conn.hello.version < sandboxd_agent_protocol::REKEY_VERSION {
            return Err(RekeyError::TooOld(conn.hello.version));
        }
        let key = new_key().map_err(RekeyError::Io)?;
        conn.rekey(&key).await.map_err(RekeyError::Refused)?;
        // The agent holds the new key: from now on it is the only one taken.
        write_key(&self.key_path(sandbox_id), &key).map_err(RekeyError::Io)?;
        *slot_key.lock().unwrap_or_else(|e| e.into_inner()) = key.into();
        Ok(())
    }

    fn listen_local(&self, sandbox_id: &str, offer: bool) -> Result<Option<AgentMount>, HubError> {
        let Some(binary) = &self.inner.binary else {
            return Ok(None);
        };
        let dir = self.dir(sandbox_id);
        let io = |source| HubError {
            path: dir.display().to_string(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let key = agent_key(&self.key_path(sandbox_id)).map_err(io)?;
        // The sockets' parent is sandboxd's alone on the host; each sandbox's own
        // directory is mounted into it and must be open to its user there.
        set_mode(&self.inner.root, 0o700).map_err(io)?;
        set_mode(&dir, 0o755).map_err(io)?;
        let socket = dir.join(SOCKET_NAME);
        match std::fs::remove_file(&socket) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        if offer {
            super::handover::offer_in(&dir, &key).map_err(io)?;
        }
        let listener = bind(&socket).map_err(io)?;
        // The sandbox user (any uid) must be able to connect; only this sandbox sees it.
        set_mode(&socket, 0o666).map_err(io)?;
        let handover = Arc::new(LocalHandover { dir: dir.clone() });
        self.start_accepting(sandbox_id, Incoming::Listener(listener), key, handover);
        Ok(Some(AgentMount {
            binary: binary.display().to_string(),
            run_dir: dir.display().to_string(),
        }))
    }

    /// The sandbox's agent key (made now if it has none), for a remote server to offer
    /// as its container is created.
    pub fn key_of(&self, sandbox_id: &str) -> Result<String, HubError> {
        self.root_made()?;
        agent_key(&self.key_path(sandbox_id)).map_err(|source| HubError {
            path: self.inner.root.display().to_string(),
            source,
        })
    }

    /// Makes the sockets' parent, sandboxd's alone on the host.
    fn root_made(&self) -> Result<(), HubError> {
        let root = &self.inner.root;
        let io = |source| HubError {
            path: root.display().to_string(),
            source,
        };
        std::fs::create_dir_all(root).map_err(io)?;
        set_mode(root, 0o700).map_err(io)
    }

    /// Offers the sandbox's key again, for its container about to be started again (it
    /// stopped, or was killed): no code of the sandbox runs until it has, and its agent
    /// starts anew. Nothing is done for a sandbox not listened for (it has no agent).
    pub async fn offer_again(&self, sandbox_id: &str) {
        let handover = self
            .inner
            .slots
            .lock()
            .ok()
            .and_then(|slots| slots.get(sandbox_id).map(|slot| slot.handover.clone()));
        let Some(handover) = handover else { return };
        let offered = match agent_key(&self.key_path(sandbox_id)) {
            Ok(key) => handover.offer(&key).await,
            Err(error) => Err(error),
        };
        if let Err(error) = offered {
            warn!(%sandbox_id, %error, "cannot offer the agent its key; the sandbox's agent will not connect");
        }
    }

    /// Takes the agent connections of a sandbox that arrive from elsewhere (a socket on a
    /// remote server, forwarded over its SSH connection), with the binary and socket
    /// directory at those paths there; returns what to mount. The sandbox's key is kept
    /// here, as for a local one. `None`: sandboxes run without the agent.
    pub fn adopt(
        &self,
        sandbox_id: &str,
        incoming: mpsc::Receiver<Box<dyn ByteStream>>,
        binary: String,
        run_dir: String,
        handover: Arc<dyn KeyHandover>,
    ) -> Result<Option<AgentMount>, HubError> {
        if self.inner.binary.is_none() {
            return Ok(None);
        }
        let key = self.key_of(sandbox_id)?;
        self.start_accepting(sandbox_id, Incoming::Forwarded(incoming), key, handover);
        Ok(Some(AgentMount { binary, run_dir }))
    }

    /// The local agent binary sandboxes get, if any.
    pub fn binary(&self) -> Option<&Path> {
        self.inner.binary.as_deref()
    }

    /// Whether sandboxd takes the sandbox's agent connections now (a forward that ended,
    /// its server's connection replaced, takes none).
    pub fn is_listening(&self, sandbox_id: &str) -> bool {
        self.inner.slots.lock().is_ok_and(|slots| {
            slots
                .get(sandbox_id)
                .is_some_and(|slot| !slot.task.is_finished())
        })
    }

    fn start_accepting(
        &self,
        sandbox_id: &str,
        incoming: Incoming,
        key: String,
        handover: Arc<dyn KeyHandover>,
    ) {
        let (tx, rx) = watch::channel(None);
        let announce = self.inner.connected.clone();
        let key: SlotKey = Arc::new(Mutex::new(key.into()));
        let task = tokio::spawn(accept_loop(
            incoming,
            sandbox_id.to_owned(),
            key.clone(),
            handover.clone(),
            self.inner.op_timeout,
            tx,
            announce,
        ));
        if let Ok(mut slots) = self.inner.slots.lock() {
            slots.insert(
                sandbox_id.to_owned(),
                Slot {
                    conn: rx,
                    task,
                    handover,
                    key,
                },
            );
        }
    }

    /// Listens again for a sandbox whose agent directory exists but that has no socket
    /// in this process (after a restart of sandboxd). Its agent holds its key already:
    /// none is offered (the sandbox's code runs).
    pub fn restore(&self, sandbox_id: &str) {
        let known = self
            .inner
            .slots
            .lock()
            .is_ok_and(|slots| slots.contains_key(sandbox_id));
        if known || !self.dir(sandbox_id).is_dir() {
            return;
        }
        if let Err(error) = self.listen_local(sandbox_id, false) {
            warn!(%sandbox_id, %error, "cannot listen again for an agent");
        }
    }

    /// The sandbox's agent, if it is connected.
    pub fn connection(&self, sandbox_id: &str) -> Option<AgentConn> {
        let slots = self.inner.slots.lock().ok()?;
        let conn = slots.get(sandbox_id)?.conn.borrow().clone()?;
        conn.is_open().then_some(conn)
    }

    /// Waits up to `timeout` for the sandbox's agent to connect.
    pub async fn wait_connected(&self, sandbox_id: &str, timeout: Duration) -> Option<AgentConn> {
        let mut rx = {
            let slots = self.inner.slots.lock().ok()?;
            slots.get(sandbox_id)?.conn.clone()
        };
        let ready = rx.wait_for(|conn| conn.as_ref().is_some_and(AgentConn::is_open));
        let guard = tokio::time::timeout(timeout, ready).await.ok()?.ok()?;
        guard.clone()
    }

    /// Closes every socket and connection (sandboxd is stopping); directories stay, so
    /// the next start listens again.
    pub fn shutdown(&self) {
        if let Ok(mut slots) = self.inner.slots.lock() {
            slots.clear();
        }
    }

    /// The sandboxes this process takes agent connections for.
    pub fn listened(&self) -> Vec<String> {
        self.inner
            .slots
            .lock()
            .map(|slots| slots.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Stops taking the sandbox's agent connections (its current one is closed), keeping
    /// its key: the sandbox is listened for again, e.g. over a server's new connection.
    pub fn stop_listening(&self, sandbox_id: &str) {
        if let Ok(mut slots) = self.inner.slots.lock() {
            slots.remove(sandbox_id);
        }
    }

    /// Stops taking the sandbox's agent connections and forgets its directory and key
    /// (the sandbox is gone).
    pub fn release(&self, sandbox_id: &str) {
        if let Ok(mut slots) = self.inner.slots.lock() {
            slots.remove(sandbox_id);
        }
        let dir = self.dir(sandbox_id);
        if let Err(error) = std::fs::remove_dir_all(&dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            warn!(path = %dir.display(), %error, "cannot remove an agent directory");
        }
        let _ = std::fs::remove_file(self.key_path(sandbox_id));
    }
}

/// Why a sandbox's agent was not given a new key.
#[derive(Debug, thiserror::Error)]
pub enum RekeyError {
    #[error("the sandbox's agent is not connected")]
    NotConnected,
    #[error("the sandbox's agent speaks version {0}, before new keys")]
    TooOld(u32),
    #[error("the agent did not take its new key: {0:?}")]
    Refused(crate::ops::FileOpError),
    #[error("cannot keep the agent's new key: {0}")]
    Io(std::io::Error),
}

/// Length of an agent key: 32 random bytes in hex.
const KEY_LEN: usize = 64;

/// The sandbox's agent key: the one kept at `path` (a container created before a restart
/// of sandboxd holds it), else a new one, written there (mode 0600).
fn agent_key(path: &Path) -> std::io::Result<String> {
    if let Ok(kept) = std::fs::read_to_string(path)
        && kept.len() == KEY_LEN
        && kept.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Ok(kept);
    }
    let key = new_key()?;
    write_key(path, &key)?;
    Ok(key)
}

/// A new agent key: 32 random bytes in hex.
fn new_key() -> std::io::Result<String> {
    let mut bytes = [0u8; KEY_LEN / 2];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `key` at `path` (mode 0600), replacing what was there.
fn write_key(path: &Path, key: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?
        .write_all(key.as_bytes())
}

/// The longest path a unix socket address holds (`sun_path`, less its final NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Listens on `socket`. A path too long for a socket address (a deep data dir) is reached
/// through an open handle on its directory, `/proc/self/fd/<n>/agent.sock`.
fn bind(socket: &Path) -> std::io::Result<UnixListener> {
    if socket.as_os_str().len() <= MAX_SOCKET_PATH {
        return UnixListener::bind(socket);
    }
    use std::os::fd::AsRawFd as _;
    let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    let handle = std::fs::File::open(dir)?;
    let short = Path::new("/proc/self/fd")
        .join(handle.as_raw_fd().to_string())
        .join(name);
    UnixListener::bind(short)
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Those who want to know which sandboxes' agents connect.
type Subscribers = Arc<Mutex<Vec<mpsc::UnboundedSender<String>>>>;

/// Tells every subscriber that the sandbox's agent connected.
fn announce(subscribers: &Subscribers, sandbox_id: &str) {
    if let Ok(mut subscribers) = subscribers.lock() {
        subscribers.retain(|tx| tx.send(sandbox_id.to_owned()).is_ok());
    }
}

/// Where a sandbox's agent connections come from.
enum Incoming {
    Listener(UnixListener),
    Forwarded(mpsc::Receiver<Box<dyn ByteStream>>),
}

enum Accepted {
    Stream(AgentStream),
    /// A failed accept; try again shortly.
    Retry,
    Closed,
}

impl Incoming {
    async fn accept(&mut self) -> Accepted {
        match self {
            Self::Listener(listener) => match listener.accept().await {
                Ok((stream, _)) => Accepted::Stream(AgentStream::Local(stream)),
                Err(_) => Accepted::Retry,
            },
            Self::Forwarded(receiver) => match receiver.recv().await {
                Some(stream) => Accepted::Stream(AgentStream::Other(stream)),
                None => Accepted::Closed,
            },
        }
    }
}

/// Connections still introducing themselves, at most, per sandbox.
const MAX_HANDSHAKES: usize = 4;

/// Accepts the agent's connections: while one is live, others are closed at once, so a
/// stray process in the sandbox cannot take over a working agent; at most a few may be
/// in their handshake at a time.
async fn accept_loop(
    mut incoming: Incoming,
    sandbox_id: String,
    key: SlotKey,
    handover: Arc<dyn KeyHandover>,
    op_timeout: Duration,
    slot: watch::Sender<Option<AgentConn>>,
    subscribers: Subscribers,
) {
    let handshakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // The first impostor of a sandbox is worth a warning; the next ones are not.
    let warned = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Connections live in this set: when the loop is aborted (the sandbox is released or
    // sandboxd stops), they are dropped with it.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = incoming.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let stream = match accepted {
            Accepted::Stream(stream) => stream,
            Accepted::Retry => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            // The forward is gone for good (the sandbox was released).
            Accepted::Closed => return,
        };
        let live = slot.borrow().as_ref().is_some_and(AgentConn::is_open);
        if live || handshakes.load(std::sync::atomic::Ordering::Acquire) >= MAX_HANDSHAKES {
            debug!(%sandbox_id, "extra agent connection refused");
            drop(stream);
            continue;
        }
        handshakes.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let slot = slot.clone();
        let id = sandbox_id.clone();
        let pending = handshakes.clone();
        let key: Arc<str> = key.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let handover = handover.clone();
        let warned = warned.clone();
        let subscribers = subscribers.clone();
        connections.spawn(async move {
            let ready = slot.clone();
            let mine: Arc<Mutex<Option<AgentConn>>> = Arc::default();
            let keep = mine.clone();
            let handshake = pending.clone();
            let id_announced = id.clone();
            let served = conn::serve(stream, id.clone(), &key, &*handover, op_timeout, move |conn| {
                handshake.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                if let Ok(mut mine) = keep.lock() {
                    *mine = Some(conn.clone());
                }
                // A connection that lost the race to a live one is closed.
                let took = ready.send_if_modified(|current| {
                    if current.as_ref().is_some_and(AgentConn::is_open) {
                        return false;
                    }
                    *current = Some(conn);
                    true
                });
                if took {
                    announce(&subscribers, &id_announced);
                }
                took
            })
            .await;
            if let Err(conn::AgentError::Impostor) = served {
                if warned.swap(true, std::sync::atomic::Ordering::AcqRel) {
                    debug!(sandbox_id = %id, "a connection without the agent key was refused");
                } else {
                    warn!(sandbox_id = %id, "a connection without the sandbox's agent key was refused: code in the sandbox tried to pose as its agent");
                }
            }
            let conn = mine.lock().ok().and_then(|m| m.clone());
            match conn {
                // The connection ended: clear the slot if it still holds this one.
                Some(conn) => {
                    slot.send_if_modified(|current| {
                        if current.as_ref().is_some_and(|c| c.same(&conn)) {
                            *current = None;
                            return true;
                        }
                        false
                    });
                }
                // It never introduced itself.
                None => {
                    pending.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                }
            }
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::FileTypeExt as _;

    use super::*;

    #[tokio::test]
    async fn a_socket_path_longer_than_an_address_holds_is_listened_on() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("d".repeat(120));
        std::fs::create_dir(&deep).unwrap();
        let socket = deep.join(SOCKET_NAME);
        assert!(socket.as_os_str().len() > MAX_SOCKET_PATH);
        assert!(std::os::unix::net::UnixListener::bind(&socket).is_err());

        let listener = bind(&socket).unwrap();
        assert!(std::fs::metadata(&socket).unwrap().file_type().is_socket());
        let handle = std::fs::File::open(&deep).unwrap();
        let short = format!(
            "/proc/self/fd/{}/{SOCKET_NAME}",
            std::os::fd::AsRawFd::as_raw_fd(&handle)
        );
        let _client = tokio::net::UnixStream::connect(short).await.unwrap();
        listener.accept().await.unwrap();
    }
}
