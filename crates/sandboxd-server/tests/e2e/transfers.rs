//! Streamed transfers on the real engine, through the agent and through the engine's
//! archive API (a sandbox without the agent): a file and a tree go in and come out byte
//! for byte, owned by the sandbox user; the transfer cap stops an upload with nothing
//! partial left; what a tar could smuggle (devices, PAX owners) is refused or dropped;
//! bad requests are 4xx. Through the agent, a download's reader that stops for longer
//! than a stalled consumer is given holds the agent back (credit) instead of being cut,
//! and the sandbox's other operations keep moving; downloads past what one connection
//! serves at once go through the engine, and a dropped one frees its place.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer, id};

/// Deterministic bytes that do not compress into a pattern.
pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

pub(crate) async fn upload(
    server: &TestServer,
    sandbox: &Value,
    query: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let mut params = vec![("sandboxId", id(sandbox))];
    params.extend_from_slice(query);
    let response = server
        .client
        .post(format!("{}/api/sandbox.upload", server.url))
        .header("x-api-key", KEY)
        .query(&params)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub(crate) async fn download(
    server: &TestServer,
    sandbox: &Value,
    query: &[(&str, &str)],
) -> (StatusCode, Option<String>, Vec<u8>) {
    let mut params = vec![("sandboxId", id(sandbox))];
    params.extend_from_slice(query);
    let response = server
        .client
        .get(format!("{}/api/sandbox.download", server.url))
        .header("x-api-key", KEY)
        .query(&params)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let format = response
        .headers()
        .get("x-sandboxd-format")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, format, response.bytes().await.unwrap().to_vec())
}

/// A tree: nested directories, 300 small files, one of 8 MiB and a symlink.
fn tree() -> (Vec<u8>, BTreeMap<String, Vec<u8>>) {
    let mut files = BTreeMap::new();
    for i in 0..300 {
        files.insert(
            format!("src/d{}/f{i}.txt", i % 10),
            format!("file {i}\n").into_bytes(),
        );
    }
    files.insert("big.bin".into(), noise(8 << 20, 7));
    let mut builder = tar::Builder::new(Vec::new());
    for (path, content) in &files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        builder
            .append_data(&mut header, path, &content[..])
            .unwrap();
    }
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    builder.append_link(&mut link, "latest", "big.bin").unwrap();
    (builder.into_inner().unwrap(), files)
}

/// Operations served through the agent and through the engine so far.
fn served(server: &TestServer) -> (u64, u64) {
    served_by(&server.service)
}

fn served_by(service: &sandboxd_service::Service) -> (u64, u64) {
    let counts = service.path_counts();
    (
        counts.agent.load(Ordering::Relaxed),
        counts.engine.load(Ordering::Relaxed),
    )
}

/// Runs `story` on a sandbox of `server` and checks which path served its transfers:
/// every one through the agent (and none through the engine), or the reverse.
async fn on_path<F: Future<Output = ()>>(
    server: TestServer,
    through_agent: bool,
    story: impl FnOnce(TestServer, Value) -> F,
) {
    on_path_of("python", server, through_agent, story).await;
}

/// [`on_path`] on a sandbox of `template`.
async fn on_path_of<F: Future<Output = ()>>(
    template: &str,
    server: TestServer,
    through_agent: bool,
    story: impl FnOnce(TestServer, Value) -> F,
) {
    let sandbox = server.create(json!({"template": template})).await;
    let before = served(&server);
    let service = server.service.clone();
    story(server, sandbox).await;
    let after = served_by(&service);
    if through_agent {
        assert!(
            after.0 > before.0,
            "the agent served: {before:?} → {after:?}"
        );
        assert_eq!(after.1, before.1, "nothing went through the engine");
    } else {
        assert_eq!(after.0, before.0, "the agent is not there");
        assert!(after.1 > before.1);
    }
}

#[tokio::test]
async fn a_file_and_a_tree_round_trip_through_the_agent() {
    on_path(TestServer::start().await, true, round_trip).await;
}

#[tokio::test]
async fn a_file_and_a_tree_round_trip_through_the_engine() {
    on_path(TestServer::start_without_agent().await, false, round_trip).await;
}

