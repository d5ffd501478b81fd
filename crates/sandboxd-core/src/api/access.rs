//! Organizations, members, API keys and the audit log on the wire
//! (`/api/organization.*`, `/api/member.*`, `/api/apiKey.*`, `/api/audit.*`).

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::access::Permissions;
use crate::model::{ApiKey, AuditRecord, KeyFormat, Member, Organization, Role};

/// Body of `organization.create`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateOrganizationRequest {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
}

/// An organization the caller belongs to, with their role in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrganizationView {
    pub organization_id: String,
    pub name: String,
    pub role: Role,
    pub created_at: String,
}

impl OrganizationView {
    pub fn from_organization(org: &Organization, format_time: impl Fn(i64) -> String) -> Self {
        Self {
            organization_id: org.organization_id.clone(),
            name: org.name.clone(),
            role: org.role,
            created_at: format_time(org.created_at),
        }
    }
}

/// Result of `organization.create`: the organization, its default project, and an
/// owner key for it (keys belong to one organization).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrganizationCreated {
    pub organization: OrganizationView,
    pub api_key: ApiKeyCreated,
}

/// What a member is given: on `member.create` (absent: the default), on
/// `member.update` (absent: unchanged; a list given replaces the old one whole).
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberGrantsBody {
    /// `member` (default), `admin` or `owner`.
    pub role: Option<String>,
    /// Granted permissions (default `["service:read"]`): `service:create`,
    /// `service:read`, `service:delete`, `deployment:create`, `project:create`.
    pub permissions: Option<Vec<String>>,
    /// Projects the member may see and create sandboxes in.
    pub project_ids: Option<Vec<String>>,
    /// Sandboxes the member may see and use (creators get theirs automatically).
    pub sandbox_ids: Option<Vec<String>>,
    /// Remote servers the member may see and create sandboxes on.
    pub server_ids: Option<Vec<String>>,
}

/// Body of `member.create`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateMemberRequest {
    /// Display name of the new user.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    #[serde(flatten)]
    pub grants: MemberGrantsBody,
}

/// Body of `member.update`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateMemberRequest {
    pub user_id: String,
    #[serde(flatten)]
    pub grants: MemberGrantsBody,
}

/// Body of `member.remove`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserIdBody {
    pub user_id: String,
}

/// A member of the caller's organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberView {
    pub user_id: String,
    pub name: String,
    pub role: Role,
    /// What the member holds: every permission for owners and admins, the grants for
    /// members.
    pub permissions: Vec<String>,
    pub project_ids: Vec<String>,
    pub sandbox_ids: Vec<String>,
    pub server_ids: Vec<String>,
    pub created_at: String,
}

impl MemberView {
    pub fn from_member(member: &Member, format_time: impl Fn(i64) -> String) -> Self {
        Self {
            user_id: member.user_id.clone(),
            name: member.name.clone(),
            role: member.role,
            permissions: crate::access::effective(member.role, member.grants, None).names(),
            project_ids: member.project_ids.clone(),
            sandbox_ids: member.sandbox_ids.clone(),
            server_ids: member.server_ids.clone(),
            created_at: format_time(member.created_at),
        }
    }
}

/// Body of `apiKey.create`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateApiKeyRequest {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    /// Whose key (default: the caller). Creating a key for someone else is member
    /// management (`organization:admin`).
    pub user_id: Option<String>,
    /// Narrow the key to these permissions (a subset of the caller's); default: all the
    /// user holds.
    pub scopes: Option<Vec<String>>,
    /// The key stops working this long after creation (1 s – 10 years); default never.
    #[schema(minimum = 1000, maximum = 315360000000_i64)]
    pub expires_in_ms: Option<i64>,
    /// How the key is written: `sandboxd` (default, `sbx_…`) or `e2b` (`e2b_` and hex,
    /// the form E2B's SDKs check for). Either works everywhere alike.
    pub format: Option<KeyFormat>,
}

/// Body of `apiKey.revoke`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyIdBody {
    pub key_id: String,
}

/// An API key; the secret is never part of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyView {
    pub key_id: String,
    pub user_id: String,
    pub name: String,
    /// The first characters of the key, to recognise it.
    pub prefix: String,
    /// `null`: everything the user holds.
    pub scopes: Option<Vec<String>>,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
}

impl ApiKeyView {
    pub fn from_key(key: &ApiKey, format_time: impl Fn(i64) -> String) -> Self {
        Self {
            key_id: key.key_id.clone(),
            user_id: key.user_id.clone(),
            name: key.name.clone(),
            prefix: key.prefix.clone(),
            scopes: key.scopes.map(Permissions::names),
            created_at: format_time(key.created_at),
            expires_at: key.expires_at.map(&format_time),
            revoked_at: key.revoked_at.map(&format_time),
        }
    }
}

/// Result of `apiKey.current`: the key making the request and what it may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentKeyView {
    pub key: ApiKeyView,
    pub organization_id: String,
    /// The key's user's role in the organization.
    pub role: Role,
    /// What the key may do: the role's permissions (a member's grants) narrowed to the
    /// key's scopes.
    pub permissions: Vec<String>,
}

/// Result of `apiKey.create`: the only time the key itself is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyCreated {
    #[serde(flatten)]
    pub key: ApiKeyView,
    /// The key: send it as `x-api-key`. It is not stored and cannot be shown again.
    pub secret: String,
}

/// Query of `audit.list`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, IntoParams, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    pub resource_id: Option<String>,
    /// The user who acted.
    pub actor_id: Option<String>,
    /// e.g. `sandbox.create`, `apiKey.revoke`.
    pub action: Option<String>,
    /// RFC 3339, included.
    pub from: Option<String>,
    /// RFC 3339, excluded.
    pub to: Option<String>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
    /// 1–500 (default 100).
    pub limit: Option<u32>,
}

/// One entry of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntryView {
    pub audit_id: String,
    pub organization_id: String,
    /// `null` for what sandboxd did by itself (e.g. the reaper).
    pub actor_id: Option<String>,
    pub actor_key_id: Option<String>,
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    pub resource_name: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    pub created_at: String,
}

impl AuditEntryView {
    pub fn from_record(record: &AuditRecord, format_time: impl Fn(i64) -> String) -> Self {
        Self {
            audit_id: record.audit_id.clone(),
            organization_id: record.organization_id.clone(),
            actor_id: record.actor_user_id.clone(),
            actor_key_id: record.actor_key_id.clone(),
            action: record.action.clone(),
            resource_type: record.resource_type.clone(),
            resource_id: record.resource_id.clone(),
            resource_name: record.resource_name.clone(),
            metadata: record.metadata.clone(),
            created_at: format_time(record.created_at),
        }
    }
}

/// Result of `audit.list`: newest first.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditPageView {
    pub entries: Vec<AuditEntryView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}
