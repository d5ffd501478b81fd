//! `sandbox.changes`, typed.

use sandboxd_core::api::{ChangesQuery, ChangesResult};

use sandboxd_core::api::procedures;

use crate::{Client, Error};

impl Client {
    /// `sandbox.changes`: what the sandbox added, changed and removed, under its user's
    /// areas (`all`: everywhere).
    pub async fn changes(&self, sandbox_id: &str, all: bool) -> Result<ChangesResult, Error> {
        let query = ChangesQuery {
            sandbox_id: sandbox_id.to_owned(),
            all: Some(all),
        };
        self.invoke::<procedures::SandboxChanges>(&query).await
    }
}
