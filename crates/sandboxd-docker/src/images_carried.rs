//! An image carried from one engine to another without a registry: the engine's image
//! archive (`GET /images/{name}/get`, as `docker save`) read as a stream and loaded into
//! the other engine (`POST /images/load`, as `docker load`) as it arrives, so a built
//! template's image goes over a remote server's pooled connection in one pass. The
//! archive holds the image's layers (those the other engine has are skipped by it), its
//! settings and its name.

use std::time::Duration;

use bollard::query_parameters::ImportImageOptionsBuilder;
use futures_util::StreamExt;
use sandboxd_contracts::Chunks;

use crate::engine::DockerEngine;
use crate::error::EngineError;

/// How long a load may take in all: it reads every layer the other engine lacks.
const LOAD_TIMEOUT: Duration = Duration::from_secs(1800);

impl DockerEngine {
    pub(crate) async fn save_image(&self, image: &str) -> Result<Chunks, EngineError> {
        // A missing image is told now, not as a broken stream.
        if self.image_facts(image).await?.is_none() {
            return Err(EngineError::NotFound { what: "image" });
        }
        let archive = self
            .docker
            .export_image(image)
            .map(|chunk| chunk.map_err(std::io::Error::other));
        Ok(Box::pin(archive))
    }

    pub(crate) async fn load_image(&self, archive: Chunks) -> Result<(), EngineError> {
        let options = ImportImageOptionsBuilder::default().quiet(true).build();
        let load = crate::progress::follow(
            self.docker.import_image_stream(options, archive, None),
            "load the image",
        );
        tokio::time::timeout(LOAD_TIMEOUT, load)
            .await
            .map_err(|_| EngineError::Timeout { call: "load image" })?
    }
}
