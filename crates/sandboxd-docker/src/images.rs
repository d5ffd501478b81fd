//! Images: used when present, pulled (with progress in the log) when missing.
//!
//! A snapshot's image is never pulled: one missing from its server is an error.

use std::time::Duration;

use bollard::query_parameters::CreateImageOptionsBuilder;
use futures_util::StreamExt;
use sandboxd_contracts::EnsuredImage;
use sandboxd_core::prepared_images::PREPARED_REPOSITORY;
use sandboxd_core::snapshots::{LABEL_SNAPSHOT, SNAPSHOT_REPOSITORY, image_of};
use sandboxd_core::template_build::{CACHE_REPOSITORY, LABEL_BUILT_BY, TEMPLATE_REPOSITORY};
use tracing::info;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, fault, message_of, status_of};

/// A pull that makes no progress for this long is abandoned.
const PULL_STALL: Duration = Duration::from_secs(120);

/// `name:latest` when `image` names neither a tag nor a digest, so a pull never fetches
/// every tag of a repository.
fn with_default_tag(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    if last.contains(':') || image.contains('@') {
        image.to_owned()
    } else {
        format!("{image}:latest")
    }
}

impl DockerEngine {
    /// Makes sure `image` is present, pulling it when it is not; returns the user the
    /// image runs as by default (empty for root) and its id.
    pub(crate) async fn ensure_image(&self, image: &str) -> Result<EnsuredImage, EngineError> {
        match self.present_image(image).await? {
            Some(user) => return Ok(user),
            // A snapshot's image is made on its server, never fetched from a registry
            // (where anyone could publish one of that name).
            None if image.starts_with(&format!("{SNAPSHOT_REPOSITORY}:")) => {
                return Err(EngineError::Pull {
                    image: image.to_owned(),
                    reason: "a snapshot's image is never pulled; it is gone from its server".into(),
                });
            }
            // Nor a built template's: it is carried from the engine that built it.
            None if [TEMPLATE_REPOSITORY, CACHE_REPOSITORY]
                .iter()
                .any(|repository| image.starts_with(&format!("{repository}:"))) =>
            {
                return Err(EngineError::Pull {
                    image: image.to_owned(),
                    reason: "a built template's image is never pulled; it is gone from this server"
                        .into(),
                });
            }
            None => self.pull(image).await?,
        }
        self.present_image(image)
            .await?
            .ok_or(EngineError::NotFound { what: "image" })
    }

    /// The default user and id of a present image; `None` when the image is absent. A
    /// snapshot's image is present only under its own name: the engine would also find
    /// it by a prefix of its id, which a caller of another organization could guess. A
    /// prepared image is sandboxd's own, reached through the image it was made from.
    async fn present_image(&self, image: &str) -> Result<Option<EnsuredImage>, EngineError> {
        if image.starts_with(&format!("{PREPARED_REPOSITORY}:")) {
            return Err(EngineError::Pull {
                image: image.to_owned(),
                reason: "a prepared image is reached through the image it was made from".into(),
            });
        }
        match bounded("inspect image", self.docker.inspect_image(image)).await? {
            Ok(inspect) => {
                let config = inspect.config.unwrap_or_default();
                let snapshot = config
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(LABEL_SNAPSHOT))
                    .filter(|id| !id.is_empty());
                if let Some(id) = snapshot
                    && image != image_of(id)
                {
                    return Err(EngineError::Pull {
                        image: image.to_owned(),
                        reason: "a snapshot's image is reached by its snapshotId only".into(),
                    });
                }
                // A built template's image, under its own names only (a snapshot of one
                // of its sandboxes carries its label too).
                let built = config
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(LABEL_BUILT_BY))
                    .is_some_and(|by| !by.is_empty());
                let own_name = [TEMPLATE_REPOSITORY, CACHE_REPOSITORY, SNAPSHOT_REPOSITORY]
                    .iter()
                    .any(|repository| image.starts_with(&format!("{repository}:")));
                if built && !own_name {
                    return Err(EngineError::Pull {
                        image: image.to_owned(),
                        reason: "a built template's image is reached by its template's name only"
                            .into(),
                    });
                }
                Ok(Some(EnsuredImage {
                    user: config.user.unwrap_or_default(),
                    id: inspect.id.unwrap_or_default(),
                }))
            }
            Err(e) if status_of(&e) == Some(404) => Ok(None),
            // A reference the engine cannot parse: the caller's to fix.
            Err(e) if status_of(&e) == Some(400) => Err(EngineError::Rejected {
                status: 400,
                message: message_of(&e),
            }),
            Err(e) => Err(fault(e)),
        }
    }

    async fn pull(&self, image: &str) -> Result<(), EngineError> {
        let reference = with_default_tag(image);
        info!(image = %reference, "pulling image");
        let options = CreateImageOptionsBuilder::default()
            .from_image(&reference)
            .build();
        let mut progress = self.docker.create_image(Some(options), None, None);
        let pull_error = |reason: String| EngineError::Pull {
            image: image.to_owned(),
            reason,
        };
        loop {
            let next = tokio::time::timeout(PULL_STALL, progress.next())
                .await
                .map_err(|_| pull_error("no progress for 120 s".into()))?;
            match next {
                None => break,
                Some(Ok(step)) => {
                    if let Some(detail) = step.error_detail.and_then(|d| d.message) {
                        return Err(pull_error(detail));
                    }
                    if let Some(status) = step.status {
                        info!(image = %reference, layer = step.id.as_deref().unwrap_or(""), %status, "pull progress");
                    }
                }
                Some(Err(e)) => return Err(pull_error(message_of(&e))),
            }
        }
        info!(image = %reference, "image pulled");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_latest_only_without_tag_or_digest() {
        assert_eq!(with_default_tag("busybox"), "busybox:latest");
        assert_eq!(with_default_tag("busybox:1.36"), "busybox:1.36");
        assert_eq!(
            with_default_tag("localhost:5000/app"),
            "localhost:5000/app:latest"
        );
        assert_eq!(with_default_tag("app@sha256:abc"), "app@sha256:abc");
    }
}
