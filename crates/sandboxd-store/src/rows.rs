//! Mapping of database rows to domain records.

use sandboxd_core::model::{Environment, NetworkMode, Project, Sandbox, SandboxStatus};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::StoreError;

/// `SELECT <every column [`sandbox`] reads> FROM sandboxes <tail>`, as a static string.
macro_rules! select_sandboxes {
    ($tail:literal) => {
        concat!(
            "SELECT sandbox_id, name, organization_id, project_id, environment_id, server_id, ",
            "image, template, container_id, status, cpu, memory_mb, pids_limit, timeout_ms, ",
            "network_mode, workdir, run_as, runtime, created_at, expires_at, last_activity_at, ",
            "killed_at, env_per_exec, labels, egress, auto_pause, paused_timeout_ms, paused_at, volumes, ",
            "fixed_timeout ",
            "FROM sandboxes ",
            $tail
        )
    };
}
pub(crate) use select_sandboxes;

pub(crate) fn sandbox(row: &AnyRow) -> Result<Sandbox, StoreError> {
    let status: String = row.try_get("status")?;
    let mode: String = row.try_get("network_mode")?;
    Ok(Sandbox {
        sandbox_id: row.try_get("sandbox_id")?,
        name: row.try_get("name")?,
        organization_id: row.try_get("organization_id")?,
        project_id: row.try_get("project_id")?,
        environment_id: row.try_get("environment_id")?,
        server_id: row.try_get("server_id")?,
        image: row.try_get("image")?,
        template: row.try_get("template")?,
        container_id: row.try_get("container_id")?,
        status: SandboxStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown sandbox status {status}")))?,
        cpu: row.try_get("cpu")?,
        memory_mb: row.try_get("memory_mb")?,
        pids_limit: row.try_get("pids_limit")?,
        timeout_ms: row.try_get("timeout_ms")?,
        network_mode: NetworkMode::parse(&mode)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown network mode {mode}")))?,
        workdir: row.try_get("workdir")?,
        user: row.try_get("run_as")?,
        runtime: row.try_get("runtime")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
        last_activity_at: row.try_get("last_activity_at")?,
        killed_at: row.try_get("killed_at")?,
        env_per_exec: row.try_get::<i64, _>("env_per_exec")? != 0,
        labels: serde_json::from_str(&row.try_get::<String, _>("labels")?)
            .map_err(|e| StoreError::Corrupt(format!("sandbox labels: {e}")))?,
        egress: serde_json::from_str(&row.try_get::<String, _>("egress")?)
            .map_err(|e| StoreError::Corrupt(format!("sandbox egress: {e}")))?,
        auto_pause: row.try_get::<i64, _>("auto_pause")? != 0,
        fixed_timeout: row.try_get::<i64, _>("fixed_timeout")? != 0,
        paused_timeout_ms: row.try_get("paused_timeout_ms")?,
        paused_at: row.try_get("paused_at")?,
        volumes: serde_json::from_str(&row.try_get::<String, _>("volumes")?)
            .map_err(|e| StoreError::Corrupt(format!("sandbox volumes: {e}")))?,
    })
}

/// A sandbox's egress list as its column holds it.
pub(crate) fn egress_json(egress: &[String]) -> String {
    serde_json::to_string(egress).unwrap_or_else(|_| "[]".to_owned())
}

/// A sandbox's volumes as their column holds them.
pub(crate) fn volumes_json(volumes: &[sandboxd_core::volumes::VolumeMount]) -> String {
    serde_json::to_string(volumes).unwrap_or_else(|_| "[]".to_owned())
}

/// A sandbox's labels as their column holds them.
pub(crate) fn labels_json(labels: &std::collections::BTreeMap<String, String>) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "{}".to_owned())
}

pub(crate) fn project(row: &AnyRow) -> Result<Project, StoreError> {
    Ok(Project {
        project_id: row.try_get("project_id")?,
        organization_id: row.try_get("organization_id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        created_at: row.try_get("created_at")?,
    })
}

pub(crate) fn environment(row: &AnyRow) -> Result<Environment, StoreError> {
    Ok(Environment {
        environment_id: row.try_get("environment_id")?,
        project_id: row.try_get("project_id")?,
        organization_id: row.try_get("organization_id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        created_at: row.try_get("created_at")?,
    })
}
