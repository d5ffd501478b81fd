//! `PUT /e2b/sandboxes/{id}/network` (E2B's `update_network`): the settings replace the
//! sandbox's, as `sandboxd_core::e2b::network` maps them. A sandbox keeps the network
//! mode it was made with (sandboxd moves no container between networks): an allowlist
//! sandbox gets its new list (adding hosts needs `egress:decide`, as approving a
//! request would), an update asking for another mode is a conflict that says so.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::put;
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::e2b::network::{NetworkSettings, egress_of};
use sandboxd_core::egress_requests::ListChange;
use sandboxd_core::model::NetworkMode;

use super::calls::{E2bResult, body, caller, live_sandbox};
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::service::ServiceError;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/e2b/sandboxes/{id}/network", put(update))
}

async fn update(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
    asked: Result<Json<NetworkSettings>, axum::extract::rejection::JsonRejection>,
) -> E2bResult<StatusCode> {
    let who = caller(who)?;
    let asked = body(asked)?;
    let wanted = egress_of(None, Some(&asked))?;
    let sandbox = live_sandbox(&state, &who, &id, SandboxNeed::Use).await?;
    if wanted.mode != sandbox.network_mode {
        return Err(ServiceError::Conflict(format!(
            "the sandbox's network is {} from its create and cannot become {}: make a sandbox with the network wanted",
            sandbox.network_mode.as_str(),
            wanted.mode.as_str()
        ))
        .into());
    }
    if wanted.mode == NetworkMode::Allowlist {
        let allow = sandboxd_core::validate::set_egress(sandboxd_core::api::SetEgressRequest {
            sandbox_id: id.clone(),
            allow: wanted.allow,
        })?
        .1;
        state
            .service
            .sandboxes()
            .set_egress(&who, &id, &allow, ListChange::MayWiden)
            .await?;
    }
    Ok(StatusCode::NO_CONTENT)
}
