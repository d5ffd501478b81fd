//! `sandboxd port …`: a sandbox's ports as preview URLs.
//!
//! `port expose|ls|rm`.

use clap::Subcommand;
use serde_json::{Value, json};

use super::client::{Client, Failure};
use super::table;

/// `sandboxd port …`.
#[derive(Debug, Subcommand)]
pub enum PortCommand {
    /// Expose a port of a sandbox and print its preview URL (private: a signed link
    /// that expires; --public: anyone with the URL).
    #[command(
        after_help = "Examples:\n  sandboxd port expose $ID 8000\n  sandboxd port expose $ID 3000 --public --ttl 8h"
    )]
    Expose {
        id: String,
        port: u16,
        /// Anyone with the URL may open it, without a key or link.
        #[arg(long)]
        public: bool,
        /// How long it stays exposed (e.g. 30m, 8h; default 1h, at most 7d).
        #[arg(long, value_parser = super::sandboxes::parse_duration)]
        ttl: Option<std::time::Duration>,
    },
    /// List a sandbox's exposed ports with their URLs.
    #[command(after_help = "Example:\n  sandboxd port ls $ID")]
    Ls { id: String },
    /// End a port's exposure: its links and public access stop at once.
    #[command(after_help = "Example:\n  sandboxd port rm $ID 8000")]
    Rm { id: String, port: u16 },
}

pub async fn port(client: &Client, command: PortCommand) -> Result<Value, Failure> {
    match command {
        PortCommand::Expose {
            id,
            port,
            public,
            ttl,
        } => {
            let mut body = json!({"sandboxId": id, "port": port, "public": public});
            if let Some(ttl) = ttl {
                body["ttlSeconds"] = json!(ttl.as_secs().max(1));
            }
            client.post("sandbox.exposePort", &body).await
        }
        PortCommand::Ls { id } => client.get("sandbox.ports", &[("sandboxId", &id)]).await,
        PortCommand::Rm { id, port } => {
            client
                .post(
                    "sandbox.unexposePort",
                    &json!({"sandboxId": id, "port": port}),
                )
                .await
        }
    }
}

/// What `port` prints: the URL of an exposed port, a table of them, or what was removed.
pub fn port_text(answer: &Value) -> String {
    if let Some(url) = answer["url"].as_str() {
        return format!("{url}\n");
    }
    if let Some(ports) = answer.as_array() {
        let rows: Vec<Vec<String>> = ports
            .iter()
            .map(|p| {
                vec![
                    p["port"].to_string(),
                    if p["public"].as_bool() == Some(true) {
                        "public".into()
                    } else {
                        "link".into()
                    },
                    p["expiresAt"].as_str().unwrap_or("-").to_owned(),
                    p["url"].as_str().unwrap_or("-").to_owned(),
                ]
            })
            .collect();
        return table::render(&["PORT", "ACCESS", "EXPIRES", "URL"], &rows);
    }
    match answer["removed"].as_bool() {
        Some(true) => format!("port {} unexposed\n", answer["port"]),
        _ => format!("port {} was not exposed\n", answer["port"]),
    }
}
