//! Snapshots: a container's filesystem committed as an image, and such images removed.
//!
//! The engine's commit copies the container's settings onto the image and keeps every
//! variable of the container's environment the new image does not name, values and
//! all. The image is given its source image's settings instead, and the container's
//! own variables by name only (`sandboxd_core::snapshots::scrubbed_env`), so no secret
//! and no agent key reaches the image.
//!
//! The container is frozen while it is read, and labelled with `snapshot_labels`. The
//! commit answers the bytes the image adds over its source. An image a container still
//! uses is `Rejected` (409) on removal.

use std::collections::BTreeMap;
use std::time::Duration;

use bollard::models::ContainerConfig;
use bollard::query_parameters::{CommitContainerOptionsBuilder, RemoveImageOptionsBuilder};
use sandboxd_contracts::Commit;
use sandboxd_core::snapshots::{scrubbed_env, snapshot_labels};

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify, fault, status_of};

/// How long a commit may take: it copies what the sandbox wrote.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(600);

impl DockerEngine {
    pub(crate) async fn commit_container(
        &self,
        id: &str,
        commit: &Commit,
    ) -> Result<i64, EngineError> {
        let container = self.inspect(id).await?;
        // The image the container was made from, by its id: the name may point at
        // another image by now.
        let source_id = container
            .image
            .clone()
            .unwrap_or_else(|| commit.source_image.clone());
        let source = bounded("inspect image", self.docker.inspect_image(&source_id))
            .await?
            .map_err(|e| classify("image", e))?;
        let image = source.config.unwrap_or_default();
        let container_env = container
            .config
            .and_then(|config| config.env)
            .unwrap_or_default();
        let image_env = image.env.unwrap_or_default();
        let image_labels: BTreeMap<String, String> =
            image.labels.unwrap_or_default().into_iter().collect();
        let config = ContainerConfig {
            user: Some(image.user.unwrap_or_default()),
            env: Some(scrubbed_env(&image_env, &container_env)),
            cmd: image.cmd,
            entrypoint: image.entrypoint,
            working_dir: image.working_dir,
            labels: Some(
                snapshot_labels(&image_labels, &commit.snapshot_id, &commit.instance_id)
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        };
        let expected = commit.image.as_str();
        let (repo, tag) = expected.split_once(':').unwrap_or((expected, "latest"));
        let options = CommitContainerOptionsBuilder::default()
            .container(id)
            .repo(repo)
            .tag(tag)
            .pause(true)
            .build();
        tokio::time::timeout(
            COMMIT_TIMEOUT,
            self.docker.commit_container(options, config),
        )
        .await
        .map_err(|_| EngineError::Timeout { call: "commit" })?
        .map_err(|e| match status_of(&e) {
            Some(404) => EngineError::NotFound { what: "container" },
            Some(409) => EngineError::NotRunning,
            _ => fault(e),
        })?;
        // An image made but not read back is not kept: its size could not be counted.
        let made = match bounded("inspect image", self.docker.inspect_image(expected)).await {
            Ok(Ok(made)) => made,
            failed => {
                let _ = self.remove_image(expected).await;
                return Err(match failed {
                    Ok(Err(e)) => classify("image", e),
                    Err(timeout) => timeout,
                    Ok(Ok(_)) => EngineError::NotFound { what: "image" },
                });
            }
        };
        let size = made.size.unwrap_or_default() - source.size.unwrap_or_default();
        Ok(size.max(0))
    }

    pub(crate) async fn remove_image(&self, image: &str) -> Result<(), EngineError> {
        let options = RemoveImageOptionsBuilder::default().noprune(false).build();
        match bounded(
            "remove image",
            self.docker.remove_image(image, Some(options), None),
        )
        .await?
        {
            Ok(_) => Ok(()),
            Err(e) if status_of(&e) == Some(404) => Ok(()),
            Err(e) if status_of(&e) == Some(409) => Err(EngineError::Rejected {
                status: 409,
                message: "the image is in use by a container".into(),
            }),
            Err(e) => Err(classify("image", e)),
        }
    }
}
