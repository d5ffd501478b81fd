//! Volumes: the engine's named volumes (local driver) that sandboxd's volumes are,
//! made labelled, checked before a container mounts one, and removed.

use std::collections::BTreeMap;

use bollard::models::VolumeCreateRequest;
use bollard::query_parameters::RemoveVolumeOptionsBuilder;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify, status_of};

impl DockerEngine {
    pub(crate) async fn create_volume(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        let request = VolumeCreateRequest {
            name: Some(name.to_owned()),
            driver: Some("local".into()),
            labels: Some(labels.clone().into_iter().collect()),
            ..Default::default()
        };
        bounded("create volume", self.docker.create_volume(request))
            .await?
            .map_err(|e| classify("volume", e))?;
        Ok(())
    }

    /// Whether a volume is on the engine: a container would otherwise get an empty one
    /// of that name, made on the spot.
    pub(crate) async fn volume_exists(&self, name: &str) -> Result<bool, EngineError> {
        match bounded("inspect volume", self.docker.inspect_volume(name)).await? {
            Ok(_) => Ok(true),
            Err(e) if status_of(&e) == Some(404) => Ok(false),
            Err(e) => Err(classify("volume", e)),
        }
    }

    pub(crate) async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        let options = RemoveVolumeOptionsBuilder::default().force(false).build();
        match bounded(
            "remove volume",
            self.docker.remove_volume(name, Some(options)),
        )
        .await?
        {
            Ok(()) => Ok(()),
            Err(e) if status_of(&e) == Some(404) => Ok(()),
            Err(e) if status_of(&e) == Some(409) => Err(EngineError::Rejected {
                status: 409,
                message: "the volume is in use by a container".into(),
            }),
            Err(e) => Err(classify("volume", e)),
        }
    }
}
