//! Access and tenancy: organizations, their members and API keys, projects and
//! environments, and reading the audit log. Depends on the store and the access checks
//! only; it never touches a sandbox.
//!
//! `Tenancy`: organizations, members and keys (`members.rs`), projects and environments
//! (`projects.rs`), the audit log's pages, and the environments creates found
//! (`environments.rs`). It uses the quotas too.

mod environments;
mod members;
mod projects;

use std::sync::Arc;

use sandboxd_core::quotas::Quotas;
use sandboxd_store::Store;

use crate::Access;

/// The `organization.*`, `member.*`, `key.*`, `project.*`, `environment.*` and
/// `audit.*` operations.
#[derive(Debug, Clone)]
pub struct Tenancy {
    store: Store,
    access: Access,
    /// What each organization may hold; a new key is counted against them.
    quotas: Quotas,
    environments: Arc<environments::KnownEnvironments>,
}

impl Tenancy {
    pub(crate) fn new(store: Store, access: Access, quotas: Quotas) -> Self {
        Self {
            store,
            access,
            quotas,
            environments: Default::default(),
        }
    }
}
