//! The databases the store's story runs on: a SQLite file in a temporary directory, and
//! a database of its own on the PostgreSQL server at `SANDBOXD_TEST_POSTGRES_URL`
//! (`scripts/postgres.sh` starts one on loopback; `scripts/test.sh` does it for the
//! suite), created for one test and dropped after it, even when the test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use sandboxd_core::model::{NetworkMode, Sandbox, SandboxStatus};
use sandboxd_store::{Database, Store, new_id};
use sqlx::Connection as _;

/// A sandbox row of the bootstrap's organization, as `create` writes it.
pub fn sandbox(org: &str, project: &str, env: &str, created_at: i64) -> Sandbox {
    Sandbox {
        sandbox_id: new_id().unwrap(),
        name: "s".into(),
        organization_id: org.into(),
        project_id: project.into(),
        environment_id: env.into(),
        server_id: None,
        image: "img".into(),
        template: None,
        container_id: None,
        status: SandboxStatus::Creating,
        cpu: 0.5,
        memory_mb: 128,
        pids_limit: 64,
        timeout_ms: 60_000,
        network_mode: NetworkMode::Isolated,
        workdir: "/home/user".into(),
        user: None,
        runtime: None,
        created_at,
        expires_at: None,
        last_activity_at: None,
        killed_at: None,
        env_per_exec: false,
        labels: [("tenant_id".to_owned(), "acme".to_owned())].into(),
        egress: Vec::new(),
        auto_pause: None,
        fixed_timeout: false,
        paused_timeout_ms: sandboxd_core::limits::DEFAULT_PAUSED_TIMEOUT_MS,
        paused_at: None,
        hibernated_bytes: None,
        volumes: Vec::new(),
    }
}

pub const POSTGRES_URL_VAR: &str = "SANDBOXD_TEST_POSTGRES_URL";

pub struct TestDb {
    pub dir: tempfile::TempDir,
    pub database: Database,
    /// The server's URL and this test's database on it.
    postgres: Option<(String, String)>,
}

impl TestDb {
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let database = Database::Sqlite {
            data_dir: dir.path().to_owned(),
        };
        Self {
            dir,
            database,
            postgres: None,
        }
    }

    /// A new, empty database; the test fails when no PostgreSQL server is given.
    pub async fn postgres() -> Self {
        let server = postgres_url();
        let name = format!(
            "sandboxd_test_{}",
            sandboxd_store::new_id().unwrap().to_lowercase()
        );
        let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
        let url = with_database(&server, &name);
        Self {
            dir: tempfile::tempdir().unwrap(),
            database: Database::Postgres { url },
            postgres: Some((server, name)),
        }
    }

    pub fn is_postgres(&self) -> bool {
        self.postgres.is_some()
    }

    /// A new handle on the database, as a server (or another replica) opens it, with
    /// the master key of this test's data directory.
    pub async fn open(&self) -> Store {
        Store::connect(&self.database, self.dir.path(), None)
            .await
            .unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((server, name)) = self.postgres.take() else {
            return;
        };
        // Dropped from a thread of its own: this may run inside the test's runtime.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                if let Ok(mut admin) = sqlx::PgConnection::connect(&server).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                    )))
                    .execute(&mut admin)
                    .await;
                }
            });
        })
        .join();
    }
}

/// The PostgreSQL server of the tests; its absence fails them loudly.
pub fn postgres_url() -> String {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "{POSTGRES_URL_VAR} is not set: the store's story runs on PostgreSQL too. Run \
             `bash scripts/test.sh`, or `eval \"$(bash scripts/postgres.sh start)\"` first."
        ),
    }
}

/// `url` naming the database `name` instead of its own.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let (scheme, rest) = base.split_once("://").unwrap();
    let authority = rest.split('/').next().unwrap();
    match query {
        Some(query) => format!("{scheme}://{authority}/{name}?{query}"),
        None => format!("{scheme}://{authority}/{name}"),
    }
}

/// Runs each story as a test on SQLite and as one on PostgreSQL.
#[allow(unused_macros)]
macro_rules! on_every_backend {
    ($($story:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $story() {
                    super::$story(&crate::common::TestDb::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $story() {
                    super::$story(&crate::common::TestDb::postgres().await).await;
                }
            )*
        }
    };
}
