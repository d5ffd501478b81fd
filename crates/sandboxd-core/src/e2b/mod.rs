//! E2B's control plane as sandboxd serves it: the wire format E2B's SDKs send and read
//! (`templateID`, `sandboxID`, timeouts in seconds, metadata), and its mapping onto
//! sandboxd's own requests and records; the in-sandbox daemon's Connect protocol
//! (`connect`), processes (`process`) and files (`filesystem`). Pure: the routes under
//! `/e2b` call it.
//!
//! The control plane's types: `NewSandbox`, `SandboxAnswer` (with the daemon's access
//! token), `SandboxDetail`, `ErrorAnswer`. `create_request`: the template, metadata as
//! labels, variables, internet unless refused, a fixed timeout of 1 s to 24 h. `detail`
//! and `state_of`: a killed or failed sandbox has no state, so it is not found.
//! `past_its_end`, `metadata_filter`. The lifecycle is in `lifecycle`, the daemon's
//! watchers in `watch`, signed URLs in `signed`, hosts in `host`, ports on the domain in `ports`, the code interpreter in
//! `interpreter`.

pub mod connect;
pub mod filesystem;
pub mod host;
pub mod interpreter;
pub mod lifecycle;
pub mod network;
pub mod ports;
pub mod process;
pub mod signed;
pub mod tags;
pub mod templates;
pub mod watch;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::api::CreateSandboxRequest;
use crate::error::{Invalid, Issues};
use crate::model::{NetworkMode, Sandbox, SandboxStatus};

/// The envd version sandboxd reports: the SDK turns features on by it.
pub const ENVD_VERSION: &str = "0.6.4";
/// The `clientID` of every sandbox (E2B's cluster client; one here).
pub const CLIENT_ID: &str = "sandboxd";
/// The timeout of a sandbox whose create names none (E2B's default), in seconds.
pub const DEFAULT_TIMEOUT_SECS: i64 = 300;

/// Body of `POST /sandboxes` and `POST /v2/sandboxes`; other fields are ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSandbox {
    #[serde(rename = "templateID")]
    pub template_id: String,
    /// Seconds.
    pub timeout: Option<i64>,
    pub metadata: Option<BTreeMap<String, String>>,
    pub env_vars: Option<BTreeMap<String, String>>,
    pub auto_pause: Option<bool>,
    #[serde(rename = "allow_internet_access")]
    pub allow_internet_access: Option<bool>,
    /// E2B's network settings (`network::egress_of` says how they are taken).
    pub network: Option<network::NetworkSettings>,
}

/// Body of `POST /sandboxes/{id}/timeout`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TimeoutBody {
    /// Seconds from now.
    pub timeout: i64,
}

/// Body of `POST /sandboxes/{id}/connect` (and `/v2/…`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConnectBody {
    /// Seconds from now; a connect never shortens a sandbox's life.
    pub timeout: Option<i64>,
}

/// What names a sandbox in every answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SandboxIds {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
}

/// A sandbox as create and connect answer it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SandboxAnswer {
    #[serde(flatten)]
    pub ids: SandboxIds,
    #[serde(rename = "envdVersion")]
    pub envd_version: String,
    /// What the in-sandbox daemon's calls carry as `X-Access-Token`.
    #[serde(rename = "envdAccessToken", skip_serializing_if = "Option::is_none")]
    pub envd_access_token: Option<String>,
    /// What calls to the sandbox's other ports carry as `E2B-Traffic-Access-Token`
    /// (the code interpreter's SDK sends only this one on some calls): the same token.
    #[serde(rename = "trafficAccessToken", skip_serializing_if = "Option::is_none")]
    pub traffic_access_token: Option<String>,
    /// The server's E2B domain (`e2b_domain`): the SDK reaches the sandbox at
    /// `<port>-<id>.<domain>`; `null` when it has none (the SDK uses its own settings).
    pub domain: Option<String>,
}

/// A sandbox as `GET /sandboxes/{id}` and the listings show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SandboxDetail {
    #[serde(flatten)]
    pub ids: SandboxIds,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339: when it is paused or killed unless something extends it.
    pub end_at: String,
    pub cpu_count: i64,
    #[serde(rename = "memoryMB")]
    pub memory_mb: i64,
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: i64,
    /// `running` or `paused`.
    pub state: String,
    pub envd_version: String,
    pub metadata: BTreeMap<String, String>,
    pub domain: Option<String>,
}

/// An error as E2B's SDKs read it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ErrorAnswer {
    pub code: u16,
    pub message: String,
}

