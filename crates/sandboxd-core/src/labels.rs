//! The labels sandboxd puts on what it makes on an engine (containers, snapshot images,
//! volumes): who made it, for which sandbox, project and environment.
//!
//! Re-exported by `plan`. A snapshot image's own label is in `snapshots.rs`, a volume's
//! in `volumes.rs`; a warm pool member carries `sandboxd.pool`.

/// Label present on every container sandboxd creates.
pub const LABEL_SANDBOX: &str = "sandboxd.sandbox";
/// Label holding the sandbox id.
pub const LABEL_SANDBOX_ID: &str = "sandboxd.sandboxId";
/// Label holding the project id.
pub const LABEL_PROJECT_ID: &str = "sandboxd.projectId";
/// Label holding the environment id.
pub const LABEL_ENVIRONMENT_ID: &str = "sandboxd.environmentId";
/// Label naming the sandboxd installation (its store) that owns the container, so that
/// two installations sharing an engine never reconcile each other's containers away.
pub const LABEL_INSTANCE: &str = "sandboxd.instance";
/// Label of a warm-pool container: the template of its pool.
pub const LABEL_POOL: &str = "sandboxd.pool";
