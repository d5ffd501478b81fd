//! The egress of `allowlist` sandboxes beyond their list: `sandbox.egressLog` (what the
//! proxy decided), `sandbox.requestEgress`, `egress.requests`, `egress.decide` (asking
//! for one more host, and deciding).

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
use crate::time::rfc3339;

/// The egress procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(egress_log))
        .routes(routes!(request_egress))
        .routes(routes!(requests))
        .routes(routes!(decide))
}

fn request_view(
    request: &sandboxd_core::egress_requests::EgressRequestRecord,
) -> EgressRequestView {
    EgressRequestView::from_record(request, rfc3339)
}

/// Ask for a running `allowlist` sandbox to reach one more host (an entry as in
/// `egress.allow`), with a reason for whoever decides: a pending request, or the one
/// already waiting for the same host. At most 20 wait per sandbox. The sandbox reaches
/// the host once someone holding `egress:decide` approves it with `egress.decide`.
#[utoipa::path(post, path = "/api/sandbox.requestEgress", operation_id = "sandbox-requestEgress", tag = "egress",
    request_body = RequestEgressRequest,
    responses((status = 200, body = EgressRequestView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 412, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn request_egress(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<RequestEgressRequest>,
) -> Result<Json<EgressRequestView>, ApiError> {
    let ask = validate::request_egress(req)?;
    let request = state.service.egress().ask(&caller, ask).await?;
    Ok(Json(request_view(&request)))
}

/// Egress requests of the caller's organization, for the sandboxes the caller may read,
/// newest first: those waiting for a decision (of running sandboxes; the default) or,
/// with `status=all`, the latest 200.
#[utoipa::path(get, path = "/api/egress.requests", operation_id = "egress-requests", tag = "egress",
    params(EgressRequestsQuery),
    responses((status = 200, body = Vec<EgressRequestView>), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn requests(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<EgressRequestsQuery>,
) -> Result<Json<Vec<EgressRequestView>>, ApiError> {
    let (pending_only, sandbox_id) = validate::egress_requests(req)?;
    let requests = state
        .service
        .egress()
        .requests(&caller, pending_only, sandbox_id.as_deref())
        .await?;
    Ok(Json(requests.iter().map(request_view).collect()))
}

/// Approve or deny a pending egress request: needs `egress:decide` and the use of the
/// sandbox, with another key than the one that asked. An approval adds the host to the
/// running sandbox's list at once (new connections see it).
#[utoipa::path(post, path = "/api/egress.decide", operation_id = "egress-decide", tag = "egress",
    request_body = DecideEgressRequest,
    responses((status = 200, body = EgressRequestView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 412, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn decide(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<DecideEgressRequest>,
) -> Result<Json<EgressRequestView>, ApiError> {
    let (request_id, approve) = validate::decide_egress(req)?;
    let request = state
        .service
        .egress()
        .decide(&caller, &request_id, approve)
        .await?;
    Ok(Json(request_view(&request)))
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
