//! Random identifiers.

use std::sync::atomic::{AtomicU64, Ordering};

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Fills `out` with random bytes from the operating system.
pub(crate) fn random_bytes(out: &mut [u8]) -> Result<(), crate::StoreError> {
    getrandom::fill(out).map_err(|_| crate::StoreError::Crypto)
}

/// A new random id of 21 alphanumeric characters (about 125 bits).
pub fn new_id() -> Result<String, crate::StoreError> {
    let mut bytes = [0u8; 21];
    random_bytes(&mut bytes)?;
    // 62 does not divide 256, so values past 247 would bias the first symbols; redraw them.
    let mut id = String::with_capacity(21);
    for byte in bytes {
        let mut value = byte;
        while value >= 248 {
            let mut one = [0u8; 1];
            random_bytes(&mut one)?;
            value = one[0];
        }
        id.push(ALPHABET[usize::from(value % 62)] as char);
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
    fn ids_are_alphanumeric_and_distinct() {
        let a = new_id().unwrap();
        let b = new_id().unwrap();
        assert_eq!(a.len(), 21);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
    }
}
