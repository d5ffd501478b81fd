//! Every container labelled as a sandbox on this engine, whichever installation made
//! it: what `sandboxd reap` looks at and removes.

use bollard::models::ContainerSummaryStateEnum;
use sandboxd_core::plan::LABEL_SANDBOX;
use sandboxd_core::reap::LabelledContainer;

use crate::engine::DockerEngine;
use crate::error::EngineError;

impl DockerEngine {
    /// Every container (running or not) labelled `sandboxd.sandbox=true`.
    pub async fn labelled_sandboxes(&self) -> Result<Vec<LabelledContainer>, EngineError> {
        let list = self
            .list_labelled(vec![format!("{LABEL_SANDBOX}=true")])
            .await?;
        Ok(list
            .into_iter()
            .filter_map(|summary| {
                Some(LabelledContainer {
                    container_id: summary.id?,
                    name: summary
                        .names
                        .unwrap_or_default()
                        .first()
                        .map(|n| n.trim_start_matches('/').to_owned())
                        .unwrap_or_default(),
                    image: summary.image.unwrap_or_default(),
                    created_at: summary.created.unwrap_or_default().saturating_mul(1000),
                    running: summary.state == Some(ContainerSummaryStateEnum::RUNNING),
                    labels: summary.labels.unwrap_or_default().into_iter().collect(),
                })
            })
            .collect())
    }

    /// Removes a container, running or not, with its anonymous volumes; one already gone
    /// is not an error.
    pub async fn remove_labelled(&self, container_id: &str) -> Result<(), EngineError> {
        self.remove_container(container_id).await
    }
}