async fn round_trip(server: TestServer, sandbox: Value) {
    // One file, 24 MiB (over the 10 MiB of writeFile), into a directory made for it.
    let content = noise(24 << 20, 1);
    let (status, done) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/in/data.bin"), ("mode", "750")],
        content.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["bytes"], 24 << 20);
    let out = server
        .exec(
            &sandbox,
            "stat -c '%u:%g %a %s' /home/user/in/data.bin; ls -A /home/user/in",
        )
        .await;
    assert_eq!(
        out["stdout"],
        format!("1000:1000 750 {}\ndata.bin\n", 24 << 20),
        "{out}"
    );
    let (status, format, back) =
        download(&server, &sandbox, &[("path", "/home/user/in/data.bin")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(format.as_deref(), Some("raw"));
    assert!(back == content, "the file came back changed");

    // A tree, unpacked under a directory; every entry the user's.
    let (tar, files) = tree();
    let (status, done) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/tree"), ("format", "tar")],
        tar,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["entries"], 302);
    let out = server
        .exec(
            &sandbox,
            "cd /home/user/tree && find . -type f | wc -l && find . ! -user 1000 | wc -l && readlink latest",
        )
        .await;
    assert_eq!(out["stdout"], "301\n0\nbig.bin\n", "{out}");

    // The directory comes back as a tar with the same files.
    let (status, format, back) = download(&server, &sandbox, &[("path", "/home/user/tree")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(format.as_deref(), Some("tar"));
    let mut archive = tar::Archive::new(&back[..]);
    let mut seen = BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path().unwrap().display().to_string();
        let mut content = Vec::new();
        entry.read_to_end(&mut content).unwrap();
        seen.insert(path.trim_start_matches("tree/").to_owned(), content);
    }
    assert_eq!(seen.len(), files.len());
    assert!(seen == files, "the tree came back changed");
}

#[tokio::test]
async fn the_cap_stops_an_upload_through_the_agent_and_leaves_nothing_partial() {
    let server = TestServer::start_with(|config| config.max_transfer_mb = 1).await;
    on_path(server, true, capped).await;
}

#[tokio::test]
async fn the_cap_stops_an_upload_through_the_engine_and_leaves_nothing_partial() {
    let server = TestServer::start_without_agent_with(|config| config.max_transfer_mb = 1).await;
    on_path(server, false, capped).await;
}

async fn capped(server: TestServer, sandbox: Value) {
    let (status, body) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/big.bin")],
        noise(3 << 19, 2),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");

    // A tar whose second file passes the cap: the first is written whole, nothing of
    // the second.
    let mut builder = tar::Builder::new(Vec::new());
    for (name, size) in [("a.bin", 600 << 10), ("b.bin", 600 << 10)] {
        let mut header = tar::Header::new_gnu();
        header.set_size(size);
        header.set_mode(0o644);
        builder
            .append_data(&mut header, name, &noise(size as usize, 3)[..])
            .unwrap();
    }
    let (status, body) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/capped"), ("format", "tar")],
        builder.into_inner().unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("limit"),
        "{body}"
    );
    let out = server
        .exec(
            &sandbox,
            "ls -A /home/user; echo --; ls -A /home/user/capped; echo --; stat -c %s /home/user/capped/a.bin",
        )
        .await;
    let listing = out["stdout"].as_str().unwrap();
    let parts: Vec<&str> = listing.split("--\n").collect();
    assert_eq!(parts.len(), 3, "{listing}");
    assert!(
        !parts[0].contains("big.bin") && !parts[0].contains("sandboxd-upload"),
        "{listing}"
    );
    assert!(!parts[1].contains("b.bin"), "{listing}");
    assert_eq!(
        parts[2],
        format!("{}\n", 600 << 10),
        "a.bin is whole: {listing}"
    );

    // A download over the cap is refused before any byte.
    server
        .exec(&sandbox, "head -c 2000000 /dev/zero > /home/user/zeros")
        .await;
    let (status, _, _) = download(&server, &sandbox, &[("path", "/home/user/zeros")]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn smuggled_entries_and_bad_requests_are_refused() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "python"})).await;

    // A device node.
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Char);
    header.set_size(0);
    header.set_device_major(1).unwrap();
    header.set_device_minor(3).unwrap();
    builder.append_data(&mut header, "null", &[][..]).unwrap();
    let (status, body) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/dev"), ("format", "tar")],
        builder.into_inner().unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("character device"),
        "{body}"
    );

    // A PAX record making a file root's, and a set-user-id bit: both dropped.
    let mut builder = tar::Builder::new(Vec::new());
    builder
        .append_pax_extensions([("uid", &b"0"[..]), ("uname", &b"root"[..])])
        .unwrap();
    let mut header = tar::Header::new_ustar();
    header.set_size(3);
    header.set_mode(0o4755);
    builder
        .append_data(&mut header, "suid", &b"abc"[..])
        .unwrap();
    let (status, body) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/pax"), ("format", "tar")],
        builder.into_inner().unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let out = server
        .exec(&sandbox, "stat -c '%u %a' /home/user/pax/suid")
        .await;
    assert_eq!(out["stdout"], "1000 755\n", "{out}");

    // A tar cut off inside its second file: the first is whole, nothing of the second,
    // no temporary file left.
    let mut builder = tar::Builder::new(Vec::new());
    for name in ["first.bin", "second.bin"] {
        let mut header = tar::Header::new_gnu();
        header.set_size(300 << 10);
        header.set_mode(0o644);
        builder
            .append_data(&mut header, name, &noise(300 << 10, 5)[..])
            .unwrap();
    }
    let mut cut = builder.into_inner().unwrap();
    cut.truncate(2 * 512 + (300 << 10) + (100 << 10));
    let (status, body) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/cut"), ("format", "tar")],
        cut,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let out = server
        .exec(
            &sandbox,
            "ls -A /home/user/cut; stat -c %s /home/user/cut/first.bin",
        )
        .await;
    assert_eq!(
        out["stdout"],
        format!("first.bin\n{}\n", 300 << 10),
        "{out}"
    );

    // Not a tar.
    let (status, _) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/junk"), ("format", "tar")],
        b"this is not a tar".repeat(100),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Bad queries, a missing path.
    for query in [
        vec![("path", "relative")],
        vec![("path", "/home/user/x"), ("mode", "99")],
        vec![("path", "/home/user/x"), ("format", "zip")],
        vec![("path", "/")],
    ] {
        let (status, body) = upload(&server, &sandbox, &query, b"x".to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query:?}: {body}");
    }
    // A refusal before any byte is used still reads what was sent: the client gets the
    // answer, not a reset connection.
    for _ in 0..5 {
        let (status, body) = upload(
            &server,
            &sandbox,
            &[("path", "/home/user/x"), ("format", "zip")],
            vec![0u8; 4 << 20],
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    let (status, _, _) = download(&server, &sandbox, &[("path", "/nope")]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A raw file of unknown length (chunked) is refused, saying why.
    let address = server.url.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!(
        "POST /api/sandbox.upload?sandboxId={}&path=/home/user/c HTTP/1.1\r\nHost: x\r\n\
         x-api-key: {KEY}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         3\r\nabc\r\n0\r\n\r\n",
        id(&sandbox)
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("Content-Length"), "{answer}");
}

/// A download's response, its body read as the test chooses.
async fn open_download(server: &TestServer, sandbox: &Value, path: &str) -> reqwest::Response {
    let response = server
        .client
        .get(format!("{}/api/sandbox.download", server.url))
        .header("x-api-key", KEY)
        .query(&[("sandboxId", id(sandbox)), ("path", path)])
        .send()
        .await
        .unwrap();
    let status = response.status();
    if status != StatusCode::OK {
        panic!("{status}: {}", response.text().await.unwrap_or_default());
    }
    response
}

#[tokio::test]
async fn a_slow_reader_holds_the_agent_back_and_is_not_cut() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "python"})).await;
    // Far more than the socket buffers and every queue on the way hold.
    let content = noise(64 << 20, 11);
    let (status, done) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/slow.bin")],
        content.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");

    let before = served(&server);
    let mut response = open_download(&server, &sandbox, "/home/user/slow.bin").await;
    let mut back = response.chunk().await.unwrap().unwrap().to_vec();
    // The reader stops for longer than a stalled consumer is given (3 s); meanwhile the
    // sandbox's other operations are served as fast as ever.
    let paused = Instant::now();
    while paused.elapsed() < Duration::from_secs(5) {
        let started = Instant::now();
        let out = server
            .exec(&sandbox, "head -c 100000 /dev/zero | wc -c")
            .await;
        assert_eq!(out["stdout"], "100000\n", "{out}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    while let Some(chunk) = response.chunk().await.expect("the download was not cut") {
        back.extend_from_slice(&chunk);
    }
    assert_eq!(back.len(), content.len());
    assert!(back == content, "the file came back changed");
    let after = served(&server);
    assert_eq!(
        after.1, before.1,
        "the download went through the agent: {before:?} → {after:?}"
    );
}

