//! The activity timeline (`--activity`): what noting costs a command (`exec true` on a
//! server keeping timelines against one keeping none), reading a long timeline
//! (`sandbox.activity` over 100,000 entries, against `sandbox.one` on the same server),
//! and recording a terminal that prints 100 MiB (against the same terminal unrecorded),
//! each pair interleaved.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures_util::StreamExt as _;
use sandboxd_core::activity::{ActivityEntry, ActivityRecord, CommandActivity};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::child::{ChildServer, Setup};
use crate::http::{Http, KEY};
use crate::report::{Row, Samples};

/// Entries of the long timeline.
const ENTRIES: u32 = 100_000;
/// What the terminal prints: 100 MiB.
const PRINT_100_MIB: &str = "head -c 104857600 /dev/zero | tr '\\0' x";

/// Runs the scenarios; each server's instance is noted in `instances` as it starts.
pub async fn run(
    binary: &std::path::Path,
    image: &str,
    iterations: usize,
    instances: &mut Vec<String>,
) -> anyhow::Result<Vec<Row>> {
    let mut start = async |env: Vec<(String, String)>| -> anyhow::Result<ChildServer> {
        let setup = Setup {
            agent: true,
            pool: 0,
            database: None,
            env,
        };
        let server = ChildServer::start(binary, image, setup).await?;
        instances.push(server.instance().to_owned());
        Ok(server)
    };
    // The long timeline is kept whole on the server that keeps timelines.
    let on = start(vec![
        ("SANDBOXD_ACTIVITY__MAX_ENTRIES".into(), "200000".into()),
        ("SANDBOXD_ACTIVITY__MAX_MB".into(), "1024".into()),
    ])
    .await?;
    let off = start(vec![("SANDBOXD_ACTIVITY__ENABLED".into(), "false".into())]).await?;
    let (on_box, _) = on.http.create_and_echo().await?;
    let (off_box, _) = off.http.create_and_echo().await?;

    let mut exec = [Samples::default(), Samples::default()];
    for _ in 0..iterations {
        for _ in 0..crate::REPEAT {
            exec[0].push(on.http.exec_true(&on_box).await?);
            exec[1].push(off.http.exec_true(&off_box).await?);
        }
    }

    seed(&on, &on_box).await?;
    let middle = on
        .http
        .get(
            "sandbox.activity",
            &[("sandboxId", &on_box), ("limit", "500")],
        )
        .await?["nextCursor"]
        .as_str()
        .context("a cursor")?
        .to_owned();
    let mut reads = [
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    ];
    for _ in 0..iterations {
        for _ in 0..crate::REPEAT {
            let queries: [&[(&str, &str)]; 3] = [
                &[("sandboxId", &on_box), ("latest", "true")],
                &[("sandboxId", &on_box), ("cursor", &middle)],
                &[("sandboxId", &on_box), ("kinds", "terminal")],
            ];
            for (samples, query) in reads.iter_mut().zip(queries) {
                let started = Instant::now();
                let page = on.http.get("sandbox.activity", query).await?;
                samples.push(started.elapsed());
                if page["entries"].as_array().is_none() {
                    bail!("no entries: {page}");
                }
            }
            reads[3].push(on.http.one(&on_box).await?);
        }
    }

    let mut pty = [Samples::default(), Samples::default()];
    for _ in 0..iterations.clamp(1, 3) {
        pty[0].push(print_on_a_terminal(&on.http, &on_box).await?);
        pty[1].push(print_on_a_terminal(&off.http, &off_box).await?);
    }
    for (server, id) in [(&on, &on_box), (&off, &off_box)] {
        server.http.remove(id).await?;
    }
    let [exec_on, exec_off] = exec;
    let [latest, cursor, narrowed, one] = reads;
    let [recorded, unrecorded] = pty;
    Ok(vec![
        Row::new(
            "exec true",
            vec![("timeline on", exec_on), ("timeline off", exec_off)],
        ),
        Row::new(
            "100,000 entries",
            vec![
                ("activity, newest 100", latest),
                ("activity, from a cursor", cursor),
                ("activity, a kind not there", narrowed),
                ("sandbox.one", one),
            ],
        ),
        Row::new(
            "PTY printing 100 MiB",
            vec![("recorded", recorded), ("not recorded", unrecorded)],
        ),
    ])
}

/// Writes `ENTRIES` command entries into the timeline of `sandbox_id`, straight into
/// the server's database (as its journal would, in batches).
async fn seed(server: &ChildServer, sandbox_id: &str) -> anyhow::Result<()> {
    let store = sandboxd_store::Store::open(server.data_dir()).await?;
    for batch in 0..ENTRIES / 1000 {
        let records: Vec<ActivityRecord> = (0..1000)
            .map(|n| {
                let n = batch * 1000 + n;
                ActivityRecord {
                    entry_id: format!("bench-{n}"),
                    sandbox_id: sandbox_id.to_owned(),
                    organization_id: String::new(),
                    position: String::new(),
                    at: i64::from(n),
                    entry: ActivityEntry::command(
                        "exec",
                        None,
                        CommandActivity {
                            command: format!("python3 step_{n}.py --input data/{n}.csv"),
                            exit_code: Some(i64::from(n % 3 == 0)),
                            duration_ms: Some(u64::from(n % 500)),
                            ..CommandActivity::default()
                        },
                    ),
                }
            })
            .collect();
        store.write_activity(&records).await?;
    }
    store.close().await;
    Ok(())
}

/// Opens a terminal running `PRINT_100_MIB` and reads it to its exit: how long it took.
async fn print_on_a_terminal(http: &Http, sandbox_id: &str) -> anyhow::Result<Duration> {
    let mut url = reqwest::Url::parse(&format!(
        "{}/sandbox-pty",
        http.url.replacen("http", "ws", 1)
    ))?;
    url.query_pairs_mut()
        .append_pair("sandboxId", sandbox_id)
        .append_pair("cmd", PRINT_100_MIB);
    let mut request = url.as_str().into_client_request()?;
    request.headers_mut().insert("x-api-key", KEY.parse()?);
    let started = Instant::now();
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await?;
    let mut printed = 0usize;
    loop {
        let message = tokio::time::timeout(Duration::from_secs(300), socket.next())
            .await
            .context("the terminal went quiet")?
            .context("the terminal closed")??;
        match message {
            Message::Binary(bytes) => printed += bytes.len(),
            Message::Text(text) if text.contains("\"exit\"") => break,
            Message::Text(_) => {}
            other => bail!("unexpected {other:?}"),
        }
    }
    if printed < 100 * 1024 * 1024 {
        bail!("the terminal printed {printed} bytes");
    }
    Ok(started.elapsed())
}
