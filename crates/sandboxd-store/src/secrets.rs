//! Secrets at rest. One 32-byte master key (a file with mode 0600 in the data dir) gives,
//! by HMAC-SHA256 with a purpose label, the AES-256-GCM key that seals environment
//! variables and the HMAC key that hashes API keys.
//!
//! Environment variables are sealed with the sandbox id as associated data.

use std::fmt;
use std::io::Write as _;
use std::path::Path;

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::StoreError;
use crate::ids::random_bytes;

const SEAL_VERSION: u8 = 1;
const NONCE_LEN: usize = 12;

/// Seals and opens secrets, and hashes API keys. Its `Debug` shows no key material.
#[derive(Clone)]
pub struct SecretBox {
    seal_key: [u8; 32],
    mac_key: [u8; 32],
}

impl fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretBox(***)")
    }
}

fn derive(master: &[u8; 32], label: &str) -> Result<[u8; 32], StoreError> {
    let mut mac =
        <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(master).map_err(|_| StoreError::Crypto)?;
    mac.update(label.as_bytes());
    Ok(mac.finalize().into_bytes().into())
}

impl SecretBox {
    /// The box of a master key.
    pub fn from_master(master: &[u8; 32]) -> Result<Self, StoreError> {
        Ok(Self {
            seal_key: derive(master, "sandboxd env-vars v1")?,
            mac_key: derive(master, "sandboxd api-keys v1")?,
        })
    }

    /// Loads the master key from `path`, creating it (mode 0600) when absent.
    pub fn load_or_create(path: &Path) -> Result<Self, StoreError> {
        let io = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        match std::fs::read(path) {
            Ok(bytes) => {
                let master: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                    StoreError::Corrupt(format!("{} must hold 32 bytes", path.display()))
                })?;
                Self::from_master(&master)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut master = [0u8; 32];
                random_bytes(&mut master)?;
                let mut file = open_private(path).map_err(io)?;
                file.write_all(&master).map_err(io)?;
                file.sync_all().map_err(io)?;
                Self::from_master(&master)
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Encrypts `plaintext`, bound to `context` (the row id) so a sealed value cannot be
    /// moved to another row.
    pub fn seal(&self, context: &str, plaintext: &[u8]) -> Result<Vec<u8>, StoreError> {
        let cipher = Aes256Gcm::new_from_slice(&self.seal_key).map_err(|_| StoreError::Crypto)?;
        let mut nonce = [0u8; NONCE_LEN];
        random_bytes(&mut nonce)?;
        let sealed = cipher
            .encrypt(
                (&nonce).into(),
                Payload {
                    msg: plaintext,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| StoreError::Crypto)?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(SEAL_VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Decrypts what [`SecretBox::seal`] produced for the same `context`.
    pub fn open(&self, context: &str, sealed: &[u8]) -> Result<Vec<u8>, StoreError> {
        let (version, rest) = sealed.split_first().ok_or(StoreError::Crypto)?;
        if *version != SEAL_VERSION || rest.len() < NONCE_LEN {
            return Err(StoreError::Crypto);
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| StoreError::Crypto)?;
        let cipher = Aes256Gcm::new_from_slice(&self.seal_key).map_err(|_| StoreError::Crypto)?;
        cipher
            .decrypt(
                (&nonce).into(),
                Payload {
                    msg: ciphertext,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| StoreError::Crypto)
    }

    /// The keyed hash under which an API key is stored, as hex.
    /// A keyed hash of a command for the audit log: equal commands hash equally, and
    /// without the master key the text cannot be guessed from it.
    pub fn command_hash(&self, command: &str) -> String {
        self.key_hash(&format!("sandboxd exec command\0{command}"))
    }

    pub fn key_hash(&self, token: &str) -> String {
        // HMAC accepts keys of any length, so this cannot fail for a 32-byte key.
        let Ok(mut mac) = <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(&self.mac_key) else {
            return String::new();
        };
        mac.update(token.as_bytes());
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Creates a new file readable and writable by its owner only.
pub(crate) fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_opens_and_binds_context() {
        let boxed = SecretBox::from_master(&[7u8; 32]).unwrap();
        let sealed = boxed.seal("sb_1", b"SECRET=1").unwrap();
        assert!(!sealed.windows(8).any(|w| w == b"SECRET=1"));
        assert_eq!(boxed.open("sb_1", &sealed).unwrap(), b"SECRET=1");
        assert!(boxed.open("sb_2", &sealed).is_err());
        let other = SecretBox::from_master(&[8u8; 32]).unwrap();
        assert!(other.open("sb_1", &sealed).is_err());
    }

    #[test]
    fn key_hash_is_keyed_and_stable() {
        let a = SecretBox::from_master(&[1u8; 32]).unwrap();
        let b = SecretBox::from_master(&[2u8; 32]).unwrap();
        assert_eq!(a.key_hash("tok"), a.key_hash("tok"));
        assert_ne!(a.key_hash("tok"), b.key_hash("tok"));
        assert_eq!(a.key_hash("tok").len(), 64);
        assert_eq!(format!("{a:?}"), "SecretBox(***)");
    }

    #[test]
    fn master_key_file_is_private_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master.key");
        let first = SecretBox::load_or_create(&path).unwrap();
        let second = SecretBox::load_or_create(&path).unwrap();
        assert_eq!(first.key_hash("x"), second.key_hash("x"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
