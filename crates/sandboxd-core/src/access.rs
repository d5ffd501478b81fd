//! Who may do what: the permissions a caller holds (from their role, their grants and
//! their key's scopes) and the decisions built on them. Callers from another
//! organization never reach these checks: their ids resolve to nothing.
//!
//! Every access decision is a pure function: `check_sandbox(caller, need, listed)`,
//! `check_create_in_project`, `check_manage_member`, `check_manage_key`, and the rules
//! that nothing widens: `bound_new_key` (the scopes and expiry of a key made by another)
//! and `check_grant`. What a caller holds is its role or grants, narrowed by its key's
//! scopes (`effective`).

use crate::model::{Principal, Role};
pub use crate::permissions::{Permission, Permissions};

/// What a caller holds: owners and admins everything, members their grants, each
/// narrowed to the key's scopes when it has any.
pub fn effective(role: Role, grants: Permissions, scopes: Option<Permissions>) -> Permissions {
    let held = match role {
        Role::Owner | Role::Admin => Permissions::all(),
        Role::Member => grants.intersect(Permissions::grantable()),
    };
    scopes.map_or(held, |scopes| held.intersect(scopes))
}

/// Owners and admins see every project and sandbox of their organization; members only
/// those on their access lists.
pub fn sees_everything(role: Role) -> bool {
    matches!(role, Role::Owner | Role::Admin)
}

/// What an operation on an existing sandbox needs, as the reference lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxNeed {
    /// one, list, readFile, listFiles, process output.
    Read,
    /// exec, writeFile, setTimeout, kill, the WebSockets, processes, contexts.
    Use,
    /// remove.
    Delete,
}

impl SandboxNeed {
    pub fn permission(self) -> Permission {
        match self {
            Self::Read => Permission::ServiceRead,
            Self::Use => Permission::DeploymentCreate,
            Self::Delete => Permission::ServiceDelete,
        }
    }
}

/// Why a caller of the right organization may not do something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("this needs the permission {}", .0.as_str())]
    Missing(Permission),
    #[error("you do not have access to this {0}")]
    NotListed(&'static str),
    #[error("{0}")]
    Rule(&'static str),
}

/// Whether `caller` may act on a sandbox of their organization; `listed` is whether the
/// sandbox is on their access list.
pub fn check_sandbox(caller: &Principal, need: SandboxNeed, listed: bool) -> Result<(), Denied> {
    require(caller, need.permission())?;
    if sees_everything(caller.role) || listed {
        Ok(())
    } else {
        Err(Denied::NotListed("sandbox"))
    }
}

/// Whether `caller` may create sandboxes in a project of their organization; `listed`
/// is whether the project is on their access list.
pub fn check_create_in_project(caller: &Principal, listed: bool) -> Result<(), Denied> {
    require(caller, Permission::ServiceCreate)?;
    if sees_everything(caller.role) || listed {
        Ok(())
    } else {
        Err(Denied::NotListed("project"))
    }
}

pub fn require(caller: &Principal, permission: Permission) -> Result<(), Denied> {
    if caller.permissions.contains(permission) {
        Ok(())
    } else {
        Err(Denied::Missing(permission))
    }
}

/// Which organizations may register remote servers (`[servers] registration`): a
/// server is a machine sandboxd connects to and runs code on, so by default only the
/// installation's operator (its first organization) may add one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ServerRegistration {
    /// The administrators of the installation's first organization.
    #[default]
    Operator,
    /// The administrators of every organization.
    Admins,
}

impl ServerRegistration {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "operator" => Some(Self::Operator),
            "admins" => Some(Self::Admins),
            _ => None,
        }
    }
}

