//! The API over HTTP for the client commands: a GET or a POST of any procedure by name,
//! answered as untyped JSON, the server's error turned into a message a person can act on
//! and an exit code a script can test.

use std::process::ExitCode;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::target::Target;

/// `text` as a URL query value.
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// How a client command failed, with its exit code.
#[derive(Debug)]
pub enum Failure {
    /// The server refused the request (400, 409, 412, 413, 429…): exit 1.
    Refused(String),
    /// The key was refused or may not do this (401, 403): exit 3.
    Denied(String),
    /// What was named does not exist (404): exit 4.
    NotFound(String),
    /// No answer, or the server failed (5xx): exit 5.
    Unavailable(String),
}

impl Failure {
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            Self::Refused(_) => 1,
            Self::Denied(_) => 3,
            Self::NotFound(_) => 4,
            Self::Unavailable(_) => 5,
        })
    }

    pub fn message(&self) -> &str {
        match self {
            Self::Refused(m) | Self::Denied(m) | Self::NotFound(m) | Self::Unavailable(m) => m,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Failure {}

/// The client of one server.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    pub target: Target,
}

impl Client {
    pub fn new(target: Target) -> anyhow::Result<Self> {
        Ok(Self {
            http: super::tls::http(&target.tls)?,
            target,
        })
    }

    /// A request to `/api/<procedure>` with the key.
    pub fn request(&self, method: Method, procedure: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}/api/{procedure}", self.target.url))
            .header("x-api-key", &self.target.key)
    }

    /// `GET /health` (no key needed).
    pub async fn health(&self) -> Result<Value, Failure> {
        self.send(self.http.get(format!("{}/health", self.target.url)))
            .await
    }

    /// `GET /api/<procedure>?query`.
    pub async fn get(&self, procedure: &str, query: &[(&str, &str)]) -> Result<Value, Failure> {
        self.send(self.request(Method::GET, procedure).query(query))
            .await
    }

    /// `POST /api/<procedure>` with a JSON body.
    pub async fn post(&self, procedure: &str, body: &Value) -> Result<Value, Failure> {
        self.send(self.request(Method::POST, procedure).json(body))
            .await
    }

    /// Sends `request`; the answer's JSON, or why it failed.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, Failure> {
        let response = self.answer(request).await?;
        if response.status() == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        response
            .json()
            .await
            .map_err(|e| Failure::Unavailable(format!("the server's answer was not JSON: {e}")))
    }

    /// Sends `request`; the response when it succeeded, else why not.
    pub async fn answer(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Failure> {
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(super::table::printable)
                .unwrap_or_else(|| "elsewhere".into());
            return Err(Failure::Unavailable(format!(
                "{} redirects ({status}) to {location}: point --url at the address the server \
                 is served on (the key is not sent on to another address)",
                self.target.url
            )));
        }
        let body: Value = response.json().await.unwrap_or(Value::Null);
        Err(self.failure(status, &body))
    }

    fn unreachable(&self, error: &reqwest::Error) -> Failure {
        let url = &self.target.url;
        if super::tls::untrusted(error) {
            Failure::Unavailable(super::tls::untrusted_hint(url))
        } else if error.is_connect() {
            Failure::Unavailable(format!(
                "no sandboxd answers at {url}: start one with `sandboxd serve`, or point \
                 --url / SANDBOXD_URL at yours"
            ))
        } else {
            Failure::Unavailable(format!("the request to {url} failed: {error}"))
        }
    }

    fn failure(&self, status: StatusCode, body: &Value) -> Failure {
        let message = body["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| status.to_string());
        let issues: Vec<String> = body["issues"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|issue| {
                Some(format!(
                    "{}: {}",
                    issue["path"].as_str()?,
                    issue["message"].as_str()?
                ))
            })
            // The message often is the first issue already.
            .filter(|issue| !message.contains(issue.as_str()))
            .collect();
        let message = if issues.is_empty() {
            message
        } else {
            format!("{message} ({})", issues.join("; "))
        };
        match status {
            StatusCode::UNAUTHORIZED => Failure::Denied(format!(
                "{} refused the key: {message}. Check --key / SANDBOXD_KEY, or run `sandboxd login`",
                self.target.url
            )),
            StatusCode::FORBIDDEN => Failure::Denied(message),
            StatusCode::NOT_FOUND => Failure::NotFound(message),
            status if status.is_server_error() => Failure::Unavailable(message),
            _ => Failure::Refused(message),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_issue_already_in_the_message_is_not_said_twice() {
        let client = Client::new(Target {
            url: "http://127.0.0.1:3000".into(),
            key: "sbx_k".into(),
            ca_cert: None,
            tls: crate::cli::tls::config(None).unwrap(),
        })
        .unwrap();
        let body = json!({
            "message": "timeoutMs: must be at least 10 s",
            "issues": [
                {"path": "timeoutMs", "message": "must be at least 10 s"},
                {"path": "cpu", "message": "must be at most 64"},
            ],
        });
        let failure = client.failure(StatusCode::BAD_REQUEST, &body);
        assert_eq!(
            failure.message(),
            "timeoutMs: must be at least 10 s (cpu: must be at most 64)"
        );
        assert_eq!(failure.exit_code(), ExitCode::from(1));
    }
}
