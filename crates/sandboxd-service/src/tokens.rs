//! Single-use tokens for the streaming exec WebSocket, for browsers (which cannot set a
//! header on a WebSocket). A token names one sandbox and one caller, and dies after one
//! use or a minute.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sandboxd_core::model::Principal;

/// How long a token is good for.
pub const TOKEN_TTL: Duration = Duration::from_secs(60);
/// Outstanding tokens at most; past it, the organization holding the most loses its
/// oldest, so one organization cannot push out another's tokens.
const MAX_TOKENS: usize = 10_000;
/// Outstanding tokens of one organization at most; past it, its own oldest go.
const MAX_TOKENS_PER_ORG: usize = 1_000;

#[derive(Debug)]
struct Grant {
    principal: Principal,
    sandbox_id: String,
    expires: Instant,
}

/// The outstanding tokens.
#[derive(Debug, Default)]
pub struct ExecTokens(Mutex<HashMap<String, Grant>>);

impl ExecTokens {
    /// A new token for `principal` on `sandbox_id`; `None` if the OS has no randomness.
    pub fn issue(&self, principal: &Principal, sandbox_id: &str) -> Option<String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).ok()?;
        let token = base64_simd::URL_SAFE_NO_PAD.encode_to_string(bytes);
        let mut grants = self.0.lock().ok()?;
        let now = Instant::now();
        grants.retain(|_, grant| grant.expires > now);
        let org = &principal.organization_id;
        let of_org = |grants: &HashMap<String, Grant>, org: &str| {
            grants
                .values()
                .filter(|g| g.principal.organization_id == org)
                .count()
        };
        let mut evicting = None;
        if of_org(&grants, org) >= MAX_TOKENS_PER_ORG {
            evicting = Some(org.clone());
        } else if grants.len() >= MAX_TOKENS {
            let mut counts: HashMap<&str, usize> = HashMap::new();
            for grant in grants.values() {
                *counts.entry(&grant.principal.organization_id).or_default() += 1;
            }
            evicting = counts
                .into_iter()
                .max_by_key(|(_, count)| *count)
                .map(|(org, _)| org.to_owned());
        }
        if let Some(evicting) = evicting {
            let oldest = grants
                .iter()
                .filter(|(_, g)| g.principal.organization_id == evicting)
                .min_by_key(|(_, g)| g.expires)
                .map(|(t, _)| t.clone());
            if let Some(oldest) = oldest {
                grants.remove(&oldest);
            }
        }
        grants.insert(
            token.clone(),
            Grant {
                principal: principal.clone(),
                sandbox_id: sandbox_id.to_owned(),
                expires: now + TOKEN_TTL,
            },
        );
        Some(token)
    }

    /// Uses up a token: the caller it was issued to, if it is valid for `sandbox_id`.
    pub fn redeem(&self, token: &str, sandbox_id: &str) -> Option<Principal> {
        let grant = self.0.lock().ok()?.remove(token)?;
        (grant.expires > Instant::now() && grant.sandbox_id == sandbox_id)
            .then_some(grant.principal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandboxd_core::model::Role;

    fn principal() -> Principal {
        Principal {
            user_id: "u".into(),
            organization_id: "o".into(),
            role: Role::Owner,
            key_id: "k".into(),
            permissions: sandboxd_core::access::Permissions::all(),
            key_scopes: None,
            key_expires_at: None,
        }
    }

    #[test]
    fn one_organization_cannot_push_out_anothers_tokens() {
        let tokens = ExecTokens::default();
        let quiet = tokens.issue(&principal(), "sb").unwrap();
        let mut noisy = principal();
        noisy.organization_id = "noisy".into();
        for _ in 0..(MAX_TOKENS_PER_ORG + 50) {
            tokens.issue(&noisy, "sb").unwrap();
        }
        let held = tokens.0.lock().unwrap().len();
        assert_eq!(held, MAX_TOKENS_PER_ORG + 1);
        assert!(
            tokens.redeem(&quiet, "sb").is_some(),
            "the other's token stays"
        );
    }

    #[test]
    fn tokens_are_single_use_and_bound_to_a_sandbox() {
        let tokens = ExecTokens::default();
        let token = tokens.issue(&principal(), "sb").unwrap();
        assert!(
            tokens.redeem(&token, "other").is_none(),
            "wrong sandbox uses it up"
        );
        let token = tokens.issue(&principal(), "sb").unwrap();
        assert_eq!(tokens.redeem(&token, "sb"), Some(principal()));
        assert!(tokens.redeem(&token, "sb").is_none(), "second use");
        assert!(tokens.redeem("made-up", "sb").is_none());
    }
}
