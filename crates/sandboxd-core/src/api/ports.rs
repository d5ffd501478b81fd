//! Ports of a sandbox exposed as preview URLs.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `sandbox.exposePort`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExposePortRequest {
    pub sandbox_id: String,
    /// The port inside the sandbox (an app listening on `127.0.0.1:<port>` there).
    #[schema(minimum = 1, maximum = 65535)]
    pub port: i64,
    /// Open to anyone with the URL, without a key or link (default: private, the
    /// answer's URL carrying a signed link).
    #[serde(default)]
    pub public: bool,
    /// How long the port stays reachable without a key, 1 s–7 days (default 1 h);
    /// never longer than the key that exposes it.
    #[schema(minimum = 1, maximum = 604800)]
    pub ttl_seconds: Option<u64>,
}

/// Body of `sandbox.unexposePort`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PortRequest {
    pub sandbox_id: String,
    #[schema(minimum = 1, maximum = 65535)]
    pub port: i64,
}

/// An exposed port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExposedPortView {
    pub port: u16,
    pub public: bool,
    /// The preview's address: for a private port, a signed link (its token is good
    /// until `expiresAt`, then the browser that opened it keeps a cookie for the
    /// preview only); a key or a dashboard session reaches it without the token.
    pub url: String,
    /// RFC 3339.
    pub expires_at: String,
    /// RFC 3339.
    pub created_at: String,
}

/// Result of `sandbox.unexposePort`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnexposedView {
    pub port: u16,
    /// Whether the port was exposed (its links and public access are gone now).
    pub removed: bool,
}
