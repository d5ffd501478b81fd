//! Connections to a sandbox's ports: only through its agent, for a caller who may use
//! the sandbox, as activity for its idle timeout; what the agent refuses as the caller's
//! error.

use sandboxd_service::ServiceError;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::World;
use crate::channel_double::AgentCall;

#[tokio::test]
async fn a_port_is_reached_through_the_agent_and_counts_as_activity() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;
    let before = world
        .service
        .store()
        .sandbox(&sandbox.sandbox_id)
        .await
        .unwrap()
        .unwrap()
        .last_activity_at;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;

    let mut stream = world
        .service
        .ports()
        .connect(&world.owner, &sandbox.sandbox_id, 8000)
        .await
        .unwrap();
    stream.write_all(b"ping").await.unwrap();
    let mut answer = [0u8; 4];
    stream.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"ping");
    assert_eq!(world.agent.calls(), [AgentCall::OpenPort(8000)]);
    let after = world
        .service
        .store()
        .sandbox(&sandbox.sandbox_id)
        .await
        .unwrap()
        .unwrap()
        .last_activity_at;
    assert!(after > before, "{before:?} → {after:?}");
}

#[tokio::test]
async fn without_the_agent_or_with_nothing_listening_the_caller_is_told_why() {
    let world = World::new().await;
    let sandbox = world.running().await;
    let without = world
        .service
        .ports()
        .connect(&world.owner, &sandbox.sandbox_id, 8000)
        .await;
    assert!(
        matches!(without, Err(ServiceError::Unavailable(_))),
        "{:?}",
        without.err()
    );

    let sandbox = world.running_with_agent().await;
    let closed = world
        .service
        .ports()
        .connect(&world.owner, &sandbox.sandbox_id, 9)
        .await;
    assert!(
        matches!(closed, Err(ServiceError::PortUnreachable(ref m)) if m.contains("port 9")),
        "{:?}",
        closed.err()
    );
    let zero = world
        .service
        .ports()
        .connect(&world.owner, &sandbox.sandbox_id, 0)
        .await;
    assert!(matches!(zero, Err(ServiceError::Refused(_))));
    assert_eq!(
        world.agent.calls(),
        [AgentCall::OpenPort(9)],
        "port 0 never reaches it"
    );
}

#[tokio::test]
async fn a_killed_sandboxs_ports_are_not_reached() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;
    world.kill(&sandbox).await;
    let killed = world
        .service
        .ports()
        .connect(&world.owner, &sandbox.sandbox_id, 8000)
        .await;
    assert!(
        matches!(killed, Err(ServiceError::NotRunning(_))),
        "{:?}",
        killed.err()
    );
    assert_eq!(world.agent.calls(), []);
}
