//! `sandboxd port-forward ID PORT[:LOCAL]`: a local port that reaches a port inside a
//! sandbox. It listens on `127.0.0.1:LOCAL` (default: the same number; 0 picks a free
//! one), and carries each connection it accepts to `127.0.0.1:PORT` inside the sandbox
//! over its own `/sandbox-port` WebSocket, until interrupted.

use std::sync::Arc;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;

use super::client::{Client, Failure, percent_encode};

/// `PORT[:LOCAL]`: the sandbox's port and the local one.
pub fn parse_ports(spec: &str) -> Result<(u16, u16), String> {
    let number = |text: &str, zero: bool| {
        text.parse::<u16>()
            .ok()
            .filter(|n| zero || *n > 0)
            .ok_or_else(|| format!("{text:?} is not a port (1-65535)"))
    };
    match spec.split_once(':') {
        Some((remote, local)) => Ok((number(remote, false)?, number(local, true)?)),
        None => {
            let port = number(spec, false)?;
            Ok((port, port))
        }
    }
}

/// Listens and forwards until interrupted.
pub async fn forward(client: &Client, id: &str, remote: u16, local: u16) -> Result<(), Failure> {
    // A sandbox that is not there fails here, not at the first connection.
    client.get("sandbox.one", &[("sandboxId", id)]).await?;
    let listener = TcpListener::bind(("127.0.0.1", local))
        .await
        .map_err(|e| Failure::Refused(format!("cannot listen on 127.0.0.1:{local}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::Refused(format!("cannot listen: {e}")))?;
    eprintln!("Forwarding from {bound} to port {remote} of {id} (Ctrl-C stops)");
    let client = Arc::new(client.clone());
    loop {
        let (connection, _) = tokio::select! {
            accepted = listener.accept() => accepted
                .map_err(|e| Failure::Unavailable(format!("cannot accept: {e}")))?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let (client, id) = (client.clone(), id.to_owned());
        tokio::spawn(async move {
            if let Err(failure) = carry(&client, &id, remote, connection).await {
                eprintln!("port {remote}: {failure}");
            }
        });
    }
}

/// One local connection, carried to the sandbox's port and back.
async fn carry(client: &Client, id: &str, port: u16, mut local: TcpStream) -> Result<(), Failure> {
    let socket = client
        .websocket(&format!(
            "/sandbox-port?sandboxId={}&port={port}",
            percent_encode(id)
        ))
        .await?;
    let (mut sink, mut stream) = socket.split();
    // The port accepted, or why not.
    loop {
        match stream.next().await {
            Some(Ok(Message::Text(text))) => {
                let value: Value = serde_json::from_str(&text).unwrap_or_default();
                match value["type"].as_str() {
                    Some("ready") => break,
                    Some("error") => {
                        return Err(Failure::Unavailable(
                            value["message"].as_str().unwrap_or("refused").to_owned(),
                        ));
                    }
                    _ => {}
                }
            }
            Some(Ok(Message::Close(close))) => {
                return Err(super::exec::closed(
                    close.map(|c| (u16::from(c.code), c.reason.to_string())),
                ));
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                return Err(Failure::Unavailable(format!("the connection failed: {e}")));
            }
            None => return Err(Failure::Unavailable("the connection was lost".into())),
        }
    }
    let (mut from_local, mut to_local) = local.split();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            read = from_local.read(&mut buffer) => match read {
                Ok(0) | Err(_) => {
                    let _ = sink.send(Message::Close(None)).await;
                    return Ok(());
                }
                Ok(n) => {
                    let chunk = bytes::Bytes::copy_from_slice(&buffer[..n]);
                    if sink.send(Message::Binary(chunk)).await.is_err() {
                        return Ok(());
                    }
                }
            },
            incoming = stream.next() => match incoming {
                Some(Ok(Message::Binary(bytes))) => {
                    if to_local.write_all(&bytes).await.is_err() {
                        let _ = sink.send(Message::Close(None)).await;
                        return Ok(());
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                    let _ = to_local.shutdown().await;
                    return Ok(());
                }
                Some(Ok(_)) => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandboxs_port_then_the_local_one() {
        assert_eq!(parse_ports("8000"), Ok((8000, 8000)));
        assert_eq!(parse_ports("8000:9000"), Ok((8000, 9000)));
        assert_eq!(parse_ports("8000:0"), Ok((8000, 0)));
        for bad in ["0", "x", "8000:", ":80", "70000", "80:70000"] {
            assert!(parse_ports(bad).is_err(), "{bad}");
        }
    }
}