#[tokio::test]
async fn downloads_past_what_the_agent_serves_at_once_go_through_the_engine() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "python"})).await;
    let content = noise(16 << 20, 12);
    let (status, done) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/many.bin")],
        content.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");

    // Downloads given up after their first chunk free their place in the agent.
    for _ in 0..6 {
        let mut response = open_download(&server, &sandbox, "/home/user/many.bin").await;
        response.chunk().await.unwrap().unwrap();
        drop(response);
    }
    // Five at once, all held open: the agent serves four, the engine the fifth. (The
    // engine reads one archive of a container at a time: a sixth would wait for the
    // fifth to be read.)
    let before = served(&server);
    let mut open = Vec::new();
    for _ in 0..5 {
        open.push(open_download(&server, &sandbox, "/home/user/many.bin").await);
    }
    let after = served(&server);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (4, 1),
        "{before:?} → {after:?}"
    );
    for response in open {
        let back = response.bytes().await.unwrap();
        assert!(back[..] == content[..], "a download came back changed");
    }
    // Once they ended, the agent serves again.
    let before = served(&server);
    let (status, _, back) = download(&server, &sandbox, &[("path", "/home/user/many.bin")]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(back == content);
    let after = served(&server);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1, 0),
        "{before:?} → {after:?}"
    );
}

