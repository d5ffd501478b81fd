//! `keys` and `members`: an organization's API keys and people, from a terminal.

use clap::Subcommand;
use serde_json::{Value, json};

use super::client::{Client, Failure};
use super::table;

/// `sandboxd keys …`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// List API keys (yours; every key of the organization for administrators).
    #[command(after_help = "Example:\n  sandboxd keys ls --json")]
    Ls,
    /// Create an API key and print it (shown this once).
    #[command(
        after_help = "Examples:\n  sandboxd keys create ci --scope service:create --scope service:read --expires-in 30d\n  \
        sandboxd keys create bot --user usr_…     (administrators: a key for a member)\n  \
        sandboxd keys create agent --e2b           (e2b_… as E2B's SDKs expect: E2B_API_KEY)"
    )]
    Create {
        /// A name to recognise it by.
        name: String,
        /// Whose key (default: yours).
        #[arg(long)]
        user: Option<String>,
        /// Narrow it to a permission (repeat for several); default: all the user holds.
        #[arg(long = "scope")]
        scopes: Vec<String>,
        /// It stops working this long after now (e.g. 12h, 30d).
        #[arg(long, value_parser = super::sandboxes::parse_duration)]
        expires_in: Option<std::time::Duration>,
        /// Write it in E2B's form (`e2b_` and hex), which E2B's SDKs check for; it works
        /// everywhere a key does.
        #[arg(long)]
        e2b: bool,
    },
    /// Revoke an API key: the next request with it is refused.
    #[command(after_help = "Example:\n  sandboxd keys revoke key_…")]
    Revoke { key_id: String },
}

/// `sandboxd members …`.
#[derive(Debug, Subcommand)]
pub enum MembersCommand {
    /// List the organization's members.
    #[command(after_help = "Example:\n  sandboxd members ls --json")]
    Ls,
    /// Add a member (administrators); make them a key with `keys create --user`.
    #[command(
        after_help = "Example:\n  sandboxd members add alice --permission service:create --project proj_…"
    )]
    Add {
        name: String,
        #[command(flatten)]
        grants: Grants,
    },
    /// Change a member's role, permissions or access lists (what is given replaces).
    #[command(after_help = "Example:\n  sandboxd members update usr_… --role admin")]
    Update {
        user_id: String,
        #[command(flatten)]
        grants: Grants,
    },
    /// Remove a member; their keys stop working at once.
    #[command(after_help = "Example:\n  sandboxd members rm usr_…")]
    Rm { user_id: String },
}

/// What a member holds.
#[derive(Debug, clap::Args)]
pub struct Grants {
    /// member, admin or owner.
    #[arg(long)]
    role: Option<String>,
    /// A granted permission (repeat for several), e.g. service:create.
    #[arg(long = "permission")]
    permissions: Vec<String>,
    /// A project they may use (repeat for several).
    #[arg(long = "project")]
    projects: Vec<String>,
    /// A sandbox they may use (repeat for several).
    #[arg(long = "sandbox")]
    sandboxes: Vec<String>,
    /// A remote server they may use (repeat for several).
    #[arg(long = "server")]
    servers: Vec<String>,
}

impl Grants {
    /// The grants given, as the API takes them; what was not given is left out.
    fn into_body(self, mut body: Value) -> Value {
        if let Some(role) = self.role {
            body["role"] = json!(role);
        }
        for (key, list) in [
            ("permissions", self.permissions),
            ("projectIds", self.projects),
            ("sandboxIds", self.sandboxes),
            ("serverIds", self.servers),
        ] {
            if !list.is_empty() {
                body[key] = json!(list);
            }
        }
        body
    }
}

pub async fn keys(client: &Client, command: KeysCommand) -> Result<Value, Failure> {
    match command {
        KeysCommand::Ls => client.get("apiKey.all", &[]).await,
        KeysCommand::Create {
            name,
            user,
            scopes,
            expires_in,
            e2b,
        } => {
            let mut body = json!({ "name": name });
            if e2b {
                body["format"] = json!("e2b");
            }
            if let Some(user) = user {
                body["userId"] = json!(user);
            }
            if !scopes.is_empty() {
                body["scopes"] = json!(scopes);
            }
            if let Some(expires_in) = expires_in {
                body["expiresInMs"] = json!(expires_in.as_millis() as u64);
            }
            client.post("apiKey.create", &body).await
        }
        KeysCommand::Revoke { key_id } => {
            client
                .post("apiKey.revoke", &json!({ "keyId": key_id }))
                .await
        }
    }
}

