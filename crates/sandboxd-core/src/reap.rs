//! Planner of `sandboxd reap`: which sandbox containers on an engine nobody looks after
//! any more. Unlike reconcile (the server's own pass, over its own containers), this
//! looks at every container labelled as a sandbox, whichever installation made it, and
//! only lists; the command removes what it lists only when told to.
//!
//! A container is listed when it is another installation's, has no record, or its record
//! ended, was replaced, is stuck creating or expired; narrowed by labels and age.

use std::collections::{BTreeMap, HashMap};

use crate::limits::STUCK_CREATING_MS;
use crate::model::SandboxStatus;
use crate::plan::{LABEL_INSTANCE, LABEL_SANDBOX_ID};

/// A container labelled as a sandbox, as the engine lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelledContainer {
    pub container_id: String,
    pub name: String,
    pub image: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub running: bool,
    pub labels: BTreeMap<String, String>,
}

/// A sandbox record of the installation the command looks from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub status: SandboxStatus,
    pub container_id: Option<String>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
}

/// What the installation knows: its id and its records by sandbox id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracking {
    pub instance_id: Option<String>,
    pub records: HashMap<String, Record>,
}

/// Why a container is listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Made by another installation (another data directory, perhaps deleted).
    OtherInstallation(String),
    /// Labelled as a sandbox without saying whose.
    Unlabelled,
    /// This installation has no record of it.
    NoRecord,
    /// Its record says the sandbox ended (killed or failed).
    Ended(SandboxStatus),
    /// Its record names another container.
    Replaced,
    /// Still `creating` after the time a create may take.
    StuckCreating,
    /// Running past its expiry (the server that would reap it is down or behind).
    Expired { expired_at: i64 },
}

impl Reason {
    /// One line a person reads.
    pub fn describe(&self) -> String {
        match self {
            Reason::OtherInstallation(id) => format!("made by another installation ({id})"),
            Reason::Unlabelled => "no installation label".into(),
            Reason::NoRecord => "not tracked (no record)".into(),
            Reason::Ended(status) => format!("record says {}", status.as_str()),
            Reason::Replaced => "record names another container".into(),
            Reason::StuckCreating => "stuck creating".into(),
            Reason::Expired { .. } => "expired".into(),
        }
    }

    /// A stable word for scripts.
    pub fn code(&self) -> &'static str {
        match self {
            Reason::OtherInstallation(_) => "other-installation",
            Reason::Unlabelled => "unlabelled",
            Reason::NoRecord => "untracked",
            Reason::Ended(_) => "ended",
            Reason::Replaced => "replaced",
            Reason::StuckCreating => "stuck-creating",
            Reason::Expired { .. } => "expired",
        }
    }
}

/// Which containers the command looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Every one of these labels must be on the container.
    pub labels: Vec<(String, String)>,
    /// Only containers at least this old (milliseconds).
    pub older_than_ms: Option<i64>,
}

impl Finding {
    /// Whether `--kill` may remove it. Another installation's container may belong to
    /// a server that is up (two installations can share an engine), so it goes only
    /// when the caller said any installation's may, or named the installation.
    pub fn removable(&self, any_installation: bool, selection: &Selection) -> bool {
        match &self.reason {
            Reason::OtherInstallation(id) => {
                any_installation
                    || selection
                        .labels
                        .iter()
                        .any(|(k, v)| k == LABEL_INSTANCE && v == id)
            }
            Reason::Unlabelled => any_installation,
            _ => true,
        }
    }
}

/// A container the command lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub container: LabelledContainer,
    pub reason: Reason,
    pub age_ms: i64,
}

/// The containers of `containers` nobody looks after, oldest first, among those
/// `selection` picks. Warm-pool members of this installation have no record by design
/// (the server holds them in memory and removes them when it starts) and are left out.
pub fn plan_reap(
    containers: &[LabelledContainer],
    tracking: &Tracking,
    selection: &Selection,
    now: i64,
) -> Vec<Finding> {
    let mut found: Vec<Finding> = containers
        .iter()
        .filter(|c| selected(c, selection, now))
        .filter_map(|c| {
            reason(c, tracking, now).map(|reason| Finding {
                container: c.clone(),
                reason,
                age_ms: now.saturating_sub(c.created_at).max(0),
            })
        })
        .collect();
    found.sort_by(|a, b| {
        a.container
            .created_at
            .cmp(&b.container.created_at)
            .then_with(|| a.container.container_id.cmp(&b.container.container_id))
    });
    found
}

fn selected(container: &LabelledContainer, selection: &Selection, now: i64) -> bool {
    let labelled = selection
        .labels
        .iter()
        .all(|(k, v)| container.labels.get(k) == Some(v));
    let old_enough = selection
        .older_than_ms
        .is_none_or(|min| now.saturating_sub(container.created_at) >= min);
    labelled && old_enough
}

