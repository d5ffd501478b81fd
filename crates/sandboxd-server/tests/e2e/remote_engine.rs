//! The engine of a remote server, reached over one SSH connection: every engine call
//! (create, start, exec with its attached stream, archives, listing) goes through
//! channels of that connection to the server's engine socket, and the host key is
//! pinned.
//!
//! One connection carries many engine calls; a cut is followed by a reconnection; a
//! socket the server forwards back reaches this side.

use std::sync::Arc;
use std::time::Duration;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::CreateContainerOptionsBuilder;
use sandboxd_contracts::{Engine, ExecSpec, ReadFileError};
use sandboxd_docker::DockerEngine;
use sandboxd_ssh::{Health, HostKey, SshError, SshLink, SshSession};

use crate::harness::{BUSYBOX, remove_labelled_on};
use crate::remote_host::{RemoteHost, remote_docker_host};

const CONNECT: Duration = Duration::from_secs(10);

/// Removes the test's containers from the remote engine, even after a failure.
struct RemoteCleanup(String);

impl Drop for RemoteCleanup {
    fn drop(&mut self) {
        remove_labelled_on(
            Some(&remote_docker_host()),
            &format!("sandboxd.instance={}", self.0),
        );
    }
}

pub(crate) fn spec(argv: &[&str]) -> ExecSpec {
    ExecSpec {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        cwd: None,
        env: Vec::new(),
        user: None,
        timeout: Duration::from_secs(10),
        max_output: 1 << 20,
        stream: None,
    }
}

#[tokio::test]
async fn a_remote_engine_is_driven_over_one_ssh_connection() {
    let host = RemoteHost::start();
    let session = Arc::new(SshSession::new(host.target()));
    let docker = DockerEngine::connect_ssh(session, "/var/run/docker.sock")
        .await
        .unwrap();
    let instance = format!("remote-test-{}", std::process::id());
    let _cleanup = RemoteCleanup(instance.clone());

    // A container made through the link lands on the remote engine, not the local one.
    let name = format!("{instance}-c");
    let body = ContainerCreateBody {
        image: Some(BUSYBOX.into()),
        cmd: Some(vec!["sleep".into(), "600".into()]),
        labels: Some(
            [
                ("sandboxd.sandbox".to_owned(), "true".to_owned()),
                ("sandboxd.instance".to_owned(), instance.clone()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    let created = docker
        .client()
        .create_container(
            Some(CreateContainerOptionsBuilder::default().name(&name).build()),
            body,
        )
        .await
        .unwrap();
    let engine: Arc<dyn Engine> = Arc::new(docker);
    engine.start_container(&created.id).await.unwrap();
    let local = std::process::Command::new("docker")
        .args(["inspect", &created.id])
        .output()
        .unwrap();
    assert!(
        !local.status.success(),
        "the container is not on the local engine"
    );
    let listed = engine.list_sandbox_containers(&instance).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].running);

    // Exec with its attached output stream, many times, on the one connection.
    for n in 0..20 {
        let outcome = engine
            .exec(
                &created.id,
                spec(&["sh", "-c", &format!("echo out {n}; echo err >&2; exit 3")]),
            )
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&outcome.stdout),
            format!("out {n}\n")
        );
        assert_eq!(outcome.stderr, b"err\n");
        assert_eq!(outcome.exit_code, 3);
    }
    assert_eq!(host.sessions(), 1, "one SSH connection for every call");

    // A timeout is enforced on the remote engine too.
    let slow = engine
        .exec(
            &created.id,
            ExecSpec {
                timeout: Duration::from_millis(500),
                ..spec(&["sleep", "30"])
            },
        )
        .await
        .unwrap();
    assert!(slow.timed_out);

    // Archives both ways.
    let content = vec![7u8; 3 << 20];
    engine
        .put_file(&created.id, "/tmp", "blob", &content, 0o600, (0, 0))
        .await
        .unwrap();
    let read = engine
        .read_file(&created.id, "/tmp/blob", 4 << 20, "0:0")
        .await
        .unwrap();
    assert_eq!(read, content);
    assert!(matches!(
        engine
            .read_file(&created.id, "/tmp/missing", 1024, "0:0")
            .await,
        Err(ReadFileError::NotFound)
    ));

    engine.remove_container(&created.id).await.unwrap();
    assert!(!engine.is_running(&created.id).await.unwrap());
}

