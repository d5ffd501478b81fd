//! Warm pools: members made ahead with their agent connected, a create of the pool's
//! template served by one (no container made for it), refilled at the next pass; a
//! member whose agent went away is not handed out; variables given on create reach
//! every command of a claimed member, and its lease before it is handed out; a member
//! whose limits cannot be set is not handed out, and its row goes. Pools kept for demand: a shape created cold gets one and its
//! next create is warm, with its network; it shrinks to nothing without creates; all of
//! them stay within their budget; one whose members cannot be made is not tried again.

use std::collections::BTreeMap;
use std::time::Duration;

use sandboxd_core::model::NetworkMode;
use sandboxd_core::plan::NetworkPlan;
use sandboxd_core::pool_demand::DemandBounds;
use sandboxd_core::pools::Shape;
use sandboxd_service::{Options, PoolKey};
use serde_json::json;

use crate::World;
use crate::engine_double::Call;

async fn pooled(size: usize) -> World {
    let world = World::with_options(Options {
        pools: BTreeMap::from([("base".into(), size)]),
        ..Options::default()
    })
    .await;
    world.script_agent(|s| s.connected = true);
    world
}

fn created(world: &World) -> usize {
    world.engine.count(|c| matches!(c, Call::Create(_)))
}

fn ready(world: &World) -> usize {
    world
        .service
        .pools()
        .ready()
        .get(&PoolKey::local("base"))
        .copied()
        .unwrap_or(0)
}

#[tokio::test]
async fn a_create_claims_a_warm_member_and_the_pool_is_refilled() {
    let world = pooled(2).await;
    assert_eq!(world.service.pools().fill_once().await, 2);
    assert_eq!((ready(&world), created(&world)), (2, 2));
    world.engine.clear();

    let sandbox = world.create(json!({})).await.unwrap();
    assert_eq!(created(&world), 0, "served warm: no container made");
    assert!(
        !world
            .service
            .pools()
            .members()
            .contains(&sandbox.sandbox_id)
    );
    assert_eq!(ready(&world), 1);
    assert_eq!(world.service.pools().fill_once().await, 1, "refilled");
    assert_eq!(ready(&world), 2);
}

/// A member's lease is the grace alone: the claim tells the sandbox its own (its
/// timeout and the grace) before the create answers, so that a server gone right after
/// the claim leaves it its whole timeout.
#[tokio::test]
async fn a_claimed_member_is_told_its_lease_before_it_is_handed_out() {
    let world = pooled(1).await;
    world.service.pools().fill_once().await;
    world.create(json!({"timeoutMs": 120_000})).await.unwrap();
    let leases = world.agent.script.lock().unwrap().leases.clone();
    assert_eq!(
        leases,
        [Duration::from_secs(120) + world.service.duties().lease_grace()]
    );
}

#[tokio::test]
async fn a_member_whose_agent_went_away_is_not_handed_out() {
    let world = pooled(1).await;
    world.service.pools().fill_once().await;
    world.engine.clear();
    world.script_agent(|s| s.connected = false);

    let sandbox = world.create(json!({})).await.unwrap();
    assert_eq!(created(&world), 1, "made cold");
    assert_eq!(ready(&world), 0);
    let calls = world.engine.calls();
    assert!(
        calls
            .iter()
            .any(|c| matches!(c, Call::Destroy(_) | Call::Remove(_))),
        "the unusable member is removed: {calls:?}"
    );
    assert_ne!(sandbox.container_id.as_deref(), Some("c1"));
}

#[tokio::test]
async fn variables_given_on_create_reach_every_command_of_a_claimed_member() {
    let world = pooled(1).await;
    world.service.pools().fill_once().await;
    let sandbox = world
        .create(json!({"envVars": "GREETING=hello"}))
        .await
        .unwrap();
    assert_eq!(created(&world), 1, "the member only");

    world.exec(&sandbox, "echo $GREETING").await.unwrap();
    let envs = world.agent.script.lock().unwrap().exec_envs.clone();
    assert_eq!(
        envs.last().unwrap(),
        &[("GREETING".to_owned(), "hello".to_owned())],
        "{envs:?}"
    );
}

#[tokio::test]
async fn a_member_whose_limits_cannot_be_set_is_not_handed_out_and_its_row_goes() {
    let world = pooled(1).await;
    world.service.pools().fill_once().await;
    world.engine.clear();
    world.script(|s| s.update_fails = true);

    let sandbox = world
        .create(json!({"cpu": 0.5, "memoryMb": 1024, "pidsLimit": 128}))
        .await
        .unwrap();
    assert_eq!(created(&world), 1, "made cold");
    assert_eq!(ready(&world), 0);
    assert_ne!(sandbox.container_id.as_deref(), Some("c1"));
    let listed = world
        .service
        .store()
        .sandboxes_in_environment(&sandbox.environment_id)
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|s| &s.sandbox_id).collect::<Vec<_>>(),
        [&sandbox.sandbox_id],
        "the claimed member's row is gone; the cold sandbox's is there"
    );
}

async fn on_demand(bounds: DemandBounds) -> World {
    let world = World::with_options(Options {
        warm_on_demand: bounds,
        ..Options::default()
    })
    .await;
    world.script_agent(|s| s.connected = true);
    world
}

