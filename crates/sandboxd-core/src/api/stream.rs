//! Messages of the streaming exec WebSocket (`/sandbox-exec?sandboxId=…`), as the
//! reference protocol defines them.
//!
//! Its close codes are here too.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Client → server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ClientMessage {
    /// Run a command; one at a time per connection.
    Exec {
        cmd: String,
        cwd: Option<String>,
        env: Option<BTreeMap<String, String>>,
        timeout_ms: Option<u64>,
    },
}

/// Server → client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ServerMessage {
    /// Sent once the connection is authorized.
    Ready { sandbox_id: String },
    /// A chunk of standard output (whole UTF-8 characters).
    Stdout { data: String },
    /// A chunk of standard error (whole UTF-8 characters).
    Stderr { data: String },
    /// The command finished.
    Exit { exit_code: i64, timed_out: bool },
    /// A validation or runtime error; the connection stays open.
    Error { message: String },
}

/// Close codes of the streaming exec WebSocket.
pub mod close_code {
    /// No `sandboxId` in the query string.
    pub const NO_SANDBOX_ID: u16 = 4000;
    /// Missing, unknown, revoked or expired key or token; or, on an open session, its
    /// key was revoked, expired, or its member removed.
    pub const UNAUTHORIZED: u16 = 4001;
    /// The caller may not use this sandbox (or it does not exist), or no longer may.
    pub const FORBIDDEN: u16 = 4003;
    /// The session reached its maximum lifetime; open a new one.
    pub const SESSION_EXPIRED: u16 = 4008;
}

/// Result of `sandbox.execToken`: a single-use token for browsers, which cannot set
/// headers on a WebSocket, passed as `?token=` instead of the `x-api-key` header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecTokenView {
    pub token: String,
    pub sandbox_id: String,
    /// RFC 3339; the token is good for one connection until then.
    pub expires_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shapes_match_the_reference() {
        let exec: ClientMessage = serde_json::from_str(
            r#"{"type":"exec","cmd":"ls","cwd":"/tmp","env":{"A":"1"},"timeoutMs":60000}"#,
        )
        .unwrap();
        assert!(matches!(
            exec,
            ClientMessage::Exec {
                timeout_ms: Some(60000),
                ..
            }
        ));
        assert!(serde_json::from_str::<ClientMessage>(r#"{"type":"rm"}"#).is_err());
        let exit = serde_json::to_string(&ServerMessage::Exit {
            exit_code: 0,
            timed_out: false,
        })
        .unwrap();
        assert_eq!(exit, r#"{"type":"exit","exitCode":0,"timedOut":false}"#);
        let ready = serde_json::to_string(&ServerMessage::Ready {
            sandbox_id: "s".into(),
        })
        .unwrap();
        assert_eq!(ready, r#"{"type":"ready","sandboxId":"s"}"#);
    }
}
