//! Pools kept for demand: an `internet` create → first output on a server that keeps
//! pools for demand (each create measured once its shape's pool holds a member and no
//! removal runs), against the same create made cold (a server keeping none) and a
//! configured pool's claim (`isolated`) on the first server.
//!
//! Run with `--demand`.

use crate::child::{ChildServer, Setup};
use crate::report::{Row, Samples};

/// Members of the configured pool of the server keeping pools for demand.
const CONFIGURED: usize = 2;

pub async fn run(args: &crate::Args, instances: &mut Vec<String>) -> anyhow::Result<Vec<Row>> {
    let cold = ChildServer::start(
        &args.server_binary,
        &args.image,
        Setup {
            agent: true,
            ..Setup::default()
        },
    )
    .await?;
    instances.push(cold.instance().to_owned());
    let demand = ChildServer::start(
        &args.server_binary,
        &args.image,
        Setup {
            agent: true,
            pool: CONFIGURED,
            database: None,
            env: vec![(
                "SANDBOXD_WARM_ON_DEMAND__BUDGET".into(),
                sandboxd_core::pool_demand::DemandBounds::default()
                    .budget
                    .to_string(),
            )],
        },
    )
    .await?;
    instances.push(demand.instance().to_owned());
    let internet = serde_json::json!({"networkMode": "internet"});

    // The first create of the shape on each server: the one that makes the pool (and
    // pays the internet bridge's first use).
    for server in [&cold, &demand] {
        let (id, _) = server.http.create_with_and_echo(internet.clone()).await?;
        server.http.remove(&id).await?;
    }
    let (mut warm, mut made, mut configured) =
        (Samples::default(), Samples::default(), Samples::default());
    for _ in 0..args.iterations {
        demand.settle_pool("internet", 1).await?;
        let (id, took) = demand.http.create_with_and_echo(internet.clone()).await?;
        warm.push(took);
        demand.http.remove(&id).await?;

        demand.settle(CONFIGURED).await?;
        let (id, took) = demand.http.create_and_echo().await?;
        configured.push(took);
        demand.http.remove(&id).await?;

        cold.settle(0).await?;
        let (id, took) = cold.http.create_with_and_echo(internet.clone()).await?;
        made.push(took);
        cold.http.remove(&id).await?;
    }
    Ok(vec![Row::new(
        "`internet` create → output",
        vec![
            ("pool kept for demand", warm),
            ("configured pool (isolated)", configured),
            ("cold (no pool)", made),
        ],
    )])
}
