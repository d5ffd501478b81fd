//! A database of its own for one test on the PostgreSQL server at
//! `SANDBOXD_TEST_POSTGRES_URL` (`scripts/postgres.sh`), dropped after the test.

use sqlx::Connection as _;

/// The master key every replica of a test installation shares.
pub const MASTER_KEY: &str = "5ea1ed0000000000000000000000000000000000000000000000000000c0ffee";

pub struct TestDatabase {
    pub url: String,
    server: String,
    name: String,
}

impl TestDatabase {
    pub async fn create() -> Self {
        let server = match std::env::var("SANDBOXD_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => panic!(
                "SANDBOXD_TEST_POSTGRES_URL is not set: run `bash scripts/test.sh`, or \
                 `eval \"$(bash scripts/postgres.sh start)\"` first"
            ),
        };
        let name = format!(
            "sandboxd_e2e_{}",
            sandboxd_store::new_id().unwrap().to_lowercase()
        );
        let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
        let (base, _) = server.rsplit_once('/').unwrap();
        Self {
            url: format!("{base}/{name}"),
            server,
            name,
        }
    }

    /// A handle on the server's own database, for statements about the test's database.
    pub fn admin_of(database: &TestDatabase) -> Admin {
        Admin {
            url: database.server.clone(),
        }
    }

    /// Runs one statement on the test's database (a test acting behind the servers).
    pub async fn execute(&self, sql: &str) -> u64 {
        let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
        let done = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
        done.rows_affected()
    }

    /// Counts the rows a query returns.
    pub async fn count(&self, sql: &str) -> i64 {
        use sqlx::Row as _;
        let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) AS n FROM ({sql}) q"
        )))
        .fetch_one(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
        row.try_get("n").unwrap()
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
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

/// Statements run on the server's maintenance database.
pub struct Admin {
    url: String,
}

impl Admin {
    pub async fn run(&self, sql: &str) {
        let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    }
}