#[tokio::test]
async fn a_host_key_is_pinned_learned_only_on_request_and_enforced() {
    let host = RemoteHost::start();
    // Learning accepts the key the server presents, and reports it.
    let unpinned = sandboxd_ssh::SshTarget {
        host_key: None,
        ..host.target()
    };
    let learned = SshLink::learn(&unpinned, CONNECT).await.unwrap();
    assert_eq!(learned.host_key(), &RemoteHost::host_key());

    // Without a pinned key, an ordinary connection is refused.
    match SshLink::connect(&unpinned, CONNECT).await {
        Err(SshError::HostKeyUnknown { offered }) => {
            assert_eq!(offered, RemoteHost::host_key().fingerprint());
        }
        other => panic!("expected an unknown host key, got {other:?}"),
    }

    // Another key pinned: refused before logging in.
    let client_public =
        std::fs::read_to_string(crate::remote_host::remote_dir().join("client_key.pub")).unwrap();
    let wrong = sandboxd_ssh::SshTarget {
        host_key: Some(HostKey::parse(&client_public).unwrap()),
        ..host.target()
    };
    match SshLink::connect(&wrong, CONNECT).await {
        Err(SshError::HostKeyMismatch { pinned, offered }) => {
            assert_ne!(pinned, offered);
            assert_eq!(offered, RemoteHost::host_key().fingerprint());
        }
        other => panic!("expected a host key mismatch, got {other:?}"),
    }
}

#[tokio::test]
async fn a_wrong_client_key_or_a_closed_port_is_a_clear_error() {
    let mut host = RemoteHost::start();
    let stranger = {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        std::fs::read_to_string(&path).unwrap()
    };
    let refused = SshLink::connect(
        &sandboxd_ssh::SshTarget {
            private_key: stranger,
            ..host.target()
        },
        CONNECT,
    )
    .await;
    assert!(
        matches!(refused, Err(SshError::AuthRefused { .. })),
        "{refused:?}"
    );

    let garbage = SshLink::connect(
        &sandboxd_ssh::SshTarget {
            private_key: "not a key".into(),
            ..host.target()
        },
        CONNECT,
    )
    .await;
    assert!(
        matches!(garbage, Err(SshError::PrivateKey(_))),
        "{garbage:?}"
    );

    host.cut();
    let closed = SshLink::connect(&host.target(), CONNECT).await;
    assert!(
        matches!(closed, Err(SshError::Unreachable { .. })),
        "{closed:?}"
    );
}

