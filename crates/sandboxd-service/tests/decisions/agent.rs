//! Operations on the path production takes: through the sandbox's agent channel. Which
//! channel serves, what a request the agent did not send becomes, the same recovery
//! policy whichever channel ran a command, and the agent's refusals as the caller's
//! errors.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use sandboxd_contracts::{Chunks, ExecOutcome};
use sandboxd_core::api::{FileType, TransferFormat};
use sandboxd_core::model::{NotRunning, Sandbox, SandboxStatus};
use sandboxd_service::ServiceError;
use serde_json::json;

use crate::World;
use crate::channel_double::{AgentCall, Answer};
use crate::engine_double::Call;

fn engine_execs(world: &World) -> usize {
    world.engine.count(|c| matches!(c, Call::Exec { .. }))
}

fn agent_execs(world: &World) -> usize {
    world
        .agent
        .calls()
        .iter()
        .filter(|c| matches!(c, AgentCall::Exec(_)))
        .count()
}

fn body(bytes: &'static [u8]) -> Chunks {
    Box::pin(futures_util::stream::once(async move {
        Ok(Bytes::from_static(bytes))
    }))
}

async fn write(world: &World, sandbox: &Sandbox, path: &str, content: &str) {
    let request = serde_json::from_value(json!({
        "sandboxId": sandbox.sandbox_id, "path": path, "content": content,
    }))
    .unwrap();
    let cmd = sandboxd_core::validate::write_file(request).unwrap();
    world
        .service
        .files()
        .write_file(&world.owner, cmd)
        .await
        .unwrap();
}

async fn read(world: &World, sandbox: &Sandbox, path: &str) -> Result<String, ServiceError> {
    let request = serde_json::from_value(json!({
        "sandboxId": sandbox.sandbox_id, "path": path,
    }))
    .unwrap();
    let cmd = sandboxd_core::validate::read_file(request).unwrap();
    Ok(world
        .service
        .files()
        .read_file(&world.owner, cmd)
        .await?
        .content)
}

#[tokio::test]
async fn a_command_runs_through_the_agent_and_never_through_the_engine() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;
    world.script_agent(|s| {
        s.exec.push_back(Answer::Ran(ExecOutcome {
            stdout: b"hello\n".to_vec(),
            ..ExecOutcome::default()
        }))
    });
    let served = world
        .service
        .path_counts()
        .agent
        .load(std::sync::atomic::Ordering::Relaxed);

    let result = world.exec(&sandbox, "echo hello").await.unwrap();
    assert_eq!(result.stdout, "hello\n");
    assert_eq!(
        world.agent.calls(),
        [AgentCall::Exec(vec![
            "sh".into(),
            "-c".into(),
            "echo hello".into()
        ])]
    );
    assert_eq!(engine_execs(&world), 0, "{:?}", world.engine.calls());
    assert_eq!(
        world
            .service
            .path_counts()
            .agent
            .load(std::sync::atomic::Ordering::Relaxed),
        served + 1
    );
}

#[tokio::test]
async fn a_command_the_agent_did_not_send_runs_once_through_the_engine() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;
    world.script_agent(|s| s.exec.push_back(Answer::NotSent));

    let result = world.exec(&sandbox, "true").await.unwrap();
    assert_eq!(result.exit_code, 0);
    assert_eq!(agent_execs(&world), 1);
    assert_eq!(engine_execs(&world), 1, "{:?}", world.engine.calls());
}

#[tokio::test]
async fn a_command_through_the_agent_whose_kill_did_not_take_gets_its_container_restarted() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;
    world.script_agent(|s| s.exec.push_back(Answer::Ran(crate::timed_out(false))));

    let result = world.exec(&sandbox, "sleep 100").await.unwrap();
    assert!(result.timed_out);
    assert_eq!(
        world.engine.calls(),
        [Call::Kill("c1".into()), Call::Start("c1".into())],
        "the same policy as on the engine's path"
    );
    assert_eq!(world.row(&sandbox).await.status, SandboxStatus::Running);
}

#[tokio::test]
async fn a_command_through_the_agent_whose_kill_took_leaves_the_container_alone() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;
    world.script_agent(|s| s.exec.push_back(Answer::Ran(crate::timed_out(true))));

    assert!(world.exec(&sandbox, "sleep 100").await.unwrap().timed_out);
    assert_eq!(world.engine.calls(), [], "nothing asked of the engine");
}

#[tokio::test]
async fn an_agent_lost_during_a_command_is_a_retryable_failure_and_never_runs_it_again() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;
    world.script_agent(|s| s.exec.push_back(Answer::Lost));

    let error = world.exec(&sandbox, "make").await.unwrap_err();
    assert!(matches!(error, ServiceError::Agent(_)), "{error:?}");
    assert_eq!(agent_execs(&world), 1);
    assert_eq!(
        engine_execs(&world),
        0,
        "a command that may have run is not run again"
    );
}

