//! Projects and environments.

use sandboxd_core::model::{Environment, Principal, Project};

use super::{Service, ServiceError};

impl Service {
    /// The caller's projects with their environments.
    pub async fn projects(
        &self,
        caller: &Principal,
    ) -> Result<Vec<(Project, Vec<Environment>)>, ServiceError> {
        Ok(self
            .store()
            .projects_with_environments(&caller.organization_id)
            .await?)
    }

    /// Creates a project (with an environment `production`).
    pub async fn create_project(
        &self,
        caller: &Principal,
        name: &str,
        description: Option<&str>,
    ) -> Result<(Project, Vec<Environment>), ServiceError> {
        Ok(self
            .store()
            .create_project(&caller.organization_id, name, description)
            .await?)
    }

    /// Creates an environment in one of the caller's projects.
    pub async fn create_environment(
        &self,
        caller: &Principal,
        project_id: &str,
        name: &str,
        description: Option<&str>,
    ) -> Result<Environment, ServiceError> {
        self.store()
            .create_environment(&caller.organization_id, project_id, name, description)
            .await?
            .ok_or(ServiceError::NotFound("project"))
    }
}
