//! E2B's uploads cannot exhaust the server: a gzip bomb (a megabyte that expands to a
//! gibibyte) is decoded a bounded piece at a time and refused at the transfer cap,
//! eight at once leave the server's memory within 64 MiB of where it was and its
//! temporary files within their budget (twice the cap), a sandbox takes at most four
//! uploads at once; and a legitimate gibibyte still goes in, by E2B's SDKs' default
//! (multipart) and raw.

use std::io::Write as _;
use std::time::Duration;

use bytes::Bytes;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::e2b_envd::{e2b_sandbox, envd};
use crate::harness::{KEY, TestServer, peak_while, rss_kib};

const MIB: u64 = 1 << 20;

/// `size` zero bytes, gzipped.
fn zeros_gzipped(size: u64) -> Bytes {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let block = vec![0u8; MIB as usize];
    for _ in 0..size / MIB {
        encoder.write_all(&block).unwrap();
    }
    Bytes::from(encoder.finish().unwrap())
}

/// The bytes this process's unnamed temporary files hold now (the spooled uploads).
fn spooled_bytes() -> u64 {
    let temp = std::env::temp_dir();
    std::fs::read_dir("/proc/self/fd")
        .map(|fds| {
            fds.flatten()
                .filter(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|target| {
                        target.starts_with(&temp) && target.to_string_lossy().ends_with("(deleted)")
                    })
                })
                .filter_map(|fd| std::fs::metadata(fd.path()).ok())
                .map(|meta| meta.len())
                .sum()
        })
        .unwrap_or(0)
}

