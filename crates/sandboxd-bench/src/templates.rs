//! Templates users build: a build of one large copy whose file is streamed as a
//! context (`template.context`) against the same sent in the build's body; a first
//! build (a variable, a copy and two `RUN`s, each iteration's Dockerfile new to the
//! cache) against a rebuild of the same, served from the cache; how soon a line a `RUN` prints reaches a client following the log
//! (server-sent events), from the time the step wrote into the line itself to the time
//! it arrived (the sandbox and the benchmark share the host's clock); and create → first
//! output from the built template against the configured template it is built on,
//! interleaved, cold and from warm pools (the built template's kept for its version
//! from the end of its build).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use crate::child::ChildServer;
use crate::http::{Http, KEY};
use crate::report::{Row, Samples};

/// The built template the creates use.
const NAME: &str = "bench-built";

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

fn dockerfile(nonce: u128) -> String {
    format!(
        "FROM base\nENV BENCH_NONCE={nonce}\nCOPY tool.sh /opt/tool.sh\nRUN sh /opt/tool.sh > /opt/out\nRUN echo done\n"
    )
}

/// Starts a build; answers its id.
async fn build(api: &Http, name: &str, dockerfile: &str) -> anyhow::Result<String> {
    let files = json!({"tool.sh": base64_simd::STANDARD.encode_to_string("echo tool\n")});
    let started = api
        .post(
            "template.build",
            json!({"name": name, "dockerfile": dockerfile, "files": files}),
        )
        .await?;
    Ok(started["buildId"].as_str().context("buildId")?.to_owned())
}

/// Follows a build's log stream to its end; `on_entry` gets each entry as it arrives.
async fn follow(
    api: &Http,
    build_id: &str,
    mut on_entry: impl FnMut(&Value),
) -> anyhow::Result<Value> {
    let response = reqwest::Client::new()
        .get(format!("{}/api/template.buildLogStream", api.url))
        .header("x-api-key", KEY)
        .query(&[("buildId", build_id)])
        .send()
        .await?
        .error_for_status()?;
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    while let Some(chunk) = body.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let data: String = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            let value: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
            if event.contains("event: end") {
                if value["status"] != "ready" {
                    bail!("build {build_id} failed: {value}");
                }
                return Ok(value);
            }
            on_entry(&value);
        }
    }
    bail!("the log of build {build_id} ended early")
}

/// How long a build takes from its request to its end, as a client following it sees.
async fn timed_build(api: &Http, name: &str, dockerfile: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let id = build(api, name, dockerfile).await?;
    follow(api, &id, |_| {}).await?;
    Ok(started.elapsed())
}

/// The series of the pools kept for built templates' versions.
const BUILT_SERIES: &str =
    r#"sandboxd_pool_ready{pool="built",server="local",network="isolated",image="built"}"#;

/// Create → first output from a built template's pool (kept for its version from the
/// end of its build) against the configured template's pool, on `warm` (a server with
/// a configured pool of the base template and pools kept for demand), each claim once
/// both pools are full and nothing runs in the background.
async fn warm_creates(warm: &ChildServer, iterations: usize) -> anyhow::Result<[Samples; 2]> {
    let api = &warm.http;
    let id = build(api, "bench-warm", &dockerfile(now_ns())).await?;
    let end = follow(api, &id, |_| {}).await?;
    if end["status"] != "ready" {
        bail!("the build failed: {end}");
    }
    let mut create = [Samples::default(), Samples::default()];
    for _ in 0..iterations {
        warm.settle(crate::WARM_POOL).await?;
        warm.settle_series(BUILT_SERIES, 1).await?;
        let (built, took) = api
            .create_with_and_echo(json!({"template": "bench-warm"}))
            .await?;
        create[0].push(took);
        api.remove(&built).await?;
        warm.settle(crate::WARM_POOL).await?;
        warm.settle_series(BUILT_SERIES, 1).await?;
        let (configured, took) = api.create_and_echo().await?;
        create[1].push(took);
        api.remove(&configured).await?;
    }
    Ok(create)
}

/// The bytes of the file the context scenario copies (under `files`' 64 MiB, so that
/// both ways can carry it).
const COPIED_BYTES: usize = 48 << 20;

