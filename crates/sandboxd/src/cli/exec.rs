//! `sandboxd exec ID -- CMD…`: runs a command over the streaming exec WebSocket, its
//! output written here as it comes; this command exits with the remote command's code
//! (124 when it timed out). Interrupting it (Ctrl-C) closes the socket, which kills the
//! remote command.

use std::collections::BTreeMap;

use clap::Args;
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio_tungstenite::tungstenite::Message;

use super::client::{Client, Failure, percent_encode};

/// Flags of `sandboxd exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The sandbox.
    pub id: String,
    /// Stop the command after this long (e.g. 30s, 5m; at most 10m) [default: 60s].
    #[arg(long, value_parser = super::sandboxes::parse_duration)]
    pub timeout: Option<std::time::Duration>,
    /// An environment variable for the command, KEY=VALUE (repeatable).
    #[arg(long = "env", short = 'e')]
    pub env: Vec<String>,
    /// The directory to run in [default: the sandbox's workdir].
    #[arg(long)]
    pub cwd: Option<String>,
    /// Start it in the background and print its process id (see `ps`, `logs`).
    #[arg(long, short, conflicts_with = "interactive")]
    pub detach: bool,
    /// Give the command this side's standard input (`cat data.csv | sandboxd exec -i …`).
    #[arg(long, short)]
    pub interactive: bool,
    /// The command and its arguments (after `--`); one argument is run as a shell line.
    #[arg(last = true, required = true)]
    pub cmd: Vec<String>,
}

/// What a command did, for `--json`.
#[derive(Debug, Default)]
pub struct Outcome {
    pub exit_code: i64,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

/// The command line the sandbox's shell runs: one argument as it is (a shell line),
/// several quoted so each stays one word.
pub fn command_line(cmd: &[String]) -> Result<String, Failure> {
    match cmd {
        [line] => Ok(line.clone()),
        words => shlex::try_join(words.iter().map(String::as_str))
            .map_err(|e| Failure::Refused(format!("cannot quote the command: {e}"))),
    }
}

pub fn environment(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| Failure::Refused(format!("--env {pair}: expected KEY=VALUE")))
        })
        .collect()
}

/// Runs the command; with `collect`, its output is kept for `--json` instead of
/// written as it comes.
pub async fn run(client: &Client, args: &ExecArgs, collect: bool) -> Result<Outcome, Failure> {
    let mut message = json!({"type": "exec", "cmd": command_line(&args.cmd)?});
    if let Some(timeout) = args.timeout {
        message["timeoutMs"] = json!(timeout.as_millis() as u64);
    }
    if let Some(cwd) = &args.cwd {
        message["cwd"] = json!(cwd);
    }
    if !args.env.is_empty() {
        message["env"] = json!(environment(&args.env)?);
    }
    let socket = client
        .websocket(&format!(
            "/sandbox-exec?sandboxId={}",
            percent_encode(&args.id)
        ))
        .await?;
    let (mut sink, mut stream) = socket.split();
    let mut outcome = Outcome::default();
    let mut stdout = tokio::io::stdout();
    let mut stderr = tokio::io::stderr();
    let mut sent = false;
    loop {
        let value = next_message(&mut stream).await?;
        match value["type"].as_str() {
            Some("ready") if !sent => {
                sink.send(Message::Text(message.to_string().into()))
                    .await
                    .map_err(|e| Failure::Unavailable(format!("cannot send the command: {e}")))?;
                sent = true;
            }
            Some(kind @ ("stdout" | "stderr")) => {
                let data = value["data"].as_str().unwrap_or_default();
                match (collect, kind) {
                    (true, "stdout") => outcome.stdout.push_str(data),
                    (true, _) => outcome.stderr.push_str(data),
                    (false, "stdout") => {
                        let _ = stdout.write_all(data.as_bytes()).await;
                        let _ = stdout.flush().await;
                    }
                    (false, _) => {
                        let _ = stderr.write_all(data.as_bytes()).await;
                        let _ = stderr.flush().await;
                    }
                }
            }
            Some("exit") => {
                outcome.exit_code = value["exitCode"].as_i64().unwrap_or(1);
                outcome.timed_out = value["timedOut"].as_bool().unwrap_or(false);
                let _ = sink.send(Message::Close(None)).await;
                return Ok(outcome);
            }
            Some("error") => {
                return Err(Failure::Refused(
                    value["message"]
                        .as_str()
                        .unwrap_or("the command failed")
                        .to_owned(),
                ));
            }
            _ => {}
        }
    }
}

/// The next JSON message of a session (`null` for one that is not JSON); the close or
/// the failure that ended it as a `Failure`.
pub(super) async fn next_message<S>(stream: &mut S) -> Result<Value, Failure>
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let Some(frame) = stream.next().await else {
            return Err(Failure::Unavailable("the connection was lost".into()));
        };
        let frame =
            frame.map_err(|e| Failure::Unavailable(format!("the connection failed: {e}")))?;
        match frame {
            Message::Text(text) => return Ok(serde_json::from_str(&text).unwrap_or_default()),
            Message::Close(close) => {
                return Err(closed(
                    close.map(|c| (u16::from(c.code), c.reason.to_string())),
                ));
            }
            _ => continue,
        }
    }
}

/// Why the server closed the socket, by its close code.
pub(super) fn closed(close: Option<(u16, String)>) -> Failure {
    match close {
        Some((4001, reason)) => Failure::Denied(format!(
            "the key was refused ({reason}): check --key / SANDBOXD_KEY, or run `sandboxd login`"
        )),
        Some((4003, reason)) => {
            Failure::NotFound(format!("no such sandbox for this key ({reason})"))
        }
        Some((code, reason)) => {
            Failure::Unavailable(format!("the server closed the session ({code}: {reason})"))
        }
        None => Failure::Unavailable("the server closed the session".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_argument_is_a_shell_line_and_several_are_quoted_words() {
        assert_eq!(
            command_line(&["echo $HOME | wc -c".into()]).unwrap(),
            "echo $HOME | wc -c"
        );
        assert_eq!(
            command_line(&["printf".into(), "%s\n".into(), "a b".into()]).unwrap(),
            "printf '%s\n' 'a b'"
        );
    }
}
