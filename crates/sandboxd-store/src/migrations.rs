//! The schema of each backend: one folder of migrations per backend, with the same
//! versions and names, run at startup (and by `sandboxd migrate`). Migrations are only
//! ever added, never edited; a new one is added to every folder under the same number.
//!
//! The folders are `migrations/sqlite/` and `migrations/postgres/`; a unit test holds
//! them to the same versions and names.

use sqlx::AnyPool;
use sqlx::SqlSafeStr as _;
use sqlx::migrate::{Migration, MigrationType, Migrator};

use crate::StoreError;
use crate::database::Backend;

const SQLITE: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "access",
        include_str!("../migrations/sqlite/0002_access.sql"),
    ),
    (
        3,
        "pools",
        include_str!("../migrations/sqlite/0003_pools.sql"),
    ),
    (
        4,
        "servers",
        include_str!("../migrations/sqlite/0004_servers.sql"),
    ),
    (
        5,
        "server pools",
        include_str!("../migrations/sqlite/0005_server_pools.sql"),
    ),
    (
        6,
        "sandbox labels",
        include_str!("../migrations/sqlite/0006_labels.sql"),
    ),
    (
        7,
        "replicas",
        include_str!("../migrations/sqlite/0007_replicas.sql"),
    ),
    (
        8,
        "agent holders",
        include_str!("../migrations/sqlite/0008_agent_holders.sql"),
    ),
    (
        9,
        "dashboard sessions",
        include_str!("../migrations/sqlite/0009_dashboard_sessions.sql"),
    ),
    (
        10,
        "exposed ports",
        include_str!("../migrations/sqlite/0010_exposed_ports.sql"),
    ),
    (
        11,
        "sandbox egress",
        include_str!("../migrations/sqlite/0011_egress.sql"),
    ),
    (
        12,
        "egress log",
        include_str!("../migrations/sqlite/0012_egress_log.sql"),
    ),
    (
        13,
        "egress requests",
        include_str!("../migrations/sqlite/0013_egress_requests.sql"),
    ),
    (
        14,
        "egress credentials",
        include_str!("../migrations/sqlite/0014_egress_credentials.sql"),
    ),
    (
        15,
        "pausing",
        include_str!("../migrations/sqlite/0015_pause.sql"),
    ),
    (
        16,
        "snapshots",
        include_str!("../migrations/sqlite/0016_snapshots.sql"),
    ),
    (
        17,
        "volumes",
        include_str!("../migrations/sqlite/0017_volumes.sql"),
    ),
    (
        18,
        "fixed timeouts",
        include_str!("../migrations/sqlite/0018_fixed_timeout.sql"),
    ),
    (
        19,
        "template builds",
        include_str!("../migrations/sqlite/0019_template_builds.sql"),
    ),
    (
        20,
        "E2B's template builds",
        include_str!("../migrations/sqlite/0020_e2b_template_builds.sql"),
    ),
    (
        21,
        "build contexts",
        include_str!("../migrations/sqlite/0021_template_contexts.sql"),
    ),
    (
        22,
        "hibernation",
        include_str!("../migrations/sqlite/0022_hibernation.sql"),
    ),
    (
        23,
        "snapshot memory",
        include_str!("../migrations/sqlite/0023_snapshot_memory.sql"),
    ),
    (
        24,
        "E2B's ports",
        include_str!("../migrations/sqlite/0024_e2b_ports.sql"),
    ),
    (
        25,
        "activity",
        include_str!("../migrations/sqlite/0025_activity.sql"),
    ),
];

