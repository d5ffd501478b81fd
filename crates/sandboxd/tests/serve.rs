//! The real binary: first start writes a private owner key and prints it once, the API
//! answers with it, and SIGTERM stops the server cleanly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn first_start_prints_a_private_key_and_sigterm_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .env("SANDBOXD_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
            .join("\n")
    });
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().unwrap().unwrap();
    let key = first.rsplit(' ').next().unwrap().to_owned();
    assert!(key.starts_with("sbx_"), "{first}");

    let key_file = dir.path().join("data/owner.key");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap().trim(), key);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/project.all");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Ok(response) = client.get(&url).header("x-api-key", &key).send().await {
            break response.status();
        }
        assert!(Instant::now() < deadline, "server did not answer");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, reqwest::StatusCode::OK);

    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let log = log.join().unwrap();
    assert!(log.contains("sandboxd stopped"), "{log}");
    assert!(!log.contains(&key), "the key must never reach the log");
}
