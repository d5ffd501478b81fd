//! A container's filesystem diff against its image, as the engine keeps it.
//!
//! Each path with its `ChangeKind`.

use bollard::models::ChangeType;
use sandboxd_core::api::ChangeKind;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify};

impl DockerEngine {
    pub(crate) async fn container_changes(
        &self,
        id: &str,
    ) -> Result<Vec<(String, ChangeKind)>, EngineError> {
        let changes = bounded("container changes", self.docker.container_changes(id))
            .await?
            .map_err(|e| classify("container", e))?
            .unwrap_or_default();
        Ok(changes
            .into_iter()
            .map(|change| {
                let kind = match change.kind {
                    ChangeType::_0 => ChangeKind::Changed,
                    ChangeType::_1 => ChangeKind::Added,
                    ChangeType::_2 => ChangeKind::Removed,
                };
                (change.path, kind)
            })
            .collect())
    }
}
