//! Mapping of database rows to domain records.
//!
//! A sandbox row is read as one JSON array the database makes of its columns
//! (`json_array` on SQLite, `json_build_array` on PostgreSQL: one value for the driver to
//! convert instead of thirty), decoded with serde in column order. A list of sandboxes is
//! one JSON array of those (`json_group_array` / `json_agg`), unsorted in the database
//! and sorted newest first in memory (sorting the JSON text in SQLite doubled the query).

use sandboxd_core::model::{
    Environment, NetworkMode, PauseMemory, Project, Sandbox, SandboxStatus,
};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::StoreError;

/// Every column [`sandbox`] reads, in the order of [`SandboxColumns`].
macro_rules! sandbox_columns {
    () => {
        concat!(
            "sandbox_id, name, organization_id, project_id, environment_id, server_id, ",
            "image, template, container_id, status, cpu, memory_mb, pids_limit, timeout_ms, ",
            "network_mode, workdir, run_as, runtime, created_at, expires_at, last_activity_at, ",
            "killed_at, env_per_exec, labels, egress, auto_pause, fixed_timeout, ",
            "paused_timeout_ms, paused_at, volumes, hibernated_bytes"
        )
    };
}
pub(crate) use sandbox_columns;

/// `SELECT <open><every column [`sandbox`] reads><close> FROM sandboxes <tail>`, with
/// the open and close of the store's backend, as a static string.
macro_rules! sandbox_json_query {
    ($backend:expr, sqlite($lite_open:literal, $lite_close:literal),
     postgres($pg_open:literal, $pg_close:literal), $tail:literal) => {
        match $backend {
            $crate::Backend::Sqlite => concat!(
                $lite_open,
                $crate::rows::sandbox_columns!(),
                $lite_close,
                " FROM sandboxes ",
                $tail
            ),
            $crate::Backend::Postgres => concat!(
                $pg_open,
                $crate::rows::sandbox_columns!(),
                $pg_close,
                " FROM sandboxes ",
                $tail
            ),
        }
    };
}
pub(crate) use sandbox_json_query;

/// `SELECT <every column [`sandbox`] reads, as one JSON array> FROM sandboxes <tail>`.
/// One value per row, made by the database: a row of thirty values costs thirty
/// conversions in the driver, where this costs one (a list of 10,000 rows is read in a
/// sixth of the time).
macro_rules! select_sandboxes {
    ($backend:expr, $tail:literal) => {
        $crate::rows::sandbox_json_query!(
            $backend,
            sqlite("SELECT json_array(", ")"),
            postgres("SELECT json_build_array(", ")::text"),
            $tail
        )
    };
}
pub(crate) use select_sandboxes;

/// `SELECT <the rows of sandboxes <where> as one JSON array of `select_sandboxes!`'s
/// arrays>`: one value for the whole list, made by the database (`[]` for none), in no
/// order (sorting the JSON text in the database would double its time; see
/// [`newest_first`]).
macro_rules! list_sandboxes {
    ($backend:expr, $where:literal) => {
        $crate::rows::sandbox_json_query!(
            $backend,
            sqlite("SELECT json_group_array(json_array(", "))"),
            postgres(
                "SELECT COALESCE(json_agg(json_build_array(",
                ")), '[]')::text"
            ),
            $where
        )
    };
}
pub(crate) use list_sandboxes;

/// A sandbox row as `select_sandboxes!` reads it: a JSON array of its columns, in
/// order. Booleans are stored as 0/1; labels, egress and volumes as JSON text.
#[derive(serde::Deserialize)]
struct SandboxColumns {
    sandbox_id: String,
    name: String,
    organization_id: String,
    project_id: String,
    environment_id: String,
    server_id: Option<String>,
    image: String,
    template: Option<String>,
    container_id: Option<String>,
    status: String,
    cpu: f64,
    memory_mb: i64,
    pids_limit: i64,
    timeout_ms: i64,
    network_mode: String,
    workdir: String,
    run_as: Option<String>,
    runtime: Option<String>,
    created_at: i64,
    expires_at: Option<i64>,
    last_activity_at: Option<i64>,
    killed_at: Option<i64>,
    env_per_exec: i64,
    labels: String,
    egress: String,
    auto_pause: i64,
    fixed_timeout: i64,
    paused_timeout_ms: i64,
    paused_at: Option<i64>,
    volumes: String,
    hibernated_bytes: Option<i64>,
}

/// A JSON column's value.
fn json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("sandbox {what}: {e}")))
}

/// The sandbox of a row of `select_sandboxes!`.
pub(crate) fn sandbox(row: &AnyRow) -> Result<Sandbox, StoreError> {
    let text: String = row.try_get(0)?;
    from_columns(json("row", &text)?)
}

/// The sandboxes of the row of `list_sandboxes!`, in no order.
pub(crate) fn sandboxes(row: &AnyRow) -> Result<Vec<Sandbox>, StoreError> {
    let text: String = row.try_get(0)?;
    let rows: Vec<SandboxColumns> = json("rows", &text)?;
    rows.into_iter().map(from_columns).collect()
}

/// Sorts sandboxes newest first (ties by id).
pub(crate) fn newest_first(mut sandboxes: Vec<Sandbox>) -> Vec<Sandbox> {
    sandboxes.sort_unstable_by(|a, b| {
        b.created_at
            .cmp(&a.created_at)
            .then_with(|| a.sandbox_id.cmp(&b.sandbox_id))
    });
    sandboxes
}

fn from_columns(row: SandboxColumns) -> Result<Sandbox, StoreError> {
    Ok(Sandbox {
        status: SandboxStatus::parse(&row.status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown sandbox status {}", row.status)))?,
        network_mode: NetworkMode::parse(&row.network_mode).ok_or_else(|| {
            StoreError::Corrupt(format!("unknown network mode {}", row.network_mode))
        })?,
        labels: json("labels", &row.labels)?,
        egress: json("egress", &row.egress)?,
        volumes: json("volumes", &row.volumes)?,
        sandbox_id: row.sandbox_id,
        name: row.name,
        organization_id: row.organization_id,
        project_id: row.project_id,
        environment_id: row.environment_id,
        server_id: row.server_id,
        image: row.image,
        template: row.template,
        container_id: row.container_id,
        cpu: row.cpu,
        memory_mb: row.memory_mb,
        pids_limit: row.pids_limit,
        timeout_ms: row.timeout_ms,
        workdir: row.workdir,
        user: row.run_as,
        runtime: row.runtime,
        created_at: row.created_at,
        expires_at: row.expires_at,
        last_activity_at: row.last_activity_at,
        killed_at: row.killed_at,
        env_per_exec: row.env_per_exec != 0,
        auto_pause: match row.auto_pause {
            0 => None,
            2 => Some(PauseMemory::Disk),
            _ => Some(PauseMemory::Ram),
        },
        fixed_timeout: row.fixed_timeout != 0,
        paused_timeout_ms: row.paused_timeout_ms,
        paused_at: row.paused_at,
        hibernated_bytes: row.hibernated_bytes,
    })
}

/// `auto_pause` as its column holds it: 0 none, 1 in memory, 2 to disk (migration 0022).
pub(crate) fn auto_pause_column(auto_pause: Option<PauseMemory>) -> i64 {
    match auto_pause {
        None => 0,
        Some(PauseMemory::Ram) => 1,
        Some(PauseMemory::Disk) => 2,
    }
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
