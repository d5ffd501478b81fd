//! `sandbox.exec` on the engine's path: a timed-out command whose kill did not take,
//! and a container found stopped.

use sandboxd_contracts::{EngineError, ExecOutcome};
use sandboxd_core::model::{NotRunning, SandboxStatus};
use sandboxd_service::ServiceError;

use crate::World;
use crate::engine_double::Call;

/// A command that timed out; `kill_took`: its kill ended every process.
fn timed_out(kill_took: bool) -> Result<ExecOutcome, EngineError> {
    Ok(crate::timed_out(kill_took))
}

fn exec_of(calls: &[Call]) -> usize {
    calls
        .iter()
        .filter(|c| matches!(c, Call::Exec { .. }))
        .count()
}

#[tokio::test]
async fn a_timed_out_command_whose_kill_did_not_take_gets_its_container_restarted() {
    let world = World::new().await;
    let sandbox = world.running().await;
    world
        .engine
        .script
        .lock()
        .unwrap()
        .exec
        .push_back(Ok(ExecOutcome {
            exit_code: 137,
            timed_out: true,
            kill_incomplete: true,
            ..ExecOutcome::default()
        }));

    let result = world.exec(&sandbox, "sleep 100").await.unwrap();
    assert!(result.timed_out);
    let calls = world.engine.calls();
    assert_eq!(
        calls[1..],
        [Call::Kill("c1".into()), Call::Start("c1".into())],
        "{calls:?}"
    );
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Running);
}

#[tokio::test]
async fn a_timed_out_command_whose_kill_took_leaves_the_container_alone() {
    let world = World::new().await;
    let sandbox = world.running().await;
    world
        .engine
        .script
        .lock()
        .unwrap()
        .exec
        .push_back(Ok(ExecOutcome {
            exit_code: 137,
            timed_out: true,
            ..ExecOutcome::default()
        }));

    let result = world.exec(&sandbox, "sleep 100").await.unwrap();
    assert!(result.timed_out);
    let calls = world.engine.calls();
    assert_eq!(exec_of(&calls), 1, "{calls:?}");
    assert_eq!(
        calls.len(),
        1,
        "no kill, no restart, no OOM look: {calls:?}"
    );
}

#[tokio::test]
async fn a_container_that_cannot_be_restarted_after_a_failed_kill_puts_its_sandbox_in_error() {
    let world = World::new().await;
    let sandbox = world.running().await;
    world.script(|s| {
        s.exec.push_back(timed_out(false));
        s.start_fails = true;
    });

    let result = world.exec(&sandbox, "sleep 100").await.unwrap();
    assert!(result.timed_out);
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Error);
}

#[tokio::test]
async fn a_stopped_container_is_started_again_and_the_command_runs() {
    let world = World::new().await;
    let sandbox = world.running().await;
    world.script(|s| {
        s.exec.push_back(Err(EngineError::NotRunning));
        s.exec.push_back(Ok(ExecOutcome {
            stdout: b"hi\n".to_vec(),
            ..ExecOutcome::default()
        }));
    });

    let result = world.exec(&sandbox, "echo hi").await.unwrap();
    assert_eq!(result.stdout, "hi\n");
    let calls = world.engine.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[1], Call::Start("c1".into()));
    assert_eq!(exec_of(&calls), 2);
}

#[tokio::test]
async fn a_stopped_container_that_cannot_start_answers_a_precondition_failure() {
    let world = World::new().await;
    let sandbox = world.running().await;
    world.script(|s| {
        s.exec.push_back(Err(EngineError::NotRunning));
        s.start_fails = true;
    });

    let error = world.exec(&sandbox, "echo hi").await.unwrap_err();
    assert!(
        matches!(
            error,
            ServiceError::NotRunning(NotRunning(SandboxStatus::Error))
        ),
        "{error:?}"
    );
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Error);
    assert_eq!(
        exec_of(&world.engine.calls()),
        1,
        "the command is not run again"
    );
}

#[tokio::test]
async fn an_engine_that_times_out_is_an_engine_failure_not_a_refusal() {
    let world = World::new().await;
    let sandbox = world.running().await;
    world.script(|s| s.exec.push_back(Err(EngineError::Timeout { call: "exec" })));

    let error = world.exec(&sandbox, "true").await.unwrap_err();
    assert!(matches!(error, ServiceError::Engine(_)), "{error:?}");
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Running);
}

#[tokio::test]
async fn a_killed_sandbox_runs_nothing() {
    let world = World::new().await;
    let sandbox = world.running().await;
    world.kill(&sandbox).await;
    world.engine.clear();

    let error = world.exec(&sandbox, "true").await.unwrap_err();
    assert!(
        matches!(
            error,
            ServiceError::NotRunning(NotRunning(SandboxStatus::Killed))
        ),
        "{error:?}"
    );
    assert_eq!(exec_of(&world.engine.calls()), 0);
}
