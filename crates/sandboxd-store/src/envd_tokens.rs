//! The access tokens of E2B's in-sandbox daemon: one per sandbox and API key, derived
//! from the master key, so nothing is stored and every replica derives the same:
//! `<key id>.<keyed hash of the sandbox and the key>`. A token acts as its key stands
//! when it is used (revoking the key ends it) and for its one sandbox only.
//!
//! Tokens are checked in constant time.

use crate::Store;

impl Store {
    /// The token of `key_id` for `sandbox_id`.
    pub fn envd_token(&self, sandbox_id: &str, key_id: &str) -> String {
        let proof = self
            .secrets
            .key_hash(&format!("sandboxd e2b envd\0{sandbox_id}\0{key_id}"));
        format!("{key_id}.{proof}")
    }

    /// The key a token was derived for, when it is a token of `sandbox_id`.
    pub fn envd_token_key(&self, sandbox_id: &str, token: &str) -> Option<String> {
        let (key_id, _) = token.rsplit_once('.')?;
        let expected = self.envd_token(sandbox_id, key_id);
        same_token(&expected, token).then(|| key_id.to_owned())
    }
}

/// Whether two tokens are the same, compared in constant time.
pub(crate) fn same_token(expected: &str, given: &str) -> bool {
    expected.len() == given.len()
        && expected
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}
