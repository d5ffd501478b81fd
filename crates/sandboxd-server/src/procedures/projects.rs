//! `project.*` and `environment.create`.

use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::{Environment, Principal, Project};
use sandboxd_core::validate;

use super::{Context, Serve};
use crate::error::ApiError;
use crate::time::rfc3339;

fn env_view(env: &Environment) -> EnvironmentView {
    EnvironmentView::from_environment(env, rfc3339)
}

pub(crate) fn project_view(project: &Project, envs: &[Environment]) -> ProjectView {
    ProjectView::from_project(project, envs.iter().map(env_view).collect(), rfc3339)
}

impl Serve for procedures::ProjectAll {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<Vec<ProjectView>, ApiError> {
        let projects = cx.service.tenancy().projects(&caller).await?;
        Ok(projects.iter().map(|(p, e)| project_view(p, e)).collect())
    }
}

impl Serve for procedures::ProjectCreate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: CreateProjectRequest,
    ) -> Result<ProjectView, ApiError> {
        let (name, description) = validate::create_project(request)?;
        let (project, envs) = cx
            .service
            .tenancy()
            .create_project(&caller, &name, description.as_deref())
            .await?;
        Ok(project_view(&project, &envs))
    }
}

impl Serve for procedures::EnvironmentCreate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: CreateEnvironmentRequest,
    ) -> Result<EnvironmentView, ApiError> {
        let (project_id, name, description) = validate::create_environment(request)?;
        let env = cx
            .service
            .tenancy()
            .create_environment(&caller, &project_id, &name, description.as_deref())
            .await?;
        Ok(env_view(&env))
    }
}
