//! The mark of a forwarded request: which replica sent it and when, under an HMAC keyed
//! by the installation's master key (which every replica has and no client does), over
//! the method, the path with its query, and the body's digest when the body was read
//! before forwarding. A request that carries the mark without a valid one is refused:
//! only a replica may say it forwarded a request, since that decides where it is
//! served.

use sandboxd_store::SecretBox;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// How far a mark's time may be from this replica's clock.
const SKEW_MS: i64 = 60_000;

/// The body part of a mark when the body is streamed on unread.
pub const STREAMED: &str = "streamed";

/// The digest of a body read before forwarding.
pub fn body_digest(body: &[u8]) -> String {
    hex(&Sha256::digest(body))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn message(replica: &str, at_ms: i64, method: &str, target: &str, body: &str) -> String {
    format!("sandboxd forwarded v1\0{replica}\0{at_ms}\0{method}\0{target}\0{body}")
}

/// The header value: `v1 <replica> <ms> <mac>`.
pub fn mark(
    secrets: &SecretBox,
    replica: &str,
    at_ms: i64,
    method: &str,
    target: &str,
    body: &str,
) -> String {
    let mac = secrets.key_hash(&message(replica, at_ms, method, target, body));
    format!("v1 {replica} {at_ms} {mac}")
}

/// Why a mark was refused (logged, never shown in full to the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Malformed,
    Stale,
    Forged,
}

/// Checks a mark against the request it came with; the sending replica's id when valid.
pub fn verify<'a>(
    secrets: &SecretBox,
    value: &'a str,
    now_ms: i64,
    method: &str,
    target: &str,
    body: &str,
) -> Result<&'a str, Refused> {
    let mut parts = value.split(' ');
    let (Some("v1"), Some(replica), Some(at), Some(mac), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(Refused::Malformed);
    };
    let at_ms: i64 = at.parse().map_err(|_| Refused::Malformed)?;
    if now_ms.abs_diff(at_ms) > SKEW_MS.unsigned_abs() {
        return Err(Refused::Stale);
    }
    let expected = secrets.key_hash(&message(replica, at_ms, method, target, body));
    if bool::from(expected.as_bytes().ct_eq(mac.as_bytes())) {
        Ok(replica)
    } else {
        Err(Refused::Forged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(byte: u8) -> SecretBox {
        SecretBox::from_master(&[byte; 32]).unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn a_mark_holds_only_for_its_request_its_key_and_its_time() {
        let box_a = secrets(1);
        let now = 1_000_000;
        let body = body_digest(b"{}");
        let value = mark(&box_a, "r1", now, "POST", "/api/sandbox.exec", &body);
        let check = |secrets: &SecretBox, value: &str, at: i64, method, target, body: &str| {
            verify(secrets, value, at, method, target, body).map(str::to_owned)
        };
        assert_eq!(
            check(&box_a, &value, now + 5, "POST", "/api/sandbox.exec", &body),
            Ok("r1".to_owned())
        );
        let other_body = body_digest(b"{\"x\":1}");
        for (secrets, at, method, target, body) in [
            (&secrets(2), now, "POST", "/api/sandbox.exec", body.as_str()),
            (&box_a, now, "GET", "/api/sandbox.exec", body.as_str()),
            (&box_a, now, "POST", "/api/sandbox.writeFile", body.as_str()),
            (
                &box_a,
                now,
                "POST",
                "/api/sandbox.exec",
                other_body.as_str(),
            ),
        ] {
            assert_eq!(
                check(secrets, &value, at, method, target, body),
                Err(Refused::Forged)
            );
        }
        assert_eq!(
            check(
                &box_a,
                &value,
                now + 61_000,
                "POST",
                "/api/sandbox.exec",
                &body
            ),
            Err(Refused::Stale)
        );
        assert_eq!(
            check(
                &box_a,
                &format!("v1 r1 {} ab", i64::MIN),
                now,
                "POST",
                "/x",
                &body
            ),
            Err(Refused::Stale)
        );
        for value in ["1", "v1 r1 x abc", "v1 r1 5 abc extra", ""] {
            assert_eq!(
                check(&box_a, value, now, "POST", "/x", &body),
                Err(Refused::Malformed)
            );
        }
    }
}
