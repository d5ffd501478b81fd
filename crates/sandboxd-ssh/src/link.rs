//! The connection: made once per server, shared by every request to it. Each use is a
//! channel on it (no new session, no new TCP connection): a stream to a unix socket on
//! the server, a connection the server forwards from a socket it listens on, or a
//! command. Keepalives find a dead connection within seconds; the owner of the link
//! makes a new one (`is_closed`).
//!
//! `SshLink`: the host key is checked against the pinned one in `check_server_key` before
//! authentication (`learn` accepts an unpinned one and reports it); key login;
//! `open_socket` (a channel to a unix socket on the server); `run` (a command on a
//! session channel, output capped, 120 s at most); `forward_socket` (the server listens
//! on a unix socket and forwards its connections back). A name is resolved once and the
//! connection made to the first address the target's `AddressPolicy` permits (the remote
//! port's `allowed_networks`), never looked up again. Keepalives every 2 s; after 3
//! unanswered the link is closed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::ChannelMsg;
use russh::client::{self, ChannelOpenHandle, Handle, Msg, Session};
use russh::keys::{PrivateKeyWithHashAlg, PublicKeyOrCertificate};
use tokio::sync::mpsc;
use tracing::debug;

use crate::{HostKey, SshError, SshTarget};

/// A byte stream over one channel.
pub type SshStream = russh::ChannelStream<Msg>;

/// The connections the server forwards from a socket it listens on.
pub type Forwarded = mpsc::Receiver<SshStream>;

/// The longest a command on the server may take, its input (an agent binary) included.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Connections waiting to be taken per forwarded socket; more are refused.
const FORWARD_BACKLOG: usize = 16;
/// A keepalive after this much silence from the server...
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
/// ...and the connection is dead after this many unanswered.
const KEEPALIVE_MAX: usize = 3;

/// Where the connections to each forwarded socket go; shared by the links of a session,
/// so a socket forwarded again after a reconnection delivers to the same receiver.
pub(crate) type Forwards = Arc<Mutex<HashMap<String, mpsc::Sender<SshStream>>>>;

/// The SFTP channel of a link (`files.rs`): opened on first use, and again after it
/// failed.
#[derive(Default)]
pub(crate) enum Sftp {
    #[default]
    Untried,
    /// The server refused it: its commands do the work.
    Absent,
    Open(Arc<russh_sftp::client::RawSftpSession>),
}

pub(crate) type SftpCell = Arc<tokio::sync::Mutex<Sftp>>;

/// What a command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandOutput {
    pub exit_code: Option<u32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The connection to one server.
#[derive(Clone)]
pub struct SshLink {
    handle: Arc<Handle<Client>>,
    forwards: Forwards,
    host_key: HostKey,
    /// Its SFTP channel, for file operations (`files.rs`).
    sftp: SftpCell,
}

impl std::fmt::Debug for SshLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshLink")
            .field("host_key", &self.host_key)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

struct Client {
    pinned: Option<HostKey>,
    learn: bool,
    offered: Arc<Mutex<Option<HostKey>>>,
    forwards: Forwards,
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        // A certificate is not a pinned key: refused.
        let PublicKeyOrCertificate::PublicKey { key, .. } = key else {
            return Ok(false);
        };
        if let Ok(mut offered) = self.offered.lock() {
            *offered = Some(HostKey::from_key(key));
        }
        Ok(match &self.pinned {
            Some(pinned) => pinned.matches(key),
            None => self.learn,
        })
    }

    async fn server_channel_open_forwarded_streamlocal(
        &mut self,
        channel: russh::Channel<Msg>,
        socket_path: &str,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        let sender = self
            .forwards
            .lock()
            .ok()
            .and_then(|forwards| forwards.get(socket_path).cloned());
        // A socket no longer forwarded, or a backlog full: the connection is refused
        // (dropping the reply rejects it).
        if let Some(sender) = sender
            && let Ok(permit) = sender.try_reserve()
        {
            reply.accept().await;
            permit.send(channel.into_stream());
        }
        Ok(())
    }
}

impl SshLink {
    /// Connects and logs in; the server's host key must be the pinned one.
    pub async fn connect(target: &SshTarget, timeout: Duration) -> Result<Self, SshError> {
        Self::open(target, timeout, false, Forwards::default()).await
    }

