//! The daemon's plain HTTP file routes: `GET /files?path=` streams a file's bytes out,
//! `POST /files` writes files from a multipart body (parts named `file`, the path as
//! the part's file name or `?path=`) or from a raw body (`?path=`), gzip-encoded or
//! not. Errors are `{code: <status>, message}`, as E2B's SDKs read them.
//!
//! An upload's length is not known before it ends (multipart, chunked, gzip), and the
//! sandbox takes a file only with its length: each file is spooled to a temporary file
//! of the server's, capped at the transfer limit as it is written (decompressed bytes
//! counted), then streamed in through the transfer path like `sandbox.upload`.

use std::io::Write as _;

use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequest, Multipart, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use sandboxd_core::api::TransferFormat;
use sandboxd_core::e2b::connect::Code;
use sandboxd_core::e2b::filesystem::{metadata_of, resolve};
use sandboxd_core::validate::Upload;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tokio::io::{AsyncSeekExt as _, AsyncWriteExt as _};

use super::rpc::RpcError;
use super::{Envd, envd, signed};
use crate::AppState;
use crate::auth::token_from;
use crate::error::ApiError;
use crate::service::ServiceError;
use sandboxd_core::e2b::signed::{FileOperation, SignedFileUrl};

/// A failure of the file routes: `{code: <status>, message}`.
pub(super) struct FilesError(RpcError);

impl FilesError {
    /// The sandbox is gone: what E2B's proxy answers then.
    pub fn gone(sandbox_id: &str) -> Self {
        Self(RpcError::new(
            Code::Unavailable,
            format!("The sandbox {sandbox_id} was not found"),
        ))
    }

    fn status(&self) -> StatusCode {
        if self.0.code == Code::Unavailable && self.0.message.contains("was not found") {
            return StatusCode::BAD_GATEWAY;
        }
        self.0.status()
    }
}

impl From<RpcError> for FilesError {
    fn from(error: RpcError) -> Self {
        Self(error)
    }
}

impl<E: Into<ApiError>> From<E> for FilesError {
    fn from(error: E) -> Self {
        Self(RpcError::from(error))
    }
}

#[derive(Serialize)]
struct FilesErrorBody<'a> {
    code: u16,
    message: &'a str,
}

impl IntoResponse for FilesError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = serde_json::to_vec(&FilesErrorBody {
            code: status.as_u16(),
            message: &self.0.message,
        })
        .unwrap_or_default();
        self.0.respond(status, body, "application/json")
    }
}

/// The query of both routes.
#[derive(Debug, Default, Deserialize)]
pub(super) struct FilesQuery {
    path: Option<String>,
    username: Option<String>,
    /// A signed URL's: `v1_…`.
    signature: Option<String>,
    /// A signed URL's end, in Unix seconds.
    signature_expiration: Option<i64>,
}

impl FilesQuery {
    /// The query of `uri`, when it parses.
    pub(super) fn of(uri: &axum::http::Uri) -> Option<Self> {
        Query::<Self>::try_from_uri(uri).ok().map(|Query(q)| q)
    }

    /// The signed URL this is, for `operation`, when it is one and the call's headers
    /// bring no credential (which then decide).
    pub(super) fn signed_url(
        &self,
        headers: &HeaderMap,
        operation: FileOperation,
    ) -> Option<SignedFileUrl<'_>> {
        let by_header = headers.contains_key("x-access-token") || token_from(headers).is_some();
        if by_header {
            return None;
        }
        Some(SignedFileUrl {
            path: self.path.as_deref().unwrap_or_default(),
            operation,
            user: self.username.as_deref().unwrap_or_default(),
            signature: self.signature.as_deref()?,
            expires_at_s: self.signature_expiration,
        })
    }

    /// Who calls: by the call's headers, else by the URL's signature.
    async fn caller(
        &self,
        state: &AppState,
        headers: &HeaderMap,
        operation: FileOperation,
    ) -> Result<Envd, RpcError> {
        match self.signed_url(headers, operation) {
            Some(url) => signed(state, headers, &url).await,
            None => envd(state, headers, self.username.as_deref()).await,
        }
    }
}

