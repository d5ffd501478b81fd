//! `sandboxd shell` against the real server binary, on a real terminal made by
//! `script(1)`: typed keys reach the sandbox's shell, its output comes back, and the
//! remote exit code becomes the command's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{KEY, RunningServer};

#[tokio::test]
async fn shell_attaches_a_terminal_to_the_sandbox() {
    let server = RunningServer::start().await;
    let sandbox_id = server.create().await;
    let shell = format!(
        "{} shell {sandbox_id} --url {} --key {KEY}",
        env!("CARGO_BIN_EXE_sandboxd"),
        server.url
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
