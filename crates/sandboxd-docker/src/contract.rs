//! The engine contract implemented for Docker: each call goes to the adapter's method of
//! the same name.

use sandboxd_contracts::{
    Chunks, Commit, Deaths, Engine, EngineError, EnsuredImage, ExecOutcome, ExecSpec,
    HostResources, ImageFacts, Reachability, ReadFileError, UsageSample,
};
use sandboxd_core::plan::ContainerPlan;
use sandboxd_core::reconcile::ContainerState;
use sandboxd_ssh::Health;

use crate::engine::DockerEngine;

#[async_trait::async_trait]
impl Engine for DockerEngine {
    fn api_version(&self) -> String {
        DockerEngine::api_version(self)
    }

    async fn runtimes(&self) -> Result<Vec<String>, EngineError> {
        DockerEngine::runtimes(self).await
    }

    async fn host(&self) -> Result<HostResources, EngineError> {
        DockerEngine::host(self).await
    }

    async fn reachability(&self) -> (Reachability, Option<String>) {
        let Some(session) = &self.session else {
            return (Reachability::Reachable, None);
        };
        let reachability = match session.health().await {
            Health::Reachable => Reachability::Reachable,
            Health::Degraded => Reachability::Degraded,
            Health::Unreachable => Reachability::Unreachable,
        };
        (reachability, session.last_failure().await)
    }

    async fn ensure_image(&self, image: &str) -> Result<EnsuredImage, EngineError> {
        DockerEngine::ensure_image(self, image).await
    }

    async fn prepare_image(
        &self,
        image: &str,
        target: &str,
        workdir: &str,
        owner: (u32, u32),
    ) -> Result<(), EngineError> {
        DockerEngine::prepare_image(self, image, target, workdir, owner).await
    }

    async fn ensure_bridge(&self, name: &str) -> Result<(), EngineError> {
        DockerEngine::ensure_bridge(self, name).await
    }

    async fn create_container(&self, plan: &ContainerPlan) -> Result<String, EngineError> {
        DockerEngine::create_container(self, plan).await
    }

    async fn start_container(&self, id: &str) -> Result<(), EngineError> {
        DockerEngine::start_container(self, id).await
    }

    async fn kill_container(&self, id: &str) -> Result<(), EngineError> {
        DockerEngine::kill_container(self, id).await
    }

    async fn destroy_container(&self, id: &str) -> Result<(), EngineError> {
        DockerEngine::destroy_container(self, id).await
    }

    async fn pause_container(&self, id: &str) -> Result<(), EngineError> {
        DockerEngine::pause_container(self, id).await
    }

    async fn unpause_container(&self, id: &str) -> Result<(), EngineError> {
        DockerEngine::unpause_container(self, id).await
    }

    async fn checkpoints(&self) -> bool {
        DockerEngine::checkpoints(self).await
    }

    async fn checkpoint_container(&self, id: &str, name: &str) -> Result<(), EngineError> {
        DockerEngine::checkpoint_container(self, id, name).await
    }

    async fn restore_container(&self, id: &str, name: &str) -> Result<(), EngineError> {
        DockerEngine::restore_container(self, id, name).await
    }

    async fn checkpoint_running(&self, id: &str, name: &str) -> Result<(), EngineError> {
        DockerEngine::checkpoint_running(self, id, name).await
    }

    async fn keep_memory(&self, id: &str, name: &str, kept: &str) -> Result<u64, EngineError> {
        DockerEngine::keep_memory(self, id, name, kept).await
    }

    async fn place_memory(&self, kept: &str, id: &str, name: &str) -> Result<(), EngineError> {
        DockerEngine::place_memory(self, kept, id, name).await
    }

    async fn checkpoint_bytes(&self, id: &str, name: &str) -> Result<u64, EngineError> {
        DockerEngine::checkpoint_bytes(self, id, name).await
    }

    async fn drop_memory(&self, kept: &str) -> Result<(), EngineError> {
        DockerEngine::drop_memory(self, kept).await
    }

    async fn remove_checkpoint(&self, id: &str, name: &str) -> Result<(), EngineError> {
        DockerEngine::remove_checkpoint(self, id, name).await
    }

    async fn container_changes(
        &self,
        id: &str,
    ) -> Result<Vec<(String, sandboxd_core::api::ChangeKind)>, EngineError> {
        DockerEngine::container_changes(self, id).await
    }