pub async fn members(client: &Client, command: MembersCommand) -> Result<Value, Failure> {
    match command {
        MembersCommand::Ls => client.get("member.all", &[]).await,
        MembersCommand::Add { name, grants } => {
            let body = grants.into_body(json!({ "name": name }));
            client.post("member.create", &body).await
        }
        MembersCommand::Update { user_id, grants } => {
            let body = grants.into_body(json!({ "userId": user_id }));
            client.post("member.update", &body).await
        }
        MembersCommand::Rm { user_id } => {
            client
                .post("member.remove", &json!({ "userId": user_id }))
                .await?;
            Ok(json!({ "userId": user_id, "removed": true }))
        }
    }
}

/// Keys as a table; a created key as its secret (the only line on standard output, so
/// `KEY=$(sandboxd keys create ci)` keeps it).
pub fn keys_text(value: &Value) -> String {
    if let Some(secret) = value["secret"].as_str() {
        return format!("{secret}\n");
    }
    let rows = |v: &Value| -> Vec<Value> {
        match v {
            Value::Array(items) => items.clone(),
            single => vec![single.clone()],
        }
    };
    let rows: Vec<Vec<String>> = rows(value)
        .iter()
        .map(|k| {
            let state = if !k["revokedAt"].is_null() {
                "revoked"
            } else {
                "active"
            };
            vec![
                table::cell(&k["keyId"]),
                table::cell(&k["name"]),
                format!("{}…", table::cell(&k["prefix"])),
                table::cell(&k["userId"]),
                k["scopes"].as_array().map_or_else(
                    || "all".into(),
                    |s| {
                        s.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(",")
                    },
                ),
                table::cell(&k["expiresAt"]),
                state.into(),
            ]
        })
        .collect();
    table::render(
        &["ID", "NAME", "PREFIX", "USER", "SCOPES", "EXPIRES", "STATE"],
        &rows,
    )
}

/// Members as a table.
pub fn members_text(value: &Value) -> String {
    if value["removed"].as_bool() == Some(true) {
        return format!("{} removed\n", table::cell(&value["userId"]));
    }
    let items = match value {
        Value::Array(items) => items.clone(),
        single => vec![single.clone()],
    };
    let join = |v: &Value| {
        v.as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "-".into())
    };
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|m| {
            vec![
                table::cell(&m["userId"]),
                table::cell(&m["name"]),
                table::cell(&m["role"]),
                join(&m["permissions"]),
                join(&m["projectIds"]),
            ]
        })
        .collect();
    table::render(&["ID", "NAME", "ROLE", "PERMISSIONS", "PROJECTS"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_given_grants_are_sent() {
        let grants = Grants {
            role: None,
            permissions: vec!["service:create".into()],
            projects: vec![],
            sandboxes: vec!["sb_1".into()],
            servers: vec![],
        };
        let body = grants.into_body(json!({"name": "alice"}));
        assert_eq!(
            body,
            json!({"name": "alice", "permissions": ["service:create"], "sandboxIds": ["sb_1"]})
        );
    }

    #[test]
    fn a_created_key_prints_only_its_secret() {
        let created = json!({"key": {"keyId": "key_1"}, "secret": "sbx_s3cret"});
        assert_eq!(keys_text(&created), "sbx_s3cret\n");
        let listed = json!([{"keyId": "key_1", "name": "ci", "prefix": "sbx_ab", "userId": "usr_1",
            "scopes": ["sandbox:read"], "expiresAt": null, "revokedAt": "2026-01-01T00:00:00.000Z"}]);
        let text = keys_text(&listed);
        assert!(text.contains("sbx_ab…"), "{text}");
        assert!(text.contains("sandbox:read"), "{text}");
        assert!(text.lines().nth(1).unwrap_or_default().ends_with("revoked"));
    }
}
