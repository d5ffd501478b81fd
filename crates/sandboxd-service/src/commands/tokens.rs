//! Single-use tokens for the WebSockets, for browsers (which cannot set a header on a
//! WebSocket). A token names one sandbox and the key it was issued for, and dies after
//! one use or a minute. The store keeps a hash of each, so any replica redeems it.

use std::time::Duration;

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::model::Principal;
use tracing::warn;

use super::Commands;
use crate::{ServiceError, now_ms};

/// How long a token is good for.
pub(crate) const TOKEN_TTL: Duration = Duration::from_secs(60);

impl Commands {
    /// Issues a single-use token for the WebSockets of a sandbox of the caller's;
    /// returns it with its expiry (epoch ms).
    pub async fn exec_token(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<(String, i64), ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|_| ServiceError::Unavailable("no randomness available".into()))?;
        let token = base64_simd::URL_SAFE_NO_PAD.encode_to_string(bytes);
        let now = now_ms();
        let expires_at = now + TOKEN_TTL.as_millis() as i64;
        self.service
            .store()
            .issue_session_token(
                &token,
                &caller.organization_id,
                &caller.key_id,
                &sandbox.sandbox_id,
                expires_at,
                now,
            )
            .await?;
        Ok((token, expires_at))
    }

    /// The caller a WebSocket token was issued to, as its key stands now, using the
    /// token up.
    pub async fn redeem_exec_token(&self, token: &str, sandbox_id: &str) -> Option<Principal> {
        let redeemed = self
            .service
            .store()
            .redeem_session_token(token, sandbox_id, now_ms())
            .await;
        let key_id = match redeemed {
            Ok(key_id) => key_id?,
            Err(error) => {
                warn!(error = %sandboxd_core::error::chain(&error), "cannot redeem a WebSocket token");
                return None;
            }
        };
        match self.service.store().principal_of_key(&key_id).await {
            Ok(principal) => principal,
            Err(error) => {
                warn!(error = %sandboxd_core::error::chain(&error), "cannot read the key of a WebSocket token");
                None
            }
        }
    }
}
