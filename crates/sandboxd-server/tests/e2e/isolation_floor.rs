//! The operator's isolation floor (`min_isolation`, and `runtime = "runsc"` implying
//! it) holds on every path that makes or starts a container: a create, a template's, a
//! snapshot's and a fork's, E2B's create, a warm pool's members and a revival. A weaker
//! tier is refused with a 400 naming `isolation` and the floor; a create that asks
//! nothing gets the floor. Needs `runsc` registered with the engine
//! (`scripts/gvisor.sh`).

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use sandboxd_core::model::Isolation;
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer, container, id};

/// gVisor's kernel says 4.4.0 from inside.
const GVISOR_KERNEL: &str = "4.4.0\n";

/// A create of `body` is refused as below the floor, and nothing is made of it.
async fn refused_below_the_floor(server: &TestServer, mut body: Value, floor: &str) {
    body["environmentId"] = json!(server.env_id);
    let (_, before) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    let (status, refused) = server.post("sandbox.create", body.clone()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {refused}");
    let told = refused.to_string();
    assert!(
        told.contains("isolation") && told.contains(floor),
        "{body}: {told}"
    );
    let (_, after) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    assert_eq!(before, after, "nothing was made of {body}");
}

/// A snapshot of the sandbox: its id.
async fn snapshot_of(server: &TestServer, sandbox: &Value) -> String {
    let (status, snapshot) = server
        .post("sandbox.snapshot", json!({"sandboxId": id(sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{snapshot}");
    snapshot["snapshotId"].as_str().unwrap().to_owned()
}

async fn kernel(server: &TestServer, sandbox: &Value) -> String {
    let run = server.exec(sandbox, "uname -r").await;
    run["stdout"].as_str().unwrap_or_default().to_owned()
}

async fn engine_runtime(server: &TestServer, sandbox: &Value) -> Option<String> {
    server
        .docker()
        .inspect_container(container(sandbox), None)
        .await
        .unwrap()
        .host_config
        .and_then(|h| h.runtime)
}

#[tokio::test]
async fn a_tenant_cannot_opt_out_of_the_operators_gvisor_floor() {
    let server =
        TestServer::start_with(|config| config.min_isolation = Some(Isolation::Gvisor)).await;
    refused_below_the_floor(
        &server,
        json!({"template": "base", "isolation": "container"}),
        "gvisor",
    )
    .await;

    // A create that asks nothing runs under the floor.
    let plain = server.create(json!({"template": "base"})).await;
    assert_eq!(plain["isolation"], "gvisor", "{plain}");
    assert_eq!(kernel(&server, &plain).await, GVISOR_KERNEL);

    // From its snapshot: the floor holds; a fork runs under it too.
    let snapshot_id = &snapshot_of(&server, &plain).await;
    refused_below_the_floor(
        &server,
        json!({"snapshotId": snapshot_id, "isolation": "container"}),
        "gvisor",
    )
    .await;
    let (status, forked) = server
        .post("sandbox.fork", json!({"sandboxId": id(&plain), "count": 1}))
        .await;
    assert_eq!(status, StatusCode::OK, "{forked}");
    let fork = &forked["sandboxes"][0];
    assert_eq!(
        engine_runtime(&server, fork).await.as_deref(),
        Some("runsc")
    );

    // E2B's create, which names no isolation, gets the floor.
    let (e2b, _) = crate::e2b_envd::e2b_sandbox(&server, KEY).await;
    let (_, one) = server.get("sandbox.one", &[("sandboxId", &e2b)]).await;
    assert_eq!(one["isolation"], "gvisor", "{one}");
    assert_eq!(kernel(&server, &one).await, GVISOR_KERNEL);
}

#[tokio::test]
async fn a_server_under_runsc_runs_no_sandbox_on_the_hosts_kernel() {
    let server = TestServer::start_with(|config| config.runtime = Some("runsc".into())).await;
    refused_below_the_floor(
        &server,
        json!({"template": "base", "isolation": "container"}),
        "gvisor",
    )
    .await;
    let plain = server.create(json!({"template": "base"})).await;
    assert_eq!(kernel(&server, &plain).await, GVISOR_KERNEL);
    let snapshot_id = snapshot_of(&server, &plain).await;
    refused_below_the_floor(
        &server,
        json!({"snapshotId": snapshot_id, "isolation": "container"}),
        "gvisor",
    )
    .await;
}

/// Without a server floor, a sandbox made from a gVisor sandbox's snapshot stays under
/// gVisor, as a fork does: asking for less is refused.
#[tokio::test]
async fn a_gvisor_sandboxs_snapshot_makes_gvisor_sandboxes_only() {
    let server = TestServer::start().await;
    let source = server
        .create(json!({"template": "base", "isolation": "gvisor"}))
        .await;
    let snapshot_id = snapshot_of(&server, &source).await;
    let from = server.create(json!({"snapshotId": snapshot_id})).await;
    assert_eq!(from["isolation"], "gvisor", "{from}");
    assert_eq!(kernel(&server, &from).await, GVISOR_KERNEL);
    refused_below_the_floor(
        &server,
        json!({"snapshotId": snapshot_id, "isolation": "container"}),
        "gvisor",
    )
    .await;
}

/// A pool whose template would run below the floor gets no member, and its creates are
/// refused; another template's pool holds members under the floor, and serves them.
#[tokio::test]
async fn no_pool_member_below_the_floor_is_made_or_claimed() {
    let server = TestServer::start_with(|config| {
        config.min_isolation = Some(Isolation::Gvisor);
        config.pools.insert(
            "python".into(),
            sandboxd_server::config::PoolConfig { size: 1 },
        );
        config.pools.insert(
            "base".into(),
            sandboxd_server::config::PoolConfig { size: 1 },
        );
        config
            .templates
            .entry("python".into())
            .or_default()
            .isolation = Some(Isolation::Container);
    })
    .await;
    let instance = server.instance().to_owned();
    crate::pools::wait_ready(&server, "base", 1).await;
    let members = crate::pools::pool_containers(&server, &instance).await;
    assert_eq!(
        members.len(),
        1,
        "the base pool's member alone: {members:?}"
    );
    let claimed = server.create(json!({"template": "base"})).await;
    assert!(members.contains_key(id(&claimed)), "served by the pool");
    assert_eq!(
        engine_runtime(&server, &claimed).await.as_deref(),
        Some("runsc")
    );
    refused_below_the_floor(&server, json!({"template": "python"}), "gvisor").await;
    let members = crate::pools::pool_containers(&server, &instance).await;
    for (sandbox_id, container_id) in &members {
        let runtime = server
            .docker()
            .inspect_container(container_id, None)
            .await
            .unwrap()
            .host_config
            .and_then(|h| h.runtime);
        assert_eq!(runtime.as_deref(), Some("runsc"), "member {sandbox_id}");
    }
}

/// A sandbox made under runc before the floor was raised is not started again below it
/// when its container stops: it ends in `error`.
#[tokio::test]
async fn a_sandbox_below_a_raised_floor_is_not_revived() {
    let server = TestServer::start().await;
    let before = server.create(json!({"template": "base"})).await;
    assert_eq!(before["isolation"], "container");
    let stopped = server.stop().await;
    let server = TestServer::start_in_with(stopped, |config| {
        config.min_isolation = Some(Isolation::Gvisor)
    })
    .await;
    let kill = bollard::query_parameters::KillContainerOptionsBuilder::default().build();
    server
        .docker()
        .kill_container(container(&before), Some(kill))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, one) = server
            .get("sandbox.one", &[("sandboxId", id(&before))])
            .await;
        if one["status"] == "error" {
            break;
        }
        assert!(Instant::now() < deadline, "not in error: {one}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let running = server
        .docker()
        .inspect_container(container(&before), None)
        .await
        .unwrap()
        .state
        .and_then(|s| s.running);
    assert_eq!(running, Some(false), "not started again under runc");
}
