//! One server and key: requests made by the procedure table, answers read as the
//! procedure's response or as a typed refusal.
//!
//! `Client` is one server and key on a pooled reqwest client, its own or the caller's
//! (for TLS settings and pool sizes). `request` makes a procedure's request from the
//! procedure table with the key; `invoke::<D>(request)` calls the procedure `D` with its
//! request type and reads its response type; `call(name, args)` does the same by name
//! with any arguments (a GET's query or a POST's JSON body); `send` keeps a streamed
//! request's response (uploads, downloads). The e2e harness and the binary's test helpers
//! call the server through `raw_post` and `raw_get`.

use reqwest::{RequestBuilder, Response, StatusCode};
use sandboxd_core::api::definition::Definition;
use sandboxd_core::api::procedures::{self, Method, Procedure};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Error, Refusal};

/// A client of one sandboxd server with one key. Cloning is cheap and shares the
/// connections.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    url: String,
    key: String,
}

impl Client {
    /// A client of the server at `url` (its base: `http://127.0.0.1:3000`) with `key`,
    /// on a pooled HTTP client of its own that follows no redirect.
    pub fn new(url: impl Into<String>, key: impl Into<String>) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(Error::Unreachable)?;
        Ok(Self::with_http(http, url, key))
    }

    /// As [`Client::new`], on `http` (the caller's TLS settings or pool sizes).
    pub fn with_http(
        http: reqwest::Client,
        url: impl Into<String>,
        key: impl Into<String>,
    ) -> Self {
        let url: String = url.into();
        Self {
            http,
            url: url.trim_end_matches('/').to_owned(),
            key: key.into(),
        }
    }

    /// The same server and connections with another key (`""`: none).
    pub fn with_key(&self, key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            ..self.clone()
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A request for `procedure` with the key; its arguments are the caller's to add.
    pub fn request(&self, procedure: &Procedure) -> RequestBuilder {
        let url = format!("{}{}", self.url, procedure.path);
        self.keyed(match procedure.method {
            Method::Get => self.http.get(url),
            Method::Post => self.http.post(url),
        })
    }

    /// A request for the procedure named `name` (`sandbox.exec`) with `args`: the query
    /// string of a GET, the JSON body of a POST.
    pub fn request_with<A: Serialize + ?Sized>(
        &self,
        name: &str,
        args: &A,
    ) -> Result<RequestBuilder, Error> {
        let procedure =
            procedures::named(name).ok_or_else(|| Error::UnknownProcedure(name.to_owned()))?;
        let request = self.request(procedure);
        Ok(match procedure.method {
            Method::Get => request.query(args),
            Method::Post => request.json(args),
        })
    }

    /// Calls the procedure `D` with `request`: its answer, typed by its definition, or
    /// why not.
    pub async fn invoke<D: Definition>(&self, request: &D::Request) -> Result<D::Response, Error>
    where
        D::Request: Serialize,
        D::Response: DeserializeOwned,
    {
        self.call(D::PROCEDURE.name, request).await
    }

    /// Calls `name` with `args`; its response, or why not.
    pub async fn call<A: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        name: &str,
        args: &A,
    ) -> Result<R, Error> {
        let response = self.send(self.request_with(name, args)?).await?;
        if response.status() == StatusCode::NO_CONTENT {
            return serde_json::from_value(Value::Null)
                .map_err(|e| Error::Undecodable(format!("{name} answered nothing: {e}")));
        }
        let bytes = response.bytes().await.map_err(Error::Unreachable)?;
        serde_json::from_slice(&bytes)
            .map_err(|e| Error::Undecodable(format!("{name}'s answer: {e}")))
    }

    /// Sends `request`: the response when it succeeded, else why not.
    pub async fn send(&self, request: RequestBuilder) -> Result<Response, Error> {
        let response = request.send().await.map_err(Error::Unreachable)?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .unwrap_or("elsewhere")
                .to_owned();
            return Err(Error::Redirected {
                status: status.as_u16(),
                location,
            });
        }
        let body = response.json().await.unwrap_or(Value::Null);
        Err(Error::Refused(Refusal::from_body(status, body)))
    }

    /// `POST /api/<procedure>` with `body`, whatever the table says: the status and
    /// the body as JSON (`null` when it is not JSON). For tests of what the server
    /// refuses.
    pub async fn raw_post<B: Serialize + ?Sized>(
        &self,
        procedure: &str,
        body: &B,
    ) -> Result<(StatusCode, Value), Error> {
        let request = self
            .keyed(self.http.post(format!("{}/api/{procedure}", self.url)))
            .json(body);
        read_raw(request).await
    }

    /// `GET /api/<procedure>` with `query`, as [`Client::raw_post`]. `procedure` may
    /// carry its own query string.
    pub async fn raw_get<Q: Serialize + ?Sized>(
        &self,
        procedure: &str,
        query: &Q,
    ) -> Result<(StatusCode, Value), Error> {
        let request = self
            .keyed(self.http.get(format!("{}/api/{procedure}", self.url)))
            .query(query);
        read_raw(request).await
    }

    fn keyed(&self, request: RequestBuilder) -> RequestBuilder {
        if self.key.is_empty() {
            request
        } else {
            request.header("x-api-key", &self.key)
        }
    }
}

async fn read_raw(request: RequestBuilder) -> Result<(StatusCode, Value), Error> {
    let response = request.send().await.map_err(Error::Unreachable)?;
    let status = response.status();
    let body = response.json().await.unwrap_or(Value::Null);
    Ok((status, body))
}
