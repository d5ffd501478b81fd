//! `sandbox.kill`: the row first, the container in the background.

use sandboxd_core::model::SandboxStatus;

use crate::World;
use crate::engine_double::Call;

#[tokio::test]
async fn a_kill_marks_the_row_and_destroys_the_container_behind() {
    let world = World::new().await;
    let sandbox = world.running().await;

    let killed = world.kill(&sandbox).await;
    assert_eq!(killed.status, SandboxStatus::Killed);
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Killed);
    assert_eq!(world.engine.calls(), [Call::Destroy("c1".into())]);
}

#[tokio::test]
async fn a_kill_the_engine_refuses_still_kills_the_sandbox_and_reconcile_removes_the_container() {
    let world = World::new().await;
    let sandbox = world.running().await;
    world.script(|s| s.destroy_fails = true);

    assert_eq!(world.kill(&sandbox).await.status, SandboxStatus::Killed);
    let report = world.service.duties().reconcile_once().await.unwrap();
    assert_eq!(report.removed_containers, ["c1"]);
    assert!(world.engine.calls().contains(&Call::Remove("c1".into())));
}

#[tokio::test]
async fn killing_twice_touches_the_engine_once() {
    let world = World::new().await;
    let sandbox = world.running().await;
    world.kill(&sandbox).await;
    world.kill(&sandbox).await;
    assert_eq!(world.engine.calls(), [Call::Destroy("c1".into())]);
}
