//! `sandbox.create`: what the service asks of the engine, in which order, and what it
//! leaves behind when the engine refuses.

use sandboxd_core::model::SandboxStatus;
use sandboxd_core::plan::{LABEL_INSTANCE, LABEL_SANDBOX_ID};
use serde_json::json;

use crate::World;
use crate::channel_double::AgentCall;
use crate::engine_double::Call;

#[tokio::test]
async fn a_sandbox_is_pulled_created_started_and_given_its_workdir() {
    let world = World::new().await;
    let sandbox = world.create(json!({"memoryMb": 256})).await.unwrap();

    assert_eq!(sandbox.status, SandboxStatus::Running);
    assert_eq!(sandbox.container_id.as_deref(), Some("c1"));
    assert_eq!(
        world.engine.calls(),
        [
            Call::EnsureImage(crate::IMAGE.into()),
            Call::Create("c1".into()),
            Call::Start("c1".into()),
            Call::IsEmptyDir(format!("c1:{}", sandbox.workdir)),
            Call::PutDir(format!("c1:{}", sandbox.workdir)),
        ]
    );
    let plans = world.engine.plans.lock().unwrap();
    let plan = &plans[0];
    assert_eq!(plan.image, crate::IMAGE);
    assert_eq!(plan.memory_bytes, 256 << 20);
    assert_eq!(plan.labels[LABEL_SANDBOX_ID], sandbox.sandbox_id);
    assert_eq!(plan.labels[LABEL_INSTANCE], world.service.instance_id());
}

/// The engine's calls after the container started.
fn after_start(world: &World) -> Vec<Call> {
    let calls = world.engine.calls();
    let start = calls
        .iter()
        .position(|c| matches!(c, Call::Start(_)))
        .expect("the container is started");
    calls[start + 1..].to_vec()
}

#[tokio::test]
async fn the_agent_makes_the_workdir_and_the_engine_is_not_asked() {
    let world = World::new().await;
    world.script_agent(|s| s.connected = true);
    let sandbox = world.create(json!({})).await.unwrap();

    assert_eq!(world.agent.calls(), [AgentCall::MakeDir(sandbox.workdir)]);
    assert_eq!(after_start(&world), []);
}

#[tokio::test]
async fn a_workdir_the_image_filled_for_another_user_is_left_as_it_is_without_the_engine() {
    let world = World::new().await;
    world.script_agent(|s| {
        s.connected = true;
        s.foreign_dirs.push("/home/user".into());
        s.files.insert("/home/user/.profile".into(), b"".to_vec());
    });
    let sandbox = world
        .create(json!({"workdir": "/home/user"}))
        .await
        .unwrap();

    assert_eq!(sandbox.status, SandboxStatus::Running);
    assert_eq!(
        world.agent.calls(),
        [
            AgentCall::MakeDir("/home/user".into()),
            AgentCall::ListDir("/home/user".into())
        ]
    );
    assert_eq!(after_start(&world), [], "no engine round trip");
}

#[tokio::test]
async fn an_empty_workdir_the_agent_cannot_make_its_users_is_made_by_the_engine() {
    let world = World::new().await;
    world.script_agent(|s| {
        s.connected = true;
        s.foreign_dirs.push("/srv/app".into());
    });
    world.create(json!({"workdir": "/srv/app"})).await.unwrap();

    assert_eq!(
        after_start(&world),
        [
            Call::IsEmptyDir("c1:/srv/app".into()),
            Call::PutDir("c1:/srv/app".into()),
        ]
    );
}

#[tokio::test]
async fn a_bridged_sandbox_gets_its_network_before_its_container() {
    let world = World::new().await;
    world
        .create(json!({"networkMode": "internet"}))
        .await
        .unwrap();
    let calls = world.engine.calls();
    let bridge = calls
        .iter()
        .position(|c| matches!(c, Call::EnsureBridge(_)))
        .expect("the bridge is ensured");
    let create = calls
        .iter()
        .position(|c| matches!(c, Call::Create(_)))
        .unwrap();
    assert!(bridge < create, "{calls:?}");
}

#[tokio::test]
async fn a_container_that_does_not_start_is_removed_and_its_sandbox_is_in_error() {
    let world = World::new().await;
    world.script(|s| s.start_fails = true);

    let error = world.create(json!({})).await.unwrap_err();
    assert!(error.to_string().contains("refused"), "{error}");
    let calls = world.engine.calls();
    assert_eq!(calls.last(), Some(&Call::Remove("c1".into())), "{calls:?}");
    let sandbox_id = world.engine.plans.lock().unwrap()[0].labels[LABEL_SANDBOX_ID].clone();
    let row = world
        .service
        .store()
        .sandbox(&sandbox_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, SandboxStatus::Error);
    assert_eq!(row.container_id, None);
}

#[tokio::test]
async fn a_server_id_names_no_server_yet() {
    let world = World::new().await;
    let error = world
        .create(json!({"serverId": "srv_1"}))
        .await
        .unwrap_err();
    assert!(
        matches!(error, sandboxd_service::ServiceError::NotFound("server")),
        "{error}"
    );
    assert!(world.engine.calls().is_empty());
}
