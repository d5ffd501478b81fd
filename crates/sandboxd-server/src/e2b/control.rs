//! E2B's control plane under `/e2b`: E2B's SDKs create, read, list, extend, connect to
//! and kill sandboxes here with a sandboxd key (`X-API-Key`), in E2B's wire format
//! (`sandboxd_core::e2b`); errors are `{code, message}` with the HTTP status as code.
//! Create and connect answer the access token of the in-sandbox half (`envd`); create
//! keeps how the sandbox's ports are served on the E2B domain (`hosts.rs`).
//!
//! Create (v1 and v2), read, list, timeout, connect, kill. A sandbox past its fixed end
//! is shown gone and killed at once.

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::e2b::{
    self, ConnectBody, NewSandbox, SandboxAnswer, SandboxDetail, TimeoutBody,
};
use sandboxd_core::model::SandboxStatus;
use sandboxd_core::validate::{self, ListScope};
use serde::Deserialize;

use super::calls::{E2bResult, answer, body, caller, live_sandbox, place_of};
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::time::rfc3339;

/// The routes of E2B's control plane.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/e2b/sandboxes", post(create).get(list))
        .route("/e2b/v2/sandboxes", post(create).get(list))
        .route("/e2b/sandboxes/{id}", get(one).delete(kill))
        .route("/e2b/sandboxes/{id}/timeout", post(timeout))
        .route("/e2b/sandboxes/{id}/connect", post(connect))
        .route("/e2b/v2/sandboxes/{id}/connect", post(connect))
}

async fn create(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    new: Result<Json<NewSandbox>, axum::extract::rejection::JsonRejection>,
) -> E2bResult<(StatusCode, Json<SandboxAnswer>)> {
    let who = caller(who)?;
    let mut new = body(new)?;
    let (project_id, environment_id) = place_of(&state, &who).await?;
    // `name:tag`: the build the tag names, of the template built in the project.
    let tagged = if new.template_id.contains(':') {
        let (name, tag) = sandboxd_core::e2b::tags::name_and_tag(&new.template_id)?;
        let (name, tag) = (name.to_owned(), tag.to_owned());
        let build = state
            .service
            .builds()
            .e2b_tagged_build(&who, &project_id, &name, &tag)
            .await?;
        new.template_id = name;
        Some(build)
    } else {
        None
    };
    let snapshot = match tagged {
        Some(_) => None,
        None => super::lifecycle::snapshot_named(&state, &who, &new.template_id).await?,
    };
    let ports = e2b::ports::port_settings(new.network.as_ref())?;
    let (mut request, timeout_ms) = e2b::create_request(new, environment_id)?;
    if let Some(snapshot) = snapshot {
        request.template = None;
        request.snapshot_id = Some(snapshot.snapshot_id);
    }
    let mut cmd = validate::create_sandbox(request)?;
    cmd.image.template_build = tagged;
    cmd.timeout_ms = timeout_ms;
    let sandbox = state.service.sandboxes().create(&who, cmd).await?;
    // Its ports on the E2B domain are served as E2B's settings say; a sandbox whose
    // settings could not be kept is not left behind.
    let kept = state
        .service
        .store()
        .set_e2b_ports(&sandbox.sandbox_id, &who.key_id, &ports)
        .await;
    if let Err(error) = kept {
        let _ = state.service.sandboxes().kill(sandbox).await;
        return Err(crate::service::ServiceError::from(error).into());
    }
    Ok((StatusCode::CREATED, Json(answer(&state, &who, &sandbox))))
}

async fn one(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
) -> E2bResult<Json<SandboxDetail>> {
    let who = caller(who)?;
    let sandbox = live_sandbox(&state, &who, &id, SandboxNeed::Read).await?;
    let detail = e2b::detail(&sandbox, rfc3339, state.e2b_domain.as_deref())
        .ok_or(crate::service::ServiceError::NotFound("sandbox"))?;
    Ok(Json(detail))
}

