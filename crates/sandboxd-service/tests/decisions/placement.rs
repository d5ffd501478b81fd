//! Remote servers through the connector contract: where a sandbox runs, which engine its
//! operations reach, one connection per server, and placement's choice among the local
//! engine and the reachable servers.

use std::sync::Arc;

use sandboxd_core::api::ServerView;
use sandboxd_service::{Options, ServiceError};
use serde_json::json;

use crate::World;
use crate::connector_double::RecordingConnector;
use crate::engine_double::Call;

/// A world whose service reaches remote servers through a recording connector; the
/// local engine has 2 CPUs and 2 GiB.
async fn fleet(placement: bool) -> (World, Arc<RecordingConnector>) {
    let connector = Arc::new(RecordingConnector::default());
    let world = World::with_options(Options {
        remote: Some(connector.clone()),
        placement,
        host_cpus: Some(2),
        host_memory_mb: Some(2048),
        ..Options::default()
    })
    .await;
    (world, connector)
}

/// Registers a server at `address` with `cpu` CPUs and `memory_mb` MiB, its host key
/// pinned.
async fn server(world: &World, address: &str, cpu: f64, memory_mb: i64) -> ServerView {
    let request = serde_json::from_value(json!({
        "name": address,
        "address": address,
        "privateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n",
        "hostKey": "ssh-ed25519 AAAAtest",
        "cpu": cpu,
        "memoryMb": memory_mb,
    }))
    .unwrap();
    let spec = sandboxd_core::validate::create_server(request).unwrap();
    world
        .service
        .servers()
        .create(&world.owner, spec)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_sandbox_on_a_named_server_runs_on_its_engine_over_one_connection() {
    let (world, connector) = fleet(false).await;
    let far = server(&world, "far.example", 8.0, 8192).await;

    let first = world
        .create(json!({"serverId": far.server_id}))
        .await
        .unwrap();
    let second = world
        .create(json!({"serverId": far.server_id}))
        .await
        .unwrap();
    assert_eq!(first.server_id.as_deref(), Some(far.server_id.as_str()));
    let remote = connector.engine("far.example");
    let created = |calls: Vec<Call>| {
        calls
            .iter()
            .filter(|c| matches!(c, Call::Create(_)))
            .count()
    };
    assert_eq!(created(remote.calls()), 2);
    assert_eq!(world.engine.calls(), [], "the local engine was not asked");
    assert_eq!(
        connector.connects(),
        ["far.example"],
        "one connection, kept"
    );

    remote.clear();
    world.exec(&second, "true").await.unwrap();
    assert!(
        remote
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Exec { .. })),
        "{:?}",
        remote.calls()
    );
    assert_eq!(world.engine.calls(), []);
}

#[tokio::test]
async fn placement_picks_the_most_room_and_skips_an_unreachable_server() {
    let (world, connector) = fleet(true).await;
    let big = server(&world, "big.example", 16.0, 32768).await;
    let bigger = server(&world, "bigger.example", 32.0, 65536).await;
    connector
        .unreachable
        .lock()
        .unwrap()
        .insert("bigger.example".into());

    let placed = world.create(json!({})).await.unwrap();
    assert_eq!(
        placed.server_id.as_deref(),
        Some(big.server_id.as_str()),
        "the reachable server with the most room"
    );
    assert_eq!(world.engine.calls(), []);

    let refused = world
        .create(json!({"serverId": bigger.server_id}))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ServiceError::ServerUnreachable(_)),
        "{refused:?}"
    );
}

#[tokio::test]
async fn with_no_server_reachable_placement_uses_the_local_engine() {
    let (world, connector) = fleet(true).await;
    server(&world, "down.example", 16.0, 32768).await;
    connector
        .unreachable
        .lock()
        .unwrap()
        .insert("down.example".into());

    let placed = world.create(json!({})).await.unwrap();
    assert_eq!(placed.server_id, None);
    assert!(
        world
            .engine
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Create(_))),
        "{:?}",
        world.engine.calls()
    );
}
