//! `/api/sandbox.process*`: background processes.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use sandboxd_core::api::*;
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};

type ApiResult<T> = Result<Json<T>, ApiError>;

/// The process procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(process_start))
        .routes(routes!(process_list))
        .routes(routes!(process_wait))
        .routes(routes!(process_signal))
        .routes(routes!(process_write))
        .routes(routes!(process_output))
}

/// Start a background process (`sh -c cmd`) and get its handle at once. It outlives
/// the request and any client, and dies with the sandbox; the last MiB of each stream
/// is kept for `sandbox.processOutput`.
#[utoipa::path(post, path = "/api/sandbox.processStart", operation_id = "sandbox-processStart", tag = "process",
    request_body = ProcessStartRequest,
    responses((status = 200, body = ProcessView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 412, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn process_start(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ProcessStartRequest>,
) -> ApiResult<ProcessView> {
    let start = validate::process_start(req)?;
    Ok(Json(
        state
            .service
            .commands()
            .start_process(&caller, start)
            .await?,
    ))
}

/// The background processes of a sandbox, oldest first.
#[utoipa::path(get, path = "/api/sandbox.processList", operation_id = "sandbox-processList", tag = "process",
    params(ProcessListQuery),
    responses((status = 200, body = Vec<ProcessView>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 412, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn process_list(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<ProcessListQuery>,
) -> ApiResult<Vec<ProcessView>> {
    Ok(Json(
        state
            .service
            .commands()
            .list_processes(&caller, &req.sandbox_id)
            .await?,
    ))
}

/// Wait for a process to end, up to `timeoutMs` (default 30 s, max 10 min); returns its
/// state either way.
#[utoipa::path(post, path = "/api/sandbox.processWait", operation_id = "sandbox-processWait", tag = "process",
    request_body = ProcessWaitRequest,
    responses((status = 200, body = ProcessView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 412, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn process_wait(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ProcessWaitRequest>,
) -> ApiResult<ProcessView> {
    let process_id = validate::process_id(&req.process_id)?;
    let wait = Duration::from_millis(validate::process_wait_ms(req.timeout_ms)?);
    Ok(Json(
        state
            .service
            .commands()
            .wait_process(&caller, &req.sandbox_id, &process_id, wait)
            .await?,
    ))
}

/// Send a signal to a process's whole process group.
#[utoipa::path(post, path = "/api/sandbox.processSignal", operation_id = "sandbox-processSignal", tag = "process",
    request_body = ProcessSignalRequest,
    responses((status = 200, body = ProcessView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 412, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn process_signal(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ProcessSignalRequest>,
) -> ApiResult<ProcessView> {
    let process_id = validate::process_id(&req.process_id)?;
    let signal = validate::signal_number(req.signal.as_deref())?;
    Ok(Json(
        state
            .service
            .commands()
            .signal_process(&caller, &req.sandbox_id, &process_id, signal)
            .await?,
    ))
}

/// Write to a process's standard input (started with `stdin: true`); `close: true`
/// closes it after.
#[utoipa::path(post, path = "/api/sandbox.processWrite", operation_id = "sandbox-processWrite", tag = "process",
    request_body = ProcessWriteRequest,
    responses((status = 200, body = ProcessWriteResult), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 412, body = ErrorBody),
        (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn process_write(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ProcessWriteRequest>,
) -> ApiResult<ProcessWriteResult> {
    let process_id = validate::process_id(&req.process_id)?;
    let data = validate::process_data(req.data, req.encoding)?;
    let written = state
        .service
        .commands()
        .write_process(&caller, &req.sandbox_id, &process_id, &data, req.close)
        .await?;
    Ok(Json(ProcessWriteResult { written }))
}

/// Read up to 1 MiB of a process's output from `offset`. Pass the returned `end` as the
/// next `offset` to follow the output; after a disconnect nothing within the last MiB
/// is lost.
#[utoipa::path(get, path = "/api/sandbox.processOutput", operation_id = "sandbox-processOutput", tag = "process",
    params(ProcessOutputQuery),
    responses((status = 200, body = ProcessOutputResult), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 412, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn process_output(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<ProcessOutputQuery>,
) -> ApiResult<ProcessOutputResult> {
    let process_id = validate::process_id(&req.process_id)?;
    let result = state
        .service
        .commands()
        .read_process(
            &caller,
            &req.sandbox_id,
            &process_id,
            req.stream,
            req.offset,
            req.encoding,
        )
        .await?;
    Ok(Json(result))
}