fn internet() -> PoolKey {
    PoolKey {
        server_id: None,
        shape: Shape {
            network: NetworkMode::Internet,
            ..Shape::of_template("base")
        },
    }
}

fn ready_in(world: &World, key: &PoolKey) -> usize {
    world.service.pools().ready().get(key).copied().unwrap_or(0)
}

#[tokio::test]
async fn a_shape_created_cold_gets_a_pool_and_its_next_create_is_warm() {
    let world = on_demand(DemandBounds::default()).await;
    let first = world
        .create(json!({"networkMode": "internet"}))
        .await
        .unwrap();
    assert_eq!(created(&world), 1, "the first is made cold");
    assert_eq!(
        world.service.pools().fill_once().await,
        1,
        "a member of its shape"
    );
    assert_eq!(ready_in(&world, &internet()), 1);
    let member = world.engine.plans.lock().unwrap().last().unwrap().clone();
    assert_eq!(
        member.network,
        NetworkPlan::Bridge(sandboxd_core::plan::INTERNET_NETWORK.into()),
        "made on the internet bridge"
    );
    world.engine.clear();

    let second = world
        .create(json!({"networkMode": "internet", "envVars": "A=1"}))
        .await
        .unwrap();
    assert_eq!(created(&world), 0, "served warm");
    assert_ne!(first.sandbox_id, second.sandbox_id);
    let row = world.row(&second).await;
    assert_eq!(
        (
            row.network_mode,
            row.image.as_str(),
            row.template.as_deref()
        ),
        (NetworkMode::Internet, crate::IMAGE, Some("base"))
    );
    // Two creates in the window: the pool keeps two.
    assert_eq!(world.service.pools().fill_once().await, 2);
    assert_eq!(ready_in(&world, &internet()), 2);

    // A create of the configured shape has no pool here, and is not given one by
    // another shape's.
    world.engine.clear();
    world.create(json!({})).await.unwrap();
    assert_eq!(created(&world), 1, "isolated: made cold");
}

#[tokio::test]
async fn without_creates_for_a_window_a_pool_kept_for_demand_is_emptied() {
    let world = on_demand(DemandBounds {
        window: Duration::from_millis(300),
        ..DemandBounds::default()
    })
    .await;
    world.create(json!({"image": "other:1"})).await.unwrap();
    assert_eq!(world.service.pools().fill_once().await, 1);
    let key = PoolKey {
        server_id: None,
        shape: Shape {
            image: Some("other:1".into()),
            ..Shape::of_template("base")
        },
    };
    assert_eq!(ready_in(&world, &key), 1);
    world.engine.clear();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(world.service.pools().fill_once().await, 0);
    assert_eq!(ready_in(&world, &key), 0);
    // Its member is removed in the background.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while world
        .engine
        .count(|c| matches!(c, Call::Destroy(_) | Call::Remove(_)))
        == 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the member is removed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(world.service.pools().members().is_empty());
}

#[tokio::test]
async fn every_pool_kept_for_demand_stays_within_the_budget() {
    let world = on_demand(DemandBounds {
        budget: 3,
        per_pool: 2,
        window: Duration::from_secs(60),
    })
    .await;
    for asked in [
        json!({"networkMode": "internet"}),
        json!({"networkMode": "internet"}),
        json!({"image": "one:1"}),
        json!({"image": "two:1"}),
        json!({"networkMode": "allowlist"}),
    ] {
        world.create(asked).await.unwrap();
    }
    assert_eq!(world.service.pools().fill_once().await, 3);
    assert_eq!(ready_in(&world, &internet()), 2, "the most asked for first");
    let total: usize = world.service.pools().ready().values().sum();
    assert_eq!(total, 3);
}

#[tokio::test]
async fn a_shape_whose_members_cannot_be_made_is_not_tried_again() {
    let world = on_demand(DemandBounds::default()).await;
    world
        .create(json!({"networkMode": "internet"}))
        .await
        .unwrap();
    world.engine.clear();
    world.script(|s| s.start_fails = true);
    assert_eq!(world.service.pools().fill_once().await, 0);
    let tried = created(&world);
    assert_eq!(tried, 1);
    assert_eq!(world.service.pools().fill_once().await, 0);
    assert_eq!(
        created(&world),
        tried,
        "not tried again until asked for again"
    );
    assert!(world.service.pools().ready().is_empty());
}

#[tokio::test]
async fn a_configured_pools_creates_make_no_pool_for_demand() {
    let world = World::with_options(Options {
        pools: BTreeMap::from([("base".into(), 1)]),
        warm_on_demand: DemandBounds::default(),
        ..Options::default()
    })
    .await;
    world.script_agent(|s| s.connected = true);
    world.service.pools().fill_once().await;
    world.create(json!({})).await.unwrap();
    world.create(json!({})).await.unwrap();
    assert_eq!(
        world.service.pools().fill_once().await,
        1,
        "its own size only"
    );
    assert_eq!(
        world.service.pools().ready().keys().collect::<Vec<_>>(),
        [&PoolKey::local("base")]
    );
}
