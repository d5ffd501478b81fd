//! E2B's control plane under `/e2b`: E2B's SDKs create, read, list, extend, connect to
//! and kill sandboxes here with a sandboxd key (`X-API-Key`), in E2B's wire format
//! (`sandboxd_core::e2b`); errors are `{code, message}` with the HTTP status as code.
//! Create and connect answer the access token of the in-sandbox half (`envd`).

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::e2b::{
    self, ConnectBody, NewSandbox, SandboxAnswer, SandboxDetail, TimeoutBody,
};
use sandboxd_core::model::{Principal, Sandbox, SandboxStatus};
use sandboxd_core::validate::{self, ListScope};
use serde::Deserialize;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::time::rfc3339;

/// A failure in E2B's shape: the status, and `{code: status, message}`. The request
/// log still sees the failure behind it.
pub(super) struct E2bError(ApiError);

impl<E: Into<ApiError>> From<E> for E2bError {
    fn from(error: E) -> Self {
        Self(error.into())
    }
}

impl IntoResponse for E2bError {
    fn into_response(self) -> Response {
        let (status, body) = self.0.status_and_body();
        let (parts, _) = self.0.into_response().into_parts();
        let answer = e2b::ErrorAnswer {
            code: status.as_u16(),
            message: body.message,
        };
        Response::from_parts(parts, Json(answer).into_response().into_body())
    }
}

pub(super) type E2bResult<T> = Result<T, E2bError>;

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

/// The caller, or E2B's 401.
pub(super) fn caller(caller: Result<Caller, ApiError>) -> E2bResult<Principal> {
    Ok(caller?.0)
}

/// A JSON body, or E2B's 400.
pub(super) fn body<T>(
    body: Result<Json<T>, axum::extract::rejection::JsonRejection>,
) -> E2bResult<T> {
    body.map(|Json(value)| value).map_err(|rejection| {
        ApiError::BadRequest(format!("invalid JSON body: {}", rejection.body_text())).into()
    })
}

/// A sandbox of the caller's E2B may see (a killed or failed one is not found).
pub(super) async fn live_sandbox(
    state: &AppState,
    caller: &Principal,
    id: &str,
    need: SandboxNeed,
) -> E2bResult<Sandbox> {
    let sandbox = state.service.access().sandbox_for(caller, id, need).await?;
    if e2b::state_of(sandbox.status).is_none() || ended(state, &sandbox) {
        return Err(crate::service::ServiceError::NotFound("sandbox").into());
    }
    Ok(sandbox)
}

/// Whether a sandbox's fixed end has passed; if so, it is killed now rather than at the
/// reaper's next pass.
pub(super) fn ended(state: &AppState, sandbox: &Sandbox) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    if !e2b::past_its_end(sandbox, now) {
        return false;
    }
    let sandboxes = state.service.sandboxes();
    let sandbox = sandbox.clone();
    tokio::spawn(async move {
        if let Err(error) = sandboxes.kill(sandbox).await {
            tracing::warn!(%error, "cannot end a sandbox past its end");
        }
    });
    true
}

/// The access token of the in-sandbox half for the caller's key and this sandbox.
pub(super) fn envd_token(state: &AppState, caller: &Principal, sandbox: &Sandbox) -> String {
    state
        .service
        .store()
        .envd_token(&sandbox.sandbox_id, &caller.key_id)
}

/// The first environment the caller sees (E2B has no environments).
async fn environment_of(state: &AppState, caller: &Principal) -> E2bResult<String> {
    state
        .service
        .tenancy()
        .projects(caller)
        .await?
        .into_iter()
        .find_map(|(_, environments)| environments.first().map(|e| e.environment_id.clone()))
        .ok_or_else(|| {
            ApiError::BadRequest("no environment to create in: make a project first".into()).into()
        })
}

async fn create(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    new: Result<Json<NewSandbox>, axum::extract::rejection::JsonRejection>,
) -> E2bResult<(StatusCode, Json<SandboxAnswer>)> {
    let who = caller(who)?;
    let new = body(new)?;
    let environment_id = environment_of(&state, &who).await?;
    let snapshot = super::lifecycle::snapshot_named(&state, &who, &new.template_id).await?;
    let (mut request, timeout_ms) = e2b::create_request(new, environment_id)?;
    if let Some(snapshot) = snapshot {
        request.template = None;
        request.snapshot_id = Some(snapshot.snapshot_id);
    }
    let mut cmd = validate::create_sandbox(request)?;
    cmd.timeout_ms = timeout_ms;
    let sandbox = state.service.sandboxes().create(&who, cmd).await?;
    let token = envd_token(&state, &who, &sandbox);
    Ok((StatusCode::CREATED, Json(e2b::answer(&sandbox, token))))
}

async fn one(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
) -> E2bResult<Json<SandboxDetail>> {
    let who = caller(who)?;
    let sandbox = live_sandbox(&state, &who, &id, SandboxNeed::Read).await?;
    let detail =
        e2b::detail(&sandbox, rfc3339).ok_or(crate::service::ServiceError::NotFound("sandbox"))?;
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
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let wanted = now + timeout_ms;
        if sandbox.expires_at.is_none_or(|at| at < wanted) {
            sandbox = sandboxes.set_timeout(&who, &id, timeout_ms).await?;
        }
    }
    let token = envd_token(&state, &who, &sandbox);
    Ok(Json(e2b::answer(&sandbox, token)))
}

/// Query of the listings.
#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    /// `key=value&…`, each part percent-encoded.
    metadata: Option<String>,
    /// `running`, `paused`, or both comma-separated (default both).
    state: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> E2bResult<Json<Vec<SandboxDetail>>> {
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
    let mut found = Vec::new();
    for (project, _) in state.service.tenancy().projects(&who).await? {
        let sandboxes = state
            .service
            .sandboxes()
            .list(&who, ListScope::Project(project.project_id))
            .await?;
        found.extend(
            sandboxes
                .iter()
                .filter(|sandbox| e2b::has_metadata(sandbox, &wanted))
                .filter_map(|sandbox| e2b::detail(sandbox, rfc3339))
                .filter(|detail| states.contains(&detail.state)),
        );
    }
    found.sort_by(|a, b| b.started_at.cmp(&a.started_at));
    Ok(Json(found))
}
