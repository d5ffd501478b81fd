//! Planners of the reaper and of reconcile. Startup and periodic reconcile run the same plan.
//!
//! `plan_reconcile(rows, containers, now)`: orphan containers to remove, rows lost or
//! stuck to mark `error`, stopped containers of running, unexpired rows to start again,
//! frozen containers of running rows to thaw (a paused row's frozen container is left as
//! it is). `expired(rows, now)` is the reaper's.

use std::collections::{HashMap, HashSet};

use crate::limits::STUCK_CREATING_MS;
use crate::model::{Sandbox, SandboxStatus};

/// A sandbox row as reconcile sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowState {
    pub sandbox_id: String,
    pub container_id: Option<String>,
    pub status: SandboxStatus,
    pub created_at: i64,
    /// When a running sandbox expires (its idle timeout); `None` while creating.
    pub expires_at: Option<i64>,
}

/// A labelled container as the engine lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    pub container_id: String,
    pub sandbox_id: Option<String>,
    pub running: bool,
    /// Frozen by the engine (`running` is false then).
    pub paused: bool,
}

/// What one reconcile pass does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcilePlan {
    /// Containers to remove: no row, another container in the row, or a row that is
    /// neither creating, running nor paused.
    pub remove_containers: Vec<String>,
    /// Running rows whose container is gone, and rows stuck in `creating`.
    pub mark_error: Vec<String>,
    /// Running, unexpired rows whose own container stopped (an engine restart, a main
    /// process that ended): `(sandbox, container)` to start again, files kept.
    pub restart: Vec<(String, String)>,
    /// Running rows whose own container is frozen (a pause cut short before its row
    /// was written, or the engine's own `pause`): `(sandbox, container)` to thaw.
    pub unpause: Vec<(String, String)>,
}

impl ReconcilePlan {
    pub fn is_empty(&self) -> bool {
        self.remove_containers.is_empty()
            && self.mark_error.is_empty()
            && self.restart.is_empty()
            && self.unpause.is_empty()
    }
}

/// Plans reconcile from the `creating`/`running`/`paused` rows and the labelled
/// containers. A sandbox still `creating` is left to its creator unless it is older than
/// 10 minutes. A running sandbox whose container stopped is started again (one path for
/// a stop seen as it happens, after an engine restart, or at sandboxd's own start); one
/// whose container is frozen is thawed; one whose container is gone is in error. A
/// paused sandbox's container is left as it is, frozen or not: its resume starts it.
/// Containers of `pool_members` (warm-pool sandboxes not claimed yet, being made or
/// being claimed) have no row and are kept; any other container without a row goes.
pub fn plan_reconcile(
    rows: &[RowState],
    containers: &[ContainerState],
    pool_members: &HashSet<String>,
    now: i64,
) -> ReconcilePlan {
    let by_id: HashMap<&str, &RowState> = rows.iter().map(|r| (r.sandbox_id.as_str(), r)).collect();
    let stuck = |row: &RowState| {
        row.status == SandboxStatus::Creating && now - row.created_at > STUCK_CREATING_MS
    };
    let mut live: HashSet<&str> = HashSet::new();
    let mut plan = ReconcilePlan::default();
    for container in containers {
        let row = container.sandbox_id.as_deref().and_then(|id| by_id.get(id));
        match row {
            Some(row) if row.status == SandboxStatus::Creating && !stuck(row) => {}
            None if container
                .sandbox_id
                .as_ref()
                .is_some_and(|id| pool_members.contains(id)) => {}
            Some(row)
                if row.status == SandboxStatus::Paused
                    && row.container_id.as_deref() == Some(container.container_id.as_str()) =>
            {
                live.insert(container.container_id.as_str());
            }
            Some(row)
                if row.status == SandboxStatus::Running
                    && row.container_id.as_deref() == Some(container.container_id.as_str()) =>
            {
                live.insert(container.container_id.as_str());
                let kept = (row.sandbox_id.clone(), container.container_id.clone());
                // An expired one is the reaper's to kill, not to start again.
                let expired = row.expires_at.is_some_and(|at| at <= now);
                if container.paused {
                    plan.unpause.push(kept);
                } else if !container.running && !expired {
                    plan.restart.push(kept);
                }
            }
            _ => plan.remove_containers.push(container.container_id.clone()),
        }
    }
    for row in rows {
        let lost = matches!(row.status, SandboxStatus::Running | SandboxStatus::Paused)
            && !row
                .container_id
                .as_deref()
                .is_some_and(|id| live.contains(id));
        if lost || stuck(row) {
            plan.mark_error.push(row.sandbox_id.clone());
        }
    }
    plan
}

