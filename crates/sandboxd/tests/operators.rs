//! The operator's commands through the real binary against a real server and engine:
//! `doctor` (the host and the client side, failing with a fix when the engine socket is
//! wrong or the key revoked), `reap` (finds orphans with the server down, removes them
//! only with `--kill`), and `keys` / `members`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::{KEY, RunningServer, sandboxd};
use serde_json::Value;

/// Every template pointed at an image this engine has, so no check asks a registry.
const LOCAL_TEMPLATES: [(&str, &str); 4] = [
    (
        "SANDBOXD_TEMPLATES__BASE__IMAGE",
        "sandboxd-local/debian:bookworm",
    ),
    (
        "SANDBOXD_TEMPLATES__PYTHON__IMAGE",
        "sandboxd-local/debian:bookworm",
    ),
    (
        "SANDBOXD_TEMPLATES__NODE__IMAGE",
        "sandboxd-local/busybox:latest",
    ),
    (
        "SANDBOXD_TEMPLATES__CODE_INTERPRETER_V1__IMAGE",
        "sandboxd-local/interpreter:bookworm",
    ),
];

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {report}"))
}

#[tokio::test]
async fn doctor_checks_the_host_and_the_key_and_says_how_to_fix_what_fails() {
    let server = RunningServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let data_dir = server.data_dir();
    let data_dir = data_dir.to_str().unwrap();
    let mut env = vec![("SANDBOXD_URL", server.url.as_str()), ("SANDBOXD_KEY", KEY)];
    env.extend(LOCAL_TEMPLATES);

    let healthy = sandboxd(
        home.path(),
        &env,
        &["doctor", "--data-dir", data_dir, "--json"],
    );
    let report: Value = serde_json::from_str(&healthy.stdout).unwrap();
    assert_eq!(healthy.code, 0, "{report:#}");
    assert_eq!(report["healthy"], true);
    assert!(
        check(&report, "engine")["detail"]
            .as_str()
            .unwrap()
            .starts_with("Docker ")
    );
    assert!(
        check(&report, "store")["detail"]
            .as_str()
            .unwrap()
            .contains("schema")
    );
    assert_eq!(check(&report, "template base")["outcome"], "pass");
    assert_eq!(check(&report, "agent")["outcome"], "pass");
    assert_eq!(check(&report, "key")["outcome"], "pass");
    assert!(
        check(&report, "scopes")["detail"]
            .as_str()
            .unwrap()
            .contains("organization:admin")
    );

    // The engine's socket is wrong: one failing line, with its fix, and exit 1.
    let mut wrong = env.clone();
    wrong.push(("DOCKER_HOST", "unix:///nonexistent/docker.sock"));
    let broken = sandboxd(
        home.path(),
        &wrong,
        &["doctor", "--host", "--data-dir", data_dir],
    );
    assert_eq!(broken.code, 1, "{}", broken.stdout);
    let line = broken
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL  engine"))
        .unwrap_or_else(|| panic!("{}", broken.stdout));
    assert!(line.contains("unix:///nonexistent/docker.sock"), "{line}");
    assert!(broken.stdout.contains("fix: start it"), "{}", broken.stdout);

    // A key made narrow shows its scopes; revoked, it fails with what to do.
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);
    let created = run(&[
        "keys",
        "create",
        "doctor-test",
        "--scope",
        "service:read",
        "--json",
    ]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    let created: Value = serde_json::from_str(&created.stdout).unwrap();
    let secret = created["secret"].as_str().unwrap();
    let key_id = created["keyId"].as_str().unwrap();
    let narrow = [
        ("SANDBOXD_URL", server.url.as_str()),
        ("SANDBOXD_KEY", secret),
    ];
    let fine = sandboxd(home.path(), &narrow, &["doctor", "--client", "--json"]);
    assert_eq!(fine.code, 0, "{}", fine.stdout);
    let report: Value = serde_json::from_str(&fine.stdout).unwrap();
    assert_eq!(check(&report, "scopes")["detail"], "service:read");
    assert_eq!(run(&["keys", "revoke", key_id]).code, 0);
    let revoked = sandboxd(home.path(), &narrow, &["doctor", "--client"]);
    assert_eq!(revoked.code, 1, "{}", revoked.stdout);
    assert!(
        revoked.stdout.contains("FAIL  key") && revoked.stdout.contains("refused the key"),
        "{}",
        revoked.stdout
    );
    assert!(
        revoked.stdout.contains("sandboxd login"),
        "{}",
        revoked.stdout
    );
}

