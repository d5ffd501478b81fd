//! The checks of a client: the server answers, the key works, what it may do.
//!
//! What the key may do comes from `apiKey.current`.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::report::Check;
use crate::cli::{Client, Failure, TargetArgs};

/// How long the server may take to answer one check.
const ANSWER: Duration = Duration::from_secs(10);

pub async fn checks(target: &TargetArgs) -> Vec<Check> {
    let target = match target.resolve() {
        Ok(target) => target,
        Err(error) => {
            return vec![Check::fail(
                "client",
                format!("{error:#}"),
                "pass --url and --key (or SANDBOXD_URL, SANDBOXD_KEY, SANDBOXD_CA_CERT), or \
                 run `sandboxd login`",
            )];
        }
    };
    let client = match Client::new(target) {
        Ok(client) => client,
        Err(error) => {
            return vec![Check::fail(
                "client",
                format!("{error:#}"),
                "check the CA file",
            )];
        }
    };
    let mut checks = vec![];
    let started = Instant::now();
    match bounded(client.health()).await {
        Ok(health) => checks.push(server(&health, started.elapsed(), &client.target.url)),
        Err(failure) => {
            checks.push(Check::fail(
                "server",
                failure.message().to_owned(),
                "start it with `sandboxd serve`, or point --url / SANDBOXD_URL at yours",
            ));
            return checks;
        }
    }
    match bounded(client.get("apiKey.current", &[])).await {
        Ok(current) => checks.extend(key(&current)),
        Err(failure) => checks.push(Check::fail(
            "key",
            failure.message().to_owned(),
            "the key may be revoked, expired or mistyped: have an administrator make a new \
             one (`sandboxd keys create`), then `sandboxd login --key …`",
        )),
    }
    checks
}

async fn bounded(
    call: impl std::future::Future<Output = Result<Value, Failure>>,
) -> Result<Value, Failure> {
    tokio::time::timeout(ANSWER, call)
        .await
        .unwrap_or_else(|_| {
            Err(Failure::Unavailable(format!(
                "no answer within {}s",
                ANSWER.as_secs()
            )))
        })
}

fn server(health: &Value, took: Duration, url: &str) -> Check {
    let version = health["version"].as_str().unwrap_or("?");
    let path = health["execPath"].as_str().unwrap_or("?");
    let detail = format!(
        "sandboxd {version} at {url} answered in {} ms (commands through the {path})",
        took.as_millis()
    );
    if version == env!("CARGO_PKG_VERSION") {
        Check::pass("server", detail)
    } else {
        Check::warn(
            "server",
            format!("{detail}; this client is {}", env!("CARGO_PKG_VERSION")),
            "use a client of the server's version for every command to be understood",
        )
    }
}

/// The key and what it may do, from `apiKey.current`.
fn key(current: &Value) -> Vec<Check> {
    let key = &current["key"];
    let role = current["role"].as_str().unwrap_or("?");
    let expiry = key["expiresAt"]
        .as_str()
        .map_or_else(|| "no expiry".to_owned(), |at| format!("expires {at}"));
    let permissions = current["permissions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let scopes = match key["scopes"].as_array() {
        None => format!("unscoped: {permissions}"),
        Some(_) => permissions,
    };
    vec![
        Check::pass(
            "key",
            format!(
                "{} ({}), role {role}, {expiry}",
                key["name"].as_str().unwrap_or("?"),
                key["keyId"].as_str().unwrap_or("?")
            ),
        ),
        Check::pass("scopes", scopes),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::doctor::report::Outcome;

    #[test]
    fn the_key_and_what_it_may_do_are_named() {
        let current = json!({
            "key": {"keyId": "key_b", "name": "owner", "scopes": null,
                    "expiresAt": "2027-01-01T00:00:00.000Z"},
            "role": "owner",
            "permissions": ["service:create", "service:read"],
        });
        let checks = key(&current);
        assert_eq!(
            checks[0].detail,
            "owner (key_b), role owner, expires 2027-01-01T00:00:00.000Z"
        );
        assert_eq!(checks[1].detail, "unscoped: service:create, service:read");
        let mut scoped = current.clone();
        scoped["key"]["scopes"] = json!(["service:read"]);
        scoped["permissions"] = json!(["service:read"]);
        assert_eq!(key(&scoped)[1].detail, "service:read");
        assert!(checks.iter().all(|c| c.outcome == Outcome::Pass));
    }
}
