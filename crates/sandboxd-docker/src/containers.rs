//! Sandbox containers: create from a plan, start, kill, remove, list.
//!
//! A plan becomes a create body; the sandbox's volumes are mounted with `NoCopy`,
//! read-only where asked, each checked to exist first. A listing by label says whether
//! each container is paused. Limits are updated, on this host through `cgroup_limits.rs`
//! (the engine told the same a moment later); a removal on this host also removes what is
//! left of the container's cgroup directories (`cgroup_leftovers.rs`).

use std::collections::HashMap;

use bollard::models::{
    ContainerCreateBody, ContainerSummaryStateEnum, HostConfig, HostConfigLogConfig, Mount,
    MountType, MountVolumeOptions, ResourcesUlimits, RestartPolicy, RestartPolicyNameEnum,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};
use sandboxd_core::limits::STOP_GRACE_SECS;
use sandboxd_core::plan::{
    ContainerPlan, LABEL_INSTANCE, LABEL_SANDBOX, LABEL_SANDBOX_ID, LOG_MAX_SIZE, NetworkPlan,
    hardening,
};
use sandboxd_core::reconcile::ContainerState;

use crate::cgroup_limits;
use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify, fault, message_of, status_of};
use tracing::debug;

/// How long after limits were written to a container's cgroup the engine is told them.
const ENGINE_RECORD_DELAY: std::time::Duration = std::time::Duration::from_millis(500);

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|s| (*s).to_owned()).collect()
}

