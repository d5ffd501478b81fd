//! Permissions as values: one capability, and a set of them (what a role, a grant or a
//! key's scopes hold). The decisions built on them are in [`crate::access`].

/// A capability of a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    /// Create sandboxes in a project the member can access.
    ServiceCreate,
    /// See a sandbox, its files and its processes' output.
    ServiceRead,
    /// Remove a sandbox's record.
    ServiceDelete,
    /// Run commands in a sandbox, write its files, change its timeout, kill it.
    DeploymentCreate,
    /// Create projects and environments.
    ProjectCreate,
    /// Manage members, their grants and other users' keys; read the audit log. Held by
    /// owners and admins only; a key can be narrowed to drop it.
    OrganizationAdmin,
    /// Approve or deny the egress requests of sandboxes the caller may use (a key
    /// without it may still ask, and never decides its own requests).
    EgressDecide,
}

impl Permission {
    pub const ALL: [Self; 7] = [
        Self::ServiceCreate,
        Self::ServiceRead,
        Self::ServiceDelete,
        Self::DeploymentCreate,
        Self::ProjectCreate,
        Self::OrganizationAdmin,
        Self::EgressDecide,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ServiceCreate => "service:create",
            Self::ServiceRead => "service:read",
            Self::ServiceDelete => "service:delete",
            Self::DeploymentCreate => "deployment:create",
            Self::ProjectCreate => "project:create",
            Self::OrganizationAdmin => "organization:admin",
            Self::EgressDecide => "egress:decide",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == value)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Permissions(u8);

impl Permissions {
    pub const NONE: Self = Self(0);

    pub fn all() -> Self {
        Permission::ALL.into_iter().collect()
    }

    /// What a member can be granted: everything but organization administration.
    pub fn grantable() -> Self {
        Self::all().without(Permission::OrganizationAdmin)
    }

    /// What a new member holds unless told otherwise.
    pub fn member_default() -> Self {
        [Permission::ServiceRead].into_iter().collect()
    }

    pub fn contains(self, permission: Permission) -> bool {
        self.0 & permission.bit() != 0
    }

    pub fn without(self, permission: Permission) -> Self {
        Self(self.0 & !permission.bit())
    }

    pub fn intersect(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    pub fn is_subset_of(self, other: Self) -> bool {
        self.0 & !other.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL
            .into_iter()
            .filter(move |p| self.contains(*p))
    }

    pub fn names(self) -> Vec<String> {
        self.iter().map(|p| p.as_str().to_owned()).collect()
    }

    /// Parses names; the first unknown one is the error.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        names
            .iter()
            .map(|name| Permission::parse(name.as_ref()).ok_or_else(|| name.as_ref().to_owned()))
            .collect()
    }

    /// Space-separated names, as stored.
    pub fn to_text(self) -> String {
        self.names().join(" ")
    }

    /// Reads [`Self::to_text`]; unknown names (from a newer version) are ignored.
    pub fn from_text(text: &str) -> Self {
        text.split_whitespace()
            .filter_map(Permission::parse)
            .collect()
    }
}

impl FromIterator<Permission> for Permissions {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Self {
        Self(iter.into_iter().fold(0, |bits, p| bits | p.bit()))
    }
}
