//! The daemon's plain HTTP file routes: `GET /files?path=` streams a file's bytes out,
//! `POST /files` writes files from a multipart body (parts named `file`, the path as
//! the part's file name or `?path=`) or from a raw body (`?path=`), gzip-encoded or
//! not. Errors are `{code: <status>, message}`, as E2B's SDKs read them.
//!
//! An upload's length is not known before it ends (multipart, chunked, gzip), and the
//! sandbox takes a file only with its length: each file is spooled to a temporary file
//! of the server's, capped at the transfer limit as it is written (decompressed bytes
//! counted), then streamed in through the transfer path like `sandbox.upload`.
//!
//! A raw body of known length is streamed in place through the transfer path; the others
//! (gzip, multipart parts read with multer) are spooled first by `uploads.rs`. A signed
//! URL's caller is the key whose token signed it, for the sandbox's user alone.

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::TryStreamExt;
use sandboxd_core::api::TransferFormat;
use sandboxd_core::e2b::connect::Code;
use sandboxd_core::e2b::filesystem::{metadata_of, resolve};
use sandboxd_core::validate::Upload;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::rpc::RpcError;
use super::uploads::{self, Busy, Refused, UPLOADS_PER_ORGANIZATION, UPLOADS_PER_SANDBOX};
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

/// `POST /files`: writes every file of the body; answers them in order. A raw body of
/// known length goes to the sandbox as it arrives; one whose length is known only at
/// its end (gzip, a multipart part) is held in a temporary file first, within the
/// server's budget for them (`uploads`).
pub(super) async fn upload(
    State(state): State<AppState>,
    headers: HeaderMap,
    asked: Result<Query<FilesQuery>, axum::extract::rejection::QueryRejection>,
    request: Request,
) -> Result<Json<Vec<Written>>, FilesError> {
    let asked = query(asked)?;
    let who = asked.caller(&state, &headers, FileOperation::Write).await?;
    let mut slot = state
        .e2b_uploads
        .take(&who.sandbox_id, &who.caller.organization_id)
        .map_err(busy)?;
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
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let mut written = Vec::new();
    if content_type.starts_with("multipart/form-data") {
        // Read as a stream (not through a body limit): a part may be as large as the
        // transfer cap.
        let boundary = multer::parse_boundary(content_type)
            .map_err(|error| invalid(format!("invalid multipart body: {error}")))?;
        let held = Arc::new(uploads::MultipartHeld::default());
        let body = uploads::metered(
            request
                .into_body()
                .into_data_stream()
                .map_err(std::io::Error::other),
            held.clone(),
        );
        let mut form = multer::Multipart::new(body, boundary);
        loop {
            // A part's headers come within a deadline (the parser is not fed past its
            // bound while it looks for them).
            let next = tokio::time::timeout(MULTIPART_HEADERS_TIMEOUT, form.next_field())
                .await
                .map_err(|_| invalid("invalid multipart body: no part's headers in time"))?
                .map_err(|error| invalid(format!("invalid multipart body: {error}")))?;
            let Some(mut field) = next else {
                break;
            };
            if field.name() != Some("file") {
                // Read through, so that what it holds is taken out.
                while let Some(chunk) = field
                    .chunk()
                    .await
                    .map_err(|error| invalid(format!("invalid multipart body: {error}")))?
                {
                    held.took(chunk.len());
                }
                continue;
            }
            let named = asked
                .path
                .clone()
                .or_else(|| field.file_name().map(str::to_owned))
                .ok_or_else(|| invalid("a file part needs a file name or ?path="))?;
            let path = resolve(&named, "path").map_err(ApiError::from)?;
            let taken = held.clone();
            let chunks = field
                .inspect_ok(move |chunk| taken.took(chunk.len()))
                .map_err(std::io::Error::other);
            let (spooled, length) = uploads::spool(chunks, gzip, cap, &mut slot)
                .await
                .map_err(|refused| refusal(refused, cap))?;
            let body: sandboxd_contracts::Chunks =
                Box::pin(tokio_util::io::ReaderStream::new(spooled));
            written.push(put(&state, &who, (path, &metadata), body, length).await?);
            slot.unspool();
        }
    } else {
        let named = asked
            .path
            .clone()
            .ok_or_else(|| invalid("a raw upload needs ?path="))?;
        let path = resolve(&named, "path").map_err(ApiError::from)?;
        let length = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        let chunks = request
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other);
        let (body, length): (sandboxd_contracts::Chunks, u64) = match (gzip, length) {
            (false, Some(length)) if length > cap => return Err(refusal(Refused::TooLarge, cap)),
            (false, Some(length)) => (Box::pin(chunks), length),
            _ => {
                let (spooled, length) = uploads::spool(chunks, gzip, cap, &mut slot)
                    .await
                    .map_err(|refused| refusal(refused, cap))?;
                (Box::pin(tokio_util::io::ReaderStream::new(spooled)), length)
            }
        };
        written.push(put(&state, &who, (path, &metadata), body, length).await?);
    }
    Ok(Json(written))
}

/// How long a multipart body may take to give a part's headers.
const MULTIPART_HEADERS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// An upload refused as too many at once (429).
fn busy(busy: Busy) -> FilesError {
    let whose = match busy {
        Busy::Sandbox => format!("the sandbox has {UPLOADS_PER_SANDBOX}"),
        Busy::Organization => format!("the organization has {UPLOADS_PER_ORGANIZATION}"),
    };
    FilesError(RpcError::new(
        Code::ResourceExhausted,
        format!("{whose} uploads under way, the most it may have at once: retry when one ends"),
    ))
}

/// What a body that could not be taken is answered.
fn refusal(refused: Refused, cap: u64) -> FilesError {
    match refused {
        Refused::TooLarge => FilesError::from(ApiError::TooLarge(format!(
            "the file is larger than the transfer limit of {cap} bytes"
        ))),
        Refused::Invalid(message) => invalid(message),
        Refused::NoRoom => FilesError(RpcError::new(
            Code::Unavailable,
            "the server's room for uploads of unknown length is taken: retry later, or send the file raw with its length".to_owned(),
        )),
        Refused::Failed(message) => FilesError(RpcError::new(Code::Internal, message)),
    }
}

/// Streams a file of `length` bytes into the sandbox at `path` (parents made, mode 0644).
async fn put(
    state: &AppState,
    who: &super::Envd,
    (path, metadata): (String, &BTreeMap<String, String>),
    body: sandboxd_contracts::Chunks,
    length: u64,
) -> Result<Written, FilesError> {
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
