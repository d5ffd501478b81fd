//! Warm pools: members made ahead with their agent connected, a create of the pool's
//! template served by one (no container made for it), refilled at the next pass; a
//! member whose agent went away is not handed out; variables given on create reach
//! every command of a claimed member; a member whose limits cannot be set is not handed
//! out, and its row goes.

use std::collections::BTreeMap;

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
