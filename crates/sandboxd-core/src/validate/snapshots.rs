//! Checks of `sandbox.snapshot`, `sandbox.fork` and `snapshot.*`.
//!
//! `TakeSnapshot` (the name), `Fork` (`count` 1–20, `envVars`, the timeout) and a
//! snapshot id.

use crate::api::{ForkRequest, SnapshotRequest};
use crate::error::{Invalid, Issues};
use crate::limits::*;
use crate::snapshots::MAX_FORK;

use super::{check_timeout, display_name, required_id};

/// A checked `sandbox.snapshot`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeSnapshot {
    pub sandbox_id: String,
    pub name: Option<String>,
    /// With the processes and their memory.
    pub memory: bool,
}

/// A checked `sandbox.fork`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fork {
    pub sandbox_id: String,
    pub count: usize,
    pub env_vars: Option<String>,
    /// `None`: the source's.
    pub timeout_ms: Option<i64>,
    /// Each continues the source's processes.
    pub memory: bool,
}

/// Checks `sandbox.snapshot`.
pub fn take_snapshot(req: SnapshotRequest) -> Result<TakeSnapshot, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    if let Some(name) = &req.name {
        display_name(&mut issues, "name", name);
    }
    issues.finish(TakeSnapshot {
        sandbox_id: req.sandbox_id,
        name: req.name,
        memory: req.memory.unwrap_or(false),
    })
}

/// Checks `sandbox.fork`.
pub fn fork(req: ForkRequest) -> Result<Fork, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let count = req.count.unwrap_or(1);
    if !(1..=MAX_FORK).contains(&count) {
        issues.push("count", "must be between 1 and 20");
    }
    if let Some(env) = &req.env_vars {
        if env.len() > MAX_ENV_VARS_BYTES {
            issues.push("envVars", "must be at most 65536 bytes");
        } else if env.contains('\0') {
            issues.push("envVars", "must not contain NUL");
        }
    }
    if let Some(timeout) = req.timeout_ms {
        check_timeout(&mut issues, timeout);
    }
    issues.finish(Fork {
        sandbox_id: req.sandbox_id,
        count: usize::try_from(count).unwrap_or(1),
        env_vars: req.env_vars,
        timeout_ms: req.timeout_ms,
        memory: req.memory.unwrap_or(false),
    })
}

/// Checks a snapshot id alone.
pub fn snapshot_id(value: &str) -> Result<String, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "snapshotId", value);
    issues.finish(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_counts_are_bounded() {
        let req = |count| ForkRequest {
            sandbox_id: "s".into(),
            count,
            ..Default::default()
        };
        assert_eq!(fork(req(None)).unwrap().count, 1);
        assert_eq!(fork(req(Some(20))).unwrap().count, 20);
        for bad in [0, 21, -1] {
            let error = fork(req(Some(bad))).unwrap_err();
            assert_eq!(error.issues[0].path, "count");
        }
    }

    #[test]
    fn a_snapshot_needs_its_sandbox_and_a_sane_name() {
        assert!(take_snapshot(SnapshotRequest::default()).is_err());
        let long = SnapshotRequest {
            sandbox_id: "s".into(),
            name: Some("x".repeat(65)),
            memory: None,
        };
        assert_eq!(take_snapshot(long).unwrap_err().issues[0].path, "name");
    }
}
