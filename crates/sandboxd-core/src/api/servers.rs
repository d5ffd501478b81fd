//! `server.*`: remote servers (a Docker engine reached over SSH).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

/// Present (even `null`) → `Some`; absent → `None` (with `#[serde(default)]`).
fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Body of `server.create`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateServerRequest {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    /// Host name or IP address of the server's SSH daemon.
    #[schema(min_length = 1, max_length = 253)]
    pub address: String,
    /// Default 22.
    #[schema(minimum = 1, maximum = 65535)]
    pub port: Option<u16>,
    /// Default `root`; the user must be able to use the engine's socket.
    pub user: Option<String>,
    /// The private key sandboxd logs in with, in OpenSSH format. Sealed at rest, never
    /// returned.
    #[schema(min_length = 1, max_length = 16384)]
    pub private_key: String,
    /// The server's host key (`ssh-ed25519 AAAA…`, a line of its `.pub` file). Absent:
    /// `server.test` learns it and pins it; until then nothing connects.
    #[schema(max_length = 8192)]
    pub host_key: Option<String>,
    /// The engine's socket on the server. Default `/var/run/docker.sock`.
    #[schema(max_length = 64)]
    pub docker_socket: Option<String>,
    /// Where sandboxd keeps its files on the server. Default `/var/lib/sandboxd`.
    #[schema(max_length = 64)]
    pub remote_dir: Option<String>,
    /// CPUs sandboxes may reserve on it; absent: what the engine reports.
    pub cpu: Option<f64>,
    /// Memory (MiB) sandboxes may reserve on it; absent: what the engine reports.
    pub memory_mb: Option<i64>,
    /// Warm pools to keep on it: template name → started sandboxes kept ready (at most
    /// 64 in all). A create on this server that a pool can serve claims a member.
    pub warm_pools: Option<BTreeMap<String, usize>>,
}

/// Body of `server.update`: absent fields are unchanged; `hostKey`, `cpu` and
/// `memoryMb` set to `null` go back to learned (by the next `server.test`) and to the
/// engine's figures.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateServerRequest {
    pub server_id: String,
    pub name: Option<String>,
    pub address: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub private_key: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub host_key: Option<Option<String>>,
    pub docker_socket: Option<String>,
    pub remote_dir: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>)]
    pub cpu: Option<Option<f64>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    pub memory_mb: Option<Option<i64>>,
    /// The whole table of warm pools (a template left out has none; `{}`: no pools).
    pub warm_pools: Option<BTreeMap<String, usize>>,
}

/// Body of `server.remove` and `server.test`; query of `server.one`.
#[derive(
    Debug, Clone, Default, Deserialize, ToSchema, utoipa::IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ServerIdBody {
    pub server_id: String,
}

/// CPU and memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub cpu: f64,
    pub memory_mb: i64,
}

/// A remote server (its private key is never returned).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerView {
    pub server_id: String,
    pub name: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    /// The pinned host key; `null` until given or learned by `server.test`.
    pub host_key: Option<String>,
    pub host_key_fingerprint: Option<String>,
    pub docker_socket: String,
    pub remote_dir: String,
    /// What sandboxes may reserve on it: as configured, else as its engine reports
    /// (`null` until it was reached).
    pub capacity: Option<Resources>,
    /// `configured`, `engine` or `unknown`.
    pub capacity_source: String,
    /// What its sandboxes that are creating or running reserve.
    pub reserved: Resources,
    /// `reachable`, `degraded` (cut off or failing in the last minute), `unreachable`,
    /// or `idle` (not connected yet: nothing has used it since sandboxd started).
    pub health: String,
    /// Why the last connection attempt failed, when it did.
    pub last_error: Option<String>,
    /// Warm pools kept on it: template name → members to keep ready.
    pub warm_pools: BTreeMap<String, usize>,
    /// Members ready to be claimed now, per template.
    pub warm_ready: BTreeMap<String, usize>,
    pub created_at: String,
}

/// What `server.test` found.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerTestResult {
    /// The server answered over SSH and its engine answered over that connection.
    pub reachable: bool,
    /// The host key the server presented.
    pub host_key: Option<String>,
    pub host_key_fingerprint: Option<String>,
    /// This test pinned the host key (none was pinned before).
    pub host_key_learned: bool,
    /// The engine's API version in use.
    pub api_version: Option<String>,
    pub cpus: Option<i64>,
    pub memory_mb: Option<i64>,
    /// Connection, login and one engine call, in milliseconds.
    pub duration_ms: u64,
    /// Why it is not reachable.
    pub error: Option<String>,
}