    /// [`SshLink::connect`], delivering forwarded connections through `forwards`.
    pub(crate) async fn connect_with(
        target: &SshTarget,
        timeout: Duration,
        forwards: Forwards,
    ) -> Result<Self, SshError> {
        Self::open(target, timeout, false, forwards).await
    }

    /// Connects whatever host key the server presents, to learn it
    /// ([`SshLink::host_key`]); a pinned key is still enforced.
    pub async fn learn(target: &SshTarget, timeout: Duration) -> Result<Self, SshError> {
        Self::open(target, timeout, true, Forwards::default()).await
    }

    async fn open(
        target: &SshTarget,
        timeout: Duration,
        learn: bool,
        forwards: Forwards,
    ) -> Result<Self, SshError> {
        let address = format!("{}:{}", target.address, target.port);
        let key = russh::keys::decode_secret_key(&target.private_key, None)
            .map_err(|e| SshError::PrivateKey(e.to_string()))?;
        let config = Arc::new(client::Config {
            keepalive_interval: Some(KEEPALIVE_INTERVAL),
            keepalive_max: KEEPALIVE_MAX,
            nodelay: true,
            ..client::Config::default()
        });
        let offered = Arc::new(Mutex::new(None));
        let handler = Client {
            pinned: target.host_key.clone(),
            learn,
            offered: offered.clone(),
            forwards: forwards.clone(),
        };
        let connecting = async {
            let unreachable = |source| SshError::Unreachable {
                address: address.clone(),
                source,
            };
            // Resolved once, checked, and connected to as resolved: no second lookup
            // that could answer otherwise.
            let resolved = tokio::net::lookup_host(&address)
                .await
                .map_err(unreachable)?
                .find(|candidate| target.policy.permits(candidate.ip()))
                .ok_or_else(|| SshError::AddressRefused {
                    address: address.clone(),
                })?;
            let socket = tokio::net::TcpStream::connect(resolved)
                .await
                .map_err(unreachable)?;
            let mut handle = client::connect_stream(config, socket, handler)
                .await
                .map_err(|error| {
                    let offered = offered.lock().ok().and_then(|o| o.clone());
                    match (error, offered, &target.host_key) {
                        (russh::Error::UnknownKey, Some(offered), Some(pinned)) => {
                            SshError::HostKeyMismatch {
                                pinned: pinned.fingerprint(),
                                offered: offered.fingerprint(),
                            }
                        }
                        (russh::Error::UnknownKey, Some(offered), None) => {
                            SshError::HostKeyUnknown {
                                offered: offered.fingerprint(),
                            }
                        }
                        (error, _, _) => error.into(),
                    }
                })?;
            let hash = handle.best_supported_rsa_hash().await?.flatten();
            let auth = handle
                .authenticate_publickey(
                    target.user.clone(),
                    PrivateKeyWithHashAlg::new(Arc::new(key), hash),
                )
                .await?;
            if !auth.success() {
                return Err(SshError::AuthRefused {
                    user: target.user.clone(),
                });
            }
            Ok(handle)
        };
        let handle = tokio::time::timeout(timeout, connecting)
            .await
            .map_err(|_| SshError::Timeout {
                address: address.clone(),
                seconds: timeout.as_secs(),
            })??;
        let host_key = offered
            .lock()
            .ok()
            .and_then(|o| o.clone())
            .ok_or(SshError::Closed)?;
        debug!(%address, host_key = ?host_key, "SSH connection made");
        Ok(Self {
            handle: Arc::new(handle),
            forwards,
            host_key,
            sftp: Default::default(),
        })
    }

    /// The host key the server presented.
    pub fn host_key(&self) -> &HostKey {
        &self.host_key
    }

    /// Whether the connection is gone (closed by either side, or keepalives unanswered).
    pub fn is_closed(&self) -> bool {
        self.handle.is_closed()
    }

    pub(crate) fn sftp_cell(&self) -> &SftpCell {
        &self.sftp
    }

    /// A new session channel (for a command or a subsystem).
    pub(crate) async fn open_session_channel(&self) -> Result<russh::Channel<Msg>, SshError> {
        Ok(self.handle.channel_open_session().await?)
    }

