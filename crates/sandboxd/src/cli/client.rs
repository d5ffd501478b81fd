//! The API for the client commands, over the typed client (`sandboxd-client`): every
//! call by the procedure table, the server's refusal turned into a message a person can
//! act on and an exit code a script can test.

use std::process::ExitCode;

use reqwest::StatusCode;
use sandboxd_client::Error;
use sandboxd_core::api::definition::Definition;
use serde::Serialize;
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
    api: sandboxd_client::Client,
    pub target: Target,
}

impl Client {
    pub fn new(target: Target) -> anyhow::Result<Self> {
        let http = super::tls::http(&target.tls)?;
        Ok(Self {
            api: sandboxd_client::Client::with_http(http, &target.url, &target.key),
            target,
        })
    }

    /// A request for the procedure named `name` with the key, arguments not added.
    pub fn request(&self, name: &str) -> Result<reqwest::RequestBuilder, Failure> {
        let procedure = sandboxd_core::api::procedures::named(name)
            .ok_or_else(|| Failure::Unavailable(format!("no procedure {name}")))?;
        Ok(self.api.request(procedure))
    }

    /// `GET /health` (no key needed).
    /// A WebSocket to `path_and_query` on the server, with the key.
    pub async fn websocket(&self, path_and_query: &str) -> Result<super::tls::Socket, Failure> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
        let base = self.target.url.replacen("http", "ws", 1);
        let mut request = format!("{base}{path_and_query}")
            .into_client_request()
            .map_err(|e| Failure::Refused(format!("bad server address {base}: {e}")))?;
        let key = self
            .target
            .key
            .parse()
            .map_err(|_| Failure::Refused("the key is not a valid header value".into()))?;
        request.headers_mut().insert("x-api-key", key);
        super::tls::websocket(request, &self.target.tls)
            .await
            .map_err(|e| {
                if super::tls::untrusted(&e) {
                    Failure::Unavailable(super::tls::untrusted_hint(&self.target.url))
                } else {
                    Failure::Unavailable(format!("cannot reach {}: {e}", self.target.url))
                }
            })
    }

    pub async fn health(&self) -> Result<Value, Failure> {
        self.call("health", &()).await
    }

    /// A GET procedure with its query.
    pub async fn get(&self, procedure: &str, query: &[(&str, &str)]) -> Result<Value, Failure> {
        self.call(procedure, query).await
    }

    /// A POST procedure with its JSON body.
    pub async fn post(&self, procedure: &str, body: &Value) -> Result<Value, Failure> {
        self.call(procedure, body).await
    }

    /// Calls the procedure `D` with its typed request; the answer's JSON, or why not.
    pub async fn invoke<D: Definition>(&self, request: &D::Request) -> Result<Value, Failure>
    where
        D::Request: Serialize,
    {
        self.call(D::PROCEDURE.name, request).await
    }

    /// Calls `procedure` with `args`; the answer's JSON (`null` for none), or why not.
    pub async fn call<A: Serialize + ?Sized>(
        &self,
        procedure: &str,
        args: &A,
    ) -> Result<Value, Failure> {
        self.api
            .call::<A, Value>(procedure, args)
            .await
            .map_err(|error| self.failure(error))
    }

    /// Sends `request`; the response when it succeeded, else why not.
    pub async fn answer(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Failure> {
        self.api
            .send(request)
            .await
            .map_err(|error| self.failure(error))
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

    fn failure(&self, error: Error) -> Failure {
        let url = &self.target.url;
        match error {
            Error::Unreachable(error) if super::tls::untrusted(&error) => {
                Failure::Unavailable(super::tls::untrusted_hint(url))
            }
            Error::Unreachable(error) if error.is_connect() => Failure::Unavailable(format!(
                "no sandboxd answers at {url}: start one with `sandboxd serve`, or point \
                 --url / SANDBOXD_URL at yours"
            )),
            Error::Unreachable(error) => {
                Failure::Unavailable(format!("the request to {url} failed: {error}"))
            }
            Error::Redirected { status, location } => Failure::Unavailable(format!(
                "{url} redirects ({status}) to {}: point --url at the address the server \
                 is served on (the key is not sent on to another address)",
                super::table::printable(&location)
            )),
            Error::Refused(refusal) => {
                let message = refusal.explained();
                match refusal.status {
                    401 => Failure::Denied(format!(
                        "{url} refused the key: {message}. Check --key / SANDBOXD_KEY, or run `sandboxd login`"
                    )),
                    403 => Failure::Denied(message),
                    404 => Failure::NotFound(message),
                    500.. => Failure::Unavailable(message),
                    _ => Failure::Refused(message),
                }
            }
            Error::Undecodable(why) => {
                Failure::Unavailable(format!("the server's answer was not JSON: {why}"))
            }
            Error::UnknownProcedure(name) => Failure::Unavailable(format!("no procedure {name}")),
        }
    }
}
