//! Templates users build, on the real engine: a Dockerfile built on a configured
//! template's image with RUN, COPY, ENV, WORKDIR and USER, then a sandbox made from it
//! shows each; the log carries a RUN's output with its step; an unchanged rebuild comes
//! from the cache and a changed file rebuilds from its copy on; a failing step names its
//! step and last lines and leaves no container; removal is refused while a sandbox uses
//! the template; another organization sees none of it; bad Dockerfiles are 400s.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, id};

const DOCKERFILE: &str = r#"FROM base
ARG FLAVOUR=plain
ENV GREETING="hello world" FLAVOUR=$FLAVOUR
WORKDIR /srv/app
COPY --chown=1000:1000 hello.txt ./
COPY scripts/ /opt/scripts/
RUN echo "building $FLAVOUR" && echo "$GREETING" > /srv/app/greeting && echo to-stderr >&2
USER 1000:1000
CMD ["sh", "-c", "echo started > /tmp/started && sleep 600"]
"#;

fn b64(text: &str) -> String {
    base64_simd::STANDARD.encode_to_string(text)
}

fn files(hello: &str) -> Value {
    json!({"hello.txt": b64(hello), "scripts/run.sh": b64("echo run\n")})
}

/// Starts a build; answers its id.
async fn build(server: &TestServer, body: Value) -> String {
    let (status, started) = server.post("template.build", body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    assert_eq!(started["status"], "building");
    started["buildId"].as_str().expect("buildId").to_owned()
}

/// Follows a build's log to its end: its status and every entry.
async fn follow(server: &TestServer, build_id: &str) -> (Value, Vec<Value>) {
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut entries = Vec::new();
    let mut offset = 0;
    loop {
        let offset_text = offset.to_string();
        let (status, page) = server
            .get(
                "template.buildLog",
                &[("buildId", build_id), ("offset", &offset_text)],
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        entries.extend(page["entries"].as_array().expect("entries").iter().cloned());
        offset = page["nextOffset"].as_i64().expect("nextOffset");
        if page["status"] != "building" {
            // What was written before the end is all there.
            let (_, rest) = server
                .get(
                    "template.buildLog",
                    &[("buildId", build_id), ("offset", &offset.to_string())],
                )
                .await;
            entries.extend(rest["entries"].as_array().expect("entries").iter().cloned());
            return (page, entries);
        }
        assert!(
            Instant::now() < deadline,
            "the build did not end: {entries:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn lines(entries: &[Value], stream: &str) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["stream"] == stream)
        .map(|e| e["line"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn stdout(server: &TestServer, sandbox: &Value, cmd: &str) -> String {
    let run = server.exec(sandbox, cmd).await;
    assert_eq!(run["exitCode"], 0, "{cmd}: {run}");
    run["stdout"].as_str().unwrap_or_default().trim().to_owned()
}

/// Kills `sandboxes`, then removes the template `name`.
async fn kill_and_remove(server: &TestServer, sandboxes: &[&Value], name: &str) {
    for sandbox in sandboxes {
        let (status, _) = server
            .post("sandbox.kill", json!({"sandboxId": id(sandbox)}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (_, template) = server.get("template.one", &[("name", name)]).await;
    let (status, removed) = server
        .post(
            "template.remove",
            json!({"templateId": template["templateId"]}),
        )
        .await;
    assert_eq!((status, removed), (StatusCode::OK, json!(true)));
}

/// Removes the images the builds made (only this test builds).
fn remove_build_images() {
    // By name: a step's image is the parent of the next one's, and an id with children
    // is not removed; a name goes in any order.
    let _ = std::process::Command::new("bash")
        .args([
            "-c",
            "for r in sandboxd-templates sandboxd-build-cache; do docker images --format '{{.Repository}}:{{.Tag}}' --filter reference=\"$r:*\" | xargs -r docker rmi >/dev/null 2>&1; done",
        ])
        .status();
}

pub(crate) struct Images;
impl Drop for Images {
    fn drop(&mut self) {
        remove_build_images();
    }
}

#[tokio::test]
async fn a_built_template_makes_sandboxes_and_its_rebuild_is_cached() {
    let _images = Images;
    let server = TestServer::start().await;
    let first = build(
        &server,
        json!({"name": "app", "dockerfile": DOCKERFILE, "files": files("hi\n")}),
    )
    .await;
    let (end, entries) = follow(&server, &first).await;
    assert_eq!(end["status"], "ready", "{end} {entries:?}");
    let system = lines(&entries, "system");
    assert!(
        system.iter().any(|l| l == "Step 1/9 : FROM base"),
        "{system:?}"
    );
    // The RUN's output, with its step.
    let run = entries
        .iter()
        .find(|e| e["line"] == "building plain")
        .expect("the RUN's output");
    assert_eq!(
        (run["step"].as_i64(), &run["stream"]),
        (Some(7), &json!("stdout"))
    );
    assert!(lines(&entries, "stderr").contains(&"to-stderr".to_owned()));

    let (status, template) = server.get("template.one", &[("name", "app")]).await;
    assert_eq!(status, StatusCode::OK, "{template}");
    assert_eq!(template["version"], 1);
    assert_eq!(template["workdir"], "/srv/app");
    assert_eq!(
        template["startCommand"],
        json!(["sh", "-c", "echo started > /tmp/started && sleep 600"])
    );

    let (status, listed) = server.get("sandbox.templates", &[]).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let kinds: Vec<(String, String)> = listed
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| (t["name"].to_string(), t["kind"].to_string()))
        .collect();
    assert!(
        kinds.contains(&("\"base\"".into(), "\"configured\"".into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("\"app\"".into(), "\"built\"".into())),
        "{kinds:?}"
    );
    let sandbox = server.create(json!({"template": "app"})).await;
    // The start command runs in it, as a background process.
    let (status, processes) = server
        .get("sandbox.processList", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(status, StatusCode::OK, "{processes}");
    assert!(
        processes
            .as_array()
            .is_some_and(|all| all.iter().any(|p| p["cmd"]
                .as_str()
                .is_some_and(|cmd| cmd.contains("/tmp/started")))),
        "{processes}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.exec(&sandbox, "cat /tmp/started").await["stdout"] != "started\n" {
        assert!(Instant::now() < deadline, "the start command did not run");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        stdout(&server, &sandbox, "cat /srv/app/greeting").await,
        "hello world"
    );
    assert_eq!(
        stdout(&server, &sandbox, "echo $GREETING-$FLAVOUR").await,
        "hello world-plain"
    );
    assert_eq!(stdout(&server, &sandbox, "id -u").await, "1000");
    assert_eq!(stdout(&server, &sandbox, "pwd").await, "/srv/app");
    assert_eq!(
        stdout(
            &server,
            &sandbox,
            "stat -c '%u %s' /srv/app/hello.txt && cat /opt/scripts/run.sh"
        )
        .await,
        "1000 3\necho run"
    );

    // Unchanged: every step from the cache, quickly.
    let started = Instant::now();
    let second = build(
        &server,
        json!({"name": "app", "dockerfile": DOCKERFILE, "files": files("hi\n")}),
    )
    .await;
    let (end, entries) = follow(&server, &second).await;
    assert_eq!(end["status"], "ready", "{end}");
    let cached = lines(&entries, "system")
        .iter()
        .filter(|l| l.contains("cached"))
        .count();
    assert_eq!(
        cached, 4,
        "WORKDIR, two COPYs and RUN from the cache: {entries:?}"
    );
    assert!(
        lines(&entries, "stdout").is_empty(),
        "nothing ran: {entries:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // One file changed: its copy and what follows run again, the WORKDIR does not.
    let third = build(
        &server,
        json!({"name": "app", "dockerfile": DOCKERFILE, "files": files("changed\n")}),
    )
    .await;
    let (end, entries) = follow(&server, &third).await;
    assert_eq!(end["status"], "ready", "{end}");
    let cached_steps: Vec<i64> = entries
        .iter()
        .filter(|e| e["line"].as_str().is_some_and(|l| l.contains("cached")))
        .filter_map(|e| e["step"].as_i64())
        .collect();
    assert_eq!(cached_steps, vec![4], "{entries:?}");
    let (_, template) = server.get("template.one", &[("name", "app")]).await;
    assert_eq!(template["version"], 3);
    assert_eq!(template["versions"].as_array().map(Vec::len), Some(3));

    // A new sandbox gets the newest version; the running one keeps its own.
    let newer = server.create(json!({"template": "app"})).await;
    assert_eq!(stdout(&server, &newer, "cat hello.txt").await, "changed");
    assert_eq!(stdout(&server, &sandbox, "cat hello.txt").await, "hi");

    // Another organization sees none of it and cannot create from it.
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let other_key = other["apiKey"]["secret"].as_str().expect("key").to_owned();
    let (status, all) = server.get_with_key("template.all", &other_key, &[]).await;
    assert_eq!((status, all), (StatusCode::OK, json!([])));
    let (status, log) = server
        .get_with_key("template.buildLog", &other_key, &[("buildId", &first)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{log}");
    let (_, project) = server
        .post_with_key("project.create", Some(&other_key), json!({"name": "p"}))
        .await;
    let (status, environment) = server
        .post_with_key(
            "environment.create",
            Some(&other_key),
            json!({"projectId": project["projectId"], "name": "e"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{environment}");
    let other_env = environment["environmentId"].clone();
    let (status, refused) = server
        .post_with_key(
            "sandbox.create",
            Some(&other_key),
            json!({"template": "app", "environmentId": other_env}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");

    // Nor can anyone reach the template's image by its id (the engine finds an image by
    // a prefix of it): only the template's name does.
    let ids = std::process::Command::new("bash")
        .args([
            "-c",
            "docker images -q --no-trunc --filter reference='sandboxd-templates:*' | head -1",
        ])
        .output()
        .expect("docker images");
    let image_id = String::from_utf8_lossy(&ids.stdout).trim().to_owned();
    assert!(image_id.starts_with("sha256:"), "{image_id}");
    for image in [
        image_id.clone(),
        image_id["sha256:".len()..][..12].to_owned(),
    ] {
        let (status, refused) = server
            .post_with_key(
                "sandbox.create",
                Some(&other_key),
                json!({"image": image, "environmentId": other_env}),
            )
            .await;
        assert!(
            status == StatusCode::BAD_REQUEST || status == StatusCode::NOT_FOUND,
            "{image}: {status} {refused}"
        );
    }

    // Removal waits until no sandbox uses it.
    let template_id = template["templateId"].clone();
    let (status, busy) = server
        .post("template.remove", json!({"templateId": template_id}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{busy}");
    for running in [&sandbox, &newer] {
        let (status, _) = server
            .post("sandbox.kill", json!({"sandboxId": id(running)}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, removed) = server
        .post("template.remove", json!({"templateId": template_id}))
        .await;
    assert_eq!((status, removed), (StatusCode::OK, json!(true)));
    let (status, _) = server.get("template.one", &[("name", "app")]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_failing_step_is_named_and_leaves_nothing() {
    let _images = Images;
    // One build at a time on this server: the second waits for the first.
    let server = TestServer::start_with(|config| config.builds.at_once = 1).await;
    let failing = build(
        &server,
        json!({"name": "broken", "dockerfile": "FROM base\nRUN echo first\nRUN echo about to fail && exit 3\nRUN echo never\n"}),
    )
    .await;
    let queued = build(
        &server,
        json!({"name": "queued", "dockerfile": "FROM base\nRUN echo after the other\n"}),
    )
    .await;
    let (end, entries) = follow(&server, &failing).await;
    let (queued_end, queued_entries) = follow(&server, &queued).await;
    assert_eq!(queued_end["status"], "ready", "{queued_end}");
    assert!(
        lines(&queued_entries, "system")
            .contains(&"waiting for one of the server's 1 build slots".to_owned()),
        "{queued_entries:?}"
    );
    let ran_at = queued_entries
        .iter()
        .find(|e| e["line"] == "after the other")
        .map(|e| e["time"].as_str().unwrap_or_default().to_owned())
        .expect("the queued build's output");
    // The first build's last line is written as it ends.
    let ended_at = entries
        .last()
        .map(|e| e["time"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    assert!(
        ran_at >= ended_at,
        "the queued build ran at {ran_at}, before the first ended at {ended_at}"
    );
    assert_eq!(end["status"], "error", "{end}");
    assert_eq!(end["error"]["step"], 3, "{end}");
    let message = end["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("exited with code 3") && message.contains("about to fail"),
        "{message}"
    );
    assert!(!lines(&entries, "stdout").contains(&"never".to_owned()));
    // No container of the build is left, and the failed template makes no sandbox.
    let (status, refused) = server
        .post(
            "sandbox.create",
            json!({"template": "broken", "environmentId": server_env(&server).await}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    let left = std::process::Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=sandboxd.build={failing}"),
        ])
        .output()
        .expect("docker ps");
    assert!(
        left.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&left.stdout)
    );
}

async fn server_env(server: &TestServer) -> Value {
    let (_, projects) = server.get("project.all", &[]).await;
    projects[0]["environments"][0]["environmentId"].clone()
}

#[tokio::test]
async fn bad_builds_are_refused_before_anything_runs() {
    let server = TestServer::start().await;
    for (body, wanted) in [
        (
            json!({"name": "x", "dockerfile": "FROM alpine:3\nRUN true\n"}),
            "line 1: FROM alpine:3",
        ),
        (
            json!({"name": "x", "dockerfile": "FROM base\nHEALTHCHECK CMD true\n"}),
            "line 2: HEALTHCHECK is not taken",
        ),
        (
            json!({"name": "x", "dockerfile": "FROM base\nADD https://example.com/x /x\n"}),
            "URL",
        ),
        (
            json!({"name": "x", "dockerfile": "FROM base\nCOPY ../etc/passwd /x\n"}),
            "line 2",
        ),
        (
            json!({"name": "python", "dockerfile": "FROM base\n"}),
            "configured template",
        ),
        (
            json!({"name": "x", "dockerfile": "FROM sandboxd-build-cache:0123\n"}),
            "line 1: FROM sandboxd-build-cache:0123",
        ),
        (
            json!({"name": "x", "dockerfile": "FROM sha256:0123456789abcdef\n"}),
            "line 1: FROM sha256:0123456789abcdef",
        ),
        (
            json!({"name": "x", "dockerfile": "FROM base\nLABEL sandboxd.pool=mine\n"}),
            "sandboxd's own",
        ),
        (
            json!({"name": "x", "dockerfile": "FROM base\nENV A=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nENV A=$A$A$A$A$A$A$A$A\nENV A=$A$A$A$A$A$A$A$A\nENV A=$A$A$A$A$A$A$A$A\nENV A=$A$A$A$A$A$A$A$A\n"}),
            "longer than",
        ),
        (
            json!({"name": "x", "dockerfile": "x".repeat((1 << 20) + 1)}),
            "bytes",
        ),
    ] {
        let (status, error) = server.post("template.build", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        assert!(error.to_string().contains(wanted), "{wanted}: {error}");
    }
}

#[tokio::test]
async fn the_log_streams_each_line_while_the_build_runs() {
    use futures_util::StreamExt as _;
    let _images = Images;
    let server = TestServer::start().await;
    let build_id = build(
        &server,
        json!({"name": "slow", "dockerfile": "FROM base\nRUN echo first-line && sleep 2 && echo last-line\n"}),
    )
    .await;
    let response = server
        .client
        .get(format!(
            "{}/api/template.buildLogStream?buildId={build_id}",
            server.url
        ))
        .header("x-api-key", crate::harness::KEY)
        .send()
        .await
        .expect("stream");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"]
            .to_str()
            .unwrap_or_default(),
        "text/event-stream"
    );
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let mut first_seen = None;
    let mut last_seen = None;
    while let Some(Ok(chunk)) = tokio::time::timeout(Duration::from_secs(120), body.next())
        .await
        .expect("the stream goes on")
    {
        text.push_str(&String::from_utf8_lossy(&chunk));
        if first_seen.is_none() && text.contains(r#""line":"first-line""#) {
            first_seen = Some(Instant::now());
        }
        if last_seen.is_none() && text.contains(r#""line":"last-line""#) {
            last_seen = Some(Instant::now());
        }
        if text.contains("event: end") {
            break;
        }
    }
    let (first, last) = (
        first_seen.expect("first line"),
        last_seen.expect("last line"),
    );
    // The first line came while the step still ran (it sleeps 2 s before the last).
    assert!(last - first > Duration::from_millis(1500), "{text}");
    assert!(text.contains("\"status\":\"ready\""), "{text}");
    // Another organization's key is not let in.
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let refused = server
        .client
        .get(format!(
            "{}/api/template.buildLogStream?buildId={build_id}",
            server.url
        ))
        .header(
            "x-api-key",
            other["apiKey"]["secret"].as_str().unwrap_or_default(),
        )
        .send()
        .await
        .expect("answer");
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_build_cut_short_is_failed_and_its_container_removed() {
    use sandboxd_core::template_build::{BUILDING, TemplateBuild};
    let server = TestServer::start().await;
    // What a replica that stopped in the middle of a step leaves: a row still building
    // for longer than twice the time limit, and the step's container.
    let (_, current) = server.get("apiKey.current", &[]).await;
    let build_id = format!("cut{}", std::process::id());
    let mut build = TemplateBuild {
        build_id: build_id.clone(),
        template_id: format!("tpl{}", std::process::id()),
        organization_id: current["organizationId"]
            .as_str()
            .expect("organizationId")
            .to_owned(),
        project_id: server.project_id.clone(),
        name: "cut".into(),
        version: 0,
        status: BUILDING.into(),
        image: None,
        user: None,
        workdir: None,
        start: None,
        ready: None,
        cpu: None,
        memory_mb: None,
        isolation: None,
        error_step: None,
        error_message: None,
        created_at: sandboxd_service::now_ms() - 3 * 3_600_000,
        finished_at: None,
    };
    server
        .service
        .store()
        .insert_template_build(&mut build, "test", 10)
        .await
        .expect("the row");
    let label = format!("sandboxd.build={build_id}");
    let made = std::process::Command::new("docker")
        .args([
            "create",
            "--label",
            &label,
            "--label",
            &format!("sandboxd.buildInstance={}", server.instance()),
            "sandboxd-local/debian:bookworm",
            "true",
        ])
        .output()
        .expect("docker create");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    server
        .service
        .duties()
        .reap_once()
        .await
        .expect("a reaper pass");
    let (_, end) = server
        .get("template.buildLog", &[("buildId", &build_id)])
        .await;
    assert_eq!(end["status"], "error", "{end}");
    assert!(
        end["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cut short")),
        "{end}"
    );
    let left = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("label={label}")])
        .output()
        .expect("docker ps");
    assert!(left.stdout.is_empty(), "the build's container was left");
}

#[tokio::test]
async fn a_workdir_leaves_the_directories_above_it_as_they_were() {
    let _images = Images;
    // Images are kept no time: the collection removes the cache at once.
    let server = TestServer::start_with(|config| config.builds.keep_images_hours = 0).await;
    let id_of_build = build(
        &server,
        json!({"name": "tmpwork", "dockerfile": "FROM base\nWORKDIR /tmp/work/deeper\nCOPY a.txt ./\nUSER user\nWORKDIR /srv/named/deep\n", "files": {"a.txt": b64("a")}}),
    )
    .await;
    let (end, entries) = follow(&server, &id_of_build).await;
    assert_eq!(end["status"], "ready", "{end} {entries:?}");
    let sandbox = server.create(json!({"template": "tmpwork"})).await;
    // /tmp keeps its mode (sticky, writable by all) and its owner.
    assert_eq!(
        stdout(
            &server,
            &sandbox,
            "stat -c '%a %u' /tmp && cat /tmp/work/deeper/a.txt"
        )
        .await,
        "1777 0\na"
    );
    // A workdir made after `USER`: what was missing is the user's, what was there is
    // left as it was.
    assert_eq!(
        stdout(
            &server,
            &sandbox,
            "pwd; stat -c '%U %u' /srv /srv/named /srv/named/deep; touch mine && echo writable"
        )
        .await,
        "/srv/named/deep\nroot 0\nuser 1000\nuser 1000\nwritable"
    );
    // The cache's images go with a collection; the template keeps what it is made of.
    let cached = || {
        let out = std::process::Command::new("docker")
            .args([
                "images",
                "-q",
                "--filter",
                "reference=sandboxd-build-cache:*",
            ])
            .output()
            .expect("docker images");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert!(!cached().is_empty(), "the build left cached steps");
    let removed = server
        .service
        .duties()
        .collect_images_once()
        .await
        .expect("a collection");
    assert!(
        removed
            .iter()
            .any(|name| name.starts_with("sandboxd-build-cache:")),
        "{removed:?}"
    );
    assert_eq!(cached(), "", "cache images left after a collection");
    let again = server.create(json!({"template": "tmpwork"})).await;
    assert_eq!(
        stdout(&server, &again, "cat /tmp/work/deeper/a.txt").await,
        "a"
    );
}

/// A built template is warm from its first create: its new version counts as created
/// once, so a member of it is made as the build ends; the member runs in the template's
/// workdir, its start command runs on claim, and a removal of the template takes its
/// pool with it.
#[tokio::test]
async fn a_built_template_is_warm_from_its_first_create() {
    let _images = Images;
    let server = TestServer::start_with(|config| {
        config.warm_on_demand = sandboxd_server::config::WarmOnDemandConfig {
            window_secs: 120,
            ..Default::default()
        };
    })
    .await;
    let instance = server.instance().to_owned();
    let build_id = build(
        &server,
        json!({"name": "warm", "dockerfile": "FROM base\nWORKDIR /srv/w\nRUN echo made > /opt/x\nCMD [\"sh\", \"-c\", \"echo started > /tmp/started; sleep 600\"]\n"}),
    )
    .await;
    let (end, entries) = follow(&server, &build_id).await;
    assert_eq!(end["status"], "ready", "{end} {entries:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let key = loop {
        let ready = server.service.pools().ready();
        if let Some((key, _)) = ready.iter().find(|(key, n)| {
            **n == 1
                && key
                    .shape
                    .built
                    .as_ref()
                    .is_some_and(|b| b.build_id == build_id)
        }) {
            break key.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no member of the built template: {ready:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let members = crate::pools::pool_containers(&server, &instance).await;
    assert_eq!(members.len(), 1, "{members:?}");
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(
            r#"sandboxd_pool_ready{pool="built",server="local",network="isolated",image="built"} 1"#
        ),
        "the series names no template of a user's: {metrics}"
    );

    let sandbox = server.create(json!({"template": "warm"})).await;
    assert!(members.contains_key(id(&sandbox)), "served by the pool");
    assert_eq!(sandbox["template"], "warm");
    assert_eq!(
        stdout(&server, &sandbox, "pwd; cat /opt/x; touch mine && ls").await,
        "/srv/w\nmade\nmine"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let run = server.exec(&sandbox, "cat /tmp/started").await;
        if run["stdout"] == "started\n" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the start command never ran: {run}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Its workdir was made as root by the build: the image was prepared for its user
    // (as the member was made), and the preparation goes with the template.
    let image = format!("sandboxd-templates:{}", build_id.to_lowercase());
    let image_id = server
        .docker()
        .inspect_image(&image)
        .await
        .unwrap()
        .id
        .unwrap();
    let prepared = sandboxd_core::prepared_images::prepared_name(&image_id, "/srv/w", (1000, 1000));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server
        .service
        .sandboxes()
        .prepared_images()
        .contains(&prepared)
    {
        assert!(Instant::now() < deadline, "{prepared} was never made");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Removed: its pool goes, and no member holds its image.
    kill_and_remove(&server, &[&sandbox], "warm").await;
    assert!(
        !server.service.pools().ready().contains_key(&key),
        "its pool is gone"
    );
    assert!(
        !server
            .service
            .pools()
            .members()
            .iter()
            .any(|m| members.contains_key(m)),
    );
    // Gone, and so is what was prepared from it (which would keep its layers; the
    // build cache keeps its steps' images by their own names).
    let deadline = Instant::now() + Duration::from_secs(15);
    for left in [&image, &prepared] {
        while server.docker().inspect_image(left).await.is_ok() {
            assert!(Instant::now() < deadline, "{left} was left");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A template built here makes sandboxes on a remote server: its image is carried there
/// over the server's connection the first time (no registry), the sandbox runs there
/// with what the build made, and the template's removal removes the image there too.
#[tokio::test]
async fn a_built_template_s_image_is_carried_to_a_remote_server() {
    use crate::remote_host::{RemoteHost, remote_docker_host};
    use crate::remote_servers::{image_on, on_remote, register};
    struct RemoteImages;
    impl Drop for RemoteImages {
        fn drop(&mut self) {
            let _ = std::process::Command::new("bash")
                .args([
                    "-c",
                    &format!(
                        "docker -H {} images --format '{{{{.Repository}}}}:{{{{.Tag}}}}' --filter reference='sandboxd-templates:*' | xargs -r docker -H {} rmi >/dev/null 2>&1",
                        remote_docker_host(),
                        remote_docker_host()
                    ),
                ])
                .status();
        }
    }
    let _images = Images;
    let _remote_images = RemoteImages;
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "carried").await;
    let build_id = build(
        &server,
        json!({"name": "carried", "dockerfile": "FROM base\nRUN echo far-made > /tmp/made\n"}),
    )
    .await;
    let (end, entries) = follow(&server, &build_id).await;
    assert_eq!(end["status"], "ready", "{end} {entries:?}");
    let image = format!("sandboxd-templates:{}", build_id.to_lowercase());
    let remote = remote_docker_host();
    assert!(!image_on(Some(&remote), &image), "not there before");

    let far = server
        .create(json!({"template": "carried", "serverId": server_id}))
        .await;
    assert_eq!(far["serverId"], server_id.as_str());
    assert!(on_remote(far["containerId"].as_str().unwrap()));
    assert!(image_on(Some(&remote), &image), "carried");
    assert_eq!(stdout(&server, &far, "cat /tmp/made").await, "far-made");
    // The next one finds it there.
    let again = server
        .create(json!({"template": "carried", "serverId": server_id}))
        .await;
    assert_eq!(stdout(&server, &again, "cat /tmp/made").await, "far-made");

    kill_and_remove(&server, &[&far, &again], "carried").await;
    assert!(!image_on(Some(&remote), &image), "removed there too");
    assert!(!image_on(None, &image), "and here");
}