    /// A stream to the unix socket at `path` on the server.
    pub async fn open_socket(&self, path: &str) -> Result<SshStream, SshError> {
        let channel = self
            .handle
            .channel_open_direct_streamlocal(path)
            .await
            .map_err(|error| match error {
                russh::Error::ChannelOpenFailure(_) => SshError::Refused {
                    what: format!("a channel to {path}"),
                },
                other => other.into(),
            })?;
        Ok(channel.into_stream())
    }

    /// A TCP connection made by the server to `address` (a direct-tcpip channel): the
    /// connection leaves from the server's network, not this one's.
    pub async fn open_tcp(&self, address: std::net::SocketAddr) -> Result<SshStream, SshError> {
        let channel = self
            .handle
            .channel_open_direct_tcpip(
                address.ip().to_string(),
                u32::from(address.port()),
                "127.0.0.1",
                0,
            )
            .await
            .map_err(|error| match error {
                russh::Error::ChannelOpenFailure(_) => SshError::Refused {
                    what: format!("a connection to {address}"),
                },
                other => other.into(),
            })?;
        Ok(channel.into_stream())
    }

    /// Has the server listen on a unix socket at `path` (its directory must exist) and
    /// forward each connection to it over this link.
    pub async fn forward_socket(&self, path: &str) -> Result<Forwarded, SshError> {
        let (tx, rx) = mpsc::channel(FORWARD_BACKLOG);
        if let Ok(mut forwards) = self.forwards.lock() {
            forwards.insert(path.to_owned(), tx);
        }
        match self.request_forward(path).await {
            Ok(()) => Ok(rx),
            Err(error) => {
                self.forget_forward(path);
                Err(error)
            }
        }
    }

    /// Asks the server to listen on `path` for a forward already registered.
    pub(crate) async fn request_forward(&self, path: &str) -> Result<(), SshError> {
        self.handle
            .streamlocal_forward(path)
            .await
            .map_err(|error| match error {
                russh::Error::RequestDenied => SshError::Refused {
                    what: format!("a forward of {path}"),
                },
                other => other.into(),
            })
    }

    /// Asks the server to stop listening on `path`.
    pub(crate) async fn cancel_forward(&self, path: &str) {
        if let Err(error) = self.handle.cancel_streamlocal_forward(path).await {
            debug!(path, ?error, "cancel of a forward failed");
        }
    }

    /// Stops the forward of `path`; the server removes the socket.
    pub async fn stop_forward(&self, path: &str) {
        self.forget_forward(path);
        self.cancel_forward(path).await;
    }

    fn forget_forward(&self, path: &str) {
        if let Ok(mut forwards) = self.forwards.lock() {
            forwards.remove(path);
        }
    }

    /// Runs `command` through the user's shell on the server with `stdin`, keeping at
    /// most `max_output` bytes of each stream.
    pub async fn run(
        &self,
        command: &str,
        stdin: &[u8],
        max_output: usize,
    ) -> Result<CommandOutput, SshError> {
        tokio::time::timeout(RUN_TIMEOUT, self.run_unbounded(command, stdin, max_output))
            .await
            .map_err(|_| SshError::Timeout {
                address: format!("a command on the server ({command:.40})"),
                seconds: RUN_TIMEOUT.as_secs(),
            })?
    }

    async fn run_unbounded(
        &self,
        command: &str,
        stdin: &[u8],
        max_output: usize,
    ) -> Result<CommandOutput, SshError> {
        let mut channel = self.handle.channel_open_session().await?;
        channel.exec(true, command).await?;
        if !stdin.is_empty() {
            channel.data(stdin).await?;
        }
        channel.eof().await?;
        let mut output = CommandOutput::default();
        let keep = |buffer: &mut Vec<u8>, data: &[u8]| {
            let room = max_output.saturating_sub(buffer.len());
            buffer.extend_from_slice(&data[..data.len().min(room)]);
        };
        while let Some(message) = channel.wait().await {
            match message {
                ChannelMsg::Data { data } => keep(&mut output.stdout, &data),
                ChannelMsg::ExtendedData { data, .. } => keep(&mut output.stderr, &data),
                ChannelMsg::ExitStatus { exit_status } => output.exit_code = Some(exit_status),
                ChannelMsg::Failure => {
                    return Err(SshError::Refused {
                        what: "a command".into(),
                    });
                }
                _ => {}
            }
        }
        Ok(output)
    }
}