#[tokio::test]
async fn what_the_sandbox_user_may_not_touch_is_refused_through_the_agent() {
    on_path_of("base", TestServer::start().await, true, refusals).await;
}

#[tokio::test]
async fn what_the_sandbox_user_may_not_touch_is_refused_through_the_engine() {
    on_path_of(
        "base",
        TestServer::start_without_agent().await,
        false,
        refusals,
    )
    .await;
}

/// The same answers on either path: the engine path acts as the sandbox user, never as
/// root, so root's files are neither read nor written and nothing lands under `/etc`.
async fn refusals(server: TestServer, sandbox: Value) {
    let (status, _, body) = download(&server, &sandbox, &[("path", "/etc/shadow")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(!String::from_utf8_lossy(&body).contains("root:"));
    let (status, read) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", id(&sandbox)), ("path", "/etc/shadow")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{read}");
    for path in ["/etc/passwd", "/etc/evil", "/etc/cron.d/x"] {
        let (status, body) = upload(&server, &sandbox, &[("path", path)], b"x".to_vec()).await;
        assert!(
            status == StatusCode::BAD_REQUEST || status == StatusCode::NOT_FOUND,
            "{path}: {status} {body}"
        );
        let (status, body) = server
            .post(
                "sandbox.writeFile",
                json!({"sandboxId": id(&sandbox), "path": path, "content": "x"}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
    }
    let mut tree = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(1);
    header.set_mode(0o644);
    tree.append_data(&mut header, "evil", &b"x"[..]).unwrap();
    let (status, body) = upload(
        &server,
        &sandbox,
        &[("path", "/etc"), ("format", "tar")],
        tree.into_inner().unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // A tar cut in the middle of an entry: refused at once, never left waiting.
    let mut whole = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(4096);
    header.set_mode(0o644);
    whole
        .append_data(&mut header, "cut.bin", &[7u8; 4096][..])
        .unwrap();
    let whole = whole.into_inner().unwrap();
    let started = Instant::now();
    let (status, body) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user"), ("format", "tar")],
        whole[..2048].to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // An entry named twice (a PAX path inside, a GNU long name outside): refused whole.
    let (status, body) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user"), ("format", "tar")],
        two_names("inside/ok.txt", "../../etc/evil"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("two names"),
        "{body}"
    );
    let listed = server
        .exec(
            &sandbox,
            "cat /etc/passwd | head -1; ls /etc/evil /etc/cron.d/x 2>&1 | wc -l",
        )
        .await;
    assert!(
        listed["stdout"].as_str().unwrap().starts_with("root:x:0:0"),
        "{listed}"
    );
    // Inside its own home the user may do all of it, on either path.
    let (status, body) = upload(
        &server,
        &sandbox,
        &[("path", "/home/user/mine")],
        b"ok".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = download(&server, &sandbox, &[("path", "/home/user/mine")]).await;
    assert_eq!((status, body.as_slice()), (StatusCode::OK, &b"ok"[..]));
}

/// A tar whose one entry carries a PAX `path` and a GNU long name.
fn two_names(pax: &str, gnu: &str) -> Vec<u8> {
    let block = |kind: tar::EntryType, name: &str, data: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_path(name).unwrap();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(data);
        bytes.resize(bytes.len().div_ceil(512) * 512, 0);
        bytes
    };
    let record = format!(" path={pax}\n");
    let mut length = record.len() + 1;
    while format!("{length}{record}").len() != length {
        length += 1;
    }
    let mut gnu_name = gnu.as_bytes().to_vec();
    gnu_name.push(0);
    let mut tar = block(
        tar::EntryType::XHeader,
        "PaxHeader",
        format!("{length}{record}").as_bytes(),
    );
    tar.extend(block(
        tar::EntryType::GNULongName,
        "././@LongLink",
        &gnu_name,
    ));
    tar.extend(block(tar::EntryType::Regular, "short", b"x"));
    tar.extend([0u8; 1024]);
    tar
}
