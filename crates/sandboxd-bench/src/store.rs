//! The store's backends in one run (`--postgres URL`): a server on SQLite (the floor), a
//! server on PostgreSQL, and two replicas on one PostgreSQL database with requests
//! spread over both as a load balancer would (created through A; commands and the
//! removal through B, which forwards the commands to A since A holds the sandbox's
//! agent connection). Create → first output, `exec true` and removal are interleaved per
//! iteration; `sandbox.one` throughput is measured on each with the same clients.

use anyhow::Context as _;
use serde_json::{Value, json};
use sqlx::Connection as _;

use crate::Args;
use crate::child::{ChildServer, Setup};
use crate::floor::Floor;
use crate::http::Http;
use crate::report::{Row, Samples};

/// Concurrent clients of the throughput figures (split over the replicas).
const CLIENTS: usize = 32;
/// Seconds of each throughput figure.
const SECONDS: u64 = 3;

/// Databases made for the run on the operator's server, dropped after it.
struct Databases {
    server: String,
    names: Vec<String>,
}

impl Databases {
    async fn create(server: &str, count: usize) -> anyhow::Result<(Self, Vec<String>)> {
        let mut admin = sqlx::PgConnection::connect(server)
            .await
            .context("cannot connect to the PostgreSQL server given by --postgres")?;
        let mut names = Vec::new();
        for _ in 0..count {
            let name = format!(
                "sandboxd_bench_{}",
                sandboxd_store::new_id()?.to_lowercase()
            );
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut admin)
                .await?;
            names.push(name);
        }
        admin.close().await?;
        let base = server
            .rsplit_once('/')
            .map_or(server, |(base, _)| base)
            .to_owned();
        let urls = names.iter().map(|name| format!("{base}/{name}")).collect();
        Ok((
            Self {
                server: server.to_owned(),
                names,
            },
            urls,
        ))
    }

    async fn drop_all(self) {
        if let Ok(mut admin) = sqlx::PgConnection::connect(&self.server).await {
            for name in &self.names {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut admin)
                .await;
            }
        }
    }
}

pub async fn run(args: &Args, postgres: &str, raw: &Floor) -> anyhow::Result<(Vec<Row>, Value)> {
    let (databases, urls) = Databases::create(postgres, 2).await?;
    let mut servers = Vec::new();
    let outcome = async {
        for database in [
            None,
            Some(urls[0].clone()),
            Some(urls[1].clone()),
            Some(urls[1].clone()),
        ] {
            let setup = Setup {
                agent: true,
                pool: 0,
                database,
                env: Vec::new(),
            };
            servers.push(ChildServer::start(&args.server_binary, &args.image, setup).await?);
        }
        measure(args, &servers).await
    }
    .await;
    for server in &servers {
        raw.remove_labelled(&format!("sandboxd.instance={}", server.instance()))
            .await;
    }
    drop(servers);
    databases.drop_all().await;
    outcome
}

/// One setup: the replica that creates and the one that runs and removes.
struct Route<'a> {
    name: &'static str,
    maker: &'a Http,
    user: &'a Http,
}

async fn measure(args: &Args, servers: &[ChildServer]) -> anyhow::Result<(Vec<Row>, Value)> {
    let [sqlite, postgres, a, b] = servers else {
        anyhow::bail!("four servers expected");
    };
    // The floor last: ratios are against SQLite.
    let routes = [
        Route {
            name: "2 replicas, PostgreSQL",
            maker: &a.http,
            user: &b.http,
        },
        Route {
            name: "PostgreSQL",
            maker: &postgres.http,
            user: &postgres.http,
        },
        Route {
            name: "SQLite",
            maker: &sqlite.http,
            user: &sqlite.http,
        },
    ];
    let mut create: Vec<Samples> = vec![Samples::default(); routes.len()];
    let mut exec = create.clone();
    let mut remove = create.clone();
    for route in &routes {
        let (id, _) = route.maker.create_and_echo().await?;
        route.user.remove(&id).await?;
    }
    for _ in 0..args.iterations {
        for (i, route) in routes.iter().enumerate() {
            let (id, took) = route.maker.create_and_echo().await?;
            create[i].push(took);
            for _ in 0..crate::REPEAT {
                exec[i].push(route.user.exec_true(&id).await?);
            }
            remove[i].push(route.user.remove(&id).await?);
        }
    }
    let row = |name, samples: Vec<Samples>| {
        Row::new(
            name,
            routes
                .iter()
                .map(|r| r.name)
                .zip(samples)
                .collect::<Vec<_>>(),
        )
    };
    let rows = vec![
        row("store: create+first output", create),
        row("store: exec true", exec),
        row("store: remove", remove),
    ];

    // `sandbox.one` of a running sandbox, the same clients for each setup.
    let mut figures = serde_json::Map::new();
    for (name, maker, readers) in [
        ("sqlite", &sqlite.http, vec![&sqlite.http]),
        ("postgres", &postgres.http, vec![&postgres.http]),
        ("two_replicas", &a.http, vec![&a.http, &b.http]),
    ] {
        let (id, _) = maker.create_and_echo().await?;
        let path = format!("/api/sandbox.one?sandboxId={id}");
        let share = CLIENTS / readers.len();
        let rates = futures_util::future::join_all(
            readers.iter().map(|r| r.throughput(&path, share, SECONDS)),
        )
        .await;
        figures.insert(
            format!("sandbox_one_rps_{name}"),
            json!(rates.iter().sum::<f64>().round()),
        );
        maker.remove(&id).await?;
    }
    println!("store: {}", Value::Object(figures.clone()));
    Ok((rows, Value::Object(figures)))
}
