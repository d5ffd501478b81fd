//! Random identifiers.

use std::sync::atomic::{AtomicU64, Ordering};

const ALPHABET: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Fills `out` with random bytes from the operating system.
pub(crate) fn random_bytes(out: &mut [u8]) -> Result<(), crate::StoreError> {
    getrandom::fill(out).map_err(|_| crate::StoreError::Crypto)
}

/// A new random id of 21 alphanumeric characters (about 125 bits).
pub fn new_id() -> Result<String, crate::StoreError> {
    random_id(ALPHABET, 21)
}

/// A new random UUID (version 4), for ids E2B's SDKs read as UUIDs (a build's).
pub fn new_uuid() -> Result<String, crate::StoreError> {
    let mut bytes = [0u8; 16];
    random_bytes(&mut bytes)?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// A new sandbox id: 24 lower-case letters and digits (about 124 bits), so that a host
/// name can carry it (`<port>-<id>.<domain>`, which clients lower-case).
pub fn new_sandbox_id() -> Result<String, crate::StoreError> {
    random_id(&ALPHABET[..36], 24)
}

/// `len` symbols of `alphabet` (at most 256), each equally likely.
fn random_id(alphabet: &[u8], len: usize) -> Result<String, crate::StoreError> {
    // The alphabet's size need not divide 256: values past its last whole multiple
    // would bias the first symbols, so they are drawn again.
    let size = alphabet.len();
    let bound = 256 - 256 % size;
    let mut id = String::with_capacity(len);
    let mut bytes = vec![0u8; len];
    random_bytes(&mut bytes)?;
    for byte in bytes {
        let mut value = usize::from(byte);
        while value >= bound {
            let mut one = [0u8; 1];
            random_bytes(&mut one)?;
            value = usize::from(one[0]);
        }
        id.push(char::from(alphabet[value % size]));
    }
    Ok(id)
}

/// Ids written by this process, in order.
static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// An id that sorts in writing order among ids of the same millisecond, for rows read
/// by time then id (the audit log, egress log positions): the time, a per-process
/// sequence number, then random characters so that ids of several servers never
/// collide.
pub(crate) fn ordered_id(now: i64) -> Result<String, crate::StoreError> {
    let seq = WRITTEN.fetch_add(1, Ordering::Relaxed);
    Ok(format!("{now:013}-{seq:012}-{}", &new_id()?[..8]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4() {
        let id = new_uuid().unwrap();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
        assert_ne!(id, new_uuid().unwrap());
    }

    #[test]
    fn ids_are_alphanumeric_and_distinct() {
        let a = new_id().unwrap();
        let b = new_id().unwrap();
        assert_eq!(a.len(), 21);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
    }

    #[test]
    fn sandbox_ids_are_lower_case_and_distinct() {
        let a = new_sandbox_id().unwrap();
        assert_eq!(a.len(), 24);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert_ne!(a, new_sandbox_id().unwrap());
    }
}
