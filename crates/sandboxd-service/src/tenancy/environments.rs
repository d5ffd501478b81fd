//! The environments creates look up, kept in memory once found. An environment is
//! never changed nor deleted (the store has no such write; one that comes must forget
//! the environment here), so one found stays true on every replica. One not found is
//! asked of the store each time: another replica may have just made it. At most
//! [`KEPT`] are kept; past that the memory starts over.

use std::collections::HashMap;
use std::sync::Mutex;

use sandboxd_core::model::Environment;
use sandboxd_store::StoreError;

use super::Tenancy;

/// Environments kept at most.
const KEPT: usize = 4096;

/// Environments found, by id.
#[derive(Debug, Default)]
pub(crate) struct KnownEnvironments(Mutex<HashMap<String, Environment>>);

impl KnownEnvironments {
    fn get(&self, environment_id: &str) -> Option<Environment> {
        let known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        known.get(environment_id).cloned()
    }

    fn keep(&self, environment: &Environment) {
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if known.len() >= KEPT {
            known.clear();
        }
        known.insert(environment.environment_id.clone(), environment.clone());
    }
}

impl Tenancy {
    /// An environment, only if it belongs to `organization_id`; from memory once found.
    pub(crate) async fn environment(
        &self,
        organization_id: &str,
        environment_id: &str,
    ) -> Result<Option<Environment>, StoreError> {
        if let Some(known) = self.environments.get(environment_id) {
            return Ok((known.organization_id == organization_id).then_some(known));
        }
        let found = self
            .store
            .environment(organization_id, environment_id)
            .await?;
        if let Some(environment) = &found {
            self.environments.keep(environment);
        }
        Ok(found)
    }
}
