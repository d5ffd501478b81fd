//! Checks of the organization, member, key and audit requests.

use super::{display_name, required_id};
use crate::access::Permissions;
use crate::api::{
    AuditQuery, CreateApiKeyRequest, CreateMemberRequest, MemberGrantsBody, UpdateMemberRequest,
};
use crate::error::{Invalid, Issues};
use crate::model::{KeyFormat, MemberChanges, Role};

pub use crate::limits::{
    DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE, MAX_KEY_TTL_MS, MAX_LIST_IDS, MIN_KEY_TTL_MS,
};

/// A checked `member.create`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMember {
    pub name: String,
    pub changes: MemberChanges,
}

/// A checked `apiKey.create`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKey {
    pub name: String,
    pub user_id: Option<String>,
    pub scopes: Option<Permissions>,
    pub expires_in_ms: Option<i64>,
    pub format: KeyFormat,
}

/// A checked `audit.list`: times in epoch ms, the cursor decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditSelection {
    pub resource_id: Option<String>,
    pub actor_id: Option<String>,
    pub action: Option<String>,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub after: Option<(i64, String)>,
    pub limit: u32,
}

/// A display name (organization, member, key).
pub fn name(value: String) -> Result<String, Invalid> {
    let mut issues = Issues::default();
    display_name(&mut issues, "name", &value);
    issues.finish(value)
}

/// A user id alone.
pub fn user_id(value: String) -> Result<String, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "userId", &value);
    issues.finish(value)
}

/// A key id alone.
pub fn key_id(value: String) -> Result<String, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "keyId", &value);
    issues.finish(value)
}

fn role(issues: &mut Issues, value: Option<&str>) -> Option<Role> {
    let value = value?;
    let role = Role::parse(value);
    if role.is_none() {
        issues.push("role", "must be owner, admin or member");
    }
    role
}

fn permissions(
    issues: &mut Issues,
    field: &str,
    names: Option<&[String]>,
    within: Permissions,
) -> Option<Permissions> {
    let names = names?;
    match Permissions::parse(names) {
        Ok(set) if set.is_subset_of(within) => Some(set),
        Ok(_) => {
            issues.push(
                field,
                "organization:admin comes with the owner and admin roles",
            );
            None
        }
        Err(unknown) => {
            issues.push(
                field,
                format!(
                    "unknown permission {unknown:?}; known: {}",
                    Permissions::all().names().join(", ")
                ),
            );
            None
        }
    }
}

fn id_list(issues: &mut Issues, field: &str, ids: Option<Vec<String>>) -> Option<Vec<String>> {
    let mut ids = ids?;
    if ids.len() > MAX_LIST_IDS {
        issues.push(field, format!("holds at most {MAX_LIST_IDS} ids"));
    }
    for (i, id) in ids.iter().enumerate() {
        required_id(issues, &format!("{field}[{i}]"), id);
    }
    ids.sort();
    ids.dedup();
    Some(ids)
}

fn member_changes(issues: &mut Issues, grants: MemberGrantsBody) -> MemberChanges {
    MemberChanges {
        role: role(issues, grants.role.as_deref()),
        permissions: permissions(
            issues,
            "permissions",
            grants.permissions.as_deref(),
            Permissions::grantable(),
        ),
        project_ids: id_list(issues, "projectIds", grants.project_ids),
        sandbox_ids: id_list(issues, "sandboxIds", grants.sandbox_ids),
        server_ids: id_list(issues, "serverIds", grants.server_ids),
    }
}

/// Checks `member.create`.
pub fn create_member(req: CreateMemberRequest) -> Result<NewMember, Invalid> {
    let mut issues = Issues::default();
    display_name(&mut issues, "name", &req.name);
    let changes = member_changes(&mut issues, req.grants);
    issues.finish(NewMember {
        name: req.name,
        changes,
    })
}

/// Checks `member.update`.
pub fn update_member(req: UpdateMemberRequest) -> Result<(String, MemberChanges), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "userId", &req.user_id);
    let changes = member_changes(&mut issues, req.grants);
    issues.finish((req.user_id, changes))
}

/// Checks `apiKey.create`.
pub fn create_key(req: CreateApiKeyRequest) -> Result<NewKey, Invalid> {
    let mut issues = Issues::default();
    display_name(&mut issues, "name", &req.name);
    if let Some(user) = &req.user_id {
        required_id(&mut issues, "userId", user);
    }
    let scopes = permissions(
        &mut issues,
        "scopes",
        req.scopes.as_deref(),
        Permissions::all(),
    );
    if let Some(ttl) = req.expires_in_ms
        && !(MIN_KEY_TTL_MS..=MAX_KEY_TTL_MS).contains(&ttl)
    {
        issues.push(
            "expiresInMs",
            "must be between 1000 (1 second) and 315360000000 (10 years)",
        );
    }
    issues.finish(NewKey {
        name: req.name,
        user_id: req.user_id,
        scopes,
        expires_in_ms: req.expires_in_ms,
        format: req.format.unwrap_or_default(),
    })
}

