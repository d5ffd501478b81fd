//! `sandbox.upload` and `sandbox.download`: streamed transfers, the body taken and given
//! as it flows (never held whole), capped by the server's transfer limit.
//!
//! The body goes to the service as a stream and the download streams back; the service's
//! `files/transfers/` checks them (`sandboxd_core::transfer`) and hands them to the
//! sandbox's channel, opened before any byte of the body is read, so that an agent that
//! does not take it (older than protocol 2) leaves it to the engine's untouched. A
//! download whose client reads nothing for 60 s is let go, with an error after what it
//! took. A download with `changes` in place of `path` is `Files::download_changes`'s tar.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse as _, Response};
use futures_util::{StreamExt as _, TryStreamExt as _};
use sandboxd_contracts::Chunks;
use sandboxd_core::api::*;
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::ApiQuery;

/// The transfer procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(upload))
        .routes(routes!(download))
}

/// Upload a file or a tree, streamed. The body is the file's bytes (`format=raw`, with
/// `Content-Length`), or a tar of a tree (`format=tar`) unpacked under `path`. Every
/// entry is owned by the sandbox user; devices, fifos and PAX owners are refused or
/// dropped. Over the transfer limit (4 GiB by default) the upload stops and no partial
/// file is left (a raw file lands under a temporary name and is renamed once whole; a
/// tar is stopped before the entry that would pass the limit).
#[utoipa::path(post, path = "/api/sandbox.upload", operation_id = "sandbox-upload", tag = "sandbox",
    params(UploadQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream",
        description = "The file's bytes, or a tar (`application/x-tar`)"),
    responses((status = 200, body = UploadResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 412, body = ErrorBody),
        (status = 413, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn upload(
    State(state): State<AppState>,
    request: axum::extract::Request,
) -> Result<axum::Json<UploadResult>, ApiError> {
    let service = &state.service;
    let done = streamed(
        &state,
        request,
        |caller, req: UploadQuery, headers, body| async move {
            let cmd = validate::upload(req)?;
            let length = headers
                .get(header::CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.parse::<u64>().ok());
            Ok(service.files().upload(&caller, cmd, length, body).await?)
        },
    )
    .await?;
    Ok(axum::Json(done))
}

/// Serves a request whose body streams to the service: the caller and the query read
/// from its head (not as extractors: a refused key or query is answered only once the
/// body was read, like any refusal), `serve` given the body as a stream, and the answer
/// sent once what it did not read was read (a connection closed with unread bytes is
/// reset, and the client may lose the answer).
pub(crate) async fn streamed<Q, T, F, Fut>(
    state: &AppState,
    request: axum::extract::Request,
    serve: F,
) -> Result<T, ApiError>
where
    Q: serde::de::DeserializeOwned + Send,
    F: FnOnce(sandboxd_core::model::Principal, Q, axum::http::HeaderMap, Chunks) -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    use axum::extract::FromRequestParts as _;
    let (mut parts, body) = request.into_parts();
    let (body, pump) = pumped(body);
    let done = async {
        let Caller(caller) = Caller::from_request_parts(&mut parts, state).await?;
        let ApiQuery(req) = ApiQuery::<Q>::from_request_parts(&mut parts, state).await?;
        serve(caller, req, std::mem::take(&mut parts.headers), body).await
    }
    .await;
    let _ = pump.await;
    done
}

/// What is read of a refused upload's rest, at most, so that the connection closes
/// cleanly; past it (or its time), the connection is closed as it is.
const DRAIN_BYTES: usize = 16 * 1024 * 1024;
const DRAIN_FOR: std::time::Duration = std::time::Duration::from_secs(5);

/// The request body as a stream the service may stop reading early: the task behind it
/// then reads and drops the rest, within [`DRAIN_BYTES`] and [`DRAIN_FOR`].
fn pumped(body: Body) -> (Chunks, tokio::task::JoinHandle<()>) {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    let pump = tokio::spawn(async move {
        let mut stream = body.into_data_stream();
        while let Some(chunk) = stream.next().await {
            let failed = chunk.is_err();
            if tx.send(chunk.map_err(std::io::Error::other)).await.is_err() || failed {
                break;
            }
        }
        drop(tx);
        let deadline = tokio::time::Instant::now() + DRAIN_FOR;
        let mut drained = 0;
        while drained < DRAIN_BYTES {
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(Some(Ok(chunk))) => drained += chunk.len(),
                _ => break,
            }
        }
    });
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    (Box::pin(chunks), pump)
}

/// Download a file's bytes or a directory's tar, streamed. Without `format`, a file
/// comes raw (`application/octet-stream`, with its `Content-Length`) and a directory as
/// a tar (`application/x-tar`); the kind is in `x-sandboxd-format`. With `changes`
/// instead of `path`: a tar of what `sandbox.changes` lists, removals as `.wh.` entries.
#[utoipa::path(get, path = "/api/sandbox.download", operation_id = "sandbox-download", tag = "sandbox",
    params(DownloadQuery),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 412, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn download(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<DownloadQuery>,
) -> Result<Response, ApiError> {
    let (sandbox_id, of) = validate::download(&req)?;
    let files = state.service.files();
    let download = match of {
        validate::DownloadOf::Path(path) => {
            files
                .download(&caller, &sandbox_id, &path, req.format)
                .await?
        }
        validate::DownloadOf::Changes { all } => {
            files.download_changes(&caller, &sandbox_id, all).await?
        }
    };
    let (content_type, format) = match download.format {
        TransferFormat::Raw => ("application/octet-stream", "raw"),
        TransferFormat::Tar => ("application/x-tar", "tar"),
    };
    let body = Body::from_stream(download.body.map_ok(Bytes::from));
    let mut response = (
        [
            (header::CONTENT_TYPE, content_type),
            (header::HeaderName::from_static("x-sandboxd-format"), format),
        ],
        body,
    )
        .into_response();
    if let Some(size) = download.size {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, size.into());
    }
    Ok(response)
}
