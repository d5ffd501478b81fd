//! One SSH connection per remote server (russh), and what sandboxd does over it: open
//! channels to unix sockets on the server (the engine's), have the server forward a
//! unix socket it listens on back over the connection (a sandbox's agent socket), and
//! run a command. The server's host key is pinned: a connection to a server whose key
//! is not the pinned one is refused before anything is sent.
#![forbid(unsafe_code)]

mod error;
mod files;
mod host_key;
mod link;
mod session;

pub use error::SshError;
pub use host_key::HostKey;
pub use link::{CommandOutput, Forwarded, SshLink, SshStream};
pub use session::{Health, SshSession};

/// Checks that `text` is a private key in OpenSSH format sandboxd can use (no
/// passphrase).
pub fn check_private_key(text: &str) -> Result<(), String> {
    russh::keys::decode_secret_key(text, None)
        .map(|_| ())
        .map_err(|e| format!("not a usable private key (OpenSSH format, no passphrase): {e}"))
}

/// Where a server is and how sandboxd logs in.
#[derive(Clone)]
pub struct SshTarget {
    pub address: String,
    pub port: u16,
    pub user: String,
    /// The private key, in OpenSSH format.
    pub private_key: String,
    /// The server's host key; `None` only to learn it (`HostCheck::Learn`).
    pub host_key: Option<HostKey>,
    /// Which addresses the connection may be made to, checked on the address the name
    /// resolved to (the connection is made to that address, with no second lookup).
    pub policy: AddressPolicy,
}

/// Which addresses a connection may be made to.
#[derive(Clone)]
pub struct AddressPolicy(std::sync::Arc<dyn Fn(std::net::IpAddr) -> bool + Send + Sync>);

impl AddressPolicy {
    /// Any address (tools and tests that name their own servers).
    pub fn any() -> Self {
        Self::new(|_| true)
    }

    /// The addresses `permits` says yes to.
    pub fn new(permits: impl Fn(std::net::IpAddr) -> bool + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(permits))
    }

    /// Whether a connection to `ip` may be made.
    pub fn permits(&self, ip: std::net::IpAddr) -> bool {
        (self.0)(ip)
    }
}

impl std::fmt::Debug for AddressPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AddressPolicy")
    }
}

impl std::fmt::Debug for SshTarget {
    // The private key is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshTarget")
            .field("address", &self.address)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("host_key", &self.host_key)
            .finish_non_exhaustive()
    }
}