/// Whether `caller` may add or re-address a remote server: an administrator, of the
/// operator's organization unless the operator lets every organization.
pub fn check_register_server(
    caller: &Principal,
    registration: ServerRegistration,
    operator_organization: Option<&str>,
) -> Result<(), Denied> {
    require(caller, Permission::OrganizationAdmin)?;
    match registration {
        ServerRegistration::Admins => Ok(()),
        ServerRegistration::Operator
            if operator_organization == Some(caller.organization_id.as_str()) =>
        {
            Ok(())
        }
        ServerRegistration::Operator => Err(Denied::Rule(
            "only the operator of this installation registers servers ([servers] registration)",
        )),
    }
}

/// Whether `caller` may change or remove the membership of a user whose role is
/// `target` (and, on a change, give it the role `new_role`). Admins manage members;
/// only owners manage admins and owners; nobody changes their own membership.
pub fn check_manage_member(
    caller: &Principal,
    target_user_id: &str,
    target: Role,
    new_role: Option<Role>,
) -> Result<(), Denied> {
    require(caller, Permission::OrganizationAdmin)?;
    if target_user_id == caller.user_id {
        return Err(Denied::Rule(
            "you cannot change or remove your own membership",
        ));
    }
    only_owners_grant(caller, target != Role::Member || grants_privilege(new_role))
}

/// Whether `caller` may add a member with `role` (a member when absent).
pub fn check_add_member(caller: &Principal, role: Option<Role>) -> Result<(), Denied> {
    require(caller, Permission::OrganizationAdmin)?;
    only_owners_grant(caller, grants_privilege(role))
}

fn grants_privilege(role: Option<Role>) -> bool {
    role.is_some_and(|role| role != Role::Member)
}

fn only_owners_grant(caller: &Principal, privileged: bool) -> Result<(), Denied> {
    if privileged && caller.role != Role::Owner {
        return Err(Denied::Rule("only an owner can manage owners and admins"));
    }
    Ok(())
}

/// Whether `caller` may create a key for, or revoke a key of, the user `owner_user_id`
/// (role `owner_role`). Everybody manages their own keys; managing another user's keys
/// is member management.
pub fn check_manage_key(
    caller: &Principal,
    owner_user_id: &str,
    owner_role: Role,
) -> Result<(), Denied> {
    if owner_user_id != caller.user_id {
        check_manage_member(caller, owner_user_id, owner_role, None)?;
    }
    Ok(())
}

/// The scopes and expiry of a key `caller` makes: never wider, never longer-lived than
/// the caller's own key. Scopes asked beyond what the caller holds are refused; omitted
/// scopes are the caller's own permissions (unscoped only when the caller's key is); the
/// expiry is the earlier of the one asked and the caller key's.
pub fn bound_new_key(
    caller: &Principal,
    scopes: Option<Permissions>,
    expires_at: Option<i64>,
) -> Result<(Option<Permissions>, Option<i64>), Denied> {
    if let Some(scopes) = scopes
        && !scopes.is_subset_of(caller.permissions)
    {
        return Err(Denied::Rule(
            "a key cannot hold scopes its creator does not hold",
        ));
    }
    let scopes = scopes.or(caller.key_scopes.map(|_| caller.permissions));
    let expires_at = match (expires_at, caller.key_expires_at) {
        (Some(asked), Some(limit)) => Some(asked.min(limit)),
        (asked, limit) => asked.or(limit),
    };
    Ok((scopes, expires_at))
}

/// Whether `caller` may give a member `role` and `grants`: nothing the caller does not
/// hold. An owner or admin holds every permission, so only a caller holding every
/// permission (an unscoped owner or admin key) makes one.
pub fn check_grant(
    caller: &Principal,
    role: Option<Role>,
    grants: Option<Permissions>,
) -> Result<(), Denied> {
    if grants_privilege(role) && caller.permissions != Permissions::all() {
        return Err(Denied::Rule(
            "only a key holding every permission can make an owner or admin",
        ));
    }
    if let Some(grants) = grants
        && !grants.is_subset_of(caller.permissions)
    {
        return Err(Denied::Rule(
            "a member cannot be granted permissions the granter does not hold",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
