//! What every call of E2B's control plane does first: its caller (or E2B's 401), its
//! JSON body (or E2B's 400), where it creates (`place_of`: E2B has no projects or
//! environments), the sandbox it names as E2B sees it (a killed, failed or ended one is
//! not found), and its failures in E2B's `{code, message}`.

use axum::Json;
use axum::response::{IntoResponse, Response};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::e2b;
use sandboxd_core::model::{Principal, Sandbox};

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;

/// Where E2B's calls create: the first project the caller sees that has an
/// environment, and that environment (`(project_id, environment_id)`).
pub(super) async fn place_of(state: &AppState, caller: &Principal) -> E2bResult<(String, String)> {
    state
        .service
        .tenancy()
        .projects(caller)
        .await?
        .into_iter()
        .find_map(|(project, environments)| {
            environments
                .first()
                .map(|e| (project.project_id.clone(), e.environment_id.clone()))
        })
        .ok_or_else(|| {
            ApiError::BadRequest(
                "no project with an environment to create in: make a project first".into(),
            )
            .into()
        })
}

/// A failure in E2B's shape: the status, and `{code: status, message}`. The request
/// log still sees the failure behind it.
pub(crate) struct E2bError(ApiError);

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

/// A sandbox of the caller's E2B may see (a killed or failed one is not found). One past
/// its fixed end is ended now: paused when it was made to pause at its end (and
/// answered paused), else killed (not found).
pub(super) async fn live_sandbox(
    state: &AppState,
    caller: &Principal,
    id: &str,
    need: SandboxNeed,
) -> E2bResult<Sandbox> {
    let sandbox = state.service.access().sandbox_for(caller, id, need).await?;
    if e2b::state_of(sandbox.status).is_none() {
        return Err(crate::service::ServiceError::NotFound("sandbox").into());
    }
    if e2b::past_its_end(&sandbox, crate::time::now_ms()) && sandbox.auto_pause.is_some() {
        return Ok(state.service.sandboxes().pause_at_end(&sandbox).await?);
    }
    if ended(state, &sandbox) {
        return Err(crate::service::ServiceError::NotFound("sandbox").into());
    }
    Ok(sandbox)
}

/// Whether a sandbox's fixed end has passed; if so, it ends now rather than at the
/// reaper's next pass (in the background): paused when it was made to pause at its end,
/// else killed.
pub(super) fn ended(state: &AppState, sandbox: &Sandbox) -> bool {
    let now = crate::time::now_ms();
    if !e2b::past_its_end(sandbox, now) {
        return false;
    }
    let sandboxes = state.service.sandboxes();
    let sandbox = sandbox.clone();
    tokio::spawn(async move {
        let ending = if sandbox.auto_pause.is_some() {
            sandboxes.pause_at_end(&sandbox).await
        } else {
            sandboxes.kill(sandbox).await
        };
        if let Err(error) = ending {
            tracing::warn!(error = %sandboxd_core::error::chain(&error), "cannot end a sandbox past its end");
        }
    });
    true
}

/// The access token of the in-sandbox half for the caller's key and this sandbox.
pub(super) fn answer(
    state: &AppState,
    caller: &Principal,
    sandbox: &Sandbox,
) -> e2b::SandboxAnswer {
    let token = state
        .service
        .store()
        .envd_token(&sandbox.sandbox_id, &caller.key_id);
    e2b::answer(sandbox, token, state.e2b_domain.as_deref())
}
