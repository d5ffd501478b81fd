//! `/api/project.*` and `/api/environment.*`.

use axum::Json;
use axum::extract::State;
use sandboxd_core::api::{
    CreateEnvironmentRequest, CreateProjectRequest, EnvironmentView, ErrorBody, ProjectView,
};
use sandboxd_core::model::{Environment, Project};
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::time::rfc3339;

fn env_view(env: &Environment) -> EnvironmentView {
    EnvironmentView::from_environment(env, rfc3339)
}

pub(crate) fn project_view(project: &Project, envs: &[Environment]) -> ProjectView {
    ProjectView::from_project(project, envs.iter().map(env_view).collect(), rfc3339)
}

/// The project and environment procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(all_projects))
        .routes(routes!(create_project))
        .routes(routes!(create_environment))
}

/// The caller's projects with their environments.
#[utoipa::path(get, path = "/api/project.all", operation_id = "project-all", tag = "project",
    responses((status = 200, body = Vec<ProjectView>), (status = 401, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn all_projects(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<Vec<ProjectView>>, ApiError> {
    let projects = state.service.tenancy().projects(&caller).await?;
    Ok(Json(
        projects.iter().map(|(p, e)| project_view(p, e)).collect(),
    ))
}

/// Create a project; it gets an environment `production`.
#[utoipa::path(post, path = "/api/project.create", operation_id = "project-create", tag = "project",
    request_body = CreateProjectRequest,
    responses((status = 200, body = ProjectView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn create_project(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<CreateProjectRequest>,
) -> Result<Json<ProjectView>, ApiError> {
    let (name, description) = validate::create_project(req)?;
    let (project, envs) = state
        .service
        .tenancy()
        .create_project(&caller, &name, description.as_deref())
        .await?;
    Ok(Json(project_view(&project, &envs)))
}

/// Create an environment in a project.
#[utoipa::path(post, path = "/api/environment.create", operation_id = "environment-create", tag = "project",
    request_body = CreateEnvironmentRequest,
    responses((status = 200, body = EnvironmentView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn create_environment(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<CreateEnvironmentRequest>,
) -> Result<Json<EnvironmentView>, ApiError> {
    let (project_id, name, description) = validate::create_environment(req)?;
    let env = state
        .service
        .tenancy()
        .create_environment(&caller, &project_id, &name, description.as_deref())
        .await?;
    Ok(Json(env_view(&env)))
}
