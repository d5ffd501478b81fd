//! `/api/sandbox.changes`.

use axum::Json;
use axum::extract::State;
use sandboxd_core::api::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::ApiQuery;

/// The changes procedure.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(changes))
}

/// The files a sandbox added, changed and removed since its image (or the snapshot it
/// started from), by path: under its user's areas (its workdir, `/tmp`, `/var/tmp`),
/// or everywhere with `all`; with each one's type and size now. At most 10,000
/// entries. A paused sandbox is resumed first.
#[utoipa::path(get, path = "/api/sandbox.changes", operation_id = "sandbox-changes", tag = "sandbox",
    params(ChangesQuery),
    responses((status = 200, body = ChangesResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 412, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn changes(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<ChangesQuery>,
) -> Result<Json<ChangesResult>, ApiError> {
    Ok(Json(
        state
            .service
            .files()
            .changes(&caller, &req.sandbox_id, req.all.unwrap_or(false))
            .await?,
    ))
}