fn reason(container: &LabelledContainer, tracking: &Tracking, now: i64) -> Option<Reason> {
    let Some(instance) = container.labels.get(LABEL_INSTANCE) else {
        return Some(Reason::Unlabelled);
    };
    if tracking.instance_id.as_deref() != Some(instance.as_str()) {
        return Some(Reason::OtherInstallation(instance.clone()));
    }
    if crate::snapshots::in_pool(&container.labels) {
        return None;
    }
    let Some(record) = container
        .labels
        .get(LABEL_SANDBOX_ID)
        .and_then(|id| tracking.records.get(id))
    else {
        return Some(Reason::NoRecord);
    };
    if record
        .container_id
        .as_deref()
        .is_some_and(|id| id != container.container_id)
    {
        return Some(Reason::Replaced);
    }
    match record.status {
        SandboxStatus::Creating if now - record.created_at > STUCK_CREATING_MS => {
            Some(Reason::StuckCreating)
        }
        SandboxStatus::Creating => None,
        SandboxStatus::Running | SandboxStatus::Paused => match record.expires_at {
            Some(at) if at <= now => Some(Reason::Expired { expired_at: at }),
            _ => None,
        },
        ended => Some(Reason::Ended(ended)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::LABEL_POOL;

    const NOW: i64 = 1_000_000_000;

    fn container(id: &str, labels: &[(&str, &str)], created_at: i64) -> LabelledContainer {
        LabelledContainer {
            container_id: id.into(),
            name: format!("sandboxd-{id}"),
            image: "busybox".into(),
            created_at,
            running: true,
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn mine(id: &str, sandbox: &str) -> LabelledContainer {
        container(
            id,
            &[(LABEL_INSTANCE, "inst"), (LABEL_SANDBOX_ID, sandbox)],
            NOW - 60_000,
        )
    }

    fn record(status: SandboxStatus, container: &str, expires_at: Option<i64>) -> Record {
        Record {
            status,
            container_id: Some(container.into()),
            created_at: NOW - 60_000,
            expires_at,
        }
    }

    fn tracking(records: &[(&str, Record)]) -> Tracking {
        Tracking {
            instance_id: Some("inst".into()),
            records: records
                .iter()
                .map(|(id, r)| ((*id).to_owned(), r.clone()))
                .collect(),
        }
    }

    fn reasons(found: &[Finding]) -> Vec<(&str, &str)> {
        found
            .iter()
            .map(|f| (f.container.container_id.as_str(), f.reason.code()))
            .collect()
    }

    #[test]
    fn live_sandboxes_pool_members_and_young_creates_are_left_alone() {
        let containers = [
            mine("c1", "sb_live"),
            mine("c2", "sb_creating"),
            container(
                "c3",
                &[(LABEL_INSTANCE, "inst"), (LABEL_POOL, "python")],
                NOW - 60_000,
            ),
        ];
        let tracking = tracking(&[
            (
                "sb_live",
                record(SandboxStatus::Running, "c1", Some(NOW + 1)),
            ),
            (
                "sb_creating",
                Record {
                    status: SandboxStatus::Creating,
                    // Its container is being made: the record does not name it yet.
                    container_id: None,
                    created_at: NOW - 1_000,
                    expires_at: None,
                },
            ),
        ]);
        assert!(plan_reap(&containers, &tracking, &Selection::default(), NOW).is_empty());
    }

    #[test]
    fn orphans_of_every_kind_are_listed_oldest_first() {
        let containers = [
            mine("c_norecord", "sb_gone"),
            mine("c_expired", "sb_expired"),
            mine("c_killed", "sb_killed"),
            mine("c_replaced", "sb_replaced"),
            container(
                "c_other",
                &[(LABEL_INSTANCE, "other"), (LABEL_SANDBOX_ID, "sb_x")],
                NOW - 90_000,
            ),
            container("c_unlabelled", &[], NOW - 80_000),
            mine("c_stuck", "sb_stuck"),
        ];
        let mut stuck = record(SandboxStatus::Creating, "c_stuck", None);
        stuck.created_at = NOW - STUCK_CREATING_MS - 1;
        let tracking = tracking(&[
            (
                "sb_expired",
                record(SandboxStatus::Running, "c_expired", Some(NOW)),
            ),
            ("sb_killed", record(SandboxStatus::Killed, "c_killed", None)),
            ("sb_replaced", record(SandboxStatus::Running, "c_new", None)),
            ("sb_stuck", stuck),
        ]);
        let found = plan_reap(&containers, &tracking, &Selection::default(), NOW);
        assert_eq!(
            reasons(&found),
            [
                ("c_other", "other-installation"),
                ("c_unlabelled", "unlabelled"),
                ("c_expired", "expired"),
                ("c_killed", "ended"),
                ("c_norecord", "untracked"),
                ("c_replaced", "replaced"),
                ("c_stuck", "stuck-creating"),
            ]
        );
        assert_eq!(found[0].age_ms, 90_000);
        assert_eq!(found[3].reason.describe(), "record says killed");
    }

    #[test]
    fn another_installations_containers_are_removed_only_when_asked_for() {
        let containers = [
            container("c_other", &[(LABEL_INSTANCE, "other")], NOW - 90_000),
            mine("c_mine", "sb_gone"),
        ];
        let found = plan_reap(&containers, &tracking(&[]), &Selection::default(), NOW);
        let by_default: Vec<bool> = found
            .iter()
            .map(|f| f.removable(false, &Selection::default()))
            .collect();
        assert_eq!(by_default, [false, true]);
        assert!(found[0].removable(true, &Selection::default()));
        let named = Selection {
            labels: vec![(LABEL_INSTANCE.into(), "other".into())],
            older_than_ms: None,
        };
        assert!(found[0].removable(false, &named));
    }

    #[test]
    fn labels_and_age_narrow_the_list() {
        let mut young = mine("c_young", "sb_a");
        young.created_at = NOW - 1_000;
        young.labels.insert("team".into(), "ml".into());
        let mut old = mine("c_old", "sb_b");
        old.labels.insert("team".into(), "ml".into());
        let other_team = mine("c_web", "sb_c");
        let containers = [young, old, other_team];
        let selection = Selection {
            labels: vec![("team".into(), "ml".into())],
            older_than_ms: Some(30_000),
        };
        let found = plan_reap(&containers, &Tracking::default(), &selection, NOW);
        assert_eq!(reasons(&found), [("c_old", "other-installation")]);
        let no_store = Tracking::default();
        let all = plan_reap(&containers, &no_store, &Selection::default(), NOW);
        assert_eq!(all.len(), 3);
    }
}