/// Bytes that do not repeat, new for each `seed`.
fn noise(len: usize, seed: u64) -> Vec<u8> {
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

/// A build of one `COPY` of `content`, from the request to the end of the build: sent
/// in `files` (base64 in the JSON body), or streamed first as a tar to
/// `template.context` and named by its id.
async fn timed_copy(api: &Http, content: Vec<u8>, streamed: bool) -> anyhow::Result<Duration> {
    let dockerfile = "FROM base\nCOPY big.bin /opt/big.bin\n";
    let started = Instant::now();
    let body = if streamed {
        let mut builder = tar::Builder::new(Vec::with_capacity(content.len() + 4096));
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, "big.bin", content.as_slice())?;
        let context: Value = reqwest::Client::new()
            .post(format!("{}/api/template.context", api.url))
            .header("x-api-key", KEY)
            .header("content-type", "application/x-tar")
            .body(builder.into_inner()?)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        json!({"name": "bench-copy", "dockerfile": dockerfile, "contextId": context["contextId"]})
    } else {
        let files = json!({"big.bin": base64_simd::STANDARD.encode_to_string(&content)});
        json!({"name": "bench-copy", "dockerfile": dockerfile, "files": files})
    };
    let started_build = api.post("template.build", body).await?;
    let id = started_build["buildId"].as_str().context("buildId")?;
    follow(api, id, |_| {}).await?;
    Ok(started.elapsed())
}

/// Removes every template of `api`'s server.
async fn remove_templates(api: &Http) {
    if let Ok(all) = api.get("template.all", &[]).await {
        for template in all.as_array().into_iter().flatten() {
            let _ = api
                .post(
                    "template.remove",
                    json!({"templateId": template["templateId"]}),
                )
                .await;
        }
    }
}

/// Runs the scenarios `iterations` times on `api` (a server with the agent) and `warm`
/// (one with warm pools).
pub async fn run(api: &Http, warm: &ChildServer, iterations: usize) -> anyhow::Result<Vec<Row>> {
    let mut first = Samples::default();
    let mut cached = Samples::default();
    let mut latency = Samples::default();
    let mut create = [Samples::default(), Samples::default()];
    let mut copy = [Samples::default(), Samples::default()];
    let outcome = async {
        for iteration in 0..iterations {
            // The same new file each way, in turns: never in the cache.
            for (way, streamed) in [(0, true), (1, false)] {
                let content = noise(COPIED_BYTES, now_ns() as u64);
                copy[way].push(timed_copy(api, content, streamed).await?);
            }
            let text = dockerfile(now_ns());
            first.push(timed_build(api, NAME, &text).await?);
            cached.push(timed_build(api, NAME, &text).await?);
            // A step that prints its own time five times, 200 ms apart.
            let printing = format!(
                "FROM base\nENV BENCH_NONCE={}\nRUN for i in 1 2 3 4 5; do date +%s%N; sleep 0.2; done\n",
                now_ns()
            );
            let id = build(api, &format!("bench-log-{iteration}"), &printing).await?;
            follow(api, &id, |entry| {
                if entry["stream"] == "stdout"
                    && let Some(printed) = entry["line"].as_str().and_then(|l| l.parse::<u128>().ok())
                {
                    let arrived = now_ns();
                    latency.push(Duration::from_nanos(
                        arrived.saturating_sub(printed).min(u128::from(u64::MAX)) as u64,
                    ));
                }
            })
            .await?;
            let (built, took) = api
                .create_with_and_echo(json!({"template": NAME}))
                .await?;
            create[0].push(took);
            let (configured, took) = api.create_and_echo().await?;
            create[1].push(took);
            for id in [&built, &configured] {
                api.remove(id).await?;
            }
        }
        anyhow::Ok(warm_creates(warm, iterations).await?)
    }
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    remove_templates(api).await;
    remove_templates(&warm.http).await;
    for repository in ["sandboxd-templates", "sandboxd-build-cache"] {
        let _ = std::process::Command::new("bash")
            .args([
                "-c",
                // By name: a step's image is the parent of the next one's, and removing
                // an id that still has children fails; a name goes in any order.
                &format!(
                    "docker images --format '{{{{.Repository}}}}:{{{{.Tag}}}}' --filter reference='{repository}:*' | xargs -r docker rmi >/dev/null 2>&1"
                ),
            ])
            .status();
    }
    let [warm_built, warm_configured] = outcome?;
    let [built, configured] = create;
    let [streamed, in_body] = copy;
    Ok(vec![
        Row::new(
            "a build of one COPY of 48 MiB, request → ready",
            vec![
                ("context streamed as a tar", streamed),
                ("files in the body, base64 (floor)", in_body),
            ],
        ),
        Row::new(
            "build of 3 steps",
            vec![
                ("served from the cache", cached),
                ("first build (floor)", first),
            ],
        ),
        Row::new(
            "a RUN's line, printed → at the client",
            vec![("server-sent events", latency)],
        ),
        Row::new(
            "create → first output, cold",
            vec![
                ("built template", built),
                ("configured template it is built on (floor)", configured),
            ],
        ),
        Row::new(
            "create → first output, warm",
            vec![
                ("built template's pool", warm_built),
                ("configured template's pool (floor)", warm_configured),
            ],
        ),
    ])
}
