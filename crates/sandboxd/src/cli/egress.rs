//! `sandboxd egress …`: what an `allowlist` sandbox may reach.

use clap::Subcommand;
use serde_json::{Value, json};

use super::client::{Client, Failure};

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
}

pub async fn egress(client: &Client, command: EgressCommand) -> Result<Value, Failure> {
    match command {
        EgressCommand::Ls { id } => client.get("sandbox.one", &[("sandboxId", &id)]).await,
        EgressCommand::Set { id, hosts } => {
            client
                .post(
                    "sandbox.setEgress",
                    &json!({"sandboxId": id, "allow": hosts}),
                )
                .await
        }
    }
}

/// What `egress` prints: the sandbox's list, one entry a line.
pub fn egress_text(sandbox: &Value) -> String {
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
