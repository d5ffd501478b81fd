//! An image that declares a `VOLUME` gets an anonymous volume per container; it goes
//! with its sandbox, so sandboxes of such images do not fill the host's disk.

use std::process::{Command, Stdio};

use serde_json::json;

use crate::harness::{BUSYBOX, TestServer, container};

/// A local image with `VOLUME /data`, removed when dropped.
struct VolumeImage(String);

impl VolumeImage {
    fn build() -> Self {
        let tag = format!("sandboxd-test/volume:{}", std::process::id());
        let mut build = Command::new("docker")
            .args(["build", "-q", "-t", &tag, "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        let dockerfile = format!("FROM {BUSYBOX}\nVOLUME /data\nLABEL sandboxd.test=volume\n");
        build
            .stdin
            .take()
            .unwrap()
            .write_all(dockerfile.as_bytes())
            .unwrap();
        assert!(build.wait().unwrap().success(), "docker build");
        Self(tag)
    }
}

impl Drop for VolumeImage {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["image", "rm", "-f", &self.0])
            .output();
    }
}

fn volume_exists(name: &str) -> bool {
    Command::new("docker")
        .args(["volume", "inspect", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[tokio::test]
async fn an_image_volume_is_removed_with_its_sandbox() {
    let image = VolumeImage::build();
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"image": image.0})).await;
    let written = server
        .exec(&sandbox, "echo kept > /data/file && cat /data/file")
        .await;
    assert_eq!(written["stdout"], "kept\n", "{written}");
    let inspected = server
        .docker()
        .inspect_container(container(&sandbox), None)
        .await
        .unwrap();
    let volumes: Vec<String> = inspected
        .mounts
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.destination.as_deref() == Some("/data"))
        .filter_map(|m| m.name)
        .collect();
    assert_eq!(volumes.len(), 1, "one anonymous volume for /data");
    assert!(volume_exists(&volumes[0]));

    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": sandbox["sandboxId"]}))
        .await;
    assert_eq!(status, reqwest::StatusCode::OK);
    server.wait_container_removed(&sandbox).await;
    assert!(
        !volume_exists(&volumes[0]),
        "the volume went with the sandbox"
    );
}
