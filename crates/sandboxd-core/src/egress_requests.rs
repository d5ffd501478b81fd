//! Asking for a host and deciding: what an egress request is, who may decide it, and
//! the list an approval leaves the sandbox with.
//!
//! `check_decider`: deciding needs `egress:decide`, never with the key that asked, nor by
//! the asker's user unless an owner or admin with a key holding `organization:admin`.
//! `approved_list` is the list an approval leaves. `check_list_change`: narrowing a list
//! is free, adding needs `egress:decide` (`ListChange::NarrowOnly` for the MCP tool);
//! `check_list_given` for a create's own list.

use crate::access::{self, Denied};
use crate::egress::{MAX_ALLOWED, Policy};
use crate::model::Principal;
use crate::permissions::Permission;

/// Requests one sandbox may have waiting at once.
pub const MAX_PENDING_PER_SANDBOX: usize = 20;
/// The longest reason kept, in characters.
pub const MAX_REASON: usize = 500;

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestStatus {
    Pending,
    Approved,
    Denied,
}

impl RequestStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pending" => Some(Self::Pending),
            "approved" => Some(Self::Approved),
            "denied" => Some(Self::Denied),
            _ => None,
        }
    }
}

/// A request for a sandbox to reach one more host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRequestRecord {
    pub request_id: String,
    pub organization_id: String,
    pub sandbox_id: String,
    /// The entry asked for, as the policy keeps it (`api.example.com`,
    /// `*.example.com:8443`).
    pub host: String,
    pub reason: Option<String>,
    pub status: RequestStatus,
    pub requested_by_user: String,
    pub requested_by_key: String,
    pub created_at: i64,
    pub decided_at: Option<i64>,
    pub decided_by_user: Option<String>,
    pub decided_by_key: Option<String>,
}

/// Whether `caller` may decide `request` (its sandbox's access is checked apart): it
/// needs `egress:decide`, a request is never decided with the key that made it, and it
/// is decided by another user than the one who asked, unless that user is an owner or
/// an admin acting deliberately: with a key that holds `organization:admin` (an agent's
/// key narrowed from theirs does not).
pub fn check_decider(caller: &Principal, request: &EgressRequestRecord) -> Result<(), Denied> {
    access::require(caller, Permission::EgressDecide)?;
    if caller.key_id == request.requested_by_key {
        return Err(Denied::Rule(
            "a request is decided with another key than the one that made it",
        ));
    }
    if caller.user_id == request.requested_by_user && !acts_as_administrator(caller) {
        return Err(Denied::Rule(
            "a request is decided by another user than the one who asked (or by an owner or admin with a key that holds organization:admin)",
        ));
    }
    Ok(())
}

/// An owner or admin whose key holds the administrator's permission.
fn acts_as_administrator(caller: &Principal) -> bool {
    access::sees_everything(caller.role)
        && caller.permissions.contains(Permission::OrganizationAdmin)
}

/// What a change of a sandbox's list may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListChange {
    /// Add entries, for a caller holding `egress:decide`.
    MayWiden,
    /// Only remove entries, whoever calls (the MCP tool an agent holds).
    NarrowOnly,
}

/// The entries of `wanted` that `current` does not hold (both as the policy keeps them:
/// a changed entry, `a.example` to `*.example`, is an added one).
pub fn added<'a>(current: &[String], wanted: &'a [String]) -> Vec<&'a str> {
    wanted
        .iter()
        .filter(|entry| !current.contains(entry))
        .map(String::as_str)
        .collect()
}

/// Whether `caller` may change a sandbox's list from `current` to `wanted`: narrowing is
/// free; adding needs `egress:decide` (the approval loop's permission), and is refused
/// outright where only narrowing is offered.
pub fn check_list_change(
    caller: &Principal,
    current: &[String],
    wanted: &[String],
    how: ListChange,
) -> Result<(), Denied> {
    if added(current, wanted).is_empty() {
        return Ok(());
    }
    match how {
        ListChange::NarrowOnly => Err(Denied::Rule(
            "this only removes hosts from the list: ask for another with sandbox.requestEgress",
        )),
        ListChange::MayWiden => access::require(caller, Permission::EgressDecide),
    }
}

/// Whether `caller` may give a new sandbox the list `given` (an `allowlist` create's
/// own): any entry needs `egress:decide`, as adding it later would.
pub fn check_list_given(caller: &Principal, given: &[String]) -> Result<(), Denied> {
    check_list_change(caller, &[], given, ListChange::MayWiden)
}

