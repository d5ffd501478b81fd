//! Lifecycle: activity, setTimeout, kill, remove, the reaper, listing; envVars never leak.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use reqwest::StatusCode;
use serde_json::json;

use crate::harness::{BUSYBOX, TestServer, container, id};

#[tokio::test]
async fn activity_and_set_timeout_extend_the_sandbox() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"image": BUSYBOX, "timeoutMs": 60_000}))
        .await;
    let sid = id(&sandbox);
    let expires =
        |v: &serde_json::Value| humantime::parse_rfc3339(v["expiresAt"].as_str().unwrap()).unwrap();
    let first = expires(&sandbox);
    tokio::time::sleep(Duration::from_millis(20)).await;
    server.exec(&sandbox, "true").await;
    let (_, after_exec) = server.get("sandbox.one", &[("sandboxId", sid)]).await;
    assert!(expires(&after_exec) > first);
    let (status, extended) = server
        .post(
            "sandbox.setTimeout",
            json!({"sandboxId": sid, "timeoutMs": 900_000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(extended["timeoutMs"], 900_000);
    assert!(expires(&extended) > expires(&after_exec) + Duration::from_secs(800));
    let (status, _) = server
        .post(
            "sandbox.setTimeout",
            json!({"sandboxId": sid, "timeoutMs": 5}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_sandbox_is_renamed_by_whoever_may_use_it_until_it_is_over() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"image": BUSYBOX, "name": "first"}))
        .await;
    let sid = id(&sandbox);
    let (status, renamed) = server
        .post(
            "sandbox.rename",
            json!({"sandboxId": sid, "name": "second"}),
        )
        .await;
    assert_eq!(
        (status, &renamed["name"]),
        (StatusCode::OK, &json!("second"))
    );
    let (_, one) = server.get("sandbox.one", &[("sandboxId", sid)]).await;
    assert_eq!(one["name"], "second");
    // A paused sandbox is renamed where it is: it stays paused.
    server
        .post("sandbox.pause", json!({"sandboxId": sid}))
        .await;
    let (status, renamed) = server
        .post("sandbox.rename", json!({"sandboxId": sid, "name": "third"}))
        .await;
    assert_eq!(
        (status, &renamed["name"], &renamed["status"]),
        (StatusCode::OK, &json!("third"), &json!("paused"))
    );
    for bad in ["", "a\nb", &"x".repeat(65)] {
        let (status, body) = server
            .post("sandbox.rename", json!({"sandboxId": sid, "name": bad}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {body}");
        assert_eq!(body["issues"][0]["path"], "name", "{body}");
    }
    // A member of its project who may not use it (not on their access list) is refused.
    let grants = json!({"permissions": ["service:read", "deployment:create"],
        "projectIds": [server.project_id]});
    let (_, key) = crate::tenancy::member_with_key(&server, grants).await;
    let (status, _) = server
        .post_with_key(
            "sandbox.rename",
            Some(&key),
            json!({"sandboxId": sid, "name": "theirs"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // The audit log says who renamed it, and to what.
    let (_, audit) = server.get("audit.list", &[("resourceId", sid)]).await;
    let names: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "sandbox.rename")
        .map(|e| e["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["third", "second"]);
    // Once it is over, it keeps its last name.
    server.post("sandbox.kill", json!({"sandboxId": sid})).await;
    let (status, _) = server
        .post("sandbox.rename", json!({"sandboxId": sid, "name": "late"}))
        .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED);
}

#[tokio::test]
async fn kill_keeps_the_row_and_remove_deletes_it() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"image": BUSYBOX, "name": "agent-run-42"}))
        .await;
    assert_eq!(sandbox["name"], "agent-run-42");
    let sid = id(&sandbox);
    let (status, killed) = server.post("sandbox.kill", json!({"sandboxId": sid})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(killed["status"], "killed");
    assert!(killed["killedAt"].is_string());
    // Killing returns once the row says so; the container goes in the background.
    server.wait_container_removed(&sandbox).await;
    let (status, again) = server.post("sandbox.kill", json!({"sandboxId": sid})).await;
    assert_eq!(status, StatusCode::OK, "kill is idempotent");
    assert_eq!(again["status"], "killed");
    let (status, _) = server
        .post(
            "sandbox.setTimeout",
            json!({"sandboxId": sid, "timeoutMs": 60_000}),
        )
        .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED);
    let (status, removed) = server
        .post("sandbox.remove", json!({"sandboxId": sid}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(removed, json!(true));
    let (status, _) = server.get("sandbox.one", &[("sandboxId", sid)]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // remove also kills a running sandbox.
    let running = server.create(json!({"image": BUSYBOX})).await;
    let (status, _) = server
        .post("sandbox.remove", json!({"sandboxId": id(&running)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    server.wait_container_removed(&running).await;
}

#[tokio::test]
async fn reaper_kills_expired_sandboxes() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"image": BUSYBOX, "timeoutMs": 10_000}))
        .await;
    let keep = server
        .create(json!({"image": BUSYBOX, "timeoutMs": 600_000}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (_, one) = server
            .get("sandbox.one", &[("sandboxId", id(&sandbox))])
            .await;
        if one["status"] == "killed" {
            break;
        }
        assert!(Instant::now() < deadline, "not reaped: {one}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    server.wait_container_removed(&sandbox).await;
    let (_, kept) = server.get("sandbox.one", &[("sandboxId", id(&keep))]).await;
    assert_eq!(kept["status"], "running");
}

#[tokio::test]
async fn list_by_environment_and_project_never_shows_env_vars() {
    let server = TestServer::start().await;
    let secret = "SECRET_TOKEN=sk-very-secret-value";
    let first = server
        .create(json!({"image": BUSYBOX, "envVars": secret}))
        .await;
    let second = server.create(json!({"image": BUSYBOX})).await;
    let (_, by_env) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    let (_, by_project) = server
        .get("sandbox.list", &[("projectId", &server.project_id)])
        .await;
    for list in [&by_env, &by_project] {
        let ids: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sandboxId"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.contains(&id(&first)) && ids.contains(&id(&second)));
    }
    let (_, one) = server
        .get("sandbox.one", &[("sandboxId", id(&first))])
        .await;
    for body in [&first, &by_env, &by_project, &one] {
        let text = body.to_string();
        assert!(!text.contains("sk-very-secret-value"), "{text}");
        assert!(!text.contains("envVars"), "{text}");
    }
}

/// A server stopping right after a kill still removes the container before it exits.
#[tokio::test]
async fn a_stop_right_after_a_kill_leaves_no_container() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"image": BUSYBOX})).await;
    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let docker = server.docker().clone();
    let _stopped = server.stop().await;
    assert!(
        docker
            .inspect_container(container(&sandbox), None)
            .await
            .is_err(),
        "removed before the server exited"
    );
}

/// An image whose `/.sandboxd` is a file, removed when dropped: the agent's directory
/// cannot be mounted there, so no container of it starts.
struct UnstartableImage(String);

impl UnstartableImage {
    fn import() -> Self {
        let tag = format!("sandboxd-test/unstartable:{}", std::process::id());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".sandboxd"), "in the way\n").unwrap();
        let imported = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "tar -C '{}' -c . | docker import --change 'LABEL sandboxd.test=unstartable' - {tag}",
                dir.path().display()
            ))
            .output()
            .unwrap();
        assert!(imported.status.success(), "docker import: {imported:?}");
        Self(tag)
    }
}

