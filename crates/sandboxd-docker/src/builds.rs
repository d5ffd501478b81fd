//! What a template's build needs of the engine beyond a sandbox's: an image's id and
//! settings read (never pulled), a step's files unpacked through the engine's archive API
//! (owners as the archive says, made by the host), a step's container committed with
//! exactly the settings the build kept, and a built image named.

use std::time::Duration;

use bollard::models::ContainerConfig;
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, ListImagesOptionsBuilder, TagImageOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use sandboxd_contracts::ImageFacts;
use sandboxd_core::template_build::Settings;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify, fault, status_of};

/// How long a step's commit may take: it copies what the step wrote.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a step's files may take to unpack (a copy from a context of a GiB or more
/// is several).
const UNPACK_TIMEOUT: Duration = Duration::from_secs(600);

pub(crate) fn split_reference(image: &str) -> (&str, &str) {
    // A tag follows the last `:` after the last `/` (a registry's port is not a tag).
    match image.rfind(':') {
        Some(at) if !image[at..].contains('/') => (&image[..at], &image[at + 1..]),
        _ => (image, "latest"),
    }
}

impl DockerEngine {
    pub(crate) async fn image_facts(&self, image: &str) -> Result<Option<ImageFacts>, EngineError> {
        let inspected = match bounded("inspect image", self.docker.inspect_image(image)).await? {
            Ok(inspected) => inspected,
            Err(e) if status_of(&e) == Some(404) => return Ok(None),
            Err(e) => return Err(classify("image", e)),
        };
        let config = inspected.config.unwrap_or_default();
        let env = config
            .env
            .unwrap_or_default()
            .into_iter()
            .map(|entry| match entry.split_once('=') {
                Some((name, value)) => (name.to_owned(), value.to_owned()),
                None => (entry, String::new()),
            })
            .collect();
        Ok(Some(ImageFacts {
            id: inspected.id.unwrap_or_default(),
            size: inspected.size.unwrap_or_default(),
            settings: Settings {
                env,
                user: config.user.unwrap_or_default(),
                workdir: config.working_dir.unwrap_or_default(),
                labels: config.labels.unwrap_or_default().into_iter().collect(),
                cmd: config.cmd,
                entrypoint: config.entrypoint,
            },
        }))
    }

    pub(crate) async fn unpack_at_root(
        &self,
        container: &str,
        tar: sandboxd_contracts::Chunks,
    ) -> Result<(), EngineError> {
        // A file never takes the place of a directory there (nor a directory a file's).
        let options = UploadToContainerOptionsBuilder::default()
            .path("/")
            .no_overwrite_dir_non_dir("true")
            .build();
        tokio::time::timeout(
            UNPACK_TIMEOUT,
            self.docker.upload_to_container(
                container,
                Some(options),
                bollard::body_try_stream(tar),
            ),
        )
        .await
        .map_err(|_| EngineError::Timeout { call: "unpack" })?
        .map_err(|e| classify("container", e))
    }

    pub(crate) async fn commit_as(
        &self,
        container: &str,
        image: &str,
        settings: &Settings,
    ) -> Result<(), EngineError> {
        let config = ContainerConfig {
            user: Some(settings.user.clone()),
            env: Some(
                settings
                    .env
                    .iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect(),
            ),
            cmd: settings.cmd.clone(),
            entrypoint: settings.entrypoint.clone(),
            working_dir: Some(settings.workdir.clone()),
            labels: Some(settings.labels.clone().into_iter().collect()),
            ..Default::default()
        };
        let (repo, tag) = split_reference(image);
        let options = CommitContainerOptionsBuilder::default()
            .container(container)
            .repo(repo)
            .tag(tag)
            // A step's container is stopped (or never started) when it is committed.
            .pause(false)
            .build();
        tokio::time::timeout(
            COMMIT_TIMEOUT,
            self.docker.commit_container(options, config),
        )
        .await
        .map_err(|_| EngineError::Timeout { call: "commit" })?
        .map_err(|e| match status_of(&e) {
            Some(404) => EngineError::NotFound { what: "container" },
            _ => fault(e),
        })?;
        Ok(())
    }

    pub(crate) async fn remove_build_containers(&self, build_id: &str) -> Result<(), EngineError> {
        let label = format!("{}={build_id}", sandboxd_core::template_build::LABEL_BUILD);
        for container in self.list_labelled(vec![label]).await? {
            if let Some(id) = container.id {
                self.remove_container(&id).await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn images_of(
        &self,
        repository: &str,
    ) -> Result<Vec<(String, i64)>, EngineError> {
        let filters =
            std::collections::HashMap::from([("reference", vec![format!("{repository}:*")])]);
        let options = ListImagesOptionsBuilder::default()
            .filters(&filters)
            .build();
        let images = bounded("list images", self.docker.list_images(Some(options)))
            .await?
            .map_err(|e| classify("image", e))?;
        let prefix = format!("{repository}:");
        Ok(images
            .into_iter()
            .flat_map(|image| {
                let created = image.created;
                image
                    .repo_tags
                    .into_iter()
                    .filter(|name| name.starts_with(&prefix))
                    .map(move |name| (name, created))
            })
            .collect())
    }

    pub(crate) async fn tag_image(&self, image: &str, target: &str) -> Result<(), EngineError> {
        let (repo, tag) = split_reference(target);
        let options = TagImageOptionsBuilder::default()
            .repo(repo)
            .tag(tag)
            .build();
        bounded("tag image", self.docker.tag_image(image, Some(options)))
            .await?
            .map_err(|e| classify("image", e))
    }
}

#[cfg(test)]
mod tests {
    use super::split_reference;

    #[test]
    fn a_tag_is_after_the_last_colon_of_the_last_part() {
        assert_eq!(split_reference("a:b"), ("a", "b"));
        assert_eq!(split_reference("host:5000/a"), ("host:5000/a", "latest"));
        assert_eq!(split_reference("host:5000/a:v1"), ("host:5000/a", "v1"));
    }
}
