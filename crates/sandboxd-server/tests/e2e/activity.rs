//! A sandbox's activity timeline on the real engine: commands through REST, the exec
//! WebSocket, MCP and E2B's API each written with their exit codes and who asked; a
//! secret variable's value never in it; files, a terminal and the sandbox's life in
//! order; kinds, the newest entries and a cursor; another organization's key shut out;
//! the timeline of a removed sandbox read until its retention; a flood trimmed to the
//! bound and counted, and text from the sandbox cut.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use tokio_tungstenite::tungstenite::Message;

use crate::e2b_envd::{e2b_sandbox, envelope, envelopes, start_process};
use crate::harness::{KEY, TestServer, id};
use crate::stream::{connect_to, next, send};
use crate::terminal;

const SECRET: &str = "tok-s3cr3t-9f2a";

/// The timeline's entries of `sandbox_id` once `ready` holds for them (entries are
/// written behind the calls), within 20 s.
async fn entries_once(
    server: &TestServer,
    sandbox_id: &str,
    query: &[(&str, &str)],
    ready: impl Fn(&[Value]) -> bool,
) -> (Value, Vec<Value>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut full = vec![("sandboxId", sandbox_id), ("limit", "500")];
    full.extend_from_slice(query);
    loop {
        let (status, page) = server.get("sandbox.activity", &full).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let entries = page["entries"].as_array().cloned().unwrap_or_default();
        if ready(&entries) {
            return (page, entries);
        }
        assert!(Instant::now() < deadline, "not there in time: {page:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A terminal's recording once it holds `needle` (its parts are written behind the
/// session), within 20 s.
async fn recording_once(
    server: &TestServer,
    sandbox_id: &str,
    terminal_id: &str,
    needle: &str,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, answer) = server
            .get(
                "sandbox.recording",
                &[("sandboxId", sandbox_id), ("terminalId", terminal_id)],
            )
            .await;
        let cast = answer["cast"].as_str().unwrap_or_default().to_owned();
        if status == StatusCode::OK && cast.contains(needle) {
            return cast;
        }
        assert!(Instant::now() < deadline, "{status}: {answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn commands(entries: &[Value]) -> Vec<&Value> {
    entries.iter().filter(|e| e["kind"] == "command").collect()
}

fn with_command<'a>(entries: &'a [Value], text: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| {
            e["command"]["command"]
                .as_str()
                .is_some_and(|c| c.contains(text))
        })
        .unwrap_or_else(|| panic!("no command {text:?} in {entries:#?}"))
}

async fn key_id(server: &TestServer) -> String {
    let (_, current) = server.get("apiKey.current", &[]).await;
    current["key"]["keyId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn commands_from_every_door_are_written_with_exit_codes_and_who_asked() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "envVars": format!("API_TOKEN={SECRET}")}))
        .await;
    let sandbox_id = id(&sandbox);

    // REST.
    let ran = server
        .exec(
            &sandbox,
            "echo \"token is $API_TOKEN\"; echo two; echo three; echo four; echo five; ls /nope; exit 3",
        )
        .await;
    assert_eq!(ran["exitCode"], 3);
    // The exec WebSocket.
    let mut socket = connect_to(
        &server,
        "/sandbox-exec",
        &format!("?sandboxId={sandbox_id}"),
        Some(KEY),
    )
    .await;
    send(
        &mut socket,
        json!({"type": "exec", "cmd": "echo streamed $ONE_OFF", "env": {"ONE_OFF": "only-this-run-77"}}),
    )
    .await;
    loop {
        let message = next(&mut socket).await.expect("open");
        if message["type"] == "exit" {
            break;
        }
    }
    drop(socket);
    // MCP.
    let client = crate::mcp::connect(&server).await;
    let (failed, _) = crate::mcp::call(
        &client,
        "sandbox-exec",
        json!({"sandboxId": sandbox_id, "cmd": "echo from-mcp $ONE_OFF"}),
    )
    .await;
    assert!(!failed);

    let (page, entries) = entries_once(&server, sandbox_id, &[], |entries| {
        commands(entries).len() >= 3
    })
    .await;
    let key = key_id(&server).await;
    let rest = with_command(&entries, "token is");
    assert_eq!(rest["action"], "exec");
    assert_eq!(rest["by"]["keyId"], key.as_str());
    let command = &rest["command"];
    assert_eq!(command["exitCode"], 3);
    assert_eq!(command["timedOut"], false);
    assert_eq!(
        command["stdout"]["firstLines"],
        json!(["token is ***", "two", "three"])
    );
    assert_eq!(command["stdout"]["lastLines"], json!(["four", "five"]));
    assert_eq!(command["stdout"]["bytes"], 45);
    assert!(
        command["stderr"]["firstLines"][0]
            .as_str()
            .is_some_and(|line| line.contains("/nope")),
        "{command}"
    );
    assert!(command["durationMs"].as_u64().is_some());
    let streamed = with_command(&entries, "echo streamed");
    assert_eq!(streamed["action"], "stream");
    assert_eq!(streamed["command"]["exitCode"], 0);
    assert_eq!(
        streamed["command"]["stdout"]["firstLines"],
        json!(["streamed ***"])
    );
    let by_mcp = with_command(&entries, "from-mcp");
    assert_eq!(
        (by_mcp["action"].as_str(), by_mcp["by"]["keyId"].as_str()),
        (Some("exec"), Some(key.as_str()))
    );
    assert_eq!(entries[0]["kind"], "lifecycle");
    assert_eq!(entries[0]["action"], "create");
    assert_eq!(entries[0]["lifecycle"]["from"], "base");
    assert!(!page.to_string().contains(SECRET), "{page}");
    assert!(!page.to_string().contains("only-this-run-77"), "{page}");

    // E2B's commands.
    let (e2b_id, token) = e2b_sandbox(&server, KEY).await;
    let start = json!({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo from e2b"]}, "stdin": false});
    let response = start_process(&server, &e2b_id, &token, envelope(&start)).await;
    let frames = envelopes(&response.bytes().await.unwrap());
    assert!(frames.len() > 2, "{frames:?}");
    let (_, entries) = entries_once(&server, &e2b_id, &[("kinds", "command")], |entries| {
        !entries.is_empty()
    })
    .await;
    assert_eq!(entries[0]["action"], "process");
    assert_eq!(
        entries[0]["command"]["command"],
        "/bin/bash -l -c 'echo from e2b'"
    );
    assert_eq!(entries[0]["by"]["keyId"], key.as_str());
    server
        .post("sandbox.kill", json!({"sandboxId": e2b_id}))
        .await;
}

#[tokio::test]
async fn files_terminals_and_life_are_in_order_and_outlive_the_sandbox_until_retention() {
    let server = TestServer::start_with(|config| config.activity.retention_hours = 0).await;
    let sandbox = server
        .create(json!({"template": "base", "envVars": format!("API_TOKEN={SECRET}")}))
        .await;
    let sandbox_id = id(&sandbox);
    let (status, _) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sandbox_id, "path": "/tmp/notes.txt", "content": "hello"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", sandbox_id), ("path", "/tmp/missing")],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A terminal: typed into, resized, left.
    let mut terminal = terminal::open(&server, &sandbox, "&cols=100&rows=30").await;
    assert_eq!(terminal::expect_text(&mut terminal).await["type"], "ready");
    let mut output = Vec::new();
    terminal::keys(&mut terminal, "echo rec-$((6*7)) $API_TOKEN\n").await;
    terminal::read_until(&mut terminal, &mut output, b"rec-42 ").await;
    let resize = json!({"type": "resize", "cols": 90, "rows": 20}).to_string();
    futures_util::SinkExt::send(&mut terminal, Message::Text(resize.into()))
        .await
        .unwrap();
    terminal::keys(&mut terminal, "exit 0\n").await;
    assert_eq!(terminal::expect_text(&mut terminal).await["type"], "exit");
    drop(terminal);
    entries_once(&server, sandbox_id, &[("kinds", "terminal")], |entries| {
        entries.iter().any(|e| e["action"] == "close")
    })
    .await;
    for (procedure, body) in [
        ("sandbox.pause", json!({"sandboxId": sandbox_id})),
        ("sandbox.resume", json!({"sandboxId": sandbox_id})),
        (
            "sandbox.setTimeout",
            json!({"sandboxId": sandbox_id, "timeoutMs": 120_000}),
        ),
        ("sandbox.kill", json!({"sandboxId": sandbox_id})),
    ] {
        let (status, answer) = server.post(procedure, body).await;
        assert_eq!(status, StatusCode::OK, "{procedure}: {answer}");
    }
    let (page, entries) = entries_once(&server, sandbox_id, &[], |entries| {
        entries.last().is_some_and(|e| e["action"] == "kill")
    })
    .await;
    let actions: Vec<String> = entries
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["kind"].as_str().unwrap(),
                e["action"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            "lifecycle create",
            "file write",
            "file read",
            "terminal close",
            "lifecycle pause",
            "lifecycle resume",
            "lifecycle timeout",
            "lifecycle kill"
        ],
        "{page:#}"
    );
    assert_eq!(entries[1]["file"]["path"], "/tmp/notes.txt");
    assert_eq!(entries[1]["file"]["bytes"], 5);
    assert!(entries[2]["file"]["error"].is_string(), "{}", entries[2]);
    assert_eq!(entries[3]["terminal"]["cols"], 100);
    assert!(entries[3]["terminal"]["durationMs"].as_u64().is_some());
    assert_eq!(entries[3]["terminal"]["recorded"], true);
    assert!(!page.to_string().contains(SECRET), "{page}");

    // Its recording plays back what was typed and printed, the secret masked.
    let terminal_id = entries[3]["terminal"]["terminalId"].as_str().unwrap();
    let cast = recording_once(&server, sandbox_id, terminal_id, "exit").await;
    let mut lines = cast.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        (&header["version"], &header["width"], &header["height"]),
        (&json!(2), &json!(100), &json!(30))
    );
    let events: Vec<Value> = lines
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let printed: String = events
        .iter()
        .filter(|e| e[1] == "o")
        .map(|e| e[2].as_str().unwrap())
        .collect();
    assert!(
        printed.contains("echo rec-$((6*7)) $API_TOKEN"),
        "{printed:?}"
    );
    assert!(printed.contains("rec-42 ***"), "{printed:?}");
    assert!(!cast.contains(SECRET), "{cast}");
    assert!(
        events.iter().any(|e| e[1] == "r" && e[2] == "90x20"),
        "{cast}"
    );
    assert!(
        !events.iter().any(|e| e[1] == "i"),
        "input is not recorded by default"
    );
    let times: Vec<f64> = events.iter().map(|e| e[0].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let (status, _) = server
        .get(
            "sandbox.recording",
            &[("sandboxId", sandbox_id), ("terminalId", "t_nosuchthing")],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(entries[6]["lifecycle"]["timeoutMs"], 120_000);
    assert_eq!(page["more"], false);

    // Narrowed, the newest, and from a cursor.
    let (status, lifecycle) = server
        .get(
            "sandbox.activity",
            &[("sandboxId", sandbox_id), ("kinds", "lifecycle,file")],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lifecycle["entries"].as_array().unwrap().len(), 7);
    let (_, newest) = server
        .get(
            "sandbox.activity",
            &[
                ("sandboxId", sandbox_id),
                ("latest", "true"),
                ("limit", "2"),
            ],
        )
        .await;
    let newest: Vec<&str> = newest["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(newest, ["timeout", "kill"]);
    let (_, first) = server
        .get(
            "sandbox.activity",
            &[("sandboxId", sandbox_id), ("limit", "3")],
        )
        .await;
    assert_eq!(first["more"], true);
    let cursor = first["nextCursor"].as_str().unwrap();
    let (_, rest) = server
        .get(
            "sandbox.activity",
            &[("sandboxId", sandbox_id), ("cursor", cursor)],
        )
        .await;
    assert_eq!(rest["entries"].as_array().unwrap().len(), 5);
    assert_eq!(rest["entries"][0]["entryId"], entries[3]["entryId"]);

    // Bad reads are 400s naming the field.
    for (name, value) in [
        ("kinds", "everything"),
        ("limit", "0"),
        ("cursor", "x' OR 1=1"),
    ] {
        let (status, error) = server
            .get(
                "sandbox.activity",
                &[("sandboxId", sandbox_id), (name, value)],
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {error}");
        assert!(error.to_string().contains(name), "{error}");
    }

    // Another organization's key: as a sandbox that never existed.
    let (_, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    let other_key = other["apiKey"]["secret"].as_str().unwrap();
    let (status, _) = server
        .get_with_key("sandbox.activity", other_key, &[("sandboxId", sandbox_id)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Removed, its timeline is still read (with the removal), until its retention.
    let (status, _) = server
        .post("sandbox.remove", json!({"sandboxId": sandbox_id}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, entries) = entries_once(&server, sandbox_id, &[], |entries| {
        entries.last().is_some_and(|e| e["action"] == "remove")
    })
    .await;
    assert_eq!(entries.len(), 9);
    let (status, _) = server
        .get_with_key("sandbox.activity", other_key, &[("sandboxId", sandbox_id)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The first pass marks its end, a later one removes it (retention 0).
    server
        .service
        .duties()
        .expire_activity_once()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(
        server
            .service
            .duties()
            .expire_activity_once()
            .await
            .unwrap()
            >= 1
    );
    let (status, _) = server
        .get("sandbox.activity", &[("sandboxId", sandbox_id)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_flood_is_trimmed_to_the_bound_and_text_from_the_sandbox_cut() {
    let server = TestServer::start_with(|config| config.activity.max_entries = 20).await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let sandbox_id = id(&sandbox);
    let long_command = format!(
        "echo {} > /dev/null; head -c 300000 /dev/zero | tr '\\0' x",
        "y".repeat(60_000)
    );
    let ran = server.exec(&sandbox, &long_command).await;
    assert_eq!(ran["exitCode"], 0);
    for n in 0..40 {
        server.exec(&sandbox, &format!("echo {n}")).await;
    }
    let (page, entries) = entries_once(&server, sandbox_id, &[], |entries| {
        entries
            .last()
            .is_some_and(|e| e["command"]["command"] == "echo 39")
    })
    .await;
    assert!(
        entries.len() <= 22,
        "kept to the bound and a tenth more: {}",
        entries.len()
    );
    assert!(
        page["dropped"].as_u64().unwrap() >= 19,
        "{}",
        page["dropped"]
    );
    // The oldest went first.
    assert!(!entries.iter().any(|e| e["kind"] == "lifecycle"));

    // A long command line and a long line of output are cut.
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    server.exec(&sandbox, &long_command).await;
    let (_, entries) = entries_once(&server, id(&sandbox), &[("kinds", "command")], |entries| {
        !entries.is_empty()
    })
    .await;
    let command = &entries[0]["command"];
    let text = command["command"].as_str().unwrap();
    assert_eq!(text.chars().count(), 2048);
    assert!(text.ends_with('…'));
    let line = command["stdout"]["firstLines"][0].as_str().unwrap();
    assert_eq!(line.chars().count(), 200);
    assert_eq!(command["stdout"]["bytes"], 300_000);
}
