//! Snapshots and forks: a snapshot keeps a sandbox's files, user and workdir and none
//! of its environment; sandboxes start from it; a fork makes independent copies; the
//! quota counts snapshots; a restart keeps them; another organization sees none.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, id};

const SECRET: &str = "hunter2-snapshot-secret";

fn snapshot_id(snapshot: &Value) -> &str {
    snapshot["snapshotId"].as_str().expect("snapshotId")
}

async fn snapshot(server: &TestServer, sandbox: &Value, name: Option<&str>) -> Value {
    let mut body = json!({"sandboxId": id(sandbox)});
    if let Some(name) = name {
        body["name"] = json!(name);
    }
    let (status, snapshot) = server.post("sandbox.snapshot", body).await;
    assert_eq!(status, StatusCode::OK, "{snapshot}");
    snapshot
}

async fn stdout(server: &TestServer, sandbox: &Value, cmd: &str) -> String {
    let run = server.exec(sandbox, cmd).await;
    assert_eq!(run["exitCode"], 0, "{cmd}: {run}");
    run["stdout"].as_str().unwrap().trim().to_owned()
}

/// Everything the engine keeps about the snapshot's image (its configuration, the
/// configuration of the container it was made from), as `docker image inspect` prints
/// it.
fn image_config(snapshot: &Value) -> String {
    let image = format!("sandboxd-snapshots:{}", snapshot_id(snapshot));
    let out = std::process::Command::new("docker")
        .args(["image", "inspect", &image])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The engine's id of a snapshot's image.
async fn image_id(server: &TestServer, snapshot: &Value) -> String {
    let image = format!("sandboxd-snapshots:{}", snapshot_id(snapshot));
    let inspect = server.docker().inspect_image(&image).await.expect("image");
    inspect.id.unwrap()
}

/// Removes a snapshot, waiting out the containers of sandboxes killed a moment ago.
async fn remove(server: &TestServer, snapshot: &Value) {
    let (status, body) = server
        .post(
            "snapshot.remove",
            json!({"snapshotId": snapshot_id(snapshot)}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_snapshot_keeps_files_user_and_workdir_but_no_secret() {
    let server = TestServer::start().await;
    let source = server
        .create(json!({
            "template": "base",
            "workdir": "/home/user/project",
            "envVars": format!("API_TOKEN={SECRET}"),
            "labels": {"team": "a"},
        }))
        .await;
    stdout(
        &server,
        &source,
        "echo made > notes.txt && mkdir -p data && head -c 4096 /dev/urandom > data/blob && echo $API_TOKEN",
    )
    .await;
    let blob = stdout(&server, &source, "sha256sum data/blob").await;
    let taken = snapshot(&server, &source, Some("after setup")).await;
    assert_eq!(taken["name"], "after setup");
    assert_eq!(taken["sandboxId"], id(&source));
    assert_eq!(taken["workdir"], "/home/user/project");
    assert_eq!(taken["user"], source["user"]);
    assert_eq!(taken["template"], "base");
    assert!(taken["sizeBytes"].as_i64().unwrap() >= 4096, "{taken}");
    // Nothing the engine keeps of the image holds the secret (the sandbox's variables
    // never were in its container's configuration); the image's own configuration
    // holds no agent key either.
    let config = image_config(&taken);
    assert!(!config.contains(SECRET), "{config}");
    let inspect: Value = serde_json::from_str(&config).unwrap();
    let env = inspect[0]["Config"]["Env"].as_array().unwrap();
    assert!(
        !env.iter()
            .any(|e| e.as_str().unwrap().starts_with("SANDBOXD_AGENT_KEY=")),
        "{env:?}"
    );
    assert!(config.contains(snapshot_id(&taken)), "labelled: {config}");

    // A sandbox from it: the files, the user, the workdir; not the secret.
    let (status, made) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "snapshotId": snapshot_id(&taken)}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(made["status"], "running");
    assert_eq!(made["workdir"], "/home/user/project");
    assert_eq!(made["user"], source["user"]);
    assert_eq!(made["template"], "base");
    assert_eq!(stdout(&server, &made, "cat notes.txt").await, "made");
    assert_eq!(stdout(&server, &made, "sha256sum data/blob").await, blob);
    assert_eq!(stdout(&server, &made, "pwd").await, "/home/user/project");
    let uid = stdout(&server, &made, "id -u").await;
    assert_eq!(uid, stdout(&server, &source, "id -u").await);
    let env = stdout(&server, &made, "env").await;
    assert!(!env.contains(SECRET), "{env}");
    assert!(
        !stdout(&server, &made, "cat /proc/1/environ | tr '\\0' '\\n'")
            .await
            .contains(SECRET)
    );
    // It can write where its user may, as in the source.
    assert_eq!(
        stdout(&server, &made, "echo more >> notes.txt && cat notes.txt").await,
        "made\nmore"
    );

    // Listed and read; the image of a snapshot cannot be named as an image.
    let (status, all) = server.get("snapshot.all", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(all[0]["snapshotId"], taken["snapshotId"]);
    let (status, one) = server
        .get("snapshot.one", &[("snapshotId", snapshot_id(&taken))])
        .await;
    assert_eq!((status, &one), (StatusCode::OK, &taken));
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "image": format!("sandboxd-snapshots:{}", snapshot_id(&taken))}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "snapshotId": snapshot_id(&taken), "template": "base"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // Removal waits for the sandboxes made from it.
    let (status, body) = server
        .post(
            "snapshot.remove",
            json!({"snapshotId": snapshot_id(&taken)}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&made)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    remove(&server, &taken).await;
    let image = format!("sandboxd-snapshots:{}", snapshot_id(&taken));
    assert!(server.docker().inspect_image(&image).await.is_err());
    let (status, _) = server
        .get("snapshot.one", &[("snapshotId", snapshot_id(&taken))])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "snapshotId": snapshot_id(&taken)}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Audited.
    let (_, audit) = server
        .get("audit.list", &[("resourceId", id(&source))])
        .await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap_or_default())
        .collect();
    assert!(actions.contains(&"sandbox.snapshot"), "{actions:?}");
    let (_, audit) = server
        .get("audit.list", &[("resourceId", snapshot_id(&taken))])
        .await;
    assert_eq!(audit["entries"][0]["action"], "snapshot.remove", "{audit}");
}

#[tokio::test]
async fn a_paused_sandbox_is_snapshotted_and_stays_paused() {
    let server = TestServer::start().await;
    let source = server.create(json!({"template": "base"})).await;
    stdout(&server, &source, "echo kept > /tmp/kept").await;
    let (status, paused) = server
        .post("sandbox.pause", json!({"sandboxId": id(&source)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    let taken = snapshot(&server, &source, None).await;
    let (_, now) = server
        .get("sandbox.one", &[("sandboxId", id(&source))])
        .await;
    assert_eq!(now["status"], "paused");
    let inspect = server
        .docker()
        .inspect_container(
            now["containerId"].as_str().unwrap(),
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
        .unwrap();
    assert_eq!(inspect.state.unwrap().paused, Some(true));
    let made = server
        .create(json!({"snapshotId": snapshot_id(&taken)}))
        .await;
    assert_eq!(stdout(&server, &made, "cat /tmp/kept").await, "kept");

    // A snapshot of a sandbox made from a snapshot is built on it: the first cannot go
    // before the second.
    let second = snapshot(&server, &made, None).await;
    let (status, _) = server
        .post("sandbox.remove", json!({"sandboxId": id(&made)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = server
        .post(
            "snapshot.remove",
            json!({"snapshotId": snapshot_id(&taken)}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    remove(&server, &second).await;
    remove(&server, &taken).await;
}

#[tokio::test]
async fn a_fork_makes_independent_sandboxes_with_the_files() {
    let server = TestServer::start().await;
    let source = server
        .create(json!({
            "template": "base",
            "cpu": 0.5,
            "memoryMb": 256,
            "labels": {"run": "7"},
            "envVars": format!("API_TOKEN={SECRET}"),
        }))
        .await;
    stdout(&server, &source, "echo shared > /home/user/shared.txt").await;
    let (status, forked) = server
        .post(
            "sandbox.fork",
            json!({"sandboxId": id(&source), "count": 3, "envVars": "FORKED=yes"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{forked}");
    let forks = forked["sandboxes"].as_array().unwrap().clone();
    assert_eq!(forks.len(), 3);
    let mut ids: Vec<&str> = forks.iter().map(id).collect();
    ids.push(id(&source));
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "every fork has an id of its own");
    for (n, fork) in forks.iter().enumerate() {
        assert_eq!(fork["status"], "running");
        assert_eq!(fork["cpu"], 0.5);
        assert_eq!(fork["memoryMb"], 256);
        assert_eq!(fork["labels"]["run"], "7");
        assert_ne!(fork["containerId"], source["containerId"]);
        assert_eq!(
            stdout(&server, fork, "cat /home/user/shared.txt").await,
            "shared"
        );
        assert_eq!(
            stdout(&server, fork, "echo ${FORKED:-no} ${API_TOKEN:-none}").await,
            "yes none"
        );
        stdout(&server, fork, &format!("echo {n} > /home/user/mine.txt")).await;
    }
    // Each wrote its own file; none sees another's, nor does the source.
    for (n, fork) in forks.iter().enumerate() {
        assert_eq!(
            stdout(&server, fork, "cat /home/user/mine.txt").await,
            n.to_string()
        );
    }
    let run = server
        .exec(&source, "test -e /home/user/mine.txt && echo there")
        .await;
    assert_eq!(run["stdout"], "", "{run}");
    // The fork's snapshot is listed like any other.
    let (_, all) = server.get("snapshot.all", &[]).await;
    assert_eq!(all[0]["snapshotId"], forked["snapshot"]["snapshotId"]);

    let (status, body) = server
        .post(
            "sandbox.fork",
            json!({"sandboxId": id(&source), "count": 21}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn snapshots_are_counted_and_kept_across_a_restart() {
    let server = TestServer::start_with(|config| {
        config.quotas = sandboxd_core::quotas::Quotas {
            snapshots: 1,
            ..Default::default()
        }
    })
    .await;
    let source = server.create(json!({"template": "base"})).await;
    stdout(&server, &source, "echo survived > /home/user/f").await;
    let taken = snapshot(&server, &source, None).await;
    let (status, body) = server
        .post("sandbox.snapshot", json!({"sandboxId": id(&source)}))
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");

    let server = TestServer::start_in(server.stop().await).await;
    let (status, one) = server
        .get("snapshot.one", &[("snapshotId", snapshot_id(&taken))])
        .await;
    assert_eq!((status, &one), (StatusCode::OK, &taken));
    let made = server
        .create(json!({"snapshotId": snapshot_id(&taken)}))
        .await;
    assert_eq!(stdout(&server, &made, "cat /home/user/f").await, "survived");

    // An image gone behind sandboxd's back is never looked for in a registry.
    let (status, _) = server
        .post("sandbox.remove", json!({"sandboxId": id(&made)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    server.wait_container_removed(&made).await;
    let image = format!("sandboxd-snapshots:{}", snapshot_id(&taken));
    server
        .docker()
        .remove_image(
            &image,
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await
        .unwrap();
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "snapshotId": snapshot_id(&taken)}),
        )
        .await;
    assert!(status.is_client_error(), "{status} {body}");
    assert!(body["message"].as_str().unwrap().contains(&image), "{body}");
}

#[tokio::test]
async fn another_organization_sees_no_snapshot() {
    let server = TestServer::start().await;
    let source = server.create(json!({"template": "base"})).await;
    let taken = snapshot(&server, &source, None).await;
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let key = other["apiKey"]["secret"].as_str().unwrap().to_owned();
    let (status, project) = server
        .post_with_key("project.create", Some(&key), json!({"name": "theirs"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{project}");
    let (status, env) = server
        .post_with_key(
            "environment.create",
            Some(&key),
            json!({"projectId": project["projectId"], "name": "dev"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{env}");
    let env = env["environmentId"].as_str().unwrap().to_owned();
    let (status, all) = server.get_with_key("snapshot.all", &key, &[]).await;
    assert_eq!((status, all), (StatusCode::OK, json!([])));
    let sid = snapshot_id(&taken);
    let (status, _) = server
        .get_with_key("snapshot.one", &key, &[("snapshotId", sid)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Nor by the engine's id of its image, whole or a prefix of it.
    let engine_id = image_id(&server, &taken).await;
    let hex = engine_id.trim_start_matches("sha256:");
    for reference in [engine_id.clone(), hex[..12].to_owned(), hex[..4].to_owned()] {
        let (status, body) = server
            .post_with_key(
                "sandbox.create",
                Some(&key),
                json!({"environmentId": env, "image": reference}),
            )
            .await;
        assert!(status.is_client_error(), "{reference}: {status} {body}");
    }
    for (procedure, body) in [
        ("snapshot.remove", json!({"snapshotId": sid})),
        (
            "sandbox.create",
            json!({"environmentId": env, "snapshotId": sid}),
        ),
        ("sandbox.snapshot", json!({"sandboxId": id(&source)})),
        ("sandbox.fork", json!({"sandboxId": id(&source)})),
    ] {
        let (status, body) = server.post_with_key(procedure, Some(&key), body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{procedure}: {body}");
    }
    // Still there for its own organization.
    let (status, _) = server.get("snapshot.one", &[("snapshotId", sid)]).await;
    assert_eq!(status, StatusCode::OK);
}
