//! A server's host key as operators write it (`ssh-ed25519 AAAA…`, the line of a
//! `known_hosts` or `.pub` file without host names), compared by key data only.
//!
//! `HostKey` is parsed from a `.pub` line and has a SHA-256 fingerprint.

use russh::keys::{HashAlg, PublicKey};

/// A host key.
#[derive(Clone, PartialEq, Eq)]
pub struct HostKey(PublicKey);

impl HostKey {
    /// Parses `algorithm base64 [comment]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let mut words = text.split_whitespace();
        let (Some(_algorithm), Some(data)) = (words.next(), words.next()) else {
            return Err("expected `<algorithm> <base64 key>`, as in a .pub file".into());
        };
        russh::keys::parse_public_key_base64(data)
            .map(|mut key| {
                key.set_comment("");
                Self(key)
            })
            .map_err(|e| format!("not an SSH public key: {e}"))
    }

    /// `algorithm base64`, the form `parse` reads.
    pub fn to_openssh(&self) -> String {
        self.0.to_openssh().unwrap_or_default().trim().to_owned()
    }

    /// The SHA-256 fingerprint (`SHA256:…`), as `ssh-keygen -l` prints it.
    pub fn fingerprint(&self) -> String {
        self.0.fingerprint(HashAlg::Sha256).to_string()
    }

    pub(crate) fn from_key(key: &PublicKey) -> Self {
        let mut key = key.clone();
        key.set_comment("");
        Self(key)
    }

    pub(crate) fn matches(&self, key: &PublicKey) -> bool {
        self.0.key_data() == key.key_data()
    }
}

impl std::fmt::Debug for HostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.fingerprint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";

    #[test]
    fn a_pub_line_is_read_with_or_without_its_comment() {
        let plain = HostKey::parse(KEY).unwrap();
        let commented = HostKey::parse(&format!("{KEY} root@host\n")).unwrap();
        assert_eq!(plain, commented);
        assert_eq!(plain.to_openssh(), KEY);
        assert!(plain.fingerprint().starts_with("SHA256:"));
    }

    #[test]
    fn what_is_not_a_key_is_refused() {
        for bad in ["", "ssh-ed25519", "ssh-ed25519 not-base64!", "AAAAC3Nza"] {
            assert!(HostKey::parse(bad).is_err(), "{bad:?}");
        }
    }
}