impl Drop for UnstartableImage {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["image", "rm", "-f", &self.0])
            .output();
    }
}

/// The runtime processes (gVisor's sandbox and gofer) whose command line names the
/// container `container_id`.
fn runtime_processes(container_id: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("runsc") && cmdline.contains(container_id) {
            found.push(cmdline);
        }
    }
    found
}

/// A sandbox whose container cannot start (its image has a file where the agent's
/// directory is mounted) is refused with the reason, its row says `error`,
/// and nothing of it is left: no container, and under gVisor none of the sandbox and
/// gofer processes runsc made before the start failed, nor its cgroup directories.
#[tokio::test]
async fn a_sandbox_that_cannot_start_leaves_nothing_running() {
    let image = UnstartableImage::import();
    let server = TestServer::start().await;
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "image": image.0}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("could not start"),
        "what failed is named: {body}"
    );
    let (_, listed) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    let rows = listed.as_array().expect("a list");
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(rows[0]["status"], "error", "{listed}");
    let containers = server
        .docker()
        .list_containers(Some(bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some(std::collections::HashMap::from([(
                "label".to_owned(),
                vec![format!("sandboxd.instance={}", server.instance())],
            )])),
            ..Default::default()
        }))
        .await
        .unwrap();
    assert!(containers.is_empty(), "no container left: {containers:?}");
    // The container the engine made (and sandboxd removed), from the engine's events.
    let label = format!("sandboxd.instance={}", server.instance());
    let events: Vec<_> = server
        .docker()
        .events(Some(bollard::query_parameters::EventsOptions {
            since: Some(since.to_string()),
            until: Some((since + 120).to_string()),
            filters: Some(std::collections::HashMap::from([
                ("type".to_owned(), vec!["container".to_owned()]),
                ("event".to_owned(), vec!["create".to_owned()]),
                ("label".to_owned(), vec![label]),
            ])),
        }))
        .take(1)
        .collect()
        .await;
    let container_id = events
        .into_iter()
        .next()
        .and_then(|e| e.ok()?.actor?.id)
        .expect("the engine made a container");
    // The engine's shim ends runsc's processes of a failed start within a few seconds.
    none_left_within(Duration::from_secs(15), "runtime processes", || {
        runtime_processes(&container_id)
    })
    .await;
    // Nor its cgroup directories, which runsc leaves after a failed start.
    none_left_within(Duration::from_secs(25), "cgroup directories", || {
        cgroup_dirs(&container_id)
    })
    .await;
}

/// Waits until `left` finds nothing; fails naming what is left of `what` after `within`.
async fn none_left_within<T: std::fmt::Debug>(
    within: Duration,
    what: &str,
    left: impl Fn() -> Vec<T>,
) {
    let deadline = Instant::now() + within;
    loop {
        let found = left();
        if found.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{what} left: {found:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The cgroup directories of a container on this host, under any hierarchy.
fn cgroup_dirs(container_id: &str) -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new("/sys/fs/cgroup");
    let hierarchies = std::fs::read_dir(root)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_else(|_| Vec::new());
    std::iter::once(root.to_path_buf())
        .chain(hierarchies)
        .flat_map(|base| {
            [
                base.join("docker").join(container_id),
                base.join("system.slice")
                    .join(format!("docker-{container_id}.scope")),
            ]
        })
        .filter(|dir| dir.is_dir())
        .collect()
}