/// What an approval of `entry` does to the list `current`: `Ok(None)` when the list has
/// it already, the new list otherwise, or why it cannot take it.
pub fn approved_list(current: &[String], entry: &str) -> Result<Option<Vec<String>>, String> {
    if current.iter().any(|kept| kept == entry) {
        return Ok(None);
    }
    if current.len() >= MAX_ALLOWED {
        return Err(format!(
            "the sandbox's list has {MAX_ALLOWED} entries, the most it may have"
        ));
    }
    let mut wanted = current.to_vec();
    wanted.push(entry.to_owned());
    Policy::parse(&wanted)
        .map(|policy| Some(policy.entries()))
        .map_err(|problems| problems.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;
    use crate::permissions::Permissions;

    fn principal(key: &str, permissions: Permissions) -> Principal {
        Principal {
            user_id: "u".into(),
            organization_id: "o".into(),
            role: Role::Member,
            key_id: key.into(),
            permissions,
            key_scopes: None,
            key_expires_at: None,
        }
    }

    fn request(key: &str) -> EgressRequestRecord {
        EgressRequestRecord {
            request_id: "r".into(),
            organization_id: "o".into(),
            sandbox_id: "s".into(),
            host: "pypi.org".into(),
            reason: None,
            status: RequestStatus::Pending,
            requested_by_user: "u".into(),
            requested_by_key: key.into(),
            created_at: 0,
            decided_at: None,
            decided_by_user: None,
            decided_by_key: None,
        }
    }

    fn of_user(user: &str, role: Role, key: &str, permissions: Permissions) -> Principal {
        Principal {
            user_id: user.into(),
            role,
            ..principal(key, permissions)
        }
    }

    #[test]
    fn a_decider_needs_the_permission_and_another_key() {
        let decider: Permissions = [Permission::EgressDecide].into_iter().collect();
        assert!(check_decider(&of_user("u2", Role::Member, "k2", decider), &request("k1")).is_ok());
        assert_eq!(
            check_decider(
                &principal(
                    "k2",
                    Permissions::grantable().without(Permission::EgressDecide)
                ),
                &request("k1")
            ),
            Err(Denied::Missing(Permission::EgressDecide))
        );
        assert!(matches!(
            check_decider(&principal("k1", Permissions::all()), &request("k1")),
            Err(Denied::Rule(_))
        ));
    }

    #[test]
    fn the_asker_does_not_decide_unless_an_administrators_key_does() {
        let decider: Permissions = [Permission::EgressDecide].into_iter().collect();
        // The asker's own user, with a second key.
        assert!(matches!(
            check_decider(&principal("k2", decider), &request("k1")),
            Err(Denied::Rule(_))
        ));
        // An owner's agent key narrowed to deciding does not act as the owner.
        assert!(matches!(
            check_decider(&of_user("u", Role::Owner, "k2", decider), &request("k1")),
            Err(Denied::Rule(_))
        ));
        // The owner's or an admin's full key does, deliberately.
        for role in [Role::Owner, Role::Admin] {
            assert!(
                check_decider(
                    &of_user("u", role, "k2", Permissions::all()),
                    &request("k1")
                )
                .is_ok()
            );
        }
        // A member granted everything grantable is still the asker.
        assert!(matches!(
            check_decider(
                &of_user("u", Role::Member, "k2", Permissions::grantable()),
                &request("k1")
            ),
            Err(Denied::Rule(_))
        ));
    }

    #[test]
    fn narrowing_is_free_and_adding_needs_the_approval_permission() {
        let list = |entries: &[&str]| entries.iter().map(|e| e.to_string()).collect::<Vec<_>>();
        let agent = principal(
            "k",
            Permissions::grantable().without(Permission::EgressDecide),
        );
        let decider = principal("k", [Permission::EgressDecide].into_iter().collect());
        let ab = list(&["a.example", "b.example"]);
        for how in [ListChange::MayWiden, ListChange::NarrowOnly] {
            assert!(check_list_change(&agent, &ab, &list(&["a.example"]), how).is_ok());
            assert!(check_list_change(&agent, &ab, &[], how).is_ok());
        }
        for wanted in [list(&["a.example", "c.example"]), list(&["*.example"])] {
            assert_eq!(
                check_list_change(&agent, &ab, &wanted, ListChange::MayWiden),
                Err(Denied::Missing(Permission::EgressDecide))
            );
            assert!(check_list_change(&decider, &ab, &wanted, ListChange::MayWiden).is_ok());
            assert!(matches!(
                check_list_change(&decider, &ab, &wanted, ListChange::NarrowOnly),
                Err(Denied::Rule(_))
            ));
        }
        assert_eq!(
            added(&ab, &list(&["b.example", "c.example"])),
            ["c.example"]
        );
        assert!(check_list_given(&agent, &[]).is_ok());
        assert!(check_list_given(&agent, &list(&["a.example"])).is_err());
        assert!(check_list_given(&decider, &list(&["a.example"])).is_ok());
    }

    #[test]
    fn an_approval_adds_the_entry_once_within_the_bound() {
        let current = vec!["pypi.org".to_owned()];
        assert_eq!(approved_list(&current, "pypi.org"), Ok(None));
        assert_eq!(
            approved_list(&current, "*.pythonhosted.org"),
            Ok(Some(vec![
                "pypi.org".to_owned(),
                "*.pythonhosted.org".to_owned()
            ]))
        );
        let full: Vec<String> = (0..MAX_ALLOWED).map(|n| format!("h{n}.example")).collect();
        assert!(approved_list(&full, "one-more.example").is_err());
    }

    #[test]
    fn statuses_read_back() {
        for status in [
            RequestStatus::Pending,
            RequestStatus::Approved,
            RequestStatus::Denied,
        ] {
            assert_eq!(RequestStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(RequestStatus::parse("maybe"), None);
    }
}