fn query(
    query: Result<Query<FilesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<FilesQuery, FilesError> {
    query.map(|Query(q)| q).map_err(|rejection| {
        FilesError(RpcError::new(
            Code::InvalidArgument,
            format!("invalid query: {}", rejection.body_text()),
        ))
    })
}

fn invalid(message: impl Into<String>) -> FilesError {
    FilesError(RpcError::new(Code::InvalidArgument, message))
}

/// `GET /files?path=`: the file's bytes.
pub(super) async fn download(
    State(state): State<AppState>,
    headers: HeaderMap,
    asked: Result<Query<FilesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, FilesError> {
    let asked = query(asked)?;
    let who = asked.caller(&state, &headers, FileOperation::Read).await?;
    let path =
        resolve(asked.path.as_deref().unwrap_or_default(), "path").map_err(ApiError::from)?;
    let download = state
        .service
        .files()
        .download(
            &who.caller,
            &who.sandbox_id,
            &path,
            Some(TransferFormat::Raw),
        )
        .await;
    let download = match download {
        Ok(download) => download,
        Err(ServiceError::NotFound(_)) => {
            return Err(FilesError(RpcError::new(
                Code::NotFound,
                format!("path '{path}' does not exist"),
            )));
        }
        Err(ServiceError::Refused(message)) => return Err(invalid(message)),
        Err(error) => return Err(error.into()),
    };
    let mut response = Response::new(Body::from_stream(download.body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/octet-stream"),
    );
    if let Some(size) = download.size {
        headers.insert(header::CONTENT_LENGTH, size.into());
    }
    Ok(response)
}

/// A file written, as the answer lists it.
#[derive(Debug, Serialize)]
pub(super) struct Written {
    path: String,
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<BTreeMap<String, String>>,
}

/// `POST /files`: writes every file of the body; answers them in order.
pub(super) async fn upload(
    State(state): State<AppState>,
    headers: HeaderMap,
    asked: Result<Query<FilesQuery>, axum::extract::rejection::QueryRejection>,
    request: Request,
) -> Result<Json<Vec<Written>>, FilesError> {
    let asked = query(asked)?;
    let who = asked.caller(&state, &headers, FileOperation::Write).await?;
    let cap = state.service.files().transfer_cap();
    let metadata = metadata_of(
        headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_bytes())),
    )
    .map_err(ApiError::from)?;
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("gzip"));
    let multipart = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("multipart/form-data"));
    let mut written = Vec::new();
    if multipart {
        let mut form = Multipart::from_request(request, &state)
            .await
            .map_err(|rejection| invalid(rejection.body_text()))?;
        while let Some(field) = form
            .next_field()
            .await
            .map_err(|error| invalid(format!("invalid multipart body: {error}")))?
        {
            if field.name() != Some("file") {
                continue;
            }
            let named = asked
                .path
                .clone()
                .or_else(|| field.file_name().map(str::to_owned))
                .ok_or_else(|| invalid("a file part needs a file name or ?path="))?;
            let path = resolve(&named, "path").map_err(ApiError::from)?;
            let chunks = field.map_err(std::io::Error::other);
            let (spooled, length) = spool(chunks, gzip, cap).await?;
            written.push(put(&state, &who, (path, &metadata), spooled, length).await?);
        }
    } else {
        let named = asked
            .path
            .clone()
            .ok_or_else(|| invalid("a raw upload needs ?path="))?;
        let path = resolve(&named, "path").map_err(ApiError::from)?;
        let chunks = request
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other);
        let (spooled, length) = spool(chunks, gzip, cap).await?;
        written.push(put(&state, &who, (path, &metadata), spooled, length).await?);
    }
    Ok(Json(written))
}

/// Writes a stream of bytes (gunzipped when `gzip`) to a temporary file, refusing more
/// than `cap` bytes; the file, rewound, and its length.
async fn spool(
    chunks: impl Stream<Item = Result<Bytes, std::io::Error>>,
    gzip: bool,
    cap: u64,
) -> Result<(tokio::fs::File, u64), FilesError> {
    let failed = |error: std::io::Error| {
        FilesError(RpcError::new(
            Code::Internal,
            format!("cannot hold the upload: {error}"),
        ))
    };
    let too_large = || {
        FilesError::from(ApiError::TooLarge(format!(
            "the file is larger than the transfer limit of {cap} bytes"
        )))
    };
    let mut file = tokio::fs::File::from_std(tempfile::tempfile().map_err(failed)?);
    let mut gunzip = gzip.then(|| flate2::write::GzDecoder::new(Vec::new()));
    let mut length = 0u64;
    let mut chunks = std::pin::pin!(chunks);
    let mut take = async |file: &mut tokio::fs::File, bytes: &[u8]| {
        length += bytes.len() as u64;
        if length > cap {
            return Err(too_large());
        }
        file.write_all(bytes).await.map_err(failed)
    };
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|error| invalid(format!("the upload's body failed: {error}")))?;
        match gunzip.as_mut() {
            Some(decoder) => {
                decoder
                    .write_all(&chunk)
                    .map_err(|error| invalid(format!("invalid gzip body: {error}")))?;
                let out = std::mem::take(decoder.get_mut());
                take(&mut file, &out).await?;
            }
            None => take(&mut file, &chunk).await?,
        }
    }
    if let Some(decoder) = gunzip {
        let out = decoder
            .finish()
            .map_err(|error| invalid(format!("invalid gzip body: {error}")))?;
        take(&mut file, &out).await?;
    }
    file.flush().await.map_err(failed)?;
    file.rewind().await.map_err(failed)?;
    Ok((file, length))
}

/// Streams a spooled file into the sandbox at `path` (parents made, mode 0644).
async fn put(
    state: &AppState,
    who: &super::Envd,
    (path, metadata): (String, &BTreeMap<String, String>),
    file: tokio::fs::File,
    length: u64,
) -> Result<Written, FilesError> {
    let body: sandboxd_ports::Chunks = Box::pin(tokio_util::io::ReaderStream::new(file));
    let cmd = Upload {
        sandbox_id: who.sandbox_id.clone(),
        path: path.clone(),
        format: TransferFormat::Raw,
        mode: Some(0o644),
        in_place: true,
    };
    state
        .service
        .files()
        .upload(&who.caller, cmd, Some(length), body)
        .await
        .map_err(|error| match error {
            ServiceError::Refused(message) => invalid(message),
            other => other.into(),
        })?;
    // Written in place, the file keeps the metadata it had: the upload's replaces it.
    state
        .service
        .files()
        .set_metadata(&who.caller, &who.sandbox_id, &path, metadata.clone())
        .await?;
    let name = path.rsplit('/').next().unwrap_or_default().to_owned();
    Ok(Written {
        path,
        name,
        kind: "file",
        metadata: (!metadata.is_empty()).then(|| metadata.clone()),
    })
}
