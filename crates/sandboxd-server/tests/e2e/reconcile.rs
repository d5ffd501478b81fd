//! Reconcile and restarts: orphans removed, lost containers marked, sandboxes survive a
//! server restart, secrets are not in the database file.

use std::time::Duration;

use serde_json::json;

use crate::harness::{BUSYBOX, TestServer, container, id};

#[tokio::test]
async fn sandbox_survives_a_server_restart() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    server
        .exec(&sandbox, "echo persisted > /home/user/state")
        .await;
    let data = server.stop().await;
    let restarted = TestServer::start_in(data).await;
    let (_, one) = restarted
        .get("sandbox.one", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(one["status"], "running", "{one}");
    let out = restarted.exec(&sandbox, "cat /home/user/state").await;
    assert_eq!(out["stdout"], "persisted\n");
}

#[tokio::test]
async fn reconcile_removes_orphans_and_marks_lost_sandboxes() {
    let server = TestServer::start().await;
    let lost = server.create(json!({"image": BUSYBOX})).await;
    let kept = server.create(json!({"image": BUSYBOX})).await;
    // A labelled container of this installation with no row: an orphan.
    let orphan = std::process::Command::new("docker")
        .args(["create", "--label", "sandboxd.sandbox=true", "--label"])
        .arg(format!("sandboxd.instance={}", server.instance()))
        .args(["--label", "sandboxd.sandboxId=ghost", BUSYBOX, "true"])
        .output()
        .unwrap();
    assert!(orphan.status.success());
    let orphan_id = String::from_utf8(orphan.stdout).unwrap().trim().to_owned();
    // Another installation's container is never touched.
    let foreign = std::process::Command::new("docker")
        .args([
            "create",
            "--label",
            "sandboxd.sandbox=true",
            "--label",
            "sandboxd.instance=someone-else",
        ])
        .args(["--label", "sandboxd.test-foreign=true", BUSYBOX, "true"])
        .output()
        .unwrap();
    let foreign_id = String::from_utf8(foreign.stdout).unwrap().trim().to_owned();
    // A running sandbox whose container disappeared.
    std::process::Command::new("docker")
        .args(["rm", "-f", container(&lost)])
        .output()
        .unwrap();

    let report = server.service.duties().reconcile_once().await.unwrap();
    let foreign_left = server
        .docker()
        .inspect_container(&foreign_id, None)
        .await
        .is_ok();
    crate::harness::remove_labelled("sandboxd.test-foreign=true");
    assert_eq!(report.removed_containers, std::slice::from_ref(&orphan_id));
    assert_eq!(report.marked_error, [id(&lost).to_owned()]);
    assert!(foreign_left, "another installation's container was removed");
    assert!(
        server
            .docker()
            .inspect_container(&orphan_id, None)
            .await
            .is_err()
    );
    let (_, lost_now) = server.get("sandbox.one", &[("sandboxId", id(&lost))]).await;
    assert_eq!(lost_now["status"], "error");
    let (_, kept_now) = server.get("sandbox.one", &[("sandboxId", id(&kept))]).await;
    assert_eq!(kept_now["status"], "running");
    // A second pass finds nothing to do: startup and periodic reconcile are one pass.
    let again = server.service.duties().reconcile_once().await.unwrap();
    assert!(again.removed_containers.is_empty() && again.marked_error.is_empty());
}

/// A container that stopped while sandboxd was away (an engine restart, a host reboot)
/// is started again by the first reconcile, its files kept; one whose sandbox expired
/// meanwhile is the reaper's.
#[tokio::test]
async fn startup_reconcile_starts_stopped_containers_again() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"image": BUSYBOX})).await;
    let out = server
        .exec(&sandbox, "echo still > /tmp/kept && echo ok")
        .await;
    assert_eq!(out["stdout"], "ok\n", "{out}");
    let data = server.stop().await;
    std::process::Command::new("docker")
        .args(["stop", "-t", "0", container(&sandbox)])
        .output()
        .unwrap();
    let restarted = TestServer::start_in(data).await;
    let (_, one) = restarted
        .get("sandbox.one", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(one["status"], "running", "{one}");
    let state = restarted
        .docker()
        .inspect_container(container(&sandbox), None)
        .await
        .unwrap()
        .state
        .unwrap();
    assert_eq!(state.running, Some(true));
    let out = restarted.exec(&sandbox, "cat /tmp/kept").await;
    assert_eq!(out["stdout"], "still\n", "{out}");
}

#[tokio::test]
async fn env_vars_are_not_in_the_database_file_in_plaintext() {
    let server = TestServer::start().await;
    let secret = "plaintext-canary-7f3a9c";
    server
        .create(json!({"image": BUSYBOX, "envVars": format!("TOKEN={secret}")}))
        .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let data = server.stop().await;
    let mut scanned = 0;
    for entry in std::fs::read_dir(data.path()).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        scanned += bytes.len();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{}",
            path.display()
        );
        assert!(
            !bytes
                .windows(crate::harness::KEY.len())
                .any(|w| w == crate::harness::KEY.as_bytes())
        );
    }
    assert!(scanned > 0);
}
