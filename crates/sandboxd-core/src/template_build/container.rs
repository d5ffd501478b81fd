//! The container a build step runs in: a sandbox's hardening (every capability dropped,
//! `no-new-privileges`, CPU, memory and pids limits, the network the build asked for, the
//! runtime of its isolation), with nothing mounted, idle until the step's command runs
//! in it through the engine's exec. Labelled with the build, never as a sandbox, so
//! reconcile and the death watch leave it to its build.

use std::collections::BTreeMap;

use super::cache::LABEL_BUILD;
use crate::model::NetworkMode;
use crate::plan::{
    ContainerPlan, IDLE_COMMAND, INTERNET_NETWORK, NetworkPlan, engine_pids_limit, under_gvisor,
};

/// The label naming the installation a build's container belongs to.
pub const LABEL_BUILD_INSTANCE: &str = "sandboxd.buildInstance";
/// The processes a build step may run at once.
pub const BUILD_PIDS_LIMIT: i64 = 1024;

/// What a build's containers get.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildShape {
    pub cpu: f64,
    pub memory_mb: i64,
    pub network: NetworkMode,
    /// The engine's runtime (`runsc` for gVisor); `None`: the engine's default.
    pub runtime: Option<String>,
}

/// The plan of build `build_id`'s container for step `step`, on `image`.
pub fn build_container_plan(
    build_id: &str,
    step: usize,
    image: &str,
    instance_id: &str,
    shape: &BuildShape,
) -> ContainerPlan {
    let gvisor = under_gvisor(shape.runtime.as_deref());
    ContainerPlan {
        name: format!("sandboxd-build-{}-{step}", build_id.to_ascii_lowercase()),
        image: image.to_owned(),
        cmd: IDLE_COMMAND.iter().map(|s| (*s).to_owned()).collect(),
        workdir: "/".into(),
        env: Vec::new(),
        user: Some("0:0".into()),
        labels: BTreeMap::from([
            (LABEL_BUILD.to_owned(), build_id.to_owned()),
            (LABEL_BUILD_INSTANCE.to_owned(), instance_id.to_owned()),
        ]),
        nano_cpus: (shape.cpu * 1e9).round() as i64,
        memory_bytes: shape.memory_mb * 1024 * 1024,
        pids_limit: engine_pids_limit(BUILD_PIDS_LIMIT, shape.runtime.as_deref()),
        nproc: gvisor.then_some(BUILD_PIDS_LIMIT),
        network: match shape.network {
            NetworkMode::Internet => NetworkPlan::Bridge(INTERNET_NETWORK.to_owned()),
            NetworkMode::Isolated | NetworkMode::Allowlist => NetworkPlan::Disabled,
        },
        mounts: Vec::new(),
        volumes: Vec::new(),
        engine_init: true,
        runtime: shape.runtime.clone(),
    }
}
