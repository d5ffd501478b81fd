//! `sandboxd egress …`: what an `allowlist` sandbox may reach, and what its
//! connections met.
//!
//! `egress ls|set|log`; `log --follow` polls the cursor.

use clap::Subcommand;
use serde_json::{Value, json};

use super::client::{Client, Failure};
use super::pages::{self, Log};

/// `sandboxd egress …`.
#[derive(Debug, Subcommand)]
pub enum EgressCommand {
    /// Print the hosts an `allowlist` sandbox may reach, one per line.
    #[command(after_help = "Example:\n  sandboxd egress ls $ID")]
    Ls { id: String },
    /// Replace the hosts an `allowlist` sandbox may reach (none: nothing leaves);
    /// new connections see the list within a second.
    #[command(
        after_help = "Examples:\n  sandboxd egress set $ID pypi.org '*.pythonhosted.org'\n  sandboxd egress set $ID api.example.com:8443"
    )]
    Set {
        id: String,
        /// A host name, a `*.` wildcard over one or more labels, either with `:port`
        /// (80 and 443 otherwise).
        hosts: Vec<String>,
    },
    /// Print what the sandbox's connections met, oldest first: time, decision,
    /// host:port, bytes out/in once a connection ended, and why one was refused.
    #[command(
        after_help = "Examples:\n  sandboxd egress log $ID\n  sandboxd egress log $ID --follow"
    )]
    Log {
        id: String,
        /// Keep printing new entries as they are written, until interrupted.
        #[arg(short, long)]
        follow: bool,
    },
    /// Ask for an `allowlist` sandbox to reach one more host; prints the request id.
    /// Someone holding egress:decide approves it (with another key).
    #[command(
        after_help = "Example:\n  sandboxd egress request $ID pypi.org --reason 'pip install requests'"
    )]
    Request {
        id: String,
        /// A host name or `*.` wildcard, with an optional `:port`.
        host: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// List egress requests waiting for a decision (with --all, decided ones too).
    #[command(
        after_help = "Examples:\n  sandboxd egress requests\n  sandboxd egress requests --all --sandbox $ID"
    )]
    Requests {
        /// Decided ones too (the latest 200).
        #[arg(long)]
        all: bool,
        /// Only this sandbox's.
        #[arg(long = "sandbox")]
        sandbox_id: Option<String>,
    },
    /// Approve a request: the host joins the running sandbox's list at once.
    Approve { request_id: String },
    /// Deny a request.
    Deny { request_id: String },
}

/// Runs an `egress` command: the answer to print, or `None` for `log`, which prints
/// as it reads (one JSON object a line with `json`).
pub async fn egress(
    client: &Client,
    command: EgressCommand,
    json: bool,
) -> Result<Option<Value>, Failure> {
    let answer = match command {
        EgressCommand::Log { id, follow } => {
            let log = Log {
                procedure: "sandbox.egressLog",
                query: vec![("sandboxId", &id), ("limit", "500")],
                line: entry_line,
            };
            return pages::print(client, log, None, follow, json)
                .await
                .map(|()| None);
        }
        EgressCommand::Request { id, host, reason } => {
            client
                .post(
                    "sandbox.requestEgress",
                    &json!({"sandboxId": id, "host": host, "reason": reason}),
                )
                .await
        }
        EgressCommand::Requests { all, sandbox_id } => {
            let mut query = vec![("status", if all { "all" } else { "pending" })];
            if let Some(id) = &sandbox_id {
                query.push(("sandboxId", id));
            }
            client.get("egress.requests", &query).await
        }
        EgressCommand::Approve { request_id } => decide(client, &request_id, true).await,
        EgressCommand::Deny { request_id } => decide(client, &request_id, false).await,
        EgressCommand::Ls { id } => client.get("sandbox.one", &[("sandboxId", &id)]).await,
        EgressCommand::Set { id, hosts } => {
            client
                .post(
                    "sandbox.setEgress",
                    &json!({"sandboxId": id, "allow": hosts}),
                )
                .await
        }
    };
    answer.map(Some)
}

async fn decide(client: &Client, request_id: &str, approve: bool) -> Result<Value, Failure> {
    client
        .post(
            "egress.decide",
            &json!({"requestId": request_id, "approve": approve}),
        )
        .await
}

/// What `egress` prints: the sandbox's list, one entry a line; a request (its id and
/// where it stands); requests, one a line.
pub fn egress_text(answer: &Value) -> String {
    if let Some(requests) = answer.as_array() {
        return requests.iter().map(request_line).collect();
    }
    if answer.get("requestId").is_some() {
        return request_line(answer);
    }
    let sandbox = answer;
    match sandbox["egress"]["allow"].as_array() {
        Some(allow) => allow
            .iter()
            .filter_map(Value::as_str)
            .map(|entry| format!("{entry}\n"))
            .collect(),
        None => format!(
            "network mode {}: no egress list\n",
            sandbox["networkMode"].as_str().unwrap_or("-")
        ),
    }
}

/// One entry as a line: `TIME DECISION HOST:PORT [OUT/IN bytes] [REASON]`.
pub fn entry_line(entry: &Value) -> String {
    let text = |field: &str| entry[field].as_str().unwrap_or("-").to_owned();
    let mut line = format!(
        "{} {} {}:{}",
        text("at"),
        text("decision"),
        text("host"),
        entry["port"]
    );
    if entry["decision"] == "allowed" {
        if entry["endedAt"].is_null() {
            line.push_str(" open");
        } else {
            line.push_str(&format!(
                " {}/{} bytes",
                entry["bytesOut"], entry["bytesIn"]
            ));
        }
    }
    if let Some(reason) = entry["reason"].as_str() {
        line.push_str(&format!(": {reason}"));
    }
    if let Some(unlogged) = entry["unlogged"].as_u64().filter(|n| *n > 0) {
        line.push_str(&format!(" ({unlogged} not logged before this)"));
    }
    line.push('\n');
    line
}

/// A request as a line: `REQUEST_ID STATUS SANDBOX HOST [(REASON)]`.
fn request_line(request: &Value) -> String {
    let text = |field: &str| request[field].as_str().unwrap_or("-").to_owned();
    let mut line = format!(
        "{} {} {} {}",
        text("requestId"),
        text("status"),
        text("sandboxId"),
        text("host")
    );
    if let Some(reason) = request["reason"].as_str() {
        line.push_str(&format!(" ({reason})"));
    }
    line.push('\n');
    line
}
