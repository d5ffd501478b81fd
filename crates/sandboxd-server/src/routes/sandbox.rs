//! `/api/sandbox.<procedure>`: parse into a typed command, call the service, map the result.
//!
//! It serves `sandbox.readFile`, whose answer is written by hand
//! (`sandboxd_core::api::file_json`).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse as _, Response};
use sandboxd_core::api::*;
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::ApiQuery;

/// The sandbox procedures with a handler of their own (`procedures::HANDWRITTEN`).
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(read_file))
}

/// Read a regular file (≤ 10 MiB).
#[utoipa::path(get, path = "/api/sandbox.readFile", operation_id = "sandbox-readFile", tag = "sandbox",
    params(ReadFileQuery),
    responses((status = 200, body = ReadFileResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 412, body = ErrorBody),
        (status = 413, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn read_file(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<ReadFileQuery>,
) -> Result<Response, ApiError> {
    let cmd = validate::read_file(req)?;
    let result = state.service.files().read_file(&caller, cmd).await?;
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        result.to_json(),
    )
        .into_response())
}
