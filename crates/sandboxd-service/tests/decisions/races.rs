//! A kill racing what else changes a sandbox's status: a command failing on a container
//! that went away, a create finishing, a revival whose restart fails. Each is held at
//! the engine while the kill happens; the kill always stands.

use std::sync::Arc;
use std::time::Duration;

use sandboxd_contracts::{ContainerDeath, EngineError, ExecOutcome};
use sandboxd_core::model::{NotRunning, SandboxStatus};
use sandboxd_service::ServiceError;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::World;
use crate::engine_double::Call;

/// Waits until the engine was asked for `call`.
async fn reached(world: &World, call: impl Fn(&Call) -> bool) {
    for _ in 0..500 {
        if world.engine.calls().iter().any(&call) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the engine was never reached: {:?}", world.engine.calls());
}

#[tokio::test]
async fn a_kill_during_a_command_whose_container_went_away_ends_killed() {
    for failure in [
        Err(EngineError::NotFound { what: "container" }),
        Ok(ExecOutcome {
            exit_code: 137,
            timed_out: true,
            kill_incomplete: true,
            ..ExecOutcome::default()
        }),
    ] {
        let world = World::new().await;
        let sandbox = world.running().await;
        let gate = Arc::new(Semaphore::new(0));
        world.script(|s| {
            s.exec.push_back(failure);
            s.exec_gate = Some(gate.clone());
            s.start_fails = true;
        });
        let (ran, killed) = tokio::join!(world.exec(&sandbox, "sleep 100"), async {
            reached(&world, |c| matches!(c, Call::Exec { .. })).await;
            let killed = world.kill(&sandbox).await;
            gate.add_permits(10);
            killed
        });
        assert_eq!(killed.status, SandboxStatus::Killed);
        let _ = ran;
        assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Killed);
    }
}

#[tokio::test]
async fn a_kill_during_a_create_ends_killed_and_removes_what_the_create_made() {
    let world = World::new().await;
    let gate = Arc::new(Semaphore::new(0));
    world.script(|s| s.start_gate = Some(gate.clone()));
    let (created, killed) = tokio::join!(world.create(json!({})), async {
        reached(&world, |c| matches!(c, Call::Start(_))).await;
        let rows = world.service.store().live_rows().await.unwrap();
        assert_eq!(rows.len(), 1);
        let row = world
            .service
            .store()
            .sandbox(&rows[0].sandbox_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.status, SandboxStatus::Creating);
        let killed = world.kill(&row).await;
        gate.add_permits(1);
        killed
    });
    assert_eq!(killed.status, SandboxStatus::Killed);
    assert!(
        matches!(
            created,
            Err(ServiceError::NotRunning(NotRunning(SandboxStatus::Killed)))
        ),
        "{created:?}"
    );
    assert_eq!(world.row(&killed).await.status, SandboxStatus::Killed);
    assert_eq!(world.row(&killed).await.container_id, None);
    let calls = world.engine.calls();
    assert!(calls.contains(&Call::Destroy("c1".into())), "{calls:?}");
}

#[tokio::test]
async fn a_kill_during_a_revival_that_fails_ends_killed() {
    let world = World::new().await;
    let sandbox = world.running().await;
    let gate = Arc::new(Semaphore::new(0));
    let container = sandbox.container_id.clone().unwrap();
    world.script(|s| {
        s.start_gate = Some(gate.clone());
        s.start_fails = true;
        // Its main process ended: the engine no longer runs it.
        s.vanished.push(container.clone());
    });
    let death = ContainerDeath {
        container_id: sandbox.container_id.clone().unwrap(),
        sandbox_id: sandbox.sandbox_id.clone(),
    };
    let sandboxes = world.service.sandboxes();
    let (_, killed) = tokio::join!(sandboxes.revive(&death), async {
        reached(&world, |c| matches!(c, Call::Start(_))).await;
        let killed = world.kill(&sandbox).await;
        gate.add_permits(1);
        killed
    });
    assert_eq!(killed.status, SandboxStatus::Killed);
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Killed);
}