/// The template a sandbox of sandboxd's was made from, as E2B names it.
pub fn template_of(sandbox: &Sandbox) -> String {
    sandbox
        .template
        .clone()
        .unwrap_or_else(|| sandbox.image.clone())
}

/// The state E2B shows of a sandbox; `None` for one that is gone (killed, failed),
/// which E2B reports as not found.
pub fn state_of(status: SandboxStatus) -> Option<&'static str> {
    match status {
        SandboxStatus::Running | SandboxStatus::Creating => Some("running"),
        SandboxStatus::Paused => Some("paused"),
        _ => None,
    }
}

/// The shortest timeout E2B's API takes here (sandboxd's own starts at 10 s).
pub const MIN_TIMEOUT_MS: i64 = 1000;

/// A timeout in seconds as milliseconds, 1 s to 24 h.
pub fn timeout_ms(field: &str, seconds: i64) -> Result<i64, Invalid> {
    let ms = seconds.saturating_mul(1000);
    if !(MIN_TIMEOUT_MS..=crate::limits::MAX_TIMEOUT_MS).contains(&ms) {
        return Err(Invalid::one(
            field,
            "must be between 1 and 86400 seconds (24 h)",
        ));
    }
    Ok(ms)
}

/// Whether a sandbox's fixed end has passed: E2B shows it as gone at once, whenever
/// the reaper gets to it.
pub fn past_its_end(sandbox: &Sandbox, now_ms: i64) -> bool {
    sandbox.fixed_timeout
        && sandbox.status == SandboxStatus::Running
        && sandbox.expires_at.is_some_and(|end| end <= now_ms)
}

