//! `sandboxd shell SANDBOX_ID`: attaches this terminal to a shell in a sandbox, in raw
//! mode, over the server's terminal WebSocket. Window size changes follow; the remote
//! exit code becomes this command's.
//!
//! Raw mode with rustix, the WebSocket with tokio-tungstenite.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;
use futures_util::{SinkExt as _, StreamExt as _};
use rustix::termios::{OptionalActions, Termios, tcgetattr, tcgetwinsize, tcsetattr};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::cli::percent_encode;

/// Flags of `sandboxd shell`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  sandboxd shell $ID\n  sandboxd shell $ID --cmd python3")]
pub struct ShellArgs {
    /// The sandbox to open a shell in.
    sandbox_id: String,
    /// Run this command on the terminal instead of a shell.
    #[arg(long)]
    cmd: Option<String>,
    #[command(flatten)]
    target: crate::cli::TargetArgs,
}

/// Restores the terminal's settings when dropped.
struct RawMode(Option<Termios>);

impl RawMode {
    fn enter() -> Self {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Self(None);
        }
        let Ok(saved) = tcgetattr(&stdin) else {
            return Self(None);
        };
        let mut raw = saved.clone();
        raw.make_raw();
        match tcsetattr(&stdin, OptionalActions::Now, &raw) {
            Ok(()) => Self(Some(saved)),
            Err(_) => Self(None),
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, saved);
        }
    }
}

fn window_size() -> (u16, u16) {
    tcgetwinsize(std::io::stdout())
        .ok()
        .filter(|s| s.ws_col > 0 && s.ws_row > 0)
        .map_or((80, 24), |s| (s.ws_col, s.ws_row))
}

pub async fn run(args: ShellArgs) -> anyhow::Result<ExitCode> {
    let target = args.target.resolve()?;
    let (cols, rows) = window_size();
    let base = target.url.replacen("http", "ws", 1);
    let mut url = format!(
        "{base}/sandbox-pty?sandboxId={}&cols={cols}&rows={rows}",
        percent_encode(&args.sandbox_id)
    );
    if let Some(cmd) = &args.cmd {
        url.push_str(&format!("&cmd={}", percent_encode(cmd)));
    }
    let mut request = url.into_client_request()?;
    request
        .headers_mut()
        .insert("x-api-key", target.key.parse()?);
    let socket = match crate::cli::tls::websocket(request, &target.tls).await {
        Ok(socket) => socket,
        Err(error) if crate::cli::tls::untrusted(&error) => {
            bail!("{}", crate::cli::tls::untrusted_hint(&target.url))
        }
        Err(error) => {
            return Err(error).with_context(|| format!("cannot connect to {}", target.url));
        }
    };
    let (mut sink, mut stream) = socket.split();

    let raw = RawMode::enter();
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let mut resized =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut stdin_open = true;
    let code = loop {
        tokio::select! {
            read = stdin.read(&mut buf), if stdin_open => match read {
                Ok(0) | Err(_) => stdin_open = false,
                Ok(n) => sink.send(Message::Binary(buf[..n].to_vec().into())).await?,
            },
            _ = resized.recv() => {
                let (cols, rows) = window_size();
                sink.send(Message::Text(json!({"type": "resize", "cols": cols, "rows": rows}).to_string().into())).await?;
            }
            message = stream.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    stdout.write_all(&bytes).await?;
                    stdout.flush().await?;
                }
                Some(Ok(Message::Text(text))) => {
                    let value: Value = serde_json::from_str(&text).unwrap_or_default();
                    match value["type"].as_str() {
                        Some("exit") => break value["exitCode"].as_i64().unwrap_or(1),
                        Some("error") => {
                            drop(raw);
                            bail!("{}", value["message"].as_str().unwrap_or("terminal error"));
                        }
                        _ => {}
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    drop(raw);
                    bail!("the server closed the terminal: {}", frame.map(|f| f.reason.to_string()).unwrap_or_default());
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => bail!("connection lost"),
            }
        }
    };
    drop(raw);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
