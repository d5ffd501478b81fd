//! `/api/sandbox.<procedure>`: parse into a typed command, call the service, map the result.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse as _, Response};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::*;
use sandboxd_core::model::Sandbox;
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::time::rfc3339;

type ApiResult<T> = Result<Json<T>, ApiError>;

fn view(sandbox: &Sandbox) -> SandboxView {
    SandboxView::from_sandbox(sandbox, rfc3339)
}

/// The sandbox procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(exec))
        .routes(routes!(write_file))
        .routes(routes!(read_file))
        .routes(routes!(list_files))
        .routes(routes!(set_timeout))
        .routes(routes!(set_egress))
        .routes(routes!(list))
        .routes(routes!(one))
        .routes(routes!(stats))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(kill))
        .routes(routes!(remove))
        .routes(routes!(templates))
        .routes(routes!(exec_token))
}

/// A single-use token for the streaming exec WebSocket of a sandbox, for browsers
/// (which cannot send `x-api-key` on a WebSocket): connect to
/// `/sandbox-exec?sandboxId=…&token=…` within a minute.
#[utoipa::path(post, path = "/api/sandbox.execToken", operation_id = "sandbox-execToken", tag = "sandbox",
    request_body = SandboxIdBody,
    responses((status = 200, body = stream::ExecTokenView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn exec_token(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<SandboxIdBody>,
) -> ApiResult<stream::ExecTokenView> {
    let (token, expires) = state
        .service
        .commands()
        .exec_token(&caller, &req.sandbox_id)
        .await?;
    Ok(Json(stream::ExecTokenView {
        token,
        sandbox_id: req.sandbox_id,
        expires_at: rfc3339(expires),
    }))
}

/// Create a sandbox: pulls the image if missing, starts a hardened container and
/// returns the record with `status: running`.
#[utoipa::path(post, path = "/api/sandbox.create", operation_id = "sandbox-create", tag = "sandbox",
    request_body = CreateSandboxRequest,
    responses((status = 200, body = SandboxView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn create(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<CreateSandboxRequest>,
) -> ApiResult<SandboxView> {
    let cmd = validate::create_sandbox(req)?;
    Ok(Json(view(
        &state.service.sandboxes().create(&caller, cmd).await?,
    )))
}

/// Run a command through `sh -c`; output is capped at 1 MiB per stream and the whole
/// process tree is killed on timeout (exit code 124).
#[utoipa::path(post, path = "/api/sandbox.exec", operation_id = "sandbox-exec", tag = "sandbox",
    request_body = ExecRequest,
    responses((status = 200, body = ExecResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 412, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn exec(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ExecRequest>,
) -> ApiResult<ExecResult> {
    let cmd = validate::exec(req)?;
    Ok(Json(state.service.commands().exec(&caller, cmd).await?))
}

/// Write a file (utf8 or base64, ≤ 10 MiB); parent directories are created and the
/// file is owned by the sandbox user.
#[utoipa::path(post, path = "/api/sandbox.writeFile", operation_id = "sandbox-writeFile", tag = "sandbox",
    request_body = WriteFileRequest,
    responses((status = 200, body = WriteFileResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 412, body = ErrorBody),
        (status = 413, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn write_file(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<WriteFileRequest>,
) -> ApiResult<WriteFileResult> {
    let cmd = validate::write_file(req)?;
    Ok(Json(state.service.files().write_file(&caller, cmd).await?))
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

/// List a directory (default: the workdir), directories first.
#[utoipa::path(get, path = "/api/sandbox.listFiles", operation_id = "sandbox-listFiles", tag = "sandbox",
    params(ListFilesQuery),
    responses((status = 200, body = ListFilesResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 412, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn list_files(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<ListFilesQuery>,
) -> ApiResult<ListFilesResult> {
    let cmd = validate::list_files(req)?;
    Ok(Json(state.service.files().list_files(&caller, cmd).await?))
}

/// Change the idle timeout of a running sandbox; it then expires that long from now.
#[utoipa::path(post, path = "/api/sandbox.setTimeout", operation_id = "sandbox-setTimeout", tag = "sandbox",
    request_body = SetTimeoutRequest,
    responses((status = 200, body = SandboxView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 412, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn set_timeout(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<SetTimeoutRequest>,
) -> ApiResult<SandboxView> {
    let (id, timeout) = validate::set_timeout(req)?;
    Ok(Json(view(
        &state
            .service
            .sandboxes()
            .set_timeout(&caller, &id, timeout)
            .await?,
    )))
}

/// Replace the egress list of a running `allowlist` sandbox; new connections see it
/// within a second.
#[utoipa::path(post, path = "/api/sandbox.setEgress", operation_id = "sandbox-setEgress", tag = "sandbox",
    request_body = SetEgressRequest,
    responses((status = 200, body = SandboxView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 412, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn set_egress(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<SetEgressRequest>,
) -> ApiResult<SandboxView> {
    let (id, allow) = validate::set_egress(req)?;
    Ok(Json(view(
        &state
            .service
            .sandboxes()
            .set_egress(
                &caller,
                &id,
                &allow,
                sandboxd_core::egress_requests::ListChange::MayWiden,
            )
            .await?,
    )))
}

/// List the sandboxes of an environment or of a project, newest first.
#[utoipa::path(get, path = "/api/sandbox.list", operation_id = "sandbox-list", tag = "sandbox",
    params(ListSandboxesQuery),
    responses((status = 200, body = Vec<SandboxView>), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn list(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<ListSandboxesQuery>,
) -> ApiResult<Vec<SandboxView>> {
    let scope = validate::list_scope(req)?;
    let sandboxes = state.service.sandboxes().list(&caller, scope).await?;
    Ok(Json(sandboxes.iter().map(view).collect()))
}

/// One sandbox.
#[utoipa::path(get, path = "/api/sandbox.one", operation_id = "sandbox-one", tag = "sandbox",
    params(SandboxIdQuery),
    responses((status = 200, body = SandboxView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn one(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<SandboxIdQuery>,
) -> ApiResult<SandboxView> {
    Ok(Json(view(
        &state
            .service
            .access()
            .sandbox_for(&caller, &req.sandbox_id, SandboxNeed::Read)
            .await?,
    )))
}

/// A running sandbox's resource use now: CPU (percent of one CPU, since the previous
/// reading or over a quarter second), memory and processes, against its limits; from the
/// engine's figures for its container.
#[utoipa::path(get, path = "/api/sandbox.stats", operation_id = "sandbox-stats", tag = "sandbox",
    params(SandboxIdQuery),
    responses((status = 200, body = SandboxStats), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 412, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn stats(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<SandboxIdQuery>,
) -> ApiResult<SandboxStats> {
    Ok(Json(
        state
            .service
            .sandboxes()
            .sandbox_stats(&caller, &req.sandbox_id)
            .await?,
    ))
}

/// Pause a running sandbox: its processes are frozen with their memory and use no CPU
/// (nor the organization's CPU quota) until it is resumed; any call that reaches inside
/// it (exec, files, terminals, processes, contexts, ports) resumes it first. It is
/// killed when its paused timeout (`pausedTimeoutMs`, from the pause) ends. A paused
/// sandbox is answered as it is.
#[utoipa::path(post, path = "/api/sandbox.pause", operation_id = "sandbox-pause", tag = "sandbox",
    request_body = SandboxIdBody,
    responses((status = 200, body = SandboxView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 412, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn pause(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<SandboxIdBody>,
) -> ApiResult<SandboxView> {
    Ok(Json(view(
        &state
            .service
            .sandboxes()
            .pause_for(&caller, &req.sandbox_id)
            .await?,
    )))
}

/// Resume a paused sandbox: its processes go on where they were; its idle timeout
/// starts afresh. Refused (429) when the organization's CPU quota has no room for it. A
/// running sandbox is answered as it is.
#[utoipa::path(post, path = "/api/sandbox.resume", operation_id = "sandbox-resume", tag = "sandbox",
    request_body = SandboxIdBody,
    responses((status = 200, body = SandboxView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 412, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn resume(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<SandboxIdBody>,
) -> ApiResult<SandboxView> {
    Ok(Json(view(
        &state
            .service
            .sandboxes()
            .resume_for(&caller, &req.sandbox_id)
            .await?,
    )))
}

/// Kill a sandbox: the container is stopped (2 s grace) and removed; the record stays
/// as `killed`.
#[utoipa::path(post, path = "/api/sandbox.kill", operation_id = "sandbox-kill", tag = "sandbox",
    request_body = SandboxIdBody,
    responses((status = 200, body = SandboxView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn kill(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<SandboxIdBody>,
) -> ApiResult<SandboxView> {
    Ok(Json(view(
        &state
            .service
            .sandboxes()
            .kill_for(&caller, &req.sandbox_id)
            .await?,
    )))
}

/// Delete a sandbox record, killing it first if needed.
#[utoipa::path(post, path = "/api/sandbox.remove", operation_id = "sandbox-remove", tag = "sandbox",
    request_body = SandboxIdBody,
    responses((status = 200, body = bool), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn remove(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<SandboxIdBody>,
) -> ApiResult<bool> {
    state
        .service
        .sandboxes()
        .remove_for(&caller, &req.sandbox_id)
        .await?;
    Ok(Json(true))
}

/// The built-in templates.
#[utoipa::path(get, path = "/api/sandbox.templates", operation_id = "sandbox-templates", tag = "sandbox",
    responses((status = 200, body = Vec<TemplateView>), (status = 401, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn templates(
    State(state): State<AppState>,
    Caller(_caller): Caller,
) -> ApiResult<Vec<TemplateView>> {
    Ok(Json(state.service.templates().views()))
}
