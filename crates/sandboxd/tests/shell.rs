//! `sandboxd shell` against the real server binary, on a real terminal made by
//! `script(1)`: typed keys reach the sandbox's shell, its output comes back, and the
//! remote exit code becomes the command's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KEY: &str = "sbx_cli_test_key_0123456789abcdefghijklmnop";

fn agent_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SANDBOXD_AGENT_BINARY") {
        return PathBuf::from(path);
    }
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/agent")
        .join(triple)
        .join("release/sandboxd-agent")
}

/// Kills the server and removes the sandbox's container when the test ends.
struct Cleanup {
    server: std::process::Child,
    sandbox: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        if let Some(id) = &self.sandbox {
            let listed = Command::new("docker")
                .args([
                    "ps",
                    "-aq",
                    "--filter",
                    &format!("label=sandboxd.sandboxId={id}"),
                ])
                .output()
                .unwrap();
            for container in String::from_utf8_lossy(&listed.stdout).split_whitespace() {
                let _ = Command::new("docker")
                    .args(["rm", "-f", container])
                    .output();
            }
        }
    }
}

#[tokio::test]
async fn shell_attaches_a_terminal_to_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let server = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path())
        .env("SANDBOXD_BOOTSTRAP_KEY", KEY)
        .env("SANDBOXD_AGENT_BINARY", agent_binary())
        .env(
            "SANDBOXD_TEMPLATES__BASE__IMAGE",
            "sandboxd-local/debian:bookworm",
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut cleanup = Cleanup {
        server,
        sandbox: None,
    };

    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let projects: serde_json::Value = loop {
        if let Ok(response) = client
            .get(format!("{url}/api/project.all"))
            .header("x-api-key", KEY)
            .send()
            .await
        {
            break response.json().await.unwrap();
        }
        assert!(Instant::now() < deadline, "server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let env_id = projects[0]["environments"][0]["environmentId"]
        .as_str()
        .unwrap();
    let sandbox: serde_json::Value = client
        .post(format!("{url}/api/sandbox.create"))
        .header("x-api-key", KEY)
        .json(&serde_json::json!({"environmentId": env_id, "template": "base"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sandbox_id = sandbox["sandboxId"].as_str().expect("created").to_owned();
    cleanup.sandbox = Some(sandbox_id.clone());

    let shell = format!(
        "{} shell {sandbox_id} --url {url} --key {KEY}",
        env!("CARGO_BIN_EXE_sandboxd")
    );
    let mut script = Command::new("script")
        .args(["-qec", &shell, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = script.stdin.take().unwrap();
    let typing = std::thread::spawn(move || {
        for line in ["echo $((6*7))\n", "stty size\n", "exit 7\n"] {
            std::thread::sleep(Duration::from_millis(700));
            let _ = stdin.write_all(line.as_bytes());
        }
        std::thread::sleep(Duration::from_secs(2));
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while script.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = script.kill();
            panic!("sandboxd shell did not end");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let output = script.wait_with_output().unwrap();
    typing.join().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("42\r\n"), "{text}");
    assert_eq!(
        output.status.code(),
        Some(7),
        "{text} {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