/// The engine's create body for a plan.
fn create_body(plan: &ContainerPlan) -> ContainerCreateBody {
    let (network_disabled, network_mode) = match &plan.network {
        NetworkPlan::Disabled => (Some(true), None),
        NetworkPlan::Bridge(name) => (None, Some(name.clone())),
    };
    ContainerCreateBody {
        image: Some(plan.image.clone()),
        // An empty entrypoint resets the image's, so our command always is the main process.
        entrypoint: Some(vec![String::new()]),
        cmd: Some(plan.cmd.clone()),
        working_dir: Some(plan.workdir.clone()),
        env: Some(plan.env.clone()),
        user: plan.user.clone(),
        labels: Some(plan.labels.clone().into_iter().collect()),
        network_disabled,
        host_config: Some(HostConfig {
            // Without the agent, the engine's init reaps the orphans a killed command
            // leaves behind; with it, the agent's supervisor is PID 1 and reaps them.
            init: Some(plan.engine_init),
            // When the host runs out of memory, sandboxes go before sandboxd and the
            // engine.
            oom_score_adj: Some(hardening::OOM_SCORE_ADJ),
            nano_cpus: Some(plan.nano_cpus),
            memory: Some(plan.memory_bytes),
            memory_swap: Some(plan.memory_bytes),
            pids_limit: Some(plan.pids_limit),
            ulimits: plan.nproc.map(|nproc| {
                vec![ResourcesUlimits {
                    name: Some("nproc".into()),
                    soft: Some(nproc),
                    hard: Some(nproc),
                }]
            }),
            cap_drop: Some(strings(hardening::CAP_DROP)),
            security_opt: Some(strings(hardening::SECURITY_OPT)),
            restart_policy: Some(RestartPolicy {
                name: Some(RestartPolicyNameEnum::NO),
                maximum_retry_count: None,
            }),
            log_config: Some(HostConfigLogConfig {
                typ: Some("json-file".into()),
                config: Some(HashMap::from([
                    ("max-size".to_owned(), LOG_MAX_SIZE.to_owned()),
                    ("max-file".to_owned(), "1".to_owned()),
                ])),
            }),
            network_mode,
            runtime: plan.runtime.clone(),
            // Read-only binds: the sandbox can neither change the agent nor put anything
            // next to the socket sandboxd listens on. Mounts rather than `Binds` strings, so
            // a host path may hold `:` or `,`.
            // The sandbox's volumes follow, never filled from the image (`NoCopy`).
            mounts: Some(
                plan.mounts
                    .iter()
                    .map(|m| Mount {
                        typ: Some(MountType::BIND),
                        source: Some(m.source.clone()),
                        target: Some(m.target.clone()),
                        read_only: Some(true),
                        ..Default::default()
                    })
                    .chain(plan.volumes.iter().map(|v| Mount {
                        typ: Some(MountType::VOLUME),
                        source: Some(v.name.clone()),
                        target: Some(v.target.clone()),
                        read_only: Some(v.read_only),
                        volume_options: Some(MountVolumeOptions {
                            no_copy: Some(true),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }))
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl DockerEngine {
    /// Creates (does not start) the container of a plan; returns its id.
    pub(crate) async fn create_container(
        &self,
        plan: &ContainerPlan,
    ) -> Result<String, EngineError> {
        let options = CreateContainerOptionsBuilder::default()
            .name(&plan.name)
            .build();
        let created = bounded(
            "create container",
            self.docker
                .create_container(Some(options), create_body(plan)),
        )
        .await?
        .map_err(|e| classify("image", e))?;
        // A volume gone from the engine is made again, empty and unlabelled, by the
        // create: such a container and volume go. Checked once the container exists,
        // since from then on the engine keeps the volume.
        for volume in &plan.volumes {
            if !self.volume_is_ours(&volume.name).await? {
                let _ = self.remove_container(&created.id).await;
                let _ = self.remove_volume(&volume.name).await;
                return Err(EngineError::NotFound { what: "volume" });
            }
        }
        Ok(created.id)
    }

    /// What the engine keeps of a container (404: `NotFound`).
    pub(crate) async fn inspect(
        &self,
        id: &str,
    ) -> Result<bollard::models::ContainerInspectResponse, EngineError> {
        bounded(
            "inspect container",
            self.docker.inspect_container(
                id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            ),
        )
        .await?
        .map_err(|e| classify("container", e))
    }

    /// Starts a created or stopped container; one already running is left as it is.
    /// One with volumes is started only while no path its mounts go through is a
    /// symbolic link in its filesystem (checked before every start: the sandbox may
    /// have made one since the last).
    pub(crate) async fn start_container(&self, id: &str) -> Result<(), EngineError> {
        self.check_mount_paths(id).await?;
        match bounded("start container", self.docker.start_container(id, None)).await? {
            Ok(()) => Ok(()),
            Err(e) => match status_of(&e) {
                Some(304) => Ok(()),
                Some(404) => Err(EngineError::NotFound { what: "container" }),
                // The engine answered: its runtime failed the start. runc's refusals of an
                // image come as 400, runsc's (gVisor's) as 500.
                Some(status) => Err(EngineError::CannotStart {
                    status,
                    message: message_of(&e),
                }),
                None => Err(fault(e)),
            },
        }
    }

    /// Sends SIGKILL to every process of a container.
    pub(crate) async fn kill_container(&self, id: &str) -> Result<(), EngineError> {
        let options = KillContainerOptionsBuilder::default()
            .signal("SIGKILL")
            .build();
        bounded(
            "kill container",
            self.docker.kill_container(id, Some(options)),
        )
        .await?
        .map_err(|e| classify("container", e))
    }

    /// Stops a container (2 s grace, then SIGKILL) and removes it; a container that is
    /// already stopped or gone is not an error.
    pub(crate) async fn destroy_container(&self, id: &str) -> Result<(), EngineError> {
        let stop = StopContainerOptionsBuilder::default()
            .t(STOP_GRACE_SECS)
            .build();
        match bounded("stop container", self.docker.stop_container(id, Some(stop))).await? {
            Ok(()) => {}
            Err(e) if matches!(status_of(&e), Some(304 | 404)) => {}
            Err(e) => return Err(fault(e)),
        }
        self.remove_container(id).await
    }

    /// Changes the CPU, memory (= memory + swap) and pids limits of a container. A
    /// container of the local engine found on this host has them written to its cgroup
    /// at once, and the engine told the same in the background (see `cgroup_limits`);
    /// any other is updated through the engine.
    pub(crate) async fn update_limits(
        &self,
        id: &str,
        nano_cpus: i64,
        memory_bytes: i64,
        pids_limit: i64,
    ) -> Result<(), EngineError> {
        let limits = bollard::models::ContainerUpdateBody {
            nano_cpus: Some(nano_cpus),
            memory: Some(memory_bytes),
            memory_swap: Some(memory_bytes),
            pids_limit: Some(pids_limit),
            ..Default::default()
        };
        if self.session.is_none() {
            let container = id.to_owned();
            let direct = cgroup_limits::Limits {
                nano_cpus,
                memory_bytes,
                pids_limit,
            };
            let written = tokio::task::spawn_blocking(move || {
                cgroup_limits::write(
                    std::path::Path::new(cgroup_limits::CGROUP_ROOT),
                    &container,
                    direct,
                )
            })
            .await;
            match written {
                Ok(Ok(true)) => {
                    let docker = self.docker.clone();
                    let id = id.to_owned();
                    tokio::spawn(async move {
                        // Later, so that the engine's work does not compete with the
                        // sandbox's first commands for the host's CPUs.
                        tokio::time::sleep(ENGINE_RECORD_DELAY).await;
                        if let Ok(Err(error)) =
                            bounded("update container", docker.update_container(&id, limits)).await
                        {
                            debug!(container = %id, %error, "the engine's record of limits written to the cgroup was not updated");
                        }
                    });
                    return Ok(());
                }
                Ok(Ok(false)) => {}
                Ok(Err(error)) => {
                    debug!(container = %id, %error, "limits not written to the cgroup; updating through the engine");
                }
                Err(_) => {}
            }
        }
        bounded("update container", self.docker.update_container(id, limits))
            .await?
            .map_err(fault)
    }

    /// Every container (running or not) carrying all of `labels` (`key=value`).
    pub(crate) async fn list_labelled(
        &self,
        labels: Vec<String>,
    ) -> Result<Vec<bollard::models::ContainerSummary>, EngineError> {
        let filters = HashMap::from([("label", labels)]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        bounded(
            "list containers",
            self.docker.list_containers(Some(options)),
        )
        .await?
        .map_err(fault)
    }

    /// Force-removes a container; a container already gone is not an error.
    pub(crate) async fn remove_container(&self, id: &str) -> Result<(), EngineError> {
        let remove = RemoveContainerOptionsBuilder::default()
            .force(true)
            // Anonymous volumes (an image's `VOLUME`) go with their sandbox.
            .v(true)
            .build();
        match bounded(
            "remove container",
            self.docker.remove_container(id, Some(remove)),
        )
        .await?
        {
            Ok(()) => {}
            Err(e) if status_of(&e) == Some(404) => {}
            Err(e) => return Err(fault(e)),
        }
        // What a failed gVisor start left of the container on this host.
        if self.session.is_none() {
            let container = id.to_owned();
            tokio::task::spawn_blocking(move || {
                crate::cgroup_leftovers::remove(
                    std::path::Path::new(cgroup_limits::CGROUP_ROOT),
                    &container,
                );
            });
        }
        Ok(())
    }

    /// Every container (running or not) labelled as a sandbox of this installation.
    pub(crate) async fn list_sandbox_containers(
        &self,
        instance_id: &str,
    ) -> Result<Vec<ContainerState>, EngineError> {
        let list = self
            .list_labelled(vec![
                format!("{LABEL_SANDBOX}=true"),
                format!("{LABEL_INSTANCE}={instance_id}"),
            ])
            .await?;
        Ok(list
            .into_iter()
            .filter_map(|summary| {
                let sandbox_id = summary
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(LABEL_SANDBOX_ID).cloned());
                Some(ContainerState {
                    container_id: summary.id?,
                    sandbox_id,
                    running: summary.state == Some(ContainerSummaryStateEnum::RUNNING),
                    paused: summary.state == Some(ContainerSummaryStateEnum::PAUSED),
                })
            })
            .collect())
    }
}
