//! Signed file URLs, as E2B's SDKs make them (`download_url`, `upload_url`): a URL of
//! the daemon's `/files` that works without any header, carrying
//! `signature = "v1_" + base64(sha256("<path>:<read|write>:<user>:<access token>[:<expiry>]"))`
//! (unpadded) and, when it expires, `signature_expiration` in Unix seconds. The access
//! token is the only secret in it, so a signature proves its maker held the token.
//!
//! `signer` finds which of a set of tokens made a signature, unless it expired.

use base64_simd::STANDARD_NO_PAD;
use sha2::{Digest, Sha256};

/// What a signed URL may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOperation {
    Read,
    Write,
}

impl FileOperation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// What a signed URL carries, read from its query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedFileUrl<'a> {
    /// The path as the URL names it (`?path=`), before it is resolved.
    pub path: &'a str,
    pub operation: FileOperation,
    /// `?username=`; empty when absent.
    pub user: &'a str,
    pub signature: &'a str,
    /// `?signature_expiration=`.
    pub expires_at_s: Option<i64>,
}

/// Why a signed URL is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureRefusal {
    Expired,
    Invalid,
    /// Made for another user than the sandbox's.
    OtherUser,
}

/// The users a signed URL may be made for: none named, or the sandbox's (`user`).
///
/// The message signed is E2B's, `<path>:<operation>:<user>:<token>[:<expiry>]`, and a
/// path may hold `:`. With the user one of these it reads back one way only: the token
/// holds no `:` and always a `.` (an expiry is digits alone), so the end is found; then
/// `:read:`, `:write:`, `:read:user` and `:write:user` are told apart by their last
/// characters, and what is before is the path. A read URL of `/tmp/a:write:b` is then
/// no write URL of `/tmp/a` for a user `b:read:`: that user is refused.
pub const SIGNED_USERS: [&str; 2] = ["", "user"];

/// The signature of a file URL made with `token`.
pub fn file_signature(
    path: &str,
    operation: FileOperation,
    user: &str,
    token: &str,
    expires_at_s: Option<i64>,
) -> String {
    let raw = match expires_at_s {
        Some(at) => format!("{path}:{}:{user}:{token}:{at}", operation.as_str()),
        None => format!("{path}:{}:{user}:{token}", operation.as_str()),
    };
    format!(
        "v1_{}",
        STANDARD_NO_PAD.encode_to_string(Sha256::digest(raw.as_bytes()))
    )
}

impl SignedFileUrl<'_> {
    /// Which of `tokens` signed this URL (compared in constant time), if it has not
    /// expired at `now_s`.
    pub fn signer<'t>(
        &self,
        tokens: impl IntoIterator<Item = &'t str>,
        now_s: i64,
    ) -> Result<&'t str, SignatureRefusal> {
        if !SIGNED_USERS.contains(&self.user) {
            return Err(SignatureRefusal::OtherUser);
        }
        if self.expires_at_s.is_some_and(|at| at < now_s) {
            return Err(SignatureRefusal::Expired);
        }
        tokens
            .into_iter()
            .find(|token| {
                let expected = file_signature(
                    self.path,
                    self.operation,
                    self.user,
                    token,
                    self.expires_at_s,
                );
                same(expected.as_bytes(), self.signature.as_bytes())
            })
            .ok_or(SignatureRefusal::Invalid)
    }
}

/// Equal bytes, compared without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_e2bs_v1_hash_of_the_path_operation_user_and_token() {
        // What E2B's Python SDK (2.63.0) computes for the same inputs.
        assert_eq!(
            file_signature("a.txt", FileOperation::Read, "", "tok", None),
            "v1_gDv73H8R9a10OdCSX0/JNMqMYLPpmCQAYJY+U68oQjM"
        );
        assert_ne!(
            file_signature("a.txt", FileOperation::Write, "", "tok", None),
            file_signature("a.txt", FileOperation::Read, "", "tok", None)
        );
    }

    #[test]
    fn a_read_url_of_a_path_with_colons_is_no_write_url() {
        let token = "key_1.abc";
        let read = file_signature("/tmp/a:write:b", FileOperation::Read, "", token, None);
        // The same bytes signed, read as a write of `/tmp/a` for the user `b:read:`.
        assert_eq!(
            read,
            file_signature("/tmp/a", FileOperation::Write, "b:read:", token, None)
        );
        let forged = SignedFileUrl {
            path: "/tmp/a",
            operation: FileOperation::Write,
            user: "b:read:",
            signature: &read,
            expires_at_s: None,
        };
        assert_eq!(forged.signer([token], 0), Err(SignatureRefusal::OtherUser));
        let honest = SignedFileUrl {
            path: "/tmp/a:write:b",
            operation: FileOperation::Read,
            user: "",
            signature: &read,
            expires_at_s: None,
        };
        assert_eq!(honest.signer([token], 0), Ok(token));
    }

    #[test]
    fn the_signer_is_found_among_the_tokens_until_the_url_expires() {
        let signature = file_signature("/f", FileOperation::Write, "user", "b", Some(100));
        let url = SignedFileUrl {
            path: "/f",
            operation: FileOperation::Write,
            user: "user",
            signature: &signature,
            expires_at_s: Some(100),
        };
        assert_eq!(url.signer(["a", "b"], 100), Ok("b"));
        assert_eq!(url.signer(["a"], 100), Err(SignatureRefusal::Invalid));
        assert_eq!(url.signer(["b"], 101), Err(SignatureRefusal::Expired));
        let other_path = SignedFileUrl {
            path: "/g",
            ..url.clone()
        };
        assert_eq!(other_path.signer(["b"], 0), Err(SignatureRefusal::Invalid));
        let read = SignedFileUrl {
            operation: FileOperation::Read,
            ..url
        };
        assert_eq!(read.signer(["b"], 0), Err(SignatureRefusal::Invalid));
    }
}
