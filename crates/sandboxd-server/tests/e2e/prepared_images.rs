//! Images prepared for sandboxes, on the real engine: the first sandbox of an image
//! without its workdir has it made by the engine, and the image is prepared once in the
//! background; the next sandboxes are made of the prepared image, in their workdir and
//! owning it, with every setting of the image; a prepared image gone from the engine is
//! made again while the create goes on with the image itself; a prepared image cannot be
//! named by a caller.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{BUSYBOX, TestServer, id};

/// A workdir the image does not have, of this test only (prepared images are named by
/// the image, the workdir and the owner).
const WORKDIR: &str = "/prepared-test";

/// Removes the prepared image after the test, once no container uses it (it is
/// dropped after the server, which removes its sandboxes).
struct Prepared(String);
impl Drop for Prepared {
    fn drop(&mut self) {
        for _ in 0..50 {
            let removed = std::process::Command::new("docker")
                .args(["rmi", &self.0])
                .output();
            match removed {
                Ok(out) if out.status.success() => return,
                Ok(out) if String::from_utf8_lossy(&out.stderr).contains("No such image") => {
                    return;
                }
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

/// Waits until the server knows `image` is made (and the engine has it).
async fn wait_for_image(server: &TestServer, image: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !server
        .service
        .sandboxes()
        .prepared_images()
        .iter()
        .any(|made| made == image)
    {
        assert!(Instant::now() < deadline, "{image} was never made");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn image_of_container(server: &TestServer, sandbox: &Value) -> String {
    let container = sandbox["containerId"].as_str().expect("containerId");
    server
        .docker()
        .inspect_container(container, None)
        .await
        .expect("container")
        .config
        .and_then(|c| c.image)
        .unwrap_or_default()
}

#[tokio::test]
async fn an_image_without_the_workdir_is_prepared_once_and_used_after() {
    let source = bollard::Docker::connect_with_local_defaults()
        .expect("docker")
        .inspect_image(BUSYBOX)
        .await
        .expect("busybox");
    let name = sandboxd_core::prepared_images::prepared_name(
        source.id.as_deref().expect("id"),
        WORKDIR,
        (1000, 1000),
    );
    let _cleanup = Prepared(name.clone());
    let server = TestServer::start().await;
    let ask = json!({"template": "base", "image": BUSYBOX, "workdir": WORKDIR});

    let first = server.create(ask.clone()).await;
    assert_eq!(image_of_container(&server, &first).await, BUSYBOX);
    wait_for_image(&server, &name).await;
    let prepared = server
        .docker()
        .inspect_image(&name)
        .await
        .expect("on the engine");
    let (made, kept) = (prepared.config.unwrap(), source.config.unwrap());
    assert_eq!(
        (made.env, made.cmd, made.user, made.labels, made.working_dir),
        (kept.env, kept.cmd, kept.user, kept.labels, kept.working_dir),
        "every setting of the image is kept"
    );

    let second = server.create(ask.clone()).await;
    assert_eq!(
        image_of_container(&server, &second).await,
        name,
        "made of it"
    );
    assert_eq!(
        second["image"], BUSYBOX,
        "the sandbox's image is the one asked for"
    );
    let run = server
        .exec(
            &second,
            "pwd; stat -c '%u:%g %a' .; touch mine && echo written",
        )
        .await;
    assert_eq!(
        run["stdout"],
        format!("{WORKDIR}\n1000:1000 755\nwritten\n"),
        "{run}"
    );
    // The first sandbox's files are not in it: it is made of the image, not of a sandbox.
    server.exec(&first, "echo secret > left-behind").await;

    // Gone from the engine: the next create goes on with the image and prepares it again.
    for sandbox in [&first, &second] {
        let (status, _) = server
            .post("sandbox.kill", json!({"sandboxId": id(sandbox)}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let removed = std::process::Command::new("docker")
            .args(["rmi", &name])
            .output()
            .unwrap();
        if removed.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "{removed:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let third = server.create(ask.clone()).await;
    assert_eq!(image_of_container(&server, &third).await, BUSYBOX);
    let run = server
        .exec(&third, "pwd; ls; echo secret > left-behind")
        .await;
    assert_eq!(run["stdout"], format!("{WORKDIR}\n"), "{run}");
    wait_for_image(&server, &name).await;
    let fourth = server.create(ask).await;
    assert_eq!(image_of_container(&server, &fourth).await, name);
    let run = server.exec(&fourth, "ls -A").await;
    assert_eq!(run["stdout"], "", "nothing of another sandbox: {run}");

    // A caller cannot name it.
    let (status, refused) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "image": name}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
}
