//! A built template's image on a remote server: a template is built on the local engine,
//! and a sandbox of it may run on any server. The first time one is made on a server
//! that lacks the image, the image is carried there: the local engine's image archive is
//! streamed into the server's engine over its pooled connection (no registry), one
//! carry at a time per server and image; later sandboxes (and that server's warm
//! members) find it there. A template's removal removes its images from every server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sandboxd_contracts::{Engine, EngineError};
use sandboxd_core::template_build::TEMPLATE_REPOSITORY;
use tracing::{info, warn};

use super::Builds;

/// The lock one carry of an image to a server holds.
type CarryLock = Arc<tokio::sync::Mutex<()>>;

/// The carries under way, by server and image: one waits for the other.
#[derive(Debug, Default)]
pub(crate) struct Carries {
    locks: Mutex<HashMap<(String, String), CarryLock>>,
}

impl Carries {
    fn lock_for(&self, server_id: &str, image: &str) -> CarryLock {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        // Those no carry holds any more go.
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        locks
            .entry((server_id.to_owned(), image.to_owned()))
            .or_default()
            .clone()
    }
}

/// Whether `image` names a built template's image.
pub(crate) fn is_built_image(image: &str) -> bool {
    image.starts_with(&format!("{TEMPLATE_REPOSITORY}:"))
}

impl Builds {
    /// Makes a built template's `image` present on the remote server `server_id`, whose
    /// engine is `engine`, carrying it from the local engine when it lacks it.
    pub(crate) async fn carry(
        &self,
        server_id: &str,
        engine: &Arc<dyn Engine>,
        image: &str,
    ) -> Result<(), EngineError> {
        if engine.image_facts(image).await?.is_some() {
            return Ok(());
        }
        let lock = self.service.inner.carries.lock_for(server_id, image);
        let _carrying = lock.lock().await;
        // Carried by the create this one waited for.
        if engine.image_facts(image).await?.is_some() {
            return Ok(());
        }
        let started = Instant::now();
        let archive = self.service.engine().save_image(image).await?;
        engine.load_image(archive).await?;
        if engine.image_facts(image).await?.is_none() {
            return Err(EngineError::NotFound { what: "image" });
        }
        info!(%image, %server_id, ms = started.elapsed().as_millis() as u64, "built template's image carried to a server");
        Ok(())
    }

    /// Removes a removed template's `images` from every server's engine (each holds
    /// those it was carried); a server that cannot be reached keeps them.
    pub(crate) async fn remove_carried(&self, images: &[String]) {
        let servers = match self.service.store().all_servers().await {
            Ok(servers) => servers,
            Err(error) => {
                warn!(error = %sandboxd_core::error::chain(&error), "could not read the servers to remove a template's images from");
                return;
            }
        };
        for server in servers {
            let Ok(engine) = self
                .service
                .fleet()
                .engine_of(Some(&server.server_id))
                .await
            else {
                continue;
            };
            for image in images {
                super::remove_when_free(&engine, image).await;
            }
        }
    }
}