async fn kill(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
) -> E2bResult<StatusCode> {
    let who = caller(who)?;
    live_sandbox(&state, &who, &id, SandboxNeed::Use).await?;
    state.service.sandboxes().kill_for(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn timeout(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
    asked: Result<Json<TimeoutBody>, axum::extract::rejection::JsonRejection>,
) -> E2bResult<StatusCode> {
    let who = caller(who)?;
    let asked = body(asked)?;
    if asked.timeout == 0 {
        // Its end is now: paused (where it pauses at its end) or killed, as the caller's
        // own pause or kill, audited as such.
        let sandbox = live_sandbox(&state, &who, &id, SandboxNeed::Use).await?;
        let sandboxes = state.service.sandboxes();
        match sandbox.auto_pause {
            Some(memory) => sandboxes.pause_for(&who, &id, memory).await?,
            None => sandboxes.kill_for(&who, &id).await?,
        };
        return Ok(StatusCode::NO_CONTENT);
    }
    let timeout_ms = e2b::timeout_ms("timeout", asked.timeout)?;
    live_sandbox(&state, &who, &id, SandboxNeed::Use).await?;
    state
        .service
        .sandboxes()
        .set_timeout(&who, &id, timeout_ms)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Connects to a sandbox: a paused one is resumed; a timeout given extends its life,
/// never shortens it.
async fn connect(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
    asked: Option<Json<ConnectBody>>,
) -> E2bResult<Json<SandboxAnswer>> {
    let who = caller(who)?;
    let asked = asked.map(|Json(body)| body).unwrap_or_default();
    let sandboxes = state.service.sandboxes();
    let mut sandbox = live_sandbox(&state, &who, &id, SandboxNeed::Use).await?;
    if sandbox.status == SandboxStatus::Paused {
        sandbox = sandboxes.resume_for(&who, &id).await?;
    }
    if let Some(seconds) = asked.timeout {
        let timeout_ms = e2b::timeout_ms("timeout", seconds)?;
        let now = crate::time::now_ms();
        let wanted = now + timeout_ms;
        if sandbox.expires_at.is_none_or(|at| at < wanted) {
            sandbox = sandboxes.set_timeout(&who, &id, timeout_ms).await?;
        }
    }
    Ok(Json(answer(&state, &who, &sandbox)))
}

/// Query of the listings.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    /// `key=value&…`, each part percent-encoded.
    metadata: Option<String>,
    /// `running`, `paused`, or both comma-separated (default both).
    state: Option<String>,
    /// Sandboxes per page, 1–100 (default 100).
    limit: Option<usize>,
    /// The `x-next-token` of the page before.
    next_token: Option<String>,
    /// `desc` (newest first, the default) or `asc`.
    order: Option<String>,
    /// RFC 3339: only sandboxes made then or later.
    started_after: Option<String>,
    /// Only sandboxes of this template (its name, or a snapshot's id).
    template: Option<String>,
}

/// The sandboxes of every project the caller sees, newest first (or oldest first),
/// filtered by metadata, state, start and template, a page at a time (the next page's
/// token in `x-next-token`).
async fn list(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> E2bResult<axum::response::Response> {
    let who = caller(who)?;
    let Query(query) = query.map_err(|rejection| {
        ApiError::BadRequest(format!("invalid query: {}", rejection.body_text()))
    })?;
    let wanted = query
        .metadata
        .as_deref()
        .map(e2b::metadata_filter)
        .unwrap_or_default();
    let states: Vec<String> = query
        .state
        .as_deref()
        .unwrap_or("running,paused")
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect();
    let oldest_first = e2b::oldest_first(query.order.as_deref())?;
    let started_after =
        match query.started_after.as_deref() {
            None => None,
            Some(text) => Some(crate::time::parse_rfc3339(text).ok_or_else(|| {
                ApiError::BadRequest("startedAfter must be an RFC 3339 time".into())
            })?),
        };
    let now = crate::time::now_ms();
    let mut seen = Vec::new();
    for (project, _) in state.service.tenancy().projects(&who).await? {
        seen.extend(
            state
                .service
                .sandboxes()
                .list(&who, ListScope::Project(project.project_id))
                .await?,
        );
    }
    let shown: Vec<_> = seen
        .iter()
        .filter(|sandbox| e2b::has_metadata(sandbox, &wanted))
        .filter(|sandbox| !e2b::past_its_end(sandbox, now))
        .filter(|sandbox| {
            e2b::state_of(sandbox.status).is_some_and(|s| states.iter().any(|w| w == s))
        })
        .filter(|sandbox| started_after.is_none_or(|after| sandbox.created_at >= after))
        .filter(|sandbox| {
            query
                .template
                .as_deref()
                .is_none_or(|template| e2b::template_of(sandbox) == template)
        })
        .collect();
    let (page, next) = e2b::page(
        shown,
        query.limit,
        query.next_token.as_deref(),
        oldest_first,
    )?;
    let details: Vec<SandboxDetail> = page
        .into_iter()
        .filter_map(|sandbox| e2b::detail(sandbox, rfc3339, state.e2b_domain.as_deref()))
        .collect();
    let mut response = Json(details).into_response();
    if let Some(next) = next
        && let Ok(value) = axum::http::HeaderValue::from_str(&next)
    {
        response.headers_mut().insert("x-next-token", value);
    }
    Ok(response)
}
