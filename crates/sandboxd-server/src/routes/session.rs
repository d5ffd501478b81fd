//! Who a WebSocket session acts for, proven again while it lasts: before each command
//! and every second in between. A session ends, with a close code, when its key is
//! revoked or expires, its member is removed or loses the grant to use the sandbox, or
//! it reaches its maximum lifetime. Sessions opened with a browser token are checked
//! against the key the token was issued for.
//!
//! `SessionAuth` proves the caller at open (a key, or a browser token and its key).

use std::time::{Duration, Instant};

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::stream::close_code;
use sandboxd_core::model::Principal;
use tracing::warn;

use axum::extract::ws::{CloseFrame, Message, WebSocket};

use crate::AppState;
use crate::service::ServiceError;

/// How often an open session proves its caller again.
pub const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// What a session proves its caller with.
#[derive(Debug)]
enum Proof {
    /// The API key it connected with.
    Key(String),
    /// The id of the key a browser token was issued for.
    KeyId(String),
    /// The secret of the dashboard session it was opened in.
    Dashboard(String),
}

/// What a WebSocket's request brought to prove its caller, from its headers: an API
/// key, or a dashboard session cookie sent from this server's own pages.
#[derive(Debug, Default)]
pub struct Credentials {
    key: Option<String>,
    dashboard: Option<String>,
}

impl Credentials {
    pub fn of(headers: &axum::http::HeaderMap) -> Self {
        Self {
            key: crate::auth::token_from(headers).map(str::to_owned),
            dashboard: crate::auth::same_origin(headers)
                .then(|| crate::auth::session_from(headers).map(str::to_owned))
                .flatten(),
        }
    }
}

/// Why a session ends: its close code and reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    pub code: u16,
    pub reason: &'static str,
}

const KEY_GONE: Ended = Ended {
    code: close_code::UNAUTHORIZED,
    reason: "the key is no longer valid",
};
const NOT_ALLOWED: Ended = Ended {
    code: close_code::FORBIDDEN,
    reason: "not authorized for this sandbox",
};
const LIFETIME: Ended = Ended {
    code: close_code::SESSION_EXPIRED,
    reason: "the session reached its maximum lifetime",
};

/// The caller of one session on one sandbox.
#[derive(Debug)]
pub struct SessionAuth {
    proof: Proof,
    sandbox_id: String,
    opened: Instant,
    max_lifetime: Duration,
    caller: Principal,
}

impl SessionAuth {
    /// Authorizes a new session: by its key (counted against the key's rate limit), or
    /// by a single-use token whose key is still valid. The caller must be allowed to use
    /// the sandbox.
    pub async fn open(
        state: &AppState,
        credentials: &Credentials,
        token: Option<&str>,
        sandbox_id: &str,
    ) -> Result<Self, Ended> {
        let unauthorized = Ended {
            code: close_code::UNAUTHORIZED,
            reason: "unauthorized",
        };
        let (proof, caller) = match (credentials.key.as_deref(), token) {
            (Some(key), _) => {
                let caller = crate::auth::principal(state, key)
                    .await
                    .map_err(|_| unauthorized)?;
                (Proof::Key(key.to_owned()), caller)
            }
            (None, Some(token)) => {
                let issued = state
                    .service
                    .commands()
                    .redeem_exec_token(token, sandbox_id)
                    .await
                    .ok_or(unauthorized)?;
                (Proof::KeyId(issued.key_id.clone()), issued)
            }
            (None, None) => {
                let secret = credentials.dashboard.as_deref().ok_or(unauthorized)?;
                let caller = crate::auth::session_caller(state, secret)
                    .await
                    .ok()
                    .flatten()
                    .ok_or(unauthorized)?;
                (Proof::Dashboard(secret.to_owned()), caller)
            }
        };
        let mut auth = Self {
            proof,
            sandbox_id: sandbox_id.to_owned(),
            opened: Instant::now(),
            max_lifetime: state.sessions.max_lifetime,
            caller,
        };
        auth.check(state).await.map_err(|ended| {
            if ended == KEY_GONE {
                unauthorized
            } else {
                ended
            }
        })?;
        Ok(auth)
    }

