//! `sandbox.requestEgress`, `egress.requests`, `egress.decide`: a sandbox's user asks
//! for one more host, someone allowed to decide approves or denies it.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::egress_requests::EgressRequestRecord;

/// Body of `sandbox.requestEgress`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestEgressRequest {
    pub sandbox_id: String,
    /// The entry wanted, as in `egress.allow`: a host name or `*.` wildcard, with an
    /// optional `:port` (80 and 443 otherwise).
    pub host: String,
    /// Why, for whoever decides (at most 500 characters).
    pub reason: Option<String>,
}

/// Query of `egress.requests`.
#[derive(
    Debug, Clone, Default, Deserialize, Serialize, ToSchema, IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct EgressRequestsQuery {
    /// `pending` (default: those of running sandboxes, waiting for a decision) or
    /// `all` (the latest 200, decided ones included).
    pub status: Option<String>,
    /// Only this sandbox's.
    pub sandbox_id: Option<String>,
}

/// Body of `egress.decide`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecideEgressRequest {
    pub request_id: String,
    /// `true` adds the host to the running sandbox's list at once; `false` denies it.
    pub approve: bool,
}

/// An egress request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressRequestView {
    pub request_id: String,
    pub sandbox_id: String,
    pub host: String,
    pub reason: Option<String>,
    /// `pending`, `approved` or `denied`.
    pub status: String,
    /// The user whose key asked.
    pub requested_by: String,
    pub requested_by_key_id: String,
    pub created_at: String,
    pub decided_at: Option<String>,
    pub decided_by: Option<String>,
    pub decided_by_key_id: Option<String>,
}

impl EgressRequestView {
    /// The view of a record; `format_time` renders epoch milliseconds as RFC 3339.
    pub fn from_record(record: &EgressRequestRecord, format_time: impl Fn(i64) -> String) -> Self {
        Self {
            request_id: record.request_id.clone(),
            sandbox_id: record.sandbox_id.clone(),
            host: record.host.clone(),
            reason: record.reason.clone(),
            status: record.status.as_str().to_owned(),
            requested_by: record.requested_by_user.clone(),
            requested_by_key_id: record.requested_by_key.clone(),
            created_at: format_time(record.created_at),
            decided_at: record.decided_at.map(&format_time),
            decided_by: record.decided_by_user.clone(),
            decided_by_key_id: record.decided_by_key.clone(),
        }
    }
}
