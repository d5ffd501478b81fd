//! Volumes: what one sandbox writes to a volume the next one reads, as its own user; a
//! read-only mount refuses writes; removal waits until no live sandbox mounts it; the
//! quota counts volumes; a restart keeps them; another organization or project cannot
//! mount one; bad mounts are refused.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, id};

fn volume_id(volume: &Value) -> &str {
    volume["volumeId"].as_str().expect("volumeId")
}

async fn make(server: &TestServer, name: &str) -> Value {
    let (status, volume) = server.post("volume.create", json!({"name": name})).await;
    assert_eq!(status, StatusCode::OK, "{volume}");
    volume
}

async fn stdout(server: &TestServer, sandbox: &Value, cmd: &str) -> String {
    let run = server.exec(sandbox, cmd).await;
    assert_eq!(run["exitCode"], 0, "{cmd}: {run}");
    run["stdout"].as_str().unwrap().trim().to_owned()
}

/// The engine's volume of a volume, if it is there.
async fn engine_volume(server: &TestServer, volume: &Value) -> Option<bollard::models::Volume> {
    let name = format!("sandboxd-vol-{}", volume_id(volume));
    server.docker().inspect_volume(&name).await.ok()
}

#[tokio::test]
async fn a_volume_outlives_its_sandbox_and_is_read_only_when_asked() {
    let server = TestServer::start().await;
    let volume = make(&server, "work").await;
    let engine = engine_volume(&server, &volume)
        .await
        .expect("engine volume");
    assert_eq!(
        engine.labels.get("sandboxd.volume").map(String::as_str),
        Some(volume_id(&volume))
    );
    assert_eq!(volume["sandboxes"], json!([]));
    assert_eq!(volume["sizeMb"], 1024);
    assert_eq!(volume["status"], "ready");

    let writer = server
        .create(json!({
            "template": "base",
            "volumes": [{"volumeId": volume_id(&volume), "path": "/data/"}],
        }))
        .await;
    assert_eq!(
        writer["volumes"],
        json!([{"volumeId": volume_id(&volume), "path": "/data", "readOnly": false}])
    );
    // The mount is the sandbox user's (the image has no /data), and holds nothing of
    // the image's.
    assert_eq!(
        stdout(&server, &writer, "stat -c %U /data && ls -A /data | wc -l").await,
        "user\n0"
    );
    stdout(
        &server,
        &writer,
        "echo kept > /data/notes && mkdir /data/sub",
    )
    .await;
    // Files written through sandboxd's file API land there too.
    let (status, body) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(&writer), "path": "/data/sub/api.txt", "content": "via api\n"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, one) = server
        .get("volume.one", &[("volumeId", volume_id(&volume))])
        .await;
    assert_eq!(one["sandboxes"], json!([id(&writer)]));

    // Mounted: not removed.
    let (status, body) = server
        .post("volume.remove", json!({"volumeId": volume_id(&volume)}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains(id(&writer)),
        "{body}"
    );

    // A volume is not part of a snapshot.
    let (status, taken) = server
        .post("sandbox.snapshot", json!({"sandboxId": id(&writer)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{taken}");

    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&writer)}))
        .await;
    assert_eq!(status, StatusCode::OK);

    let reader = server
        .create(json!({
            "template": "base",
            "volumes": [{"volumeId": volume_id(&volume), "path": "/home/user/in", "readOnly": true}],
        }))
        .await;
    assert_eq!(
        stdout(
            &server,
            &reader,
            "cat in/notes in/sub/api.txt && stat -c %U in/notes"
        )
        .await,
        "kept\nvia api\nuser"
    );
    let denied = server
        .exec(&reader, "echo no > in/other; echo no > in/notes")
        .await;
    assert_ne!(denied["exitCode"], 0, "{denied}");
    assert!(
        denied["stderr"].as_str().unwrap().contains("Read-only"),
        "{denied}"
    );
    let (status, _) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(&reader), "path": "/home/user/in/x", "content": "no"}),
        )
        .await;
    assert!(status.is_client_error(), "{status}");
    assert_eq!(stdout(&server, &reader, "ls in | wc -l").await, "2");

    let from_snapshot = server
        .create(json!({"snapshotId": taken["snapshotId"]}))
        .await;
    assert_eq!(
        stdout(
            &server,
            &from_snapshot,
            "test -e /data/notes && echo there || echo absent"
        )
        .await,
        "absent"
    );

    for sandbox in [&reader, &from_snapshot] {
        let (status, _) = server
            .post("sandbox.kill", json!({"sandboxId": id(sandbox)}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    // The killed sandboxes' containers may still be leaving: the removal waits them out.
    let (status, body) = server
        .post("volume.remove", json!({"volumeId": volume_id(&volume)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(engine_volume(&server, &volume).await.is_none());
    let (status, _) = server
        .get("volume.one", &[("volumeId", volume_id(&volume))])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, audit) = server.get("audit.list", &[]).await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .or(audit.as_array())
        .into_iter()
        .flatten()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(actions.contains(&"volume.create"), "{actions:?}");
    assert!(actions.contains(&"volume.remove"), "{actions:?}");
}

#[tokio::test]
async fn bad_volumes_and_mounts_are_refused() {
    let server = TestServer::start_with(|config| {
        config.quotas = sandboxd_core::quotas::Quotas {
            volumes: 2,
            volume_mb: 3000,
            ..Default::default()
        }
    })
    .await;
    for body in [
        json!({"name": ""}),
        json!({"name": "a/b"}),
        json!({"name": "ok", "sizeMb": 0}),
        json!({"name": "ok", "sizeMb": 2_000_000}),
    ] {
        let (status, answer) = server.post("volume.create", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
    }
    let volume = make(&server, "a").await;
    let (status, body) = server.post("volume.create", json!({"name": "a"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = server
        .post("volume.create", json!({"name": "big", "sizeMb": 2000}))
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    make(&server, "b").await;
    let (status, body) = server
        .post("volume.create", json!({"name": "c", "sizeMb": 1}))
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");

    let vid = volume_id(&volume);
    for mounts in [
        json!([{"volumeId": vid, "path": "/"}]),
        json!([{"volumeId": vid, "path": "/proc/x"}]),
        json!([{"volumeId": vid, "path": "/.sandboxd/run"}]),
        json!([{"volumeId": vid, "path": "relative"}]),
        json!([{"volumeId": vid, "path": "/a"}, {"volumeId": vid, "path": "/a/b"}]),
    ] {
        let (status, body) = server
            .post(
                "sandbox.create",
                json!({"environmentId": server.env_id, "template": "base", "volumes": mounts}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{mounts}: {body}");
    }
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base",
                   "volumes": [{"volumeId": "nope", "path": "/data"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // A volume gone from the engine behind sandboxd's back is not made again, empty.
    server
        .docker()
        .remove_volume(
            &format!("sandboxd-vol-{vid}"),
            None::<bollard::query_parameters::RemoveVolumeOptions>,
        )
        .await
        .unwrap();
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base",
                   "volumes": [{"volumeId": vid, "path": "/data"}]}),
        )
        .await;
    assert!(status.is_client_error(), "{status} {body}");
    assert!(
        body["message"].as_str().unwrap().contains("volume"),
        "{body}"
    );
    assert!(engine_volume(&server, &volume).await.is_none());
    // A sandbox whose create failed holds nothing: the volume goes.
    let (status, body) = server.post("volume.remove", json!({"volumeId": vid})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn volumes_and_their_sandboxes_are_kept_across_a_restart() {
    let server = TestServer::start().await;
    let volume = make(&server, "kept").await;
    let sandbox = server
        .create(json!({
            "template": "base",
            "volumes": [{"volumeId": volume_id(&volume), "path": "/data"}],
        }))
        .await;
    stdout(&server, &sandbox, "echo before > /data/f").await;

    let server = TestServer::start_in(server.stop().await).await;
    let (status, one) = server
        .get("volume.one", &[("volumeId", volume_id(&volume))])
        .await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["sandboxes"], json!([id(&sandbox)]));
    let (_, again) = server
        .get("sandbox.one", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(again["volumes"], sandbox["volumes"]);
    assert_eq!(stdout(&server, &sandbox, "cat /data/f").await, "before");
}

#[tokio::test]
async fn another_organization_or_project_cannot_mount_a_volume() {
    let server = TestServer::start().await;
    let volume = make(&server, "private").await;
    let vid = volume_id(&volume);
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
    let (status, all) = server.get_with_key("volume.all", &key, &[]).await;
    assert_eq!((status, all), (StatusCode::OK, json!([])));
    let (status, _) = server
        .get_with_key("volume.one", &key, &[("volumeId", vid)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for (procedure, body) in [
        ("volume.remove", json!({"volumeId": vid})),
        (
            "sandbox.create",
            json!({"environmentId": env["environmentId"], "template": "base",
                   "volumes": [{"volumeId": vid, "path": "/data"}]}),
        ),
    ] {
        let (status, body) = server.post_with_key(procedure, Some(&key), body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{procedure}: {body}");
    }
    // The other organization's volume of the same name is its own.
    let (status, theirs) = server
        .post_with_key("volume.create", Some(&key), json!({"name": "private"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{theirs}");
    assert_ne!(volume_id(&theirs), vid);

    // In the same organization, a sandbox of another project cannot mount it.
    let (status, project) = server
        .post("project.create", json!({"name": "second"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{project}");
    let (status, env) = server
        .post(
            "environment.create",
            json!({"projectId": project["projectId"], "name": "dev"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{env}");
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": env["environmentId"], "template": "base",
                   "volumes": [{"volumeId": vid, "path": "/data"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // With two projects in sight, a new volume needs its project named.
    let (status, body) = server.post("volume.create", json!({"name": "where"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = server
        .post(
            "volume.create",
            json!({"name": "where", "projectId": project["projectId"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["projectId"], project["projectId"]);
}

/// The status of a sandbox, polled until it is `want` (10 s at most).
async fn wait_status(server: &TestServer, sandbox: &Value, want: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, one) = server
            .get("sandbox.one", &[("sandboxId", id(sandbox))])
            .await;
        if one["status"] == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still {}",
            one["status"]
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_volume_is_never_mounted_through_a_symbolic_link() {
    let server = TestServer::start().await;
    let volume = make(&server, "linked").await;
    let vid = volume_id(&volume);
    // A snapshot whose home holds a link to the agent's directory: a volume mounted
    // "under" the link would land on the agent's binary.
    let source = server.create(json!({"template": "base"})).await;
    stdout(
        &server,
        &source,
        "ln -s /.sandboxd /home/user/link && ln -s /run /home/user/run",
    )
    .await;
    let (status, taken) = server
        .post("sandbox.snapshot", json!({"sandboxId": id(&source)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{taken}");
    for path in ["/home/user/link/bin", "/home/user/run"] {
        let (status, body) = server
            .post(
                "sandbox.create",
                json!({"environmentId": server.env_id, "snapshotId": taken["snapshotId"],
                       "volumes": [{"volumeId": vid, "path": path}]}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains("symbolic link"),
            "{body}"
        );
    }

    // A link made by the sandbox itself, where a mount's parent was, is refused when
    // its container starts again.
    let sandbox = server
        .create(json!({"template": "base",
                       "volumes": [{"volumeId": vid, "path": "/home/user/a/bin"}]}))
        .await;
    stdout(
        &server,
        &sandbox,
        "mv /home/user/a /home/user/moved && ln -s /.sandboxd /home/user/a && echo ok",
    )
    .await;
    server
        .docker()
        .kill_container(
            crate::harness::container(&sandbox),
            None::<bollard::query_parameters::KillContainerOptions>,
        )
        .await
        .unwrap();
    wait_status(&server, &sandbox, "error").await;
    let top = server
        .docker()
        .inspect_container(crate::harness::container(&sandbox), None)
        .await
        .unwrap();
    assert_ne!(top.state.unwrap().running, Some(true));
}

#[tokio::test]
async fn a_read_only_workdir_volume_names_and_repeats() {
    let server = TestServer::start().await;
    let volume = make(&server, "shared").await;
    let vid = volume_id(&volume);
    // An empty read-only volume as the workdir is left as it is.
    let sandbox = server
        .create(json!({"template": "base", "workdir": "/data",
                       "volumes": [{"volumeId": vid, "path": "/data", "readOnly": true}]}))
        .await;
    assert_eq!(
        stdout(&server, &sandbox, "pwd && ls -A | wc -l").await,
        "/data\n0"
    );
    // One volume is mounted once per sandbox.
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base", "volumes": [
                {"volumeId": vid, "path": "/a", "readOnly": true}, {"volumeId": vid, "path": "/b"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Names are unique per project: another project takes the same one.
    let (_, project) = server
        .post("project.create", json!({"name": "second"}))
        .await;
    let (status, again) = server
        .post(
            "volume.create",
            json!({"name": "shared", "projectId": project["projectId"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_ne!(volume_id(&again), vid);
}