/// The sandboxd create of an E2B create, in `environment_id`: the template by name,
/// metadata as labels, variables as `KEY=value` lines, internet access unless refused
/// (E2B's default) or narrowed by `network` to a list of hosts, a fixed timeout (E2B's sandboxes end at their end, whatever they
/// do). The timeout asked for is second in the answer: sandboxd's create takes 10 s
/// at least, so a shorter one is set once the create is checked.
pub fn create_request(
    new: NewSandbox,
    environment_id: String,
) -> Result<(CreateSandboxRequest, i64), Invalid> {
    let mut issues = Issues::default();
    if new.template_id.is_empty() {
        issues.push("templateID", "is required");
    }
    let timeout_ms = match timeout_ms("timeout", new.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS)) {
        Ok(ms) => Some(ms),
        Err(invalid) => {
            for issue in invalid.issues {
                issues.push(issue.path, issue.message);
            }
            None
        }
    };
    let env_vars = new.env_vars.map(|vars| {
        vars.iter()
            .map(|(key, value)| {
                if key.is_empty() || key.contains(['=', '\n', '\0']) || value.contains(['\n', '\0'])
                {
                    issues.push(
                        "envVars",
                        "names must be non-empty without `=`, names and values on one line",
                    );
                }
                format!("{key}={value}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    let egress = match network::egress_of(new.allow_internet_access, new.network.as_ref()) {
        Ok(egress) => egress,
        Err(invalid) => {
            for issue in invalid.issues {
                issues.push(issue.path, issue.message);
            }
            network::Egress {
                mode: NetworkMode::Isolated,
                allow: Vec::new(),
            }
        }
    };
    let request = CreateSandboxRequest {
        environment_id,
        template: Some(new.template_id),
        timeout_ms: timeout_ms.map(|ms| ms.max(crate::limits::MIN_TIMEOUT_MS)),
        network_mode: Some(egress.mode),
        egress: (egress.mode == NetworkMode::Allowlist).then(|| crate::api::EgressRequest {
            allow: egress.allow,
            credentials: Vec::new(),
        }),
        env_vars: env_vars.filter(|text| !text.is_empty()),
        labels: new.metadata,
        auto_pause: new.auto_pause.map(crate::model::AutoPause::Flag),
        fixed_timeout: Some(true),
        ..Default::default()
    };
    issues.finish((request, timeout_ms.unwrap_or_default()))
}

fn ids(sandbox: &Sandbox) -> SandboxIds {
    SandboxIds {
        template_id: template_of(sandbox),
        sandbox_id: sandbox.sandbox_id.clone(),
        client_id: CLIENT_ID.to_owned(),
    }
}

/// The create and connect answer of a sandbox; `domain` is the server's E2B domain,
/// if it has one (the SDK then reaches the sandbox at `<port>-<id>.<domain>`).
pub fn answer(sandbox: &Sandbox, envd_access_token: String, domain: Option<&str>) -> SandboxAnswer {
    SandboxAnswer {
        ids: ids(sandbox),
        envd_version: ENVD_VERSION.to_owned(),
        traffic_access_token: Some(envd_access_token.clone()),
        envd_access_token: Some(envd_access_token),
        domain: domain.map(str::to_owned),
    }
}

/// The detail of a sandbox E2B may see (`state_of` gives a state);
/// `format_time` renders epoch milliseconds as RFC 3339.
pub fn detail(
    sandbox: &Sandbox,
    format_time: impl Fn(i64) -> String,
    domain: Option<&str>,
) -> Option<SandboxDetail> {
    let state = state_of(sandbox.status)?;
    let end = sandbox
        .expires_at
        .unwrap_or(sandbox.created_at + sandbox.timeout_ms);
    Some(SandboxDetail {
        ids: ids(sandbox),
        started_at: format_time(sandbox.created_at),
        end_at: format_time(end),
        cpu_count: (sandbox.cpu.ceil() as i64).max(1),
        memory_mb: sandbox.memory_mb,
        // The sandbox's own files are not capped apart from the engine's storage.
        disk_size_mb: 0,
        state: state.to_owned(),
        envd_version: ENVD_VERSION.to_owned(),
        metadata: sandbox.labels.clone(),
        domain: domain.map(str::to_owned),
    })
}

/// The most sandboxes a listing page holds, and its default size.
pub const MAX_PAGE: usize = 100;

/// The order of a listing: E2B's `order`, `desc` (newest first, the default) or `asc`.
pub fn oldest_first(order: Option<&str>) -> Result<bool, Invalid> {
    match order {
        None | Some("desc") => Ok(false),
        Some("asc") => Ok(true),
        Some(_) => Err(Invalid::one("order", "must be asc or desc")),
    }
}

/// One page of a listing of sandboxes, newest first (oldest first when
/// `oldest_first`), then by id, after the sandbox a `next_token` names; the token of
/// the page after it, when there is one. A token is `<made ms>_<sandbox id>` of the
/// last sandbox of a page, so a page is the same whatever was made or killed since.
pub fn page<'a>(
    mut sandboxes: Vec<&'a Sandbox>,
    limit: Option<usize>,
    next_token: Option<&str>,
    oldest_first: bool,
) -> Result<(Vec<&'a Sandbox>, Option<String>), Invalid> {
    let limit = limit.unwrap_or(MAX_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(Invalid::one(
            "limit",
            format!("must be between 1 and {MAX_PAGE}"),
        ));
    }
    let after = match next_token.filter(|token| !token.is_empty()) {
        None => None,
        Some(token) => {
            let (made, id) = token
                .split_once('_')
                .and_then(|(made, id)| Some((made.parse::<i64>().ok()?, id)))
                .ok_or_else(|| Invalid::one("nextToken", "is not a token of this listing"))?;
            Some((made, id.to_owned()))
        }
    };
    sandboxes.sort_by(|a, b| (b.created_at, &b.sandbox_id).cmp(&(a.created_at, &a.sandbox_id)));
    if oldest_first {
        sandboxes.reverse();
    }
    let rest: Vec<&'a Sandbox> = sandboxes
        .into_iter()
        .filter(|s| {
            after.as_ref().is_none_or(|(made, id)| {
                let key = (s.created_at, &s.sandbox_id);
                if oldest_first {
                    key > (*made, id)
                } else {
                    key < (*made, id)
                }
            })
        })
        .collect();
    let more = rest.len() > limit;
    let page: Vec<&'a Sandbox> = rest.into_iter().take(limit).collect();
    let token = more
        .then(|| {
            page.last()
                .map(|s| format!("{}_{}", s.created_at, s.sandbox_id))
        })
        .flatten();
    Ok((page, token))
}

/// Whether a sandbox's labels hold every `key=value` of `wanted`.
pub fn has_metadata(sandbox: &Sandbox, wanted: &BTreeMap<String, String>) -> bool {
    wanted
        .iter()
        .all(|(key, value)| sandbox.labels.get(key) == Some(value))
}

/// The `metadata` filter of a listing: a query string of its own
/// (`key1=value1&key2=value2`, each part percent-encoded).
pub fn metadata_filter(raw: &str) -> BTreeMap<String, String> {
    url_pairs(raw).into_iter().collect()
}

/// `a=b&c=d` percent-decoded; a part without `=` has an empty value.
fn url_pairs(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (key, value) = part.split_once('=').unwrap_or((part, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let hex = |byte: Option<&u8>| byte.and_then(|b| char::from(*b).to_digit(16));
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => match (hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_maps_onto_sandboxds() {
        let new: NewSandbox = serde_json::from_str(
            r#"{"templateID":"base","timeout":60,"metadata":{"who":"me"},
                "envVars":{"A":"1","B":"two words"},"secure":true}"#,
        )
        .unwrap();
        let (request, timeout_ms) = create_request(new, "env".into()).unwrap();
        assert_eq!(request.template.as_deref(), Some("base"));
        assert_eq!((request.timeout_ms, timeout_ms), (Some(60_000), 60_000));
        assert_eq!(
            request.fixed_timeout,
            Some(true),
            "E2B's sandboxes end at their end"
        );
        assert_eq!(request.env_vars.as_deref(), Some("A=1\nB=two words"));
        assert_eq!(request.network_mode, Some(NetworkMode::Internet));
        assert_eq!(request.labels.unwrap()["who"], "me");
        let closed: NewSandbox =
            serde_json::from_str(r#"{"templateID":"base","allow_internet_access":false}"#).unwrap();
        let (request, _) = create_request(closed, "env".into()).unwrap();
        assert_eq!(request.network_mode, Some(NetworkMode::Isolated));
        assert_eq!(request.timeout_ms, Some(300_000));
        let short: NewSandbox =
            serde_json::from_str(r#"{"templateID":"base","timeout":3}"#).unwrap();
        let (request, timeout_ms) = create_request(short, "env".into()).unwrap();
        assert_eq!(
            (request.timeout_ms, timeout_ms),
            (Some(10_000), 3_000),
            "checked as sandboxd's, then set as asked"
        );
    }

    #[test]
    fn listings_are_paged_newest_first_and_stable() {
        let made = |id: &str, at: i64| Sandbox {
            sandbox_id: id.into(),
            created_at: at,
            ..crate::plan::tests::sandbox(NetworkMode::Isolated)
        };
        let all = [made("a", 1), made("b", 3), made("c", 2), made("d", 3)];
        let (first, token) = page(all.iter().collect(), Some(2), None, false).unwrap();
        let ids = |page: &[&Sandbox]| {
            page.iter()
                .map(|s| s.sandbox_id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&first), ["d", "b"]);
        let token = token.unwrap();
        // A sandbox made since does not shift the next page.
        let more = [
            made("e", 9),
            made("a", 1),
            made("b", 3),
            made("c", 2),
            made("d", 3),
        ];
        let (second, last) = page(more.iter().collect(), Some(2), Some(&token), false).unwrap();
        assert_eq!(ids(&second), ["c", "a"]);
        assert_eq!(last, None);
        assert!(page(all.iter().collect(), Some(0), None, false).is_err());
        assert!(page(all.iter().collect(), None, Some("x"), false).is_err());
        // Oldest first, a page at a time the same way.
        let (first, token) = page(all.iter().collect(), Some(3), None, true).unwrap();
        assert_eq!(ids(&first), ["a", "c", "b"]);
        let (second, last) = page(more.iter().collect(), Some(3), token.as_deref(), true).unwrap();
        assert_eq!(ids(&second), ["d", "e"]);
        assert_eq!(last, None);
        assert_eq!(oldest_first(Some("asc")), Ok(true));
        assert_eq!(oldest_first(None), Ok(false));
        assert!(oldest_first(Some("up")).is_err());
    }

    #[test]
    fn bad_creates_are_refused_by_field() {
        let bad: NewSandbox =
            serde_json::from_str(r#"{"templateID":"","timeout":0,"envVars":{"A":"x\ny"}}"#)
                .unwrap();
        let paths: Vec<String> = create_request(bad, "env".into())
            .unwrap_err()
            .issues
            .into_iter()
            .map(|issue| issue.path)
            .collect();
        assert_eq!(paths, ["templateID", "timeout", "envVars"]);
    }

    #[test]
    fn metadata_filters_are_decoded() {
        let filter = metadata_filter("sandbox_test_id%3D=a%2Fb&team=x+y&flag");
        assert_eq!(filter["sandbox_test_id="], "a/b");
        assert_eq!(filter["team"], "x y");
        assert_eq!(filter["flag"], "");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%é%C3%A9"), "%é\u{e9}");
    }

    #[test]
    fn only_live_sandboxes_have_a_state() {
        assert_eq!(state_of(SandboxStatus::Running), Some("running"));
        assert_eq!(state_of(SandboxStatus::Paused), Some("paused"));
        assert_eq!(state_of(SandboxStatus::Killed), None);
        assert_eq!(state_of(SandboxStatus::Error), None);
    }
}
