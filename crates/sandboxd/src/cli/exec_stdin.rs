//! `sandboxd exec -i`: the command reads this terminal's standard input. The streaming
//! exec socket carries no input, so the command runs as a background process with its
//! input open: what this side reads is written to it (`sandbox.processWrite`, closed at
//! end of file), its output followed from offsets (`sandbox.processOutput`: a reconnect
//! loses nothing; output written faster than it is read beyond the last MiB kept is
//! reported as lost), and its exit code taken when it ends. Ctrl-C, a timeout or a
//! failed write kills it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::client::{Client, Failure};
use super::exec::{ExecArgs, Outcome, command_line, environment};
use super::processes::read_output;

/// Bytes of input sent per write (the API takes up to 1 MiB).
const INPUT_CHUNK: usize = 256 * 1024;
/// How often output is asked for while none comes.
const POLL: Duration = Duration::from_millis(50);
/// How long past the command's time limit the server may take to answer.
const ANSWER_GRACE: Duration = Duration::from_secs(10);
/// The command's time limit when none is given (as `exec` without `-i`).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

pub async fn run(client: &Client, args: &ExecArgs, collect: bool) -> Result<Outcome, Failure> {
    let mut body = json!({"sandboxId": args.id, "cmd": command_line(&args.cmd)?, "stdin": true});
    if let Some(cwd) = &args.cwd {
        body["cwd"] = json!(cwd);
    }
    if !args.env.is_empty() {
        body["env"] = json!(environment(&args.env)?);
    }
    let started = client.post("sandbox.processStart", &body).await?;
    let process = started["processId"]
        .as_str()
        .ok_or_else(|| Failure::Unavailable("the server did not name the process".into()))?
        .to_owned();
    let mut input = Some(tokio::spawn(send_input(
        client.clone(),
        args.id.clone(),
        process.clone(),
    )));
    let deadline = Instant::now() + args.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let followed = tokio::select! {
        followed = follow(client, &args.id, &process, collect, deadline, &mut input) => followed,
        _ = tokio::signal::ctrl_c() => Err(Failure::Refused("interrupted".into())),
        // Each read is one request; a server that stops answering ends it all the same.
        _ = tokio::time::sleep_until((deadline + ANSWER_GRACE).into()) => Err(Failure::Unavailable(
            "the server stopped answering past the command's time limit".into(),
        )),
    };
    if let Some(input) = input {
        input.abort();
    }
    let mut outcome = match followed {
        Ok(outcome) => outcome,
        Err(failure) => {
            // Interrupted or failed: the command does not outlive this one.
            let _ = signal(client, &args.id, &process).await;
            return Err(failure);
        }
    };
    if outcome.timed_out {
        let _ = signal(client, &args.id, &process).await;
        outcome.exit_code = 124;
        return Ok(outcome);
    }
    let state = client
        .post(
            "sandbox.processWait",
            &json!({"sandboxId": args.id, "processId": process, "timeoutMs": 10_000}),
        )
        .await?;
    outcome.exit_code = state["exitCode"].as_i64().unwrap_or(1);
    Ok(outcome)
}

async fn signal(client: &Client, sandbox: &str, process: &str) -> Result<Value, Failure> {
    client
        .post(
            "sandbox.processSignal",
            &json!({"sandboxId": sandbox, "processId": process, "signal": "KILL"}),
        )
        .await
}

/// Copies this side's standard input to the process, then closes the process's.
async fn send_input(client: Client, sandbox: String, process: String) -> Result<(), Failure> {
    let mut stdin = tokio::io::stdin();
    let mut buffer = vec![0u8; INPUT_CHUNK];
    loop {
        let read = stdin.read(&mut buffer).await.map_err(|e| {
            Failure::Refused(format!("cannot read this side's standard input: {e}"))
        })?;
        let body = json!({
            "sandboxId": sandbox,
            "processId": process,
            "data": base64_simd::STANDARD.encode_to_string(&buffer[..read]),
            "encoding": "base64",
            "close": read == 0,
        });
        client.post("sandbox.processWrite", &body).await?;
        if read == 0 {
            return Ok(());
        }
    }
}

/// Reads both outputs from offset 0 until the process has ended and both are drained,
/// or the deadline passes (then `timed_out`).
async fn follow(
    client: &Client,
    sandbox: &str,
    process: &str,
    collect: bool,
    deadline: Instant,
    input: &mut Option<tokio::task::JoinHandle<Result<(), Failure>>>,
) -> Result<Outcome, Failure> {
    let mut outcome = Outcome::default();
    let mut offsets = [0u64, 0u64];
    let mut stdout = tokio::io::stdout();
    let mut stderr = tokio::io::stderr();
    loop {
        // Input that could not be given fails the command now, not at its timeout.
        if input
            .as_ref()
            .is_some_and(tokio::task::JoinHandle::is_finished)
            && let Some(done) = input.take()
        {
            match done.await {
                Ok(Ok(())) => {}
                Ok(Err(failure)) => return Err(failure),
                Err(_) => return Err(Failure::Unavailable("the input stopped".into())),
            }
        }
        let mut moved = false;
        let mut exited = true;
        for (index, stream) in ["stdout", "stderr"].into_iter().enumerate() {
            let page = read_output(client, sandbox, process, stream, offsets[index]).await?;
            moved |= page.end != offsets[index];
            offsets[index] = page.end;
            exited &= page.exited;
            let data = page.data;
            match (collect, index) {
                (true, 0) => outcome.stdout.push_str(&String::from_utf8_lossy(&data)),
                (true, _) => outcome.stderr.push_str(&String::from_utf8_lossy(&data)),
                (false, 0) => {
                    let _ = stdout.write_all(&data).await;
                    let _ = stdout.flush().await;
                }
                (false, _) => {
                    let _ = stderr.write_all(&data).await;
                    let _ = stderr.flush().await;
                }
            }
        }
        if exited && !moved {
            return Ok(outcome);
        }
        if Instant::now() >= deadline {
            outcome.timed_out = true;
            return Ok(outcome);
        }
        if !moved {
            tokio::time::sleep(POLL).await;
        }
    }
}