fn upload(server: &TestServer, id: &str, token: &str, path: &str) -> reqwest::RequestBuilder {
    envd(server, &format!("/files?path={path}"), id, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_bombs_leave_the_server_bounded() {
    let cap = 256 * MIB;
    let server = TestServer::start_with(|config| config.max_transfer_mb = cap / MIB).await;
    let sandboxes = [
        e2b_sandbox(&server, KEY).await,
        e2b_sandbox(&server, KEY).await,
    ];
    let bomb = zeros_gzipped(1024 * MIB);
    assert!(bomb.len() < 2 * MIB as usize, "{}", bomb.len());
    for (id, token) in &sandboxes {
        let warm = upload(&server, id, token, "/tmp/warm.txt")
            .body("warm")
            .send()
            .await
            .unwrap();
        assert_eq!(warm.status(), StatusCode::OK);
    }

    let before = rss_kib();
    let most_spooled = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watcher = tokio::spawn({
        let most = most_spooled.clone();
        async move {
            loop {
                most.fetch_max(spooled_bytes(), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let (answers, peak) = peak_while(futures_util::future::join_all((0..8).map(|n| {
        let (id, token) = &sandboxes[n % 2];
        upload(&server, id, token, &format!("/tmp/bomb-{n}"))
            .header("content-encoding", "gzip")
            .header("content-type", "application/octet-stream")
            .body(bomb.clone())
            .send()
    })))
    .await;
    watcher.abort();
    let statuses: Vec<u16> = answers
        .into_iter()
        .map(|answer| answer.unwrap().status().as_u16())
        .collect();
    let most = most_spooled.load(std::sync::atomic::Ordering::Relaxed);
    let grown = peak.saturating_sub(before) / 1024;
    println!(
        "8 bombs: {statuses:?}; memory grew {grown} MiB; spooled at most {} MiB",
        most / MIB
    );
    assert!(
        statuses.iter().all(|s| *s == 413 || *s == 503),
        "each refused at the cap or for want of room: {statuses:?}"
    );
    assert!(statuses.contains(&413), "{statuses:?}");
    assert!(grown < 64, "the server grew by {grown} MiB");
    assert!(most <= 2 * cap, "spooled {most} bytes, over the budget");
    assert_eq!(spooled_bytes(), 0, "nothing is left spooled");
    // The sandbox took no part of what was refused.
    let (id, _) = &sandboxes[0];
    let left = server
        .exec(&json!({"sandboxId": id}), "ls /tmp | grep -c bomb || true")
        .await;
    assert_eq!(left["stdout"], "0\n", "{left}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_takes_four_uploads_at_once() {
    let server = TestServer::start().await;
    let (id, token) = e2b_sandbox(&server, KEY).await;
    // Six uploads under way at once, each body held back after a gzip header: four
    // hold their places until their bodies end, two are refused at once.
    let mut feeds = Vec::new();
    let mut pending = Vec::new();
    for n in 0..6 {
        let (feed, mut fed) = tokio::sync::mpsc::channel::<Bytes>(1);
        feed.send(Bytes::from_static(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]))
            .await
            .unwrap();
        feeds.push(feed);
        let body = futures_util::stream::poll_fn(move |cx| {
            fed.poll_recv(cx)
                .map(|next| next.map(Ok::<_, std::io::Error>))
        });
        pending.push(tokio::spawn(
            upload(&server, &id, &token, &format!("/tmp/slow-{n}"))
                .header("content-encoding", "gzip")
                .body(reqwest::Body::wrap_stream(body))
                .send(),
        ));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while pending.iter().filter(|p| p.is_finished()).count() < 2 {
        assert!(std::time::Instant::now() < deadline, "none refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A moment more: no third is refused.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (ended, held): (Vec<_>, Vec<_>) = pending.into_iter().partition(|p| p.is_finished());
    assert_eq!((ended.len(), held.len()), (2, 4));
    for answer in ended {
        let answer = answer.await.unwrap().unwrap();
        assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
        let refused: Value = answer.json().await.unwrap();
        assert_eq!(refused["code"], 429, "{refused}");
    }
    drop(feeds);
    for answer in held {
        let _ = answer.await;
    }
    // Their places are given back.
    let fifth = upload(&server, &id, &token, "/tmp/fifth")
        .body("five")
        .send()
        .await
        .unwrap();
    assert_eq!(fifth.status(), StatusCode::OK);
}

/// A multipart body holding one `file` part of `size` bytes (a repeating pattern),
/// streamed.
fn multipart_of(size: u64) -> (String, reqwest::Body) {
    let boundary = "sandboxd-test-boundary-7f3a";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    );
    let tail = format!("\r\n--{boundary}--\r\n");
    let block = Bytes::from((0..MIB).map(|n| (n % 251) as u8).collect::<Vec<_>>());
    let parts = std::iter::once(Bytes::from(head))
        .chain((0..size / MIB).map(move |_| block.clone()))
        .chain(std::iter::once(Bytes::from(tail)))
        .map(Ok::<_, std::io::Error>);
    (
        format!("multipart/form-data; boundary={boundary}"),
        reqwest::Body::wrap_stream(futures_util::stream::iter(parts)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gibibyte_goes_in_by_multipart_and_raw() {
    let server = TestServer::start().await;
    let (id, token) = e2b_sandbox(&server, KEY).await;
    let sandbox = json!({"sandboxId": id});
    let before = rss_kib();
    let (answers, peak) = peak_while(async {
        let (content_type, body) = multipart_of(1024 * MIB);
        let multipart = upload(&server, &id, &token, "/tmp/big.bin")
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        let block = Bytes::from(vec![1u8; MIB as usize]);
        let raw = upload(&server, &id, &token, "/tmp/raw.bin")
            .header("content-type", "application/octet-stream")
            .header("content-length", (1024 * MIB).to_string())
            .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                (0..1024).map(move |_| Ok::<_, std::io::Error>(block.clone())),
            )))
            .send()
            .await
            .unwrap();
        (multipart.status(), raw.status())
    })
    .await;
    assert_eq!(answers, (StatusCode::OK, StatusCode::OK));
    let sizes = server
        .exec(&sandbox, "stat -c %s /tmp/big.bin /tmp/raw.bin")
        .await;
    assert_eq!(sizes["stdout"], "1073741824\n1073741824\n", "{sizes}");
    let grown = peak.saturating_sub(before) / 1024;
    println!("two 1 GiB uploads: memory grew {grown} MiB");
    assert!(grown < 64, "the server grew by {grown} MiB");
}