const POSTGRES: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "access",
        include_str!("../migrations/postgres/0002_access.sql"),
    ),
    (
        3,
        "pools",
        include_str!("../migrations/postgres/0003_pools.sql"),
    ),
    (
        4,
        "servers",
        include_str!("../migrations/postgres/0004_servers.sql"),
    ),
    (
        5,
        "server pools",
        include_str!("../migrations/postgres/0005_server_pools.sql"),
    ),
    (
        6,
        "sandbox labels",
        include_str!("../migrations/postgres/0006_labels.sql"),
    ),
    (
        7,
        "replicas",
        include_str!("../migrations/postgres/0007_replicas.sql"),
    ),
    (
        8,
        "agent holders",
        include_str!("../migrations/postgres/0008_agent_holders.sql"),
    ),
    (
        9,
        "dashboard sessions",
        include_str!("../migrations/postgres/0009_dashboard_sessions.sql"),
    ),
    (
        10,
        "exposed ports",
        include_str!("../migrations/postgres/0010_exposed_ports.sql"),
    ),
    (
        11,
        "sandbox egress",
        include_str!("../migrations/postgres/0011_egress.sql"),
    ),
    (
        12,
        "egress log",
        include_str!("../migrations/postgres/0012_egress_log.sql"),
    ),
    (
        13,
        "egress requests",
        include_str!("../migrations/postgres/0013_egress_requests.sql"),
    ),
    (
        14,
        "egress credentials",
        include_str!("../migrations/postgres/0014_egress_credentials.sql"),
    ),
    (
        15,
        "pausing",
        include_str!("../migrations/postgres/0015_pause.sql"),
    ),
    (
        16,
        "snapshots",
        include_str!("../migrations/postgres/0016_snapshots.sql"),
    ),
    (
        17,
        "volumes",
        include_str!("../migrations/postgres/0017_volumes.sql"),
    ),
    (
        18,
        "fixed timeouts",
        include_str!("../migrations/postgres/0018_fixed_timeout.sql"),
    ),
    (
        19,
        "template builds",
        include_str!("../migrations/postgres/0019_template_builds.sql"),
    ),
    (
        20,
        "E2B's template builds",
        include_str!("../migrations/postgres/0020_e2b_template_builds.sql"),
    ),
    (
        21,
        "build contexts",
        include_str!("../migrations/postgres/0021_template_contexts.sql"),
    ),
    (
        22,
        "hibernation",
        include_str!("../migrations/postgres/0022_hibernation.sql"),
    ),
    (
        23,
        "snapshot memory",
        include_str!("../migrations/postgres/0023_snapshot_memory.sql"),
    ),
    (
        24,
        "E2B's ports",
        include_str!("../migrations/postgres/0024_e2b_ports.sql"),
    ),
    (
        25,
        "activity",
        include_str!("../migrations/postgres/0025_activity.sql"),
    ),
];

fn of(backend: Backend) -> &'static [(i64, &'static str, &'static str)] {
    match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
    }
}

/// The newest migration this build knows for `backend`.
pub fn known_version(backend: Backend) -> i64 {
    of(backend)
        .last()
        .map(|(version, _, _)| *version)
        .unwrap_or_default()
}

/// Brings the schema up to date. On PostgreSQL the migrator holds an advisory lock, so
/// replicas starting together migrate one after the other.
pub(crate) async fn run(pool: &AnyPool, backend: Backend) -> Result<(), StoreError> {
    let migrations = of(backend)
        .iter()
        .map(|(version, name, sql)| {
            Migration::new(
                *version,
                (*name).into(),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect();
    Migrator::with_migrations(migrations).run(pool).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_has_the_same_versions_and_names() {
        let names = |list: &[(i64, &str, &str)]| {
            list.iter()
                .map(|(v, n, _)| (*v, n.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(SQLITE), names(POSTGRES));
        let versions: Vec<i64> = SQLITE.iter().map(|(v, _, _)| *v).collect();
        assert_eq!(versions, (1..=versions.len() as i64).collect::<Vec<_>>());
    }

    #[test]
    fn postgres_gets_no_sqlite_only_types() {
        for (_, name, sql) in POSTGRES {
            assert!(!sql.contains("BLOB"), "{name} uses BLOB");
        }
    }
}