#[tokio::test]
async fn a_cut_connection_fails_fast_is_reported_and_is_made_again_when_the_server_returns() {
    let mut host = RemoteHost::start();
    let session = Arc::new(SshSession::new(host.target()));
    let engine: Arc<dyn Engine> = Arc::new(
        DockerEngine::connect_ssh(session.clone(), "/var/run/docker.sock")
            .await
            .unwrap(),
    );
    engine.host().await.unwrap();
    assert_eq!(session.health().await, Health::Reachable);

    host.cut();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let call = tokio::time::timeout(Duration::from_secs(10), engine.host())
            .await
            .expect("an engine call on a cut connection fails, it does not hang");
        if call.is_err() && session.health().await == Health::Unreachable {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cut was not noticed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    host.resume();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while engine.host().await.is_err() {
        assert!(std::time::Instant::now() < deadline, "no reconnection");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        session.health().await,
        Health::Degraded,
        "cut off a moment ago"
    );
}

#[tokio::test]
async fn a_socket_on_the_server_is_forwarded_back_and_commands_run_on_the_connection() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let host = RemoteHost::start();
    let link = SshLink::connect(&host.target(), CONNECT).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sock");
    let path = path.to_str().unwrap();
    let mut incoming = link.forward_socket(path).await.unwrap();

    // A process on the server connects to the socket sshd listens on; the connection
    // arrives here as a channel of the same SSH connection.
    let client = format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); \
         s.sendall(b'hello from the server'); print(s.recv(64).decode())\""
    );
    let ran = tokio::spawn({
        let link = link.clone();
        async move { link.run(&client, b"", 1024).await }
    });
    let mut stream = tokio::time::timeout(Duration::from_secs(10), incoming.recv())
        .await
        .expect("a forwarded connection")
        .expect("the forward is open");
    let mut got = vec![0u8; 21];
    stream.read_exact(&mut got).await.unwrap();
    assert_eq!(got, b"hello from the server");
    stream.write_all(b"hello back").await.unwrap();
    stream.flush().await.unwrap();
    let output = ran.await.unwrap().unwrap();
    assert_eq!(output.exit_code, Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "hello back\n");

    link.stop_forward(path).await;
    let after = link
        .run(
            &format!(
                "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('{path}')\""
            ),
            b"",
            1024,
        )
        .await
        .unwrap();
    assert_ne!(
        after.exit_code,
        Some(0),
        "nothing listens once the forward stops"
    );
    assert_eq!(host.sessions(), 1, "one SSH connection for all of it");
}

/// Directories, modes and small files on the server: over the connection's SFTP
/// channel where the server has one, as commands where it has none; the same outcome
/// either way, on one connection, and only plain absolute paths.
#[tokio::test]
async fn files_on_the_server_are_made_replaced_and_removed_with_or_without_sftp() {
    use std::os::unix::fs::PermissionsExt as _;

    for host in [RemoteHost::start(), RemoteHost::start_without_sftp()] {
        let link = SshLink::connect(&host.target(), CONNECT).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sbx_1");
        let sub = sub.to_str().unwrap();
        let mode = |path: &str| {
            std::fs::metadata(path)
                .map(|m| m.permissions().mode() & 0o7777)
                .unwrap()
        };
        for bits in [0o700, 0o755] {
            link.make_dir(sub, bits).await.unwrap();
            assert_eq!(mode(sub), bits, "made, then given its mode when it exists");
        }
        let key = format!("{sub}/agent.key");
        for content in [&b"first key"[..], b"second"] {
            link.put_file(&key, content, 0o444).await.unwrap();
            assert_eq!(
                std::fs::read(&key).unwrap(),
                content,
                "written whole, replaced"
            );
            assert_eq!(mode(&key), 0o444);
        }
        link.set_mode(&key, 0o400).await.unwrap();
        assert_eq!(mode(&key), 0o400);
        for _ in 0..2 {
            link.remove_file(&key).await.unwrap();
            assert!(
                !std::path::Path::new(&key).exists(),
                "gone, and gone is fine"
            );
        }
        for bad in [
            format!("{sub}/a b"),
            format!("{sub}/x';touch '{sub}/owned"),
            "relative/path".to_owned(),
        ] {
            assert!(link.put_file(&bad, b"x", 0o444).await.is_err(), "{bad}");
            assert!(link.make_dir(&bad, 0o755).await.is_err(), "{bad}");
        }
        assert!(!std::path::Path::new(&format!("{sub}/owned")).exists());
        let missing = format!("{sub}/no/such/dir");
        assert!(link.make_dir(&missing, 0o755).await.is_err(), "no parent");
        assert!(
            link.put_file(&format!("{missing}/f"), b"x", 0o444)
                .await
                .is_err()
        );
        link.put_file(&key, b"k", 0o444).await.unwrap();
        assert!(
            link.make_dir(&key, 0o755).await.is_err(),
            "a file is in the way"
        );
        assert_eq!(host.sessions(), 1, "one SSH connection for all of it");
    }
}