    async fn commit_container(&self, id: &str, commit: &Commit) -> Result<i64, EngineError> {
        DockerEngine::commit_container(self, id, commit).await
    }

    async fn image_facts(&self, image: &str) -> Result<Option<ImageFacts>, EngineError> {
        DockerEngine::image_facts(self, image).await
    }

    async fn unpack_at_root(
        &self,
        container: &str,
        tar: sandboxd_contracts::Chunks,
    ) -> Result<(), EngineError> {
        DockerEngine::unpack_at_root(self, container, tar).await
    }

    async fn commit_as(
        &self,
        container: &str,
        image: &str,
        settings: &sandboxd_core::template_build::Settings,
    ) -> Result<(), EngineError> {
        DockerEngine::commit_as(self, container, image, settings).await
    }

    async fn remove_build_containers(&self, build_id: &str) -> Result<(), EngineError> {
        DockerEngine::remove_build_containers(self, build_id).await
    }

    async fn tag_image(&self, image: &str, target: &str) -> Result<(), EngineError> {
        DockerEngine::tag_image(self, image, target).await
    }

    async fn save_image(&self, image: &str) -> Result<Chunks, EngineError> {
        DockerEngine::save_image(self, image).await
    }

    async fn load_image(&self, archive: Chunks) -> Result<(), EngineError> {
        DockerEngine::load_image(self, archive).await
    }

    async fn images_of(&self, repository: &str) -> Result<Vec<(String, i64)>, EngineError> {
        DockerEngine::images_of(self, repository).await
    }

    async fn remove_image(&self, image: &str) -> Result<(), EngineError> {
        DockerEngine::remove_image(self, image).await
    }

    async fn create_volume(
        &self,
        name: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        DockerEngine::create_volume(self, name, labels).await
    }

    async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        DockerEngine::remove_volume(self, name).await
    }

    async fn remove_container(&self, id: &str) -> Result<(), EngineError> {
        DockerEngine::remove_container(self, id).await
    }

    async fn update_limits(
        &self,
        id: &str,
        nano_cpus: i64,
        memory_bytes: i64,
        pids_limit: i64,
    ) -> Result<(), EngineError> {
        DockerEngine::update_limits(self, id, nano_cpus, memory_bytes, pids_limit).await
    }

    async fn list_sandbox_containers(
        &self,
        instance_id: &str,
    ) -> Result<Vec<ContainerState>, EngineError> {
        DockerEngine::list_sandbox_containers(self, instance_id).await
    }

    async fn is_running(&self, id: &str) -> Result<bool, EngineError> {
        DockerEngine::is_running(self, id).await
    }

    async fn usage(&self, id: &str) -> Result<UsageSample, EngineError> {
        DockerEngine::usage(self, id).await
    }

    fn container_deaths(&self, instance: &str) -> Deaths {
        Box::pin(DockerEngine::container_deaths(self, instance))
    }

    async fn exec(&self, container: &str, spec: ExecSpec) -> Result<ExecOutcome, EngineError> {
        DockerEngine::exec(self, container, spec).await
    }

    async fn put_file(
        &self,
        container: &str,
        dir: &str,
        name: &str,
        content: &[u8],
        mode: u32,
        owner: (u32, u32),
    ) -> Result<(), EngineError> {
        DockerEngine::put_file(self, container, dir, name, content, mode, owner).await
    }

    async fn put_dir(
        &self,
        container: &str,
        parent: &str,
        name: &str,
        owner: (u32, u32),
    ) -> Result<(), EngineError> {
        DockerEngine::put_dir(self, container, parent, name, owner).await
    }

    async fn read_file(
        &self,
        container: &str,
        path: &str,
        max: usize,
        user: &str,
    ) -> Result<Vec<u8>, ReadFileError> {
        DockerEngine::read_file(self, container, path, max, user).await
    }

    async fn is_empty_dir(&self, container: &str, path: &str) -> Result<Option<bool>, EngineError> {
        DockerEngine::is_empty_dir(self, container, path).await
    }

    async fn put_archive(
        &self,
        container: &str,
        dir: &str,
        tar: Chunks,
        user: &str,
    ) -> Result<(), EngineError> {
        DockerEngine::tar_in_as(self, container, dir, user, tar).await
    }

    async fn get_archive(
        &self,
        container: &str,
        path: &str,
        user: &str,
    ) -> Result<Chunks, EngineError> {
        DockerEngine::tar_out_as(self, container, path, user).await
    }
}