#[tokio::test]
async fn an_agent_lost_because_the_sandbox_was_killed_meanwhile_names_its_state() {
    let world = Arc::new(World::new().await);
    let sandbox = world.running_with_agent().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    world.script_agent(|s| {
        s.exec.push_back(Answer::Lost);
        s.exec_gate = Some(gate.clone());
    });

    let running = {
        let (world, sandbox) = (world.clone(), sandbox.clone());
        tokio::spawn(async move { world.exec(&sandbox, "sleep 5").await })
    };
    while agent_execs(&world) == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    world.kill(&sandbox).await;
    gate.add_permits(1);

    let error = running.await.unwrap().unwrap_err();
    assert!(
        matches!(
            error,
            ServiceError::NotRunning(NotRunning(SandboxStatus::Killed))
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn files_go_through_the_agent_and_a_listing_comes_back_in_order() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;

    write(&world, &sandbox, "/work/b.txt", "bee").await;
    write(&world, &sandbox, "/work/a.txt", "ay").await;
    write(&world, &sandbox, "/work/sub/c.txt", "sea").await;
    assert_eq!(read(&world, &sandbox, "/work/b.txt").await.unwrap(), "bee");

    let request = serde_json::from_value(json!({
        "sandboxId": sandbox.sandbox_id, "path": "/work",
    }))
    .unwrap();
    let cmd = sandboxd_core::validate::list_files(request).unwrap();
    let listing = world
        .service
        .files()
        .list_files(&world.owner, cmd)
        .await
        .unwrap();
    let names: Vec<_> = listing
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.kind))
        .collect();
    assert_eq!(
        names,
        [
            ("sub", FileType::Directory),
            ("a.txt", FileType::File),
            ("b.txt", FileType::File)
        ],
        "directories first, then by name, whatever order the channel gave"
    );
    assert_eq!(world.engine.calls(), [], "the engine was not asked");
}

#[tokio::test]
async fn the_agents_refusals_are_the_callers_errors() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;

    let missing = read(&world, &sandbox, "/nowhere").await.unwrap_err();
    assert!(
        matches!(missing, ServiceError::NotFound("file")),
        "{missing:?}"
    );

    world.script_agent(|s| {
        s.files.insert(
            "/big".into(),
            vec![0; sandboxd_core::limits::MAX_FILE_BYTES + 1],
        );
    });
    let large = read(&world, &sandbox, "/big").await.unwrap_err();
    assert!(
        matches!(&large, ServiceError::TooLarge(m) if m.contains(&sandboxd_core::limits::MAX_FILE_BYTES.to_string())),
        "{large:?}"
    );

    let request = serde_json::from_value(json!({
        "sandboxId": sandbox.sandbox_id, "path": "/empty",
    }))
    .unwrap();
    let cmd = sandboxd_core::validate::list_files(request).unwrap();
    let error = world
        .service
        .files()
        .list_files(&world.owner, cmd)
        .await
        .unwrap_err();
    assert!(
        matches!(error, ServiceError::NotFound("directory")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_transfer_streams_through_the_agent_and_an_older_agent_leaves_it_to_the_engine() {
    let world = World::new().await;
    let sandbox = world.running_with_agent().await;
    let upload = |path: &str| {
        let request = serde_json::from_value(json!({
            "sandboxId": sandbox.sandbox_id, "path": path,
        }))
        .unwrap();
        sandboxd_core::validate::upload(request).unwrap()
    };

    let done = world
        .service
        .files()
        .upload(
            &world.owner,
            upload("/work/up.bin"),
            Some(5),
            body(b"12345"),
        )
        .await
        .unwrap();
    assert_eq!((done.entries, done.bytes), (1, 5));
    let download = world
        .service
        .files()
        .download(&world.owner, &sandbox.sandbox_id, "/work/up.bin", None)
        .await
        .unwrap();
    assert_eq!(
        (download.format, download.size),
        (TransferFormat::Raw, Some(5))
    );
    let bytes: Vec<_> = download.body.map(|c| c.unwrap()).collect().await;
    assert_eq!(bytes.concat(), b"12345");
    assert_eq!(world.engine.calls(), [], "the engine was not asked");

    // A body longer than its length is refused, whichever channel takes it.
    let error = world
        .service
        .files()
        .upload(
            &world.owner,
            upload("/work/long.bin"),
            Some(2),
            body(b"12345"),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, ServiceError::Refused(_)), "{error:?}");

    world.script_agent(|s| s.no_transfers = true);
    world
        .service
        .files()
        .upload(
            &world.owner,
            upload("/work/old.bin"),
            Some(5),
            body(b"12345"),
        )
        .await
        .unwrap();
    let calls = world.engine.calls();
    assert!(
        calls.iter().any(|c| matches!(c, Call::PutArchive(_))),
        "{calls:?}"
    );
}

#[tokio::test]
async fn processes_need_the_agent_and_run_through_it() {
    let world = World::new().await;
    let sandbox = world.running().await;
    let start = || {
        let request = serde_json::from_value(json!({
            "sandboxId": sandbox.sandbox_id, "cmd": "sleep 60",
        }))
        .unwrap();
        sandboxd_core::validate::process_start(request).unwrap()
    };

    let error = world
        .service
        .commands()
        .start_process(&world.owner, start())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ServiceError::Unavailable(m) if m.contains("agent")),
        "{error:?}"
    );

    world.script_agent(|s| s.connected = true);
    let view = world
        .service
        .commands()
        .start_process(&world.owner, start())
        .await
        .unwrap();
    assert_eq!(
        (view.cmd.as_str(), view.status.as_str()),
        ("sleep 60", "running")
    );
    let listed = world
        .service
        .commands()
        .list_processes(&world.owner, &sandbox.sandbox_id)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let missing = world
        .service
        .commands()
        .signal_process(&world.owner, &sandbox.sandbox_id, "p_nothere", 15)
        .await
        .unwrap_err();
    assert!(
        matches!(missing, ServiceError::NotFound("process")),
        "{missing:?}"
    );
    assert_eq!(engine_execs(&world), 0);
}