/// The sandboxes the reaper pauses or kills at `now` ([`Sandbox::on_expiry`]).
pub fn expired(rows: &[Sandbox], now: i64) -> Vec<&Sandbox> {
    rows.iter().filter(|s| s.is_expired(now)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, container: Option<&str>, status: SandboxStatus, created_at: i64) -> RowState {
        RowState {
            sandbox_id: id.into(),
            container_id: container.map(Into::into),
            status,
            created_at,
            expires_at: (status == SandboxStatus::Running).then_some(NOW + 60_000),
        }
    }

    fn container(id: &str, sandbox: Option<&str>, running: bool) -> ContainerState {
        ContainerState {
            container_id: id.into(),
            sandbox_id: sandbox.map(Into::into),
            running,
            paused: false,
        }
    }

    fn frozen(id: &str, sandbox: &str) -> ContainerState {
        ContainerState {
            running: false,
            paused: true,
            ..container(id, Some(sandbox), false)
        }
    }

    const NOW: i64 = 100 * 60 * 1000;

    #[test]
    fn plans_every_case() {
        use SandboxStatus::*;
        let rows = [
            row("ok", Some("c_ok"), Running, 0),
            row("gone", Some("c_gone"), Running, 0),
            row("stopped", Some("c_stopped"), Running, 0),
            row("swapped", Some("c_new"), Running, 0),
            row("creating", None, Creating, NOW - 1000),
            row("stuck", None, Creating, NOW - STUCK_CREATING_MS - 1),
            row("nocontainer", None, Running, 0),
            RowState {
                expires_at: Some(NOW - 1),
                ..row("expired", Some("c_expired"), Running, 0)
            },
            row("paused", Some("c_paused"), Paused, 0),
            row("paused_stopped", Some("c_paused_stopped"), Paused, 0),
            row("paused_gone", Some("c_paused_gone"), Paused, 0),
            row("thaw", Some("c_thaw"), Running, 0),
        ];
        let containers = [
            container("c_ok", Some("ok"), true),
            container("c_stopped", Some("stopped"), false),
            container("c_old", Some("swapped"), true),
            container("c_orphan", Some("unknown"), true),
            container("c_unlabelled", None, true),
            container("c_creating", Some("creating"), true),
            container("c_stuck", Some("stuck"), true),
            container("c_expired", Some("expired"), false),
            frozen("c_paused", "paused"),
            container("c_paused_stopped", Some("paused_stopped"), false),
            frozen("c_thaw", "thaw"),
        ];
        let plan = plan_reconcile(&rows, &containers, &HashSet::new(), NOW);
        assert_eq!(
            plan.remove_containers,
            ["c_old", "c_orphan", "c_unlabelled", "c_stuck"]
        );
        assert_eq!(
            plan.mark_error,
            ["gone", "swapped", "stuck", "nocontainer", "paused_gone"]
        );
        assert_eq!(plan.restart, [("stopped".into(), "c_stopped".into())]);
        assert_eq!(plan.unpause, [("thaw".into(), "c_thaw".into())]);
    }

    #[test]
    fn empty_world_plans_nothing() {
        assert!(plan_reconcile(&[], &[], &HashSet::new(), NOW).is_empty());
    }

    #[test]
    fn pool_members_are_kept_and_other_rowless_containers_go() {
        let container = |id: &str| ContainerState {
            container_id: format!("c-{id}"),
            sandbox_id: Some(id.into()),
            running: true,
            paused: false,
        };
        let members = HashSet::from(["warm".to_owned()]);
        let plan = plan_reconcile(&[], &[container("warm"), container("gone")], &members, NOW);
        assert_eq!(plan.remove_containers, ["c-gone"]);
    }
}
