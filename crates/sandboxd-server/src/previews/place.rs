//! Where a preview is served: under a path of sandboxd's own address, or on a host of
//! its own; and the policy that makes a page served under a path harmless to sandboxd.

/// The policy every preview response carries: scripts and forms work, in an opaque
/// origin of their own.
pub(super) const SANDBOX_POLICY: &str =
    "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads";

/// Where a preview is served.
pub(super) enum Place {
    /// Under a path of sandboxd's own address (no final slash): the app's pages share
    /// sandboxd's origin, so they run sandboxed and its cookies are kept to the prefix.
    Path(String),
    /// On a host of its own: an origin of its own.
    Host,
}

impl Place {
    pub(super) fn prefix(&self) -> &str {
        match self {
            Self::Path(prefix) => prefix,
            Self::Host => "",
        }
    }

    pub(super) fn cookie_path(&self) -> String {
        format!("{}/", self.prefix())
    }
}
