//! `organization.*`, `member.*`, `apiKey.*` and `audit.list`: who may do what, and what was done.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// The organizations the caller belongs to, with their role in each.
    OrganizationAll {
        name: "organization.all", method: Get, names: Nothing, forwarded: false,
        tag: "organization", errors: [401],
        no_tool(super::ADMINISTRATION),
        request: none,
        response: list(OrganizationView),
    }

    /// Create an organization owned by the caller (owners only). The reply holds an owner
    /// key for it: keys belong to one organization.
    OrganizationCreate {
        name: "organization.create", method: Post, names: Nothing, forwarded: false,
        tag: "organization", errors: [400, 401, 403],
        no_tool(super::ADMINISTRATION),
        request: body(CreateOrganizationRequest),
        response: one(OrganizationCreated),
    }

    /// The members of the caller's organization (owners and admins see everyone, members
    /// themselves).
    MemberAll {
        name: "member.all", method: Get, names: Nothing, forwarded: false,
        tag: "member", errors: [401],
        no_tool(super::ADMINISTRATION),
        request: none,
        response: list(MemberView),
    }

    /// Add a user to the organization with a role, permissions and access lists
    /// (`organization:admin`; only owners add owners and admins).
    MemberCreate {
        name: "member.create", method: Post, names: Nothing, forwarded: false,
        tag: "member", errors: [400, 401, 403],
        no_tool(super::ADMINISTRATION),
        request: body(CreateMemberRequest),
        response: one(MemberView),
    }

    /// Change a member's role, permissions or access lists; what is given replaces what
    /// was there.
    MemberUpdate {
        name: "member.update", method: Post, names: Nothing, forwarded: false,
        tag: "member", errors: [400, 401, 403, 404, 409],
        no_tool(super::ADMINISTRATION),
        request: body(UpdateMemberRequest),
        response: one(MemberView),
    }

    /// Remove a member; their keys stop working at once.
    MemberRemove {
        name: "member.remove", method: Post, names: Nothing, forwarded: false,
        tag: "member", errors: [400, 401, 403, 404, 409],
        no_tool(super::ADMINISTRATION),
        request: body(UserIdBody),
        response: plain(bool),
    }

    /// The caller's API keys (every key of the organization for owners and admins),
    /// without the keys themselves.
    ApiKeyAll {
        name: "apiKey.all", method: Get, names: Nothing, forwarded: false,
        tag: "apiKey", errors: [401],
        no_tool(super::ADMINISTRATION),
        request: none,
        response: list(ApiKeyView),
    }

    /// Create an API key, optionally narrowed to scopes and with an expiry. The reply is
    /// the only time the key is shown.
    ApiKeyCreate {
        name: "apiKey.create", method: Post, names: Nothing, forwarded: false,
        tag: "apiKey", errors: [400, 401, 403, 404],
        no_tool(super::ADMINISTRATION),
        request: body(CreateApiKeyRequest),
        response: one(ApiKeyCreated),
    }

    /// The key making this request: its name, scopes and expiry, the caller's role, and
    /// what the key may do.
    ApiKeyCurrent {
        name: "apiKey.current", method: Get, names: Nothing, forwarded: false,
        tag: "apiKey", errors: [401],
        no_tool(super::ADMINISTRATION),
        request: none,
        response: one(CurrentKeyView),
    }

    /// Revoke an API key; the next request with it is refused.
    ApiKeyRevoke {
        name: "apiKey.revoke", method: Post, names: Nothing, forwarded: false,
        tag: "apiKey", errors: [400, 401, 403, 404],
        no_tool(super::ADMINISTRATION),
        request: body(KeyIdBody),
        response: one(ApiKeyView),
    }

    /// The organization's audit log, newest first, filtered and paged
    /// (`organization:admin`).
    AuditList {
        name: "audit.list", method: Get, names: Nothing, forwarded: false,
        tag: "audit", errors: [400, 401, 403],
        no_tool(super::ADMINISTRATION),
        request: query(AuditQuery),
        response: one(AuditPageView),
    }
}
