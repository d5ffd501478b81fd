//! Which API key opened each MCP session. Every session is opened through the
//! authenticating middleware, which records its key; afterwards only that key may use
//! it. A session this map does not know (never opened here, or forgotten past the cap)
//! is refused, never adopted.
//!
//! Another key naming a session gets 404.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sandboxd_core::api::ErrorBody;

/// The header that names an MCP session (streamable HTTP).
pub const SESSION_HEADER: &str = "mcp-session-id";
/// Sessions remembered at most; past it, the oldest are forgotten (and refused).
const MAX_SESSIONS: usize = 100_000;

/// Session id → the key id that opened it.
#[derive(Debug, Default)]
pub struct SessionKeys(Mutex<Bindings>);

#[derive(Debug, Default)]
struct Bindings {
    keys: HashMap<String, String>,
    order: VecDeque<String>,
}

impl SessionKeys {
    /// Records that `key_id` opened `session`.
    pub fn bind(&self, session: &str, key_id: &str) {
        let mut bindings = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if bindings
            .keys
            .insert(session.to_owned(), key_id.to_owned())
            .is_none()
        {
            bindings.order.push_back(session.to_owned());
        }
        while bindings.keys.len() > MAX_SESSIONS {
            let Some(oldest) = bindings.order.pop_front() else {
                break;
            };
            bindings.keys.remove(&oldest);
        }
    }

    /// Whether `session` was opened by `key_id`.
    pub fn belongs_to(&self, session: &str, key_id: &str) -> bool {
        let bindings = self.0.lock().unwrap_or_else(|e| e.into_inner());
        bindings
            .keys
            .get(session)
            .is_some_and(|owner| owner == key_id)
    }

    /// Forgets a session that was closed.
    pub fn end(&self, session: &str) {
        let mut bindings = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if bindings.keys.remove(session).is_some() {
            bindings.order.retain(|s| s != session);
        }
    }
}

/// The answer to a request naming a session its key did not open.
pub fn unknown_session() -> Response {
    let body = ErrorBody {
        code: "NOT_FOUND".into(),
        message: "session not found".into(),
        issues: vec![],
    };
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_to_the_key_that_opened_it() {
        let sessions = SessionKeys::default();
        sessions.bind("s1", "k1");
        assert!(sessions.belongs_to("s1", "k1"));
        assert!(!sessions.belongs_to("s1", "k2"));
        assert!(!sessions.belongs_to("unknown", "k1"));
        sessions.end("s1");
        assert!(!sessions.belongs_to("s1", "k1"));
    }
}