fn docker(args: &[&str]) -> String {
    let output = Command::new("docker").args(args).output().unwrap();
    assert!(
        output.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn exists(container: &str) -> bool {
    Command::new("docker")
        .args(["inspect", container])
        .output()
        .unwrap()
        .status
        .success()
}

/// A container labelled as a sandbox of `instance`, in `env_id` (so the server's
/// clean-up on drop removes it whatever happens).
fn orphan(instance: &str, sandbox_id: &str, env_id: &str) -> String {
    docker(&[
        "run",
        "-d",
        "--label",
        "sandboxd.sandbox=true",
        "--label",
        &format!("sandboxd.instance={instance}"),
        "--label",
        &format!("sandboxd.sandboxId={sandbox_id}"),
        "--label",
        &format!("sandboxd.environmentId={env_id}"),
        "sandboxd-local/busybox:latest",
        "sleep",
        "600",
    ])
}

#[tokio::test]
async fn reap_lists_orphans_with_the_server_down_and_removes_them_only_with_kill() {
    let mut server = RunningServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = [("SANDBOXD_URL", server.url.as_str()), ("SANDBOXD_KEY", KEY)];
    let live = server.create().await;
    let expiring = sandboxd(home.path(), &env, &["create", "--timeout", "10s"]);
    assert_eq!(expiring.code, 0, "{}", expiring.stderr);
    let expiring = expiring.stdout.trim().to_owned();
    let env_id = server.env_id.clone();
    server.stop();
    let live_container = docker(&[
        "ps",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("label=sandboxd.sandboxId={live}"),
    ]);
    let instance = docker(&[
        "inspect",
        "-f",
        "{{index .Config.Labels \"sandboxd.instance\"}}",
        &live_container,
    ]);
    let untracked = orphan(&instance, "sb_never_recorded", &env_id);
    let foreign = orphan("inst_of_a_deleted_data_dir", "sb_elsewhere", &env_id);
    tokio::time::sleep(Duration::from_secs(10)).await;

    let data_dir = server.data_dir();
    let data_dir = data_dir.to_str().unwrap();
    let scope = format!("sandboxd.environmentId={env_id}");
    let args = ["reap", "--data-dir", data_dir, "--label", &scope];
    let listed = sandboxd(home.path(), &[], &[&args[..], &["--json"]].concat());
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    let reasons: Vec<(String, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["labels"]["sandboxd.sandboxId"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                f["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut reasons = reasons;
    reasons.sort();
    let mut expected = vec![
        (expiring.clone(), "expired".to_owned()),
        ("sb_elsewhere".to_owned(), "other-installation".to_owned()),
        ("sb_never_recorded".to_owned(), "untracked".to_owned()),
    ];
    expected.sort();
    assert_eq!(reasons, expected, "the live sandbox is not listed");
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["removed"] == false)
    );
    assert!(
        exists(&untracked) && exists(&foreign),
        "listing removes nothing"
    );

    let table = sandboxd(home.path(), &[], &args);
    assert!(
        table.stdout.contains("nothing removed (add --kill"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("not tracked"), "{}", table.stdout);

    let older = sandboxd(
        home.path(),
        &[],
        &[&args[..], &["--older-than", "1h"]].concat(),
    );
    assert!(
        older.stdout.starts_with("no sandbox container"),
        "{}",
        older.stdout
    );

    // --kill removes this installation's orphans; another installation's container
    // may be a live server's, and goes only with --any-installation.
    let killed = sandboxd(
        home.path(),
        &[],
        &[&args[..], &["--kill", "--json"]].concat(),
    );
    assert_eq!(killed.code, 0, "{}", killed.stderr);
    let killed: Value = serde_json::from_str(&killed.stdout).unwrap();
    let removed: Vec<(&str, bool)> = killed
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["reason"].as_str().unwrap(), f["removed"] == true))
        .collect();
    assert_eq!(removed.len(), 3);
    for (reason, gone) in removed {
        assert_eq!(gone, reason != "other-installation", "{reason}");
    }
    assert!(!exists(&untracked) && exists(&foreign));
    let killed = sandboxd(
        home.path(),
        &[],
        &[&args[..], &["--kill", "--any-installation"]].concat(),
    );
    assert_eq!(killed.code, 0, "{}", killed.stderr);
    assert!(!exists(&foreign));
    assert!(exists(&live_container), "the live sandbox is kept");

    // Without a store every container is another installation's: listed, not removed.
    let empty = tempfile::tempdir().unwrap();
    let kept = sandboxd(
        home.path(),
        &[],
        &[
            "reap",
            "--data-dir",
            empty.path().to_str().unwrap(),
            "--label",
            &scope,
            "--kill",
        ],
    );
    assert_eq!(kept.code, 0, "{}", kept.stderr);
    assert!(
        kept.stderr.contains("holds no sandboxd store"),
        "{}",
        kept.stderr
    );
    assert!(
        kept.stdout.contains("no: another installation's"),
        "{}",
        kept.stdout
    );
    assert!(exists(&live_container));
}

#[tokio::test]
async fn keys_and_members_are_managed_from_a_terminal() {
    let server = RunningServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = [("SANDBOXD_URL", server.url.as_str()), ("SANDBOXD_KEY", KEY)];
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);

    let added = run(&[
        "members",
        "add",
        "alice",
        "--permission",
        "service:read",
        "--json",
    ]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    let alice: Value = serde_json::from_str(&added.stdout).unwrap();
    let user = alice["userId"].as_str().unwrap();
    assert_eq!(alice["role"], "member");
    let listed = run(&["members", "ls"]);
    assert!(listed.stdout.starts_with("ID"), "{}", listed.stdout);
    assert!(listed.stdout.contains("alice") && listed.stdout.contains("service:read"));

    let key = run(&[
        "keys",
        "create",
        "alice-laptop",
        "--user",
        user,
        "--expires-in",
        "1d",
    ]);
    assert_eq!(key.code, 0, "{}", key.stderr);
    let secret = key.stdout.trim().to_owned();
    assert!(
        secret.starts_with("sbx_") && !secret.contains(' '),
        "only the key: {}",
        key.stdout
    );
    // Another of hers in E2B's form: a key like any other.
    let e2b = run(&["keys", "create", "alice-e2b", "--user", user, "--e2b"]);
    assert_eq!(e2b.code, 0, "{}", e2b.stderr);
    let e2b = e2b.stdout.trim().to_owned();
    assert!(
        e2b.len() == 68
            && e2b.starts_with("e2b_")
            && e2b[4..].chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
        "only the key, in E2B's form: {e2b}"
    );
    let as_her_e2b = [
        ("SANDBOXD_URL", server.url.as_str()),
        ("SANDBOXD_KEY", e2b.as_str()),
    ];
    let listed = sandboxd(home.path(), &as_her_e2b, &["ls"]);
    assert_eq!(listed.code, 0, "the key works: {}", listed.stderr);
    let as_alice = [
        ("SANDBOXD_URL", server.url.as_str()),
        ("SANDBOXD_KEY", secret.as_str()),
    ];
    let denied = sandboxd(home.path(), &as_alice, &["members", "add", "mallory"]);
    assert_eq!(
        denied.code, 3,
        "a member may not add members: {}",
        denied.stderr
    );
    let denied = sandboxd(
        home.path(),
        &as_alice,
        &["keys", "create", "wider", "--scope", "service:create"],
    );
    assert!(
        matches!(denied.code, 1 | 3),
        "a key never gains more: {}",
        denied.stderr
    );

    let updated = run(&[
        "members",
        "update",
        user,
        "--permission",
        "service:create",
        "--json",
    ]);
    assert_eq!(updated.code, 0, "{}", updated.stderr);
    let updated: Value = serde_json::from_str(&updated.stdout).unwrap();
    assert!(
        updated["permissions"]
            .as_array()
            .unwrap()
            .contains(&"service:create".into())
    );

    let keys = run(&["keys", "ls"]);
    assert!(keys.stdout.contains("alice-laptop"), "{}", keys.stdout);
    assert_eq!(run(&["members", "rm", user]).code, 0);
    let gone = sandboxd(home.path(), &as_alice, &["ls"]);
    assert_eq!(
        gone.code, 3,
        "a removed member's key stops working: {}",
        gone.stderr
    );
}
