//! Why a connection or a channel failed.

/// A failure of the SSH connection to a server.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    #[error("cannot reach {address}")]
    Unreachable {
        address: String,
        #[source]
        source: std::io::Error,
    },
    /// The address resolved to none this installation may connect to.
    #[error(
        "{address} is not an address this installation connects to (its servers' allowed_networks)"
    )]
    AddressRefused { address: String },
    #[error("no answer from {address} within {seconds} s")]
    Timeout { address: String, seconds: u64 },
    /// The server presented another host key than the pinned one.
    #[error("the server's host key {offered} is not the pinned one ({pinned})")]
    HostKeyMismatch { pinned: String, offered: String },
    /// No host key is pinned, and the connection was not made to learn one.
    #[error("no host key is pinned for this server (learn it with server.test, or give it)")]
    HostKeyUnknown { offered: String },
    #[error("the private key cannot be read: {0}")]
    PrivateKey(String),
    #[error("the server refused the key for user {user}")]
    AuthRefused { user: String },
    #[error("the server refused to open {what}")]
    Refused { what: String },
    #[error("the connection is closed")]
    Closed,
    /// Every channel a caller may have open at once is in use.
    #[error("every channel to {what} is in use; retry shortly")]
    Busy { what: String },
    /// The server was unreachable a moment ago; the next attempt waits for its backoff.
    #[error("{address} is unreachable ({reason}); retrying shortly")]
    Backoff { address: String, reason: String },
    #[error("SSH protocol failure")]
    Protocol(#[source] russh::Error),
}

impl From<russh::Error> for SshError {
    fn from(error: russh::Error) -> Self {
        match error {
            russh::Error::Disconnect | russh::Error::SendError | russh::Error::HUP => Self::Closed,
            other => Self::Protocol(other),
        }
    }
}
