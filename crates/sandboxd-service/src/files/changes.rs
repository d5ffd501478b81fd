//! `sandbox.changes`: what a sandbox added, changed and removed since its image or the
//! snapshot it started from, under its user's areas (or everywhere), with types and
//! sizes. The engine's diff says which paths; `find`, run as the sandbox's user, says
//! what each is now (what that user cannot see stays without a type).
//!
//! A paused sandbox is woken; the engine's diff is narrowed by `sandboxd_core::changes`,
//! then `find` runs through the engine's exec as the sandbox's user on the paths not
//! removed, 500 at a time, each run's output bounded at 1 MiB. A failed run, or an image
//! without GNU find, leaves the entries it did not reach without a type. The sandbox's
//! activity is recorded.

use sandboxd_contracts::ExecSpec;
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::{ChangeKind, ChangesResult, FileType};
use sandboxd_core::changes;
use sandboxd_core::model::{Principal, Sandbox};

use super::Files;
use crate::{ServiceError, internal_exec};

/// Output of one batch's `find` kept at most (records past it are left without sizes).
const STAT_OUTPUT: usize = 1024 * 1024;

impl Files {
    /// The changes of a sandbox of the caller's; a paused one is resumed first.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn changes(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        all: bool,
    ) -> Result<ChangesResult, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        self.listing(&sandbox, all).await
    }

    /// The changes of `sandbox` (see [`Files::changes`]).
    pub(super) async fn listing(
        &self,
        sandbox: &Sandbox,
        all: bool,
    ) -> Result<ChangesResult, ServiceError> {
        let container = self.service.wake(sandbox).await?;
        let engine = self
            .service
            .fleet()
            .engine_of(sandbox.server_id.as_deref())
            .await?;
        let diff = engine.container_changes(container).await?;
        let areas = (!all).then(|| changes::user_areas(&sandbox.workdir));
        let (mut entries, truncated) = changes::select(diff, areas.as_deref());
        let present: Vec<String> = entries
            .iter()
            .filter(|entry| entry.kind != ChangeKind::Removed)
            .map(|entry| entry.path.clone())
            .collect();
        let mut records = Vec::new();
        for paths in changes::stat_batches(&present) {
            let spec = ExecSpec {
                user: sandbox.user.clone(),
                ..internal_exec(changes::stat_argv(&paths), STAT_OUTPUT)
            };
            // `find` exits 1 when a path went meanwhile, and an image without GNU find
            // prints nothing: what it printed is all there is to know (a batch that
            // failed leaves its paths without types).
            if let Ok(outcome) = engine.exec(container, spec).await {
                records.extend_from_slice(changes::whole_records(&outcome.stdout));
            }
        }
        changes::apply_stats(&mut entries, &records);
        self.service
            .while_touching(&sandbox.sandbox_id, std::future::ready(()))
            .await;
        let total_bytes = entries
            .iter()
            .filter(|entry| entry.file_type == Some(FileType::File))
            .filter_map(|entry| entry.size)
            .fold(0u64, u64::saturating_add);
        Ok(ChangesResult {
            areas: areas.unwrap_or_else(|| vec!["/".to_owned()]),
            changes: entries,
            truncated,
            total_bytes,
        })
    }
}