    /// The caller as of the last check.
    pub fn caller(&self) -> &Principal {
        &self.caller
    }

    /// Proves the caller again: the key still valid, the grant still held, the
    /// lifetime not reached. A failure of the store itself does not end the session.
    pub async fn check(&mut self, state: &AppState) -> Result<&Principal, Ended> {
        if self.opened.elapsed() >= self.max_lifetime {
            return Err(LIFETIME);
        }
        let store = state.service.store();
        let current = match &self.proof {
            Proof::Key(key) => store.authenticate(key.trim()).await,
            Proof::KeyId(key_id) => store.principal_of_key(key_id).await,
            Proof::Dashboard(secret) => match crate::auth::session_caller(state, secret).await {
                Ok(caller) => Ok(caller),
                Err(_) => return Ok(&self.caller),
            },
        };
        let caller = match current {
            Ok(Some(caller)) if caller.user_id == self.caller.user_id => caller,
            Ok(_) => return Err(KEY_GONE),
            Err(error) => {
                warn!(error = %sandboxd_core::error::chain(&error), "cannot check a session's key; keeping it open");
                return Ok(&self.caller);
            }
        };
        match state
            .service
            .access()
            .sandbox_for(&caller, &self.sandbox_id, SandboxNeed::Use)
            .await
        {
            Ok(_) => {}
            Err(ServiceError::NotFound(_) | ServiceError::Forbidden(_)) => {
                return Err(NOT_ALLOWED);
            }
            Err(error) => {
                warn!(error = %sandboxd_core::error::chain(&error), "cannot check a session's grant; keeping it open");
            }
        }
        self.caller = caller;
        Ok(&self.caller)
    }
}

/// Closes a WebSocket with `code` and `reason`.
pub async fn close(mut socket: WebSocket, code: u16, reason: &str) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
}

/// Sends `value` as a text message; whether it went.
pub async fn send_json(socket: &mut WebSocket, value: serde_json::Value) -> bool {
    socket
        .send(Message::Text(value.to_string().into()))
        .await
        .is_ok()
}

/// Authorizes a WebSocket for the sandbox its query names: the socket, the sandbox id
/// and the session; `None` once the socket was closed with the code that says why.
pub async fn accept(
    socket: WebSocket,
    state: &AppState,
    sandbox_id: Option<String>,
    credentials: &Credentials,
    token: Option<&str>,
) -> Option<(WebSocket, String, SessionAuth)> {
    let Some(sandbox_id) = sandbox_id.filter(|id| !id.is_empty()) else {
        close(socket, close_code::NO_SANDBOX_ID, "sandboxId is required").await;
        return None;
    };
    match SessionAuth::open(state, credentials, token, &sandbox_id).await {
        Ok(auth) => Some((socket, sandbox_id, auth)),
        Err(ended) => {
            close(socket, ended.code, ended.reason).await;
            None
        }
    }
}

/// How long WebSocket and dashboard sessions may last, and whether the dashboard's
/// cookie is marked `Secure`.
#[derive(Debug, Clone, Copy)]
pub struct SessionSettings {
    pub max_lifetime: Duration,
    pub cookie_secure: CookieSecure,
}

/// Whether the dashboard's session cookie carries `Secure` (sent over HTTPS only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CookieSecure {
    /// Always: for a server reached only over HTTPS (behind a TLS proxy).
    Always,
    /// Never: for plain HTTP on a trusted network or loopback.
    Never,
    /// When the request says it came over HTTPS (`X-Forwarded-Proto: https` from a
    /// proxy). A client can send that header itself, so a server behind TLS should say
    /// `Always`.
    #[default]
    Auto,
}
