//! `/api/sandbox.egressLog`: what the egress proxy decided for a sandbox.

use axum::Json;
use axum::extract::State;
use sandboxd_core::api::*;
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::time::rfc3339;

/// The egress procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(egress_log))
}

/// What the egress proxy decided for an `allowlist` sandbox's connections, in the order
/// the entries were written: when each was decided (allowed, refused with the reason,
/// or failed), and again when an allowed connection ended, with its bytes each way.
/// Follow the log by passing `nextCursor` back as `cursor`. The newest 10 000 entries
/// are kept, until the sandbox is removed.
#[utoipa::path(get, path = "/api/sandbox.egressLog", operation_id = "sandbox-egressLog", tag = "sandbox",
    params(EgressLogQuery),
    responses((status = 200, body = EgressLogView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn egress_log(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<EgressLogQuery>,
) -> Result<Json<EgressLogView>, ApiError> {
    let read = validate::egress_log(req)?;
    let page = state.service.egress().log(&caller, &read).await?;
    Ok(Json(EgressLogView::new(
        &page.entries,
        page.next,
        page.more,
        rfc3339,
    )))
}
