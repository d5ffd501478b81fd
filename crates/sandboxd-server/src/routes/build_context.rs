//! `template.context`: a build context streamed as a tar, for a build whose files are
//! more than `template.build`'s `files` take. The body flows to the service as it
//! comes (never held whole); the service bounds it and keeps it (`Builds::upload_context`).

use axum::extract::State;
use sandboxd_core::api::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::transfers::streamed;
use crate::AppState;
use crate::error::ApiError;
use crate::time::rfc3339;

/// The build context procedure.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(upload_context))
}

/// Upload a build context, streamed: a tar (gzipped or not) of the files a
/// `template.build {contextId}` in the project reads, each with its mode; symbolic
/// links are kept as links, directories made as the copies need them, and hard links,
/// devices and fifos refused. At most `[builds] context_mb` (1 GiB) of files and
/// 100,000 entries; an organization keeps `[builds] contexts_mb` (2 GiB) of contexts
/// and sends two at once. A context is kept for an hour, and any build in its project
/// may read it in that time.
#[utoipa::path(post, path = "/api/template.context", operation_id = "template-context", tag = "template",
    params(ContextQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream",
        description = "A tar of the build's files, gzipped or not (sent as `application/x-tar` or any other type)"),
    responses((status = 200, body = ContextUploaded), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn upload_context(
    State(state): State<AppState>,
    request: axum::extract::Request,
) -> Result<axum::Json<ContextUploaded>, ApiError> {
    let service = &state.service;
    let uploaded = streamed(
        &state,
        request,
        |caller, req: ContextQuery, _, body| async move {
            Ok(service
                .builds()
                .upload_context(&caller, req.project_id.as_deref(), body)
                .await?)
        },
    )
    .await?;
    Ok(axum::Json(ContextUploaded {
        context_id: uploaded.context_id,
        project_id: uploaded.project_id,
        files: uploaded.files,
        bytes: uploaded.bytes,
        expires_at: rfc3339(uploaded.expires_at),
    }))
}