/// The cursor of the page after the entry `(created_at, audit_id)`.
pub fn audit_cursor(created_at: i64, audit_id: &str) -> String {
    format!("{created_at}.{audit_id}")
}

/// Checks `audit.list`; `parse_time` reads RFC 3339 into epoch ms.
pub fn audit_query(
    req: AuditQuery,
    parse_time: impl Fn(&str) -> Option<i64>,
) -> Result<AuditSelection, Invalid> {
    let mut issues = Issues::default();
    let mut time = |field: &str, value: Option<&str>| {
        let value = value?;
        let parsed = parse_time(value);
        if parsed.is_none() {
            issues.push(field, "must be an RFC 3339 time, e.g. 2026-01-31T12:00:00Z");
        }
        parsed
    };
    let from = time("from", req.from.as_deref());
    let to = time("to", req.to.as_deref());
    let after = req.cursor.as_deref().and_then(|cursor| {
        let parsed = cursor
            .split_once('.')
            .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_owned())))
            .filter(|(_, id)| !id.is_empty() && id.len() <= 128);
        if parsed.is_none() {
            issues.push("cursor", "is not a cursor from a previous page");
        }
        parsed
    });
    let limit = req.limit.unwrap_or(DEFAULT_AUDIT_PAGE);
    if !(1..=MAX_AUDIT_PAGE).contains(&limit) {
        issues.push("limit", "must be between 1 and 500");
    }
    for (field, value) in [
        ("resourceId", &req.resource_id),
        ("actorId", &req.actor_id),
        ("action", &req.action),
    ] {
        if let Some(value) = value {
            required_id(&mut issues, field, value);
        }
    }
    issues.finish(AuditSelection {
        resource_id: req.resource_id,
        actor_id: req.actor_id,
        action: req.action,
        from,
        to,
        after,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_permissions_and_roles_are_named() {
        let error = create_member(CreateMemberRequest {
            name: "m".into(),
            grants: MemberGrantsBody {
                role: Some("root".into()),
                permissions: Some(vec!["service:read".into(), "sudo".into()]),
                ..Default::default()
            },
        })
        .unwrap_err();
        let paths: Vec<&str> = error.issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["role", "permissions"]);
        assert!(error.issues[1].message.contains("\"sudo\""));
    }

    #[test]
    fn members_cannot_be_granted_organization_admin() {
        assert!(
            create_member(CreateMemberRequest {
                name: "m".into(),
                grants: MemberGrantsBody {
                    permissions: Some(vec!["organization:admin".into()]),
                    ..Default::default()
                },
            })
            .is_err()
        );
    }

    #[test]
    fn key_expiry_is_bounded() {
        let key = |ttl| CreateApiKeyRequest {
            name: "k".into(),
            expires_in_ms: Some(ttl),
            ..Default::default()
        };
        let refused = create_key(key(1)).unwrap_err().to_string();
        // The message states the bounds the check uses.
        assert!(
            refused.contains(&format!("between {MIN_KEY_TTL_MS} ")),
            "{refused}"
        );
        assert!(
            refused.contains(&format!("and {MAX_KEY_TTL_MS} ")),
            "{refused}"
        );
        assert!(create_key(key(MIN_KEY_TTL_MS)).is_ok());
        assert!(create_key(key(MAX_KEY_TTL_MS)).is_ok());
        assert!(create_key(key(MAX_KEY_TTL_MS + 1)).is_err());
    }

    #[test]
    fn audit_cursors_round_trip_and_bad_times_are_rejected() {
        let selection = audit_query(
            AuditQuery {
                cursor: Some(audit_cursor(42, "abc")),
                ..Default::default()
            },
            |_| None,
        )
        .unwrap();
        assert_eq!(selection.after, Some((42, "abc".into())));
        assert_eq!(selection.limit, DEFAULT_AUDIT_PAGE);
        let error = audit_query(
            AuditQuery {
                from: Some("yesterday".into()),
                cursor: Some("nonsense".into()),
                limit: Some(0),
                ..Default::default()
            },
            |_| None,
        )
        .unwrap_err();
        assert_eq!(error.issues.len(), 3);
    }
}
