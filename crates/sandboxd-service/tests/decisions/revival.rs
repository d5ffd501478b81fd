//! A container that dies under a running sandbox: started again within a budget, the
//! sandbox in error past it or when the engine cannot start it; a death that is not a
//! running sandbox's is ignored.

use sandboxd_contracts::ContainerDeath;
use sandboxd_core::model::{Sandbox, SandboxStatus};
use sandboxd_service::Revival;

use crate::World;
use crate::engine_double::Call;

/// The death of `sandbox`'s container, its container stopped in the engine.
fn died(world: &World, sandbox: &Sandbox) -> ContainerDeath {
    let container = sandbox.container_id.clone().unwrap();
    world.script(|s| s.vanished.push(container.clone()));
    ContainerDeath {
        container_id: container,
        sandbox_id: sandbox.sandbox_id.clone(),
    }
}

#[tokio::test]
async fn a_dead_container_is_started_again_and_recorded() {
    let world = World::new().await;
    let sandbox = world.running().await;
    let death = died(&world, &sandbox);

    assert_eq!(
        world.service.sandboxes().revive(&death).await.unwrap(),
        Revival::Restarted
    );
    assert_eq!(world.engine.calls(), [Call::Start("c1".into())]);
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Running);
    let selection = sandboxd_core::validate::AuditSelection {
        resource_id: Some(sandbox.sandbox_id.clone()),
        action: Some("sandbox.restart".into()),
        limit: 10,
        ..Default::default()
    };
    let page = world
        .service
        .store()
        .audit_page(&sandbox.organization_id, &selection)
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 1, "{page:?}");
    assert_eq!(
        page.entries[0].actor_user_id, None,
        "done by sandboxd itself"
    );
}

#[tokio::test]
async fn a_container_that_keeps_dying_is_given_up_on() {
    let world = World::new().await;
    let sandbox = world.running().await;
    let death = died(&world, &sandbox);
    for _ in 0..3 {
        assert_eq!(
            world.service.sandboxes().revive(&death).await.unwrap(),
            Revival::Restarted
        );
    }
    assert_eq!(
        world.service.sandboxes().revive(&death).await.unwrap(),
        Revival::GaveUp
    );
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Error);
}

#[tokio::test]
async fn a_container_the_engine_cannot_start_leaves_the_sandbox_in_error() {
    let world = World::new().await;
    let sandbox = world.running().await;
    let death = died(&world, &sandbox);
    world.script(|s| s.start_fails = true);

    assert_eq!(
        world.service.sandboxes().revive(&death).await.unwrap(),
        Revival::GaveUp
    );
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Error);
}

#[tokio::test]
async fn the_death_of_a_killed_sandbox_or_of_another_container_is_ignored() {
    let world = World::new().await;
    let sandbox = world.running().await;
    let stranger = ContainerDeath {
        container_id: "not-its-container".into(),
        sandbox_id: sandbox.sandbox_id.clone(),
    };
    assert_eq!(
        world.service.sandboxes().revive(&stranger).await.unwrap(),
        Revival::Ignored
    );

    let death = died(&world, &sandbox);
    world.kill(&sandbox).await;
    world.engine.clear();
    assert_eq!(
        world.service.sandboxes().revive(&death).await.unwrap(),
        Revival::Ignored
    );
    assert_eq!(world.engine.calls(), [], "nothing started");
}
