//! Reconcile: rows and containers brought back in line.

use sandboxd_core::model::SandboxStatus;
use sandboxd_core::reconcile::ContainerState;

use crate::World;
use crate::engine_double::Call;

#[tokio::test]
async fn orphan_containers_are_removed_and_rows_without_a_container_are_in_error() {
    let world = World::new().await;
    let kept = world.running().await;
    let lost = world.running().await;
    // The engine lost the second sandbox's container, and has one no row knows.
    world.script(|s| {
        s.vanished.push(lost.container_id.clone().unwrap());
        s.foreign.push(ContainerState {
            container_id: "stray".into(),
            sandbox_id: Some("sbx_unknown".into()),
            running: true,
            paused: false,
        });
    });
    world.engine.clear();

    let report = world.service.duties().reconcile_once().await.unwrap();
    assert_eq!(report.removed_containers, ["stray"]);
    assert_eq!(report.marked_error, std::slice::from_ref(&lost.sandbox_id));
    assert_eq!(
        world.engine.calls(),
        [Call::List, Call::Remove("stray".into())]
    );
    assert_eq!(world.row(&kept).await.status, SandboxStatus::Running);
    assert_eq!(world.row(&lost).await.status, SandboxStatus::Error);
}

#[tokio::test]
async fn a_second_pass_finds_nothing_to_do() {
    let world = World::new().await;
    world.running().await;
    world
        .engine
        .script
        .lock()
        .unwrap()
        .foreign
        .push(ContainerState {
            container_id: "stray".into(),
            sandbox_id: None,
            running: false,
            paused: false,
        });
    world.service.duties().reconcile_once().await.unwrap();
    world.engine.script.lock().unwrap().foreign.clear();

    let again = world.service.duties().reconcile_once().await.unwrap();
    assert!(again.removed_containers.is_empty(), "{again:?}");
    assert!(again.marked_error.is_empty(), "{again:?}");
}
